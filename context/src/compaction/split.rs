//! Splitting history for summarisation: by token share into parts, by a token limit into
//! chunks, and the ratios that size them (OpenClaw's `compaction.ts` helpers).
//!
//! Everything returns index ranges into the caller's slice rather than copies: the ranges are
//! contiguous, cover the input in order, and make "order is preserved" true by construction.

use std::ops::Range;

use crate::hygiene::calls::{call_ref, is_errored};
use crate::tokens::TokenCounter;
use rampart_message::AgentMessage;
use rampart_message::SharedMessage;

/// The chunk ratio for ordinary messages: a chunk may use 40% of the summariser's window.
pub const BASE_CHUNK_RATIO: f64 = 0.4;
/// The smallest chunk ratio, for histories of very large messages.
pub const MIN_CHUNK_RATIO: f64 = 0.15;
/// Headroom for estimate error: estimates are multiplied (or limits divided) by 1.2.
pub const SAFETY_MARGIN: f64 = 1.2;
/// The default number of parts (re-exported from the settings for the reference's name).
pub const DEFAULT_PARTS: usize = super::settings::DEFAULT_PARTS;
/// Tokens held back from a chunk for the prompt, the instructions and the previous summary.
pub const SUMMARIZATION_OVERHEAD_TOKENS: u64 = 4_096;
/// What a summary of nothing says.
pub const DEFAULT_SUMMARY_FALLBACK: &str = "No prior history.";

/// How many parts to split `message_count` messages into: 1 for `parts` ≤ 1, otherwise
/// `parts`, but never more parts than messages.
pub fn normalize_parts(parts: usize, message_count: usize) -> usize {
    if parts <= 1 {
        return 1;
    }
    parts.min(message_count.max(1))
}

/// Splits `messages` into at most `parts` contiguous ranges of about equal tokens, never
/// separating an assistant's tool calls from their results.
///
/// The rules are OpenClaw's `splitMessagesByTokenShare`: a new range starts before a message
/// that would take the current one over `total / parts`, unless calls are pending; after an
/// assistant with calls (not `error`/`aborted`), its range start is remembered, results clear
/// the pending ids, and when the last one arrives with the range over target the range is cut
/// *before the assistant* so the pair moves on together. A result without an id clears the
/// pending calls. At the end, calls still pending with the range over target also cut there.
pub fn split_by_token_share(
    messages: &[SharedMessage],
    parts: usize,
    counter: &TokenCounter,
) -> Vec<Range<usize>> {
    if messages.is_empty() {
        return Vec::new();
    }
    let per = counter.count_messages(messages).per_message;
    split_by_cost_share(messages, parts, &per)
}

/// [`split_by_token_share`] with the size of each message given (`costs[i]` for
/// `messages[i]`). Why: the orchestrator balances parts by what each message costs *in the
/// summarisation request* (tool results are cut to 2,000 characters there), not by its size
/// in the context.
pub fn split_by_cost_share(
    messages: &[SharedMessage],
    parts: usize,
    costs: &[u64],
) -> Vec<Range<usize>> {
    if messages.is_empty() {
        return Vec::new();
    }
    let parts = normalize_parts(parts, messages.len());
    if parts <= 1 {
        return std::iter::once(0..messages.len()).collect();
    }
    let per = |i: usize| costs.get(i).copied().unwrap_or(0);
    let per_slice = |r: Range<usize>| r.map(per).fold(0u64, |a, t| a.saturating_add(t));
    let total: u64 = per_slice(0..messages.len());
    let target = total as f64 / parts as f64;

    let mut ranges: Vec<Range<usize>> = Vec::with_capacity(parts);
    let mut start = 0usize;
    let mut current = 0u64;
    let mut pending: Vec<&str> = Vec::new();
    // Absolute index of the assistant whose calls are pending.
    let mut pending_start: Option<usize> = None;

    // Cuts the current range before the pending assistant, if that leaves something behind.
    let cut_at_pending = |ranges: &mut Vec<Range<usize>>,
                          start: &mut usize,
                          current: &mut u64,
                          pending_start: Option<usize>,
                          upto: usize| {
        if let Some(p) = pending_start
            && p > *start
        {
            ranges.push(*start..p);
            *start = p;
            *current = per_slice(p..upto);
        }
    };

    for (i, message) in messages.iter().enumerate() {
        let tokens = per(i);
        if pending.is_empty()
            && ranges.len() < parts - 1
            && i > start
            && (current.saturating_add(tokens)) as f64 > target
        {
            ranges.push(start..i);
            start = i;
            current = 0;
        }
        current = current.saturating_add(tokens);
        match message.as_ref() {
            AgentMessage::Assistant(a) => {
                pending.clear();
                pending_start = None;
                if !is_errored(a) {
                    pending.extend(
                        a.content
                            .iter()
                            .filter_map(call_ref)
                            .map(|c| c.id)
                            .filter(|id| !id.is_empty()),
                    );
                    if !pending.is_empty() {
                        pending_start = Some(i);
                    }
                }
            }
            AgentMessage::ToolResult(r) if !pending.is_empty() => {
                if r.tool_call_id.is_empty() {
                    pending.clear();
                } else {
                    pending.retain(|id| *id != r.tool_call_id);
                }
                if pending.is_empty() {
                    if ranges.len() < parts - 1 && current as f64 > target {
                        cut_at_pending(&mut ranges, &mut start, &mut current, pending_start, i + 1);
                    }
                    pending_start = None;
                }
            }
            _ => {}
        }
    }
    if !pending.is_empty() && ranges.len() < parts - 1 && current as f64 > target {
        let end = messages.len();
        cut_at_pending(&mut ranges, &mut start, &mut current, pending_start, end);
    }
    ranges.push(start..messages.len());
    ranges
}

