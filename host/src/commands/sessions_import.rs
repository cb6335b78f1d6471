//! `rampart sessions import`: any transcript the importers read becomes a pi v3 session file in
//! the sessions directory, registered in `sessions.json`.
//!
//! The source file is only read: [`rampart_sessions::import::open`] decides how it becomes
//! sessions (the same reading a replay uses); this writes them out and registers them.

use std::path::{Path, PathBuf};

use rampart_sessions::entry::EntryBody;
use rampart_sessions::import::{self, OpenError, SourceFormat};
use rampart_sessions::{SessionTree, save_session};

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
pub fn import_into_with(
    store: &SessionStore,
    source: &Path,
    key: Option<&str>,
    max_line_bytes: usize,
) -> Result<Vec<ImportOutcome>, ImportFailure> {
    let opened = import::open(source)?;
    let base_key = normalize_key(
        key.map(str::to_string)
            .unwrap_or_else(|| stem(source))
            .trim(),
    );
    let many = opened.len() > 1;
    let mut outcomes = Vec::new();
    for (i, session) in opened.into_iter().enumerate() {
        let mut header = session.header;
        let key = if many {
            format!("{base_key}-{}", i + 1)
        } else {
            base_key.clone()
        };
        if let Some(existing) = store.get(&key)? {
            return Err(ImportFailure::KeyTaken {
                key: key.clone(),
                existing: store
                    .session_file_path(&key, &existing)
                    .map_or_else(|e| e.to_string(), |p| p.display().to_string()),
            });
        }
        let mut warnings = session.warnings;
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
        let mut file = store.dir().join(format!("{}.jsonl", header.id));
        if file.exists() {
            header.id = rampart_sessions::ids::new_uuid();
            file = store.dir().join(format!("{}.jsonl", header.id));
        }
        let tree = fit_lines(
            session.tree,
            &BlobStore::in_sessions_dir(store.dir()),
            max_line_bytes,
            source,
            &mut warnings,
        )?;
        save_session(&file, &header, &tree)?;
        let mut entry = SessionEntry::new(header.id.clone(), now_unix_ms());
        entry.session_file = file.file_name().map(|n| n.to_string_lossy().into_owned());
        store.upsert(&key, entry)?;
        outcomes.push(ImportOutcome {
            key,
            session_id: header.id.clone(),
            file,
            format: session.format,
            entries: tree.len(),
            warnings,
        });
    }
    Ok(outcomes)
}

/// `tree` with every message that would make a line over `max_line_bytes` spilled to `blobs`
/// (each spill named in `warnings`); the same tree when nothing is that large.
fn fit_lines(
    tree: SessionTree,
    blobs: &BlobStore,
    max_line_bytes: usize,
    source: &Path,
    warnings: &mut Vec<String>,
) -> Result<SessionTree, ImportFailure> {
    let mut changed = false;
    let mut entries = Vec::with_capacity(tree.len());
    for (index, entry) in tree.entries().iter().enumerate() {
        let mut entry = entry.clone();
        if let EntryBody::Message(m) = &mut entry.body
            && let Some((spilled, spill)) =
                spill_oversized(&m.message, blobs, max_line_bytes).map_err(ImportFailure::Blob)?
        {
            let at = match tree.line_of(index) {
                0 => String::new(),
                line => format!(":{line}"),
            };
            warnings.push(format!(
                "{}{at}: entry {} would be a line of {} bytes, over the {max_line_bytes}-byte \
                 limit; its largest text is kept whole in the blob store as {} and shortened in the \
                 session",
                source.display(),
                entry.id,
                spill.line_bytes_before,
                spill.blobs.join(", ")
            ));
            m.message = std::sync::Arc::new(spilled);
            changed = true;
        }
        entries.push(entry);
    }
    if !changed {
        return Ok(tree);
    }
    Ok(SessionTree::from_entries(entries).0)
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "imported".into())
}
