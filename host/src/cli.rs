//! The command-line interface: argument parsing and the commands of this stage.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::config::{self, Config, ConfigSource};
use crate::engine_handle::EngineOrigin;
use crate::loader::{LoadRequest, inspect_library, load_engine};
use crate::services::{EventSink, HostServices};
use crate::slot::{EngineSlot, SlotState, host_max_log_level};

/// Rampart: a host for the context engines of LLM agents.
#[derive(Debug, Parser)]
#[command(name = "rampart", version, about, long_about = None)]
pub struct Cli {
    /// Flags every command accepts, before or after the subcommand.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Flags every command accepts.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// The plugins.toml to use (else $RAMPART_CONFIG, ./plugins.toml, the user config dir).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Where sessions and sessions.json live (default: the platform data directory).
    #[arg(long, global = true, value_name = "DIR")]
    pub sessions_dir: Option<PathBuf>,
    /// How log lines on stderr look. RUST_LOG sets what is logged.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Write every decision of the run loop and the engines (replay, run, compact) to FILE,
    /// one JSON object per line: `{"engine", "kind", "sessionId", "data"}`.
    #[arg(long, global = true, value_name = "FILE")]
    pub events: Option<PathBuf>,
}

/// Formats of the log on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Inspect context engines.
    #[command(subcommand)]
    Engines(EnginesCommand),
    /// Inspect the configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Sessions: list, show, import and export transcripts.
    #[command(subcommand)]
    Sessions(SessionsCommand),
    /// Replay a recorded session turn by turn through the context engine against the simulator,
    /// showing what each layer of the defence did at a chosen window.
    Replay(ReplayArgs),
    /// Send one user turn to the configured model, persisted in a session.
    Run {
        /// What the user says.
        prompt: String,
        /// The session (registry key); created when new.
        #[arg(long, value_name = "KEY", default_value = crate::replay::live::DEFAULT_SESSION_KEY)]
        session: String,
    },
    /// Compact a session now, through its lane.
    Compact {
        /// A registry key, a session id, or a session file.
        session: String,
        /// Extra instructions for the summariser (what to keep, what to stress).
        #[arg(long, value_name = "TEXT")]
        instructions: Option<String>,
    },
}

/// `rampart replay FILE [flags]`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The transcript (any format `sessions import` reads); it is only read.
    pub file: PathBuf,
    /// The simulated model's window, in tokens [default: 200000].
    #[arg(long, value_name = "N")]
    pub window: Option<u64>,
    /// The model whose tokenizer and overflow error wording the simulator takes (gpt-4o,
    /// claude-sonnet-4-5, gemini-2.5-pro, llama3, …).
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// Count prompts with this tokenizer instead: estimate, calibrated, o200k_base, cl100k_base.
    #[arg(long, value_name = "NAME")]
    pub tokenizer: Option<String>,
    /// Answer overflows with this provider's error text instead: anthropic, openai, gemini,
    /// ollama, bedrock.
    #[arg(long, value_name = "NAME")]
    pub overflow_wording: Option<String>,
    /// Use this context engine instead of plugins.slots.contextEngine, for this run only.
    #[arg(long, value_name = "ID")]
    pub engine: Option<String>,
    /// Summarise compactions with this real model (provider/model) instead of the engine's
    /// embedded summariser; needs its network access and key.
    #[arg(long, value_name = "MODEL")]
    pub compaction_model: Option<String>,
    /// Print one JSON document (rows and summary) instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Write every request the model received to FILE, one JSON object per line:
    /// {"turn", "attempt", "model", "window", "promptTokens", "system", "messages"}.
    #[arg(long, value_name = "FILE")]
    pub requests_out: Option<PathBuf>,
    /// Write a self-contained HTML report (chart and summary) to FILE.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Keep the temporary directory holding the replay's session (its path is printed).
    #[arg(long)]
    pub keep: bool,
    /// Stop at the first call that fails (exit code 1) instead of going on.
    #[arg(long)]
    pub stop_on_error: bool,
    /// For a file holding several sessions: which one to replay, from 1 [default: 1].
    #[arg(long, value_name = "N")]
    pub session_index: Option<usize>,
}

impl ReplayArgs {
    fn into_options(self) -> crate::replay::ReplayOptions {
        crate::replay::ReplayOptions {
            input: self.file,
            window: self.window,
            model: self.model,
            tokenizer: self.tokenizer,
            overflow_wording: self.overflow_wording,
            engine: self.engine,
            compaction_model: self.compaction_model,
            json: self.json,
            requests_out: self.requests_out,
            report: self.report,
            keep: self.keep,
            stop_on_error: self.stop_on_error,
            session_index: self.session_index,
        }
    }
}

