//! The session file model: the header line and the entries that follow it (pi format v3).
//!
//! A session file is JSON Lines. Line 1 is a [`SessionHeader`]; every later line is an
//! [`Entry`]: `type`, an 8-hex `id`, a `parentId` (which links entries into a tree) and an ISO
//! `timestamp`, plus fields that depend on the type ([`EntryBody`]).
//!
//! The one hard rule is the same as for messages: **what we read, we write back unchanged**
//! (equal as JSON values). Other programs (pi, OpenClaw, extensions, newer versions of either)
//! write fields and entry types this crate does not know, and a user's history must survive a
//! Rampart load and save. So:
//!
//! * every typed body keeps unknown fields in a flattened `extra` map;
//! * an entry type this crate does not know is kept verbatim as [`EntryBody::Other`];
//! * a known type whose fields do not fit the typed model (a wrong field type, a missing
//!   field, a value that would not come back out the same) is *also* kept verbatim as
//!   [`EntryBody::Other`], and the loader reports it, instead of failing the line or quietly
//!   normalising it. See `parse.rs` for how that decision is made.
#![warn(missing_docs)]

use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use std::sync::Arc;

use rampart_message::SharedMessage;
use rampart_message::{AgentMessage, Content};

/// Fields an entry or header carries that this model does not name; kept so they survive a
/// round trip.
pub type Extra = Map<String, Value>;

/// The session format version this crate writes; older files are migrated (see `migrate`).
pub const CURRENT_VERSION: u64 = 3;

/// The keys every entry has at its top level, which [`EntryBody`] therefore never holds.
pub(crate) const BASE_KEYS: [&str; 4] = ["type", "id", "parentId", "timestamp"];

// ---------------------------------------------------------------------------
// Header
// ---------------------------------------------------------------------------

/// Line 1 of a session file: who the session is, not part of the entry tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionHeader {
    /// The format version. Absent means v1 (pi wrote no version before the tree format); the
    /// loader migrates anything below [`CURRENT_VERSION`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
    /// The session id (a uuid), which registries such as `sessions.json` refer to.
    pub id: String,
    /// When the session was created (ISO 8601).
    pub timestamp: String,
    /// The working directory the agent ran in; tools resolve relative paths against it.
    pub cwd: String,
    /// The session this one was forked from, if any (a path), so UIs can link them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session: Option<String>,
    /// The id of the session this one replaced when the user started over under the same key
    /// (`rampart run --new`, OpenClaw's `/new`): unlike a fork it holds none of that session's
    /// entries. Kept in the file, the record, so an engine that carries state over (the
    /// engine API's `previousSessionId`) is told on every call, after any restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_session_id: Option<String>,
    /// Header fields this model does not name (v1 headers carry `provider`, `modelId`,
    /// `thinkingLevel`, `branchedFrom`), kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: Extra,
}

impl SessionHeader {
    /// A header for a new v3 session in `cwd`, with a fresh uuid and the current time.
    pub fn new(cwd: impl Into<String>) -> Self {
        Self {
            version: Some(CURRENT_VERSION),
            id: crate::ids::new_uuid(),
            timestamp: crate::ids::now_iso(),
            cwd: cwd.into(),
            parent_session: None,
            previous_session_id: None,
            extra: Extra::new(),
        }
    }

    /// The format version this header declares (v1 when it declares none).
    pub fn format_version(&self) -> u64 {
        self.version.unwrap_or(1)
    }

    /// The header as one JSON line (without the newline), `type` first as pi writes it.
    pub fn to_json_line(&self) -> Result<String, serde_json::Error> {
        #[derive(Serialize)]
        struct Out<'a> {
            #[serde(rename = "type")]
            kind: &'static str,
            #[serde(flatten)]
            header: &'a SessionHeader,
        }
        crate::compact_json::to_string(&Out {
            kind: "session",
            header: self,
        })
    }
}

// ---------------------------------------------------------------------------
// Entries
// ---------------------------------------------------------------------------

