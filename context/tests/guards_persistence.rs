//! The persistence guard: reference §13 item 16, plus pending-call bookkeeping.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rampart_context::guards::persistence::{
    PersistenceGuard, PersistenceOptions, UNKNOWN_TOOL_NAME,
};
use rampart_message::{AgentMessage, Content, ContentBlock};
use serde_json::json;

fn assistant_calls(calls: &[(&str, &str)], stop: &str, ts: u64) -> AgentMessage {
    let content: Vec<_> = calls
        .iter()
        .map(|(id, name)| json!({"type": "toolCall", "id": id, "name": name, "arguments": {}}))
        .collect();
    serde_json::from_value(json!({
        "role": "assistant", "content": content,
        "api": "x", "provider": "x", "model": "x",
        "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0,
                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
        "stopReason": stop, "timestamp": ts
    }))
    .unwrap()
}

fn assistant_error(ts: u64) -> AgentMessage {
    serde_json::from_value(json!({
        "role": "assistant", "content": [],
        "api": "x", "provider": "x", "model": "x",
        "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0,
                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
        "stopReason": "error", "errorMessage": "upstream failed", "timestamp": ts
    }))
    .unwrap()
}

fn text(msg: &AgentMessage) -> String {
    let AgentMessage::ToolResult(tr) = msg else {
        panic!("not a tool result: {msg:?}")
    };
    match &tr.content {
        Content::Text(s) => s.clone(),
        Content::Blocks(b) => b
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text(t) => Some(t.text.clone()),
                _ => None,
            })
            .collect(),
    }
}

fn persist_all(guard: &mut PersistenceGuard, msgs: Vec<AgentMessage>) -> Vec<AgentMessage> {
    msgs.into_iter().flat_map(|m| guard.on_message(m)).collect()
}

#[test]
fn a_missing_result_gets_a_synthetic_error_before_the_next_message() {
    let mut guard = PersistenceGuard::new(PersistenceOptions::default());
    let out = persist_all(
        &mut guard,
        vec![
            assistant_calls(&[("call_1", "read")], "toolUse", 10),
            assistant_error(20),
        ],
    );
    let roles: Vec<_> = out.iter().map(AgentMessage::role).collect();
    assert_eq!(roles, ["assistant", "toolResult", "assistant"]);
    let AgentMessage::ToolResult(tr) = &out[1] else {
        panic!()
    };
    assert_eq!(tr.tool_call_id, "call_1");
    assert!(tr.is_error);
    assert_eq!(tr.tool_name, "read");
    assert!(text(&out[1]).contains("missing tool result"));
    assert!(tr.timestamp >= 10 && tr.timestamp <= 20);
    assert_eq!(guard.pending_ids().count(), 0);
}

#[test]
fn a_huge_result_is_persisted_truncated() {
    let mut guard = PersistenceGuard::new(PersistenceOptions::default());
    let out = persist_all(
        &mut guard,
        vec![
            assistant_calls(&[("call_1", "read")], "toolUse", 1),
            AgentMessage::tool_result("call_1", "read", "x".repeat(500_000), false, 2),
        ],
    );
    assert_eq!(out.len(), 2);
    let persisted = text(&out[1]);
    assert!(persisted.chars().count() < 500_000);
    assert!(persisted.contains("truncated"));
}

#[test]
fn aborted_or_errored_calls_get_no_synthetic_result() {
    for stop in ["aborted", "error"] {
        let mut guard = PersistenceGuard::new(PersistenceOptions::default());
        let out = persist_all(
            &mut guard,
            vec![
                assistant_calls(&[("call_1", "read")], stop, 1),
                AgentMessage::user_text("again", 2),
            ],
        );
        let roles: Vec<_> = out.iter().map(AgentMessage::role).collect();
        assert_eq!(roles, ["assistant", "user"], "{stop}");
        assert!(guard.flush().is_empty());
    }
}

#[test]
fn answered_calls_are_not_pending() {
    let mut guard = PersistenceGuard::new(PersistenceOptions::default());
    let out = persist_all(
        &mut guard,
        vec![
            assistant_calls(&[("a", "read"), ("b", "exec")], "toolUse", 1),
            AgentMessage::tool_result("b", "exec", "ok", false, 2),
            AgentMessage::user_text("next", 3),
        ],
    );
    let summary: Vec<_> = out
        .iter()
        .map(|m| (m.role(), m.tool_call_id().unwrap_or("")))
        .collect();
    assert_eq!(
        summary,
        [
            ("assistant", ""),
            ("toolResult", "b"),
            ("toolResult", "a"),
            ("user", "")
        ]
    );
}

