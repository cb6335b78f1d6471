//! A session's log in PostgreSQL: its appends as rows of `rampart_lines`, its write lock a
//! session-level advisory lock.
//!
//! - **The lock lives on a connection.** [`SessionMedium::lock`] takes a connection from the
//!   lock pool and calls `pg_try_advisory_lock` on it until it succeeds or the caller's
//!   deadline passes. The guard keeps that connection; dropping it unlocks and returns the
//!   connection. A replica that dies (killed, crashed, its machine gone) loses its connection,
//!   and the database releases the lock then: no lease, no timeout to guess.
//! - **Appends go through the lock's connection**, so a holder whose connection died cannot
//!   write any more: its append fails instead of writing without the lock.
//! - **An append is a row at the offset the writer last saw as the end.** The primary key
//!   `(log, start_offset)` refuses a second row there, so even a writer whose lock was taken
//!   over (its connection died between its catch-up and its append) cannot place a turn twice
//!   or interleave with the new holder; it gets an error, and the session reopens.
//! - **Bytes never change once written**, as in a pi file: reads are ranges over the rows, and
//!   the loader of `rampart-sessions` reads them exactly as it reads a file.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use deadpool_postgres::Object;
use rampart_sessions::SessionError;
use rampart_sessions::lock::LockHolder;
use rampart_sessions::medium::{MediumGuard, SessionMedium};
use tokio_postgres::error::SqlState;

use crate::bridge::{Conn, Db, connection};
use crate::error::DbError;

/// The advisory-lock class of session logs (`'RMPL'`); the object is the log's row id.
pub(crate) const LOG_LOCK_CLASS: i32 = 0x524d_504c;

/// How long a released lock's cleanup is waited for before the caller goes on (it finishes,
/// or closes its connection, in the background).
const RELEASE_WAIT: Duration = Duration::from_secs(5);

/// The lock's object for log `id`. Ids beyond 2³¹ share objects with smaller ones, which only
/// makes two sessions exclude each other, never lets two writers into one.
pub(crate) fn lock_object(log: i64) -> i32 {
    i32::try_from(log & 0x7fff_ffff).unwrap_or(i32::MAX)
}

/// The lock's connection while a guard holds it, shared by the medium's appends.
type Held = Arc<Mutex<Option<Conn>>>;

fn held(slot: &Held) -> MutexGuard<'_, Option<Conn>> {
    slot.lock().unwrap_or_else(|p| p.into_inner())
}

/// One session's log (see the module docs). Handles opened by different stores, threads or
/// processes share the log through the database.
#[derive(Debug)]
pub struct PgMedium {
    db: Arc<Db>,
    log: i64,
    name: PathBuf,
    held: Held,
    /// The end of the log as this handle last saw it: where its next append goes.
    end: AtomicU64,
}

impl PgMedium {
    pub(crate) fn new(db: Arc<Db>, log: i64, session_id: &str) -> Self {
        let name = db.name.join("sessions").join(format!("{session_id}.jsonl"));
        Self {
            db,
            log,
            name,
            held: Arc::default(),
            end: AtomicU64::new(0),
        }
    }

    /// The connection to use: the lock's while it is held (so nothing is written without
    /// it), else one from the query pool.
    async fn client(db: &Db, held: Option<Conn>) -> Result<Conn, DbError> {
        match held {
            Some(conn) => Ok(conn),
            None => connection(&db.pool).await,
        }
    }

    fn held_conn(&self) -> Option<Conn> {
        held(&self.held).clone()
    }
}

fn as_i64(n: u64) -> io::Result<i64> {
    i64::try_from(n).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))
}

impl SessionMedium for PgMedium {
    fn path(&self) -> &Path {
        &self.name
    }

