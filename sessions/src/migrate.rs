//! Format migrations: v1 and v2 session files become v3.
//!
//! * **v1 → v2**: v1 entries have no `id`/`parentId`. Each entry gets a fresh 8-hex id and the
//!   previous entry as its parent (a linear chain, which is what a v1 session was), and a
//!   compaction's `firstKeptEntryIndex` (a position in the file's entry list, header = 0)
//!   becomes `firstKeptEntryId`.
//! * **v2 → v3**: the message role `hookMessage` was renamed `custom`.
//!
//! # Never in place
//!
//! The migration itself runs in memory on load. [`persist`] then writes the v3 result as a
//! **new file** through a temporary name, fsync and an atomic rename onto the session's path,
//! and keeps the original bytes beside it as `<name>.v<N>.bak` (a hard link to the original
//! inode, or a durable copy where links are not possible). The session keeps its path, so
//! registries that point at it (`sessions.json`) stay valid, and the original is one `mv`
//! away. If `<name>.v1.bak` is taken, `<name>.v1.bak.1`, `.2`, … are used.
//!
//! One difference from pi: pi converts `firstKeptEntryIndex` only if the indexed entry
//! parsed. Here the index is counted over the file's non-blank lines (as pi counted them when
//! it wrote the index), so a line that is corrupt today does not shift every later index, and
//! an index that lands on an unusable line moves to the next usable entry, with a note in the
//! report, instead of silently dropping the compaction's cut point.
#![warn(missing_docs)]

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use rampart_message::AgentMessage;

use crate::entry::{CURRENT_VERSION, Entry, EntryBody, MessageEntry, SessionHeader};
use crate::fsutil::{self, Place};
use crate::parse::{RawEntry, typed_body};

/// What a migration changed, so a caller can tell the user (and tests can check).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MigrationReport {
    /// The format version the file was in.
    pub from_version: u64,
    /// How many entries received an id (v1 only).
    pub entries_given_ids: usize,
    /// How many compactions had `firstKeptEntryIndex` converted to `firstKeptEntryId`.
    pub first_kept_converted: usize,
    /// Conversions that could not be exact, one line each (which line, what was done).
    pub notes: Vec<String>,
    /// How many `hookMessage` messages were renamed to `custom`.
    pub hook_messages_renamed: usize,
    /// Where the migrated v3 file was written, once [`persist`] ran.
    pub written_to: Option<PathBuf>,
    /// Where the original (pre-migration) bytes were kept, once [`persist`] ran.
    pub original_kept_at: Option<PathBuf>,
}

/// One usable v1 line, with its position among the file's non-blank lines (`ordinal`; the
/// header is 0), which is what `firstKeptEntryIndex` counts.
#[derive(Debug)]
pub(crate) struct V1Line {
    pub line: u64,
    pub ordinal: u64,
    pub raw: RawEntry,
    pub timestamp: String,
}

/// v1 → v2: ids, parent chain, `firstKeptEntryIndex` → `firstKeptEntryId`.
pub(crate) fn v1_to_v2(lines: Vec<V1Line>, report: &mut MigrationReport) -> Vec<(u64, Entry)> {
    let mut taken = std::collections::HashSet::with_capacity(lines.len());
    let ids: Vec<String> = lines
        .iter()
        .map(|_| {
            let id = crate::ids::new_entry_id(|candidate| taken.contains(candidate));
            taken.insert(id.clone());
            id
        })
        .collect();
    report.entries_given_ids = ids.len();
    let ordinals: Vec<u64> = lines.iter().map(|l| l.ordinal).collect();

    let mut out = Vec::with_capacity(lines.len());
    let mut previous: Option<String> = None;
    for (index, v1) in lines.into_iter().enumerate() {
        let id = ids[index].clone();
        let body = match v1.raw.body {
            EntryBody::Other(other)
                if other.entry_type == "compaction"
                    && other.fields.contains_key("firstKeptEntryIndex") =>
            {
                let mut fields = other.fields;
                let target = fields.get("firstKeptEntryIndex").and_then(Value::as_u64);
                match target.and_then(|k| first_entry_at_or_after(&ordinals, k.max(1))) {
                    Some(found) => {
                        let wanted = target.unwrap_or(0);
                        if ordinals[found] != wanted {
                            report.notes.push(format!(
                                "line {}: firstKeptEntryIndex {wanted} is not a usable entry; kept from the next one (line {})",
                                v1.line,
                                ordinals[found] + 1
                            ));
                        }
                        fields.remove("firstKeptEntryIndex");
                        fields.insert("firstKeptEntryId".into(), Value::String(ids[found].clone()));
                        report.first_kept_converted += 1;
                    }
                    None => report.notes.push(format!(
                        "line {}: firstKeptEntryIndex {:?} names no entry; the compaction is kept as written and ignored in context",
                        v1.line,
                        fields.get("firstKeptEntryIndex")
                    )),
                }
                let (body, problem) = typed_body(other.entry_type, None, fields);
                if let Some(problem) = problem {
                    report.notes.push(format!(
                        "line {}: compaction kept verbatim: {problem}",
                        v1.line
                    ));
                }
                body
            }
            body => body,
        };
        out.push((
            v1.line,
            Entry {
                id: id.clone(),
                parent_id: previous.replace(id),
                timestamp: v1.timestamp,
                body,
            },
        ));
    }
    out
}

/// The index of the first line whose ordinal is at least `ordinal`.
fn first_entry_at_or_after(ordinals: &[u64], ordinal: u64) -> Option<usize> {
    let at = ordinals.partition_point(|&o| o < ordinal);
    (at < ordinals.len()).then_some(at)
}

