//! The command-line interface: one file per command, and the dispatch.
//!
//! - [`engines`]: `engines list|check|probe`;
//! - [`config_check`]: `config check`;
//! - [`sessions`]: `sessions list|show|import|export|doctor|migrate` (with [`sessions_import`],
//!   [`sessions_doctor`], [`sessions_migrate`] and [`markdown`]), on a sessions directory or a
//!   PostgreSQL store ([`sessions_store`] chooses, [`sessions_database`] runs them there);
//! - [`replay`]: `replay FILE`;
//! - [`run`] and [`compact`]: one live turn, one compaction on demand, on a persisted session,
//!   with the host they share in [`session_host`];
//! - [`serve`]: the OpenAI- and Anthropic-compatible proxy;
//! - [`memory`]: `memory index|search|get|status`, long-term memory for people.
//! - [`context_show`]: `context show`, what is in a session's window.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::config::{self, Config, ConfigSource};
use crate::engine::services::EventSink;
use crate::output_file::{Inputs, OutputFile, SharedOutput};

pub mod compact;
pub mod config_check;
pub mod context_show;
pub mod engines;
pub mod eval;
pub mod install;
pub mod markdown;
pub mod memory;
pub mod replay;
pub mod run;
pub mod serve;
pub mod session_host;
pub mod sessions;
pub mod sessions_database;
pub mod sessions_doctor;
pub mod sessions_import;
pub mod sessions_migrate;
pub mod sessions_store;

pub use config_check::ConfigCommand;
pub use context_show::ContextCommand;
pub use engines::EnginesCommand;
pub use replay::ReplayArgs;
pub use sessions::{SessionsArgs, SessionsCommand};

/// `rampart --version`: the package version and the commit it was built from (see build.rs).
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("RAMPART_COMMIT"), ")");

/// Rampart: a host for the context engines of LLM agents.
#[derive(Debug, Parser)]
#[command(name = "rampart", version = VERSION, about, long_about = None)]
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
    /// Replace output files that already exist (`--events`, `--requests-out`, `--report`,
    /// `--out`, `--html`), atomically: the old file stays whole until the new one is complete.
    /// Without it an existing file is refused. An output that is one of the command's inputs
    /// (the transcript, plugins.toml, a session) is refused either way.
    #[arg(long, global = true)]
    pub overwrite: bool,
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
    Sessions(SessionsArgs),
    /// Replay a recorded session turn by turn through the context engine against the simulator,
    /// showing what each layer of the defence did at a chosen window.
    Replay(ReplayArgs),
    /// Replay a matrix of engines × transcripts × windows and compare them in one table:
    /// window use, compactions, cache breaks, token spend and retention.
    Eval(eval::EvalArgs),
    /// Send one user turn to the configured model, persisted in a session.
    Run {
        /// What the user says.
        prompt: String,
        /// The session (registry key); created when new.
        #[arg(long, value_name = "KEY", default_value = run::DEFAULT_SESSION_KEY)]
        session: String,
        /// Start the session over (OpenClaw's `/new`): a new, empty session under the same
        /// key. The old session's file stays; the engine is told which session this one
        /// replaces, and may carry its own state over (the lossless engine keeps its deepest
        /// summaries, `newSessionRetainDepth`).
        #[arg(long)]
        new: bool,
    },
    /// What is in a session's window: the request its next turn would send, and what each
    /// part of it costs.
    #[command(subcommand)]
    Context(ContextCommand),
    /// Serve an OpenAI- and Anthropic-compatible API that manages each conversation's context
    /// and forwards to the configured model.
    Serve {
        /// The address to listen on (default: `serve.listen`, else 127.0.0.1:8787). Anything
        /// but loopback needs `serve.authToken`.
        #[arg(long, value_name = "ADDR")]
        listen: Option<std::net::SocketAddr>,
        /// Keep conversations in this PostgreSQL database, which every replica reaches
        /// (postgres://USER@HOST:PORT/DATABASE, no password: see `serve.store.passwordEnv`).
        /// Default: `serve.store.url`, else the sessions directory.
        #[arg(long, value_name = "URL")]
        store: Option<String>,
        /// A TOML file of US dollars per million tokens (`input = 3.0`, `output = 15.0`, as
        /// `replay --prices` reads): the live page (`/ui`) then shows spend in dollars.
        #[arg(long, value_name = "FILE")]
        prices: Option<std::path::PathBuf>,
    },
    /// Serve one engine library over stdin and stdout for a host that runs it in a child
    /// process (`isolation = "process"`). Started by rampart itself, never by hand.
    #[command(hide = true)]
    EngineHost,
    /// Long-term memory: index the memory files, search them, read them, see the status.
    #[command(subcommand)]
    Memory(memory::MemoryCommand),
    /// Compact a session now, through its lane.
    Compact {
        /// A registry key, a session id, or a session file.
        session: String,
        /// Extra instructions for the summariser (what to keep, what to stress).
        #[arg(long, value_name = "TEXT")]
        instructions: Option<String>,
    },
    /// Print a completion script for SHELL (bash, zsh, fish, elvish, powershell); see the
    /// README's "Install" for where each shell looks for it.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff) of rampart and every command; `rampart man | man -l -`
    /// reads it.
    Man,
}

