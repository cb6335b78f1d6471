//! Text from users' files on a terminal: file names, session keys, message and memory
//! snippets, with their control characters made visible.
//!
//! Why: a terminal acts on what it prints. A file named `\x1b[31m…`, a session key holding
//! `\x1b]0;…\x07` or a note whose text carries `\r` or `\x1b[2J` would recolour, retitle or
//! clear the user's screen, or hide the line above, when `rampart sessions list`, `memory
//! search` or a replay's table printed it as it is. Every place the CLI prints such a string in
//! its text output goes through [`escape`] (one line) or [`escape_text`] (several lines); the
//! `--json` forms carry the strings unchanged, escaped by JSON itself.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` acts on a terminal instead of showing: the C0 controls (ESC among them), DEL,
/// the C1 controls (which some terminals read as ESC sequences), and the bidirectional
/// overrides and isolates (which reorder what follows on the line).
fn acts_on_terminal(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `s` on one line, every control character shown as an escape (`\n`, `\r`, `\t`, `\x1b`,
/// `\u{9b}`, …) instead of acting on the terminal. Borrowed when there is nothing to escape,
/// which is nearly always.
pub fn escape(s: &str) -> Cow<'_, str> {
    if !s.chars().any(acts_on_terminal) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        push_escaped(&mut out, c);
    }
    Cow::Owned(out)
}

/// `s` as lines: like [`escape`], but a line feed and a tab stay what they are, so a file's
/// text keeps its lines and indentation.
pub fn escape_text(s: &str) -> Cow<'_, str> {
    let acts = |c: char| c != '\n' && c != '\t' && acts_on_terminal(c);
    if !s.chars().any(acts) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if acts(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if !acts_on_terminal(c) => out.push(c),
        c if (c as u32) < 0x80 => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
}

#[cfg(test)]
#[path = "terminal_tests.rs"]
mod tests;
