//! The tokens a model answers with when it has nothing to say: `NO_REPLY` (the whole answer is
//! dropped) and `HEARTBEAT_OK` (a heartbeat poll found nothing to report).

/// The whole answer, when the model chooses not to reply.
pub const SILENT_REPLY_TOKEN: &str = "NO_REPLY";
/// The answer to a heartbeat poll when nothing needs attention.
pub const HEARTBEAT_TOKEN: &str = "HEARTBEAT_OK";
/// The JSON form some models produce instead of the bare token.
const SILENT_ENVELOPE: &str = r#"{"action":"NO_REPLY"}"#;

/// Whether `text` is a silent reply: the token alone (any case, surrounding whitespace
/// allowed), or exactly `{"action":"NO_REPLY"}`. A real answer that ends with the token is
/// not silent (OpenClaw issue 19537: such answers were swallowed).
pub fn is_silent_reply(text: &str) -> bool {
    text.trim().eq_ignore_ascii_case(SILENT_REPLY_TOKEN) || text == SILENT_ENVELOPE
}

/// `text` without a trailing `NO_REPLY` (exact case), trimmed. The token is removed only when
/// it starts the text or follows whitespace or `*` (Markdown emphasis), so "interject.NO_REPLY"
/// is left as it is. An empty result means the answer was silent after all.
pub fn strip_silent_token(text: &str) -> String {
    let body = text.trim_end();
    let Some(before) = body.strip_suffix(SILENT_REPLY_TOKEN) else {
        return text.trim().to_string();
    };
    let kept = match before.chars().next_back() {
        None => before,
        Some('*') => before.trim_end_matches('*'),
        Some(c) if c.is_whitespace() => before.trim_end(),
        Some(_) => return text.trim().to_string(),
    };
    kept.trim().to_string()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "silent_tests.rs"]
mod tests;
