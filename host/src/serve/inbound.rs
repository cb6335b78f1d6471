//! A client's request, decoded once into types: the wire it speaks, the model it named, whether
//! it streams, its system prompt, its messages as pi messages and its tools. The message
//! conversion is the importers' ([`rampart_sessions::import::api_request`]), so a live request
//! and a recorded transcript of the same shape become the same messages.

use rampart_message::{AgentMessage, SharedMessage};
use rampart_sessions::import::api_request::{from_anthropic_messages, from_openai_chat};
use serde_json::Value;

use super::not_forwarded::NotForwarded;
use super::request_checks::{self, Api, FieldError};
use crate::providers::responses::opaque::{OPAQUE_BLOCK_TYPE, is_client_item, opaque_part};
use crate::providers::responses::template;
use crate::providers::{ClientFields, FieldsWire, SystemForm, ToolSpec};

/// The API a client speaks; its answers and errors are written in the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// OpenAI chat completions.
    OpenAi,
    /// Anthropic messages.
    Anthropic,
    /// OpenAI Responses (`/v1/responses`, the Codex CLI's wire). Its body is read as the
    /// chat-completions body it means ([`responses_as_chat`]); its answers have their own shape.
    Responses,
}

impl Wire {
    /// The top-level key of a body of this wire that holds the conversation: `messages`, or a
    /// Responses body's `input` ([`super::raw_messages`] indexes it).
    pub fn conversation_key(self) -> &'static str {
        match self {
            Wire::OpenAi | Wire::Anthropic => "messages",
            Wire::Responses => "input",
        }
    }
}

/// A client's request, decoded.
#[derive(Debug, Clone)]
pub struct ClientRequest {
    /// The API it came in.
    pub wire: Wire,
    /// The model the client named (answers name it back).
    pub model: String,
    /// `stream: true`.
    pub stream: bool,
    /// OpenAI `stream_options.include_usage`: a last chunk with the usage.
    pub include_usage: bool,
    /// `max_tokens` (or `max_completion_tokens`).
    pub max_tokens: Option<u64>,
    /// The system prompt.
    pub system: Option<String>,
    /// The conversation, system prompt excluded. Shared with [`super::inbound_memo`], which
    /// keeps it for the request that continues this one (a request only reads its messages),
    /// and each message shared with the session that stores it: one parsed copy of a recent
    /// conversation between the memo and the cached tree, and no copy made to store it.
    pub messages: std::sync::Arc<Vec<SharedMessage>>,
    /// The time the request was decoded at, which its new messages carry. Messages taken from
    /// the memo keep the time of the request that first sent them ([`super::inbound_memo`]);
    /// one stored as new is stamped with this time then.
    pub now_ms: u64,
    /// The tools the client declared (function tools; Anthropic server tools are left out).
    pub tools: Vec<ToolSpec>,
    /// What could not be converted exactly.
    pub warnings: Vec<String>,
    /// What the client sent that is not forwarded upstream, one entry per message or tool
    /// (counted in `/metrics` and warned about once per conversation).
    pub not_forwarded: Vec<NotForwarded>,
    /// Whether the client put an Anthropic `cache_control` breakpoint on its system prompt.
    pub system_breakpoint: bool,
    /// How the client wrote its system prompt, when it can go back so: an Anthropic client's
    /// `system` as a list of blocks, a Responses client's `instructions` and opening developer
    /// messages ([`ResponsesAsChat::system_form`], set by the server). Written so by an upstream
    /// of the client's wire while the system prompt stays [`Self::system`].
    pub system_form: Option<SystemForm>,
    /// The client's messages that carry a `cache_control` breakpoint, oldest first.
    pub breakpoints: Vec<AgentMessage>,
    /// The client asked the server to offer and answer the memory tools
    /// (`x-rampart-memory: on`); `serve.memoryTools` asks it for every client.
    pub memory_tools: bool,
    /// Offer and answer the context engine's own tools (engine API 1.2): on unless
    /// `serve.engineTools = false` or the client sends `x-rampart-engine-tools: off`.
    pub engine_tools: bool,
    /// What the requests before it established about its messages ([`super::inbound_memo`]).
    pub seen: Seen,
    /// The body's top-level fields the engine does not manage (`temperature`, `thinking`,
    /// `reasoning`, `metadata`, …), forwarded upstream by the provider.
    pub fields: ClientFields,
}

/// What is known of a request's messages from the requests before it ([`super::inbound_memo`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Seen {
    /// The number the memo keeps this request's messages under.
    pub kept_as: Option<u64>,
    /// The kept request this one continues, and how many of its leading messages are that
    /// request's, byte for byte: a placement may take those as matched where that request's
    /// were ([`super::history::match_history_known`]).
    pub continues: Option<(u64, usize)>,
}

/// Why a request body cannot be used; the text says what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadRequest(pub String);

impl From<FieldError> for BadRequest {
    fn from(e: FieldError) -> Self {
        Self(e.0)
    }
}

