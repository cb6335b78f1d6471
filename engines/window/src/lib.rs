//! `window`: a sliding-window context engine, written as an outsider would, against
//! `rampart-engine-api` alone.
//!
//! `assemble` keeps the newest messages whose tokens fit the budget: the smaller of
//! `keepRecentTokens` (config, default 20,000) and the host's token budget. Tokens are counted
//! with the shared [`TokenCounter`], in the mode the `tokenizer` config key names (`estimate`,
//! the default, or `o200k_base` / `cl100k_base` for exact counts); the counter remembers each
//! message's figure, so an unchanged history is not recounted on the next turn. It never separates a
//! tool call from its results (it selects whole units from
//! [`rampart_engine_api::pairing::tool_units`]) and it changes nothing in the session: `ingest`
//! stores nothing and `compact` never compacts. When even the newest unit is larger than the
//! budget, that unit is sent alone: an empty request helps nobody, and the host's guards deal
//! with an oversized one.

use rampart_engine_api::pairing::tool_units;
use rampart_engine_api::protocol::{
    AssembleParams, AssembleResult, CompactParams, CompactResult, EngineInfo, IngestParams,
    IngestResult, ProtocolInfo,
};
use rampart_engine_api::serde_json;
use rampart_engine_api::tokens::{CountMode, TokenCounter};
use rampart_engine_api::{
    CallContext, ContextEngine, EngineError, EngineFactory, EngineInit, Host,
};

/// The engine's id in `plugins.toml`.
pub const WINDOW_ID: &str = "window";

/// Default of the `keepRecentTokens` config key.
pub const DEFAULT_KEEP_RECENT_TOKENS: u64 = 20_000;

/// The sliding-window engine.
#[derive(Debug, Clone)]
pub struct WindowEngine {
    keep_recent_tokens: u64,
    counter: TokenCounter,
}

impl WindowEngine {
    /// An engine keeping at most `keep_recent_tokens` tokens of recent history, as estimated.
    pub fn new(keep_recent_tokens: u64) -> Self {
        Self::with_counter(keep_recent_tokens, TokenCounter::estimate())
    }

    /// An engine counting with `counter` (and sharing its memo with whoever else holds it).
    pub fn with_counter(keep_recent_tokens: u64, counter: TokenCounter) -> Self {
        Self {
            keep_recent_tokens,
            counter,
        }
    }

    /// Reads `keepRecentTokens` and `tokenizer` from the engine's config table. Anything but a
    /// positive integer for the first, or one of `estimate`, `o200k_base`, `cl100k_base` for
    /// the second, is refused with a message naming the key.
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
        let mode = match config.get("tokenizer") {
            None => CountMode::Estimate,
            Some(v) => match v.as_str().map(str::parse::<CountMode>) {
                Some(Ok(mode @ (CountMode::Estimate | CountMode::Exact(_)))) => mode,
                _ => {
                    return Err(invalid(format!(
                        "plugins.engines.window.config.tokenizer must be \"estimate\", \
                         \"o200k_base\" or \"cl100k_base\", found {v}"
                    )));
                }
            },
        };
        Ok(Self::with_counter(
            keep_recent_tokens,
            TokenCounter::new(mode),
        ))
    }

    /// The budget in effect.
    pub fn keep_recent_tokens(&self) -> u64 {
        self.keep_recent_tokens
    }

    /// The counter the engine measures messages with.
    pub fn counter(&self) -> &TokenCounter {
        &self.counter
    }
}

