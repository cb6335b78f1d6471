//! Opening any transcript as pi sessions: the one place that decides how a file becomes
//! sessions, for `rampart sessions import` (which writes them out) and `rampart replay` (which
//! plays back the active branch).
//!
//! pi files (v1–v3) go through the session loader, migrated in memory, with corrupt-line
//! sidecars switched off: the source is only read, its directory may be read-only and is not
//! ours. Unreadable lines stay in the source and are named in the warnings. Every other format
//! goes through the importers, and each conversation becomes a header and a tree here, keeping
//! its tree links and a note of where each entry came from (`importSource`), so nothing is
//! lost in the move.

use std::path::Path;

use serde_json::{Map, Value, json};

use super::{ImportError, Imported, ImportedKind, SourceFormat, detect_named, import_file_all};
use crate::entry::{
    CURRENT_VERSION, CompactionEntry, CustomEntry, Entry, EntryBody, ModelChangeEntry,
    SessionHeader, ThinkingLevelChangeEntry,
};
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
pub fn open(path: &Path) -> Result<Vec<Opened>, OpenError> {
    let bytes = std::fs::read(path).map_err(|source| OpenError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let format = detect_named(&bytes, &path.display().to_string())?;
    drop(bytes);
    if format.pi_version().is_some() {
        return Ok(vec![open_pi(path)?]);
    }
    Ok(import_file_all(path)?
        .into_iter()
        .map(|imported| {
            let (header, tree) = to_session(&imported, path);
            Opened {
                format: imported.format,
                header,
                tree,
                warnings: imported.warnings,
            }
        })
        .collect())
}

fn open_pi(path: &Path) -> Result<Opened, OpenError> {
    let options = LoadOptions {
        record_corrupt_lines: false,
        ..LoadOptions::default()
    };
    let loaded = load_file(path, &options)?;
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
    let mut warnings: Vec<String> = loaded
        .report
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
    if let Some(m) = &loaded.report.migration {
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
    for bridge in &loaded.report.bridged {
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
                SYSTEM_PROMPT_CUSTOM_TYPE,
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
