//! OpenAI chat-completions messages: a bare JSON array of messages, or an
//! object with `messages` (LiteLLM request logs: `messages`, `tools`,
//! `kwargs`, `response`, `cost`, `timestamp`…).
//!
//! The message conversion here is shared with [`super::swe_agent`] and
//! [`super::openhands`], whose histories are chat-completions shaped too.
//!
//! # Mapping
//!
//! * `system` / `developer` → [`ImportedKind::SystemPrompt`] (never dropped;
//!   for a LiteLLM log the request's `tools` are attached to it).
//! * `user` → pi `user` (string content stays a string; `text` parts →
//!   text, `image_url` data URLs → images; remote image URLs and other parts
//!   are kept verbatim with a warning).
//! * `assistant` → pi `assistant` with `api` `openai-completions`:
//!   `thinking_blocks` (with signatures) or else `reasoning_content` →
//!   thinking, `content` → text, `tool_calls[].function` → `toolCall`
//!   (`arguments` parsed from its JSON string; an unparsable string is kept
//!   as a string with a warning), legacy `function_call` → `toolCall` with a
//!   generated id that the following `function` message answers.
//! * `tool` → pi `toolResult` (`tool_call_id`; `name`, or the name looked up
//!   from the call). The source has no error flag, so `isError` is `false`.
//! * A LiteLLM `response` becomes the final assistant message, with `usage`
//!   (cached tokens split out), `model` and `finish_reason`; the rest of the
//!   response and of the log (`kwargs`, `cost`, latency…) is kept in
//!   `extra["response"]` and an `openai-chat.request` custom item.
//! * Chat messages carry no times: messages get the log's `timestamp` when
//!   there is one, else 0 (with a warning).
//! * The model comes from the log (`model`, `response.model`); for a bare
//!   array it is `unknown`, and the provider is guessed from the model name.

use rampart_message::{
    AgentMessage, AssistantMessage, Content, ContentBlock, Extra, StopReason, ThinkingContent,
    ToolCall, ToolResultMessage, UserMessage,
};
use serde_json::{Map, Value};

use super::builder::{
    Builder, chat_usage, get_obj, get_str, guess_provider, image_from_data_url, plain_text,
    text_block, text_content, without,
};
use super::timestamp::{from_unix_seconds, parse_iso};
use super::{Imported, ImportedItem, ImportedKind, Origin, SourceFormat};

/// Who wrote the assistant messages, as far as the source says.
#[derive(Debug, Clone)]
pub(crate) struct ModelInfo {
    /// pi `api` value for these messages.
    pub(crate) api: String,
    /// Provider name (best effort).
    pub(crate) provider: String,
    /// Model id as the source wrote it.
    pub(crate) model: String,
}

impl ModelInfo {
    /// Chat-completions messages from `model` (provider guessed).
    pub(crate) fn chat(model: &str) -> Self {
        Self {
            api: "openai-completions".to_owned(),
            provider: guess_provider(model),
            model: model.to_owned(),
        }
    }
}

/// Converts chat-completions messages one by one, keeping the state needed
/// to pair legacy `function_call`s with their `function` results.
#[derive(Default)]
pub(crate) struct ChatConverter {
    /// The id given to the last legacy `function_call`.
    legacy_call: Option<String>,
    /// How many call ids had to be generated.
    generated: usize,
}

