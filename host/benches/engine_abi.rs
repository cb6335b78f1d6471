#![allow(clippy::expect_used, clippy::unwrap_used)]
//! Engine load time, and `assemble` through the ABI against the same engine linked in.
//!
//! Run with `cargo bench -p rampart-host --bench engine_abi`. Numbers go in BENCHMARKS.md.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use rampart_engine_api::{Host, MessageList};
use rampart_host::engine::handle::EngineHandle;
use rampart_host::engine::loader::load_engine;
use rampart_host::engine::services::{EventSink, HostServices};

mod common;
use common::{history, params, window_library, window_request as request};

fn engine_load(c: &mut Criterion) {
    let lib = window_library();
    let mut group = c.benchmark_group("engine_load");
    group.sample_size(20);
    // A fresh file name each time: dlopen of a path it has seen returns the loaded image, so
    // only a new file measures a real open, header and layout check, construction, handshake.
    let scratch = tempfile::tempdir().expect("temp dir");
    let mut counter = 0u64;
    group.bench_function("cold_new_file", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                counter += 1;
                let copy = scratch.path().join(format!("libwindow_{counter}.so"));
                std::fs::copy(&lib, &copy).expect("copy library");
                let start = Instant::now();
                let handle = load_engine(request(copy)).expect("load");
                total += start.elapsed();
                black_box(handle);
            }
            total
        })
    });
    group.bench_function("warm_same_file", |b| {
        b.iter(|| black_box(load_engine(request(lib.clone())).expect("load")))
    });
    group.finish();
}

fn assemble_roundtrip(c: &mut Criterion) {
    let library = load_engine(request(window_library())).expect("load window");
    let services = HostServices::new("window", EventSink::tracing_only());
    let linked = EngineHandle::linked(
        Arc::new(rampart_window::WindowEngine::new(
            rampart_window::DEFAULT_KEEP_RECENT_TOKENS,
        )),
        Host::new(Arc::new(services)),
        Duration::from_secs(60),
    );
    let mut group = c.benchmark_group("assemble_roundtrip");
    for n in [10usize, 1_000, 10_000] {
        let messages = history(n);
        // Steady state: the same history turn after turn, as a session's unchanged messages are.
        group.bench_with_input(BenchmarkId::new("linked", n), &messages, |b, m| {
            b.iter(|| black_box(linked.call(params(m.clone())).expect("assemble")))
        });
        group.bench_with_input(BenchmarkId::new("cdylib", n), &messages, |b, m| {
            b.iter(|| black_box(library.call(params(m.clone())).expect("assemble")))
        });
        // Turns: the history grows by two messages a turn. 200 successive lists are cycled,
        // so the engine sees a growing history (and, once per cycle, a shorter one).
        let turns: Vec<MessageList> = {
            let mut v = messages.to_vec();
            (0..200)
                .map(|_| {
                    v.extend(history(2).iter().cloned());
                    MessageList::from(v.clone())
                })
                .collect()
        };
        group.bench_with_input(BenchmarkId::new("linked_growing", n), &turns, |b, t| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) % t.len();
                black_box(linked.call(params(t[i].clone())).expect("assemble"))
            })
        });
        group.bench_with_input(BenchmarkId::new("cdylib_growing", n), &turns, |b, t| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) % t.len();
                black_box(library.call(params(t[i].clone())).expect("assemble"))
            })
        });
        // Worst case: every message is new to the engine (first turn of a loaded session).
        group.bench_with_input(BenchmarkId::new("cdylib_all_new", n), &messages, |b, m| {
            b.iter_batched(
                || {
                    m.iter()
                        .map(|x| Arc::new((**x).clone()))
                        .collect::<MessageList>()
                },
                |fresh| black_box(library.call(params(fresh)).expect("assemble")),
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, engine_load, assemble_roundtrip);
criterion_main!(benches);
