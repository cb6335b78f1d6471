//! `rampart eval`: a matrix of engines × transcripts × windows, replayed in this process, in one
//! table (terminal, Markdown, JSON or a self-contained HTML page).
//!
//! Each cell is a replay exactly as `rampart replay` runs it (the simulator, the configured
//! engines, no network) and reports what issue 14 asked to compare strategies by: peak and mean
//! window use, compactions, prompt-cache breaks, input and compaction tokens per 100 calls,
//! tokens saved net of the compaction spend, errors, and retention ([`retention`]): the share
//! of the transcript's facts the last request could still see, and of those it lost, the
//! share a recall probe brings back through the tools the engine and memory offer ([`recall`]). A cell whose engine cannot load
//! is a row with its error, not a failed run.

pub mod recall;
pub mod retention;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::blobs::BlobStore;
use crate::config::Config;
use crate::engine::services::EventSink;
use crate::replay::{EngineChoice, Replayer, setup, source};
use crate::terminal::escape;

/// One cell of the matrix.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Cell {
    /// The engine id.
    pub engine: String,
    /// The transcript.
    pub transcript: String,
    /// The window, in tokens.
    pub window: u64,
    /// Model calls.
    pub calls: u64,
    /// Largest prompt as a share of the window, in percent.
    pub peak_pct: f64,
    /// Mean prompt as a share of the window, in percent.
    pub mean_pct: f64,
    /// Compactions.
    pub compactions: u64,
    /// Of them, those that swapped in a summary prepared ahead of need.
    pub compactions_prepared: u64,
    /// What requests waited on compactions, in ms per call: the compaction time on the
    /// critical path.
    pub compaction_wait_ms_per_call: f64,
    /// Prompt-cache breaks.
    pub cache_breaks: u64,
    /// Input tokens per 100 calls.
    pub input_per_100: f64,
    /// Compaction tokens (read and written) per 100 calls.
    pub compaction_per_100: f64,
    /// Tokens saved against sending everything, net of the compaction spend.
    pub net_tokens_saved: i64,
    /// Calls that got no answer.
    pub errors: u64,
    /// Share of the mined facts the last request could see, in percent (`None`: no facts).
    pub retention_pct: Option<f64>,
    /// Facts mined from the transcript.
    pub facts: usize,
    /// Of the facts the last request lost, the share (of all facts, in percent) that the
    /// pre-compaction memory flushes saved to memory notes, where `memory_search` finds them
    /// again (`None`: no facts, or memory off).
    pub recovered_from_memory_pct: Option<f64>,
    /// Of the facts the last request lost, the share (of all facts, in percent) that a recall
    /// probe brings back through the tools the cell offers the model: the engine's own (the
    /// lossless engine's `lcm_grep`/`lcm_describe`) and the memory tools ([`recall`]). `None`:
    /// no facts.
    pub recoverable_pct: Option<f64>,
    /// Why the cell could not be run, when it could not.
    pub failure: Option<String>,
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Matrix {
    /// Engine ids (`legacy`, `window`, or any the config declares).
    pub engines: Vec<String>,
    /// Windows, in tokens.
    pub windows: Vec<u64>,
    /// Transcripts (files; a directory given on the command line is expanded before).
    pub transcripts: Vec<PathBuf>,
}

