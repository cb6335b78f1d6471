//! Tool-call pairing helpers engines share: which messages must travel together.
//!
//! A provider rejects a request whose tool result has no matching tool call before it (or a
//! call without its result), so any engine that drops or selects messages must treat an
//! assistant message and the tool results answering it as one unit.

use std::borrow::Borrow;
use std::ops::Range;

use crate::message::AgentMessage;

/// Splits `messages` into units that must not be separated: an assistant message with tool
/// calls together with the tool results directly after it that answer those calls; every other
/// message is a unit of its own. The ranges cover `messages` in order, without gaps.
/// Works on owned messages and on shared ones (`Arc<AgentMessage>`).
pub fn tool_units<M: Borrow<AgentMessage>>(messages: &[M]) -> Vec<Range<usize>> {
    let mut units = Vec::with_capacity(messages.len());
    let mut i = 0;
    while i < messages.len() {
        let start = i;
        i += 1;
        let opener = messages[start].borrow();
        // No allocation per message: this runs over the whole history every turn.
        if opener.tool_calls().next().is_some() {
            while i < messages.len() {
                match messages[i].borrow().tool_call_id() {
                    Some(id) if opener.tool_calls().any(|c| c.id == id) => i += 1,
                    _ => break,
                }
            }
        }
        units.push(start..i);
    }
    units
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn call(id: &str) -> AgentMessage {
        serde_json::from_value(serde_json::json!({
            "role": "assistant",
            "content": [{"type": "toolCall", "id": id, "name": "read", "arguments": {}}],
            "api": "x", "provider": "x", "model": "x",
            "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                      "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
            "stopReason": "toolUse", "timestamp": 0
        }))
        .unwrap()
    }

    #[test]
    fn assistant_and_its_results_form_one_unit() {
        let msgs = vec![
            AgentMessage::user_text("hi", 0),
            call("a"),
            AgentMessage::tool_result("a", "read", "r", false, 0),
            AgentMessage::tool_result("zzz", "read", "orphan", false, 0),
            AgentMessage::user_text("next", 0),
        ];
        assert_eq!(tool_units(&msgs), vec![0..1, 1..3, 3..4, 4..5]);
    }
}
