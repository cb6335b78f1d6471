//! The registry's counters, written in batches: a turn's usage and compaction checkpoints go
//! to `sessions.json` at most every [`EVERY`], for every conversation at once, instead of one
//! rewrite (two fsyncs and a rename) per turn.
//!
//! Why it is safe: the session file, not the registry, is the record of a turn (it is synced
//! before the answer is sent). The registry holds counters for status displays; a crash
//! between a turn and the next batch loses at most those counters, as a crash between a turn
//! and its registry write always could. SIGTERM writes the batch before the server exits.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use rampart_sessions::store::RegistryChange;
use rampart_sessions::store::shared::SharedStore;

/// How often queued changes are written.
pub const EVERY: Duration = Duration::from_millis(250);

#[derive(Default)]
struct Queue {
    /// Changes by conversation, in the order they were queued.
    pending: Vec<(String, Vec<RegistryChange>)>,
    stopped: bool,
}

/// Queues registry changes and writes them in batches on a thread of its own.
pub struct RegistryBatcher {
    store: Arc<dyn SharedStore>,
    keep_checkpoints: usize,
    queue: Mutex<Queue>,
    wake: Condvar,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for RegistryBatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryBatcher").finish_non_exhaustive()
    }
}

impl RegistryBatcher {
    /// A batcher writing to `store` every [`EVERY`].
    pub fn start(store: Arc<dyn SharedStore>, keep_checkpoints: usize) -> Arc<Self> {
        let batcher = Arc::new(Self {
            store,
            keep_checkpoints,
            queue: Mutex::default(),
            wake: Condvar::new(),
            thread: Mutex::new(None),
        });
        let worker = Arc::clone(&batcher);
        let spawned = std::thread::Builder::new()
            .name("rampart-registry".into())
            .spawn(move || worker.run());
        match spawned {
            Ok(handle) => *batcher.lock_thread() = Some(handle),
            // Without the thread every `add` writes at once (see `add`).
            Err(e) => tracing::warn!(error = %e, "registry writes are not batched (no thread)"),
        }
        batcher
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_thread(&self) -> MutexGuard<'_, Option<std::thread::JoinHandle<()>>> {
        self.thread.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `changes` of conversation `key`.
    pub fn add(&self, key: String, changes: Vec<RegistryChange>) {
        if changes.is_empty() {
            return;
        }
        let threadless = self.lock_thread().is_none();
        {
            let mut queue = self.lock();
            match queue.pending.iter_mut().find(|(k, _)| *k == key) {
                Some((_, queued)) => queued.extend(changes),
                None => queue.pending.push((key, changes)),
            }
        }
        if threadless {
            self.flush();
        }
    }

    /// Writes what is queued now.
    pub fn flush(&self) {
        let batch = std::mem::take(&mut self.lock().pending);
        if batch.is_empty() {
            return;
        }
        let conversations = batch.len();
        if let Err(e) = self.store.record_many(batch, self.keep_checkpoints) {
            tracing::warn!(error = %e, conversations, "could not update the session registry; the session files hold every turn");
        }
    }

    fn run(&self) {
        loop {
            let stopped = {
                let queue = self.lock();
                let (queue, _) = self
                    .wake
                    .wait_timeout_while(queue, EVERY, |q| !q.stopped)
                    .unwrap_or_else(|p| p.into_inner());
                queue.stopped
            };
            self.flush();
            if stopped {
                return;
            }
        }
    }

    /// Writes what is queued and ends the thread (the server is stopping).
    pub fn stop(&self) {
        self.lock().stopped = true;
        self.wake.notify_all();
        if let Some(handle) = self.lock_thread().take() {
            let _ = handle.join();
        }
        self.flush();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "registry_writes_tests.rs"]
mod tests;