/// One line of a session after the header: a node of the session tree.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The entry id (8 hex characters for ids this crate makes; any string is accepted on
    /// load). Children refer to it through `parent_id`.
    pub id: String,
    /// The entry this one continues from; `None` (`null` in JSON) for a root. Several entries
    /// with the same parent are a branch point.
    pub parent_id: Option<String>,
    /// When the entry was written (ISO 8601), as opposed to the message's own Unix-ms time.
    pub timestamp: String,
    /// What the entry says, by type.
    pub body: EntryBody,
}

/// The type-specific part of an entry, tagged in JSON by the entry's `type`.
#[derive(Debug, Clone, PartialEq)]
pub enum EntryBody {
    /// `message`: one conversation message; the only source of model context besides
    /// `custom_message`, `branch_summary` and the last compaction.
    Message(MessageEntry),
    /// `compaction`: history before `first_kept_entry_id` is replaced by `summary` in context.
    Compaction(CompactionEntry),
    /// `branch_summary`: the summary of a branch the conversation came back from.
    BranchSummary(BranchSummaryEntry),
    /// `model_change`: the user or runtime switched models.
    ModelChange(ModelChangeEntry),
    /// `thinking_level_change`: the reasoning effort setting changed.
    ThinkingLevelChange(ThinkingLevelChangeEntry),
    /// `custom`: extension state; never reaches the model.
    Custom(CustomEntry),
    /// `custom_message`: an extension's message; reaches the model as a `custom` message.
    CustomMessage(CustomMessageEntry),
    /// `label`: a user-visible bookmark on another entry.
    Label(LabelEntry),
    /// `session_info`: session metadata such as a display name.
    SessionInfo(SessionInfoEntry),
    /// An entry type this crate does not know, or a known type whose fields did not fit the
    /// typed model: kept verbatim so it round-trips, and otherwise ignored.
    Other(OtherEntry),
}

impl EntryBody {
    /// The JSON `type` of the entry.
    pub fn entry_type(&self) -> &str {
        match self {
            Self::Message(_) => "message",
            Self::Compaction(_) => "compaction",
            Self::BranchSummary(_) => "branch_summary",
            Self::ModelChange(_) => "model_change",
            Self::ThinkingLevelChange(_) => "thinking_level_change",
            Self::Custom(_) => "custom",
            Self::CustomMessage(_) => "custom_message",
            Self::Label(_) => "label",
            Self::SessionInfo(_) => "session_info",
            Self::Other(other) => &other.entry_type,
        }
    }

    /// The message of a `message` entry.
    pub fn message(&self) -> Option<&AgentMessage> {
        self.shared_message().map(|m| &**m)
    }

    /// The shared handle of a `message` entry's message: clone it (a reference count, not a
    /// copy) to hand the message to engines as the same allocation every time.
    pub fn shared_message(&self) -> Option<&SharedMessage> {
        match self {
            Self::Message(m) => Some(&m.message),
            _ => None,
        }
    }

    /// A `message` body for `message`, with no extra fields.
    pub fn from_message(message: AgentMessage) -> Self {
        Self::from_shared(Arc::new(message))
    }

    /// A `message` body for a message that is already shared (say, one the host has already
    /// handed to engines), with no extra fields. The entry keeps that very allocation, so the
    /// contexts built from the tree later return it and engines see it as unchanged.
    pub fn from_shared(message: SharedMessage) -> Self {
        Self::Message(MessageEntry {
            message,
            extra: Extra::new(),
            as_read: None,
        })
    }
}

/// Body of a `message` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct MessageEntry {
    /// The message, in the engine API's lossless model. Shared rather than owned so that the
    /// context of a branch hands out this allocation instead of a copy: building the context
    /// costs O(messages), not O(bytes of history), and a message that did not change between
    /// turns is pointer-equal between turns, which is how the engine ABI recognises it.
    /// (Serialised as the message itself: serde's `rc` feature writes an `Arc<T>` as `T`.)
    pub message: SharedMessage,
    /// Entry-level fields this model does not name, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: Extra,
    /// The message as the file held it, when its optional fields had to be read leniently
    /// (see `lenient`): `message` is what the context uses, this is what is written back, so
    /// reading never rewrites a user's data. `None` for messages read as they are, and for
    /// new ones.
    #[serde(skip)]
    pub as_read: Option<Arc<Value>>,
}

