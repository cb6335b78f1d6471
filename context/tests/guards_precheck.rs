//! The pre-prompt precheck: reference §13 item 2.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rampart_context::guards::precheck::{
    PRECHECK_OVERFLOW_MESSAGE, PrecheckInput, Route, estimate_pre_prompt_tokens, precheck,
};
use rampart_context::tokens::estimate_message_tokens;
use rampart_message::AgentMessage;

fn short_history() -> Vec<AgentMessage> {
    vec![
        AgentMessage::user_text("hi", 0),
        AgentMessage::assistant_text("hello there", "x", "x", "x", 1),
    ]
}

fn run(budget: u64, reserve: u64, estimated: u64) -> rampart_context::guards::PrecheckOutcome {
    precheck(&PrecheckInput {
        estimated_tokens: estimated,
        context_window: budget,
        reserve_tokens: reserve,
        tool_result_reducible_chars: 0,
    })
}

#[test]
fn estimate_is_the_shared_estimate_times_1_2() {
    let tokens = |m: &AgentMessage| estimate_message_tokens(m);
    let raw: u64 = short_history().iter().map(tokens).sum::<u64>()
        + tokens(&AgentMessage::user_text("sys", 0))
        + tokens(&AgentMessage::user_text("hello", 0));
    let expected = (raw as f64 * 1.2).ceil() as u64;
    assert_eq!(
        estimate_pre_prompt_tokens(&short_history(), "sys", "hello"),
        expected
    );
    // With pi's chars/4: "hi" 1 + "hello there" 3 + "sys" 1 + "hello" 2 = 7; ceil(8.4) = 9.
    assert!(expected >= 9);
    assert_eq!(estimate_pre_prompt_tokens::<AgentMessage>(&[], "", ""), 0);
}

#[test]
fn budget_16000_reserve_20000_fits_with_the_reserve_shrunk() {
    let est = estimate_pre_prompt_tokens(&short_history(), "sys", "hello");
    let out = run(16_000, 20_000, est);
    assert_eq!(out.effective_reserve, 8000);
    assert_eq!(out.prompt_budget_before_reserve, 8000);
    assert_eq!(out.route, Route::Fits);
    assert_eq!(out.overflow_tokens, 0);
    assert!(!out.should_compact);
}

#[test]
fn budget_32000_reserve_20000_keeps_the_full_reserve() {
    let est = estimate_pre_prompt_tokens(&short_history(), "sys", "hello");
    let out = run(32_000, 20_000, est);
    assert_eq!(out.effective_reserve, 20_000);
    assert_eq!(out.prompt_budget_before_reserve, 12_000);
    assert!(!out.should_compact);
    assert_eq!(out.route, Route::Fits);
}

#[test]
fn budget_10000_reserve_1000_fits() {
    let est = estimate_pre_prompt_tokens(&short_history(), "sys", "hello");
    assert_eq!(run(10_000, 1000, est).route, Route::Fits);
}

#[test]
fn verbose_request_in_a_tiny_budget_compacts() {
    let history: Vec<AgentMessage> = (0..10)
        .map(|i| AgentMessage::user_text(format!("message {i} ").repeat(40), i))
        .collect();
    let system = "You are a careful assistant. ".repeat(20);
    let prompt = "Please summarise everything above in detail. ".repeat(10);
    let est = estimate_pre_prompt_tokens(&history, &system, &prompt);
    let out = run(500, 50, est);
    assert_eq!(out.effective_reserve, 50);
    assert_eq!(out.prompt_budget_before_reserve, 450);
    assert!(out.overflow_tokens > 0);
    assert_eq!(out.route, Route::CompactOnly);
    assert!(out.should_compact);
    assert_eq!(out.error_message(), Some(PRECHECK_OVERFLOW_MESSAGE));
}

#[test]
fn error_text() {
    assert!(PRECHECK_OVERFLOW_MESSAGE.contains("Context overflow:"));
    assert!(PRECHECK_OVERFLOW_MESSAGE.contains("(precheck)"));
    assert_eq!(
        PRECHECK_OVERFLOW_MESSAGE,
        "Context overflow: prompt too large for the model (precheck)."
    );
}

#[test]
fn reducible_tool_results_choose_truncation() {
    let base = PrecheckInput {
        estimated_tokens: 20_000,
        context_window: 16_000,
        reserve_tokens: 20_000,
        tool_result_reducible_chars: 0,
    };
    // overflow 12,000 tokens: truncation alone needs max(48,000 + 2,048, 72,000) chars.
    let with = |chars| {
        precheck(&PrecheckInput {
            tool_result_reducible_chars: chars,
            ..base
        })
    };
    assert_eq!(with(0).overflow_tokens, 12_000);
    assert_eq!(with(0).route, Route::CompactOnly);
    assert_eq!(with(72_000).route, Route::TruncateToolResultsOnly);
    assert_eq!(with(71_999).route, Route::CompactThenTruncate);
    assert!(with(71_999).should_compact);
    assert!(!with(72_000).should_compact);
}
