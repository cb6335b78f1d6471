//! The host's side of [`HostApi`]: what an engine reaches when it logs, emits an event or asks
//! for a service.
//!
//! One [`HostServices`] value is bound to one engine id, so every log line and event carries the
//! engine it came from. Services this build does not offer yet (`llm.complete`, `session.*`)
//! answer `unsupported` with a message saying so; the engine sees a clear error rather than a
//! silent no-op.

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rampart_context::events::DURATION_FIELD;
use rampart_context::tokens::{CountMode, TokenCounter};
use rampart_engine_api::host::{
    BlobPutRequest, BlobRef, ClockReading, EngineEvent, LlmRequest, LlmResponse, service,
};
use rampart_engine_api::tokens::{TokenCount, TokenCountRequest};

use crate::blobs::BlobStore;
use rampart_engine_api::{EngineError, ErrorKind, HostApi, LogLevel};

/// Where engine events go besides `tracing`: a JSON-lines writer (`--events FILE`), and a
/// recording the run loop reads back (the replay's per-turn tags).
#[derive(Clone, Default)]
pub struct EventSink {
    writer: Option<Arc<Mutex<Box<dyn Write + Send>>>>,
    /// Whether written lines leave out [`DURATION_FIELD`] ([`EventSink::without_durations`]).
    no_durations: bool,
    /// Shared by every clone, so recording can start after engines got their copies.
    recording: Arc<Mutex<Option<Vec<RecordedEvent>>>>,
    /// One listener every event is handed to as it happens (serve's live page), shared by
    /// every clone so engines built before it was set reach it too.
    tap: Arc<std::sync::OnceLock<EventTap>>,
}

/// A listener of every event: the source (`host` or the engine id) and the event.
pub type EventTap = Arc<dyn Fn(&str, &EngineEvent) + Send + Sync>;

/// One event as recorded: who said it, what kind, and its figures.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedEvent {
    /// `host` or the engine id.
    pub source: String,
    /// The kind, in its wire spelling.
    pub kind: String,
    /// The event's figures.
    pub data: serde_json::Value,
}

impl RecordedEvent {
    /// The typed event, or `None` for a kind this version does not know (a third-party
    /// engine's own), which readers pass over.
    pub fn event(&self) -> Option<rampart_context::events::Event> {
        rampart_context::events::Event::from_envelope(&self.kind, &self.data)
    }
}

impl std::fmt::Debug for EventSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventSink")
            .field("to_file", &self.writer.is_some())
            .finish()
    }
}

impl EventSink {
    /// A sink that only traces.
    pub fn tracing_only() -> Self {
        Self::default()
    }

    /// A sink that also writes one JSON object per line to `writer`.
    pub fn to_writer(writer: Box<dyn Write + Send>) -> Self {
        Self {
            writer: Some(Arc::new(Mutex::new(writer))),
            no_durations: false,
            recording: Arc::default(),
            tap: Arc::default(),
        }
    }

    /// Leaves the events' wall-clock durations ([`DURATION_FIELD`] of their data) out of the
    /// lines written, so the file is the same on every run of a replay; what is recorded for
    /// the replay's own table and tracing keep them. Why only the file: it is what users
    /// compare byte for byte, and a duration is a measurement of this machine, not a decision
    /// of the defence.
    pub fn without_durations(mut self) -> Self {
        self.no_durations = true;
        self
    }

    /// Starts keeping every event from now on, from the host and from every engine holding a
    /// clone of this sink, until [`EventSink::drain`] takes them.
    pub fn start_recording(&self) {
        if let Ok(mut r) = self.recording.lock()
            && r.is_none()
        {
            *r = Some(Vec::new());
        }
    }

    /// Hands every event from now on to `tap` as well (serve's live page follows the
    /// conversations this way). One tap per sink: false when one was already set.
    pub fn set_tap(&self, tap: EventTap) -> bool {
        self.tap.set(tap).is_ok()
    }

    /// Takes the events recorded since the last call (none unless recording was started).
    pub fn drain(&self) -> Vec<RecordedEvent> {
        self.recording
            .lock()
            .ok()
            .and_then(|mut r| r.as_mut().map(std::mem::take))
            .unwrap_or_default()
    }

