//! Reading the transcript a replay plays back, without ever writing next to it.
//!
//! The file is opened as `rampart sessions import` opens it ([`rampart_sessions::import::open`]:
//! pi files through the loader with no sidecar, other formats through the importers), and the
//! chosen session's active branch becomes the list of pi messages to play back.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rampart_engine_api::{AgentMessage, SharedMessage};
use rampart_message::{BranchSummaryMessage, CustomMessage, Extra};
use rampart_sessions::entry::EntryBody;
use rampart_sessions::import::{self, OpenError, Opened, SYSTEM_PROMPT_CUSTOM_TYPE};

/// Why a transcript could not be read for a replay.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The file could not be read, recognised or loaded.
    #[error(transparent)]
    Open(#[from] OpenError),
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
    /// Claude Code subagents the session spawned, in the order the parent ended them (see
    /// `rampart_sessions::import::subagents`): each is replayed at the parent's call that
    /// spawned it.
    pub subagents: Vec<rampart_sessions::import::subagents::Subagent>,
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
    let sessions = import::open(path)?;
    let count = sessions.len();
    let index = index.unwrap_or(1);
    let Some(session) = index
        .checked_sub(1)
        .and_then(|i| sessions.into_iter().nth(i))
    else {
        return Err(SourceError::NoSuchSession {
            path: path.to_path_buf(),
            count,
        });
    };
    let is_claude = session.format == rampart_sessions::import::SourceFormat::ClaudeCode;
    let mut recorded = recorded(path, session, count, index);
    if is_claude {
        match rampart_sessions::import::subagents::find(path) {
            Ok(found) => recorded.subagents = found,
            Err(e) => recorded.warnings.push(format!(
                "{}: its subagents could not be read: {e}; the replay shows the parent alone",
                path.display()
            )),
        }
    }
    if recorded.calls() == 0 {
        return Err(SourceError::NothingToReplay {
            path: path.to_path_buf(),
        });
    }
    Ok(recorded)
}

/// The active branch of `session` as the messages a replay sends.
fn recorded(path: &Path, session: Opened, count: usize, index: usize) -> Recorded {
    let mut warnings = session.warnings;
    let mut messages = Vec::new();
    let mut system_prompt = None;
    let mut recorded_compactions = 0usize;
    for entry in session.tree.active_branch() {
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
    Recorded {
        file: path.to_path_buf(),
        format: session.format.name().to_string(),
        cwd: session.header.cwd.clone(),
        system_prompt,
        messages,
        sessions_in_file: count,
        index,
        warnings,
        subagents: Vec::new(),
    }
}
