//! The SQLite store: schema, versioned migrations, and the rows of one agent's database.
//!
//! Why one file per agent: recall must never cross agents (§6.4 of the reference), and a file
//! per agent makes that a property of the storage rather than of every query.
//! Why the store is not the record: the session file is. A database that cannot be opened is
//! moved aside (never deleted) and rebuilt from the messages the host passes.

use std::path::{Path, PathBuf};

use rampart_engine_api::{EngineError, ErrorKind};
use rusqlite::{Connection, OptionalExtension, params};

/// The schema version this build writes; migrations bring older files up to it.
pub const SCHEMA_VERSION: i64 = 3;

/// Migration steps, index `i` takes a database from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE conversations (
    conversation_id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL
);
CREATE TABLE messages (
    message_id INTEGER PRIMARY KEY,
    conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    raw_json TEXT NOT NULL,
    token_count INTEGER NOT NULL,
    identity_hash TEXT NOT NULL,
    large_file_id TEXT,
    created_at INTEGER NOT NULL,
    UNIQUE (conversation_id, seq)
);
CREATE INDEX messages_identity ON messages(conversation_id, identity_hash);
CREATE TABLE message_parts (
    message_id INTEGER NOT NULL REFERENCES messages(message_id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL,
    part_type TEXT NOT NULL,
    text_content TEXT,
    tool_call_id TEXT,
    tool_name TEXT,
    PRIMARY KEY (message_id, ordinal)
);
CREATE TABLE summaries (
    summary_id TEXT PRIMARY KEY,
    conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
    kind TEXT NOT NULL CHECK (kind IN ('leaf', 'condensed')),
    depth INTEGER NOT NULL,
    content TEXT NOT NULL,
    token_count INTEGER NOT NULL,
    earliest_at INTEGER NOT NULL,
    latest_at INTEGER NOT NULL,
    descendant_count INTEGER NOT NULL,
    descendant_token_count INTEGER NOT NULL,
    source_message_token_count INTEGER NOT NULL,
    level TEXT NOT NULL,
    model TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX summaries_depth ON summaries(conversation_id, depth, kind);
CREATE TABLE summary_messages (
    summary_id TEXT NOT NULL REFERENCES summaries(summary_id) ON DELETE CASCADE,
    message_id INTEGER NOT NULL REFERENCES messages(message_id) ON DELETE RESTRICT,
    ordinal INTEGER NOT NULL,
    PRIMARY KEY (summary_id, message_id)
);
CREATE INDEX summary_messages_reverse ON summary_messages(message_id);
CREATE TABLE summary_sources (
    summary_id TEXT NOT NULL REFERENCES summaries(summary_id) ON DELETE CASCADE,
    source_id TEXT NOT NULL REFERENCES summaries(summary_id) ON DELETE RESTRICT,
    ordinal INTEGER NOT NULL,
    PRIMARY KEY (summary_id, source_id)
);
CREATE INDEX summary_sources_reverse ON summary_sources(source_id);
CREATE TABLE context_items (
    conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL,
    message_id INTEGER REFERENCES messages(message_id),
    summary_id TEXT REFERENCES summaries(summary_id),
    CHECK ((message_id IS NULL) <> (summary_id IS NULL)),
    PRIMARY KEY (conversation_id, ordinal)
);
CREATE TABLE large_files (
    file_id TEXT PRIMARY KEY,
    conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
    tool_name TEXT NOT NULL,
    tool_call_id TEXT NOT NULL,
    byte_size INTEGER NOT NULL,
    line_count INTEGER NOT NULL,
    content TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE VIRTUAL TABLE messages_fts USING fts5(content, tokenize = 'porter unicode61');
CREATE VIRTUAL TABLE summaries_fts USING fts5(summary_id UNINDEXED, content, tokenize = 'porter unicode61');
"#,
    r#"
ALTER TABLE large_files ADD COLUMN file_name TEXT;
ALTER TABLE large_files ADD COLUMN mime_type TEXT;
"#,
    // A session started over (`/new`) names the one it replaced: its conversation starts with
    // what it carries over, and recall reaches back into the old one.
    r#"
ALTER TABLE conversations ADD COLUMN previous_id INTEGER REFERENCES conversations(conversation_id);
"#,
];

/// The most conversations one recall reaches back through (`/new` after `/new` …).
const MAX_LINEAGE: usize = 64;

/// A database error, named by what was being done.
pub fn db(what: &str, e: impl std::fmt::Display) -> EngineError {
    EngineError::new(
        ErrorKind::Engine,
        format!("lossless store: {what} failed: {e}"),
    )
}

/// One agent's database.
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Store({})", self.path.display())
    }
}

/// What opening found, so the caller can log a rebuild.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Opened {
    /// The file opened (and was migrated when older).
    Fine,
    /// The file could not be read as a database; it was moved to this path and a new one made.
    MovedAside(PathBuf),
}

