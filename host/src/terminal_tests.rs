use super::*;

#[test]
fn plain_text_is_borrowed_unchanged() {
    for s in ["", "notes.md", "日本語 – ok", "a\\b"] {
        assert!(matches!(escape(s), Cow::Borrowed(t) if t == s));
        assert!(matches!(escape_text(s), Cow::Borrowed(t) if t == s));
    }
}

#[test]
fn controls_are_shown_not_obeyed() {
    assert_eq!(escape("\x1b[31mred\x1b[0m"), "\\x1b[31mred\\x1b[0m");
    assert_eq!(escape("a\nb\rc\td\x07\x7f"), "a\\nb\\rc\\td\\x07\\x7f");
    // C1 (CSI as one character) and a right-to-left override.
    assert_eq!(escape("x\u{9b}2Jy\u{202e}z"), "x\\u{9b}2Jy\\u{202e}z");
}

#[test]
fn text_keeps_its_lines_and_tabs() {
    assert_eq!(
        escape_text("line 1\n\tline \x1b]0;title\x07 2\r\n"),
        "line 1\n\tline \\x1b]0;title\\x07 2\\r\n"
    );
}

#[test]
fn no_escape_survives() {
    let all: String = (0u32..0x250).filter_map(char::from_u32).collect();
    for out in [escape(&all), escape_text(&all)] {
        assert!(
            !out.chars()
                .any(|c| acts_on_terminal(c) && c != '\n' && c != '\t')
        );
    }
    assert!(!escape(&all).contains('\n'));
}
