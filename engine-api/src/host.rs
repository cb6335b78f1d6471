//! [`Host`]: the services an engine may call back into.
//!
//! The typed methods here are thin: each is one named JSON call (`events.emit`, `llm.complete`,
//! `session.read`, `session.rewrite`, `clock.now`, `blobs.put`, `blobs.get`, `tokens.count`, `state.dir`) over [`HostApi::call`], so the set can grow in
//! any 1.x host without touching the frozen ABI. A host that does not offer a service answers
//! `unsupported`, and the typed method reports that as an error the engine can act on.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::{EngineError, ErrorKind};
use crate::message::AgentMessage;
use crate::protocol::TranscriptRewriteResult;

/// Names of the host services, as carried by [`HostApi::call`].
pub mod service {
    /// Publish an event on the host's event stream.
    pub const EVENTS_EMIT: &str = "events.emit";
    /// Ask the host's model for a completion (compaction uses this).
    pub const LLM_COMPLETE: &str = "llm.complete";
    /// Read the active branch of a session.
    pub const SESSION_READ: &str = "session.read";
    /// Rewrite session entries by branch and re-append (never in place).
    pub const SESSION_REWRITE: &str = "session.rewrite";
    /// The host's clock in Unix milliseconds (tests pin it).
    pub const CLOCK_NOW: &str = "clock.now";
    /// Keep a full original (for example an uncapped tool result) in the host's
    /// content-addressed blob store, so shortening it loses nothing.
    pub const BLOBS_PUT: &str = "blobs.put";
    /// Count messages with a tokenizer the host has (exact BPE counts included), so an engine
    /// needs no vocabulary of its own.
    pub const TOKENS_COUNT: &str = "tokens.count";
    /// Read a blob back by its reference (API 1.2): the full original of a result the host
    /// capped (named by [`crate::message::ORIGINAL_BLOB_KEY`]) or one the engine stored.
    pub const BLOBS_GET: &str = "blobs.get";
    /// The directory the host gives this engine for state it derives from sessions (API 1.2):
    /// beside the sessions for `rampart run` and `serve`, a scratch directory for `replay` and
    /// `eval`, so a replay never writes into the state of real conversations.
    pub const STATE_DIR: &str = "state.dir";
}

/// Severity of a log line, shared by both sides of the ABI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    /// Very verbose diagnostics.
    Trace,
    /// Diagnostics.
    Debug,
    /// Normal operation worth recording.
    Info,
    /// Something unexpected that was handled.
    Warn,
    /// A failure.
    Error,
}

impl LogLevel {
    /// The wire code used by the ABI's `log` function.
    pub fn code(self) -> u8 {
        match self {
            LogLevel::Trace => 0,
            LogLevel::Debug => 1,
            LogLevel::Info => 2,
            LogLevel::Warn => 3,
            LogLevel::Error => 4,
        }
    }

    /// Decodes a wire code; out-of-range codes are treated as `Error` so nothing is hidden.
    pub fn from_code(code: u8) -> Self {
        match code {
            0 => LogLevel::Trace,
            1 => LogLevel::Debug,
            2 => LogLevel::Info,
            3 => LogLevel::Warn,
            _ => LogLevel::Error,
        }
    }
}

/// The raw interface a host implements. Engines use it through [`Host`].
pub trait HostApi: Send + Sync {
    /// Records a log line from the engine. Must never panic: across the ABI a panic would end
    /// the process.
    fn log(&self, level: LogLevel, target: &str, message: &str, fields_json: &str);
    /// Performs a named service call with a JSON payload, answering JSON.
    fn call(&self, method: &str, payload_json: &str) -> Result<String, EngineError>;
}

/// The host as an engine sees it. Cheap to clone; valid for the engine's whole life.
#[derive(Clone)]
pub struct Host {
    api: Arc<dyn HostApi>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Host")
    }
}

impl Host {
    /// Wraps a host implementation.
    pub fn new(api: Arc<dyn HostApi>) -> Self {
        Self { api }
    }

    /// The raw interface, for services this version has no typed method for.
    pub fn api(&self) -> &Arc<dyn HostApi> {
        &self.api
    }

    /// Writes a log line through the host's subscriber.
    pub fn log(&self, level: LogLevel, target: &str, message: &str, fields: &serde_json::Value) {
        let fields_json = if fields.is_null() {
            String::new()
        } else {
            fields.to_string()
        };
        self.api.log(level, target, message, &fields_json);
    }

    /// Calls a service with typed request and response.
    pub fn call<Req: Serialize, Resp: for<'de> Deserialize<'de>>(
        &self,
        method: &str,
        request: &Req,
    ) -> Result<Resp, EngineError> {
        let payload =
            serde_json::to_string(request).map_err(|e| EngineError::invalid_params(method, e))?;
        let answer = self.api.call(method, &payload)?;
        serde_json::from_str(&answer).map_err(|e| {
            EngineError::new(
                ErrorKind::Host,
                format!("the host's answer to `{method}` could not be decoded: {e}"),
            )
        })
    }

