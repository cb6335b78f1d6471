//! What the index reports about itself (`openclaw memory status`).

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::quarantine::Quarantined;
use crate::settings::Source;

/// Where vectors are stored and searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VectorBackend {
    /// sqlite-vec's `vec0` table (searched in memory while the matrix fits the cache).
    SqliteVec,
    /// Blobs in `chunks`, searched in process (sqlite-vec did not load).
    InProcess,
}

impl VectorBackend {
    /// `"sqlite-vec"` or `"in-process"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SqliteVec => "sqlite-vec",
            Self::InProcess => "in-process",
        }
    }
}

/// The provider the host wanted but could not use, and why (shown as `fallback`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderFallback {
    /// The provider that was asked for.
    pub from: String,
    /// Why it is not in use.
    pub reason: String,
}

/// The last sync, in brief.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastSync {
    /// When it ended, Unix milliseconds.
    pub at_ms: i64,
    /// Why it ran.
    pub reason: String,
    /// Whether it succeeded.
    pub ok: bool,
    /// Its error, when it failed, or the embedding error it met.
    pub error: Option<String>,
}

/// The state of one agent's memory index.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryStatus {
    /// Whether memory is on.
    pub enabled: bool,
    /// Files indexed.
    pub files: usize,
    /// Chunks indexed.
    pub chunks: usize,
    /// Chunks with a vector.
    pub chunks_with_vectors: usize,
    /// The embedding provider, if any.
    pub provider: Option<String>,
    /// The embedding model, if any.
    pub model: Option<String>,
    /// One line for people: `provider/model`, or `keyword-only (no embedding provider)`.
    pub provider_summary: String,
    /// The provider the host fell back from, if it did.
    pub fallback: Option<ProviderFallback>,
    /// `hybrid`, `vector`, `fts-only` or `unavailable`.
    pub search_mode: String,
    /// The database file.
    pub db_path: PathBuf,
    /// The agent's workspace.
    pub workspace_dir: PathBuf,
    /// What is indexed.
    pub sources: Vec<Source>,
    /// Whether files changed since the last sync (a sync is due).
    pub dirty: bool,
    /// The last sync of this process, if any.
    pub last_sync: Option<LastSync>,
    /// Whether keyword search is available.
    pub fts_available: bool,
    /// Where vectors live.
    pub vector_backend: VectorBackend,
    /// A damaged database moved aside since the index was opened.
    pub quarantined: Option<Quarantined>,
    /// An error reading the counts, if any (the counts are then 0).
    pub error: Option<String>,
}

impl MemoryStatus {
    /// The status as JSON (camelCase keys), for a status command or an API.
    pub fn to_json(&self) -> Value {
        json!({
            "enabled": self.enabled,
            "files": self.files,
            "chunks": self.chunks,
            "chunksWithVectors": self.chunks_with_vectors,
            "provider": self.provider,
            "model": self.model,
            "providerSummary": self.provider_summary,
            "fallback": self.fallback.as_ref().map(|f| json!({"from": f.from, "reason": f.reason})),
            "searchMode": self.search_mode,
            "dbPath": self.db_path.display().to_string(),
            "workspaceDir": self.workspace_dir.display().to_string(),
            "sources": self.sources.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
            "dirty": self.dirty,
            "lastSync": self.last_sync.as_ref().map(|s| json!({
                "at": s.at_ms, "reason": s.reason, "ok": s.ok, "error": s.error,
            })),
            "ftsAvailable": self.fts_available,
            "vectorBackend": self.vector_backend.as_str(),
            "quarantined": self.quarantined.as_ref().map(|q| json!({
                "from": q.from.display().to_string(),
                "to": q.to.display().to_string(),
                "reason": q.reason,
            })),
            "error": self.error,
        })
    }
}
