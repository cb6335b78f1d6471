//! What the engine benches share: the `window` library cargo built beside them, how it is
//! loaded, and a coding-agent-like history to assemble.
#![allow(dead_code, clippy::expect_used)]

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rampart_engine_api::protocol::{AssembleParams, SessionRef};
use rampart_engine_api::{AgentMessage, MessageList};
use rampart_host::engine::handle::EngineHandle;
use rampart_host::engine::loader::LoadRequest;
use rampart_host::engine::services::{EventSink, HostServices};

/// `librampart_window`, next to the bench binary or one directory up (cargo's layout).
pub fn window_library() -> PathBuf {
    built_library("rampart_window")
}

/// The cdylib `name` cargo built, next to the bench binary or one directory up (cargo's layout).
pub fn built_library(name: &str) -> PathBuf {
    let file = format!(
        "{}{name}{}",
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
    .unwrap_or_else(|| panic!("{file} was not built next to the bench binary"))
}

/// Loading the `window` engine from `path`, with generous deadlines.
pub fn window_request(path: PathBuf) -> LoadRequest {
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

/// Message `i` of a coding-agent-like history: a user turn, a tool call, its result, an answer.
pub fn message(i: usize) -> Arc<AgentMessage> {
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

/// The first `n` messages of that history.
pub fn history(n: usize) -> MessageList {
    (0..n).map(message).collect()
}

/// `assemble` of `messages` for a bench session, with a 20,000-token budget.
pub fn params(messages: MessageList) -> AssembleParams {
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
pub fn growing(engine: &EngineHandle, n: usize, iters: u64) -> Duration {
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
