//! `memory-core`, the built-in memory engine: `rampart-memory`'s index behind the engine
//! protocol, so the slot calls it exactly as it calls a third party's memory library
//! ([`EngineHandle::linked`](crate::engine::handle::EngineHandle::linked), one generic path).
//!
//! Opening it picks the embedding provider (`memorySearch.provider`, see
//! [`EmbeddingChoice`]), opens the index (a damaged database is moved aside and rebuilt from
//! the markdown, which is never written here), and, in processes that live on, starts the
//! file watcher.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rampart_engine_api::memory::{
    MemoryFallback, MemoryGetParams, MemoryGetResult, MemorySearchParams, MemorySearchResult,
    MemoryStatus, MemorySyncParams, MemorySyncResult,
};
use rampart_engine_api::protocol::{
    AssembleParams, AssembleResult, CompactParams, CompactResult, EngineInfo, Feature,
    IngestParams, IngestResult, ProtocolInfo, method,
};
use rampart_engine_api::{CallContext, ContextEngine, EngineError};
use rampart_memory::tools::ToolContext;
use rampart_memory::watch::MemoryWatcher;
use rampart_memory::{
    Embedder, IndexOptions, LocalEmbedder, MemoryIndex, OpenAiConfig, OpenAiEmbedder,
    ProviderFallback, SyncReason,
};
use serde_json::{Value, json};

use crate::config::memory::{EmbeddingChoice, MemorySearchConfig};

/// The id of the built-in memory engine.
pub const MEMORY_CORE_ID: &str = crate::config::BUILTIN_MEMORY_ID;

/// How a status says that the index does not exist yet.
pub const NOT_INDEXED: &str = "not indexed yet";

/// The agent whose memory this is (one agent today; OpenClaw keeps `memory/<agentId>.sqlite`).
pub const AGENT_ID: &str = "main";

/// Where `memory-core` keeps its index and reads its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryPlaces {
    /// The agent workspace (`MEMORY.md`, `memory/`).
    pub workspace: PathBuf,
    /// The index file.
    pub db_path: PathBuf,
    /// The transcripts, for the opt-in `sessions` source.
    pub sessions_dir: PathBuf,
}

impl MemoryPlaces {
    /// The places for `config`, with sessions in `sessions_dir`: the workspace of
    /// `agents.defaults.workspace`, the index at `memorySearch.store.path` or
    /// `<data dir>/memory/main.sqlite` beside the sessions directory.
    pub fn of(config: &crate::config::Config, sessions_dir: &Path) -> Self {
        let defaults = &config.agent_defaults;
        // Absolute, so the status names real places whatever the working directory.
        let sessions_dir =
            &std::path::absolute(sessions_dir).unwrap_or_else(|_| sessions_dir.to_path_buf());
        let workspace = defaults.workspace_dir(config.source_file.as_deref(), sessions_dir);
        let data_dir = sessions_dir
            .parent()
            .map_or_else(|| sessions_dir.to_path_buf(), Path::to_path_buf);
        let db_path = defaults
            .memory_search
            .store_path
            .clone()
            .map(|p| p.to_string_lossy().replace("{agentId}", AGENT_ID).into())
            .unwrap_or_else(|| data_dir.join("memory").join(format!("{AGENT_ID}.sqlite")));
        Self {
            workspace,
            db_path,
            sessions_dir: sessions_dir.to_path_buf(),
        }
    }
}

/// The built-in memory engine.
pub struct MemoryCore {
    index: MemoryIndex,
    watcher: Mutex<Option<MemoryWatcher>>,
}

impl std::fmt::Debug for MemoryCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryCore")
            .field("index", &self.index)
            .finish()
    }
}

/// The embedder in use (none: keyword-only), and why it is not the one asked for.
type ChosenEmbedder = (Option<Arc<dyn Embedder>>, Option<ProviderFallback>);

