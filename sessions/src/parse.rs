//! One line of JSON in, one classified entry out.
//!
//! Speed matters here (a 100 MB session is parsed line by line on every load), so the common
//! case is a single pass: a hand-written visitor reads the base keys directly and, once it has
//! seen `"type":"message"` (pi always writes `type` first), streams the `message` field straight
//! into [`AgentMessage`] without building a `serde_json::Value` first.
//!
//! Anything unusual takes a slow path that parses the line as a plain JSON value and then
//! decides what it is. That path exists for correctness, not speed: it explains *why* a line
//! is unusable, keeps known-but-malformed entries verbatim, and gives duplicate keys the
//! last-one-wins meaning JavaScript's `JSON.parse` gives them.

use std::fmt;
use std::sync::Arc;

use serde::de::{self, DeserializeSeed, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use rampart_message::AgentMessage;

use crate::entry::{
    BranchSummaryEntry, CompactionEntry, CustomEntry, CustomMessageEntry, EntryBody, Extra,
    LabelEntry, MessageEntry, ModelChangeEntry, OtherEntry, SessionInfoEntry,
    ThinkingLevelChangeEntry,
};

/// How an entry's `parentId` was written; v1 files have none, v3 files must have one.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ParentField {
    /// No `parentId` key.
    Absent,
    /// `"parentId": null`: a root.
    Null,
    /// `"parentId": "<id>"`.
    Id(String),
}

/// A line that parsed as an entry object; base fields are not yet validated, because what
/// is required depends on the file's format version.
#[derive(Debug)]
pub(crate) struct RawEntry {
    /// `id`, if it was a string.
    pub id: Option<String>,
    /// `parentId`, as written.
    pub parent: ParentField,
    /// `timestamp`, if it was a string.
    pub timestamp: Option<String>,
    /// The typed body (or the verbatim fallback).
    pub body: EntryBody,
    /// Why a known entry type was kept verbatim as [`EntryBody::Other`], for the load report.
    pub kept_verbatim: Option<String>,
}

/// What one non-blank line turned out to be.
// Almost every line is an entry; boxing it would add an allocation per line for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum LineOutcome {
    /// An entry object (to be validated by the caller).
    Entry(RawEntry),
    /// Not usable at all; the text says why, for the corrupt-line record and the warning.
    Corrupt(String),
}

/// Classifies one line (without its newline).
pub(crate) fn parse_line(bytes: &[u8]) -> LineOutcome {
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(error) => {
            return LineOutcome::Corrupt(format!(
                "invalid UTF-8 at byte {} of the line",
                error.valid_up_to()
            ));
        }
    };
    match serde_json::from_str::<Fast>(text) {
        Ok(fast) => match fast.entry_type {
            Some(entry_type) => finish(
                entry_type,
                fast.id,
                fast.parent,
                fast.timestamp,
                fast.message,
                fast.rest,
            ),
            None => slow_path(text),
        },
        Err(_) => slow_path(text),
    }
}

/// The slow path: parse as a plain value, then classify (see the module docs).
fn slow_path(text: &str) -> LineOutcome {
    let value = match serde_json::from_str::<Value>(text) {
        Ok(value) => value,
        Err(error) => return LineOutcome::Corrupt(format!("invalid JSON: {error}")),
    };
    let Value::Object(mut map) = value else {
        return LineOutcome::Corrupt(format!(
            "a JSON {} where an entry object was expected",
            json_kind(&value)
        ));
    };
    let entry_type = match map.remove("type") {
        Some(Value::String(entry_type)) => entry_type,
        Some(other) => {
            return LineOutcome::Corrupt(format!(
                "the entry's `type` is a {}, not a string",
                json_kind(&other)
            ));
        }
        None => return LineOutcome::Corrupt("the object has no `type` field".into()),
    };
    let id = match map.remove("id") {
        None => None,
        Some(Value::String(id)) => Some(id),
        Some(other) => {
            return LineOutcome::Corrupt(format!(
                "the entry's `id` is a {}, not a string",
                json_kind(&other)
            ));
        }
    };
    let parent = match map.remove("parentId") {
        None => ParentField::Absent,
        Some(Value::Null) => ParentField::Null,
        Some(Value::String(parent)) => ParentField::Id(parent),
        Some(other) => {
            return LineOutcome::Corrupt(format!(
                "the entry's `parentId` is a {}, not a string or null",
                json_kind(&other)
            ));
        }
    };
    let timestamp = match map.remove("timestamp") {
        None => None,
        Some(Value::String(timestamp)) => Some(timestamp),
        Some(other) => {
            return LineOutcome::Corrupt(format!(
                "the entry's `timestamp` is a {}, not a string",
                json_kind(&other)
            ));
        }
    };
    finish(entry_type, id, parent, timestamp, None, map)
}

