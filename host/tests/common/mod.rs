//! Helpers shared by the end-to-end tests: finding the engine libraries cargo built next to the
//! test binary, writing configs, and running the `rampart` binary.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]
pub mod agent_model;
pub mod agents;
pub mod loopback;
pub mod private_postgres;
pub mod serve;

use std::path::{Path, PathBuf};
use std::process::Output;

use rampart_engine_api::{AgentMessage, MessageList};

/// The path of the cdylib of crate `name`, built by cargo because it is a dev-dependency.
/// It sits next to the test binary (`target/<profile>/deps`), whatever the target dir or profile.
pub fn fixture(name: &str) -> PathBuf {
    let file = format!(
        "{}{}{}",
        std::env::consts::DLL_PREFIX,
        name.replace('-', "_"),
        std::env::consts::DLL_SUFFIX
    );
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    [deps.to_path_buf(), deps.parent().unwrap().to_path_buf()]
        .into_iter()
        .map(|d| d.join(&file))
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!(
                "engine library {file} was not built next to {}",
                exe.display()
            )
        })
}

/// Writes `plugins.toml` with `body` into `dir` and returns its path.
pub fn write_config(dir: &Path, body: &str) -> PathBuf {
    let path = dir.join("plugins.toml");
    std::fs::write(&path, body).unwrap();
    path
}

/// A config selecting `id`, loaded from `path`, with extra lines inside its engine table.
/// The call deadline is short enough for the hang fixture and long enough for a panic to
/// unwind with a backtrace on a loaded debug build (500 ms was not).
pub fn config_for(dir: &Path, id: &str, path: &Path, extra: &str) -> PathBuf {
    write_config(
        dir,
        &format!(
            "[plugins]\ncallTimeoutMs = 3000\nloadTimeoutMs = 5000\n[plugins.slots]\n\
             contextEngine = \"{id}\"\n[plugins.engines.{id}]\npath = \"{}\"\n{extra}\n",
            path.display()
        ),
    )
}

/// Runs the `rampart` binary with `args`, without inheriting a config from the environment.
pub fn rampart(args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_rampart"))
        .args(args)
        .env_remove("RAMPART_CONFIG")
        .env("RUST_LOG", "warn")
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap()
}

/// stdout and stderr of `out`, together.
pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A history of `n` alternating user/assistant messages of about 100 tokens each.
pub fn history(n: usize) -> MessageList {
    (0..n)
        .map(|i| {
            if i % 2 == 0 {
                AgentMessage::user_text(format!("{i}: {}", "question ".repeat(44)), i as u64)
            } else {
                AgentMessage::assistant_text(
                    format!("{i}: {}", "answer ".repeat(57)),
                    "test",
                    "sim",
                    "sim-model",
                    i as u64,
                )
            }
        })
        .map(std::sync::Arc::new)
        .collect()
}

/// An assistant message with `content` blocks (pi format) and stop reason `stop`.
pub fn assistant_blocks(content: serde_json::Value, stop: &str, timestamp: u64) -> AgentMessage {
    serde_json::from_value(serde_json::json!({
        "role": "assistant", "content": content,
        "api": "sim", "provider": "sim", "model": "m",
        "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
        "stopReason": stop, "timestamp": timestamp
    }))
    .unwrap()
}

/// An assistant message that calls tool `name` once, with `{"path": path}`.
pub fn tool_call(id: &str, name: &str, path: &str, timestamp: u64) -> AgentMessage {
    assistant_blocks(
        serde_json::json!([{"type": "toolCall", "id": id, "name": name, "arguments": {"path": path}}]),
        "toolUse",
        timestamp,
    )
}

/// Everything a run-loop test needs, built the way the CLI builds it: one event sink for the
/// engines and the loop, the providers of `config`, and an engine slot offered the blob store
/// (when given) and `llm.complete`.
pub struct Harness {
    pub config: rampart_host::config::Config,
    pub sink: rampart_host::engine::services::EventSink,
    pub providers: std::sync::Arc<rampart_host::providers::registry::Providers>,
    pub slot: rampart_host::engine::slot::EngineSlot,
}