/// v2 → v3: messages with role `hookMessage` become role `custom`.
pub(crate) fn v2_to_v3(entries: &mut [(u64, Entry)], report: &mut MigrationReport) {
    for (_, entry) in entries.iter_mut() {
        match &mut entry.body {
            EntryBody::Message(MessageEntry { message, .. }) => {
                let AgentMessage::Other(raw) = &**message else {
                    continue;
                };
                if raw.get("role").and_then(Value::as_str) != Some("hookMessage") {
                    continue;
                }
                let mut renamed = raw.clone();
                renamed.insert("role".into(), Value::String("custom".into()));
                let value = Value::Object(renamed);
                // A renamed message that does not fit the `custom` model stays verbatim
                // (with its new role) rather than being lost.
                *message = Arc::new(AgentMessage::deserialize(&value).unwrap_or_else(
                    |_| match value {
                        Value::Object(map) => AgentMessage::Other(map),
                        _ => AgentMessage::Other(serde_json::Map::new()),
                    },
                ));
                report.hook_messages_renamed += 1;
            }
            EntryBody::Other(other) if other.entry_type == "message" => {
                // A message that did not parse at all may still be a hookMessage.
                let renamed = other
                    .fields
                    .get_mut("message")
                    .and_then(Value::as_object_mut)
                    .filter(|m| m.get("role").and_then(Value::as_str) == Some("hookMessage"))
                    .map(|m| m.insert("role".into(), Value::String("custom".into())))
                    .is_some();
                if renamed {
                    report.hook_messages_renamed += 1;
                    let fields = std::mem::take(&mut other.fields);
                    entry.body = typed_body("message".into(), None, fields).0;
                }
            }
            _ => {}
        }
    }
}

/// Marks the header as v3.
pub(crate) fn upgrade_header(header: &mut SessionHeader) {
    header.version = Some(CURRENT_VERSION);
}

/// Writes the migrated session as a new file at `path` and keeps the original beside it (see
/// the module docs). Returns where the original was kept.
pub(crate) fn persist<'a>(
    path: &Path,
    from_version: u64,
    header: &SessionHeader,
    entries: impl Iterator<Item = &'a Entry>,
) -> io::Result<PathBuf> {
    // Serialise first: an entry that cannot be written must stop the migration before any
    // file is touched.
    let mut body = Vec::new();
    writeln!(body, "{}", header.to_json_line()?)?;
    for entry in entries {
        crate::compact_json::write(&mut body, entry)?;
        body.push(b'\n');
    }
    let backup = keep_original(path, from_version)?;
    fsutil::write_atomically(path, Place::Replace, |out| out.write_all(&body))?;
    Ok(backup)
}

/// Links (or copies) the original to the first free `<name>.v<N>.bak[.k]`.
fn keep_original(path: &Path, from_version: u64) -> io::Result<PathBuf> {
    for attempt in 0..1000u32 {
        let mut name = path.as_os_str().to_owned();
        name.push(format!(".v{from_version}.bak"));
        if attempt > 0 {
            name.push(format!(".{attempt}"));
        }
        let backup = PathBuf::from(name);
        match fsutil::keep_as(path, &backup) {
            Ok(()) => return Ok(backup),
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(error) => return Err(error),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!("no free backup name next to {}", path.display()),
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::parse::{LineOutcome, parse_line};

    fn raw(line: &str) -> RawEntry {
        match parse_line(line.as_bytes()) {
            LineOutcome::Entry(raw) => raw,
            LineOutcome::Corrupt(why) => panic!("{why}"),
        }
    }

    fn v1(line: u64, text: &str) -> V1Line {
        V1Line {
            line,
            ordinal: line - 1,
            raw: raw(text),
            timestamp: "2025-01-01T00:00:00.000Z".into(),
        }
    }

    #[test]
    fn chain_and_first_kept() {
        let mut report = MigrationReport::default();
        let entries = v1_to_v2(
            vec![
                v1(
                    2,
                    r#"{"type":"message","message":{"role":"user","content":"a","timestamp":1}}"#,
                ),
                v1(
                    3,
                    r#"{"type":"message","message":{"role":"user","content":"b","timestamp":2}}"#,
                ),
                v1(
                    4,
                    r#"{"type":"compaction","summary":"s","firstKeptEntryIndex":2,"tokensBefore":5}"#,
                ),
            ],
            &mut report,
        );
        assert_eq!(entries[0].1.parent_id, None);
        assert_eq!(entries[1].1.parent_id.as_ref(), Some(&entries[0].1.id));
        let EntryBody::Compaction(c) = &entries[2].1.body else {
            panic!("{:?}", entries[2].1.body)
        };
        assert_eq!(c.first_kept_entry_id, entries[1].1.id);
        assert_eq!(report.first_kept_converted, 1);
        assert!(report.notes.is_empty());
    }

    #[test]
    fn hook_messages_become_custom() {
        let mut report = MigrationReport::default();
        let line = r#"{"type":"message","id":"a","parentId":null,"timestamp":"t","message":{"role":"hookMessage","customType":"x","content":"c","display":true,"timestamp":1}}"#;
        let r = raw(line);
        let mut entries = vec![(
            2,
            Entry {
                id: "a".into(),
                parent_id: None,
                timestamp: "t".into(),
                body: r.body,
            },
        )];
        v2_to_v3(&mut entries, &mut report);
        assert_eq!(report.hook_messages_renamed, 1);
        assert!(matches!(
            entries[0].1.body.message(),
            Some(AgentMessage::Custom(_))
        ));
    }
}
