use super::*;

#[test]
fn lengths_count_utf16_units_like_openclaw() {
    assert_eq!(units("abc"), 3);
    assert_eq!(units("é…"), 2);
    // An emoji outside the BMP is two units, as in JavaScript.
    assert_eq!(units("a😀"), 3);
}

#[test]
fn cuts_never_split_a_surrogate_pair() {
    assert_eq!(head("a😀b", 2), "a");
    assert_eq!(head("a😀b", 3), "a😀");
    assert_eq!(tail("a😀b", 2), "b");
    assert_eq!(tail("a😀b", 3), "😀b");
    assert_eq!(head("abc", 10), "abc");
    assert_eq!(tail("abc", 0), "");
}

#[test]
fn clamping_marks_the_cut_with_an_ellipsis() {
    assert_eq!(clamp_with_ellipsis("abcdef", 6), "abcdef");
    assert_eq!(clamp_with_ellipsis("abcdef", 5), "abcd…");
    assert_eq!(units(&clamp_with_ellipsis("abcdef", 5)), 5);
    assert_eq!(clamp_with_ellipsis("abcdef", 3), "abc");
    assert_eq!(clamp_with_ellipsis("abcdef", 0), "");
}

#[test]
fn control_and_format_characters_are_removed_from_paths() {
    assert_eq!(
        sanitize_for_prompt("/ws/a\nb\u{202E}c\u{200B}d"),
        "/ws/abcd"
    );
    assert_eq!(sanitize_for_prompt("/home/ü/ws"), "/home/ü/ws");
}

#[test]
fn normalising_drops_cr_and_trailing_blanks_then_trims() {
    assert_eq!(
        normalize_block("  Per-turn lab context \r\nSecond line\t\r\n"),
        "Per-turn lab context\nSecond line"
    );
    assert_eq!(normalize_lines("a \t\nb  "), "a\nb");
    assert_eq!(normalize_lines("a\rb"), "a\nb");
    // Blanks inside a line stay.
    assert_eq!(normalize_lines("a  b\n"), "a  b\n");
}

#[test]
fn xml_specials_are_escaped() {
    assert_eq!(
        escape_xml(r#"<a href="x">'&'</a>"#),
        "&lt;a href=&quot;x&quot;&gt;&apos;&amp;&apos;&lt;/a&gt;"
    );
}

#[test]
fn three_or_more_newlines_collapse_to_two() {
    assert_eq!(collapse_blank_lines("a\n\n\n\nb\n\nc\nd"), "a\n\nb\n\nc\nd");
}
