//! Session transcripts as indexable text (`prompt-and-memory.md` §2.2, "sessions").
//!
//! Each user or assistant message of a pi JSONL file with text becomes one line,
//! `User: …` or `Assistant: …`, its whitespace collapsed; thinking, tool calls, tool results
//! and other entries are left out. The line map remembers which JSONL line each text line
//! came from, so a search hit points at the transcript's own lines.
//!
//! Lines are parsed one by one and a line that is not JSON is skipped: a transcript being
//! appended to may end in half a line.

use serde_json::Value;

/// A transcript's text and where each of its lines came from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Transcript {
    /// One line per message.
    pub text: String,
    /// `line_map[i]` is the JSONL line (1-based) of text line `i + 1`.
    pub line_map: Vec<usize>,
}

impl Transcript {
    /// The JSONL line of a 1-based text line (the line itself when out of range).
    pub fn source_line(&self, text_line: usize) -> usize {
        text_line
            .checked_sub(1)
            .and_then(|i| self.line_map.get(i))
            .copied()
            .unwrap_or(text_line)
    }
}

/// The text of a pi JSONL transcript.
pub fn transcript_text(jsonl: &str) -> Transcript {
    let mut out = Transcript::default();
    for (index, line) in jsonl.lines().enumerate() {
        let Some((role, text)) = message_text(line) else {
            continue;
        };
        if !out.text.is_empty() {
            out.text.push('\n');
        }
        out.text.push_str(role);
        out.text.push_str(": ");
        out.text.push_str(&text);
        out.line_map.push(index + 1);
    }
    out
}

/// `("User" | "Assistant", collapsed text)` of a message line with text.
fn message_text(line: &str) -> Option<(&'static str, String)> {
    let line = line.trim();
    if !line.starts_with('{') {
        return None;
    }
    let entry: Value = serde_json::from_str(line).ok()?;
    if entry.get("type").and_then(Value::as_str) != Some("message") {
        return None;
    }
    let message = entry.get("message")?;
    let role = match message.get("role").and_then(Value::as_str)? {
        "user" => "User",
        "assistant" => "Assistant",
        _ => return None,
    };
    let raw = match message.get("content")? {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        _ => return None,
    };
    let collapsed = raw.split_whitespace().collect::<Vec<_>>().join(" ");
    (!collapsed.is_empty()).then_some((role, collapsed))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "transcripts_tests.rs"]
mod tests;
