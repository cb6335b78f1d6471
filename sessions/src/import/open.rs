//! Opening any transcript as pi sessions: the one place that decides how a file becomes
//! sessions, for `rampart sessions import` (which writes them out, through [`open_into`]) and
//! `rampart replay` (which plays back the active branch, through [`open`]). Both take the same
//! path; `open` only collects what `open_into` hands on.
//!
//! pi files (v1–v3) go through the session loader, migrated in memory, with corrupt-line
//! sidecars switched off: the source is only read, its directory may be read-only and is not
//! ours. Unreadable lines stay in the source and are named in the warnings. Every other format
//! goes through the importers, and each conversation becomes a header and entries here,
//! keeping its tree links and a note of where each entry came from (`importSource`), so
//! nothing is lost in the move.
//!
//! Memory: the source is never read whole. Detection reads what decides the format, and the
//! importers read line by line and hand each entry on once no later line can change it, so an
//! import through [`open_into`] holds about one line of the source plus the sink's buffers
//! (a JSON document is parsed whole, from the file: its importer needs it). A pi file is the
//! exception: the loader's tree is needed to link entries around unreadable lines, and it is
//! the only copy held.

use std::collections::HashSet;
use std::fs::File;
use std::path::Path;

use serde_json::{Map, Value, json};

use super::detect::Input;
use super::source::{Prepared, Source};
use super::{
    Failure, ImportError, Imported, ImportedItem, ImportedKind, ItemSink, Origin, SourceFormat,
    import_sniffed,
};
use crate::entry::{
    CURRENT_VERSION, CompactionEntry, CustomEntry, Entry, EntryBody, ModelChangeEntry,
    SessionHeader, ThinkingLevelChangeEntry,
};
use crate::load::{Links, LoadReport, entry_at, load_links};
use crate::{LoadOptions, SessionError, SessionTree, load_file};

/// The custom entry type a recorded system prompt is kept under.
pub const SYSTEM_PROMPT_CUSTOM_TYPE: &str = "import.system-prompt";

/// One session read from a transcript.
#[derive(Debug, Clone)]
pub struct Opened {
    /// The format the file was recognised as.
    pub format: SourceFormat,
    /// The header, at the current format version.
    pub header: SessionHeader,
    /// The entries.
    pub tree: SessionTree,
    /// What could not be carried over exactly (from the importer or the loader).
    pub warnings: Vec<String>,
}

