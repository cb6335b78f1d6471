//! Reading the transcript a replay plays back, without ever writing next to it.
//!
//! pi files (v1–v3) go through the session loader with corrupt-line sidecars switched off (the
//! input may sit on read-only media, and a replay must leave its directory as it found it);
//! every other format goes through `rampart_sessions::import`. Either way the result is the
//! active branch as a list of pi messages.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rampart_engine_api::{AgentMessage, SharedMessage};
use rampart_message::{BranchSummaryMessage, CustomMessage, Extra};
use rampart_sessions::entry::EntryBody;
use rampart_sessions::import::{self, ImportError, ImportedKind, SourceFormat};
use rampart_sessions::{LoadOptions, SessionError, load_file};

/// The custom entry type `rampart sessions import` stores a recorded system prompt under.
pub const SYSTEM_PROMPT_CUSTOM_TYPE: &str = "import.system-prompt";

/// Why a transcript could not be read for a replay.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The file could not be opened or read.
    #[error("cannot read the replay input `{}`: {source}; check the path", path.display())]
    Read {
        /// The input.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A pi session the loader refused.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// Another format the importers refused (unknown format, unreadable content).
    #[error(transparent)]
    Import(#[from] ImportError),
    /// `--session-index` is out of range.
    #[error(
        "`{}` holds {count} session(s); --session-index must be from 1 to {count}",
        path.display()
    )]
    NoSuchSession {
        /// The input.
        path: PathBuf,
        /// Sessions in the file.
        count: usize,
    },
    /// Nothing on the branch to replay.
    #[error(
        "`{}` has no assistant messages on its active branch, so there is no model call to \
         replay",
        path.display()
    )]
    NothingToReplay {
        /// The input.
        path: PathBuf,
    },
}

/// A recorded conversation, ready to be replayed.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The input file.
    pub file: PathBuf,
    /// The detected format (`pi-v3`, `claude-code`, …).
    pub format: String,
    /// The working directory the session ran in, for the replay session's header.
    pub cwd: String,
    /// The recorded system prompt, when the format keeps one.
    pub system_prompt: Option<String>,
    /// The active branch's messages, oldest first.
    pub messages: Vec<SharedMessage>,
    /// Sessions the file holds (OpenHands evaluation output can hold several).
    pub sessions_in_file: usize,
    /// Which of them this is, from 1.
    pub index: usize,
    /// What the loader or importer could not carry over exactly.
    pub warnings: Vec<String>,
}

impl Recorded {
    /// Model calls the replay will make: one per recorded assistant message.
    pub fn calls(&self) -> usize {
        self.messages
            .iter()
            .filter(|m| matches!(***m, AgentMessage::Assistant(_)))
            .count()
    }

    /// Recorded user turns.
    pub fn user_turns(&self) -> usize {
        self.messages
            .iter()
            .filter(|m| matches!(***m, AgentMessage::User(_)))
            .count()
    }
}

/// Reads `path` (session `index` of it, from 1, when it holds several).
pub fn load(path: &Path, index: Option<usize>) -> Result<Recorded, SourceError> {
    let recorded = if is_pi_session(path)? {
        if index.is_some_and(|i| i != 1) {
            return Err(SourceError::NoSuchSession {
                path: path.to_path_buf(),
                count: 1,
            });
        }
        load_pi(path)?
    } else {
        load_imported(path, index.unwrap_or(1))?
    };
    if recorded.calls() == 0 {
        return Err(SourceError::NothingToReplay {
            path: path.to_path_buf(),
        });
    }
    Ok(recorded)
}

/// Whether the first line is a pi session header (`{"type":"session",…}`). Reads one line
/// only, so the file is parsed once, by whichever reader it belongs to.
fn is_pi_session(path: &Path) -> Result<bool, SourceError> {
    let read_err = |source| SourceError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_err)?;
    let mut first = Vec::new();
    // A header is small; a first line beyond 1 MiB is not one.
    let mut reader = BufReader::new(file).take(1 << 20);
    reader.read_until(b'\n', &mut first).map_err(read_err)?;
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(&first) else {
        return Ok(false);
    };
    Ok(value.get("type").and_then(|t| t.as_str()) == Some("session"))
}

