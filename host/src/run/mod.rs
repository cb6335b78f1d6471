//! The run loop: one user turn through the four layers to a model and back into the session.
//!
//! Each attempt (reference §1):
//! 1. layer 1, the window guard, with failover down the agent's model list (no request for a
//!    blocked model);
//! 2. the active branch from the session, with the last compaction applied;
//! 3. the hygiene choke point, then `engine.assemble` (its failure is logged and the hygiene
//!    output used), then the choke point again on whatever the engine returned;
//! 4. layer 2's in-memory tool-loop guard;
//! 5. the precheck, which may truncate tool results in the session or send the attempt into
//!    overflow recovery before anything is sent;
//! 6. the request.
//!
//! On an overflow (from the provider, the tool-loop guard or the precheck): up to 3
//! compactions, retrying only when something was compacted; then one in-session tool-result
//! truncation pass; then an error the user can act on. Every decision is an event
//! ([`events::Event`]).

pub mod answer_fit;
pub mod events;
pub mod flush;
pub mod host_tools;
pub mod llm;
mod recovery;

use std::collections::HashMap;
use std::sync::Arc;

use rampart_context::compaction::CompactionSettings;
use rampart_context::guards::precheck::{PRE_PROMPT_SAFETY_FACTOR, PrecheckInput, precheck};
use rampart_context::guards::tool_args;
use rampart_context::guards::tool_loop::{guard_tool_loop_with, tool_result_text_budget};
use rampart_context::guards::tool_result::{
    DEFAULT_MAX_LIVE_TOOL_RESULT_CHARS, estimate_tool_result_reduction_potential_capped,
};
use rampart_context::guards::window::WindowNumbers;
use rampart_context::hygiene::{self, HygienePolicy};
use rampart_context::tokens::{CountMode, TokenCounter};
use rampart_engine_api::protocol::{AfterTurnParams, AssembleParams, MaintainParams, ModelRef};
use rampart_message::wire::{MessageList, SharedMessage};
use rampart_message::{AgentMessage, Usage};
use rampart_sessions::Session;
use rampart_sessions::store::shared::SharedStore;
use rampart_sessions::store::{RegistryChange, UsageSample};
use serde_json::json;

use crate::blobs::BlobStore;
use crate::config::Config;
use crate::config::{ModelName, ModelsConfigError};
use crate::engine::slot::{EngineSlot, SlotCallError};
use crate::models::guard_models;
use crate::persist::{PersistError, SessionWriter};
use crate::providers::{ModelRequest, Provider, ProviderError, ProviderErrorKind};

pub(crate) use crate::persist::session_ref;
use events::*;
pub use events::{RecordedEvent, RunEvents};

/// Compactions one turn may run after model timeouts (`MAX_TIMEOUT_COMPACTION_ATTEMPTS`).
pub const MAX_TIMEOUT_COMPACTION_ATTEMPTS: u32 = 2;

/// A timed-out prompt larger than this share of the window is compacted and retried.
pub const TIMEOUT_COMPACTION_SHARE: f64 = 0.65;

/// The model used when the config names none: the embedded simulator.
pub fn default_model() -> ModelName {
    ModelName::new(
        crate::config::models::SIM_PROVIDER_ID,
        crate::config::models::SIM_DEFAULT_MODEL,
    )
}

/// One model as an attempt uses it, resolved once (the window guard, then the provider) and
/// passed down: its name, its window, its output cap, how its prompts are counted, and the
/// provider that serves it. Why one value: these facts used to travel as a name string split in
/// several places and a window under many names, and could drift apart.
#[derive(Clone)]
pub struct ResolvedModel {
    /// The model.
    pub name: ModelName,
    /// Its context window, in tokens, as layer 1 resolved it.
    pub context_window: u64,
    /// The answer tokens the precheck reserves: the model's `maxTokens`, else the run's
    /// setting, or with [`RunSettings::answer_fit`] the floor when that bound leaves no room for
    /// the prompt ([`answer_fit::reserve_cap`]).
    pub max_output_tokens: Option<u64>,
    /// The bound on an answer's tokens before fitting: the model's `maxTokens`, else the run's.
    pub requested_output_tokens: Option<u64>,
    /// How prompts to it are counted.
    pub count_mode: CountMode,
    /// The wire family, which picks the hygiene policy.
    pub family: hygiene::Provider,
    /// The backend.
    pub provider: Arc<dyn Provider>,
}

impl ResolvedModel {
    /// The model as the engine protocol names it.
    pub fn model_ref(&self) -> ModelRef {
        model_ref(&self.name, self.context_window)
    }
}

/// A provider as the run loop needs it.
#[derive(Clone)]
pub struct ResolvedProvider {
    /// The backend.
    pub provider: Arc<dyn Provider>,
    /// The wire family, which picks the hygiene policy.
    pub family: hygiene::Provider,
    /// How prompts to this model are counted (the model's `tokenizer`).
    pub count_mode: CountMode,
}

/// Where the run loop finds providers; implemented by the provider registry, and by tests.
pub trait ModelSource {
    /// The provider for `name`.
    fn resolve(&self, name: &ModelName) -> Result<ResolvedProvider, TurnError>;

    /// What the provider itself reports of the model's window (the guard's "model" source).
    /// The configured numbers are not this: they are the models-config source.
    fn reported_window(&self, name: &ModelName) -> WindowNumbers {
        let _ = name;
        WindowNumbers::default()
    }

    /// The model compaction summaries come from while `chat` is the chat model; `None` means
    /// the engine's embedded summariser.
    fn compaction_model(
        &self,
        config: &Config,
        chat: &ModelRef,
    ) -> Result<Option<ModelRef>, TurnError> {
        let _ = (config, chat);
        Ok(None)
    }
}

impl ModelSource for crate::providers::registry::Providers {
    fn resolve(&self, name: &ModelName) -> Result<ResolvedProvider, TurnError> {
        let backend = self.get(name).map_err(|e| TurnError::UnknownModel {
            name: name.to_string(),
            problem: e.to_string(),
        })?;
        let settings = self.settings(&name.provider);
        // A simulator that stands in for an API gets that API's hygiene.
        let api = settings.and_then(|s| match s.api {
            crate::providers::ApiKind::Sim => s.speaks,
            api => Some(api),
        });
        let family = match api {
            Some(crate::providers::ApiKind::OpenAiCompletions) => {
                hygiene::Provider::OpenAiCompletions
            }
            Some(crate::providers::ApiKind::AnthropicMessages) => hygiene::Provider::Anthropic,
            _ => hygiene::Provider::Other,
        };
        let entry = settings.and_then(|s| s.models.iter().find(|m| m.id == name.model));
        let count_mode = entry
            .and_then(|m| m.tokenizer)
            .unwrap_or_else(|| CountMode::for_model(&name.model));
        Ok(ResolvedProvider {
            provider: backend,
            family,
            count_mode,
        })
    }

