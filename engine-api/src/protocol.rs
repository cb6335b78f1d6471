//! The engine protocol: the handshake and the parameters and results of every method.
//!
//! Everything here travels as JSON across the frozen ABI (see [`crate::ffi`]). The rules that keep
//! 1.x hosts and engines compatible:
//! - every struct is `#[serde(default)]`: a field added later is simply absent in older peers;
//! - unknown fields are ignored, never rejected;
//! - an unknown method answers [`crate::ErrorKind::Unsupported`] and the caller uses its default;
//! - the handshake ([`ProtocolInfo`]) carries a version and a feature list in which unknown
//!   features are tolerated, after nushell's `ProtocolInfo`.

use serde::{Deserialize, Serialize};

use crate::wire::{MessageList, SharedMessage};

/// The protocol name both sides put in their handshake.
pub const PROTOCOL_NAME: &str = "rampart-engine";

/// Method names of the engine protocol, as carried by `call(method, json)`: each name is
/// spelled here, once, and [`crate::method::Method`] is built from these.
pub mod method {
    /// One-time set-up for a session whose file already existed.
    pub const BOOTSTRAP: &str = "bootstrap";
    /// One message arrives; the engine may replace it (the tool-result cap lives here).
    pub const INGEST: &str = "ingest";
    /// Several messages arrive at once (after a turn).
    pub const INGEST_BATCH: &str = "ingest_batch";
    /// Build the messages of the next model request within a token budget.
    pub const ASSEMBLE: &str = "assemble";
    /// Reduce the session (summarise) because it overflowed or was asked to.
    pub const COMPACT: &str = "compact";
    /// Housekeeping after a turn, a bootstrap or a compaction.
    pub const MAINTAIN: &str = "maintain";
    /// The turn finished; the engine sees everything that happened in it.
    pub const AFTER_TURN: &str = "after_turn";
    /// A child agent is about to be spawned from this session.
    pub const PREPARE_SUBAGENT_SPAWN: &str = "prepare_subagent_spawn";
    /// A child agent ended.
    pub const ON_SUBAGENT_ENDED: &str = "on_subagent_ended";
    /// The engine is being retired; release resources.
    pub const DISPOSE: &str = "dispose";
    /// A memory engine: find passages in long-term memory (the `memory_search` tool).
    pub const MEMORY_SEARCH: &str = "memory.search";
    /// A memory engine: read lines of a memory file (the `memory_get` tool).
    pub const MEMORY_GET: &str = "memory.get";
    /// A memory engine: bring its index up to date with the memory files.
    pub const MEMORY_SYNC: &str = "memory.sync";
    /// A memory engine: what it holds and how it searches.
    pub const MEMORY_STATUS: &str = "memory.status";
    /// Engine tools (1.2): the tools the engine offers the model in a session.
    pub const TOOLS_LIST: &str = "tools.list";
    /// Engine tools (1.2): answer one call the model made of an engine tool.
    pub const TOOLS_CALL: &str = "tools.call";

    /// Every method, in the order of OpenClaw's interface (1.0), then the memory methods (1.1),
    /// then the engine tools (1.2).
    pub const ALL: &[&str] = &[
        BOOTSTRAP,
        INGEST,
        INGEST_BATCH,
        ASSEMBLE,
        COMPACT,
        MAINTAIN,
        AFTER_TURN,
        PREPARE_SUBAGENT_SPAWN,
        ON_SUBAGENT_ENDED,
        DISPOSE,
        MEMORY_SEARCH,
        MEMORY_GET,
        MEMORY_SYNC,
        MEMORY_STATUS,
        TOOLS_LIST,
        TOOLS_CALL,
    ];
}

/// One side's statement of what it speaks. Exchanged in both directions at construction: the host
/// sends its own in [`crate::EngineInit`], the engine answers with its own in [`EngineInfo`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ProtocolInfo {
    /// Always [`PROTOCOL_NAME`]; anything else is not a Rampart peer.
    pub protocol: String,
    /// The engine-api version this side was built against (semver).
    pub version: String,
    /// Optional capabilities. Unknown ones deserialize as [`Feature::Unknown`] and are ignored,
    /// so a newer peer can announce features an older one has never heard of.
    pub features: Vec<Feature>,
}

