//! Whole sessions in and out, as pi JSONL bytes: what `rampart sessions migrate` moves between
//! a sessions directory and the database. The bytes are copied as they are, so a session read
//! back from either side is the same file.

use std::sync::Arc;

use rampart_sessions::store::{SessionEntry, StoreError, is_safe_session_id, normalize_key};

use crate::PgStore;
use crate::bridge::connection;
use crate::error::DbError;

/// What [`PgStore::import_session`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Imported {
    /// The entry and its log were written.
    Written,
    /// The key was registered already: nothing was changed (nothing is ever overwritten).
    AlreadyThere,
    /// The key is new but its log was there with the same bytes (another key names the same
    /// session): the entry was registered on that log.
    SharedLog,
}

impl PgStore {
    /// The whole log of the session `session_id`, as the file would hold it; `None` when the
    /// store has no such log.
    pub fn log_bytes(&self, session_id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let name = self.db.name.clone();
        self.db
            .read(|| {
                let (pool, session_id) = (self.db.pool.clone(), session_id.to_owned());
                async move {
                    let client = connection(&pool).await?;
                    let Some(log) = client
                        .query_opt(
                            "SELECT id FROM rampart_logs WHERE session_id = $1",
                            &[&session_id],
                        )
                        .await?
                    else {
                        return Ok(None);
                    };
                    let log: i64 = log.get(0);
                    let rows = client
                        .query(
                            "SELECT start_offset, bytes FROM rampart_lines WHERE log = $1 \
                             ORDER BY start_offset",
                            &[&log],
                        )
                        .await?;
                    let mut bytes = Vec::new();
                    for row in rows {
                        let start: i64 = row.get(0);
                        if start != bytes.len() as i64 {
                            return Err(DbError::Corrupt(format!(
                                "the log of session `{session_id}` has a gap at byte {}",
                                bytes.len()
                            )));
                        }
                        bytes.extend_from_slice(row.get::<_, &[u8]>(1));
                    }
                    Ok(Some(bytes))
                }
            })
            .map_err(|e| e.into_store(&name, "read a session"))
    }

    /// Registers `entry` under `key` with a log holding `bytes` (a whole pi JSONL file), in one
    /// transaction; a key already registered is left as it is (see [`Imported`]). The entry's
    /// `sessionFile`, when set, becomes `<sessionId>.jsonl`, the name the log has here.
    pub fn import_session(
        &self,
        key: &str,
        entry: &SessionEntry,
        bytes: &[u8],
    ) -> Result<Imported, StoreError> {
        let name = self.db.name.clone();
        let fail = |reason: String| StoreError::Database {
            store: name.clone(),
            operation: "import a session",
            reason,
        };
        if !is_safe_session_id(&entry.session_id) {
            return Err(fail(format!(
                "the session id `{}` of `{key}` is not a safe file name",
                entry.session_id
            )));
        }
        let mut entry = entry.clone();
        if entry.session_file.is_some() {
            entry.session_file = Some(format!("{}.jsonl", entry.session_id));
        }
        let text = serde_json::to_string(&entry).map_err(|e| fail(e.to_string()))?;
        let (key, bytes) = (normalize_key(key), bytes.to_vec());
        let pool = self.db.pool.clone();
        let db = Arc::clone(&self.db);
        let outcome = db.call(async move {
            let mut client = pool.get().await?;
            let tx = client.transaction().await?;
            let taken = tx
                .query_opt(
                    "SELECT 1 FROM rampart_registry WHERE key = $1 FOR UPDATE",
                    &[&key],
                )
                .await?;
            if taken.is_some() {
                return Ok(Ok(Imported::AlreadyThere));
            }
            let existing = tx
                .query_opt(
                    "SELECT id FROM rampart_logs WHERE session_id = $1",
                    &[&entry.session_id],
                )
                .await?;
            let outcome = match existing {
                Some(row) => {
                    let log: i64 = row.get(0);
                    let held: Vec<u8> = tx
                        .query_one(
                            "SELECT coalesce(string_agg(bytes, ''::bytea ORDER BY start_offset), \
                             ''::bytea) FROM rampart_lines WHERE log = $1",
                            &[&log],
                        )
                        .await?
                        .get(0);
                    if held != bytes {
                        return Ok(Err(format!(
                            "the store has another log for session `{}` (registered under \
                             another key, with other content); `{key}` was not imported",
                            entry.session_id
                        )));
                    }
                    Imported::SharedLog
                }
                None => {
                    let log: i64 = tx
                        .query_one(
                            "INSERT INTO rampart_logs (session_id) VALUES ($1) RETURNING id",
                            &[&entry.session_id],
                        )
                        .await?
                        .get(0);
                    if !bytes.is_empty() {
                        tx.execute(
                            "INSERT INTO rampart_lines (log, start_offset, end_offset, bytes) \
                             VALUES ($1, 0, $2, $3)",
                            &[&log, &(bytes.len() as i64), &bytes],
                        )
                        .await?;
                    }
                    Imported::Written
                }
            };
            tx.execute(
                "INSERT INTO rampart_registry (key, session_id, updated_at, entry) \
                 VALUES ($1, $2, $3, $4)",
                &[
                    &key,
                    &entry.session_id,
                    &i64::try_from(entry.updated_at).unwrap_or(i64::MAX),
                    &text,
                ],
            )
            .await?;
            tx.commit().await?;
            Ok(Ok(outcome))
        });
        match outcome {
            Ok(Ok(imported)) => Ok(imported),
            Ok(Err(reason)) => Err(fail(reason)),
            Err(e) => Err(e.into_store(&self.db.name, "import a session")),
        }
    }
}