impl Serialize for MessageEntry {
    /// The message (as the file held it, if it was read leniently), then the extra fields.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        match &self.as_read {
            Some(raw) => map.serialize_entry("message", &**raw)?,
            None => map.serialize_entry("message", &*self.message)?,
        }
        for (key, value) in &self.extra {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// Body of a `compaction` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionEntry {
    /// The summary that replaces the compacted history in context.
    pub summary: String,
    /// The first entry on the path that is kept verbatim after the summary.
    pub first_kept_entry_id: String,
    /// Context size before the compaction, in tokens; shown to the model with the summary.
    pub tokens_before: u64,
    /// Compactor-specific data (file lists, …); `Some(Value::Null)` keeps an explicit `null`.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub details: Option<Value>,
    /// Whether an extension (rather than pi) produced the compaction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_hook: Option<bool>,
    /// Fields this model does not name, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Body of a `branch_summary` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BranchSummaryEntry {
    /// The entry the summarised branch started from (pi writes `"root"` for the root).
    pub from_id: String,
    /// The summary text shown to the model.
    pub summary: String,
    /// Summariser-specific data; `Some(Value::Null)` keeps an explicit `null`.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub details: Option<Value>,
    /// Whether an extension produced the summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_hook: Option<bool>,
    /// Fields this model does not name, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Body of a `model_change` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelChangeEntry {
    /// The provider of the new model (`anthropic`, `ollama`, …).
    pub provider: String,
    /// The new model id.
    pub model_id: String,
    /// Fields this model does not name, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Body of a `thinking_level_change` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThinkingLevelChangeEntry {
    /// The new level (`off`, `minimal`, `low`, `medium`, `high`, …); kept as text because the
    /// set grows with providers.
    pub thinking_level: String,
    /// Fields this model does not name, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Body of a `custom` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CustomEntry {
    /// The extension-defined kind (OpenClaw writes `model-snapshot`, …).
    pub custom_type: String,
    /// The extension's data; `Some(Value::Null)` keeps an explicit `null`.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub data: Option<Value>,
    /// Fields this model does not name, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Body of a `custom_message` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CustomMessageEntry {
    /// The extension-defined kind.
    pub custom_type: String,
    /// What the model sees.
    pub content: Content,
    /// Whether UIs show it; the model sees it either way.
    pub display: bool,
    /// Extension data never sent to the model; `Some(Value::Null)` keeps an explicit `null`.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub details: Option<Value>,
    /// Fields this model does not name, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Body of a `label` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelEntry {
    /// The labelled entry.
    pub target_id: String,
    /// The label; `None` clears an earlier label of the same target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Fields this model does not name, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Body of a `session_info` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfoEntry {
    /// A display name for the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Fields this model does not name, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: Extra,
}

/// An entry kept verbatim: its `type` and every field except the four base keys.
#[derive(Debug, Clone, PartialEq)]
pub struct OtherEntry {
    /// The entry's `type`.
    pub entry_type: String,
    /// All other fields as written. The base keys (`type`, `id`, `parentId`, `timestamp`)
    /// belong to [`Entry`] and are skipped here on output should they appear.
    pub fields: Extra,
}

// ---------------------------------------------------------------------------
// Serialisation
// ---------------------------------------------------------------------------

impl Entry {
    /// A new entry continuing from `parent_id`, stamped with the current time.
    pub fn new(id: String, parent_id: Option<String>, body: EntryBody) -> Self {
        Self::stamped(id, parent_id, body, crate::ids::now_iso())
    }

    /// A new entry continuing from `parent_id`, stamped with `timestamp` (ISO 8601): what a
    /// session with scripted stamps writes (see `stamps`).
    pub fn stamped(
        id: String,
        parent_id: Option<String>,
        body: EntryBody,
        timestamp: String,
    ) -> Self {
        Self {
            id,
            parent_id,
            timestamp,
            body,
        }
    }

    /// The entry's JSON `type`.
    pub fn entry_type(&self) -> &str {
        self.body.entry_type()
    }

    /// The entry as one JSON line, without the trailing newline.
    pub fn to_json_line(&self) -> Result<String, serde_json::Error> {
        crate::compact_json::to_string(self)
    }
}