    fn len(&self) -> io::Result<u64> {
        let end: i64 = self
            .db
            .read(|| {
                let (db, log, conn) = (Arc::clone(&self.db), self.log, self.held_conn());
                async move {
                    let client = Self::client(&db, conn).await?;
                    let row = client
                        .query_opt(
                            "SELECT end_offset FROM rampart_lines WHERE log = $1 \
                             ORDER BY start_offset DESC LIMIT 1",
                            &[&log],
                        )
                        .await?;
                    Ok(row.map_or(0, |r| r.get(0)))
                }
            })
            .map_err(DbError::into_io)?;
        let end = u64::try_from(end).unwrap_or(0);
        self.end.store(end, Ordering::Release);
        Ok(end)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let (from, want) = (as_i64(offset)?, as_i64(buf.len() as u64)?);
        let pieces: Vec<(i64, Vec<u8>)> = self
            .db
            .read(|| {
                let (db, log, conn) = (Arc::clone(&self.db), self.log, self.held_conn());
                async move {
                    let client = Self::client(&db, conn).await?;
                    // Only the bytes asked for, from each row the range touches.
                    let rows = client
                        .query(
                            "SELECT greatest(start_offset, $2), \
                                substring(bytes FROM (greatest($2 - start_offset, 0) + 1)::int \
                                          FOR (least(end_offset, $2 + $3) \
                                               - greatest(start_offset, $2))::int) \
                         FROM rampart_lines \
                         WHERE log = $1 AND end_offset > $2 AND start_offset < $2 + $3 \
                         ORDER BY start_offset",
                            &[&log, &from, &want],
                        )
                        .await?;
                    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
                }
            })
            .map_err(DbError::into_io)?;
        let mut filled = 0usize;
        for (at, bytes) in pieces {
            if at != from + filled as i64 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "the log of {} has a gap at byte {} (rows must be contiguous); it was \
                         changed outside rampart",
                        self.name.display(),
                        from + filled as i64
                    ),
                ));
            }
            let n = bytes.len().min(buf.len() - filled);
            buf[filled..filled + n].copy_from_slice(&bytes[..n]);
            filled += n;
        }
        Ok(filled)
    }

    fn append(&self, bytes: &[u8]) -> io::Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        let start = self.end.load(Ordering::Acquire);
        let end = start + bytes.len() as u64;
        let db = Arc::clone(&self.db);
        let (log, conn) = (self.log, self.held_conn());
        let (start_i, end_i) = (as_i64(start)?, as_i64(end)?);
        let owned = bytes.to_vec();
        let result = self.db.call(async move {
            let client = Self::client(&db, conn).await?;
            client
                .execute(
                    "INSERT INTO rampart_lines (log, start_offset, end_offset, bytes) \
                     VALUES ($1, $2, $3, $4)",
                    &[&log, &start_i, &end_i, &owned],
                )
                .await?;
            Ok(())
        });
        match result {
            Ok(()) => {
                self.end.store(end, Ordering::Release);
                Ok(())
            }
            Err(e) if e.state() == Some(&SqlState::UNIQUE_VIOLATION) => Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "another writer appended at byte {start} first (this process had lost the \
                     session's lock); nothing was written, open the session again"
                ),
            )),
            Err(e) if e.state() == Some(&SqlState::FOREIGN_KEY_VIOLATION) => Err(io::Error::new(
                io::ErrorKind::NotFound,
                "the session was removed from the store; nothing was written",
            )),
            Err(e) => Err(e.into_io()),
        }
    }

    fn sync(&self) -> io::Result<()> {
        // Every append is its own committed statement: durable once `append` returned.
        Ok(())
    }

    fn check_current(&self) -> Result<(), String> {
        let db = Arc::clone(&self.db);
        let (log, conn) = (self.log, self.held_conn());
        let exists = self.db.call(async move {
            let client = Self::client(&db, conn).await?;
            let row = client
                .query_opt("SELECT 1 FROM rampart_logs WHERE id = $1", &[&log])
                .await?;
            Ok(row.is_some())
        });
        match exists {
            Ok(true) => Ok(()),
            Ok(false) => Err("the session was removed from the store".into()),
            // Not a conflict: the next call fails with the database's error.
            Err(_) => Ok(()),
        }
    }

    fn lock(&self, timeout: Duration) -> rampart_sessions::error::Result<Box<dyn MediumGuard>> {
        let db = Arc::clone(&self.db);
        let (log, object) = (self.log, lock_object(self.log));
        let application = format!(
            "{} since {}",
            crate::options::base_application_name(),
            chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ")
        );
        let taken = self.db.call_within(
            timeout + self.db.operation_timeout,
            acquire(db, object, timeout, application),
        );
        let lock_name = || {
            self.db
                .name
                .join(format!("advisory-lock/{LOG_LOCK_CLASS}/{object}"))
        };
        match taken {
            Ok(Acquired::Held(conn)) => {
                *held(&self.held) = Some(conn);
                tracing::trace!(store = %self.db.name.display(), log, "session lock taken");
                Ok(Box::new(PgLockGuard {
                    db: Arc::clone(&self.db),
                    held: Arc::clone(&self.held),
                }))
            }
            Ok(Acquired::Busy(holder)) => Err(SessionError::Locked {
                path: self.name.clone(),
                lock_path: lock_name(),
                holder,
                waited: timeout,
            }),
            Err(e) => Err(SessionError::Io {
                path: self.name.clone(),
                action: "take the write lock of",
                source: e.into_io(),
            }),
        }
    }
}

