//! `agents.defaults.compaction.*`: the compaction settings, with OpenClaw's key names.
//!
//! Why hand-written parsing instead of a derived `Deserialize`: a bad value must produce an
//! error that names the full key (`agents.defaults.compaction.maxHistoryShare`) and says what is
//! allowed, and serde's derived errors do neither. [`CompactionSettings`] still implements
//! `Deserialize` (through [`CompactionSettings::from_value`]) so it can sit inside a larger
//! configuration struct.
//!
//! Keys OpenClaw has but Rampart does not implement yet (`postIndexSync`,
//! `postCompactionSections`, `provider`, `truncateAfterCompaction`, `notifyUser`) are accepted,
//! kept in [`CompactionSettings::ignored`] and otherwise ignored, so an OpenClaw configuration
//! loads unchanged. Every other unknown key is an error: a typo must not silently fall back to
//! a default.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// Where these settings live in the configuration; every error names its key under it.
pub const CONFIG_PATH: &str = "agents.defaults.compaction";

/// pi's own default `reserveTokens` (`DEFAULT_COMPACTION_SETTINGS`), used when the
/// configuration sets none; the floor then lifts it to 20,000.
pub const PI_DEFAULT_RESERVE_TOKENS: u64 = 16_384;
/// OpenClaw's `DEFAULT_PI_COMPACTION_RESERVE_TOKENS_FLOOR`.
pub const DEFAULT_RESERVE_TOKENS_FLOOR: u64 = 20_000;

/// The least share of the prompt budget a compaction aims at when `targetShare` is not set
/// (see [`CompactionSettings::target_share_for`]), measured on the README's main job
/// (BENCHMARKS.md, issue 14).
pub const DEFAULT_TARGET_SHARE: f64 = 0.4;

/// The room for growth a compaction leaves by default, in tokens: about 25 calls of the
/// README's main job (see [`CompactionSettings::target_share_for`]).
pub const DEFAULT_COMPACTION_HEADROOM_TOKENS: u64 = 12_000;

/// The share of the prompt budget at which a compaction is prepared ahead of need
/// (`prepareAt`): late enough that the prepared summary covers nearly what a compaction at the
/// budget would, early enough that a model has several calls' time to write it.
pub const DEFAULT_PREPARE_AT: f64 = 0.8;

/// The least a window-scaled reserve floor goes ([`CompactionSettings::reserve_for`]).
pub const SCALED_RESERVE_FLOOR_MIN: u64 = 4_096;
/// pi's default `keepRecentTokens`: recent history kept verbatim after the summary.
pub const DEFAULT_KEEP_RECENT_TOKENS: u64 = 20_000;
/// Default share of the compaction model's window the summarised history may use.
pub const DEFAULT_MAX_HISTORY_SHARE: f64 = 0.5;
/// Allowed range of `maxHistoryShare`.
pub const MAX_HISTORY_SHARE_RANGE: (f64, f64) = (0.1, 0.9);
/// `DEFAULT_RECENT_TURNS_PRESERVE`: user turns quoted verbatim in the summary's suffix.
pub const DEFAULT_RECENT_TURNS_PRESERVE: usize = 3;
/// `MAX_RECENT_TURNS_PRESERVE`: larger values are clamped to it.
pub const MAX_RECENT_TURNS_PRESERVE: usize = 12;
/// `DEFAULT_QUALITY_GUARD_MAX_RETRIES`.
pub const DEFAULT_QUALITY_GUARD_MAX_RETRIES: usize = 1;
/// `MAX_QUALITY_GUARD_MAX_RETRIES`: larger values are clamped to it.
pub const MAX_QUALITY_GUARD_MAX_RETRIES: usize = 3;
/// The compaction timeout of the latest upstream version (`EMBEDDED_COMPACTION_TIMEOUT_MS`,
/// 180 s). Why not April's 900 s: a 15-minute stall held the session lock long enough to lock
/// users out (#91358).
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 180;
/// The largest timeout OpenClaw accepts (2,147,000,000 ms, just under a 32-bit timer).
pub const MAX_TIMEOUT_SECONDS: u64 = 2_147_000;
/// Default number of parts history is split into before summarising (`DEFAULT_PARTS`).
pub const DEFAULT_PARTS: usize = 2;
/// Default bound on summariser calls in flight at once.
pub const DEFAULT_MAX_CONCURRENCY: usize = 8;

/// The keys OpenClaw accepts that Rampart ignores for now.
pub const IGNORED_KEYS: [&str; 5] = [
    "postIndexSync",
    "postCompactionSections",
    "provider",
    "truncateAfterCompaction",
    "notifyUser",
];

const KNOWN_KEYS: [&str; 20] = [
    "mode",
    "reserveTokens",
    "keepRecentTokens",
    "reserveTokensFloor",
    "maxHistoryShare",
    "targetShare",
    "prepareAt",
    "customInstructions",
    "recentTurnsPreserve",
    "identifierPolicy",
    "identifierInstructions",
    "qualityGuard",
    "model",
    "timeoutSeconds",
    "parts",
    "maxConcurrency",
    "circuitBreaker",
    "retry",
    "extractiveFallback",
    "memoryFlush",
];

/// Which compaction flow runs (`mode`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum CompactionMode {
    /// pi's plain flow: summary plus the recent tokens, without the safeguard's extras. Rampart
    /// runs the same pipeline but skips the preserved-turns section and the quality guard.
    Default,
    /// OpenClaw's safeguard flow (the default): preserved recent turns, optional quality guard.
    #[default]
    Safeguard,
}