/// Splits `messages` into contiguous chunks of at most `max_tokens / 1.2` tokens each
/// (`chunkMessagesByMaxTokens`). A message larger than that is a chunk of its own: the
/// orchestrator shrinks it for the request rather than dropping it.
pub fn chunk_by_max_tokens(
    messages: &[SharedMessage],
    max_tokens: u64,
    counter: &TokenCounter,
) -> Vec<Range<usize>> {
    chunk_costs(&counter.count_messages(messages).per_message, max_tokens)
}

/// [`chunk_by_max_tokens`] over given sizes (`costs[i]` for message `i`); see
/// [`split_by_cost_share`] for why.
pub fn chunk_costs(costs: &[u64], max_tokens: u64) -> Vec<Range<usize>> {
    let effective = ((max_tokens as f64 / SAFETY_MARGIN).floor() as u64).max(1);
    let per = costs;
    let mut chunks = Vec::new();
    let mut start = 0usize;
    let mut current = 0u64;
    for (i, &tokens) in per.iter().enumerate() {
        if i > start && current.saturating_add(tokens) > effective {
            chunks.push(start..i);
            start = i;
            current = 0;
        }
        current = current.saturating_add(tokens);
        if tokens > effective {
            chunks.push(start..i + 1);
            start = i + 1;
            current = 0;
        }
    }
    if start < per.len() {
        chunks.push(start..per.len());
    }
    chunks
}

/// The share of the summariser's window a chunk may use (`computeAdaptiveChunkRatio`): 0.4,
/// lowered towards 0.15 when the average message is large relative to the window, because a
/// few huge messages per chunk leave no room for the prompt around them.
pub fn adaptive_chunk_ratio(
    messages: &[SharedMessage],
    context_window: u64,
    counter: &TokenCounter,
) -> f64 {
    adaptive_ratio_for(
        counter.count_total(messages),
        messages.len(),
        context_window,
    )
}

/// [`adaptive_chunk_ratio`] from a total size and a message count.
pub fn adaptive_ratio_for(total: u64, count: usize, context_window: u64) -> f64 {
    if count == 0 || context_window == 0 {
        return BASE_CHUNK_RATIO;
    }
    let avg = total as f64 / count as f64 * SAFETY_MARGIN;
    let avg_ratio = avg / context_window as f64;
    if avg_ratio > 0.1 {
        MIN_CHUNK_RATIO
            .max(BASE_CHUNK_RATIO - (2.0 * avg_ratio).min(BASE_CHUNK_RATIO - MIN_CHUNK_RATIO))
    } else {
        BASE_CHUNK_RATIO
    }
}

/// Whether one message is too big to summarise with the rest: its tokens times 1.2 exceed
/// half the window (`isOversizedForSummary`).
pub fn is_oversized_for_summary(
    message: &SharedMessage,
    context_window: u64,
    counter: &TokenCounter,
) -> bool {
    counter.count_shared(message) as f64 * SAFETY_MARGIN > context_window as f64 * 0.5
}

