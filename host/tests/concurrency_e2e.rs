//! Issue 12, defects 2 and 3, with real processes on one store: parallel first runs on new
//! keys keep every turn in one registered file per key, and two runs on one session never
//! interleave (the second waits for the whole turn, or gives up naming the holder).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use common::text_of;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::loopback::{Loopback, openai_text_stream};
use common::{text, write_config};
use serde_json::Value;

struct Store {
    dir: tempfile::TempDir,
    sessions: PathBuf,
    config: PathBuf,
}

fn store(config_body: &str) -> Store {
    let dir = tempfile::tempdir().unwrap();
    let sessions = dir.path().join("sessions");
    let config = write_config(dir.path(), config_body);
    Store {
        dir,
        sessions,
        config,
    }
}

impl Store {
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_rampart"));
        command
            .arg("--config")
            .arg(&self.config)
            .arg("--sessions-dir")
            .arg(&self.sessions)
            .args(args)
            .env_remove("RAMPART_CONFIG")
            .env("RUST_LOG", "warn")
            .current_dir(self.dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    fn spawn(&self, args: &[&str]) -> Child {
        self.command(args).spawn().unwrap()
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// The active branch of `key`, as `sessions show --json` prints it.
    fn show(&self, key: &str) -> Vec<Value> {
        let out = self.run(&["sessions", "show", key, "--json"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        serde_json::from_slice::<Value>(&out.stdout)
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    }

    /// The transcript files in the sessions directory.
    fn transcripts(&self) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&self.sessions)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .collect();
        files.sort();
        files
    }
}

fn roles(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .map(|m| m["role"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Defect 2: before, each process created its own file and the registry kept one of them,
/// orphaning the others' turns. Now exactly one file per key exists, registered, and it holds
/// every turn, each prompt followed by its answer.
#[test]
fn parallel_first_runs_on_new_keys_keep_every_turn() {
    let s = store("");
    let keys = ["alpha", "beta"];
    let runs = 12;
    let children: Vec<(String, String, Child)> = (0..runs)
        .map(|i| {
            let key = keys[i % keys.len()].to_string();
            let prompt = format!("prompt number {i}");
            let child = s.spawn(&["run", &prompt, "--session", &key]);
            (key, prompt, child)
        })
        .collect();
    let mut sent: Vec<(String, String)> = Vec::new();
    for (key, prompt, child) in children {
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        sent.push((key, prompt));
    }

    assert_eq!(
        s.transcripts().len(),
        keys.len(),
        "one file per key, no orphans: {:?}",
        s.transcripts()
    );
    for key in keys {
        let messages = s.show(key);
        let mut expected: Vec<String> = sent
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, p)| p.clone())
            .collect();
        expected.sort();
        let mut prompts: Vec<String> = messages
            .iter()
            .filter(|m| m["role"] == "user")
            .map(text_of)
            .collect();
        prompts.sort();
        assert_eq!(
            prompts, expected,
            "every acknowledged turn of `{key}`, once"
        );
        let pattern: Vec<&str> = (0..expected.len())
            .flat_map(|_| ["user", "assistant"])
            .collect();
        assert_eq!(roles(&messages), pattern, "turns of `{key}` interleaved");
    }
}

fn slow_local_config(s_dir: &Path, url: &str, lock_ms: Option<u64>) -> String {
    let _ = s_dir;
    let session = lock_ms.map_or(String::new(), |ms| {
        format!("[session]\nwriteLockTimeoutMs = {ms}\n")
    });
    format!(
        r#"{session}
[agents.defaults.model]
primary = "local/m"

[models.providers.local]
api = "openai-completions"
baseUrl = "{url}"
maxRetries = 0
timeoutSeconds = 30

[[models.providers.local.models]]
id = "m"
contextWindow = 64000
"#
    )
}

/// Defect 3: the second run starts while the first waits for its model. Before, its prompt
/// landed inside the first turn (`user, user, assistant, assistant`). Now it waits for the
/// whole first turn, and its request carries the first turn's answer.
#[test]
fn a_second_run_on_a_session_waits_for_the_whole_first_turn() {
    let server = Loopback::start();
    server.push(openai_text_stream("first answer", 10, 2).delayed(Duration::from_millis(1500)));
    server.push(openai_text_stream("second answer", 20, 2));
    let s = store("");
    std::fs::write(
        &s.config,
        slow_local_config(s.dir.path(), &server.url(), None),
    )
    .unwrap();

    let first = s.spawn(&["run", "first prompt", "--session", "shared"]);
    wait_for("the first request", || server.request_count() == 1);
    let second = s.spawn(&["run", "second prompt", "--session", "shared"]);
    let first = first.wait_with_output().unwrap();
    let second = second.wait_with_output().unwrap();
    assert_eq!(first.status.code(), Some(0), "{}", text(&first));
    assert_eq!(second.status.code(), Some(0), "{}", text(&second));

    let messages = s.show("shared");
    let texts: Vec<String> = messages.iter().map(text_of).collect();
    assert_eq!(
        texts,
        [
            "first prompt",
            "first answer",
            "second prompt",
            "second answer"
        ]
    );
    let requests = server.requests();
    let history: Vec<String> = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .collect();
    assert!(
        history.iter().any(|c| c == "first answer"),
        "the second turn read the session after the first ended: {history:?}"
    );
}

/// Defect 3, the other outcome: with a short `session.writeLockTimeoutMs`, the second run
/// gives up, names the process that holds the lock, and writes nothing.
#[test]
fn a_second_run_that_cannot_wait_names_the_holder_and_writes_nothing() {
    let server = Loopback::start();
    server.push(openai_text_stream("first answer", 10, 2).delayed(Duration::from_millis(3000)));
    let s = store("");
    std::fs::write(
        &s.config,
        slow_local_config(s.dir.path(), &server.url(), Some(300)),
    )
    .unwrap();

    let first = s.spawn(&["run", "first prompt", "--session", "shared"]);
    let first_pid = first.id();
    wait_for("the first request", || server.request_count() == 1);
    let second = s.run(&["run", "second prompt", "--session", "shared"]);
    assert_eq!(second.status.code(), Some(1), "{}", text(&second));
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains(&first_pid.to_string()),
        "the error names pid {first_pid}: {stderr}"
    );
    assert!(stderr.contains("writeLockTimeoutMs"), "{stderr}");
    let first = first.wait_with_output().unwrap();
    assert_eq!(first.status.code(), Some(0), "{}", text(&first));
    let texts: Vec<String> = s.show("shared").iter().map(text_of).collect();
    assert_eq!(texts, ["first prompt", "first answer"]);
    assert_eq!(server.request_count(), 1, "the second run sent nothing");
}
