//! The engine's `plugins.engines.lossless.config` table, read once at construction.
//!
//! Why strict: a misspelt key would silently leave a default in force (a threshold, a spend
//! limit), so unknown keys and values of the wrong type are refused with the key's name.

use std::path::PathBuf;

use rampart_engine_api::{EngineError, ErrorKind};
use serde::Deserialize;

/// Every setting of the engine, with the defaults of lossless-claw unless noted.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// Directory holding one SQLite database per agent. Default: the host's `state.dir`
    /// (beside the sessions), else `$XDG_STATE_HOME/rampart/lossless` or
    /// `~/.local/state/rampart/lossless`; a replay's scratch `state.dir` wins over it.
    pub state_dir: Option<PathBuf>,
    /// Fraction of the token budget above which a sweep runs (strictly above). 0.95, not
    /// lossless-claw's 0.75: a sweep here makes room down to [`Self::sweep_target`], so the
    /// trigger can sit near the budget, and each sweep breaks the provider's prompt cache, so
    /// the later it runs the fewer breaks a session sees. Measured on the example transcripts
    /// at 32k (BENCHMARKS.md): 0.85 broke the cache 22 times on the main job where legacy breaks
    /// it 20 times and 0.95 18 times, with the same input tokens within 3 % and no request over
    /// the budget; 0.75 swept about 20 % more often than 0.85.
    pub context_threshold: f64,
    /// Raw messages always kept verbatim at the end of the context.
    pub fresh_tail_count: usize,
    /// Optional token cap on the fresh tail (the newest user message is always kept).
    pub fresh_tail_max_tokens: Option<u64>,
    /// Fraction of the token budget a sweep after a turn brings the stored context down to
    /// when the fresh tail alone keeps it over the threshold (not in lossless-claw). Why: the
    /// tail grows by a message a turn, and when it does not fit, the assembler has to drop the
    /// oldest item from the front of the request every turn, which breaks the provider's prompt
    /// cache every turn. Summarising the older part of the tail once, down to this share,
    /// leaves room for many turns of appends before the next sweep, so the cached prefix
    /// breaks about once per threshold crossing, as legacy's compactions do. `1` turns it off
    /// (lossless-claw's behaviour: the tail is never summarised outside overflow recovery).
    pub sweep_target: f64,
    /// Source tokens per leaf and per condensation run.
    pub leaf_chunk_tokens: u64,
    /// Summaries of depth 0 needed to condense into depth 1.
    pub leaf_min_fanout: usize,
    /// Summaries of depth 1 or more needed to condense one level up.
    pub condensed_min_fanout: usize,
    /// Fanout used by the pressure loop, when routine condensation was not enough.
    pub condensed_min_fanout_hard: usize,
    /// Deepest source depth routine condensation works on (-1: unlimited).
    pub sweep_max_depth: i64,
    /// Summariser passes per sweep; the next sweep continues where one stopped.
    pub max_sweep_iterations: usize,
    /// Wall-clock bound of one sweep, in milliseconds.
    pub sweep_deadline_ms: u64,
    /// Target size of a leaf summary.
    pub leaf_target_tokens: u64,
    /// Target size of a condensed summary.
    pub condensed_target_tokens: u64,
    /// Summaries larger than this many times their target are cut.
    pub summary_max_overage_factor: u64,
    /// Size of the deterministic fallback summary (values below 64 are raised to 64).
    pub fallback_max_tokens: u64,
    /// Tool outputs above this many tokens are stored aside and referenced by id in summaries.
    /// Lower than lossless-claw's 25,000 because tool-heavy sessions otherwise stay raw (§6.17).
    pub large_tool_output_tokens: u64,
    /// `<file>` blocks in user messages above this many tokens are stored aside and sent as a
    /// reference with an outline (lossless-claw's 25,000).
    pub large_file_threshold_tokens: u64,
    /// Budget assumed when the host states none.
    pub default_token_budget: u64,
    /// `host` (the host's `llm.complete`, extractive when it has no model) or `extractive`.
    pub summarizer: String,
    /// The model summaries are asked of (`provider/model`); empty lets the host choose.
    pub summary_model: String,
    /// Text appended to every summariser prompt.
    pub custom_instructions: String,
    /// Spend guard: window of the call count, in milliseconds.
    pub summary_call_window_ms: u64,
    /// Spend guard: calls allowed per window and session.
    pub summary_max_calls_per_window: usize,
    /// Spend guard: how long calls are refused once the limit is hit.
    pub summary_spend_backoff_ms: u64,
    /// Consecutive auth failures that open the circuit breaker.
    pub circuit_breaker_threshold: u32,
    /// How long the open breaker refuses calls.
    pub circuit_breaker_cooldown_ms: u64,
    /// Per-call timeout of the summariser, in milliseconds.
    pub summary_timeout_ms: u64,
    /// What a session started over (`rampart run --new`, OpenClaw's `/new`) begins with: the
    /// summaries of the old session's context of this depth or deeper (lossless-claw's
    /// `newSessionRetainDepth`, default 2: the long view stays, the recent detail goes); `0`
    /// every summary; `-1` the whole old context, raw messages too. Everything stays searchable
    /// either way. Why not a clean start: users asked for both (§6.15); a carried summary is
    /// marked `session="previous"` so it is not taken for the new session's own.
    pub new_session_retain_depth: i64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            state_dir: None,
            context_threshold: 0.95,
            fresh_tail_count: 64,
            fresh_tail_max_tokens: None,
            sweep_target: 0.25,
            leaf_chunk_tokens: 20_000,
            leaf_min_fanout: 8,
            condensed_min_fanout: 4,
            condensed_min_fanout_hard: 2,
            sweep_max_depth: 1,
            max_sweep_iterations: 12,
            sweep_deadline_ms: 120_000,
            leaf_target_tokens: 2_400,
            condensed_target_tokens: 2_000,
            summary_max_overage_factor: 3,
            fallback_max_tokens: 512,
            large_tool_output_tokens: 8_000,
            large_file_threshold_tokens: 25_000,
            default_token_budget: 128_000,
            summarizer: "host".into(),
            summary_model: String::new(),
            custom_instructions: String::new(),
            summary_call_window_ms: 600_000,
            summary_max_calls_per_window: 24,
            summary_spend_backoff_ms: 1_800_000,
            circuit_breaker_threshold: 5,
            circuit_breaker_cooldown_ms: 1_800_000,
            summary_timeout_ms: 60_000,
            new_session_retain_depth: 2,
        }
    }
}

