//! End to end: the system prompt Rampart builds from the agent workspace, as upstreams receive
//! it (`rampart run`, `rampart serve` per `serve.systemPrompt`, `rampart replay
//! --rebuild-prompt`), and `rampart context show`, whose breakdown adds up to what the model
//! is sent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use common::loopback::{Loopback, anthropic_text_stream, openai_text_stream};
use common::{text, write_config};
use rampart_context::tokens::{CountMode, Encoding, TokenCounter};
use rampart_engine_api::AgentMessage;
use serde_json::{Value, json};

const MARKER: &str = "RAMPART_CACHE_BOUNDARY";
const WARNING_HEADER: &str = "[Bootstrap truncation warning]";

/// A temporary directory with a config, a sessions directory and an agent workspace holding
/// AGENTS.md and MEMORY.md.
struct World {
    dir: tempfile::TempDir,
}

impl World {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        std::fs::write(
            ws.join("AGENTS.md"),
            "Always run the tests before saying done.\n",
        )
        .unwrap();
        std::fs::write(ws.join("MEMORY.md"), "The user prefers green tea.\n").unwrap();
        World { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn sessions(&self) -> PathBuf {
        self.path().join("sessions")
    }

    /// Writes `plugins.toml`: the workspace, then `body`.
    fn config(&self, body: &str) -> PathBuf {
        write_config(
            self.path(),
            &format!(
                "[agents.defaults]\nworkspace = \"ws\"\nuserTimezone = \"Europe/Berlin\"\n{body}"
            ),
        )
    }

    fn rampart(&self, config: &Path, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_rampart"))
            .arg("--config")
            .arg(config)
            .arg("--sessions-dir")
            .arg(self.sessions())
            .args(args)
            .env_remove("RAMPART_CONFIG")
            .env("RUST_LOG", "warn")
            .current_dir(self.path())
            .output()
            .unwrap()
    }
}

/// A model `local/m` behind `url` speaking `api`.
fn upstream(url: &str, api: &str, model: &str) -> String {
    format!(
        r#"
[agents.defaults.model]
primary = "local/{model}"

[models.providers.local]
api = "{api}"
baseUrl = "{url}"
maxRetries = 0
timeoutSeconds = 20

[[models.providers.local.models]]
id = "{model}"
contextWindow = 64000
"#
    )
}

/// The simulator with the exact tokenizer, as the default model.
const SIM_EXACT: &str = r#"
[agents.defaults.model]
primary = "sim/exact"

[models.providers.sim]
api = "sim"

[[models.providers.sim.models]]
id = "exact"
contextWindow = 32000
tokenizer = "o200k_base"
"#;

fn user_texts(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            // A message held as blocks goes as text parts; the model reads them as one text.
            Value::Array(parts) if parts.iter().all(|p| p["type"] == "text") => parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            other => other.to_string(),
        })
        .collect()
}

#[test]
fn run_sends_the_built_prompt_with_the_workspace_files_and_no_marker() {
    let w = World::new();
    let server = Loopback::start();
    server.push(openai_text_stream("done", 10, 2));
    let config = w.config(&upstream(&server.url(), "openai-completions", "m"));
    let out = w.rampart(&config, &["run", "hello"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));

    let requests = server.requests();
    let body = &requests[0].body;
    assert_eq!(body["messages"][0]["role"], "system", "{body}");
    let system = body["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("Always run the tests before saying done."),
        "{system}"
    );
    assert!(system.contains("The user prefers green tea."), "{system}");
    assert!(system.contains("Time zone: Europe/Berlin"), "{system}");
    assert!(system.contains("model=local/m"), "{system}");
    assert!(
        !requests[0].raw_body.contains(MARKER),
        "{}",
        requests[0].raw_body
    );
    assert_eq!(user_texts(body), ["hello"]);
}

