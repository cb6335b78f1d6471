//! End to end with the real agents: Claude Code, the Codex CLI and pi (installed by
//! `.ci/agents`, pinned) through a `rampart serve` process, in front of the scripted loopback
//! model of `common::agent_model`. Each agent runs isolated (its own HOME and config, a
//! cleared environment, a private network namespace when one can be made: see
//! `common::agents`) and within a time limit.
//!
//! Without npm or the agents every test prints a `SKIPPED:` line and passes;
//! `RAMPART_REQUIRE_AGENTS=1` (set by `.ci/run`) makes that a failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod transparency;

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::agent_model::AgentModel;
use common::agents::{Agent, Sandbox};
use rampart_message::AgentMessage;
use rampart_sessions::store::SessionStore;
use rampart_sessions::{Session, SessionOptions};

/// How long one agent run may take before its process group is killed.
const RUN_LIMIT: Duration = Duration::from_secs(180);

/// A window so large that serve manages nothing.
const HUGE_WINDOW: u64 = 10_000_000;

/// A `rampart serve` process in front of `model`; killed when dropped.
struct Serve {
    child: Child,
    base: String,
    sessions: PathBuf,
    _dir: tempfile::TempDir,
}

impl Serve {
    /// Starts serve on a free port with each agent's model (see [`Agent::model`]) configured
    /// at `window` tokens, each on an upstream of its own wire: Claude Code's on an Anthropic
    /// one, Codex's on an OpenAI Responses one, pi's on an OpenAI chat-completions one, all the
    /// scripted `model`.
    fn start(model: &AgentModel, window: u64) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let url = model.url();
        let config = common::write_config(
            dir.path(),
            &format!(
                r#"
[agents.defaults.model]
primary = "anthropic-up/claude-loop"

[models.providers.anthropic-up]
api = "anthropic-messages"
baseUrl = "{url}"
maxRetries = 0
timeoutSeconds = 60

[[models.providers.anthropic-up.models]]
id = "claude-loop"
contextWindow = {window}

[models.providers.responses-up]
api = "openai-responses"
baseUrl = "{url}"
maxRetries = 0
timeoutSeconds = 60

[[models.providers.responses-up.models]]
id = "gpt-loop"
contextWindow = {window}

[models.providers.openai-up]
api = "openai-completions"
baseUrl = "{url}"
maxRetries = 0
timeoutSeconds = 60

[[models.providers.openai-up.models]]
id = "pi-loop"
contextWindow = {window}
"#
            ),
        );
        let sessions = dir.path().join("sessions");
        let mut child = Command::new(env!("CARGO_BIN_EXE_rampart"))
            .arg("--config")
            .arg(&config)
            .arg("--sessions-dir")
            .arg(&sessions)
            .args(["serve", "--listen", "127.0.0.1:0"])
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

    /// The conversations in the registry: (key, `spawnedBy`), sorted by key.
    fn conversations(&self) -> Vec<(String, Option<String>)> {
        let mut all: Vec<(String, Option<String>)> = SessionStore::open(&self.sessions)
            .unwrap()
            .list()
            .unwrap()
            .into_iter()
            .map(|(key, entry)| {
                let parent = entry.extra.get("spawnedBy").and_then(|v| v.as_str());
                (key, parent.map(str::to_owned))
            })
            .collect();
        all.sort();
        all
    }

    /// How many compactions conversation `key`'s active branch holds.
    fn compactions(&self, key: &str) -> usize {
        let store = SessionStore::open(&self.sessions).unwrap();
        let entry = store.get(key).unwrap().unwrap();
        let session = Session::open(
            &store.session_file_path(key, &entry).unwrap(),
            SessionOptions::default(),
        )
        .unwrap();
        session
            .tree()
            .active_branch()
            .into_iter()
            .filter(|e| e.body.entry_type() == "compaction")
            .count()
    }