/// Decodes `body`, sent in `wire`, at `now_ms`.
pub fn decode(wire: Wire, body: &Value, now_ms: u64) -> Result<ClientRequest, BadRequest> {
    let Some(obj) = body.as_object() else {
        return Err(BadRequest("the request body must be a JSON object".into()));
    };
    let model = obj
        .get("model")
        .and_then(Value::as_str)
        .filter(|m| !m.trim().is_empty())
        .ok_or_else(|| BadRequest("`model` is required: a non-empty string".into()))?
        .to_owned();
    let messages = obj
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| BadRequest("`messages` is required: an array of messages".into()))?;
    // Every field read below has its documented type, or the request is refused naming it.
    let api = match wire {
        Wire::OpenAi | Wire::Responses => Api::OpenAiChat,
        Wire::Anthropic => Api::Anthropic,
    };
    request_checks::check(api, obj)?;
    if wire != Wire::Responses {
        refuse_opaque_parts(messages)?;
    }
    let stream = obj.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let max_tokens = match request_checks::output_tokens(obj, "max_tokens")? {
        Some(n) => Some(n),
        None => request_checks::output_tokens(obj, "max_completion_tokens")?,
    };
    let mut warnings = Vec::new();
    let mut not_forwarded = Vec::new();
    let (conversation, tools) = match wire {
        Wire::OpenAi | Wire::Responses => (
            from_openai_chat(messages, &model, now_ms),
            openai_tools(obj.get("tools"), &mut warnings, &mut not_forwarded),
        ),
        Wire::Anthropic => {
            let iso = chrono::DateTime::from_timestamp_millis(now_ms as i64)
                .unwrap_or_default()
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
            // A `system` message is kept whole (an opaque message): an Anthropic upstream gets
            // it back as sent, another one leaves it out and reports it then.
            (
                from_anthropic_messages(obj.get("system"), messages, &iso),
                anthropic_tools(obj.get("tools"), &mut warnings, &mut not_forwarded),
            )
        }
    };
    if conversation
        .messages
        .iter()
        .all(|m| m.role() == rampart_message::opaque::OPAQUE_ROLE)
    {
        return Err(BadRequest(
            "`messages` holds no user or assistant message".into(),
        ));
    }
    let mut conversation = conversation;
    warnings.append(&mut conversation.warnings);
    keep_templates(wire, &mut conversation.messages);
    let system_form = obj
        .get("system")
        .and_then(Value::as_array)
        .filter(|_| matches!(wire, Wire::Anthropic))
        .map(|blocks| SystemForm {
            wire: FieldsWire::Anthropic,
            blocks: blocks.clone(),
            instructions: None,
        });
    let system_breakpoint = system_form
        .as_ref()
        .is_some_and(|form| form.blocks.iter().any(|b| b.get("cache_control").is_some()));
    let breakpoints = conversation
        .messages
        .iter()
        .filter(|m| carries_breakpoint(m))
        .cloned()
        .collect();
    Ok(ClientRequest {
        wire,
        model,
        stream,
        include_usage: obj
            .get("stream_options")
            .and_then(|o| o.get("include_usage"))
            .and_then(Value::as_bool)
            .unwrap_or(false),
        max_tokens,
        system: conversation.system,
        messages: std::sync::Arc::new(
            conversation
                .messages
                .into_iter()
                .map(std::sync::Arc::new)
                .collect(),
        ),
        now_ms,
        tools,
        warnings,
        not_forwarded,
        system_breakpoint,
        system_form,
        breakpoints,
        memory_tools: false,
        engine_tools: false,
        seen: Default::default(),
        fields: ClientFields::capture(
            match wire {
                Wire::OpenAi => FieldsWire::Chat,
                Wire::Anthropic => FieldsWire::Anthropic,
                Wire::Responses => FieldsWire::Responses,
            },
            obj,
        ),
    })
}

/// A Responses API body as the chat-completions body it means, plus what could not be carried
/// over: `instructions` become the system message; `input` items become messages (`message`
/// items by role, `developer` as `system`; a `function_call` joins the assistant message before
/// it as a tool call; a `function_call_output` is a `tool` message); function tools become chat
/// tools; `max_output_tokens` is `max_tokens`. The rest of the body (`prompt_cache_key`,
/// `user`, `stream`) is kept, so the conversation rule reads it as it reads a chat request.
///
/// Input items Rampart does not model (reasoning with its `encrypted_content`, built-in and
/// custom tool calls and their outputs) are kept verbatim as content parts that become opaque
/// blocks ([`crate::providers::responses::opaque`]): the model's on the assistant message of
/// its turn (before that turn's tool calls, the order one model answer has), the client's
/// outputs as a user message. A Responses upstream gets them back unchanged; chat completions
/// and Anthropic have no form for them, nor for built-in, namespace and custom tools, which
/// are reported as not forwarded for such an upstream.
pub fn responses_as_chat(body: &Value) -> Result<ResponsesAsChat, BadRequest> {
    responses_as_chat_after(body, &[])
}

