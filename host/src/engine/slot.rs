//! The `contextEngine` slot: resolving the configured engine, and the failure policy.
//!
//! Policy (reference §2.3, newest behaviour): an engine that cannot be resolved, loaded or
//! constructed, or that errors, panics or overruns its deadline in a call, is quarantined for
//! the rest of the process and the host carries on with the built-in `legacy` engine. The host
//! logs exactly one line naming the engine, the operation and the reason. With
//! `required = true` the host stops instead, with that same line as its error.
//!
//! `Unsupported` is not a failure: it means "use your default", and each caller knows its own.
//! A cancelled call is not the engine's fault and never quarantines it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rampart_engine_api::method::{Call, Method};
use rampart_engine_api::protocol::{
    AfterTurnParams, AssembleParams, AssembleResult, BootstrapParams, BootstrapResult,
    CompactParams, CompactResult, Feature, IngestBatchParams, IngestBatchResult, IngestParams,
    IngestResult, MaintainParams, SessionRef, TranscriptRewriteResult,
};
use rampart_engine_api::tools::{EngineTool, ToolCallParams, ToolCallResult, ToolsListParams};
use rampart_engine_api::{EngineError, ErrorKind, Host, LogLevel, SharedMessage};
use rampart_legacy::{LEGACY_ID, LegacyEngine};

use crate::blobs::BlobStore;
use crate::config::Config;
use crate::config::{EngineCommand, Isolation};
use crate::engine::handle::EngineHandle;
use crate::engine::loader::{
    LoadRequest, load_engine, load_engine_in_child, load_executable, load_wasm,
};
use crate::engine::services::{EventSink, HostServices};

/// A quarantine: which engine failed, in which operation, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantine {
    /// The engine id.
    pub engine: String,
    /// `resolve`, `load`, or the method name.
    pub operation: String,
    /// What went wrong, as the engine or loader said it.
    pub reason: String,
}

impl Quarantine {
    /// The one log line that reports it.
    pub fn line(&self) -> String {
        format!(
            "{}; quarantined for this process, continuing with the built-in engine \
             \"{LEGACY_ID}\"",
            self.what()
        )
    }

    /// Which engine failed where, and why: the part of the line that does not depend on what
    /// the host does next.
    pub fn what(&self) -> String {
        format!(
            "context engine \"{}\" failed during {}: {}",
            self.engine, self.operation, self.reason
        )
    }
}

/// Whose choice the engine in the slot is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resolution {
    /// The config's: a failing engine is quarantined (or stops the host when required).
    Configured,
    /// The command line's: a failing engine is refused.
    Requested,
}

/// Why [`EngineSlot::resolve_as`] gave no slot.
enum ResolveFailure {
    Required(RequiredEngineFailed),
    Refused(Quarantine),
}

/// A required engine failed: the host must stop. The message says what failed and that
/// nothing falls back (the quarantine line would promise the built-in engine).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}; the engine is marked required = true, so rampart stops", .0.what())]
pub struct RequiredEngineFailed(pub Quarantine);

/// The state of the slot, for `engines list` and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlotState {
    /// The configured engine is serving.
    Active,
    /// The configured engine failed; `legacy` serves instead.
    Quarantined(Quarantine),
}

/// The context-engine slot of a running host.
pub struct EngineSlot {
    configured_id: String,
    required: bool,
    configured: Option<Arc<EngineHandle>>,
    legacy: Arc<EngineHandle>,
    quarantine: Mutex<Option<Quarantine>>,
    /// The operations each engine (by id) answered `Unsupported`: optional payloads for them
    /// need not be built ([`EngineSlot::declined`]).
    declined: Mutex<std::collections::HashSet<(String, String)>>,
    /// How each engine's calls went, by engine then operation, since the slot was built
    /// (looked up by `&str`, so counting a call allocates nothing after its first).
    calls: Mutex<HashMap<String, HashMap<String, CallStats>>>,
    /// The tools each engine listed for each session, by (engine id, session id): asked once
    /// per session, not once per request. Why: engines are told to keep the list the same from
    /// turn to turn (it is part of the cached prompt prefix), and `rampart serve` builds a turn
    /// per request, so without this every request paid a round trip to the engine (a pipe
    /// round trip for a child) for the same answer. Bounded by [`LISTED_TOOLS_CAP`].
    listed_tools: Mutex<HashMap<EngineSession, Arc<Vec<EngineTool>>>>,
}

