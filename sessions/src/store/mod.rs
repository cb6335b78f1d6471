//! The session registry, `sessions.json`: which sessions exist, where their transcripts are,
//! and their token and compaction counters.
//!
//! The file is OpenClaw-compatible (`~/.openclaw/agents/<agentId>/sessions/sessions.json`):
//! a JSON object from a lower-cased session key to an entry, pretty-printed with two-space
//! indentation. Rules, and why:
//!
//! - **Atomic writes** (temp file, fsync, rename, directory fsync): a crash or a concurrent
//!   reader never sees a torn registry.
//! - **Read-modify-write under a cross-process lock** on the `sessions.json.lock` sidecar, with
//!   the file re-read inside the lock: two processes updating counters never lose an
//!   increment. The lock is an OS advisory lock, so a crashed process never leaves it stale
//!   (which is why OpenClaw's "minimum hold time" for lock files has no equivalent here).
//! - **No-op updates do not touch the disk**: an update whose map is unchanged, or whose text
//!   equals the file's, is skipped, so a user's formatting survives read-only use and
//!   watchers are not woken for nothing.
//! - **A malformed file is never overwritten**: every operation fails with the file, line and
//!   column, and tells the user to fix or move it.
//! - **Unknown fields are kept** verbatim (see [`SessionEntry::extra`]).

pub mod conformance;
mod disk;
pub mod shared;
mod types;

use std::cell::RefCell;
use std::collections::btree_map::Entry;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub use types::{
    CompactionCheckpoint, CompactionSnapshot, RegistryChange, SessionEntry, SessionMap, UsageSample,
};

use disk::FileLock;

/// The registry's file name inside a sessions directory (OpenClaw's name, so a directory can
/// be shared or migrated as is).
pub const REGISTRY_FILE_NAME: &str = "sessions.json";

/// The lock sidecar's file name, next to the registry.
pub const LOCK_FILE_NAME: &str = "sessions.json.lock";

/// How long an update waits for another process's update before giving up, unless changed
/// with [`SessionStore::with_lock_timeout`]. Updates hold the lock for milliseconds; 30 s
/// means a peer is hung, and the user should hear about it rather than wait forever.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(30);

/// The platform's default sessions directory (`<data dir>/rampart/sessions`, e.g.
/// `~/.local/share/rampart/sessions` on Linux).
///
/// `None` when the platform has no home directory (some containers and service accounts);
/// callers then require `--sessions-dir`.
pub fn default_sessions_dir() -> Option<PathBuf> {
    directories::ProjectDirs::from("", "", "rampart").map(|dirs| dirs.data_dir().join("sessions"))
}

/// How old a registry temp file of a dead process must be before [`SessionStore::open`]
/// removes it.
pub const STALE_TEMP_AGE: Duration = Duration::from_secs(60);

/// The registry's canonical form of a session key: lower-cased, as OpenClaw's
/// `normalizeStoreSessionKey` does, so `Agent:Main` and `agent:main` are one session.
///
/// Nothing else is changed (no trimming): a key is an identifier the user chose, and only the
/// case-folding rule is shared with OpenClaw.
pub fn normalize_key(key: &str) -> String {
    key.to_lowercase()
}

/// Whether a session id can name a file in the sessions directory as it is: letters, digits,
/// `-`, `_` and `.`, not starting with a dot, at most 200 characters. Why so strict: the id
/// comes from files and clients, and becomes `<dir>/<id>.jsonl`; a `/`, a `..` or a leading dot
/// would write outside the store, or hide the file.
pub fn is_safe_session_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 200
        && !id.starts_with('.')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// `file` as a path inside `dir`, or `None` when it would lead outside it. Lexical (`..` is
/// resolved against the components, not by following links), because the file may not exist
/// yet and the check must hold before anything is created.
fn confine(dir: &Path, file: &Path) -> Option<PathBuf> {
    let relative = if file.is_absolute() {
        match file.strip_prefix(dir) {
            Ok(rest) => rest.to_path_buf(),
            Err(_) => {
                let canonical = std::fs::canonicalize(dir).ok()?;
                file.strip_prefix(&canonical).ok()?.to_path_buf()
            }
        }
    } else {
        file.to_path_buf()
    };
    let mut inside = PathBuf::new();
    for part in relative.components() {
        match part {
            std::path::Component::Normal(name) => inside.push(name),
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                if !inside.pop() {
                    return None;
                }
            }
            std::path::Component::RootDir | std::path::Component::Prefix(_) => return None,
        }
    }
    if inside.as_os_str().is_empty() {
        return None;
    }
    Some(dir.join(inside))
}

/// The current time as Unix milliseconds, the unit of `updatedAt` and `createdAt`.
pub fn now_unix_ms() -> u64 {
    u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap_or(0)
}