/// [`responses_as_chat`] of a request that continues `prior`, the conversation its
/// `previous_response_id` names: an output may answer a call made there, and the input need
/// not hold a user or assistant message of its own.
pub fn responses_as_chat_after(
    body: &Value,
    prior: &[SharedMessage],
) -> Result<ResponsesAsChat, BadRequest> {
    use rampart_message::ContentBlock;
    use serde_json::json;
    let Some(obj) = body.as_object() else {
        return Err(BadRequest("the request body must be a JSON object".into()));
    };
    let mut warnings = Vec::new();
    let mut not_forwarded = Vec::new();
    let mut messages: Vec<Value> = Vec::new();
    match obj.get("instructions") {
        Some(Value::String(text)) if !text.trim().is_empty() => {
            messages.push(json!({"role": "system", "content": text}));
        }
        // Instructions given as input items (OpenAI accepts a list): read as the input items
        // they are, before the input.
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                responses_item(i, item, &mut messages, &mut warnings);
            }
        }
        _ => {}
    }
    match obj.get("input") {
        Some(Value::String(text)) => messages.push(json!({"role": "user", "content": text})),
        Some(Value::Array(items)) => {
            // The calls made so far, so that an output answering none is refused naming its
            // item (left out, the model would answer a conversation the client never sent).
            // The prior messages are searched only for an output whose call is not in `input`:
            // a request continuing a long conversation usually answers its own new calls.
            let mut calls: std::collections::HashSet<&str> = std::collections::HashSet::new();
            let made_before = |id: &str| {
                prior.iter().any(|m| match &**m {
                    AgentMessage::Assistant(a) => a
                        .content
                        .iter()
                        .any(|b| matches!(b, ContentBlock::ToolCall(c) if c.id == id)),
                    _ => false,
                })
            };
            for (i, item) in items.iter().enumerate() {
                let call_id = item.get("call_id").and_then(Value::as_str);
                match item.get("type").and_then(Value::as_str) {
                    Some("function_call") => calls.extend(call_id),
                    Some("function_call_output")
                        if !call_id.is_some_and(|id| calls.contains(id) || made_before(id)) =>
                    {
                        return Err(BadRequest(format!(
                            "`input[{i}]` is a function_call_output for call {}, but no \
                             function_call item before it in `input` (nor the response \
                             `previous_response_id` names) made that call; send the \
                             function_call item first",
                            call_id.map_or_else(
                                || "(no `call_id`)".to_owned(),
                                |id| format!("{id:?}")
                            )
                        )));
                    }
                    Some("message" | "function_call_output") | None => {}
                    Some(_) => not_forwarded.push(NotForwarded::ResponsesItem),
                }
                responses_item(i, item, &mut messages, &mut warnings);
            }
        }
        _ => {
            return Err(BadRequest(
                "`input` is required: a string or an array of input items".into(),
            ));
        }
    }
    if prior.is_empty()
        && !messages
            .iter()
            .any(|m| matches!(m["role"].as_str(), Some("user" | "assistant")))
    {
        return Err(BadRequest(
            "`input` holds no user or assistant message (instructions, developer messages and \
             items without a chat form are not a conversation on their own); send the user's \
             input as a string or a message item"
                .into(),
        ));
    }
    let mut chat = obj.clone();
    for field in ["input", "instructions", "tools", "max_output_tokens"] {
        chat.remove(field);
    }
    chat.insert("messages".into(), Value::Array(messages));
    if let Some(max) = request_checks::output_tokens(obj, "max_output_tokens")? {
        chat.insert("max_tokens".into(), json!(max));
    }
    if let Some(tools) = obj.get("tools").and_then(Value::as_array) {
        let mut chat_tools = Vec::new();
        for (i, tool) in tools.iter().enumerate() {
            match (
                tool.get("type").and_then(Value::as_str),
                tool.get("name").and_then(Value::as_str),
            ) {
                (Some("function"), Some(name)) => chat_tools.push(json!({
                    "type": "function",
                    "function": {
                        "name": name,
                        "description": tool.get("description").cloned().unwrap_or(Value::Null),
                        "parameters": tool.get("parameters").cloned()
                            .unwrap_or_else(|| json!({"type": "object"})),
                    },
                })),
                (kind, _) => {
                    not_forwarded.push(NotForwarded::NonFunctionTool);
                    warnings.push(format!(
                        "tools[{i}]: a `{}` tool has no chat-completions form; not forwarded",
                        kind.unwrap_or("?")
                    ));
                }
            }
        }
        chat.insert("tools".into(), Value::Array(chat_tools));
    }
    Ok(ResponsesAsChat {
        chat: Value::Object(chat),
        warnings,
        not_forwarded,
        system_form: responses_system_form(obj),
        tools: obj
            .get("tools")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
    })
}

