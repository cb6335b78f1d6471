//! `rampart-engine-test`: what an engine author needs to test an engine without a host.
//!
//! Why a kit: every engine needs a host to call back (`llm.complete`, blobs, session reads,
//! token counts, the clock), and each engine's tests used to write their own null host. This
//! crate gives one [`FakeHost`] with scripted answers and a record of every call, message
//! [`build`]ers, and a [`Harness`] that drives an engine through the same JSON dispatch the ABI
//! uses, so a parameter or result that would not survive the trip fails here, not in a host.
//! [`conformance::run`] loads a built engine library and checks every method's contract.
//!
//! ```
//! use rampart_engine_test::{FakeHost, Harness, build};
//! # use rampart_engine_api::protocol::*;
//! # use rampart_engine_api::*;
//! # struct Keep;
//! # impl ContextEngine for Keep {
//! #     fn info(&self) -> EngineInfo { EngineInfo { id: "keep".into(), ..Default::default() } }
//! #     fn ingest(&self, _: &CallContext<'_>, _: IngestParams) -> Result<IngestResult, EngineError> { Ok(Default::default()) }
//! #     fn assemble(&self, _: &CallContext<'_>, p: AssembleParams) -> Result<AssembleResult, EngineError> {
//! #         Ok(AssembleResult { messages: p.messages, ..Default::default() }) }
//! #     fn compact(&self, _: &CallContext<'_>, _: CompactParams) -> Result<CompactResult, EngineError> { Ok(Default::default()) }
//! # }
//! let host = FakeHost::new();
//! let harness = Harness::new(Keep, &host);
//! let out = harness.assemble(vec![build::user("hello")], Some(1_000)).unwrap();
//! assert_eq!(out.messages.len(), 1);
//! ```

pub mod conformance;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use rampart_engine_api::engine::NeverCancelled;
use rampart_engine_api::export::dispatch;
use rampart_engine_api::host::{
    BlobPutRequest, BlobRef, ClockReading, LlmRequest, LlmResponse, SessionReadRequest,
    SessionSnapshot, service,
};
use rampart_engine_api::protocol::{
    AssembleParams, AssembleResult, CompactParams, CompactResult, IngestParams, IngestResult,
    method,
};
use rampart_engine_api::tokens::{TokenCount, TokenCountRequest, estimate_message_tokens};
use rampart_engine_api::{
    AgentMessage, CallContext, ContextEngine, EngineError, ErrorKind, Host, HostApi, LogLevel,
    MessageList,
};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// How the fake host counts tokens for `tokens.count`.
type Counter = Arc<dyn Fn(&str, &AgentMessage) -> u64 + Send + Sync>;

/// One call an engine made to the host, as recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct HostCall {
    /// The service name (`llm.complete`, …).
    pub method: String,
    /// Its parameters as JSON.
    pub payload: Value,
}

/// One log line an engine wrote through the host.
#[derive(Debug, Clone, PartialEq)]
pub struct LogLine {
    /// Its severity.
    pub level: LogLevel,
    /// The message.
    pub message: String,
}

#[derive(Default)]
struct State {
    calls: Vec<HostCall>,
    logs: Vec<LogLine>,
    llm_replies: VecDeque<Result<String, EngineError>>,
    blobs: HashMap<String, String>,
    sessions: HashMap<String, SessionSnapshot>,
    now_ms: u64,
    counter: Option<Counter>,
}

/// A host for tests: answers every service of the engine API from scripted state and records
/// each call. Clones share their state.
#[derive(Clone, Default)]
pub struct FakeHost {
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for FakeHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FakeHost")
    }
}