/// Why a transcript could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The source could not be read or recognised.
    #[error(transparent)]
    Import(#[from] ImportError),
    /// The source is a pi file the loader could not read.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The source could not be read at all.
    #[error("cannot read `{}`: {source}; check that the path exists and is readable", path.display())]
    Read {
        /// The source file.
        path: std::path::PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// Reads `path` as sessions: one for a pi file, one or more for other tools' transcripts
/// (OpenHands evaluation output holds one per line). The file is only read.
///
/// Every session is held in memory at once; [`open_into`] hands them on entry by entry
/// instead.
pub fn open(path: &Path) -> Result<Vec<Opened>, OpenError> {
    let (prepared, format, input) = sniff_file(path)?;
    if format.pi_version().is_some() {
        return Ok(vec![open_pi(path)?]);
    }
    let mut trees = CollectTrees::default();
    import_other(path, prepared, format, input, &mut trees)?;
    Ok(trees.sessions)
}

/// What a session read by [`open_into`] is, given before its first entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionStart {
    /// The format the file was recognised as.
    pub format: SourceFormat,
    /// Which session of the file this is, from 0.
    pub index: usize,
    /// Whether the file may hold sessions after this one (OpenHands evaluation output); when
    /// `false`, this is the file's only session.
    pub more_may_follow: bool,
}

/// Where [`open_into`] puts the sessions it reads: per session a `begin`, its entries in file
/// order (each parent before its children, ids unique, links standing on their own) and an
/// `end` with the header and the warnings.
pub trait SessionSink {
    /// Why the sink could not take something; a source that cannot be read becomes one too.
    type Error: From<OpenError>;
    /// A session starts.
    fn begin(&mut self, start: &SessionStart) -> Result<(), Self::Error>;
    /// The session's next entry, with the line of the source it came from when known.
    fn entry(&mut self, entry: Entry, source_line: Option<u64>) -> Result<(), Self::Error>;
    /// [`SessionSink::entry`] for an entry that is exactly what its source line holds (a pi v3
    /// line whose links stand as written), with that line's bytes, without its newline. A sink
    /// that writes pi v3 can write them as they are: key order, number spelling and escapes
    /// then survive an import byte for byte, which re-serialising does not promise. The
    /// default ignores the bytes.
    fn verbatim_entry(
        &mut self,
        entry: Entry,
        source_line: Option<u64>,
        line: &[u8],
    ) -> Result<(), Self::Error> {
        let _ = line;
        self.entry(entry, source_line)
    }
    /// The session is complete: its header (at the current format version) and what could
    /// not be carried over exactly.
    fn end(&mut self, header: SessionHeader, warnings: Vec<String>) -> Result<(), Self::Error>;
}

/// [`open`], streaming: each session goes to `sink` entry by entry as it is read, so a sink
/// that writes entries out holds little more than one line of the source. Sessions and entries
/// are exactly those `open` returns, in the same order.
///
/// A pi file is loaded whole first (its links can only be fixed knowing every line); other
/// formats are converted as they are read, keeping only the part of the conversation that a
/// later line may still change (a response split over several lines, for instance).
pub fn open_into<S: SessionSink>(path: &Path, sink: &mut S) -> Result<(), S::Error> {
    let (prepared, format, input) = sniff_file(path)?;
    if format.pi_version().is_some() {
        drop(input);
        return stream_pi(path, sink);
    }
    import_other(path, prepared, format, input, sink)
}

/// A transcript of another tool (sniffed as `format`) into `sink`, through its importer: the
/// path [`open`] and [`open_into`] share for everything but pi files.
fn import_other<S: SessionSink>(
    path: &Path,
    prepared: Prepared<'_>,
    format: SourceFormat,
    input: Input,
    sink: &mut S,
) -> Result<(), S::Error> {
    let mut to_entries = ToEntries::new(sink, path);
    import_sniffed(
        &prepared,
        format,
        input,
        &name_of(path),
        &Origin { path: Some(path) },
        &mut to_entries,
    )
    .map_err(|failure| match failure {
        Failure::Import(error) => S::Error::from(OpenError::from(error)),
        Failure::Sink(error) => error,
    })
}

/// Reads what decides `path`'s format; errors name the file.
fn sniff_file(path: &Path) -> Result<(Prepared<'_>, SourceFormat, Input), OpenError> {
    let name = name_of(path);
    let prepared = Prepared::new(Source::File(path), &name).map_err(|error| match error {
        ImportError::Io { path, source } => OpenError::Read { path, source },
        other => OpenError::from(other),
    })?;
    let (format, input) = super::detect::sniff(&prepared, &name)?;
    Ok((prepared, format, input))
}

fn name_of(path: &Path) -> String {
    path.display().to_string()
}

/// The sink of [`open`]: every session as a tree in memory.
#[derive(Default)]
struct CollectTrees {
    sessions: Vec<Opened>,
    current: Option<(SourceFormat, SessionTree)>,
}

impl SessionSink for CollectTrees {
    type Error = OpenError;

    fn begin(&mut self, start: &SessionStart) -> Result<(), OpenError> {
        self.current = Some((start.format, SessionTree::new()));
        Ok(())
    }

    fn entry(&mut self, entry: Entry, _: Option<u64>) -> Result<(), OpenError> {
        if let Some((_, tree)) = &mut self.current {
            tree.attach(entry);
        }
        Ok(())
    }

    fn end(&mut self, header: SessionHeader, warnings: Vec<String>) -> Result<(), OpenError> {
        if let Some((format, tree)) = self.current.take() {
            self.sessions.push(Opened {
                format,
                header,
                tree,
                warnings,
            });
        }
        Ok(())
    }
}

/// How a pi source is loaded: it is only read, so no corrupt-line sidecar is written (its
/// directory may be read-only and is not ours).
fn pi_load_options() -> LoadOptions {
    LoadOptions {
        record_corrupt_lines: false,
        ..LoadOptions::default()
    }
}

fn open_pi(path: &Path) -> Result<Opened, OpenError> {
    let loaded = load_file(path, &pi_load_options())?;
    let version = loaded
        .report
        .migration
        .as_ref()
        .map_or(loaded.header.format_version(), |m| m.from_version);
    let format = match version {
        1 => SourceFormat::PiV1,
        2 => SourceFormat::PiV2,
        _ => SourceFormat::PiV3,
    };
    let warnings = pi_warnings(path, &loaded.report);
    let mut tree = loaded.tree;
    tree.write_links_into_entries();
    let mut header = loaded.header;
    header.version = Some(CURRENT_VERSION);
    Ok(Opened {
        format,
        header,
        tree,
        warnings,
    })
}

/// A pi source into `sink`. A v3 file is read twice rather than held: once for its structure
/// (every line judged and linked as [`open_pi`]'s load does, content dropped), then entry by
/// entry, each read again from its line and handed on with its links, so the peak is the
/// structure and one entry, not the tree. v1/v2 files are migrated, which needs the tree.
fn stream_pi<S: SessionSink>(path: &Path, sink: &mut S) -> Result<(), S::Error> {
    let Some(links) = load_links(path, &pi_load_options()).map_err(OpenError::from)? else {
        let opened = open_pi(path)?;
        sink.begin(&SessionStart {
            format: opened.format,
            index: 0,
            more_may_follow: false,
        })?;
        for (entry, line) in opened.tree.into_entries() {
            sink.entry(entry, (line > 0).then_some(line))?;
        }
        return sink.end(opened.header, opened.warnings);
    };
    let Links {
        mut header,
        mut tree,
        spans,
        report,
    } = links;
    let warnings = pi_warnings(path, &report);
    drop(report);
    // The new file's links must stand on their own (see `open_pi`).
    tree.write_links_into_entries();
    header.version = Some(CURRENT_VERSION);
    sink.begin(&SessionStart {
        format: SourceFormat::PiV3,
        index: 0,
        more_may_follow: false,
    })?;
    let file = File::open(path).map_err(|e| OpenError::from(SessionError::io(path, "open", e)))?;
    let mut buf = Vec::new();
    for ((linked, line), span) in tree.into_entries().zip(spans) {
        let entry = match entry_at(&file, span, &mut buf) {
            Ok(Ok(entry)) if entry.id == linked.id => entry,
            Ok(_) => {
                return Err(OpenError::from(SessionError::Conflict {
                    path: path.to_path_buf(),
                    problem: format!(
                        "line {line} no longer holds the entry read there a moment ago (the \
                         file was rewritten during the import)"
                    ),
                })
                .into());
            }
            Err(e) => return Err(OpenError::from(SessionError::io(path, "read", e)).into()),
        };
        let source_line = (line > 0).then_some(line);
        if entry.parent_id == linked.parent_id && !buf.ends_with(b"\r") {
            sink.verbatim_entry(entry, source_line, &buf)?;
        } else {
            // Linked around a lost line: the new file says so in `parentId`.
            sink.entry(
                Entry {
                    parent_id: linked.parent_id,
                    ..entry
                },
                source_line,
            )?;
        }
    }
    sink.end(header, warnings)
}

/// What a pi load noticed, as import warnings naming the file and line.
fn pi_warnings(path: &Path, report: &LoadReport) -> Vec<String> {
    let mut warnings: Vec<String> = report
        .corrupt_lines
        .iter()
        .map(|c| {
            format!(
                "{}:{}: the line could not be read and was left out: {}",
                path.display(),
                c.line,
                c.reason
            )
        })
        .collect();
    warnings.extend(report.messages_left_out_line());
    if let Some(m) = &report.migration {
        warnings.push(format!(
            "migrated from v{} to v3: {} entries given ids, {} compaction indices converted, {} \
             hook messages renamed{}",
            m.from_version,
            m.entries_given_ids,
            m.first_kept_converted,
            m.hook_messages_renamed,
            if m.notes.is_empty() {
                String::new()
            } else {
                format!("; {}", m.notes.join("; "))
            }
        ));
    }
    // The new file's links must stand on their own: an entry whose parent was on a lost line
    // names the entry it was linked to instead of an id no line holds.
    for bridge in &report.bridged {
        warnings.push(format!(
            "{}:{}: entry {} named parent {}, which was on the unreadable line {}; it now \
             follows {}",
            path.display(),
            bridge.line,
            bridge.entry_id,
            bridge.lost_parent_id,
            bridge.lost_line,
            bridge.now_under
        ));
    }
    warnings
}

/// Turns imported items into entries for a [`SessionSink`], one at a time: each conversation
/// becomes a header and entries, keeping its tree links and a note of where each entry came
/// from (`importSource`).
struct ToEntries<'a, S> {
    sink: &'a mut S,
    source: &'a Path,
    /// Sessions begun so far.
    sessions: usize,
    /// The ids given to the current session's items (parents are item indices).
    ids: EntryIds,
    /// When this session's import began: its header's time, and its items', when the source
    /// records none.
    began: String,
}

