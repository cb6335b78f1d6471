//! Blobs in `rampart_blobs`: the [`BlobMedium`] of [`PgStore`], so the originals of capped
//! tool results live in the database every replica reaches.
//!
//! A blob is one row keyed by its SHA-256 (hex), its bytes in a `bytea`. A put is one
//! `INSERT … ON CONFLICT DO NOTHING`, durable when it returns (the commit is synchronous), so
//! the session line naming the blob is written after it is safe, and two replicas storing the
//! same output at once store it once. The table's check refuses bytes that do not hash to
//! their name (see the migration in `schema.rs`).
//!
//! A blob's size is bounded by PostgreSQL's 1 GB per value; the originals kept here are tool
//! outputs and over-long messages, far below that.

use std::path::Path;
use std::sync::Arc;

use rampart_sessions::blobs::{Blob, BlobError, BlobMedium, BlobRef};

use crate::PgStore;
use crate::bridge::{Db, connection};
use crate::error::DbError;

/// The blobs of one store (see the module docs). Cheap to clone; shares the store's runtime
/// and pool.
#[derive(Debug, Clone)]
pub struct PgBlobs {
    db: Arc<Db>,
}

impl PgStore {
    /// This store's blobs.
    pub fn blob_medium(&self) -> PgBlobs {
        PgBlobs {
            db: Arc::clone(&self.db),
        }
    }
}

impl PgBlobs {
    fn fail(&self, operation: &'static str) -> impl Fn(DbError) -> BlobError + '_ {
        move |e| {
            if e.is_unavailable() {
                BlobError::Unavailable {
                    place: self.db.name.clone(),
                    operation,
                    reason: e.detail(),
                }
            } else {
                BlobError::Database {
                    place: self.db.name.clone(),
                    operation,
                    reason: e.detail(),
                }
            }
        }
    }
}

impl BlobMedium for PgBlobs {
    fn describe(&self) -> &Path {
        &self.db.name
    }

    fn put(&self, blob: Blob<'_>) -> Result<bool, BlobError> {
        let hex = blob.reference().hex().to_owned();
        let bytes = blob.bytes().to_vec();
        let size = bytes.len();
        // A lost connection is retried once, as reads are: the insert is idempotent.
        let inserted = self
            .db
            .read(|| {
                let (pool, hex, bytes) = (self.db.pool.clone(), hex.clone(), bytes.clone());
                async move {
                    let client = connection(&pool).await?;
                    Ok(client
                        .execute(
                            "INSERT INTO rampart_blobs (hash, bytes) VALUES ($1, $2) \
                             ON CONFLICT (hash) DO NOTHING",
                            &[&hex, &bytes],
                        )
                        .await?)
                }
            })
            .map_err(self.fail("store a blob"))?;
        if inserted > 0 {
            tracing::debug!(blob = %blob.reference(), bytes = size, store = %self.db.name.display(), "blob stored");
        }
        Ok(inserted > 0)
    }

    fn get(&self, reference: &BlobRef) -> Result<Vec<u8>, BlobError> {
        let hex = reference.hex().to_owned();
        let found: Option<Vec<u8>> = self
            .db
            .read(|| {
                let (pool, hex) = (self.db.pool.clone(), hex.clone());
                async move {
                    let client = connection(&pool).await?;
                    Ok(client
                        .query_opt("SELECT bytes FROM rampart_blobs WHERE hash = $1", &[&hex])
                        .await?
                        .map(|row| row.get(0)))
                }
            })
            .map_err(self.fail("read a blob"))?;
        found.ok_or_else(|| BlobError::Missing {
            place: self.db.name.clone(),
            reference: reference.to_string(),
        })
    }

    fn contains(&self, reference: &BlobRef) -> Result<bool, BlobError> {
        let hex = reference.hex().to_owned();
        self.db
            .read(|| {
                let (pool, hex) = (self.db.pool.clone(), hex.clone());
                async move {
                    let client = connection(&pool).await?;
                    Ok(client
                        .query_opt("SELECT 1 FROM rampart_blobs WHERE hash = $1", &[&hex])
                        .await?
                        .is_some())
                }
            })
            .map_err(self.fail("look for a blob"))
    }

    fn list(&self) -> Result<Vec<BlobRef>, BlobError> {
        let hashes: Vec<String> = self
            .db
            .read(|| {
                let pool = self.db.pool.clone();
                async move {
                    let client = connection(&pool).await?;
                    let rows = client
                        .query("SELECT hash FROM rampart_blobs ORDER BY hash", &[])
                        .await?;
                    Ok(rows.iter().map(|r| r.get(0)).collect())
                }
            })
            .map_err(self.fail("list the blobs"))?;
        hashes
            .iter()
            .map(|h| {
                BlobRef::from_hex(h).ok_or_else(|| BlobError::Database {
                    place: self.db.name.clone(),
                    operation: "list the blobs",
                    reason: format!("a row of rampart_blobs is named `{h}`, not a SHA-256"),
                })
            })
            .collect()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "blobs_tests.rs"]
mod tests;
