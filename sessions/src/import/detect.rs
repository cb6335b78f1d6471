//! Format detection by content.
//!
//! Rules, in order:
//!
//! 1. Empty, whitespace-only, non-UTF-8 or non-JSON content is rejected with
//!    an error listing the supported formats. Lines that are not UTF-8 in an
//!    otherwise text file are left out (see `source`).
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

use std::io::BufRead;

use serde::Deserialize;
use serde_json::{Map, Value};

pub use super::source::InvalidLine;
use super::source::{Prepared, Source};
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
pub(crate) enum Input {
    /// JSONL, read again line by line by the importer.
    Lines,
    /// A whole JSON document, parsed once here.
    Document(Value),
}

/// Detect the format of a transcript from its bytes.
///
/// Returns the format, or [`ImportError::UnknownFormat`] (whose message lists
/// every supported format) / [`ImportError::InvalidJson`].
pub fn detect(bytes: &[u8]) -> Result<SourceFormat, ImportError> {
    detect_named(bytes, "<input>")
}

/// [`detect`] for the contents of `file`, which errors name. Lines that are not UTF-8 do not
/// decide the format (see `source`).
pub fn detect_named(bytes: &[u8], file: &str) -> Result<SourceFormat, ImportError> {
    let prepared = Prepared::new(Source::Bytes(bytes), file)?;
    sniff(&prepared, file).map(|(format, _)| format)
}

/// Detect, and keep what was parsed so importers do not parse a document twice.
///
/// Only what decides the format is read: the first character, the first JSON value (for
/// JSONL, its first line; a document is parsed whole, from the reader, since its importer
/// needs it) and, for JSONL, up to [`SNIFF_LINES`] lines. The result is the one a parse of
/// the whole text gave: the first value is read with `serde_json`'s own end check, so a
/// document followed by more is the same error at the same line and column.
pub(crate) fn sniff(
    prepared: &Prepared<'_>,
    file: &str,
) -> Result<(SourceFormat, Input), ImportError> {
    let unknown = |reason: String| ImportError::UnknownFormat {
        file: file.to_owned(),
        reason,
    };
    let (first, start) = leading_chars(prepared)?;
    let Some(first) = first else {
        return Err(unknown("the file is empty".to_owned()));
    };
    if first != '{' && first != '[' {
        return Err(unknown(format!(
            "not JSON or JSONL: it starts with {start:?}"
        )));
    }
    let mut de = serde_json::Deserializer::from_reader(prepared.reader()?);
    let parsed = Value::deserialize(&mut de).and_then(|doc| de.end().map(|()| doc));
    drop(de);
    match parsed {
        Ok(doc) => classify_document(doc).map_err(unknown),
        Err(error) if error.is_io() => Err(prepared.io_error(std::io::Error::from(error))),
        Err(doc_err) if first == '[' => Err(invalid_json(file, doc_err)),
        Err(doc_err) => classify_lines(prepared, file, doc_err),
    }
}

/// The first character that is not whitespace, and the text from there (at most 24
/// characters, for the error that names what the file starts with).
fn leading_chars(prepared: &Prepared<'_>) -> Result<(Option<char>, String), ImportError> {
    const SHOWN: usize = 24;
    let mut reader = prepared.reader()?;
    let mut pending: Vec<u8> = Vec::new();
    let mut first = None;
    let mut start = String::new();
    let mut shown = 0;
    while shown < SHOWN {
        let chunk = reader.fill_buf().map_err(|e| prepared.io_error(e))?;
        if chunk.is_empty() {
            break;
        }
        let taken = chunk.len();
        pending.extend_from_slice(chunk);
        reader.consume(taken);
        let valid = match std::str::from_utf8(&pending) {
            Ok(text) => text.len(),
            // The text is UTF-8 (see `source`): only a character cut by the chunk's end waits.
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => break,
        };
        let text = String::from_utf8_lossy(&pending[..valid]);
        for c in text.chars() {
            if first.is_none() {
                if c.is_whitespace() {
                    continue;
                }
                first = Some(c);
            }
            if shown < SHOWN {
                start.push(c);
                shown += 1;
            }
        }
        // Whitespace already skipped is dropped, so a long run of it costs nothing.
        pending.drain(..valid);
    }
    Ok((first, start))
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
fn classify_document(doc: Value) -> Result<(SourceFormat, Input), String> {
    let format = match &doc {
        Value::Array(items) => classify_array(items)?,
        Value::Object(obj) => {
            // A pi header is a pi session (one with no entries yet), whatever else it keeps:
            // headers are lossless, so one with an unknown `trajectory` or `messages` array
            // was read as SWE-agent or OpenAI chat (found by the fuzzer).
            if obj.get("type").and_then(Value::as_str) == Some("session")
                && let Some(format) = classify_line(obj, true)?
            {
                return Ok((format, Input::Lines));
            }
            if let Some(format) = classify_object(obj) {
                format
            } else {
                // A one-line JSONL file parses as a single object.
                return match classify_line(obj, true)? {
                    Some(format) => Ok((format, Input::Lines)),
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

/// Classify JSONL (the whole text was not one JSON value) by its first lines.
fn classify_lines(
    prepared: &Prepared<'_>,
    file: &str,
    doc_err: serde_json::Error,
) -> Result<(SourceFormat, Input), ImportError> {
    let unknown = |reason: String| ImportError::UnknownFormat {
        file: file.to_owned(),
        reason,
    };
    let mut first_seen: Option<String> = None;
    let mut lines = prepared.lines()?;
    let mut index = 0;
    while index < SNIFF_LINES {
        let Some((_, line)) = lines.next_line()? else {
            break;
        };
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            // A first line that is not JSON: most likely a broken JSON
            // document (pretty-printed, so line 1 is a lone `{`).
            Err(_) if index == 0 => return Err(invalid_json(file, doc_err)),
            Err(_) => {
                index += 1;
                continue;
            }
        };
        let Some(obj) = value.as_object() else {
            return Err(unknown(format!(
                "JSONL whose line {} is a JSON {}, not an object",
                index + 1,
                json_kind(&value)
            )));
        };
        if let Some(format) = classify_line(obj, index == 0).map_err(unknown)? {
            return Ok((format, Input::Lines));
        }
        if first_seen.is_none() {
            first_seen = Some(describe_object(obj));
        }
        index += 1;
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
