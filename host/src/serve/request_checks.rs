//! What a client request must be before it is converted: every field the server reads has the
//! type its API documents, or the request is refused with a 400 naming the field.
//!
//! The converters ([`rampart_sessions::import::api_request`]) are lenient on purpose (they read
//! recorded transcripts, where leaving a damaged line out with a warning is right). A live
//! request is different: a `content` of the wrong type turned into a string, a message left
//! out, `max_tokens: "ten"` ignored or `stream: "yes"` read as false would each send the model
//! something the client did not ask for, and answer 200. So the request is checked here first,
//! and the converters only ever see what they convert exactly.

use std::collections::HashSet;

use serde_json::{Map, Value};

/// Why a request is refused: the text names the field and says what it must be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FieldError(pub String);

/// Which API's rules a body follows (a Responses body is checked as the chat body it means).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// OpenAI chat completions.
    OpenAiChat,
    /// Anthropic messages.
    Anthropic,
}

/// The largest `max_tokens` accepted: far beyond any model's output, small enough for every
/// upstream's integer type.
pub const MAX_OUTPUT_TOKENS: u64 = u32::MAX as u64;

/// The largest message accepted, as JSON: a session line holds one message, and a larger one
/// could only be stored cut (no model's context window holds a message this large anyway).
pub const MAX_MESSAGE_BYTES: usize = rampart_sessions::load::DEFAULT_MAX_LINE_BYTES - (1 << 20);

/// Checks the request body `obj`, following `api`'s rules.
pub fn check(api: Api, obj: &Map<String, Value>) -> Result<(), FieldError> {
    if let Some(v) = obj.get("stream")
        && !v.is_boolean()
        && !v.is_null()
    {
        return Err(bad(format!(
            "`stream` must be true or false; found {}",
            shown(v)
        )));
    }
    for key in ["max_tokens", "max_completion_tokens"] {
        output_tokens(obj, key)?;
    }
    if api == Api::Anthropic {
        anthropic_system(obj.get("system"))?;
    }
    if api == Api::OpenAiChat {
        choices(obj.get("n"))?;
    }
    let Some(messages) = obj.get("messages").and_then(Value::as_array) else {
        return Ok(());
    };
    for (i, message) in messages.iter().enumerate() {
        let Some(m) = message.as_object() else {
            return Err(bad(format!(
                "`messages[{i}]` must be a message object; found {}",
                shown(message)
            )));
        };
        // Written out only when its bound says it may be too large: counting every message's
        // escaped form was a twelfth of a continuing 200k-token request.
        let size = if json_len_bound(message) > MAX_MESSAGE_BYTES {
            json_len(message)
        } else {
            0
        };
        if size > MAX_MESSAGE_BYTES {
            return Err(bad(format!(
                "`messages[{i}]` is {} MB; rampart serve keeps messages of at most {} MB \
                 (no model's context window holds more): send large content in parts or as \
                 a file the model reads",
                size >> 20,
                MAX_MESSAGE_BYTES >> 20
            )));
        }
        match api {
            Api::OpenAiChat => openai_message(i, m)?,
            Api::Anthropic => anthropic_message(i, m)?,
        }
    }
    match api {
        Api::OpenAiChat => openai_tool_ids(messages),
        Api::Anthropic => anthropic_tool_ids(messages),
    }
}

/// `key`, when present and not null, as a number of output tokens.
pub fn output_tokens(obj: &Map<String, Value>, key: &str) -> Result<Option<u64>, FieldError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .filter(|n| (1..=MAX_OUTPUT_TOKENS).contains(n))
            .map(Some)
            .ok_or_else(|| {
                bad(format!(
                    "`{key}` must be a whole number from 1 to {MAX_OUTPUT_TOKENS}; found {}",
                    shown(v)
                ))
            }),
    }
}

/// OpenAI's `n`: serve keeps one conversation per request and answers one choice, so more
/// than one is refused rather than answered with fewer than asked.
fn choices(n: Option<&Value>) -> Result<(), FieldError> {
    match n {
        None | Some(Value::Null) => Ok(()),
        Some(v) if v.as_u64() == Some(1) => Ok(()),
        Some(v) if v.as_u64().is_some_and(|n| n > 1) => Err(bad(format!(
            "`n` is {v}: rampart serve answers one choice per request (each answer continues \
             the conversation it keeps); send `n: 1` or leave it out, and send separate requests \
             for more"
        ))),
        Some(other) => Err(bad(format!(
            "`n` must be a whole number from 1; found {}",
            shown(other)
        ))),
    }
}

