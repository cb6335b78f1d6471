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

/// What the extractive summary keeps beside each excerpt: what eval counts as facts, and
/// not ordinary words, short hex words or single-segment names.
#[test]
fn identifiers_are_paths_urls_hashes_uuids_and_long_numbers() {
    let text = "Read /srv/app/config.yaml and https://example.com/a/b?x=1, then port=8443. \
                Commit 3f9c2ab1 (not 'beef' or 'cafe'), id 123e4567-e89b-12d3-a456-426614174000, \
                line src/main.rs:1204; plain words, v2, 42 and README stay out.";
    assert_eq!(
        identifiers(text, 16),
        [
            "/srv/app/config.yaml",
            "https://example.com/a/b?x=1",
            "8443",
            "3f9c2ab1",
            "123e4567-e89b-12d3-a456-426614174000",
            "src/main.rs",
            "1204",
        ]
    );
    assert_eq!(identifiers(text, 2).len(), 2, "the limit holds");
    assert_eq!(identifiers("same 12345 and 12345 again", 16), ["12345"]);
}

#[test]
fn instants_parse_in_the_forms_a_model_writes_and_agree_with_what_is_rendered() {
    // 2024-02-29 13:45:00 UTC, as utc_minute renders it.
    let at = 1_709_214_300_000;
    assert_eq!(parse_instant("2024-02-29T13:45Z"), Some(at));
    assert_eq!(parse_instant(&utc_minute(at)), Some(at));
    assert_eq!(parse_instant("2024-02-29T13:45"), Some(at));
    assert_eq!(parse_instant("2024-02-29 13:45:00"), Some(at));
    assert_eq!(parse_instant("2024-02-29T13:45:00.250Z"), Some(at + 250));
    assert_eq!(parse_instant("2024-02-29T21:45+08:00"), Some(at));
    assert_eq!(parse_instant("2024-02-29T08:45-05:00"), Some(at));
    assert_eq!(
        parse_instant("2024-02-29"),
        Some(at - (13 * 60 + 45) * 60_000)
    );
    assert_eq!(parse_instant("1970-01-01"), Some(0));
    for bad in [
        "",
        "yesterday",
        "2024-13-01",
        "2024-02-29T25:00",
        "2024-02-29T13",
        "1770825486616",
        "2024-02-29T13:45+8",
        "1969-12-31",
        // Characters of several bytes where digits belong (a split inside one panicked).
        "２０２４-02-29",
        "2024-02-2é",
        "2024-02-29T13:4５",
    ] {
        assert_eq!(parse_instant(bad), None, "{bad}");
    }
}