/// Everything that can go wrong with the registry. Each message names the file and says what
/// to do, because the user is the one who has to act.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The sessions directory could not be created.
    #[error(
        "cannot create the sessions directory `{}`: {source}. Check its permissions, or pass \
         --sessions-dir to use another directory",
        dir.display()
    )]
    CreateDir {
        /// The directory.
        dir: PathBuf,
        /// What the OS said.
        source: io::Error,
    },
    /// The registry exists but could not be read.
    #[error(
        "cannot read the session registry `{}`: {source}. Check that the file is readable by \
         this user",
        path.display()
    )]
    Read {
        /// The registry file.
        path: PathBuf,
        /// What the OS said.
        source: io::Error,
    },
    /// The registry is not a JSON object of valid session entries. It is left untouched.
    #[error(
        "the session registry `{}` is malformed at line {line}, column {column}: {reason}. \
         Rampart will not overwrite it; fix the file, or move it aside to start a new registry",
        path.display()
    )]
    Malformed {
        /// The registry file.
        path: PathBuf,
        /// 1-based line of the problem.
        line: usize,
        /// 1-based column of the problem.
        column: usize,
        /// What was wrong there.
        reason: String,
    },
    /// Writing the new registry failed; the previous file is still in place.
    #[error(
        "cannot write the session registry `{}`: {source}. The previous file is unchanged; \
         check free disk space and the directory's permissions",
        path.display()
    )]
    Write {
        /// The file being written (the registry, or a backup next to it).
        path: PathBuf,
        /// What the OS said.
        source: io::Error,
    },
    /// The lock sidecar could not be opened or locked.
    #[error(
        "cannot lock `{}`: {source}. Check that the sessions directory is writable and on a \
         filesystem that supports file locks",
        path.display()
    )]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// What the OS said.
        source: io::Error,
    },
    /// Another process held the lock for longer than the timeout.
    #[error(
        "gave up after {waited:?} waiting for `{}`: another process is updating the session \
         registry and has not finished. If a rampart process is hung, stop it, then retry",
        path.display()
    )]
    LockTimeout {
        /// The lock file.
        path: PathBuf,
        /// How long this process waited.
        waited: Duration,
    },
    /// An update closure tried to start another update of the same registry, which would wait
    /// for a lock its own thread holds.
    #[error(
        "a registry update of `{}` was started from inside another update of the same \
         registry; this would deadlock. Make the change inside the outer update's closure",
        path.display()
    )]
    ReentrantUpdate {
        /// The registry file.
        path: PathBuf,
    },
    /// The key names no session in the registry.
    #[error(
        "no session `{key}` in `{}`; register it (SessionStore::upsert) before recording \
         usage or compactions for it",
        path.display()
    )]
    UnknownSession {
        /// The normalised key.
        key: String,
        /// The registry file.
        path: PathBuf,
    },
    /// An entry's `sessionFile` leads outside the sessions directory, or its `sessionId` is
    /// not a safe file name. Nothing is read or written through it.
    #[error(
        "session `{key}` in `{}` has {field} `{value}`, which leads outside the sessions \
         directory; rampart only reads and writes sessions inside it. Fix the entry's \
         `{field}`, or move the file into the directory and point `sessionFile` at it",
        path.display()
    )]
    UnsafeSessionPath {
        /// The registry file.
        path: PathBuf,
        /// The entry's key.
        key: String,
        /// `sessionFile` or `sessionId`.
        field: &'static str,
        /// What the entry says.
        value: String,
    },
    /// A session of the store could not be created or opened.
    #[error(transparent)]
    Session(Box<crate::SessionError>),
    /// A shared store's database could not be reached (down, restarting, out of
    /// connections, or the network): nothing was changed, and the same call may succeed later.
    #[error(
        "the session store `{}` is unreachable: {reason}. Nothing was changed; retry later, and \
         check that the database is running and reachable from this machine",
        store.display()
    )]
    Unavailable {
        /// The store, as [`shared::SharedStore::describe`] names it (never with a password).
        store: PathBuf,
        /// What the client library said.
        reason: String,
    },
    /// A shared store's database refused an operation (a constraint, a permission, a query it
    /// could not run). Retrying the same call gives the same answer.
    #[error("the session store `{}` could not {operation}: {reason}", store.display())]
    Database {
        /// The store, as [`shared::SharedStore::describe`] names it (never with a password).
        store: PathBuf,
        /// What was being done, as a verb phrase ("read the registry").
        operation: &'static str,
        /// What the database said.
        reason: String,
    },
    /// The map could not be turned into JSON (not expected: every value is JSON already).
    #[error("cannot serialise the session registry `{}`: {source}", path.display())]
    Serialize {
        /// The registry file.
        path: PathBuf,
        /// What serde_json said.
        source: serde_json::Error,
    },
}

impl StoreError {
    /// Whether the store could not be reached, so the same call may succeed later: a
    /// [`StoreError::Unavailable`], or a session read or append whose medium lost its
    /// connection (an I/O error of kind [`io::ErrorKind::NotConnected`]). A server answers
    /// these with "try again" (503) instead of a failure of the request itself.
    pub fn is_unavailable(&self) -> bool {
        match self {
            Self::Unavailable { .. } => true,
            Self::Session(error) => error.is_unavailable(),
            _ => false,
        }
    }
}

