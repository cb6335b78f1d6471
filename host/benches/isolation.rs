#![allow(clippy::expect_used, clippy::unwrap_used)]
//! Issue 18: what `isolation = "process"` costs. The `assemble` round trip of the same engine
//! library loaded in the host and in a child `rampart engine-host`, at 10, 1,000 and 10,000
//! messages with a history that grows by a turn (two messages) per call; and the start of an
//! engine in a child (spawn, load, handshake).
//!
//! Run with `cargo bench -p rampart-host --bench isolation`. Numbers go in ISOLATION_NOTES.md.

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use rampart_engine_api::protocol::{AssembleParams, SessionRef};
use rampart_engine_api::{AgentMessage, MessageList};
use rampart_host::config::ProcessSettings;
use rampart_host::engine::handle::EngineHandle;
use rampart_host::engine::loader::{LoadRequest, load_engine, load_engine_in_child};
use rampart_host::engine::services::{EventSink, HostServices};

fn window_library() -> PathBuf {
    let file = format!(
        "{}rampart_window{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    );
    let exe = std::env::current_exe().expect("bench binary path");
    let deps = exe.parent().expect("deps dir").to_path_buf();
    [
        deps.clone(),
        deps.parent().expect("target dir").to_path_buf(),
    ]
    .into_iter()
    .map(|d| d.join(&file))
    .find(|p| p.exists())
    .expect("librampart_window was not built next to the bench binary")
}

fn request() -> LoadRequest {
    LoadRequest {
        id: "window".into(),
        verify_id: true,
        path: window_library(),
        config: serde_json::json!({}),
        services: Arc::new(HostServices::new("window", EventSink::tracing_only())),
        load_timeout: Duration::from_secs(10),
        call_timeout: Duration::from_secs(60),
        max_log_level: None,
    }
}

fn in_child() -> EngineHandle {
    rampart_host::engine::process::set_engine_host_exe(env!("CARGO_BIN_EXE_rampart").into());
    load_engine_in_child(request(), ProcessSettings::default()).expect("start the child")
}

/// One message of a coding-agent-like history: user turn, tool call, tool result, answer.
fn message(i: usize) -> Arc<AgentMessage> {
    let m = match i % 4 {
        0 => AgentMessage::user_text(
            format!("step {i}: {}", "please look at this ".repeat(10)),
            i as u64,
        ),
        1 => serde_json::from_value(serde_json::json!({
            "role": "assistant",
            "content": [{"type": "toolCall", "id": format!("call_{i}"), "name": "read",
                         "arguments": {"path": format!("src/file_{i}.rs")}}],
            "api": "openai-completions", "provider": "sim", "model": "sim-1",
            "usage": {"input": 100, "output": 20, "cacheRead": 0, "cacheWrite": 0,
                      "totalTokens": 120,
                      "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0,
                               "total": 0}},
            "stopReason": "toolUse", "timestamp": i
        }))
        .expect("valid assistant message"),
        2 => AgentMessage::tool_result(
            format!("call_{}", i - 1),
            "read",
            "fn main() { println!(\"hello\"); }\n".repeat(12),
            false,
            i as u64,
        ),
        _ => AgentMessage::assistant_text(
            format!("done with step {i}: {}", "the file looks fine ".repeat(8)),
            "openai-completions",
            "sim",
            "sim-1",
            i as u64,
        ),
    };
    Arc::new(m)
}

fn params(messages: MessageList) -> AssembleParams {
    AssembleParams {
        session: SessionRef {
            session_id: "bench".into(),
            ..Default::default()
        },
        messages,
        token_budget: Some(20_000),
        ..Default::default()
    }
}

/// Times `assemble` on a history of `n` messages that grows by two messages per call. Every
/// 200 turns the history goes back to `n` messages, outside the timing, and the engine is
/// shown it once (untimed) so the next timed call is again a turn, not a first sight.
fn growing(engine: &EngineHandle, n: usize, iters: u64) -> Duration {
    let base: Vec<_> = (0..n).map(message).collect();
    let mut history = base.clone();
    engine
        .call(params(history.clone().into()))
        .expect("assemble");
    let mut total = Duration::ZERO;
    for turn in 0..iters {
        if turn > 0 && turn % 200 == 0 {
            history.truncate(n);
            engine
                .call(params(history.clone().into()))
                .expect("assemble");
        }
        let next = history.len();
        history.push(message(next));
        history.push(message(next + 1));
        let list: MessageList = history.clone().into();
        let start = Instant::now();
        black_box(engine.call(params(list)).expect("assemble"));
        total += start.elapsed();
    }
    total
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
