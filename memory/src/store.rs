//! The index database: one SQLite file per agent (`openclaw-behaviour.md` §11's schema).
//!
//! Tables:
//! - `meta(key, value)`: the schema version, and what the index was built with (provider,
//!   model, provider key, chunking); a change of any reindexes.
//! - `files(path, source, hash, mtime, size)`: what each indexed file looked like.
//! - `chunks(id, path, source, start_line, end_line, hash, model, text, embedding,
//!   updated_at)`, unique on `(path, start_line, end_line, hash)`: a passage is stored once
//!   whoever writes it (an index written by concurrent syncs of an older version, with every
//!   passage several times, is deduplicated when opened).
//! - `embedding_cache(provider, model, provider_key, hash, embedding, dims, updated_at)`.
//! - `chunks_fts`: FTS5 with the `unicode61` tokenizer over each chunk's text (CJK letters
//!   spaced, see `fts_query`), its rowid the chunk's id.
//! - `chunks_vec`: sqlite-vec's `vec0` table of the chunk vectors (cosine), its rowid the
//!   chunk's id; only when the extension loaded.
//!
//! Where this differs from OpenClaw's schema, for speed and size: chunk ids are integers
//! (the FTS and vector rows share them, so no join by text id), vectors are little-endian
//! `f32` blobs rather than JSON text, and `chunks_fts` is contentless (FTS5 `content=''`
//! with `contentless_delete`): the text is stored once, in `chunks`, not twice.
//!
//! The file is opened in WAL mode with `synchronous=NORMAL`: a crash can lose the last sync,
//! which the next sync redoes, but never damages the file.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, params};

use crate::error::{MemoryError, is_corruption};
use crate::quarantine::{Quarantined, check_header, is_made, move_aside};
use crate::settings::Source;
use crate::sync_lock::{SYNC_LOCK_WAIT, SyncLock};
use crate::vectors::{TopK, VectorMatrix, cosine, from_blob, to_blob};

/// The layout version of this crate's tables. A database of another version is rebuilt.
pub const SCHEMA_VERSION: &str = "rampart-memory-1";

/// A file as last indexed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRecord {
    /// Its path as the index names it.
    pub path: String,
    /// Where it comes from.
    pub source: Source,
    /// SHA-256 of its content (for transcripts: of the extracted text and line map).
    pub hash: String,
    /// Modification time, Unix milliseconds.
    pub mtime_ms: i64,
    /// Size in bytes.
    pub size: u64,
}

/// A chunk to insert.
#[derive(Debug, Clone)]
pub struct NewChunk<'a> {
    /// The file it belongs to.
    pub path: &'a str,
    /// Where the file comes from.
    pub source: Source,
    /// First line, 1-based.
    pub start_line: usize,
    /// Last line, 1-based, inclusive.
    pub end_line: usize,
    /// SHA-256 of the text.
    pub hash: &'a str,
    /// The embedding model (empty without one).
    pub model: &'a str,
    /// The text.
    pub text: &'a str,
    /// The text as the keyword index stores it.
    pub fts_text: &'a str,
    /// Its vector, when embedded.
    pub embedding: Option<&'a [f32]>,
}

/// A stored chunk, as search shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkRow {
    /// The chunk's id.
    pub id: i64,
    /// The file.
    pub path: String,
    /// Where it comes from.
    pub source: Source,
    /// First line, 1-based.
    pub start_line: usize,
    /// Last line, 1-based, inclusive.
    pub end_line: usize,
    /// The text.
    pub text: String,
}

/// A keyword hit: the chunk with FTS5's BM25 rank.
#[derive(Debug, Clone, PartialEq)]
pub struct KeywordRow {
    /// The chunk.
    pub chunk: ChunkRow,
    /// FTS5's rank (negative; lower is better).
    pub rank: f64,
}

/// How a store was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StoreOptions {
    /// Do not load sqlite-vec, even when it is available (vectors are then searched in
    /// process): for tests, and for a platform where the extension misbehaves.
    pub disable_sqlite_vec: bool,
}