/// A handle on one sessions directory's registry.
///
/// Every read goes to the file and every update re-reads it under the lock, so several
/// handles and several processes can share a directory safely; what it keeps is only the
/// parse of the text it last saw, reused when the file's bytes are the same. `Sync`, so
/// threads may share one handle by reference.
#[derive(Debug)]
pub struct SessionStore {
    dir: PathBuf,
    path: PathBuf,
    lock_path: PathBuf,
    lock_timeout: Duration,
    /// Writes performed through this handle; lets tests and diagnostics prove that no-op
    /// updates skip the disk without relying on mtime granularity.
    writes: AtomicU64,
    /// The registry as last read or written through this handle, with the exact text: a read
    /// whose text is the same (compared byte for byte, so a write by any process is seen)
    /// reuses it instead of parsing again, and an update leaves what it wrote here. Why: serve
    /// registers every new conversation, and with 10,000 of them parsing the file on each
    /// registration (and again for the next request's family lookup) made a long-running
    /// server's work per conversation grow with every conversation it had seen.
    parsed: std::sync::Mutex<Option<Arc<Loaded>>>,
}

/// What was on disk: the merged map, the exact text (for the unchanged-text check) and how
/// many mixed-case duplicates were merged away (for the backup before the first write).
#[derive(Debug, Default)]
struct Loaded {
    map: Arc<SessionMap>,
    text: Option<String>,
    merged: usize,
    /// The text of each entry as it was last written, for the next write to reuse
    /// ([`disk::pretty_splicing`]); empty after a parse.
    pieces: disk::Pieces,
}

thread_local! {
    /// Lock files whose update is running on this thread; detects a nested update that would
    /// otherwise wait out the lock timeout on itself.
    static UPDATING: RefCell<Vec<PathBuf>> = const { RefCell::new(Vec::new()) };
}

/// Marks an update as running on this thread, for [`UPDATING`].
struct ReentryGuard {
    lock_path: PathBuf,
}

impl ReentryGuard {
    fn enter(lock_path: &Path, registry: &Path) -> Result<Self, StoreError> {
        UPDATING.with(|held| {
            let mut held = held.borrow_mut();
            if held.iter().any(|p| p == lock_path) {
                return Err(StoreError::ReentrantUpdate {
                    path: registry.to_owned(),
                });
            }
            held.push(lock_path.to_owned());
            Ok(Self {
                lock_path: lock_path.to_owned(),
            })
        })
    }
}

impl Drop for ReentryGuard {
    fn drop(&mut self) {
        UPDATING.with(|held| {
            let mut held = held.borrow_mut();
            if let Some(at) = held.iter().rposition(|p| *p == self.lock_path) {
                held.remove(at);
            }
        });
    }
}

