#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

#[test]
fn claude_codes_bound_leaves_no_room_in_a_40k_window() {
    assert!(leaves_no_room(40_000, 32_000));
    // The reserve falls to the floor; at 200k the client's bound stands.
    assert_eq!(reserve_cap(40_000, 32_000, 4_096), 4_096);
    assert!(!leaves_no_room(200_000, 32_000));
    assert_eq!(reserve_cap(200_000, 32_000, 4_096), 32_000);
}

#[test]
fn a_bound_below_the_floor_is_never_raised() {
    assert_eq!(reserve_cap(8_000, 5_000, 4_096), 4_096);
    assert_eq!(reserve_cap(1_000, 600, 4_096), 600);
    assert_eq!(grant(1_000, 600, 4_096, 900), 600);
}

#[test]
fn the_grant_is_what_the_window_leaves_beside_the_prompt() {
    // 20,000 counted tokens are 24,000 with the ×1.2 margin: 16,000 remain of 40,000.
    assert_eq!(grant(40_000, 32_000, 4_096, 20_000), 16_000);
    // Never more than asked,
    assert_eq!(grant(40_000, 32_000, 4_096, 100), 32_000);
    // never below the floor.
    assert_eq!(grant(40_000, 32_000, 4_096, 32_000), 4_096);
}

#[test]
fn only_a_lower_grant_counts_as_lowered() {
    let mut record = FitRecord {
        prompt_tokens: 20_000,
        window: 40_000,
        requested: Some(32_000),
        granted: Some(16_000),
        floor: 4_096,
    };
    assert_eq!(record.lowered(), Some((16_000, 32_000)));
    record.granted = Some(32_000);
    assert_eq!(record.lowered(), None);
    record.granted = None;
    assert_eq!(record.lowered(), None);
}

fn anthropic_fields(thinking: serde_json::Value) -> ClientFields {
    let body = serde_json::json!({"thinking": thinking, "temperature": 1});
    ClientFields::capture(
        crate::providers::FieldsWire::Anthropic,
        body.as_object().unwrap(),
    )
}

#[test]
fn a_thinking_budget_at_or_above_the_grant_is_lowered_below_it() {
    let mut fields =
        anthropic_fields(serde_json::json!({"type": "enabled", "budget_tokens": 31_999}));
    assert_eq!(fit_thinking(&mut fields, 16_000), Some((31_999, 15_999)));
    assert_eq!(fields.fields["thinking"]["budget_tokens"], 15_999);
    assert_eq!(fields.fields["thinking"]["type"], "enabled");
    assert_eq!(fields.fields["temperature"], 1);
}

#[test]
fn a_thinking_budget_below_the_grant_or_no_thinking_is_left_as_sent() {
    let mut fields =
        anthropic_fields(serde_json::json!({"type": "enabled", "budget_tokens": 8_000}));
    assert_eq!(fit_thinking(&mut fields, 16_000), None);
    assert_eq!(fields.fields["thinking"]["budget_tokens"], 8_000);
    let mut off = anthropic_fields(serde_json::json!({"type": "disabled"}));
    assert_eq!(fit_thinking(&mut off, 16_000), None);
    // A grant too small for Anthropic's minimum budget changes nothing.
    let mut tiny = anthropic_fields(serde_json::json!({"type": "enabled", "budget_tokens": 2_000}));
    assert_eq!(fit_thinking(&mut tiny, 1_000), None);
}