    fn compaction_model(
        &self,
        config: &Config,
        chat: &ModelRef,
    ) -> Result<Option<ModelRef>, TurnError> {
        llm::compaction_model(config, self, chat)
    }
}

/// The knobs of a run that do not change between turns.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// The models to try: the primary first, then the fallbacks.
    pub candidates: Vec<ModelName>,
    /// The system prompt before the engine's addition (`rampart run` builds it with
    /// [`crate::prompt::PromptAssembler`]; `rampart serve` takes it per `serve.systemPrompt`).
    /// It may hold the builder's cache marker, which no model sees.
    pub system_prompt: Option<String>,
    /// `agents.defaults.compaction`: the precheck's reserve comes from it, per model
    /// ([`CompactionSettings::reserve_for`]: scaled to the window and the model's output cap).
    pub compaction: CompactionSettings,
    /// `contextLimits.toolResultMaxChars`.
    pub tool_result_max_chars: usize,
    /// `historyLimit`: user turns of history to send (`None`: all).
    pub history_limit: Option<i64>,
    /// An upper bound on the answer's tokens.
    pub max_output_tokens: Option<u64>,
    /// `agents.defaults.compaction.timeoutSeconds` (default 180): the engine stops a
    /// compaction by then; the host waits a little longer as a backstop.
    pub compaction_timeout: std::time::Duration,
    /// What a proxied client's request carries upstream (`rampart serve`): its tools, its key,
    /// where streamed pieces go, whether to mark the prompt cache.
    pub forwarded: crate::providers::Forwarded,
    /// `rampart serve`: the answer bound is fitted to the window (`serve.minAnswerTokens`),
    /// and each attempt's count and bound recorded for the client. `None`: sent as it is.
    pub answer_fit: Option<answer_fit::AnswerFit>,
}

impl RunSettings {
    /// The settings of `agents.defaults`: its model list (the simulator when none is named),
    /// its tool-result cap and the compaction reserve.
    pub fn from_config(config: &Config) -> Result<Self, ModelsConfigError> {
        let defaults = &config.agent_defaults;
        let compaction = &defaults.compaction;
        Ok(Self {
            candidates: defaults.candidates(&default_model()),
            system_prompt: None,
            compaction: compaction.clone(),
            tool_result_max_chars: defaults
                .tool_result_max_chars
                .map_or(DEFAULT_MAX_LIVE_TOOL_RESULT_CHARS, |c| c as usize),
            history_limit: None,
            max_output_tokens: None,
            compaction_timeout: compaction.timeout(),
            forwarded: Default::default(),
            answer_fit: None,
        })
    }
}

/// Which kind of give-up a context overflow ended in (the reference's `meta.error.kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OverflowKind {
    /// The prompt did not fit and nothing more could be removed.
    ContextOverflow,
    /// The compaction itself failed on an overflow.
    CompactionFailure,
}

/// Why a turn ended without an answer. Each variant says what the user can do.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    /// Every model the agent may use was blocked by the window guard; nothing was sent.
    #[error("{message}")]
    Blocked {
        /// The reference's block message of the last model tried.
        message: String,
        /// One line per blocked model.
        blocked: Vec<String>,
    },
    /// The prompt could not be made to fit.
    #[error("{message}")]
    ContextOverflow {
        /// `context_overflow` or `compaction_failure`.
        kind: OverflowKind,
        /// The user-facing text.
        message: String,
        /// The last overflow text seen (provider error or precheck).
        cause: String,
    },
    /// The provider failed for a reason other than an overflow.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// The configuration is wrong.
    #[error(transparent)]
    Config(#[from] ModelsConfigError),
    /// The session could not be read or written.
    #[error(transparent)]
    Persist(#[from] PersistError),
    /// A context engine marked `required = true` failed: the turn stops with its line instead
    /// of falling back.
    #[error(transparent)]
    RequiredEngine(#[from] crate::engine::slot::RequiredEngineFailed),
    /// A compaction the user asked for failed; the session is as it was.
    #[error("compaction failed: {reason}")]
    CompactionFailed {
        /// The engine's reason.
        reason: String,
    },
    /// A model name the config does not know.
    #[error("unknown model `{name}`: {problem}")]
    UnknownModel {
        /// `provider/model`.
        name: String,
        /// What is wrong and what exists.
        problem: String,
    },
}

impl TurnError {
    /// The kind a `--json` consumer reads.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Blocked { .. } => "window_too_small",
            Self::ContextOverflow {
                kind: OverflowKind::ContextOverflow,
                ..
            } => "context_overflow",
            Self::ContextOverflow {
                kind: OverflowKind::CompactionFailure,
                ..
            } => "compaction_failure",
            Self::Provider(_) => "provider",
            Self::Config(_) | Self::UnknownModel { .. } => "config",
            Self::Persist(_) => "session",
            Self::CompactionFailed { .. } => "compaction_failed",
            Self::RequiredEngine(_) => "required_engine",
        }
    }
}

/// Exactly what the model received, for `--requests-out` and for audits.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestRecord {
    /// The turn number, from 1.
    pub turn: u64,
    /// The attempt within the turn, from 1.
    pub attempt: u32,
    /// The model.
    pub model: ModelName,
    /// The model's window.
    pub window: u64,
    /// The prompt's tokens: the provider's usage when it answered, else the host's count.
    pub prompt_tokens: u64,
    /// The system prompt sent.
    pub system: Option<String>,
    /// The messages sent, in pi's format (the request's own list, shared).
    pub messages: MessageList,
    /// The body the provider's wire adapter sends for them (Anthropic messages or OpenAI chat
    /// completions JSON), when it is known: a replay records it for the API the simulator
    /// speaks. Turns merged, roles mapped, ids rewritten: what that provider would receive.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wire: Option<serde_json::Value>,
}

/// What one turn did.
#[derive(Debug, Clone)]
pub struct TurnReport {
    /// The model that answered.
    pub model: ModelName,
    /// Its window.
    pub window: u64,
    /// Attempts made (1 when the first request succeeded).
    pub attempts: u32,
    /// Prompt tokens of the answered request, from the provider's usage.
    pub prompt_tokens: u64,
    /// The host's count of the same request before sending it.
    pub estimated_tokens: u64,
    /// Compactions that compacted during the turn.
    pub compactions: u32,
    /// In-session truncation passes that changed something.
    pub truncation_passes: u32,
    /// The answer, as persisted.
    pub reply: SharedMessage,
    /// Every request sent during the turn, in order.
    pub requests: Vec<RequestRecord>,
}