impl SessionStore {
    /// Opens the registry in `dir`, creating the directory if needed (not the file: that
    /// appears with the first real update).
    ///
    /// Reads the registry once so a malformed file is reported now, at startup, rather than
    /// in the middle of a turn.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, StoreError> {
        let dir = dir.into();
        crate::fsutil::create_private_dir_all(&dir).map_err(|source| StoreError::CreateDir {
            dir: dir.clone(),
            source,
        })?;
        let store = Self::in_dir(dir);
        store.remove_stale_temp_files();
        let loaded = store.load_from_disk()?;
        tracing::debug!(
            registry = %store.path.display(),
            sessions = loaded.map.len(),
            "opened session registry"
        );
        Ok(store)
    }

    /// Opens the registry in `dir` for reading only: the directory is not created (a missing
    /// one reads as a store without sessions) and nothing in it is touched, not even the temp
    /// files killed writers left. For commands that only look (`sessions list`, `show`,
    /// `export`): a new user's first `sessions list` used to create the data directory.
    /// Writing through the store still works where the directory exists.
    pub fn open_read_only(dir: impl Into<PathBuf>) -> Result<Self, StoreError> {
        let store = Self::in_dir(dir.into());
        store.load_from_disk()?;
        Ok(store)
    }

    /// The store of `dir`, nothing read or written yet.
    fn in_dir(dir: PathBuf) -> Self {
        Self {
            path: dir.join(REGISTRY_FILE_NAME),
            lock_path: dir.join(LOCK_FILE_NAME),
            dir,
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
            writes: AtomicU64::new(0),
            parsed: std::sync::Mutex::new(None),
        }
    }

    /// Removes registry temp files (`.sessions.json.<pid>.<random>.tmp`) that a writer killed
    /// between writing and renaming left behind: those whose process is gone and which are
    /// older than [`STALE_TEMP_AGE`]. Why both: a live writer's temp file is in use, and a
    /// young one may belong to a process whose pid was just reused.
    fn remove_stale_temp_files(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let prefix = format!(".{REGISTRY_FILE_NAME}.");
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let Some(rest) = name
                .strip_prefix(&prefix)
                .and_then(|r| r.strip_suffix(".tmp"))
            else {
                continue;
            };
            let Some(pid) = rest.split('.').next().and_then(|p| p.parse::<u32>().ok()) else {
                continue;
            };
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age >= STALE_TEMP_AGE);
            if old && !crate::holder::pid_exists(pid) {
                match std::fs::remove_file(entry.path()) {
                    Ok(()) => tracing::info!(
                        temp_file = %entry.path().display(),
                        pid,
                        "removed a registry temp file left by a process that is gone"
                    ),
                    Err(error) => tracing::warn!(
                        temp_file = %entry.path().display(),
                        %error,
                        "could not remove a stale registry temp file"
                    ),
                }
            }
        }
    }

    /// Changes how long updates wait for another process's lock.
    #[must_use]
    pub fn with_lock_timeout(mut self, timeout: Duration) -> Self {
        self.lock_timeout = timeout;
        self
    }

    /// The sessions directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The registry file (`<dir>/sessions.json`).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many times this handle has replaced the registry file.
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    /// Where `entry` (registered under `key`) keeps its transcript: `sessionFile` resolved
    /// against the sessions directory, or OpenClaw's default `<dir>/<sessionId>.jsonl` when it
    /// is absent.
    ///
    /// Both fields come from a file anyone may edit, so the result is confined to the
    /// directory: a `sessionFile` that leads outside it (`../x`, an absolute path elsewhere) or
    /// a `sessionId` that is not a safe file name is refused with an error naming the key and
    /// the field, never followed. An absolute `sessionFile` inside the directory (what OpenClaw
    /// writes) is accepted.
    pub fn session_file_path(
        &self,
        key: &str,
        entry: &SessionEntry,
    ) -> Result<PathBuf, StoreError> {
        let unsafe_path = |field: &'static str, value: &str| StoreError::UnsafeSessionPath {
            path: self.path.clone(),
            key: key.to_string(),
            field,
            value: value.to_string(),
        };
        match &entry.session_file {
            Some(file) => {
                confine(&self.dir, Path::new(file)).ok_or_else(|| unsafe_path("sessionFile", file))
            }
            None if is_safe_session_id(&entry.session_id) => {
                Ok(self.dir.join(format!("{}.jsonl", entry.session_id)))
            }
            None => Err(unsafe_path("sessionId", &entry.session_id)),
        }
    }

    /// Session files (`*.jsonl` directly in the directory) that no registry entry names: turns
    /// written by a process killed before it registered its session, or files copied in by
    /// hand. Sorted by path. Entries whose path is refused ([`SessionStore::session_file_path`])
    /// name nothing here.
    pub fn unregistered_files(&self) -> Result<Vec<PathBuf>, StoreError> {
        let registered: std::collections::HashSet<PathBuf> = self
            .load()?
            .iter()
            .filter_map(|(key, entry)| self.session_file_path(key, entry).ok())
            .map(|p| std::fs::canonicalize(&p).unwrap_or(p))
            .collect();
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            // A store opened read-only whose directory was never made holds no files.
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(StoreError::Read {
                    path: self.dir.clone(),
                    source,
                });
            }
        };
        let mut found: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl") && p.is_file())
            .filter(|p| {
                let canonical = std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
                !registered.contains(&canonical)
            })
            .collect();
        found.sort();
        Ok(found)
    }

    /// A snapshot of the whole registry, read without the lock (writes are atomic renames,
    /// so a reader always sees one complete version).
    pub fn load(&self) -> Result<SessionMap, StoreError> {
        Ok(SessionMap::clone(&self.load_from_disk()?.map))
    }

    /// The entry for `key` (any case), if registered.
    pub fn get(&self, key: &str) -> Result<Option<SessionEntry>, StoreError> {
        Ok(self.load()?.remove(&normalize_key(key)))
    }

    /// All sessions, most recently updated first (ties by key, so the order is stable).
    pub fn list(&self) -> Result<Vec<(String, SessionEntry)>, StoreError> {
        let mut all: Vec<_> = self.load()?.into_iter().collect();
        all.sort_by(|(ka, a), (kb, b)| b.updated_at.cmp(&a.updated_at).then_with(|| ka.cmp(kb)));
        Ok(all)
    }

    /// Read-modify-write: locks the registry against other processes and threads, re-reads
    /// it, runs `change` on the map, and writes the result atomically unless nothing changed.
    ///
    /// Keys the closure inserts in mixed case are lower-cased (merging by newest `updatedAt`
    /// if that collides). `change` must not call `update` on the same registry (that returns
    /// [`StoreError::ReentrantUpdate`]); reading with `get`/`list` inside it is fine but sees
    /// the file, not the closure's pending changes. If `change` panics nothing is written.
    pub fn update<R>(&self, change: impl FnOnce(&mut SessionMap) -> R) -> Result<R, StoreError> {
        let _reentry = ReentryGuard::enter(&self.lock_path, &self.path)?;
        let _lock = FileLock::acquire(&self.lock_path, self.lock_timeout)?;
        let loaded = self.load_from_disk()?;
        let mut map = SessionMap::clone(&loaded.map);
        let result = change(&mut map);
        normalize_map_keys(&self.path, &mut map);

        if map == *loaded.map {
            tracing::trace!(registry = %self.path.display(), "registry unchanged; not rewritten");
            return Ok(result);
        }
        let mut pieces = loaded.pieces.clone();
        let text = disk::pretty_splicing(&map, &mut pieces, |key, entry| {
            loaded.map.get(key) == Some(entry)
        })
        .map_err(|source| StoreError::Serialize {
            path: self.path.clone(),
            source,
        })?;
        if loaded.text.as_deref() == Some(text.as_str()) {
            tracing::trace!(registry = %self.path.display(), "registry text unchanged; not rewritten");
            return Ok(result);
        }
        if loaded.merged > 0
            && let Some(original) = &loaded.text
        {
            self.backup_before_merge(original, loaded.merged)?;
        }
        disk::write_atomic(&self.path, &text)?;
        self.writes.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(
            registry = %self.path.display(),
            sessions = map.len(),
            bytes = text.len(),
            "session registry written"
        );
        // What was just written is what the next read will find unless another process
        // writes first (then the text differs and that read parses).
        *self.lock_parsed() = Some(Arc::new(Loaded {
            map: Arc::new(map),
            text: Some(text),
            merged: 0,
            pieces,
        }));
        Ok(result)
    }

    /// Registers a new entry under the key `pick` chooses from the registry as it stands
    /// (the closure is told the whole map), made by `make` only when the key is free; returns
    /// the key and whether this call registered it. Atomic across processes, like
    /// [`update`](Self::update).
    ///
    /// Why not `update`: an insertion changes no other entry, so the registry is written from
    /// the text each entry already has (one serialisation, one copy of the rest) and the map
    /// is not copied to be compared: a server registering its ten-thousandth conversation did
    /// as much work as for the first ten thousand together.
    pub fn insert_new(
        &self,
        pick: impl FnOnce(&SessionMap) -> String,
        make: impl FnOnce() -> Result<SessionEntry, StoreError>,
    ) -> Result<(String, bool), StoreError> {
        let _reentry = ReentryGuard::enter(&self.lock_path, &self.path)?;
        let _lock = FileLock::acquire(&self.lock_path, self.lock_timeout)?;
        let loaded = self.load_from_disk()?;
        let key = normalize_key(&pick(&loaded.map));
        if loaded.map.contains_key(&key) {
            return Ok((key, false));
        }
        let entry = make()?;
        if loaded.merged > 0
            && let Some(original) = &loaded.text
        {
            self.backup_before_merge(original, loaded.merged)?;
        }
        // The cache's copy is let go so the map and its pieces are taken, not copied, when
        // nothing else holds them (a reader of a snapshot may).
        *self.lock_parsed() = None;
        let (map, mut pieces) = match Arc::try_unwrap(loaded) {
            Ok(owned) => (owned.map, owned.pieces),
            Err(shared) => (Arc::clone(&shared.map), shared.pieces.clone()),
        };
        let mut map = Arc::try_unwrap(map).unwrap_or_else(|shared| SessionMap::clone(&shared));
        map.insert(key.clone(), entry);
        // Only the new entry has no piece; no other changed.
        let text = disk::pretty_splicing(&map, &mut pieces, |_, _| true).map_err(|source| {
            StoreError::Serialize {
                path: self.path.clone(),
                source,
            }
        })?;
        disk::write_atomic(&self.path, &text)?;
        self.writes.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(
            registry = %self.path.display(),
            key = %key,
            sessions = map.len(),
            bytes = text.len(),
            "session registered"
        );
        *self.lock_parsed() = Some(Arc::new(Loaded {
            map: Arc::new(map),
            text: Some(text),
            merged: 0,
            pieces,
        }));
        Ok((key, true))
    }

    /// Registers or replaces the entry for `key`; returns the previous entry.
    ///
    /// Unknown fields of the previous entry that `entry` does not set are carried over: a
    /// caller that builds an entry from scratch must not wipe the routing and UI fields
    /// another program (OpenClaw) keeps there. Known fields are replaced as given.
    pub fn upsert(
        &self,
        key: &str,
        mut entry: SessionEntry,
    ) -> Result<Option<SessionEntry>, StoreError> {
        let key = normalize_key(key);
        self.update(move |map| {
            let previous = map.get(&key).cloned();
            if let Some(previous) = &previous {
                for (field, value) in &previous.extra {
                    entry
                        .extra
                        .entry(field.clone())
                        .or_insert_with(|| value.clone());
                }
            }
            map.insert(key, entry);
            previous
        })
    }

    /// Records the usage of a finished run, right away, so status displays never show the
    /// previous run's numbers (OpenClaw #66483). Returns the updated entry.
    ///
    /// Sets `inputTokens`, `outputTokens`, `cacheRead`, `cacheWrite` to the run's values,
    /// `totalTokens` to `context_used` (marked fresh), `contextTokens` to the window when
    /// given, and bumps `updatedAt`.
    pub fn record_usage(&self, key: &str, usage: UsageSample) -> Result<SessionEntry, StoreError> {
        self.modify_entry(key, |entry| apply_usage(entry, usage))
    }

    /// Records a finished compaction: increments `compactionCount`, appends the checkpoint
    /// and recomputes the counters at once (OpenClaw #14979: the registry kept the
    /// pre-compaction total until the next run). Returns the updated entry.
    ///
    /// With `tokensAfter` known, `totalTokens` becomes it (fresh) and the last run's
    /// input/output/cache counters are cleared: they describe a prompt that no longer exists,
    /// and a display reading them would show the old size (#66483). Without it,
    /// `totalTokens` is kept but marked stale (`totalTokensFresh: false`).
    ///
    /// Only the newest `keep` checkpoints are kept (at least one).
    pub fn record_compaction(
        &self,
        key: &str,
        checkpoint: CompactionCheckpoint,
        keep: usize,
    ) -> Result<SessionEntry, StoreError> {
        self.modify_entry(key, move |entry| apply_compaction(entry, checkpoint, keep))
    }

    /// Applies `changes` to `key`'s entry in the order given, in one atomic rewrite of the
    /// registry: the batched form of [`record_usage`](Self::record_usage) and
    /// [`record_compaction`](Self::record_compaction), with the same result as calling them
    /// one by one. An empty batch writes nothing and returns `None`.
    ///
    /// A replay used to rewrite (and fsync twice) `sessions.json` after every model call, which
    /// made it twice as slow with a sessions directory as without one.
    pub fn record(
        &self,
        key: &str,
        changes: Vec<RegistryChange>,
        keep_checkpoints: usize,
    ) -> Result<Option<SessionEntry>, StoreError> {
        if changes.is_empty() {
            return Ok(None);
        }
        self.modify_entry(key, move |entry| {
            for change in changes {
                apply_change(entry, change, keep_checkpoints);
            }
        })
        .map(Some)
    }

    /// Applies `change` to an existing entry and bumps its `updatedAt` (never backwards, so a
    /// clock step cannot make an active session look older than it was).
    fn modify_entry(
        &self,
        key: &str,
        change: impl FnOnce(&mut SessionEntry),
    ) -> Result<SessionEntry, StoreError> {
        let key = normalize_key(key);
        let updated = self.update(|map| {
            let entry = map.get_mut(&key)?;
            change(entry);
            entry.updated_at = entry.updated_at.max(now_unix_ms());
            Some(entry.clone())
        })?;
        updated.ok_or_else(|| StoreError::UnknownSession {
            key,
            path: self.path.clone(),
        })
    }

    /// The registry as it stands on disk, shared: read every time, parsed only when its text
    /// changed since the last read or write through this handle. Why: `rampart serve` looks up
    /// a conversation's family on every request, and parsing `sessions.json` of a thousand
    /// conversations took longer than the rest of the request; reading it and comparing the
    /// bytes takes microseconds.
    pub fn snapshot(&self) -> Result<Arc<SessionMap>, StoreError> {
        Ok(Arc::clone(&self.load_from_disk()?.map))
    }

    fn lock_parsed(&self) -> std::sync::MutexGuard<'_, Option<Arc<Loaded>>> {
        self.parsed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads the file; parses it unless its bytes are those last read or written here.
    fn load_from_disk(&self) -> Result<Arc<Loaded>, StoreError> {
        let Some(text) = disk::read_text(&self.path)? else {
            return Ok(Arc::default());
        };
        if let Some(cached) = &*self.lock_parsed()
            && cached.text.as_deref() == Some(text.as_str())
        {
            return Ok(Arc::clone(cached));
        }
        let mut map = SessionMap::new();
        let mut merged = 0;
        for (raw_key, entry) in disk::parse(&self.path, &text)? {
            if insert_merging(&self.path, &mut map, &raw_key, entry) {
                merged += 1;
            }
        }
        let loaded = Arc::new(Loaded {
            map: Arc::new(map),
            text: Some(text),
            merged,
            pieces: disk::Pieces::default(),
        });
        *self.lock_parsed() = Some(Arc::clone(&loaded));
        Ok(loaded)
    }

    /// Keeps the file as it was before the first write that drops merged duplicates, so the
    /// losing entries can still be recovered by hand.
    fn backup_before_merge(&self, original: &str, merged: usize) -> Result<(), StoreError> {
        let backup = self.dir.join(format!(
            "{REGISTRY_FILE_NAME}.premerge-{}.bak",
            now_unix_ms()
        ));
        disk::write_atomic(&backup, original)?;
        tracing::warn!(
            registry = %self.path.display(),
            backup = %backup.display(),
            merged,
            "registry had mixed-case duplicate keys; merged them, original kept as a backup"
        );
        Ok(())
    }
}

