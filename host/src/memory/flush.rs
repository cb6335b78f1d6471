//! The pre-compaction memory flush: before a compaction summarises the history away, a
//! silent turn writes its durable facts to `memory/YYYY-MM-DD.md` in the agent workspace,
//! where long-term memory finds them again (`prompt-and-memory.md` §2.10; when it is due is
//! `rampart_context::compaction::flush`).
//!
//! - **With a model**, the turn is OpenClaw's: the context as it stands, a system prompt and a
//!   user prompt that ask for durable facts, and two tools, `read` and `write`, that reach only
//!   the memory files; `write` appends, and only to today's note. It is silent: its messages
//!   are never added to the conversation, and the model is told to answer `NO_REPLY` when
//!   there is nothing to keep.
//! - **With the simulator**, no model can write notes, so the embedded extractive summariser
//!   writes one from the same messages, and says so in the note.
//!
//! Either way the session gets a `rampart.memoryFlush` custom entry (hidden from the model)
//! recording the compaction cycle it ran in, so it runs at most once per cycle, in this process
//! or the next. The workspace file is only ever appended to, and never through a symbolic link
//! or out of the workspace ([`rampart_memory::write`]): a note that is a link is refused with
//! one line in the log and the event, and the turn goes on.

use std::path::{Path, PathBuf};

use rampart_context::compaction::extractive::ExtractiveSummarizer;
use rampart_context::compaction::settings::MemoryFlushSettings;
use rampart_context::compaction::summarizer::SummaryKind;
use rampart_message::{AgentMessage, ContentBlock, SharedMessage};
use rampart_sessions::entry::{Entry, EntryBody};
use rampart_sessions::fold::BranchFold;
use rampart_sessions::tree::SessionTree;
use serde_json::{Value, json};

use crate::providers::ToolSpec;

/// The custom entry type that records a flush in the session.
pub const FLUSH_ENTRY: &str = "rampart.memoryFlush";

/// The model's answer when it has nothing to store (OpenClaw's silent token).
pub const SILENT: &str = "NO_REPLY";

/// Model calls one flush makes at most (each may write once).
pub const MAX_FLUSH_STEPS: usize = 4;

/// Where today's note goes: `memory/YYYY-MM-DD.md`, the date in the local time zone.
pub fn note_path(date: chrono::NaiveDate) -> String {
    format!("memory/{}.md", date.format("%Y-%m-%d"))
}

/// The note path of the day `now_ms` (Unix milliseconds) falls on, by the local time zone:
/// today's for a live turn, the recorded day for a replay (whose clock is the transcript's).
pub fn note_at(now_ms: u64) -> String {
    let utc = i64::try_from(now_ms)
        .ok()
        .and_then(chrono::DateTime::from_timestamp_millis)
        .unwrap_or_default();
    note_path(utc.with_timezone(&chrono::Local).date_naive())
}

/// Where the active branch stands for the flush gate: its compaction cycle (how many
/// compaction entries it holds) and the cycle the last flush on it ran in (`None`: never).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlushState {
    /// Compaction entries on the branch.
    pub compactions: u64,
    /// The `cycle` of the branch's last flush entry.
    pub flushed_in_cycle: Option<u64>,
}

impl FlushState {
    /// Adds one entry of the branch, root side first.
    fn step(&mut self, entry: &Entry) {
        match &entry.body {
            EntryBody::Compaction(_) => self.compactions += 1,
            EntryBody::Custom(c) if c.custom_type == FLUSH_ENTRY => {
                self.flushed_in_cycle = c
                    .data
                    .as_ref()
                    .and_then(|d| d.get("cycle"))
                    .and_then(Value::as_u64);
            }
            _ => {}
        }
    }
}

/// The [`FlushState`] of the active branch of `tree`, brought up to date in `fold`, which the
/// caller keeps between turns: a branch that only grew costs its new entries, not a walk from
/// the root (which, done on every call of a long session, made it quadratic).
pub fn flush_state(tree: &SessionTree, fold: &mut BranchFold<FlushState>) -> FlushState {
    *fold.update(tree, FlushState::step)
}

/// The system prompt of the flush turn.
pub fn system_prompt(settings: &MemoryFlushSettings, note: &str) -> String {
    let base = settings.system_prompt.clone().unwrap_or_else(|| {
        "The conversation is about to be compacted: older messages will be replaced by a \
         summary. Save what must outlive it to long-term memory now. Usually there is little \
         or nothing new; then answer NO_REPLY."
            .to_owned()
    });
    with_hints(base, note)
}