/// How strictly the summary must keep opaque identifiers (`identifierPolicy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum IdentifierPolicy {
    /// Ask for every identifier verbatim, and audit it when the quality guard is on.
    #[default]
    Strict,
    /// No identifier instructions and no identifier audit.
    Off,
    /// The operator's own text (`identifierInstructions`), or the strict text when it is empty.
    Custom,
}

/// `qualityGuard`: audit the summary and regenerate it when it misses required content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QualityGuardSettings {
    /// Off by default, as in OpenClaw: every retry is another full summarisation.
    pub enabled: bool,
    /// Regenerations after the first attempt (0–3; larger values are clamped).
    pub max_retries: usize,
}

impl Default for QualityGuardSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            max_retries: DEFAULT_QUALITY_GUARD_MAX_RETRIES,
        }
    }
}

/// `circuitBreaker` (ours, after upstream PR #38591): after repeated failures, stop trying to
/// compact a session for a while instead of burning every overflow attempt on it.
///
/// The engine keeps the per-session failure count; this only holds the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CircuitBreakerSettings {
    /// Consecutive failures that open the breaker.
    pub failures: u32,
    /// The first backoff once open, in seconds.
    pub backoff_seconds: u64,
    /// The backoff doubles per further failure up to this many seconds.
    pub max_backoff_seconds: u64,
}

impl Default for CircuitBreakerSettings {
    fn default() -> Self {
        Self {
            failures: 3,
            backoff_seconds: 300,
            max_backoff_seconds: 1_800,
        }
    }
}

impl CircuitBreakerSettings {
    /// How long to wait before the next compaction of a session that failed
    /// `consecutive_failures` times in a row; `None` while the breaker is closed.
    pub fn backoff_after(&self, consecutive_failures: u32) -> Option<Duration> {
        if self.failures == 0 || consecutive_failures < self.failures {
            return None;
        }
        let doublings = (consecutive_failures - self.failures).min(32);
        let secs = self
            .backoff_seconds
            .saturating_mul(1u64 << doublings)
            .min(self.max_backoff_seconds.max(self.backoff_seconds));
        Some(Duration::from_secs(secs))
    }
}

/// `retry` (ours): how a failed summariser call is retried. The defaults are OpenClaw's
/// `retryAsync` options for `generateSummary`. Why a setting: tests set the delays to zero so
/// they never sleep.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetrySettings {
    /// Attempts per call, the first included (at least 1).
    pub attempts: u32,
    /// Delay before the second attempt, in milliseconds; it doubles per attempt.
    pub min_delay_ms: u64,
    /// The cap on the delay, in milliseconds.
    pub max_delay_ms: u64,
    /// Random spread of each delay, as a fraction (0.2 = ±20%), so retries of concurrent parts
    /// do not hit the provider in lockstep.
    pub jitter: f64,
}

impl Default for RetrySettings {
    fn default() -> Self {
        Self {
            attempts: 3,
            min_delay_ms: 500,
            max_delay_ms: 5_000,
            jitter: 0.2,
        }
    }
}

impl RetrySettings {
    /// The delay before attempt `attempt + 1` (`attempt` ≥ 1 failed attempts so far), for a
    /// jitter sample in `[-1, 1]`.
    pub fn delay(&self, attempt: u32, jitter_sample: f64) -> Duration {
        let base = self
            .min_delay_ms
            .saturating_mul(1u64 << attempt.saturating_sub(1).min(32))
            .min(self.max_delay_ms);
        let spread = 1.0 + self.jitter.clamp(0.0, 1.0) * jitter_sample.clamp(-1.0, 1.0);
        Duration::from_millis((base as f64 * spread).max(0.0) as u64)
    }
}

/// `memoryFlush`: OpenClaw's pre-compaction memory flush (`prompt-and-memory.md` §2.10).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryFlushSettings {
    /// `enabled` (default true; it still needs the memory slot on).
    pub enabled: bool,
    /// `softThresholdTokens`: the flush fires this many tokens before the compaction trigger
    /// (default 4,000).
    pub soft_threshold_tokens: u64,
    /// `forceFlushTranscriptBytes`: a transcript this large flushes whatever its token count
    /// (default 2 MiB).
    pub force_flush_transcript_bytes: u64,
    /// `prompt`: the flush turn's user prompt, instead of the built-in one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// `systemPrompt`: its system prompt, instead of the built-in one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
}

/// Default `memoryFlush.softThresholdTokens` (OpenClaw's `DEFAULT_MEMORY_FLUSH_SOFT_TOKENS`).
pub const DEFAULT_MEMORY_FLUSH_SOFT_TOKENS: u64 = 4_000;
/// Default `memoryFlush.forceFlushTranscriptBytes` (2 MiB).
pub const DEFAULT_MEMORY_FLUSH_FORCE_BYTES: u64 = 2 * 1024 * 1024;

impl Default for MemoryFlushSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            soft_threshold_tokens: DEFAULT_MEMORY_FLUSH_SOFT_TOKENS,
            force_flush_transcript_bytes: DEFAULT_MEMORY_FLUSH_FORCE_BYTES,
            prompt: None,
            system_prompt: None,
        }
    }
}

