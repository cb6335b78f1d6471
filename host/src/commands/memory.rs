//! `rampart memory index|search|get|status [--json]`: long-term memory for people, through
//! the same slot, engine and tools the model uses.
//!
//! Exit codes: 0 when the command did what it says; 1 when memory is off or its engine failed,
//! or `get` was refused the path or found no such file (the message says why and what to do).
//!
//! Standard output carries only results (or the JSON asked for); notes and errors go to
//! standard error. `status` and `get` only read: `status` before the first index reports "not
//! indexed yet" and creates nothing.

use std::io::Write;
use std::path::Path;

use clap::Subcommand;
use rampart_engine_api::memory::{
    MemoryGetParams, MemorySearchParams, MemoryStatus, MemorySyncParams,
};

use crate::config::Config;
use crate::engine::services::EventSink;
use crate::engine::slot::HostResources;
use crate::memory::core::{MemoryCore, MemoryPlaces};
use crate::memory::{self, MemorySlot, Watch};
use crate::terminal::{escape, escape_text};

/// `rampart memory …`
#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// Bring the index up to date with the memory files (MEMORY.md, memory/**/*.md, extraPaths,
    /// and transcripts when enabled).
    Index {
        /// Re-read every file, not only the changed ones.
        #[arg(long)]
        force: bool,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Search memory as the `memory_search` tool does.
    Search {
        /// What to look for.
        query: String,
        /// At most this many results.
        #[arg(long, value_name = "N")]
        max_results: Option<u32>,
        /// Drop results scoring below this (0 to 1).
        #[arg(long, value_name = "SCORE")]
        min_score: Option<f64>,
        /// Print the tool's answer as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Read lines of a memory file as the `memory_get` tool does.
    Get {
        /// The file (MEMORY.md, memory/2026-11-25.md, …).
        path: String,
        /// First line, 1-based.
        #[arg(long, value_name = "LINE")]
        from: Option<u64>,
        /// How many lines.
        #[arg(long, value_name = "N")]
        lines: Option<u64>,
        /// Print the tool's answer as JSON.
        #[arg(long)]
        json: bool,
    },
    /// What memory holds and how it searches (keyword-only, hybrid…), and why.
    Status {
        /// Print the status as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Runs `memory …` for `config` with sessions in `sessions_dir`.
pub fn run(
    cmd: MemoryCommand,
    config: &Config,
    sessions_dir: &Path,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<i32> {
    if let MemoryCommand::Status { json } = &cmd
        && config.memory_engine == crate::config::BUILTIN_MEMORY_ID
    {
        let places = MemoryPlaces::of(config, sessions_dir);
        if !places.db_path.exists() {
            // Opening the engine would create the index: a status only reads.
            return match MemoryCore::status_before_indexing(
                &config.agent_defaults.memory_search,
                &places,
            ) {
                Ok(s) => print_status(&config.memory_engine, &s, *json, out).map(|()| 0),
                Err(e) => {
                    writeln!(err, "error: memory-core could not start: {e}")?;
                    Ok(1)
                }
            };
        }
    }
    let events = EventSink::tracing_only();
    let slot = memory::resolve(
        config,
        sessions_dir,
        &events,
        &HostResources::default(),
        Watch::No,
    );
    let code = run_on(&slot, cmd, out, err);
    slot.shutdown();
    code
}

fn off(slot: &MemorySlot, err: &mut dyn Write) -> anyhow::Result<i32> {
    match slot.quarantined() {
        Some(line) => writeln!(err, "error: {line}")?,
        None => writeln!(
            err,
            "error: long-term memory is off (plugins.slots.memory = \"{}\"); set it to \
             \"memory-core\" or a memory engine's id",
            slot.configured_id()
        )?,
    }
    Ok(1)
}

fn run_on(
    slot: &MemorySlot,
    cmd: MemoryCommand,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<i32> {
    if !slot.is_on() {
        return off(slot, err);
    }
    match cmd {
        MemoryCommand::Index { force, json } => {
            let params = MemorySyncParams {
                reason: "cli".into(),
                force,
            };
            match slot.sync(params) {
                Ok(r) if json => writeln!(out, "{}", serde_json::to_string_pretty(&r)?)?,
                Ok(r) => {
                    writeln!(
                        out,
                        "indexed {} file(s), {} unchanged, {} removed; {} passage(s) written",
                        r.files_indexed, r.files_unchanged, r.files_removed, r.chunks_written
                    )?;
                    for note in &r.notes {
                        writeln!(out, "note: {}", escape(note))?;
                    }
                }
                Err(e) => {
                    writeln!(err, "error: {e}")?;
                    return Ok(1);
                }
            }
        }
        MemoryCommand::Search {
            query,
            max_results,
            min_score,
            json,
        } => {
            let answer = slot.search(MemorySearchParams {
                query,
                max_results,
                min_score,
                session_key: None,
            });
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&answer)?)?;
            } else if answer.disabled {
                writeln!(
                    err,
                    "error: {}",
                    answer
                        .error
                        .as_deref()
                        .unwrap_or("memory search is unavailable")
                )?;
                if let Some(action) = &answer.action {
                    writeln!(err, "{action}")?;
                }
                return Ok(1);
            } else {
                // A note about the search, not a result: stdout stays results only.
                if let Some(f) = &answer.fallback {
                    writeln!(err, "note: {}", escape(&f.reason))?;
                }
                if answer.results.is_empty() {
                    writeln!(out, "no results")?;
                }
                for hit in &answer.results {
                    // Paths and snippets are the user's files: their control characters are
                    // shown, not obeyed by the terminal (`--json` has them as they are).
                    writeln!(
                        out,
                        "{:.3}  {}#L{}-L{}",
                        hit.score,
                        escape(&hit.path),
                        hit.start_line,
                        hit.end_line
                    )?;
                    for line in hit.snippet.lines() {
                        writeln!(out, "    {}", escape(line))?;
                    }
                }
            }
            if answer.disabled {
                return Ok(1);
            }
        }
        MemoryCommand::Get {
            path,
            from,
            lines,
            json,
        } => {
            let answer = slot.get(MemoryGetParams { path, from, lines });
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&answer)?)?;
            } else if let Some(e) = &answer.error {
                writeln!(err, "error: {}", answer.detail.as_ref().unwrap_or(e))?;
            } else if answer.missing {
                writeln!(
                    err,
                    "error: {} does not exist; `rampart memory search` shows which files \
                     memory holds",
                    answer.path
                )?;
            } else {
                write!(out, "{}", escape_text(&answer.text))?;
                if !answer.text.ends_with('\n') && !answer.text.is_empty() {
                    writeln!(out)?;
                }
            }
            if answer.error.is_some() || answer.missing {
                return Ok(1);
            }
        }
        MemoryCommand::Status { json } => match slot.status() {
            Ok(s) => print_status(slot.configured_id(), &s, json, out)?,
            Err(e) => {
                writeln!(err, "error: {e}")?;
                return Ok(1);
            }
        },
    }
    Ok(0)
}

/// Prints a status of engine `engine`, as JSON or in lines.
fn print_status(
    engine: &str,
    s: &MemoryStatus,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(s)?)?;
        return Ok(());
    }
    writeln!(out, "engine: {engine}")?;
    writeln!(out, "backend: {}", s.backend)?;
    if let Some(at) = &s.location {
        writeln!(out, "index: {}", escape(at))?;
    }
    writeln!(out, "files: {}, passages: {}", s.files, s.chunks)?;
    let provider = match (&s.provider, &s.model) {
        (Some(p), Some(m)) => format!("{p}/{m}"),
        (Some(p), None) => p.clone(),
        _ => "none".to_owned(),
    };
    writeln!(out, "search: {} (embeddings: {provider})", s.mode)?;
    if let Some(f) = &s.fallback {
        writeln!(out, "fallback: {}", f.reason)?;
    }
    if s.dirty {
        writeln!(out, "files changed since the last index: yes")?;
    }
    for d in &s.details {
        writeln!(out, "{}", escape(d))?;
    }
    Ok(())
}