impl Config {
    /// Reads the config table; an error names the key and what is accepted.
    pub fn from_json(value: &serde_json::Value) -> Result<Self, EngineError> {
        let value = if value.is_null() {
            serde_json::json!({})
        } else {
            value.clone()
        };
        let config: Config = serde_json::from_value(value).map_err(|e| {
            invalid(format!(
                "plugins.engines.lossless.config: {e} (see engines/lossless/README.md for the keys)"
            ))
        })?;
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), EngineError> {
        if self.new_session_retain_depth < -1 {
            return Err(invalid(format!(
                "plugins.engines.lossless.config.newSessionRetainDepth must be -1 (keep the whole \
                 context), 0 (every summary) or a depth, found {}",
                self.new_session_retain_depth
            )));
        }
        if !(self.context_threshold > 0.0 && self.context_threshold <= 1.0) {
            return Err(invalid(format!(
                "plugins.engines.lossless.config.contextThreshold must be in (0, 1], found {}",
                self.context_threshold
            )));
        }
        if !(self.sweep_target > 0.0 && self.sweep_target <= 1.0) {
            return Err(invalid(format!(
                "plugins.engines.lossless.config.sweepTarget must be in (0, 1], found {}",
                self.sweep_target
            )));
        }
        if self.leaf_chunk_tokens == 0 || self.default_token_budget == 0 {
            return Err(invalid(
                "plugins.engines.lossless.config.leafChunkTokens and defaultTokenBudget must be \
                 positive"
                    .to_string(),
            ));
        }
        if self.condensed_min_fanout_hard < 2 {
            return Err(invalid(
                "plugins.engines.lossless.config.condensedMinFanoutHard must be at least 2 (a lone \
                 summary never condenses)"
                    .to_string(),
            ));
        }
        if !matches!(self.summarizer.as_str(), "host" | "extractive") {
            return Err(invalid(format!(
                "plugins.engines.lossless.config.summarizer must be \"host\" or \"extractive\", \
                 found {:?}",
                self.summarizer
            )));
        }
        Ok(())
    }

    /// The state directory in effect: the configured one (or the host's, see
    /// [`state_dir_in_effect`]), else the user's state directory.
    pub fn resolved_state_dir(&self) -> Result<PathBuf, EngineError> {
        if let Some(dir) = &self.state_dir {
            return Ok(dir.clone());
        }
        if let Some(xdg) = std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
            return Ok(PathBuf::from(xdg).join("rampart").join("lossless"));
        }
        if let Some(home) = std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            return Ok(PathBuf::from(home)
                .join(".local")
                .join("state")
                .join("rampart")
                .join("lossless"));
        }
        Err(invalid(
            "the lossless engine has no state directory: set plugins.engines.lossless.config.\
             stateDir (neither XDG_STATE_HOME nor HOME is set)"
                .to_string(),
        ))
    }

    /// The fallback size in effect (at least 64 tokens).
    pub fn fallback_tokens(&self) -> u64 {
        self.fallback_max_tokens.max(64)
    }

    /// The summary-prefix size above which condensation runs, for a budget.
    pub fn summary_prefix_target(&self, budget: u64) -> u64 {
        let half = (0.5 * self.context_threshold * budget as f64).floor() as u64;
        self.condensed_target_tokens
            .max(self.leaf_chunk_tokens.min(half))
    }

    /// What a sweep after a turn brings the stored context down to, pressing the fresh tail if
    /// it must: `floor(sweepTarget × budget)`, never above the threshold.
    pub fn sweep_target_tokens(&self, budget: u64) -> u64 {
        ((self.sweep_target * budget as f64).floor() as u64).min(self.threshold_tokens(budget))
    }

    /// The stored-token count above which a sweep runs: `floor(threshold × budget)`.
    pub fn threshold_tokens(&self, budget: u64) -> u64 {
        (self.context_threshold * budget as f64).floor() as u64
    }
}

fn invalid(message: String) -> EngineError {
    EngineError::new(ErrorKind::InvalidParams, message)
}
/// Where the databases go, given the configured `stateDir` and the directory the host offers
/// (`state.dir`, API 1.2): a scratch directory (a replay, an eval) always wins, so a replay
/// never writes into the databases of real conversations; otherwise the configured place, then
/// the host's (beside the sessions the state is derived from), then none (the user's state
/// directory, [`Config::resolved_state_dir`]).
pub fn state_dir_in_effect(
    configured: Option<PathBuf>,
    host: Option<rampart_engine_api::host::StateDir>,
) -> Option<PathBuf> {
    match (configured, host) {
        (_, Some(given)) if given.scratch => Some(PathBuf::from(given.path)),
        (Some(configured), _) => Some(configured),
        (None, Some(given)) => Some(PathBuf::from(given.path)),
        (None, None) => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "config_tests.rs"]
mod tests;