/// `rampart sessions …`
#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// List the sessions in the sessions directory, newest first.
    List,
    /// Show the messages of a session's active branch (or of the branch ending at LEAF).
    Show {
        /// A registry key, a session id, or a session file.
        id: String,
        /// Show the branch that ends at this entry id instead of the current leaf.
        #[arg(long, value_name = "LEAF")]
        branch: Option<String>,
        /// Print the messages as a JSON array in pi's message format.
        #[arg(long)]
        json: bool,
    },
    /// Import a transcript (pi v1–v3, Claude Code, Codex, OpenAI messages, SWE-agent, OpenHands).
    Import {
        /// The transcript; its format is detected from its content.
        file: PathBuf,
        /// The registry key to file it under (default: the file name without extension).
        #[arg(long = "as", value_name = "KEY")]
        key: Option<String>,
    },
    /// Export a session.
    Export {
        /// A registry key, a session id, or a session file.
        id: String,
        /// The format.
        #[arg(long, value_enum)]
        format: crate::sessions_cmd::ExportFormat,
        /// Write here instead of standard output (required for `pi`).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
}

/// `rampart engines …`
#[derive(Debug, Subcommand)]
pub enum EnginesCommand {
    /// List the built-in and configured engines, marking the active one, with their state.
    List,
    /// Load a library and report its id, version and API version, or exactly why it cannot load.
    Check {
        /// The library file (.so, .dylib or .dll).
        path: PathBuf,
    },
    /// Resolve the configured engine and run one `assemble` over a small sample history through
    /// it, as a turn would: a quick way to see an engine work (or fail) inside this host.
    Probe,
}

/// `rampart config …`
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate plugins.toml and resolve every engine it names, without running any.
    Check,
}

/// Sets up `tracing` on stderr, honouring RUST_LOG.
pub fn init_logging(format: LogFormat) {
    init_logging_with(format, "warn");
}

/// What is logged when RUST_LOG is not set, for `command`. A replay checks the window guard
/// at every call and every append, so its per-check warning would flood stderr; the replay
/// reports it once in its summary instead.
pub fn default_log_filter(command: &Command) -> &'static str {
    match command {
        Command::Replay(_) => "warn,rampart_host::models=error",
        _ => "warn",
    }
}

