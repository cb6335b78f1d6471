//! [`MemoryIndex`]: one agent's memory, opened once and shared (it is a cheap handle).
//!
//! It owns the database, the settings, the embedding provider and the vector cache, and
//! serialises syncs: a sync asked for while another runs waits for it, in this process (a
//! mutex) and in others (the index's [`SyncLock`]). Searches go on during a sync except while
//! a group of files is being written.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread;

use crate::embed::Embedder;
use crate::error::MemoryError;
use crate::quarantine::Quarantined;
use crate::read::{ReadResult, read_memory_file};
use crate::search::{SearchInput, SearchMode, SearchOutcome, SearchParams, VectorCache, search};
use crate::settings::MemorySettings;
use crate::status::{LastSync, MemoryStatus, ProviderFallback, VectorBackend};
use crate::store::{Store, StoreOptions};
use crate::sync::{SyncInput, SyncReason, SyncReport, run_sync};
use crate::sync_lock::{SYNC_LOCK_WAIT, SyncLock};

/// How to open an index.
pub struct IndexOptions {
    /// The database file (the host uses `<data dir>/memory/<agentId>.sqlite`); created with
    /// its directory when missing.
    pub db_path: PathBuf,
    /// The agent's workspace, where `MEMORY.md` and `memory/` are.
    pub workspace_dir: PathBuf,
    /// The agent's transcripts (`*.jsonl`), indexed when the settings' sources include
    /// sessions.
    pub sessions_dir: Option<PathBuf>,
    /// The settings (clamped on open).
    pub settings: MemorySettings,
    /// The embedding provider; `None` means keyword-only search.
    pub embedder: Option<Arc<dyn Embedder>>,
    /// When the host wanted another provider and fell back, which and why (shown in status
    /// and search results).
    pub fallback: Option<ProviderFallback>,
    /// Never load sqlite-vec (vectors are then searched in process).
    pub disable_sqlite_vec: bool,
}

impl IndexOptions {
    /// Options with default settings and no provider.
    pub fn new(db_path: impl Into<PathBuf>, workspace_dir: impl Into<PathBuf>) -> Self {
        Self {
            db_path: db_path.into(),
            workspace_dir: workspace_dir.into(),
            sessions_dir: None,
            settings: MemorySettings::default(),
            embedder: None,
            fallback: None,
            disable_sqlite_vec: false,
        }
    }
}

/// What opening found.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenReport {
    /// The database file.
    pub db_path: PathBuf,
    /// Whether the file was new (no index there before, or the old one was moved aside).
    pub created: bool,
    /// A damaged (or foreign) database that was moved aside, if any.
    pub quarantined: Option<Quarantined>,
    /// Whether keyword search is available.
    pub fts_available: bool,
    /// Where vectors live.
    pub vector_backend: VectorBackend,
}

struct Inner {
    store: Mutex<Store>,
    sync_lock: Mutex<()>,
    settings: MemorySettings,
    embedder: Option<Arc<dyn Embedder>>,
    fallback: Option<ProviderFallback>,
    workspace: PathBuf,
    sessions_dir: Option<PathBuf>,
    db_path: PathBuf,
    store_options: StoreOptions,
    vectors: VectorCache,
    dirty: AtomicBool,
    synced: AtomicBool,
    background: AtomicBool,
    last_sync: Mutex<Option<LastSync>>,
    quarantined: Mutex<Option<Quarantined>>,
    unreported_quarantine: Mutex<Option<Quarantined>>,
}

/// One agent's memory index. Clones share the same index.
#[derive(Clone)]
pub struct MemoryIndex {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for MemoryIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryIndex")
            .field("db_path", &self.inner.db_path)
            .field("workspace", &self.inner.workspace)
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

impl MemoryIndex {
    /// Opens the index (creating it if needed). A damaged database is moved aside, reported
    /// in the [`OpenReport`] (and the next [`SyncReport`]), and a new one created; the next
    /// sync rebuilds it from the markdown. Opening does not sync.
    pub fn open(options: IndexOptions) -> Result<(MemoryIndex, OpenReport), MemoryError> {
        let existed = options.db_path.exists();
        let store_options = StoreOptions {
            disable_sqlite_vec: options.disable_sqlite_vec,
        };
        let (store, quarantined) = Store::open(&options.db_path, store_options)?;
        let workspace =
            std::path::absolute(&options.workspace_dir).map_err(|source| MemoryError::Io {
                path: options.workspace_dir.clone(),
                action: "resolve",
                source,
            })?;
        let report = OpenReport {
            db_path: options.db_path.clone(),
            created: !existed || quarantined.is_some(),
            quarantined: quarantined.clone(),
            fts_available: store.fts_available(),
            vector_backend: backend(&store),
        };
        tracing::info!(
            db = %options.db_path.display(),
            workspace = %workspace.display(),
            provider = options.embedder.as_ref().map_or("none", |e| e.provider()),
            fts = report.fts_available,
            vectors = report.vector_backend.as_str(),
            "memory index opened"
        );
        let index = MemoryIndex {
            inner: Arc::new(Inner {
                store: Mutex::new(store),
                sync_lock: Mutex::new(()),
                settings: options.settings.clamped(),
                embedder: options.embedder,
                fallback: options.fallback,
                workspace,
                sessions_dir: options.sessions_dir,
                db_path: options.db_path,
                store_options,
                vectors: VectorCache::default(),
                dirty: AtomicBool::new(false),
                synced: AtomicBool::new(false),
                background: AtomicBool::new(false),
                last_sync: Mutex::new(None),
                quarantined: Mutex::new(quarantined.clone()),
                unreported_quarantine: Mutex::new(quarantined),
            }),
        };
        Ok((index, report))
    }