/// The open database.
pub struct Store {
    conn: Connection,
    path: PathBuf,
    fts: bool,
    vec: bool,
    vec_dims: Option<usize>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.path)
            .field("fts", &self.fts)
            .field("vec", &self.vec)
            .finish()
    }
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY,
    source TEXT NOT NULL DEFAULT 'memory',
    hash TEXT NOT NULL,
    mtime INTEGER NOT NULL,
    size INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL,
    source TEXT NOT NULL DEFAULT 'memory',
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    hash TEXT NOT NULL,
    model TEXT NOT NULL,
    text TEXT NOT NULL,
    embedding BLOB,
    updated_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS embedding_cache (
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    provider_key TEXT NOT NULL,
    hash TEXT NOT NULL,
    embedding BLOB NOT NULL,
    dims INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (provider, model, provider_key, hash)
);
CREATE INDEX IF NOT EXISTS idx_embedding_cache_updated_at ON embedding_cache(updated_at);
";

/// The chunks' identity; also serves the lookups by path. Created by
/// [`Store::ensure_unique_chunks`], after duplicates are removed.
const UNIQUE_CHUNKS: &str = "idx_chunks_identity";

const FTS_SCHEMA: &str = "CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(text, content='', contentless_delete=1, tokenize='unicode61')";

/// Databases up to this size get SQLite's `quick_check` when opened.
const FULL_CHECK_MAX_BYTES: u64 = 32 * 1024 * 1024;

/// The tables this crate creates, dropped when the schema version changes.
const OUR_TABLES: &[&str] = &[
    "meta",
    "files",
    "chunks",
    "embedding_cache",
    "chunks_fts",
    "chunks_vec",
];

/// Creates the index file empty and owner-only (0600 on Unix) when it does not exist, before
/// SQLite opens it: the index holds the memory's text, the user's notes and (opted in) their
/// conversations, as private as the sessions. SQLite gives the `-wal` and `-shm` files the
/// database file's permissions, and takes an empty file for a new database.
fn create_private_file(path: &Path) -> std::io::Result<()> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// Creates `dir` and its missing parents, owner-only (0700 on Unix) for those it creates.
fn create_private_dir_all(dir: &Path) -> std::io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

