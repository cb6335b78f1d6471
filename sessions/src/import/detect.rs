//! Format detection by content.
//!
//! Rules, in order:
//!
//! 1. Empty, whitespace-only, non-UTF-8 or non-JSON content is rejected with
//!    an error listing the supported formats.
//! 2. If the whole text is one JSON value it is classified as a document:
//!    * an object with a `trajectory` array → SWE-agent `.traj`;
//!    * an object with a `messages` array → OpenAI chat (LiteLLM log);
//!    * an object with a `history` array of events → one OpenHands instance;
//!    * an array whose elements have `role` → OpenAI chat messages;
//!    * an array whose elements have `action`/`observation` → OpenHands events;
//!    * any other object is tried as the only line of a JSONL file (below).
//! 3. Otherwise it is JSONL, classified by its first lines:
//!    * `{"type":"session",…}` first → pi: `version` 3 / 2, or none (v1);
//!    * `type` one of `session_meta`, `response_item`, `event_msg`,
//!      `turn_context`, `compacted` with a `payload` → Codex rollout (and the
//!      older bare layout: a meta line with `id` + `instructions`);
//!    * `type` one of Claude Code's line types plus a Claude Code key
//!      (`uuid`, `sessionId`, `leafUuid`, `messageId`) → Claude Code;
//!    * `instance_id` + `history` → OpenHands eval output.
//!
//! A Claude Code `.meta.json` sidecar is recognised only to say so in the
//! error: it is metadata of the `agent-*.jsonl` next to it.

use serde_json::{Map, Value};

use super::{ImportError, SourceFormat};

/// How many leading JSONL lines are examined before giving up.
const SNIFF_LINES: usize = 50;

/// Claude Code line `type`s.
const CLAUDE_TYPES: &[&str] = &[
    "user",
    "assistant",
    "system",
    "summary",
    "queue-operation",
    "file-history-snapshot",
    "attachment",
    "permission-mode",
    "last-prompt",
    "progress",
];

/// Keys that only Claude Code lines carry next to those types.
const CLAUDE_KEYS: &[&str] = &["uuid", "sessionId", "leafUuid", "messageId", "parentUuid"];

/// Codex rollout envelope `type`s.
const CODEX_TYPES: &[&str] = &[
    "session_meta",
    "response_item",
    "event_msg",
    "turn_context",
    "compacted",
];

/// The parsed input, in the shape its importer takes.
pub(crate) enum Input<'a> {
    /// JSONL text, read line by line by the importer.
    Lines(&'a str),
    /// A whole JSON document.
    Document(Value),
}

/// A line of the source that is not UTF-8 text, left out of the import.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidLine {
    /// 1-based line.
    pub line: usize,
    /// 1-based byte column of the first invalid byte.
    pub column: usize,
}

impl InvalidLine {
    /// The warning an import carries for it, naming `file` and the line.
    pub fn warning(&self, file: &str) -> String {
        format!(
            "{file}:{}: not UTF-8 text (invalid byte at column {}); this line was left out, \
             the others were read",
            self.line, self.column
        )
    }
}

/// Blanks the lines of `bytes` that are not UTF-8, keeping every newline (so line numbers hold)
/// and every other byte. Why: one bad byte in a JSONL transcript used to reject the whole
/// file; now it costs its line, which the import names. A file whose lines are mostly not
/// UTF-8 is returned unchanged: it is binary, and detection says so.
pub(crate) fn blank_invalid_lines(bytes: &[u8]) -> (std::borrow::Cow<'_, [u8]>, Vec<InvalidLine>) {
    use std::borrow::Cow;
    if std::str::from_utf8(bytes).is_ok() {
        return (Cow::Borrowed(bytes), Vec::new());
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut invalid = Vec::new();
    let mut lines = 0usize;
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        if i > 0 {
            out.push(b'\n');
        }
        if !line.iter().all(u8::is_ascii_whitespace) {
            lines += 1;
        }
        match std::str::from_utf8(line) {
            Ok(_) => out.extend_from_slice(line),
            Err(e) => invalid.push(InvalidLine {
                line: i + 1,
                column: e.valid_up_to() + 1,
            }),
        }
    }
    if invalid.len() * 2 > lines {
        return (Cow::Borrowed(bytes), Vec::new());
    }
    (Cow::Owned(out), invalid)
}