/// Runs `rampart sessions …` on the store [`sessions_store`] chooses. `migrate` opens the
/// stores its arguments name instead.
fn sessions_dispatch(
    args: SessionsArgs,
    global: &GlobalArgs,
    out: &mut dyn Write,
) -> anyhow::Result<i32> {
    let err = &mut std::io::stderr();
    let sessions_dir = global.sessions_dir.as_deref();
    if let SessionsCommand::Migrate { from, to } = &args.command {
        if args.store.is_some() {
            anyhow::bail!("sessions migrate names its stores with --from and --to; drop --store");
        }
        return sessions_migrate::migrate(from, to, args.password_env.as_deref(), out, err);
    }
    let database = sessions_store::database_options(
        args.store.as_deref(),
        args.password_env.as_deref(),
        sessions_dir,
        global.config.as_deref(),
    )?;
    if let Some(options) = database {
        let store = sessions_store::open_database(&options, args.command.writes_the_store())?;
        return sessions_database::run(args.command, &store, global.overwrite, out, err);
    }
    let store = if args.command.writes_the_store() {
        sessions::open_store(sessions_dir)?
    } else {
        sessions::open_store_read_only(sessions_dir)?
    };
    sessions::run(args.command, &store, global.overwrite, out, err)
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
        Command::Replay(_) | Command::Eval(_) => "warn,rampart_host::models=error",
        _ => "warn",
    }
}