impl Default for ProtocolInfo {
    fn default() -> Self {
        Self {
            protocol: PROTOCOL_NAME.to_string(),
            version: crate::API_VERSION.to_string(),
            features: Vec::new(),
        }
    }
}

impl ProtocolInfo {
    /// Two sides can talk when they speak the same protocol and the same major version (the
    /// lower version is semver-compatible with the higher one).
    pub fn is_compatible_with(&self, other: &ProtocolInfo) -> Result<(), String> {
        if self.protocol != other.protocol {
            return Err(format!(
                "protocol `{}` is not `{}`",
                other.protocol, self.protocol
            ));
        }
        let mine = major_of(&self.version)
            .ok_or_else(|| format!("version `{}` is not semver", self.version))?;
        let theirs = major_of(&other.version)
            .ok_or_else(|| format!("version `{}` is not semver", other.version))?;
        if mine != theirs {
            return Err(format!(
                "API {} and API {} are different majors",
                self.version, other.version
            ));
        }
        Ok(())
    }

    /// True when the peer announced `feature`.
    pub fn supports(&self, feature: &Feature) -> bool {
        self.features.iter().any(|f| f == feature)
    }
}

/// The major number of a semver string, if it has one.
pub fn major_of(version: &str) -> Option<u32> {
    version.trim().split('.').next()?.parse().ok()
}

/// An optional capability announced in a handshake.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "camelCase")]
pub enum Feature {
    /// The engine forwards its `tracing` events to the host's `log` service.
    TracingBridge,
    /// The engine catches panics at every entry point and reports them as errors.
    PanicGuard,
    /// The engine understands interned message lists (see [`crate::wire`]). The SDK announces
    /// it for every engine exported with `export_engine!`.
    MessageRefs,
    /// The engine is a memory engine, for `plugins.slots.memory` (see [`crate::memory`]).
    /// Announced as a feature, not a new field of [`EngineInfo`], so that engines that build
    /// their info with a struct literal keep compiling against 1.1.
    MemoryEngine,
    /// The engine offers the model tools of its own (API 1.2, see [`crate::tools`]): the host
    /// asks `tools.list` and answers the model's calls of them through `tools.call`. A host
    /// never calls either method on an engine that does not announce this.
    EngineTools,
    /// A feature this build does not know; kept so a handshake never fails on novelty.
    #[serde(other)]
    Unknown,
}

/// What an engine says about itself. The host checks it right after construction: `id` must be
/// the id the configuration used, and the protocol must be compatible.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct EngineInfo {
    /// The id users put in `plugins.slots.contextEngine`.
    pub id: String,
    /// A human-readable name for listings.
    pub name: String,
    /// The engine's own version (not the API version).
    pub version: String,
    /// True when the engine runs compaction itself; the host then never compacts behind its back.
    pub owns_compaction: bool,
    /// The engine's side of the handshake.
    pub protocol: ProtocolInfo,
}

/// Which slot an engine fills: `plugins.slots.contextEngine` or `plugins.slots.memory`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub enum EngineKind {
    /// A context engine (ingest, assemble, compact…).
    #[default]
    Context,
    /// A memory engine (`memory.search`, `memory.get`, `memory.sync`, `memory.status`).
    Memory,
}

impl EngineInfo {
    /// The slot this engine is for: a memory engine announces [`Feature::MemoryEngine`];
    /// every other engine (all of API 1.0) is a context engine.
    pub fn kind(&self) -> EngineKind {
        if self.protocol.supports(&Feature::MemoryEngine) {
            EngineKind::Memory
        } else {
            EngineKind::Context
        }
    }
}

