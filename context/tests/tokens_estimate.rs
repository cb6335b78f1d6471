//! Estimate mode: pi's per-role rules, OpenClaw's CJK weighting, fixed image costs, rounding.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use rampart_context::tokens::{
    IMAGE_CHARS, TokenCounter, estimate_message_tokens, estimate_messages_tokens,
    estimate_string_chars, message_chars,
};
use rampart_engine_api::AgentMessage;
use serde_json::{Value, json};

fn message(value: Value) -> AgentMessage {
    serde_json::from_value(value).unwrap()
}

fn assistant(content: Value) -> AgentMessage {
    message(json!({
        "role": "assistant", "content": content,
        "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5",
        "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0,
                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
        "stopReason": "toolUse", "timestamp": 0
    }))
}

fn image() -> Value {
    json!({"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"})
}

#[test]
fn chars_over_four_rounded_up_per_message() {
    let counter = TokenCounter::estimate();
    for (len, tokens) in [(0, 0), (1, 1), (4, 1), (5, 2), (8, 2), (9, 3), (400, 100)] {
        let m = AgentMessage::user_text("x".repeat(len), 0);
        assert_eq!(counter.count_message(&m), tokens, "{len} chars");
        assert_eq!(estimate_message_tokens(&m), tokens);
    }
    // Rounding is per message: three 1-char messages are 3 tokens, not ceil(3/4) = 1.
    let ms: Vec<_> = (0..3).map(|_| AgentMessage::user_text("x", 0)).collect();
    assert_eq!(estimate_messages_tokens(&ms), 3);
    let shared: Vec<_> = ms.into_iter().map(Arc::new).collect();
    assert_eq!(counter.count_messages(&shared).total, 3);
    assert_eq!(counter.count_text("abcde"), 2);
}

#[test]
fn cjk_hangul_and_kana_weigh_four() {
    let counter = TokenCounter::estimate();
    // 10 ideographs → 40 chars → 10 tokens; plain `length` would say 3.
    let m = AgentMessage::user_text("上下文窗口是有限资源", 0);
    assert_eq!(message_chars(&m), 40);
    assert_eq!(counter.count_message(&m), 10);
    assert_eq!(counter.count_text("한국어"), 3);
    assert_eq!(counter.count_text("カタカナ"), 4);
    // Mixed: "abc" (3) + 2 kanji (8) + "!" (1) = 12 chars → 3 tokens.
    assert_eq!(estimate_string_chars("abc漢字!"), 12);
    assert_eq!(counter.count_text("abc漢字!"), 3);
    // Outside the BMP: an Extension B ideograph is 4, an emoji 2 (a surrogate pair in JS).
    assert_eq!(estimate_string_chars("\u{20BB7}😀"), 6);
}

#[test]
fn string_content_and_text_blocks_count_alike() {
    let as_string = message(json!({"role": "user", "content": "hello there", "timestamp": 0}));
    let as_blocks = AgentMessage::user_text("hello there", 0);
    assert_eq!(message_chars(&as_string), 11);
    assert_eq!(message_chars(&as_blocks), 11);
}

#[test]
fn images_cost_a_fixed_amount_in_every_role() {
    let tool = message(json!({
        "role": "toolResult", "toolCallId": "c1", "toolName": "screenshot",
        "content": [{"type": "text", "text": "abcd"}, image(), image()],
        "isError": false, "timestamp": 0
    }));
    assert_eq!(message_chars(&tool), 4 + 2 * IMAGE_CHARS);
    assert_eq!(estimate_message_tokens(&tool), 1 + 2 * 1_200);

    let custom = message(json!({
        "role": "custom", "customType": "x", "content": [image()], "display": true, "timestamp": 0
    }));
    assert_eq!(message_chars(&custom), IMAGE_CHARS);

    // pi counts user images as nothing; we charge them like any other (see the module docs).
    let user = message(json!({
        "role": "user", "content": [{"type": "text", "text": "what is this?"}, image()], "timestamp": 0
    }));
    assert_eq!(message_chars(&user), 13 + IMAGE_CHARS);
}

#[test]
fn assistant_counts_text_thinking_and_tool_calls() {
    let m = assistant(json!([
        {"type": "thinking", "thinking": "hmm", "thinkingSignature": "a-long-signature-not-counted"},
        {"type": "text", "text": "ok"},
        {"type": "toolCall", "id": "call_1", "name": "read", "arguments": {"path": "/a"}}
    ]));
    // "hmm" 3 + "ok" 2 + "read" 4 + `{"path":"/a"}` 13 = 22 → 6 tokens.
    assert_eq!(message_chars(&m), 3 + 2 + 4 + 13);
    assert_eq!(estimate_message_tokens(&m), 6);

    // CJK inside tool arguments is weighted too (JSON keeps it unescaped, as JSON.stringify).
    let m = assistant(json!([
        {"type": "toolCall", "id": "c", "name": "grep", "arguments": {"q": "窗口"}}
    ]));
    // "grep" 4 + `{"q":"` 6 + 8 + `"}` 2
    assert_eq!(message_chars(&m), 4 + 6 + 8 + 2);
}

#[test]
fn other_roles() {
    let bash = message(json!({
        "role": "bashExecution", "command": "ls -la", "output": "total 0\n",
        "cancelled": false, "truncated": false, "timestamp": 0
    }));
    assert_eq!(message_chars(&bash), 6 + 8);

    let compaction = message(json!({
        "role": "compactionSummary", "summary": "## Goal\nShip it.", "tokensBefore": 1000, "timestamp": 0
    }));
    assert_eq!(message_chars(&compaction), 16);

    let branch = message(json!({
        "role": "branchSummary", "summary": "tried X", "fromId": "abcd1234", "timestamp": 0
    }));
    assert_eq!(message_chars(&branch), 7);

    // A role we do not know counts as its JSON, so it is never free.
    let unknown = message(json!({"role": "hookMessage", "text": "hi"}));
    let json_len = serde_json::to_string(&unknown).unwrap().len() as u64;
    assert_eq!(message_chars(&unknown), json_len);
    assert!(json_len > 0);
}

#[test]
fn counter_and_free_functions_agree() {
    let counter = TokenCounter::estimate();
    let ms = [
        AgentMessage::user_text("上下文 and some English", 0),
        assistant(json!([{"type": "text", "text": "fine"}])),
        AgentMessage::tool_result("c1", "exec", "done\n".repeat(50), false, 0),
    ];
    for m in &ms {
        assert_eq!(counter.count_message(m), estimate_message_tokens(m));
    }
    let shared: Vec<_> = ms.iter().cloned().map(Arc::new).collect();
    let report = counter.count_messages(&shared);
    assert_eq!(report.total, estimate_messages_tokens(&ms));
    assert_eq!(report.anchor, None);
    assert_eq!(counter.count_total(&shared), report.total);
    assert_eq!(counter.context_tokens(&shared), report.total);
}
