//! The shapes stored in `sessions.json`.
//!
//! Field names follow OpenClaw's `SessionEntry` (camelCase) so a registry written by either
//! program reads in the other. Every struct keeps the fields it does not know in an `extra`
//! map: OpenClaw stores dozens of routing and UI fields, and later versions add more, and a
//! registry update must never drop them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The whole registry: normalised (lower-cased) session key → entry.
///
/// A `BTreeMap` so the serialised text is deterministic: the "skip unchanged writes" rule
/// compares text, and a hash map's order would make identical stores look different.
pub type SessionMap = BTreeMap<String, SessionEntry>;

/// One session's registry record.
///
/// Token fields keep OpenClaw's meanings, because an OpenClaw user reading this file (or
/// OpenClaw reading ours) must not see numbers change meaning:
/// - `inputTokens`/`outputTokens`/`cacheRead`/`cacheWrite` describe the **last** run, not a
///   running sum (summing cache reads is the classic "context looks like 200k" mistake);
/// - `totalTokens` is how much of the window the conversation occupies now;
/// - `contextTokens` is the size of the window itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionEntry {
    /// The session's id; names the JSONL transcript when `sessionFile` is absent. Required
    /// because without it the entry points at nothing.
    pub session_id: String,
    /// Last activity, Unix milliseconds. Required: listing orders by it and the mixed-case key
    /// merge keeps the newest entry.
    pub updated_at: u64,
    /// Transcript path, relative to the sessions directory or absolute. Optional because
    /// OpenClaw derives `<sessionId>.jsonl` when it is missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_file: Option<String>,
    /// Input tokens the provider reported for the last run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Output tokens the provider reported for the last run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Tokens the conversation occupies in the window now (the last prompt's size, or the
    /// post-compaction size). What `/status`-style displays divide by `contextTokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
    /// Whether `totalTokens` was measured after the last change to the history. `false`
    /// marks a number that is known to be stale (a compaction without a measured size), so
    /// displays can say "unknown" instead of showing a wrong percentage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens_fresh: Option<bool>,
    /// The model's context window in tokens, as resolved for the last run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_tokens: Option<u64>,
    /// Prompt-cache reads of the last run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read: Option<u64>,
    /// Prompt-cache writes of the last run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<u64>,
    /// How many compactions this session has had. Missing in old files, hence the default.
    #[serde(default)]
    pub compaction_count: u64,
    /// One record per compaction, oldest first, so a user can see (and undo) what each
    /// compaction replaced. Omitted from the file while empty to keep entries small.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compaction_checkpoints: Vec<CompactionCheckpoint>,
    /// Every other field (routing, UI, model overrides, …), kept verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl SessionEntry {
    /// A fresh entry with only the required fields, for registering a new session.
    pub fn new(session_id: impl Into<String>, updated_at: u64) -> Self {
        Self {
            session_id: session_id.into(),
            updated_at,
            session_file: None,
            input_tokens: None,
            output_tokens: None,
            total_tokens: None,
            total_tokens_fresh: None,
            context_tokens: None,
            cache_read: None,
            cache_write: None,
            compaction_count: 0,
            compaction_checkpoints: Vec::new(),
            extra: Map::new(),
        }
    }
}

/// What one compaction did, recorded so the pre-compaction state can be found again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionCheckpoint {
    /// Unique id of this checkpoint.
    pub checkpoint_id: String,
    /// The session key the compaction ran for (a checkpoint may be read out of context).
    pub session_key: String,
    /// The session id at the time of the compaction.
    pub session_id: String,
    /// When the compaction finished, Unix milliseconds.
    pub created_at: u64,
    /// Why it ran (`"overflow"`, `"manual"`, `"threshold"`, …). A string, not an enum, so a
    /// reason written by a newer version still loads.
    pub reason: String,
    /// Estimated context size before the compaction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_before: Option<u64>,
    /// Context size after the compaction, when it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_after: Option<u64>,
    /// The summary text, when the caller chose to keep a copy here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The first transcript entry kept verbatim after the summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_kept_entry_id: Option<String>,
    /// Where the transcript stood before the compaction.
    pub pre_compaction: CompactionSnapshot,
    /// Where the transcript stood after the compaction.
    pub post_compaction: CompactionSnapshot,
    /// Fields this version does not know, kept verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A position in a session's transcript: enough to reopen the history as it was.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionSnapshot {
    /// Session id at that point.
    pub session_id: String,
    /// Transcript file at that point (a compaction may switch files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_file: Option<String>,
    /// The leaf entry id of the active branch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leaf_id: Option<String>,
    /// The entry id the snapshot refers to (for the post side: the compaction entry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry_id: Option<String>,
    /// Fields this version does not know, kept verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Token usage of one finished run, as the provider reported it.
///
/// A struct rather than positional arguments because the fields are all `u64` and easy to
/// swap by accident, and because the cache counters matter: the context size must be
/// computed by the caller (it knows the provider's accounting), not summed here.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UsageSample {
    /// Input (prompt) tokens of the run.
    pub input: u64,
    /// Output tokens of the run.
    pub output: u64,
    /// Prompt-cache read tokens of the run.
    pub cache_read: u64,
    /// Prompt-cache write tokens of the run.
    pub cache_write: u64,
    /// How many tokens the conversation now occupies in the window (the last call's prompt
    /// size). Stored as `totalTokens` and marked fresh.
    pub context_used: u64,
    /// The model's window, when known; stored as `contextTokens`. `None` keeps the old value.
    pub context_window: Option<u64>,
}

/// One change to a session's registry entry, as the run loop produces them.
///
/// A writer that batches its changes (a turn, a replay) keeps them in the order they happened
/// and applies them in one atomic rewrite of `sessions.json` with
/// [`SessionStore::record`](super::SessionStore::record): the order matters, because a
/// compaction clears the usage counters that an answer after it sets again.
#[derive(Debug, Clone, PartialEq)]
pub enum RegistryChange {
    /// An answer's usage (see [`SessionStore::record_usage`](super::SessionStore::record_usage)).
    Usage(UsageSample),
    /// A finished compaction (see
    /// [`SessionStore::record_compaction`](super::SessionStore::record_compaction)).
    Compaction(Box<CompactionCheckpoint>),
}