/// Builds the typed body from the fields that are left once the base keys are taken out.
fn finish(
    entry_type: String,
    id: Option<String>,
    parent: ParentField,
    timestamp: Option<String>,
    message: Option<AgentMessage>,
    rest: Extra,
) -> LineOutcome {
    if entry_type == "session" {
        // pi skips header-shaped lines among entries; they have no place in the tree.
        return LineOutcome::Corrupt(
            "a second session header after line 1 (two files concatenated?)".into(),
        );
    }
    let (body, kept_verbatim) = typed_body(entry_type, message, rest);
    LineOutcome::Entry(RawEntry {
        id,
        parent,
        timestamp,
        body,
        kept_verbatim,
    })
}

/// The typed body for `entry_type`, or the verbatim fallback plus the reason for it.
pub(crate) fn typed_body(
    entry_type: String,
    message: Option<AgentMessage>,
    mut rest: Extra,
) -> (EntryBody, Option<String>) {
    match entry_type.as_str() {
        "message" => {
            if let Some(message) = message {
                // Shared from the moment it is parsed: contexts hand out this allocation.
                return (
                    EntryBody::Message(MessageEntry {
                        message: Arc::new(message),
                        extra: rest,
                        as_read: None,
                    }),
                    None,
                );
            }
            let problem = match rest.get("message") {
                None => "a `message` entry without a `message` field".to_owned(),
                Some(value) => match AgentMessage::deserialize(value) {
                    Ok(message) => {
                        rest.remove("message");
                        return (
                            EntryBody::Message(MessageEntry {
                                message: Arc::new(message),
                                extra: rest,
                                as_read: None,
                            }),
                            None,
                        );
                    }
                    // pi uses such a message all the same: read it leniently, keep it as it was.
                    Err(error) => match crate::lenient::read(value) {
                        Ok((message, _filled)) => {
                            let as_read = rest.remove("message").map(Arc::new);
                            return (
                                EntryBody::Message(MessageEntry {
                                    message: Arc::new(message),
                                    extra: rest,
                                    as_read,
                                }),
                                None,
                            );
                        }
                        Err(meaningless) => format!("{meaningless} ({error})"),
                    },
                },
            };
            verbatim(entry_type, rest, problem)
        }
        "compaction" => small::<CompactionEntry>(entry_type, rest, EntryBody::Compaction),
        "branch_summary" => small::<BranchSummaryEntry>(entry_type, rest, EntryBody::BranchSummary),
        "model_change" => small::<ModelChangeEntry>(entry_type, rest, EntryBody::ModelChange),
        "thinking_level_change" => {
            small::<ThinkingLevelChangeEntry>(entry_type, rest, EntryBody::ThinkingLevelChange)
        }
        "custom" => small::<CustomEntry>(entry_type, rest, EntryBody::Custom),
        "custom_message" => small::<CustomMessageEntry>(entry_type, rest, EntryBody::CustomMessage),
        "label" => small::<LabelEntry>(entry_type, rest, EntryBody::Label),
        "session_info" => small::<SessionInfoEntry>(entry_type, rest, EntryBody::SessionInfo),
        _ => (
            EntryBody::Other(OtherEntry {
                entry_type,
                fields: rest,
            }),
            None,
        ),
    }
}

/// Types a small (non-message) body, and keeps it verbatim unless the typed form writes back
/// exactly what was read. These entries are rare and short, so the check is cheap, and it
/// makes the round-trip guarantee hold for them without reasoning about every field.
fn small<T>(
    entry_type: String,
    rest: Extra,
    wrap: fn(T) -> EntryBody,
) -> (EntryBody, Option<String>)
where
    T: for<'de> Deserialize<'de> + Serialize,
{
    let value = Value::Object(rest);
    let problem = match T::deserialize(&value) {
        Ok(typed) => match serde_json::to_value(&typed) {
            Ok(back) if back == value => return (wrap(typed), None),
            Ok(_) => "its fields would not be written back unchanged by the typed model".to_owned(),
            Err(error) => format!("it cannot be written back from the typed model: {error}"),
        },
        Err(error) => format!("its fields do not fit the `{entry_type}` model: {error}"),
    };
    let Value::Object(rest) = value else {
        unreachable!("built as an object above")
    };
    verbatim(entry_type, rest, problem)
}