/// The transcripts directly in `dir` and below it (`.jsonl`, `.json`, `.traj`, not `.meta.json`),
/// sorted.
pub fn transcripts_in(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)? {
            let path = entry?.path();
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if path.is_dir() {
                stack.push(path);
            } else if (name.ends_with(".jsonl")
                || name.ends_with(".json")
                || name.ends_with(".traj"))
                && !name.ends_with(".meta.json")
            {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Runs every cell of `matrix` over `config`, in order (engine, transcript, window).
pub fn run(config: &Config, matrix: &Matrix) -> Vec<Cell> {
    let mut cells = Vec::new();
    for engine in &matrix.engines {
        for transcript in &matrix.transcripts {
            for &window in &matrix.windows {
                let mut cell = Cell {
                    engine: engine.clone(),
                    transcript: transcript.display().to_string(),
                    window,
                    ..Cell::default()
                };
                if let Err(e) = run_cell(config, engine, transcript, window, &mut cell) {
                    cell.failure = Some(format!("{e:#}"));
                }
                cells.push(cell);
            }
        }
    }
    cells
}

fn run_cell(
    config: &Config,
    engine: &str,
    transcript: &Path,
    window: u64,
    cell: &mut Cell,
) -> anyhow::Result<()> {
    let recorded = source::load(transcript, None)?;
    let facts = retention::mine(recorded.messages.iter().map(|m| &**m));
    let profile = setup::ModelProfile::from_flags(None, None, None)?;
    let config = setup::replay_config(config.clone(), &profile, window, Some(engine), None)?;
    let place = setup::ReplayDir::prepare(None, false)?;
    let replayer = Replayer::new(
        &config,
        &profile,
        window,
        &place,
        EventSink::tracing_only(),
        EngineChoice::Requested,
    )?;
    // The last request of the session itself (not of a subagent); serialised once, at the
    // end: the calls before it are not looked at.
    let mut last_request = None;
    let outcome = replayer.run(&recorded, false, &mut |row, requests| {
        if row.subagent.is_none()
            && let Some(last) = requests.last()
        {
            last_request = Some(last.clone());
        }
        Ok(())
    })?;
    let last_request = last_request
        .map(|r| serde_json::to_string(&retention::as_sent(r)))
        .transpose()?
        .unwrap_or_default();
    let blobs = BlobStore::in_sessions_dir(&place.dir);
    let s = outcome.summary;
    let pct = |t: f64| {
        if window == 0 {
            0.0
        } else {
            t * 100.0 / window as f64
        }
    };
    cell.calls = s.calls;
    cell.peak_pct = pct(s.peak_prompt_tokens as f64);
    cell.mean_pct = pct(s.mean_prompt_tokens);
    cell.compactions = s.compactions;
    cell.compactions_prepared = s.compactions_prepared;
    cell.compaction_wait_ms_per_call = if s.calls == 0 {
        0.0
    } else {
        s.compaction_ms_on_path as f64 / s.calls as f64
    };
    cell.cache_breaks = s.cache_breaks;
    cell.input_per_100 = s.per_100_calls.input_tokens;
    cell.compaction_per_100 =
        s.per_100_calls.compaction_input_tokens + s.per_100_calls.compaction_output_tokens;
    cell.net_tokens_saved = s.net_tokens_saved;
    cell.errors = s.errors;
    cell.facts = facts.len();
    // The request and the blobs it names are read once for every figure below.
    let kept = retention::kept(&facts, &last_request, Some(&blobs));
    cell.retention_pct = retention::retained_of(&facts, &kept).map(|r| r * 100.0);
    if !outcome.memory_notes.is_empty() {
        cell.recovered_from_memory_pct =
            retention::recovered_of(&facts, &kept, &outcome.memory_notes).map(|r| r * 100.0);
    }
    // The lost facts, probed through the tools a run of this cell would offer the model.
    let index = recall::ProbeIndex::new(recorded.messages.iter().map(|m| &**m));
    let lost: Vec<(String, Option<String>)> = facts
        .iter()
        .zip(&kept)
        .filter(|(_, kept)| !**kept)
        .map(|(fact, _)| {
            let probe = index.probe(fact);
            (fact.clone(), probe)
        })
        .collect();
    let tools = crate::run::host_tools::HostTools::none();
    let tools = match replayer.memory_slot() {
        Some(memory) => tools.with_memory(memory),
        None => tools,
    };
    let tools = tools.with_engine(replayer.engine_slot(), outcome.session.clone());
    let found = recall::recoverable(&lost, &(tools, outcome.session.session_key.clone()))
        .into_iter()
        .filter(|f| *f)
        .count();
    cell.recoverable_pct = (!facts.is_empty()).then(|| found as f64 * 100.0 / facts.len() as f64);
    place.finish();
    Ok(())
}

/// How the table is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns for a terminal.
    Text,
    /// A Markdown table.
    Markdown,
    /// One JSON document.
    Json,
    /// A self-contained HTML page.
    Html,
}

const HEADERS: [&str; 16] = [
    "engine",
    "transcript",
    "window",
    "calls",
    "peak %",
    "mean %",
    "compactions (prepared)",
    "compaction wait ms/call",
    "cache breaks",
    "input/100 calls",
    "compaction/100 calls",
    "net saved",
    "errors",
    "retention %",
    "+ from memory %",
    "+ recoverable %",
];

/// A cell's columns as text; names and messages with their control characters escaped (a
/// transcript's name is the user's; see [`crate::terminal`]).
fn cells_of(c: &Cell) -> Vec<String> {
    let name = Path::new(&c.transcript)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| c.transcript.clone());
    let name = escape(&name).into_owned();
    let engine = escape(&c.engine).into_owned();
    if let Some(failure) = &c.failure {
        let mut row = vec![engine, name, c.window.to_string()];
        row.push(format!("failed: {}", escape(failure)));
        row.resize(HEADERS.len(), String::new());
        return row;
    }
    vec![
        engine,
        name,
        c.window.to_string(),
        c.calls.to_string(),
        format!("{:.1}", c.peak_pct),
        format!("{:.1}", c.mean_pct),
        format!("{} ({})", c.compactions, c.compactions_prepared),
        format!("{:.2}", c.compaction_wait_ms_per_call),
        c.cache_breaks.to_string(),
        format!("{:.0}", c.input_per_100),
        format!("{:.0}", c.compaction_per_100),
        c.net_tokens_saved.to_string(),
        c.errors.to_string(),
        c.retention_pct
            .map_or("–".to_string(), |r| format!("{r:.1} ({} facts)", c.facts)),
        c.recovered_from_memory_pct
            .map_or("–".to_string(), |r| format!("{r:.1}")),
        c.recoverable_pct
            .map_or("–".to_string(), |r| format!("{r:.1}")),
    ]
}

