//! The per-session snapshot of the bootstrap files.
//!
//! A session reads its workspace files once and keeps them until it is reset: the system
//! prompt's prefix then stays byte-identical turn after turn, which is what a provider's
//! prompt cache needs, and a file edited mid-session reaches the next session (OpenClaw
//! behaves the same).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::bootstrap::{BootstrapRequest, BootstrapSet, load_bootstrap};
use crate::error::BootstrapError;
use crate::warning::{TruncationWarningMode, WarningLog};

#[derive(Debug, Default)]
struct Entry {
    set: Arc<BootstrapSet>,
    warnings: WarningLog,
}

/// Bootstrap sets by session key, shared between threads.
#[derive(Debug, Default)]
pub struct BootstrapCache {
    entries: Mutex<HashMap<String, Entry>>,
}

impl BootstrapCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        // A panic elsewhere while holding the lock leaves the map itself intact.
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The set of `request.session_key`, loaded on first use. The files are read without the
    /// lock held; when two callers load the same new session at once, both get the first
    /// set stored.
    ///
    /// # Errors
    /// [`BootstrapError`] when the workspace cannot be opened; nothing is cached then, so
    /// the next call tries again.
    pub fn get_or_load(
        &self,
        request: &BootstrapRequest,
    ) -> Result<Arc<BootstrapSet>, BootstrapError> {
        if let Some(entry) = self.lock().get(&request.session_key) {
            return Ok(Arc::clone(&entry.set));
        }
        let loaded = Arc::new(load_bootstrap(request)?);
        let mut entries = self.lock();
        let entry = entries
            .entry(request.session_key.clone())
            .or_insert_with(|| Entry {
                set: loaded,
                warnings: WarningLog::new(),
            });
        Ok(Arc::clone(&entry.set))
    }

    /// The cached set of `session_key`, if any.
    pub fn get(&self, session_key: &str) -> Option<Arc<BootstrapSet>> {
        self.lock().get(session_key).map(|e| Arc::clone(&e.set))
    }

    /// The truncation warning lines to append to this turn's user message for
    /// `session_key` (see [`WarningLog::lines_for`]); none when the session has no set.
    pub fn warning_lines(&self, session_key: &str, mode: TruncationWarningMode) -> Vec<String> {
        let mut entries = self.lock();
        let Some(entry) = entries.get_mut(session_key) else {
            return Vec::new();
        };
        let set = Arc::clone(&entry.set);
        entry.warnings.lines_for(&set, mode)
    }

    /// Forgets the set of `session_key` (the session was reset or rolled over), so the next
    /// turn reads the files again. Returns whether there was one.
    pub fn reset(&self, session_key: &str) -> bool {
        self.lock().remove(session_key).is_some()
    }

    /// Forgets every set.
    pub fn clear(&self) {
        self.lock().clear();
    }

    /// How many sessions have a set.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no session has a set.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "cache_tests.rs"]
mod tests;
