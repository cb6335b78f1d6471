//! Tool-result truncation, the ingest cap and the session plan: reference §13 item 4, plus
//! edge cases (UTF-8, empty text, images, string content, multiple blocks).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::borrow::Cow;

use rampart_context::guards::tool_result::{
    DEFAULT_MAX_LIVE_TOOL_RESULT_CHARS, MIDDLE_OMISSION_MARKER, MIN_KEEP_CHARS,
    RECOVERY_MIN_KEEP_CHARS, TruncateOptions, calculate_max_tool_result_chars, cap_at_ingest,
    estimate_tool_result_reduction_potential, estimate_tool_result_reduction_potential_capped,
    is_oversized_tool_result, plan_session_truncation, session_likely_has_oversized_tool_results,
    tool_result_text_len, truncate_tool_result_message, truncate_tool_result_text,
};
use rampart_message::MessageList;
use rampart_message::{AgentMessage, Content, ContentBlock};
use serde_json::json;

fn result(text: &str) -> AgentMessage {
    AgentMessage::tool_result("call_1", "read", text, false, 7)
}

fn blocks_result(blocks: serde_json::Value) -> AgentMessage {
    serde_json::from_value(json!({
        "role": "toolResult", "toolCallId": "c", "toolName": "read",
        "content": blocks, "details": {"keep": true}, "isError": false, "timestamp": 3
    }))
    .unwrap()
}

fn texts(msg: &AgentMessage) -> Vec<String> {
    let AgentMessage::ToolResult(tr) = msg else {
        panic!("not a tool result")
    };
    match &tr.content {
        Content::Text(s) => vec![s.clone()],
        Content::Blocks(b) => b
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text(t) => Some(t.text.clone()),
                _ => None,
            })
            .collect(),
    }
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

// --- Reference §13 item 4 ------------------------------------------------------------------

#[test]
fn text_length_counts_text_blocks_only() {
    let msg = blocks_result(json!([
        {"type": "text", "text": "abc"},
        {"type": "image", "data": "AAAA", "mimeType": "image/png"},
        {"type": "text", "text": "12345"}
    ]));
    assert_eq!(tool_result_text_len(&msg), 8);
    assert_eq!(tool_result_text_len(&AgentMessage::user_text("abc", 0)), 0);
}

#[test]
fn max_chars_by_window() {
    assert_eq!(
        calculate_max_tool_result_chars(128_000, DEFAULT_MAX_LIVE_TOOL_RESULT_CHARS),
        40_000
    );
    assert!(
        calculate_max_tool_result_chars(2_000_000, DEFAULT_MAX_LIVE_TOOL_RESULT_CHARS)
            <= DEFAULT_MAX_LIVE_TOOL_RESULT_CHARS
    );
    let small = calculate_max_tool_result_chars(32_000, DEFAULT_MAX_LIVE_TOOL_RESULT_CHARS);
    assert_eq!(small, 38_400);
    assert!(calculate_max_tool_result_chars(200_000, DEFAULT_MAX_LIVE_TOOL_RESULT_CHARS) > small);
}

#[test]
fn tiny_budget_still_keeps_the_minimum() {
    let text = "x".repeat(50_000);
    let cut = truncate_tool_result_text(&text, 100, &TruncateOptions::default());
    assert!(chars(&cut.text) > MIN_KEEP_CHARS);
    assert!(cut.text.starts_with(&"x".repeat(MIN_KEEP_CHARS)));
    assert_eq!(cut.omitted_chars, 50_000 - MIN_KEEP_CHARS);
    assert!(cut.text.ends_with("[... 48000 more characters truncated]"));
}

#[test]
fn short_text_is_unchanged_and_borrowed() {
    let cut = truncate_tool_result_text("hello world", 1000, &TruncateOptions::default());
    assert_eq!(cut.text, "hello world");
    assert!(matches!(cut.text, Cow::Borrowed(_)));
    assert!(!cut.is_truncated());
}