impl ChatConverter {
    /// Convert one message; `at` names it for warnings, `ms` is its time.
    /// Returns what it became and the source fields not consumed.
    pub(crate) fn convert(
        &mut self,
        b: &mut Builder,
        msg: &Map<String, Value>,
        at: &str,
        ms: u64,
        model: &ModelInfo,
    ) -> (ImportedKind, Map<String, Value>) {
        match get_str(msg, "role") {
            Some(role @ ("system" | "developer")) => {
                let mut extra = without(msg, &["role", "content"]);
                if role != "system" {
                    extra.insert("role".to_owned(), Value::String(role.to_owned()));
                }
                if let Some(content) = msg.get("content").filter(|c| !c.is_string()) {
                    extra.insert("content".to_owned(), content.clone());
                }
                let text = plain_text(msg.get("content"));
                (ImportedKind::SystemPrompt { text, tools: None }, extra)
            }
            Some("user") => {
                let content = self.content(b, msg.get("content"), at);
                let user = UserMessage {
                    content,
                    timestamp: ms,
                    extra: Extra::new(),
                };
                (
                    ImportedKind::Message(AgentMessage::User(user)),
                    without(msg, &["role", "content"]),
                )
            }
            Some("assistant") => self.assistant(b, msg, at, ms, model),
            Some(role @ ("tool" | "function")) => {
                let id = if role == "tool" {
                    get_str(msg, "tool_call_id").map(str::to_owned)
                } else {
                    self.legacy_call.take()
                };
                let id = id.unwrap_or_else(|| {
                    b.warn(format!(
                        "{at}: {role} message without a call id; it cannot be paired with a call"
                    ));
                    String::new()
                });
                let name = get_str(msg, "name")
                    .or_else(|| b.tool_name(&id))
                    .unwrap_or("unknown")
                    .to_owned();
                let content = match msg.get("content") {
                    Some(Value::String(s)) => text_content(s.clone()),
                    other => self.content(b, other, at),
                };
                let result = ToolResultMessage {
                    tool_call_id: id,
                    tool_name: name,
                    content,
                    details: None,
                    is_error: false,
                    timestamp: ms,
                    extra: Extra::new(),
                };
                (
                    ImportedKind::Message(AgentMessage::ToolResult(result)),
                    without(msg, &["role", "content", "tool_call_id", "name"]),
                )
            }
            other => {
                b.warn(format!(
                    "{at}: chat message with role {other:?} has no pi equivalent; kept as an openai-chat.message custom item"
                ));
                (
                    ImportedKind::Custom {
                        custom_type: "openai-chat.message".to_owned(),
                        data: Value::Object(msg.clone()),
                    },
                    Map::new(),
                )
            }
        }
    }

    fn assistant(
        &mut self,
        b: &mut Builder,
        msg: &Map<String, Value>,
        at: &str,
        ms: u64,
        model: &ModelInfo,
    ) -> (ImportedKind, Map<String, Value>) {
        let mut consumed = vec!["role", "content", "tool_calls", "function_call"];
        let mut blocks = Vec::new();
        if let Some(thinking) = msg.get("thinking_blocks").and_then(Value::as_array) {
            consumed.push("thinking_blocks");
            for t in thinking {
                let Some(t) = t.as_object() else { continue };
                blocks.push(ContentBlock::Thinking(ThinkingContent {
                    thinking: get_str(t, "thinking").unwrap_or_default().to_owned(),
                    thinking_signature: get_str(t, "signature").map(str::to_owned),
                    extra: without(t, &["type", "thinking", "signature"]),
                }));
            }
        } else if let Some(reasoning) = get_str(msg, "reasoning_content") {
            consumed.push("reasoning_content");
            if !reasoning.is_empty() {
                blocks.push(ContentBlock::Thinking(ThinkingContent {
                    thinking: reasoning.to_owned(),
                    thinking_signature: None,
                    extra: Extra::new(),
                }));
            }
        }
        match msg.get("content") {
            Some(Value::String(s)) if !s.is_empty() => blocks.push(ContentBlock::text(s.clone())),
            Some(Value::Array(_)) => {
                if let Content::Blocks(parts) = self.content(b, msg.get("content"), at) {
                    blocks.extend(parts);
                }
            }
            _ => {}
        }
        if let Some(calls) = msg.get("tool_calls").and_then(Value::as_array) {
            for call in calls {
                match call.as_object() {
                    Some(call) => {
                        let block = self.tool_call(b, call, at);
                        blocks.push(block);
                    }
                    None => {
                        b.warn(format!("{at}: tool call is not an object; kept verbatim"));
                        let mut raw = Map::new();
                        raw.insert("type".to_owned(), Value::String("unknown".to_owned()));
                        raw.insert("value".to_owned(), call.clone());
                        blocks.push(ContentBlock::Other(raw));
                    }
                }
            }
        }
        if let Some(call) = get_obj(msg, "function_call") {
            self.generated += 1;
            let id = format!("legacy-function-call-{}", self.generated);
            let name = get_str(call, "name").unwrap_or("unknown").to_owned();
            b.remember_tool(&id, &name);
            self.legacy_call = Some(id.clone());
            blocks.push(ContentBlock::ToolCall(ToolCall {
                id,
                name,
                arguments: parse_arguments(b, call.get("arguments"), at),
                thought_signature: None,
                extra: Extra::new(),
            }));
        }
        let stop_reason = if blocks
            .iter()
            .any(|b| matches!(b, ContentBlock::ToolCall(_)))
        {
            StopReason::ToolUse
        } else {
            StopReason::Stop
        };
        let assistant = AssistantMessage {
            content: blocks,
            api: model.api.clone(),
            provider: model.provider.clone(),
            model: model.model.clone(),
            usage: Default::default(),
            stop_reason,
            timestamp: ms,
            error_message: None,
            extra: Extra::new(),
        };
        (
            ImportedKind::Message(AgentMessage::Assistant(assistant)),
            without(msg, &consumed),
        )
    }