/// The table of `cells` in `format`.
pub fn render(cells: &[Cell], format: Format) -> String {
    let rows: Vec<Vec<String>> = cells.iter().map(cells_of).collect();
    let mut out = String::new();
    match format {
        Format::Json => {
            out = serde_json::to_string_pretty(
                &serde_json::json!({"kind": "rampart.eval", "version": 1, "cells": cells}),
            )
            .unwrap_or_default();
            out.push('\n');
        }
        Format::Markdown => {
            let _ = writeln!(out, "| {} |", HEADERS.join(" | "));
            let _ = writeln!(out, "|{}", "---|".repeat(HEADERS.len()));
            for row in &rows {
                let _ = writeln!(out, "| {} |", row.join(" | "));
            }
        }
        Format::Text => {
            let widths: Vec<usize> = (0..HEADERS.len())
                .map(|i| {
                    rows.iter()
                        .map(|r| r[i].chars().count())
                        .chain([HEADERS[i].len()])
                        .max()
                        .unwrap_or(0)
                })
                .collect();
            let line = |cols: &[String]| {
                cols.iter()
                    .zip(&widths)
                    .map(|(c, w)| format!("{c:<w$}"))
                    .collect::<Vec<_>>()
                    .join("  ")
                    .trim_end()
                    .to_string()
            };
            let headers: Vec<String> = HEADERS.iter().map(|h| h.to_string()).collect();
            let _ = writeln!(out, "{}", line(&headers));
            for row in &rows {
                let _ = writeln!(out, "{}", line(row));
            }
        }
        Format::Html => {
            let escape = |s: &str| {
                s.replace('&', "&amp;")
                    .replace('<', "&lt;")
                    .replace('>', "&gt;")
            };
            out.push_str(
                "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
                 <title>Rampart eval</title>\n<style>body{font:14px/1.4 system-ui,sans-serif;\
                 margin:24px}table{border-collapse:collapse}td,th{padding:3px 10px;\
                 border-bottom:1px solid #ddd;text-align:left}</style>\n</head>\n<body>\n\
                 <h1>Rampart eval</h1>\n<table>\n<tr>",
            );
            for h in HEADERS {
                let _ = write!(out, "<th>{}</th>", escape(h));
            }
            out.push_str("</tr>\n");
            for row in &rows {
                out.push_str("<tr>");
                for c in row {
                    let _ = write!(out, "<td>{}</td>", escape(c));
                }
                out.push_str("</tr>\n");
            }
            out.push_str("</table>\n</body>\n</html>\n");
        }
    }
    out
}
