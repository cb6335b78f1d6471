//! The store that several processes serving one set of conversations share: the registry and
//! the sessions it names, behind one trait.
//!
//! `rampart serve` reaches its storage only through [`SharedStore`], so running several
//! replicas behind a load balancer is a matter of giving them a store they can all reach:
//! - [`SessionStore`] (a sessions directory: `sessions.json` rewritten atomically under a lock
//!   file, a pi JSONL file per session with a `flock` sidecar) is the store of one machine, and
//!   of replicas on one machine;
//! - [`MemoryStore`] keeps both in this process's memory; tests run two server states against
//!   one to prove that nothing a replica needs is kept outside the store;
//! - a database store (PostgreSQL rows with advisory locks) implements the same six methods,
//!   with sessions on its own [`SessionMedium`](crate::medium::SessionMedium) and blobs on its
//!   own [`BlobMedium`].
//!
//! What the trait promises, whatever the backend:
//! - [`create`](SharedStore::create) is create-if-absent and atomic across every process
//!   sharing the store: two replicas that pick the same key get one session;
//! - [`open`](SharedStore::open) gives a [`Session`] whose write lock
//!   ([`Session::hold`]) excludes every other process sharing the store, and whose appends the
//!   others read when they next take the lock;
//! - [`record`](SharedStore::record) applies registry changes to the newest entry, in order;
//! - [`blobs`](SharedStore::blobs), when there, reads on every handle what any handle stored
//!   (checked by [`crate::blobs::conformance`]).
#![warn(missing_docs)]

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::{
    RegistryChange, SessionEntry, SessionMap, SessionStore, StoreError, apply_change,
    normalize_key, now_unix_ms,
};
use crate::blobs::{BlobMedium, FileBlobs};
use crate::entry::SessionHeader;
use crate::medium::MemoryMedium;
use crate::{Session, SessionError, SessionOptions};

/// Fields of a new registry entry besides its id and file (`origin`, `spawnedBy`, …).
pub type EntryFields = serde_json::Map<String, Value>;

/// Chooses the key of a new session, told which keys are taken (`taken(key)`).
pub type PickKey<'a> = dyn FnMut(&dyn Fn(&str) -> bool) -> String + 'a;

/// How one connection pool of a database store stands now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PoolFigures {
    /// Its configured size.
    pub max: usize,
    /// Connections open now.
    pub open: usize,
    /// Open connections idle now.
    pub idle: usize,
    /// Callers waiting for a connection.
    pub waiting: usize,
}

/// What a database store has done since it was opened (monotonic counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StoreCounters {
    /// Operations run (each a query, a transaction or a lock wait).
    pub operations: u64,
    /// Of those, how many failed.
    pub failures: u64,
    /// Of the failures, how many because the database could not be reached.
    pub unavailable: u64,
    /// Their total time, in microseconds.
    pub total_micros: u64,
}

/// How a store stands now, as a server's health check and metrics report it. The figures an
/// operator graphs are typed fields (a server writes them as metrics without reading JSON
/// back); `detail` is what the health check shows besides.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreHealth {
    /// The kind of store: `files`, `memory` or `postgres`.
    pub backend: &'static str,
    /// Whether it answered just now. A server that cannot reach its store cannot serve
    /// conversations, and says so to its load balancer.
    pub reachable: bool,
    /// The round trip of the check just made, when the store has one to make (a database).
    pub latency: Option<std::time::Duration>,
    /// Its connection pools by name (a database store's), as they stand now.
    pub pools: Vec<(&'static str, PoolFigures)>,
    /// What it has done since it was opened (a database store's).
    pub counters: Option<StoreCounters>,
    /// What the store tells about itself (its name, latency, pool figures, or why it did
    /// not answer), as JSON fields.
    pub detail: serde_json::Map<String, Value>,
}

/// The registry and the sessions it names, as every process serving them sees them (see the
/// module docs).
pub trait SharedStore: Send + Sync + Debug {
    /// Whether the store answers now, and what it says about itself (for `/healthz`). May
    /// take a round trip to a database.
    fn health(&self) -> StoreHealth;

    /// What errors call this store (the registry file, or the store's name).
    fn describe(&self) -> &Path;

    /// The entry of `key` (any case), if registered.
    fn get(&self, key: &str) -> Result<Option<SessionEntry>, StoreError>;