    /// The settings in use (clamped).
    pub fn settings(&self) -> &MemorySettings {
        &self.inner.settings
    }

    /// The agent's workspace (absolute).
    pub fn workspace_dir(&self) -> &Path {
        &self.inner.workspace
    }

    /// The transcripts' directory, if given.
    pub fn sessions_dir(&self) -> Option<&Path> {
        self.inner.sessions_dir.as_deref()
    }

    /// The database file.
    pub fn db_path(&self) -> &Path {
        &self.inner.db_path
    }

    /// The embedding provider, if any.
    pub fn embedder(&self) -> Option<&dyn Embedder> {
        self.inner.embedder.as_deref()
    }

    /// The provider the host fell back from, if any.
    pub fn fallback(&self) -> Option<&ProviderFallback> {
        self.inner.fallback.as_ref()
    }

    /// Notes that files changed (the watcher calls this); the next sync clears it.
    pub fn mark_dirty(&self) {
        self.inner.dirty.store(true, Ordering::SeqCst);
    }

    /// Whether files changed since the last sync.
    pub fn is_dirty(&self) -> bool {
        self.inner.dirty.load(Ordering::SeqCst)
    }

    /// Brings the index up to date with the files (incrementally). Waits for a sync already
    /// running. If the database turns out damaged, it is moved aside and rebuilt, and the
    /// report says so.
    pub fn sync(&self, reason: SyncReason) -> Result<SyncReport, MemoryError> {
        self.sync_with(reason, false)
    }

    /// Rebuilds the whole index from the files (the embedding cache is kept).
    pub fn reindex(&self, reason: SyncReason) -> Result<SyncReport, MemoryError> {
        self.sync_with(reason, true)
    }

    fn sync_with(&self, reason: SyncReason, force: bool) -> Result<SyncReport, MemoryError> {
        let _one_at_a_time = lock(&self.inner.sync_lock);
        self.inner.dirty.store(false, Ordering::SeqCst);
        let result = SyncLock::acquire(&self.inner.db_path, SYNC_LOCK_WAIT).and_then(
            |_one_process_at_a_time| match self.run_sync_once(reason, force) {
                Err(MemoryError::Corrupt { detail, .. }) => {
                    self.recover(&detail)?;
                    self.run_sync_once(SyncReason::Recovery, true)
                }
                other => other,
            },
        );
        let mut result = result;
        if let Ok(report) = &mut result
            && report.quarantined.is_none()
        {
            report.quarantined = lock(&self.inner.unreported_quarantine).take();
        }
        self.inner.synced.store(true, Ordering::SeqCst);
        *lock(&self.inner.last_sync) = Some(LastSync {
            at_ms: now_ms(),
            reason: reason.as_str().to_string(),
            ok: result.is_ok(),
            error: match &result {
                Ok(r) => r.embedding_error.clone(),
                Err(e) => Some(e.to_string()),
            },
        });
        if result.is_err() {
            // What failed is still to do.
            self.inner.dirty.store(true, Ordering::SeqCst);
        }
        result
    }

    fn run_sync_once(&self, reason: SyncReason, force: bool) -> Result<SyncReport, MemoryError> {
        let input = SyncInput {
            workspace: &self.inner.workspace,
            sessions_dir: self.inner.sessions_dir.as_deref(),
            settings: &self.inner.settings,
            embedder: self.inner.embedder.as_deref(),
            reason,
            force,
        };
        let result = run_sync(&self.inner.store, &input);
        // Even a failed sync may have written some groups.
        self.inner.vectors.invalidate();
        result
    }

    /// Moves the damaged database aside and opens a new one in its place.
    fn recover(&self, detail: &str) -> Result<(), MemoryError> {
        let moved =
            lock(&self.inner.store).quarantine_and_reopen(detail, self.inner.store_options)?;
        tracing::warn!(to = %moved.to.display(), detail, "memory index was damaged; rebuilding");
        *lock(&self.inner.quarantined) = Some(moved.clone());
        *lock(&self.inner.unreported_quarantine) = Some(moved);
        self.inner.vectors.invalidate();
        Ok(())
    }