/// Which session a call is about. Flattened into every per-session parameter struct.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct SessionRef {
    /// The session's id (the header id of its file).
    pub session_id: String,
    /// The registry key the user addresses the session by, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_key: Option<String>,
    /// The session file on disk, when the session is persisted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_file: Option<String>,
    /// The session this one replaced when the user started over under the same key (`rampart
    /// run --new`, OpenClaw's `/new`). Why: starting over clears the transcript, but an engine
    /// that keeps state of its own may carry part of it over (the lossless engine keeps the
    /// deep summaries of the old session, `newSessionRetainDepth`). Sent on every call of such
    /// a session, so an engine that meets it first on any call, or rebuilds, still knows.
    /// Engine API 1.3, additive: older hosts never send it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_session_id: Option<String>,
}

/// The model a request is for, so an engine can count and budget for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct ModelRef {
    /// The provider id (`sim`, `openai`, `anthropic`, …).
    pub provider: String,
    /// The model id as the provider names it.
    pub id: String,
    /// The effective context window in tokens, after caps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
}

/// Parameters of `bootstrap`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct BootstrapParams {
    /// The session being opened.
    #[serde(flatten)]
    pub session: SessionRef,
}

/// Result of `bootstrap`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct BootstrapResult {
    /// True when the engine did any set-up.
    pub bootstrapped: bool,
    /// How many messages the engine imported into its own store, if it keeps one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub imported_messages: Option<u64>,
    /// Why nothing was done, for logs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Parameters of `ingest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct IngestParams {
    /// The session the message belongs to.
    #[serde(flatten)]
    pub session: SessionRef,
    /// The message that arrived.
    pub message: Option<SharedMessage>,
    /// True for heartbeat turns, which engines usually keep out of long-term state.
    pub is_heartbeat: bool,
    /// The model the session runs on, so an engine can size caps to its window (added in 1.0;
    /// absent from hosts that do not know it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelRef>,
}

/// Result of `ingest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct IngestResult {
    /// True when the engine stored the message in its own state.
    pub ingested: bool,
    /// A message to persist instead of the original (for example a capped tool result). The
    /// host persists this one; the engine is responsible for keeping the original reachable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replacement: Option<SharedMessage>,
}

/// Parameters of `ingest_batch`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct IngestBatchParams {
    /// The session the messages belong to.
    #[serde(flatten)]
    pub session: SessionRef,
    /// The messages, oldest first.
    pub messages: MessageList,
    /// True for heartbeat turns.
    pub is_heartbeat: bool,
    /// The model the session runs on (see [`IngestParams::model`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelRef>,
}

/// Result of `ingest_batch`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct IngestBatchResult {
    /// How many messages the engine stored.
    pub ingested_count: u64,
    /// Replacements by position in the batch; shorter than the batch (or empty) when the later
    /// messages are kept as they are.
    pub replacements: Vec<Option<SharedMessage>>,
}

/// Parameters of `assemble`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct AssembleParams {
    /// The session being assembled.
    #[serde(flatten)]
    pub session: SessionRef,
    /// The history of the active branch after the host's hygiene, oldest first. Shared, so an
    /// engine that keeps a message costs nothing and an engine in a library receives unchanged
    /// messages by id (see [`crate::wire`]).
    pub messages: MessageList,
    /// How many tokens the assembled messages may use, when the host knows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_budget: Option<u64>,
    /// The model the request goes to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelRef>,
    /// Names of the tools the model may call in this turn.
    pub available_tools: Vec<String>,
    /// The user's prompt for this turn, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// When the provider's prompt cache was last written for this session (Unix ms), from the
    /// session's last `openclaw.cache-ttl` custom entry. Cache-aware strategies (context
    /// pruning's TTL gate) only rewrite history once that cache has expired, since rewriting
    /// it earlier throws away cached tokens the user already paid for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_touched_at: Option<u64>,
    /// The host's clock for this turn (Unix ms). A replay runs on recorded time, so engines
    /// use this rather than the wall clock for time-based decisions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub now_ms: Option<u64>,
    /// The most characters of text the host leaves in one tool result of the request it sends
    /// (its tool-loop guard cuts a longer one in its copy of the request and says how much it
    /// cut); `None` when the host sends tool results as the engine returns them. Why: an engine
    /// that budgets the request (a threshold, a fresh tail in tokens) and counts a 40,000-character
    /// result whole believes the request twice as full as the model sees it, and compacts turns
    /// early. Engine API 1.4, additive: older hosts never send it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_result_max_chars: Option<u64>,
}

