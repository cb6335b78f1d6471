use super::*;

#[test]
fn utc_minute_renders_known_instants() {
    assert_eq!(utc_minute(0), "1970-01-01T00:00Z");
    // 2024-02-29 13:45:00 UTC.
    assert_eq!(utc_minute(1_709_214_300_000), "2024-02-29T13:45Z");
}

#[test]
fn cut_to_tokens_respects_the_estimate_and_char_boundaries() {
    let text = "é".repeat(100);
    let cut = cut_to_tokens(&text, 10);
    assert!(text_tokens(cut) <= 10);
    assert!(cut.len() < text.len());
    assert_eq!(cut_to_tokens("short", 10), "short");
}

#[test]
fn hashes_are_stable_and_separate_their_parts() {
    assert_eq!(hash_hex(&[b"ab", b"c"]), hash_hex(&[b"ab", b"c"]));
    assert_ne!(hash_hex(&[b"ab", b"c"]), hash_hex(&[b"a", b"bc"]));
}