    /// The entries whose key starts with `prefix`, plus the one named `exact`, most recently
    /// updated first.
    fn family(
        &self,
        prefix: &str,
        exact: Option<&str>,
    ) -> Result<Vec<(String, SessionEntry)>, StoreError>;

    /// The members of [`family`](Self::family) that `keep` keeps (told each key and its
    /// entry's `updatedAt`), newest first: for a caller that can rule most members out by key
    /// alone. A store that can answers without copying the others' entries (a family can hold
    /// every conversation of a server).
    fn family_kept(
        &self,
        prefix: &str,
        exact: Option<&str>,
        keep: &mut dyn FnMut(&str, u64) -> bool,
    ) -> Result<Vec<(String, SessionEntry)>, StoreError> {
        let mut family = self.family(prefix, exact)?;
        family.retain(|(key, entry)| keep(key, entry.updated_at));
        Ok(family)
    }

    /// How many sessions are registered.
    fn count(&self) -> Result<usize, StoreError>;

    /// Registers a new session under the key `pick` chooses (it is told which keys are
    /// taken), with a new session holding `header` and an entry carrying `fields`, unless the
    /// key is registered already. Atomic across everything sharing the store. Returns the key
    /// and whether this call created it.
    fn create(
        &self,
        pick: &mut PickKey<'_>,
        header: SessionHeader,
        fields: EntryFields,
    ) -> Result<(String, bool), StoreError>;

    /// Opens the session `entry` (registered as `key`) names, for reading and appending.
    fn open(
        &self,
        key: &str,
        entry: &SessionEntry,
        options: SessionOptions,
    ) -> Result<Session, StoreError>;

    /// Applies `changes` to `key`'s entry in order (keeping the newest `keep_checkpoints`
    /// compaction checkpoints); nothing for an empty batch.
    fn record(
        &self,
        key: &str,
        changes: Vec<RegistryChange>,
        keep_checkpoints: usize,
    ) -> Result<Option<SessionEntry>, StoreError>;

    /// Where the originals of shortened content are kept (content-addressed and immutable):
    /// every process sharing the store reads what another stored. `None` when the store keeps
    /// none; then nothing is shortened, since an original that cannot be kept is never
    /// dropped.
    fn blobs(&self) -> Option<Arc<dyn BlobMedium>>;

    /// The directory of this machine the store lives in, when it has one (a sessions
    /// directory): what a server puts beside it by default (the agent's workspace). `None` for
    /// a database.
    fn local_dir(&self) -> Option<&Path>;