/// The compaction settings. `Default` gives the effective defaults; see each field.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionSettings {
    /// `mode`: `safeguard` (default) or `default`.
    pub mode: CompactionMode,
    /// `reserveTokens`: tokens kept free for the answer; `None` means pi's 16,384, lifted to
    /// the floor. The summariser's answer budget is 80% of the effective value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reserve_tokens: Option<u64>,
    /// `keepRecentTokens`: recent history kept verbatim; `None` or 0 means 20,000.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep_recent_tokens: Option<u64>,
    /// `reserveTokensFloor`: the least effective reserve; `None` means 20,000 for the
    /// summariser's budget and a floor that scales with the window for the prompt's reserve
    /// ([`CompactionSettings::reserve_for`]); 0 disables the floor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reserve_tokens_floor: Option<u64>,
    /// `maxHistoryShare`: share of the compaction model's window the summarised history may
    /// take before its oldest part is summarised separately (0.1–0.9, default 0.5).
    pub max_history_share: f64,
    /// `targetShare`: the share of the prompt budget a compaction aims to leave the context
    /// at (0.1–1.0); `None` for the default of [`CompactionSettings::target_share_for`].
    /// Hysteresis: a compaction that only just gets under the trigger is followed by another a
    /// few calls later (111 compactions in the README's 517-call replay); one that leaves room
    /// is many calls away, which keeps the prompt cache and saves the summariser's calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_share: Option<f64>,
    /// `prepareAt` (ours): the share of the prompt budget (0.1–0.99) at which the host asks
    /// the engine to prepare the next compaction ahead of need (in `maintain`), so that the
    /// compaction the budget triggers swaps a ready summary in instead of making the request
    /// wait for one; `false` turns it off (`None`). Default [`DEFAULT_PREPARE_AT`]. Always
    /// serialised (off as `false`), so the engine's copy of the settings says the same.
    #[serde(serialize_with = "share_or_false")]
    pub prepare_at: Option<f64>,
    /// `customInstructions`: extra focus for the summariser ("Additional focus:").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub custom_instructions: Option<String>,
    /// `recentTurnsPreserve`: user turns quoted verbatim after the summary (0–12, default 3;
    /// negative values mean 0, larger ones 12, as OpenClaw resolves them).
    pub recent_turns_preserve: usize,
    /// `identifierPolicy`: `strict` (default), `off` or `custom`.
    pub identifier_policy: IdentifierPolicy,
    /// `identifierInstructions`: the text of the `custom` policy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identifier_instructions: Option<String>,
    /// `qualityGuard`.
    pub quality_guard: QualityGuardSettings,
    /// `model`: the compaction model (`provider/model`); the engine resolves it. `None` uses
    /// the session's model, or the extractive summariser when no model can be used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// `timeoutSeconds`: the whole compaction's wall-clock limit (default 180).
    pub timeout_seconds: u64,
    /// `parts` (ours): parts the history is split into when it does not fit one request; the
    /// parts are summarised concurrently, then merged (default 2).
    pub parts: usize,
    /// `maxConcurrency` (ours): summariser calls in flight at once (default 8).
    pub max_concurrency: usize,
    /// `circuitBreaker` (ours).
    pub circuit_breaker: CircuitBreakerSettings,
    /// `retry` (ours).
    pub retry: RetrySettings,
    /// `extractiveFallback` (ours, default true): when every model attempt failed, still
    /// compact with an honest extractive summary (fallback level 2). `false` fails the
    /// compaction instead and leaves the session untouched.
    pub extractive_fallback: bool,
    /// `memoryFlush`: the silent turn before a compaction that writes durable facts to the
    /// memory files (needs the memory slot; see [`super::flush`]).
    pub memory_flush: MemoryFlushSettings,
    /// OpenClaw keys accepted but not implemented yet ([`IGNORED_KEYS`]), kept as written.
    #[serde(flatten)]
    pub ignored: Map<String, Value>,
}

impl Default for CompactionSettings {
    fn default() -> Self {
        Self {
            mode: CompactionMode::Safeguard,
            reserve_tokens: None,
            keep_recent_tokens: None,
            reserve_tokens_floor: None,
            max_history_share: DEFAULT_MAX_HISTORY_SHARE,
            target_share: None,
            prepare_at: Some(DEFAULT_PREPARE_AT),
            custom_instructions: None,
            recent_turns_preserve: DEFAULT_RECENT_TURNS_PRESERVE,
            identifier_policy: IdentifierPolicy::Strict,
            identifier_instructions: None,
            quality_guard: QualityGuardSettings::default(),
            model: None,
            timeout_seconds: DEFAULT_TIMEOUT_SECONDS,
            parts: DEFAULT_PARTS,
            max_concurrency: DEFAULT_MAX_CONCURRENCY,
            circuit_breaker: CircuitBreakerSettings::default(),
            retry: RetrySettings::default(),
            extractive_fallback: true,
            memory_flush: MemoryFlushSettings::default(),
            ignored: Map::new(),
        }
    }
}

/// A compaction setting that is not allowed. The message names the full key and what it
/// accepts, so the user can fix the file without reading code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompactionConfigError {
    /// The settings (or a nested table) are not an object.
    #[error("{path}: expected a table of settings, found {found}")]
    NotATable {
        /// The full key.
        path: String,
        /// The value found, abbreviated.
        found: String,
    },
    /// A key this version does not know.
    #[error("{path}: unknown key; allowed keys are {allowed}")]
    UnknownKey {
        /// The full key.
        path: String,
        /// The keys allowed at that level.
        allowed: String,
    },
    /// A value of the wrong type or out of range.
    #[error("{path}: {found} is not allowed; expected {expected}")]
    InvalidValue {
        /// The full key.
        path: String,
        /// The value found, abbreviated.
        found: String,
        /// What the key accepts.
        expected: String,
    },
}

