use super::*;

#[test]
fn only_the_bare_token_or_its_envelope_is_silent() {
    assert!(is_silent_reply("NO_REPLY"));
    assert!(is_silent_reply("\n no_reply \t"));
    assert!(is_silent_reply(r#"{"action":"NO_REPLY"}"#));
    assert!(!is_silent_reply(r#"{"action": "NO_REPLY"}"#));
    assert!(!is_silent_reply(""));
    assert!(!is_silent_reply("NO_REPLY please"));
}

#[test]
fn stripping_keeps_text_that_only_looks_like_the_token() {
    assert_eq!(strip_silent_token("Done.  NO_REPLY  "), "Done.");
    assert_eq!(strip_silent_token("NO_REPLY"), "");
    assert_eq!(strip_silent_token("Done. *NO_REPLY"), "Done.");
    // Case matters when stripping.
    assert_eq!(strip_silent_token("Done. no_reply"), "Done. no_reply");
    assert_eq!(strip_silent_token("  plain answer "), "plain answer");
}
