//! Text measures and clean-ups shared by the budget, the skills block and the sections.
//!
//! **Lengths are UTF-16 code units** ("chars" in every cap and message of this crate), because
//! that is what OpenClaw's caps count (`String.length` in JavaScript): the same workspace must
//! be cut at the same places under the same caps. For text without characters outside the
//! Basic Multilingual Plane (most emoji are outside it) this is the number of characters.
//! Unlike JavaScript's `slice`, the cuts here never split a surrogate pair: a character that
//! does not fit whole is left out.

/// The length of `s` in UTF-16 code units.
pub fn units(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

/// The longest prefix of `s` that is at most `max` UTF-16 units long.
pub fn head(s: &str, max: usize) -> &str {
    let mut used = 0;
    for (i, c) in s.char_indices() {
        used += c.len_utf16();
        if used > max {
            return &s[..i];
        }
    }
    s
}

/// The longest suffix of `s` that is at most `max` UTF-16 units long.
pub fn tail(s: &str, max: usize) -> &str {
    let mut used = 0;
    for (i, c) in s.char_indices().rev() {
        used += c.len_utf16();
        if used > max {
            return &s[i + c.len_utf8()..];
        }
    }
    s
}

/// `s` cut to at most `budget` units: unchanged when it fits; else its first `budget - 1`
/// units and "…" (so the cut shows); with a budget of 3 or less, just the first `budget`
/// units (an ellipsis would be most of what is left).
pub fn clamp_with_ellipsis(s: &str, budget: usize) -> String {
    if units(s) <= budget {
        return s.to_string();
    }
    if budget <= 3 {
        return head(s, budget).to_string();
    }
    let mut out = head(s, budget - 1).to_string();
    out.push('…');
    out
}

/// `s` without control (Cc) and format (Cf) characters, for paths and names shown in the
/// prompt: a directory name with a newline or a right-to-left override in it must not be able
/// to start a line of its own or reorder what the model reads.
pub fn sanitize_for_prompt(s: &str) -> String {
    s.chars()
        .filter(|&c| !c.is_control() && !is_format_char(c))
        .collect()
}

/// Whether `c` is in Unicode's general category Cf (format), as of Unicode 15.
fn is_format_char(c: char) -> bool {
    matches!(
        c as u32,
        0x00AD
            | 0x0600..=0x0605
            | 0x061C
            | 0x06DD
            | 0x070F
            | 0x0890..=0x0891
            | 0x08E2
            | 0x180E
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x2064
            | 0x2066..=0x206F
            | 0xFEFF
            | 0xFFF9..=0xFFFB
            | 0x110BD
            | 0x110CD
            | 0x13430..=0x1343F
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0001
            | 0xE0020..=0xE007F
    )
}

/// Whether `c` ends a line for the trailing-blank rule of [`normalize_block`] (JavaScript's
/// line terminators, after CR has become LF).
fn is_line_end(c: char) -> bool {
    matches!(c, '\n' | '\u{2028}' | '\u{2029}')
}

/// CRLF and lone CR become LF, and spaces and tabs before each line end are removed; the
/// text is not trimmed (see [`normalize_block`]). Used on each part of the dynamic suffix, so
/// that the breakdown stays exact: every part but the last ends with its newline, so per part
/// the result equals that of the whole.
pub fn normalize_lines(s: &str) -> String {
    let s = s.replace("\r\n", "\n").replace('\r', "\n");
    let mut out = String::with_capacity(s.len());
    let mut pending = String::new();
    for c in s.chars() {
        if c == ' ' || c == '\t' {
            pending.push(c);
            continue;
        }
        if !is_line_end(c) {
            out.push_str(&pending);
        }
        pending.clear();
        out.push(c);
    }
    // Blanks at the very end are at a line end too.
    out
}

/// A block of prompt text made byte-stable: [`normalize_lines`], then trimmed. The engine's
/// addition goes through this, so a stray CRLF or trailing space in it cannot change the
/// prompt between turns.
pub fn normalize_block(s: &str) -> String {
    normalize_lines(s).trim().to_string()
}

/// `s` with `&`, `<`, `>`, `"` and `'` written as XML entities.
pub fn escape_xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            _ => out.push(c),
        }
    }
    out
}

/// Runs of three or more newlines collapsed to two.
pub fn collapse_blank_lines(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut newlines = 0;
    for c in s.chars() {
        if c == '\n' {
            newlines += 1;
            if newlines > 2 {
                continue;
            }
        } else {
            newlines = 0;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "text_tests.rs"]
mod tests;