impl CompactionConfigError {
    /// The full key the error is about, so a host can point at its line in the file.
    pub fn path(&self) -> &str {
        match self {
            Self::NotATable { path, .. }
            | Self::UnknownKey { path, .. }
            | Self::InvalidValue { path, .. } => path,
        }
    }

    /// What is wrong, without the key.
    pub fn problem(&self) -> String {
        let text = self.to_string();
        text.strip_prefix(&format!("{}: ", self.path()))
            .map(str::to_string)
            .unwrap_or(text)
    }
}

/// A share, or `false` for off (TOML has no null, and `from_value` reads null as absent).
fn share_or_false<S: serde::Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(share) => s.serialize_f64(*share),
        None => s.serialize_bool(false),
    }
}

impl CompactionSettings {
    /// Parses `agents.defaults.compaction` from its JSON form (TOML converts to it). Absent
    /// keys take their defaults; `null` counts as absent.
    pub fn from_value(value: &Value) -> Result<Self, CompactionConfigError> {
        let table = as_table(CONFIG_PATH, value)?;
        let mut s = Self::default();
        for (key, value) in table {
            let path = format!("{CONFIG_PATH}.{key}");
            if value.is_null() {
                continue;
            }
            match key.as_str() {
                "mode" => {
                    s.mode = match value.as_str() {
                        Some("safeguard") => CompactionMode::Safeguard,
                        Some("default") => CompactionMode::Default,
                        _ => return Err(invalid(&path, value, "\"safeguard\" or \"default\"")),
                    }
                }
                "reserveTokens" => s.reserve_tokens = Some(non_negative(&path, value)?),
                "keepRecentTokens" => s.keep_recent_tokens = Some(non_negative(&path, value)?),
                "reserveTokensFloor" => s.reserve_tokens_floor = Some(non_negative(&path, value)?),
                "maxHistoryShare" => {
                    let (lo, hi) = MAX_HISTORY_SHARE_RANGE;
                    match value.as_f64() {
                        Some(v) if (lo..=hi).contains(&v) => s.max_history_share = v,
                        _ => return Err(invalid(&path, value, "a number from 0.1 to 0.9")),
                    }
                }
                "targetShare" => match value.as_f64() {
                    Some(v) if (0.1..=1.0).contains(&v) => s.target_share = Some(v),
                    _ => return Err(invalid(&path, value, "a number from 0.1 to 1.0")),
                },
                "prepareAt" => match value {
                    Value::Bool(false) => s.prepare_at = None,
                    v => match v.as_f64() {
                        Some(v) if (0.1..=0.99).contains(&v) => s.prepare_at = Some(v),
                        _ => {
                            return Err(invalid(
                                &path,
                                value,
                                "a number from 0.1 to 0.99, or false",
                            ));
                        }
                    },
                },
                "customInstructions" => s.custom_instructions = Some(string(&path, value)?),
                "recentTurnsPreserve" => {
                    let v = number(&path, value, "a number of user turns (0 to 12)")?;
                    s.recent_turns_preserve = resolve_recent_turns_preserve(Some(v));
                }
                "identifierPolicy" => {
                    s.identifier_policy = match value.as_str() {
                        Some("strict") => IdentifierPolicy::Strict,
                        Some("off") => IdentifierPolicy::Off,
                        Some("custom") => IdentifierPolicy::Custom,
                        _ => {
                            return Err(invalid(&path, value, "\"strict\", \"off\" or \"custom\""));
                        }
                    }
                }
                "identifierInstructions" => {
                    s.identifier_instructions = Some(string(&path, value)?);
                }
                "qualityGuard" => s.quality_guard = quality_guard(&path, value)?,
                "model" => s.model = Some(string(&path, value)?),
                "timeoutSeconds" => {
                    let v = number(&path, value, "a positive number of seconds")?;
                    if v < 1.0 {
                        return Err(invalid(&path, value, "a positive number of seconds"));
                    }
                    s.timeout_seconds = (v.floor() as u64).min(MAX_TIMEOUT_SECONDS);
                }
                "parts" => s.parts = positive(&path, value)?,
                "maxConcurrency" => s.max_concurrency = positive(&path, value)?,
                "circuitBreaker" => s.circuit_breaker = circuit_breaker(&path, value)?,
                "retry" => s.retry = retry(&path, value)?,
                "extractiveFallback" => match value.as_bool() {
                    Some(b) => s.extractive_fallback = b,
                    None => return Err(invalid(&path, value, "true or false")),
                },
                "memoryFlush" => s.memory_flush = memory_flush(&path, value)?,
                k if IGNORED_KEYS.contains(&k) => {
                    s.ignored.insert(key.clone(), value.clone());
                }
                _ => return Err(unknown(&path, KNOWN_KEYS.iter().chain(&IGNORED_KEYS))),
            }
        }
        Ok(s)
    }

