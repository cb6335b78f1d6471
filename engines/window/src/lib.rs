//! `window`: a sliding-window context engine, written as an outsider would, against
//! `rampart-engine-api` alone.
//!
//! `assemble` keeps the newest messages whose tokens fit the budget: the smaller of
//! `keepRecentTokens` (config, default 20,000) and the host's token budget. It never separates a
//! tool call from its results (it selects whole units from
//! [`rampart_engine_api::pairing::tool_units`]) and it changes nothing in the session: `ingest`
//! stores nothing and `compact` never compacts. When even the newest unit is larger than the
//! budget, that unit is sent alone: an empty request helps nobody, and the host's guards deal
//! with an oversized one.
//!
//! Tokens are counted by the `tokenizer` config key: `estimate` (the default) estimates here, with
//! the engine API's estimate; `o200k_base`, `cl100k_base` or `host` ask the host for exact counts
//! (`tokens.count`, `host` meaning the chat model's own tokenizer), so this library carries no
//! vocabulary. A host that cannot count answers `unsupported`, and the engine then estimates and
//! says so once in the log. Each message's figure is remembered by its shared allocation, so an
//! unchanged history is not counted again on the next turn.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use rampart_engine_api::pairing::tool_units;
use rampart_engine_api::protocol::{
    AssembleParams, AssembleResult, CompactParams, CompactResult, EngineInfo, IngestParams,
    IngestResult, ProtocolInfo,
};
use rampart_engine_api::serde_json;
use rampart_engine_api::tokens::{TokenCountRequest, estimate_message_tokens};
use rampart_engine_api::{
    AgentMessage, CallContext, ContextEngine, EngineError, EngineFactory, EngineInit, Host,
    LogLevel, SharedMessage,
};

/// The engine's id in `plugins.toml`.
pub const WINDOW_ID: &str = "window";

/// Default of the `keepRecentTokens` config key.
pub const DEFAULT_KEEP_RECENT_TOKENS: u64 = 20_000;

/// The values the `tokenizer` key accepts, for the error message.
const TOKENIZERS: &str = "\"estimate\", \"host\", \"o200k_base\" or \"cl100k_base\"";

/// How messages are counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tokenizer {
    /// The engine API's estimate, computed here.
    Estimate,
    /// Exact counts from the host, with the named tokenizer (empty: the chat model's own).
    Host(String),
}

/// How often the memo was consulted, for tests and diagnostics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoStats {
    /// Messages that had to be counted.
    pub misses: u64,
    /// Messages whose figure was remembered.
    pub hits: u64,
}

/// Remembers each shared message's figure by its allocation. The `Weak` keeps the address from
/// being reused by another message while the entry lives; dead entries are swept when the map
/// has doubled since the last sweep.
#[derive(Debug, Default)]
struct Memo {
    entries: Mutex<HashMap<usize, (Weak<AgentMessage>, u64)>>,
    swept_at: AtomicU64,
    misses: AtomicU64,
    hits: AtomicU64,
}

impl Memo {
    fn get(&self, message: &SharedMessage) -> Option<u64> {
        let entries = self.entries.lock().ok()?;
        let (weak, tokens) = entries.get(&(Arc::as_ptr(message) as usize))?;
        weak.upgrade()
            .filter(|alive| Arc::ptr_eq(alive, message))
            .map(|_| *tokens)
    }

    fn put(&self, message: &SharedMessage, tokens: u64) {
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        entries.insert(
            Arc::as_ptr(message) as usize,
            (Arc::downgrade(message), tokens),
        );
        let swept_at = self.swept_at.load(Ordering::Relaxed);
        if entries.len() as u64 > 2 * swept_at.max(1024) {
            entries.retain(|_, (weak, _)| weak.strong_count() > 0);
            self.swept_at.store(entries.len() as u64, Ordering::Relaxed);
        }
    }
}

/// The sliding-window engine.
#[derive(Debug, Clone)]
pub struct WindowEngine {
    keep_recent_tokens: u64,
    tokenizer: Tokenizer,
    host: Option<Host>,
    memo: Arc<Memo>,
    /// Set once the host refused to count, so the fallback is logged once and not retried.
    host_cannot_count: Arc<AtomicBool>,
}

impl WindowEngine {
    /// An engine keeping at most `keep_recent_tokens` tokens of recent history, as estimated.
    pub fn new(keep_recent_tokens: u64) -> Self {
        Self {
            keep_recent_tokens,
            tokenizer: Tokenizer::Estimate,
            host: None,
            memo: Arc::default(),
            host_cannot_count: Arc::default(),
        }
    }

    /// Reads `keepRecentTokens` and `tokenizer` from the engine's config table. Anything but a
    /// positive integer for the first, or one of the tokenizers above for the second, is
    /// refused with a message naming the key.
    pub fn from_config(config: &serde_json::Value) -> Result<Self, EngineError> {
        let invalid = |message: String| {
            EngineError::new(rampart_engine_api::ErrorKind::InvalidParams, message)
        };
        let keep_recent_tokens = match config.get("keepRecentTokens") {
            None => DEFAULT_KEEP_RECENT_TOKENS,
            Some(v) => match v.as_u64() {
                Some(n) if n > 0 => n,
                _ => {
                    return Err(invalid(format!(
                        "plugins.engines.window.config.keepRecentTokens must be a positive \
                         integer, found {v}"
                    )));
                }
            },
        };
        let tokenizer = match config.get("tokenizer") {
            None => Tokenizer::Estimate,
            Some(v) => match v.as_str() {
                Some("estimate") => Tokenizer::Estimate,
                Some("host") => Tokenizer::Host(String::new()),
                Some(name @ ("o200k_base" | "cl100k_base")) => Tokenizer::Host(name.to_string()),
                _ => {
                    return Err(invalid(format!(
                        "plugins.engines.window.config.tokenizer must be {TOKENIZERS}, found {v}"
                    )));
                }
            },
        };
        Ok(Self {
            tokenizer,
            ..Self::new(keep_recent_tokens)
        })
    }