/// Result of `assemble`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct AssembleResult {
    /// The messages to send, oldest first. Return the `Arc`s you were given for messages you
    /// keep unchanged: they cross back by id.
    pub messages: MessageList,
    /// The engine's estimate of their tokens; 0 means "not estimated, the caller counts".
    pub estimated_tokens: u64,
    /// Text the host prepends to the system prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_prompt_addition: Option<String>,
}

/// Parameters of `compact`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct CompactParams {
    /// The session to compact.
    #[serde(flatten)]
    pub session: SessionRef,
    /// The budget the compacted context should fit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_budget: Option<u64>,
    /// Compact even below the usual threshold (overflow recovery, a manual request).
    pub force: bool,
    /// The prompt size the provider reported, when an overflow told us.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_token_count: Option<u64>,
    /// `budget` or `threshold`: what the compaction aims for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compaction_target: Option<String>,
    /// Extra instructions for the summariser from the user.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub custom_instructions: Option<String>,
    /// Open record of runtime facts (trigger, attempt, …); engines read what they know.
    pub runtime_context: serde_json::Value,
    /// The branch as the model sees it (after the last compaction), oldest first: what there
    /// is to compact. Sent with the call, rather than fetched through `session.read`, so a
    /// compaction works on exactly the history that overflowed and costs no extra round trip;
    /// unchanged messages cross the ABI by id. Empty from hosts older than 1.1.
    pub messages: MessageList,
    /// The session entry id of each of `messages` (same length), so the engine can name the
    /// first kept entry (`firstKeptEntryId`). The summary of an earlier compaction carries
    /// that compaction's entry id.
    pub entry_ids: Vec<String>,
    /// The chat model (with its window) the compacted context must fit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelRef>,
    /// The model summaries come from through `llm.complete` (`agents.defaults.compaction.model`,
    /// else the chat model when it is a real one), with its window, so the engine can size
    /// each summarisation request to fit it. `None`: no model can summarise (the simulator);
    /// the engine uses its embedded summariser.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compaction_model: Option<ModelRef>,
}

/// Details of a compaction that happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct CompactionOutcome {
    /// The summary text that replaced the older history.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The first entry kept verbatim after the summary.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_kept_entry_id: Option<String>,
    /// Context tokens before compaction.
    pub tokens_before: u64,
    /// Context tokens after compaction, when measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_after: Option<u64>,
    /// Engine-specific details.
    pub details: serde_json::Value,
}

/// Result of `compact`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct CompactResult {
    /// False when compaction failed.
    pub ok: bool,
    /// True when something was actually compacted (the overflow loop retries only then).
    pub compacted: bool,
    /// Why nothing was compacted, or why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What happened, when something did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<CompactionOutcome>,
}

/// Parameters of `maintain`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct MaintainParams {
    /// The session to maintain.
    #[serde(flatten)]
    pub session: SessionRef,
    /// `turn`, `bootstrap` or `compaction`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Open record of runtime facts.
    pub runtime_context: serde_json::Value,
    /// Set when the context has crossed the soft threshold (`compaction.prepareAt` of the
    /// prompt budget): the compaction the budget will soon trigger, so an engine can prepare
    /// its summary now (inline, or concurrently with a real model) and swap it in when
    /// `compact` comes, rather than make that request wait for a summariser. An engine that
    /// does not prepare ignores it; `None` from hosts before 1.2 and from one-shot commands,
    /// whose process ends before the summary could be used. The host asks once per stretch
    /// of context: while the context only grows after an accepted request (no compaction, no
    /// branch switch), later turns carry `None`, and the engine keeps what it prepared while
    /// the context continues it (as the legacy engine does).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prepare_compaction: Option<PrepareCompaction>,
}

