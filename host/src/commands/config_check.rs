//! `rampart config check`.

use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;

use crate::config;
use crate::engine::services::EventSink;
use crate::engine::slot::check_in_child;

/// `rampart config …`
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate plugins.toml and resolve every engine it names; each library is loaded in a
    /// child process to prove it loads (its constructor runs there), and no turn is run.
    Check,
}

/// Runs `config …`.
pub fn run(
    cmd: ConfigCommand,
    config: Option<PathBuf>,
    out: &mut dyn Write,
) -> anyhow::Result<i32> {
    match cmd {
        ConfigCommand::Check => config_check(config, out),
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
    let events = EventSink::tracing_only();
    writeln!(out, "contextEngine: {}", config.context_engine)?;
    writeln!(out, "memory: {}", config.memory_engine)?;
    let mut ids: Vec<String> = config.engines.keys().cloned().collect();
    if !ids.contains(&config.context_engine) {
        ids.insert(0, config.context_engine.clone());
    }
    // A memory engine library is resolved like a context engine; the built-in one and "none"
    // need nothing.
    let memory = &config.memory_engine;
    if memory != config::BUILTIN_MEMORY_ID && memory != config::MEMORY_OFF && !ids.contains(memory)
    {
        ids.push(memory.clone());
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
        // An executable engine: start it as the slot would, to prove it answers the handshake.
        if let Some(command) = config.engines.get(&id).and_then(|e| e.command.as_ref()) {
            let shown = format!("command `{command}`");
            if !started_in_child(
                out,
                &config,
                &id,
                &events,
                required,
                (&shown, &shown),
                "started",
            )? {
                failures += 1;
            }
            continue;
        }
        match config.resolve_engine_path(&id) {
            Ok(None) => writeln!(out, "engine {id}: built in")?,
            // A declared library that is not there fails every command that loads it.
            Ok(Some(path)) if !path.is_file() => {
                failures += 1;
                let file = config
                    .source_file
                    .as_ref()
                    .map(|f| f.display().to_string())
                    .unwrap_or_default();
                let line = config.engines.get(&id).map_or(0, |e| e.line);
                writeln!(
                    out,
                    "error: {file}:{line}: `plugins.engines.{id}.path` names {}, which is not a \
                     file; build the engine there or fix the path",
                    path.display()
                )?;
            }
            // A WebAssembly component is not mapped as a library: it is compiled and started
            // confined, as the slot starts it.
            Ok(Some(path))
                if config
                    .engines
                    .get(&id)
                    .is_some_and(|e| matches!(e.isolation, config::Isolation::Wasm(_))) =>
            {
                let shown = format!("{} (wasm)", path.display());
                let quoted = format!("`{}`", path.display());
                if !started_in_child(
                    out,
                    &config,
                    &id,
                    &events,
                    required,
                    (&shown, &quoted),
                    "started",
                )? {
                    failures += 1;
                }
            }
            // A file whose headers claim more than it holds would kill a command that maps it;
            // reading its headers runs none of its code.
            Ok(Some(path)) if let Err(damage) = crate::engine::library_file::check(&path) => {
                failures += 1;
                writeln!(
                    out,
                    "error: engine {id}: `{}` cannot be loaded: {damage}",
                    path.display()
                )?;
            }
            // The file looks sound: load it in a child (whose crash costs only the child) to
            // prove it loads, as the slot will, rather than say "ok" of a library that cannot.
            Ok(Some(path)) => {
                let shown = path.display().to_string();
                let quoted = format!("`{shown}`");
                if !started_in_child(
                    out,
                    &config,
                    &id,
                    &events,
                    required,
                    (&shown, &quoted),
                    "loaded",
                )? {
                    failures += 1;
                }
            }
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

/// Starts engine `id` in a child as the slot would and writes one line either way: its name,
/// version and API, or why it could not be `failed_to` ("started", "loaded"). `shown` names the
/// engine in the line that says it works and in the error. Whether it started.
fn started_in_child(
    out: &mut dyn Write,
    config: &config::Config,
    id: &str,
    events: &EventSink,
    required: bool,
    (shown, in_error): (&str, &str),
    failed_to: &str,
) -> std::io::Result<bool> {
    match check_in_child(config, id, events) {
        Ok(info) => {
            writeln!(
                out,
                "engine {id}: {shown} ({} {}, API {}){}",
                info.name,
                info.version,
                info.protocol.version,
                if required { " (required)" } else { "" }
            )?;
            Ok(true)
        }
        Err(why) => {
            writeln!(
                out,
                "error: engine {id}: {in_error} cannot be {failed_to}: {why}"
            )?;
            Ok(false)
        }
    }
}
