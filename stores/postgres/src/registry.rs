//! The registry in `rampart_registry`: [`SharedStore`] for [`PgStore`].
//!
//! Each method is one statement, or one transaction on one connection:
//! - `create` serialises with every other `create` on a transaction-scoped advisory lock, so
//!   the keys `pick` is told are taken stay taken until the new key is in, on every replica;
//!   the entry, the log and its header line are written in that transaction, all or nothing;
//! - `record` and `record_many` read the entries `FOR UPDATE` and write them back in one
//!   transaction, so two replicas' counters never overwrite each other's; `record_many` locks
//!   its keys in key order, so two batches never deadlock.

use std::cell::RefCell;
use std::path::Path;
use std::sync::Arc;

use rampart_sessions::blobs::BlobMedium;
use rampart_sessions::entry::SessionHeader;
use rampart_sessions::store::shared::{EntryFields, PickKey, SharedStore, StoreHealth};
use rampart_sessions::store::{
    RegistryChange, SessionEntry, StoreError, apply_changes, is_safe_session_id, normalize_key,
    now_unix_ms,
};
use rampart_sessions::{Session, SessionOptions};

use crate::PgStore;
use crate::bridge::{Conn, Db, connection};
use crate::error::DbError;
use crate::medium::PgMedium;
use crate::schema::{CREATE_LOCK, REGISTRY_LOCK_CLASS};

/// `entry` as the database keeps it.
fn entry_text(entry: &SessionEntry) -> Result<String, DbError> {
    serde_json::to_string(entry).map_err(|e| DbError::Corrupt(e.to_string()))
}

/// The entry of `key` from its stored JSON.
fn parse_entry(key: &str, text: &str) -> Result<SessionEntry, DbError> {
    serde_json::from_str(text).map_err(|e| {
        DbError::Corrupt(format!(
            "the registry row of `{key}` is not a session entry ({e}); fix or delete that row \
             of rampart_registry"
        ))
    })
}

fn as_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A `LIKE` pattern matching the keys that start with `prefix`, and nothing else.
fn prefix_pattern(prefix: &str) -> String {
    let mut pattern = String::with_capacity(prefix.len() + 1);
    for c in prefix.chars() {
        if matches!(c, '\\' | '%' | '_') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

/// Reads `key`'s entry `FOR UPDATE` in `tx`, applies `changes`, writes it back.
async fn apply_in(
    tx: &deadpool_postgres::Transaction<'_>,
    key: &str,
    changes: Vec<RegistryChange>,
    keep: usize,
) -> Result<Option<SessionEntry>, DbError> {
    let Some(row) = tx
        .query_opt(
            "SELECT entry FROM rampart_registry WHERE key = $1 FOR UPDATE",
            &[&key],
        )
        .await?
    else {
        return Ok(None);
    };
    let mut entry = parse_entry(key, row.get(0))?;
    apply_changes(&mut entry, changes, keep);
    tx.execute(
        "UPDATE rampart_registry SET entry = $2, updated_at = $3 WHERE key = $1",
        &[&key, &entry_text(&entry)?, &as_i64(entry.updated_at)],
    )
    .await?;
    Ok(Some(entry))
}

/// A transaction of several calls from this thread (`create`, whose `pick` runs here), on one
/// connection. Dropped without [`commit`](Self::commit), it rolls back, or closes the
/// connection when even that fails, so no pooled connection is left inside a transaction.
struct OpenTransaction<'a> {
    db: &'a Arc<Db>,
    conn: Option<Conn>,
}

impl<'a> OpenTransaction<'a> {
    fn begin(db: &'a Arc<Db>) -> Result<Self, DbError> {
        let pool = db.pool.clone();
        let conn = db.call(async move { connection(&pool).await })?;
        let this = Self {
            db,
            conn: Some(conn),
        };
        this.run(|c| async move {
            c.batch_execute("BEGIN").await?;
            c.execute(
                "SELECT pg_advisory_xact_lock($1, $2)",
                &[&REGISTRY_LOCK_CLASS, &CREATE_LOCK],
            )
            .await?;
            Ok(())
        })?;
        Ok(this)
    }

    fn run<T, F, Fut>(&self, step: F) -> Result<T, DbError>
    where
        F: FnOnce(Conn) -> Fut,
        Fut: std::future::Future<Output = Result<T, DbError>> + Send + 'static,
        T: Send + 'static,
    {
        let conn = self.conn.clone().ok_or(DbError::Stopped)?;
        self.db.call(step(conn))
    }

    fn commit(mut self) -> Result<(), DbError> {
        let result = self.run(|c| async move { Ok(c.batch_execute("COMMIT").await?) });
        if result.is_ok() {
            self.conn = None;
        }
        result
    }
}

impl Drop for OpenTransaction<'_> {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else { return };
        self.db
            .finish(std::time::Duration::from_secs(5), async move {
                if conn.batch_execute("ROLLBACK").await.is_err()
                    && let Ok(object) = Arc::try_unwrap(conn)
                {
                    drop(deadpool_postgres::Object::take(object));
                }
            });
    }
}

