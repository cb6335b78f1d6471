//! `rampart replay FILE`: a recorded agent session, replayed turn by turn through the configured
//! context engine against the embedded simulator, to show what each layer of the defence does
//! at a chosen window. Also home of `rampart run` and `rampart compact` ([`live`]), which share
//! the replay's host set-up.
//!
//! Why a replay: the defences only act when a context is under pressure, and a real model makes
//! that slow, costly and unrepeatable. A replay feeds the recorded conversation to `sim`, which
//! counts each prompt with the chosen model's tokenizer and refuses what does not fit with that
//! provider's real error text, so every layer runs exactly as it would in production.
//!
//! # Semantics
//!
//! - **Input.** Any transcript `rampart sessions import` reads (pi v1–v3, Claude Code, Codex,
//!   OpenAI messages, SWE-agent, OpenHands). It is only read: pi files through the session
//!   loader with corrupt-line sidecars off, the others through the importers. The replayed
//!   history is the active branch (leaf to root), every message on it, ignoring the recording's
//!   own compactions (the engine under test decides its own). A recorded system prompt
//!   (imported formats keep it as an `import.system-prompt` entry) becomes the run's system
//!   prompt; with `--rebuild-prompt` the prompt Rampart builds from the agent workspace
//!   replaces it (as `rampart run` would send it). A file holding several sessions replays the one `--session-index` picks (default
//!   the first).
//! - **Calls.** Each recorded assistant message is one model call: it is queued on the
//!   simulator, then the run loop makes the call (`run_turn` with the pending user message for
//!   the first call after it, without one for calls inside a tool loop). Every other recorded
//!   message (tool results as recorded, bash executions, custom messages) goes in through
//!   `Runner::append`, i.e. through the engine's `ingest` and the persistence guard. At each
//!   user-message boundary the turn is finished (`finish_turn`).
//! - **Errors.** A call that fails (an overflow nothing could fix, a blocked window) is recorded
//!   in its row and the summary; the recorded reply is then appended as it was recorded, so the
//!   rest of the transcript is measured against the same history, and the replay goes on.
//!   `--stop-on-error` stops at the first failure instead.
//! - **Where it writes.** The replay's session goes into a fresh directory: a new session
//!   registered as `replay-<stem>` in `--sessions-dir` when given (kept), else a temporary
//!   directory removed at the end unless `--keep` (then its path is printed); also when the
//!   replay is stopped by a signal, or by the next start if it was killed ([`crate::scratch`]).
//!   Output files follow [`crate::output_file`]: never the transcript. Session writes are
//!   not fsynced: the session is a reproducible by-product, and fsyncs would dominate the time.
//! - **Tokens saved.** For each answered call: the tokens of the whole recorded history up to
//!   that call (system prompt included, counted with the replay's tokenizer) minus the prompt
//!   tokens actually sent; summed over the replay.
//!
//! The model behind the replay is `sim/<id>` with `contextWindow = --window` (default
//! 200,000); `--model` picks the tokenizer and the overflow wording ([`setup::ModelProfile`]).

pub mod clock;
pub mod drive;
pub mod json;
pub mod prices;
pub mod report_html;
pub mod setup;
pub mod source;
pub mod summary;
pub mod table;
pub mod tap;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::config::Config;
use crate::engine::services::EventSink;
use crate::output_file::{Inputs, OutputFile};
use crate::terminal::escape;

pub use drive::{EngineChoice, ReplayError, Replayer};
pub use summary::{Row, Summary};

