//! Message builders and settings for the pruning unit tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use serde_json::{Value, json};

use super::settings::{EffectiveSettings, HardClear, SoftTrim};
use rampart_message::MessageList;
use rampart_message::{AgentMessage, Content, ContentBlock};

pub(crate) fn user(text: &str) -> AgentMessage {
    serde_json::from_value(json!({"role": "user", "content": text, "timestamp": 1})).unwrap()
}

pub(crate) fn user_blocks(blocks: Vec<Value>) -> AgentMessage {
    serde_json::from_value(json!({"role": "user", "content": blocks, "timestamp": 1})).unwrap()
}

pub(crate) fn assistant(blocks: Vec<Value>) -> AgentMessage {
    serde_json::from_value(json!({
        "role": "assistant",
        "content": blocks,
        "api": "openai-responses", "provider": "openai", "model": "fake",
        "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
        "stopReason": "stop", "timestamp": 2
    }))
    .unwrap()
}

pub(crate) fn answer(text: &str) -> AgentMessage {
    assistant(vec![json!({"type": "text", "text": text})])
}

pub(crate) fn text_block(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

pub(crate) fn image() -> Value {
    json!({"type": "image", "data": "AA==", "mimeType": "image/png"})
}

pub(crate) fn tool_blocks(id: &str, name: &str, blocks: Vec<Value>) -> AgentMessage {
    serde_json::from_value(json!({
        "role": "toolResult", "toolCallId": id, "toolName": name, "content": blocks,
        "details": {"exitCode": 0}, "isError": false, "timestamp": 3
    }))
    .unwrap()
}

pub(crate) fn tool(id: &str, name: &str, text: &str) -> AgentMessage {
    tool_blocks(id, name, vec![text_block(text)])
}

pub(crate) fn list(messages: Vec<AgentMessage>) -> MessageList {
    messages.into_iter().map(Arc::new).collect()
}

/// The tool result answering `id`.
pub(crate) fn find_tool<'a>(
    list: &'a MessageList,
    id: &str,
) -> &'a rampart_message::ToolResultMessage {
    list.iter()
        .find_map(|m| match m.as_ref() {
            AgentMessage::ToolResult(r) if r.tool_call_id == id => Some(r),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no tool result {id}"))
}

/// The first text block of the tool result answering `id` (what OpenClaw's tests read).
pub(crate) fn tool_text(list: &MessageList, id: &str) -> String {
    match &find_tool(list, id).content {
        Content::Text(t) => t.clone(),
        Content::Blocks(blocks) => blocks
            .iter()
            .find_map(|b| match b {
                ContentBlock::Text(t) => Some(t.text.clone()),
                _ => None,
            })
            .unwrap_or_default(),
    }
}

/// OpenClaw's "aggressive" test settings: nothing protected, every threshold at zero,
/// placeholder `[cleared]`, soft trim 10/3/3.
pub(crate) fn aggressive() -> EffectiveSettings {
    EffectiveSettings {
        keep_last_assistants: 0,
        soft_trim_ratio: 0.0,
        hard_clear_ratio: 0.0,
        min_prunable_tool_chars: 0,
        soft_trim: SoftTrim {
            max_chars: 10,
            head_chars: 3,
            tail_chars: 3,
        },
        hard_clear: HardClear {
            enabled: true,
            placeholder: "[cleared]".to_owned(),
        },
        ..EffectiveSettings::default()
    }
}