impl<'a, S: SessionSink> ToEntries<'a, S> {
    fn new(sink: &'a mut S, source: &'a Path) -> Self {
        Self {
            sink,
            source,
            sessions: 0,
            ids: EntryIds::default(),
            began: String::new(),
        }
    }
}

impl<S: SessionSink> ItemSink for ToEntries<'_, S> {
    type Error = S::Error;

    fn begin(&mut self, format: SourceFormat, more_may_follow: bool) -> Result<(), S::Error> {
        self.ids = EntryIds::default();
        self.began = crate::ids::now_iso();
        let index = self.sessions;
        self.sessions += 1;
        self.sink.begin(&SessionStart {
            format,
            index,
            more_may_follow,
        })
    }

    fn item(&mut self, item: ImportedItem, start: Option<&str>) -> Result<(), S::Error> {
        let id = self.ids.add();
        let parent_id = item.parent.and_then(|p| self.ids.get(p));
        let mut body = match item.kind {
            ImportedKind::Message(m) => EntryBody::from_message(m),
            ImportedKind::ModelChange { provider, model_id } => {
                EntryBody::ModelChange(ModelChangeEntry {
                    provider,
                    model_id,
                    extra: Map::new(),
                })
            }
            ImportedKind::ThinkingLevel(level) => {
                EntryBody::ThinkingLevelChange(ThinkingLevelChangeEntry {
                    thinking_level: level,
                    extra: Map::new(),
                })
            }
            ImportedKind::SystemPrompt { text, tools } => custom(
                SYSTEM_PROMPT_CUSTOM_TYPE,
                json!({ "text": text, "tools": tools }),
            ),
            ImportedKind::Summary { text, leaf_id } => {
                custom("import.summary", json!({ "text": text, "leafId": leaf_id }))
            }
            // The model saw only the summary from here on: a compaction whose kept part starts
            // after it (its own id is never among the entries before it).
            ImportedKind::Compaction { summary } => EntryBody::Compaction(CompactionEntry {
                summary,
                first_kept_entry_id: id.clone(),
                tokens_before: 0,
                details: None,
                from_hook: None,
                extra: Map::new(),
            }),
            ImportedKind::Custom { custom_type, data } => custom(&custom_type, data),
        };
        let mut source_note = item.extra;
        if let Some(v) = item.source_id {
            source_note.insert("id".into(), Value::String(v));
        }
        if let Some(v) = item.source_parent_id {
            source_note.insert("parentId".into(), Value::String(v));
        }
        if let Some(v) = item.source_line {
            source_note.insert("line".into(), json!(v));
        }
        if item.sidechain {
            source_note.insert("sidechain".into(), Value::Bool(true));
        }
        if !source_note.is_empty()
            && let Some(extra) = body_extra(&mut body)
        {
            extra.insert("importSource".into(), Value::Object(source_note));
        }
        let timestamp = item
            .timestamp
            .unwrap_or_else(|| start.unwrap_or(&self.began).to_owned());
        let line = item.source_line.map(|line| line as u64);
        self.sink.entry(
            Entry {
                id,
                parent_id,
                timestamp,
                body,
            },
            line,
        )
    }

    fn end(&mut self, imported: Imported) -> Result<(), S::Error> {
        let mut header = SessionHeader::new(imported.cwd.unwrap_or_else(|| ".".to_string()));
        header.timestamp = imported.started_at.unwrap_or_else(|| self.began.clone());
        header.extra.insert(
            "importedFrom".into(),
            json!({
                "format": imported.format.name(),
                "file": self.source.display().to_string(),
                "sourceSessionId": imported.source_session_id,
            }),
        );
        self.ids = EntryIds::default();
        self.sink.end(header, imported.warnings)
    }
}

