//! End to end: `rampart run "PROMPT"` against a loopback OpenAI-compatible server (the turn and
//! the answer persist in the session; a missing key and an unreachable server are clear
//! errors), and `rampart compact SESSION` through the lanes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use common::text_of;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::loopback::{Loopback, Reply, openai_text_stream, refused_url};
use common::{fixture, text, write_config};
use serde_json::Value;

/// A variable no environment sets.
const UNSET_VAR: &str = "RAMPART_TEST_SURELY_UNSET_KEY_7F3A";

fn rampart_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rampart"))
        .args(args)
        .env_remove("RAMPART_CONFIG")
        .env_remove(UNSET_VAR)
        .env("RUST_LOG", "warn")
        .current_dir(dir)
        .output()
        .unwrap()
}

/// A config whose primary model is `local/m` behind `url`, speaking OpenAI.
fn local_config(dir: &Path, url: &str, extra_provider_lines: &str) -> PathBuf {
    write_config(
        dir,
        &format!(
            r#"
[agents.defaults.model]
primary = "local/m"

[models.providers.local]
api = "openai-completions"
baseUrl = "{url}"
maxRetries = 0
timeoutSeconds = 10
{extra_provider_lines}

[[models.providers.local.models]]
id = "m"
contextWindow = 64000
"#
        ),
    )
}

struct World {
    dir: tempfile::TempDir,
    sessions: PathBuf,
}

fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let sessions = dir.path().join("sessions");
    World { dir, sessions }
}

impl World {
    fn run(&self, config: &Path, args: &[&str]) -> Output {
        let mut all = vec![
            "--config",
            config.to_str().unwrap(),
            "--sessions-dir",
            self.sessions.to_str().unwrap(),
        ];
        all.extend_from_slice(args);
        rampart_in(self.dir.path(), &all)
    }

