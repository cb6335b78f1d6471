//! Text from users, conversations and engines put into HTML, SVG and URLs: the one escaping
//! every page of the host uses (`rampart replay --report`, `rampart context show --html`,
//! `rampart serve`'s `/ui`). A string an agent or a client wrote is an attack path into the
//! reader's browser, so nothing is embedded without passing through here.

/// Escapes `text` for HTML and XML text and attribute values (the five characters that can
/// end a text run or an attribute; valid in SVG parsed as XML too, unlike named entities).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `text` as one segment of a URL path: every byte but the unreserved ones (letters, digits
/// and `-._~`) percent-encoded, so a session id holding `/`, `?`, `#` or `..` stays one
/// segment naming itself (the router decodes it back).
pub fn path_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    // `.` and `..` alone would be resolved away by the browser.
    match out.as_str() {
        "." => "%2E".to_string(),
        ".." => "%2E%2E".to_string(),
        _ => out,
    }
}

/// The first `max_chars` characters of `text` on one line (runs of whitespace made one
/// space), with `…` when some were left out: a preview of a message or a summary.
pub fn preview(text: &str, max_chars: usize) -> String {
    let mut out = String::new();
    let mut taken = 0;
    for word in text.split_whitespace() {
        if taken > 0 {
            if taken >= max_chars {
                out.push('…');
                return out;
            }
            out.push(' ');
            taken += 1;
        }
        for c in word.chars() {
            if taken >= max_chars {
                out.push('…');
                return out;
            }
            out.push(c);
            taken += 1;
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "html_tests.rs"]
mod tests;