fn load_pi(path: &Path) -> Result<Recorded, SourceError> {
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
                "line {} could not be read and is not replayed: {}",
                c.line, c.reason
            )
        })
        .collect();
    let mut messages = Vec::new();
    let mut system_prompt = None;
    let mut recorded_compactions = 0usize;
    for entry in loaded.tree.active_branch() {
        let millis = rampart_sessions::ids::iso_to_millis(&entry.timestamp).unwrap_or(0);
        match &entry.body {
            EntryBody::Message(m) => messages.push(Arc::clone(&m.message)),
            EntryBody::CustomMessage(c) => {
                messages.push(Arc::new(AgentMessage::Custom(CustomMessage {
                    custom_type: c.custom_type.clone(),
                    content: c.content.clone(),
                    display: c.display,
                    details: c.details.clone(),
                    timestamp: millis,
                    extra: Extra::new(),
                })))
            }
            EntryBody::BranchSummary(s) if !s.summary.is_empty() => messages.push(Arc::new(
                AgentMessage::BranchSummary(BranchSummaryMessage {
                    summary: s.summary.clone(),
                    from_id: s.from_id.clone(),
                    timestamp: millis,
                    extra: Extra::new(),
                }),
            )),
            EntryBody::Custom(c)
                if c.custom_type == SYSTEM_PROMPT_CUSTOM_TYPE && system_prompt.is_none() =>
            {
                system_prompt = c
                    .data
                    .as_ref()
                    .and_then(|d| d.get("text"))
                    .and_then(|t| t.as_str())
                    .map(str::to_string);
            }
            EntryBody::Compaction(_) => recorded_compactions += 1,
            _ => {}
        }
    }
    if recorded_compactions > 0 {
        warnings.push(format!(
            "the recording compacted {recorded_compactions} time(s); the replay sends the full \
             recorded history and lets the engine under test decide when to compact"
        ));
    }
    Ok(Recorded {
        file: path.to_path_buf(),
        format: format.name().to_string(),
        cwd: loaded.header.cwd.clone(),
        system_prompt,
        messages,
        sessions_in_file: 1,
        index: 1,
        warnings,
    })
}

fn load_imported(path: &Path, index: usize) -> Result<Recorded, SourceError> {
    let all = match import::import_file_all(path) {
        Ok(all) => all,
        // The first-line check missed a pi file (a header after blank lines): load it as one.
        Err(ImportError::NativePiSession { .. }) => return load_pi(path),
        Err(e) => return Err(e.into()),
    };
    let count = all.len();
    let Some(imported) = index.checked_sub(1).and_then(|i| all.into_iter().nth(i)) else {
        return Err(SourceError::NoSuchSession {
            path: path.to_path_buf(),
            count,
        });
    };
    // The active branch: from the last item back to its root, as a session built from these
    // items has its leaf on the last entry.
    let mut path_items = Vec::new();
    let mut at = imported.items.len().checked_sub(1);
    while let Some(i) = at {
        path_items.push(i);
        at = imported.items[i].parent.filter(|&p| p < i);
    }
    path_items.reverse();
    let mut messages = Vec::new();
    let mut system_prompt = None;
    let mut items: Vec<Option<ImportedKind>> = imported
        .items
        .into_iter()
        .map(|item| Some(item.kind))
        .collect();
    for i in path_items {
        match items[i].take() {
            Some(ImportedKind::Message(m)) => messages.push(Arc::new(m)),
            Some(ImportedKind::SystemPrompt { text, .. }) if system_prompt.is_none() => {
                system_prompt = Some(text);
            }
            _ => {}
        }
    }
    Ok(Recorded {
        file: path.to_path_buf(),
        format: imported.format.name().to_string(),
        cwd: imported.cwd.unwrap_or_else(|| ".".to_string()),
        system_prompt,
        messages,
        sessions_in_file: count,
        index,
        warnings: imported.warnings,
    })
}
