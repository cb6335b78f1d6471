//! The in-memory tool-loop guard: reference §13 item 3, plus sharing and shape edge cases.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use rampart_context::guards::tool_loop::{
    TOOL_LOOP_OVERFLOW_MESSAGE, estimate_message_chars, format_context_limit_truncation_notice,
    guard_tool_loop,
};
use rampart_engine_api::{EngineError, MessageList};
use rampart_message::{AgentMessage, Content, ContentBlock};
use serde_json::json;

const WINDOW: u64 = 1000;

fn user(text: &str) -> AgentMessage {
    AgentMessage::user_text(text, 1)
}

fn result(text: &str) -> AgentMessage {
    AgentMessage::tool_result("call_1", "read", text, false, 2)
}

fn text_of(msg: &AgentMessage) -> String {
    match msg {
        AgentMessage::ToolResult(tr) => match &tr.content {
            Content::Text(s) => s.clone(),
            Content::Blocks(blocks) => blocks
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Text(t) => Some(t.text.as_str()),
                    _ => None,
                })
                .collect(),
        },
        _ => panic!("not a tool result"),
    }
}

/// The number in a trailing `[... N more characters truncated]`.
fn notice_count(text: &str) -> usize {
    let start = text.rfind("[... ").unwrap();
    let rest = &text[start + 5..];
    let end = rest.find(' ').unwrap();
    assert!(text.ends_with(" more characters truncated]"), "{text:?}");
    rest[..end].parse().unwrap()
}

#[test]
fn small_context_passes_through_as_the_same_list() {
    let list = MessageList::from(vec![user(&"u".repeat(3200))]);
    let (out, report) = guard_tool_loop(&list, WINDOW).unwrap();
    assert!(MessageList::same_list(&out, &list));
    assert!(report.truncated.is_empty());
    assert_eq!(report.max_context_chars, 3600);
    assert_eq!(report.max_single_tool_result_chars, 1024);
    assert_eq!(report.estimated_chars, 3200);
}

#[test]
fn oversized_result_is_truncated_in_a_copy() {
    let original = result(&"z".repeat(5000));
    let list = MessageList::from(vec![original.clone()]);
    let (out, report) = guard_tool_loop(&list, WINDOW).unwrap();
    assert!(!MessageList::same_list(&out, &list));
    assert_eq!(report.truncated, vec![0]);
    let text = text_of(&out[0]);
    assert!(text.chars().count() < 5000);
    let n = notice_count(&text);
    let kept = text.chars().take_while(|&c| c == 'z').count();
    assert_eq!(n, 5000 - kept);
    // Within the single-result limit after truncation (text budget 1024 / 2).
    assert!(text.chars().count() <= 512);
    assert!(estimate_message_chars(&out[0]) <= 1024);
    // The input list and its message are untouched.
    assert_eq!(*list[0], original);
}

#[test]
fn details_are_dropped_with_the_truncation() {
    let mut msg = result(&"a".repeat(900));
    if let AgentMessage::ToolResult(tr) = &mut msg {
        tr.details = Some(json!({ "blob": "d".repeat(8000) }));
    }
    let list = MessageList::from(vec![msg]);
    let (out, _) = guard_tool_loop(&list, WINDOW).unwrap();
    let AgentMessage::ToolResult(tr) = out[0].as_ref() else {
        panic!()
    };
    assert_eq!(tr.details, None);
    assert!(text_of(&out[0]).ends_with("more characters truncated]"));
    assert!(text_of(&out[0]).chars().count() < 900);
}

#[test]
fn details_alone_make_a_result_oversized() {
    let mut msg = result("short output");
    if let AgentMessage::ToolResult(tr) = &mut msg {
        tr.details = Some(json!({ "blob": "d".repeat(2000) }));
    }
    let list = MessageList::from(vec![msg]);
    let (out, report) = guard_tool_loop(&list, WINDOW).unwrap();
    assert_eq!(report.truncated, vec![0]);
    let AgentMessage::ToolResult(tr) = out[0].as_ref() else {
        panic!()
    };
    assert_eq!(tr.details, None);
    assert_eq!(text_of(&out[0]), "short output");
}