impl PgStore {
    fn fail(&self, operation: &'static str) -> impl Fn(DbError) -> StoreError + '_ {
        move |e| e.into_store(&self.db.name, operation)
    }

    fn unknown(&self, key: &str) -> StoreError {
        StoreError::UnknownSession {
            key: key.to_owned(),
            path: self.db.name.clone(),
        }
    }

    /// Creates `key` with a new log holding `header` inside `tx`.
    fn insert_new(
        &self,
        tx: &OpenTransaction<'_>,
        key: &str,
        header: &SessionHeader,
        fields: EntryFields,
    ) -> Result<(), StoreError> {
        let id = header.id.clone();
        if !is_safe_session_id(&id) {
            return Err(StoreError::Database {
                store: self.db.name.clone(),
                operation: "register a session",
                reason: format!(
                    "the session id `{id}` is not a safe file name (letters, digits, `-`, `_`, \
                     `.`), so it could not be exported as a file"
                ),
            });
        }
        let mut line = header.to_json_line().map_err(|e| StoreError::Serialize {
            path: self.db.name.clone(),
            source: e,
        })?;
        line.push('\n');
        let mut entry = SessionEntry::new(id.clone(), now_unix_ms());
        entry.session_file = Some(format!("{id}.jsonl"));
        entry.extra.extend(fields);
        let text = entry_text(&entry).map_err(self.fail("register a session"))?;
        let (key, updated) = (key.to_owned(), as_i64(entry.updated_at));
        tx.run(|c| async move {
            let log: i64 = c
                .query_one(
                    "INSERT INTO rampart_logs (session_id) VALUES ($1) RETURNING id",
                    &[&id],
                )
                .await?
                .get(0);
            let bytes = line.into_bytes();
            let end = bytes.len() as i64;
            c.execute(
                "INSERT INTO rampart_lines (log, start_offset, end_offset, bytes) \
                 VALUES ($1, 0, $2, $3)",
                &[&log, &end, &bytes],
            )
            .await?;
            c.execute(
                "INSERT INTO rampart_registry (key, session_id, updated_at, entry) \
                 VALUES ($1, $2, $3, $4)",
                &[&key, &id, &updated, &text],
            )
            .await?;
            Ok(())
        })
        .map_err(self.fail("register a session"))
    }
}

impl SharedStore for PgStore {
    /// A ping, the schema version, and the pools' figures.
    fn health(&self) -> StoreHealth {
        let mut detail = serde_json::Map::new();
        detail.insert("store".into(), self.db.name.display().to_string().into());
        let ping = self.ping();
        match &ping {
            Ok(latency) => {
                let ms = latency.as_secs_f64() * 1000.0;
                detail.insert("latencyMs".into(), ((ms * 100.0).round() / 100.0).into());
            }
            Err(e) => {
                detail.insert("error".into(), e.to_string().into());
            }
        }
        let stats = self.stats();
        for (name, pool) in [("pool", stats.pool), ("lockPool", stats.locks)] {
            detail.insert(
                name.into(),
                serde_json::json!({
                    "max": pool.max, "open": pool.open, "idle": pool.idle, "waiting": pool.waiting
                }),
            );
        }
        StoreHealth {
            backend: "postgres",
            reachable: ping.is_ok(),
            latency: ping.as_ref().ok().copied(),
            pools: vec![("query", stats.pool), ("lock", stats.locks)],
            counters: Some(stats.counters),
            detail,
        }
    }

    fn describe(&self) -> &Path {
        &self.db.name
    }

    fn get(&self, key: &str) -> Result<Option<SessionEntry>, StoreError> {
        let key = normalize_key(key);
        self.db
            .read(|| {
                let (pool, key) = (self.db.pool.clone(), key.clone());
                async move {
                    let client = connection(&pool).await?;
                    let row = client
                        .query_opt("SELECT entry FROM rampart_registry WHERE key = $1", &[&key])
                        .await?;
                    row.map(|r| parse_entry(&key, r.get(0))).transpose()
                }
            })
            .map_err(self.fail("read the registry"))
    }

    fn family(
        &self,
        prefix: &str,
        exact: Option<&str>,
    ) -> Result<Vec<(String, SessionEntry)>, StoreError> {
        let pattern = prefix_pattern(prefix);
        let exact = exact.map(str::to_owned);
        self.db
            .read(|| {
                let (pool, pattern, exact) = (self.db.pool.clone(), pattern.clone(), exact.clone());
                async move {
                    let client = connection(&pool).await?;
                    let rows = client
                        .query(
                            "SELECT key, entry FROM rampart_registry \
                             WHERE key LIKE $1 ESCAPE '\\' OR key = $2 \
                             ORDER BY updated_at DESC, key",
                            &[&pattern, &exact],
                        )
                        .await?;
                    rows.iter()
                        .map(|r| {
                            let key: String = r.get(0);
                            let entry = parse_entry(&key, r.get(1))?;
                            Ok((key, entry))
                        })
                        .collect()
                }
            })
            .map_err(self.fail("read the registry"))
    }

