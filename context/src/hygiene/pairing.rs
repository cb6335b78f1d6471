//! Tool-call pairing helpers engines share: which messages must travel together, and the repair
//! that restores the pairing when something broke it.
//!
//! A provider rejects a request whose tool result has no matching tool call before it (or a
//! call without its result), so any engine that drops or selects messages must treat an
//! assistant message and the tool results answering it as one unit ([`tool_units`]), and the
//! host repairs whatever an engine returned before every request
//! ([`repair_tool_use_result_pairing`], run by [`crate::hygiene::run`]).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::builder::ListBuilder;
use super::calls::{Calls, is_blank, is_errored, next_assistant};
use super::report::PassReport;
use rampart_message::{AgentMessage, MessageList, ToolResultMessage};

/// Defined in the engine API, where an engine without this library finds it too.
pub use rampart_engine_api::pairing::tool_units;

/// What happens to the real results of an assistant turn that ended in `error` or `aborted`.
///
/// Why a choice: provider adapters leave such turns out of the request, so their results are
/// orphans on the wire (`Drop`); but before the history is limited, keeping them (`Preserve`)
/// loses nothing that a later pass may still want.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ErroredAssistantPolicy {
    /// Keep the matching results, placed right after the turn in call order.
    #[default]
    Preserve,
    /// Drop the matching results too.
    Drop,
}

/// The text of the error result inserted for a tool call that has no result.
///
/// Why it says this: the model reads it on the next turn, and should learn that the call did
/// not produce output rather than guess at what it returned.
pub const SYNTHETIC_RESULT_TEXT: &str = "Tool result missing: no output was recorded for this \
     call, so an error result was inserted here to keep the transcript valid.";

/// What [`repair_tool_use_result_pairing`] changed, so the host can report it (and tests can
/// check it) without diffing transcripts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PairingReport {
    /// Real results placed somewhere else than where they were: after a non-result message of
    /// their span, or out of call order.
    pub moved: usize,
    /// Ids of the calls that received a synthetic error result, in output order.
    pub added: Vec<String>,
    /// Second and later results for the same call of the same turn, dropped.
    pub dropped_duplicates: usize,
    /// Results that answer no call of the assistant turn they follow (or that precede every
    /// assistant turn), dropped.
    pub dropped_orphans: usize,
    /// Results of `error`/`aborted` turns dropped under [`ErroredAssistantPolicy::Drop`].
    pub dropped_errored_results: usize,
    /// Results whose blank tool name was filled in from their call.
    pub renamed: usize,
}

impl PassReport for PairingReport {
    fn changed(&self) -> bool {
        self.moved > 0
            || !self.added.is_empty()
            || self.dropped_duplicates > 0
            || self.dropped_orphans > 0
            || self.dropped_errored_results > 0
            || self.renamed > 0
    }

    fn absorb(&mut self, other: Self) {
        self.moved += other.moved;
        self.added.extend(other.added);
        self.dropped_duplicates += other.dropped_duplicates;
        self.dropped_orphans += other.dropped_orphans;
        self.dropped_errored_results += other.dropped_errored_results;
        self.renamed += other.renamed;
    }
}

/// Marks a call without a result in its span.
const NO_RESULT: usize = usize::MAX;
/// Calls whose first-result positions live on the stack.
const INLINE_FIRST: usize = 8;

