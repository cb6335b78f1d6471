//! Message builders for the hygiene unit tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use serde_json::{Value, json};

use rampart_message::MessageList;
use rampart_message::{AgentMessage, ContentBlock, StopReason};

pub(crate) fn user(text: &str) -> AgentMessage {
    AgentMessage::user_text(text, 1)
}

pub(crate) fn assistant_blocks(blocks: Vec<Value>, stop: &str) -> AgentMessage {
    serde_json::from_value(json!({
        "role": "assistant",
        "content": blocks,
        "api": "anthropic-messages", "provider": "anthropic", "model": "m",
        "usage": {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15,
                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
        "stopReason": stop, "timestamp": 2
    }))
    .unwrap()
}

pub(crate) fn call_block(id: &str, name: &str) -> Value {
    json!({"type": "toolCall", "id": id, "name": name, "arguments": {"path": "a"}})
}

pub(crate) fn calls(ids: &[(&str, &str)], stop: &str) -> AgentMessage {
    assistant_blocks(ids.iter().map(|(i, n)| call_block(i, n)).collect(), stop)
}

pub(crate) fn answer(text: &str) -> AgentMessage {
    assistant_blocks(vec![json!({"type": "text", "text": text})], "stop")
}

pub(crate) fn result(id: &str, name: &str) -> AgentMessage {
    AgentMessage::tool_result(id, name, format!("output of {id}"), false, 3)
}

pub(crate) fn list(messages: Vec<AgentMessage>) -> MessageList {
    messages.into_iter().map(Arc::new).collect()
}

pub(crate) fn roles(list: &MessageList) -> Vec<&str> {
    list.iter().map(|m| m.role()).collect()
}

pub(crate) fn result_ids(list: &MessageList) -> Vec<&str> {
    list.iter().filter_map(|m| m.tool_call_id()).collect()
}

pub(crate) fn is_synthetic(message: &AgentMessage) -> bool {
    match message {
        AgentMessage::ToolResult(r) => {
            r.is_error
                && r.content.blocks().iter().any(|b| {
                    matches!(b, ContentBlock::Text(t) if t.text == crate::pairing::SYNTHETIC_RESULT_TEXT)
                })
        }
        _ => false,
    }
}

pub(crate) fn stop_reason(message: &AgentMessage) -> Option<&StopReason> {
    match message {
        AgentMessage::Assistant(a) => Some(&a.stop_reason),
        _ => None,
    }
}