/// (engine id, session id): whose tools [`EngineSlot`] remembers.
type EngineSession = (String, String);

/// Sessions whose engine tools [`EngineSlot`] remembers; past it the memory starts over (an
/// engine is asked again, which is only slower).
pub const LISTED_TOOLS_CAP: usize = 4_096;

/// How one engine's calls of one operation went: for `rampart serve`'s `/ui` and `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallStats {
    /// Calls made (answered, declined or failed).
    pub calls: u64,
    /// Calls that failed (an error, a panic, a deadline overrun, a cancellation).
    pub failures: u64,
    /// Time spent in them, all together.
    pub total: Duration,
    /// The longest one.
    pub max: Duration,
}

impl CallStats {
    /// The mean time of a call (zero before the first).
    pub fn mean(&self) -> Duration {
        u32::try_from(self.calls)
            .ok()
            .filter(|n| *n > 0)
            .map_or(Duration::ZERO, |n| self.total / n)
    }
}

/// What an operator reads of the slot's health: which engine serves, whether the configured
/// one was quarantined and why, how often its process was restarted, and how its calls went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotHealth {
    /// The configured engine's id.
    pub configured: String,
    /// The engine serving now (`legacy` after a quarantine).
    pub active: String,
    /// The quarantine, when there was one.
    pub quarantine: Option<Quarantine>,
    /// Restarts of the configured engine's child process (`None`: it runs in the host).
    pub restarts: Option<u64>,
    /// Calls by engine and operation, in that order.
    pub calls: Vec<(String, String, CallStats)>,
}

impl std::fmt::Debug for EngineSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineSlot")
            .field("configured_id", &self.configured_id)
            .field("state", &self.state())
            .finish()
    }
}

/// The legacy engine's config: the typed `agents.defaults` (OpenClaw's home for context
/// limits), serialised, with `plugins.engines.legacy.config` laid over it, key by key.
pub fn legacy_config(config: &Config) -> serde_json::Value {
    let mut merged = config.agent_defaults.engine_config();
    if let (Some(base), Some(serde_json::Value::Object(over))) = (
        merged.as_object_mut(),
        config.engines.get(LEGACY_ID).map(|e| &e.config),
    ) {
        for (k, v) in over {
            base.insert(k.clone(), v.clone());
        }
    }
    merged
}

/// What the host offers every engine beyond logging and events.
#[derive(Clone, Default)]
pub struct HostResources {
    /// The blob store behind `blobs.put`.
    pub blobs: Option<BlobStore>,
    /// The models behind `llm.complete`.
    pub llm: Option<Arc<dyn crate::engine::services::LlmService>>,
    /// The chat model's tokenizer, for `tokens.count` requests that name none.
    pub count_mode: rampart_context::tokens::CountMode,
    /// The root of the engines' state directories (`state.dir`), and whether it is scratch.
    pub state_root: Option<(std::path::PathBuf, bool)>,
}

impl HostResources {
    /// The services bound to engine `id`.
    pub fn services_for(&self, id: &str, events: &EventSink) -> HostServices {
        let mut services = HostServices::new(id, events.clone()).with_count_mode(self.count_mode);
        if let Some(blobs) = &self.blobs {
            services = services.with_blobs(blobs.clone());
        }
        if let Some(llm) = &self.llm {
            services = services.with_llm(Arc::clone(llm));
        }
        if let Some((root, scratch)) = &self.state_root {
            services = services.with_state_root(root.clone(), *scratch);
        }
        services
    }
}