/// The entry ids of one imported session, by item index, made unique as
/// [`crate::ids::new_entry_id`] makes them. Held for every item (a parent may be any earlier
/// one), so the usual 8-hex ids are kept as their 32-bit value: 4 bytes an item instead of a
/// string and a set entry, which was most of what a streamed import of small records held.
#[derive(Default)]
struct EntryIds {
    /// Each item's id, when it is an 8-hex id.
    short: Vec<u32>,
    /// The same, for the uniqueness check.
    taken: HashSet<u32>,
    /// The rare ids that are not (after many collisions), by item index.
    long: std::collections::HashMap<usize, String>,
}

impl EntryIds {
    /// A fresh id for the next item.
    fn add(&mut self) -> String {
        let id = crate::ids::new_entry_id(|candidate| match short_value(candidate) {
            Some(value) => self.taken.contains(&value),
            None => self.long.values().any(|taken| taken == candidate),
        });
        let index = self.short.len();
        match short_value(&id) {
            Some(value) => {
                self.taken.insert(value);
                self.short.push(value);
            }
            None => {
                self.short.push(0);
                self.long.insert(index, id.clone());
            }
        }
        id
    }

    /// The id of item `index`.
    fn get(&self, index: usize) -> Option<String> {
        if let Some(long) = self.long.get(&index) {
            return Some(long.clone());
        }
        self.short.get(index).map(|value| format!("{value:08x}"))
    }
}