/// A Responses body read as the chat-completions body it means.
#[derive(Debug, Clone, PartialEq)]
pub struct ResponsesAsChat {
    /// The chat-completions body.
    pub chat: Value,
    /// What could not be converted exactly.
    pub warnings: Vec<String>,
    /// The Responses tools and input items the chat body has no form for (the chat body's own
    /// decoding adds its own). They reach a Responses upstream all the same; serve counts them
    /// only for an upstream of another wire.
    pub not_forwarded: Vec<NotForwarded>,
    /// The client's `tools` as declared, for a Responses upstream ([`ClientFields::tools`]).
    pub tools: Vec<Value>,
    /// How the client wrote its system prompt: its `instructions` as sent and the developer
    /// (or system) messages `input` opened with, verbatim. `None` when a developer message
    /// stands later in `input`: the prompt read from it can then not be written back so.
    pub system_form: Option<SystemForm>,
}

/// How a Responses client wrote its system prompt ([`ResponsesAsChat::system_form`]).
fn responses_system_form(obj: &serde_json::Map<String, Value>) -> Option<SystemForm> {
    let is_system = |item: &Value| {
        matches!(
            item.get("role").and_then(Value::as_str),
            Some("developer" | "system")
        ) && item
            .get("type")
            .and_then(Value::as_str)
            .is_none_or(|t| t == "message")
    };
    let input = match obj.get("input") {
        Some(Value::Array(items)) => items.as_slice(),
        _ => &[],
    };
    let opening = input.iter().take_while(|item| is_system(item)).count();
    if input[opening..].iter().any(is_system) {
        return None;
    }
    Some(SystemForm {
        wire: FieldsWire::Responses,
        blocks: input[..opening].to_vec(),
        instructions: obj.get("instructions").cloned(),
    })
}

/// One Responses input item, appended to `messages` in chat form.
fn responses_item(i: usize, item: &Value, messages: &mut Vec<Value>, warnings: &mut Vec<String>) {
    use serde_json::json;
    let role = item.get("role").and_then(Value::as_str);
    let kind = item
        .get("type")
        .and_then(Value::as_str)
        .or(role.map(|_| "message"));
    match kind {
        Some("message") => {
            let role = match role {
                Some("developer" | "system") => "system",
                Some("assistant") => "assistant",
                _ => "user",
            };
            // A message of text parts keeps how it was written ([`template`]): one chat text
            // part per part, the first carrying the item's template.
            let template = (role != "system")
                .then(|| template::message_template(item))
                .flatten();
            let content = match (item.get("content"), template) {
                (Some(Value::Array(parts)), Some(template)) => templated_parts(parts, template),
                (Some(Value::Array(parts)), None) => chat_content(i, role, parts, warnings),
                (Some(Value::String(text)), _) => json!(text),
                _ => json!(""),
            };
            // Text after the model's opaque items of the same turn joins their message.
            if role == "assistant"
                && let Some(last) = messages.last_mut()
                && last["role"] == "assistant"
                && last.get("tool_calls").is_none()
                && let Some(parts) = last.get_mut("content").and_then(Value::as_array_mut)
            {
                match content {
                    Value::String(text) if !text.is_empty() => {
                        parts.push(json!({"type": "text", "text": text}));
                    }
                    Value::Array(texts) => parts.extend(texts),
                    _ => {}
                }
                return;
            }
            messages.push(json!({"role": role, "content": content}));
        }
        Some("function_call") => {
            let mut call = json!({
                "id": item.get("call_id").cloned().unwrap_or(Value::Null),
                "type": "function",
                "function": {
                    "name": item.get("name").cloned().unwrap_or(Value::Null),
                    "arguments": item.get("arguments").cloned().unwrap_or_else(|| json!("{}")),
                },
            });
            if let Some(template) = template::call_template(item) {
                call[template::TEMPLATE_KEY] = template;
            }
            // Calls join the assistant message they follow, as one chat turn holds them.
            match messages.last_mut() {
                Some(last) if last["role"] == "assistant" => {
                    if let Some(calls) = last
                        .as_object_mut()
                        .map(|m| m.entry("tool_calls").or_insert_with(|| json!([])))
                        .and_then(Value::as_array_mut)
                    {
                        calls.push(call);
                    }
                }
                _ => messages
                    .push(json!({"role": "assistant", "content": null, "tool_calls": [call]})),
            }
        }
        Some("function_call_output") => {
            let output = match item.get("output") {
                Some(Value::String(text)) => text.clone(),
                Some(Value::Array(parts)) => parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n"),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            let mut tool = json!({
                "role": "tool",
                "tool_call_id": item.get("call_id").cloned().unwrap_or(Value::Null),
                "content": output,
            });
            // Kept among the message's chat fields by the importer; [`decode`] moves it.
            if let Some(template) = template::output_template(item) {
                tool[template::TEMPLATE_KEY] = template;
            }
            messages.push(tool);
        }
        Some(kind) if item.is_object() => {
            // An item Rampart does not model (reasoning, built-in and custom tool calls and
            // their outputs): kept verbatim as a part the importer holds as an opaque block,
            // on the message of the side that made it.
            let part = Value::Object(opaque_part(item.clone()));
            if is_client_item(kind) {
                messages.push(json!({"role": "user", "content": [part]}));
                return;
            }
            match messages.last_mut() {
                Some(last) if last["role"] == "assistant" => {
                    let content = last
                        .as_object_mut()
                        .map(|m| m.entry("content").or_insert(Value::Null));
                    if let Some(content) = content {
                        let mut parts = match content.take() {
                            Value::String(text) if !text.is_empty() => {
                                vec![json!({"type": "text", "text": text})]
                            }
                            Value::Array(parts) => parts,
                            _ => Vec::new(),
                        };
                        parts.push(part);
                        *content = Value::Array(parts);
                    }
                }
                _ => messages.push(json!({"role": "assistant", "content": [part]})),
            }
        }
        other => warnings.push(format!(
            "input[{i}]: a `{}` item is not an object with a `type`; not forwarded",
            other.unwrap_or("?")
        )),
    }
}