    /// The reserve the summariser budgets with: the configured value (or pi's 16,384), lifted
    /// to the floor (20,000 unless configured).
    pub fn effective_reserve_tokens(&self) -> u64 {
        self.reserve_tokens
            .unwrap_or(PI_DEFAULT_RESERVE_TOKENS)
            .max(
                self.reserve_tokens_floor
                    .unwrap_or(DEFAULT_RESERVE_TOKENS_FLOOR),
            )
    }

    /// The share of `budget` (the compaction's token budget) the compacted context aims at:
    /// `targetShare` when set; else what leaves [`DEFAULT_COMPACTION_HEADROOM_TOKENS`] of room
    /// to grow, but at most [`DEFAULT_TARGET_SHARE`]'s complement of the budget. Why not one
    /// share: at 32k a fixed room of 10,000 tokens is 60 % of the budget, and at 128k it is
    /// 13 %; a small share there threw away context (and facts) for no fewer compactions.
    ///
    /// | window | compaction budget (prompt budget after the ×1.2 margin) | share |
    /// |---|---|---|
    /// | 32,000 | 20,000 | 0.40 |
    /// | 64,000 | 40,000 | 0.70 |
    /// | 128,000 | 90,000 | 0.87 |
    pub fn target_share_for(&self, budget: u64) -> f64 {
        if let Some(share) = self.target_share {
            return share;
        }
        if budget == 0 {
            return DEFAULT_TARGET_SHARE;
        }
        let room = (DEFAULT_COMPACTION_HEADROOM_TOKENS as f64 / budget as f64)
            .min(1.0 - DEFAULT_TARGET_SHARE);
        1.0 - room
    }

    /// The tokens a request keeps free below `context_window` for the answer and for a
    /// compaction (the precheck's reserve), for a model whose answers are capped at
    /// `output_cap` tokens when that is known.
    ///
    /// OpenClaw keeps a flat 20,000-token floor, which at a 32k window leaves a prompt of
    /// about 10,000 tokens after the estimate's safety factor: the window was mostly unused
    /// and compaction ran every few calls (openclaw#124911). The rule:
    /// - the floor scales with the window: a quarter of it, within [4,096, 20,000];
    ///   `reserveTokensFloor` replaces it when set;
    /// - the reserve is the larger of the floor and what the answer may need: `reserveTokens`
    ///   when set, else the model's output cap when known;
    /// - whatever is configured, it never swallows the window: the precheck still keeps the
    ///   prompt at least 8,000 tokens, or half the window below 16,000
    ///   ([`crate::guards::precheck::MIN_PROMPT_BUDGET_TOKENS`]).
    ///
    /// | window | reserve (no cap, nothing configured) | prompt budget after the ×1.2 estimate margin | with an 8,192-token output cap |
    /// |---|---|---|---|
    /// | 16,000 | 4,096 | 9,920 | 8,192 (the precheck keeps 8,000 for the prompt) |
    /// | 32,000 | 8,000 | 20,000 (62.5 %) | 8,192 |
    /// | 128,000 | 20,000 | 90,000 | 20,000 |
    /// | 200,000 | 20,000 | 150,000 | 20,000 |
    /// | 1,000,000 | 20,000 | 816,666 | 20,000 |
    pub fn reserve_for(&self, context_window: u64, output_cap: Option<u64>) -> u64 {
        let floor = self.reserve_tokens_floor.unwrap_or_else(|| {
            (context_window / 4).clamp(SCALED_RESERVE_FLOOR_MIN, DEFAULT_RESERVE_TOKENS_FLOOR)
        });
        let answer = self.reserve_tokens.or(output_cap).unwrap_or(0);
        answer.max(floor)
    }

    /// The recent tokens kept verbatim: the configured value when positive, else 20,000.
    pub fn effective_keep_recent_tokens(&self) -> u64 {
        self.keep_recent_tokens
            .filter(|t| *t > 0)
            .unwrap_or(DEFAULT_KEEP_RECENT_TOKENS)
    }

    /// The whole compaction's time limit.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_seconds.clamp(1, MAX_TIMEOUT_SECONDS))
    }

    /// User turns to quote verbatim: the setting in `safeguard` mode, none in `default` mode.
    pub fn effective_recent_turns_preserve(&self) -> usize {
        match self.mode {
            CompactionMode::Safeguard => self.recent_turns_preserve.min(MAX_RECENT_TURNS_PRESERVE),
            CompactionMode::Default => 0,
        }
    }

    /// Summary attempts: `1 + maxRetries` when the quality guard is on (safeguard mode only),
    /// else 1.
    pub fn quality_attempts(&self) -> usize {
        if self.mode == CompactionMode::Safeguard && self.quality_guard.enabled {
            1 + self
                .quality_guard
                .max_retries
                .min(MAX_QUALITY_GUARD_MAX_RETRIES)
        } else {
            1
        }
    }
}

impl<'de> Deserialize<'de> for CompactionSettings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Self::from_value(&value).map_err(serde::de::Error::custom)
    }
}

/// OpenClaw's `resolveRecentTurnsPreserve`: absent or not finite gives 3, otherwise the value
/// floored and clamped to 0–12.
pub fn resolve_recent_turns_preserve(value: Option<f64>) -> usize {
    clamp_count(
        value,
        DEFAULT_RECENT_TURNS_PRESERVE,
        MAX_RECENT_TURNS_PRESERVE,
    )
}

/// OpenClaw's `resolveQualityGuardMaxRetries`: absent gives 1, otherwise clamped to 0–3.
pub fn resolve_quality_guard_max_retries(value: Option<f64>) -> usize {
    clamp_count(
        value,
        DEFAULT_QUALITY_GUARD_MAX_RETRIES,
        MAX_QUALITY_GUARD_MAX_RETRIES,
    )
}

