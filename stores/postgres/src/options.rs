//! Where the store is and how it connects: a `postgres://` URL without a password, the
//! password from an environment variable, the pool sizes and the timeouts.
//!
//! Why the password never comes from the URL: the URL sits in a config file or on a command
//! line, both of which are shared, pasted into issues and shown by `ps`; an environment
//! variable is not. A URL with a password is refused, and what errors and logs call the store
//! ([`PgStoreOptions::name`]) never carries one.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use tokio_postgres::config::Host;

/// Connections kept for registry reads and writes when the configuration does not say.
pub const DEFAULT_POOL_SIZE: usize = 8;

/// How long a new connection may take before the database counts as unreachable.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long one store operation (a query, or a short transaction) may take before the
/// database counts as unreachable. Lock waits have their own deadline (the caller's).
pub const DEFAULT_OPERATION_TIMEOUT: Duration = Duration::from_secs(30);

/// Why the store's options were refused. The messages never repeat a password.
#[derive(Debug, thiserror::Error)]
pub enum OptionsError {
    /// Not a `postgres://` or `postgresql://` URL.
    #[error(
        "the store `{shown}` is not a PostgreSQL URL; write it as \
         postgres://USER@HOST:PORT/DATABASE"
    )]
    NotPostgres {
        /// What was given, without its password.
        shown: String,
    },
    /// The URL could not be parsed.
    #[error("the store URL `{shown}` cannot be read: {reason}")]
    Unparseable {
        /// What was given, without its password.
        shown: String,
        /// What the parser said.
        reason: String,
    },
    /// The URL carries a password.
    #[error(
        "the store URL `{shown}` carries a password; remove it from the URL and put it in the \
         environment variable `serve.store.passwordEnv` names, so it is never written in a \
         file, a log or a process list"
    )]
    PasswordInUrl {
        /// The URL with the password removed.
        shown: String,
    },
    /// The environment variable meant to hold the password is not set.
    #[error(
        "the environment variable `{var}` (named as the store's password) is not set; set it \
         to the database password, or remove `passwordEnv` if the database needs none"
    )]
    MissingPassword {
        /// Its name.
        var: String,
    },
    /// A pool size of zero.
    #[error("the store's {what} must be at least 1 (it is 0)")]
    ZeroPool {
        /// Which pool.
        what: &'static str,
    },
}

/// How to reach one PostgreSQL store (see the module docs).
#[derive(Clone)]
pub struct PgStoreOptions {
    pub(crate) config: tokio_postgres::Config,
    name: PathBuf,
    /// Connections for registry reads and writes and for reading sessions.
    pub pool_size: usize,
    /// Connections that hold session write locks: one per turn in flight (a turn keeps its
    /// conversation's lock, and so one of these, until its answer is stored).
    pub lock_connections: usize,
    /// How long a new connection may take.
    pub connect_timeout: Duration,
    /// How long one operation may take (see [`DEFAULT_OPERATION_TIMEOUT`]).
    pub operation_timeout: Duration,
}

impl std::fmt::Debug for PgStoreOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStoreOptions")
            .field("name", &self.name)
            .field("pool_size", &self.pool_size)
            .field("lock_connections", &self.lock_connections)
            .finish_non_exhaustive()
    }
}

/// Whether `text` names a PostgreSQL store (rather than a sessions directory).
pub fn is_postgres_url(text: &str) -> bool {
    text.starts_with("postgres://") || text.starts_with("postgresql://")
}

