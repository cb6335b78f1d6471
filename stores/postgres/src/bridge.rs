//! The synchronous store calls, run on a runtime the store owns.
//!
//! [`SharedStore`](rampart_sessions::store::shared::SharedStore) and
//! [`SessionMedium`](rampart_sessions::SessionMedium) are synchronous, and `rampart serve`
//! calls them both from its blocking pool and from its async handlers (`/metrics`,
//! `/healthz`). A synchronous client that runs its own `block_on` (the `postgres` crate)
//! panics on a tokio worker thread. So every operation here is a future spawned on the
//! store's own small runtime, and the calling thread waits for its answer on a channel, which
//! is allowed on any thread: no call of this store can panic for being made from async code.
//!
//! Each operation runs under the store's operation timeout; a connection whose operation was
//! cut short is never handed to another caller in an unknown state (see [`Db::call`]).

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};

use crate::error::{DbError, PgStoreError};
use crate::options::PgStoreOptions;

/// Latency and outcome counters of the store's operations, for `/metrics`.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) operations: AtomicU64,
    pub(crate) failures: AtomicU64,
    pub(crate) unavailable: AtomicU64,
    pub(crate) micros: AtomicU64,
}

/// The runtime, the two pools and the store's name.
pub(crate) struct Db {
    runtime: Option<tokio::runtime::Runtime>,
    /// Connections for queries: registry reads and writes, session reads.
    pub(crate) pool: Pool,
    /// Connections that hold a session's advisory lock, one per holder.
    pub(crate) locks: Pool,
    pub(crate) name: PathBuf,
    pub(crate) operation_timeout: Duration,
    pub(crate) counters: Counters,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

fn pool(
    options: &PgStoreOptions,
    size: usize,
    recycling: RecyclingMethod,
) -> Result<Pool, PgStoreError> {
    let manager = Manager::from_config(
        options.config.clone(),
        tokio_postgres::NoTls,
        ManagerConfig {
            recycling_method: recycling,
        },
    );
    Pool::builder(manager)
        .max_size(size)
        .runtime(Runtime::Tokio1)
        .create_timeout(Some(options.connect_timeout))
        .recycle_timeout(Some(options.connect_timeout))
        .wait_timeout(Some(options.operation_timeout))
        .build()
        .map_err(|e| PgStoreError::Runtime(std::io::Error::other(e.to_string())))
}

impl Db {
    /// The runtime and pools for `options`; connects nothing yet.
    pub(crate) fn new(options: &PgStoreOptions) -> Result<Arc<Self>, PgStoreError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("rampart-store-pg")
            .enable_all()
            .build()
            .map_err(PgStoreError::Runtime)?;
        Ok(Arc::new(Self {
            runtime: Some(runtime),
            pool: pool(options, options.pool_size, RecyclingMethod::Fast)?,
            // A lock connection is checked on the way out of the pool: it must hold no lock
            // a failed release left (`Clean` ends with `pg_advisory_unlock_all()`).
            locks: pool(options, options.lock_connections, RecyclingMethod::Clean)?,
            name: options.name().to_owned(),
            operation_timeout: options.operation_timeout,
            counters: Counters::default(),
        }))
    }

    /// Runs `operation` on the store's runtime within the operation timeout, and waits for
    /// its result on this thread (see the module docs).
    ///
    /// A connection the operation holds when the timeout cuts it short is dropped with the
    /// future; deadpool returns it to its pool, where the next checkout of a lock connection
    /// cleans it, and a query connection has nothing left in flight that another caller could
    /// read: tokio-postgres discards answers nobody waits for.
    pub(crate) fn call<T, Fut>(&self, operation: Fut) -> Result<T, DbError>
    where
        Fut: Future<Output = Result<T, DbError>> + Send + 'static,
        T: Send + 'static,
    {
        self.call_within(self.operation_timeout, operation)
    }

    /// [`call`](Self::call) for a read, made again by `make` once when its connection turned
    /// out to be dead (the database restarted, or ended it): after a restart every idle pooled
    /// connection is dead, and a read should not fail for having drawn one of them.
    pub(crate) fn read<T, F, Fut>(&self, make: F) -> Result<T, DbError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, DbError>> + Send + 'static,
        T: Send + 'static,
    {
        match self.call(make()) {
            Err(e) if e.lost_connection() => self.call(make()),
            other => other,
        }
    }

    /// [`call`](Self::call) with another time limit (a lock wait's deadline).
    pub(crate) fn call_within<T, Fut>(&self, limit: Duration, operation: Fut) -> Result<T, DbError>
    where
        Fut: Future<Output = Result<T, DbError>> + Send + 'static,
        T: Send + 'static,
    {
        let Some(runtime) = &self.runtime else {
            return Err(DbError::Stopped);
        };
        let started = Instant::now();
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        runtime.spawn(async move {
            let result = match tokio::time::timeout(limit, operation).await {
                Ok(result) => result,
                Err(_) => Err(DbError::Timeout(limit)),
            };
            let _ = tx.send(result);
        });
        let result = rx.recv().unwrap_or(Err(DbError::Stopped));
        let counters = &self.counters;
        counters.operations.fetch_add(1, Ordering::Relaxed);
        counters.micros.fetch_add(
            u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        if let Err(error) = &result {
            counters.failures.fetch_add(1, Ordering::Relaxed);
            if error.is_unavailable() {
                counters.unavailable.fetch_add(1, Ordering::Relaxed);
            }
            if error.lost_connection() {
                // The idle connections are as dead as this one (a restart ends them all):
                // new ones are opened as needed.
                let _ = self.pool.retain(|_, _| false);
                let _ = self.locks.retain(|_, _| false);
            }
        }
        result
    }

    /// Runs `cleanup` on the store's runtime without a time limit and waits up to `wait` for
    /// it: for releasing a lock, which must finish (or close its connection) even when the
    /// caller stops waiting.
    pub(crate) fn finish<Fut>(&self, wait: Duration, cleanup: Fut)
    where
        Fut: Future<Output = ()> + Send + 'static,
    {
        let Some(runtime) = &self.runtime else {
            return;
        };
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        runtime.spawn(async move {
            cleanup.await;
            let _ = tx.send(());
        });
        let _ = rx.recv_timeout(wait);
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        // Never blocks, so the last handle may be dropped on any thread, async or not.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// A connection out of a pool, shared between the calls of one holder.
pub(crate) type Conn = Arc<Object>;

/// A connection from `pool`.
pub(crate) async fn connection(pool: &Pool) -> Result<Conn, DbError> {
    Ok(Arc::new(pool.get().await?))
}