fn clamp_count(value: Option<f64>, default: usize, max: usize) -> usize {
    match value.filter(|v| v.is_finite()) {
        None => default.min(max),
        Some(v) => (v.floor().max(0.0) as usize).min(max),
    }
}

fn memory_flush(path: &str, value: &Value) -> Result<MemoryFlushSettings, CompactionConfigError> {
    let mut m = MemoryFlushSettings::default();
    for (key, v) in as_table(path, value)? {
        let p = format!("{path}.{key}");
        match key.as_str() {
            "enabled" => m.enabled = boolean(&p, v)?,
            "softThresholdTokens" => m.soft_threshold_tokens = non_negative(&p, v)?,
            "forceFlushTranscriptBytes" => m.force_flush_transcript_bytes = non_negative(&p, v)?,
            "prompt" => m.prompt = Some(string(&p, v)?),
            "systemPrompt" => m.system_prompt = Some(string(&p, v)?),
            _ => {
                let allowed = [
                    "enabled",
                    "softThresholdTokens",
                    "forceFlushTranscriptBytes",
                    "prompt",
                    "systemPrompt",
                ];
                return Err(unknown(&p, allowed.iter()));
            }
        }
    }
    Ok(m)
}

fn quality_guard(path: &str, value: &Value) -> Result<QualityGuardSettings, CompactionConfigError> {
    let mut q = QualityGuardSettings::default();
    for (key, v) in as_table(path, value)? {
        let p = format!("{path}.{key}");
        match key.as_str() {
            "enabled" => q.enabled = boolean(&p, v)?,
            "maxRetries" => {
                let n = number(&p, v, "a number of retries (0 to 3)")?;
                q.max_retries = resolve_quality_guard_max_retries(Some(n));
            }
            _ => return Err(unknown(&p, ["enabled", "maxRetries"].iter())),
        }
    }
    Ok(q)
}

fn circuit_breaker(
    path: &str,
    value: &Value,
) -> Result<CircuitBreakerSettings, CompactionConfigError> {
    let mut c = CircuitBreakerSettings::default();
    for (key, v) in as_table(path, value)? {
        let p = format!("{path}.{key}");
        match key.as_str() {
            "failures" => c.failures = u32::try_from(positive(&p, v)?).unwrap_or(u32::MAX),
            "backoffSeconds" => c.backoff_seconds = non_negative(&p, v)?,
            "maxBackoffSeconds" => c.max_backoff_seconds = non_negative(&p, v)?,
            _ => {
                let allowed = ["failures", "backoffSeconds", "maxBackoffSeconds"];
                return Err(unknown(&p, allowed.iter()));
            }
        }
    }
    if c.max_backoff_seconds < c.backoff_seconds {
        return Err(CompactionConfigError::InvalidValue {
            path: format!("{path}.maxBackoffSeconds"),
            found: c.max_backoff_seconds.to_string(),
            expected: format!("at least backoffSeconds ({})", c.backoff_seconds),
        });
    }
    Ok(c)
}

fn retry(path: &str, value: &Value) -> Result<RetrySettings, CompactionConfigError> {
    let mut r = RetrySettings::default();
    for (key, v) in as_table(path, value)? {
        let p = format!("{path}.{key}");
        match key.as_str() {
            "attempts" => r.attempts = u32::try_from(positive(&p, v)?).unwrap_or(u32::MAX),
            "minDelayMs" => r.min_delay_ms = non_negative(&p, v)?,
            "maxDelayMs" => r.max_delay_ms = non_negative(&p, v)?,
            "jitter" => match v.as_f64() {
                Some(j) if (0.0..=1.0).contains(&j) => r.jitter = j,
                _ => return Err(invalid(&p, v, "a number from 0 to 1")),
            },
            _ => {
                let allowed = ["attempts", "minDelayMs", "maxDelayMs", "jitter"];
                return Err(unknown(&p, allowed.iter()));
            }
        }
    }
    Ok(r)
}

fn as_table<'a>(
    path: &str,
    value: &'a Value,
) -> Result<&'a Map<String, Value>, CompactionConfigError> {
    value
        .as_object()
        .ok_or_else(|| CompactionConfigError::NotATable {
            path: path.to_owned(),
            found: abbreviate(value),
        })
}

fn number(path: &str, value: &Value, expected: &str) -> Result<f64, CompactionConfigError> {
    value
        .as_f64()
        .filter(|v| v.is_finite())
        .ok_or_else(|| invalid(path, value, expected))
}

fn non_negative(path: &str, value: &Value) -> Result<u64, CompactionConfigError> {
    if let Some(v) = value.as_u64() {
        return Ok(v);
    }
    match value.as_f64() {
        Some(v) if v >= 0.0 && v.fract() == 0.0 && v < u64::MAX as f64 => Ok(v as u64),
        _ => Err(invalid(path, value, "a whole number, 0 or more")),
    }
}

fn positive(path: &str, value: &Value) -> Result<usize, CompactionConfigError> {
    match non_negative(path, value) {
        Ok(v) if v >= 1 => Ok(usize::try_from(v).unwrap_or(usize::MAX)),
        _ => Err(invalid(path, value, "a whole number, 1 or more")),
    }
}

