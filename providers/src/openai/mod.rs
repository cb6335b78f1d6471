//! OpenAI chat completions (`POST {baseUrl}/chat/completions`), streamed with usage.
//!
//! The same code serves every OpenAI-compatible server (llama.cpp, vLLM, Ollama), so the
//! reader is lenient where those servers differ: a plain JSON answer to a streamed request, a
//! missing `[DONE]` after a `finish_reason`, tool calls without ids, reasoning in
//! `reasoning_content`.

pub mod wire;

use std::collections::BTreeMap;
use std::time::Duration;

use rampart_message::{
    AssistantMessage, ContentBlock, Extra, SharedMessage, StopReason, ThinkingContent, ToolCall,
    Usage,
};
use reqwest::blocking::Response;
use serde_json::{Value, json};

use super::client_fields::{FieldsWire, warn_not_forwarded};
use super::http::{
    self, AuthStyle, Failure, HttpClient, SseReader, content_type, parse_event_json, read_json,
};
use super::splice::{self, WireMemo};
use super::{
    DeltaSink, ModelRequest, ModelResponse, Provider, ProviderError, ProviderSettings, StreamDelta,
};
use wire::to_openai_message;

/// Where requests go when the config names no `baseUrl`.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The `api` value written into answers, as pi names this wire format.
pub const API: &str = "openai-completions";

/// A provider speaking OpenAI chat completions.
#[derive(Debug)]
pub struct OpenAiProvider {
    settings: ProviderSettings,
    http: HttpClient,
    url: String,
    /// Each message's wire form, serialised once ([`super::splice`]).
    wire_memo: WireMemo,
}

impl OpenAiProvider {
    /// Builds the provider from its settings. The API key is not read here but on each request,
    /// so a configured provider without a key only fails when it is actually used.
    pub fn new(settings: ProviderSettings) -> Result<Self, ProviderError> {
        let http = HttpClient::new(&settings, AuthStyle::Bearer)?;
        let base = settings.base_url.as_deref().unwrap_or(DEFAULT_BASE_URL);
        let url = format!("{}/chat/completions", base.trim_end_matches('/'));
        Ok(Self {
            settings,
            http,
            url,
            wire_memo: WireMemo::default(),
        })
    }
}

impl Provider for OpenAiProvider {
    fn id(&self) -> &str {
        &self.settings.id
    }

    fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        super::report_unsent(request, API);
        let body = request_bytes(request, &self.wire_memo);
        let idle = self.http.stream_idle_timeout();
        let url = request.forwarded.upstream_url(&self.url, FieldsWire::Chat);
        let deltas = request.forwarded.deltas.as_ref();
        let headers: Vec<_> = request.forwarded.passthrough(FieldsWire::Chat).collect();
        let (answer, retries) = self.http.post(&url, request, &headers, body, |response| {
            read(response, idle, deltas)
        })?;
        Ok(ModelResponse {
            message: answer.into_message(&self.settings.id, &request.model),
            retries,
        })
    }
}

/// The JSON body of a streamed chat-completions request. Public so that tests and tools can
/// show exactly what would be sent: [`request_bytes`] writes the same body.
pub fn request_body(request: &ModelRequest) -> Value {
    let mut body = body_shell(request);
    if let Some(messages) = body.get_mut("messages").and_then(Value::as_array_mut) {
        messages.extend(sent_messages(request).map(|m| request_message(m)));
    }
    body
}

/// [`request_body`] as the bytes sent, each message's wire form taken from `memo` when an
/// earlier request serialised it ([`super::splice`]).
pub fn request_bytes(request: &ModelRequest, memo: &WireMemo) -> Vec<u8> {
    let body = body_shell(request);
    let pieces = splice::pieces(memo, sent_messages(request), request_message);
    match body.as_object() {
        Some(shell) => splice::write_spliced(shell, "messages", &pieces),
        None => splice::json_bytes(&body),
    }
}

/// The messages this wire sends: an opaque message of another wire has no form here
/// ([`super::sent_on`]).
fn sent_messages(request: &ModelRequest) -> impl Iterator<Item = &SharedMessage> {
    request.messages.iter().filter(|m| super::sent_on(m, API))
}