/// What `rampart replay` was asked to do (the command line, parsed).
#[derive(Debug, Clone, Default)]
pub struct ReplayOptions {
    /// The transcript to replay; only read.
    pub input: PathBuf,
    /// The window in tokens (default [`setup::DEFAULT_WINDOW`]).
    pub window: Option<u64>,
    /// A model name whose tokenizer and overflow wording the simulator takes.
    pub model: Option<String>,
    /// Overrides the tokenizer `--model` implies.
    pub tokenizer: Option<String>,
    /// Overrides the overflow wording `--model` implies.
    pub overflow_wording: Option<String>,
    /// Overrides `plugins.slots.contextEngine` for this run.
    pub engine: Option<String>,
    /// A real model for compaction summaries (`provider/model`); default: the engine's
    /// embedded summariser, so a replay needs no network.
    pub compaction_model: Option<String>,
    /// Print one JSON document instead of the table.
    pub json: bool,
    /// Write every request the model received here, one JSON object per line.
    pub requests_out: Option<PathBuf>,
    /// Write a self-contained HTML report here.
    pub report: Option<PathBuf>,
    /// A prices file (see [`prices`]): the summary then gives the cost in US dollars.
    pub prices: Option<PathBuf>,
    /// Keep the temporary sessions directory.
    pub keep: bool,
    /// Stop at the first failed call (exit code 1).
    pub stop_on_error: bool,
    /// Which session of a multi-session file to replay (from 1).
    pub session_index: Option<usize>,
    /// Send Rampart's built system prompt instead of the recorded one.
    pub rebuild_prompt: bool,
    /// Keep this machine's measurements (wall-clock times, peak memory) in the JSON and the
    /// events; without it both are reproducible byte for byte ([`clock`]).
    pub timings: bool,
    /// Replace output files that exist (`--overwrite`).
    pub overwrite: bool,
    /// What the outputs must not replace besides the transcript, the prices and the sessions
    /// directory (which [`inputs_of`] adds): `plugins.toml`.
    pub protect: Inputs,
}

/// Everything a replay reads, which its outputs must not replace: `options.protect`, the
/// transcript, the prices, the sessions directory when given.
pub fn inputs_of(options: &ReplayOptions, sessions_dir: Option<&Path>) -> Inputs {
    let mut inputs = options.protect.clone();
    inputs.file("the transcript", &options.input);
    if let Some(prices) = &options.prices {
        inputs.file("the --prices file", prices);
    }
    if let Some(dir) = sessions_dir {
        inputs.store(dir);
    }
    inputs
}

/// The replay's own output files, with their flags.
pub fn outputs_of(options: &ReplayOptions) -> Vec<(&'static str, &Path)> {
    let mut outputs = Vec::new();
    if let Some(path) = &options.requests_out {
        outputs.push(("--requests-out", path.as_path()));
    }
    if let Some(path) = &options.report {
        outputs.push(("--report", path.as_path()));
    }
    outputs
}

/// Runs `rampart replay`: the table (or JSON) on `out`, the files asked for, the exit code.
///
/// Exit codes: 0 when the replay went through to the end (failed calls are in the summary);
/// 1 when `--stop-on-error` stopped it. Anything that prevents the replay from starting (an
/// unreadable input, a bad flag) is an error.
pub fn run_command(
    config: Config,
    options: &ReplayOptions,
    sessions_dir: Option<&Path>,
    events: EventSink,
    out: &mut dyn Write,
) -> anyhow::Result<i32> {
    // Rows go to a file or a pipe in blocks rather than a `write` each (stdout is
    // line-buffered: 500,000 rows were 500,000 system calls); a terminal still sees each row as
    // it is made.
    let mut buffered;
    let out: &mut dyn Write = if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        out
    } else {
        buffered = std::io::BufWriter::with_capacity(1 << 16, out);
        &mut buffered
    };
    let code = run_command_to(config, options, sessions_dir, events, out)?;
    out.flush()?;
    Ok(code)
}