/// [`init_logging`] with `default` as the filter when RUST_LOG is not set.
pub fn init_logging_with(format: LogFormat, default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    use std::io::IsTerminal;
    let colour = use_colour(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    );
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// Whether log lines are coloured: only on a terminal, and never when `NO_COLOR` is set to
/// anything but the empty string (no-color.org). Escape codes in a piped or redirected log
/// were the first thing a new user saw of a failed command.
pub fn use_colour(stderr_is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    stderr_is_terminal && no_color.is_none_or(|v| v.is_empty())
}

/// Runs a parsed command line; the exit code is the result.
pub fn run(cli: Cli, out: &mut dyn Write) -> anyhow::Result<i32> {
    let global = cli.global;
    let overwrite = global.overwrite;
    let sessions_dir = global.sessions_dir.as_deref();
    match cli.command {
        Command::Engines(cmd) => engines::run(cmd, global.config, out),
        Command::Config(cmd) => config_check::run(cmd, global.config, out),
        Command::Sessions(args) => sessions_dispatch(args, &global, out),
        Command::Replay(args) => {
            let source = config::locate(global.config.as_deref())?;
            let mut options = args.into_options();
            options.overwrite = overwrite;
            if let Some(path) = source.path() {
                options.protect.file("the configuration", path);
            }
            // Every output checked before any is created: the --events file must not exist
            // by the time a clash of --report with the transcript is found.
            let inputs = crate::replay::inputs_of(&options, sessions_dir);
            let mut outputs = crate::replay::outputs_of(&options);
            if let Some(path) = &global.events {
                outputs.insert(0, ("--events", path.as_path()));
            }
            inputs.check_all(&outputs, overwrite)?;
            let config = config::load(&source)?;
            let (mut events, events_file) =
                event_sink(global.events.as_deref(), &inputs, overwrite)?;
            if !options.timings {
                // A replay's events file is reproducible: durations are measurements.
                events = events.without_durations();
            }
            crate::scratch::sweep_stale();
            crate::scratch::clean_up_on_signals()?;
            let result = crate::replay::run_command(config, &options, sessions_dir, events, out);
            finish_events(events_file, result)
        }
        Command::Eval(args) => {
            let (source, config) = load_config(global.config)?;
            let mut protect = Inputs::new();
            if let Some(path) = source.path() {
                protect.file("the configuration", path);
            }
            crate::scratch::sweep_stale();
            crate::scratch::clean_up_on_signals()?;
            eval::eval(&config, args, &protect, overwrite, out)
        }
        Command::Run {
            prompt,
            session,
            new,
        } => {
            let (source, config) = load_config(global.config)?;
            let store = sessions::open_store(sessions_dir)?;
            let inputs = command_inputs(&source, store.dir(), None);
            let (events, events_file) = event_sink(global.events.as_deref(), &inputs, overwrite)?;
            // Not `stderr().lock()`: the lock would be held for the whole turn, and the log
            // (which other threads, such as the HTTP client's, write to stderr) would wait on
            // it forever. Each write takes the lock for itself.
            let mut err = std::io::stderr();
            let result = run::run_prompt(
                &config,
                &store,
                events,
                &prompt,
                run::SessionChoice {
                    key: Some(&session),
                    start_over: new,
                },
                out,
                &mut err,
            );
            finish_events(events_file, result)
        }
        Command::Serve {
            listen,
            store: url,
            prices,
        } => {
            let (source, config) = load_config(global.config)?;
            let store = sessions::open_store(sessions_dir)?;
            let inputs = command_inputs(&source, store.dir(), None);
            let (events, events_file) = event_sink(global.events.as_deref(), &inputs, overwrite)?;
            let result = serve::serve(
                config,
                store,
                serve::ServeFlags {
                    store_url: url.as_deref(),
                    listen,
                    prices: prices.as_deref(),
                },
                events,
                out,
                &mut std::io::stderr(),
            );
            finish_events(events_file, result)
        }
        Command::Context(cmd) => {
            let (source, config) = load_config(global.config)?;
            // Read-only: `context show` writes nothing, not even the sessions directory.
            let store = sessions::open_store_read_only(sessions_dir)?;
            let ContextCommand::Show(args) = &cmd;
            let inputs = command_inputs(&source, store.dir(), Some(&args.session));
            let mut outputs = Vec::new();
            if let Some(path) = &global.events {
                outputs.push(("--events", path.as_path()));
            }
            if let Some(path) = &args.html {
                outputs.push(("--html", path.as_path()));
            }
            inputs.check_all(&outputs, overwrite)?;
            let (events, events_file) = event_sink(global.events.as_deref(), &inputs, overwrite)?;
            let mut err = std::io::stderr();
            let rules = context_show::OutputRules {
                inputs: &inputs,
                overwrite,
            };
            let result = context_show::run(cmd, &config, &store, events, rules, out, &mut err);
            finish_events(events_file, result)
        }
        Command::EngineHost => Ok(crate::engine::engine_host::serve()),
        Command::Completions { shell } => install::completions(shell, out),
        Command::Man => install::man(out),
        Command::Memory(cmd) => {
            let (_, config) = load_config(global.config)?;
            // Memory only lists the transcripts (when they are a source): the sessions
            // directory is neither created nor its registry read.
            let sessions_dir = match sessions_dir {
                Some(dir) => dir.to_path_buf(),
                None => rampart_sessions::store::default_sessions_dir().ok_or_else(|| {
                    anyhow::anyhow!(
                        "no platform data directory is known here; pass --sessions-dir DIR to \
                         choose one"
                    )
                })?,
            };
            memory::run(cmd, &config, &sessions_dir, out, &mut std::io::stderr())
        }
        Command::Compact {
            session,
            instructions,
        } => {
            let (source, config) = load_config(global.config)?;
            let store = sessions::open_store(sessions_dir)?;
            let inputs = command_inputs(&source, store.dir(), Some(&session));
            let (events, events_file) = event_sink(global.events.as_deref(), &inputs, overwrite)?;
            // As for `run`: never hold the stderr lock across the work.
            let mut err = std::io::stderr();
            let result = compact::compact(
                &config,
                &store,
                events,
                &session,
                instructions.as_deref(),
                out,
                &mut err,
            );
            finish_events(events_file, result)
        }
    }
}

/// What a command working on the sessions store reads: `plugins.toml`, the store, and the
/// session argument when it names a file.
fn command_inputs(source: &ConfigSource, store: &Path, session: Option<&str>) -> Inputs {
    let mut inputs = Inputs::new();
    if let Some(path) = source.path() {
        inputs.file("the configuration", path);
    }
    inputs.store(store);
    if let Some(session) = session.filter(|s| Path::new(s).is_file()) {
        inputs.file("the session", Path::new(session));
    }
    inputs
}

/// The event sink of a command: JSON lines to `--events FILE` when given (an output file,
/// checked against `inputs`; see [`crate::output_file`]), else tracing only. The file is
/// committed by [`finish_events`] when the command ends.
pub(crate) fn event_sink(
    path: Option<&Path>,
    inputs: &Inputs,
    overwrite: bool,
) -> anyhow::Result<(EventSink, Option<SharedOutput>)> {
    match path {
        None => Ok((EventSink::tracing_only(), None)),
        Some(path) => {
            let file = SharedOutput::new(OutputFile::stream("--events", path, inputs, overwrite)?);
            Ok((EventSink::to_writer(Box::new(file.clone())), Some(file)))
        }
    }
}

/// Commits the `--events` file once the command has ended, whether it succeeded or not (the
/// events up to a failure are what explains it). A failed commit is the command's error when
/// it had none.
fn finish_events(file: Option<SharedOutput>, result: anyhow::Result<i32>) -> anyhow::Result<i32> {
    let Some(file) = file else {
        return result;
    };
    match (file.commit(), result) {
        (Ok(()), result) => result,
        (Err(e), Ok(_)) => Err(e.into()),
        (Err(e), Err(first)) => {
            tracing::warn!(error = %e, "the --events file could not be written");
            Err(first)
        }
    }
}

pub(crate) fn load_config(explicit: Option<PathBuf>) -> anyhow::Result<(ConfigSource, Config)> {
    let source = config::locate(explicit.as_deref())?;
    let config = config::load(&source)?;
    Ok((source, config))
}