/// A message item's text parts as chat text parts, one each, the first carrying the item's
/// template ([`template::message_template`]).
fn templated_parts(parts: &[Value], template: Value) -> Value {
    let mut template = Some(template);
    Value::Array(
        parts
            .iter()
            .map(|part| {
                let mut chat = serde_json::json!({"type": "text", "text": part["text"]});
                if let Some(template) = template.take() {
                    chat[template::TEMPLATE_KEY] = template;
                }
                chat
            })
            .collect(),
    )
}

/// A message item's content parts in chat form: its texts joined (a user's images beside them
/// keep the parts apart), what has no chat form named in `warnings`.
fn chat_content(i: usize, role: &str, parts: &[Value], warnings: &mut Vec<String>) -> Value {
    use serde_json::json;
    let mut texts = Vec::new();
    let mut chat_parts = Vec::new();
    for part in parts {
        match part.get("type").and_then(Value::as_str) {
            Some("input_text" | "output_text" | "text") => {
                let text = part.get("text").and_then(Value::as_str).unwrap_or("");
                texts.push(text.to_owned());
                chat_parts.push(json!({"type": "text", "text": text}));
            }
            Some("refusal") => {
                let text = part.get("refusal").and_then(Value::as_str).unwrap_or("");
                texts.push(text.to_owned());
                chat_parts.push(json!({"type": "text", "text": text}));
            }
            Some("input_image") => match part.get("image_url") {
                Some(url) => {
                    chat_parts.push(json!({"type": "image_url", "image_url": {"url": url}}))
                }
                None => warnings.push(format!(
                    "input[{i}]: an image given by file id cannot be forwarded"
                )),
            },
            other => warnings.push(format!(
                "input[{i}]: a `{}` content part is not forwarded",
                other.unwrap_or("?")
            )),
        }
    }
    // Chat assistant and system messages take text only.
    if role == "user" && chat_parts.iter().any(|p| p["type"] != "text") {
        Value::Array(chat_parts)
    } else {
        json!(texts.join("\n"))
    }
}

/// Puts each Responses item template where the writer looks for it ([`template`]): a tool
/// output's, which the importer kept among the tool message's chat fields, on the message.
/// A client of another wire has no templates: what it sent under the key is left out (its
/// chat fields keep theirs, written back to a chat upstream as the client sent them).
fn keep_templates(wire: Wire, messages: &mut [AgentMessage]) {
    use rampart_sessions::import::api_request::CHAT_FIELDS_KEY;
    for message in messages {
        match (wire, message) {
            (Wire::Responses, AgentMessage::ToolResult(m)) => {
                if let Some(Value::Object(fields)) = m.extra.get_mut(CHAT_FIELDS_KEY)
                    && let Some(t) = fields.remove(template::TEMPLATE_KEY)
                {
                    if fields.is_empty() {
                        m.extra.remove(CHAT_FIELDS_KEY);
                    }
                    m.extra.insert(template::TEMPLATE_KEY.to_owned(), t);
                }
            }
            (Wire::Responses, _) => {}
            (Wire::OpenAi | Wire::Anthropic, message) => {
                template::forget(message);
            }
        }
    }
}

/// Refuses a chat or Anthropic body that carries Rampart's own opaque block type
/// ([`OPAQUE_BLOCK_TYPE`]) as a content part (or inside a tool result's content): only a
/// Responses request's unmodelled items become such blocks, and one made up by a client of
/// another wire would reach a Responses upstream as an input item it never declared.
fn refuse_opaque_parts(messages: &[Value]) -> Result<(), BadRequest> {
    let parts = |v: Option<&Value>| v.and_then(Value::as_array).cloned().unwrap_or_default();
    for (i, message) in messages.iter().enumerate() {
        for (j, part) in parts(message.get("content")).iter().enumerate() {
            let nested = parts(part.get("content"));
            if part.get("type").and_then(Value::as_str) == Some(OPAQUE_BLOCK_TYPE)
                || nested
                    .iter()
                    .any(|p| p.get("type").and_then(Value::as_str) == Some(OPAQUE_BLOCK_TYPE))
            {
                return Err(BadRequest(format!(
                    "`messages[{i}].content[{j}]` uses the content type \"{OPAQUE_BLOCK_TYPE}\", \
                     which is rampart serve's own form of an OpenAI Responses item and not a part \
                     of this API; send Responses items to `/v1/responses`"
                )));
            }
        }
    }
    Ok(())
}

