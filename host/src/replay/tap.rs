//! A [`ModelSource`] that records every request the model receives, answered or refused.
//!
//! Why not the run loop's [`TurnReport::requests`](crate::run::TurnReport): a call that ends in
//! an error returns no report, yet the requests it sent (an overflow the provider refused, say)
//! were received by the model all the same, and `--requests-out` promises every one of them.
//! Wrapping the providers sees each request exactly as the provider got it, whatever the outcome.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use rampart_context::guards::window::WindowNumbers;
use rampart_context::tokens::{CountMode, TokenCounter};
use rampart_engine_api::protocol::ModelRef;

use crate::config::{Config, ModelName};
use crate::providers::{
    ModelRequest, ModelResponse, Provider, ProviderError, wire_list, wire_messages,
};
use crate::run::{ModelSource, ResolvedProvider, TurnError};

/// One request as the provider received it (the messages its wire adapter sends: errored and
/// aborted turns and excluded shell runs left out, as [`wire_messages`] says), with the prompt
/// size.
#[derive(Debug, Clone)]
pub struct Tapped {
    /// The model asked.
    pub model: ModelName,
    /// The system prompt sent.
    pub system: Option<String>,
    /// The messages sent.
    pub messages: rampart_message::MessageList,
    /// The provider's usage when it answered; else the size its error stated; else the
    /// host's count with the model's tokenizer (what the simulator counts too).
    pub prompt_tokens: u64,
    /// Whether the provider answered.
    pub answered: bool,
    /// The body the wire adapter of the provider's family sends (see
    /// [`RequestRecord::wire`](crate::run::RequestRecord)).
    pub wire: Option<serde_json::Value>,
}

type Log = Arc<Mutex<Vec<Tapped>>>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Wraps a [`ModelSource`], recording every request made through the providers it resolves.
pub struct TapSource<'a> {
    inner: &'a dyn ModelSource,
    log: Log,
    counters: Mutex<HashMap<CountMode, TokenCounter>>,
    /// Whether each request's wire body is built ([`TapSource::recording_wire`]).
    record_wire: bool,
}

impl std::fmt::Debug for TapSource<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TapSource").finish_non_exhaustive()
    }
}

impl<'a> TapSource<'a> {
    /// A tap over `inner`.
    pub fn new(inner: &'a dyn ModelSource) -> Self {
        Self {
            inner,
            log: Arc::default(),
            counters: Mutex::default(),
            record_wire: false,
        }
    }

    /// Also records the body the provider family's adapter would send ([`Tapped::wire`]).
    /// Off by default: it serialises the whole history at every call, which only someone
    /// reading the requests (`--requests-out`, a test) needs.
    pub fn recording_wire(mut self, yes: bool) -> Self {
        self.record_wire = yes;
        self
    }

    /// The requests recorded since the last call, in order.
    pub fn take(&self) -> Vec<Tapped> {
        std::mem::take(&mut *lock(&self.log))
    }
}

impl ModelSource for TapSource<'_> {
    fn resolve(&self, name: &ModelName) -> Result<ResolvedProvider, TurnError> {
        let resolved = self.inner.resolve(name)?;
        let counter = lock(&self.counters)
            .entry(resolved.count_mode)
            .or_insert_with(|| TokenCounter::new(resolved.count_mode))
            .clone();
        Ok(ResolvedProvider {
            provider: Arc::new(TapProvider {
                inner: resolved.provider.clone(),
                name: name.clone(),
                log: Arc::clone(&self.log),
                counter,
                family: self.record_wire.then_some(resolved.family),
            }),
            family: resolved.family,
            count_mode: resolved.count_mode,
        })
    }

    fn reported_window(&self, name: &ModelName) -> WindowNumbers {
        self.inner.reported_window(name)
    }

    fn compaction_model(
        &self,
        config: &Config,
        chat: &ModelRef,
    ) -> Result<Option<ModelRef>, TurnError> {
        self.inner.compaction_model(config, chat)
    }
}

struct TapProvider {
    inner: Arc<dyn Provider>,
    name: ModelName,
    log: Log,
    counter: TokenCounter,
    /// The family whose wire body is recorded; `None` when none is.
    family: Option<rampart_context::hygiene::Provider>,
}

impl Provider for TapProvider {
    fn id(&self) -> &str {
        self.inner.id()
    }

    fn is_simulated(&self) -> bool {
        self.inner.is_simulated()
    }

    fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        let result = self.inner.complete(request);
        let prompt_tokens = match &result {
            Ok(response) => {
                let u = &response.message.usage;
                u.input + u.cache_read + u.cache_write
            }
            Err(ProviderError::ContextOverflow {
                observed_tokens: Some(n),
                ..
            }) => *n,
            Err(_) => {
                let system = request.system.as_deref().map_or(0, |s| {
                    self.counter
                        .count_text(&crate::providers::text::wire_system(s).text())
                });
                system + self.counter.count_total(&wire_messages(&request.messages))
            }
        };
        lock(&self.log).push(Tapped {
            model: self.name.clone(),
            system: request.system.clone(),
            messages: wire_list(&request.messages),
            prompt_tokens,
            answered: result.is_ok(),
            wire: self.family.and_then(|family| wire_body(family, request)),
        });
        result
    }
}

/// The body the adapter of `family` sends for `request`; `None` for a family Rampart has no
/// adapter of (the generic simulator, Gemini).
fn wire_body(
    family: rampart_context::hygiene::Provider,
    request: &ModelRequest,
) -> Option<serde_json::Value> {
    use rampart_context::hygiene::Provider as Family;
    match family {
        Family::Anthropic => Some(crate::providers::anthropic::request_body(request)),
        Family::OpenAiCompletions => Some(crate::providers::openai::request_body(request)),
        Family::Gemini | Family::Other => None,
    }
}