/// Detect the format of a transcript from its bytes.
///
/// Returns the format, or [`ImportError::UnknownFormat`] (whose message lists
/// every supported format) / [`ImportError::InvalidJson`].
pub fn detect(bytes: &[u8]) -> Result<SourceFormat, ImportError> {
    detect_named(bytes, "<input>")
}

/// [`detect`] for the contents of `file`, which errors name. Lines that are not UTF-8 do not
/// decide the format (see [`blank_invalid_lines`]).
pub fn detect_named(bytes: &[u8], file: &str) -> Result<SourceFormat, ImportError> {
    let (bytes, _) = blank_invalid_lines(bytes);
    sniff(&bytes, file).map(|(format, _)| format)
}

/// Detect and keep what was parsed, so importers do not parse twice.
pub(crate) fn sniff<'a>(
    bytes: &'a [u8],
    file: &str,
) -> Result<(SourceFormat, Input<'a>), ImportError> {
    let unknown = |reason: String| ImportError::UnknownFormat {
        file: file.to_owned(),
        reason,
    };
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let text = std::str::from_utf8(bytes)
        .map_err(|e| unknown(format!("not UTF-8 text ({e}); binary data?")))?;
    let trimmed = text.trim_start();
    let Some(first) = trimmed.chars().next() else {
        return Err(unknown("the file is empty".to_owned()));
    };
    if first != '{' && first != '[' {
        let start: String = trimmed.chars().take(24).collect();
        return Err(unknown(format!(
            "not JSON or JSONL: it starts with {start:?}"
        )));
    }
    match serde_json::from_str::<Value>(text) {
        Ok(doc) => classify_document(doc, text).map_err(unknown),
        Err(doc_err) if first == '[' => Err(invalid_json(file, doc_err)),
        Err(doc_err) => classify_lines(text, file, doc_err),
    }
}

fn invalid_json(file: &str, source: serde_json::Error) -> ImportError {
    ImportError::InvalidJson {
        file: file.to_owned(),
        line: source.line(),
        column: source.column(),
        source,
    }
}

/// Classify a text that is one JSON value.
fn classify_document(doc: Value, text: &str) -> Result<(SourceFormat, Input<'_>), String> {
    let format = match &doc {
        Value::Array(items) => classify_array(items)?,
        Value::Object(obj) => {
            if let Some(format) = classify_object(obj) {
                format
            } else {
                // A one-line JSONL file parses as a single object.
                return match classify_line(obj, true)? {
                    Some(format) => Ok((format, Input::Lines(text))),
                    None => Err(describe_object(obj)),
                };
            }
        }
        other => {
            return Err(format!(
                "a JSON {} rather than an object or array",
                json_kind(other)
            ));
        }
    };
    Ok((format, Input::Document(doc)))
}

fn classify_array(items: &[Value]) -> Result<SourceFormat, String> {
    if items.is_empty() {
        return Err("an empty JSON array".to_owned());
    }
    for item in items.iter().take(SNIFF_LINES) {
        let Some(obj) = item.as_object() else {
            return Err(format!(
                "a JSON array of {}s rather than objects",
                json_kind(item)
            ));
        };
        if obj.contains_key("action") || obj.contains_key("observation") {
            return Ok(SourceFormat::OpenHandsEvents);
        }
        if obj.get("role").is_some_and(Value::is_string) {
            return Ok(SourceFormat::OpenAiChat);
        }
    }
    Err("a JSON array whose objects have neither `role` (chat messages) nor `action`/`observation` (OpenHands events)".to_owned())
}

fn classify_object(obj: &Map<String, Value>) -> Option<SourceFormat> {
    if obj.get("trajectory").is_some_and(Value::is_array) {
        return Some(SourceFormat::SweAgentTraj);
    }
    if obj.get("messages").is_some_and(Value::is_array) {
        return Some(SourceFormat::OpenAiChat);
    }
    if obj.get("history").is_some_and(Value::is_array) && obj.contains_key("instance_id") {
        return Some(SourceFormat::OpenHandsEvents);
    }
    None
}