#[test]
fn anthropic_gets_two_system_blocks_with_the_breakpoint_on_the_first() {
    let w = World::new();
    let server = Loopback::start();
    server.push(anthropic_text_stream("done", 10, 2));
    let config = w.config(&upstream(&server.url(), "anthropic-messages", "claude-x"));
    let out = w.rampart(&config, &["run", "hello"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));

    let requests = server.requests();
    let body = &requests[0].body;
    let blocks = body["system"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"));
    assert_eq!(blocks.len(), 2, "{body}");
    assert_eq!(blocks[0]["cache_control"]["type"], "ephemeral");
    assert!(blocks[1].get("cache_control").is_none(), "{body}");
    let (stable, dynamic) = (
        blocks[0]["text"].as_str().unwrap(),
        blocks[1]["text"].as_str().unwrap(),
    );
    // The workspace files are in the cached prefix; the runtime line after it.
    assert!(stable.contains("Always run the tests before saying done."));
    assert!(dynamic.contains("Runtime:"), "{dynamic}");
    assert!(!stable.contains("Runtime:"));
    assert!(!requests[0].raw_body.contains(MARKER));
}

/// A file cut to its budget is said at the end of the user's message, on every turn by
/// default (`bootstrapPromptTruncationWarning = "always"`).
#[test]
fn the_truncation_warning_is_on_the_user_message_of_every_turn_by_default() {
    let w = World::new();
    std::fs::write(
        w.path().join("ws/AGENTS.md"),
        "A rule to follow. ".repeat(100),
    )
    .unwrap();
    let server = Loopback::start();
    server.push(openai_text_stream("one", 10, 2));
    server.push(openai_text_stream("two", 10, 2));
    let config = w.config(&format!(
        "bootstrapMaxChars = 400\n{}",
        upstream(&server.url(), "openai-completions", "m")
    ));
    for prompt in ["first", "second"] {
        let out = w.rampart(&config, &["run", prompt]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    }
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for (request, prompt) in requests.iter().zip(["first", "second"]) {
        let users = user_texts(&request.body);
        let last = users.last().unwrap();
        assert!(last.starts_with(prompt), "{last}");
        assert!(last.contains(WARNING_HEADER), "turn {prompt}: {last}");
        assert!(last.contains("AGENTS.md"), "{last}");
    }
    // The first turn's message, as stored, still carries its warning in the second request.
    assert!(user_texts(&requests[1].body)[0].contains(WARNING_HEADER));
}

/// `rampart serve` in front of an upstream, as a process; killed when dropped.
struct Serve {
    child: Child,
    base: String,
}

impl Serve {
    fn start(w: &World, config: &Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_rampart"))
            .arg("--config")
            .arg(config)
            .arg("--sessions-dir")
            .arg(w.sessions())
            .args(["serve", "--listen", "127.0.0.1:0"])
            .env_remove("RAMPART_CONFIG")
            .env("RUST_LOG", "warn")
            .current_dir(w.path())
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
        Serve { child, base }
    }

    fn post(&self, path: &str, body: &Value) -> u16 {
        reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap()
            .post(format!("{}{path}", self.base))
            .json(body)
            .send()
            .unwrap()
            .status()
            .as_u16()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const CLIENT_PROMPT: &str = "You are the client's careful coding assistant.";

/// What the upstream received as the system prompt of one chat request through `rampart
/// serve` with `serve.systemPrompt = mode` (none: the default).
fn openai_system_through_serve(mode: Option<&str>) -> (String, String) {
    let w = World::new();
    let up = Loopback::start();
    up.push(openai_text_stream("ok", 10, 2));
    let serve_table = mode.map_or(String::new(), |m| {
        format!("\n[serve]\nsystemPrompt = \"{m}\"\n")
    });
    let config = w.config(&format!(
        "{}{serve_table}",
        upstream(&up.url(), "openai-completions", "m")
    ));
    let serve = Serve::start(&w, &config);
    let status = serve.post(
        "/v1/chat/completions",
        &json!({"model": "local/m", "messages": [
            {"role": "system", "content": CLIENT_PROMPT},
            {"role": "user", "content": "hello"}
        ]}),
    );
    assert_eq!(status, 200);
    let requests = up.requests();
    let body = &requests[0].body;
    assert_eq!(body["messages"][0]["role"], "system", "{body}");
    (
        body["messages"][0]["content"].as_str().unwrap().to_owned(),
        requests[0].raw_body.clone(),
    )
}

#[test]
fn serve_sends_the_clients_prompt_by_default() {
    let (system, _) = openai_system_through_serve(None);
    assert_eq!(system, CLIENT_PROMPT);
    let (system, _) = openai_system_through_serve(Some("client"));
    assert_eq!(system, CLIENT_PROMPT);
}

#[test]
fn serve_rampart_replaces_the_clients_prompt() {
    let (system, raw) = openai_system_through_serve(Some("rampart"));
    assert!(
        system.contains("Always run the tests before saying done."),
        "{system}"
    );
    assert!(!system.contains(CLIENT_PROMPT), "{system}");
    assert!(!raw.contains(MARKER));
}

#[test]
fn serve_merge_sends_rampart_s_prompt_then_the_clients() {
    let (system, raw) = openai_system_through_serve(Some("merge"));
    let ours = system
        .find("Always run the tests before saying done.")
        .unwrap();
    let heading = system.find("## Client Instructions").unwrap();
    let theirs = system.find(CLIENT_PROMPT).unwrap();
    assert!(ours < heading && heading < theirs, "{system}");
    assert!(!raw.contains(MARKER));
}

/// Through Anthropic, a merged prompt is the two blocks: the client's text is in the second,
/// after the breakpoint.
#[test]
fn serve_merge_to_anthropic_keeps_the_breakpoint_on_rampart_s_prefix() {
    let w = World::new();
    let up = Loopback::start();
    up.push(anthropic_text_stream("ok", 10, 2));
    let config = w.config(&format!(
        "{}\n[serve]\nsystemPrompt = \"merge\"\n",
        upstream(&up.url(), "anthropic-messages", "claude-x")
    ));
    let serve = Serve::start(&w, &config);
    let status = serve.post(
        "/v1/messages",
        &json!({"model": "local/claude-x", "max_tokens": 100, "system": CLIENT_PROMPT,
                "messages": [{"role": "user", "content": "hello"}]}),
    );
    assert_eq!(status, 200);
    let body = &up.requests()[0].body;
    let blocks = body["system"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"));
    assert_eq!(blocks.len(), 2, "{body}");
    assert_eq!(blocks[0]["cache_control"]["type"], "ephemeral");
    assert!(
        blocks[0]["text"]
            .as_str()
            .unwrap()
            .contains("Always run the tests")
    );
    assert!(blocks[1]["text"].as_str().unwrap().contains(CLIENT_PROMPT));
}

/// `--rebuild-prompt` makes a replay send the built prompt instead of the recorded one.
#[test]
fn rebuild_prompt_changes_the_replays_prompt() {
    let w = World::new();
    let transcript = w.path().join("chat.json");
    std::fs::write(
        &transcript,
        json!([
            {"role": "system", "content": "The recorded prompt."},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"}
        ])
        .to_string(),
    )
    .unwrap();
    let config = w.config("");
    let systems = |extra: &[&str]| -> Vec<String> {
        let requests = w.path().join("requests.jsonl");
        // The same file for every call: replaced, as `--overwrite` allows.
        let mut args = vec![
            "--overwrite",
            "replay",
            transcript.to_str().unwrap(),
            "--requests-out",
            requests.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let out = w.rampart(&config, &args);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        std::fs::read_to_string(&requests)
            .unwrap()
            .lines()
            .map(|l| {
                let r: Value = serde_json::from_str(l).unwrap();
                r["system"].as_str().unwrap_or_default().to_owned()
            })
            .collect()
    };
    assert_eq!(systems(&[]), ["The recorded prompt."]);
    let rebuilt = systems(&["--rebuild-prompt"]);
    assert_eq!(rebuilt.len(), 1);
    assert!(
        !rebuilt[0].contains("The recorded prompt."),
        "{}",
        rebuilt[0]
    );
    assert!(rebuilt[0].contains("Always run the tests before saying done."));
}

fn show_json(w: &World, config: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["context", "show", "--json"];
    args.extend_from_slice(extra);
    let out = w.rampart(config, &args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("--json does not parse ({e}):\n{}", text(&out)))
}

fn parts_sum(document: &Value) -> i64 {
    document["breakdown"]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["tokens"].as_i64().unwrap())
        .sum()
}

/// The reply the simulator gives states the prompt tokens it counted.
fn sim_prompt_tokens(out: &Output) -> u64 {
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .split("with ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no prompt tokens in {stdout}"))
}

/// The breakdown adds up to the request's count, and that count is exactly what the model is
/// sent: the next turn's prompt, as the simulator counts it with the exact tokenizer, is the
/// shown request plus the new user message.
#[test]
fn context_show_sums_exactly_to_what_the_model_is_sent() {
    let w = World::new();
    let config = w.config(SIM_EXACT);

    // A session that does not exist yet: the prompt alone.
    let fresh = show_json(&w, &config, &[]);
    assert_eq!(fresh["session"]["exists"], false);
    assert_eq!(fresh["breakdown"]["exact"], true);
    let total = fresh["breakdown"]["requestTokens"].as_u64().unwrap();
    assert!(total > 0);
    assert_eq!(parts_sum(&fresh), total as i64);
    let labels: Vec<&str> = fresh["breakdown"]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["label"].as_str().unwrap())
        .collect();
    for label in [
        "file:AGENTS.md",
        "file:MEMORY.md",
        "section:runtime",
        "tool schemas",
        "user",
        "framing",
    ] {
        assert!(labels.contains(&label), "{label} in {labels:?}");
    }
    assert!(
        !w.sessions().join("sessions.json").exists(),
        "context show writes nothing"
    );

    let out = w.rampart(&config, &["run", "hello there"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let counter = TokenCounter::new(CountMode::Exact(Encoding::O200kBase));
    let user = |t: &str| counter.count_message(&AgentMessage::user_text(t, 0));
    assert_eq!(sim_prompt_tokens(&out), total + user("hello there"));

    let shown = show_json(&w, &config, &["--session", "main"]);
    assert_eq!(shown["session"]["exists"], true);
    let total = shown["breakdown"]["requestTokens"].as_u64().unwrap();
    assert_eq!(parts_sum(&shown), total as i64);
    let part = |label: &str| {
        shown["breakdown"]["parts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["label"] == label)
            .unwrap()["tokens"]
            .as_i64()
            .unwrap()
    };
    assert_eq!(part("user"), user("hello there") as i64);
    assert!(part("assistant") > 0);
    // The body is the simulator's readable form, with the marker gone.
    let body = &shown["requestBody"];
    assert_eq!(body["form"], "readable");
    assert!(!body.to_string().contains(MARKER));

    let out = w.rampart(&config, &["run", "and again"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(sim_prompt_tokens(&out), total + user("and again"));
}

#[test]
fn context_show_prints_the_body_and_the_table_and_writes_the_page() {
    let w = World::new();
    let server = Loopback::start();
    server.push(openai_text_stream("done", 10, 2));
    let config = w.config(&upstream(&server.url(), "openai-completions", "gpt-4o"));
    let out = w.rampart(&config, &["run", "hello"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));

    let page = w.path().join("window.html");
    let out = w.rampart(
        &config,
        &["context", "show", "--html", page.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The body chat completions would receive, then the table.
    assert!(stdout.contains("(openai-completions)"), "{stdout}");
    assert!(stdout.contains("\"role\": \"system\""), "{stdout}");
    assert!(stdout.contains("file:AGENTS.md"), "{stdout}");
    assert!(stdout.contains("total (the request)"), "{stdout}");
    assert!(!stdout.contains(MARKER), "{stdout}");
    assert_eq!(server.request_count(), 1, "context show calls no model");

    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("class=\"bar\""), "{html}");
    assert!(html.contains("file:AGENTS.md"));
    assert!(!html.contains("<script"));

    // The JSON's body is the provider's own.
    let shown = show_json(&w, &config, &[]);
    assert_eq!(shown["requestBody"]["form"], "openai-completions");
    assert_eq!(
        shown["requestBody"]["body"]["messages"][0]["role"],
        "system"
    );
    assert_eq!(shown["breakdown"]["exact"], true, "gpt-4o counts exactly");
    assert_eq!(
        parts_sum(&shown),
        shown["breakdown"]["requestTokens"].as_i64().unwrap()
    );
}

#[test]
fn context_show_names_an_unknown_model_and_what_to_do() {
    let w = World::new();
    let config = w.config(SIM_EXACT);
    let out = w.rampart(&config, &["context", "show", "--model", "sim/nope"]);
    assert_eq!(out.status.code(), Some(1));
    let t = text(&out);
    assert!(t.contains("sim/nope") && t.contains("sim/exact"), "{t}");
    let out = w.rampart(&config, &["context", "show", "--model", "elsewhere/x"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains("no provider `elsewhere`"),
        "{}",
        text(&out)
    );
    // A known model other than the configured one is shown.
    let shown = show_json(&w, &config, &["--model", "sim/default"]);
    assert_eq!(shown["breakdown"]["model"], "sim/default");
}