/// Builds the linked-in legacy engine. A bad legacy config is reported and the defaults used:
/// the built-in engine must always be there to fall back on.
pub fn legacy_handle(
    config: &Config,
    events: &EventSink,
    resources: &HostResources,
) -> EngineHandle {
    let services = resources.services_for(LEGACY_ID, events);
    let host = Host::new(Arc::new(services));
    let engine = match LegacyEngine::new(legacy_config(config), Some(host.clone())) {
        Ok(engine) => engine,
        Err(e) => {
            tracing::error!(engine = LEGACY_ID, error = %e, "legacy engine config rejected; using its defaults");
            LegacyEngine::with_defaults(Some(host.clone()))
        }
    };
    EngineHandle::linked(Arc::new(engine), host, config.call_timeout)
}

/// The most verbose level the host's subscriber records, handed to engines.
pub fn host_max_log_level() -> LogLevel {
    match tracing::level_filters::LevelFilter::current() {
        f if f >= tracing::level_filters::LevelFilter::TRACE => LogLevel::Trace,
        f if f >= tracing::level_filters::LevelFilter::DEBUG => LogLevel::Debug,
        f if f >= tracing::level_filters::LevelFilter::INFO => LogLevel::Info,
        f if f >= tracing::level_filters::LevelFilter::WARN => LogLevel::Warn,
        _ => LogLevel::Error,
    }
}

impl EngineSlot {
    /// Resolves `plugins.slots.contextEngine`. A failure to resolve, load or construct the
    /// engine quarantines it (or, when it is required, returns the error).
    pub fn resolve(config: &Config, events: &EventSink) -> Result<Self, RequiredEngineFailed> {
        Self::resolve_with(config, events, None)
    }

    /// [`EngineSlot::resolve`] with a blob store, which engines reach through `blobs.put`.
    pub fn resolve_with(
        config: &Config,
        events: &EventSink,
        blobs: Option<BlobStore>,
    ) -> Result<Self, RequiredEngineFailed> {
        Self::resolve_full(
            config,
            events,
            &HostResources {
                blobs,
                ..Default::default()
            },
        )
    }

    /// [`EngineSlot::resolve`] with everything the host offers engines: the blob store and
    /// `llm.complete`.
    pub fn resolve_full(
        config: &Config,
        events: &EventSink,
        resources: &HostResources,
    ) -> Result<Self, RequiredEngineFailed> {
        match Self::resolve_as(config, events, resources, Resolution::Configured) {
            Ok(slot) => Ok(slot),
            Err(ResolveFailure::Required(failed)) => Err(failed),
            // Only `Resolution::Requested` refuses.
            Err(ResolveFailure::Refused(q)) => Err(RequiredEngineFailed(q)),
        }
    }

    /// [`EngineSlot::resolve_full`] for an engine the user named for this command
    /// (`replay --engine ID`): an engine that cannot be resolved or loaded is refused with
    /// what failed, and nothing is logged or quarantined. Falling back to `legacy` would
    /// answer a question the user did not ask, and the log line said "continuing with the
    /// built-in engine" just before the command stopped.
    pub fn resolve_requested(
        config: &Config,
        events: &EventSink,
        resources: &HostResources,
    ) -> Result<Self, Quarantine> {
        match Self::resolve_as(config, events, resources, Resolution::Requested) {
            Ok(slot) => Ok(slot),
            Err(ResolveFailure::Required(failed)) => Err(failed.0),
            Err(ResolveFailure::Refused(q)) => Err(q),
        }
    }

