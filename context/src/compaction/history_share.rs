//! History-share pruning (`pruneHistoryForContextShare`): when the history to summarise is far
//! larger than the summariser's window share, its oldest parts are set aside (and summarised
//! separately by the orchestrator) so the main summary is built from what is most recent.

use std::collections::HashSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::split::{normalize_parts, split_by_token_share};
use crate::pairing::{ErroredAssistantPolicy, repair_tool_use_result_pairing};
use crate::tokens::TokenCounter;
use rampart_message::AgentMessage;
use rampart_message::{MessageList, SharedMessage};

/// What [`prune_history_for_context_share`] did, in the reference's terms.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct HistoryShareReport {
    /// Oldest parts set aside.
    pub dropped_chunks: usize,
    /// Messages set aside: those parts plus results the pairing repair removed from the rest.
    pub dropped_messages: usize,
    /// Tokens of the messages set aside.
    pub dropped_tokens: u64,
    /// Tokens of what remains.
    pub kept_tokens: u64,
    /// The budget: `max(1, floor(window · share))`.
    pub budget_tokens: u64,
}

/// The result: what remains, what was set aside (oldest first), and the report.
#[derive(Debug, Clone, Default)]
pub struct HistoryShare {
    /// The remaining history, pairing-repaired.
    pub messages: Vec<SharedMessage>,
    /// Every message set aside, in order. Why a list and not only counts: the orchestrator
    /// summarises them separately, so nothing set aside is lost.
    pub dropped: Vec<SharedMessage>,
    /// The counts.
    pub report: HistoryShareReport,
}

/// While `messages` exceed `max(1, floor(max_context_tokens · max_history_share))` tokens,
/// splits them into `parts` by token share ([`split_by_token_share`], so a tool call never
/// leaves its results behind), sets the first part aside, and repairs the pairing of the rest.
///
/// One deliberate difference from OpenClaw: results the repair removes from the rest (orphans,
/// duplicates) are added to the set-aside list, not only counted, so they reach the separate
/// summary instead of vanishing; the list's length therefore always equals
/// `dropped_messages`.
pub fn prune_history_for_context_share(
    messages: &[SharedMessage],
    max_context_tokens: u64,
    max_history_share: f64,
    parts: usize,
    counter: &TokenCounter,
) -> HistoryShare {
    let budget = ((max_context_tokens as f64 * max_history_share).floor() as u64).max(1);
    let mut kept: Vec<SharedMessage> = messages.to_vec();
    let mut dropped = Vec::new();
    let mut report = HistoryShareReport {
        budget_tokens: budget,
        ..HistoryShareReport::default()
    };
    let parts = normalize_parts(parts, kept.len());
    while !kept.is_empty() && counter.count_total(&kept) > budget {
        let ranges = split_by_token_share(&kept, parts, counter);
        let Some(first) = ranges.first().filter(|_| ranges.len() > 1).cloned() else {
            break;
        };
        let rest: MessageList = kept[first.end..].to_vec().into();
        let (repaired, _) = repair_tool_use_result_pairing(&rest, ErroredAssistantPolicy::Preserve);
        let removed = removed_by_repair(&rest, &repaired);
        let chunk = &kept[first];
        report.dropped_chunks += 1;
        report.dropped_messages += chunk.len() + removed.len();
        report.dropped_tokens = report
            .dropped_tokens
            .saturating_add(counter.count_total(chunk))
            .saturating_add(counter.count_total(&removed));
        dropped.extend_from_slice(chunk);
        dropped.extend(removed);
        kept = repaired.to_vec();
    }
    report.kept_tokens = counter.count_total(&kept);
    HistoryShare {
        messages: kept,
        dropped,
        report,
    }
}

/// The messages of `input` the repair left out of `output`. A result it only renamed (a new
/// allocation answering the same call) is not removed.
fn removed_by_repair(input: &MessageList, output: &MessageList) -> Vec<SharedMessage> {
    if MessageList::same_list(input, output) {
        return Vec::new();
    }
    let kept: HashSet<*const AgentMessage> = output.iter().map(Arc::as_ptr).collect();
    let inputs: HashSet<*const AgentMessage> = input.iter().map(Arc::as_ptr).collect();
    let new_result_ids: HashSet<&str> = output
        .iter()
        .filter(|m| !inputs.contains(&Arc::as_ptr(m)))
        .filter_map(|m| m.tool_call_id())
        .collect();
    input
        .iter()
        .filter(|m| !kept.contains(&Arc::as_ptr(m)))
        .filter(|m| {
            !m.tool_call_id()
                .is_some_and(|id| new_result_ids.contains(id))
        })
        .cloned()
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::compaction::test_support::*;

    fn stamped(text: &str, ts: u64) -> AgentMessage {
        AgentMessage::user_text(text, ts)
    }

    #[test]
    fn drops_oldest_parts_until_the_history_fits() {
        // §13 group 8: 4 users of 4000 chars, ctx 2000, share 0.5.
        let msgs = shared(
            (0..4)
                .map(|i| stamped(&"x".repeat(4000), 100 + i))
                .collect(),
        );
        let counter = TokenCounter::estimate();
        let out = prune_history_for_context_share(&msgs, 2000, 0.5, 2, &counter);
        assert!(out.report.dropped_chunks > 0);
        assert!(out.report.kept_tokens <= 1000);
        assert_eq!(out.report.budget_tokens, 1000);
        assert_eq!(out.dropped.len(), out.report.dropped_messages);
        let mut all: Vec<u64> = out
            .dropped
            .iter()
            .chain(&out.messages)
            .filter_map(|m| m.timestamp())
            .collect();
        all.sort_unstable();
        assert_eq!(all, vec![100, 101, 102, 103]);
    }

    #[test]
    fn a_small_history_is_left_alone() {
        // §13 group 8: one message of 1000 chars with ctx 2000.
        let msgs = shared(vec![stamped(&"x".repeat(1000), 1)]);
        let counter = TokenCounter::estimate();
        let out = prune_history_for_context_share(&msgs, 2000, 0.5, 2, &counter);
        assert_eq!(out.report.dropped_chunks, 0);
        assert_eq!(out.report.kept_tokens, 250);
        assert!(out.dropped.is_empty());
    }

    #[test]
    fn orphans_left_by_the_cut_are_set_aside_not_lost() {
        let msgs = shared(vec![
            user(&"x".repeat(4000)),
            user(&"y".repeat(4000)),
            tool_result("stray", "read", "late output"),
            user(&"z".repeat(400)),
        ]);
        let counter = TokenCounter::estimate();
        let out = prune_history_for_context_share(&msgs, 2000, 0.5, 2, &counter);
        assert_eq!(out.dropped.len(), out.report.dropped_messages);
        assert!(
            out.dropped
                .iter()
                .any(|m| m.tool_call_id() == Some("stray"))
        );
        assert!(out.messages.iter().all(|m| m.tool_call_id().is_none()));
    }
}
