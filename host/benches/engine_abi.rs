#![allow(clippy::expect_used, clippy::unwrap_used)]
//! Engine load time, and `assemble` through the ABI against the same engine linked in.
//!
//! Run with `cargo bench -p rampart-host --bench engine_abi`. Numbers go in BENCHMARKS.md.

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use rampart_engine_api::protocol::{AssembleParams, SessionRef};
use rampart_engine_api::{AgentMessage, Host, MessageList};
use rampart_host::engine::handle::EngineHandle;
use rampart_host::engine::loader::{LoadRequest, load_engine};
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

fn request(path: PathBuf) -> LoadRequest {
    LoadRequest {
        id: "window".into(),
        verify_id: true,
        path,
        config: serde_json::json!({}),
        services: Arc::new(HostServices::new("window", EventSink::tracing_only())),
        load_timeout: Duration::from_secs(10),
        call_timeout: Duration::from_secs(60),
        max_log_level: None,
    }
}

/// A coding-agent-like history: a user turn, then a tool call and its result, then an answer.
fn history(n: usize) -> MessageList {
    (0..n)
        .map(|i| {
            let m = match i % 4 {
                0 => AgentMessage::user_text(format!("step {i}: {}", "please look at this ".repeat(10)), i as u64),
                1 => serde_json::from_value(serde_json::json!({
                    "role": "assistant",
                    "content": [{"type": "toolCall", "id": format!("call_{i}"), "name": "read",
                                 "arguments": {"path": format!("src/file_{i}.rs")}}],
                    "api": "openai-completions", "provider": "sim", "model": "sim-1",
                    "usage": {"input": 100, "output": 20, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 120,
                              "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
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
        })
        .collect()
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
