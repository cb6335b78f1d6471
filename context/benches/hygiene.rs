//! The per-turn hygiene pipeline against the targets in `shared/PERFORMANCE.md` (≤ 0.5 ms on
//! the 200k-token session, ≤ 1 ms on the 1M-token one).
//!
//! Run with `cargo bench -p rampart-engine-api --bench hygiene`. Cases, per preset:
//!
//! - `turn/<preset>`: what a turn pays: `hygiene::run` with the default policy, then the token
//!   estimate of the result (the per-call `tokens::estimate_message_tokens`, summed);
//! - `turn_memo/<preset>`: the same turn with the memoised `tokens::TokenCounter` (Estimate
//!   mode, memo warmed by one earlier turn), which is what the per-call estimator is being
//!   replaced with;
//! - `run/<preset>`: `hygiene::run` alone on the clean history (every pass returns its input);
//! - `estimate/<preset>`: the token estimate alone;
//! - `run_repairing/<preset>`: `hygiene::run` on the history with one stray tool result in the
//!   middle, so the repair builds a new list (sharing every message);
//! - `pass/<name>/<preset>`: single passes on the clean history, to see where a turn goes
//!   (`anthropic` and `gemini` are not in the default policy).
//!
//! Inputs come from `shared/bench/gen_session.py --preset …`, generated once into
//! `<target dir>/bench-inputs/session-<preset>.jsonl` (needs python3). Only `message` entries
//! are used, in file order, as a context builder would hand them over.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "support/mod.rs"]
mod support;

use std::hint::black_box;
use std::sync::Arc;

use criterion::Criterion;
use rampart_context::hygiene::{
    self, ErroredAssistantPolicy, HygienePolicy, SanitizeOptions, prune_processed_history_images,
    repair_tool_use_result_pairing, sanitize_tool_call_inputs, validate_anthropic_turns,
    validate_gemini_turns,
};
use rampart_context::tokens::{TokenCounter, estimate_message_tokens};
use rampart_message::AgentMessage;
use rampart_message::MessageList;

fn estimate(list: &MessageList) -> u64 {
    list.iter().map(|m| estimate_message_tokens(m)).sum()
}

/// The history with a tool result that answers nothing, halfway through.
fn with_stray_result(list: &MessageList) -> MessageList {
    let mut messages = list.to_vec();
    let at = messages.len() / 2;
    messages.insert(
        at,
        Arc::new(AgentMessage::tool_result(
            "stray",
            "read",
            "late output",
            false,
            0,
        )),
    );
    messages.into()
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let policy = HygienePolicy::default();
    for preset in ["200k", "1m"] {
        let history = support::messages(preset);
        let (clean, report) = hygiene::run(&history, &policy);
        // The generated sessions are clean: the measured turn is the common, unchanged case.
        assert!(
            MessageList::same_list(&clean, &history),
            "bench input {preset} needed repair: {report:?}"
        );
        eprintln!(
            "{preset}: {} messages, {} estimated tokens",
            history.len(),
            estimate(&history)
        );
        let dirty = with_stray_result(&history);

        let mut group = c.benchmark_group("hygiene");
        group.bench_function(format!("turn/{preset}"), |b| {
            b.iter(|| {
                let (list, report) = hygiene::run(black_box(&history), &policy);
                black_box(report);
                black_box(estimate(&list))
            })
        });
        let counter = TokenCounter::estimate();
        counter.count_total(&history);
        group.bench_function(format!("turn_memo/{preset}"), |b| {
            b.iter(|| {
                let (list, report) = hygiene::run(black_box(&history), &policy);
                black_box(report);
                black_box(counter.count_total(&list))
            })
        });
        group.bench_function(format!("run/{preset}"), |b| {
            b.iter(|| hygiene::run(black_box(&history), &policy))
        });
        group.bench_function(format!("estimate/{preset}"), |b| {
            b.iter(|| estimate(black_box(&history)))
        });
        group.bench_function(format!("run_repairing/{preset}"), |b| {
            b.iter(|| hygiene::run(black_box(&dirty), &policy))
        });
        let h = &history;
        group.bench_function(format!("pass/sanitize/{preset}"), |b| {
            b.iter(|| sanitize_tool_call_inputs(black_box(h), &SanitizeOptions::default()))
        });
        group.bench_function(format!("pass/pairing/{preset}"), |b| {
            b.iter(|| repair_tool_use_result_pairing(black_box(h), ErroredAssistantPolicy::Drop))
        });
        group.bench_function(format!("pass/images/{preset}"), |b| {
            b.iter(|| prune_processed_history_images(black_box(h)))
        });
        group.bench_function(format!("pass/anthropic/{preset}"), |b| {
            b.iter(|| validate_anthropic_turns(black_box(h)))
        });
        group.bench_function(format!("pass/gemini/{preset}"), |b| {
            b.iter(|| validate_gemini_turns(black_box(h)))
        });
        group.finish();
    }
    c.final_summary();
}