/// The loop's state across turns of one session: token memos, the persistence guard, the
/// turn counter.
pub struct Runner<'a> {
    config: &'a Config,
    slot: &'a EngineSlot,
    models: &'a dyn ModelSource,
    settings: RunSettings,
    events: RunEvents,
    blobs: Option<BlobStore>,
    registry: Option<RegistryLink<'a>>,
    /// The token counters and the passes' memos ([`TurnMemos`]).
    memos: TurnMemos,
    writer: Option<(u64, SessionWriter)>,
    turn: u64,
    /// Instructions for the summariser of the compaction in progress (manual compactions).
    custom_instructions: Option<String>,
    /// The last cache touch of the session (its id, the touch), so the branch is scanned once.
    cache_touch: Option<(String, Option<u64>)>,
    /// A clock override (Unix ms): a replay runs on the transcript's recorded time.
    now_override: Option<u64>,
    /// Whether `agents.defaults.contextPruning.mode` is `cache-ttl`: then every answer records
    /// a cache touch, which the pruning TTL gate reads.
    records_cache_touch: bool,
    /// Whether the engine is asked to prepare compactions ahead of need
    /// ([`Runner::preparing_compactions`]).
    prepares_compactions: bool,
    /// The tool schemas' tokens, with the counting mode they were counted in.
    tool_tokens: Option<(CountMode, u64)>,
    /// Where the pre-compaction memory flush writes ([`Runner::with_memory_flush`]); `None`:
    /// no flush.
    memory_flush: Option<flush::FlushHook<'a>>,
}

/// What a runner derives from a session's messages that stays true for as long as they live:
/// each counting mode's token counter (with its per-message memo), and what the passes over
/// the whole history derive from single messages (hygiene's usage-zeroed copies, the tool-loop
/// guard's estimates). Kept across turns so that a turn costs a lookup per message, not a read
/// of the history's text.
///
/// Why it can leave the runner: `rampart serve` builds one runner per request, and a request
/// that continues a 200k-token conversation would otherwise count and scan all of it again.
/// The server keeps these beside the conversation's cached session ([`Runner::take_memos`],
/// [`Runner::with_memos`]); every entry is keyed by a message's allocation, so memos of
/// another session are never wrong, only useless.
#[derive(Debug, Default)]
pub struct TurnMemos {
    counters: HashMap<CountMode, Arc<TokenCounter>>,
    passes: PassMemos,
    /// The stretch of context the engine was last asked to prepare a compaction of: the
    /// session, the window, and where its branch stood ([`recovery`]'s
    /// `compaction_to_prepare` asks once per stretch, not on every turn).
    prepare_asked: Option<PrepareAsked>,
}

/// See [`TurnMemos::prepare_asked`].
#[derive(Debug, Clone)]
struct PrepareAsked {
    session_id: String,
    window: u64,
    mark: rampart_sessions::fold::BranchMark,
}

/// The per-message memos of the passes an attempt runs over the whole history, and each
/// pass's last run, which it resumes from when the history only grew since.
#[derive(Debug, Default)]
struct PassMemos {
    hygiene: hygiene::HygieneMemo,
    loop_chars: rampart_context::guards::ToolLoopMemo,
    args: tool_args::ToolArgsMemo,
}

/// The registry entry a runner keeps up to date, and the changes not yet written to it.
///
/// Changes are written in one atomic rewrite of `sessions.json` at the end of each turn
/// ([`Runner::finish_turn`]), or only when [`Runner::flush_registry`] is called for a
/// [`RegistryWrites::Batched`] runner; whatever is still pending when the runner is dropped is
/// written then. The session file, not the registry, is the record of a turn: a crash between
/// the two loses at most a counter update, never a message.
pub(crate) struct RegistryLink<'a> {
    pub(crate) store: &'a dyn SharedStore,
    pub(crate) key: String,
    writes: RegistryWrites,
    pending: Vec<RegistryChange>,
}

/// When a runner writes its registry entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegistryWrites {
    /// At the end of every turn (`rampart run`, `rampart compact`): another process may read
    /// the entry at any time.
    PerTurn,
    /// Only when [`Runner::flush_registry`] is called, and when the runner is dropped (a
    /// replay: nobody reads its entry before it ends, and rewriting `sessions.json` after each
    /// of 517 calls made it twice as slow as a replay without a sessions directory).
    Batched,
}

/// The custom entry type that records when the provider's prompt cache was last written.
pub const CACHE_TTL_CUSTOM_TYPE: &str = "openclaw.cache-ttl";

impl Drop for Runner<'_> {
    /// A runner that ends early (an error, a replay stopped on its first failure) still writes
    /// the registry changes of what it did.
    fn drop(&mut self) {
        if self
            .registry
            .as_ref()
            .is_some_and(|l| !l.pending.is_empty())
        {
            self.flush_registry();
        }
    }
}

impl std::fmt::Debug for Runner<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("settings", &self.settings)
            .field("turn", &self.turn)
            .finish_non_exhaustive()
    }
}

/// The state of one attempt's overflow handling, kept across attempts of a turn.
#[derive(Debug, Default)]
pub(crate) struct Recovery {
    pub(crate) overflow_compactions: u32,
    pub(crate) timeout_compactions: u32,
    pub(crate) compacted: u32,
    pub(crate) truncation_tried: bool,
    pub(crate) truncation_passes: u32,
}

/// A request ready to send, with the figures behind it.
struct Prepared {
    list: MessageList,
    system: Option<String>,
    estimated: u64,
}

/// An attempt's request before the precheck: what [`Runner::assemble_attempt`] made.
struct Assembled {
    list: MessageList,
    system: Option<String>,
    /// The engine's `systemPromptAddition`, when it gave one.
    addition: Option<String>,
    /// The tokens of the tool schemas in `tokens`.
    tool_tokens: u64,
    /// The request's count ([`request_tokens`]).
    tokens: u64,
    /// The tool-loop guard's overflow text: the request cannot be sent as it is.
    loop_overflow: Option<String>,
}

/// What the next attempt would send ([`Runner::preview`]), with the figures the run loop
/// decides on.
#[derive(Debug, Clone)]
pub struct Preview {
    /// The model layer 1 chose.
    pub model: ModelName,
    /// Its window.
    pub window: u64,
    /// How the request is counted.
    pub count_mode: CountMode,
    /// The wire family, which picks the request body's form.
    pub family: hygiene::Provider,
    /// The prompt budget the precheck holds the request to: the window less the reserve,
    /// over the precheck's safety factor, so in the units of `tokens` (what the engine's
    /// `assemble` is given as its budget too).
    pub budget: u64,
    /// The reserve the precheck applies (for the answer and the next turn's growth).
    pub reserve: u64,
    /// What the precheck would decide (`fits`, `compact_only`, …).
    pub route: String,
    /// The request's tokens as the run loop counts them ([`request_tokens`]).
    pub tokens: u64,
    /// The tokens of the tool schemas, part of `tokens`.
    pub tool_tokens: u64,
    /// The engine's `systemPromptAddition`, already placed in `request.system`.
    pub addition: Option<String>,
    /// Why the tool-loop guard would not let the request through as it is, if it would not.
    pub loop_overflow: Option<String>,
    /// The request as the provider would be handed it.
    pub request: ModelRequest,
}

