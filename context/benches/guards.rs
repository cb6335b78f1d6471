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

#[path = "support/mod.rs"]
mod support;

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rampart_context::guards::tool_loop::guard_tool_loop;
use rampart_context::guards::tool_result::{
    cap_at_ingest, estimate_tool_result_reduction_potential, plan_session_truncation,
};
use rampart_message::AgentMessage;

const FIVE_MB: usize = 5 * 1024 * 1024;
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
    let messages = support::messages("1m");
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