/// The body with everything but the conversation's messages: `messages` holds only the
/// system prompt, when there is one.
fn body_shell(request: &ModelRequest) -> Value {
    let mut messages = Vec::with_capacity(1);
    if let Some(system) = &request.system {
        // The builder's cache marker reaches no model: chat completions has no breakpoints.
        let system = super::text::wire_system(system).text();
        messages.push(json!({"role": "system", "content": system}));
    }
    let mut body = json!({
        "model": request.model,
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    let fields = request.forwarded.client_fields.as_ref();
    if let Some(max) = request.max_tokens {
        // A chat client's own name for the bound, when it used the newer one.
        let key = match fields {
            Some(f) if f.max_completion_tokens => "max_completion_tokens",
            _ => "max_tokens",
        };
        body[key] = json!(max);
    }
    if !request.forwarded.tools.is_empty() {
        // A chat client's declared tools, to send each one the engine forwards unchanged as
        // the client wrote it (`strict` and any other field kept).
        let declared: &[Value] = fields
            .filter(|f| f.wire == FieldsWire::Chat)
            .map(|f| f.tools.as_slice())
            .unwrap_or_default();
        body["tools"] = request
            .forwarded
            .tools
            .iter()
            .map(|t| {
                if let Some(raw) = declared
                    .iter()
                    .filter(|raw| raw.get("type").and_then(Value::as_str) == Some("function"))
                    .find(|raw| t.matches_chat_tool(raw))
                {
                    return raw.clone();
                }
                let mut function = json!({"name": t.name, "parameters": t.parameters});
                if let Some(d) = &t.description {
                    function["description"] = json!(d);
                }
                // A Responses client's explicit `strict` means the same here.
                if let Some(strict) = fields.and_then(|f| f.declared_strict(t)) {
                    function["strict"] = json!(strict);
                }
                json!({"type": "function", "function": function})
            })
            .collect();
    }
    if let (Some(fields), Some(obj)) = (fields, body.as_object_mut()) {
        let dropped = fields.merge(FieldsWire::Chat, obj);
        warn_not_forwarded(fields.wire, FieldsWire::Chat, &dropped);
    }
    body
}

/// One message as a chat-completions request carries it. The export format keeps an
/// assistant's reasoning as `reasoning_content`, but servers reject it in requests (DeepSeek
/// answers 400) and an assistant message needs `content` unless it has tool calls.
fn request_message(message: &rampart_engine_api::AgentMessage) -> Value {
    let mut out = to_openai_message(message);
    if out["role"] == "assistant"
        && let Some(map) = out.as_object_mut()
    {
        map.remove("reasoning_content");
        if map.get("content").is_some_and(Value::is_null) && !map.contains_key("tool_calls") {
            map.insert("content".into(), Value::String(String::new()));
        }
    }
    out
}

/// Reads a 2xx answer: a stream normally, a whole JSON object from servers that ignore
/// `stream: true`.
fn read(response: Response, idle: Duration, deltas: Option<&DeltaSink>) -> Result<Answer, Failure> {
    if content_type(&response) == "application/json" {
        let value = read_json(response)?;
        check_error(&value)?;
        return Answer::from_json(&value);
    }
    read_stream(response, idle, deltas)
}

fn read_stream(
    response: Response,
    idle: Duration,
    deltas: Option<&DeltaSink>,
) -> Result<Answer, Failure> {
    if let Some(sink) = deltas
        && !sink.send(StreamDelta::Attempt)
    {
        return Err(Failure::Cancelled);
    }
    let mut answer = Answer::default();
    for event in SseReader::with_idle_timeout(response, idle) {
        let event = event?;
        let data = event.data.trim();
        if data == "[DONE]" {
            return Ok(answer);
        }
        if data.is_empty() {
            continue;
        }
        let chunk = parse_event_json(data)?;
        check_error(&chunk)?;
        answer.apply_chunk(&chunk);
        if let Some(sink) = deltas {
            for delta in chunk_deltas(&chunk) {
                if !sink.send(delta) {
                    return Err(Failure::Cancelled);
                }
            }
        }
    }
    // Some compatible servers close after the last chunk without `[DONE]`; a finish reason
    // proves the answer itself is complete.
    if answer.finish_reason.is_some() {
        Ok(answer)
    } else {
        Err(Failure::Dropped(
            "the stream ended before the answer was complete".to_owned(),
        ))
    }
}

/// The pieces of one streamed chunk a streaming client sees: text, and tool calls as they
/// start (with their id and name) and grow.
fn chunk_deltas(chunk: &Value) -> Vec<StreamDelta> {
    let mut out = Vec::new();
    let Some(delta) = chunk
        .get("choices")
        .and_then(|c| c.get(0))
        .and_then(|c| c.get("delta"))
    else {
        return out;
    };
    if let Some(text) = delta.get("content").and_then(Value::as_str)
        && !text.is_empty()
    {
        out.push(StreamDelta::Text {
            block: 0,
            text: text.to_owned(),
        });
    }
    for (index, call) in tool_call_deltas(delta) {
        let function = call.get("function");
        if let Some(id) = call.get("id").and_then(Value::as_str) {
            out.push(StreamDelta::ToolCallStart {
                index,
                id: id.to_owned(),
                name: function
                    .and_then(|f| f.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
            });
        }
        if let Some(fragment) = function
            .and_then(|f| f.get("arguments"))
            .and_then(Value::as_str)
            .filter(|a| !a.is_empty())
        {
            out.push(StreamDelta::ToolCallArguments {
                index,
                fragment: fragment.to_owned(),
            });
        }
    }
    out
}

/// An `{"error": …}` object (in a stream or a whole answer) is classified like an HTTP error
/// with the status its code or type stands for.
fn check_error(value: &Value) -> Result<(), Failure> {
    let Some(error) = value.get("error").filter(|e| !e.is_null()) else {
        return Ok(());
    };
    let numeric = error
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| (400..600).contains(c));
    let named = || {
        ["type", "code"]
            .iter()
            .filter_map(|k| error.get(*k).and_then(Value::as_str))
            .find_map(http::status_for_error_type)
    };
    Err(Failure::Api {
        status: numeric.or_else(named).unwrap_or(500),
        body: value.to_string(),
        retry_after: None,
    })
}

/// A tool call being assembled from stream fragments.
#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// The answer as it accumulates, chunk by chunk.
#[derive(Debug, Default)]
struct Answer {
    text: String,
    reasoning: String,
    calls: BTreeMap<u64, PartialCall>,
    finish_reason: Option<String>,
    usage: Option<Value>,
    model: Option<String>,
}

impl Answer {
    fn apply_chunk(&mut self, chunk: &Value) {
        if let Some(model) = chunk.get("model").and_then(Value::as_str) {
            self.model = Some(model.to_owned());
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(usage.clone());
        }
        let Some(choice) = chunk.get("choices").and_then(|c| c.get(0)) else {
            return;
        };
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_owned());
        }
        let Some(delta) = choice.get("delta") else {
            return;
        };
        if let Some(text) = delta.get("content").and_then(Value::as_str) {
            self.text.push_str(text);
        }
        // `reasoning_content` is DeepSeek's and vLLM's name, `reasoning` Ollama's and OpenRouter's.
        for key in ["reasoning_content", "reasoning"] {
            if let Some(text) = delta.get(key).and_then(Value::as_str) {
                self.reasoning.push_str(text);
            }
        }
        for (index, call) in tool_call_deltas(delta) {
            let partial = self.calls.entry(index).or_default();
            if let Some(id) = call.get("id").and_then(Value::as_str) {
                partial.id.push_str(id);
            }
            let function = call.get("function");
            if let Some(name) = function.and_then(|f| f.get("name")).and_then(Value::as_str) {
                partial.name.push_str(name);
            }
            match function.and_then(|f| f.get("arguments")) {
                Some(Value::String(fragment)) => partial.arguments.push_str(fragment),
                // Some servers send the arguments already parsed.
                Some(other) if !other.is_null() => partial.arguments.push_str(&other.to_string()),
                _ => {}
            }
        }
    }

    /// A non-streamed answer, read into the same accumulator so both paths end alike.
    fn from_json(value: &Value) -> Result<Self, Failure> {
        let choice = value
            .get("choices")
            .and_then(|c| c.get(0))
            .ok_or_else(|| Failure::Invalid(format!("the answer has no choices: {value}")))?;
        let message = choice.get("message").cloned().unwrap_or(Value::Null);
        let chunk = json!({
            "model": value.get("model"),
            "usage": value.get("usage"),
            "choices": [{"delta": message, "finish_reason": choice.get("finish_reason")}],
        });
        let mut answer = Answer::default();
        answer.apply_chunk(&chunk);
        answer
            .finish_reason
            .get_or_insert_with(|| "stop".to_owned());
        Ok(answer)
    }

    fn into_message(self, provider: &str, requested_model: &str) -> AssistantMessage {
        let mut content = Vec::new();
        if !self.reasoning.is_empty() {
            content.push(ContentBlock::Thinking(ThinkingContent {
                thinking: self.reasoning,
                thinking_signature: None,
                extra: Extra::new(),
            }));
        }
        if !self.text.is_empty() {
            content.push(ContentBlock::text(self.text));
        }
        let has_calls = !self.calls.is_empty();
        for (index, call) in self.calls {
            content.push(ContentBlock::ToolCall(ToolCall {
                // Pairing needs an id; some local servers omit it.
                id: if call.id.is_empty() {
                    format!("call_{index}")
                } else {
                    call.id
                },
                name: call.name,
                arguments: parse_arguments(&call.arguments),
                thought_signature: None,
                extra: Extra::new(),
            }));
        }
        let (stop_reason, error_message) = stop_reason(self.finish_reason.as_deref(), has_calls);
        http::AnswerParts {
            content,
            usage: usage(self.usage.as_ref()),
            stop: (stop_reason, error_message),
            reported_model: self.model,
        }
        .into_message(API, provider, requested_model)
    }
}

