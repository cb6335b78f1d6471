//! The memory protocol: what a memory engine answers (`plugins.slots.memory`).
//!
//! A memory engine is an engine like any other (same library, same frozen ABI, same
//! `call(method, json)`) that announces [`Feature::MemoryEngine`](crate::protocol::Feature)
//! in its info (so [`EngineInfo::kind`](crate::EngineInfo::kind) is
//! [`EngineKind::Memory`](crate::protocol::EngineKind::Memory)) and answers the four
//! `memory.*` methods below; its context methods may answer `unsupported`. The host offers its answers to the
//! model as the `memory_search` and `memory_get` tools, whose fields follow OpenClaw's
//! `memory-core`, so an agent prompt written for OpenClaw reads them the same.
//!
//! Every struct reads with serde defaults and ignores unknown fields: a memory engine built
//! against this version keeps working with hosts that send more, and the other way round.

use serde::{Deserialize, Serialize};

/// Parameters of `memory.search`: the `memory_search` tool's arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct MemorySearchParams {
    /// What to look for. A blank query finds nothing.
    pub query: String,
    /// At most this many results (the engine's default when absent; OpenClaw's is 6).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_results: Option<u32>,
    /// Results scoring below this are dropped (the engine's default when absent; 0.35).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_score: Option<f64>,
    /// The session asking, so an engine can tell direct chats from group ones (citations).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_key: Option<String>,
}

/// One passage `memory.search` found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct MemoryHit {
    /// The file, relative to the agent workspace (`MEMORY.md`, `memory/2026-11-25.md`), or
    /// `sessions/<file>` for a transcript.
    pub path: String,
    /// First line of the passage, 1-based.
    pub start_line: u64,
    /// Last line of the passage, 1-based, inclusive.
    pub end_line: u64,
    /// Relevance, higher is better (0 to 1 for the built-in engine).
    pub score: f64,
    /// The passage's text, at most 700 characters.
    pub snippet: String,
    /// Where it came from: `memory` or `sessions`.
    pub source: String,
    /// `path#Lstart-Lend`, when citations are on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub citation: Option<String>,
    /// Which corpus it came from (`memory`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub corpus: Option<String>,
}

/// Why search runs with less than was configured (another embedding provider, or none).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct MemoryFallback {
    /// What was wanted.
    pub from: String,
    /// Why it is not used.
    pub reason: String,
}

/// What `memory.search` answers: hits, or why search is unavailable (never an error for a
/// provider failure, so the model reads the reason and the turn goes on).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct MemorySearchResult {
    /// Best first.
    pub results: Vec<MemoryHit>,
    /// The embedding provider used, when any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Its model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// How the search ran: `hybrid`, `vector` or `keyword`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Why a weaker provider (or none: keyword-only) is used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<MemoryFallback>,
    /// The citations mode in effect (`on`, `off`, `auto`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub citations: Option<String>,
    /// Search is unavailable; `error`, `warning` and `action` say why and what to do.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub disabled: bool,
    /// Set with `disabled` when the cause is the provider, not the configuration.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unavailable: bool,
    /// The failure, when disabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What the model should tell the user.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
    /// What the user can do about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// How the search went (candidates, hits, time), for diagnostics; free-form.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub debug: Option<serde_json::Value>,
}

/// Parameters of `memory.get`: the `memory_get` tool's arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct MemoryGetParams {
    /// A memory file (`MEMORY.md`, `memory.md`, `memory/…`, or one under `extraPaths`).
    pub path: String,
    /// First line, 1-based; the whole file when neither this nor `lines` is given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<u64>,
    /// How many lines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lines: Option<u64>,
}

/// What `memory.get` answers. A missing file is an empty text with `missing`, not an error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct MemoryGetResult {
    /// The path asked for.
    pub path: String,
    /// The lines read.
    pub text: String,
    /// The file does not exist (yet): `text` is empty. A model reads that as empty text;
    /// `rampart memory get` tells the person it is missing.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub missing: bool,
    /// Memory is off (or its engine failed), so nothing can be read: see `error`. A refused
    /// path is not this: it has only `error`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub disabled: bool,
    /// Why nothing could be read: what is wrong with the path, or `memory search disabled`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The details behind `error`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Parameters of `memory.sync`: bring the index up to date with the memory files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct MemorySyncParams {
    /// Why (`cli`, `session-start`, `watch`, `flush`…), for the engine's log.
    pub reason: String,
    /// Re-read every file, not only the changed ones.
    pub force: bool,
}

/// What `memory.sync` did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct MemorySyncResult {
    /// Files read because they were new or changed.
    pub files_indexed: u64,
    /// Files whose passages were removed because the file is gone.
    pub files_removed: u64,
    /// Files that had not changed.
    pub files_unchanged: u64,
    /// Passages written.
    pub chunks_written: u64,
    /// Anything the user should know (a database rebuilt after corruption, a skipped file).
    pub notes: Vec<String>,
}

/// What `memory.status` answers, for `rampart memory status` and diagnostics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct MemoryStatus {
    /// The engine's own name for its storage (`sqlite`, …).
    pub backend: String,
    /// Where the index lives.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// Files indexed.
    pub files: u64,
    /// Passages indexed.
    pub chunks: u64,
    /// How searches run: `hybrid`, or `keyword-only` (and why, in `fallback`).
    pub mode: String,
    /// The embedding provider, when any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Its model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Why search is weaker than configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<MemoryFallback>,
    /// Files changed since the last sync.
    pub dirty: bool,
    /// Anything else worth a line (the vector backend, the last sync).
    pub details: Vec<String>,
}
