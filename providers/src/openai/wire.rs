//! The OpenAI chat-completions wire form of pi messages: what an OpenAI-compatible provider
//! receives, and what `sessions export --format openai` writes.

use rampart_engine_api::AgentMessage;
use rampart_message::{Content, ContentBlock};
use serde_json::{Value, json};

use crate::text::{as_user_text, content_text, other_block_text};
use rampart_sessions::import::api_request::chat_fields;

/// OpenAI content for a user turn in the form the message holds it: a string stays a string,
/// blocks become content parts (a client that sent a list of text parts gets a list back, so a
/// chat upstream receives the message as the client wrote it and its prompt cache sees the same
/// bytes on every turn).
fn user_content(content: &Content) -> Value {
    match content {
        Content::Text(t) => Value::String(t.clone()),
        // No parts at all (a `null` content read as none): servers refuse an empty list.
        Content::Blocks(blocks) if blocks.is_empty() => Value::String(String::new()),
        Content::Blocks(blocks) => Value::Array(
            blocks
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Text(t) => Some(json!({"type": "text", "text": t.text})),
                    ContentBlock::Image(i) => Some(json!({
                        "type": "image_url",
                        "image_url": {"url": format!("data:{};base64,{}", i.mime_type, i.data)}
                    })),
                    ContentBlock::Other(block) => {
                        Some(json!({"type": "text", "text": other_block_text(block)}))
                    }
                    // A user turn holds no thinking or tool calls; should one, there is no
                    // user form for it.
                    ContentBlock::Thinking(_) | ContentBlock::ToolCall(_) => None,
                })
                .collect(),
        ),
    }
}

/// A tool call's arguments as the JSON text chat completions carries them (what `to_string`
/// writes, through the one compact writer instead of the formatter's byte-by-byte adapter).
fn arguments_text(arguments: &Value) -> String {
    rampart_sessions::compact_json::to_string(arguments).unwrap_or_else(|_| arguments.to_string())
}

/// One message in OpenAI chat-completions form. Roles chat-completions lacks (bash runs,
/// summaries, custom messages) become user messages that say what they are, so the model sees
/// everything the transcript holds.
pub fn to_openai_message(message: &AgentMessage) -> Value {
    let mut out = openai_message_fields(message);
    // The message-level fields a chat client sent that pi's message has no place for, back
    // where the client wrote them (never over a field written above).
    if let Some(fields) = chat_fields(message)
        && let Some(out) = out.as_object_mut()
    {
        for (key, value) in fields {
            out.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
    out
}

fn openai_message_fields(message: &AgentMessage) -> Value {
    match message {
        AgentMessage::User(m) => json!({"role": "user", "content": user_content(&m.content)}),
        AgentMessage::Assistant(m) => {
            let mut text = Vec::new();
            let mut reasoning = Vec::new();
            let mut calls = Vec::new();
            for block in &m.content {
                match block {
                    ContentBlock::Text(t) => text.push(t.text.clone()),
                    ContentBlock::Thinking(t) => reasoning.push(t.thinking.clone()),
                    ContentBlock::ToolCall(c) => calls.push(json!({
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": arguments_text(&c.arguments)},
                    })),
                    _ => {}
                }
            }
            let mut out = json!({
                "role": "assistant",
                "content": if text.is_empty() { Value::Null } else { Value::String(text.join("\n")) },
            });
            if !reasoning.is_empty() {
                out["reasoning_content"] = Value::String(reasoning.join("\n"));
            }
            if !calls.is_empty() {
                out["tool_calls"] = Value::Array(calls);
            }
            out
        }
        AgentMessage::ToolResult(m) => json!({
            "role": "tool",
            "tool_call_id": m.tool_call_id,
            "content": content_text(&m.content),
        }),
        other => json!({"role": "user", "content": as_user_text(other).unwrap_or_default()}),
    }
}

/// A whole branch as an OpenAI `messages` array.
pub fn to_openai_messages<'a>(messages: impl IntoIterator<Item = &'a AgentMessage>) -> Value {
    Value::Array(messages.into_iter().map(to_openai_message).collect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn tool_calls_and_results_map_to_openai_fields() {
        let call: AgentMessage = serde_json::from_value(json!({
            "role": "assistant",
            "content": [{"type": "thinking", "thinking": "hmm"},
                        {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a"}}],
            "api": "x", "provider": "x", "model": "m",
            "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                      "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
            "stopReason": "toolUse", "timestamp": 0
        }))
        .unwrap();
        let result = AgentMessage::tool_result("c1", "read", "body", false, 0);
        let out = to_openai_messages([&call, &result]);
        assert_eq!(
            out[0]["tool_calls"][0]["function"]["arguments"],
            r#"{"path":"a"}"#
        );
        assert_eq!(out[0]["content"], Value::Null);
        assert_eq!(out[0]["reasoning_content"], "hmm");
        assert_eq!(
            out[1],
            json!({"role": "tool", "tool_call_id": "c1", "content": "body"})
        );
    }
}