/// The user prompt of the flush turn.
pub fn user_prompt(settings: &MemoryFlushSettings, note: &str) -> String {
    let base = settings.prompt.clone().unwrap_or_else(|| {
        format!(
            "Pre-compaction memory flush.\n\
             Append the durable facts of this conversation that a later session will need \
             (decisions and their reasons, names, identifiers, paths, dates, preferences, open \
             tasks) to {note}, as short bullet points. Use the write tool on {note} only; it \
             appends. MEMORY.md, DREAMS.md, SOUL.md, TOOLS.md and AGENTS.md are read-only. Do \
             not create timestamped variants of the file. If there is nothing to store, reply \
             with NO_REPLY."
        )
    });
    with_hints(base, note)
}

/// A custom prompt gets the rules it leaves out (OpenClaw appends the missing hints).
fn with_hints(text: String, note: &str) -> String {
    let mut text = text.replace(
        "YYYY-MM-DD",
        note.trim_start_matches("memory/").trim_end_matches(".md"),
    );
    if !text.contains(note) {
        text.push_str(&format!("\nWrite only to {note}, and only by appending."));
    }
    if !text.contains(SILENT) {
        text.push_str("\nIf no user-visible reply is needed, start with NO_REPLY.");
    }
    text
}

/// The two tools of the flush turn.
pub fn tool_specs(note: &str) -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "write".to_owned(),
            description: Some(format!(
                "Append text to {note} (created if missing). No other file can be written."
            )),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": format!("Must be {note}.")},
                    "content": {"type": "string", "description": "The text to append."}
                },
                "required": ["path", "content"]
            }),
        },
        ToolSpec {
            name: "read".to_owned(),
            description: Some("Read a memory file (MEMORY.md or a file under memory/).".to_owned()),
            parameters: json!({
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"]
            }),
        },
    ]
}

/// Appends `text` to `note` under `workspace` (directories created), after a newline when the
/// file does not end with one. Returns the bytes written. Never through a symbolic link, nor
/// out of the workspace by any path (see [`rampart_memory::write`]): such a note is refused
/// with an error that says so.
pub fn append_note(
    workspace: &Path,
    note: &str,
    text: &str,
) -> Result<u64, rampart_memory::MemoryError> {
    rampart_memory::write::append_memory_file(workspace, note, text)
}

/// What answering one tool call of the flush turn gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolAnswer {
    /// What the model is told.
    pub text: String,
    /// Bytes appended to the note.
    pub bytes: u64,
    /// A write that failed or was refused, in one line for the log and the flush event.
    pub error: Option<String>,
}

/// Answers one tool call of the flush turn: `write` appends to today's note only, `read` reads
/// a memory file.
pub fn answer_tool(workspace: &Path, note: &str, name: &str, args: &Value) -> ToolAnswer {
    let told = |text: String| ToolAnswer {
        text,
        bytes: 0,
        error: None,
    };
    let path = args
        .get("path")
        .and_then(Value::as_str)
        .unwrap_or("")
        .trim();
    match name {
        "write" if path == note => {
            let content = args.get("content").and_then(Value::as_str).unwrap_or("");
            match append_note(workspace, note, content) {
                Ok(bytes) => ToolAnswer {
                    text: format!("Appended content to {note}."),
                    bytes,
                    error: None,
                },
                Err(e) => ToolAnswer {
                    text: format!("Could not append to {note}: {e}"),
                    bytes: 0,
                    error: Some(format!("could not append to {note}: {e}")),
                },
            }
        }
        "write" => told(format!(
            "Memory flush writes are restricted to {note}; use that path only."
        )),
        // The memory files' own rules (`memory_get`'s): which paths, confined to the workspace.
        "read" => match rampart_memory::read::read_memory_file(workspace, &[], path, None, None) {
            Ok(read) => told(read.text),
            Err(e) => told(e.to_string()),
        },
        other => told(format!(
            "The tool {other} is not available in a memory flush."
        )),
    }
}

/// The note the embedded summariser writes from `messages` when no model can.
pub fn extractive_note(messages: &[SharedMessage], cycle: u64) -> String {
    let summary = ExtractiveSummarizer::default().summarize_messages(
        SummaryKind::Chunk { index: 0, of: 1 },
        messages,
        None,
        6_000,
    );
    format!(
        "\n## Saved before compaction {n} (extractive: Rampart's embedded summariser, no model)\n\n{summary}",
        n = cycle + 1
    )
}

/// The tool calls of an answer.
pub fn tool_calls(message: &AgentMessage) -> Vec<rampart_message::ToolCall> {
    match message {
        AgentMessage::Assistant(a) => a
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::ToolCall(c) => Some(c.clone()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Where a flush writes: the workspace, and the note in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlushTarget {
    /// The agent workspace.
    pub workspace: PathBuf,
    /// `memory/YYYY-MM-DD.md`.
    pub note: String,
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "flush_tests.rs"]
mod tests;