impl FakeHost {
    /// A host that counts tokens with the engine API's estimate, has no scripted model replies
    /// (so `llm.complete` fails with a host error), no sessions, and a clock at 0.
    pub fn new() -> Self {
        let host = Self::default();
        host.state().counter = Some(Arc::new(|_, m| estimate_message_tokens(m)));
        host
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A test that panicked while holding the lock has failed already; its state is still
        // the best record of what happened.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues the text of the next `llm.complete` answer.
    pub fn reply(self, text: impl Into<String>) -> Self {
        self.state().llm_replies.push_back(Ok(text.into()));
        self
    }

    /// Queues a failure as the next `llm.complete` answer.
    pub fn fail_next_llm(self, error: EngineError) -> Self {
        self.state().llm_replies.push_back(Err(error));
        self
    }

    /// Answers `tokens.count` with `count(tokenizer, message)` for each message.
    pub fn count_tokens_with(
        self,
        count: impl Fn(&str, &AgentMessage) -> u64 + Send + Sync + 'static,
    ) -> Self {
        self.state().counter = Some(Arc::new(count));
        self
    }

    /// Makes `tokens.count` answer `unsupported`, as a host before 1.1 does.
    pub fn without_token_counting(self) -> Self {
        self.state().counter = None;
        self
    }

    /// Makes `session.read` of `snapshot.session_id` answer `snapshot`.
    pub fn with_session(self, snapshot: SessionSnapshot) -> Self {
        self.state()
            .sessions
            .insert(snapshot.session_id.clone(), snapshot);
        self
    }

    /// Sets the clock.
    pub fn at(self, unix_ms: u64) -> Self {
        self.state().now_ms = unix_ms;
        self
    }

    /// Every service call so far, in order.
    pub fn calls(&self) -> Vec<HostCall> {
        self.state().calls.clone()
    }

    /// The calls to one service.
    pub fn calls_to(&self, method: &str) -> Vec<HostCall> {
        self.calls()
            .into_iter()
            .filter(|c| c.method == method)
            .collect()
    }

    /// Every log line so far.
    pub fn logs(&self) -> Vec<LogLine> {
        self.state().logs.clone()
    }

    /// A stored blob's content, by its reference.
    pub fn blob(&self, reference: &str) -> Option<String> {
        self.state().blobs.get(reference).cloned()
    }

    /// The engine-facing handle.
    pub fn host(&self) -> Host {
        Host::new(Arc::new(self.clone()))
    }

    fn answer(&self, method: &str, payload: &Value) -> Result<Value, EngineError> {
        fn parse<T: serde::de::DeserializeOwned>(m: &str, v: &Value) -> Result<T, EngineError> {
            serde_json::from_value(v.clone()).map_err(|e| EngineError::invalid_params(m, e))
        }
        fn json<T: serde::Serialize>(v: &T) -> Result<Value, EngineError> {
            serde_json::to_value(v).map_err(|e| EngineError::new(ErrorKind::Host, e.to_string()))
        }
        match method {
            service::EVENTS_EMIT => Ok(Value::Null),
            service::CLOCK_NOW => json(&ClockReading {
                unix_ms: self.state().now_ms,
            }),
            service::LLM_COMPLETE => {
                let request: LlmRequest = parse(method, payload)?;
                let next = self.state().llm_replies.pop_front();
                match next {
                    Some(Ok(text)) => json(&LlmResponse {
                        text,
                        model: request.model.unwrap_or_else(|| "fake/model".into()),
                        ..Default::default()
                    }),
                    Some(Err(e)) => Err(e),
                    None => Err(EngineError::new(
                        ErrorKind::Host,
                        "the fake host has no scripted reply left for llm.complete \
                         (queue one with FakeHost::reply)",
                    )),
                }
            }
            service::BLOBS_PUT => {
                let request: BlobPutRequest = parse(method, payload)?;
                let digest = Sha256::digest(request.content.as_bytes());
                let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
                let reference = format!("sha256:{hex}");
                let bytes = request.content.len() as u64;
                self.state()
                    .blobs
                    .insert(reference.clone(), request.content);
                json(&BlobRef { reference, bytes })
            }
            service::SESSION_READ => {
                let request: SessionReadRequest = parse(method, payload)?;
                let snapshot = self.state().sessions.get(&request.session_id).cloned();
                match snapshot {
                    Some(s) => json(&s),
                    None => Err(EngineError::new(
                        ErrorKind::InvalidParams,
                        format!("the fake host has no session {}", request.session_id),
                    )),
                }
            }
            service::TOKENS_COUNT => {
                let request: TokenCountRequest = parse(method, payload)?;
                let counter = self.state().counter.clone();
                let Some(count) = counter else {
                    return Err(EngineError::unsupported(method));
                };
                json(&TokenCount {
                    counts: request
                        .messages
                        .iter()
                        .map(|m| count(&request.tokenizer, m))
                        .collect(),
                    exact: true,
                    tokenizer: request.tokenizer,
                })
            }
            _ => Err(EngineError::unsupported(method)),
        }
    }
}

impl HostApi for FakeHost {
    fn log(&self, level: LogLevel, _target: &str, message: &str, _fields_json: &str) {
        self.state().logs.push(LogLine {
            level,
            message: message.to_string(),
        });
    }

