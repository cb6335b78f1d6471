//! Guard benchmarks against the targets in `shared/PERFORMANCE.md`.
//!
//! Run with `cargo bench -p rampart-engine-api --bench guards`. What is measured:
//!
//! - `ingest_cap/*`: [`cap_at_ingest`] of one 5 MB tool result (a build log ending in an error,
//!   ASCII and mixed UTF-8), which is what persisting such a result costs before the host
//!   writes the original to a blob;
//! - `reduction_potential/1m@128k`: [`estimate_tool_result_reduction_potential`] over the
//!   1M-token session at a 128k window (target ≤ 1 ms);
//! - `plan_session_truncation/1m@128k`: the whole truncation plan including the new messages;
//! - `guard_tool_loop/1m@1m`: the tool-loop guard over the same session in a 1M window (no
//!   overflow, some results truncated in the copy).
//!
//! The input is `shared/bench/gen_session.py --preset 1m`, generated once into
//! `<target dir>/bench-inputs/` (python3 required).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rampart_engine_api::guards::tool_loop::guard_tool_loop;
use rampart_engine_api::guards::tool_result::{
    cap_at_ingest, estimate_tool_result_reduction_potential, plan_session_truncation,
};
use rampart_engine_api::message::AgentMessage;
use rampart_engine_api::wire::MessageList;
use serde::Deserialize;

const FIVE_MB: usize = 5 * 1024 * 1024;

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"),
        PathBuf::from,
    )
}

/// The 1M-token session, generated on first use.
fn session_1m() -> PathBuf {
    let dir = target_dir().join("bench-inputs");
    let path = dir.join("session-1m.jsonl");
    if !path.exists() {
        std::fs::create_dir_all(&dir).unwrap();
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/bench/gen_session.py");
        let status = Command::new("python3")
            .arg(script)
            .args(["--preset", "1m", "--out"])
            .arg(&path)
            .status()
            .expect("python3 is needed to generate the benchmark input");
        assert!(status.success(), "gen_session.py failed");
    }
    path
}

#[derive(Deserialize)]
struct Entry {
    #[serde(rename = "type")]
    kind: String,
    message: Option<AgentMessage>,
}

fn load_messages(path: &Path) -> MessageList {
    let text = std::fs::read_to_string(path).unwrap();
    let messages: Vec<AgentMessage> = text
        .lines()
        .filter(|line| !line.is_empty())
        .filter_map(|line| {
            let entry: Entry = serde_json::from_str(line).unwrap();
            (entry.kind == "message").then_some(entry.message).flatten()
        })
        .collect();
    MessageList::from(messages)
}

/// A build log of about `bytes` bytes that ends in an error, so the head-and-tail path runs.
fn build_log(bytes: usize, utf8: bool) -> String {
    let mut out = String::with_capacity(bytes + 128);
    let mut i = 0u64;
    while out.len() < bytes {
        if utf8 && i.is_multiple_of(3) {
            out.push_str(&format!("[{i:08}] 编译 crate_{} … ok ✓\n", i % 97));
        } else {
            out.push_str(&format!(
                "[{i:08}] Compiling crate_{} v0.{}.0\n",
                i % 97,
                i % 13
            ));
        }
        i += 1;
    }
    out.push_str("error[E0308]: mismatched types\nerror: could not compile, exit code 101\n");
    out
}

fn ingest(c: &mut Criterion) {
    let mut group = c.benchmark_group("ingest_cap");
    group.sample_size(30);
    for (name, utf8) in [("5mb_ascii_log", false), ("5mb_utf8_log", true)] {
        let log = build_log(FIVE_MB, utf8);
        group.throughput(Throughput::Bytes(log.len() as u64));
        let msg = AgentMessage::tool_result("call_1", "exec", log, true, 0);
        group.bench_function(name, |b| {
            b.iter(|| {
                cap_at_ingest(
                    black_box(&msg),
                    128_000,
                    40_000,
                    Some("blob sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"),
                )
            })
        });
    }
    group.finish();
}

fn session(c: &mut Criterion) {
    let messages = load_messages(&session_1m());
    let mut group = c.benchmark_group("session_1m");
    group.sample_size(50);
    group.bench_function("reduction_potential/1m@128k", |b| {
        b.iter(|| estimate_tool_result_reduction_potential(black_box(&messages[..]), 128_000))
    });
    group.bench_function("plan_session_truncation/1m@128k", |b| {
        b.iter(|| plan_session_truncation(black_box(&messages[..]), 128_000))
    });
    group.bench_function("guard_tool_loop/1m@1m", |b| {
        b.iter(|| guard_tool_loop(black_box(&messages), 1_000_000))
    });
    group.finish();
}

criterion_group!(benches, ingest, session);
criterion_main!(benches);