impl Store {
    /// Opens (or creates) the index at `path`. A damaged file, or one that is not a memory
    /// index, is moved aside and a new one created; the move is returned so the caller can
    /// report it.
    pub fn open(
        path: &Path,
        options: StoreOptions,
    ) -> Result<(Store, Option<Quarantined>), MemoryError> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            create_private_dir_all(parent).map_err(|source| MemoryError::Io {
                path: parent.to_path_buf(),
                action: "create the directory",
                source,
            })?;
        }
        // One process at a time makes a new index (or replaces a damaged one): processes that
        // opened one file together used to see each other's half-written header as damage and
        // move it aside, or fail with "database is locked" while another switched it to WAL.
        // An index already in WAL mode is opened without waiting (the lock is the sync's,
        // which only such an index can have); its tables may still be being made by the
        // process that holds the lock, which creates them in one transaction ([`Self::try_open`]).
        let _making = if is_made(path) {
            None
        } else {
            Some(SyncLock::acquire(path, SYNC_LOCK_WAIT)?)
        };
        let verdict = check_header(path).map_err(|source| MemoryError::Io {
            path: path.to_path_buf(),
            action: "read the header of",
            source,
        })?;
        let problem = match verdict {
            Err(reason) => reason,
            Ok(()) => match Self::try_open(path, options) {
                Ok(store) => return Ok((store, None)),
                Err(MemoryError::Corrupt { detail, .. }) => detail,
                Err(other) => return Err(other),
            },
        };
        let moved = move_aside(path, &problem).map_err(|source| MemoryError::Io {
            path: path.to_path_buf(),
            action: "move aside the damaged index",
            source,
        })?;
        let store = Self::try_open(path, options)?;
        Ok((store, Some(moved)))
    }

    /// Closes this store's connection, moves its file aside and opens a new index in its
    /// place (after SQLite reported damage while in use).
    pub fn quarantine_and_reopen(
        &mut self,
        reason: &str,
        options: StoreOptions,
    ) -> Result<Quarantined, MemoryError> {
        let path = self.path.clone();
        let placeholder = Connection::open_in_memory()
            .map_err(|e| self.db_err("open a placeholder connection", e))?;
        // Dropping the old connection closes the file before it is renamed.
        drop(std::mem::replace(&mut self.conn, placeholder));
        let moved = move_aside(&path, reason).map_err(|source| MemoryError::Io {
            path: path.clone(),
            action: "move aside the damaged index",
            source,
        })?;
        *self = Self::try_open(&path, options)?;
        Ok(moved)
    }

    fn try_open(path: &Path, options: StoreOptions) -> Result<Store, MemoryError> {
        /// How long a write waits for another connection's transaction.
        const OPEN_BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);
        let db = |action: &str, e: rusqlite::Error| MemoryError::database(path, action, e);
        create_private_file(path).map_err(|source| MemoryError::Io {
            path: path.to_path_buf(),
            action: "create",
            source,
        })?;
        let mut conn = Connection::open(path).map_err(|e| db("open", e))?;
        // Writes outside a sync (the schema at open) wait for another process's sync
        // transaction; 5 s was too short for a `--force` rebuild on a loaded machine (one of
        // three `memory index --force` runs started together failed with "database is locked"
        // while another rebuilt). Readers never wait: the index is in WAL mode.
        conn.busy_timeout(OPEN_BUSY_TIMEOUT)
            .map_err(|e| db("set the busy timeout", e))?;
        let journal =
            switch_to_wal(&conn, OPEN_BUSY_TIMEOUT).map_err(|e| db("switch to WAL mode", e))?;
        tracing::trace!(path = %path.display(), journal, "memory index opened");
        conn.execute_batch(
            "PRAGMA synchronous=NORMAL; PRAGMA cache_size=-32000; PRAGMA temp_store=MEMORY;",
        )
        .map_err(|e| db("set pragmas", e))?;
        // quick_check reads every page: about 4 ms a megabyte here, so 1.4 s for a 330 MB
        // index of 100k chunks. Larger files skip it at open; damage found later (SQLite's
        // "corrupt" errors in a sync or search) still moves the file aside and rebuilds.
        let size = fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let check: String = if size <= FULL_CHECK_MAX_BYTES {
            conn.query_row("PRAGMA quick_check(1)", [], |r| r.get(0))
                .map_err(|e| db("check integrity", e))?
        } else {
            "ok".to_string()
        };
        if check != "ok" {
            return Err(MemoryError::Corrupt {
                path: path.to_path_buf(),
                detail: format!("SQLite's quick_check says: {check}"),
            });
        }
        let tables: Vec<String> = {
            let mut stmt = conn
                .prepare("SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%'")
                .map_err(|e| db("list tables", e))?;
            stmt.query_map([], |r| r.get(0))
                .and_then(|rows| rows.collect())
                .map_err(|e| db("list tables", e))?
        };
        if !tables.is_empty() && !tables.iter().any(|t| t == "meta") {
            // Someone else's database: never touch its tables.
            return Err(MemoryError::Corrupt {
                path: path.to_path_buf(),
                detail: format!(
                    "it is not a memory index (it has tables {} but no meta table)",
                    tables.join(", ")
                ),
            });
        }
        let version: Option<String> = if tables.is_empty() {
            None
        } else {
            conn.query_row(
                "SELECT value FROM meta WHERE key = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| db("read the schema version", e))?
        };
        if !tables.is_empty() && version.as_deref() != Some(SCHEMA_VERSION) {
            let ours = version
                .as_deref()
                .is_some_and(|v| v.starts_with("rampart-memory-"));
            if !ours {
                return Err(MemoryError::Corrupt {
                    path: path.to_path_buf(),
                    detail: format!(
                        "it is not a memory index of this program (schema {})",
                        version.as_deref().unwrap_or("unknown")
                    ),
                });
            }
            tracing::info!(path = %path.display(), from = ?version, to = SCHEMA_VERSION, "memory index schema changed, rebuilding");
        }
        // The tables and the version that says whose they are appear together: another
        // process opening the file between them took the tables without a version for someone
        // else's database and moved the index being made aside.
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| db("begin creating the tables", e))?;
        if !tables.is_empty() && version.as_deref() != Some(SCHEMA_VERSION) {
            for table in OUR_TABLES {
                tx.execute_batch(&format!("DROP TABLE IF EXISTS {table}"))
                    .map_err(|e| db("drop an old table", e))?;
            }
        }
        tx.execute_batch(SCHEMA)
            .map_err(|e| db("create the tables", e))?;
        tx.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?1)",
            [SCHEMA_VERSION],
        )
        .map_err(|e| db("write the schema version", e))?;
        tx.commit().map_err(|e| db("create the tables", e))?;
        let fts = match conn.execute_batch(FTS_SCHEMA) {
            Ok(()) => true,
            Err(e) if is_corruption(&e) => return Err(db("create the keyword index", e)),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "FTS5 unavailable; keyword search is off");
                false
            }
        };
        let vec = !options.disable_sqlite_vec && load_sqlite_vec(&conn);
        let mut store = Store {
            conn,
            path: path.to_path_buf(),
            fts,
            vec,
            vec_dims: None,
        };
        store.vec_dims = store
            .meta("vec_dims")?
            .and_then(|d| d.parse().ok())
            .filter(|_| store.table_exists("chunks_vec"));
        store.ensure_unique_chunks()?;
        Ok(store)
    }

    /// Makes chunks unique on `(path, start_line, end_line, hash)`, once per database:
    /// removes the extra copies of passages stored more than once (with their keyword and
    /// vector rows; the first copy stays), then creates the unique index. Concurrent syncs of
    /// an earlier version wrote every passage once per process. Returns the copies removed.
    pub fn ensure_unique_chunks(&mut self) -> Result<usize, MemoryError> {
        if self.table_exists(UNIQUE_CHUNKS) {
            return Ok(0);
        }
        let removed = self.transaction(|s| {
            // Another process may have done it while this one waited for the write lock.
            if s.table_exists(UNIQUE_CHUNKS) {
                return Ok(0);
            }
            let extra: Vec<i64> = s
                .conn
                .prepare(
                    "SELECT id FROM chunks WHERE id NOT IN \
                     (SELECT MIN(id) FROM chunks GROUP BY path, start_line, end_line, hash)",
                )
                .and_then(|mut q| q.query_map([], |r| r.get(0))?.collect())
                .map_err(|e| s.db_err("find duplicate passages", e))?;
            for id in &extra {
                s.delete_chunk_rows(*id)?;
                s.conn
                    .prepare_cached("DELETE FROM chunks WHERE id = ?1")
                    .and_then(|mut q| q.execute([id]))
                    .map_err(|e| s.db_err("delete a duplicate passage", e))?;
            }
            s.conn
                .execute_batch(&format!(
                    "CREATE UNIQUE INDEX {UNIQUE_CHUNKS} ON chunks(path, start_line, end_line, hash);
                     DROP INDEX IF EXISTS idx_chunks_path;"
                ))
                .map_err(|e| s.db_err("make passages unique", e))?;
            Ok(extra.len())
        })?;
        if removed > 0 {
            tracing::warn!(
                path = %self.path.display(),
                removed,
                "the memory index held passages more than once (concurrent syncs of an earlier version); the extra copies were removed"
            );
        }
        Ok(removed)
    }

    fn db_err(&self, action: &str, e: rusqlite::Error) -> MemoryError {
        MemoryError::database(&self.path, action, e)
    }

    fn table_exists(&self, name: &str) -> bool {
        self.conn
            .query_row(
                "SELECT 1 FROM sqlite_master WHERE name = ?1",
                [name],
                |_| Ok(()),
            )
            .optional()
            .ok()
            .flatten()
            .is_some()
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether keyword search is available (FTS5 compiled in).
    pub fn fts_available(&self) -> bool {
        self.fts
    }

    /// Whether sqlite-vec loaded.
    pub fn vec_available(&self) -> bool {
        self.vec
    }

    /// A `meta` value.
    pub fn meta(&self, key: &str) -> Result<Option<String>, MemoryError> {
        self.conn
            .prepare_cached("SELECT value FROM meta WHERE key = ?1")
            .and_then(|mut s| s.query_row([key], |r| r.get(0)).optional())
            .map_err(|e| self.db_err("read meta", e))
    }

    /// Sets a `meta` value.
    pub fn set_meta(&self, key: &str, value: &str) -> Result<(), MemoryError> {
        self.conn
            .prepare_cached("INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)")
            .and_then(|mut s| s.execute([key, value]))
            .map(|_| ())
            .map_err(|e| self.db_err("write meta", e))
    }

    /// Every indexed file, by path.
    pub fn files(&self) -> Result<HashMap<String, FileRecord>, MemoryError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT path, source, hash, mtime, size FROM files")
            .map_err(|e| self.db_err("list files", e))?;
        let rows = stmt
            .query_map([], |r| {
                let source: String = r.get(1)?;
                Ok(FileRecord {
                    path: r.get(0)?,
                    source: Source::parse(&source).unwrap_or(Source::Memory),
                    hash: r.get(2)?,
                    mtime_ms: r.get(3)?,
                    size: r.get::<_, i64>(4)?.max(0) as u64,
                })
            })
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(|e| self.db_err("list files", e))?;
        Ok(rows.into_iter().map(|f| (f.path.clone(), f)).collect())
    }

    /// `(files, chunks, chunks with a vector)`.
    pub fn counts(&self) -> Result<(usize, usize, usize), MemoryError> {
        let count = |sql: &str| -> Result<usize, MemoryError> {
            self.conn
                .query_row(sql, [], |r| r.get::<_, i64>(0))
                .map(|n| n.max(0) as usize)
                .map_err(|e| self.db_err("count rows", e))
        };
        Ok((
            count("SELECT COUNT(*) FROM files")?,
            count("SELECT COUNT(*) FROM chunks")?,
            count("SELECT COUNT(*) FROM chunks WHERE embedding IS NOT NULL")?,
        ))
    }

    /// Runs `f` in one write transaction, committed when it succeeds and rolled back when
    /// it fails.
    pub fn transaction<T>(
        &mut self,
        f: impl FnOnce(&Store) -> Result<T, MemoryError>,
    ) -> Result<T, MemoryError> {
        self.conn
            .execute_batch("BEGIN IMMEDIATE")
            .map_err(|e| self.db_err("begin a transaction", e))?;
        match f(self) {
            Ok(value) => {
                self.conn
                    .execute_batch("COMMIT")
                    .map_err(|e| self.db_err("commit", e))?;
                Ok(value)
            }
            Err(e) => {
                if let Err(rollback) = self.conn.execute_batch("ROLLBACK") {
                    tracing::warn!(path = %self.path.display(), error = %rollback, "rollback failed");
                }
                Err(e)
            }
        }
    }

    /// Removes a file's chunks (with their keyword and vector rows) and its record; the
    /// number of chunks removed.
    pub fn remove_file(&self, path: &str) -> Result<usize, MemoryError> {
        let ids: Vec<i64> = self
            .conn
            .prepare_cached("SELECT id FROM chunks WHERE path = ?1")
            .and_then(|mut s| s.query_map([path], |r| r.get(0))?.collect())
            .map_err(|e| self.db_err("find a file's chunks", e))?;
        for id in &ids {
            self.delete_chunk_rows(*id)?;
        }
        self.conn
            .prepare_cached("DELETE FROM chunks WHERE path = ?1")
            .and_then(|mut s| s.execute([path]))
            .map_err(|e| self.db_err("delete a file's chunks", e))?;
        self.conn
            .prepare_cached("DELETE FROM files WHERE path = ?1")
            .and_then(|mut s| s.execute([path]))
            .map_err(|e| self.db_err("delete a file record", e))?;
        Ok(ids.len())
    }

    fn delete_chunk_rows(&self, id: i64) -> Result<(), MemoryError> {
        if self.fts {
            self.conn
                .prepare_cached("DELETE FROM chunks_fts WHERE rowid = ?1")
                .and_then(|mut s| s.execute([id]))
                .map_err(|e| self.db_err("delete keyword rows", e))?;
        }
        if self.vec && self.vec_dims.is_some() {
            self.conn
                .prepare_cached("DELETE FROM chunks_vec WHERE rowid = ?1")
                .and_then(|mut s| s.execute([id]))
                .map_err(|e| self.db_err("delete vector rows", e))?;
        }
        Ok(())
    }

    /// Records a file as indexed.
    pub fn upsert_file(&self, file: &FileRecord) -> Result<(), MemoryError> {
        self.conn
            .prepare_cached(
                "INSERT OR REPLACE INTO files(path, source, hash, mtime, size) VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    file.path,
                    file.source.as_str(),
                    file.hash,
                    file.mtime_ms,
                    i64::try_from(file.size).unwrap_or(i64::MAX)
                ])
            })
            .map(|_| ())
            .map_err(|e| self.db_err("record a file", e))
    }

    /// Inserts a chunk with its keyword row (and vector row, when it has a vector); its id.
    pub fn insert_chunk(&self, chunk: &NewChunk<'_>) -> Result<i64, MemoryError> {
        let blob = chunk.embedding.map(to_blob);
        self.conn
            .prepare_cached(
                "INSERT INTO chunks(path, source, start_line, end_line, hash, model, text, embedding, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    chunk.path,
                    chunk.source.as_str(),
                    chunk.start_line as i64,
                    chunk.end_line as i64,
                    chunk.hash,
                    chunk.model,
                    chunk.text,
                    blob,
                    now_ms()
                ])
            })
            .map_err(|e| self.db_err("insert a chunk", e))?;
        let id = self.conn.last_insert_rowid();
        if self.fts {
            self.conn
                .prepare_cached("INSERT INTO chunks_fts(rowid, text) VALUES (?1, ?2)")
                .and_then(|mut s| s.execute(params![id, chunk.fts_text]))
                .map_err(|e| self.db_err("insert a keyword row", e))?;
        }
        if let (Some(blob), Some(v)) = (&blob, chunk.embedding) {
            self.insert_vec_row(id, v.len(), blob)?;
        }
        Ok(id)
    }

    fn insert_vec_row(&self, id: i64, dims: usize, blob: &[u8]) -> Result<(), MemoryError> {
        if !self.vec || self.vec_dims != Some(dims) {
            return Ok(());
        }
        self.conn
            .prepare_cached("INSERT OR REPLACE INTO chunks_vec(rowid, embedding) VALUES (?1, ?2)")
            .and_then(|mut s| s.execute(params![id, blob]))
            .map(|_| ())
            .map_err(|e| self.db_err("insert a vector row", e))
    }

    /// Creates the sqlite-vec table for vectors of `dims` (replacing one of another size).
    /// Does nothing without sqlite-vec.
    pub fn ensure_vec_table(&mut self, dims: usize) -> Result<(), MemoryError> {
        if !self.vec || self.vec_dims == Some(dims) || dims == 0 {
            return Ok(());
        }
        self.conn
            .execute_batch(&format!(
                "DROP TABLE IF EXISTS chunks_vec;
                 CREATE VIRTUAL TABLE chunks_vec USING vec0(embedding float[{dims}] distance_metric=cosine);"
            ))
            .map_err(|e| self.db_err("create the vector table", e))?;
        self.set_meta("vec_dims", &dims.to_string())?;
        self.vec_dims = Some(dims);
        // Vectors already stored (from before the table existed) go in too.
        let rows: Vec<(i64, Vec<u8>)> = self
            .conn
            .prepare("SELECT id, embedding FROM chunks WHERE embedding IS NOT NULL")
            .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
            .map_err(|e| self.db_err("read stored vectors", e))?;
        for (id, blob) in rows {
            if blob.len() == dims * 4 {
                self.insert_vec_row(id, dims, &blob)?;
            }
        }
        Ok(())
    }

    /// Empties the index (files, chunks, keyword and vector rows); the embedding cache and
    /// meta stay.
    pub fn clear_index(&mut self) -> Result<(), MemoryError> {
        let mut sql = String::from(
            "DELETE FROM chunks; DELETE FROM files; DROP TABLE IF EXISTS chunks_vec; DELETE FROM meta WHERE key = 'vec_dims';",
        );
        if self.fts {
            sql.push_str("DROP TABLE IF EXISTS chunks_fts;");
            sql.push_str(FTS_SCHEMA);
            sql.push(';');
        }
        self.conn
            .execute_batch(&sql)
            .map_err(|e| self.db_err("clear the index", e))?;
        self.vec_dims = None;
        Ok(())
    }

    /// A cached embedding of the text with this hash.
    pub fn cached_embedding(
        &self,
        provider: &str,
        model: &str,
        key: &str,
        hash: &str,
    ) -> Result<Option<Vec<f32>>, MemoryError> {
        let blob: Option<Vec<u8>> = self
            .conn
            .prepare_cached(
                "SELECT embedding FROM embedding_cache WHERE provider = ?1 AND model = ?2 AND provider_key = ?3 AND hash = ?4",
            )
            .and_then(|mut s| s.query_row([provider, model, key, hash], |r| r.get(0)).optional())
            .map_err(|e| self.db_err("read the embedding cache", e))?;
        Ok(blob.and_then(|b| from_blob(&b)))
    }

    /// Caches an embedding.
    pub fn put_cached_embedding(
        &self,
        provider: &str,
        model: &str,
        key: &str,
        hash: &str,
        vector: &[f32],
    ) -> Result<(), MemoryError> {
        self.conn
            .prepare_cached(
                "INSERT OR REPLACE INTO embedding_cache(provider, model, provider_key, hash, embedding, dims, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    provider,
                    model,
                    key,
                    hash,
                    to_blob(vector),
                    vector.len() as i64,
                    now_ms()
                ])
            })
            .map(|_| ())
            .map_err(|e| self.db_err("write the embedding cache", e))
    }

    /// Up to `limit` chunks with an id above `after` that have no vector yet, in id order:
    /// `(id, hash, text)`.
    pub fn chunks_without_embedding(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<Vec<(i64, String, String)>, MemoryError> {
        self.conn
            .prepare_cached(
                "SELECT id, hash, text FROM chunks WHERE embedding IS NULL AND id > ?1 ORDER BY id LIMIT ?2",
            )
            .and_then(|mut s| {
                s.query_map(params![after, limit as i64], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })?
                .collect()
            })
            .map_err(|e| self.db_err("find chunks without vectors", e))
    }

    /// Stores a chunk's vector (and its sqlite-vec row).
    pub fn set_embedding(&self, id: i64, model: &str, vector: &[f32]) -> Result<(), MemoryError> {
        let blob = to_blob(vector);
        self.conn
            .prepare_cached("UPDATE chunks SET embedding = ?1, model = ?2 WHERE id = ?3")
            .and_then(|mut s| s.execute(params![blob, model, id]))
            .map_err(|e| self.db_err("store a vector", e))?;
        self.insert_vec_row(id, vector.len(), &blob)
    }

    /// The best `limit` chunks for an FTS5 `MATCH` expression, best first.
    pub fn keyword_search(
        &self,
        expression: &str,
        limit: usize,
    ) -> Result<Vec<KeywordRow>, MemoryError> {
        if !self.fts {
            return Ok(Vec::new());
        }
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT c.id, c.path, c.source, c.start_line, c.end_line, c.text, f.rank
                 FROM (SELECT rowid, rank FROM chunks_fts WHERE chunks_fts MATCH ?1 ORDER BY rank LIMIT ?2) AS f
                 JOIN chunks AS c ON c.id = f.rowid
                 ORDER BY f.rank",
            )
            .map_err(|e| self.db_err("prepare a keyword search", e))?;
        let rows = stmt
            .query_map(params![expression, limit as i64], |r| {
                Ok(KeywordRow {
                    chunk: chunk_row(r)?,
                    rank: r.get(6)?,
                })
            })
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>());
        match rows {
            Ok(rows) => Ok(rows),
            // A query FTS5 cannot parse (SQLITE_ERROR) finds nothing rather than failing
            // the search.
            Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::Unknown) => {
                tracing::debug!(expression, error = %e, "keyword query rejected");
                Ok(Vec::new())
            }
            Err(e) => Err(self.db_err("run a keyword search", e)),
        }
    }

    /// The `k` nearest chunks by sqlite-vec's KNN: `(id, cosine similarity)`, best first;
    /// `None` without sqlite-vec or a vector table of the query's length.
    pub fn vec_knn(&self, query: &[f32], k: usize) -> Result<Option<Vec<(i64, f32)>>, MemoryError> {
        if !self.vec || self.vec_dims != Some(query.len()) {
            return Ok(None);
        }
        if k == 0 {
            return Ok(Some(Vec::new()));
        }
        self.conn
            .prepare_cached(
                "SELECT rowid, distance FROM chunks_vec WHERE embedding MATCH ?1 AND k = ?2",
            )
            .and_then(|mut s| {
                s.query_map(params![to_blob(query), k as i64], |r| {
                    Ok((r.get::<_, i64>(0)?, 1.0 - r.get::<_, f64>(1)? as f32))
                })?
                .collect()
            })
            .map(Some)
            .map_err(|e| self.db_err("run a vector search", e))
    }

    /// The `k` nearest chunks by reading every stored vector (no sqlite-vec, and too many
    /// vectors to hold in memory): `(id, cosine similarity)`, best first.
    pub fn scan_vectors(&self, query: &[f32], k: usize) -> Result<Vec<(i64, f32)>, MemoryError> {
        let mut top = TopK::new(k);
        let mut stmt = self
            .conn
            .prepare_cached("SELECT id, embedding FROM chunks WHERE embedding IS NOT NULL")
            .map_err(|e| self.db_err("prepare a vector scan", e))?;
        let mut rows = stmt.query([]).map_err(|e| self.db_err("scan vectors", e))?;
        while let Some(row) = rows.next().map_err(|e| self.db_err("scan vectors", e))? {
            let id: i64 = row.get(0).map_err(|e| self.db_err("scan vectors", e))?;
            let blob = row
                .get_ref(1)
                .and_then(|v| v.as_blob().map_err(Into::into))
                .map_err(|e| self.db_err("scan vectors", e))?;
            if let Some(v) = from_blob(blob) {
                top.push(id, cosine(query, &v));
            }
        }
        Ok(top.into_sorted())
    }

    /// Every stored vector of `dims` components, as a matrix.
    pub fn load_matrix(&self, dims: usize) -> Result<VectorMatrix, MemoryError> {
        let mut matrix = VectorMatrix::new(dims);
        let mut stmt = self
            .conn
            .prepare("SELECT id, embedding FROM chunks WHERE embedding IS NOT NULL")
            .map_err(|e| self.db_err("prepare loading vectors", e))?;
        let mut rows = stmt.query([]).map_err(|e| self.db_err("load vectors", e))?;
        while let Some(row) = rows.next().map_err(|e| self.db_err("load vectors", e))? {
            let id: i64 = row.get(0).map_err(|e| self.db_err("load vectors", e))?;
            let blob = row
                .get_ref(1)
                .and_then(|v| v.as_blob().map_err(Into::into))
                .map_err(|e| self.db_err("load vectors", e))?;
            if let Some(v) = from_blob(blob) {
                matrix.push(id, &v);
            }
        }
        Ok(matrix)
    }

    /// The chunks with these ids (missing ones are left out).
    pub fn chunks(&self, ids: &[i64]) -> Result<HashMap<i64, ChunkRow>, MemoryError> {
        let mut out = HashMap::with_capacity(ids.len());
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT id, path, source, start_line, end_line, text FROM chunks WHERE id = ?1",
            )
            .map_err(|e| self.db_err("prepare reading chunks", e))?;
        for id in ids {
            if let Some(row) = stmt
                .query_row([id], chunk_row)
                .optional()
                .map_err(|e| self.db_err("read a chunk", e))?
            {
                out.insert(*id, row);
            }
        }
        Ok(out)
    }

    /// A file's recorded modification time.
    pub fn file_mtime(&self, path: &str) -> Result<Option<i64>, MemoryError> {
        self.conn
            .prepare_cached("SELECT mtime FROM files WHERE path = ?1")
            .and_then(|mut s| s.query_row([path], |r| r.get(0)).optional())
            .map_err(|e| self.db_err("read a file's time", e))
    }
}