#[test]
fn new_calls_while_pending_flush_the_old_ones_first() {
    let mut guard = PersistenceGuard::new(PersistenceOptions::default());
    let out = persist_all(
        &mut guard,
        vec![
            assistant_calls(&[("a", "read")], "toolUse", 1),
            assistant_calls(&[("b", "exec")], "toolUse", 2),
        ],
    );
    let ids: Vec<_> = out
        .iter()
        .map(|m| m.tool_call_id().unwrap_or("-"))
        .collect();
    assert_eq!(ids, ["-", "a", "-"]);
    assert_eq!(guard.pending_ids().collect::<Vec<_>>(), ["b"]);
    let flushed = guard.flush();
    assert_eq!(flushed.len(), 1);
    assert_eq!(flushed[0].tool_call_id(), Some("b"));
    assert!(guard.flush().is_empty());
}

#[test]
fn blank_names_are_filled_from_the_call_or_unknown() {
    let mut guard = PersistenceGuard::new(PersistenceOptions::default());
    guard.on_message(assistant_calls(&[("a", "grep")], "toolUse", 1));
    let out = guard.on_message(AgentMessage::tool_result("a", "   ", "found", false, 2));
    let AgentMessage::ToolResult(tr) = &out[0] else {
        panic!()
    };
    assert_eq!(tr.tool_name, "grep");
    let out = guard.on_message(AgentMessage::tool_result("zzz", "", "orphan", false, 3));
    let AgentMessage::ToolResult(tr) = &out[0] else {
        panic!()
    };
    assert_eq!(tr.tool_name, UNKNOWN_TOOL_NAME);
}

#[test]
fn synthetic_results_can_be_turned_off() {
    let mut guard = PersistenceGuard::new(PersistenceOptions {
        allow_synthetic_tool_results: false,
        ..PersistenceOptions::default()
    });
    let out = persist_all(
        &mut guard,
        vec![
            assistant_calls(&[("a", "read")], "toolUse", 1),
            AgentMessage::user_text("next", 2),
        ],
    );
    assert_eq!(out.len(), 2);
    assert_eq!(guard.pending_ids().count(), 0);
}

#[test]
fn capped_results_report_and_name_the_blob() {
    let mut guard = PersistenceGuard::new(PersistenceOptions {
        context_window: 128_000,
        ..PersistenceOptions::default()
    });
    let big = AgentMessage::tool_result("a", "read", "y".repeat(1_000_000), false, 1);
    assert!(guard.would_cap(&big));
    assert!(!guard.would_cap(&AgentMessage::user_text("y".repeat(1_000_000), 1)));
    let persisted = guard.on_message_with_ref(big, Some("blob sha256:feed"));
    let report = persisted.cap.unwrap();
    assert_eq!(report.original_chars, 1_000_000);
    assert_eq!(report.cap_chars, 40_000);
    let out = text(&persisted.messages[0]);
    assert!(out.contains("full output: blob sha256:feed"));
    assert_eq!(
        out.chars().count() - out.rsplit_once('\n').unwrap().1.chars().count() - 1,
        1_000_000 - report.omitted_chars
    );
}

/// A shared message goes through the guard as an owned one does (the same messages out, the
/// same caps, the same synthetic results), and one the guard leaves as it is comes back as the
/// very allocation given: a proxied client's conversation is stored without a copy.
#[test]
fn a_shared_message_is_guarded_as_an_owned_one_and_kept_when_unchanged() {
    use std::sync::Arc;
    let opts = PersistenceOptions {
        context_window: 8_000,
        ..PersistenceOptions::default()
    };
    let sequence = vec![
        AgentMessage::user_text("go", 1),
        assistant_calls(&[("a", "read"), ("b", "exec"), ("c", "grep")], "toolUse", 2),
        AgentMessage::tool_result("a", "read", "small", false, 3),
        AgentMessage::tool_result("b", "", "named by its call", false, 4),
        AgentMessage::tool_result("zzz", "read", "x".repeat(500_000), false, 5),
        // `c` never answered: a synthetic result comes before the next message.
        AgentMessage::user_text("next", 6),
        assistant_error(7),
        AgentMessage::user_text("again", 8),
    ];
    let mut owned = PersistenceGuard::new(opts);
    let mut shared = PersistenceGuard::new(opts);
    let mut kept = 0;
    for message in sequence {
        let given = Arc::new(message.clone());
        let by_value = owned.on_message_with_ref(message, Some("blob:1"));
        let by_share = shared.on_shared_with_ref(Arc::clone(&given), Some("blob:1"));
        let as_values: Vec<AgentMessage> =
            by_share.messages.iter().map(|m| (**m).clone()).collect();
        assert_eq!(as_values, by_value.messages);
        assert_eq!(by_share.cap, by_value.cap);
        let unchanged = by_value.messages.last() == Some(&*given);
        assert_eq!(
            Arc::ptr_eq(by_share.messages.last().unwrap(), &given),
            unchanged,
            "{given:?}"
        );
        kept += usize::from(unchanged);
    }
    assert_eq!(
        kept, 6,
        "all but the unnamed and the capped result are kept as given"
    );
    assert_eq!(
        owned.pending_ids().collect::<Vec<_>>(),
        shared.pending_ids().collect::<Vec<_>>()
    );
}