    /// [`record`](Self::record) for several entries at once; a store that can, writes them in
    /// one go. Keys no longer registered are skipped.
    fn record_many(
        &self,
        batch: Vec<(String, Vec<RegistryChange>)>,
        keep_checkpoints: usize,
    ) -> Result<(), StoreError> {
        for (key, changes) in batch {
            match self.record(&key, changes, keep_checkpoints) {
                Ok(_) | Err(StoreError::UnknownSession { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

fn session_error(e: SessionError) -> StoreError {
    StoreError::Session(Box::new(e))
}

impl SharedStore for SessionStore {
    fn health(&self) -> StoreHealth {
        let mut detail = serde_json::Map::new();
        detail.insert(
            "registry".into(),
            Value::from(self.path().display().to_string()),
        );
        let read = self.snapshot();
        if let Err(e) = &read {
            detail.insert("error".into(), Value::from(e.to_string()));
        }
        StoreHealth {
            backend: "files",
            reachable: read.is_ok(),
            latency: None,
            pools: Vec::new(),
            counters: None,
            detail,
        }
    }

    fn describe(&self) -> &Path {
        self.path()
    }

    fn get(&self, key: &str) -> Result<Option<SessionEntry>, StoreError> {
        Ok(self.snapshot()?.get(&normalize_key(key)).cloned())
    }

    fn family(
        &self,
        prefix: &str,
        exact: Option<&str>,
    ) -> Result<Vec<(String, SessionEntry)>, StoreError> {
        let map = self.snapshot()?;
        Ok(newest_first(
            family_of(&map, prefix, exact)
                .map(|(k, e)| (k.clone(), e.clone()))
                .collect(),
        ))
    }

    fn family_kept(
        &self,
        prefix: &str,
        exact: Option<&str>,
        keep: &mut dyn FnMut(&str, u64) -> bool,
    ) -> Result<Vec<(String, SessionEntry)>, StoreError> {
        let map = self.snapshot()?;
        Ok(newest_first(
            family_of(&map, prefix, exact)
                .filter(|(k, e)| keep(k, e.updated_at))
                .map(|(k, e)| (k.clone(), e.clone()))
                .collect(),
        ))
    }

    fn count(&self) -> Result<usize, StoreError> {
        Ok(self.snapshot()?.len())
    }

    fn create(
        &self,
        pick: &mut PickKey<'_>,
        header: SessionHeader,
        fields: EntryFields,
    ) -> Result<(String, bool), StoreError> {
        let dir = self.dir().to_owned();
        self.insert_new(
            |map| pick(&|k: &str| map.contains_key(&normalize_key(k))),
            || {
                let file = dir.join(format!("{}.jsonl", header.id));
                let session = Session::create(&file, header, SessionOptions::default())
                    .map_err(session_error)?;
                Ok(new_entry(&session, &file, fields))
            },
        )
    }

    fn open(
        &self,
        key: &str,
        entry: &SessionEntry,
        options: SessionOptions,
    ) -> Result<Session, StoreError> {
        let file = self.session_file_path(key, entry)?;
        Session::open(&file, options).map_err(session_error)
    }

    fn record(
        &self,
        key: &str,
        changes: Vec<RegistryChange>,
        keep_checkpoints: usize,
    ) -> Result<Option<SessionEntry>, StoreError> {
        SessionStore::record(self, key, changes, keep_checkpoints)
    }

    fn blobs(&self) -> Option<Arc<dyn BlobMedium>> {
        Some(Arc::new(FileBlobs::in_sessions_dir(self.dir())))
    }

    fn local_dir(&self) -> Option<&Path> {
        Some(self.dir())
    }

    /// One rewrite of `sessions.json` for the whole batch.
    fn record_many(
        &self,
        batch: Vec<(String, Vec<RegistryChange>)>,
        keep_checkpoints: usize,
    ) -> Result<(), StoreError> {
        if batch.iter().all(|(_, changes)| changes.is_empty()) {
            return Ok(());
        }
        self.update(|map| {
            for (key, changes) in batch {
                if let Some(entry) = map.get_mut(&normalize_key(&key)) {
                    for change in changes {
                        apply_change(entry, change, keep_checkpoints);
                    }
                    entry.updated_at = entry.updated_at.max(now_unix_ms());
                }
            }
        })
    }
}

/// Most recently updated first, ties by key (the order `SessionStore::list` gives).
/// The entries under `prefix`, and `exact`'s: the keys are sorted, so the family is one range
/// of the map, not a scan of every conversation.
fn family_of<'m>(
    map: &'m SessionMap,
    prefix: &'m str,
    exact: Option<&'m str>,
) -> impl Iterator<Item = (&'m String, &'m SessionEntry)> {
    let under = map
        .range::<str, _>((
            std::ops::Bound::Included(prefix),
            std::ops::Bound::Unbounded,
        ))
        .take_while(move |(k, _)| k.starts_with(prefix));
    let named = exact
        .filter(|exact| !exact.starts_with(prefix))
        .and_then(|exact| map.get_key_value(exact));
    under.chain(named)
}

fn newest_first(mut found: Vec<(String, SessionEntry)>) -> Vec<(String, SessionEntry)> {
    found.sort_by(|(ka, a), (kb, b)| b.updated_at.cmp(&a.updated_at).then_with(|| ka.cmp(kb)));
    found
}

fn new_entry(session: &Session, file: &Path, fields: EntryFields) -> SessionEntry {
    let mut entry = SessionEntry::new(session.header().id.clone(), now_unix_ms());
    entry.session_file = file.file_name().map(|n| n.to_string_lossy().into_owned());
    entry.extra.extend(fields);
    entry
}

/// A registry and its sessions in this process's memory (see the module docs). Clones share
/// one store, as two processes share a directory.
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    inner: Arc<Mutex<MemoryRegistry>>,
    blobs: Option<PathBuf>,
}

#[derive(Debug, Default)]
struct MemoryRegistry {
    map: SessionMap,
    logs: BTreeMap<String, MemoryMedium>,
}

impl MemoryStore {
    /// An empty store; with `sessions_dir`, originals too large for a line go to its `blobs/`
    /// and it is the directory a server puts the workspace beside.
    pub fn new(sessions_dir: Option<PathBuf>) -> Self {
        Self {
            inner: Arc::default(),
            blobs: sessions_dir,
        }
    }

    fn registry(&self) -> std::sync::MutexGuard<'_, MemoryRegistry> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The raw JSONL of the session `key` names, as a file of it would read.
    pub fn session_bytes(&self, key: &str) -> Option<Vec<u8>> {
        let registry = self.registry();
        let entry = registry.map.get(&normalize_key(key))?;
        registry.logs.get(&entry.session_id).map(|m| m.contents())
    }
}

const MEMORY_NAME: &str = "<memory store>";

impl SharedStore for MemoryStore {
    fn health(&self) -> StoreHealth {
        StoreHealth {
            backend: "memory",
            reachable: true,
            latency: None,
            pools: Vec::new(),
            counters: None,
            detail: serde_json::Map::new(),
        }
    }

    fn describe(&self) -> &Path {
        Path::new(MEMORY_NAME)
    }

    fn get(&self, key: &str) -> Result<Option<SessionEntry>, StoreError> {
        Ok(self.registry().map.get(&normalize_key(key)).cloned())
    }

    fn family(
        &self,
        prefix: &str,
        exact: Option<&str>,
    ) -> Result<Vec<(String, SessionEntry)>, StoreError> {
        let found: Vec<(String, SessionEntry)> = self
            .registry()
            .map
            .iter()
            .filter(|(k, _)| k.starts_with(prefix) || Some(k.as_str()) == exact)
            .map(|(k, e)| (k.clone(), e.clone()))
            .collect();
        Ok(newest_first(found))
    }

    fn count(&self) -> Result<usize, StoreError> {
        Ok(self.registry().map.len())
    }

    fn create(
        &self,
        pick: &mut PickKey<'_>,
        header: SessionHeader,
        fields: EntryFields,
    ) -> Result<(String, bool), StoreError> {
        let mut registry = self.registry();
        let key = normalize_key(&pick(&|k: &str| {
            registry.map.contains_key(&normalize_key(k))
        }));
        if registry.map.contains_key(&key) {
            return Ok((key, false));
        }
        let id = header.id.clone();
        let medium = MemoryMedium::new(format!("memory:{id}.jsonl"));
        let session =
            Session::create_on(Box::new(medium.clone()), header, SessionOptions::default())
                .map_err(session_error)?;
        let file = PathBuf::from(format!("{id}.jsonl"));
        registry
            .map
            .insert(key.clone(), new_entry(&session, &file, fields));
        registry.logs.insert(id, medium);
        Ok((key, true))
    }

    fn open(
        &self,
        key: &str,
        entry: &SessionEntry,
        options: SessionOptions,
    ) -> Result<Session, StoreError> {
        let medium = self
            .registry()
            .logs
            .get(&entry.session_id)
            .cloned()
            .ok_or_else(|| StoreError::UnknownSession {
                key: key.to_owned(),
                path: PathBuf::from(MEMORY_NAME),
            })?;
        Session::open_on(Box::new(medium), options).map_err(session_error)
    }

    fn record(
        &self,
        key: &str,
        changes: Vec<RegistryChange>,
        keep_checkpoints: usize,
    ) -> Result<Option<SessionEntry>, StoreError> {
        if changes.is_empty() {
            return Ok(None);
        }
        let key = normalize_key(key);
        let mut registry = self.registry();
        let entry = registry
            .map
            .get_mut(&key)
            .ok_or_else(|| StoreError::UnknownSession {
                key: key.clone(),
                path: PathBuf::from(MEMORY_NAME),
            })?;
        for change in changes {
            apply_change(entry, change, keep_checkpoints);
        }
        entry.updated_at = entry.updated_at.max(now_unix_ms());
        Ok(Some(entry.clone()))
    }

    fn blobs(&self) -> Option<Arc<dyn BlobMedium>> {
        self.blobs
            .as_deref()
            .map(|dir| Arc::new(FileBlobs::in_sessions_dir(dir)) as Arc<dyn BlobMedium>)
    }

    fn local_dir(&self) -> Option<&Path> {
        self.blobs.as_deref()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "shared_tests.rs"]
mod tests;