/// The system prompt with the engine's `systemPromptAddition`, placed by
/// [`rampart_prompt::insert_addition`]: right after the builder's cache marker, so the cached
/// prefix does not change with it (first, with no marker). The one place an addition joins
/// the prompt.
pub fn with_addition(system: Option<&str>, addition: Option<&str>) -> Option<String> {
    let addition = addition.map(str::trim).filter(|a| !a.is_empty());
    match (system, addition) {
        (Some(system), Some(addition)) => Some(rampart_prompt::insert_addition(system, addition)),
        (None, Some(addition)) => Some(rampart_prompt::marker::normalize_addition(addition)),
        (system, None) => system.map(str::to_string),
    }
}

/// A request's tokens as the run loop counts them, and the precheck and `rampart context
/// show` with it: the system prompt as the wire carries it (the cache marker stripped), every
/// message, and the tool schemas (`tool_tokens`, [`crate::providers::ToolSpec::counted_text`]).
pub fn request_tokens(
    counter: &TokenCounter,
    system: Option<&str>,
    list: &MessageList,
    tool_tokens: u64,
) -> u64 {
    let system = system.map_or(0, |s| {
        counter.count_text(&crate::providers::text::wire_system(s).text())
    });
    // Resumed from the last request's list when this one only grew from it.
    system + counter.count_list(list) + tool_tokens
}

/// What the precheck and the guards decided for an attempt.
enum Decision {
    Send(Prepared),
    /// Retry the attempt: the precheck truncated tool results in the session.
    Retry,
    /// Treat as an overflow with this text.
    Overflow {
        text: String,
        compact_then_truncate: bool,
    },
}

impl<'a> Runner<'a> {
    /// A runner over `slot`'s engine and `models`' providers, publishing to `events`.
    pub fn new(
        config: &'a Config,
        slot: &'a EngineSlot,
        models: &'a dyn ModelSource,
        settings: RunSettings,
        events: RunEvents,
    ) -> Self {
        Self {
            config,
            slot,
            models,
            settings,
            events,
            blobs: None,
            registry: None,
            memos: TurnMemos::default(),
            writer: None,
            turn: 0,
            custom_instructions: None,
            cache_touch: None,
            now_override: None,
            records_cache_touch: config.agent_defaults.pruning.is_some(),
            prepares_compactions: false,
            memory_flush: None,
            tool_tokens: None,
        }
    }

    /// Continues from `memos`, what an earlier runner over the same conversation derived
    /// ([`TurnMemos`]).
    pub fn with_memos(mut self, memos: TurnMemos) -> Self {
        self.memos = memos;
        self
    }

    /// What this runner derived, for the conversation's next runner ([`TurnMemos`]).
    pub fn take_memos(&mut self) -> TurnMemos {
        std::mem::take(&mut self.memos)
    }

    /// Asks the engine, once the context crosses `compaction.prepareAt` of the prompt budget,
    /// to prepare the compaction the budget will trigger (in `maintain`), so that compaction
    /// swaps a ready summary in. Only for a process that lives on after the turn (a replay,
    /// a server): the engine keeps the summary in memory, and a one-shot `rampart run` would
    /// pay for a summary nobody uses.
    pub fn preparing_compactions(mut self) -> Self {
        self.prepares_compactions = self.config.agent_defaults.compaction.prepare_at.is_some();
        self
    }

    /// Keeps originals of capped tool results in `blobs` (without a store nothing is capped at
    /// persistence: an original that cannot be kept is never dropped).
    pub fn with_blobs(mut self, blobs: BlobStore) -> Self {
        self.blobs = Some(blobs);
        self
    }

    /// [`with_blobs`](Self::with_blobs) on `store`'s blobs (a directory, or the database every
    /// replica shares), when it keeps any.
    pub fn with_blobs_in(
        mut self,
        store: &dyn rampart_sessions::store::shared::SharedStore,
    ) -> Self {
        self.blobs = store.blobs().map(BlobStore::on);
        self
    }

    /// Keeps `key`'s entry in `store` up to date with every answer's usage and every
    /// compaction, written as `writes` says.
    pub fn with_registry(
        mut self,
        store: &'a dyn SharedStore,
        key: impl Into<String>,
        writes: RegistryWrites,
    ) -> Self {
        self.registry = Some(RegistryLink {
            store,
            key: key.into(),
            writes,
            pending: Vec::new(),
        });
        self
    }

    /// Writes the registry changes not yet written, in one rewrite of `sessions.json`. A
    /// failure is logged, not returned: the session file holds the turn either way.
    pub fn flush_registry(&mut self) {
        let Some(link) = &mut self.registry else {
            return;
        };
        let changes = std::mem::take(&mut link.pending);
        let count = changes.len();
        if let Err(e) = link.store.record(
            &link.key,
            changes,
            self.config.session.max_compaction_checkpoints,
        ) {
            tracing::warn!(error = %e, key = %link.key, changes = count, "could not update the session registry");
        }
    }

    /// The registry changes not yet written, handed to the caller to write later (`rampart
    /// serve` coalesces them across turns and conversations); the runner will not write them.
    pub fn take_registry_changes(&mut self) -> Vec<RegistryChange> {
        self.registry
            .as_mut()
            .map(|link| std::mem::take(&mut link.pending))
            .unwrap_or_default()
    }

    /// Queues a change of the registry entry (nothing without a registry).
    pub(crate) fn queue_registry(&mut self, change: RegistryChange) {
        if let Some(link) = &mut self.registry {
            link.pending.push(change);
        }
    }

    /// Runs on this clock (Unix ms) instead of the wall clock until cleared: a replay sets each
    /// turn's recorded time, so time-based decisions (the pruning TTL gate) happen as they
    /// would have.
    pub fn set_now(&mut self, now_ms: Option<u64>) {
        self.now_override = now_ms;
    }

    fn now_ms(&self) -> u64 {
        self.now_override
            .unwrap_or_else(rampart_sessions::store::now_unix_ms)
    }

    /// The session's last cache touch: scanned from the branch once, then kept up to date.
    fn cache_touched_at(&mut self, session: &Session) -> Option<u64> {
        let id = &session.header().id;
        if let Some((cached, touch)) = &self.cache_touch
            && cached == id
        {
            return *touch;
        }
        let touch = session
            .tree()
            .active_branch()
            .into_iter()
            .rev()
            .find_map(|e| match &e.body {
                rampart_sessions::EntryBody::Custom(c)
                    if c.custom_type == CACHE_TTL_CUSTOM_TYPE =>
                {
                    c.data
                        .as_ref()
                        .and_then(|d| d.get("timestamp"))
                        .and_then(|t| t.as_u64())
                }
                _ => None,
            });
        self.cache_touch = Some((id.clone(), touch));
        touch
    }

    /// The events recorded so far (drained).
    pub fn events(&self) -> &RunEvents {
        &self.events
    }

    /// The settings in force.
    pub fn settings(&self) -> &RunSettings {
        &self.settings
    }

    fn counter(&mut self, mode: CountMode) -> Arc<TokenCounter> {
        self.memos
            .counters
            .entry(mode)
            .or_insert_with(|| Arc::new(TokenCounter::new(mode)))
            .clone()
    }

