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
//! `python3 ../shared/bench/gen_session.py --preset 1m` (deterministic bytes; `shared/` beside
//! the repository).
//!
//! `replay_scaling/<n>` replays sessions of `n` messages (5k, 10k, 20k; 100k once, printed,
//! with `RAMPART_BENCH_100K=1`), made from the same preset by cycling its messages with fresh
//! ids and texts cut to 1,200 characters: the time must grow linearly with the messages (a
//! 100k-message replay used to take 570 s, quadratic in the branch length).
//!
//! Run with `cargo bench -p rampart-host --bench replay`. Numbers go in BENCHMARKS.md.

use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use rampart_host::config::Config;
use rampart_host::engine::services::EventSink;
use rampart_host::replay::{ReplayOptions, run_command};
use serde_json::Value;

const GENERATOR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../shared/bench/gen_session.py"
);
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

/// One replay, as `rampart replay FILE --window 128000 --json --timings` runs it; returns the
/// summary.
fn replay_once(file: &Path) -> Value {
    let options = ReplayOptions {
        input: file.to_path_buf(),
        window: Some(WINDOW),
        json: true,
        timings: true,
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

/// A pi v3 session of `n` messages cycled from the preset `source` (see the module docs).
fn scaled_input(source: &Path, n: usize) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("bench-{n}-messages.jsonl"));
    if path.exists() {
        return path;
    }
    let text = std::fs::read_to_string(source).expect("the preset reads");
    let mut lines = text.lines();
    let header = lines.next().expect("a header line");
    let messages: Vec<Value> = lines
        .map(|l| serde_json::from_str::<Value>(l).expect("preset lines are JSON"))
        .filter(|v| v["type"] == "message")
        .collect();
    let mut out = String::with_capacity(n * 1_200);
    out.push_str(header);
    out.push('\n');
    let mut parent = Value::Null;
    for i in 0..n {
        let mut entry = messages[i % messages.len()].clone();
        let cycle = i / messages.len();
        let id = format!("{i:08x}");
        entry["id"] = Value::String(id.clone());
        entry["parentId"] = parent;
        parent = Value::String(id);
        let message = &mut entry["message"];
        if let Some(call_id) = message["toolCallId"].as_str() {
            message["toolCallId"] = Value::String(format!("{call_id}_{cycle}"));
        }
        if let Some(blocks) = message["content"].as_array_mut() {
            for block in blocks {
                if let Some(call_id) = block["id"].as_str().filter(|_| block["type"] == "toolCall")
                {
                    block["id"] = Value::String(format!("{call_id}_{cycle}"));
                }
                if let Some(text) = block["text"].as_str() {
                    let chars: Vec<char> = text.chars().collect();
                    if chars.len() > 1_200 {
                        let cut: String = chars[..600]
                            .iter()
                            .chain(&chars[chars.len() - 600..])
                            .collect();
                        block["text"] = Value::String(cut);
                    }
                }
            }
        }
        out.push_str(&entry.to_string());
        out.push('\n');
    }
    std::fs::write(&path, out).expect("the scaled input is written");
    path
}

fn replay_scaling(c: &mut Criterion) {
    let source = input();
    if std::env::var_os("RAMPART_BENCH_100K").is_some() {
        let file = scaled_input(&source, 100_000);
        let started = std::time::Instant::now();
        let s = replay_once(&file);
        eprintln!(
            "replay of 100,000 messages at {WINDOW}: {} calls, {} compactions, {:.1} s, peak RSS {:.0} MiB",
            s["calls"],
            s["compactions"],
            started.elapsed().as_secs_f64(),
            s["peakRssBytes"].as_f64().unwrap_or(0.0) / (1024.0 * 1024.0)
        );
    }
    let mut group = c.benchmark_group("replay_scaling");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    for n in [5_000usize, 10_000, 20_000] {
        let file = scaled_input(&source, n);
        group.bench_function(format!("{n}_messages"), |b| {
            b.iter(|| replay_once(&file));
        });
    }
    group.finish();
}

criterion_group!(benches, replay, replay_scaling);
criterion_main!(benches);