    fn count(&self) -> Result<usize, StoreError> {
        let n: i64 = self
            .db
            .read(|| {
                let pool = self.db.pool.clone();
                async move {
                    let client = connection(&pool).await?;
                    Ok(client
                        .query_one("SELECT count(*) FROM rampart_registry", &[])
                        .await?
                        .get(0))
                }
            })
            .map_err(self.fail("count the registry"))?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    fn create(
        &self,
        pick: &mut PickKey<'_>,
        header: SessionHeader,
        fields: EntryFields,
    ) -> Result<(String, bool), StoreError> {
        let tx = OpenTransaction::begin(&self.db).map_err(self.fail("register a session"))?;
        let exists = |key: String| {
            tx.run(|c| async move {
                Ok(
                    c.query_opt("SELECT 1 FROM rampart_registry WHERE key = $1", &[&key])
                        .await?
                        .is_some(),
                )
            })
        };
        // `pick` cannot fail; a failed lookup says "taken" and is reported after it.
        let lookup_error: RefCell<Option<DbError>> = RefCell::new(None);
        let key = normalize_key(&pick(
            &|candidate: &str| match exists(normalize_key(candidate)) {
                Ok(taken) => taken,
                Err(e) => {
                    lookup_error.borrow_mut().get_or_insert(e);
                    true
                }
            },
        ));
        if let Some(e) = lookup_error.into_inner() {
            return Err(e.into_store(&self.db.name, "register a session"));
        }
        if exists(key.clone()).map_err(self.fail("register a session"))? {
            // Dropping the transaction rolls it back.
            return Ok((key, false));
        }
        self.insert_new(&tx, &key, &header, fields)?;
        tx.commit().map_err(self.fail("register a session"))?;
        tracing::debug!(store = %self.db.name.display(), key, session_id = %header.id, "session registered");
        Ok((key, true))
    }

    fn open(
        &self,
        key: &str,
        entry: &SessionEntry,
        options: SessionOptions,
    ) -> Result<Session, StoreError> {
        let log: Option<i64> = self
            .db
            .read(|| {
                let (pool, session_id) = (self.db.pool.clone(), entry.session_id.clone());
                async move {
                    let client = connection(&pool).await?;
                    Ok(client
                        .query_opt(
                            "SELECT id FROM rampart_logs WHERE session_id = $1",
                            &[&session_id],
                        )
                        .await?
                        .map(|r| r.get(0)))
                }
            })
            .map_err(self.fail("open a session"))?;
        let log = log.ok_or_else(|| self.unknown(key))?;
        let medium = PgMedium::new(Arc::clone(&self.db), log, &entry.session_id);
        Session::open_on(Box::new(medium), options).map_err(|e| StoreError::Session(Box::new(e)))
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
        let pool = self.db.pool.clone();
        let in_tx = key.clone();
        let updated = self
            .db
            .call(async move {
                let mut client = pool.get().await?;
                let tx = client.transaction().await?;
                let updated = apply_in(&tx, &in_tx, changes, keep_checkpoints).await?;
                tx.commit().await?;
                Ok(updated)
            })
            .map_err(self.fail("update the registry"))?;
        match updated {
            Some(entry) => Ok(Some(entry)),
            None => Err(self.unknown(&key)),
        }
    }

    /// `rampart_blobs`, shared by every replica ([`crate::PgBlobs`]).
    fn blobs(&self) -> Option<Arc<dyn BlobMedium>> {
        Some(Arc::new(self.blob_medium()))
    }

    /// None: the store lives in the database, not in a directory of this machine.
    fn local_dir(&self) -> Option<&Path> {
        None
    }

    /// One transaction for the whole batch, keys locked in key order.
    fn record_many(
        &self,
        batch: Vec<(String, Vec<RegistryChange>)>,
        keep_checkpoints: usize,
    ) -> Result<(), StoreError> {
        let mut by_key: std::collections::BTreeMap<String, Vec<RegistryChange>> =
            std::collections::BTreeMap::new();
        for (key, changes) in batch {
            by_key
                .entry(normalize_key(&key))
                .or_default()
                .extend(changes);
        }
        by_key.retain(|_, changes| !changes.is_empty());
        if by_key.is_empty() {
            return Ok(());
        }
        let pool = self.db.pool.clone();
        self.db
            .call(async move {
                let mut client = pool.get().await?;
                let tx = client.transaction().await?;
                for (key, changes) in by_key {
                    apply_in(&tx, &key, changes, keep_checkpoints).await?;
                }
                tx.commit().await?;
                Ok(())
            })
            .map_err(self.fail("update the registry"))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "registry_tests.rs"]
mod tests;
