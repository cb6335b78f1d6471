//! What can go wrong talking to the database, and how it reaches the caller: as a
//! [`StoreError`] from the registry, an [`io::Error`] from a session medium, or a
//! [`PgStoreError`] when the store is opened.
//!
//! The one distinction every caller needs is whether the database could not be reached (down,
//! restarting, out of connections, the network): `rampart serve` answers those with 503 and
//! `Retry-After`, and the same request succeeds once the database is back. Everything else is
//! the database refusing the operation itself.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rampart_sessions::store::StoreError;
use tokio_postgres::error::SqlState;

/// An error of one operation, before it is told which store and operation it was about.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DbError {
    /// The client library's error (the database's answer, or the connection's end).
    #[error("{0}")]
    Pg(#[from] tokio_postgres::Error),
    /// No connection could be had from a pool.
    #[error("{0}")]
    Pool(#[from] deadpool_postgres::PoolError),
    /// The operation took longer than the store's operation timeout.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The store's runtime is gone (the process is stopping).
    #[error("the store is shutting down")]
    Stopped,
    /// A stored row is not what this version writes.
    #[error("{0}")]
    Corrupt(String),
}

/// SQLSTATEs that mean "the server cannot serve now", whatever the statement.
fn is_unavailable_state(state: &SqlState) -> bool {
    state.code().starts_with("08")
        || [
            SqlState::ADMIN_SHUTDOWN,
            SqlState::CRASH_SHUTDOWN,
            SqlState::CANNOT_CONNECT_NOW,
            SqlState::TOO_MANY_CONNECTIONS,
            SqlState::QUERY_CANCELED,
        ]
        .contains(state)
}

/// SQLSTATEs that refuse a new connection for good: wrong credentials (class 28) or a
/// database that does not exist (3D000).
fn refused_for_good(state: &SqlState) -> bool {
    state.code().starts_with("28") || *state == SqlState::INVALID_CATALOG_NAME
}

fn pg_unavailable(e: &tokio_postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    match e.code() {
        Some(state) => is_unavailable_state(state),
        // No SQLSTATE: the connection itself failed (refused, reset, timed out).
        None => e.as_db_error().is_none(),
    }
}

impl DbError {
    /// Whether the database could not be reached (see the module docs).
    pub(crate) fn is_unavailable(&self) -> bool {
        match self {
            Self::Pg(e) => pg_unavailable(e),
            // A new connection refused while it was being made: the database is down,
            // starting, or not taking connections now (`ALTER DATABASE … ALLOW_CONNECTIONS
            // false`, 55000). Wrong credentials or a missing database are not passing states.
            Self::Pool(deadpool_postgres::PoolError::Backend(e)) => {
                pg_unavailable(e) || !e.code().is_some_and(refused_for_good)
            }
            Self::Pool(_) | Self::Timeout(_) | Self::Stopped => true,
            Self::Corrupt(_) => false,
        }
    }

    /// Whether an established connection turned out to be gone (as opposed to the database
    /// refusing new ones): the same call on a new connection may succeed.
    pub(crate) fn lost_connection(&self) -> bool {
        matches!(self, Self::Pg(e) if pg_unavailable(e))
    }

    /// The SQLSTATE the database answered with, if it answered.
    pub(crate) fn state(&self) -> Option<&SqlState> {
        match self {
            Self::Pg(e) => e.code(),
            _ => None,
        }
    }

    /// The registry's error for this, about `operation` on `store`.
    pub(crate) fn into_store(self, store: &Path, operation: &'static str) -> StoreError {
        if self.is_unavailable() {
            StoreError::Unavailable {
                store: store.to_owned(),
                reason: format!("could not {operation}: {}", self.detail()),
            }
        } else {
            StoreError::Database {
                store: store.to_owned(),
                operation,
                reason: self.detail(),
            }
        }
    }

    /// A session medium's error for this: [`io::ErrorKind::NotConnected`] when the database
    /// could not be reached (what [`StoreError::is_unavailable`] looks for).
    pub(crate) fn into_io(self) -> io::Error {
        let kind = if self.is_unavailable() {
            io::ErrorKind::NotConnected
        } else {
            io::ErrorKind::Other
        };
        io::Error::new(kind, self.detail())
    }

    /// The message with the database's own detail, when it gave one.
    pub(crate) fn detail(&self) -> String {
        match self {
            Self::Pg(e) | Self::Pool(deadpool_postgres::PoolError::Backend(e)) => pg_detail(e),
            other => other.to_string(),
        }
    }
}

/// The client library's error with the database's own message and SQLSTATE when it answered.
fn pg_detail(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => {
            let source = std::error::Error::source(e)
                .map(|s| format!(": {s}"))
                .unwrap_or_default();
            format!("{e}{source}")
        }
    }
}

/// Why a store could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum PgStoreError {
    /// The options were refused.
    #[error(transparent)]
    Options(#[from] crate::options::OptionsError),
    /// The database could not be reached.
    #[error(
        "cannot reach the session store `{}`: {reason}. Check that PostgreSQL is running there, \
         that the database exists, and that this user may connect to it",
        store.display()
    )]
    Unreachable {
        /// The store (no password).
        store: PathBuf,
        /// What the client library said.
        reason: String,
    },
    /// The database's schema was written by a newer rampart.
    #[error(
        "the session store `{}` has schema version {found}, newer than the {supported} this \
         rampart knows; a newer rampart migrated it. Run that version (or newer) against this \
         database, or point this one at another database",
        store.display()
    )]
    SchemaTooNew {
        /// The store (no password).
        store: PathBuf,
        /// The version in the database.
        found: i32,
        /// The newest version this build knows.
        supported: i32,
    },
    /// A command that only reads found no store in the database (it creates none).
    #[error(
        "the database `{}` holds no rampart session store (no rampart_schema table); check the \
         URL, or create the store by importing or migrating sessions into it (`rampart sessions \
         import --store URL`, `rampart sessions migrate --to URL`) or by serving from it",
        store.display()
    )]
    NoStore {
        /// The store (no password).
        store: PathBuf,
    },
    /// A migration failed; the database is at the last version that succeeded.
    #[error(
        "migrating the session store `{}` to schema version {version} ({description}) failed: \
         {reason}. The database stays at the version before it; fix the cause (permissions to \
         create tables?) and start again",
        store.display()
    )]
    Migration {
        /// The store (no password).
        store: PathBuf,
        /// The version that failed.
        version: i32,
        /// What it does.
        description: &'static str,
        /// What the database said.
        reason: String,
    },
    /// The store's own threads could not be started.
    #[error("cannot start the session store's threads: {0}")]
    Runtime(io::Error),
}