impl Harness {
    /// A harness for `config`, without a blob store.
    pub fn new(config: rampart_host::config::Config) -> Self {
        Self::with_blobs(config, None)
    }

    /// A harness for `config` whose engines can store blobs in `blobs`.
    pub fn with_blobs(
        config: rampart_host::config::Config,
        blobs: Option<rampart_host::blobs::BlobStore>,
    ) -> Self {
        let sink = rampart_host::engine::services::EventSink::tracing_only();
        let providers = std::sync::Arc::new(
            rampart_host::providers::registry::Providers::from_config(&config).unwrap(),
        );
        let resources = rampart_host::engine::slot::HostResources {
            blobs,
            llm: Some(std::sync::Arc::new(
                rampart_host::run::llm::ProvidersLlm::new(providers.clone()),
            )),
            ..Default::default()
        };
        let slot = rampart_host::engine::slot::EngineSlot::resolve_full(&config, &sink, &resources)
            .unwrap();
        Self {
            config,
            sink,
            providers,
            slot,
        }
    }

    /// A runner over this harness with the config's run settings.
    pub fn runner(&self) -> rampart_host::run::Runner<'_> {
        let settings = rampart_host::run::RunSettings::from_config(&self.config).unwrap();
        rampart_host::run::Runner::new(
            &self.config,
            &self.slot,
            &*self.providers,
            settings,
            rampart_host::run::RunEvents::recording(self.sink.clone(), None),
        )
    }
}

/// A new, empty session file `s.jsonl` in `dir`.
pub fn new_session(dir: &Path) -> rampart_sessions::Session {
    rampart_sessions::Session::create(
        &dir.join("s.jsonl"),
        rampart_sessions::entry::SessionHeader::new("/tmp"),
        rampart_sessions::SessionOptions::default(),
    )
    .unwrap()
}

/// The text of a message as `sessions show --json` prints it: its string content, or its text
/// blocks joined.
pub fn text_of(message: &serde_json::Value) -> String {
    match &message["content"] {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// The last message of a request body as the upstream received it (`messages`' last entry).
pub fn last_message(body: &serde_json::Value) -> serde_json::Value {
    body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or_else(|| panic!("no messages in {body}"))
}

/// What every quarantine line says.
pub const QUARANTINED: &str = "quarantined for this process";

/// `SKIPPED: <suite>: <why>` on stderr, or a failure when the environment variable `require`
/// is `1` (CI sets it, so a missing real part fails there instead of passing unseen).
pub fn skipped(require: &str, suite: &str, why: &str) {
    let line = format!("SKIPPED: {suite}: {why}");
    if std::env::var(require).is_ok_and(|v| v == "1") {
        panic!("{line}");
    }
    eprintln!("{line}");
}

/// The conformance run's view of an engine the host started: the same handle the slot uses,
/// whatever its transport (library, child, executable, component).
pub struct Through<'a>(pub &'a rampart_host::engine::handle::EngineHandle);

impl rampart_engine_test::conformance::Transport for Through<'_> {
    fn info_json(&self) -> Result<String, rampart_engine_api::EngineError> {
        Ok(serde_json::to_string(self.0.info()).unwrap())
    }
    fn call(&self, method: &str, payload: &str) -> Result<String, rampart_engine_api::EngineError> {
        self.0.call_json(method, payload)
    }
    fn dispose(&self) -> Result<(), rampart_engine_api::EngineError> {
        self.0.shutdown()
    }
}

/// Calls `assemble` of a keep-last engine configured with `keep = 6` over histories of each of
/// `sizes` messages in turn, as a growing conversation sends them (as deltas to an engine that
/// announced `messageRefs`), and checks each answer is the newest six, unchanged.
pub fn keeps_the_newest_six(engine: &rampart_host::engine::handle::EngineHandle, sizes: &[usize]) {
    for &n in sizes {
        let history = history(n);
        let out: rampart_engine_api::protocol::AssembleResult = engine
            .call(rampart_engine_api::protocol::AssembleParams {
                messages: history.clone(),
                token_budget: Some(100_000),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(
            out.messages.to_vec(),
            history[n.saturating_sub(6)..].to_vec(),
            "the newest six of {n}, unchanged"
        );
    }
}