impl Store {
    /// Opens (creating) the database at `path`. A file SQLite cannot read is moved aside as
    /// `<name>.damaged-<ms>` and a fresh database is made: the session is the record, and the
    /// damaged file stays for inspection.
    pub fn open(path: &Path, now_ms: u64) -> Result<(Self, Opened), EngineError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| db(&format!("create the state directory {}", dir.display()), e))?;
        }
        match Self::open_once(path) {
            Ok(store) => Ok((store, Opened::Fine)),
            Err(first) if path.exists() => {
                let aside = path.with_extension(format!("sqlite.damaged-{now_ms}"));
                std::fs::rename(path, &aside).map_err(|e| {
                    db(
                        &format!(
                            "move the unreadable database {} aside ({first})",
                            path.display()
                        ),
                        e,
                    )
                })?;
                for suffix in ["-wal", "-shm"] {
                    let side = PathBuf::from(format!("{}{suffix}", path.display()));
                    let _ = std::fs::remove_file(side);
                }
                let store = Self::open_once(path)?;
                Ok((store, Opened::MovedAside(aside)))
            }
            Err(e) => Err(e),
        }
    }

    fn open_once(path: &Path) -> Result<Self, EngineError> {
        let conn =
            Connection::open(path).map_err(|e| db(&format!("open {}", path.display()), e))?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; \
             PRAGMA busy_timeout = 30000;",
        )
        .map_err(|e| db(&format!("set pragmas on {}", path.display()), e))?;
        let mut store = Self {
            conn,
            path: path.to_path_buf(),
        };
        store.migrate()?;
        Ok(store)
    }

    /// Runs the migrations this file lacks, all in one exclusive transaction, so two
    /// processes never race (§6.3) and a crash leaves the old version intact.
    fn migrate(&mut self) -> Result<(), EngineError> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Exclusive)
            .map_err(|e| db("begin the migration", e))?;
        let version: i64 = tx
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| db("read the schema version", e))?;
        if version > SCHEMA_VERSION {
            return Err(EngineError::new(
                ErrorKind::Incompatible,
                format!(
                    "{} has schema version {version}, newer than this engine's {SCHEMA_VERSION}: \
                     upgrade the lossless engine",
                    self.path.display()
                ),
            ));
        }
        for (i, step) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            tx.execute_batch(step)
                .map_err(|e| db(&format!("migration {} → {}", i, i + 1), e))?;
        }
        tx.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION}"))
            .map_err(|e| db("write the schema version", e))?;
        tx.commit().map_err(|e| db("commit the migration", e))
    }

    /// The connection, for the modules that own their queries.
    pub fn conn(&self) -> &Connection {
        &self.conn
    }

    /// The connection, mutably (transactions).
    pub fn conn_mut(&mut self) -> &mut Connection {
        &mut self.conn
    }

    /// The file this store lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The conversation of `session_id`, created on demand (§6.7: never "no conversation").
    /// A new one for a session started over records the conversation of `previous_session`
    /// (when this store holds it) as its predecessor.
    pub fn conversation(
        &self,
        session_id: &str,
        previous_session: Option<&str>,
        now_ms: u64,
    ) -> Result<i64, EngineError> {
        let found: Option<i64> = self
            .conn
            .query_row(
                "SELECT conversation_id FROM conversations WHERE session_id = ?1",
                [session_id],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| db("find the conversation", e))?;
        if let Some(id) = found {
            return Ok(id);
        }
        let previous: Option<i64> = match previous_session.filter(|p| *p != session_id) {
            Some(previous) => self
                .conn
                .query_row(
                    "SELECT conversation_id FROM conversations WHERE session_id = ?1",
                    [previous],
                    |r| r.get(0),
                )
                .optional()
                .map_err(|e| db("find the previous conversation", e))?,
            None => None,
        };
        self.conn
            .execute(
                "INSERT INTO conversations (session_id, created_at, previous_id) VALUES (?1, ?2, ?3)",
                params![session_id, now_ms as i64, previous],
            )
            .map_err(|e| db("create the conversation", e))?;
        Ok(self.conn.last_insert_rowid())
    }

    /// The conversation `conversation` replaced (`/new`), if any.
    pub fn previous_of(&self, conversation: i64) -> Result<Option<i64>, EngineError> {
        self.conn
            .query_row(
                "SELECT previous_id FROM conversations WHERE conversation_id = ?1",
                [conversation],
                |r| r.get(0),
            )
            .optional()
            .map(Option::flatten)
            .map_err(|e| db("read the previous conversation", e))
    }

    /// `conversation` and the ones it replaced, newest first: what its recall reaches. Bounded
    /// and cycle-safe (a damaged table never loops).
    pub fn lineage(&self, conversation: i64) -> Result<Vec<i64>, EngineError> {
        let mut out = vec![conversation];
        while out.len() < MAX_LINEAGE {
            let Some(previous) = self.previous_of(out[out.len() - 1])? else {
                break;
            };
            if out.contains(&previous) {
                break;
            }
            out.push(previous);
        }
        Ok(out)
    }

    /// Forgets everything stored for a conversation (its rows, summaries and files), so it can
    /// be rebuilt from the session. Only used when the session and the store disagree.
    pub fn clear_conversation(&mut self, conversation: i64) -> Result<(), EngineError> {
        let tx = self
            .conn
            .transaction()
            .map_err(|e| db("begin clearing", e))?;
        for sql in [
            "DELETE FROM context_items WHERE conversation_id = ?1",
            "DELETE FROM messages_fts WHERE rowid IN (SELECT message_id FROM messages WHERE conversation_id = ?1)",
            "DELETE FROM summaries_fts WHERE summary_id IN (SELECT summary_id FROM summaries WHERE conversation_id = ?1)",
            "DELETE FROM summary_sources WHERE summary_id IN (SELECT summary_id FROM summaries WHERE conversation_id = ?1)",
            "DELETE FROM summary_messages WHERE summary_id IN (SELECT summary_id FROM summaries WHERE conversation_id = ?1)",
            "DELETE FROM summaries WHERE conversation_id = ?1",
            "DELETE FROM message_parts WHERE message_id IN (SELECT message_id FROM messages WHERE conversation_id = ?1)",
            "DELETE FROM messages WHERE conversation_id = ?1",
            "DELETE FROM large_files WHERE conversation_id = ?1",
        ] {
            tx.execute(sql, [conversation])
                .map_err(|e| db("clear the conversation", e))?;
        }
        tx.commit().map_err(|e| db("commit clearing", e))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "store_tests.rs"]
mod tests;
