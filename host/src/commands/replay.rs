//! `rampart replay FILE`: its flags. The replay itself is [`crate::replay`].

use std::path::PathBuf;

use clap::Args;

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
    /// {"turn", "attempt", "model", "window", "promptTokens", "system", "messages"}. An
    /// existing FILE is replaced only with --overwrite; never the transcript.
    #[arg(long, value_name = "FILE")]
    pub requests_out: Option<PathBuf>,
    /// Write a self-contained HTML report (chart and summary) to FILE (an existing one only
    /// with --overwrite).
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// A TOML file of US dollars per million tokens (`input = 3.0`, `output = 15.0`): the
    /// summary then gives what the chat input and the compactions cost.
    #[arg(long, value_name = "FILE")]
    pub prices: Option<PathBuf>,
    /// Keep the temporary directory holding the replay's session (its path is printed).
    #[arg(long)]
    pub keep: bool,
    /// Stop at the first call that fails (exit code 1) instead of going on.
    #[arg(long)]
    pub stop_on_error: bool,
    /// For a file holding several sessions: which one to replay, from 1 [default: 1].
    #[arg(long, value_name = "N")]
    pub session_index: Option<usize>,
    /// Send the system prompt Rampart builds from the agent workspace (as `rampart run`
    /// does) instead of the one the transcript recorded.
    #[arg(long)]
    pub rebuild_prompt: bool,
    /// Keep this machine's measurements (milliseconds, peak memory) in --json and --events.
    /// Without it they are left out, and the same transcript, config and engine give the same
    /// --json, --events and --requests-out, byte for byte.
    #[arg(long)]
    pub timings: bool,
}

impl ReplayArgs {
    /// The replay's options.
    pub fn into_options(self) -> crate::replay::ReplayOptions {
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
            prices: self.prices,
            keep: self.keep,
            stop_on_error: self.stop_on_error,
            session_index: self.session_index,
            rebuild_prompt: self.rebuild_prompt,
            timings: self.timings,
            // Global flags: set by the dispatch.
            overwrite: false,
            protect: crate::output_file::Inputs::new(),
        }
    }
}