    fn writer(&mut self, window: u64) -> &mut SessionWriter {
        let stale = !matches!(&self.writer, Some((w, _)) if *w == window);
        if stale {
            let writer = SessionWriter::new(
                window,
                self.settings.tool_result_max_chars,
                self.blobs.clone(),
            );
            self.writer = Some((window, writer));
        }
        match &mut self.writer {
            Some((_, writer)) => writer,
            None => unreachable!("the writer was just set"),
        }
    }

    /// The cap on `name`'s answers: its `maxTokens`, else the run's.
    pub(crate) fn output_cap(&self, name: &ModelName) -> Option<u64> {
        self.config
            .models
            .model(name)
            .and_then(|m| m.max_tokens)
            .or(self.settings.max_output_tokens)
    }

    /// The model of this attempt: layer 1 over the candidate list, then its provider, once.
    fn resolve_model(&self) -> Result<ResolvedModel, TurnError> {
        let (name, context_window) = self.guard()?;
        let provider = self.models.resolve(&name)?;
        let requested_output_tokens = self.output_cap(&name);
        let max_output_tokens = match (&self.settings.answer_fit, requested_output_tokens) {
            (Some(fit), Some(requested)) => Some(answer_fit::reserve_cap(
                context_window,
                requested,
                fit.floor,
            )),
            _ => requested_output_tokens,
        };
        Ok(ResolvedModel {
            name,
            context_window,
            max_output_tokens,
            requested_output_tokens,
            count_mode: provider.count_mode,
            family: provider.family,
            provider: provider.provider,
        })
    }

    /// Layer 1 over the candidate list. Emits a block event per skipped model and a warning
    /// when the chosen one is small.
    fn guard(&self) -> Result<(ModelName, u64), TurnError> {
        let models = self.models;
        match guard_models(self.config, &self.settings.candidates, |name| {
            models.reported_window(name)
        }) {
            Ok(chosen) => {
                for line in &chosen.skipped {
                    self.events
                        .emit(Event::GuardBlock(GuardBlock { line: line.clone() }));
                }
                if chosen.warned {
                    self.events.emit(Event::GuardWarn(GuardWarn {
                        model: chosen.name.to_string(),
                        window: chosen.window.tokens,
                    }));
                }
                Ok((chosen.name, chosen.window.tokens))
            }
            Err(all) => {
                for line in &all.blocked {
                    self.events
                        .emit(Event::GuardBlock(GuardBlock { line: line.clone() }));
                }
                self.events.emit(Event::GiveUp(GiveUp {
                    kind: "window_too_small".into(),
                    message: all.message.clone(),
                    ..Default::default()
                }));
                Err(TurnError::Blocked {
                    message: all.message,
                    blocked: all.blocked,
                })
            }
        }
    }

    /// Appends a message through the engine's `ingest` and the persistence guard (a tool
    /// result too large for the window is capped, its original kept in the blob store).
    /// Runs the window guard first, since the cap depends on the model's window.
    pub fn append(
        &mut self,
        session: &mut Session,
        message: AgentMessage,
    ) -> Result<Vec<String>, TurnError> {
        let (name, window) = self.guard()?;
        let model = model_ref(&name, window);
        let slot = self.slot;
        let writer = self.writer(window);
        let ids = writer.append(slot, session, Arc::new(message), Some(model))?;
        self.emit_caps();
        Ok(ids)
    }

    /// [`Runner::append`] for several messages, written to the session in one append: a
    /// proxied client's first request can carry a whole conversation (hundreds of messages),
    /// and one write of it costs a fraction of a write per message. The messages are shared:
    /// one the guard leaves as it is is stored as that allocation, not a copy (serve's memo of
    /// the request holds the same). Nothing is written when any of them fails.
    pub fn append_all(
        &mut self,
        session: &mut Session,
        messages: Vec<SharedMessage>,
    ) -> Result<Vec<String>, TurnError> {
        if messages.is_empty() {
            return Ok(Vec::new());
        }
        let (name, window) = self.guard()?;
        let model = model_ref(&name, window);
        let slot = self.slot;
        let writer = self.writer(window);
        let ids = writer.append_many(slot, session, messages, Some(model))?;
        self.emit_caps();
        Ok(ids)
    }

    /// The caps the persistence guard made since the last call, published as events.
    fn emit_caps(&mut self) {
        let Some((_, writer)) = &mut self.writer else {
            return;
        };
        for cap in writer.take_caps() {
            self.events.emit(Event::IngestCap(IngestCap {
                tool_call_id: Some(cap.tool_call_id),
                tool_name: Some(cap.tool_name),
                original_chars: cap.original_chars as u64,
                blob: cap.blob,
                ..Default::default()
            }));
        }
    }

    /// Ends a turn of appends: pending tool calls get their synthetic results, the file is
    /// synced.
    pub fn finish_turn(&mut self, session: &mut Session) -> Result<Vec<String>, TurnError> {
        if self
            .registry
            .as_ref()
            .is_some_and(|link| link.writes == RegistryWrites::PerTurn)
        {
            self.flush_registry();
        }
        match &mut self.writer {
            Some((_, writer)) => Ok(writer.finish_turn(session)?),
            None => Ok(Vec::new()),
        }
    }