#[test]
fn oversized_is_about_tool_results_only() {
    let big = "x".repeat(500_000);
    assert!(is_oversized_tool_result(&result(&big), 128_000));
    assert!(!is_oversized_tool_result(
        &AgentMessage::user_text(big, 0),
        128_000
    ));
    assert!(!is_oversized_tool_result(&result("small"), 128_000));
}

#[test]
fn three_medium_results_are_reducible_only_in_aggregate() {
    let chunk = "alpha beta gamma delta epsilon ".repeat(600);
    assert_eq!(chars(&chunk), 18_600);
    let msgs: Vec<AgentMessage> = (0..3).map(|_| result(&chunk)).collect();
    let p = estimate_tool_result_reduction_potential(&msgs, 128_000);
    assert_eq!(p.tool_result_count, 3);
    assert_eq!(p.total_tool_result_chars, 55_800);
    assert_eq!(p.oversized_count, 0);
    assert_eq!(p.oversized_reducible_chars, 0);
    assert!(p.aggregate_reducible_chars > 0);
    assert_eq!(p.max_reducible_chars, p.aggregate_reducible_chars);
    assert_eq!(p.aggregate_reducible_chars, 55_800 - 40_000);
    assert!(session_likely_has_oversized_tool_results(&msgs, 128_000));
}

#[test]
fn a_single_small_result_is_not_reducible() {
    let msgs = vec![AgentMessage::user_text("q", 0), result("small output")];
    let p = estimate_tool_result_reduction_potential(&msgs, 128_000);
    assert_eq!(p.max_reducible_chars, 0);
    assert_eq!(p.tool_result_count, 1);
    assert!(!session_likely_has_oversized_tool_results(&msgs, 128_000));
}

// --- Truncation rules --------------------------------------------------------------------

#[test]
fn head_only_cuts_at_a_late_newline() {
    let line = "a line of output that is forty chars..\n";
    let text = line.repeat(300);
    let cut = truncate_tool_result_text(&text, 5000, &TruncateOptions::default());
    let (kept, notice) = cut.text.rsplit_once('\n').unwrap();
    assert!(text.starts_with(kept));
    assert!(kept.ends_with("chars.."), "{kept:?}");
    assert!(notice.starts_with("[... "));
    assert_eq!(cut.omitted_chars, chars(&text) - chars(kept));
    assert!(chars(&cut.text) <= 5000);
}

#[test]
fn no_newline_cut_when_the_newline_is_early() {
    let text = format!("first line\n{}", "y".repeat(20_000));
    let cut = truncate_tool_result_text(&text, 5000, &TruncateOptions::default());
    let kept = cut.text.rsplit_once('\n').unwrap().0;
    assert!(kept.len() > 4000);
}

#[test]
fn json_tail_is_kept() {
    let text = format!("{{\"items\": [{}]}}", "\"entry\",".repeat(5000));
    let cut = truncate_tool_result_text(&text, 10_000, &TruncateOptions::default());
    assert!(cut.text.contains(MIDDLE_OMISSION_MARKER));
    let body = cut.text.rsplit_once('\n').unwrap().0;
    assert!(body.ends_with("]}"));
    assert!(chars(&cut.text) <= 10_000);
}

#[test]
fn head_and_tail_needs_a_budget_above_twice_the_minimum() {
    let text = format!("{}\nerror: boom", "z".repeat(20_000));
    // Budget about 3,950 ≤ 4,000: head only, even with an error at the end.
    let cut = truncate_tool_result_text(&text, 4000, &TruncateOptions::default());
    assert!(!cut.text.contains(MIDDLE_OMISSION_MARKER));
    let cut = truncate_tool_result_text(&text, 8000, &TruncateOptions::default());
    assert!(cut.text.contains(MIDDLE_OMISSION_MARKER));
    assert!(cut.text.contains("error: boom"));
}

#[test]
fn multibyte_text_is_never_split() {
    let text = "ä日🎉x".repeat(10_000);
    for max in [0, 1, 2001, 2002, 2003, 5000, 12_345] {
        let cut = truncate_tool_result_text(&text, max, &TruncateOptions::default());
        let kept = cut.text.rsplit_once('\n').unwrap().0;
        assert!(text.starts_with(kept));
        assert_eq!(cut.omitted_chars, 40_000 - chars(kept));
    }
}

