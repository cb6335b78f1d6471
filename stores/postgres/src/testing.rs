//! A throwaway database per test, for this crate's tests and the host's end-to-end tests.
//!
//! [`TestDatabase::create`] connects to the server named by `RAMPART_TEST_POSTGRES_URL`
//! (default `postgres://postgres@127.0.0.1:5432/postgres`, a role allowed to create
//! databases), creates a database with a name no other test uses, and drops it when the value
//! is dropped, also when the test fails (drop runs while a panic unwinds). Open connections
//! are ended by the drop (`WITH (FORCE)`).
//!
//! Without a reachable server, `create` writes one `SKIPPED` line to the terminal (not to the
//! captured test output, so it is seen) and returns `None`; with `RAMPART_REQUIRE_POSTGRES=1`
//! it fails the test instead, for CI machines that must run these tests.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::options::PgStoreOptions;
use crate::{PgStore, PgStoreError};

/// The variable naming the server tests use.
pub const URL_VAR: &str = "RAMPART_TEST_POSTGRES_URL";

/// The variable that turns a missing server into a failure.
pub const REQUIRE_VAR: &str = "RAMPART_REQUIRE_POSTGRES";

/// The server tests use when [`URL_VAR`] is not set.
pub const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// A database that exists for one test (see the module docs).
#[derive(Debug)]
pub struct TestDatabase {
    admin_url: String,
    name: String,
    url: String,
}

/// Runs `sql` on the server at `url`, on a thread of its own (the caller may be anywhere,
/// even inside an async runtime).
fn admin(url: &str, sql: String) -> Result<(), String> {
    let url = url.to_owned();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        runtime.block_on(async move {
            let mut config: tokio_postgres::Config = url.parse().map_err(|e| format!("{e}"))?;
            config.connect_timeout(Duration::from_secs(3));
            let (client, connection) =
                config.connect(tokio_postgres::NoTls).await.map_err(|e| {
                    match std::error::Error::source(&e) {
                        Some(source) => format!("{e}: {source}"),
                        None => e.to_string(),
                    }
                })?;
            let driver = tokio::spawn(connection);
            // The database's own message (which constraint, which object), not only "db error".
            let result = client
                .batch_execute(&sql)
                .await
                .map_err(|e| match e.as_db_error() {
                    Some(db) => format!("{e}: {}", db.message()),
                    None => e.to_string(),
                });
            drop(client);
            let _ = driver.await;
            result
        })
    })
    .join()
    .unwrap_or_else(|_| Err("the admin thread panicked".into()))
}

fn required() -> bool {
    std::env::var(REQUIRE_VAR).is_ok_and(|v| v == "1")
}

impl TestDatabase {
    /// A new empty database for the test `label`, or `None` (with a `SKIPPED` line) when no
    /// server is reachable; panics instead when [`REQUIRE_VAR`] is `1`.
    pub fn create(label: &str) -> Option<Self> {
        // The test harness names each test's thread after the test.
        let current = std::thread::current();
        let label = current.name().filter(|n| *n != "main").unwrap_or(label);
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let admin_url = std::env::var(URL_VAR).unwrap_or_else(|_| DEFAULT_URL.to_owned());
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let name = format!(
            "rampart_test_{}_{}_{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        if let Err(reason) = admin(&admin_url, format!("CREATE DATABASE {name}")) {
            if required() {
                panic!(
                    "{label}: PostgreSQL is required ({REQUIRE_VAR}=1) but cannot be used at \
                     {admin_url}: {reason}"
                );
            }
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED {label}: no PostgreSQL at {admin_url} ({reason}); set {URL_VAR} to a \
                 server, or {REQUIRE_VAR}=1 to make this a failure"
            );
            return None;
        }
        let url = match admin_url.rfind('/') {
            Some(slash) if slash > "postgres://".len() => {
                let rest = &admin_url[slash + 1..];
                let query = rest.find('?').map_or("", |q| &rest[q..]);
                format!("{}/{name}{query}", &admin_url[..slash])
            }
            _ => format!("{admin_url}/{name}"),
        };
        Some(Self {
            admin_url,
            name,
            url,
        })
    }

    /// The database's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Store options for it, with small pools.
    pub fn options(&self) -> PgStoreOptions {
        PgStoreOptions::from_url(&self.url)
            .expect("the test URL has no password")
            .with_pools(4, 8)
            .expect("non-zero pools")
    }

    /// A store on it (migrated).
    pub fn store(&self) -> Result<PgStore, PgStoreError> {
        PgStore::open(&self.options())
    }

    /// Runs `sql` on the database (to look at it, or to break it).
    pub fn execute(&self, sql: &str) -> Result<(), String> {
        admin(&self.url, sql.to_owned())
    }
}

impl TestDatabase {
    /// Runs `sql` on the server's maintenance database (to act on this one from outside:
    /// refuse its connections, end them).
    pub fn execute_as_admin(&self, sql: &str) -> Result<(), String> {
        admin(&self.admin_url, sql.to_owned())
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        if let Err(reason) = admin(
            &self.admin_url,
            format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        ) {
            let _ = writeln!(
                std::io::stderr(),
                "could not drop the test database {}: {reason}",
                self.name
            );
        }
    }
}