/// How a lock wait ended.
enum Acquired {
    Held(Conn),
    Busy(Option<LockHolder>),
}

/// A lock connection that is closed, not pooled, if it is let go before it is kept: an
/// advisory lock taken in a wait that was cut short must not stay on a pooled connection.
struct Unkept(Option<Object>);

impl Unkept {
    fn keep(mut self) -> Option<Object> {
        self.0.take()
    }
}

impl Drop for Unkept {
    fn drop(&mut self) {
        if let Some(object) = self.0.take() {
            drop(Object::take(object));
        }
    }
}

/// Waits for the log's lock on a lock connection until `timeout` (see the module docs).
async fn acquire(
    db: Arc<Db>,
    object: i32,
    timeout: Duration,
    application: String,
) -> Result<Acquired, DbError> {
    let deadline = Instant::now() + timeout;
    let until = tokio::time::Instant::from_std(deadline);
    let client = match tokio::time::timeout_at(until, db.locks.get()).await {
        Ok(client) => Unkept(Some(client?)),
        // Every lock connection is busy with a turn: the same as a busy lock to the caller.
        Err(_) => return Ok(Acquired::Busy(None)),
    };
    let Some(conn) = client.0.as_ref() else {
        return Err(DbError::Stopped);
    };
    let mut pause = Duration::from_millis(2);
    loop {
        let got: bool = conn
            .query_one(
                "SELECT pg_try_advisory_lock($1, $2)",
                &[&LOG_LOCK_CLASS, &object],
            )
            .await?
            .get(0);
        if got {
            // Who holds it, for a waiter's error message.
            conn.execute(
                "SELECT set_config('application_name', $1, false)",
                &[&application],
            )
            .await?;
            return match client.keep() {
                Some(object) => Ok(Acquired::Held(Arc::new(object))),
                None => Err(DbError::Stopped),
            };
        }
        let now = Instant::now();
        if now >= deadline {
            let holder = holder(conn, object).await.unwrap_or(None);
            return Ok(Acquired::Busy(holder));
        }
        tokio::time::sleep(pause.min(deadline - now)).await;
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// The process holding the lock, from its connection's application name
/// (`rampart pid N since T`), when it is a rampart process.
async fn holder(client: &Object, object: i32) -> Result<Option<LockHolder>, DbError> {
    let row = client
        .query_opt(
            "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid \
             WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 \
               AND l.classid::bigint = $1 AND l.objid::bigint = $2 \
               AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
             LIMIT 1",
            &[&i64::from(LOG_LOCK_CLASS), &i64::from(object)],
        )
        .await?;
    let Some(row) = row else { return Ok(None) };
    let name: Option<String> = row.get(0);
    Ok(name.as_deref().and_then(parse_holder))
}

/// `rampart pid N since T` as a holder.
pub(crate) fn parse_holder(name: &str) -> Option<LockHolder> {
    let rest = name.strip_prefix("rampart pid ")?;
    let (pid, since) = rest.split_once(" since ")?;
    Some(LockHolder {
        pid: pid.parse().ok()?,
        process_start: None,
        acquired_at: since.to_owned(),
    })
}

/// A held lock: dropping it unlocks on the same connection and returns the connection to the
/// lock pool, or closes the connection when the unlock fails (then the database releases it).
#[derive(Debug)]
struct PgLockGuard {
    db: Arc<Db>,
    held: Held,
}

impl MediumGuard for PgLockGuard {}

impl Drop for PgLockGuard {
    fn drop(&mut self) {
        let Some(conn) = held(&self.held).take() else {
            return;
        };
        self.db.finish(RELEASE_WAIT, async move {
            let released = conn
                .batch_execute("SELECT pg_advisory_unlock_all(); RESET application_name")
                .await;
            if released.is_err()
                && let Ok(object) = Arc::try_unwrap(conn)
            {
                // Closing the connection releases the lock.
                drop(Object::take(object));
            }
        });
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "medium_tests.rs"]
mod tests;