    /// The same engine, asking `host` for the counts its tokenizer needs.
    pub fn with_host(mut self, host: Host) -> Self {
        self.host = Some(host);
        self
    }

    /// The budget in effect.
    pub fn keep_recent_tokens(&self) -> u64 {
        self.keep_recent_tokens
    }

    /// How messages are counted.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// How often remembered figures were used.
    pub fn memo_stats(&self) -> MemoStats {
        MemoStats {
            misses: self.memo.misses.load(Ordering::Relaxed),
            hits: self.memo.hits.load(Ordering::Relaxed),
        }
    }

    /// The tokens of each message of `unit`, from the memo or counted now (all misses of the
    /// unit in one host call).
    fn count_unit(&self, unit: &[SharedMessage]) -> u64 {
        let mut total = 0u64;
        let mut missing = Vec::new();
        for message in unit {
            match self.memo.get(message) {
                Some(tokens) => {
                    self.memo.hits.fetch_add(1, Ordering::Relaxed);
                    total += tokens;
                }
                None => missing.push(message),
            }
        }
        if missing.is_empty() {
            return total;
        }
        self.memo
            .misses
            .fetch_add(missing.len() as u64, Ordering::Relaxed);
        let counts = self
            .host_counts(&missing)
            .unwrap_or_else(|| missing.iter().map(|m| estimate_message_tokens(m)).collect());
        for (message, tokens) in missing.iter().zip(counts) {
            self.memo.put(message, tokens);
            total += tokens;
        }
        total
    }

    /// Exact counts from the host, or `None` to estimate (estimate mode, no host, or a host
    /// that cannot count: the last is logged once).
    fn host_counts(&self, messages: &[&SharedMessage]) -> Option<Vec<u64>> {
        let Tokenizer::Host(tokenizer) = &self.tokenizer else {
            return None;
        };
        let host = self.host.as_ref()?;
        if self.host_cannot_count.load(Ordering::Relaxed) {
            return None;
        }
        let request = TokenCountRequest {
            tokenizer: tokenizer.clone(),
            messages: messages.iter().map(|m| (***m).clone()).collect(),
        };
        match host.count_tokens(&request) {
            Ok(answer) if answer.counts.len() == messages.len() => Some(answer.counts),
            outcome => {
                self.host_cannot_count.store(true, Ordering::Relaxed);
                let why = match outcome {
                    Err(e) => e.to_string(),
                    Ok(a) => format!("{} counts for {} messages", a.counts.len(), messages.len()),
                };
                host.log(
                    LogLevel::Warn,
                    "rampart_window",
                    &format!("the host cannot count tokens ({why}); estimating instead"),
                    &serde_json::Value::Null,
                );
                None
            }
        }
    }
}

impl EngineFactory for WindowEngine {
    fn create(init: EngineInit, host: Host) -> Result<Self, EngineError> {
        Ok(Self::from_config(&init.config)?.with_host(host))
    }
}

impl ContextEngine for WindowEngine {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            id: WINDOW_ID.to_string(),
            name: "Sliding Window".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            owns_compaction: false,
            protocol: ProtocolInfo::default(),
        }
    }

    fn ingest(&self, _cx: &CallContext<'_>, _p: IngestParams) -> Result<IngestResult, EngineError> {
        Ok(IngestResult {
            ingested: false,
            replacement: None,
        })
    }

    fn assemble(
        &self,
        _cx: &CallContext<'_>,
        p: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        let budget = match p.token_budget {
            Some(b) => b.min(self.keep_recent_tokens),
            None => self.keep_recent_tokens,
        };
        let units = tool_units(&p.messages);
        let mut used = 0u64;
        let mut first_kept = p.messages.len();
        for unit in units.iter().rev() {
            let cost = self.count_unit(&p.messages[unit.clone()]);
            let is_newest = unit.end == p.messages.len();
            if used + cost > budget && !is_newest {
                break;
            }
            used += cost;
            first_kept = unit.start;
            if used >= budget {
                break;
            }
        }
        let kept = p.messages[first_kept..].to_vec().into();
        Ok(AssembleResult {
            messages: kept,
            estimated_tokens: used,
            system_prompt_addition: None,
        })
    }

    fn compact(
        &self,
        _cx: &CallContext<'_>,
        _p: CompactParams,
    ) -> Result<CompactResult, EngineError> {
        Ok(CompactResult {
            ok: true,
            compacted: false,
            reason: Some("the window engine never compacts; it selects recent messages".into()),
            result: None,
        })
    }
}

rampart_engine_api::export_engine!(WindowEngine);

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "lib_tests.rs"]
mod tests;