fn verbatim(entry_type: String, fields: Extra, problem: String) -> (EntryBody, Option<String>) {
    (
        EntryBody::Other(OtherEntry { entry_type, fields }),
        Some(problem),
    )
}

/// "object", "array", … for messages about JSON shapes.
pub(crate) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

// ---------------------------------------------------------------------------
// The fast path
// ---------------------------------------------------------------------------

/// What the fast visitor collects. Any surprise (a base key of the wrong type, a repeated
/// base key) makes it fail, which sends the line to the slow path.
struct Fast {
    entry_type: Option<String>,
    id: Option<String>,
    parent: ParentField,
    timestamp: Option<String>,
    message: Option<AgentMessage>,
    rest: Extra,
}

/// Object keys the fast visitor treats specially; recognised without allocating.
enum Key {
    Type,
    Id,
    ParentId,
    Timestamp,
    Message,
    Other(String),
}

struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Key;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Key, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for KeySeed {
    type Value = Key;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
        Ok(match v {
            "type" => Key::Type,
            "id" => Key::Id,
            "parentId" => Key::ParentId,
            "timestamp" => Key::Timestamp,
            "message" => Key::Message,
            other => Key::Other(other.to_owned()),
        })
    }
}

impl<'de> Deserialize<'de> for Fast {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(FastVisitor)
    }
}

struct FastVisitor;

impl<'de> Visitor<'de> for FastVisitor {
    type Value = Fast;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a session entry object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fast, A::Error> {
        let mut fast = Fast {
            entry_type: None,
            id: None,
            parent: ParentField::Absent,
            timestamp: None,
            message: None,
            rest: Map::new(),
        };
        while let Some(key) = map.next_key_seed(KeySeed)? {
            match key {
                Key::Type => {
                    if fast.entry_type.is_some() {
                        return Err(de::Error::duplicate_field("type"));
                    }
                    fast.entry_type = Some(map.next_value()?);
                }
                Key::Id => {
                    if fast.id.is_some() {
                        return Err(de::Error::duplicate_field("id"));
                    }
                    fast.id = Some(map.next_value()?);
                }
                Key::ParentId => {
                    if fast.parent != ParentField::Absent {
                        return Err(de::Error::duplicate_field("parentId"));
                    }
                    fast.parent = match map.next_value::<Option<String>>()? {
                        Some(parent) => ParentField::Id(parent),
                        None => ParentField::Null,
                    };
                }
                Key::Timestamp => {
                    if fast.timestamp.is_some() {
                        return Err(de::Error::duplicate_field("timestamp"));
                    }
                    fast.timestamp = Some(map.next_value()?);
                }
                Key::Message if fast.entry_type.as_deref() == Some("message") => {
                    if fast.message.is_some() {
                        return Err(de::Error::duplicate_field("message"));
                    }
                    // The hot path: straight into the typed message, no intermediate value.
                    fast.message = Some(map.next_value()?);
                }
                Key::Message => {
                    if fast
                        .rest
                        .insert("message".into(), map.next_value()?)
                        .is_some()
                    {
                        return Err(de::Error::duplicate_field("message"));
                    }
                }
                Key::Other(key) => {
                    let value: Value = map.next_value()?;
                    if fast.rest.insert(key, value).is_some() {
                        return Err(de::Error::custom("duplicate key"));
                    }
                }
            }
        }
        Ok(fast)
    }
}

/// The top-level `id` and `parentId` of an entry line, read from its first bytes without
/// parsing the rest (which may be cut, huge or not JSON at all). pi writes `type`, `id` and
/// `parentId` first, so they are found before any nested `"id"`. `parentId` is `Some(None)`
/// for an explicit `null`.
pub(crate) fn ids_in_prefix(prefix: &[u8]) -> (Option<String>, Option<Option<String>>) {
    let text = String::from_utf8_lossy(prefix);
    // Only the part before the entry's payload: a nested `"id"` (a tool call's) must not count.
    let head = ["\"message\"", "\"data\"", "\"summary\"", "\"content\""]
        .iter()
        .filter_map(|key| text.find(key))
        .min()
        .map_or(text.as_ref(), |end| &text[..end]);
    let id = string_field(head, "id").flatten();
    let parent_id = string_field(head, "parentId");
    (id, parent_id)
}

