use rampart_engine_api::host::service;
use rampart_engine_test::{FakeHost, Harness, build};

use super::*;

fn assemble_full(engine: WindowEngine, messages: Vec<AgentMessage>) -> (Vec<AgentMessage>, u64) {
    let host = FakeHost::new();
    let harness = Harness::new(engine, &host);
    let out = harness.assemble(messages, None).unwrap();
    let kept = out.messages.iter().map(|m| (**m).clone()).collect();
    (kept, out.estimated_tokens)
}

fn assemble(engine: WindowEngine, messages: Vec<AgentMessage>) -> Vec<AgentMessage> {
    assemble_full(engine, messages).0
}

#[test]
fn keeps_newest_messages_within_budget() {
    let msgs: Vec<_> = (0..10)
        .map(|i| build::user(format!("{i}").repeat(40)))
        .collect();
    // Each message is 10 tokens; a budget of 35 keeps the newest 3.
    let (out, tokens) = assemble_full(WindowEngine::new(35), msgs.clone());
    assert_eq!(out, msgs[7..].to_vec());
    assert_eq!(tokens, 30);
}

#[test]
fn never_separates_a_tool_call_from_its_result() {
    let msgs = vec![
        build::user("u".repeat(40)),
        build::assistant_calls(&[("c1", "read", serde_json::json!({}))]),
        build::tool_result("c1", "read", "r".repeat(40)),
        build::user("v".repeat(40)),
    ];
    // The result alone would fit a budget of 21 with the last user message; its call must
    // come too, and together they do not fit, so only the last message is kept.
    assert_eq!(
        assemble(WindowEngine::new(21), msgs.clone()),
        msgs[3..].to_vec()
    );
    assert_eq!(assemble(WindowEngine::new(100), msgs.clone()), msgs);
}

#[test]
fn oversized_newest_unit_is_sent_alone() {
    let msgs = vec![build::user("a"), build::user("b".repeat(400))];
    assert_eq!(
        assemble(WindowEngine::new(10), msgs.clone()),
        msgs[1..].to_vec()
    );
}

#[test]
fn tokenizer_config_selects_how_to_count() {
    let tokenizer = |config| {
        WindowEngine::from_config(&config)
            .unwrap()
            .tokenizer()
            .clone()
    };
    assert_eq!(tokenizer(serde_json::json!({})), Tokenizer::Estimate);
    assert_eq!(
        tokenizer(serde_json::json!({"tokenizer": "estimate"})),
        Tokenizer::Estimate
    );
    assert_eq!(
        tokenizer(serde_json::json!({"tokenizer": "o200k_base"})),
        Tokenizer::Host("o200k_base".into())
    );
    assert_eq!(
        tokenizer(serde_json::json!({"tokenizer": "host"})),
        Tokenizer::Host(String::new())
    );
    for bad in [
        serde_json::json!({"tokenizer": "gpt2"}),
        serde_json::json!({"tokenizer": "calibrated"}),
        serde_json::json!({"tokenizer": 4}),
    ] {
        let err = WindowEngine::from_config(&bad).unwrap_err();
        assert!(err.message.contains("tokenizer"), "{err}");
        assert!(err.message.contains("o200k_base"), "{err}");
    }
}

/// With an exact tokenizer the host's figures decide what fits, not the local estimate.
#[test]
fn host_counts_decide_what_fits() {
    // 40 CJK characters: 40 estimated tokens each (a CJK character weighs 4 characters).
    let cjk = "上下文窗口是有限资源".repeat(4);
    let msgs = vec![build::user(cjk.clone()), build::user(cjk)];
    let (out, tokens) = assemble_full(WindowEngine::new(60), msgs.clone());
    assert_eq!((out.len(), tokens), (1, 40));

    // A host whose tokenizer spends one token per 2 CJK characters: 20 a message, both fit.
    let host = FakeHost::new().count_tokens_with(|tokenizer, m| {
        assert_eq!(tokenizer, "o200k_base");
        rampart_engine_api::tokens::message_chars(m) / 8
    });
    let engine = WindowEngine::from_config(&serde_json::json!({
        "keepRecentTokens": 60, "tokenizer": "o200k_base"
    }))
    .unwrap()
    .with_host(host.host());
    let harness = Harness::new(engine, &host);
    let out = harness.assemble(msgs, None).unwrap();
    assert_eq!((out.messages.len(), out.estimated_tokens), (2, 40));
    // Both messages were missing from the memo, and were counted in one host call per unit.
    assert_eq!(host.calls_to(service::TOKENS_COUNT).len(), 2);
}

/// A host that cannot count makes the engine estimate, and say so once.
#[test]
fn a_host_without_token_counting_means_estimates_and_one_warning() {
    let host = FakeHost::new().without_token_counting();
    let engine = WindowEngine::from_config(&serde_json::json!({"tokenizer": "host"}))
        .unwrap()
        .with_host(host.host());
    let harness = Harness::new(engine, &host);
    for i in 0..3 {
        let msgs = vec![build::user(format!("x{i}").repeat(20))];
        let out = harness.assemble(msgs, None).unwrap();
        assert_eq!(out.estimated_tokens, 10);
    }
    assert_eq!(host.calls_to(service::TOKENS_COUNT).len(), 1);
    let warnings: Vec<_> = host
        .logs()
        .into_iter()
        .filter(|l| l.level == LogLevel::Warn)
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].message.contains("estimating instead"));
}

#[test]
fn a_repeated_history_is_counted_once() {
    let engine = WindowEngine::new(1_000);
    let host = FakeHost::new();
    let cx_host = host.host();
    let cx = CallContext::new(&cx_host, &rampart_engine_api::engine::NeverCancelled, None);
    let messages: rampart_engine_api::MessageList = (0..10)
        .map(|i| Arc::new(build::user(format!("message {i}"))))
        .collect::<Vec<_>>()
        .into();
    for _ in 0..3 {
        let params = AssembleParams {
            messages: messages.clone(),
            ..Default::default()
        };
        engine.assemble(&cx, params).unwrap();
    }
    assert_eq!(
        engine.memo_stats(),
        MemoStats {
            misses: 10,
            hits: 20
        }
    );
}

#[test]
fn bad_config_names_the_key() {
    let err =
        WindowEngine::from_config(&serde_json::json!({"keepRecentTokens": "lots"})).unwrap_err();
    assert!(err.message.contains("keepRecentTokens"), "{err}");
    assert_eq!(
        WindowEngine::from_config(&serde_json::json!({}))
            .unwrap()
            .keep_recent_tokens(),
        20_000
    );
}