fn anthropic_system(system: Option<&Value>) -> Result<(), FieldError> {
    match system {
        None | Some(Value::Null | Value::String(_)) => Ok(()),
        Some(Value::Array(blocks)) => {
            for (j, block) in blocks.iter().enumerate() {
                let text_block = block.get("type").and_then(Value::as_str) == Some("text")
                    && block.get("text").is_some_and(Value::is_string);
                if !text_block {
                    return Err(bad(format!(
                        "`system[{j}]` must be a text block ({{\"type\": \"text\", \"text\": \
                         \"...\"}}); found {}",
                        shown(block)
                    )));
                }
            }
            Ok(())
        }
        Some(other) => Err(bad(format!(
            "`system` must be a string or an array of text blocks; found {}",
            shown(other)
        ))),
    }
}

const OPENAI_ROLES: &[&str] = &[
    "system",
    "developer",
    "user",
    "assistant",
    "tool",
    "function",
];

fn openai_message(i: usize, m: &Map<String, Value>) -> Result<(), FieldError> {
    let role = m.get("role").and_then(Value::as_str);
    let Some(role) = role.filter(|r| OPENAI_ROLES.contains(r)) else {
        return Err(bad(format!(
            "`messages[{i}].role` must be one of {}; found {}",
            OPENAI_ROLES.join(", "),
            m.get("role").map_or_else(|| "nothing".to_owned(), shown)
        )));
    };
    // The deprecated function-calling form has no place in a pi conversation: its messages
    // would be left out and the model answer a conversation the client never sent.
    if role == "function" {
        return Err(bad(format!(
            "`messages[{i}]` has role \"function\" (OpenAI's deprecated function calling), \
             which rampart serve does not carry; send the call in the assistant message's \
             `tool_calls` and its result as a \"tool\" message with `tool_call_id`"
        )));
    }
    if m.get("function_call").is_some_and(|v| !v.is_null()) {
        return Err(bad(format!(
            "`messages[{i}].function_call` is OpenAI's deprecated function calling, which \
             rampart serve does not carry; send the call in `tool_calls`"
        )));
    }
    if role == "tool" && !m.get("tool_call_id").is_some_and(Value::is_string) {
        return Err(bad(format!(
            "`messages[{i}].tool_call_id` is required for a tool message: the id of the \
             assistant's tool call it answers; found {}",
            m.get("tool_call_id")
                .map_or_else(|| "nothing".to_owned(), shown)
        )));
    }
    let calls = m
        .get("tool_calls")
        .and_then(Value::as_array)
        .is_some_and(|c| !c.is_empty());
    match m.get("content") {
        Some(Value::String(_)) => Ok(()),
        // An assistant message that only calls tools has no content (OpenAI sends null).
        None | Some(Value::Null) if role == "assistant" && calls => Ok(()),
        Some(Value::Array(parts)) => parts_are_typed(i, parts),
        None => Err(bad(format!(
            "`messages[{i}].content` is required for a {role} message: a string or an array \
             of content parts"
        ))),
        Some(other) => Err(bad(format!(
            "`messages[{i}].content` must be a string or an array of content parts{}; found {}",
            if role == "assistant" {
                " (or null when the message has tool_calls)"
            } else {
                ""
            },
            shown(other)
        ))),
    }
}

fn anthropic_message(i: usize, m: &Map<String, Value>) -> Result<(), FieldError> {
    let role = m.get("role").and_then(Value::as_str);
    // Claude Code sends `system` messages inside `messages` (the Agent tool's list of agent
    // types), which its own API accepts; refusing them would break every Claude Code session.
    if !matches!(role, Some("user" | "assistant" | "system")) {
        return Err(bad(format!(
            "`messages[{i}].role` must be \"user\", \"assistant\" or \"system\"; found {}",
            m.get("role").map_or_else(|| "nothing".to_owned(), shown)
        )));
    }
    match m.get("content") {
        Some(Value::String(_)) => Ok(()),
        Some(Value::Array(blocks)) => parts_are_typed(i, blocks),
        Some(other) => Err(bad(format!(
            "`messages[{i}].content` must be a string or an array of content blocks; found {}",
            shown(other)
        ))),
        None => Err(bad(format!(
            "`messages[{i}].content` is required: a string or an array of content blocks"
        ))),
    }
}

