//! Context pruning, layer 4 of the defence (reference §9): old tool results are trimmed or
//! cleared in the request, never in the transcript.
//!
//! Why a layer of its own: tool output is most of a long agent context, and most of it is only
//! useful for a few turns. Compaction rewrites history with a model call; pruning is free,
//! reversible (the session keeps every byte) and runs before the context is full, so
//! compaction happens less often.
//!
//! How a caller uses it, per request:
//! 1. configuration: [`effective`] turns `agents.defaults.contextPruning` into
//!    [`EffectiveSettings`] (`None` when pruning is off), with errors that name the key;
//! 2. the TTL gate: [`gate`] with the last cache touch ([`last_cache_touch`] restores it from
//!    the session) says whether the provider's prompt cache has expired;
//! 3. [`prune_context_messages_with`] with a [`PruneMemo`] kept across turns prunes the list;
//!    when its report says something changed, the caller records a new [`CacheTouch`] at now.
//!
//! ```
//! use rampart_context::pruning::{self, CacheTouch, PruneMemo, PruneOptions};
//! use rampart_message::MessageList;
//! use rampart_engine_api::AgentMessage;
//!
//! // No reply to protect in this tiny history, so nothing is kept back.
//! let config = serde_json::json!({"mode": "cache-ttl", "ttl": "1h", "keepLastAssistants": 0});
//! let settings = pruning::effective(&config)?.expect("cache-ttl turns pruning on");
//! let memo = PruneMemo::new(); // kept by the engine, one per session
//!
//! let history: MessageList = vec![
//!     AgentMessage::user_text("build it", 1),
//!     AgentMessage::tool_result("call_1", "exec", "x".repeat(300_000), false, 2),
//! ]
//! .into();
//! let (now, last_touch) = (10_000_000, Some(CacheTouch::new(1_000)));
//! if pruning::gate(now, last_touch.as_ref(), settings.ttl_ms) {
//!     let (pruned, report) = pruning::prune_context_messages_with(
//!         &history, 32_000, &settings, PruneOptions::default(), Some(&memo),
//!     );
//!     assert_eq!(pruned.len(), history.len());
//!     assert_eq!(report.soft_trimmed, 1);
//!     // report.changed(): record CacheTouch::new(now) in the session.
//! }
//! # Ok::<(), pruning::PruningConfigError>(())
//! ```
//!
//! Modules, one concern each: `settings` (configuration and defaults), `duration` (TTL
//! strings), `tools` (allow/deny globs), `estimate` (message sizes), `trim` (the two rewrites),
//! `prune` (the algorithm and its report), `memo` (counting once), `ttl` (the gate).
//!
//! Nothing here depends on the provider: OpenClaw installed pruning only for cache-TTL
//! eligible providers (Anthropic first; issue #95840), but the gate and the arithmetic are the
//! same for any model, and a caller decides when to call.
#![warn(missing_docs)]

mod duration;
mod estimate;
mod facts;
mod memo;
mod prune;
mod settings;
#[cfg(test)]
mod test_support;
mod tools;
mod trim;
mod ttl;

pub use estimate::{CHARS_PER_TOKEN, IMAGE_CHARS, OTHER_ROLE_CHARS, estimate_message_chars};
pub use memo::PruneMemo;
pub use prune::{
    PruneAction, PruneOptions, PrunedMessage, PruningReport, SkipReason, prune_context_messages,
    prune_context_messages_with,
};
pub use settings::{
    CONFIG_PATH, DEFAULT_HARD_CLEAR_PLACEHOLDER, DEFAULT_HARD_CLEAR_RATIO,
    DEFAULT_KEEP_LAST_ASSISTANTS, DEFAULT_MIN_PRUNABLE_TOOL_CHARS, DEFAULT_SOFT_TRIM_HEAD_CHARS,
    DEFAULT_SOFT_TRIM_MAX_CHARS, DEFAULT_SOFT_TRIM_RATIO, DEFAULT_SOFT_TRIM_TAIL_CHARS,
    DEFAULT_TTL_MS, EffectiveSettings, HardClear, HardClearSettings, PruningConfigError,
    PruningMode, PruningSettings, SoftTrim, SoftTrimSettings, ToolPatterns, effective,
};
pub use tools::{BadPattern, ToolFilter};
pub use trim::{PRUNED_IMAGE_MARKER, format_trim_notice};
pub use ttl::{
    CACHE_TTL_CUSTOM_TYPE, CacheTouch, gate, last_cache_touch, last_cache_touch_in_messages,
};