    fn resolve_as(
        config: &Config,
        events: &EventSink,
        resources: &HostResources,
        resolution: Resolution,
    ) -> Result<Self, ResolveFailure> {
        let legacy = Arc::new(legacy_handle(config, events, resources));
        let id = config.context_engine.clone();
        let required = config.engines.get(&id).is_some_and(|e| e.required);
        let mut slot = EngineSlot {
            configured_id: id.clone(),
            required,
            configured: None,
            legacy,
            quarantine: Mutex::new(None),
            declined: Mutex::default(),
            calls: Mutex::default(),
            listed_tools: Mutex::default(),
        };
        if id == LEGACY_ID {
            if let Some(path) = config.engines.get(LEGACY_ID).and_then(|e| e.path.as_ref()) {
                let q = Quarantine {
                    engine: id,
                    operation: "resolve".into(),
                    reason: format!(
                        "`legacy` is built into the host and no library may register that id \
                         (plugins.engines.legacy.path = `{}`); remove `path` or give the \
                         library another id",
                        path.display()
                    ),
                };
                // The built-in engine still serves, so this is reported, not fatal.
                tracing::error!(engine = %q.engine, operation = %q.operation, reason = %q.reason, "{}", q.line());
            }
            return Ok(slot);
        }
        match resolve_and_load(config, &id, events, resources) {
            Ok(handle) => {
                tracing::info!(engine = %id, origin = %handle.origin(), version = %handle.info().version, "context engine loaded");
                slot.configured = Some(Arc::new(handle));
                Ok(slot)
            }
            Err((operation, reason)) => {
                let q = Quarantine {
                    engine: id,
                    operation: operation.into(),
                    reason,
                };
                if resolution == Resolution::Requested {
                    return Err(ResolveFailure::Refused(q));
                }
                slot.quarantine_now(q).map_err(ResolveFailure::Required)?;
                Ok(slot)
            }
        }
    }

    /// The configured id (what the user asked for).
    pub fn configured_id(&self) -> &str {
        &self.configured_id
    }

    /// Whether the configured engine serves or was quarantined.
    pub fn state(&self) -> SlotState {
        match self.quarantine.lock().ok().and_then(|q| q.clone()) {
            Some(q) => SlotState::Quarantined(q),
            None => SlotState::Active,
        }
    }

    /// The engine that serves calls now.
    pub fn active(&self) -> Arc<EngineHandle> {
        match (&self.configured, self.state()) {
            (Some(handle), SlotState::Active) => handle.clone(),
            _ => self.legacy.clone(),
        }
    }

    /// Whether the engine serving now answered `operation` with `Unsupported` before. The call
    /// is still made (an engine may answer differently later); what it declined is only a hint
    /// not to build optional parts of its parameters, such as `maintain`'s compaction to
    /// prepare, for an engine that ignores them (through a child, building and sending one
    /// cost a millisecond a turn). The one exception is `after_turn`, whose parameters are all
    /// optional to an engine that declines it: [`EngineSlot::after_turn_with`] then applies its
    /// default without the call.
    pub fn declined(&self, operation: &str) -> bool {
        let active = self.active();
        // The set holds a few pairs: a scan, not two new strings per turn for a hash lookup.
        self.declined.lock().is_ok_and(|d| {
            d.iter()
                .any(|(engine, op)| engine == active.id() && op == operation)
        })
    }

    /// The slot's health now (see [`SlotHealth`]).
    pub fn health(&self) -> SlotHealth {
        let quarantine = match self.state() {
            SlotState::Quarantined(q) => Some(q),
            SlotState::Active => None,
        };
        let mut calls: Vec<(String, String, CallStats)> = self
            .calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .flat_map(|(engine, ops)| {
                ops.iter()
                    .map(move |(op, stats)| (engine.clone(), op.clone(), *stats))
            })
            .collect();
        calls.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        SlotHealth {
            configured: self.configured_id.clone(),
            active: self.active().id().to_string(),
            quarantine,
            restarts: self.configured.as_ref().and_then(|h| h.restarts()),
            calls,
        }
    }