#[test]
fn empty_text_is_unchanged() {
    let cut = truncate_tool_result_text("", 0, &TruncateOptions::default());
    assert_eq!(cut.text, "");
    assert_eq!(cut.omitted_chars, 0);
    assert!(truncate_tool_result_message(&result(""), 0).is_none());
}

#[test]
fn recovery_minimum_allows_a_tiny_result() {
    let opts = TruncateOptions {
        min_keep_chars: RECOVERY_MIN_KEEP_CHARS,
        full_output_ref: None,
    };
    let text = "w".repeat(10_000);
    let cut = truncate_tool_result_text(&text, 100, &opts);
    assert!(chars(&cut.text) <= 100);
    assert!(cut.text.ends_with("more characters truncated]"));
}

// --- Messages ----------------------------------------------------------------------------

#[test]
fn images_and_other_fields_are_kept() {
    let msg = blocks_result(json!([
        {"type": "text", "text": "t".repeat(60_000)},
        {"type": "image", "data": "AAAA", "mimeType": "image/png"}
    ]));
    let cut = truncate_tool_result_message(&msg, 40_000).unwrap();
    assert_eq!(cut.original_chars, 60_000);
    let AgentMessage::ToolResult(tr) = &cut.message else {
        panic!()
    };
    assert_eq!(tr.details, Some(json!({"keep": true})));
    assert_eq!(tr.tool_call_id, "c");
    assert_eq!(tr.timestamp, 3);
    let blocks = tr.content.blocks();
    assert_eq!(blocks.len(), 2);
    assert!(matches!(&blocks[1], ContentBlock::Image(_)));
    assert!(tool_result_text_len(&cut.message) <= 40_000);
}

#[test]
fn budget_is_shared_by_block_length() {
    let msg = blocks_result(json!([
        {"type": "text", "text": "a".repeat(90_000)},
        {"type": "text", "text": "b".repeat(30_000)},
        {"type": "text", "text": "short"}
    ]));
    let cut = truncate_tool_result_message(&msg, 40_000).unwrap();
    let t = texts(&cut.message);
    assert_eq!(t.len(), 3);
    assert!(chars(&t[0]) <= 30_000 && chars(&t[0]) > 29_000);
    assert!(chars(&t[1]) <= 10_000 && chars(&t[1]) > 9_000);
    assert_eq!(t[2], "short");
    assert_eq!(
        cut.omitted_chars,
        120_005
            - t.iter()
                .map(|s| chars(s.rsplit_once('\n').map_or(s, |x| x.0)))
                .sum::<usize>()
    );
}

#[test]
fn string_content_stays_a_string() {
    let mut msg = result("");
    if let AgentMessage::ToolResult(tr) = &mut msg {
        tr.content = Content::Text("s".repeat(50_000));
    }
    let cut = truncate_tool_result_message(&msg, 40_000).unwrap();
    let AgentMessage::ToolResult(tr) = &cut.message else {
        panic!()
    };
    assert!(matches!(&tr.content, Content::Text(_)));
}

#[test]
fn non_tool_results_are_never_truncated() {
    assert!(
        truncate_tool_result_message(&AgentMessage::user_text("x".repeat(90_000), 0), 10).is_none()
    );
}

// --- Ingest cap --------------------------------------------------------------------------

#[test]
fn ingest_cap_names_the_stored_original() {
    let text = format!("{}\nexit code 2\n", "log line\n".repeat(500_000));
    let msg = result(&text);
    let (capped, report) =
        cap_at_ingest(&msg, 128_000, 40_000, Some("blob sha256:0123abcd")).unwrap();
    assert_eq!(report.cap_chars, 40_000);
    assert_eq!(report.original_chars, chars(&text));
    assert_eq!(
        report.full_output_ref.as_deref(),
        Some("blob sha256:0123abcd")
    );
    let out = &texts(&capped)[0];
    assert!(chars(out) <= 40_000);
    assert!(out.contains("exit code 2"));
    assert!(out.ends_with(&format!(
        "[... {} more characters truncated; full output: blob sha256:0123abcd]",
        report.omitted_chars
    )));
    // The omitted count is exact: kept head plus tail plus omitted is the original.
    let (head, rest) = out.split_once(MIDDLE_OMISSION_MARKER).unwrap();
    let tail = rest.rsplit_once('\n').unwrap().0;
    assert_eq!(
        chars(head) + chars(tail) + report.omitted_chars,
        chars(&text)
    );
}

