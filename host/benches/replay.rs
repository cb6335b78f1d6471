#![allow(clippy::expect_used, clippy::unwrap_used)]
// Until `[[bench]] name = "replay" harness = false` is registered in host/Cargo.toml, cargo
// discovers this file as a libtest bench, which ignores `main`; this keeps that build quiet.
#![cfg_attr(test, allow(dead_code, unused_imports))]
//! `rampart replay` end to end on the standard 1M-token input: the 1m preset of
//! `shared/bench/gen_session.py` (5 MB of pi v3, 507 model calls), at a 128k window, through
//! the legacy engine against `sim`, compacting with the engine's embedded summariser.
//!
//! Prints once, before criterion's samples, where a replay's time goes (engine and host
//! pipeline vs reading the input and writing output) and the process's peak memory; criterion
//! then measures the whole replay's wall time.
//!
//! Input: `$RAMPART_BENCH_1M` when set, else generated into the target's tmp directory with
//! `python3 /work/shared/bench/gen_session.py --preset 1m` (deterministic bytes).
//!
//! Run with `cargo bench -p rampart-host --bench replay`. Numbers go in BENCHMARKS.md.

use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use rampart_host::config::Config;
use rampart_host::engine::services::EventSink;
use rampart_host::replay::{ReplayOptions, run_command};
use serde_json::Value;

const GENERATOR: &str = "/work/shared/bench/gen_session.py";
const WINDOW: u64 = 128_000;

/// The 1m preset, generated once.
fn input() -> PathBuf {
    if let Some(path) = std::env::var_os("RAMPART_BENCH_1M") {
        return PathBuf::from(path);
    }
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-1m.jsonl");
    if !path.exists() {
        let status = std::process::Command::new("python3")
            .args([GENERATOR, "--preset", "1m", "--out"])
            .arg(&path)
            .status()
            .expect("python3 runs the session generator");
        assert!(status.success(), "{GENERATOR} failed");
    }
    path
}

/// One replay, as `rampart replay FILE --window 128000 --json` runs it; returns the summary.
fn replay_once(file: &Path) -> Value {
    let options = ReplayOptions {
        input: file.to_path_buf(),
        window: Some(WINDOW),
        json: true,
        ..ReplayOptions::default()
    };
    let mut out = Vec::new();
    let code = run_command(
        Config::default(),
        &options,
        None,
        EventSink::tracing_only(),
        &mut out,
    )
    .expect("the replay runs");
    assert_eq!(code, 0);
    let doc: Value = serde_json::from_slice(&out).expect("--json output");
    doc["summary"].clone()
}

fn replay(c: &mut Criterion) {
    let file = input();
    let s = replay_once(&file);
    let t = &s["timings"];
    let ms = |k: &str| t[k].as_f64().unwrap_or(0.0);
    eprintln!(
        "replay of {} at {WINDOW}: {} calls, {} compactions, peak prompt {} tokens; \
         wall {:.0} ms = engine and host pipeline {:.0} ms + I/O {:.0} ms (load {:.0}, \
         output {:.0}); peak RSS {:.1} MiB",
        file.display(),
        s["calls"],
        s["compactions"],
        s["peakPromptTokens"],
        ms("totalMs"),
        ms("runMs"),
        ms("loadMs") + ms("outputMs"),
        ms("loadMs"),
        ms("outputMs"),
        s["peakRssBytes"].as_f64().unwrap_or(0.0) / (1024.0 * 1024.0)
    );
    let mut group = c.benchmark_group("replay");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(30));
    group.bench_function("1m_preset_128k_window", |b| {
        b.iter(|| replay_once(&file));
    });
    group.finish();
}

criterion_group!(benches, replay);
criterion_main!(benches);