/// The value of `"key": "…"` (a plain string without escapes, at most 128 bytes) or
/// `"key": null` in `text`.
fn string_field(text: &str, key: &str) -> Option<Option<String>> {
    let needle = format!("\"{key}\"");
    let mut from = 0;
    while let Some(at) = text[from..].find(&needle) {
        let after = &text[from + at + needle.len()..];
        from += at + needle.len();
        let Some(value) = after.trim_start().strip_prefix(':') else {
            continue;
        };
        let value = value.trim_start();
        if value.starts_with("null") {
            return Some(None);
        }
        let rest = value.strip_prefix('"')?;
        let end = rest.find('"')?;
        let found = &rest[..end];
        if found.len() > 128 || found.contains('\\') {
            return None;
        }
        return Some(Some(found.to_string()));
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn entry(line: &str) -> RawEntry {
        match parse_line(line.as_bytes()) {
            LineOutcome::Entry(entry) => entry,
            LineOutcome::Corrupt(why) => panic!("corrupt: {why}"),
        }
    }

    fn corrupt(line: &[u8]) -> String {
        match parse_line(line) {
            LineOutcome::Corrupt(why) => why,
            LineOutcome::Entry(entry) => panic!("parsed: {entry:?}"),
        }
    }

    #[test]
    fn message_fast_path() {
        let e = entry(
            r#"{"type":"message","id":"a","parentId":null,"timestamp":"t","message":{"role":"user","content":"hi","timestamp":1},"x":2}"#,
        );
        assert_eq!(e.parent, ParentField::Null);
        let EntryBody::Message(m) = e.body else {
            panic!()
        };
        assert_eq!(m.message.role(), "user");
        assert_eq!(m.extra.get("x"), Some(&Value::from(2)));
    }

    #[test]
    fn message_before_type_still_parses() {
        let e = entry(
            r#"{"message":{"role":"user","content":"hi","timestamp":1},"type":"message","id":"a","parentId":"b","timestamp":"t"}"#,
        );
        assert!(matches!(e.body, EntryBody::Message(_)));
        assert_eq!(e.parent, ParentField::Id("b".into()));
    }

    #[test]
    fn bad_message_is_kept_verbatim() {
        let e = entry(
            r#"{"type":"message","id":"a","parentId":null,"timestamp":"t","message":{"role":"user"}}"#,
        );
        assert!(matches!(e.body, EntryBody::Other(_)));
        assert!(e.kept_verbatim.unwrap().contains("no `content`"));
    }

    #[test]
    fn known_type_that_would_not_round_trip_is_verbatim() {
        let e = entry(
            r#"{"type":"label","id":"a","parentId":null,"timestamp":"t","targetId":"b","label":null}"#,
        );
        assert!(matches!(e.body, EntryBody::Other(_)), "{:?}", e.body);
        let e = entry(
            r#"{"type":"label","id":"a","parentId":null,"timestamp":"t","targetId":"b","label":"x"}"#,
        );
        assert!(matches!(e.body, EntryBody::Label(_)));
    }

    #[test]
    fn duplicate_keys_last_one_wins() {
        let e = entry(r#"{"type":"x","id":"a","id":"b","parentId":null,"timestamp":"t"}"#);
        assert_eq!(e.id.as_deref(), Some("b"));
    }

    #[test]
    fn reasons() {
        assert!(corrupt(b"{\"type\":\"message\",\"id\":\"a").starts_with("invalid JSON"));
        assert!(corrupt(b"[1,2]").contains("array"));
        assert!(corrupt(b"{\"id\":\"a\"}").contains("no `type`"));
        assert!(corrupt(b"{\"type\":\"x\",\"id\":5}").contains("`id`"));
        assert!(corrupt(b"\xff\xfe").contains("UTF-8"));
        assert!(corrupt(br#"{"type":"session","id":"x"}"#).contains("second session header"));
    }
}
