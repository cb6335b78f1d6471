//! A `rampart serve` process for the end-to-end tests: started on a random loopback port with a
//! config written to its own directory, its address read from its first line, killed when
//! dropped.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// A running `rampart serve`.
pub struct ServeProcess {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// Its sessions directory.
    pub sessions: PathBuf,
    _dir: tempfile::TempDir,
}

impl ServeProcess {
    /// Starts `rampart serve --listen 127.0.0.1:0` with `config` (a plugins.toml body) and
    /// waits for the line that says where it listens.
    pub fn start(config: &str) -> Self {
        Self::start_with(config, None, &[])
    }

    /// [`start`](Self::start) with more of `serve`'s flags (`--prices FILE`).
    pub fn start_with_flags(config: &str, flags: &[&str]) -> Self {
        Self::start_with(config, None, flags)
    }

    /// [`start`](Self::start) on the PostgreSQL store `url` (`--store URL`); its sessions
    /// directory then keeps only what is local to the process.
    pub fn start_on_store(config: &str, url: &str) -> Self {
        Self::start_with(config, Some(url), &[])
    }

    fn start_with(config: &str, store: Option<&str>, flags: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config_path = super::write_config(dir.path(), config);
        let sessions = dir.path().join("sessions");
        let mut child = Command::new(env!("CARGO_BIN_EXE_rampart"))
            .args(["--config", config_path.to_str().unwrap()])
            .args(["--sessions-dir", sessions.to_str().unwrap()])
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(store.map(|url| ["--store", url]).into_iter().flatten())
            .args(flags)
            .env_remove("RAMPART_CONFIG")
            .env("RUST_LOG", "warn")
            .current_dir(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let base = line
            .trim()
            .strip_prefix("rampart serve listening on ")
            .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
            .to_owned();
        Self {
            child,
            base,
            sessions,
            _dir: dir,
        }
    }
}

impl ServeProcess {
    /// The text of `GET /metrics`.
    pub fn metrics(&self) -> String {
        reqwest::blocking::get(format!("{}/metrics", self.base))
            .unwrap()
            .text()
            .unwrap()
    }

    /// Sends SIGTERM, as a service manager stopping it would.
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// One chat-completions turn with `history` (model `gpt-up`, the tests' configured model),
    /// which must be answered 200; the answer's JSON.
    pub fn chat(&self, history: &[serde_json::Value]) -> serde_json::Value {
        let response = reqwest::blocking::Client::builder()
            .timeout(std::time::Duration::from_secs(60))
            .build()
            .unwrap()
            .post(format!("{}/v1/chat/completions", self.base))
            .json(&serde_json::json!({"model": "gpt-up", "messages": history}))
            .send()
            .unwrap();
        let status = response.status().as_u16();
        let body: serde_json::Value = response.json().unwrap();
        assert_eq!(status, 200, "{body}");
        body
    }

    /// Kills the process with SIGKILL (nothing it could run on the way out) and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits for the process to exit.
    pub fn wait(&mut self) -> std::process::ExitStatus {
        self.child.wait().unwrap()
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A configuration whose primary model (`up/gpt-up`, 128k window, no retries) is the
/// OpenAI-compatible server at `upstream`: what the serve tests on a shared store start with.
pub fn upstream_config(upstream: &str) -> String {
    upstream_config_speaking(upstream, "openai-completions")
}

/// [`upstream_config`] for an upstream speaking `api` (`openai-responses`, …).
pub fn upstream_config_speaking(upstream: &str, api: &str) -> String {
    format!(
        r#"
[agents.defaults.model]
primary = "up/gpt-up"

[models.providers.up]
api = "{api}"
baseUrl = "{upstream}"
maxRetries = 0
timeoutSeconds = 20

[[models.providers.up.models]]
id = "gpt-up"
contextWindow = 128000
"#
    )
}
