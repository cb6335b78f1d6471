//! Message builders, transcript generators and scripted summarisers for the compaction tests.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::prepare::ContextEntry;
use rampart_message::AgentMessage;
use rampart_message::SharedMessage;

pub(crate) fn user(text: &str) -> AgentMessage {
    AgentMessage::user_text(text, 1_772_355_600_000)
}

pub(crate) fn assistant_blocks(blocks: Vec<Value>, stop: &str) -> AgentMessage {
    serde_json::from_value(json!({
        "role": "assistant",
        "content": blocks,
        "api": "anthropic-messages", "provider": "anthropic", "model": "m",
        "usage": {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15,
                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
        "stopReason": stop, "timestamp": 1_772_355_660_000u64
    }))
    .unwrap()
}

pub(crate) fn assistant(text: &str) -> AgentMessage {
    assistant_blocks(vec![json!({"type": "text", "text": text})], "stop")
}

pub(crate) fn assistant_with_calls(text: &str, calls: &[(&str, &str)]) -> AgentMessage {
    let mut blocks = Vec::new();
    if !text.is_empty() {
        blocks.push(json!({"type": "text", "text": text}));
    }
    for (id, name) in calls {
        blocks.push(json!({"type": "toolCall", "id": id, "name": name, "arguments": {"path": "/tmp/a.txt"}}));
    }
    assistant_blocks(blocks, "toolUse")
}

pub(crate) fn call_with_args(id: &str, name: &str, args: Value) -> AgentMessage {
    assistant_blocks(
        vec![json!({"type": "toolCall", "id": id, "name": name, "arguments": args})],
        "toolUse",
    )
}

pub(crate) fn tool_result(id: &str, name: &str, text: &str) -> AgentMessage {
    AgentMessage::tool_result(id, name, text, false, 1_772_355_700_000)
}

pub(crate) fn tool_error(id: &str, name: &str, text: &str, details: Option<Value>) -> AgentMessage {
    let mut m = AgentMessage::tool_result(id, name, text, true, 1_772_355_700_000);
    if let AgentMessage::ToolResult(r) = &mut m {
        r.details = details;
    }
    m
}

pub(crate) fn summary_message(text: &str) -> AgentMessage {
    serde_json::from_value(json!({
        "role": "compactionSummary", "summary": text, "tokensBefore": 1000, "timestamp": 5
    }))
    .unwrap()
}

pub(crate) fn shared(messages: Vec<AgentMessage>) -> Vec<SharedMessage> {
    messages.into_iter().map(Arc::new).collect()
}

pub(crate) fn entries(messages: Vec<AgentMessage>) -> Vec<ContextEntry> {
    messages
        .into_iter()
        .enumerate()
        .map(|(i, m)| ContextEntry {
            entry_id: format!("{i:08x}"),
            message: Arc::new(m),
        })
        .collect()
}

pub(crate) fn roles(messages: &[SharedMessage]) -> Vec<&str> {
    messages.iter().map(|m| m.role()).collect()
}

/// One generated step of a transcript.
#[derive(Debug, Clone)]
pub(crate) enum Step {
    User(usize),
    Answer(usize),
    /// An assistant with this many calls (0–3), each answered unless its flag says otherwise.
    Calls(Vec<(bool, usize)>),
    Orphan(usize),
}

pub(crate) fn arb_transcript(max_len: usize) -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        3 => (1usize..3000).prop_map(Step::User),
        2 => (1usize..3000).prop_map(Step::Answer),
        3 => prop::collection::vec((prop::bool::weighted(0.9), 1usize..5000), 0..4).prop_map(Step::Calls),
        1 => (1usize..500).prop_map(Step::Orphan),
    ];
    prop::collection::vec(step, 1..max_len)
}

pub(crate) fn build_transcript(steps: &[Step]) -> Vec<AgentMessage> {
    let mut out = Vec::new();
    let mut n = 0usize;
    for step in steps {
        match step {
            Step::User(len) => out.push(user(&"u".repeat(*len))),
            Step::Answer(len) => out.push(assistant(&"a".repeat(*len))),
            Step::Calls(calls) => {
                let ids: Vec<String> = calls
                    .iter()
                    .map(|_| {
                        n += 1;
                        format!("call_{n}")
                    })
                    .collect();
                let pairs: Vec<(&str, &str)> = ids.iter().map(|id| (id.as_str(), "read")).collect();
                out.push(assistant_with_calls("working", &pairs));
                for (id, (answered, len)) in ids.iter().zip(calls) {
                    if *answered {
                        out.push(tool_result(id, "read", &"r".repeat(*len)));
                    }
                }
            }
            Step::Orphan(len) => {
                n += 1;
                out.push(tool_result(
                    &format!("orphan_{n}"),
                    "read",
                    &"o".repeat(*len),
                ));
            }
        }
    }
    out
}

/// The index of the (non-errored) assistant a result at `at` answers: the nearest assistant
/// before it, when that assistant has a call with `id`.
pub(crate) fn caller_index(messages: &[SharedMessage], at: usize, id: &str) -> Option<usize> {
    let i = (0..at)
        .rev()
        .find(|&i| matches!(messages[i].as_ref(), AgentMessage::Assistant(_)))?;
    messages[i].tool_calls().any(|c| c.id == id).then_some(i)
}
