//! Context pruning (layer 4) against the targets: pruning the 200k-token session at a 32k
//! window in ≤ 2 ms (the pruning issue), and per-turn hygiene including pruning on the same
//! session in ≤ 0.5 ms (`shared/PERFORMANCE.md`).
//!
//! Run with `cargo bench -p rampart-engine-api --bench pruning`. Cases, all on the 200k
//! session with the default settings (`mode: cache-ttl`) at a 32k-token window:
//!
//! - `cold/200k@32k`: `prune_context_messages` without a memo: every message measured, every
//!   pruned result rebuilt; what the first turn of a session pays;
//! - `cold_memo/200k@32k`: the first call with a fresh `PruneMemo` (the same work plus filling
//!   the memo);
//! - `steady/200k@32k`: the same history again with the memo warmed by one earlier call, which
//!   is every later turn (a turn's new messages are measured once, on their first turn);
//! - `turn/200k@32k`: a whole steady turn: `hygiene::run` with the default policy, pruning with
//!   the memo, and the memoised token count of the result.
//!
//! Inputs come from `shared/bench/gen_session.py --preset 200k`, generated once into
//! `<target dir>/bench-inputs/session-200k.jsonl` (needs python3), as the hygiene bench does.
//! Only `message` entries are used, in file order.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "support/mod.rs"]
mod support;

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BatchSize, Criterion};
use rampart_context::hygiene::{self, HygienePolicy};
use rampart_context::pruning::{
    EffectiveSettings, PruneMemo, PruneOptions, prune_context_messages, prune_context_messages_with,
};
use rampart_context::tokens::TokenCounter;
use rampart_message::MessageList;

/// The window pruning is measured at, in tokens.
const WINDOW: u64 = 32_000;

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let settings = EffectiveSettings::default();
    let options = PruneOptions::default();
    let preset = "200k";
    let history = support::messages(preset);

    let (pruned, report) = prune_context_messages(&history, WINDOW, &settings);
    assert!(
        report.changed(),
        "the bench input should need pruning: {report:?}"
    );
    eprintln!(
        "{preset}@{WINDOW}: {} messages, {} chars ({:.2} of the window) -> {} chars ({:.2}); \
         {} results trimmed, {} cleared; {} messages shared with the input",
        history.len(),
        report.chars_before,
        report.ratio_before,
        report.chars_after,
        report.ratio_after,
        report.soft_trimmed,
        report.hard_cleared,
        history
            .iter()
            .zip(pruned.iter())
            .filter(|(a, b)| Arc::ptr_eq(a, b))
            .count(),
    );

    let mut group = c.benchmark_group("pruning");
    group.bench_function(format!("cold/{preset}@32k"), |b| {
        b.iter(|| prune_context_messages(black_box(&history), WINDOW, &settings))
    });
    group.bench_function(format!("cold_memo/{preset}@32k"), |b| {
        b.iter_batched(
            PruneMemo::new,
            |memo| {
                let out = prune_context_messages_with(
                    black_box(&history),
                    WINDOW,
                    &settings,
                    options,
                    Some(&memo),
                );
                // Dropping the memo (and its pruned copies) is part of no turn: return it.
                (out, memo)
            },
            BatchSize::SmallInput,
        )
    });
    let memo = PruneMemo::new();
    prune_context_messages_with(&history, WINDOW, &settings, options, Some(&memo));
    group.bench_function(format!("steady/{preset}@32k"), |b| {
        b.iter(|| {
            prune_context_messages_with(
                black_box(&history),
                WINDOW,
                &settings,
                options,
                Some(&memo),
            )
        })
    });
    let policy = HygienePolicy::default();
    let counter = TokenCounter::estimate();
    let turn = |list: &MessageList| {
        let (clean, hygiene_report) = hygiene::run(list, &policy);
        let (pruned, pruning_report) =
            prune_context_messages_with(&clean, WINDOW, &settings, options, Some(&memo));
        (counter.count_total(&pruned), hygiene_report, pruning_report)
    };
    // Warm the counter's memo with the pruned messages, as the previous turn would have.
    turn(&history);
    group.bench_function(format!("turn/{preset}@32k"), |b| {
        b.iter(|| turn(black_box(&history)))
    });
    group.finish();
    let stats = memo.stats();
    eprintln!(
        "memo: {} hits, {} misses, {} entries",
        stats.hits, stats.misses, stats.entries
    );
    c.final_summary();
}