    /// Publishes an event on the host's event stream (observable with `--events FILE`).
    pub fn emit_event(&self, event: &EngineEvent) -> Result<(), EngineError> {
        let _: serde_json::Value = self.call(service::EVENTS_EMIT, event)?;
        Ok(())
    }

    /// Asks the host's model for a completion. The host picks the model and enforces the
    /// timeout and cancellation.
    pub fn llm_complete(&self, request: &LlmRequest) -> Result<LlmResponse, EngineError> {
        self.call(service::LLM_COMPLETE, request)
    }

    /// Reads the active branch of a session.
    pub fn session_read(
        &self,
        request: &SessionReadRequest,
    ) -> Result<SessionSnapshot, EngineError> {
        self.call(service::SESSION_READ, request)
    }

    /// Rewrites message entries by branch and re-append; the originals stay in the file.
    pub fn session_rewrite(
        &self,
        request: &SessionRewriteRequest,
    ) -> Result<TranscriptRewriteResult, EngineError> {
        self.call(service::SESSION_REWRITE, request)
    }

    /// Stores `content` in the host's blob store and returns its reference (`sha256:<hex>`),
    /// which a shortened message should name so the original can be found.
    pub fn put_blob(&self, request: &BlobPutRequest) -> Result<BlobRef, EngineError> {
        self.call(service::BLOBS_PUT, request)
    }

    /// Reads a blob back (see [`service::BLOBS_GET`]); `Ok(None)` when the host offers no blob
    /// store (a host before 1.2 included).
    pub fn get_blob(&self, reference: &str) -> Result<Option<BlobContent>, EngineError> {
        let request = BlobGetRequest {
            reference: reference.to_owned(),
        };
        match self.call::<_, BlobContent>(service::BLOBS_GET, &request) {
            Ok(content) => Ok(Some(content)),
            Err(e) if e.kind == ErrorKind::Unsupported => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Counts each message with the tokenizer named in the request (see
    /// [`crate::tokens::TokenCountRequest`]). A host before 1.1 answers `unsupported`; the
    /// engine then estimates with [`crate::tokens::estimate_message_tokens`].
    pub fn count_tokens(
        &self,
        request: &crate::tokens::TokenCountRequest,
    ) -> Result<crate::tokens::TokenCount, EngineError> {
        self.call(service::TOKENS_COUNT, request)
    }

    /// The directory the host gives this engine for its state (see [`StateDir`]); `None` when
    /// the host gives none (a host before 1.2, or one whose sessions live in a database), and
    /// the engine then uses its own configuration or default.
    pub fn state_dir(&self) -> Result<Option<StateDir>, EngineError> {
        match self.call::<_, StateDir>(service::STATE_DIR, &serde_json::Value::Null) {
            Ok(dir) => Ok(Some(dir)),
            Err(e) if e.kind == ErrorKind::Unsupported => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The host's clock in Unix milliseconds. Falls back to the system clock when the host does
    /// not offer one, because every host has a clock.
    pub fn now_ms(&self) -> u64 {
        match self.call::<_, ClockReading>(service::CLOCK_NOW, &serde_json::Value::Null) {
            Ok(reading) => reading.unix_ms,
            Err(_) => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
        }
    }
}

/// Parameters of `blobs.put`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct BlobPutRequest {
    /// The session the content belongs to, for the host's bookkeeping.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// What the content is (`text/plain`, `application/json`, …).
    pub media_type: String,
    /// The content, as text (tool outputs are text in pi's format).
    pub content: String,
}

/// Answer of `blobs.put`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct BlobRef {
    /// The reference, `sha256:<64 hex digits>`.
    pub reference: String,
    /// Bytes stored.
    pub bytes: u64,
}

/// Parameters of `blobs.get`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct BlobGetRequest {
    /// `sha256:` and 64 hex digits.
    pub reference: String,
}

/// Answer of `blobs.get`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct BlobContent {
    /// The blob as text (bytes that are not UTF-8 replaced by U+FFFD).
    pub content: String,
    /// Its size in bytes.
    pub bytes: u64,
}

/// Answer of `state.dir`: a directory that exists, owned by the host's user, for this engine
/// alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct StateDir {
    /// The directory.
    pub path: String,
    /// True when it is scratch (a replay or an eval, removed when it ends): keep state there
    /// even when your configuration names another place, so a replay never writes into the
    /// state of real conversations. False: prefer a place the user configured.
    pub scratch: bool,
}

/// Answer of `clock.now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct ClockReading {
    /// Milliseconds since the Unix epoch.
    pub unix_ms: u64,
}