/// Inserts under the normalised key; on a collision keeps the newer `updatedAt` (the earlier
/// one on a tie) and warns. Returns whether an entry was merged away.
fn insert_merging(path: &Path, map: &mut SessionMap, raw_key: &str, entry: SessionEntry) -> bool {
    let key = normalize_key(raw_key);
    match map.entry(key) {
        Entry::Vacant(slot) => {
            slot.insert(entry);
            false
        }
        Entry::Occupied(mut slot) => {
            let (kept, dropped) = if entry.updated_at > slot.get().updated_at {
                let old = slot.insert(entry);
                (slot.get().clone(), old)
            } else {
                (slot.get().clone(), entry)
            };
            tracing::warn!(
                registry = %path.display(),
                key = %slot.key(),
                raw_key,
                kept_session_id = %kept.session_id,
                kept_updated_at = kept.updated_at,
                dropped_session_id = %dropped.session_id,
                dropped_updated_at = dropped.updated_at,
                "two registry entries differ only in key case; keeping the newer one"
            );
            true
        }
    }
}

/// Lower-cases keys a closure inserted in mixed case.
fn normalize_map_keys(path: &Path, map: &mut SessionMap) {
    let odd: Vec<String> = map
        .keys()
        .filter(|k| normalize_key(k) != **k)
        .cloned()
        .collect();
    for raw_key in odd {
        if let Some(entry) = map.remove(&raw_key) {
            insert_merging(path, map, &raw_key, entry);
        }
    }
}

