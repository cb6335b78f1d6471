#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

#[test]
fn scripted_ids_count_up_and_skip_taken_ones() {
    let stamps = ScriptedStamps::new(0);
    assert_eq!(stamps.entry_id(|_| false), "00000001");
    assert_eq!(stamps.entry_id(|id| id == "00000002"), "00000003");
    assert_eq!(stamps.entry_id(|_| false), "00000004");
}

#[test]
fn scripted_clock_moves_only_forward_and_stamps_its_time() {
    let stamps = ScriptedStamps::new(1_772_453_470_784);
    assert_eq!(stamps.timestamp(), "2026-03-02T12:11:10.784Z");
    stamps.advance_to(1_772_453_470_000);
    assert_eq!(
        stamps.now_ms(),
        1_772_453_470_784,
        "a skewed earlier time is ignored"
    );
    stamps.advance_to(1_772_453_480_784);
    assert_eq!(stamps.timestamp(), "2026-03-02T12:11:20.784Z");
}

#[test]
fn two_sessions_with_the_same_script_get_the_same_stamps() {
    let a = Stamps::Scripted(Arc::new(ScriptedStamps::new(5)));
    let b = Stamps::Scripted(Arc::new(ScriptedStamps::new(5)));
    for _ in 0..3 {
        assert_eq!(a.entry_id(|_| false), b.entry_id(|_| false));
        assert_eq!(a.timestamp(), b.timestamp());
    }
    assert_ne!(a, b, "equal only when they are the same script");
    assert_eq!(a, a.clone());
}
