//! `rampart sessions import`: any transcript the importers read becomes a pi v3 session file in
//! the sessions directory, registered in `sessions.json`.
//!
//! The source file is only read: [`rampart_sessions::import::open_into`] decides how it becomes
//! sessions (the same reading a replay uses, through `open`) and hands them on entry by entry;
//! this writes them out as they come and registers them.

use std::path::{Path, PathBuf};

use rampart_sessions::NewSessionFile;
use rampart_sessions::entry::{Entry, EntryBody, SessionHeader};
use rampart_sessions::import::{self, OpenError, SessionSink, SessionStart, SourceFormat};

use crate::blobs::BlobStore;
use crate::spill::spill_oversized;
use rampart_sessions::store::{
    SessionEntry, SessionStore, StoreError, is_safe_session_id, normalize_key, now_unix_ms,
};

/// What one import produced.
#[derive(Debug, Clone)]
pub struct ImportOutcome {
    /// The registry key the session is known by.
    pub key: String,
    /// The new session's id.
    pub session_id: String,
    /// The session file written.
    pub file: PathBuf,
    /// The format that was detected.
    pub format: SourceFormat,
    /// Entries written.
    pub entries: usize,
    /// What could not be carried over exactly (from the importer or the loader).
    pub warnings: Vec<String>,
    /// The transcript this session was read from (a subagent's own file, for a child).
    pub source: PathBuf,
    /// For a Claude Code subagent: the parent's key and the tool call that spawned it
    /// (recorded in the registry as `spawnedBy` and `spawnedByToolCallId`).
    pub spawned_by: Option<(String, Option<String>)>,
}

/// Why an import failed. Every message names the file and says what to do.
#[derive(Debug, thiserror::Error)]
pub enum ImportFailure {
    /// The source could not be read, recognised or loaded.
    #[error(transparent)]
    Source(#[from] OpenError),
    /// The new session could not be written.
    #[error(transparent)]
    Write(#[from] rampart_sessions::SessionError),
    /// The registry could not be read or written.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Content too large for one line could not be kept in the blob store.
    #[error(transparent)]
    Blob(crate::blobs::BlobError),
    /// The key is taken; nothing was written.
    #[error(
        "a session with key `{key}` already exists ({existing}); choose another key with --as, \
         or remove the old one from sessions.json"
    )]
    KeyTaken {
        /// The key.
        key: String,
        /// The existing session's file.
        existing: String,
    },
}

/// Imports `source` into `store`'s directory. `key` names the session in the registry (default:
/// the source's file stem). A source holding several sessions gets keys `key-1`, `key-2`, ….
pub fn import_into(
    store: &SessionStore,
    source: &Path,
    key: Option<&str>,
) -> Result<Vec<ImportOutcome>, ImportFailure> {
    import_into_with(
        store,
        source,
        key,
        rampart_sessions::load::DEFAULT_MAX_LINE_BYTES,
    )
}

/// [`import_into`] with the longest line the new file may hold: message content that would
/// make a longer line goes to the store's blob store first (see [`crate::spill`]). Tests use a
/// small limit to exercise that without writing 64 MiB.
///
/// The source is streamed: each entry is written as the importer hands it on (to a file with
/// no name yet, since the header comes last), so an import holds about one line of the source,
/// not the file (a pi file is loaded whole first; see [`import::open_into`]).
pub fn import_into_with(
    store: &SessionStore,
    source: &Path,
    key: Option<&str>,
    max_line_bytes: usize,
) -> Result<Vec<ImportOutcome>, ImportFailure> {
    let base_key = normalize_key(
        key.map(str::to_string)
            .unwrap_or_else(|| stem(source))
            .trim(),
    );
    let mut sink = IntoStore {
        store,
        blobs: BlobStore::in_sessions_dir(store.dir()),
        source,
        base_key,
        max_line_bytes,
        current: None,
        first: None,
        outcomes: Vec::new(),
    };
    import::open_into(source, &mut sink)?;
    // A source that held one session: its key is the base key itself.
    if let Some(only) = sink.first.take() {
        let key = sink.base_key.clone();
        sink.place(only, key)?;
    }
    let mut outcomes = sink.outcomes;
    if let [parent] = outcomes.as_slice()
        && parent.format == SourceFormat::ClaudeCode
    {
        let children = import_subagents(store, source, &parent.key, max_line_bytes)?;
        outcomes.extend(children);
    }
    Ok(outcomes)
}

