//! Re-syncing when memory files change (`prompt-and-memory.md` §2.4, "Watcher").
//!
//! Watched: the workspace itself (not recursively: `MEMORY.md`, `memory.md`, and `memory/`
//! appearing), `memory/` recursively, the extra paths, and the transcripts' directory when
//! sessions are indexed. Only markdown (and transcript) changes count, outside `.git`,
//! `node_modules`, virtualenvs and `__pycache__`. A change marks the index dirty; once no
//! change has come for the debounce time (1.5 s by default), the index syncs (reason
//! "watch"). The debounce lets an editor's save (often several writes and a rename) and a
//! burst of notes land as one sync.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};

use crate::error::MemoryError;
use crate::index::MemoryIndex;
use crate::sources::{is_ignored_dir, resolve_lexically};
use crate::sync::{SyncReason, SyncReport};

/// Called after each sync the watcher runs, with its outcome.
pub type SyncCallback = Box<SyncFn>;

/// The function inside a [`SyncCallback`].
pub type SyncFn = dyn Fn(&Result<SyncReport, MemoryError>) + Send + 'static;

enum Message {
    Event(notify::Result<Event>),
    Stop,
}

/// A running watcher; dropping it stops it.
pub struct MemoryWatcher {
    stop: Sender<Message>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for MemoryWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryWatcher").finish_non_exhaustive()
    }
}

/// What is watched, and how to tell a relevant change.
struct Scope {
    workspace: PathBuf,
    memory_dir: PathBuf,
    extra: Vec<PathBuf>,
    sessions_dir: Option<PathBuf>,
}

impl Scope {
    fn relevant(&self, path: &Path) -> bool {
        if path
            .components()
            .any(|c| c.as_os_str().to_str().is_some_and(is_ignored_dir))
        {
            return false;
        }
        if let Some(dir) = &self.sessions_dir
            && path.parent() == Some(dir.as_path())
        {
            return path.extension().is_some_and(|e| e == "jsonl");
        }
        if path.extension().is_some_and(|e| e == "md") {
            return true;
        }
        // A directory moved in or out of memory/ (or memory/ itself) brings or takes files
        // without an event per file.
        path.starts_with(&self.memory_dir) || self.extra.iter().any(|e| path.starts_with(e))
    }
}

impl MemoryWatcher {
    /// Starts watching for `index`, calling `on_sync` (if any) after each sync. The
    /// debounce is the index settings' `watch_debounce`.
    pub fn start(
        index: &MemoryIndex,
        on_sync: Option<SyncCallback>,
    ) -> Result<MemoryWatcher, MemoryError> {
        let workspace = index.workspace_dir().to_path_buf();
        let scope = Scope {
            memory_dir: workspace.join("memory"),
            extra: index
                .settings()
                .extra_paths
                .iter()
                .map(|p| resolve_lexically(&workspace, p))
                .collect(),
            sessions_dir: index
                .settings()
                .indexes_sessions()
                .then(|| index.sessions_dir().map(Path::to_path_buf))
                .flatten(),
            workspace,
        };
        let (tx, rx) = mpsc::channel::<Message>();
        let events = tx.clone();
        let mut watcher = notify::recommended_watcher(move |event: notify::Result<Event>| {
            // The receiver is gone only when the watcher is stopping.
            let _ = events.send(Message::Event(event));
        })
        .map_err(|source| MemoryError::Watch {
            path: scope.workspace.clone(),
            source,
        })?;
        let watch = |w: &mut RecommendedWatcher, path: &Path, mode: RecursiveMode| {
            w.watch(path, mode).map_err(|source| MemoryError::Watch {
                path: path.to_path_buf(),
                source,
            })
        };
        watch(&mut watcher, &scope.workspace, RecursiveMode::NonRecursive)?;
        let mut memory_watched = false;
        if scope.memory_dir.is_dir() {
            watch(&mut watcher, &scope.memory_dir, RecursiveMode::Recursive)?;
            memory_watched = true;
        }
        for extra in &scope.extra {
            if extra.is_dir() {
                watch(&mut watcher, extra, RecursiveMode::Recursive)?;
            } else if extra.is_file() {
                watch(&mut watcher, extra, RecursiveMode::NonRecursive)?;
            }
        }
        if let Some(dir) = &scope.sessions_dir
            && dir.is_dir()
        {
            watch(&mut watcher, dir, RecursiveMode::NonRecursive)?;
        }
        let index = index.clone();
        let thread = thread::Builder::new()
            .name("memory-watch".to_string())
            .spawn(move || {
                run(
                    watcher,
                    memory_watched,
                    &scope,
                    &index,
                    &rx,
                    on_sync.as_deref(),
                );
            })
            .map_err(|source| MemoryError::Io {
                path: PathBuf::from("memory-watch"),
                action: "start the watcher thread for",
                source,
            })?;
        Ok(MemoryWatcher {
            stop: tx,
            thread: Some(thread),
        })
    }

    /// Stops watching (also done on drop).
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        let _ = self.stop.send(Message::Stop);
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::warn!("the memory watcher thread panicked");
        }
    }
}

impl Drop for MemoryWatcher {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The watcher thread: collect relevant events, sync once they stop for the debounce time.
fn run(
    mut watcher: RecommendedWatcher,
    mut memory_watched: bool,
    scope: &Scope,
    index: &MemoryIndex,
    rx: &Receiver<Message>,
    on_sync: Option<&SyncFn>,
) {
    let debounce = index
        .settings()
        .watch_debounce
        .max(Duration::from_millis(1));
    let mut due: Option<Instant> = None;
    loop {
        let message = match due {
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(at) => rx.recv_timeout(at.saturating_duration_since(Instant::now())),
        };
        match message {
            Ok(Message::Stop) | Err(RecvTimeoutError::Disconnected) => return,
            Ok(Message::Event(Ok(event))) => {
                if matches!(event.kind, EventKind::Access(_)) {
                    continue;
                }
                if !memory_watched && scope.memory_dir.is_dir() {
                    // memory/ appeared after the watcher started.
                    match watcher.watch(&scope.memory_dir, RecursiveMode::Recursive) {
                        Ok(()) => memory_watched = true,
                        Err(e) => {
                            tracing::warn!(path = %scope.memory_dir.display(), error = %e, "could not watch memory/")
                        }
                    }
                }
                if event.paths.iter().any(|p| scope.relevant(p)) {
                    index.mark_dirty();
                    due = Some(Instant::now() + debounce);
                }
            }
            Ok(Message::Event(Err(e))) => {
                tracing::warn!(error = %e, "memory watcher error; syncing to be safe");
                index.mark_dirty();
                due = Some(Instant::now() + debounce);
            }
            Err(RecvTimeoutError::Timeout) => {
                due = None;
                let result = index.sync(SyncReason::Watch);
                if let Err(e) = &result {
                    tracing::warn!(kind = %e.kind(), "memory sync failed ({e})");
                }
                if let Some(callback) = on_sync {
                    callback(&result);
                }
            }
        }
    }
}
