#![allow(clippy::expect_used, clippy::unwrap_used)]
//! Issue 18: what `isolation = "process"` costs. The `assemble` round trip of the same engine
//! library loaded in the host and in a child `rampart engine-host`, at 10, 1,000 and 10,000
//! messages with a history that grows by a turn (two messages) per call; and the start of an
//! engine in a child (spawn, load, handshake).
//!
//! Run with `cargo bench -p rampart-host --bench isolation`. Numbers go in BENCHMARKS.md.

use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use rampart_host::config::ProcessSettings;
use rampart_host::engine::handle::EngineHandle;
use rampart_host::engine::loader::{LoadRequest, load_engine, load_engine_in_child};

mod common;
use common::{growing, window_library, window_request};

fn request() -> LoadRequest {
    window_request(window_library())
}

fn in_child() -> EngineHandle {
    rampart_host::engine::process::set_engine_host_exe(env!("CARGO_BIN_EXE_rampart").into());
    load_engine_in_child(request(), ProcessSettings::default()).expect("start the child")
}

fn assemble_roundtrip(c: &mut Criterion) {
    let inprocess = load_engine(request()).expect("load window");
    let child = in_child();
    let mut group = c.benchmark_group("isolation_assemble_growing");
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(8));
    for n in [10usize, 1_000, 10_000] {
        group.bench_with_input(BenchmarkId::new("inprocess", n), &n, |b, &n| {
            b.iter_custom(|iters| growing(&inprocess, n, iters))
        });
        group.bench_with_input(BenchmarkId::new("child", n), &n, |b, &n| {
            b.iter_custom(|iters| growing(&child, n, iters))
        });
    }
    group.finish();
}

fn child_start(c: &mut Criterion) {
    rampart_host::engine::process::set_engine_host_exe(env!("CARGO_BIN_EXE_rampart").into());
    let mut group = c.benchmark_group("isolation_start");
    group.sample_size(20);
    // Spawn, exec, load and construct in the child, handshake; the shutdown is not timed.
    group.bench_function("child_start", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let start = Instant::now();
                let handle = in_child();
                total += start.elapsed();
                let _ = handle.shutdown();
            }
            total
        })
    });
    group.finish();
}

criterion_group!(benches, child_start, assemble_roundtrip);
criterion_main!(benches);
