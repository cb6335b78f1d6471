//! Recognising tool calls and tool results in every spelling a transcript may hold.
//!
//! pi writes tool calls as `toolCall` blocks ([`ContentBlock::ToolCall`]). Transcripts that
//! passed through OpenClaw or were imported from other agents may also carry `toolUse`
//! (Anthropic's shape) or `functionCall` (Google's) blocks; our model keeps those as
//! [`ContentBlock::Other`] maps. The hygiene passes treat all three as tool calls, so a result
//! answering a `toolUse` block is paired instead of being dropped as an orphan.
//! [`crate::pairing::tool_units`] predates this and still looks at `toolCall` blocks only.

use std::collections::HashMap;

use serde_json::{Map, Value};

use rampart_message::{AgentMessage, AssistantMessage, ContentBlock, StopReason};

/// One tool-call block, borrowed, whatever its block type.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallRef<'a> {
    pub(crate) id: &'a str,
    pub(crate) name: &'a str,
}

/// Block types of tool calls we do not model as [`ContentBlock::ToolCall`].
const FOREIGN_CALL_TYPES: [&str; 2] = ["toolUse", "functionCall"];

/// The tool call `block` is, if it is one.
#[inline]
pub(crate) fn call_ref(block: &ContentBlock) -> Option<CallRef<'_>> {
    match block {
        ContentBlock::ToolCall(call) => Some(CallRef {
            id: &call.id,
            name: &call.name,
        }),
        ContentBlock::Other(raw) if is_foreign_call(raw) => Some(CallRef {
            id: str_field(raw, "id"),
            name: str_field(raw, "name"),
        }),
        _ => None,
    }
}

pub(crate) fn is_foreign_call(raw: &Map<String, Value>) -> bool {
    raw.get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| FOREIGN_CALL_TYPES.contains(&t))
}

/// A string field of a raw block, or `""` when it is absent or not a string.
pub(crate) fn str_field<'a>(raw: &'a Map<String, Value>, key: &str) -> &'a str {
    raw.get(key).and_then(Value::as_str).unwrap_or("")
}

/// True for assistant turns the provider adapters leave out of requests, which therefore never
/// get synthetic results.
pub(crate) fn is_errored(assistant: &AssistantMessage) -> bool {
    matches!(
        assistant.stop_reason,
        StopReason::Error | StopReason::Aborted
    )
}

/// True for signed or redacted thinking, which Anthropic verifies byte for byte on replay.
pub(crate) fn is_signed_thinking(block: &ContentBlock) -> bool {
    match block {
        ContentBlock::Thinking(t) => t.thinking_signature.is_some(),
        ContentBlock::Other(raw) => str_field(raw, "type") == "redacted_thinking",
        _ => false,
    }
}

/// True for any thinking block, signed or not.
pub(crate) fn is_thinking(block: &ContentBlock) -> bool {
    match block {
        ContentBlock::Thinking(_) => true,
        ContentBlock::Other(raw) => str_field(raw, "type") == "redacted_thinking",
        _ => false,
    }
}

const INLINE_CALLS: usize = 8;

/// The distinct, non-empty call ids of one assistant message, in order of first appearance.
///
/// Why not a `Vec`: this is filled for every assistant message on every turn, and almost all of
/// them have a handful of calls, so the first eight live inline and one `Calls` is reused across
/// a whole pass ([`Calls::fill`]).
pub(crate) struct Calls<'a> {
    inline: [CallRef<'a>; INLINE_CALLS],
    len: usize,
    /// All calls, once there are more than fit inline.
    spilled: Vec<CallRef<'a>>,
    /// Positions by id, once there are so many calls that linear lookups would be quadratic.
    index: HashMap<&'a str, usize>,
}

/// From this many calls on, lookups go through a hash map.
const INDEXED_CALLS: usize = 32;

impl<'a> Calls<'a> {
    pub(crate) fn new() -> Self {
        Self {
            inline: [CallRef { id: "", name: "" }; INLINE_CALLS],
            len: 0,
            spilled: Vec::new(),
            index: HashMap::new(),
        }
    }

    /// Replaces the list with the calls of `assistant`.
    pub(crate) fn fill(&mut self, assistant: &'a AssistantMessage) {
        self.len = 0;
        self.spilled.clear();
        self.index.clear();
        for call in assistant.content.iter().filter_map(call_ref) {
            if call.id.is_empty() || self.position(call.id).is_some() {
                continue;
            }
            if self.len < INLINE_CALLS {
                self.inline[self.len] = call;
            } else {
                if self.len == INLINE_CALLS {
                    self.spilled.extend_from_slice(&self.inline);
                }
                self.spilled.push(call);
            }
            self.len += 1;
            if self.len == INDEXED_CALLS {
                let calls = self.as_slice().iter().enumerate().map(|(k, c)| (c.id, k));
                self.index = calls.collect();
            } else if self.len > INDEXED_CALLS {
                self.index.insert(call.id, self.len - 1);
            }
        }
    }