fn parts_are_typed(i: usize, parts: &[Value]) -> Result<(), FieldError> {
    for (j, part) in parts.iter().enumerate() {
        if !part.get("type").is_some_and(Value::is_string) {
            return Err(bad(format!(
                "`messages[{i}].content[{j}]` must be an object with a string `type`; found {}",
                shown(part)
            )));
        }
    }
    Ok(())
}

/// No two tool calls of one assistant message share an id, no two results after it answer the
/// same call, and every result answers a call the last assistant message made: the upstream
/// refuses the first, one of the second would be lost, and a result with no call would be left
/// out, so the model would answer a conversation the client never sent.
fn openai_tool_ids(messages: &[Value]) -> Result<(), FieldError> {
    let mut results: HashSet<&str> = HashSet::new();
    let mut calls: HashSet<&str> = HashSet::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str);
        if role == Some("tool") {
            let Some(id) = m.get("tool_call_id").and_then(Value::as_str) else {
                continue;
            };
            if !calls.contains(id) {
                return Err(bad(format!(
                    "`messages[{i}].tool_call_id` {id:?} answers no tool call of the assistant \
                     message before it; send that assistant message, with the call in its \
                     `tool_calls`, before the result"
                )));
            }
            if !results.insert(id) {
                return Err(bad(format!(
                    "`messages[{i}].tool_call_id` {id:?} answers a tool call already answered \
                     since the last assistant message; send one result per call"
                )));
            }
            continue;
        }
        results.clear();
        calls.clear();
        let listed = m.get("tool_calls").and_then(Value::as_array);
        for (j, call) in listed.into_iter().flatten().enumerate() {
            if let Some(id) = call.get("id").and_then(Value::as_str)
                && !calls.insert(id)
            {
                return Err(bad(format!(
                    "`messages[{i}].tool_calls[{j}].id` {id:?} is used twice in one message; \
                     each tool call needs its own id"
                )));
            }
        }
    }
    Ok(())
}

/// No two `tool_use` blocks of one message share an id, and no two `tool_result` blocks of one
/// message answer the same call.
fn anthropic_tool_ids(messages: &[Value]) -> Result<(), FieldError> {
    for (i, m) in messages.iter().enumerate() {
        let mut uses: HashSet<&str> = HashSet::new();
        let mut results: HashSet<&str> = HashSet::new();
        let blocks = m.get("content").and_then(Value::as_array);
        for (j, block) in blocks.into_iter().flatten().enumerate() {
            let (set, field, what) = match block.get("type").and_then(Value::as_str) {
                Some("tool_use") => (&mut uses, "id", "each tool_use needs its own id"),
                Some("tool_result") => (
                    &mut results,
                    "tool_use_id",
                    "send one tool_result per tool_use",
                ),
                _ => continue,
            };
            if let Some(id) = block.get(field).and_then(Value::as_str)
                && !set.insert(id)
            {
                return Err(bad(format!(
                    "`messages[{i}].content[{j}].{field}` {id:?} is used twice in one message; \
                     {what}"
                )));
            }
        }
    }
    Ok(())
}

fn bad(message: String) -> FieldError {
    FieldError(message)
}

/// A value as shown in an error: its JSON, cut short.
fn shown(v: &Value) -> String {
    const MAX: usize = 80;
    let text = match v {
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
        other => other.to_string(),
    };
    if text.len() <= MAX {
        text
    } else {
        let cut = (0..=MAX)
            .rev()
            .find(|&n| text.is_char_boundary(n))
            .unwrap_or(0);
        format!("{}…", &text[..cut])
    }
}

/// At least [`json_len`] of `v`, without looking at a string's bytes: each character of a
/// string escapes to at most six bytes (`\u001f`), a number to at most 24.
fn json_len_bound(v: &Value) -> usize {
    match v {
        Value::Null | Value::Bool(_) => 5,
        Value::Number(_) => 24,
        Value::String(s) => 2 + 6 * s.len(),
        Value::Array(items) => 2 + items.iter().map(|i| 1 + json_len_bound(i)).sum::<usize>(),
        Value::Object(map) => {
            2 + map
                .iter()
                .map(|(k, v)| 4 + 6 * k.len() + json_len_bound(v))
                .sum::<usize>()
        }
    }
}

/// The length of `v` written as JSON, without writing it.
fn json_len(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = serde_json::to_writer(&mut count, v);
    count.0
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "request_checks_tests.rs"]
mod tests;