/// Applies `changes` to `entry` in order and bumps its `updatedAt` (never backwards): what
/// [`SessionStore::record`] does to an entry, public so every [`shared::SharedStore`] backend
/// (a database store too) follows the one rule instead of a copy of it.
pub fn apply_changes(
    entry: &mut SessionEntry,
    changes: Vec<RegistryChange>,
    keep_checkpoints: usize,
) {
    for change in changes {
        apply_change(entry, change, keep_checkpoints);
    }
    entry.updated_at = entry.updated_at.max(now_unix_ms());
}

/// One registry change applied to an entry (the one rule every store follows).
fn apply_change(entry: &mut SessionEntry, change: RegistryChange, keep_checkpoints: usize) {
    match change {
        RegistryChange::Usage(usage) => apply_usage(entry, usage),
        RegistryChange::Compaction(checkpoint) => {
            apply_compaction(entry, *checkpoint, keep_checkpoints)
        }
    }
}

fn apply_usage(entry: &mut SessionEntry, usage: UsageSample) {
    entry.input_tokens = Some(usage.input);
    entry.output_tokens = Some(usage.output);
    entry.cache_read = Some(usage.cache_read);
    entry.cache_write = Some(usage.cache_write);
    entry.total_tokens = Some(usage.context_used);
    entry.total_tokens_fresh = Some(true);
    if let Some(window) = usage.context_window {
        entry.context_tokens = Some(window);
    }
}