#[test]
fn whole_context_above_threshold_is_an_overflow() {
    let list = MessageList::from(vec![user(&"u".repeat(50_000)), result(&"x".repeat(5000))]);
    let err = guard_tool_loop(&list, WINDOW).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Context overflow: estimated context size exceeds safe threshold during tool loop."
    );
    assert_eq!(err.to_string(), TOOL_LOOP_OVERFLOW_MESSAGE);
    assert_eq!(err.max_context_chars, 3600);
    assert!(err.estimated_chars > 50_000);
    let engine: EngineError = err.into();
    assert_eq!(engine.message, TOOL_LOOP_OVERFLOW_MESSAGE);
}

#[test]
fn notice_format() {
    assert_eq!(
        format_context_limit_truncation_notice(123),
        "[... 123 more characters truncated]"
    );
    assert_eq!(
        format_context_limit_truncation_notice(0),
        "[... 1 more characters truncated]"
    );
}

#[test]
fn unchanged_messages_stay_the_same_arcs() {
    let list = MessageList::from(vec![
        user("hi"),
        result(&"q".repeat(3000)),
        user("next"),
        result("small"),
    ]);
    let (out, report) = guard_tool_loop(&list, 2000).unwrap();
    assert_eq!(report.truncated, vec![1]);
    assert_eq!(out.len(), 4);
    for i in [0, 2, 3] {
        assert!(Arc::ptr_eq(&out[i], &list[i]), "message {i}");
    }
    assert!(!Arc::ptr_eq(&out[1], &list[1]));
}

#[test]
fn string_content_stays_a_string() {
    let mut msg = result("");
    if let AgentMessage::ToolResult(tr) = &mut msg {
        tr.content = Content::Text("s".repeat(4000));
    }
    let list = MessageList::from(vec![msg]);
    let (out, _) = guard_tool_loop(&list, WINDOW).unwrap();
    let AgentMessage::ToolResult(tr) = out[0].as_ref() else {
        panic!()
    };
    assert!(matches!(&tr.content, Content::Text(s) if s.ends_with("truncated]")));
}

#[test]
fn images_are_kept_and_counted() {
    let msg: AgentMessage = serde_json::from_value(json!({
        "role": "toolResult", "toolCallId": "c", "toolName": "screenshot",
        "content": [
            {"type": "text", "text": "t".repeat(3000)},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"}
        ],
        "isError": false, "timestamp": 0
    }))
    .unwrap();
    // Image: 8000 estimated chars; ×2 for tool results.
    assert_eq!(estimate_message_chars(&msg), (3000 + 8000) * 2);
    let list = MessageList::from(vec![msg]);
    let (out, _) = guard_tool_loop(&list, 100_000).unwrap();
    let AgentMessage::ToolResult(tr) = out[0].as_ref() else {
        panic!()
    };
    let blocks = tr.content.blocks();
    assert_eq!(blocks.len(), 2);
    assert!(matches!(&blocks[1], ContentBlock::Image(_)));
}

#[test]
fn multibyte_text_is_cut_on_character_boundaries() {
    let list = MessageList::from(vec![result(&"日本🎉".repeat(2000))]);
    let (out, _) = guard_tool_loop(&list, WINDOW).unwrap();
    let text = text_of(&out[0]);
    let n = notice_count(&text);
    let kept = text.split('\n').next().unwrap();
    assert!("日本🎉".repeat(2000).starts_with(kept));
    assert_eq!(n, 6000 - kept.chars().count());
}

#[test]
fn cut_prefers_a_late_newline() {
    let mut text = String::new();
    while text.len() < 5000 {
        text.push_str("0123456789abcdefghi\n");
    }
    let list = MessageList::from(vec![result(&text)]);
    let (out, _) = guard_tool_loop(&list, WINDOW).unwrap();
    let cut = text_of(&out[0]);
    let (kept, notice) = cut.rsplit_once('\n').unwrap();
    assert!(kept.ends_with("abcdefghi"), "{kept:?}");
    assert!(notice.starts_with("[... "));
}

#[test]
fn empty_list_is_fine() {
    let list = MessageList::new();
    let (out, report) = guard_tool_loop(&list, WINDOW).unwrap();
    assert!(MessageList::same_list(&out, &list));
    assert_eq!(report.estimated_chars, 0);
}

