//! `rampart engines list|check|probe`.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Subcommand;

use super::load_config;
use crate::config;
use crate::engine::handle::EngineOrigin;
use crate::engine::loader::{LoadRequest, load_engine_in_child};
use crate::engine::services::{EventSink, HostServices};
use crate::engine::slot::{EngineSlot, SlotState, check_in_child, host_max_log_level};

/// `rampart engines …`
#[derive(Debug, Subcommand)]
pub enum EnginesCommand {
    /// List the built-in and configured engines, marking the active one, with their state.
    List,
    /// Load a library (or start an executable engine) and report its id, version and API
    /// version, or exactly why it cannot load.
    Check {
        /// The library file (.so, .dylib or .dll), or a WebAssembly component (.wasm).
        #[arg(required_unless_present = "command")]
        path: Option<PathBuf>,
        /// An executable engine instead of a library: the program and its arguments, as in
        /// `command = [...]` (`rampart engines check --command python3 my_engine.py`). Runs in
        /// the current directory.
        #[arg(long, num_args = 1.., allow_hyphen_values = true, conflicts_with = "path")]
        command: Vec<String>,
    },
    /// Resolve the configured engine and run one `assemble` over a small sample history through
    /// it, as a turn would: a quick way to see an engine work (or fail) inside this host.
    Probe,
}

/// Runs `engines …`.
pub fn run(
    cmd: EnginesCommand,
    config: Option<PathBuf>,
    out: &mut dyn Write,
) -> anyhow::Result<i32> {
    match cmd {
        EnginesCommand::List => engines_list(config, out),
        EnginesCommand::Check { path, command } => match path {
            Some(path) if command.is_empty() => engines_check(&path, out),
            _ => engines_check_command(command, out),
        },
        EnginesCommand::Probe => engines_probe(config, out),
    }
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
    // The memory slot's library has a line of its own below, not a context engine's row.
    if config.memory_engine != config.context_engine {
        ids.retain(|id| *id != config.memory_engine);
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
                    let origin = match config.engines.get(&id).and_then(|e| e.command.as_ref()) {
                        Some(command) => format!("command `{command}`"),
                        None => config
                            .resolve_engine_path(&id)
                            .ok()
                            .flatten()
                            .map(|p| p.display().to_string())
                            .unwrap_or_else(|| "?".into()),
                    };
                    (
                        origin,
                        format!("quarantined during {}: {}", q.operation, q.reason),
                    )
                }
                SlotState::Active => {
                    let info = active.info();
                    // Where its code runs is what a crash in it would take down.
                    let place = match active.child_pid() {
                        Some(pid) => format!(", in a child process, pid {pid}"),
                        None => String::new(),
                    };
                    (
                        active.origin().to_string(),
                        format!("active ({} {}{place})", info.name, info.version),
                    )
                }
            }
        } else if let Some(command) = config.engines.get(&id).and_then(|e| e.command.as_ref()) {
            let origin = format!("command `{command}`");
            match check_in_child(&config, &id, &events) {
                Ok(info) => (origin, format!("available (API {})", info.protocol.version)),
                Err(e) => (origin, format!("cannot load: {e}")),
            }
        } else {
            match config.resolve_engine_path(&id) {
                // Loaded in a child: a library that crashes while loading costs the child.
                Ok(Some(path)) => match check_in_child(&config, &id, &events) {
                    Ok(info) => (
                        path.display().to_string(),
                        format!("available (API {})", info.protocol.version),
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
    // The memory slot, without loading it (`rampart memory status` does).
    let memory = &config.memory_engine;
    let where_ = match memory.as_str() {
        config::MEMORY_OFF => "off".to_string(),
        config::BUILTIN_MEMORY_ID => "built in".to_string(),
        id => match config.resolve_engine_path(id) {
            _ if let Some(c) = config.engines.get(id).and_then(|e| e.command.as_ref()) => {
                format!("command `{c}`")
            }
            Ok(Some(path)) => path.display().to_string(),
            Ok(None) => "built in".to_string(),
            Err(e) => format!("cannot resolve: {e}"),
        },
    };
    writeln!(out, "memory slot: {memory}  [{where_}]")?;
    slot.shutdown();
    Ok(0)
}

fn engines_check(path: &std::path::Path, out: &mut dyn Write) -> anyhow::Result<i32> {
    let request = check_request(path.to_path_buf());
    // A component runs confined in the host, as the slot runs it (nothing granted).
    if crate::engine::loader::is_wasm_path(path) {
        let loaded = crate::engine::loader::load_wasm(request, config::WasmSettings::default());
        return report_check(loaded, &path.display().to_string(), out);
    }
    // In a child, as the slot loads a library: corrupt code or a constructor that exits
    // takes down the child, and the error says how it died.
    let loaded = load_engine_in_child(request, crate::config::ProcessSettings::default());
    report_check(loaded, &path.display().to_string(), out)
}

/// `engines check --command PROGRAM ARGS…`: starts the executable engine as the slot would,
/// in the current directory, and reports its handshake or why there is none.
fn engines_check_command(words: Vec<String>, out: &mut dyn Write) -> anyhow::Result<i32> {
    let mut words = words.into_iter();
    let Some(program) = words.next() else {
        writeln!(out, "error: --command needs the program to run")?;
        return Ok(1);
    };
    let command = config::EngineCommand {
        program: PathBuf::from(program),
        args: words.collect(),
        dir: std::env::current_dir()?,
    };
    let shown = format!("command `{command}`");
    let loaded = crate::engine::loader::load_executable(
        check_request(command.program.clone()),
        command,
        crate::config::ProcessSettings::default(),
    );
    report_check(loaded, &shown, out)
}

/// The load request of `engines check`: no configured id to compare with, default deadlines.
fn check_request(path: PathBuf) -> LoadRequest {
    let events = EventSink::tracing_only();
    LoadRequest {
        id: "check".to_string(),
        verify_id: false,
        path,
        config: serde_json::json!({}),
        services: Arc::new(HostServices::new("check", events)),
        load_timeout: std::time::Duration::from_millis(config::DEFAULT_LOAD_TIMEOUT_MS),
        call_timeout: std::time::Duration::from_millis(config::DEFAULT_CALL_TIMEOUT_MS),
        max_log_level: Some(host_max_log_level()),
    }
}

fn report_check(
    loaded: Result<crate::engine::handle::EngineHandle, crate::engine::loader::LoadError>,
    shown: &str,
    out: &mut dyn Write,
) -> anyhow::Result<i32> {
    match loaded {
        Ok(handle) => {
            let info = handle.info().clone();
            let file = match handle.origin() {
                EngineOrigin::Library(p) | EngineOrigin::Wasm(p) => p.display().to_string(),
                EngineOrigin::Command(_) | EngineOrigin::BuiltIn => shown.to_string(),
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
            // 0 means the engine left the count to its caller (the protocol's rule), so the
            // probe counts as the host would rather than print a zero for 12 messages.
            let (tokens, by) = if result.estimated_tokens > 0 {
                (result.estimated_tokens, "the engine's estimate")
            } else {
                let counted = result
                    .messages
                    .iter()
                    .map(|m| rampart_engine_api::tokens::estimate_message_tokens(m))
                    .sum::<u64>();
                (
                    counted,
                    "counted by rampart; the engine left it to the host",
                )
            };
            writeln!(
                out,
                "assemble: {} messages in, {} out, estimated tokens {tokens} ({by})",
                history.len(),
                result.messages.len(),
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