/// The entry with its base keys first, in pi's order, then the body's fields.
#[derive(Serialize)]
struct EntryOut<'a, B: Serialize> {
    #[serde(rename = "type")]
    kind: &'a str,
    id: &'a str,
    #[serde(rename = "parentId")]
    parent_id: &'a Option<String>,
    timestamp: &'a str,
    #[serde(flatten)]
    body: &'a B,
}

impl Serialize for Entry {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        fn out<'a, B: Serialize>(entry: &'a Entry, kind: &'a str, body: &'a B) -> EntryOut<'a, B> {
            EntryOut {
                kind,
                id: &entry.id,
                parent_id: &entry.parent_id,
                timestamp: &entry.timestamp,
                body,
            }
        }
        let kind = self.body.entry_type();
        match &self.body {
            EntryBody::Message(b) => out(self, kind, b).serialize(serializer),
            EntryBody::Compaction(b) => out(self, kind, b).serialize(serializer),
            EntryBody::BranchSummary(b) => out(self, kind, b).serialize(serializer),
            EntryBody::ModelChange(b) => out(self, kind, b).serialize(serializer),
            EntryBody::ThinkingLevelChange(b) => out(self, kind, b).serialize(serializer),
            EntryBody::Custom(b) => out(self, kind, b).serialize(serializer),
            EntryBody::CustomMessage(b) => out(self, kind, b).serialize(serializer),
            EntryBody::Label(b) => out(self, kind, b).serialize(serializer),
            EntryBody::SessionInfo(b) => out(self, kind, b).serialize(serializer),
            EntryBody::Other(other) => {
                let mut map = serializer.serialize_map(None)?;
                map.serialize_entry("type", &other.entry_type)?;
                map.serialize_entry("id", &self.id)?;
                map.serialize_entry("parentId", &self.parent_id)?;
                map.serialize_entry("timestamp", &self.timestamp)?;
                for (key, value) in &other.fields {
                    // A base key in `fields` would be written twice; the entry's own wins.
                    if !BASE_KEYS.contains(&key.as_str()) {
                        map.serialize_entry(key, value)?;
                    }
                }
                map.end()
            }
        }
    }
}

/// For `Option<Value>` fields: a present `null` becomes `Some(Value::Null)`, so it is written
/// back rather than dropped.
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn base_keys_come_first() {
        let entry = Entry {
            id: "0123abcd".into(),
            parent_id: None,
            timestamp: "2026-01-01T00:00:00.000Z".into(),
            body: EntryBody::ThinkingLevelChange(ThinkingLevelChangeEntry {
                thinking_level: "high".into(),
                extra: Extra::new(),
            }),
        };
        assert_eq!(
            entry.to_json_line().unwrap(),
            r#"{"type":"thinking_level_change","id":"0123abcd","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","thinkingLevel":"high"}"#
        );
    }

    #[test]
    fn other_entries_skip_shadowing_base_keys() {
        let mut fields = Extra::new();
        fields.insert("id".into(), json!("shadow"));
        fields.insert("x".into(), json!(1));
        let entry = Entry {
            id: "0123abcd".into(),
            parent_id: Some("ffffffff".into()),
            timestamp: "t".into(),
            body: EntryBody::Other(OtherEntry {
                entry_type: "future".into(),
                fields,
            }),
        };
        let value: Value = serde_json::from_str(&entry.to_json_line().unwrap()).unwrap();
        assert_eq!(
            value,
            json!({"type":"future","id":"0123abcd","parentId":"ffffffff","timestamp":"t","x":1})
        );
    }

    #[test]
    fn header_round_trips_with_extra_fields() {
        let line = r#"{"type":"session","id":"x","timestamp":"t","cwd":"/","provider":"anthropic","branchedFrom":"/a"}"#;
        let mut value: Value = serde_json::from_str(line).unwrap();
        value.as_object_mut().unwrap().remove("type");
        let header: SessionHeader = serde_json::from_value(value).unwrap();
        assert_eq!(header.format_version(), 1);
        let back: Value = serde_json::from_str(&header.to_json_line().unwrap()).unwrap();
        assert_eq!(back, serde_json::from_str::<Value>(line).unwrap());
    }
}