#[test]
fn assistant_tool_call_counts_its_arguments() {
    let msg: AgentMessage = serde_json::from_value(json!({
        "role": "assistant",
        "content": [
            {"type": "text", "text": "abc"},
            {"type": "thinking", "thinking": "hmm"},
            {"type": "toolCall", "id": "c", "name": "read", "arguments": {"path": "/a"}}
        ],
        "api": "x", "provider": "x", "model": "x",
        "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0,
                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
        "stopReason": "toolUse", "timestamp": 0
    }))
    .unwrap();
    assert_eq!(
        estimate_message_chars(&msg),
        3 + 3 + r#"{"path":"/a"}"#.len()
    );
    let summary: AgentMessage = serde_json::from_value(json!({
        "role": "compactionSummary", "summary": "s".repeat(10_000), "tokensBefore": 5, "timestamp": 0
    }))
    .unwrap();
    assert_eq!(estimate_message_chars(&summary), 256);
}

/// A growing history (a tool loop: each turn adds a call and its result) read by the guard on
/// every turn with one memo: each message's estimate is made once, not once per turn (which
/// read the text of the whole history on every model call), and the verdicts are the ones the
/// guard gives without a memo.
#[test]
fn with_a_memo_each_message_is_estimated_once_across_turns() {
    let memo = rampart_context::guards::ToolLoopMemo::new();
    let mut history: Vec<rampart_message::SharedMessage> = vec![Arc::new(user("start"))];
    let turns = 300;
    for turn in 0..turns {
        history.push(Arc::new(AgentMessage::assistant_text(
            format!("turn {turn}"),
            "api",
            "p",
            "m",
            2,
        )));
        history.push(Arc::new(result(&"r".repeat(turn % 7 * 50))));
        let list = MessageList::from(history.clone());
        let with =
            rampart_context::guards::tool_loop::guard_tool_loop_with(&list, 1_000_000, &memo)
                .unwrap();
        let without = guard_tool_loop(&list, 1_000_000).unwrap();
        assert_eq!(with.1, without.1);
        assert!(MessageList::same_list(&with.0, &list));
    }
    let stats = memo.stats();
    // 1 + 2·300 messages, each estimated once; a pass per turn would estimate 90,000 times.
    assert_eq!(stats.misses, 1 + 2 * turns as u64);
}

/// Resumed from the last list, the guard still gives the whole guard's verdicts: a result too
/// large for one slot is truncated in a copy, and the history that outgrows the window is an
/// overflow, on the very turn the whole guard says so.
#[test]
fn a_resumed_guard_truncates_and_overflows_as_the_whole_guard_does() {
    let window = 2_000; // 7,200 characters in all, 2,000 for one result.
    let memo = rampart_context::guards::ToolLoopMemo::new();
    let mut history: Vec<rampart_message::SharedMessage> = vec![Arc::new(user("start"))];
    let mut verdicts = Vec::new();
    for turn in 0..40 {
        history.push(Arc::new(user(&format!("turn {turn} {}", "w".repeat(150)))));
        let text = if turn == 5 {
            "r".repeat(5_000)
        } else {
            "r".repeat(100)
        };
        history.push(Arc::new(result(&text)));
        let list = MessageList::from(history.clone());
        let with = rampart_context::guards::tool_loop::guard_tool_loop_with(&list, window, &memo);
        let without = guard_tool_loop(&list, window);
        match (&with, &without) {
            (Ok(a), Ok(b)) => {
                assert_eq!(a.1, b.1, "turn {turn}");
                let same = a.0.iter().zip(b.0.iter()).all(|(x, y)| **x == **y);
                assert!(same && a.0.len() == b.0.len(), "turn {turn}");
            }
            (Err(a), Err(b)) => assert_eq!(a, b, "turn {turn}"),
            _ => panic!("turn {turn}: {with:?} against {without:?}"),
        }
        verdicts.push(with.map(|(_, r)| r.truncated.len()).ok());
    }
    assert!(
        verdicts.iter().any(|v| v.is_some_and(|n| n > 0)),
        "{verdicts:?}"
    );
    assert!(verdicts.iter().any(Option::is_none), "{verdicts:?}");
}