    /// Counts one call of `operation` on `engine` that took `took`.
    fn record_call(&self, engine: &str, operation: &str, took: Duration, failed: bool) {
        let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        if !calls.contains_key(engine) {
            calls.insert(engine.to_string(), HashMap::new());
        }
        let Some(ops) = calls.get_mut(engine) else {
            return;
        };
        if !ops.contains_key(operation) {
            ops.insert(operation.to_string(), CallStats::default());
        }
        let Some(stats) = ops.get_mut(operation) else {
            return;
        };
        stats.calls += 1;
        stats.failures += u64::from(failed);
        stats.total += took;
        stats.max = stats.max.max(took);
    }

    /// Runs `op` on `handle`, counting the call ([`EngineSlot::health`]).
    fn timed<R>(
        &self,
        handle: &EngineHandle,
        operation: &str,
        op: &impl Fn(&EngineHandle) -> Result<R, EngineError>,
    ) -> Result<R, EngineError> {
        let started = Instant::now();
        let result = op(handle);
        let failed = result
            .as_ref()
            .is_err_and(|e| e.kind != ErrorKind::Unsupported);
        self.record_call(handle.id(), operation, started.elapsed(), failed);
        result
    }

    /// The built-in engine.
    pub fn legacy(&self) -> &Arc<EngineHandle> {
        &self.legacy
    }

    fn quarantine_now(&self, q: Quarantine) -> Result<(), RequiredEngineFailed> {
        if self.required {
            tracing::error!(engine = %q.engine, operation = %q.operation, reason = %q.reason, required = true, "{}", q.what());
            return Err(RequiredEngineFailed(q));
        }
        let mut slot = match self.quarantine.lock() {
            Ok(slot) => slot,
            Err(poisoned) => poisoned.into_inner(),
        };
        // The first failure wins: later ones are consequences.
        if slot.is_none() {
            tracing::error!(engine = %q.engine, operation = %q.operation, reason = %q.reason, "{}", q.line());
            *slot = Some(q);
        }
        Ok(())
    }

    /// Calls the method `params` are for on the active engine (see [`EngineSlot::call_with`]).
    pub fn call<C: Call>(&self, params: C) -> Result<Option<C::Output>, SlotCallError> {
        self.call_with(C::METHOD.name(), |e| e.call(params.clone()))
    }

    /// Runs `op` (the operation named `operation`: a method, or a method newer than this host
    /// called by name through [`EngineHandle::call_json`]) on the active engine. `Ok(None)`
    /// means the engine answered `Unsupported`, and the caller uses its default. Any other
    /// failure of a non-legacy engine quarantines it and the call is served by `legacy`.
    pub fn call_with<R>(
        &self,
        operation: &str,
        op: impl Fn(&EngineHandle) -> Result<R, EngineError>,
    ) -> Result<Option<R>, SlotCallError> {
        let active = self.active();
        let is_legacy = Arc::ptr_eq(&active, &self.legacy);
        match self.timed(&active, operation, &op) {
            Ok(r) => Ok(Some(r)),
            Err(e) if e.kind == ErrorKind::Unsupported => {
                if let Ok(mut declined) = self.declined.lock() {
                    declined.insert((active.id().to_string(), operation.to_string()));
                }
                Ok(None)
            }
            Err(e) if e.kind == ErrorKind::Cancelled => Err(SlotCallError::Cancelled(e)),
            Err(e) if is_legacy => Err(SlotCallError::Legacy(e)),
            Err(e) => {
                self.quarantine_now(Quarantine {
                    engine: active.id().to_string(),
                    operation: operation.to_string(),
                    reason: e.to_string(),
                })?;
                match self.timed(&self.legacy, operation, &op) {
                    Ok(r) => Ok(Some(r)),
                    Err(e) if e.kind == ErrorKind::Unsupported => Ok(None),
                    Err(e) => Err(SlotCallError::Legacy(e)),
                }
            }
        }
    }