    fn show(&self, config: &Path, key: &str) -> Vec<Value> {
        let out = self.run(config, &["sessions", "show", key, "--json"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        serde_json::from_slice::<Value>(&out.stdout)
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    }
}

#[test]
fn a_turn_against_an_openai_server_is_persisted_with_its_answer() {
    let w = world();
    let server = Loopback::start();
    server.push(openai_text_stream("hello back", 12, 3));
    server.push(openai_text_stream("second answer", 30, 3));
    let config = local_config(w.dir.path(), &server.url(), "");

    let out = w.run(&config, &["run", "hello", "--session", "k"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("hello back"));
    let messages = w.show(&config, "k");
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(messages[0]["role"], "user");
    assert_eq!(text_of(&messages[0]), "hello");
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(text_of(&messages[1]), "hello back");

    // The next turn of the same session sends the history along.
    let out = w.run(&config, &["run", "and again", "--session", "k"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let sent = requests[1].body["messages"].as_array().unwrap();
    let contents: Vec<String> = sent
        .iter()
        .map(|m| match &m["content"] {
            // A user message held as blocks goes as text parts, as pi sends it.
            serde_json::Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            other => other.as_str().unwrap_or_default().to_string(),
        })
        .collect();
    assert!(contents.iter().any(|c| c == "hello"), "{contents:?}");
    assert!(contents.iter().any(|c| c == "hello back"), "{contents:?}");
    assert!(contents.iter().any(|c| c == "and again"), "{contents:?}");
    assert_eq!(w.show(&config, "k").len(), 4);
}

#[test]
fn a_missing_key_is_named_and_nothing_is_sent() {
    let w = world();
    let server = Loopback::start();
    server.push(openai_text_stream("never", 1, 1));
    let config = local_config(
        w.dir.path(),
        &server.url(),
        &format!("apiKeyEnv = \"{UNSET_VAR}\""),
    );
    let out = w.run(&config, &["run", "hello", "--session", "k"]);
    assert_ne!(out.status.code(), Some(0));
    let t = text(&out);
    assert!(t.contains(UNSET_VAR), "the message names the variable: {t}");
    assert_eq!(server.request_count(), 0, "no request without a key");
}

#[test]
fn an_unreachable_server_is_named() {
    let w = world();
    let url = refused_url();
    let config = local_config(w.dir.path(), &url, "");
    let out = w.run(&config, &["run", "hello", "--session", "k"]);
    assert_ne!(out.status.code(), Some(0));
    let t = text(&out);
    let host_port = url
        .trim_start_matches("http://")
        .trim_end_matches("/v1")
        .to_string();
    assert!(t.contains(&host_port), "the message names {host_port}: {t}");
    assert!(t.contains("baseUrl"), "and says what to check: {t}");
}

#[test]
fn events_of_a_turn_are_written_as_json_lines() {
    let w = world();
    let server = Loopback::start();
    server.push(openai_text_stream("ok", 5, 1));
    let config = local_config(w.dir.path(), &server.url(), "");
    let events = w.dir.path().join("events.jsonl");
    let out = w.run(
        &config,
        &[
            "--events",
            events.to_str().unwrap(),
            "run",
            "hi",
            "--session",
            "e",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let kinds: Vec<String> = std::fs::read_to_string(&events)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["kind"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert!(kinds.iter().any(|k| k == "request"), "{kinds:?}");
    assert!(kinds.iter().any(|k| k == "response"), "{kinds:?}");
}

/// A long real session (about 100k tokens) imported under `key`.
fn import_long_session(w: &World, config: &Path, key: &str) {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/data/sessions/openclaw-linux2010/main__62329ad3-2943-45f0-90ce-a7ca33ba3bec.jsonl");
    let source = source.to_str().unwrap();
    let out = w.run(config, &["sessions", "import", source, "--as", key]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

#[test]
fn compact_compacts_a_long_session_and_says_so() {
    let w = world();
    let config = write_config(w.dir.path(), "");
    import_long_session(&w, &config, "long");
    let before = w.show(&config, "long").len();

    let out = w.run(
        &config,
        &["compact", "long", "--instructions", "keep the file paths"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let t = text(&out);
    assert!(t.contains("compacted session `long`"), "{t}");
    let after = w.show(&config, "long");
    assert_eq!(after[0]["role"], "compactionSummary", "{:?}", after[0]);
    assert!(
        after.len() < before,
        "{} messages, {before} before",
        after.len()
    );
    let list = w.run(&config, &["sessions", "list"]);
    let line = String::from_utf8_lossy(&list.stdout)
        .lines()
        .find(|l| l.starts_with("long "))
        .map(str::to_string)
        .unwrap();
    let count: u64 = line.split_whitespace().nth(3).unwrap().parse().unwrap();
    assert_eq!(count, 1, "the registry counts the compaction: {line}");
}

#[test]
fn an_engine_that_does_not_compact_says_so_and_fails() {
    let w = world();
    let config = write_config(
        w.dir.path(),
        &format!(
            "[plugins.slots]\ncontextEngine = \"window\"\n[plugins.engines.window]\npath = \"{}\"\n",
            fixture("rampart-window").display()
        ),
    );
    import_long_session(&w, &config, "long");
    let out = w.run(&config, &["compact", "long"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let t = text(&out);
    assert!(t.contains("window"), "names the engine: {t}");
    assert!(t.contains("never compacts"), "gives its reason: {t}");
}

#[test]
fn compact_of_an_unknown_session_names_it() {
    let w = world();
    let config = write_config(w.dir.path(), "");
    let out = w.run(&config, &["compact", "nope"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("no session `nope`"), "{}", text(&out));
}

/// Issue 12, defect 4: with `RUST_LOG=debug` the HTTP client logs from its own thread while the
/// command writes its report; holding the stderr lock across the turn deadlocked the two.
#[test]
fn a_turn_with_debug_logging_does_not_hang() {
    let w = world();
    let server = Loopback::start();
    server.push(openai_text_stream("logged answer", 12, 3));
    let config = local_config(w.dir.path(), &server.url(), "");
    let mut child = Command::new(env!("CARGO_BIN_EXE_rampart"))
        .args([
            "--config",
            config.to_str().unwrap(),
            "--sessions-dir",
            w.sessions.to_str().unwrap(),
            "run",
            "hello",
        ])
        .env_remove("RAMPART_CONFIG")
        .env("RUST_LOG", "debug")
        .current_dir(w.dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("`rampart run` with RUST_LOG=debug did not finish within 60 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
    let mut out = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out).unwrap();
    assert!(out.contains("logged answer"), "{out}");
}

/// Issue 12, defect 11: a server that answers 200 and then sends only keep-alive comments
/// used to hold the run until it hung up. The stream idle timeout ends the turn with an error
/// naming the key, and the prompt stays in the session.
#[test]
fn a_stream_of_keep_alives_only_ends_at_the_idle_timeout() {
    let w = world();
    let server = Loopback::start();
    server.push(Reply::keep_alive_only(
        std::time::Duration::from_millis(100),
        std::time::Duration::from_secs(60),
    ));
    let config = local_config(w.dir.path(), &server.url(), "streamIdleTimeoutSeconds = 1");

    let out = w.run(&config, &["run", "are you there", "--session", "k"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("streamIdleTimeoutSeconds") && stderr.contains("keep-alives"),
        "{stderr}"
    );
    assert_eq!(server.request_count(), 1, "an idle stream is not retried");
    let messages = w.show(&config, "k");
    assert_eq!(messages.len(), 1, "the prompt is kept: {messages:?}");
}

/// Issue 24, defect 7: running a kept prompt again after failures used to append it once per
/// run (four failures and a success left five identical user messages). Now the retry
/// continues the kept message: one user message, then the answer.
#[test]
fn running_a_kept_prompt_again_continues_it_instead_of_repeating_it() {
    let w = world();
    let server = Loopback::start();
    for _ in 0..4 {
        server.push(Reply::json(
            500,
            serde_json::json!({"error": {"message": "upstream is down", "type": "server_error"}}),
        ));
    }
    server.push(openai_text_stream("finally an answer", 12, 3));
    let config = local_config(w.dir.path(), &server.url(), "");

    for attempt in 0..4 {
        let out = w.run(&config, &["run", "fix the build", "--session", "k"]);
        assert_eq!(
            out.status.code(),
            Some(1),
            "attempt {attempt}: {}",
            text(&out)
        );
        assert!(text(&out).contains("the prompt is kept"), "{}", text(&out));
    }
    let out = w.run(&config, &["run", "fix the build", "--session", "k"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("finally an answer"));
    assert!(
        text(&out).contains("continuing the prompt kept"),
        "{}",
        text(&out)
    );

    let messages = w.show(&config, "k");
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant"], "{messages:?}");
    assert_eq!(text_of(&messages[0]), "fix the build");
    // Each request the model received holds the prompt once.
    for request in server.requests() {
        let sent = request.body["messages"].as_array().unwrap();
        let copies = sent
            .iter()
            .filter(|m| m["role"] == "user" && m.to_string().contains("fix the build"))
            .count();
        assert_eq!(copies, 1, "{sent:?}");
    }

    // A different prompt after a failure is added after the unanswered one, which stays.
    server.push(Reply::json(
        500,
        serde_json::json!({"error": {"message": "down again", "type": "server_error"}}),
    ));
    server.push(openai_text_stream("second answer", 20, 3));
    let out = w.run(&config, &["run", "first question", "--session", "k"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let out = w.run(&config, &["run", "another question", "--session", "k"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let messages = w.show(&config, "k");
    let texts: Vec<String> = messages.iter().map(text_of).collect();
    assert_eq!(
        texts,
        [
            "fix the build",
            "finally an answer",
            "first question",
            "another question",
            "second answer"
        ],
        "{messages:?}"
    );
}
