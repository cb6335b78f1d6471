//! Compaction of the 1M-token session (`shared/bench/gen_session.py --preset 1m`).
//!
//! Run with `cargo bench -p rampart-engine-api --bench compaction`. Cases:
//!
//! - `model_200ms/concurrent` and `model_200ms/sequential`: `compact` with a scripted
//!   summariser that sleeps 200 ms per call (a stand-in for a model), a 128k compaction window,
//!   `parts = 8`, and `maxConcurrency` 8 or 1. Target: concurrent at least 3× faster. Few
//!   samples (each run takes seconds), one iteration per sample.
//! - `engine/compact`: `compact` with a summariser that answers instantly, so the figure is the
//!   engine's own work (chunking, serialising, counting, suffix). Target ≤ 50 ms.
//! - `engine/prepare`: `prepare` alone (cut point, file lists, token figures).
//! - `engine/compact_cold_counter` (timing loop only): `prepare` plus `compact` with a fresh
//!   counter, so every message is counted again.
//! - `engine/extractive`: `compact` with the embedded extractive summariser (no model).
//!
//! The token counter is shared across iterations, as an engine keeps one per model: its memo
//! already holds every message's count after the first run, as it would after the turn's
//! `assemble`. A cold-counter figure is printed once for comparison.
//!
//! Besides criterion's report, the bench prints the median of its own short timing loop for
//! each case (`median …`), the figures kept in `compaction-bench-notes.md`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "support/mod.rs"]
mod support;

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode};
use rampart_context::compaction::settings::RetrySettings;
use rampart_context::compaction::{
    CompactionSettings, ContextEntry, Control, ExtractiveSummarizer, Preparation, SummarizeError,
    Summarizer, SummaryRequest, compact, prepare,
};
use rampart_context::tokens::TokenCounter;

/// The compaction model's window in every case.
const WINDOW: u64 = 128_000;
/// The 1m preset's message entries in file order, as the engine hands them to `prepare`.
fn load() -> Vec<ContextEntry> {
    support::message_entries("1m")
        .into_iter()
        .map(|(entry_id, message)| ContextEntry {
            entry_id,
            message: Arc::new(message),
        })
        .collect()
}

/// A model stand-in: waits `delay`, then answers a structured summary of about 1,500
/// characters.
struct Scripted {
    delay: Duration,
}

impl Summarizer for Scripted {
    fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, SummarizeError> {
        if !self.delay.is_zero() {
            std::thread::sleep(self.delay);
        }
        let detail =
            "the parser rejects a trailing comma; keep the lock while rewriting. ".repeat(4);
        Ok(format!(
            "## Decisions\n- {:?}: {detail}\n\n## Open TODOs\n- finish the retry fix\n\n\
             ## Constraints/Rules\n- never push to main\n\n## Pending user asks\n- {detail}\n\n\
             ## Exact identifiers\n- /srv/app/src/lib.rs\n- https://ci.example.com/builds/abc",
            request.kind
        ))
    }

    fn context_window(&self) -> u64 {
        WINDOW
    }

    fn label(&self) -> &str {
        "scripted"
    }
}

fn settings(max_concurrency: usize) -> CompactionSettings {
    CompactionSettings {
        parts: 8,
        max_concurrency,
        retry: RetrySettings {
            attempts: 3,
            min_delay_ms: 0,
            max_delay_ms: 0,
            jitter: 0.0,
        },
        ..CompactionSettings::default()
    }
}

fn run_once(
    prep: &Preparation,
    settings: &CompactionSettings,
    summarizer: &dyn Summarizer,
    counter: &TokenCounter,
) -> Duration {
    let start = Instant::now();
    let out = compact(prep, settings, summarizer, counter, &Control::new()).unwrap();
    let elapsed = start.elapsed();
    black_box(out);
    elapsed
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

/// Our own short timing loop, so the notes can quote medians.
fn report(name: &str, runs: usize, mut f: impl FnMut() -> Duration) -> Duration {
    let m = median((0..runs).map(|_| f()).collect());
    eprintln!("median {name}: {m:?} over {runs} runs");
    m
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let ctx = load();
    let counter = TokenCounter::estimate();
    let cold = Instant::now();
    let prep = prepare(&ctx, &settings(8), &counter).unwrap();
    let cold_prepare = cold.elapsed();
    let sleepy = Scripted {
        delay: Duration::from_millis(200),
    };
    let instant = Scripted {
        delay: Duration::ZERO,
    };
    let probe = compact(&prep, &settings(8), &instant, &counter, &Control::new()).unwrap();
    eprintln!(
        "1m: {} messages, {} tokens before; {} summarised, {} kept; {} parts, {} calls per compaction; \
         summary {} chars, ~{} tokens after; prepare with a cold counter {:?}",
        ctx.len(),
        prep.tokens_before,
        prep.messages_to_summarize.len() + prep.turn_prefix_messages.len(),
        prep.kept_messages.len(),
        probe.parts,
        probe.calls,
        probe.summary_chars,
        probe.tokens_after_estimate,
        cold_prepare,
    );

    // Our own medians first (the notes quote them), then criterion's report.
    let concurrent = report("model_200ms/concurrent", 5, || {
        run_once(&prep, &settings(8), &sleepy, &counter)
    });
    let sequential = report("model_200ms/sequential", 3, || {
        run_once(&prep, &settings(1), &sleepy, &counter)
    });
    eprintln!(
        "speed-up concurrent vs sequential: {:.2}x",
        sequential.as_secs_f64() / concurrent.as_secs_f64()
    );
    report("engine/compact", 31, || {
        run_once(&prep, &settings(8), &instant, &counter)
    });
    report("engine/prepare", 31, || {
        let start = Instant::now();
        black_box(prepare(&ctx, &settings(8), &counter).unwrap());
        start.elapsed()
    });
    report("engine/compact_cold_counter", 11, || {
        // A fresh counter: every message is counted again (prepare included).
        let start = Instant::now();
        let cold = TokenCounter::estimate();
        let p = prepare(&ctx, &settings(8), &cold).unwrap();
        black_box(compact(&p, &settings(8), &instant, &cold, &Control::new()).unwrap());
        start.elapsed()
    });
    let extractive = ExtractiveSummarizer::default();
    report("engine/extractive", 11, || {
        run_once(&prep, &settings(8), &extractive, &counter)
    });

    let mut group = c.benchmark_group("compaction/model_200ms");
    group.sample_size(10);
    group.sampling_mode(SamplingMode::Flat);
    group.warm_up_time(Duration::from_millis(1));
    group.measurement_time(Duration::from_secs(1));
    for (name, limit) in [("concurrent", 8), ("sequential", 1)] {
        let s = settings(limit);
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| run_once(&prep, &s, &sleepy, &counter))
                    .sum()
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("compaction/engine");
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(5));
    let s = settings(8);
    group.bench_function("compact", |b| {
        b.iter(|| compact(&prep, &s, &instant, &counter, &Control::new()).unwrap())
    });
    group.bench_function("prepare", |b| {
        b.iter(|| prepare(black_box(&ctx), &s, &counter).unwrap())
    });
    group.bench_function("extractive", |b| {
        b.iter(|| compact(&prep, &s, &extractive, &counter, &Control::new()).unwrap())
    });
    group.finish();
    c.final_summary();
}