/// Classify one JSONL line. `Ok(None)` = not decisive, look at the next line.
fn classify_line(obj: &Map<String, Value>, first: bool) -> Result<Option<SourceFormat>, String> {
    let kind = obj.get("type").and_then(Value::as_str);
    if first && kind == Some("session") {
        return match obj.get("version") {
            None => Ok(Some(SourceFormat::PiV1)),
            Some(v) => match v.as_u64() {
                Some(1) => Ok(Some(SourceFormat::PiV1)),
                Some(2) => Ok(Some(SourceFormat::PiV2)),
                Some(3) => Ok(Some(SourceFormat::PiV3)),
                _ => Err(format!(
                    "a pi session header with version {v}, newer than this importer knows (1–3)"
                )),
            },
        };
    }
    if let Some(kind) = kind {
        if CODEX_TYPES.contains(&kind) && obj.contains_key("payload") {
            return Ok(Some(SourceFormat::CodexRollout));
        }
        if CLAUDE_TYPES.contains(&kind) && CLAUDE_KEYS.iter().any(|k| obj.contains_key(*k)) {
            return Ok(Some(SourceFormat::ClaudeCode));
        }
    }
    // Codex before ~0.30 wrote a bare meta object, then bare response items.
    if first
        && kind.is_none()
        && obj.contains_key("id")
        && obj.contains_key("timestamp")
        && (obj.contains_key("instructions") || obj.contains_key("git"))
    {
        return Ok(Some(SourceFormat::CodexRollout));
    }
    if obj.contains_key("instance_id") && obj.get("history").is_some_and(Value::is_array) {
        return Ok(Some(SourceFormat::OpenHandsEvents));
    }
    Ok(None)
}

/// Classify JSONL text (the whole text was not one JSON value).
fn classify_lines<'a>(
    text: &'a str,
    file: &str,
    doc_err: serde_json::Error,
) -> Result<(SourceFormat, Input<'a>), ImportError> {
    let unknown = |reason: String| ImportError::UnknownFormat {
        file: file.to_owned(),
        reason,
    };
    let mut first_seen: Option<String> = None;
    for (index, line) in text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(SNIFF_LINES)
        .enumerate()
    {
        let value: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            // A first line that is not JSON: most likely a broken JSON
            // document (pretty-printed, so line 1 is a lone `{`).
            Err(_) if index == 0 => return Err(invalid_json(file, doc_err)),
            Err(_) => continue,
        };
        let Some(obj) = value.as_object() else {
            return Err(unknown(format!(
                "JSONL whose line {} is a JSON {}, not an object",
                index + 1,
                json_kind(&value)
            )));
        };
        if let Some(format) = classify_line(obj, index == 0).map_err(unknown)? {
            return Ok((format, Input::Lines(text)));
        }
        if first_seen.is_none() {
            first_seen = Some(describe_object(obj));
        }
    }
    Err(unknown(format!(
        "JSONL, but its lines match no known transcript; first line: {}",
        first_seen.unwrap_or_else(|| "none".to_owned())
    )))
}

/// A short description of an unrecognised object for the error message.
fn describe_object(obj: &Map<String, Value>) -> String {
    if obj.contains_key("agentType") && obj.len() <= 4 {
        return "a Claude Code sub-agent sidecar (.meta.json); import the agent-*.jsonl next to it, which reads this file too".to_owned();
    }
    let keys: Vec<&str> = obj.keys().take(8).map(String::as_str).collect();
    match obj.get("type").and_then(Value::as_str) {
        Some(kind) => format!(
            "a JSON object of type {kind:?} with keys [{}]",
            keys.join(", ")
        ),
        None => format!("a JSON object with keys [{}]", keys.join(", ")),
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pi_versions() {
        let v1 = b"{\"type\":\"session\",\"id\":\"a\",\"timestamp\":\"t\",\"cwd\":\"/\"}\n{\"type\":\"message\",\"timestamp\":\"t\",\"message\":{}}\n";
        assert_eq!(detect(v1).ok(), Some(SourceFormat::PiV1));
        let v2 = b"{\"type\":\"session\",\"version\":2,\"id\":\"a\"}\n";
        assert_eq!(detect(v2).ok(), Some(SourceFormat::PiV2));
        let v3 = b"{\"type\":\"session\",\"version\":3,\"id\":\"a\"}";
        assert_eq!(detect(v3).ok(), Some(SourceFormat::PiV3));
        let v9 = b"{\"type\":\"session\",\"version\":9,\"id\":\"a\"}";
        assert!(matches!(detect(v9), Err(ImportError::UnknownFormat { .. })));
    }

    #[test]
    fn broken_json_documents_name_the_position() {
        let err = detect(b"[{\"role\":\"user\",").err();
        assert!(matches!(
            err,
            Some(ImportError::InvalidJson { line: 1, .. })
        ));
        let err = detect(b"{\n  \"trajectory\": [\n").err();
        assert!(matches!(err, Some(ImportError::InvalidJson { .. })));
    }
}