/// The arguments as JSON. Text that does not parse is kept as a string rather than failing the
/// turn: the tool can still report the bad input to the model, which then corrects itself.
pub(crate) fn parse_arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return json!({});
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
}

/// pi's stop reason for OpenAI's `finish_reason`. A turn with tool calls is `toolUse` whatever
/// the server said, because some servers say `stop` and the run loop must still run the tools.
fn stop_reason(finish: Option<&str>, has_calls: bool) -> (StopReason, Option<String>) {
    match finish {
        Some("length") => (StopReason::Length, None),
        Some("content_filter") => (
            StopReason::Error,
            Some("the provider's content filter stopped the answer".to_owned()),
        ),
        _ if has_calls => (StopReason::ToolUse, None),
        Some("tool_calls" | "function_call") => (StopReason::ToolUse, None),
        _ => (StopReason::Stop, None),
    }
}

/// pi's usage from OpenAI's: cached prompt tokens are split out of `prompt_tokens`, because pi
/// counts `input` as the uncached part only.
fn usage(raw: Option<&Value>) -> Usage {
    let Some(raw) = raw else {
        return Usage::default();
    };
    let count = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
    let prompt = count(raw.get("prompt_tokens"));
    let completion = count(raw.get("completion_tokens"));
    let cached = count(raw.pointer("/prompt_tokens_details/cached_tokens")).min(prompt);
    Usage {
        input: prompt - cached,
        output: completion,
        cache_read: cached,
        cache_write: 0,
        total_tokens: Some(prompt + completion),
        ..Usage::default()
    }
}