impl EngineFactory for WindowEngine {
    fn create(init: EngineInit, _host: Host) -> Result<Self, EngineError> {
        Self::from_config(&init.config)
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
            let cost = self.counter.count_total(&p.messages[unit.clone()]);
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
mod tests {
    use super::*;
    use rampart_engine_api::AgentMessage;
    use rampart_engine_api::engine::NeverCancelled;
    use std::sync::Arc;

    struct NullHost;
    impl rampart_engine_api::HostApi for NullHost {
        fn log(&self, _: rampart_engine_api::LogLevel, _: &str, _: &str, _: &str) {}
        fn call(&self, m: &str, _: &str) -> Result<String, EngineError> {
            Err(EngineError::unsupported(m))
        }
    }

    fn assistant_call(id: &str) -> AgentMessage {
        serde_json::from_value(serde_json::json!({
            "role": "assistant",
            "content": [{"type": "toolCall", "id": id, "name": "read", "arguments": {}}],
            "api": "x", "provider": "x", "model": "x",
            "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                      "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
            "stopReason": "toolUse", "timestamp": 0
        }))
        .unwrap()
    }

    fn assemble(engine: &WindowEngine, messages: Vec<AgentMessage>) -> Vec<AgentMessage> {
        assemble_full(engine, messages).0
    }

    fn assemble_full(
        engine: &WindowEngine,
        messages: Vec<AgentMessage>,
    ) -> (Vec<AgentMessage>, u64) {
        let host = Host::new(Arc::new(NullHost));
        let cx = CallContext::new(&host, &NeverCancelled, None);
        let messages = messages.into_iter().map(Arc::new).collect();
        let params = AssembleParams {
            messages,
            ..Default::default()
        };
        let out = engine.assemble(&cx, params).unwrap();
        let kept = out.messages.iter().map(|m| (**m).clone()).collect();
        (kept, out.estimated_tokens)
    }

    #[test]
    fn keeps_newest_messages_within_budget() {
        let msgs: Vec<_> = (0..10)
            .map(|i| AgentMessage::user_text(format!("{i}").repeat(40), 0))
            .collect();
        // Each message is 10 tokens; a budget of 35 keeps the newest 3.
        let (out, tokens) = assemble_full(&WindowEngine::new(35), msgs.clone());
        assert_eq!(out, msgs[7..].to_vec());
        assert_eq!(tokens, 30);
    }

    #[test]
    fn never_separates_a_tool_call_from_its_result() {
        let msgs = vec![
            AgentMessage::user_text("u".repeat(40), 0),
            assistant_call("c1"),
            AgentMessage::tool_result("c1", "read", "r".repeat(40), false, 0),
            AgentMessage::user_text("v".repeat(40), 0),
        ];
        // The result alone would fit a budget of 21 with the last user message; its call must
        // come too, and together they do not fit, so only the last message is kept.
        let out = assemble(&WindowEngine::new(21), msgs.clone());
        assert_eq!(out, msgs[3..].to_vec());
        let out = assemble(&WindowEngine::new(100), msgs.clone());
        assert_eq!(out, msgs);
    }

    #[test]
    fn oversized_newest_unit_is_sent_alone() {
        let msgs = vec![
            AgentMessage::user_text("a", 0),
            AgentMessage::user_text("b".repeat(400), 0),
        ];
        let out = assemble(&WindowEngine::new(10), msgs.clone());
        assert_eq!(out, msgs[1..].to_vec());
    }

    #[test]
    fn tokenizer_config_selects_the_counter() {
        let mode = |config| WindowEngine::from_config(&config).unwrap().counter().mode();
        assert_eq!(mode(serde_json::json!({})), CountMode::Estimate);
        assert_eq!(
            mode(serde_json::json!({"tokenizer": "estimate"})),
            CountMode::Estimate
        );
        assert_eq!(
            mode(serde_json::json!({"tokenizer": "o200k_base"})),
            CountMode::Exact(rampart_engine_api::tokens::Encoding::O200kBase)
        );
        assert_eq!(
            mode(serde_json::json!({"tokenizer": "cl100k_base"})),
            CountMode::Exact(rampart_engine_api::tokens::Encoding::Cl100kBase)
        );
        for bad in [
            serde_json::json!({"tokenizer": "gpt2"}),
            serde_json::json!({"tokenizer": "calibrated"}),
            serde_json::json!({"tokenizer": 4}),
        ] {
            let err = WindowEngine::from_config(&bad).unwrap_err();
            assert!(err.message.contains("tokenizer"), "{err}");
            assert!(err.message.contains("o200k_base"), "{err}");
        }
    }

    #[test]
    fn exact_counts_decide_what_fits() {
        // 40 CJK characters: 40 estimated tokens (each weighs 4 chars), fewer exact ones.
        let cjk = "上下文窗口是有限资源".repeat(4);
        let msgs = vec![
            AgentMessage::user_text(cjk.clone(), 0),
            AgentMessage::user_text(cjk, 0),
        ];
        let estimate = WindowEngine::new(60);
        let (out, tokens) = assemble_full(&estimate, msgs.clone());
        assert_eq!((out.len(), tokens), (1, 40));
        let exact = WindowEngine::from_config(&serde_json::json!({
            "keepRecentTokens": 60, "tokenizer": "o200k_base"
        }))
        .unwrap();
        if exact.counter().is_exact() {
            let (out, tokens) = assemble_full(&exact, msgs);
            assert_eq!(out.len(), 2);
            assert_eq!(
                tokens,
                2 * exact
                    .counter()
                    .count_text(&"上下文窗口是有限资源".repeat(4))
            );
        }
    }

    #[test]
    fn a_repeated_history_is_counted_once() {
        let engine = WindowEngine::new(1_000);
        let host = Host::new(Arc::new(NullHost));
        let cx = CallContext::new(&host, &NeverCancelled, None);
        let messages: rampart_engine_api::MessageList = (0..10)
            .map(|i| Arc::new(AgentMessage::user_text(format!("message {i}"), 0)))
            .collect::<Vec<_>>()
            .into();
        for _ in 0..3 {
            let params = AssembleParams {
                messages: messages.clone(),
                ..Default::default()
            };
            engine.assemble(&cx, params).unwrap();
        }
        let stats = engine.counter().memo_stats();
        assert_eq!((stats.misses, stats.hits), (10, 20));
    }

    #[test]
    fn bad_config_names_the_key() {
        let err = WindowEngine::from_config(&serde_json::json!({"keepRecentTokens": "lots"}))
            .unwrap_err();
        assert!(err.message.contains("keepRecentTokens"), "{err}");
        assert_eq!(
            WindowEngine::from_config(&serde_json::json!({}))
                .unwrap()
                .keep_recent_tokens(),
            20_000
        );
    }
}