/// Whether a decoded message kept a `cache_control` field on one of its blocks (the importers'
/// converters keep a block's unknown fields). A `tool_result` block's own fields land on the
/// tool-result message's `extra`: Claude Code and pi mark the newest `tool_result` block itself
/// in a tool loop, not a block inside its content.
pub(super) fn carries_breakpoint(message: &AgentMessage) -> bool {
    use rampart_message::{Content, ContentBlock};
    let marked = |block: &ContentBlock| match block {
        ContentBlock::Text(t) => t.extra.contains_key("cache_control"),
        ContentBlock::Other(map) => map.contains_key("cache_control"),
        _ => false,
    };
    let content = match message {
        AgentMessage::User(m) => &m.content,
        AgentMessage::ToolResult(m) if m.extra.contains_key("cache_control") => return true,
        AgentMessage::ToolResult(m) => &m.content,
        AgentMessage::Assistant(m) => return m.content.iter().any(marked),
        _ => return false,
    };
    match content {
        Content::Blocks(blocks) => blocks.iter().any(marked),
        Content::Text(_) => false,
    }
}

fn openai_tools(
    tools: Option<&Value>,
    warnings: &mut Vec<String>,
    not_forwarded: &mut Vec<NotForwarded>,
) -> Vec<ToolSpec> {
    let Some(tools) = tools.and_then(Value::as_array) else {
        return Vec::new();
    };
    tools
        .iter()
        .enumerate()
        .filter_map(|(i, t)| match ToolSpec::from_chat_tool(t) {
            Some(spec) => Some(spec),
            None => {
                not_forwarded.push(NotForwarded::NonFunctionTool);
                warnings.push(format!("tools[{i}]: not a function tool; not forwarded"));
                None
            }
        })
        .collect()
}