/// The tool-call pieces of a streamed chunk's `delta`, each with the index of the call it
/// belongs to (its position when a server sends no `index`).
fn tool_call_deltas(delta: &Value) -> impl Iterator<Item = (u64, &Value)> {
    delta
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(position, call)| {
            let index = call
                .get("index")
                .and_then(Value::as_u64)
                .unwrap_or(position as u64);
            (index, call)
        })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn fragments_assemble_into_calls_and_bad_arguments_survive() {
        let mut answer = Answer::default();
        for chunk in [
            json!({"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"read","arguments":"{\"pa"}}]}}]}),
            json!({"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"th\":\"a\"}"}}]}}]}),
            json!({"choices":[{"delta":{"tool_calls":[{"index":1,"id":"c2","function":{"name":"x","arguments":"{oops"}}]}}]}),
            json!({"choices":[{"delta":{},"finish_reason":"tool_calls"}]}),
        ] {
            answer.apply_chunk(&chunk);
        }
        let message = answer.into_message("p", "m");
        let calls: Vec<&ToolCall> = message
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::ToolCall(c) => Some(c),
                _ => None,
            })
            .collect();
        assert_eq!(calls[0].arguments, json!({"path": "a"}));
        assert_eq!(calls[1].arguments, json!("{oops"));
        assert_eq!(message.stop_reason, StopReason::ToolUse);
    }

    #[test]
    fn in_stream_errors_carry_the_status_their_type_means() {
        let failure =
            check_error(&json!({"error": {"message": "slow down", "type": "rate_limit_exceeded"}}));
        assert!(matches!(failure, Err(Failure::Api { status: 429, .. })));
        let failure = check_error(&json!({"error": {"message": "boom", "code": 503}}));
        assert!(matches!(failure, Err(Failure::Api { status: 503, .. })));
        assert!(check_error(&json!({"error": null, "choices": []})).is_ok());
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod request_tests {
    use std::sync::Arc;

    use rampart_engine_api::AgentMessage;
    use serde_json::json;

    use super::*;

    #[test]
    fn the_cache_marker_of_a_built_prompt_is_not_sent() {
        let request = ModelRequest {
            model: "m".into(),
            system: Some(format!(
                "Stable.{}Runtime: thinking=off",
                rampart_prompt::CACHE_BOUNDARY
            )),
            messages: vec![Arc::new(AgentMessage::user_text("hi", 0))].into(),
            ..ModelRequest::default()
        };
        let body = request_body(&request);
        assert_eq!(body["messages"][0]["role"], "system");
        assert_eq!(
            body["messages"][0]["content"],
            "Stable.\nRuntime: thinking=off"
        );
        assert!(!body.to_string().contains("RAMPART_CACHE_BOUNDARY"));
    }

    #[test]
    fn requests_carry_no_reasoning_and_no_excluded_shell_runs() {
        let thinking: AgentMessage = serde_json::from_value(json!({
            "role": "assistant",
            "content": [{"type": "thinking", "thinking": "let me think"}],
            "api": "openai-completions", "provider": "p", "model": "m",
            "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0,
                      "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
            "stopReason": "stop", "timestamp": 1
        }))
        .unwrap();
        let private: AgentMessage = serde_json::from_value(json!({
            "role": "bashExecution", "command": "cat ~/.netrc", "output": "secret",
            "exitCode": 0, "cancelled": false, "truncated": false, "timestamp": 2,
            "excludeFromContext": true
        }))
        .unwrap();
        let request = ModelRequest {
            model: "m".into(),
            messages: vec![
                Arc::new(AgentMessage::user_text("hi", 0)),
                Arc::new(thinking),
                Arc::new(private),
            ]
            .into(),
            ..ModelRequest::default()
        };
        let body = request_body(&request);
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 2, "{body:#}");
        assert_eq!(messages[1]["content"], "");
        assert!(messages[1].get("reasoning_content").is_none());
        assert!(!body.to_string().contains("netrc"));
    }

    #[test]
    fn forwarded_tools_are_written_as_functions() {
        let request = ModelRequest {
            model: "m".into(),
            messages: vec![Arc::new(AgentMessage::user_text("hi", 0))].into(),
            forwarded: crate::Forwarded {
                tools: vec![crate::ToolSpec {
                    name: "read".into(),
                    description: Some("Read a file".into()),
                    parameters: json!({"type": "object"}),
                }],
                ..Default::default()
            },
            ..ModelRequest::default()
        };
        let body = request_body(&request);
        assert_eq!(
            body["tools"],
            json!([{"type": "function", "function": {"name": "read", "description": "Read a file", "parameters": {"type": "object"}}}])
        );
        let anthropic = crate::anthropic::request_body(&request);
        assert_eq!(
            anthropic["tools"],
            json!([{"name": "read", "description": "Read a file", "input_schema": {"type": "object"}}])
        );
        assert!(
            request_body(&ModelRequest::default())
                .get("tools")
                .is_none()
        );
    }
}
