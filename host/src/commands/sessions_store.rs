//! Which store a `rampart sessions` command works on: the PostgreSQL store `--store` names,
//! else the sessions directory `--sessions-dir` names, else the database of the
//! configuration's `[serve.store]` (so an operator of replicas sees what they serve), else the
//! platform's sessions directory.

use std::path::Path;

use anyhow::{Context, bail};
use rampart_store_postgres::{PgStore, PgStoreOptions, is_postgres_url};

use crate::config;

/// Connections a command opens: it makes one call at a time.
const COMMAND_POOL: usize = 2;

/// The options of the database a sessions command should use, or `None` for a sessions
/// directory. `store` and `password_env` are the command's flags; `config_flag` is
/// `--config`.
pub fn database_options(
    store: Option<&str>,
    password_env: Option<&str>,
    sessions_dir: Option<&Path>,
    config_flag: Option<&Path>,
) -> anyhow::Result<Option<PgStoreOptions>> {
    let (url, configured_env) = match (store, sessions_dir) {
        (Some(_), Some(_)) => bail!(
            "give either --store (a PostgreSQL store) or --sessions-dir (a directory), not both"
        ),
        (Some(url), None) => {
            if !is_postgres_url(url) {
                bail!(
                    "--store takes a PostgreSQL URL (postgres://USER@HOST:PORT/DATABASE); for a \
                     directory of session files, pass --sessions-dir instead"
                );
            }
            (url.to_owned(), None)
        }
        (None, Some(_)) => return refuse_password_env(password_env),
        (None, None) => match configured_store(config_flag)? {
            Some(found) => found,
            None => return refuse_password_env(password_env),
        },
    };
    let mut options = PgStoreOptions::from_url(&url).context("the session store")?;
    if let Some(var) = password_env.or(configured_env.as_deref()) {
        options = options.password_from_env(var)?;
    }
    Ok(Some(options.with_pools(COMMAND_POOL, 1)?))
}

/// Opens the database `options` names (bringing an older schema up to date, as `serve`
/// does). Only a command that `writes` creates the store in an empty database: a command that
/// reads a mistyped URL says so instead of leaving empty tables behind.
pub fn open_database(options: &PgStoreOptions, writes: bool) -> anyhow::Result<PgStore> {
    let store = if writes {
        PgStore::open(options)?
    } else {
        PgStore::open_existing(options)?
    };
    tracing::debug!(store = %store.name().display(), "sessions command on PostgreSQL");
    Ok(store)
}

/// `--password-env` without a database: an error rather than a flag quietly ignored.
fn refuse_password_env(password_env: Option<&str>) -> anyhow::Result<Option<PgStoreOptions>> {
    if password_env.is_some() {
        bail!(
            "--password-env is the password of a PostgreSQL store, and this command works on a \
             sessions directory; add --store postgres://… or drop --password-env"
        );
    }
    Ok(None)
}

/// `serve.store.url` and `serve.store.passwordEnv` of the configuration, when a configuration
/// file is found and names a database.
fn configured_store(
    config_flag: Option<&Path>,
) -> anyhow::Result<Option<(String, Option<String>)>> {
    let source = config::locate(config_flag)?;
    let Some(path) = source.path() else {
        return Ok(None);
    };
    let loaded = config::load(&source).with_context(|| {
        format!(
            "reading {} for its [serve.store] (the store sessions commands use by default); \
             fix it, or pass --sessions-dir DIR or --store URL",
            path.display()
        )
    })?;
    let store = loaded.serve.store;
    Ok(store.url.map(|url| (url, store.password_env)))
}

#[cfg(test)]
#[path = "sessions_store_tests.rs"]
mod tests;