/// An event an engine publishes. `kind` names it (`compaction_start`, …); `data` is free-form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct EngineEvent {
    /// What happened, in snake_case.
    pub kind: String,
    /// The session it happened in, when it is about one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Details.
    pub data: serde_json::Value,
}

/// A completion request to the host's model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct LlmRequest {
    /// What the completion is for (`compaction`, …): the host picks the model by purpose.
    pub purpose: String,
    /// The system prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// The conversation to complete.
    pub messages: Vec<AgentMessage>,
    /// An upper bound on the answer's tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// The model to ask, as `provider/model` (for compaction: the `compactionModel` the host
    /// put in [`crate::protocol::CompactParams`]). `None` lets the host pick by `purpose`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// How long the engine will wait, in milliseconds. The host ends the provider request by
    /// then, retries and back-off included, so a compaction that gives up leaves nothing
    /// running.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// The session the completion is for (API 1.2, additive): the host answers with that
    /// conversation's credential when it has one (`rampart serve`: the key the conversation's
    /// client presented, per `serve.engineCredentials`), so an engine's summaries are billed
    /// and authorised like the conversation they serve. `None` from older engines: the
    /// provider's own key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// The host model's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct LlmResponse {
    /// The completion text.
    pub text: String,
    /// The model that answered.
    pub model: String,
    /// Prompt tokens the provider reported.
    pub input_tokens: u64,
    /// Completion tokens the provider reported.
    pub output_tokens: u64,
}

/// Parameters of `session.read`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct SessionReadRequest {
    /// The session to read.
    pub session_id: String,
    /// Read the branch ending at this entry instead of the current leaf.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leaf_id: Option<String>,
}

/// One message entry of the active branch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct SessionMessageEntry {
    /// The entry id (8 hex characters).
    pub entry_id: String,
    /// The message, absent for entries that carry none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<AgentMessage>,
}

/// Answer of `session.read`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct SessionSnapshot {
    /// The session's id.
    pub session_id: String,
    /// The leaf the branch ends at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leaf_id: Option<String>,
    /// The entries of the branch, root first.
    pub entries: Vec<SessionMessageEntry>,
}

/// One replacement of a `session.rewrite`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct Replacement {
    /// The message entry to replace.
    pub entry_id: String,
    /// Its new message.
    pub message: Option<AgentMessage>,
}

/// Parameters of `session.rewrite`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct SessionRewriteRequest {
    /// The session to rewrite.
    pub session_id: String,
    /// The replacements.
    pub replacements: Vec<Replacement>,
}

/// Why `llm.complete` failed, as the host's provider classified it. It travels in the
/// [`EngineError::details`] of the error (see [`EngineError::llm_failure`]), so an engine acts
/// on the class and the figures, never on the provider's wording: a "prompt is too long" in
/// any of a dozen providers' words arrives as [`LlmFailure::ContextOverflow`] with the size the
/// provider stated. A kind this version does not know reads as [`LlmFailure::Other`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum LlmFailure {
    /// The prompt does not fit the model's window.
    ContextOverflow {
        /// The prompt size the provider reported, when it did.
        #[serde(
            default,
            rename = "observedTokens",
            skip_serializing_if = "Option::is_none"
        )]
        observed_tokens: Option<u64>,
    },
    /// Rate limited, still after the host's retries.
    RateLimited,
    /// A server error or a dropped connection, still after the host's retries.
    Transient,
    /// The API key was refused, or none is configured.
    Auth,
    /// The provider could not be reached.
    Unreachable,
    /// No answer in time.
    Timeout,
    /// The provider refused the request itself.
    BadRequest,
    /// The provider answered something the host could not read.
    InvalidResponse,
    /// The request was cancelled.
    Cancelled,
    /// A kind this version does not know.
    #[serde(other)]
    Other,
}

/// The key of [`LlmFailure`] in an error's details.
const LLM_FAILURE_KEY: &str = "llmFailure";

impl EngineError {
    /// This error, carrying `failure` in its details.
    pub fn with_llm_failure(mut self, failure: &LlmFailure) -> Self {
        let value = serde_json::to_value(failure).unwrap_or(serde_json::Value::Null);
        match &mut self.details {
            serde_json::Value::Object(map) => {
                map.insert(LLM_FAILURE_KEY.to_string(), value);
            }
            other => *other = serde_json::json!({ LLM_FAILURE_KEY: value }),
        }
        self
    }

    /// The classified failure of an `llm.complete` error; `None` from a host before 1.1 or
    /// for other errors.
    pub fn llm_failure(&self) -> Option<LlmFailure> {
        serde_json::from_value(self.details.get(LLM_FAILURE_KEY)?.clone()).ok()
    }
}
