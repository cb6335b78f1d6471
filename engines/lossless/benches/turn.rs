#![allow(clippy::expect_used, clippy::unwrap_used)]
//! Issue 27's target "per-turn engine time at 1M stored tokens ≤ 1 ms p50 (a DAG walk, not a
//! rescan); database growth reported per 1,000 messages".
//!
//! A conversation of 10,000 messages of about 100 tokens each (1M tokens, with paths and
//! numbers in them) is fed to the engine as a session grows: `assemble` then `after_turn` at a
//! 128k budget every 100 messages, so the sweeps build the DAG (extractive summaries: no model).
//! Then 2,000 turns of two new messages each are timed one by one, `assemble` plus
//! `after_turn`, called in-process on the engine (no JSON: what a host's in-process call costs
//! the engine itself). Prints p50 / p90 / p99 / max per turn, the sweeps among them, and the
//! database's size per 1,000 stored messages, and what an `lcm_grep` costs at that size.
//! Numbers go in BENCHMARKS.md.
//!
//! `cargo bench -p rampart-lossless --bench turn` (`RAMPART_BENCH_MESSAGES` changes the size).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rampart_engine_api::engine::NeverCancelled;
use rampart_engine_api::protocol::{AfterTurnParams, AssembleParams};
use rampart_engine_api::tools::ToolCallParams;
use rampart_engine_api::{AgentMessage, CallContext, ContextEngine, MessageList, SharedMessage};
use rampart_engine_test::{FakeHost, build};
use rampart_lossless::LosslessEngine;
use rampart_lossless::config::Config;

const BUDGET: u64 = 128_000;

fn message(i: usize) -> SharedMessage {
    let words = "the build of module alpha reads its settings and reports what changed ";
    let text = format!(
        "step {i}: /srv/app/src/mod_{}.rs line {} {}",
        i % 400,
        1000 + i,
        words.repeat(5)
    );
    Arc::new(if i.is_multiple_of(2) {
        AgentMessage::user_text(text, 1_700_000_000_000 + i as u64 * 1_000)
    } else {
        build::assistant_text(&text)
    })
}

fn turn(engine: &LosslessEngine, cx: &CallContext<'_>, messages: &[SharedMessage]) {
    let list = MessageList::from(messages.to_vec());
    let mut p = AssembleParams {
        messages: list.clone(),
        token_budget: Some(BUDGET),
        ..Default::default()
    };
    p.session.session_id = "bench".into();
    let out = engine.assemble(cx, p).unwrap();
    std::hint::black_box(&out);
    let mut a = AfterTurnParams {
        messages: list,
        token_budget: Some(BUDGET),
        ..Default::default()
    };
    a.session.session_id = "bench".into();
    engine.after_turn(cx, a).unwrap();
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let stored: usize = std::env::var("RAMPART_BENCH_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let timed = 2_000;
    let dir = std::env::temp_dir().join(format!("lossless-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config = Config::from_json(&serde_json::json!({
        "stateDir": dir, "summarizer": "extractive"
    }))
    .unwrap();
    let engine = LosslessEngine::new(config, None);
    let host = FakeHost::new();
    let host = host.host();
    let cx = CallContext::new(&host, &NeverCancelled, None);
    let all: Vec<SharedMessage> = (0..stored + 2 * timed).map(message).collect();
    let tokens: u64 = all[..stored]
        .iter()
        .map(|m| rampart_engine_api::tokens::estimate_message_tokens(m))
        .sum();

    let started = Instant::now();
    let mut upto = 0;
    while upto < stored {
        upto = (upto + 100).min(stored);
        turn(&engine, &cx, &all[..upto]);
    }
    println!(
        "built: {stored} messages, {tokens} estimated tokens, in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let mut times = Vec::with_capacity(timed);
    for step in 1..=timed {
        let at = stored + 2 * step;
        let t = Instant::now();
        turn(&engine, &cx, &all[..at]);
        times.push(t.elapsed());
    }
    let slow = times
        .iter()
        .filter(|t| **t > Duration::from_millis(5))
        .count();
    times.sort();
    println!(
        "turn (assemble + after_turn, 2 new messages) at {} stored messages: p50 {:?}, p90 {:?}, \
         p99 {:?}, max {:?}; {slow} of {timed} over 5 ms (sweeps)",
        stored + 2 * timed,
        percentile(&times, 0.5),
        percentile(&times, 0.9),
        percentile(&times, 0.99),
        times[times.len() - 1],
    );
    // `lcm_grep` at this size: words every message holds (every message differs from the
    // others only in its numbers, so the search reads its 2,000 rows to fold them into one
    // hit), and a path that a few hundred hold.
    for (label, pattern) in [
        ("every message", "module alpha settings"),
        ("a path", "mod_17"),
    ] {
        let mut times = Vec::new();
        let mut answer = 0;
        for _ in 0..30 {
            let t = Instant::now();
            let mut p = ToolCallParams {
                name: "lcm_grep".into(),
                arguments: serde_json::json!({"pattern": pattern}),
                call_id: "bench".into(),
                ..Default::default()
            };
            p.session.session_id = "bench".into();
            let out = engine.tools_call(&cx, p).unwrap();
            times.push(t.elapsed());
            answer = out.content.len();
        }
        times.sort();
        println!(
            "lcm_grep ({label}, `{pattern}`): p50 {:?}, max {:?}, answer {answer} bytes",
            percentile(&times, 0.5),
            times[times.len() - 1]
        );
    }
    let bytes: u64 = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len())
        .sum();
    let messages = (stored + 2 * timed) as f64;
    println!(
        "database: {:.1} MB for {} messages: {:.0} KB per 1,000 messages",
        bytes as f64 / 1e6,
        messages,
        bytes as f64 / 1e3 / (messages / 1000.0)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