/// The registry key of the subagent `agent_id` of the session `parent_key`.
pub fn subagent_key(parent_key: &str, agent_id: &str) -> String {
    normalize_key(&format!("{parent_key}:subagent:{agent_id}"))
}

/// Imports the subagent transcripts beside the Claude Code session `source` (see
/// [`import::subagents`]) as sessions of their own, each registered as spawned by
/// `parent_key` at the tool call that ran it, the way OpenClaw's registry records a spawned
/// session (`spawnedBy`), plus `spawnedByToolCallId`, `label` (the task) and `subagentType`.
fn import_subagents(
    store: &SessionStore,
    source: &Path,
    parent_key: &str,
    max_line_bytes: usize,
) -> Result<Vec<ImportOutcome>, ImportFailure> {
    let children = import::subagents::find(source).map_err(|e| {
        ImportFailure::Source(OpenError::Read {
            path: source.to_path_buf(),
            source: e,
        })
    })?;
    let mut outcomes = Vec::new();
    for child in children {
        let key = subagent_key(parent_key, &child.agent_id);
        for mut outcome in import_into_with(store, &child.path, Some(&key), max_line_bytes)? {
            let fields = [
                ("spawnedBy", Some(parent_key.to_owned())),
                ("spawnedByToolCallId", child.parent_tool_call_id.clone()),
                ("label", child.description.clone()),
                ("subagentType", child.agent_type.clone()),
            ];
            store.update(|map| {
                if let Some(entry) = map.get_mut(&outcome.key) {
                    for (name, value) in &fields {
                        if let Some(value) = value {
                            entry.extra.insert(
                                (*name).to_owned(),
                                serde_json::Value::from(value.as_str()),
                            );
                        }
                    }
                }
            })?;
            outcome.spawned_by = Some((parent_key.to_owned(), child.parent_tool_call_id.clone()));
            outcomes.push(outcome);
        }
    }
    Ok(outcomes)
}

/// The [`SessionSink`] of an import: writes each session to the store as it is read.
struct IntoStore<'a> {
    store: &'a SessionStore,
    blobs: BlobStore,
    source: &'a Path,
    base_key: String,
    max_line_bytes: usize,
    /// The session being read.
    current: Option<Writing>,
    /// The first session, read but not placed: whether its key is the base key or
    /// `<key>-1` depends on whether another session follows.
    first: Option<Written>,
    outcomes: Vec<ImportOutcome>,
}

/// A session whose entries are being written.
struct Writing {
    start: SessionStart,
    file: NewSessionFile,
    /// What was moved to the blob store, named after the source's warnings.
    spills: Vec<String>,
}

/// A session read whole, waiting for its key.
struct Written {
    writing: Writing,
    header: SessionHeader,
    warnings: Vec<String>,
}