    pub(crate) fn as_slice(&self) -> &[CallRef<'a>] {
        if self.len <= INLINE_CALLS {
            &self.inline[..self.len]
        } else {
            &self.spilled
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Where `id` is in the list: a linear search over the usual handful of calls, a hash
    /// lookup for a turn with dozens (so no message makes a pass quadratic).
    #[inline]
    pub(crate) fn position(&self, id: &str) -> Option<usize> {
        if self.len >= INDEXED_CALLS {
            return self.index.get(id).copied();
        }
        self.as_slice().iter().position(|c| c.id == id)
    }
}

/// Whether `s` is empty or only whitespace, without decoding it in the common case (a string
/// that starts with a visible ASCII character).
#[inline]
pub(crate) fn is_blank(s: &str) -> bool {
    match s.as_bytes().first() {
        None => true,
        Some(b) if b.is_ascii() && !b.is_ascii_whitespace() => false,
        Some(_) => s.trim().is_empty(),
    }
}

/// Keys under which raw (unmodelled) tool results carry the id of the call they answer.
const RESULT_ID_KEYS: [&str; 6] = [
    "toolCallId",
    "toolUseId",
    "tool_use_id",
    "tool_call_id",
    "callId",
    "call_id",
];

fn raw_result_id(raw: &Map<String, Value>) -> Option<&str> {
    RESULT_ID_KEYS
        .iter()
        .find_map(|k| raw.get(*k).and_then(Value::as_str))
        .filter(|id| !id.is_empty())
}

fn raw_result_name(raw: &Map<String, Value>) -> Option<&str> {
    ["toolName", "name"]
        .iter()
        .find_map(|k| raw.get(*k).and_then(Value::as_str))
}

/// Calls `f(id, recorded tool name)` for every tool result `message` carries: a `toolResult`
/// message, a raw message with role `tool`/`toolResult`, or `toolResult`/`tool_result` blocks
/// inside a user message (Anthropic's wire shape, as some imports store it).
pub(crate) fn for_each_result<'a>(
    message: &'a AgentMessage,
    mut f: impl FnMut(&'a str, Option<&'a str>),
) {
    match message {
        AgentMessage::ToolResult(r) if !r.tool_call_id.is_empty() => {
            f(&r.tool_call_id, Some(&r.tool_name));
        }
        AgentMessage::Other(raw) if matches!(str_field(raw, "role"), "tool" | "toolResult") => {
            if let Some(id) = raw_result_id(raw) {
                f(id, raw_result_name(raw));
            }
        }
        AgentMessage::User(u) => {
            for block in u.content.blocks() {
                if let ContentBlock::Other(raw) = block
                    && matches!(str_field(raw, "type"), "toolResult" | "tool_result")
                    && let Some(id) = raw_result_id(raw)
                {
                    f(id, raw_result_name(raw));
                }
            }
        }
        _ => {}
    }
}

/// Index of the next assistant message at or after `from`, or `messages.len()`.
pub(crate) fn next_assistant<M: std::borrow::Borrow<AgentMessage>>(
    messages: &[M],
    from: usize,
) -> usize {
    messages
        .get(from..)
        .and_then(|rest| {
            rest.iter()
                .position(|m| matches!(m.borrow(), AgentMessage::Assistant(_)))
        })
        .map_or(messages.len(), |p| from + p)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::hygiene::test_support::assistant_blocks;

    #[test]
    fn calls_are_distinct_in_order_inline_and_spilled() {
        for n in [0usize, 3, 8, 9, 31, 32, 33, 100] {
            let mut blocks = Vec::new();
            for k in 0..n {
                let call = |id: String| serde_json::json!({"type": "toolCall", "id": id, "name": "read", "arguments": {}});
                blocks.push(call(format!("c{k}")));
                // A repeated id and an empty one are skipped.
                blocks.push(call(format!("c{}", k / 2)));
                blocks.push(call(String::new()));
            }
            let message = assistant_blocks(blocks, "toolUse");
            let rampart_message::AgentMessage::Assistant(a) = &message else {
                panic!("not an assistant")
            };
            let mut calls = Calls::new();
            calls.fill(a);
            assert_eq!(calls.len(), n);
            for k in 0..n {
                assert_eq!(calls.as_slice()[k].id, format!("c{k}"));
                assert_eq!(calls.position(&format!("c{k}")), Some(k), "{n} calls");
            }
            assert_eq!(calls.position("nope"), None);
            // Refilling with a short list forgets the long one.
            let short = assistant_blocks(
                vec![
                    serde_json::json!({"type": "toolCall", "id": "x", "name": "read", "arguments": {}}),
                ],
                "toolUse",
            );
            let rampart_message::AgentMessage::Assistant(short) = &short else {
                panic!("not an assistant")
            };
            calls.fill(short);
            assert_eq!(calls.len(), 1);
            assert_eq!(calls.position("x"), Some(0));
            assert_eq!(calls.position("c0"), None);
        }
    }

    #[test]
    fn blank_means_empty_or_whitespace() {
        assert!(is_blank(""));
        assert!(is_blank(" \t"));
        assert!(is_blank("\u{3000}"));
        assert!(!is_blank("a"));
        assert!(!is_blank(" a"));
        assert!(!is_blank("é"));
    }
}