/// The value of an 8-character lower-case hex id, the shape [`crate::ids::new_entry_id`]
/// makes; `None` for any other id.
fn short_value(id: &str) -> Option<u32> {
    if id.len() != 8 || !id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    u32::from_str_radix(id, 16).ok()
}

fn custom(custom_type: &str, data: Value) -> EntryBody {
    EntryBody::Custom(CustomEntry {
        custom_type: custom_type.to_string(),
        data: Some(data),
        extra: Map::new(),
    })
}

fn body_extra(body: &mut EntryBody) -> Option<&mut Map<String, Value>> {
    match body {
        EntryBody::Message(m) => Some(&mut m.extra),
        EntryBody::Compaction(c) => Some(&mut c.extra),
        EntryBody::ModelChange(m) => Some(&mut m.extra),
        EntryBody::ThinkingLevelChange(t) => Some(&mut t.extra),
        EntryBody::Custom(c) => Some(&mut c.extra),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use std::path::PathBuf;

    use super::*;

    /// The entries of one session as handed on, with their source lines.
    type Handed = Vec<(Entry, Option<u64>)>;

    /// A sink that keeps what [`open_into`] hands on, to compare with [`open`].
    #[derive(Default)]
    struct Recorded {
        sessions: Vec<(SessionStart, Handed, SessionHeader, Vec<String>)>,
        current: Option<(SessionStart, Handed)>,
    }

    impl SessionSink for Recorded {
        type Error = OpenError;
        fn begin(&mut self, start: &SessionStart) -> Result<(), OpenError> {
            assert!(self.current.is_none(), "begin inside a session");
            assert_eq!(start.index, self.sessions.len());
            self.current = Some((*start, Vec::new()));
            Ok(())
        }
        fn entry(&mut self, entry: Entry, line: Option<u64>) -> Result<(), OpenError> {
            self.current.as_mut().unwrap().1.push((entry, line));
            Ok(())
        }
        fn end(&mut self, header: SessionHeader, warnings: Vec<String>) -> Result<(), OpenError> {
            let (start, entries) = self.current.take().unwrap();
            self.sessions.push((start, entries, header, warnings));
            Ok(())
        }
    }

    /// Ids are fresh for imported formats, so entries are compared with their ids (and the
    /// parent links, through them) mapped to positions.
    /// Times taken from the header (the import's own time, for sources without any) differ
    /// between two imports, so they are compared as "the header's time".
    fn shape(entries: &[Entry], header_time: &str) -> Vec<serde_json::Value> {
        let position: std::collections::HashMap<&str, usize> = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.id.as_str(), i))
            .collect();
        entries
            .iter()
            .map(|e| {
                let mut value = serde_json::to_value(e).unwrap();
                let object = value.as_object_mut().unwrap();
                object.insert("id".into(), json!(position[e.id.as_str()]));
                let parent = e
                    .parent_id
                    .as_deref()
                    .map(|p| position.get(p).map_or_else(|| json!(p), |i| json!(i)));
                object.insert("parentId".into(), json!(parent));
                if e.timestamp == header_time {
                    object.insert("timestamp".into(), json!("<header>"));
                }
                if let Some(first_kept) = object.get_mut("firstKeptEntryId")
                    && let Some(i) = first_kept.as_str().and_then(|p| position.get(p))
                {
                    *first_kept = json!(i);
                }
                value
            })
            .collect()
    }

    fn same_sessions(path: &Path) {
        let opened = open(path);
        let mut recorded = Recorded::default();
        let streamed = open_into(path, &mut recorded);
        let opened = match (opened, streamed) {
            (Ok(opened), Ok(())) => opened,
            (Err(a), Err(b)) => {
                assert_eq!(a.to_string(), b.to_string(), "{}", path.display());
                return;
            }
            (a, b) => panic!("{}: open {a:?}, open_into {b:?}", path.display()),
        };
        assert!(
            recorded.current.is_none(),
            "{}: a session never ended",
            path.display()
        );
        assert_eq!(opened.len(), recorded.sessions.len(), "{}", path.display());
        for (one, (start, entries, header, warnings)) in opened.iter().zip(&recorded.sessions) {
            let what = path.display();
            assert_eq!(one.format, start.format, "{what}");
            assert_eq!(&one.warnings, warnings, "{what}");
            let streamed: Vec<Entry> = entries.iter().map(|(e, _)| e.clone()).collect();
            assert!(
                shape(one.tree.entries(), &one.header.timestamp)
                    == shape(&streamed, &header.timestamp),
                "{what}: the entries differ"
            );
            if one.format.pi_version().is_some() {
                assert_eq!(&one.header, header, "{what}");
                assert_eq!(one.tree.entries(), streamed.as_slice(), "{what}");
                let lines: Vec<Option<u64>> = (0..one.tree.len())
                    .map(|i| Some(one.tree.line_of(i)).filter(|&l| l > 0))
                    .collect();
                let streamed_lines: Vec<Option<u64>> = entries.iter().map(|(_, l)| *l).collect();
                assert_eq!(lines, streamed_lines, "{what}");
            } else {
                assert_eq!(one.header.cwd, header.cwd, "{what}");
                assert_eq!(one.header.extra, header.extra, "{what}");
            }
        }
    }

    fn write(dir: &Path, name: &str, text: &[u8]) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn open_into_hands_on_what_open_returns() {
        let dir = tempfile::tempdir().unwrap();
        let header = r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#;
        let msg = |id: &str, parent: &str, text: &str| {
            format!(
                r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user","content":"{text}","timestamp":1}}}}"#
            )
        };
        // Corrupt lines (one bridged around), a duplicate id, a forward reference, a torn tail.
        let pi = [
            header.to_owned(),
            msg("a", "null", "one"),
            r#"{"type":"message","id":"b","parentId":"a","timestamp":"t","message":"#.to_owned(),
            msg("c", "\"b\"", "after the hole"),
            msg("d", "\"e\"", "forward"),
            msg("e", "\"c\"", "target"),
            msg("a", "\"e\"", "duplicate"),
            String::new(),
            "{oops".to_owned(),
            msg("f", "\"zz\"", "dangling"),
        ]
        .join("\n")
            + "\n"
            + r#"{"type":"message","id":"g""#;
        let mut with_bad_byte = pi.clone().into_bytes();
        with_bad_byte.extend_from_slice(b"\n\xff\xfe\n");
        let claude = concat!(
            r#"{"type":"summary","summary":"title","leafUuid":"u3"}"#,
            "\n",
            r#"{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"s","cwd":"/w","timestamp":"2025-07-14T23:04:11.646Z","message":{"role":"user","content":"hi"}}"#,
            "\n",
            r#"{"type":"assistant","uuid":"u2","parentUuid":"u1","sessionId":"s","timestamp":"2025-07-14T23:04:12.000Z","message":{"id":"m1","role":"assistant","model":"claude-x","content":[{"type":"tool_use","id":"t1","name":"Read","input":{}}]}}"#,
            "\n",
            r#"{"type":"user","uuid":"u3","parentUuid":"u2","sessionId":"s","timestamp":"2025-07-14T23:04:13.000Z","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"x"}]}}"#,
            "\n",
            r#"{"type":"assistant","uuid":"u4","parentUuid":"u3","sessionId":"s","timestamp":"2025-07-14T23:04:14.000Z","message":{"id":"m1","role":"assistant","model":"claude-x","content":[{"type":"text","text":"late part"}],"stop_reason":"end_turn"}}"#,
            "\n",
            "not json\n",
            r#"{"type":"user","uuid":"u5","parentUuid":null,"sessionId":"s","timestamp":"2025-07-14T23:04:15.000Z","message":{"role":"user","content":"rewind"}}"#,
            "\n",
        );
        let openhands = concat!(
            "stray before\n",
            r#"{"instance_id":"i1","history":[{"id":1,"source":"user","action":"message","args":{"content":"go"}}]}"#,
            "\n",
            "stray between\n",
            r#"{"instance_id":"i2","history":[]}"#,
            "\n",
            "stray after\n",
        );
        let chat = r#"[{"role":"system","content":"be brief"},{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]"#;
        for (name, text) in [
            ("pi.jsonl", pi.as_bytes()),
            ("bad-byte.jsonl", with_bad_byte.as_slice()),
            ("claude.jsonl", claude.as_bytes()),
            ("openhands.jsonl", openhands.as_bytes()),
            ("chat.json", chat.as_bytes()),
            ("empty.jsonl", b"".as_slice()),
            ("garbage.jsonl", b"not json\n".as_slice()),
        ] {
            same_sessions(&write(dir.path(), name, text));
        }
        same_sessions(&dir.path().join("missing.jsonl"));

        let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/sessions");
        let mut stack = vec![data];
        while let Some(dir) = stack.pop() {
            let Ok(read) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in read {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path
                    .extension()
                    .is_some_and(|e| e == "jsonl" || e == "json" || e == "traj")
                {
                    same_sessions(&path);
                }
            }
        }
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/codex");
        for entry in std::fs::read_dir(fixtures).unwrap() {
            same_sessions(&entry.unwrap().path());
        }
    }
}