    fn tool_call(&mut self, b: &mut Builder, call: &Map<String, Value>, at: &str) -> ContentBlock {
        let function = get_obj(call, "function");
        let name = function
            .and_then(|f| get_str(f, "name"))
            .unwrap_or("unknown")
            .to_owned();
        let id = match get_str(call, "id") {
            Some(id) => id.to_owned(),
            None => {
                self.generated += 1;
                b.warn(format!(
                    "{at}: tool call `{name}` has no id; one was generated"
                ));
                format!("generated-call-{}", self.generated)
            }
        };
        b.remember_tool(&id, &name);
        let mut extra = without(call, &["id", "type", "function"]);
        if let Some(kind) = get_str(call, "type").filter(|t| *t != "function") {
            // `type` is pi's block tag; keep the source's under another name.
            extra.insert("callType".to_owned(), Value::String(kind.to_owned()));
        }
        if let Some(f) = function {
            let rest = without(f, &["name", "arguments"]);
            if !rest.is_empty() {
                extra.insert("function".to_owned(), Value::Object(rest));
            }
        }
        ContentBlock::ToolCall(ToolCall {
            id,
            name,
            arguments: parse_arguments(b, function.and_then(|f| f.get("arguments")), at),
            thought_signature: None,
            extra,
        })
    }

    /// User/tool content: a string stays a string; parts become blocks.
    fn content(&mut self, b: &mut Builder, content: Option<&Value>, at: &str) -> Content {
        match content {
            Some(Value::String(s)) => Content::Text(s.clone()),
            Some(Value::Array(parts)) => {
                Content::Blocks(parts.iter().map(|p| part_block(b, p, at)).collect())
            }
            None | Some(Value::Null) => Content::Blocks(Vec::new()),
            Some(other) => {
                b.warn(format!(
                    "{at}: content is neither text nor parts; kept as text"
                ));
                Content::Text(other.to_string())
            }
        }
    }
}

/// One chat content part as a pi block.
fn part_block(b: &mut Builder, part: &Value, at: &str) -> ContentBlock {
    let Some(p) = part.as_object() else {
        return ContentBlock::text(part.to_string());
    };
    match get_str(p, "type") {
        Some("text") => text_block(
            get_str(p, "text").unwrap_or_default(),
            without(p, &["type", "text"]),
        ),
        Some("image_url") => {
            let url = match p.get("image_url") {
                Some(Value::String(s)) => Some(s.as_str()),
                Some(Value::Object(o)) => get_str(o, "url"),
                _ => None,
            };
            match url.and_then(image_from_data_url) {
                Some(image) => image,
                None => {
                    b.warn(format!(
                        "{at}: image is a remote URL, not inline data; part kept verbatim"
                    ));
                    ContentBlock::Other(p.clone())
                }
            }
        }
        kind => {
            b.warn(format!(
                "{at}: content part type {kind:?} has no pi equivalent; kept verbatim"
            ));
            ContentBlock::Other(p.clone())
        }
    }
}

/// Tool-call arguments: the JSON string parsed, an object as is.
pub(crate) fn parse_arguments(b: &mut Builder, args: Option<&Value>, at: &str) -> Value {
    match args {
        Some(Value::String(s)) if s.trim().is_empty() => Value::Object(Map::new()),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(v) => v,
            Err(e) => {
                b.warn(format!(
                    "{at}: tool-call arguments are not valid JSON ({e}); kept as a string"
                ));
                Value::String(s.clone())
            }
        },
        Some(Value::Null) | None => Value::Object(Map::new()),
        Some(other) => other.clone(),
    }
}

/// chat-completions `finish_reason` → pi.
pub(crate) fn finish_reason(reason: &str) -> StopReason {
    match reason {
        "stop" => StopReason::Stop,
        "tool_calls" | "function_call" => StopReason::ToolUse,
        "length" => StopReason::Length,
        other => StopReason::Other(other.to_owned()),
    }
}