    /// The messages of conversation `key`'s active branch, as (role, text) with tool calls
    /// and results as their text.
    fn branch(&self, key: &str) -> Vec<(String, String)> {
        let store = SessionStore::open(&self.sessions).unwrap();
        let entry = store.get(key).unwrap().unwrap();
        let session = Session::open(
            &store.session_file_path(key, &entry).unwrap(),
            SessionOptions::default(),
        )
        .unwrap();
        session
            .tree()
            .active_branch()
            .into_iter()
            .filter_map(|e| e.body.message())
            .map(|m| (m.role().to_owned(), message_text(m)))
            .collect()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A message's text, tool calls (name and arguments) and tool results included.
fn message_text(m: &AgentMessage) -> String {
    serde_json::to_value(m)
        .map(|v| v["content"].to_string())
        .unwrap_or_default()
}

/// A number no run could guess: eight digits from the process's random hasher state.
fn random_secret() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(std::process::id().into());
    10_000_000 + h.finish() % 90_000_000
}

/// One agent through serve: a one-shot task with a tool call, then a second turn in its last
/// session; both answers quote the number only the tool read, and both turns are one
/// conversation in serve's registry, holding both prompts and the tool's result.
fn one_shot_then_second_turn(agent: Agent) {
    let Some(bin) = common::agents::installed() else {
        return;
    };
    let model = AgentModel::start();
    let serve = Serve::start(&model, 200_000);
    let secret = random_secret();
    let sandbox = Sandbox::new(&bin, agent, &serve.base, secret);

    let first = sandbox.run(&sandbox.read_prompt(), false, RUN_LIMIT);
    first.assert_ok(&format!("{} (first turn)", agent.name()));
    assert!(
        first.stdout.contains(&secret.to_string()),
        "{} did not say the secret {secret}: {first:?}",
        agent.name()
    );
    let second = sandbox.run("What was the secret number again?", true, RUN_LIMIT);
    second.assert_ok(&format!("{} (second turn)", agent.name()));
    assert!(
        second
            .stdout
            .contains(&format!("As I said, the secret number is {secret}")),
        "{}'s second turn did not carry the first one: {second:?}",
        agent.name()
    );

    let conversations = serve.conversations();
    assert_eq!(
        conversations.len(),
        1,
        "{}: two turns of one session must be one conversation: {conversations:?}",
        agent.name()
    );
    let (key, parent) = &conversations[0];
    assert_eq!(parent, &None, "{key} is a root");
    let branch = serve.branch(key);
    let all: String = branch.iter().map(|(r, t)| format!("{r}: {t}\n")).collect();
    for needle in [
        sandbox.read_prompt(),
        format!("secret number is {secret}"),
        "What was the secret number again?".to_owned(),
        format!("As I said, the secret number is {secret}."),
    ] {
        assert!(all.contains(&needle), "{key} lacks {needle:?}:\n{all}");
    }
    // Every model request carried the agent's own key.
    for request in model.turns() {
        let auth = request
            .header("x-api-key")
            .or_else(|| request.header("authorization"))
            .unwrap_or_default();
        assert!(
            auth.ends_with(agent.key()),
            "{}: upstream got {auth:?}",
            agent.name()
        );
    }
}

#[test]
fn claude_code_one_shot_with_a_tool_then_continue() {
    one_shot_then_second_turn(Agent::ClaudeCode);
}

#[test]
fn codex_one_shot_with_a_tool_then_exec_resume_last() {
    one_shot_then_second_turn(Agent::Codex);
}

#[test]
fn pi_one_shot_with_a_tool_then_continue() {
    one_shot_then_second_turn(Agent::Pi);
}

#[test]
fn claude_code_sees_the_same_model_requests_through_serve_but_for_the_listed_differences() {
    transparency::differential(Agent::ClaudeCode);
}

#[test]
fn codex_sees_the_same_model_requests_through_serve_but_for_the_listed_differences() {
    transparency::differential(Agent::Codex);
}

#[test]
fn pi_sees_the_same_model_requests_through_serve_but_for_the_listed_differences() {
    transparency::differential(Agent::Pi);
}

/// README.md lists exactly the differences the differential looks past, in the same order.
#[test]
fn the_readme_lists_exactly_the_known_differences() {
    let listed = transparency::readme_list();
    let known: Vec<String> = transparency::KNOWN
        .iter()
        .map(|k| transparency::collapse(k.readme))
        .collect();
    assert_eq!(listed, known);
}

/// Claude Code's sub-agent (its `Agent` tool) through serve: the sub-agent's requests carry
/// the root's session id and a history of their own, and arrive as a child conversation of
/// the root (`spawnedBy`), which gets the sub-agent's answer as the tool's result.
#[test]
fn claude_code_sub_agent_arrives_as_a_child_of_its_root() {
    let Some(bin) = common::agents::installed() else {
        return;
    };
    let model = AgentModel::delegating();
    let serve = Serve::start(&model, 200_000);
    let secret = random_secret();
    let sandbox = Sandbox::new(&bin, Agent::ClaudeCode, &serve.base, secret);
    let prompt = format!(
        "Please delegate this to a sub-agent: read {} and tell me the secret number.",
        sandbox.secret_path()
    );
    let run = sandbox.run(&prompt, false, RUN_LIMIT);
    run.assert_ok("Claude Code with a sub-agent");
    assert!(run.stdout.contains(&secret.to_string()), "{run:?}");

    let conversations = serve.conversations();
    assert_eq!(
        conversations.len(),
        2,
        "a root and its sub-agent: {conversations:?}"
    );
    let (root, _) = conversations
        .iter()
        .find(|(_, parent)| parent.is_none())
        .unwrap_or_else(|| panic!("no root: {conversations:?}"));
    let (child, parent) = conversations
        .iter()
        .find(|(_, parent)| parent.is_some())
        .unwrap_or_else(|| panic!("no child: {conversations:?}"));
    assert_eq!(parent.as_deref(), Some(root.as_str()), "{conversations:?}");
    let text = |key: &str| -> String {
        serve
            .branch(key)
            .iter()
            .map(|(r, t)| format!("{r}: {t}\n"))
            .collect()
    };
    let (root_text, child_text) = (text(root), text(child));
    assert!(root_text.contains("delegate"), "{root_text}");
    assert!(
        root_text.contains("\"Agent\""),
        "the root called the Agent tool: {root_text}"
    );
    assert!(!child_text.contains("delegate"), "{child_text}");
    assert!(
        child_text.contains("\"Read\""),
        "the sub-agent read the file: {child_text}"
    );
    for t in [&root_text, &child_text] {
        assert!(t.contains(&format!("secret number is {secret}")), "{t}");
    }
}

/// One agent through serve at a small `window`, asked to read a 200 KB file `reads` times in
/// one task (each read a big tool output, as big as the agent passes it on): the agent exits 0
/// and says the number, the task stays one conversation, serve compacted it (it would not fit
/// otherwise), and every request the model got fits in the window, counted with the model's
/// tokenizer over the whole body (system prompt, tools, messages and the JSON around them).
/// Returns the model, for what a caller checks further.
fn small_window_under_big_tool_outputs(
    agent: Agent,
    window: u64,
    reads: usize,
) -> Option<AgentModel> {
    let bin = common::agents::installed()?;
    let model = AgentModel::start();
    let serve = Serve::start(&model, window);
    let secret = random_secret();
    let sandbox = Sandbox::new(&bin, agent, &serve.base, secret);
    sandbox.grow_secret(200_000);
    let prompt = format!(
        "Read the file {} {reads} times, then tell me the secret number in it.",
        sandbox.secret_path()
    );
    let run = sandbox.run(&prompt, false, RUN_LIMIT);
    run.assert_ok(&format!("{} at a {window}-token window", agent.name()));
    assert!(
        run.stdout.contains(&format!("secret number is {secret}")),
        "{}: {run:?}",
        agent.name()
    );

    let conversations = serve.conversations();
    assert_eq!(conversations.len(), 1, "{conversations:?}");
    assert!(
        serve.compactions(&conversations[0].0) >= 1,
        "{}: serve never compacted, so the test did not reach the window",
        agent.name()
    );
    let counter = rampart_context::tokens::TokenCounter::for_model(agent.model());
    let sizes: Vec<u64> = model
        .requests()
        .iter()
        .map(|r| counter.count_text(&r.raw_body))
        .collect();
    assert!(
        sizes.iter().all(|&t| t <= window),
        "{}: requests above the {window}-token window: {sizes:?}",
        agent.name()
    );
    Some(model)
}

#[test]
fn claude_code_at_a_64k_window_under_big_tool_outputs() {
    small_window_under_big_tool_outputs(Agent::ClaudeCode, 64_000, 4);
}

/// Claude Code asks for 32,000 answer tokens; at a 40,000-token window that left its own system
/// prompt and tools no room, and its very first request was refused. Now every request goes
/// upstream with a bound that fits beside its prompt: prompt and bound together within the
/// window, the bound lowered from 32,000 and never below `serve.minAnswerTokens`.
#[test]
fn claude_code_at_a_40k_window_gets_answer_bounds_that_fit() {
    let Some(model) = small_window_under_big_tool_outputs(Agent::ClaudeCode, 40_000, 2) else {
        return;
    };
    let counter = rampart_context::tokens::TokenCounter::for_model(Agent::ClaudeCode.model());
    let fitted: Vec<(u64, u64)> = model
        .requests()
        .iter()
        .filter_map(|r| {
            let body: serde_json::Value = serde_json::from_str(&r.raw_body).ok()?;
            let bound = body["max_tokens"].as_u64()?;
            // Claude Code's own side requests (titles, probes) keep their small bounds.
            (bound > 1_000).then(|| (counter.count_text(&r.raw_body), bound))
        })
        .collect();
    assert!(!fitted.is_empty());
    for (prompt, bound) in &fitted {
        assert!(
            (4_096..32_000).contains(bound) && prompt + bound <= 40_000,
            "prompt {prompt} + bound {bound} in a 40,000-token window: {fitted:?}"
        );
    }
}

#[test]
fn codex_at_a_32k_window_under_big_tool_outputs() {
    small_window_under_big_tool_outputs(Agent::Codex, 32_000, 8);
}

#[test]
fn pi_at_a_32k_window_under_big_tool_outputs() {
    small_window_under_big_tool_outputs(Agent::Pi, 32_000, 4);
}

/// The issue asks that compaction summaries be made with the client's credential: a real
/// upstream refuses a summary request without a key. Today serve's engine asks for them with
/// the provider's own key only (README, Keys), so this fails; run it with `--ignored`.
#[test]
#[ignore = "serve's compaction summaries do not carry the client's key yet"]
fn every_model_request_under_a_small_window_carries_the_clients_key() {
    let Some(model) = small_window_under_big_tool_outputs(Agent::Pi, 32_000, 4) else {
        return;
    };
    let keys: Vec<Option<String>> = model
        .requests()
        .iter()
        .map(|r| r.header("authorization").map(str::to_owned))
        .collect();
    let expected = Some(format!("Bearer {}", Agent::Pi.key()));
    assert!(keys.iter().all(|k| *k == expected), "{keys:?}");
}
