//! Which store `rampart serve` keeps its conversations in: the sessions directory of this
//! machine by default, or the PostgreSQL database `--store` or `[serve.store] url` names, which
//! every replica behind a load balancer reaches (`rampart-store-postgres`).

use std::sync::Arc;

use anyhow::Context;
use rampart_sessions::store::SessionStore;
use rampart_sessions::store::shared::SharedStore;
use rampart_store_postgres::{PgStore, PgStoreOptions, is_postgres_url};

use crate::config::serve::ServeSettings;

/// The store for `settings`, with `flag` (`--store URL`) before `serve.store.url`; the
/// sessions directory `local` when neither names a database.
pub fn open(
    settings: &ServeSettings,
    flag: Option<&str>,
    local: SessionStore,
) -> anyhow::Result<Arc<dyn SharedStore>> {
    let Some(url) = flag.or(settings.store.url.as_deref()) else {
        return Ok(Arc::new(local));
    };
    if flag.is_some() && !is_postgres_url(url) {
        anyhow::bail!(
            "--store takes a PostgreSQL URL (postgres://USER@HOST:PORT/DATABASE); for a \
             directory of session files, pass --sessions-dir instead"
        );
    }
    let options = pg_options(settings, url)?;
    let store = PgStore::open(&options)?;
    tracing::info!(
        store = %store.name().display(),
        pool_size = options.pool_size,
        lock_connections = options.lock_connections,
        "serving conversations from PostgreSQL"
    );
    Ok(Arc::new(store))
}

/// The options of the database at `url` as `[serve.store]` sets them: the password from the
/// variable `passwordEnv` names, `poolSize`, and `lockConnections` (default: one per turn that
/// may run at once).
fn pg_options(settings: &ServeSettings, url: &str) -> anyhow::Result<PgStoreOptions> {
    let store = &settings.store;
    let mut options = PgStoreOptions::from_url(url).context("the session store")?;
    if let Some(var) = &store.password_env {
        options = options
            .password_from_env(var)
            .context("serve.store.passwordEnv")?;
    }
    let pool_size = store.pool_size.unwrap_or(options.pool_size);
    let lock_connections = store.lock_connections.unwrap_or(settings.max_concurrent);
    Ok(options.with_pools(pool_size, lock_connections)?)
}