/// The embedder `choice` asks for, and why another (or none) is used.
fn embedder(config: &MemorySearchConfig, workspace: &Path) -> Result<ChosenEmbedder, String> {
    let local = || -> Result<Arc<dyn Embedder>, String> {
        let path = config
            .local_model_path
            .as_ref()
            .ok_or("`memorySearch.local.modelPath` is not set")?;
        let dir = expand(path, workspace);
        LocalEmbedder::load(&dir)
            .map(|e| Arc::new(e) as Arc<dyn Embedder>)
            .map_err(|e| e.to_string())
    };
    let key_env = config
        .remote_api_key_env
        .clone()
        .unwrap_or_else(|| "OPENAI_API_KEY".to_owned());
    let remote = |require_key: bool| -> Result<Arc<dyn Embedder>, String> {
        let api_key = std::env::var(&key_env)
            .ok()
            .filter(|k| !k.trim().is_empty());
        if require_key && api_key.is_none() && config.remote_base_url.is_none() {
            return Err(format!("no key in ${key_env}"));
        }
        let mut openai = OpenAiConfig {
            api_key,
            ..OpenAiConfig::default()
        };
        if let Some(url) = &config.remote_base_url {
            openai.base_url = url.trim_end_matches('/').to_owned();
        }
        if let Some(model) = &config.model {
            openai.model = model.clone();
        }
        OpenAiEmbedder::new(openai)
            .map(|e| Arc::new(e) as Arc<dyn Embedder>)
            .map_err(|e| e.to_string())
    };
    match config.provider {
        EmbeddingChoice::None => Ok((None, None)),
        EmbeddingChoice::Local => local().map(|e| (Some(e), None)),
        EmbeddingChoice::OpenAi => remote(false).map(|e| (Some(e), None)),
        // OpenClaw's "auto": local when its model is there, else the remote one when it has
        // a key, else keyword-only (pain point 17725: never "disabled" for want of a key).
        EmbeddingChoice::Auto => {
            let local_present = config
                .local_model_path
                .as_ref()
                .is_some_and(|p| expand(p, workspace).is_dir());
            if local_present {
                return local().map(|e| (Some(e), None));
            }
            match remote(true) {
                Ok(e) => Ok((Some(e), None)),
                Err(why) => Ok((
                    None,
                    Some(ProviderFallback {
                        from: "auto".to_owned(),
                        reason: format!(
                            "no embedding provider available ({why}; no local model): \
                             searching by keyword only"
                        ),
                    }),
                )),
            }
        }
    }
}

/// `~/x` against the home directory, a relative path against the workspace.
fn expand(path: &Path, workspace: &Path) -> PathBuf {
    if let Ok(rest) = path.strip_prefix("~")
        && let Some(home) = directories::BaseDirs::new()
    {
        return home.home_dir().join(rest);
    }
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        workspace.join(path)
    }
}

impl MemoryCore {
    /// Opens the index for `config` at `places`. Fails when the configured embedding provider
    /// cannot be set up or the index cannot be opened (the slot then reports it once and runs
    /// without memory).
    pub fn open(config: &MemorySearchConfig, places: &MemoryPlaces) -> Result<Self, String> {
        let (embedder, fallback) = embedder(config, &places.workspace)?;
        let options = IndexOptions {
            db_path: places.db_path.clone(),
            workspace_dir: places.workspace.clone(),
            sessions_dir: Some(places.sessions_dir.clone()),
            settings: config.settings.clone(),
            embedder,
            fallback,
            disable_sqlite_vec: false,
        };
        let (index, report) = MemoryIndex::open(options).map_err(|e| e.to_string())?;
        if let Some(q) = &report.quarantined {
            tracing::warn!(db = %report.db_path.display(), moved_to = %q.to.display(), reason = %q.reason, "the memory index was damaged; it was moved aside and is rebuilt from the markdown");
        }
        Ok(Self {
            index,
            watcher: Mutex::new(None),
        })
    }

    /// What `memory status` reports before the index exists, without creating it (a status is
    /// read-only): how searches would run with this configuration, and "not indexed yet".
    pub fn status_before_indexing(
        config: &MemorySearchConfig,
        places: &MemoryPlaces,
    ) -> Result<MemoryStatus, String> {
        let (embedder, fallback) = embedder(config, &places.workspace)?;
        // FTS5 is compiled into the bundled SQLite, so keyword search is always there.
        let mode = match &embedder {
            None => "keyword-only",
            Some(_) if config.settings.hybrid_enabled => "hybrid",
            Some(_) => "vector",
        };
        Ok(MemoryStatus {
            backend: "sqlite".to_owned(),
            location: Some(places.db_path.display().to_string()),
            files: 0,
            chunks: 0,
            mode: mode.to_owned(),
            provider: embedder.as_ref().map(|e| e.provider().to_owned()),
            model: embedder.as_ref().map(|e| e.model().to_owned()),
            fallback: fallback.map(|f| MemoryFallback {
                from: f.from,
                reason: f.reason,
            }),
            dirty: false,
            details: vec![
                format!(
                    "{NOT_INDEXED}: `rampart memory index` builds the index (a search does too)"
                ),
                format!("workspace: {}", places.workspace.display()),
            ],
        })
    }

    /// Starts re-indexing on file changes (for processes that live on). A watcher that cannot
    /// start is logged; searches still sync a dirty index.
    pub fn watch(&self) {
        if !self.index.workspace_dir().is_dir() {
            // Nothing to watch yet (a new agent); a search still re-reads the files once they
            // exist, and the next start watches them.
            tracing::debug!(workspace = %self.index.workspace_dir().display(), "no workspace yet; memory files are not watched");
            return;
        }
        match MemoryWatcher::start(&self.index, None) {
            Ok(w) => {
                if let Ok(mut slot) = self.watcher.lock() {
                    *slot = Some(w);
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "memory file watcher could not start; files are re-read when a search finds them changed")
            }
        }
    }

    /// The index.
    pub fn index(&self) -> &MemoryIndex {
        &self.index
    }
}

fn unsupported(name: &str) -> EngineError {
    EngineError::unsupported(name)
}