    /// Records `event` from `engine`.
    pub fn emit(&self, engine: &str, event: &EngineEvent) {
        // The subject as fields of their own, so a log can be filtered by turn or tool call;
        // the figures stay one `data` value (tracing's field names are fixed at compile time).
        // Read back from the envelope only when the line is logged: it copies the data, and
        // serve's default filter (`warn`) leaves it out on every turn.
        if tracing::enabled!(target: "rampart::event", tracing::Level::INFO) {
            let typed = rampart_context::events::Event::from_envelope(&event.kind, &event.data);
            let subject = typed.as_ref().map(|e| e.subject()).unwrap_or_default();
            tracing::info!(
                target: "rampart::event",
                engine,
                kind = %event.kind,
                session_id = event.session_id.as_deref().unwrap_or(""),
                turn = subject.turn,
                attempt = subject.attempt,
                tool_call_id = subject.tool_call_id,
                tool_name = subject.tool_name,
                data = %event.data,
                "event"
            );
        }
        if let Some(tap) = self.tap.get() {
            tap(engine, event);
        }
        if let Ok(mut r) = self.recording.lock()
            && let Some(kept) = r.as_mut()
        {
            kept.push(RecordedEvent {
                source: engine.to_string(),
                kind: event.kind.clone(),
                data: event.data.clone(),
            });
        }
        if let Some(writer) = &self.writer {
            let mut data = event.data.clone();
            if self.no_durations
                && let Some(fields) = data.as_object_mut()
            {
                fields.remove(DURATION_FIELD);
            }
            let line = serde_json::json!({
                "engine": engine,
                "kind": event.kind,
                "sessionId": event.session_id,
                "data": data,
            });
            if let Ok(mut w) = writer.lock() {
                // An unwritable events file must not break a turn; tracing already has it.
                let _ = writeln!(w, "{line}");
                let _ = w.flush();
            }
        }
    }
}

/// What answers an engine's `llm.complete`: the host's providers. A trait so the services do
/// not depend on how providers are configured, and tests can script the answers.
pub trait LlmService: Send + Sync {
    /// Completes `request`. Errors keep the provider's text (an overflow must stay
    /// recognisable) and use [`ErrorKind::Timeout`] and [`ErrorKind::Cancelled`] for those.
    fn complete(&self, request: &LlmRequest) -> Result<LlmResponse, EngineError>;
}

/// The services bound to one engine.
#[derive(Clone)]
pub struct HostServices {
    engine_id: String,
    events: EventSink,
    blobs: Option<BlobStore>,
    llm: Option<Arc<dyn LlmService>>,
    /// What `tokens.count` uses when the engine names no tokenizer: the chat model's.
    count_mode: CountMode,
    /// The root under which `state.dir` gives each engine its directory, and whether it is
    /// scratch.
    state_root: Option<(PathBuf, bool)>,
}

impl std::fmt::Debug for HostServices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostServices")
            .field("engine_id", &self.engine_id)
            .field("blobs", &self.blobs.is_some())
            .field("llm", &self.llm.is_some())
            .finish()
    }
}

impl HostServices {
    /// Services for the engine `engine_id`, publishing events to `events`.
    pub fn new(engine_id: impl Into<String>, events: EventSink) -> Self {
        Self {
            engine_id: engine_id.into(),
            events,
            blobs: None,
            llm: None,
            count_mode: CountMode::Estimate,
            state_root: None,
        }
    }

    /// Offers `state.dir`: `<root>/<engine id>`, created owner-only when asked for; `scratch`
    /// for a replay's or an eval's root.
    pub fn with_state_root(mut self, root: PathBuf, scratch: bool) -> Self {
        self.state_root = Some((root, scratch));
        self
    }

    /// Counts `tokens.count` requests that name no tokenizer with `mode` (the chat model's).
    pub fn with_count_mode(mut self, mode: CountMode) -> Self {
        self.count_mode = mode;
        self
    }

    /// Answers `tokens.count`: the tokenizer is `estimate`, `o200k_base`, `cl100k_base`,
    /// `calibrated`, a model name (`provider/model` or a bare id, whose default tokenizer is
    /// used), or empty for the chat model's.
    fn count_tokens(&self, request: &TokenCountRequest) -> TokenCount {
        let name = request.tokenizer.trim();
        let mode = if name.is_empty() {
            self.count_mode
        } else {
            name.parse::<CountMode>()
                .unwrap_or_else(|_| CountMode::for_model(name.rsplit('/').next().unwrap_or(name)))
        };
        let counter = TokenCounter::new(mode);
        TokenCount {
            counts: request
                .messages
                .iter()
                .map(|m| counter.count_message(m))
                .collect(),
            exact: counter.is_exact(),
            tokenizer: mode.name().to_string(),
        }
    }

    /// Offers `llm.complete`, answered by `llm`.
    pub fn with_llm(mut self, llm: Arc<dyn LlmService>) -> Self {
        self.llm = Some(llm);
        self
    }

    /// Offers `blobs.put`, storing into `blobs`.
    pub fn with_blobs(mut self, blobs: BlobStore) -> Self {
        self.blobs = Some(blobs);
        self
    }
}

impl HostApi for HostServices {
    fn log(&self, level: LogLevel, target: &str, message: &str, fields_json: &str) {
        let engine = self.engine_id.as_str();
        // `tracing` needs the level at compile time, hence one arm per level.
        match level {
            LogLevel::Trace => {
                tracing::trace!(target: "rampart::engine", engine, engine_target = target, fields = fields_json, "{message}")
            }
            LogLevel::Debug => {
                tracing::debug!(target: "rampart::engine", engine, engine_target = target, fields = fields_json, "{message}")
            }
            LogLevel::Info => {
                tracing::info!(target: "rampart::engine", engine, engine_target = target, fields = fields_json, "{message}")
            }
            LogLevel::Warn => {
                tracing::warn!(target: "rampart::engine", engine, engine_target = target, fields = fields_json, "{message}")
            }
            LogLevel::Error => {
                tracing::error!(target: "rampart::engine", engine, engine_target = target, fields = fields_json, "{message}")
            }
        }
    }