    /// Starts a sync on its own thread unless one started this way is still running; whether
    /// it started. Failures are logged ("memory sync failed (…)"), never returned.
    pub fn sync_in_background(&self, reason: SyncReason) -> bool {
        if self.inner.background.swap(true, Ordering::SeqCst) {
            return false;
        }
        let index = self.clone();
        let spawned = thread::Builder::new()
            .name("memory-sync".to_string())
            .spawn(move || {
                if let Err(e) = index.sync(reason) {
                    tracing::warn!(reason = reason.as_str(), kind = %e.kind(), "memory sync failed ({e})");
                }
                index.inner.background.store(false, Ordering::SeqCst);
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "memory sync failed (could not start a thread)");
            self.inner.background.store(false, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// Searches memory. An index never synced and empty is synced first (blocking); a dirty
    /// one gets a background sync when `sync_on_search` is on. Fails when memory is off, the
    /// provider cannot embed the query, or the database fails.
    pub fn search(&self, query: &str, params: &SearchParams) -> Result<SearchOutcome, MemoryError> {
        if !self.inner.settings.enabled {
            return Err(MemoryError::Disabled);
        }
        if !self.inner.synced.load(Ordering::SeqCst) {
            let empty = lock(&self.inner.store)
                .counts()
                .map(|c| c.0 == 0)
                .unwrap_or(true);
            if empty && let Err(e) = self.sync(SyncReason::Search) {
                tracing::warn!(kind = %e.kind(), "memory sync failed ({e})");
            }
        } else if self.is_dirty() && self.inner.settings.sync_on_search {
            self.sync_in_background(SyncReason::Search);
        }
        match self.search_once(query, params) {
            Err(MemoryError::Corrupt { detail, .. }) => {
                let _one_at_a_time = lock(&self.inner.sync_lock);
                self.recover(&detail)?;
                drop(_one_at_a_time);
                if let Err(e) = self.sync(SyncReason::Recovery) {
                    tracing::warn!(kind = %e.kind(), "memory sync failed ({e})");
                }
                self.search_once(query, params)
            }
            other => other,
        }
    }

    fn search_once(
        &self,
        query: &str,
        params: &SearchParams,
    ) -> Result<SearchOutcome, MemoryError> {
        search(
            &SearchInput {
                store: &self.inner.store,
                settings: &self.inner.settings,
                embedder: self.inner.embedder.as_deref(),
                vectors: &self.inner.vectors,
                now_ms: now_ms(),
            },
            query,
            params,
        )
    }

    /// Reads a memory file, whole or a range of lines (`memory_get`).
    pub fn read_file(
        &self,
        path: &str,
        from: Option<usize>,
        lines: Option<usize>,
    ) -> Result<ReadResult, MemoryError> {
        if !self.inner.settings.enabled {
            return Err(MemoryError::Disabled);
        }
        read_memory_file(
            &self.inner.workspace,
            &self.inner.settings.extra_paths,
            path,
            from,
            lines,
        )
    }

    /// The index's state.
    pub fn status(&self) -> MemoryStatus {
        let store = lock(&self.inner.store);
        let (counts, error) = match store.counts() {
            Ok(c) => (c, None),
            Err(e) => ((0, 0, 0), Some(e.to_string())),
        };
        let embedder = self.inner.embedder.as_deref();
        let mode = match embedder {
            None if store.fts_available() => SearchMode::FtsOnly,
            None => SearchMode::Unavailable,
            Some(_) if self.inner.settings.hybrid_enabled && store.fts_available() => {
                SearchMode::Hybrid
            }
            Some(_) => SearchMode::Vector,
        };
        MemoryStatus {
            enabled: self.inner.settings.enabled,
            files: counts.0,
            chunks: counts.1,
            chunks_with_vectors: counts.2,
            provider: embedder.map(|e| e.provider().to_string()),
            model: embedder.map(|e| e.model().to_string()),
            provider_summary: match embedder {
                Some(e) => format!("{}/{}", e.provider(), e.model()),
                None => "keyword-only (no embedding provider)".to_string(),
            },
            fallback: self.inner.fallback.clone(),
            search_mode: mode.as_str().to_string(),
            db_path: self.inner.db_path.clone(),
            workspace_dir: self.inner.workspace.clone(),
            sources: self.inner.settings.sources.clone(),
            dirty: self.is_dirty(),
            last_sync: lock(&self.inner.last_sync).clone(),
            fts_available: store.fts_available(),
            vector_backend: backend(&store),
            quarantined: lock(&self.inner.quarantined).clone(),
            error,
        }
    }
}

fn backend(store: &Store) -> VectorBackend {
    if store.vec_available() {
        VectorBackend::SqliteVec
    } else {
        VectorBackend::InProcess
    }
}