impl IntoStore<'_> {
    /// The registry key of session `index` when the source holds several.
    fn numbered_key(&self, index: usize) -> String {
        format!("{}-{}", self.base_key, index + 1)
    }

    /// Fails with [`ImportFailure::KeyTaken`] when `key` is in the registry.
    fn check_key(&self, key: &str) -> Result<(), ImportFailure> {
        match self.store.get(key)? {
            Some(existing) => Err(ImportFailure::KeyTaken {
                key: key.to_owned(),
                existing: self
                    .store
                    .session_file_path(key, &existing)
                    .map_or_else(|e| e.to_string(), |p| p.display().to_string()),
            }),
            None => Ok(()),
        }
    }

    /// Puts a session read whole in the store under `key` and registers it.
    fn place(&mut self, written: Written, key: String) -> Result<(), ImportFailure> {
        self.check_key(&key)?;
        let Written {
            writing,
            mut header,
            mut warnings,
        } = written;
        // The id names the new file: one that is not a safe file name (`../escaped`) gets a
        // fresh id, so nothing is written outside the sessions directory; the source's id is
        // kept in the header and named in the warnings.
        if !is_safe_session_id(&header.id) {
            let fresh = rampart_sessions::ids::new_uuid();
            warnings.push(format!(
                "the session's header `id` {:?} is not a safe file name; the imported session \
                 is {fresh} (the original id is kept as `importedFrom.sourceHeaderId`)",
                header.id
            ));
            let source_id = serde_json::Value::String(header.id.clone());
            match header.extra.get_mut("importedFrom") {
                Some(serde_json::Value::Object(from)) => {
                    from.insert("sourceHeaderId".into(), source_id);
                }
                _ => {
                    header.extra.insert(
                        "importedFrom".into(),
                        serde_json::json!({ "sourceHeaderId": source_id }),
                    );
                }
            }
            header.id = fresh;
        }
        // A session id already used in this directory (the same file imported under another
        // key) gets a fresh id, so the two never share a file.
        let mut file = self.store.dir().join(format!("{}.jsonl", header.id));
        if file.exists() {
            header.id = rampart_sessions::ids::new_uuid();
            file = self.store.dir().join(format!("{}.jsonl", header.id));
        }
        warnings.extend(writing.spills);
        let entries = writing.file.len();
        writing.file.finish(&file, &header)?;
        let mut entry = SessionEntry::new(header.id.clone(), now_unix_ms());
        entry.session_file = file.file_name().map(|n| n.to_string_lossy().into_owned());
        self.store.upsert(&key, entry)?;
        self.outcomes.push(ImportOutcome {
            key,
            session_id: header.id,
            file,
            format: writing.start.format,
            entries,
            warnings,
            source: self.source.to_path_buf(),
            spawned_by: None,
        });
        Ok(())
    }
}

impl SessionSink for IntoStore<'_> {
    type Error = ImportFailure;

    fn begin(&mut self, start: &SessionStart) -> Result<(), ImportFailure> {
        if start.index == 0 && !start.more_may_follow {
            // The only session: refuse a taken key before writing anything, blobs included.
            self.check_key(&self.base_key)?;
        } else if start.index > 0 {
            // A second session: the first is `<key>-1`, and this one's key is known.
            if let Some(first) = self.first.take() {
                let key = self.numbered_key(0);
                self.place(first, key)?;
            }
            self.check_key(&self.numbered_key(start.index))?;
        }
        self.current = Some(Writing {
            start: *start,
            file: NewSessionFile::create_in(self.store.dir())?,
            spills: Vec::new(),
        });
        Ok(())
    }

    fn verbatim_entry(
        &mut self,
        entry: Entry,
        source_line: Option<u64>,
        line: &[u8],
    ) -> Result<(), ImportFailure> {
        // An unchanged pi v3 line is copied as it is, unless it must be spilled (a line over
        // this import's limit): then it is written anew, shortened.
        let fits = line.len() < self.max_line_bytes;
        match &mut self.current {
            Some(writing) if fits => Ok(writing.file.push_verbatim(&entry, line)?),
            _ => self.entry(entry, source_line),
        }
    }

    fn entry(&mut self, mut entry: Entry, source_line: Option<u64>) -> Result<(), ImportFailure> {
        let Some(writing) = &mut self.current else {
            return Ok(());
        };
        if let EntryBody::Message(m) = &mut entry.body
            && let Some((spilled, spill)) =
                spill_oversized(&m.message, &self.blobs, self.max_line_bytes)
                    .map_err(ImportFailure::Blob)?
        {
            let at = source_line.map_or_else(String::new, |line| format!(":{line}"));
            writing.spills.push(format!(
                "{}{at}: entry {} would be a line of {} bytes, over the {}-byte limit; its \
                 largest text is kept whole in the blob store as {} and shortened in the \
                 session",
                self.source.display(),
                entry.id,
                spill.line_bytes_before,
                self.max_line_bytes,
                spill.blobs.join(", ")
            ));
            m.message = std::sync::Arc::new(spilled);
        }
        writing.file.push(&entry)?;
        Ok(())
    }

    fn end(&mut self, header: SessionHeader, warnings: Vec<String>) -> Result<(), ImportFailure> {
        let Some(writing) = self.current.take() else {
            return Ok(());
        };
        let index = writing.start.index;
        let written = Written {
            writing,
            header,
            warnings,
        };
        if index == 0 {
            self.first = Some(written);
            return Ok(());
        }
        let key = self.numbered_key(index);
        self.place(written, key)
    }
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "imported".into())
}