    /// `assemble`, falling back to the host's messages unchanged when unsupported.
    pub fn assemble(&self, params: AssembleParams) -> Result<AssembleResult, SlotCallError> {
        let fallback = params.messages.clone();
        Ok(self.call(params.clone())?.unwrap_or(AssembleResult {
            messages: fallback,
            estimated_tokens: 0,
            system_prompt_addition: None,
        }))
    }

    /// `ingest`; unsupported means "not ingested, keep the message as it is".
    pub fn ingest(&self, params: IngestParams) -> Result<IngestResult, SlotCallError> {
        Ok(self.call(params.clone())?.unwrap_or_default())
    }

    /// `ingest_batch`, falling back to one `ingest` per message.
    pub fn ingest_batch(
        &self,
        params: IngestBatchParams,
    ) -> Result<IngestBatchResult, SlotCallError> {
        if let Some(r) = self.call(params.clone())? {
            return Ok(r);
        }
        let mut result = IngestBatchResult::default();
        for message in &params.messages {
            let r = self.ingest(IngestParams {
                session: params.session.clone(),
                message: Some(message.clone()),
                is_heartbeat: params.is_heartbeat,
                model: params.model.clone(),
            })?;
            result.ingested_count += u64::from(r.ingested);
            result.replacements.push(r.replacement);
        }
        Ok(result)
    }

    /// `compact`; unsupported means nothing was compacted.
    pub fn compact(&self, params: CompactParams) -> Result<CompactResult, SlotCallError> {
        Ok(self.call(params.clone())?.unwrap_or(CompactResult {
            ok: true,
            compacted: false,
            reason: Some("the engine does not compact".into()),
            result: None,
        }))
    }

    /// [`EngineSlot::compact`] with its own deadline (see [`EngineHandle::compact_within`]).
    pub fn compact_within(
        &self,
        params: CompactParams,
        timeout: std::time::Duration,
    ) -> Result<CompactResult, SlotCallError> {
        Ok(self
            .call_with(Method::Compact.name(), |e| {
                e.call_within(params.clone(), timeout)
            })?
            .unwrap_or(CompactResult {
                ok: true,
                compacted: false,
                reason: Some("the engine does not compact".into()),
                result: None,
            }))
    }

    /// `bootstrap`; unsupported means nothing to set up.
    pub fn bootstrap(&self, params: BootstrapParams) -> Result<BootstrapResult, SlotCallError> {
        Ok(self.call(params.clone())?.unwrap_or_default())
    }

    /// `maintain`; unsupported means nothing changed.
    pub fn maintain(
        &self,
        params: MaintainParams,
    ) -> Result<TranscriptRewriteResult, SlotCallError> {
        Ok(self.call(params)?.unwrap_or_default())
    }

    /// `after_turn`, falling back to `ingest_batch` of the new messages, as OpenClaw does.
    pub fn after_turn(&self, params: AfterTurnParams) -> Result<(), SlotCallError> {
        if self.call(params.clone())?.is_some() {
            return Ok(());
        }
        let start = usize::try_from(params.pre_prompt_message_count).unwrap_or(usize::MAX);
        let new = params
            .messages
            .get(start..)
            .map(<[_]>::to_vec)
            .unwrap_or_default();
        self.after_turn_default(params.session, new, params.is_heartbeat)
    }

    /// `after_turn` with its parameters built only when they are sent: an engine that declined
    /// the method before ([`EngineSlot::declined`]) gets its default, `new` (the turn's new
    /// messages) ingested, without the call and without `params` being built. They are the
    /// whole request again, a copy of every held message each turn, for an engine that said it
    /// does not read them.
    pub fn after_turn_with(
        &self,
        session: SessionRef,
        new: Vec<SharedMessage>,
        params: impl FnOnce() -> AfterTurnParams,
    ) -> Result<(), SlotCallError> {
        if self.declined(Method::AfterTurn.name()) {
            return self.after_turn_default(session, new, false);
        }
        self.after_turn(params())
    }