/// A finished compaction, as [`SessionStore::record_compaction`] documents it.
fn apply_compaction(entry: &mut SessionEntry, checkpoint: CompactionCheckpoint, keep: usize) {
    entry.compaction_count = entry.compaction_count.saturating_add(1);
    match checkpoint.tokens_after {
        Some(after) => {
            entry.total_tokens = Some(after);
            entry.total_tokens_fresh = Some(true);
            entry.input_tokens = None;
            entry.output_tokens = None;
            entry.cache_read = None;
            entry.cache_write = None;
        }
        None => {
            if entry.total_tokens.is_some() {
                entry.total_tokens_fresh = Some(false);
            }
        }
    }
    entry.compaction_checkpoints.push(checkpoint);
    // Keep the newest `keep`: the list grew without bound (OpenClaw caps it at 25).
    // The compactions themselves stay in the transcript.
    let len = entry.compaction_checkpoints.len();
    if len > keep.max(1) {
        entry.compaction_checkpoints.drain(..len - keep.max(1));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    /// Every write splices the entries it did not change from their earlier text: the file is
    /// still exactly what serde_json would write for the whole map, through creations, changes
    /// of one entry, removals, unknown fields with escapes, and a write by another handle.
    #[test]
    fn a_spliced_registry_is_byte_for_byte_the_pretty_map() {
        let dir = tempfile::tempdir().unwrap();
        let store = SessionStore::open(dir.path()).unwrap();
        let other = SessionStore::open(dir.path()).unwrap();
        let check = |store: &SessionStore| {
            let text = std::fs::read_to_string(store.path()).unwrap();
            let map = store.load().unwrap();
            assert_eq!(text, serde_json::to_string_pretty(&map).unwrap());
        };
        for n in 0..20 {
            let mut entry = SessionEntry::new(format!("id-{n}"), n);
            entry.extra.insert(
                "label".into(),
                serde_json::json!(format!("q\"{n}\n\u{1f600}")),
            );
            store.upsert(&format!("k:{n}"), entry).unwrap();
            check(&store);
        }
        // Registrations through the insertion path, between the others' keys and after.
        for key in ["k:10a", "k:99", "a:first"] {
            let (registered, created) = store
                .insert_new(|_| key.to_owned(), || Ok(SessionEntry::new(key, 5)))
                .unwrap();
            assert!(created && registered == key);
            check(&store);
        }
        let (_, created) = store
            .insert_new(|_| "k:99".to_owned(), || unreachable!("the key is taken"))
            .unwrap();
        assert!(!created);
        store
            .record_usage(
                "k:7",
                UsageSample {
                    input: 5,
                    output: 6,
                    ..UsageSample::default()
                },
            )
            .unwrap();
        check(&store);
        // A fresh handle reads the file itself, not this handle's copy.
        let fresh = SessionStore::open(dir.path()).unwrap().load().unwrap();
        assert_eq!(fresh["k:7"].input_tokens, Some(5));
        // Another handle writes; this one's pieces must not be reused for the changed entry.
        other
            .update(|map| {
                map.get_mut("k:3").unwrap().updated_at = 99;
                map.remove("k:4");
            })
            .unwrap();
        store
            .update(|map| {
                map.get_mut("k:5").unwrap().updated_at = 77;
            })
            .unwrap();
        check(&store);
        let map = store.load().unwrap();
        assert_eq!(map["k:3"].updated_at, 99);
        assert_eq!(map["k:5"].updated_at, 77);
        assert!(!map.contains_key("k:4"));
        store.update(SessionMap::clear).unwrap();
        assert_eq!(std::fs::read_to_string(store.path()).unwrap(), "{}");
    }

    #[test]
    fn keys_are_lower_cased_only() {
        assert_eq!(normalize_key("Agent:Main: Topic"), "agent:main: topic");
        assert_eq!(normalize_key("ÄB"), "äb");
    }

    #[test]
    fn default_dir_ends_in_sessions() {
        if let Some(dir) = default_sessions_dir() {
            assert!(dir.ends_with("sessions"));
        }
    }

    #[test]
    fn malformed_error_has_position_once() {
        let err = disk::parse(
            Path::new("/x/sessions.json"),
            "{\n  \"a\": {\"sessionId\": 1}\n}",
        )
        .unwrap_err();
        let text = err.to_string();
        assert_eq!(text.matches("line 2").count(), 1, "{text}");
    }

    #[test]
    fn whitespace_file_is_empty_registry() {
        assert!(disk::parse(Path::new("s.json"), " \n").unwrap().is_empty());
    }

    #[test]
    fn closure_inserted_mixed_case_keys_are_normalised() {
        let mut map = SessionMap::new();
        map.insert("a".into(), SessionEntry::new("old", 1));
        map.insert("A".into(), SessionEntry::new("new", 2));
        normalize_map_keys(Path::new("s.json"), &mut map);
        assert_eq!(map.len(), 1);
        assert_eq!(map["a"].session_id, "new");
    }

    #[test]
    fn session_file_resolution() {
        let dir = tempfile::tempdir().unwrap();
        let store = SessionStore::open(dir.path()).unwrap();
        let mut entry = SessionEntry::new("abc", 1);
        assert_eq!(
            store.session_file_path("k", &entry).unwrap(),
            dir.path().join("abc.jsonl")
        );
        entry.session_file = Some("sub/x.jsonl".into());
        assert_eq!(
            store.session_file_path("k", &entry).unwrap(),
            dir.path().join("sub/x.jsonl")
        );
        let abs = dir.path().join("inside.jsonl");
        entry.session_file = Some(abs.to_string_lossy().into_owned());
        assert_eq!(store.session_file_path("k", &entry).unwrap(), abs);
    }

    #[test]
    fn entries_that_lead_outside_the_directory_are_refused_naming_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let store = SessionStore::open(dir.path().join("s")).unwrap();
        let outside = dir.path().join("elsewhere.jsonl");
        for (file, id, field) in [
            (Some("../escaped.jsonl".to_string()), "ok", "sessionFile"),
            (
                Some("a/../../escaped.jsonl".to_string()),
                "ok",
                "sessionFile",
            ),
            (
                Some(outside.to_string_lossy().into_owned()),
                "ok",
                "sessionFile",
            ),
            (Some(String::new()), "ok", "sessionFile"),
            (None, "../escaped", "sessionId"),
            (None, "/tmp/x", "sessionId"),
        ] {
            let mut entry = SessionEntry::new(id, 1);
            entry.session_file = file;
            let err = store.session_file_path("agent:x", &entry).unwrap_err();
            let text = err.to_string();
            assert!(text.contains("agent:x") && text.contains(field), "{text}");
        }
    }
}