/// A typed answer from the JSON the index's tool layer gives (OpenClaw's field names, which
/// the protocol types share).
fn typed<T: serde::de::DeserializeOwned>(method: &str, value: Value) -> Result<T, EngineError> {
    serde_json::from_value(value).map_err(|e| {
        EngineError::engine(format!(
            "{method}: memory-core answered in an unexpected shape: {e}"
        ))
    })
}

impl ContextEngine for MemoryCore {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            id: MEMORY_CORE_ID.to_owned(),
            name: "memory-core (built in)".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            owns_compaction: false,
            protocol: ProtocolInfo {
                features: vec![Feature::MemoryEngine],
                ..ProtocolInfo::default()
            },
        }
    }

    fn ingest(&self, _: &CallContext<'_>, _: IngestParams) -> Result<IngestResult, EngineError> {
        Err(unsupported(method::INGEST))
    }

    fn assemble(
        &self,
        _: &CallContext<'_>,
        _: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        Err(unsupported(method::ASSEMBLE))
    }

    fn compact(&self, _: &CallContext<'_>, _: CompactParams) -> Result<CompactResult, EngineError> {
        Err(unsupported(method::COMPACT))
    }

    fn memory_search(
        &self,
        _: &CallContext<'_>,
        params: MemorySearchParams,
    ) -> Result<MemorySearchResult, EngineError> {
        let mut args = json!({"query": params.query});
        if let Some(n) = params.max_results {
            args["maxResults"] = json!(n);
        }
        if let Some(s) = params.min_score {
            args["minScore"] = json!(s);
        }
        let context = ToolContext {
            session_key: params.session_key,
        };
        let answer = rampart_memory::tools::memory_search(&self.index, &context, &args);
        typed(method::MEMORY_SEARCH, answer)
    }

    fn memory_get(
        &self,
        _: &CallContext<'_>,
        params: MemoryGetParams,
    ) -> Result<MemoryGetResult, EngineError> {
        let args = serde_json::to_value(&params)
            .map_err(|e| EngineError::engine(format!("memory.get: {e}")))?;
        typed(
            method::MEMORY_GET,
            rampart_memory::tools::memory_get(&self.index, &args),
        )
    }

    fn memory_sync(
        &self,
        _: &CallContext<'_>,
        params: MemorySyncParams,
    ) -> Result<MemorySyncResult, EngineError> {
        let reason = match params.reason.as_str() {
            "session-start" => SyncReason::SessionStart,
            "watch" => SyncReason::Watch,
            _ => SyncReason::Manual,
        };
        let report = if params.force {
            self.index.reindex(reason)
        } else {
            self.index.sync(reason)
        }
        .map_err(|e| EngineError::engine(e.to_string()))?;
        let mut notes = Vec::new();
        if let Some(why) = &report.full_reindex {
            notes.push(format!("everything was re-indexed: {why}"));
        }
        if let Some(q) = &report.quarantined {
            notes.push(format!(
                "the index was damaged and moved aside ({q}); it was rebuilt from the markdown"
            ));
        }
        if let Some(e) = &report.embedding_error {
            notes.push(format!(
                "the embedding provider failed ({e}); those passages are searchable by keyword only"
            ));
        }
        for p in &report.problems {
            notes.push(format!("{p:?}"));
        }
        Ok(MemorySyncResult {
            files_indexed: (report.files_added + report.files_changed) as u64,
            files_removed: report.files_removed as u64,
            files_unchanged: report.files_unchanged as u64,
            chunks_written: report.chunks_written as u64,
            notes,
        })
    }

    fn memory_status(&self, _: &CallContext<'_>) -> Result<MemoryStatus, EngineError> {
        let s = self.index.status();
        let mut details = vec![
            format!("workspace: {}", s.workspace_dir.display()),
            format!(
                "sources: {}",
                s.sources
                    .iter()
                    .map(|x| x.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            format!("vectors: {}", s.vector_backend.as_str()),
            format!("chunks with vectors: {}", s.chunks_with_vectors),
        ];
        if let Some(last) = &s.last_sync {
            details.push(format!(
                "last sync: {} ({}){}",
                last.reason,
                if last.ok { "ok" } else { "failed" },
                last.error
                    .as_ref()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default()
            ));
        }
        if let Some(e) = &s.error {
            details.push(format!("error: {e}"));
        }
        Ok(MemoryStatus {
            backend: "sqlite".to_owned(),
            location: Some(s.db_path.display().to_string()),
            files: s.files as u64,
            chunks: s.chunks as u64,
            mode: match s.search_mode.as_str() {
                "fts-only" => "keyword-only".to_owned(),
                other => other.to_owned(),
            },
            provider: s.provider.clone(),
            model: s.model.clone(),
            fallback: s.fallback.as_ref().map(|f| MemoryFallback {
                from: f.from.clone(),
                reason: f.reason.clone(),
            }),
            dirty: s.dirty,
            details,
        })
    }

    fn dispose(&self) -> Result<(), EngineError> {
        if let Ok(mut w) = self.watcher.lock()
            && let Some(w) = w.take()
        {
            w.stop();
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "core_tests.rs"]
mod tests;
