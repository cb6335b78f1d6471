//! The store's tables, as numbered migrations applied when a store is opened.
//!
//! `rampart_schema` records each version applied. Opening a store takes a database-wide
//! advisory lock (so replicas starting together migrate once), applies every version newer
//! than the database's, each in its own transaction with its row in `rampart_schema`, and
//! refuses a database whose version is newer than this build knows: an older binary must not
//! write rows a newer schema reads differently.
//!
//! Never edit a migration that shipped; add the next version.

use tokio_postgres::Client;

use crate::error::{DbError, PgStoreError};

/// The advisory-lock class of the store's database-wide locks (`'RMPR'`), with
/// [`MIGRATION_LOCK`] and [`CREATE_LOCK`] as objects.
pub(crate) const REGISTRY_LOCK_CLASS: i32 = 0x524d_5052;
/// Held while migrating.
pub(crate) const MIGRATION_LOCK: i32 = 1;
/// Held (for a transaction) while a key is chosen and registered.
pub(crate) const CREATE_LOCK: i32 = 2;

/// One schema version.
#[derive(Debug)]
pub(crate) struct Migration {
    pub(crate) version: i32,
    pub(crate) description: &'static str,
    pub(crate) sql: &'static str,
}

/// Every version, oldest first.
pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        description: "the session registry",
        // `entry` is the entry as `sessions.json` holds it (JSON text, so fields rampart does
        // not know keep their order); `key` and `updated_at` are copies for lookups and order.
        // Keys compare bytewise (`C`), as the file store sorts them, and so a prefix search
        // uses the primary key's index.
        sql: r#"
            CREATE TABLE rampart_registry (
                key text COLLATE "C" PRIMARY KEY,
                session_id text NOT NULL,
                updated_at bigint NOT NULL,
                entry text NOT NULL
            );
            CREATE INDEX rampart_registry_recent ON rampart_registry (updated_at DESC, key);
        "#,
    },
    Migration {
        version: 2,
        description: "session logs, one row per append",
        // A log is a session's pi JSONL, kept as the byte ranges its appends wrote. The primary
        // key makes an append at an offset another append already took fail: a writer that
        // lost its lock (its connection died and another replica took over) cannot add a turn
        // twice or interleave with the new holder; each acknowledged append is there once.
        sql: r#"
            CREATE TABLE rampart_logs (
                id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                session_id text NOT NULL UNIQUE,
                created_at timestamptz NOT NULL DEFAULT now()
            );
            CREATE TABLE rampart_lines (
                log bigint NOT NULL REFERENCES rampart_logs (id) ON DELETE CASCADE,
                start_offset bigint NOT NULL,
                end_offset bigint NOT NULL,
                bytes bytea NOT NULL,
                PRIMARY KEY (log, start_offset),
                CHECK (start_offset >= 0),
                CHECK (end_offset = start_offset + length(bytes)),
                CHECK (end_offset > start_offset)
            );
        "#,
    },
    Migration {
        version: 3,
        description: "blobs, the originals of shortened content, by content hash",
        // A blob is named by the SHA-256 of its bytes (64 lowercase hex digits, as its
        // `sha256:` reference writes it). The check makes the database itself refuse bytes
        // under another blob's name, so no writer (nor a row copied in by hand) can make a
        // reference read other content; the primary key makes a second store of the same
        // bytes a no-op (`ON CONFLICT DO NOTHING`).
        sql: r#"
            CREATE TABLE rampart_blobs (
                hash text COLLATE "C" PRIMARY KEY,
                bytes bytea NOT NULL,
                created_at timestamptz NOT NULL DEFAULT now(),
                CHECK (hash ~ '^[0-9a-f]{64}$'),
                CHECK (hash = encode(sha256(bytes), 'hex'))
            );
        "#,
    },
];

/// The newest version this build knows.
pub(crate) fn latest() -> i32 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

/// The database's version (0 for an empty database).
pub(crate) async fn current_version(client: &Client) -> Result<i32, DbError> {
    let exists: bool = client
        .query_one("SELECT to_regclass('rampart_schema') IS NOT NULL", &[])
        .await?
        .get(0);
    if !exists {
        return Ok(0);
    }
    Ok(client
        .query_one("SELECT coalesce(max(version), 0) FROM rampart_schema", &[])
        .await?
        .get(0))
}

/// Brings the database up to `target` (see the module docs). Returns the version it was at.
pub(crate) async fn migrate(
    client: &mut Client,
    store: &std::path::Path,
    target: i32,
) -> Result<i32, PgStoreError> {
    let unreachable = |e: DbError| PgStoreError::Unreachable {
        store: store.to_owned(),
        reason: e.detail(),
    };
    client
        .execute(
            "SELECT pg_advisory_lock($1, $2)",
            &[&REGISTRY_LOCK_CLASS, &MIGRATION_LOCK],
        )
        .await
        .map_err(|e| unreachable(e.into()))?;
    let result = migrate_locked(client, store, target).await;
    // The lock goes with the connection too; unlocking keeps a pooled one clean.
    let _ = client
        .execute(
            "SELECT pg_advisory_unlock($1, $2)",
            &[&REGISTRY_LOCK_CLASS, &MIGRATION_LOCK],
        )
        .await;
    result
}

async fn migrate_locked(
    client: &mut Client,
    store: &std::path::Path,
    target: i32,
) -> Result<i32, PgStoreError> {
    let failed = |version: i32, description: &'static str, e: DbError| PgStoreError::Migration {
        store: store.to_owned(),
        version,
        description,
        reason: e.detail(),
    };
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS rampart_schema (
                version integer PRIMARY KEY,
                description text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )",
        )
        .await
        .map_err(|e| failed(0, "the table of schema versions", e.into()))?;
    let found = current_version(client)
        .await
        .map_err(|e| failed(0, "the table of schema versions", e))?;
    if found > latest() {
        return Err(PgStoreError::SchemaTooNew {
            store: store.to_owned(),
            found,
            supported: latest(),
        });
    }
    for migration in MIGRATIONS
        .iter()
        .filter(|m| m.version > found && m.version <= target)
    {
        let apply = async {
            let tx = client.transaction().await?;
            tx.batch_execute(migration.sql).await?;
            tx.execute(
                "INSERT INTO rampart_schema (version, description) VALUES ($1, $2)",
                &[&migration.version, &migration.description],
            )
            .await?;
            tx.commit().await
        };
        apply
            .await
            .map_err(|e| failed(migration.version, migration.description, e.into()))?;
        tracing::info!(
            store = %store.display(),
            version = migration.version,
            description = migration.description,
            "session store schema migrated"
        );
    }
    Ok(found)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "schema_tests.rs"]
mod tests;