/// Puts every tool result right after the assistant turn that called it, in call order, and
/// makes the transcript one a provider accepts:
///
/// - a turn's span runs to the next assistant message; the first result in the span for each
///   of the turn's call ids is kept, later ones are duplicates and dropped;
/// - results in a span that answer none of its calls, and results before any assistant turn
///   with calls, are orphans and dropped;
/// - a call without a result gets a synthetic error result ([`SYNTHETIC_RESULT_TEXT`]), except
///   in `error`/`aborted` turns, whose real results follow `policy`;
/// - a result with a blank tool name takes its call's name;
/// - the span's other messages (user, custom, …) follow the results, in their order.
///
/// Results are matched per turn: providers that number calls `call_0`, `call_1`, … afresh in
/// every turn still pair correctly. (OpenClaw checks duplicates over the whole transcript, which
/// strips the later turn's results in that case.) Calls in every block spelling count
/// (`toolCall`, `toolUse`, `functionCall`); calls with an empty id cannot be paired and are
/// left to [`crate::hygiene::sanitize_tool_call_inputs`]. A call id repeated within one turn is
/// answered once.
///
/// Returns `input` itself when nothing changes; otherwise unchanged messages are shared with it.
pub fn repair_tool_use_result_pairing(
    input: &MessageList,
    policy: ErroredAssistantPolicy,
) -> (MessageList, PairingReport) {
    let (out, report, _) = repair(input, policy);
    (out, report)
}

/// [`repair_tool_use_result_pairing`], also counting the results of `error`/`aborted` turns it
/// kept: when there are none, repairing the output again under
/// [`ErroredAssistantPolicy::Drop`] would change nothing, and [`crate::hygiene::run`] skips it.
pub(crate) fn repair(
    input: &MessageList,
    policy: ErroredAssistantPolicy,
) -> (MessageList, PairingReport, usize) {
    let mut kept_errored = 0;
    let messages: &[Arc<AgentMessage>] = input;
    let mut out = ListBuilder::new(input);
    let mut report = PairingReport::default();
    let mut calls = Calls::new();
    let mut i = 0;
    while i < messages.len() {
        let assistant = match messages[i].as_ref() {
            AgentMessage::Assistant(a) => a,
            AgentMessage::ToolResult(_) => {
                report.dropped_orphans += 1;
                i += 1;
                continue;
            }
            _ => {
                out.keep(i);
                i += 1;
                continue;
            }
        };
        calls.fill(assistant);
        let end = next_assistant(messages, i + 1);
        out.keep(i);
        if calls.is_empty() {
            // Whatever results follow answer nothing: the loop drops them as orphans.
            i += 1;
            continue;
        }
        let errored = is_errored(assistant);
        let drop_results = errored && policy == ErroredAssistantPolicy::Drop;

        // First result in the span for each call; the common case fits on the stack.
        let mut inline = [NO_RESULT; INLINE_FIRST];
        let mut spilled = Vec::new();
        let first: &mut [usize] = if calls.len() <= inline.len() {
            &mut inline[..calls.len()]
        } else {
            spilled.resize(calls.len(), NO_RESULT);
            &mut spilled
        };
        let mut first_other = end;
        for (j, message) in messages.iter().enumerate().take(end).skip(i + 1) {
            match message.as_ref() {
                AgentMessage::ToolResult(r) => {
                    if let Some(k) = calls.position(&r.tool_call_id)
                        && first[k] == NO_RESULT
                    {
                        first[k] = j;
                    }
                }
                _ => first_other = first_other.min(j),
            }
        }

        let mut furthest = i;
        for (k, call) in calls.as_slice().iter().enumerate() {
            let j = first[k];
            if j == NO_RESULT {
                if !errored {
                    out.push(Arc::new(AgentMessage::tool_result(
                        call.id,
                        call.name,
                        SYNTHETIC_RESULT_TEXT,
                        true,
                        assistant.timestamp,
                    )));
                    report.added.push(call.id.to_owned());
                }
                continue;
            }
            if drop_results {
                continue;
            }
            if errored {
                kept_errored += 1;
            }
            if j > first_other || j < furthest {
                report.moved += 1;
            }
            furthest = furthest.max(j);
            match messages[j].as_ref() {
                AgentMessage::ToolResult(r) if is_blank(&r.tool_name) && !is_blank(call.name) => {
                    report.renamed += 1;
                    out.push(Arc::new(AgentMessage::ToolResult(with_name(r, call.name))));
                }
                _ => out.keep(j),
            }
        }

        for (j, message) in messages.iter().enumerate().take(end).skip(i + 1) {
            let AgentMessage::ToolResult(r) = message.as_ref() else {
                out.keep(j);
                continue;
            };
            // Whether this is the kept result of a call (already placed above). For the usual
            // handful of calls, comparing positions is cheaper than comparing ids again.
            let kept = if first.len() <= INLINE_FIRST {
                first.contains(&j)
            } else {
                calls
                    .position(&r.tool_call_id)
                    .is_some_and(|k| first[k] == j)
            };
            if kept {
                if drop_results {
                    report.dropped_errored_results += 1;
                }
            } else if calls.position(&r.tool_call_id).is_some() {
                report.dropped_duplicates += 1;
            } else {
                report.dropped_orphans += 1;
            }
        }
        i = end;
    }
    (out.finish(), report, kept_errored)
}

