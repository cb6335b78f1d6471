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