    /// One user turn: appends `user` (when given), then runs attempts until the model answers
    /// or recovery gives up. The answer is appended to the session.
    pub fn run_turn(
        &mut self,
        session: &mut Session,
        user: Option<AgentMessage>,
    ) -> Result<TurnReport, TurnError> {
        self.turn += 1;
        if let Some(user) = user {
            self.append(session, user)?;
        }
        let mut recovery = Recovery::default();
        let mut requests = Vec::new();
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let resolved = self.resolve_model()?;
            let (name, window) = (resolved.name.clone(), resolved.context_window);
            let counter = self.counter(resolved.count_mode);
            let model = resolved.model_ref();

            let decision = self.prepare(session, &resolved, &counter)?;
            if attempt == 1 && self.memory_flush.is_some() {
                // Before the compaction the budget is about to trigger (or the one an
                // overflow brings now), the durable facts go to long-term memory.
                match &decision {
                    Decision::Send(p) => {
                        let trigger = flush::FlushTrigger::Request {
                            tokens: p.estimated,
                            messages: &p.list,
                            system: p.system.as_deref(),
                        };
                        self.maybe_flush_memory(session, &resolved, trigger);
                    }
                    Decision::Overflow { .. } => {
                        self.maybe_flush_memory(session, &resolved, flush::FlushTrigger::Overflow);
                    }
                    Decision::Retry => {}
                }
            }
            let prepared = match decision {
                Decision::Send(p) => p,
                Decision::Retry => {
                    recovery.truncation_passes += 1;
                    self.events.emit(Event::Retry(Retry {
                        attempt,
                        after: "truncation".into(),
                    }));
                    continue;
                }
                Decision::Overflow {
                    text,
                    compact_then_truncate,
                } => {
                    self.recover(
                        session,
                        &mut recovery,
                        &model,
                        window,
                        &text,
                        None,
                        compact_then_truncate,
                        attempt,
                    )?;
                    continue;
                }
            };

            let (max_tokens, forwarded) = self.answer_bound(&resolved, prepared.estimated);
            let request = ModelRequest {
                model: name.model.clone(),
                system: prepared.system.clone(),
                messages: prepared.list.clone(),
                max_tokens,
                deadline: None,
                forwarded,
            };
            self.events.emit(Event::Request(Request {
                turn: self.turn,
                attempt,
                model: name.to_string(),
                window,
                estimated_tokens: prepared.estimated,
                messages: request.messages.len() as u64,
            }));
            let mut record = RequestRecord {
                turn: self.turn,
                attempt,
                model: name.clone(),
                window,
                prompt_tokens: prepared.estimated,
                system: prepared.system.clone(),
                // The request's own list (a shared handle, not a copy).
                messages: request.messages.clone(),
                wire: None,
            };
            match resolved.provider.complete(&request) {
                Ok(response) => {
                    let usage = &response.message.usage;
                    let prompt_tokens = prompt_tokens_of(usage);
                    record.prompt_tokens = prompt_tokens;
                    requests.push(record);
                    self.events.emit(Event::Response(Response {
                        turn: self.turn,
                        attempt,
                        prompt_tokens,
                        output_tokens: usage.output,
                        retries: response.retries,
                    }));
                    let reply = self.finish_attempt(
                        session,
                        response.message,
                        &model,
                        window,
                        prompt_tokens,
                        &prepared,
                        &counter,
                    )?;
                    return Ok(TurnReport {
                        model: name,
                        window,
                        attempts: attempt,
                        prompt_tokens,
                        estimated_tokens: prepared.estimated,
                        compactions: recovery.compacted,
                        truncation_passes: recovery.truncation_passes,
                        reply,
                        requests,
                    });
                }
                Err(e) if e.kind() == ProviderErrorKind::ContextOverflow => {
                    requests.push(record);
                    let (text, observed) = match &e {
                        ProviderError::ContextOverflow {
                            message,
                            observed_tokens,
                            ..
                        } => (message.clone(), *observed_tokens),
                        other => (other.to_string(), None),
                    };
                    self.recover(
                        session,
                        &mut recovery,
                        &model,
                        window,
                        &text,
                        observed,
                        false,
                        attempt,
                    )?;
                }
                Err(e)
                    if e.kind() == ProviderErrorKind::Timeout
                        && recovery.timeout_compactions < MAX_TIMEOUT_COMPACTION_ATTEMPTS
                        && prepared.estimated as f64 > TIMEOUT_COMPACTION_SHARE * window as f64 =>
                {
                    // A big prompt is the likely reason a model is slow to answer: compact
                    // and retry rather than fail the turn (at most twice a turn).
                    requests.push(record);
                    recovery.timeout_compactions += 1;
                    self.events.emit(Event::Overflow(Overflow {
                        attempt,
                        message: e.to_string(),
                        trigger: Some("timeout".into()),
                        estimated_tokens: Some(prepared.estimated),
                        window,
                        ..Default::default()
                    }));
                    match self.compact(
                        session,
                        &model,
                        window,
                        None,
                        "timeout",
                        recovery.timeout_compactions,
                    ) {
                        Ok(true) => {
                            recovery.compacted += 1;
                            self.events.emit(Event::Retry(Retry {
                                attempt,
                                after: "compaction".into(),
                            }));
                        }
                        Err(recovery::CompactFailure::Required(failed)) => {
                            return Err(failed.into());
                        }
                        _ => {
                            self.events.emit(Event::GiveUp(GiveUp {
                                kind: "provider".into(),
                                message: e.to_string(),
                                error_kind: serde_json::to_value(e.kind())
                                    .ok()
                                    .and_then(|v| v.as_str().map(str::to_string)),
                                ..Default::default()
                            }));
                            return Err(e.into());
                        }
                    }
                }
                Err(e) => {
                    requests.push(record);
                    self.events.emit(Event::GiveUp(GiveUp {
                        kind: "provider".into(),
                        message: e.to_string(),
                        error_kind: serde_json::to_value(e.kind())
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_string)),
                        ..Default::default()
                    }));
                    return Err(e.into());
                }
            }
        }
    }

    /// Steps 2–5 of an attempt: the request ([`Runner::assemble_attempt`]), then the tool-loop
    /// guard's verdict and the precheck, which may truncate tool results in the session.
    fn prepare(
        &mut self,
        session: &mut Session,
        resolved: &ResolvedModel,
        counter: &TokenCounter,
    ) -> Result<Decision, TurnError> {
        let window = resolved.context_window;
        let assembled = self.assemble_attempt(session, resolved, counter)?;
        if let Some(fit) = &self.settings.answer_fit {
            fit.record(answer_fit::FitRecord {
                prompt_tokens: assembled.tokens,
                window,
                requested: resolved.requested_output_tokens,
                granted: None,
                floor: fit.floor,
            });
        }
        if let Some(text) = assembled.loop_overflow {
            return Ok(Decision::Overflow {
                text,
                compact_then_truncate: false,
            });
        }
        let outcome = self.precheck_of(resolved, &assembled.list, assembled.tokens);
        self.events.emit(Event::PrecheckRoute(PrecheckRoute {
            route: outcome.route.as_str().to_string(),
            estimated: outcome.estimated,
            window,
            overflow_tokens: outcome.overflow_tokens,
            budget_tokens: (outcome.prompt_budget_before_reserve as f64 / PRE_PROMPT_SAFETY_FACTOR)
                .floor() as u64,
        }));
        use rampart_context::guards::precheck::Route;
        match outcome.route {
            Route::Fits => Ok(Decision::Send(Prepared {
                list: assembled.list,
                system: assembled.system,
                estimated: assembled.tokens,
            })),
            Route::TruncateToolResultsOnly => {
                if self.truncate_in_session(session, window)? {
                    Ok(Decision::Retry)
                } else {
                    Ok(Decision::Overflow {
                        text: outcome.error_message().unwrap_or_default().to_string(),
                        compact_then_truncate: false,
                    })
                }
            }
            Route::CompactOnly | Route::CompactThenTruncate => Ok(Decision::Overflow {
                text: outcome.error_message().unwrap_or_default().to_string(),
                compact_then_truncate: outcome.route == Route::CompactThenTruncate,
            }),
        }
    }

    /// The answer bound a request of `prompt_tokens` is sent with, and what it forwards: the
    /// model's bound, or with [`RunSettings::answer_fit`] what fits beside the prompt
    /// ([`answer_fit::grant`]) with a client's thinking budget kept below it
    /// ([`answer_fit::fit_thinking`]), recorded and logged when lower than asked.
    fn answer_bound(
        &self,
        resolved: &ResolvedModel,
        prompt_tokens: u64,
    ) -> (Option<u64>, crate::providers::Forwarded) {
        let mut forwarded = self.settings.forwarded.clone();
        let (Some(fit), Some(requested)) =
            (&self.settings.answer_fit, resolved.requested_output_tokens)
        else {
            return (resolved.max_output_tokens, forwarded);
        };
        let window = resolved.context_window;
        let granted = answer_fit::grant(window, requested, fit.floor, prompt_tokens);
        if granted < requested {
            let thinking = forwarded
                .client_fields
                .as_mut()
                .and_then(|fields| answer_fit::fit_thinking(fields, granted));
            tracing::info!(
                model = %resolved.name,
                window,
                prompt_tokens,
                requested,
                granted,
                floor = fit.floor,
                thinking_budget_sent = thinking.map(|(sent, _)| sent),
                thinking_budget_lowered_to = thinking.map(|(_, to)| to),
                "the client's max_tokens leaves no room for the prompt; asking for what fits"
            );
        }
        fit.record(answer_fit::FitRecord {
            prompt_tokens,
            window,
            requested: Some(requested),
            granted: Some(granted),
            floor: fit.floor,
        });
        (Some(granted), forwarded)
    }

    /// The precheck over a request of `tokens` (the run loop's count) and its messages.
    fn precheck_of(
        &self,
        resolved: &ResolvedModel,
        list: &MessageList,
        tokens: u64,
    ) -> rampart_context::guards::precheck::PrecheckOutcome {
        let window = resolved.context_window;
        let estimated = (tokens as f64 * PRE_PROMPT_SAFETY_FACTOR).ceil() as u64;
        let mut input = PrecheckInput {
            estimated_tokens: estimated,
            context_window: window,
            reserve_tokens: self
                .settings
                .compaction
                .reserve_for(window, resolved.max_output_tokens),
            tool_result_reducible_chars: 0,
        };
        // What truncating tool results could free only decides the route of a request over
        // its budget: a request that fits is not charged a count of every tool result's
        // characters (a sixteenth of a continuing request through serve at 200k tokens).
        let fits = precheck(&input);
        if fits.route == rampart_context::guards::precheck::Route::Fits {
            return fits;
        }
        input.tool_result_reducible_chars = estimate_tool_result_reduction_potential_capped(
            list,
            window,
            self.settings.tool_result_max_chars,
        )
        .max_reducible_chars as u64;
        precheck(&input)
    }

    /// Steps 2–4 of an attempt, which change nothing in the session: the history with the
    /// last compaction applied, hygiene, the engine's `assemble`, hygiene again, the system
    /// prompt with the engine's addition, the caps on executed tool arguments, the tool-loop
    /// guard, and the request's count. Shared by [`Runner::run_turn`] and
    /// [`Runner::preview`], so that what `rampart context show` prints is what a turn sends.
    fn assemble_attempt(
        &mut self,
        session: &Session,
        resolved: &ResolvedModel,
        counter: &TokenCounter,
    ) -> Result<Assembled, TurnError> {
        let window = resolved.context_window;
        let model = &resolved.model_ref();
        let history = session.context().into_list();
        let mut policy = HygienePolicy::for_provider(resolved.family);
        policy.history_limit = self.settings.history_limit;
        let (clean, report) = hygiene::run_with(&history, &policy, &self.memos.passes.hygiene);
        if changes_the_request(&report) {
            self.events.emit(Event::Hygiene(Hygiene {
                stage: "history".into(),
                report: serde_json::to_value(&report).unwrap_or_default(),
            }));
        }

        let cache_touched_at = self.cache_touched_at(session);
        let assembled = self.slot.assemble(AssembleParams {
            session: session_ref(session),
            messages: clean.clone(),
            // What the precheck will let through, not the whole window: an engine that fills
            // the window would be sent straight into overflow recovery.
            token_budget: Some(self.compaction_budget(window, resolved.max_output_tokens)),
            model: Some(model.clone()),
            available_tools: Vec::new(),
            prompt: None,
            cache_touched_at,
            now_ms: Some(self.now_ms()),
            // The tool-loop guard below cuts longer results in the request it sends.
            tool_result_max_chars: Some(tool_result_text_budget(window) as u64),
        });
        let (list, addition) = match assembled {
            Ok(result) => (result.messages, result.system_prompt_addition),
            // Required means the run stops with the engine's line, before any request.
            Err(SlotCallError::Required(failed)) => return Err(failed.into()),
            Err(e) => {
                tracing::warn!(
                    engine = self.slot.configured_id(),
                    error = %e,
                    "context engine assemble failed, using pipeline messages: {e}"
                );
                self.events.emit(Event::AssembleFailed(AssembleFailed {
                    engine: self.slot.configured_id().to_string(),
                    error: e.to_string(),
                }));
                (clean.clone(), None)
            }
        };
        // The choke point again, on whatever the engine returned: an engine that dropped or
        // reordered messages must not be able to send the provider a broken transcript.
        let (list, report) = if MessageList::same_list(&list, &clean) {
            (list, Default::default())
        } else {
            hygiene::run_with(&list, &policy, &self.memos.passes.hygiene)
        };
        if changes_the_request(&report) {
            self.events.emit(Event::Hygiene(Hygiene {
                stage: "assembled".into(),
                report: serde_json::to_value(&report).unwrap_or_default(),
            }));
        }
        let system = with_addition(self.settings.system_prompt.as_deref(), addition.as_deref());

        // Arguments of calls that already ran (a whole file sent to `write`) are cut like tool
        // results: no result guard sees them, and a kept turn carrying one can hold a small
        // window over budget with nothing left for compaction to cut.
        let (list, args) = tool_args::cap_executed_tool_arguments_with(
            &list,
            tool_args::executed_argument_limit(
                self.compaction_budget(window, resolved.max_output_tokens),
                window,
                self.settings.tool_result_max_chars,
            ),
            &self.memos.passes.args,
        );
        if !args.shortened.is_empty() {
            self.events
                .emit(Event::ToolLoopTruncation(ToolLoopTruncation {
                    arguments: serde_json::to_value(&args).ok(),
                    report: None,
                }));
        }
        let (list, loop_overflow) =
            match guard_tool_loop_with(&list, window, &self.memos.passes.loop_chars) {
                Ok((list, report)) => {
                    if !report.truncated.is_empty() {
                        self.events
                            .emit(Event::ToolLoopTruncation(ToolLoopTruncation {
                                arguments: None,
                                report: serde_json::to_value(&report).ok(),
                            }));
                    }
                    (list, None)
                }
                Err(overflow) => (list, Some(overflow.to_string())),
            };

        let tools = self.tool_schema_tokens(counter);
        let tokens = request_tokens(counter, system.as_deref(), &list, tools);
        Ok(Assembled {
            list,
            system,
            addition: addition.filter(|a| !a.trim().is_empty()),
            tool_tokens: tools,
            tokens,
            loop_overflow,
        })
    }

    /// The tokens of the tool schemas the request carries, counted once per counting mode
    /// (the tools of a run do not change between its attempts).
    fn tool_schema_tokens(&mut self, counter: &TokenCounter) -> u64 {
        if self.settings.forwarded.tools.is_empty() {
            return 0;
        }
        let mode = counter.mode();
        if let Some((cached, tokens)) = self.tool_tokens
            && cached == mode
        {
            return tokens;
        }
        let tokens = self
            .settings
            .forwarded
            .tools
            .iter()
            .map(|t| counter.count_text(&t.counted_text()))
            .sum();
        self.tool_tokens = Some((mode, tokens));
        tokens
    }

    /// What the next attempt would send, prepared exactly as [`Runner::run_turn`] prepares it
    /// (the model through layer 1, the history with its last compaction, hygiene, the
    /// engine's `assemble`, the system prompt with the engine's addition, the guards) but
    /// without sending it, without the precheck acting on it, and without writing anything:
    /// `rampart context show`'s view of a session.
    ///
    /// # Errors
    /// [`TurnError`] when no model can be used (the window guard, an unknown model) or a
    /// required engine failed.
    pub fn preview(&mut self, session: &Session) -> Result<Preview, TurnError> {
        let resolved = self.resolve_model()?;
        let counter = self.counter(resolved.count_mode);
        let assembled = self.assemble_attempt(session, &resolved, &counter)?;
        let outcome = self.precheck_of(&resolved, &assembled.list, assembled.tokens);
        let request = ModelRequest {
            model: resolved.name.model.clone(),
            system: assembled.system.clone(),
            messages: assembled.list.clone(),
            max_tokens: resolved.max_output_tokens,
            deadline: None,
            forwarded: self.settings.forwarded.clone(),
        };
        Ok(Preview {
            model: resolved.name.clone(),
            window: resolved.context_window,
            count_mode: resolved.count_mode,
            family: resolved.family,
            budget: self.compaction_budget(resolved.context_window, resolved.max_output_tokens),
            reserve: outcome.effective_reserve,
            route: outcome.route.as_str().to_string(),
            tokens: assembled.tokens,
            tool_tokens: assembled.tool_tokens,
            addition: assembled.addition,
            loop_overflow: assembled.loop_overflow,
            request,
        })
    }

    /// After an answer: persist it, tell the engine, update the registry.
    #[allow(clippy::too_many_arguments)]
    fn finish_attempt(
        &mut self,
        session: &mut Session,
        reply: rampart_message::AssistantMessage,
        model: &ModelRef,
        window: u64,
        prompt_tokens: u64,
        prepared: &Prepared,
        counter: &TokenCounter,
    ) -> Result<SharedMessage, TurnError> {
        let usage = reply.usage.clone();
        let reply: SharedMessage = Arc::new(AgentMessage::Assistant(reply));
        let slot = self.slot;
        let writer = self.writer(window);
        writer.append(slot, session, reply.clone(), Some(model.clone()))?;
        if self.records_cache_touch {
            // The request just wrote the provider's prompt cache: pruning waits a TTL from now.
            let now = self.now_ms();
            session
                .append_custom(
                    CACHE_TTL_CUSTOM_TYPE,
                    Some(json!({ "timestamp": now, "provider": model.provider, "modelId": model.id })),
                )
                .map_err(PersistError::from)?;
            self.cache_touch = Some((session.header().id.clone(), Some(now)));
        }
        session.sync().map_err(PersistError::from)?;

        let after_turn =
            self.slot
                .after_turn_with(session_ref(session), vec![reply.clone()], || {
                    let mut messages: Vec<SharedMessage> = prepared.list.iter().cloned().collect();
                    let pre_prompt = messages.len() as u64;
                    messages.push(reply.clone());
                    AfterTurnParams {
                        session: session_ref(session),
                        messages: messages.into(),
                        pre_prompt_message_count: pre_prompt,
                        auto_compaction_summary: None,
                        is_heartbeat: false,
                        // The budget `assemble` was given, not the window: an engine that sweeps at
                        // a share of it (the lossless engine's threshold) must compare against what
                        // requests may hold, or it sweeps only after the precheck has already had
                        // to act.
                        token_budget: Some(self.compaction_budget(
                            window,
                            self.output_cap(&recovery::model_name(model)),
                        )),
                        // What the turn's request held by the host's count (the provider's usage
                        // when it answered): an engine knows only its messages, not the system
                        // prompt and tool schemas around them.
                        runtime_context: json!({ "promptTokens": prompt_tokens }),
                        tool_result_max_chars: Some(tool_result_text_budget(window) as u64),
                    }
                });
        if let Err(e) = after_turn {
            // The answer is on disk either way; a required engine still stops the run.
            if let SlotCallError::Required(failed) = e {
                return Err(failed.into());
            }
            tracing::warn!(error = %e, "after_turn failed; the turn is kept");
        }
        // The next request holds what this one did plus the answer.
        let next_tokens = prepared.estimated + counter.count_message(&reply);
        let prepare_compaction = if self
            .slot
            .declined(rampart_engine_api::protocol::method::MAINTAIN)
        {
            None
        } else {
            self.compaction_to_prepare(session, model, window, next_tokens)
        };
        let asked = prepare_compaction.is_some().then(|| PrepareAsked {
            session_id: session.header().id.clone(),
            window,
            mark: rampart_sessions::fold::BranchMark::of(session.tree()),
        });
        match self.slot.maintain(MaintainParams {
            session: session_ref(session),
            reason: Some("turn".to_string()),
            runtime_context: json!({}),
            prepare_compaction,
        }) {
            Ok(_) => {
                if asked.is_some() {
                    self.memos.prepare_asked = asked;
                }
            }
            Err(e) => {
                // Not asked after all: the next turn asks again.
                self.memos.prepare_asked = None;
                if let SlotCallError::Required(failed) = e {
                    return Err(failed.into());
                }
                tracing::warn!(error = %e, "maintain failed; the turn is kept");
            }
        }
        self.queue_registry(RegistryChange::Usage(UsageSample {
            input: usage.input,
            output: usage.output,
            cache_read: usage.cache_read,
            cache_write: usage.cache_write,
            context_used: prompt_tokens + usage.output,
            context_window: Some(window),
        }));
        Ok(reply)
    }
}

/// Whether hygiene changed what the provider will see. Zeroing stale usage (and stripping
/// `details`) changes fields no wire format sends, and after a compaction it happens on every
/// turn: reporting it would mark every turn as repaired.
fn changes_the_request(report: &hygiene::HygieneReport) -> bool {
    let mut visible = report.clone();
    visible.stale_usage = Default::default();
    visible.details = Default::default();
    visible.changed()
}

/// What the provider counted as the prompt: fresh input plus cache reads and writes.
fn prompt_tokens_of(usage: &Usage) -> u64 {
    usage.input + usage.cache_read + usage.cache_write
}

fn model_ref(name: &ModelName, window: u64) -> ModelRef {
    ModelRef {
        provider: name.provider.clone(),
        id: name.model.clone(),
        context_window: Some(window),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "settings_tests.rs"]
mod settings_tests;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "addition_tests.rs"]
mod addition_tests;