    /// What `after_turn` does for an engine that declines it: the turn's new messages
    /// ingested in one batch.
    fn after_turn_default(
        &self,
        session: SessionRef,
        new: Vec<SharedMessage>,
        is_heartbeat: bool,
    ) -> Result<(), SlotCallError> {
        self.ingest_batch(IngestBatchParams {
            session,
            messages: new.into(),
            is_heartbeat,
            model: None,
        })?;
        Ok(())
    }

    /// `tools.list` (engine API 1.2): the tools the active engine offers the model in this
    /// session, asked once per session and remembered; none from an engine that did not
    /// announce [`Feature::EngineTools`] (it is never asked) or answers `unsupported`. A tool that cannot be offered (a name outside the
    /// providers' alphabet, parameters that are no schema object, a name listed twice) is left
    /// out with a warning naming it, so one bad declaration does not cost the others.
    pub fn tools_list(&self, session: SessionRef) -> Result<Vec<EngineTool>, SlotCallError> {
        if !self
            .active()
            .info()
            .protocol
            .supports(&Feature::EngineTools)
        {
            return Ok(Vec::new());
        }
        let key = (self.active().id().to_string(), session.session_id.clone());
        if let Some(tools) = self
            .listed_tools
            .lock()
            .ok()
            .and_then(|m| m.get(&key).cloned())
        {
            return Ok(tools.as_ref().clone());
        }
        let listed = self.call(ToolsListParams { session })?.unwrap_or_default();
        let mut seen = std::collections::HashSet::new();
        let mut tools = Vec::with_capacity(listed.tools.len());
        for tool in listed.tools {
            if let Some(problem) = tool.problem() {
                tracing::warn!(engine = %self.active().id(), %problem, "engine tool not offered");
            } else if !seen.insert(tool.name.clone()) {
                tracing::warn!(engine = %self.active().id(), tool = %tool.name,
                    "engine tool listed twice; the first is offered");
            } else {
                tools.push(tool);
            }
        }
        // Remembered only while the engine that listed them still serves (a quarantine in
        // between hands the slot to legacy, whose id differs).
        if self.active().id() == key.0
            && let Ok(mut listed) = self.listed_tools.lock()
        {
            if listed.len() >= LISTED_TOOLS_CAP {
                listed.clear();
            }
            listed.insert(key, Arc::new(tools.clone()));
        }
        Ok(tools)
    }

    /// `tools.call` (engine API 1.2): the engine's answer to one call the model made of one of
    /// its tools. An engine that refuses the call's parameters answers the model with why (it
    /// can call again); an engine that declines the method, or was quarantined since it
    /// listed the tool, answers that the tool is not available. Other failures quarantine the
    /// engine like any call (see [`EngineSlot::call_with`]).
    pub fn tools_call(&self, params: ToolCallParams) -> Result<ToolCallResult, SlotCallError> {
        let name = params.name.clone();
        let answer = self.call_with(Method::ToolsCall.name(), |e| {
            match e.call(params.clone()) {
                // Parameters the engine cannot read are the model's mistake, not the
                // engine's failure: said to the model, never a quarantine.
                Err(err) if err.kind == ErrorKind::InvalidParams => {
                    Ok(ToolCallResult::error(format!("{name}: {}", err.message)))
                }
                other => other,
            }
        })?;
        Ok(answer.unwrap_or_else(|| {
            ToolCallResult::error(format!(
                "{name}: this tool is not available now (its engine does not answer it)"
            ))
        }))
    }

    /// Retires every engine at exit (never unloads).
    pub fn shutdown(&self) {
        for handle in self.configured.iter().chain(std::iter::once(&self.legacy)) {
            if let Err(e) = handle.shutdown() {
                tracing::warn!(engine = %handle.id(), error = %e, "engine shutdown failed");
            }
        }
    }
}