    fn call(&self, method: &str, payload_json: &str) -> Result<String, EngineError> {
        match method {
            service::EVENTS_EMIT => {
                let event: EngineEvent = serde_json::from_str(payload_json)
                    .map_err(|e| EngineError::invalid_params(method, e))?;
                self.events.emit(&self.engine_id, &event);
                Ok("{}".to_string())
            }
            service::CLOCK_NOW => {
                let unix_ms = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_millis() as u64)
                    .unwrap_or(0);
                serde_json::to_string(&ClockReading { unix_ms })
                    .map_err(|e| EngineError::new(ErrorKind::Host, e.to_string()))
            }
            service::BLOBS_PUT => {
                let Some(blobs) = &self.blobs else {
                    return Err(EngineError::new(
                        ErrorKind::Unsupported,
                        "this host has no blob store (its session store keeps none); keep the \
                         original yourself or do not shorten",
                    ));
                };
                let request: BlobPutRequest = serde_json::from_str(payload_json)
                    .map_err(|e| EngineError::invalid_params(method, e))?;
                let reference = blobs
                    .put(request.content.as_bytes())
                    .map_err(|e| EngineError::new(ErrorKind::Host, e.to_string()))?;
                serde_json::to_string(&BlobRef {
                    reference,
                    bytes: request.content.len() as u64,
                })
                .map_err(|e| EngineError::new(ErrorKind::Host, e.to_string()))
            }
            service::STATE_DIR => {
                let Some((root, scratch)) = &self.state_root else {
                    return Err(EngineError::new(
                        ErrorKind::Unsupported,
                        "this host gives no state directory here (its sessions are in a \
                         database); use your configured or default place",
                    ));
                };
                // The id is the configured one, checked by the config reader; a separator or
                // `..` in it would still never leave the root.
                let safe = !self.engine_id.is_empty()
                    && !self.engine_id.contains(['/', '\\'])
                    && self.engine_id != ".."
                    && self.engine_id != ".";
                if !safe {
                    return Err(EngineError::new(
                        ErrorKind::Host,
                        format!("engine id `{}` cannot name a directory", self.engine_id),
                    ));
                }
                let dir = root.join(&self.engine_id);
                rampart_sessions::create_private_dir_all(&dir).map_err(|e| {
                    EngineError::new(
                        ErrorKind::Host,
                        format!(
                            "cannot create the engine's state directory `{}`: {e}",
                            dir.display()
                        ),
                    )
                })?;
                serde_json::to_string(&rampart_engine_api::host::StateDir {
                    path: dir.display().to_string(),
                    scratch: *scratch,
                })
                .map_err(|e| EngineError::new(ErrorKind::Host, e.to_string()))
            }
            service::BLOBS_GET => {
                let Some(blobs) = &self.blobs else {
                    return Err(EngineError::new(
                        ErrorKind::Unsupported,
                        "this host has no blob store here",
                    ));
                };
                let request: rampart_engine_api::host::BlobGetRequest =
                    serde_json::from_str(payload_json)
                        .map_err(|e| EngineError::invalid_params(method, e))?;
                let bytes = blobs.get(&request.reference).map_err(|e| match e {
                    crate::blobs::BlobError::BadName(_)
                    | crate::blobs::BlobError::Missing { .. } => {
                        EngineError::invalid_params(method, e.to_string())
                    }
                    other => EngineError::new(ErrorKind::Host, other.to_string()),
                })?;
                serde_json::to_string(&rampart_engine_api::host::BlobContent {
                    bytes: bytes.len() as u64,
                    content: String::from_utf8_lossy(&bytes).into_owned(),
                })
                .map_err(|e| EngineError::new(ErrorKind::Host, e.to_string()))
            }
            service::TOKENS_COUNT => {
                let request: TokenCountRequest = serde_json::from_str(payload_json)
                    .map_err(|e| EngineError::invalid_params(method, e))?;
                serde_json::to_string(&self.count_tokens(&request))
                    .map_err(|e| EngineError::new(ErrorKind::Host, e.to_string()))
            }
            service::LLM_COMPLETE if self.llm.is_some() => {
                let request: LlmRequest = serde_json::from_str(payload_json)
                    .map_err(|e| EngineError::invalid_params(method, e))?;
                let llm = self.llm.as_ref().map(Arc::clone);
                let Some(llm) = llm else {
                    return Err(EngineError::unsupported(method));
                };
                let response = llm.complete(&request)?;
                serde_json::to_string(&response)
                    .map_err(|e| EngineError::new(ErrorKind::Host, e.to_string()))
            }
            service::LLM_COMPLETE | service::SESSION_READ | service::SESSION_REWRITE => {
                Err(EngineError::new(
                    ErrorKind::Unsupported,
                    format!(
                        "host service `{method}` is not available in this build of rampart; \
                         the engine should use its default behaviour"
                    ),
                ))
            }
            other => Err(EngineError::unsupported(other)),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "services_tests.rs"]
mod tests;
