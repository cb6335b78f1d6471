//! A PostgreSQL 15 server of the test's own, in a temporary directory on a free port, for the
//! tests that stop and restart the database: the machine's shared server is used by other
//! tests at the same time and must never be restarted.
//!
//! `initdb` refuses to run as root, so as root the server runs as the `postgres` user (through
//! `runuser`), in a directory handed to that user. Without the binaries (or that user) the
//! test prints `SKIPPED` and returns, unless `RAMPART_REQUIRE_POSTGRES=1`.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Where Debian's and Ubuntu's PostgreSQL 15 packages put the server's programs.
const BIN: &str = "/usr/lib/postgresql/15/bin";
const REQUIRE_VAR: &str = "RAMPART_REQUIRE_POSTGRES";

/// A running private server; stopped (immediately) and deleted when dropped.
pub struct PrivatePostgres {
    dir: tempfile::TempDir,
    data: PathBuf,
    port: u16,
    /// The user the server runs as, when this process is root.
    run_as: Option<String>,
}

fn skip(label: &str, reason: &str) -> Option<PrivatePostgres> {
    if std::env::var(REQUIRE_VAR).is_ok_and(|v| v == "1") {
        panic!("{label}: a private PostgreSQL 15 is required ({REQUIRE_VAR}=1): {reason}");
    }
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {label}: cannot start a private PostgreSQL 15 ({reason}); set {REQUIRE_VAR}=1 \
         to make this a failure"
    );
    None
}

fn id(args: &[&str]) -> Option<u32> {
    let out = Command::new("id").args(args).output().ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn failed(what: &str, out: &Output) -> String {
    format!(
        "{what} exited {}: {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

impl PrivatePostgres {
    /// Creates a cluster and starts it, or `None` with a `SKIPPED` line (see the module docs).
    pub fn start(label: &str) -> Option<Self> {
        let current = std::thread::current();
        let label = current.name().filter(|n| *n != "main").unwrap_or(label);
        if !Path::new(BIN).join("initdb").is_file() {
            return skip(label, &format!("no initdb in {BIN}"));
        }
        let dir = tempfile::Builder::new()
            .prefix("rampart-pg-")
            .tempdir()
            .unwrap();
        let run_as = if id(&["-u"]) == Some(0) {
            let (Some(uid), Some(gid)) = (id(&["-u", "postgres"]), id(&["-g", "postgres"])) else {
                return skip(label, "running as root and there is no `postgres` user");
            };
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).unwrap();
            Some("postgres".to_owned())
        } else {
            None
        };
        let data = dir.path().join("data");
        let server = Self {
            data,
            port: free_port(),
            run_as,
            dir,
        };
        let out = server.run(
            "initdb",
            &[
                "-D",
                server.data.to_str().unwrap(),
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-sync",
                "--no-instructions",
            ],
        );
        if !out.status.success() {
            return skip(label, &failed("initdb", &out));
        }
        if let Err(reason) = server.start_again() {
            return skip(label, &reason);
        }
        Some(server)
    }

    /// Runs the server program `program` with `args`, as the server's user.
    fn run(&self, program: &str, args: &[&str]) -> Output {
        let path = Path::new(BIN).join(program);
        let mut command = match &self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(&path);
                c
            }
            None => Command::new(&path),
        };
        command
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .unwrap()
    }

    /// `postgres://postgres@127.0.0.1:PORT/postgres`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Starts the (stopped) server on its port and waits until it takes connections.
    pub fn start_again(&self) -> Result<(), String> {
        let options = format!(
            "-p {} -c listen_addresses=127.0.0.1 -c unix_socket_directories={} -c fsync=off \
             -c max_connections=200",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("server.log");
        let out = self.run(
            "pg_ctl",
            &[
                "start",
                "-D",
                self.data.to_str().unwrap(),
                "-l",
                log.to_str().unwrap(),
                "-w",
                "-t",
                "60",
                "-o",
                &options,
            ],
        );
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{}; server log: {}",
                failed("pg_ctl start", &out),
                std::fs::read_to_string(&log).unwrap_or_default()
            ))
        }
    }

    /// Stops the server the way a crash does (`-m immediate`: no checkpoint, every
    /// connection cut); what was committed is recovered from the WAL when it starts again.
    pub fn stop_immediately(&self) {
        let out = self.run(
            "pg_ctl",
            &[
                "stop",
                "-D",
                self.data.to_str().unwrap(),
                "-m",
                "immediate",
                "-w",
            ],
        );
        assert!(out.status.success(), "{}", failed("pg_ctl stop", &out));
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let _ = self.run(
            "pg_ctl",
            &[
                "stop",
                "-D",
                self.data.to_str().unwrap(),
                "-m",
                "immediate",
                "-w",
            ],
        );
    }
}