#[test]
fn ingest_cap_follows_a_small_window_but_keeps_the_minimum() {
    let msg = result(&"k".repeat(100_000));
    let (capped, report) = cap_at_ingest(&msg, 16_000, 40_000, None).unwrap();
    assert_eq!(report.cap_chars, 19_200);
    assert!(tool_result_text_len(&capped) <= 19_200);
    let (capped, report) = cap_at_ingest(&msg, 1_000, 40_000, None).unwrap();
    assert_eq!(report.cap_chars, 1_200);
    assert!(tool_result_text_len(&capped) >= MIN_KEEP_CHARS);
    assert!(cap_at_ingest(&result("fits"), 128_000, 40_000, None).is_none());
    assert!(
        cap_at_ingest(
            &AgentMessage::user_text("k".repeat(100_000), 0),
            128_000,
            40_000,
            None
        )
        .is_none()
    );
}

// --- Session plan ------------------------------------------------------------------------

#[test]
fn plan_truncates_the_newest_results_first() {
    let chunk = "alpha beta gamma delta epsilon ".repeat(600);
    let msgs = MessageList::from(vec![
        AgentMessage::user_text("go", 0),
        result(&chunk),
        result(&chunk),
        result(&chunk),
    ]);
    let plan = plan_session_truncation(&msgs, 128_000);
    assert_eq!(plan.edits.len(), 1);
    assert_eq!(plan.edits[0].0, 3);
    assert_eq!(plan.aggregate_truncated, 1);
    assert_eq!(plan.oversized_truncated, 0);
    assert_eq!(plan.skip_reason, None);
    let after: usize = (1..4)
        .map(|i| {
            plan.edits.iter().find(|(j, _)| *j == i).map_or_else(
                || tool_result_text_len(&msgs[i]),
                |(_, m)| tool_result_text_len(m),
            )
        })
        .sum();
    assert!(after <= plan.potential.aggregate_budget_chars);
    assert_eq!(
        plan.log_line(),
        "[tool-result-truncation] Truncated 1 tool result(s) in session (contextWindow=128000 \
         maxChars=40000 aggregateBudgetChars=40000 oversized=0 aggregate=1)"
    );
}

#[test]
fn plan_cuts_oversized_results_to_the_cap() {
    let msgs = vec![
        AgentMessage::user_text("go", 0),
        result(&"o".repeat(500_000)),
        result("small"),
    ];
    let plan = plan_session_truncation(&msgs, 128_000);
    assert_eq!(plan.potential.oversized_count, 1);
    assert_eq!(plan.oversized_truncated, 1);
    assert_eq!(plan.edits[0].0, 1);
    let cut = tool_result_text_len(&plan.edits[0].1);
    assert!(cut <= 40_000);
    assert!(500_000 - cut >= plan.potential.oversized_reducible_chars);
}

#[test]
fn plan_reasons_for_doing_nothing() {
    let empty: Vec<AgentMessage> = Vec::new();
    assert_eq!(
        plan_session_truncation(&empty, 128_000).skip_reason,
        Some("empty session")
    );
    let small = vec![result("a"), result("b")];
    let plan = plan_session_truncation(&small, 128_000);
    assert!(plan.is_empty());
    assert_eq!(
        plan.skip_reason,
        Some("no oversized or aggregate tool results")
    );
}

#[test]
fn configured_cap_lowers_the_plan() {
    let msgs = vec![result(&"c".repeat(20_000))];
    let p = estimate_tool_result_reduction_potential_capped(&msgs, 128_000, 16_000);
    assert_eq!(p.max_chars, 16_000);
    assert_eq!(p.oversized_count, 1);
}