    fn call(&self, method: &str, payload_json: &str) -> Result<String, EngineError> {
        let payload: Value = serde_json::from_str(payload_json).unwrap_or(Value::Null);
        self.state().calls.push(HostCall {
            method: method.to_string(),
            payload: payload.clone(),
        });
        self.answer(method, &payload).map(|v| v.to_string())
    }
}

/// Drives an engine through the JSON dispatch that `export_engine!` uses, with a [`FakeHost`].
pub struct Harness<E> {
    engine: E,
    host: Host,
}

impl<E: ContextEngine> Harness<E> {
    /// A harness for `engine`, calling back into `host`.
    pub fn new(engine: E, host: &FakeHost) -> Self {
        Self {
            engine,
            host: host.host(),
        }
    }

    /// The engine under test.
    pub fn engine(&self) -> &E {
        &self.engine
    }

    /// Calls `method` with `params`, encoded and decoded as across the ABI.
    pub fn call<P: serde::Serialize, R: serde::de::DeserializeOwned>(
        &self,
        method_name: &str,
        params: &P,
    ) -> Result<R, EngineError> {
        let cx = CallContext::new(&self.host, &NeverCancelled, None);
        let payload = serde_json::to_string(params)
            .map_err(|e| EngineError::invalid_params(method_name, e))?;
        let answer = dispatch(&self.engine, &cx, method_name, &payload)?;
        serde_json::from_str(&answer).map_err(|e| {
            EngineError::engine(format!("the answer to `{method_name}` did not decode: {e}"))
        })
    }

    /// `assemble` of `messages` with a token budget.
    pub fn assemble(
        &self,
        messages: impl Into<MessageList>,
        token_budget: Option<u64>,
    ) -> Result<AssembleResult, EngineError> {
        self.call(
            method::ASSEMBLE,
            &AssembleParams {
                messages: messages.into(),
                token_budget,
                ..Default::default()
            },
        )
    }

    /// `ingest` of one message into `session_id`.
    pub fn ingest(
        &self,
        session_id: &str,
        message: AgentMessage,
    ) -> Result<IngestResult, EngineError> {
        let mut params = IngestParams {
            message: Some(Arc::new(message)),
            ..Default::default()
        };
        params.session.session_id = session_id.to_string();
        self.call(method::INGEST, &params)
    }

    /// `compact` with the given parameters.
    pub fn compact(&self, params: &CompactParams) -> Result<CompactResult, EngineError> {
        self.call(method::COMPACT, params)
    }
}

/// Message builders with pi's shapes and zero timestamps.
pub mod build {
    use rampart_engine_api::AgentMessage;
    use serde_json::{Value, json};

    /// A user message.
    pub fn user(text: impl Into<String>) -> AgentMessage {
        AgentMessage::user_text(text, 0)
    }

    fn assistant(content: Value, stop_reason: &str) -> AgentMessage {
        let message = json!({
            "role": "assistant", "content": content,
            "api": "test", "provider": "test", "model": "test",
            "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                      "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
            "stopReason": stop_reason, "timestamp": 0
        });
        // The shape above is pi's; a failure here is a bug in this kit, and tests should see it.
        serde_json::from_value(message).unwrap_or_else(|e| panic!("assistant builder: {e}"))
    }

    /// An assistant reply with text.
    pub fn assistant_text(text: &str) -> AgentMessage {
        assistant(json!([{"type": "text", "text": text}]), "stop")
    }

    /// An assistant turn calling tools: `(id, name, arguments)` each.
    pub fn assistant_calls(calls: &[(&str, &str, Value)]) -> AgentMessage {
        let blocks: Vec<Value> = calls
            .iter()
            .map(|(id, name, args)| {
                json!({"type": "toolCall", "id": id, "name": name, "arguments": args})
            })
            .collect();
        assistant(Value::Array(blocks), "toolUse")
    }

    /// A tool result answering call `id`.
    pub fn tool_result(id: &str, tool: &str, text: impl Into<String>) -> AgentMessage {
        AgentMessage::tool_result(id, tool, text, false, 0)
    }
}