/// A compaction to prepare ahead of need ([`MaintainParams::prepare_compaction`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct PrepareCompaction {
    /// The compaction as the host would ask for it now; its `token_budget` is what the
    /// context must fit once the prepared summary is swapped in.
    pub compact: CompactParams,
    /// Tokens the context will grow by before the budget triggers the compaction (the budget
    /// less the context's size now): the prepared cut keeps that much less, so that by the
    /// time it is swapped in the kept history has grown to what a compaction made then would
    /// keep.
    pub growth_tokens: u64,
}

/// Result of `maintain` (and of transcript rewrites). Defined with the message model, because
/// the session store returns it too.
pub use rampart_message::TranscriptRewriteResult;

/// Parameters of `after_turn`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct AfterTurnParams {
    /// The session whose turn ended.
    #[serde(flatten)]
    pub session: SessionRef,
    /// Every message of the attempt, including the new ones.
    pub messages: MessageList,
    /// How many of `messages` existed before the prompt; the rest are new.
    pub pre_prompt_message_count: u64,
    /// The summary of a compaction that ran inside the turn, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_compaction_summary: Option<String>,
    /// True for heartbeat turns.
    pub is_heartbeat: bool,
    /// The token budget of the turn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_budget: Option<u64>,
    /// Open record of runtime facts.
    pub runtime_context: serde_json::Value,
    /// As [`AssembleParams::tool_result_max_chars`], for the turn's request (engine API 1.4).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_result_max_chars: Option<u64>,
}

/// Result of `after_turn`. Empty today; a struct so later versions can add fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct AfterTurnResult {}

/// Parameters of `prepare_subagent_spawn`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct PrepareSubagentSpawnParams {
    /// The session spawning the child.
    pub parent_session_key: String,
    /// The child's session key.
    pub child_session_key: String,
    /// How long the child may live, when limited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
}

/// Result of `prepare_subagent_spawn`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct PrepareSubagentSpawnResult {
    /// An opaque token; if the spawn fails the host reports it back through
    /// `on_subagent_ended` with reason `released`, which lets the engine roll back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollback_token: Option<String>,
}

/// Parameters of `on_subagent_ended`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct SubagentEndedParams {
    /// The child's session key.
    pub child_session_key: String,
    /// `deleted`, `completed`, `swept` or `released`; other values may appear in later hosts.
    pub reason: String,
    /// The token from `prepare_subagent_spawn`, when there was one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollback_token: Option<String>,
}

/// Result of methods that return nothing. A struct so later versions can add fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct Empty {}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn unknown_features_and_fields_are_tolerated() {
        let json = r#"{"protocol":"rampart-engine","version":"1.7.0",
            "features":[{"name":"tracingBridge"},{"name":"teleport","range":[1,2]}],
            "somethingNew":true}"#;
        let info: ProtocolInfo = serde_json::from_str(json).unwrap();
        assert_eq!(
            info.features,
            vec![Feature::TracingBridge, Feature::Unknown]
        );
        assert!(ProtocolInfo::default().is_compatible_with(&info).is_ok());
    }

    #[test]
    fn different_majors_are_incompatible() {
        let other = ProtocolInfo {
            version: "2.0.0".into(),
            ..ProtocolInfo::default()
        };
        let err = ProtocolInfo::default()
            .is_compatible_with(&other)
            .unwrap_err();
        assert!(err.contains("different majors"), "{err}");
        let alien = ProtocolInfo {
            protocol: "other".into(),
            ..ProtocolInfo::default()
        };
        assert!(ProtocolInfo::default().is_compatible_with(&alien).is_err());
    }

    #[test]
    fn missing_fields_default() {
        let p: AssembleParams = serde_json::from_str(r#"{"sessionId":"s"}"#).unwrap();
        assert_eq!(p.session.session_id, "s");
        assert!(p.messages.is_empty());
        assert_eq!(p.token_budget, None);
        let r: CompactResult = serde_json::from_str("{}").unwrap();
        assert!(!r.ok && !r.compacted);
    }
}