/// `max(1, floor(window · ratio) − 4096)`: the largest chunk for a window, after the prompt's
/// overhead.
pub fn max_chunk_tokens(context_window: u64, ratio: f64) -> u64 {
    let scaled = (context_window as f64 * ratio).floor();
    // `as` saturates, so an unbounded window (the extractive summariser) stays unbounded.
    (scaled as u64)
        .saturating_sub(SUMMARIZATION_OVERHEAD_TOKENS)
        .max(1)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::compaction::test_support::*;
    use proptest::prelude::*;

    fn counter() -> TokenCounter {
        TokenCounter::estimate()
    }

    #[test]
    fn normalize_parts_follows_the_reference() {
        assert_eq!(normalize_parts(0, 10), 1);
        assert_eq!(normalize_parts(1, 10), 1);
        assert_eq!(normalize_parts(3, 10), 3);
        assert_eq!(normalize_parts(8, 3), 3);
        assert_eq!(normalize_parts(8, 0), 1);
    }

    #[test]
    fn adaptive_ratio_reference_cases() {
        // §13 group 8 (derived): empty input gives 0.4.
        assert_eq!(adaptive_chunk_ratio(&[], 200_000, &counter()), 0.4);
        // Two messages of 200,000 chars (50,000 tokens) with ctx 200,000: avgRatio 0.3 → 0.15.
        let msgs = shared(vec![user(&"x".repeat(200_000)), user(&"y".repeat(200_000))]);
        let r = adaptive_chunk_ratio(&msgs, 200_000, &counter());
        assert!((r - 0.15).abs() < 1e-9, "{r}");
        // Small messages keep the base ratio.
        let msgs = shared(vec![user("hello"), user("world")]);
        assert_eq!(adaptive_chunk_ratio(&msgs, 200_000, &counter()), 0.4);
    }

    #[test]
    fn oversized_reference_cases() {
        let big = shared(vec![user(&"x".repeat(480_000))]);
        assert!(is_oversized_for_summary(&big[0], 200_000, &counter()));
        let small = shared(vec![user("Hello, world!")]);
        assert!(!is_oversized_for_summary(&small[0], 200_000, &counter()));
    }

    #[test]
    fn split_keeps_a_call_with_its_result() {
        // §13 group 8: [user4000, assistant(200 chars + call_tail), result4000] → [[1], [2, 3]].
        let msgs = shared(vec![
            user(&"u".repeat(4000)),
            assistant_with_calls(&"a".repeat(200), &[("call_tail", "read")]),
            tool_result("call_tail", "read", &"r".repeat(4000)),
        ]);
        assert_eq!(split_by_token_share(&msgs, 2, &counter()), vec![0..1, 1..3]);
    }

    #[test]
    fn split_keeps_a_pending_call_with_what_follows() {
        // §13 group 8: [user4000, assistant(call_missing), user4000] → [[1], [2, 3]].
        let msgs = shared(vec![
            user(&"u".repeat(4000)),
            assistant_with_calls("", &[("call_missing", "read")]),
            user(&"v".repeat(4000)),
        ]);
        assert_eq!(split_by_token_share(&msgs, 2, &counter()), vec![0..1, 1..3]);
    }

    #[test]
    fn split_edge_cases() {
        assert!(split_by_token_share(&[], 2, &counter()).is_empty());
        let msgs = shared(vec![user("a"), user("b")]);
        assert_eq!(split_by_token_share(&msgs, 1, &counter()), vec![0..2]);
        let msgs = shared((0..8).map(|i| user(&format!("{i}").repeat(400))).collect());
        let ranges = split_by_token_share(&msgs, 4, &counter());
        assert_eq!(ranges, vec![0..2, 2..4, 4..6, 6..8]);
    }

    #[test]
    fn chunking_reference_behaviour() {
        // 1000 tokens each; limit 2400 → effective 2000: two per chunk.
        let msgs = shared((0..5).map(|_| user(&"x".repeat(4000))).collect());
        assert_eq!(
            chunk_by_max_tokens(&msgs, 2400, &counter()),
            vec![0..2, 2..4, 4..5]
        );
        // A message over the limit is a chunk of its own.
        let msgs = shared(vec![user("a"), user(&"x".repeat(40_000)), user("b")]);
        assert_eq!(
            chunk_by_max_tokens(&msgs, 1200, &counter()),
            vec![0..1, 1..2, 2..3]
        );
        assert_eq!(max_chunk_tokens(128_000, 0.4), 51_200 - 4096);
        assert_eq!(max_chunk_tokens(1000, 0.4), 1);
        assert!(max_chunk_tokens(u64::MAX, 0.4) > u64::MAX / 3);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn split_never_separates_calls_from_results_and_keeps_order(
            spec in arb_transcript(40), parts in 1usize..6
        ) {
            let msgs = shared(build_transcript(&spec));
            let ranges = split_by_token_share(&msgs, parts, &counter());
            // Order and coverage: contiguous, gapless, non-empty.
            let mut next = 0;
            for r in &ranges {
                prop_assert_eq!(r.start, next);
                prop_assert!(r.end > r.start);
                next = r.end;
            }
            prop_assert_eq!(next, msgs.len());
            prop_assert!(ranges.len() <= parts.max(1));
            // Every result answering a (non-errored) call sits in the call's range.
            for r in &ranges {
                for (i, m) in msgs.iter().enumerate().take(r.end).skip(r.start) {
                    if let AgentMessage::ToolResult(res) = m.as_ref()
                        && let Some(call_at) = caller_index(&msgs, i, &res.tool_call_id)
                    {
                        prop_assert!(r.contains(&call_at),
                            "result {} in {:?} but its call at {}", i, r, call_at);
                    }
                }
            }
        }
    }
}