fn with_name(result: &ToolResultMessage, name: &str) -> ToolResultMessage {
    ToolResultMessage {
        tool_name: name.to_owned(),
        ..result.clone()
    }
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

    // Reference cases (openclaw-behaviour.md §13 item 5) and our own additions.

    use crate::hygiene::test_support::{
        answer, assistant_blocks, calls, is_synthetic, list, result, result_ids, roles, user,
    };
    use rampart_message::MessageList;
    use serde_json::json;

    fn repair(input: &MessageList) -> (MessageList, PairingReport) {
        repair_tool_use_result_pairing(input, ErroredAssistantPolicy::Preserve)
    }

    #[test]
    fn a_missing_result_is_synthesised_and_a_late_one_moved_before_the_user() {
        let input = list(vec![
            calls(&[("call_1", "read"), ("call_2", "exec")], "toolUse"),
            user("u"),
            result("call_2", "exec"),
        ]);
        let (out, report) = repair(&input);
        assert_eq!(
            roles(&out),
            ["assistant", "toolResult", "toolResult", "user"]
        );
        assert_eq!(result_ids(&out), ["call_1", "call_2"]);
        assert!(is_synthetic(&out[1]));
        let AgentMessage::ToolResult(synthetic) = out[1].as_ref() else {
            panic!("not a result")
        };
        assert_eq!(synthetic.tool_name, "read");
        assert!(Arc::ptr_eq(&out[2], &input[2]));
        assert!(Arc::ptr_eq(&out[3], &input[1]));
        assert_eq!(report.added, ["call_1"]);
        assert_eq!(report.moved, 1);
        assert_eq!(report.dropped_orphans, 0);
        assert!(report.changed());
    }

    #[test]
    fn a_free_floating_result_is_an_orphan() {
        let input = list(vec![user("u"), result("orphan", "read"), answer("a")]);
        let (out, report) = repair(&input);
        assert_eq!(roles(&out), ["user", "assistant"]);
        assert_eq!(report.dropped_orphans, 1);
    }

    #[test]
    fn an_errored_turn_gets_no_synthetic_result() {
        let input = list(vec![calls(&[("call_1", "read")], "error"), user("u")]);
        let (out, report) = repair(&input);
        assert_eq!(out.len(), 2);
        assert!(report.added.is_empty());
        assert!(MessageList::same_list(&out, &input));
    }

    #[test]
    fn an_aborted_turns_result_follows_the_policy() {
        let input = list(vec![
            calls(&[("call_1", "read")], "aborted"),
            result("call_1", "read"),
            user("u"),
        ]);
        let (kept, report) =
            repair_tool_use_result_pairing(&input, ErroredAssistantPolicy::Preserve);
        assert_eq!(kept.len(), 3);
        assert!(MessageList::same_list(&kept, &input));
        assert_eq!(report.dropped_orphans, 0);

        let (dropped, report) =
            repair_tool_use_result_pairing(&input, ErroredAssistantPolicy::Drop);
        assert_eq!(roles(&dropped), ["assistant", "user"]);
        assert_eq!(report.dropped_orphans, 0);
        assert_eq!(report.dropped_errored_results, 1);
        assert!(report.added.is_empty());
    }

    #[test]
    fn duplicate_results_keep_only_the_first() {
        let input = list(vec![
            calls(&[("call_1", "read")], "toolUse"),
            result("call_1", "read"),
            result("call_1", "read"),
            user("u"),
        ]);
        let (out, report) = repair(&input);
        assert_eq!(roles(&out), ["assistant", "toolResult", "user"]);
        assert!(Arc::ptr_eq(&out[1], &input[1]));
        assert_eq!(report.dropped_duplicates, 1);
    }

    #[test]
    fn a_blank_result_name_takes_the_calls_name() {
        let input = list(vec![
            calls(&[("call_1", "read")], "toolUse"),
            result("call_1", "   "),
        ]);
        let (out, report) = repair(&input);
        let AgentMessage::ToolResult(r) = out[1].as_ref() else {
            panic!("not a result")
        };
        assert_eq!(r.tool_name, "read");
        assert_eq!(report.renamed, 1);
        // The input message is untouched: the renamed result is a new allocation.
        let AgentMessage::ToolResult(original) = input[1].as_ref() else {
            panic!("not a result")
        };
        assert_eq!(original.tool_name, "   ");
    }

    #[test]
    fn a_clean_transcript_comes_back_as_the_same_list() {
        let input = list(vec![
            user("u"),
            calls(&[("a", "read"), ("b", "exec")], "toolUse"),
            result("a", "read"),
            result("b", "exec"),
            answer("done"),
        ]);
        let (out, report) = repair(&input);
        assert!(MessageList::same_list(&out, &input));
        assert_eq!(report, PairingReport::default());
        assert!(!report.changed());
    }

    #[test]
    fn ids_reused_by_a_later_turn_pair_with_that_turn() {
        let input = list(vec![
            calls(&[("call_0", "read")], "toolUse"),
            result("call_0", "read"),
            calls(&[("call_0", "exec")], "toolUse"),
            result("call_0", "exec"),
            answer("done"),
        ]);
        let (out, _) = repair(&input);
        assert!(MessageList::same_list(&out, &input));
    }

    #[test]
    fn results_out_of_call_order_are_reordered() {
        let input = list(vec![
            calls(&[("a", "read"), ("b", "exec")], "toolUse"),
            result("b", "exec"),
            result("a", "read"),
        ]);
        let (out, report) = repair(&input);
        assert_eq!(result_ids(&out), ["a", "b"]);
        assert_eq!(report.moved, 1);
    }

    #[test]
    fn tool_use_blocks_are_calls_too() {
        let input = list(vec![
            assistant_blocks(
                vec![json!({"type": "toolUse", "id": "tu_1", "name": "read", "input": {}})],
                "toolUse",
            ),
            user("u"),
            result("tu_1", "read"),
        ]);
        let (out, report) = repair(&input);
        assert_eq!(roles(&out), ["assistant", "toolResult", "user"]);
        assert_eq!(report.dropped_orphans, 0);
        assert!(report.added.is_empty());
    }

    #[test]
    fn a_result_after_an_assistant_without_calls_is_an_orphan() {
        let input = list(vec![
            calls(&[("a", "read")], "toolUse"),
            result("a", "read"),
            answer("done"),
            result("a", "read"),
        ]);
        let (out, report) = repair(&input);
        assert_eq!(roles(&out), ["assistant", "toolResult", "assistant"]);
        assert_eq!(report.dropped_orphans, 1);
    }

    #[test]
    fn the_report_serialises_for_events() {
        let input = list(vec![calls(&[("call_1", "read")], "toolUse")]);
        let (_, report) = repair(&input);
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["added"], json!(["call_1"]));
        assert_eq!(json["droppedOrphans"], json!(0));
    }
}