/// [`run_command`], writing to `out` as given.
fn run_command_to(
    config: Config,
    options: &ReplayOptions,
    sessions_dir: Option<&Path>,
    events: EventSink,
    out: &mut dyn Write,
) -> anyhow::Result<i32> {
    let started = Instant::now();
    let before = std::fs::metadata(&options.input).ok();

    // Output files are opened before anything else: a path that cannot be written, or that
    // is an input, is an error now, not after the last row of a long replay (and before the
    // transcript could be truncated by its own output).
    let inputs = inputs_of(options, sessions_dir);
    inputs.check_all(&outputs_of(options), options.overwrite)?;
    let mut requests_out = match &options.requests_out {
        Some(path) => Some(OutputFile::stream(
            "--requests-out",
            path,
            &inputs,
            options.overwrite,
        )?),
        None => None,
    };
    let prices = options
        .prices
        .as_deref()
        .map(prices::Prices::read)
        .transpose()?;
    let report_out = match &options.report {
        Some(path) => Some(OutputFile::create(
            "--report",
            path,
            &inputs,
            options.overwrite,
        )?),
        None => None,
    };

    let loaded_at = Instant::now();
    let recorded = source::load(&options.input, options.session_index)?;
    let load_time = loaded_at.elapsed();

    let profile = setup::ModelProfile::from_flags(
        options.model.as_deref(),
        options.tokenizer.as_deref(),
        options.overflow_wording.as_deref(),
    )?;
    let window = options.window.unwrap_or(setup::DEFAULT_WINDOW);
    let config = setup::replay_config(
        config,
        &profile,
        window,
        options.engine.as_deref(),
        options.compaction_model.as_deref(),
    )?;
    let place = setup::ReplayDir::prepare(sessions_dir, options.keep)?;

    let mut screen = table::Screen::new(options.json, recorded.calls());
    let choice = match options.engine {
        Some(_) => EngineChoice::Requested,
        None => EngineChoice::Configured,
    };
    // The workspace is the user's agent's (beside the real sessions directory, or as the
    // config names it), not one beside the replay's temporary directory.
    let assembler = options.rebuild_prompt.then(|| {
        let sessions = sessions_dir
            .map(Path::to_path_buf)
            .or_else(rampart_sessions::store::default_sessions_dir)
            .unwrap_or_else(|| PathBuf::from("sessions"));
        crate::prompt::PromptAssembler::new(&config, &sessions)
    });
    let replayer = Replayer::new(&config, &profile, window, &place, events, choice)?
        .recording_wire(requests_out.is_some())
        .rebuilding_prompt(assembler.as_ref());
    let quarantine = replayer.quarantine_line();
    if let Some(q) = &quarantine {
        screen.note(&format!("warning: {q}"));
    }
    if let Some(note) = profile.fallback_note(&replayer.describe().wording) {
        screen.note(&format!("warning: {note}"));
    }
    if !options.json {
        table::write_header(out, &recorded, replayer.describe())?;
    }
    let stop_on_error = options.stop_on_error;
    let outcome = replayer.run(&recorded, stop_on_error, &mut |row, requests| {
        if let Some(w) = requests_out.as_mut() {
            for r in requests {
                serde_json::to_writer(&mut *w, r)?;
                w.write_all(b"\n")?;
            }
        }
        screen.row(out, row)
    })?;
    screen.finish();
    if let Some(w) = requests_out {
        w.commit()?;
    }

    let mut summary = outcome.summary;
    summary.cost = prices.map(|p| p.cost(&summary));
    summary.notes.extend(quarantine);
    summary.timings.load_ms = load_time.as_secs_f64() * 1e3;
    let kept = place.finish();
    summary.session_dir = kept.as_ref().map(|p| p.display().to_string());
    summary.peak_rss_bytes = summary::peak_rss_bytes();

    if let Some(file) = report_out {
        let report_started = Instant::now();
        summary.timings.total_ms = started.elapsed().as_secs_f64() * 1e3;
        let html = report_html::render(&summary, &outcome.rows);
        file.write_whole(html.as_bytes())?;
        summary.timings.output_ms += report_started.elapsed().as_secs_f64() * 1e3;
    }
    summary.timings.total_ms = started.elapsed().as_secs_f64() * 1e3;
    if options.json {
        json::write(out, &summary, &outcome.rows, options.timings)?;
    } else {
        table::write_summary(out, &summary)?;
        if let Some(path) = &options.report {
            writeln!(out, "report: {}", escape(&path.display().to_string()))?;
        }
        if let Some(path) = &options.requests_out {
            writeln!(out, "requests: {}", escape(&path.display().to_string()))?;
        }
        if let Some(dir) = &kept {
            writeln!(
                out,
                "session kept in: {} (see it with `rampart --sessions-dir {} sessions list`)",
                dir.display(),
                dir.display()
            )?;
        }
    }

    // The input must come out of a replay as it went in; say so loudly if anything touched it.
    if let (Some(before), Ok(after)) = (before, std::fs::metadata(&options.input))
        && (before.len() != after.len() || before.modified().ok() != after.modified().ok())
    {
        tracing::error!(file = %options.input.display(), "the replay input changed during the replay");
    }
    Ok(if outcome.stopped { 1 } else { 0 })
}