fn anthropic_tools(
    tools: Option<&Value>,
    warnings: &mut Vec<String>,
    not_forwarded: &mut Vec<NotForwarded>,
) -> Vec<ToolSpec> {
    let Some(tools) = tools.and_then(Value::as_array) else {
        return Vec::new();
    };
    tools
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            let name = t.get("name").and_then(Value::as_str);
            match (name, t.get("input_schema")) {
                (Some(name), Some(schema)) => Some(ToolSpec {
                    name: name.to_owned(),
                    description: t
                        .get("description")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    parameters: schema.clone(),
                }),
                _ => {
                    not_forwarded.push(NotForwarded::ServerTool);
                    warnings.push(format!(
                        "tools[{i}]: a server tool or a tool without input_schema; not forwarded"
                    ));
                    None
                }
            }
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use rampart_message::ContentBlock;
    use serde_json::json;

    use super::*;

    #[test]
    fn openai_request_with_tools_and_stream_options() {
        let body = json!({
            "model": "gpt-4o", "stream": true, "stream_options": {"include_usage": true},
            "max_completion_tokens": 100,
            "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}],
            "tools": [{"type": "function", "function": {"name": "read", "description": "Read a file",
                       "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]
        });
        let r = decode(Wire::OpenAi, &body, 7).unwrap();
        assert!(r.stream && r.include_usage);
        assert_eq!(r.max_tokens, Some(100));
        assert_eq!(r.system.as_deref(), Some("sys"));
        assert_eq!(r.messages.len(), 1);
        assert_eq!(r.tools[0].name, "read");
        assert_eq!(
            r.tools[0].parameters["properties"]["path"]["type"],
            "string"
        );
    }

    #[test]
    fn anthropic_request_with_tool_use_and_results() {
        let body = json!({
            "model": "claude-sonnet-4-5", "max_tokens": 1024,
            "system": "sys",
            "messages": [
                {"role": "user", "content": "read a"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "a"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "body"}]}
            ],
            "tools": [{"name": "Read", "input_schema": {"type": "object"}},
                      {"type": "web_search_20250305", "name": "web_search"}]
        });
        let r = decode(Wire::Anthropic, &body, 1_700_000_000_000).unwrap();
        assert_eq!(r.messages.len(), 3);
        let AgentMessage::Assistant(a) = &*r.messages[1] else {
            panic!()
        };
        assert!(matches!(&a.content[0], ContentBlock::ToolCall(c) if c.arguments["path"] == "a"));
        assert_eq!(r.tools.len(), 1);
        assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
        assert_eq!(r.not_forwarded, vec![NotForwarded::ServerTool]);
        assert_eq!(r.messages[0].timestamp(), Some(1_700_000_000_000));
    }

    /// Claude Code puts a `role: "system"` message (its agent-type list) inside `messages`;
    /// it is kept whole at its place (an opaque message), for the upstream to send or report.
    #[test]
    fn a_system_message_inside_anthropic_messages_is_kept_in_place() {
        let body = json!({
            "model": "claude-sonnet-4-5", "max_tokens": 1024,
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "system", "content": "Available agent types for the Agent tool: ..."},
                {"role": "assistant", "content": "hello"},
                {"role": "system", "content": "more"}
            ],
            "tools": [{"name": "Read", "input_schema": {"type": "object"}}]
        });
        let r = decode(Wire::Anthropic, &body, 1).unwrap();
        let opaque = rampart_message::opaque::OPAQUE_ROLE;
        let roles: Vec<&str> = r.messages.iter().map(|m| m.role()).collect();
        assert_eq!(roles, ["user", opaque, "assistant", opaque]);
        let kept = rampart_message::opaque::as_opaque(&r.messages[3]).unwrap();
        assert_eq!(Value::Object(kept.item.clone()), body["messages"][3]);
        assert!(r.not_forwarded.is_empty(), "{:?}", r.not_forwarded);
    }

    /// A request of `system` messages alone has no conversation to answer.
    #[test]
    fn system_messages_alone_are_refused() {
        let body = json!({
            "model": "claude-sonnet-4-5", "max_tokens": 1024,
            "messages": [{"role": "system", "content": "only this"}]
        });
        let e = decode(Wire::Anthropic, &body, 1).unwrap_err();
        assert!(e.0.contains("no user or assistant message"), "{e}");
    }

    /// In a tool loop Claude Code and pi mark the newest `tool_result` block itself (Claude Code
    /// with string content, pi with text blocks); both are breakpoints the client placed.
    #[test]
    fn a_breakpoint_on_a_tool_result_block_is_the_clients() {
        let ephemeral = json!({"type": "ephemeral"});
        for content in [json!("body"), json!([{"type": "text", "text": "body"}])] {
            let body = json!({
                "model": "claude-sonnet-4-5", "max_tokens": 1024,
                "system": [{"type": "text", "text": "sys", "cache_control": ephemeral}],
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "read a"}]},
                    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "a"}}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                                  "content": content, "cache_control": ephemeral}]}
                ]
            });
            let r = decode(Wire::Anthropic, &body, 0).unwrap();
            assert!(r.system_breakpoint);
            assert_eq!(r.breakpoints.len(), 1, "{content}");
            assert!(
                matches!(&r.breakpoints[0], AgentMessage::ToolResult(t) if t.tool_call_id == "toolu_1")
            );
        }
    }

    /// A request shaped like the Codex CLI's: instructions, a developer message, input items
    /// with a reasoning item, a call and its output, function and built-in tools.
    #[test]
    fn a_codex_responses_body_reads_as_the_chat_request_it_means() {
        let body = json!({
            "model": "gpt-5-codex", "instructions": "You are Codex.", "stream": true,
            "store": false, "prompt_cache_key": "0199-thread", "max_output_tokens": 900,
            "input": [
                {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "sandbox: read-only"}]},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list files"}]},
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Listing."}]},
                {"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": "{\"command\":[\"ls\"]}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"}
            ],
            "tools": [
                {"type": "function", "name": "shell", "description": "Runs a command", "parameters": {"type": "object"}},
                {"type": "web_search"}
            ]
        });
        let ResponsesAsChat {
            chat,
            warnings,
            not_forwarded,
            tools,
            system_form,
        } = responses_as_chat(&body).unwrap();
        // Its instructions and the developer message that opened `input`, as sent.
        let form = system_form.unwrap();
        assert_eq!(form.instructions, Some(body["instructions"].clone()));
        assert_eq!(form.blocks, body["input"].as_array().unwrap()[..1]);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert_eq!(
            not_forwarded,
            vec![NotForwarded::ResponsesItem, NotForwarded::NonFunctionTool]
        );
        assert_eq!(tools, body["tools"].as_array().unwrap().clone());
        assert_eq!(chat["prompt_cache_key"], "0199-thread");
        assert_eq!(chat["max_tokens"], 900);
        let r = decode(Wire::Responses, &chat, 5).unwrap();
        assert_eq!(r.wire, Wire::Responses);
        assert!(r.stream);
        assert_eq!(r.max_tokens, Some(900));
        let system = r.system.unwrap();
        assert!(system.contains("You are Codex.") && system.contains("sandbox: read-only"));
        let roles: Vec<&str> = r.messages.iter().map(|m| m.role()).collect();
        assert_eq!(roles, ["user", "assistant", "toolResult"]);
        let AgentMessage::Assistant(a) = &*r.messages[1] else {
            panic!()
        };
        // The reasoning item is kept verbatim, before the text and the call of its turn.
        assert_eq!(
            crate::providers::responses::opaque::opaque_item(&a.content[0]),
            Some(&body["input"][2])
        );
        assert!(matches!(&a.content[1], ContentBlock::Text(t) if t.text == "Listing."));
        assert!(
            matches!(&a.content[2], ContentBlock::ToolCall(c) if c.id == "call_1" && c.arguments["command"][0] == "ls")
        );
        assert_eq!(r.tools.len(), 1);
        assert_eq!(r.tools[0].name, "shell");
        assert!(
            responses_as_chat(&json!({"model": "m"}))
                .unwrap_err()
                .0
                .contains("`input`")
        );
        let plain = responses_as_chat(&json!({"model": "m", "input": "hi"}))
            .unwrap()
            .chat;
        assert_eq!(
            plain["messages"],
            json!([{"role": "user", "content": "hi"}])
        );
    }

    #[test]
    fn unmanaged_fields_are_captured_with_the_clients_wire() {
        let body = json!({
            "model": "claude", "max_tokens": 10, "stream": true,
            "messages": [{"role": "user", "content": "hi"}],
            "thinking": {"type": "adaptive"}, "metadata": {"user_id": "u"}
        });
        let r = decode(Wire::Anthropic, &body, 0).unwrap();
        assert_eq!(r.fields.wire, FieldsWire::Anthropic);
        assert_eq!(r.fields.fields.len(), 2, "{:?}", r.fields);
        assert_eq!(r.fields.fields["thinking"], json!({"type": "adaptive"}));
        let chat = responses_as_chat(&json!({
            "model": "m", "input": "hi", "reasoning": {"effort": "low"}, "max_output_tokens": 5
        }))
        .unwrap()
        .chat;
        let r = decode(Wire::Responses, &chat, 0).unwrap();
        assert_eq!(r.fields.wire, FieldsWire::Responses);
        let keys: Vec<&String> = r.fields.fields.keys().collect();
        assert_eq!(keys, ["reasoning"]);
    }

    #[test]
    fn bad_bodies_say_what_to_fix() {
        assert!(
            decode(Wire::OpenAi, &json!([]), 0)
                .unwrap_err()
                .0
                .contains("JSON object")
        );
        assert!(
            decode(Wire::OpenAi, &json!({"messages": []}), 0)
                .unwrap_err()
                .0
                .contains("`model`")
        );
        assert!(
            decode(Wire::Anthropic, &json!({"model": "m"}), 0)
                .unwrap_err()
                .0
                .contains("`messages`")
        );
        assert!(decode(Wire::Anthropic, &json!({"model": "m", "messages": []}), 0).is_err());
    }

    /// A Responses request whose conversation cannot be carried is refused naming `input`, the
    /// field the client sent (not the chat `messages` it is read as).
    #[test]
    fn responses_refusals_name_the_input_items() {
        let orphan = json!({"model": "m", "input": [
            {"type": "message", "role": "user", "content": "go"},
            {"type": "function_call_output", "call_id": "call_9", "output": "x"},
        ]});
        let e = responses_as_chat(&orphan).unwrap_err().0;
        assert!(
            e.contains("`input[1]` is a function_call_output for call \"call_9\""),
            "{e}"
        );
        let only_developer = json!({"model": "m", "input": [
            {"type": "message", "role": "developer", "content": "rules"},
            {"type": "message", "role": "system", "content": "more rules"},
        ]});
        let e = responses_as_chat(&only_developer).unwrap_err().0;
        assert!(
            e.starts_with("`input` holds no user or assistant message"),
            "{e}"
        );
    }

    /// A chat or Anthropic client cannot make up an opaque Responses item: the part type is
    /// serve's own, and would otherwise reach a Responses upstream as an item.
    #[test]
    fn a_made_up_opaque_part_is_refused_outside_responses() {
        let part = json!({"type": "openaiResponsesItem",
                          "item": {"type": "item_reference", "id": "msg_someone_elses"}});
        let chat = json!({"model": "m", "messages": [{"role": "user", "content": [part.clone()]}]});
        let e = decode(Wire::OpenAi, &chat, 0).unwrap_err().0;
        assert!(
            e.starts_with("`messages[0].content[0]` uses the content type"),
            "{e}"
        );
        let anthropic = json!({"model": "m", "max_tokens": 5, "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "x", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": [part]}]}
        ]});
        let e = decode(Wire::Anthropic, &anthropic, 0).unwrap_err().0;
        assert!(e.starts_with("`messages[2].content[0]`"), "{e}");
        // A Responses request's own items are what the part is for.
        let responses = responses_as_chat(&json!({"model": "m", "input": [
            {"type": "message", "role": "user", "content": "hi"},
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}
        ]}))
        .unwrap();
        assert!(decode(Wire::Responses, &responses.chat, 0).is_ok());
    }

    /// Instructions given as a list of input items are read, not dropped.
    #[test]
    fn instructions_as_input_items_are_read() {
        let body = json!({"model": "m", "input": "hi", "instructions": [
            {"type": "message", "role": "developer", "content": "Answer briefly."},
        ]});
        let chat = responses_as_chat(&body).unwrap().chat;
        assert_eq!(
            chat["messages"],
            json!([{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "hi"}])
        );
    }
}
