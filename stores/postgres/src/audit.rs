//! What `rampart sessions doctor` checks in a database: logs no registry entry names (a
//! replica killed between writing a session and registering it, or rows copied in by hand),
//! and entries whose log is missing. Both are read-only queries; the repair (registering an
//! orphan) goes through [`PgStore::import_session`], which never overwrites.

use rampart_sessions::store::StoreError;

use crate::PgStore;
use crate::bridge::connection;

/// A session log in `rampart_logs` that no registry entry names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnregisteredLog {
    /// The session id the log belongs to.
    pub session_id: String,
    /// How many bytes of pi JSONL it holds.
    pub bytes: u64,
    /// When the log was created, in Unix milliseconds (what a relinked entry is dated).
    pub created_at_ms: u64,
}

impl PgStore {
    /// The logs no registry entry names, oldest first.
    pub fn unregistered_logs(&self) -> Result<Vec<UnregisteredLog>, StoreError> {
        let name = self.db.name.clone();
        self.db
            .read(|| {
                let pool = self.db.pool.clone();
                async move {
                    let client = connection(&pool).await?;
                    let rows = client
                        .query(
                            "SELECT l.session_id, \
                                    coalesce(sum(length(li.bytes)), 0)::bigint, \
                                    (extract(epoch FROM l.created_at) * 1000)::bigint \
                             FROM rampart_logs l \
                             LEFT JOIN rampart_lines li ON li.log = l.id \
                             WHERE NOT EXISTS \
                               (SELECT 1 FROM rampart_registry r \
                                WHERE r.session_id = l.session_id) \
                             GROUP BY l.id, l.session_id, l.created_at \
                             ORDER BY l.id",
                            &[],
                        )
                        .await?;
                    Ok(rows
                        .iter()
                        .map(|r| UnregisteredLog {
                            session_id: r.get(0),
                            bytes: u64::try_from(r.get::<_, i64>(1)).unwrap_or(0),
                            created_at_ms: u64::try_from(r.get::<_, i64>(2)).unwrap_or(0),
                        })
                        .collect())
                }
            })
            .map_err(|e| e.into_store(&name, "list the logs no entry names"))
    }

    /// The registry keys whose session has no log here, with that session id, by key.
    pub fn keys_without_log(&self) -> Result<Vec<(String, String)>, StoreError> {
        let name = self.db.name.clone();
        self.db
            .read(|| {
                let pool = self.db.pool.clone();
                async move {
                    let client = connection(&pool).await?;
                    let rows = client
                        .query(
                            "SELECT r.key, r.session_id FROM rampart_registry r \
                             WHERE NOT EXISTS \
                               (SELECT 1 FROM rampart_logs l WHERE l.session_id = r.session_id) \
                             ORDER BY r.key",
                            &[],
                        )
                        .await?;
                    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
                }
            })
            .map_err(|e| e.into_store(&name, "list the entries without a log"))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "audit_tests.rs"]
mod tests;