fn string(path: &str, value: &Value) -> Result<String, CompactionConfigError> {
    value
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| invalid(path, value, "a string"))
}

fn boolean(path: &str, value: &Value) -> Result<bool, CompactionConfigError> {
    value
        .as_bool()
        .ok_or_else(|| invalid(path, value, "true or false"))
}

fn invalid(path: &str, value: &Value, expected: &str) -> CompactionConfigError {
    CompactionConfigError::InvalidValue {
        path: path.to_owned(),
        found: abbreviate(value),
        expected: expected.to_owned(),
    }
}

fn unknown<'a>(path: &str, allowed: impl Iterator<Item = &'a &'a str>) -> CompactionConfigError {
    CompactionConfigError::UnknownKey {
        path: path.to_owned(),
        allowed: allowed.copied().collect::<Vec<_>>().join(", "),
    }
}

/// The value as JSON, cut to a length an error line can hold.
fn abbreviate(value: &Value) -> String {
    const MAX: usize = 60;
    let text = value.to_string();
    if text.chars().count() <= MAX {
        text
    } else {
        let cut: String = text.chars().take(MAX).collect();
        format!("{cut}…")
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_are_the_effective_openclaw_values() {
        let s = CompactionSettings::from_value(&json!({})).unwrap();
        assert_eq!(s, CompactionSettings::default());
        assert_eq!(s.mode, CompactionMode::Safeguard);
        assert_eq!(s.effective_reserve_tokens(), 20_000);
        assert_eq!(s.effective_keep_recent_tokens(), 20_000);
        assert_eq!(s.max_history_share, 0.5);
        assert_eq!(s.recent_turns_preserve, 3);
        assert_eq!(s.identifier_policy, IdentifierPolicy::Strict);
        assert!(!s.quality_guard.enabled);
        assert_eq!(s.quality_guard.max_retries, 1);
        assert_eq!(s.timeout(), Duration::from_secs(180));
        assert_eq!(s.parts, 2);
        assert_eq!(s.max_concurrency, 8);
        assert_eq!(s.circuit_breaker.failures, 3);
        assert_eq!(s.quality_attempts(), 1);
    }

    #[test]
    fn the_reserve_scales_with_the_window_and_honours_what_is_configured() {
        let s = CompactionSettings::default();
        let cases = [
            (16_000, None, 4_096),
            (16_000, Some(8_192), 8_192),
            (32_000, None, 8_000),
            (32_000, Some(8_192), 8_192),
            (128_000, None, 20_000),
            (200_000, None, 20_000),
            (200_000, Some(32_000), 32_000),
            (1_000_000, None, 20_000),
        ];
        for (window, cap, want) in cases {
            assert_eq!(
                s.reserve_for(window, cap),
                want,
                "window {window}, cap {cap:?}"
            );
        }
        // Explicit settings are honoured.
        let explicit = CompactionSettings::from_value(
            &json!({"reserveTokens": 30_000, "reserveTokensFloor": 0}),
        )
        .unwrap();
        assert_eq!(explicit.reserve_for(200_000, Some(8_192)), 30_000);
        // However big, the precheck still keeps the prompt its minimum.
        let kept = crate::guards::precheck::precheck(&crate::guards::precheck::PrecheckInput {
            estimated_tokens: 0,
            context_window: 32_000,
            reserve_tokens: explicit.reserve_for(32_000, None),
            tool_result_reducible_chars: 0,
        });
        assert_eq!(kept.prompt_budget_before_reserve, 8_000);
        let floor = CompactionSettings::from_value(&json!({"reserveTokensFloor": 20_000})).unwrap();
        assert_eq!(
            floor.reserve_for(32_000, None),
            20_000,
            "OpenClaw's flat floor, if asked"
        );
    }

    #[test]
    fn prepare_at_defaults_to_four_fifths_and_can_be_turned_off() {
        let s = CompactionSettings::default();
        assert_eq!(s.prepare_at, Some(DEFAULT_PREPARE_AT));
        let set = CompactionSettings::from_value(&json!({"prepareAt": 0.9})).unwrap();
        assert_eq!(set.prepare_at, Some(0.9));
        let off = CompactionSettings::from_value(&json!({"prepareAt": false})).unwrap();
        assert_eq!(off.prepare_at, None);
        // The engine's copy, made by serialising, says the same.
        let again = CompactionSettings::from_value(&serde_json::to_value(&off).unwrap()).unwrap();
        assert_eq!(again.prepare_at, None);
        for bad in [json!(1.0), json!(0.05), json!(true), json!("soon")] {
            let e = CompactionSettings::from_value(&json!({ "prepareAt": bad })).unwrap_err();
            assert!(
                e.to_string()
                    .contains("agents.defaults.compaction.prepareAt"),
                "{e}"
            );
        }
    }

    #[test]
    fn the_compaction_target_leaves_room_to_grow_and_honours_target_share() {
        let s = CompactionSettings::default();
        let share = |budget| (s.target_share_for(budget) * 100.0).round() as u64;
        assert_eq!(share(20_000), 40, "32k: at most 60 % of the budget is room");
        assert_eq!(share(40_000), 70, "64k: 12,000 tokens of room");
        assert_eq!(share(90_000), 87, "128k");
        let set = CompactionSettings::from_value(&json!({"targetShare": 0.5})).unwrap();
        assert_eq!(set.target_share_for(90_000), 0.5);
        assert!(CompactionSettings::from_value(&json!({"targetShare": 0})).is_err());
    }

    #[test]
    fn reserve_floor_lifts_and_zero_disables() {
        let s = CompactionSettings::from_value(&json!({"reserveTokens": 5000})).unwrap();
        assert_eq!(s.effective_reserve_tokens(), 20_000);
        let s = CompactionSettings::from_value(
            &json!({"reserveTokens": 5000, "reserveTokensFloor": 0}),
        )
        .unwrap();
        assert_eq!(s.effective_reserve_tokens(), 5000);
        let s = CompactionSettings::from_value(&json!({"keepRecentTokens": 0})).unwrap();
        assert_eq!(s.effective_keep_recent_tokens(), 20_000);
    }

    #[test]
    fn recent_turns_preserve_resolves_like_openclaw() {
        // §13 group 9.
        assert_eq!(resolve_recent_turns_preserve(None), 3);
        assert_eq!(resolve_recent_turns_preserve(Some(-1.0)), 0);
        assert_eq!(resolve_recent_turns_preserve(Some(99.0)), 12);
        assert_eq!(resolve_quality_guard_max_retries(Some(7.0)), 3);
        let s = CompactionSettings::from_value(&json!({"recentTurnsPreserve": 99})).unwrap();
        assert_eq!(s.recent_turns_preserve, 12);
    }

    #[test]
    fn errors_name_the_key_and_what_is_allowed() {
        let e = CompactionSettings::from_value(&json!({"maxHistoryShare": 0.95})).unwrap_err();
        assert_eq!(
            e.to_string(),
            "agents.defaults.compaction.maxHistoryShare: 0.95 is not allowed; expected a number from 0.1 to 0.9"
        );
        let e = CompactionSettings::from_value(&json!({"reserveTokenz": 1})).unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with("agents.defaults.compaction.reserveTokenz: unknown key"));
        assert!(text.contains("reserveTokens"));
        let e = CompactionSettings::from_value(&json!({"qualityGuard": {"enabled": "yes"}}))
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("agents.defaults.compaction.qualityGuard.enabled:")
        );
        let e = CompactionSettings::from_value(&json!({"mode": "aggressive"})).unwrap_err();
        assert!(e.to_string().contains("\"safeguard\" or \"default\""));
        let e = CompactionSettings::from_value(&json!(3)).unwrap_err();
        assert!(matches!(e, CompactionConfigError::NotATable { .. }));
        let e = CompactionSettings::from_value(&json!({"parts": 0})).unwrap_err();
        assert!(e.to_string().contains("1 or more"));
    }

    #[test]
    fn openclaw_keys_we_do_not_implement_are_accepted() {
        let v = json!({
            "memoryFlush": {"enabled": true},
            "postCompactionSections": ["Session Startup"],
            "provider": "x",
            "notifyUser": true,
            "truncateAfterCompaction": false,
            "postIndexSync": "async",
        });
        let s = CompactionSettings::from_value(&v).unwrap();
        assert_eq!(s.ignored.len(), 5);
        assert!(s.memory_flush.enabled);
        // They survive a round trip, so a rewritten config keeps them.
        let back: CompactionSettings =
            serde_json::from_value(serde_json::to_value(&s).unwrap()).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn full_round_trip_and_serde_errors() {
        let v = json!({
            "mode": "default", "reserveTokens": 30000, "keepRecentTokens": 10000,
            "maxHistoryShare": 0.3, "customInstructions": "focus", "identifierPolicy": "custom",
            "identifierInstructions": "keep ids", "qualityGuard": {"enabled": true, "maxRetries": 2},
            "model": "openai/gpt-4o-mini", "timeoutSeconds": 60.7, "parts": 4, "maxConcurrency": 2,
            "circuitBreaker": {"failures": 2, "backoffSeconds": 10, "maxBackoffSeconds": 40},
            "retry": {"attempts": 2, "minDelayMs": 0, "maxDelayMs": 0, "jitter": 0},
            "extractiveFallback": false
        });
        let s = CompactionSettings::from_value(&v).unwrap();
        assert_eq!(s.timeout_seconds, 60);
        assert_eq!(s.effective_recent_turns_preserve(), 0);
        assert_eq!(s.quality_attempts(), 1, "no quality guard in default mode");
        let back: CompactionSettings =
            serde_json::from_value(serde_json::to_value(&s).unwrap()).unwrap();
        assert_eq!(back, s);
        let err = serde_json::from_value::<CompactionSettings>(json!({"parts": "two"}))
            .unwrap_err()
            .to_string();
        assert!(err.contains("agents.defaults.compaction.parts"));
    }

    #[test]
    fn breaker_backs_off_exponentially_up_to_the_cap() {
        let c = CircuitBreakerSettings::default();
        assert_eq!(c.backoff_after(2), None);
        assert_eq!(c.backoff_after(3), Some(Duration::from_secs(300)));
        assert_eq!(c.backoff_after(4), Some(Duration::from_secs(600)));
        assert_eq!(c.backoff_after(40), Some(Duration::from_secs(1800)));
        let r = RetrySettings::default();
        assert_eq!(r.delay(1, 0.0), Duration::from_millis(500));
        assert_eq!(r.delay(2, 0.0), Duration::from_millis(1000));
        assert_eq!(r.delay(9, 0.0), Duration::from_millis(5000));
        assert_eq!(r.delay(1, 1.0), Duration::from_millis(600));
    }
}