/// `url` cut before a password could start, for messages about a URL that cannot be parsed.
fn shown_safely(url: &str) -> String {
    match url.find('@') {
        Some(at) => match url[..at].rfind(':') {
            // `scheme://user:secret@…`: keep the user, drop the secret.
            Some(colon) if colon > url.find("://").map_or(0, |s| s + 2) => {
                format!("{}:***{}", &url[..colon], &url[at..])
            }
            _ => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

impl PgStoreOptions {
    /// Options for the store at `url` (`postgres://USER@HOST:PORT/DATABASE`, query parameters
    /// as libpq takes them), with the default pools and timeouts. Refuses a password in the
    /// URL (see the module docs).
    pub fn from_url(url: &str) -> Result<Self, OptionsError> {
        let url = url.trim();
        if !is_postgres_url(url) {
            return Err(OptionsError::NotPostgres {
                shown: shown_safely(url),
            });
        }
        let mut config =
            tokio_postgres::Config::from_str(url).map_err(|e| OptionsError::Unparseable {
                shown: shown_safely(url),
                reason: e.to_string(),
            })?;
        if config.get_password().is_some() {
            return Err(OptionsError::PasswordInUrl {
                shown: shown_safely(url),
            });
        }
        // Who is connected, in pg_stat_activity and in a lock holder's description.
        if config.get_application_name().is_none() {
            config.application_name(base_application_name());
        }
        config.connect_timeout(DEFAULT_CONNECT_TIMEOUT);
        // A replica whose machine vanished (no FIN ever comes) is noticed by both sides within
        // about 30 s, and the database then releases its locks.
        config.keepalives(true);
        config.keepalives_idle(Duration::from_secs(10));
        config.keepalives_interval(Duration::from_secs(5));
        config.keepalives_retries(3);
        let server_keepalive =
            "-c tcp_keepalives_idle=10 -c tcp_keepalives_interval=5 -c tcp_keepalives_count=3";
        let options = match config.get_options() {
            Some(given) if !given.is_empty() => format!("{given} {server_keepalive}"),
            _ => server_keepalive.to_owned(),
        };
        config.options(options);
        let name = PathBuf::from(describe(&config));
        Ok(Self {
            config,
            name,
            pool_size: DEFAULT_POOL_SIZE,
            lock_connections: DEFAULT_POOL_SIZE,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            operation_timeout: DEFAULT_OPERATION_TIMEOUT,
        })
    }

    /// Takes the password from the environment variable `var`; an error names the variable
    /// when it is unset (never its value).
    pub fn password_from_env(mut self, var: &str) -> Result<Self, OptionsError> {
        let password = std::env::var_os(var).ok_or_else(|| OptionsError::MissingPassword {
            var: var.to_owned(),
        })?;
        self.config.password(password.as_encoded_bytes());
        Ok(self)
    }

    /// Sets both pools' sizes: `pool_size` connections for queries, and `lock_connections`
    /// for turns in flight.
    pub fn with_pools(
        mut self,
        pool_size: usize,
        lock_connections: usize,
    ) -> Result<Self, OptionsError> {
        if pool_size == 0 {
            return Err(OptionsError::ZeroPool { what: "pool size" });
        }
        if lock_connections == 0 {
            return Err(OptionsError::ZeroPool {
                what: "lock connections",
            });
        }
        self.pool_size = pool_size;
        self.lock_connections = lock_connections;
        Ok(self)
    }

    /// What errors and logs call the store: `postgres://USER@HOST:PORT/DATABASE`, never with
    /// a password.
    pub fn name(&self) -> &Path {
        &self.name
    }
}

/// The application name every connection of this process starts with.
pub(crate) fn base_application_name() -> String {
    format!("rampart pid {}", std::process::id())
}

/// `postgres://USER@HOST:PORT/DATABASE` of `config`, without a password.
fn describe(config: &tokio_postgres::Config) -> String {
    let user = config.get_user().unwrap_or("");
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, host)| {
            let port = config
                .get_ports()
                .get(i)
                .or_else(|| config.get_ports().first())
                .copied()
                .unwrap_or(5432);
            match host {
                Host::Tcp(name) => format!("{name}:{port}"),
                #[cfg(unix)]
                Host::Unix(dir) => format!("[{}]:{port}", dir.display()),
            }
        })
        .collect();
    let hosts = if hosts.is_empty() {
        "localhost:5432".to_owned()
    } else {
        hosts.join(",")
    };
    let user = if user.is_empty() {
        String::new()
    } else {
        format!("{user}@")
    };
    let db = config
        .get_dbname()
        .unwrap_or(config.get_user().unwrap_or(""));
    format!("postgres://{user}{hosts}/{db}")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "options_tests.rs"]
mod tests;