/// Why a slot call could not be served.
#[derive(Debug, thiserror::Error)]
pub enum SlotCallError {
    /// The call was cancelled by the host or the user.
    #[error("cancelled: {0}")]
    Cancelled(EngineError),
    /// The built-in engine itself failed.
    #[error("the built-in engine failed: {0}")]
    Legacy(EngineError),
    /// A required engine failed.
    #[error(transparent)]
    Required(#[from] RequiredEngineFailed),
}

/// Finds and loads the library of `id`. Errors are `(operation, reason)`.
pub(crate) fn resolve_and_load(
    config: &Config,
    id: &str,
    events: &EventSink,
    resources: &HostResources,
) -> Result<EngineHandle, (&'static str, String)> {
    let (request, isolation, command) =
        load_request(config, id, events, resources).map_err(|why| ("resolve", why))?;
    let loaded = match (isolation, command) {
        // The validator refuses `isolation = "inprocess"` beside a command.
        (Isolation::Process(settings), Some(command)) => {
            load_executable(request, command, settings)
        }
        (Isolation::InProcess, Some(command)) => {
            load_executable(request, command, crate::config::ProcessSettings::default())
        }
        (Isolation::Process(settings), None) => load_engine_in_child(request, settings),
        (Isolation::InProcess, None) => load_engine(request),
        // The validator refuses `isolation = "wasm"` beside a command.
        (Isolation::Wasm(settings), _) => load_wasm(request, settings),
    };
    loaded.map_err(|e| ("load", e.to_string()))
}

/// What loading engine `id` takes, as the configuration says: its library (or its command),
/// `config` table and deadlines, and where its code runs. One place, so the slot and the
/// inspecting commands load an engine the same way.
fn load_request(
    config: &Config,
    id: &str,
    events: &EventSink,
    resources: &HostResources,
) -> Result<(LoadRequest, Isolation, Option<EngineCommand>), String> {
    let entry = config.engines.get(id);
    let command = entry.and_then(|e| e.command.clone());
    let path = match &command {
        Some(command) => command.program.clone(),
        None => match config.resolve_engine_path(id) {
            Ok(Some(path)) => path,
            Ok(None) => return Err(format!("no library is configured for `{id}`")),
            Err(e) => return Err(e.to_string()),
        },
    };
    let request = LoadRequest {
        id: id.to_string(),
        verify_id: true,
        path,
        config: entry
            .map(|e| e.config.clone())
            .unwrap_or_else(|| serde_json::json!({})),
        services: Arc::new(resources.services_for(id, events)),
        load_timeout: config.load_timeout,
        call_timeout: config.call_timeout,
        max_log_level: Some(host_max_log_level()),
    };
    // A library found in the search paths without a table of its own gets the default too.
    let isolation = entry.map(|e| e.isolation.clone()).unwrap_or_default();
    Ok((request, isolation, command))
}

/// Loads engine `id`'s library in a child process, whatever its `isolation`, to learn whether
/// it loads and what it says about itself, then stops the child. For the commands that
/// inspect libraries without serving with them (`engines list`, `config check`): a library
/// whose constructor exits, aborts or runs corrupt code takes down the child, never the
/// command, and the error names the signal or status ([`crate::engine::process`]).
pub fn check_in_child(
    config: &Config,
    id: &str,
    events: &EventSink,
) -> Result<rampart_engine_api::EngineInfo, String> {
    let (request, isolation, command) =
        load_request(config, id, events, &HostResources::default())?;
    let settings = match isolation {
        Isolation::Process(settings) => settings,
        Isolation::InProcess => crate::config::ProcessSettings::default(),
        // Confined already: run where the slot runs it.
        Isolation::Wasm(wasm) => {
            let handle = load_wasm(request, wasm).map_err(|e| e.to_string())?;
            let info = handle.info().clone();
            let _ = handle.shutdown();
            return Ok(info);
        }
    };
    let handle = match command {
        Some(command) => load_executable(request, command, settings),
        None => load_engine_in_child(request, settings),
    }
    .map_err(|e| e.to_string())?;
    let info = handle.info().clone();
    let _ = handle.shutdown();
    Ok(info)
}