/// [`init_logging`] with `default` as the filter when RUST_LOG is not set.
pub fn init_logging_with(format: LogFormat, default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// Runs a parsed command line; the exit code is the result.
pub fn run(cli: Cli, out: &mut dyn Write) -> anyhow::Result<i32> {
    match cli.command {
        Command::Engines(EnginesCommand::List) => engines_list(cli.global.config, out),
        Command::Engines(EnginesCommand::Check { path }) => engines_check(&path, out),
        Command::Engines(EnginesCommand::Probe) => engines_probe(cli.global.config, out),
        Command::Config(ConfigCommand::Check) => config_check(cli.global.config, out),
        Command::Sessions(cmd) => {
            use crate::sessions_cmd as s;
            let store = s::open_store(cli.global.sessions_dir.as_deref())?;
            match cmd {
                SessionsCommand::List => s::list(&store, out),
                SessionsCommand::Show { id, branch, json } => {
                    s::show(&store, &id, branch.as_deref(), json, out)
                }
                SessionsCommand::Import { file, key } => {
                    s::import(&store, &file, key.as_deref(), out)
                }
                SessionsCommand::Export {
                    id,
                    format,
                    out: target,
                } => s::export(&store, &id, format, target.as_deref(), out),
            }
        }
        Command::Replay(args) => {
            let events = event_sink(cli.global.events.as_deref())?;
            let (_, config) = load_config(cli.global.config)?;
            crate::replay::run_command(
                config,
                &args.into_options(),
                cli.global.sessions_dir.as_deref(),
                events,
                out,
            )
        }
        Command::Run { prompt, session } => {
            let events = event_sink(cli.global.events.as_deref())?;
            let (_, config) = load_config(cli.global.config)?;
            let store = crate::sessions_cmd::open_store(cli.global.sessions_dir.as_deref())?;
            let mut err = std::io::stderr().lock();
            crate::replay::live::run_prompt(
                &config,
                &store,
                events,
                &prompt,
                Some(&session),
                out,
                &mut err,
            )
        }
        Command::Compact {
            session,
            instructions,
        } => {
            let events = event_sink(cli.global.events.as_deref())?;
            let (_, config) = load_config(cli.global.config)?;
            let store = crate::sessions_cmd::open_store(cli.global.sessions_dir.as_deref())?;
            let mut err = std::io::stderr().lock();
            crate::replay::live::compact(
                &config,
                &store,
                events,
                &session,
                instructions.as_deref(),
                out,
                &mut err,
            )
        }
    }
}

/// The event sink of a command: JSON lines to `--events FILE` when given, else tracing only.
fn event_sink(path: Option<&std::path::Path>) -> anyhow::Result<EventSink> {
    use anyhow::Context;
    match path {
        None => Ok(EventSink::tracing_only()),
        Some(path) => {
            let file = std::fs::File::create(path).with_context(|| {
                format!(
                    "cannot create the --events file `{}`; check the directory exists and is \
                     writable",
                    path.display()
                )
            })?;
            Ok(EventSink::to_writer(Box::new(std::io::BufWriter::new(
                file,
            ))))
        }
    }
}

fn load_config(explicit: Option<PathBuf>) -> anyhow::Result<(ConfigSource, Config)> {
    let source = config::locate(explicit.as_deref())?;
    let config = config::load(&source)?;
    Ok((source, config))
}

fn engines_list(explicit: Option<PathBuf>, out: &mut dyn Write) -> anyhow::Result<i32> {
    let (source, config) = load_config(explicit)?;
    writeln!(out, "config: {source}")?;
    let events = EventSink::tracing_only();
    let slot = match EngineSlot::resolve(&config, &events) {
        Ok(slot) => slot,
        Err(fatal) => {
            writeln!(out, "error: {fatal}")?;
            return Ok(1);
        }
    };
    let active = slot.active();
    let mut rows: Vec<(String, String, String, String)> = Vec::new();
    let mut ids = config.available_engine_ids();
    if !ids.contains(&config.context_engine) {
        ids.push(config.context_engine.clone());
    }
    for id in ids {
        let mark = if id == active.id() { "*" } else { " " }.to_string();
        let (origin, state) = if id == config::BUILTIN_ENGINE_ID {
            let state = if active.id() == id && slot.configured_id() != id {
                format!("serving in place of \"{}\"", slot.configured_id())
            } else if active.id() == id {
                "active".to_string()
            } else {
                "ready (fallback)".to_string()
            };
            ("built in".to_string(), state)
        } else if id == slot.configured_id() {
            match slot.state() {
                SlotState::Quarantined(q) => {
                    let origin = config
                        .resolve_engine_path(&id)
                        .ok()
                        .flatten()
                        .map(|p| p.display().to_string())
                        .unwrap_or_else(|| "?".into());
                    (
                        origin,
                        format!("quarantined during {}: {}", q.operation, q.reason),
                    )
                }
                SlotState::Active => {
                    let info = active.info();
                    (
                        active.origin().to_string(),
                        format!("active ({} {})", info.name, info.version),
                    )
                }
            }
        } else {
            match config.resolve_engine_path(&id) {
                Ok(Some(path)) => match inspect_library(&path) {
                    Ok(facts) => (
                        facts.path.display().to_string(),
                        format!("available (API {})", facts.api_version),
                    ),
                    Err(e) => (path.display().to_string(), format!("cannot load: {e}")),
                },
                Ok(None) => ("built in".into(), "available".into()),
                Err(e) => ("?".into(), format!("cannot resolve: {e}")),
            }
        };
        rows.push((mark, id, origin, state));
    }
    let id_width = rows.iter().map(|r| r.1.len()).max().unwrap_or(2).max(2);
    writeln!(out, "  {:id_width$}  STATE  [ORIGIN]", "ID")?;
    for (mark, id, origin, state) in rows {
        writeln!(out, "{mark} {id:id_width$}  {state}  [{origin}]")?;
    }
    slot.shutdown();
    Ok(0)
}

fn engines_check(path: &std::path::Path, out: &mut dyn Write) -> anyhow::Result<i32> {
    let events = EventSink::tracing_only();
    let request = LoadRequest {
        id: "check".to_string(),
        verify_id: false,
        path: path.to_path_buf(),
        config: serde_json::json!({}),
        services: Arc::new(HostServices::new("check", events)),
        load_timeout: std::time::Duration::from_millis(config::DEFAULT_LOAD_TIMEOUT_MS),
        call_timeout: std::time::Duration::from_millis(config::DEFAULT_CALL_TIMEOUT_MS),
        max_log_level: Some(host_max_log_level()),
    };
    match load_engine(request) {
        Ok(handle) => {
            let info = handle.info().clone();
            let file = match handle.origin() {
                EngineOrigin::Library(p) => p.display().to_string(),
                EngineOrigin::BuiltIn => path.display().to_string(),
            };
            writeln!(out, "ok: {file}")?;
            writeln!(out, "  id:          {}", info.id)?;
            writeln!(out, "  name:        {}", info.name)?;
            writeln!(out, "  version:     {}", info.version)?;
            writeln!(out, "  api version: {}", info.protocol.version)?;
            writeln!(out, "  owns compaction: {}", info.owns_compaction)?;
            let _ = handle.shutdown();
            Ok(0)
        }
        Err(e) => {
            writeln!(out, "error: {e}")?;
            Ok(1)
        }
    }
}

fn config_check(explicit: Option<PathBuf>, out: &mut dyn Write) -> anyhow::Result<i32> {
    let source = config::locate(explicit.as_deref())?;
    writeln!(out, "config: {source}")?;
    let config = match config::load(&source) {
        Ok(c) => c,
        Err(e) => {
            writeln!(out, "error: {e}")?;
            return Ok(1);
        }
    };
    let mut failures = 0;
    writeln!(out, "contextEngine: {}", config.context_engine)?;
    let mut ids: Vec<String> = config.engines.keys().cloned().collect();
    if !ids.contains(&config.context_engine) {
        ids.insert(0, config.context_engine.clone());
    }
    for id in ids {
        let required = config.engines.get(&id).is_some_and(|e| e.required);
        let legacy_path = id == config::BUILTIN_ENGINE_ID
            && config.engines.get(&id).is_some_and(|e| e.path.is_some());
        if legacy_path {
            failures += 1;
            writeln!(
                out,
                "error: engine `legacy` is built in; remove plugins.engines.legacy.path (no \
                 library may register that id)"
            )?;
            continue;
        }
        match config.resolve_engine_path(&id) {
            Ok(None) => writeln!(out, "engine {id}: built in")?,
            Ok(Some(path)) => writeln!(
                out,
                "engine {id}: {}{}",
                path.display(),
                if required { " (required)" } else { "" }
            )?,
            Err(e) => {
                failures += 1;
                writeln!(out, "error: {e}")?;
            }
        }
    }
    if failures == 0 {
        writeln!(out, "ok")?;
        Ok(0)
    } else {
        Ok(1)
    }
}

fn engines_probe(explicit: Option<PathBuf>, out: &mut dyn Write) -> anyhow::Result<i32> {
    use rampart_engine_api::AgentMessage;
    use rampart_engine_api::protocol::{AssembleParams, SessionRef};

    let (source, config) = load_config(explicit)?;
    writeln!(out, "config: {source}")?;
    let slot = match EngineSlot::resolve(&config, &EventSink::tracing_only()) {
        Ok(slot) => slot,
        Err(fatal) => {
            writeln!(out, "error: {fatal}")?;
            return Ok(1);
        }
    };
    let history: Vec<AgentMessage> = (0..12)
        .map(|i| {
            if i % 2 == 0 {
                AgentMessage::user_text(format!("probe question {i}: {}", "why? ".repeat(40)), i)
            } else {
                AgentMessage::assistant_text(
                    format!("probe answer {i}: {}", "because. ".repeat(40)),
                    "probe",
                    "sim",
                    "probe",
                    i,
                )
            }
        })
        .collect();
    let params = AssembleParams {
        session: SessionRef {
            session_id: "probe".into(),
            ..Default::default()
        },
        messages: history.iter().cloned().map(std::sync::Arc::new).collect(),
        token_budget: Some(400),
        ..Default::default()
    };
    let serving = slot.active();
    writeln!(out, "engine: {} ({})", serving.id(), serving.origin())?;
    match slot.assemble(params) {
        Ok(result) => {
            writeln!(
                out,
                "assemble: {} messages in, {} out, estimated tokens {}",
                history.len(),
                result.messages.len(),
                result.estimated_tokens
            )?;
            if let SlotState::Quarantined(q) = slot.state() {
                writeln!(out, "warning: {}", q.line())?;
                writeln!(out, "served by: {}", slot.active().id())?;
            }
            slot.shutdown();
            Ok(0)
        }
        Err(e) => {
            writeln!(out, "error: {e}")?;
            Ok(1)
        }
    }
}