fn chunk_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ChunkRow> {
    let source: String = r.get(2)?;
    Ok(ChunkRow {
        id: r.get(0)?,
        path: r.get(1)?,
        source: Source::parse(&source).unwrap_or(Source::Memory),
        start_line: r.get::<_, i64>(3)?.max(0) as usize,
        end_line: r.get::<_, i64>(4)?.max(0) as usize,
        text: r.get(5)?,
    })
}

/// Registers sqlite-vec's functions and `vec0` module on this connection; whether it worked.
fn load_sqlite_vec(conn: &Connection) -> bool {
    type Init = unsafe extern "C" fn(
        *mut rusqlite::ffi::sqlite3,
        *mut *mut std::os::raw::c_char,
        *const rusqlite::ffi::sqlite3_api_routines,
    ) -> std::os::raw::c_int;
    // SAFETY: the crate declares `sqlite3_vec_init` without its parameters; the C function
    // has the standard extension entry signature above. It is compiled with SQLITE_CORE, so
    // it calls SQLite directly and ignores the API-routines pointer, and the connection
    // handle is live for the call.
    let rc = unsafe {
        let init: Init =
            std::mem::transmute::<*const (), Init>(sqlite_vec::sqlite3_vec_init as *const ());
        init(conn.handle(), std::ptr::null_mut(), std::ptr::null())
    };
    if rc != rusqlite::ffi::SQLITE_OK {
        tracing::warn!(
            rc,
            "sqlite-vec did not load; vectors are searched in process"
        );
        return false;
    }
    conn.query_row("SELECT vec_version()", [], |r| r.get::<_, String>(0))
        .map_err(|e| tracing::warn!(error = %e, "sqlite-vec did not load; vectors are searched in process"))
        .is_ok()
}

/// Puts the index in WAL mode (kept in the file: later opens find it so), retrying while
/// another process holds the file. Why a loop: SQLite answers a journal-mode change that
/// would need a lock another connection is upgrading from "database is locked" at once,
/// without the busy handler (it would deadlock). [`Store::open`] makes a new index under the
/// sync lock, so this is for the one open that does not take it: the new index put in place
/// of a damaged one in use ([`Store::quarantine_and_reopen`]), which a process without the
/// lock may open beside it.
fn switch_to_wal(conn: &Connection, patience: std::time::Duration) -> rusqlite::Result<String> {
    let started = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(5);
    loop {
        match conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0)) {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if matches!(
                    e.code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                ) && started.elapsed() < patience =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(200));
            }
            other => return other,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "store_tests.rs"]
mod tests;
