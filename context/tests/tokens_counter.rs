//! The counter: calibrated mode (pi's estimateContextTokens / calculateContextTokens), the
//! per-message memo, and how modes are written in configuration.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use rampart_context::tokens::{
    CountMode, Encoding, TokenCounter, UsageAnchor, estimate_context_tokens,
    estimate_message_tokens, last_usage_anchor, usage_context_tokens,
};
use rampart_engine_api::{AgentMessage, MessageList, SharedMessage};
use rampart_message::Usage;
use serde_json::json;

fn usage(input: u64, output: u64, cache_read: u64, cache_write: u64, total: Option<u64>) -> Usage {
    Usage {
        input,
        output,
        cache_read,
        cache_write,
        total_tokens: total,
        ..Usage::default()
    }
}

fn reply(text: &str, stop_reason: &str, usage: Option<u64>) -> AgentMessage {
    let total = usage.unwrap_or(0);
    serde_json::from_value(json!({
        "role": "assistant", "content": [{"type": "text", "text": text}],
        "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5",
        "usage": {"input": total, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": total,
                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
        "stopReason": stop_reason, "timestamp": 0
    }))
    .unwrap()
}

fn shared(ms: Vec<AgentMessage>) -> Vec<SharedMessage> {
    ms.into_iter().map(Arc::new).collect()
}

// ---------------------------------------------------------------------------
// Calibrated
// ---------------------------------------------------------------------------

#[test]
fn calculate_context_tokens() {
    // Reference case: calculateContextTokens({1000, 500, 200, 100}) is 1800.
    assert_eq!(
        usage_context_tokens(&usage(1000, 500, 200, 100, None)),
        1800
    );
    // totalTokens wins when present and non-zero; a zero total falls back to the sum (`||`).
    assert_eq!(
        usage_context_tokens(&usage(1000, 500, 200, 100, Some(5000))),
        5000
    );
    assert_eq!(
        usage_context_tokens(&usage(1000, 500, 200, 100, Some(0))),
        1800
    );
}

#[test]
fn usage_plus_estimates_of_the_messages_after_it() {
    let counter = TokenCounter::new(CountMode::Calibrated);
    let history = shared(vec![
        AgentMessage::user_text("x".repeat(4000), 0),
        reply("first answer", "stop", Some(5_000)),
        AgentMessage::user_text("y".repeat(40), 0), // 10
        AgentMessage::tool_result("c1", "read", "z".repeat(80), false, 0), // 20
    ]);
    assert_eq!(counter.context_tokens(&history), 5_000 + 10 + 20);
    let report = counter.count_messages(&history);
    assert_eq!(
        report.anchor,
        Some(UsageAnchor {
            index: 1,
            tokens: 5_000
        })
    );
    assert_eq!(report.total, 5_030);
    // Per-message figures stay estimates.
    assert_eq!(report.per_message[0], 1000);
    assert_eq!(report.per_message[2..], [10, 20]);
    assert_eq!(estimate_context_tokens(&history), 5_030);
}

#[test]
fn aborted_failed_and_zero_usage_replies_are_skipped() {
    let counter = TokenCounter::new(CountMode::Calibrated);
    let history = shared(vec![
        reply("ok", "toolUse", Some(2_000)),
        AgentMessage::user_text("y".repeat(40), 0), // 10
        reply("boom", "error", Some(90_000)),       // 1
        reply("stopped", "aborted", Some(80_000)),  // 2
        reply("synthetic", "stop", None),           // 3 (zero usage)
    ]);
    let a = last_usage_anchor(&history).unwrap();
    assert_eq!(
        a,
        UsageAnchor {
            index: 0,
            tokens: 2_000
        }
    );
    let after: u64 = history[1..]
        .iter()
        .map(|m| estimate_message_tokens(m))
        .sum();
    assert_eq!(after, 10 + 1 + 2 + 3);
    assert_eq!(counter.context_tokens(&history), 2_000 + after);
    assert_eq!(counter.count_messages(&history).total, 2_000 + after);
}

#[test]
fn without_usage_everything_is_estimated() {
    let counter = TokenCounter::new(CountMode::Calibrated);
    let history = shared(vec![
        AgentMessage::user_text("y".repeat(40), 0),
        reply("failed", "error", Some(1_000)),
    ]);
    assert_eq!(last_usage_anchor(&history), None);
    assert_eq!(counter.context_tokens(&history), 10 + 2);
    let report = counter.count_messages(&history);
    assert_eq!((report.total, report.anchor), (12, None));
    assert_eq!(counter.context_tokens(&[]), 0);
}

#[test]
fn the_newest_usable_reply_is_the_anchor() {
    let history = shared(vec![
        reply("a", "stop", Some(1_000)),
        AgentMessage::user_text("q", 0),
        reply("b", "length", Some(3_000)),
    ]);
    let counter = TokenCounter::new(CountMode::Calibrated);
    assert_eq!(counter.context_tokens(&history), 3_000);
    // Other modes ignore usage.
    assert_eq!(TokenCounter::estimate().context_tokens(&history), 1 + 1 + 1);
}

// ---------------------------------------------------------------------------
// Memo
// ---------------------------------------------------------------------------

#[test]
fn the_same_arc_is_counted_once() {
    let counter = TokenCounter::estimate();
    let m: SharedMessage = Arc::new(AgentMessage::user_text("x".repeat(40), 0));
    assert_eq!(counter.count_shared(&m), 10);
    assert_eq!(counter.memo_stats().misses, 1);
    assert_eq!(counter.count_shared(&m), 10);
    assert_eq!(counter.count_shared(&Arc::clone(&m)), 10);
    let stats = counter.memo_stats();
    assert_eq!((stats.misses, stats.hits), (1, 2));
}

#[test]
fn an_equal_message_in_another_arc_is_counted_separately() {
    let counter = TokenCounter::estimate();
    let a: SharedMessage = Arc::new(AgentMessage::user_text("same", 0));
    let b: SharedMessage = Arc::new(AgentMessage::user_text("same", 0));
    assert_eq!(a, b);
    counter.count_shared(&a);
    counter.count_shared(&b);
    assert_eq!(counter.memo_stats().misses, 2);
    assert_eq!(counter.memo_stats().hits, 0);
}

#[test]
fn an_unchanged_history_costs_lookups_only() {
    let counter = TokenCounter::estimate();
    let mut history: Vec<SharedMessage> = (0..100)
        .map(|i| Arc::new(AgentMessage::user_text(format!("message {i}"), 0)))
        .collect();
    let first = counter.count_messages(&history);
    assert_eq!(counter.memo_stats().misses, 100);
    // The next turn: the same messages plus two new ones, through a MessageList.
    history.push(Arc::new(AgentMessage::user_text("new", 0)));
    history.push(Arc::new(AgentMessage::user_text("newer", 0)));
    let list: MessageList = history.clone().into();
    let second = counter.count_messages(&list);
    let stats = counter.memo_stats();
    assert_eq!((stats.misses, stats.hits), (102, 100));
    assert_eq!(second.per_message[..100], first.per_message[..]);
    assert_eq!(counter.count_total(&list), second.total);
    assert_eq!(counter.memo_stats().hits, 202);
}

#[test]
fn clones_share_the_memo_and_clear_forgets() {
    let counter = TokenCounter::estimate();
    let clone = counter.clone();
    let m: SharedMessage = Arc::new(AgentMessage::user_text("abc", 0));
    counter.count_shared(&m);
    clone.count_shared(&m);
    assert_eq!(counter.memo_stats().hits, 1);
    assert_eq!(clone.memo_stats().entries, 1);
    clone.clear_memo();
    assert_eq!(counter.memo_stats().entries, 0);
    counter.count_shared(&m);
    assert_eq!(counter.memo_stats().misses, 2);
}

#[test]
fn counters_in_different_modes_do_not_share_figures() {
    let m: SharedMessage = Arc::new(AgentMessage::user_text("上下文窗口是有限资源", 0));
    let estimate = TokenCounter::estimate();
    let exact = TokenCounter::new(CountMode::Exact(Encoding::O200kBase));
    assert_eq!(estimate.count_shared(&m), 10);
    let expected = if exact.is_exact() { 6 } else { 10 };
    assert_eq!(exact.count_shared(&m), expected);
}

#[test]
fn counting_from_many_threads() {
    let counter = TokenCounter::estimate();
    let history: Vec<SharedMessage> = (0..50)
        .map(|i| Arc::new(AgentMessage::user_text("x".repeat(i * 4), 0)))
        .collect();
    let expected: u64 = (0..50).sum();
    std::thread::scope(|s| {
        for _ in 0..4 {
            let counter = counter.clone();
            let history = &history;
            s.spawn(move || {
                for _ in 0..20 {
                    assert_eq!(counter.count_total(history), expected);
                }
            });
        }
    });
    let stats = counter.memo_stats();
    assert_eq!(stats.hits + stats.misses, 4 * 20 * 50);
    assert!(stats.misses >= 50);
}

// ---------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------

#[test]
fn default_modes_for_model_ids() {
    for (model, mode) in [
        ("gpt-4o", CountMode::Exact(Encoding::O200kBase)),
        (
            "gpt-4o-mini-2024-07-18",
            CountMode::Exact(Encoding::O200kBase),
        ),
        ("openai/gpt-4.1", CountMode::Exact(Encoding::O200kBase)),
        ("GPT-5.1-codex", CountMode::Exact(Encoding::O200kBase)),
        ("o1", CountMode::Exact(Encoding::O200kBase)),
        ("o3-mini", CountMode::Exact(Encoding::O200kBase)),
        ("o4-mini", CountMode::Exact(Encoding::O200kBase)),
        (
            "ft:gpt-4o-mini:acme::abc123",
            CountMode::Exact(Encoding::O200kBase),
        ),
        ("gpt-4", CountMode::Exact(Encoding::Cl100kBase)),
        ("gpt-4-turbo", CountMode::Exact(Encoding::Cl100kBase)),
        ("gpt-3.5-turbo", CountMode::Exact(Encoding::Cl100kBase)),
        ("gpt-35-turbo", CountMode::Exact(Encoding::Cl100kBase)),
        ("claude-sonnet-4-5", CountMode::Estimate),
        ("gemini-2.5-pro", CountMode::Estimate),
        ("llama3:8b", CountMode::Estimate),
        ("o1x", CountMode::Estimate),
        ("", CountMode::Estimate),
    ] {
        assert_eq!(CountMode::for_model(model), mode, "{model}");
    }
    assert_eq!(
        TokenCounter::for_model("gpt-4o").is_exact(),
        rampart_context::tokens::EXACT_TOKENS_AVAILABLE
    );
}

#[test]
fn modes_in_configuration() {
    for (text, mode) in [
        ("\"estimate\"", CountMode::Estimate),
        ("\"calibrated\"", CountMode::Calibrated),
        ("\"o200k_base\"", CountMode::Exact(Encoding::O200kBase)),
        ("\"cl100k_base\"", CountMode::Exact(Encoding::Cl100kBase)),
        (
            "{\"exact\": \"o200k_base\"}",
            CountMode::Exact(Encoding::O200kBase),
        ),
        (
            "{\"exact\": \"cl100k_base\"}",
            CountMode::Exact(Encoding::Cl100kBase),
        ),
    ] {
        let parsed: CountMode = serde_json::from_str(text).unwrap();
        assert_eq!(parsed, mode, "{text}");
        // What we write reads back the same.
        let written = serde_json::to_string(&mode).unwrap();
        assert_eq!(serde_json::from_str::<CountMode>(&written).unwrap(), mode);
    }
    assert_eq!(
        serde_json::to_value(CountMode::Estimate).unwrap(),
        json!("estimate")
    );
    assert_eq!(
        serde_json::to_value(CountMode::Calibrated).unwrap(),
        json!("calibrated")
    );
    assert_eq!(
        serde_json::to_value(CountMode::Exact(Encoding::Cl100kBase)).unwrap(),
        json!({"exact": "cl100k_base"})
    );
    assert_eq!(
        serde_json::to_value(Encoding::O200kBase).unwrap(),
        json!("o200k_base")
    );
    assert_eq!(
        "cl100k_base".parse::<CountMode>().unwrap().name(),
        "cl100k_base"
    );
    assert_eq!(CountMode::default(), CountMode::Estimate);
}

#[test]
fn bad_modes_say_what_is_allowed() {
    let err = "gpt2".parse::<CountMode>().unwrap_err().to_string();
    assert!(
        err.contains("\"gpt2\"") && err.contains("o200k_base"),
        "{err}"
    );
    let err = "exact".parse::<CountMode>().unwrap_err().to_string();
    assert!(err.contains("encoding"), "{err}");
    let err = serde_json::from_str::<CountMode>("{\"exact\": \"p50k_base\"}")
        .unwrap_err()
        .to_string();
    assert!(err.contains("p50k_base"), "{err}");
    assert!(serde_json::from_str::<CountMode>("{\"fast\": \"o200k_base\"}").is_err());
    assert!(serde_json::from_str::<CountMode>("42").is_err());
}

/// A list that only grew since the last one the counter summed costs its new messages: the sum
/// is always `count_total`'s, each message is counted once, and a list that is not an
/// extension (a compaction replaced its head, a message in the middle changed) is summed whole.
#[test]
fn a_growing_list_is_summed_from_where_the_last_sum_ended() {
    let counter = TokenCounter::estimate();
    let mut history: Vec<SharedMessage> = Vec::new();
    for turn in 0..200 {
        history.push(Arc::new(AgentMessage::user_text(
            format!("question {turn}"),
            1,
        )));
        history.push(Arc::new(reply(&format!("answer {turn}"), "stop", None)));
        let list = MessageList::from(history.clone());
        assert_eq!(counter.count_list(&list), counter.count_total(&list));
    }
    // 400 messages counted once each (by `count_list`, first); every hit is a lookup of
    // `count_total`'s whole-list check (2·t at turn t): the resumed sums looked up nothing but
    // their two new messages, which were the misses.
    let stats = counter.memo_stats();
    assert_eq!(stats.misses, 400);
    let whole_list_lookups: u64 = (1..=200).map(|t| 2 * t).sum();
    assert_eq!(stats.hits, whole_list_lookups);

    // A changed message in the middle: not an extension, summed whole (and still right).
    let mut edited = history.clone();
    edited[10] = Arc::new(AgentMessage::user_text(
        "a much longer question than before",
        1,
    ));
    let edited = MessageList::from(edited);
    assert_eq!(counter.count_list(&edited), counter.count_total(&edited));
    // A shorter list (a compaction's): summed whole.
    let head = MessageList::from(history[..7].to_vec());
    assert_eq!(counter.count_list(&head), counter.count_total(&head));
}
