//! `rampart sessions import`: any transcript the importers read becomes a pi v3 session file in
//! the sessions directory, registered in `sessions.json`.
//!
//! The source file is only read. pi files go through the session loader (which migrates v1/v2
//! in memory) and are written out as v3; other tools' transcripts go through
//! `rampart_sessions::import` and are turned into entries here, keeping their tree links and a
//! note of where each entry came from (`importSource`), so nothing is lost in the move.

use std::path::{Path, PathBuf};

use rampart_sessions::entry::{
    CompactionEntry, CustomEntry, Entry, EntryBody, ModelChangeEntry, SessionHeader,
    ThinkingLevelChangeEntry,
};
use rampart_sessions::import::{self, ImportError, Imported, ImportedKind, SourceFormat};
use rampart_sessions::store::{SessionEntry, SessionStore, StoreError, normalize_key, now_unix_ms};
use rampart_sessions::{LoadOptions, SessionError, SessionTree, load_file, save_session};
use serde_json::{Map, Value, json};

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
    /// The source could not be read or recognised.
    #[error(transparent)]
    Source(#[from] ImportError),
    /// The source is a pi file the loader could not read.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The registry could not be read or written.
    #[error(transparent)]
    Store(#[from] StoreError),
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
    /// The source could not be read at all.
    #[error("cannot read `{}`: {source}", path.display())]
    Read {
        /// The source file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// Imports `source` into `store`'s directory. `key` names the session in the registry (default:
/// the source's file stem). A source holding several sessions gets keys `key-1`, `key-2`, ….
pub fn import_into(
    store: &SessionStore,
    source: &Path,
    key: Option<&str>,
) -> Result<Vec<ImportOutcome>, ImportFailure> {
    let bytes = std::fs::read(source).map_err(|e| ImportFailure::Read {
        path: source.to_path_buf(),
        source: e,
    })?;
    let format = import::detect(&bytes).map_err(|e| match e {
        ImportError::UnknownFormat { reason, .. } => ImportError::UnknownFormat {
            file: source.display().to_string(),
            reason,
        },
        other => other,
    })?;
    let base_key = normalize_key(
        key.map(str::to_string)
            .unwrap_or_else(|| stem(source))
            .trim(),
    );
    let prepared: Vec<(SessionHeader, SessionTree, Vec<String>)> =
        if format.pi_version().is_some() {
            // The source is only read: no corrupt-line sidecar next to it (its directory may be
            // read-only, and it is not ours). Unreadable lines stay in the source and are named
            // in the warnings, so nothing is lost.
            let options = LoadOptions {
                record_corrupt_lines: false,
                ..LoadOptions::default()
            };
            let loaded = load_file(source, &options)?;
            let mut warnings: Vec<String> = loaded
                .report
                .corrupt_lines
                .iter()
                .map(|c| {
                    format!(
                        "line {} could not be read and was left out: {}",
                        c.line, c.reason
                    )
                })
                .collect();
            if let Some(m) = &loaded.report.migration {
                warnings.push(format!(
                "migrated from v{} to v3: {} entries given ids, {} compaction indices converted, \
                 {} hook messages renamed{}",
                m.from_version,
                m.entries_given_ids,
                m.first_kept_converted,
                m.hook_messages_renamed,
                if m.notes.is_empty() { String::new() } else { format!("; {}", m.notes.join("; ")) }
            ));
            }
            let mut header = loaded.header;
            header.version = Some(rampart_sessions::entry::CURRENT_VERSION);
            vec![(header, loaded.tree, warnings)]
        } else {
            import::import_file_all(source)?
                .into_iter()
                .map(|imported| {
                    let (header, tree) = to_session(&imported, source);
                    (header, tree, imported.warnings)
                })
                .collect()
        };
    let many = prepared.len() > 1;
    let mut outcomes = Vec::new();
    for (i, (mut header, tree, warnings)) in prepared.into_iter().enumerate() {
        let key = if many {
            format!("{base_key}-{}", i + 1)
        } else {
            base_key.clone()
        };
        if let Some(existing) = store.get(&key)? {
            return Err(ImportFailure::KeyTaken {
                key,
                existing: store.session_file_path(&existing).display().to_string(),
            });
        }
        // A session id already used in this directory (the same file imported under another
        // key) gets a fresh id, so the two never share a file.
        let mut file = store.dir().join(format!("{}.jsonl", header.id));
        if file.exists() {
            header.id = rampart_sessions::ids::new_uuid();
            file = store.dir().join(format!("{}.jsonl", header.id));
        }
        save_session(&file, &header, &tree)?;
        let mut entry = SessionEntry::new(header.id.clone(), now_unix_ms());
        entry.session_file = file.file_name().map(|n| n.to_string_lossy().into_owned());
        store.upsert(&key, entry)?;
        outcomes.push(ImportOutcome {
            key,
            session_id: header.id.clone(),
            file,
            format,
            entries: tree.len(),
            warnings,
        });
    }
    Ok(outcomes)
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "imported".into())
}

/// Turns one imported conversation into a header and a tree.
fn to_session(imported: &Imported, source: &Path) -> (SessionHeader, SessionTree) {
    let mut header = SessionHeader::new(imported.cwd.clone().unwrap_or_else(|| ".".to_string()));
    if let Some(started) = &imported.started_at {
        header.timestamp = started.clone();
    }
    header.extra.insert(
        "importedFrom".into(),
        json!({
            "format": imported.format.name(),
            "file": source.display().to_string(),
            "sourceSessionId": imported.source_session_id,
        }),
    );
    let mut tree = SessionTree::new();
    let mut ids: Vec<String> = Vec::with_capacity(imported.items.len());
    for item in &imported.items {
        let id = tree.new_entry_id();
        let parent_id = match item.parent {
            Some(p) => ids.get(p).cloned(),
            None => None,
        };
        let mut body = match &item.kind {
            ImportedKind::Message(m) => EntryBody::from_message(m.clone()),
            ImportedKind::ModelChange { provider, model_id } => {
                EntryBody::ModelChange(ModelChangeEntry {
                    provider: provider.clone(),
                    model_id: model_id.clone(),
                    extra: Map::new(),
                })
            }
            ImportedKind::ThinkingLevel(level) => {
                EntryBody::ThinkingLevelChange(ThinkingLevelChangeEntry {
                    thinking_level: level.clone(),
                    extra: Map::new(),
                })
            }
            ImportedKind::SystemPrompt { text, tools } => custom(
                "import.system-prompt",
                json!({ "text": text, "tools": tools }),
            ),
            ImportedKind::Summary { text, leaf_id } => {
                custom("import.summary", json!({ "text": text, "leafId": leaf_id }))
            }
            // The model saw only the summary from here on: a compaction whose kept part starts
            // after it (its own id is never among the entries before it).
            ImportedKind::Compaction { summary } => EntryBody::Compaction(CompactionEntry {
                summary: summary.clone(),
                first_kept_entry_id: id.clone(),
                tokens_before: 0,
                details: None,
                from_hook: None,
                extra: Map::new(),
            }),
            ImportedKind::Custom { custom_type, data } => custom(custom_type, data.clone()),
        };
        let mut source_note = item.extra.clone();
        if let Some(v) = &item.source_id {
            source_note.insert("id".into(), Value::String(v.clone()));
        }
        if let Some(v) = &item.source_parent_id {
            source_note.insert("parentId".into(), Value::String(v.clone()));
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
            .clone()
            .unwrap_or_else(|| header.timestamp.clone());
        tree.attach(Entry {
            id: id.clone(),
            parent_id,
            timestamp,
            body,
        });
        ids.push(id);
    }
    (header, tree)
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
