//! `rampart-store-postgres`: the store `rampart serve` replicas share, in PostgreSQL.
//!
//! [`PgStore`] implements [`SharedStore`](rampart_sessions::store::shared::SharedStore): the
//! registry is a table of entries (the JSON `sessions.json` holds, so nothing an entry carries
//! is lost), and each session is a log of the pi JSONL bytes its appends wrote, read through
//! [`PgMedium`], a [`SessionMedium`](rampart_sessions::SessionMedium). So a session in the
//! database behaves as a session file does (catch-up before every append, the tree, the line
//! checks), and a session moves between a directory and the database as its JSONL, unchanged.
//!
//! - [`options`]: the URL (no password in it), the password's environment variable, pools;
//! - [`schema`](crate::schema): versioned migrations, applied when a store is opened;
//! - the registry (`registry.rs`): the six methods of `SharedStore`, each one statement or
//!   one transaction;
//! - [`medium`]: a session's log and its advisory write lock;
//! - the blobs (`blobs.rs`, [`PgBlobs`]): the originals of capped tool results, one row per
//!   content hash, so any replica reads what another stored;
//! - whole sessions in and out as JSONL (`transfer.rs`), for `rampart sessions migrate`;
//! - what `rampart sessions doctor` finds: logs no entry names, entries without a log
//!   (`audit.rs`);
//! - the bridge (`bridge.rs`): the synchronous calls run on a runtime the store owns.
//!
//! Why tokio-postgres with deadpool-postgres, and not the synchronous `postgres` crate or
//! sqlx: the store's traits are synchronous, and `rampart serve` calls them from tokio's
//! blocking pool and from async handlers alike. The `postgres` crate runs `block_on` on the
//! calling thread, which panics on a tokio worker; here every query is a future on the
//! store's own two-thread runtime and the caller waits on a channel, which is allowed
//! anywhere. deadpool gives the pool its size, wait and connect timeouts, a cleaning recycle
//! for lock connections, and the figures `/metrics` shows; sqlx would add a second async
//! stack and compile-time query tooling the store does not need. Both crates are maintained
//! by the rust-postgres and deadpool projects and widely used.
//!
//! Connections are plain TCP (or a Unix socket): TLS is not built in yet, so reach a remote
//! database over a private network or a tunnel.

mod audit;
mod blobs;
mod bridge;
pub mod error;
pub mod medium;
pub mod options;
mod registry;
mod schema;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod transfer;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

pub use audit::UnregisteredLog;
pub use blobs::PgBlobs;
pub use error::PgStoreError;
pub use medium::PgMedium;
pub use options::{PgStoreOptions, is_postgres_url};
use rampart_sessions::store::StoreError;
pub use transfer::Imported;

use bridge::{Db, connection};

/// A PostgreSQL store (see the crate docs). Clones share one runtime and pools.
#[derive(Debug, Clone)]
pub struct PgStore {
    db: Arc<Db>,
}

pub use rampart_sessions::store::shared::{PoolFigures, StoreCounters};

/// A pool's figures from deadpool's status.
fn figures(s: deadpool_postgres::Status) -> PoolFigures {
    PoolFigures {
        max: s.max_size,
        open: s.size,
        idle: s.available,
        waiting: s.waiting,
    }
}

/// What the store has done since it was opened, and its pools now, for `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PgStoreStats {
    /// Operations, failures and their time.
    pub counters: StoreCounters,
    /// The query pool.
    pub pool: PoolFigures,
    /// The lock pool (one connection per turn in flight).
    pub locks: PoolFigures,
}

impl PgStore {
    /// Connects to the store `options` names and brings its schema up to this build's
    /// version. Fails with [`PgStoreError::SchemaTooNew`] when a newer rampart migrated it,
    /// and with [`PgStoreError::Unreachable`] when the database cannot be reached.
    pub fn open(options: &PgStoreOptions) -> Result<Self, PgStoreError> {
        Self::open_at(options, schema::latest(), true)
    }

    /// [`open`](Self::open) for a command that only reads: a database with no store in it is
    /// [`PgStoreError::NoStore`] rather than a new, empty store, so a mistyped URL creates no
    /// tables. A store of an older schema is migrated, as `open` does.
    pub fn open_existing(options: &PgStoreOptions) -> Result<Self, PgStoreError> {
        Self::open_at(options, schema::latest(), false)
    }

    /// [`open`](Self::open), migrating only up to `version` (tests of the migrations); with
    /// `create` false, an empty database is refused (see [`open_existing`](Self::open_existing)).
    pub(crate) fn open_at(
        options: &PgStoreOptions,
        version: i32,
        create: bool,
    ) -> Result<Self, PgStoreError> {
        let db = Db::new(options)?;
        let name = db.name.clone();
        let pool = db.pool.clone();
        let migrated = db
            .call(async move {
                let mut object = pool.get().await?;
                let client: &mut tokio_postgres::Client = &mut object;
                if !create && schema::current_version(client).await? == 0 {
                    return Ok(Err(PgStoreError::NoStore { store: name }));
                }
                Ok(schema::migrate(client, &name, version).await)
            })
            .map_err(|e| PgStoreError::Unreachable {
                store: db.name.clone(),
                reason: e.detail(),
            })??;
        tracing::debug!(
            store = %db.name.display(),
            from_version = migrated,
            version,
            pool_size = options.pool_size,
            lock_connections = options.lock_connections,
            "opened the PostgreSQL session store"
        );
        Ok(Self { db })
    }

    /// What errors and logs call the store (`postgres://USER@HOST:PORT/DATABASE`).
    pub fn name(&self) -> &Path {
        &self.db.name
    }

    /// The schema version of the database now.
    pub fn schema_version(&self) -> Result<i32, StoreError> {
        let pool = self.db.pool.clone();
        self.db
            .call(async move {
                let client = connection(&pool).await?;
                schema::current_version(&client).await
            })
            .map_err(|e| e.into_store(&self.db.name, "read the schema version"))
    }

    /// The newest schema version this build knows (what [`open`](Self::open) migrates to).
    pub fn supported_schema_version() -> i32 {
        schema::latest()
    }

    /// One round trip to the database: how long it took, or why it failed.
    pub fn ping(&self) -> Result<Duration, StoreError> {
        let pool = self.db.pool.clone();
        let started = Instant::now();
        self.db
            .call(async move {
                let client = connection(&pool).await?;
                client.query_one("SELECT 1", &[]).await?;
                Ok(())
            })
            .map_err(|e| e.into_store(&self.db.name, "answer a ping"))?;
        Ok(started.elapsed())
    }

    /// The store's counters and its pools now.
    pub fn stats(&self) -> PgStoreStats {
        let c = &self.db.counters;
        PgStoreStats {
            counters: StoreCounters {
                operations: c.operations.load(Ordering::Relaxed),
                failures: c.failures.load(Ordering::Relaxed),
                unavailable: c.unavailable.load(Ordering::Relaxed),
                total_micros: c.micros.load(Ordering::Relaxed),
            },
            pool: figures(self.db.pool.status()),
            locks: figures(self.db.locks.status()),
        }
    }
}