/// Import a chat-completions document.
pub(crate) fn import(doc: Value, _origin: &Origin<'_>) -> Imported {
    let mut b = Builder::new();
    let (messages, mut wrapper) = match doc {
        Value::Array(messages) => (messages, Map::new()),
        Value::Object(mut obj) => match obj.remove("messages") {
            Some(Value::Array(messages)) => (messages, obj),
            _ => (Vec::new(), obj),
        },
        _ => (Vec::new(), Map::new()),
    };
    let response = match wrapper.remove("response") {
        Some(Value::Object(r)) => Some(r),
        Some(other) => {
            wrapper.insert("response".to_owned(), other);
            None
        }
        None => None,
    };
    let model_name = get_str(&wrapper, "model")
        .or_else(|| response.as_ref().and_then(|r| get_str(r, "model")))
        .unwrap_or("unknown")
        .to_owned();
    let model = ModelInfo::chat(&model_name);
    let time = match wrapper.get("timestamp") {
        Some(Value::Number(n)) => n.as_f64().and_then(from_unix_seconds),
        Some(Value::String(s)) => parse_iso(s),
        _ => None,
    };
    let stamp = b.stamp(time);
    let mut tools = wrapper.remove("tools");

    if !wrapper.is_empty() {
        let mut item = ImportedItem::custom("openai-chat.request", Value::Object(wrapper));
        item.timestamp.clone_from(&stamp.iso);
        b.push_linear(item);
    }

    let mut converter = ChatConverter::default();
    // By value: each source message is freed once converted, so the document and what it
    // became are not both held whole.
    for (index, message) in messages.into_iter().enumerate() {
        let at = format!("messages[{index}]");
        let Some(msg) = message.as_object() else {
            b.warn(format!("{at}: not a JSON object; kept as a custom item"));
            b.push_linear(ImportedItem::custom("openai-chat.message", message));
            continue;
        };
        let (mut kind, extra) = converter.convert(&mut b, msg, &at, stamp.ms, &model);
        if let ImportedKind::SystemPrompt { tools: slot, .. } = &mut kind
            && slot.is_none()
        {
            *slot = tools.take();
        }
        push_message(&mut b, kind, extra, &model);
    }
    if let Some(tools) = tools {
        // No system message to attach them to: keep them on their own.
        b.push_linear(ImportedItem::custom("openai-chat.tools", tools));
    }

    if let Some(mut response) = response {
        let choices = match response.remove("choices") {
            Some(Value::Array(c)) => c,
            _ => Vec::new(),
        };
        let response_model = get_str(&response, "model")
            .map(ModelInfo::chat)
            .unwrap_or_else(|| model.clone());
        let mut first = true;
        let mut rest_choices = Vec::new();
        for choice in choices {
            let choice_map = choice.as_object().cloned().unwrap_or_default();
            let message = get_obj(&choice_map, "message");
            match (first, message) {
                (true, Some(msg)) => {
                    first = false;
                    let (mut kind, mut extra) =
                        converter.convert(&mut b, msg, "response", stamp.ms, &response_model);
                    if let ImportedKind::Message(AgentMessage::Assistant(a)) = &mut kind {
                        if let Some(u) = get_obj(&response, "usage") {
                            a.usage = chat_usage(u);
                        }
                        if let Some(reason) = get_str(&choice_map, "finish_reason") {
                            a.stop_reason = finish_reason(reason);
                        }
                    }
                    let mut meta = response.clone();
                    meta.extend(without(&choice_map, &["message"]));
                    extra.insert("response".to_owned(), Value::Object(meta));
                    let index = push_message(&mut b, kind, extra, &response_model);
                    if let Some(item) = b.item_mut(index) {
                        item.timestamp.clone_from(&stamp.iso);
                    }
                }
                _ => rest_choices.push(choice),
            }
        }
        if first {
            b.warn("response has no choice with a message; kept as an openai-chat.response custom item");
        }
        if first || !rest_choices.is_empty() {
            if !rest_choices.is_empty() {
                b.warn(format!(
                    "response has {} extra choice(s); only the first becomes a message, the rest are kept in an openai-chat.response custom item",
                    rest_choices.len()
                ));
            }
            response.insert("choices".to_owned(), Value::Array(rest_choices));
            b.push_linear(ImportedItem::custom(
                "openai-chat.response",
                Value::Object(response),
            ));
        }
    }

    b.finish(SourceFormat::OpenAiChat, None, None, stamp.iso)
}

/// Push a converted message (after a model change if it is an assistant
/// message of a new model); returns the message's index.
fn push_message(
    b: &mut Builder,
    kind: ImportedKind,
    extra: Map<String, Value>,
    model: &ModelInfo,
) -> usize {
    if let ImportedKind::Message(AgentMessage::Assistant(_)) = &kind
        && model.model != "unknown"
        && let Some(change) = b.model_change(&model.provider, &model.model)
    {
        b.push_linear(change);
    }
    let mut item = ImportedItem::new(kind);
    item.extra = extra;
    b.push_linear(item)
}
