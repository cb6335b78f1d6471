//! The embedded simulated model: the default model, with no network.
//!
//! Why a simulator: the context defences only show their worth when a prompt does not fit, and
//! a real provider makes that slow, costly and unrepeatable. The simulator behaves like a model
//! with a given window, which is what the defences care about:
//!
//! - it counts every prompt (system prompt, messages and tool schemas) with the model's tokenizer
//!   (`tokenizer` of the model entry: `estimate` by default, or `o200k_base`, `cl100k_base`,
//!   `calibrated`), using the shared [`TokenCounter`] the host and engines budget with. One
//!   counter per model, built once, so an unchanged history costs one memo lookup per message;
//! - when the prompt is larger than the window, it fails exactly as a real provider would: a
//!   [`ProviderError::ContextOverflow`] carrying that provider's real error text
//!   (`overflowWording`: `anthropic` by default, `openai`, `gemini`, `ollama`, `bedrock`), so
//!   that the run loop's text recognition is exercised as in production;
//! - otherwise it answers with the next scripted reply ([`SimProvider::push_reply`], which a
//!   replay of a recorded session feeds), or else with a generated one:
//!   `(sim) reply to turn with {n} prompt tokens`.
//!
//! The window of a model is its entry's `contextTokens`, else its `contextWindow`, else
//! [`DEFAULT_CONTEXT_TOKENS`] (200,000), read the way the context-window guard reads it. A
//! model id the settings do not list is refused with a 404-style [`ProviderError::BadRequest`]
//! naming the known ids: a typo in `agents.defaults.model` must not silently get a 200,000
//! window. Only a simulator configured with no models at all accepts any id, with the default
//! window and the estimate.
//!
//! `max_tokens` of a request is not enforced: scripted replies are returned as recorded, and a
//! generated reply is a few tokens long.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::str::FromStr;
use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use rampart_context::guards::window::{
    DEFAULT_CONTEXT_TOKENS, WindowNumbers, WindowSources, resolve_context_window,
};
use rampart_context::overflow::observed_overflow_tokens;
use rampart_context::tokens::{CountMode, TokenCounter};
use rampart_message::{AgentMessage, AssistantMessage, ContentBlock, StopReason};

use super::{ModelRequest, ModelResponse, Provider, ProviderError, ProviderSettings};

/// The `api` value the simulator writes into its replies, as pi records a wire API.
pub const SIM_API: &str = "sim";

/// Settings the simulator refuses, made by hand rather than read from a file (the
/// configuration checks the same things first and names the file and line). Names the dotted
/// key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{key}` {problem}")]
pub struct SettingsError {
    /// The dotted key, e.g. `models.providers.sim.models[1].id`.
    pub key: String,
    /// What is wrong and what is allowed.
    pub problem: String,
}

/// Whose overflow error text the simulator answers with (`overflowWording`). Why it matters:
/// the run loop recognises overflows by their text, and each provider words them differently;
/// some state the prompt size (which compaction then uses), some do not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum OverflowWording {
    /// `prompt is too long: {n} tokens > {window} maximum` (the Messages API's
    /// `invalid_request_error`).
    #[default]
    Anthropic,
    /// `This model's maximum context length is {window} tokens. However, your messages resulted
    /// in {n} tokens. Please reduce the length of the messages.` (`context_length_exceeded`).
    OpenAi,
    /// `400 INVALID_ARGUMENT: The input token count ({n}) exceeds the maximum number of tokens
    /// allowed ({window}).` (the Gemini API; the size is stated, but not in a form OpenClaw
    /// extracts).
    Gemini,
    /// `ollama error: context length exceeded, too many tokens` (no numbers).
    Ollama,
    /// `ValidationException: Input is too long for requested model.` (Bedrock; no numbers).
    Bedrock,
}

impl OverflowWording {
    /// Every wording, in the order error messages list them.
    pub const ALL: [Self; 5] = [
        Self::Anthropic,
        Self::OpenAi,
        Self::Gemini,
        Self::Ollama,
        Self::Bedrock,
    ];

    /// The configuration spelling.
    pub fn name(self) -> &'static str {
        match self {
            Self::Anthropic => "anthropic",
            Self::OpenAi => "openai",
            Self::Gemini => "gemini",
            Self::Ollama => "ollama",
            Self::Bedrock => "bedrock",
        }
    }

    /// The allowed spellings, quoted and comma-separated, for error messages.
    pub fn allowed() -> String {
        Self::ALL
            .iter()
            .map(|w| format!("\"{}\"", w.name()))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The provider's error text for a prompt of `prompt_tokens` against `window`.
    pub fn message(self, prompt_tokens: u64, window: u64) -> String {
        match self {
            Self::Anthropic => {
                format!("prompt is too long: {prompt_tokens} tokens > {window} maximum")
            }
            Self::OpenAi => format!(
                "This model's maximum context length is {window} tokens. However, your messages \
                 resulted in {prompt_tokens} tokens. Please reduce the length of the messages."
            ),
            Self::Gemini => format!(
                "400 INVALID_ARGUMENT: The input token count ({prompt_tokens}) exceeds the \
                 maximum number of tokens allowed ({window})."
            ),
            Self::Ollama => "ollama error: context length exceeded, too many tokens".to_string(),
            Self::Bedrock => {
                "ValidationException: Input is too long for requested model.".to_string()
            }
        }
    }
}

impl fmt::Display for OverflowWording {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A wording name that is not one of [`OverflowWording::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown overflow wording {0:?}: expected one of {allowed}", allowed = OverflowWording::allowed())]
pub struct UnknownOverflowWording(pub String);

impl FromStr for OverflowWording {
    type Err = UnknownOverflowWording;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|w| w.name() == s)
            .ok_or_else(|| UnknownOverflowWording(s.to_string()))
    }
}

/// What the simulator has seen so far; read by tests and by a replay's report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimLog {
    /// Requests received, answered or not.
    pub requests: u64,
    /// Requests refused as context overflows.
    pub overflows: u64,
    /// Scripted replies handed out.
    pub scripted: u64,
    /// Prompt tokens of the last request that named a known model.
    pub last_prompt_tokens: Option<u64>,
    /// The model id of the last request.
    pub last_model: Option<String>,
}

/// One simulated model: its window and its counter (whose memo lives as long as the provider).
#[derive(Debug)]
struct SimModel {
    window: u64,
    counter: TokenCounter,
}

/// The simulated provider. `Send + Sync`: one instance serves every session of a host.
#[derive(Debug)]
pub struct SimProvider {
    id: String,
    wording: OverflowWording,
    /// By model id, as configured.
    models: HashMap<String, SimModel>,
    /// The configured ids in config order, for error messages.
    known: Vec<String>,
    /// Used for any model id when the settings list no models at all.
    fallback: Option<SimModel>,
    replies: Mutex<VecDeque<AssistantMessage>>,
    log: Mutex<SimLog>,
}

/// Locks, taking over a poisoned lock: every critical section leaves its data consistent, so a
/// panic elsewhere must not take the simulator down with it.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

impl SimProvider {
    /// Builds the simulator from its settings: one window and one counter per model.
    ///
    /// Fails with a [`SettingsError`] (the registry has already named the real file for
    /// anything read from one) when a model id appears twice.
    pub fn new(settings: &ProviderSettings) -> Result<Self, SettingsError> {
        let err = |key: String, problem: String| SettingsError { key, problem };
        let wording = settings.overflow_wording.unwrap_or_default();
        let mut models = HashMap::new();
        let mut known = Vec::new();
        for (i, entry) in settings.models.iter().enumerate() {
            let key = format!("models.providers.{}.models[{i}]", settings.id);
            let mode = entry.tokenizer.unwrap_or(CountMode::Estimate);
            let window = resolve_context_window(&WindowSources {
                models_config: WindowNumbers {
                    context_tokens: entry.context_tokens.map(|n| n as f64),
                    context_window: entry.context_window.map(|n| n as f64),
                },
                ..WindowSources::default()
            })
            .tokens;
            let model = SimModel {
                window,
                counter: TokenCounter::new(mode),
            };
            if models.insert(entry.id.clone(), model).is_some() {
                return Err(err(
                    format!("{key}.id"),
                    format!(
                        "repeats the model id {:?}; each model may appear once",
                        entry.id
                    ),
                ));
            }
            known.push(entry.id.clone());
        }
        let fallback = known.is_empty().then(|| SimModel {
            window: DEFAULT_CONTEXT_TOKENS,
            counter: TokenCounter::estimate(),
        });
        tracing::debug!(
            provider = %settings.id,
            wording = wording.name(),
            models = ?known,
            "simulated provider ready"
        );
        Ok(Self {
            id: settings.id.clone(),
            wording,
            models,
            known,
            fallback,
            replies: Mutex::new(VecDeque::new()),
            log: Mutex::new(SimLog::default()),
        })
    }

    /// Queues a reply to hand out, in order, instead of a generated one. Why: a replay feeds
    /// the assistant turns of a recorded session, so the conversation continues as recorded
    /// while the host's defences run against a chosen window. A request that overflows does
    /// not take a reply: the retry after compaction gets it.
    pub fn push_reply(&self, reply: AssistantMessage) {
        lock(&self.replies).push_back(reply);
    }

    /// Scripted replies not yet handed out.
    pub fn pending_replies(&self) -> usize {
        lock(&self.replies).len()
    }

    /// Drops every scripted reply not yet handed out.
    pub fn clear_replies(&self) {
        lock(&self.replies).clear();
    }

    /// How many requests this simulator has received (overflows and refusals included).
    pub fn requests_seen(&self) -> u64 {
        lock(&self.log).requests
    }

    /// The prompt size of the last request to a known model, as this simulator counted it.
    pub fn last_prompt_tokens(&self) -> Option<u64> {
        lock(&self.log).last_prompt_tokens
    }

    /// A copy of everything the simulator has recorded.
    pub fn log(&self) -> SimLog {
        lock(&self.log).clone()
    }

    /// The overflow wording in use.
    pub fn wording(&self) -> OverflowWording {
        self.wording
    }

    /// The window of `model`, when this simulator serves it.
    pub fn window(&self, model: &str) -> Option<u64> {
        self.model(model).map(|m| m.window)
    }

    fn model(&self, id: &str) -> Option<&SimModel> {
        self.models.get(id).or(self.fallback.as_ref())
    }

    fn unknown_model(&self, model: &str) -> ProviderError {
        ProviderError::BadRequest {
            provider: self.id.clone(),
            status: 404,
            message: format!(
                "model `{model}` does not exist; this simulator serves: {}. Pick one of those, \
                 or add it under [[models.providers.{}.models]].",
                self.known.join(", "),
                self.id
            ),
        }
    }
}

impl Provider for SimProvider {
    fn id(&self) -> &str {
        &self.id
    }

    fn is_simulated(&self) -> bool {
        true
    }

    fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        lock(&self.log).requests += 1;
        let Some(model) = self.model(&request.model) else {
            tracing::warn!(provider = %self.id, model = %request.model, "unknown simulated model");
            return Err(self.unknown_model(&request.model));
        };
        // Counted as a provider without cache breakpoints receives it: the marker stripped.
        let system = request.system.as_deref().map_or(0, |s| {
            model
                .counter
                .count_text(&super::text::wire_system(s).text())
        });
        // What a real provider's adapter would send, not what the run loop handed over.
        let sent = super::wire_list(&request.messages);
        // The tool schemas count as the run loop counts them (`ToolSpec::counted_text`).
        let tools: u64 = request
            .forwarded
            .tools
            .iter()
            .map(|t| model.counter.count_text(&t.counted_text()))
            .sum();
        let prompt_tokens = system
            .saturating_add(model.counter.count_list(&sent))
            .saturating_add(tools);
        {
            let mut log = lock(&self.log);
            log.last_prompt_tokens = Some(prompt_tokens);
            log.last_model = Some(request.model.clone());
        }

        if prompt_tokens > model.window {
            let message = self.wording.message(prompt_tokens, model.window);
            lock(&self.log).overflows += 1;
            tracing::info!(
                provider = %self.id,
                model = %request.model,
                prompt_tokens,
                window = model.window,
                wording = self.wording.name(),
                "simulated context overflow"
            );
            return Err(ProviderError::ContextOverflow {
                provider: self.id.clone(),
                observed_tokens: observed_overflow_tokens(&message),
                message,
            });
        }

        let scripted = lock(&self.replies).pop_front();
        let is_scripted = scripted.is_some();
        let mut reply = scripted.unwrap_or_else(|| AssistantMessage {
            content: vec![ContentBlock::text(format!(
                "(sim) reply to turn with {prompt_tokens} prompt tokens"
            ))],
            api: String::new(),
            provider: String::new(),
            model: String::new(),
            usage: Default::default(),
            stop_reason: StopReason::Stop,
            timestamp: 0,
            error_message: None,
            extra: Default::default(),
        });
        if is_scripted {
            lock(&self.log).scripted += 1;
        }
        reply.api = SIM_API.to_string();
        reply.provider = self.id.clone();
        reply.model = request.model.clone();
        // A scripted reply keeps the time it was recorded at: a replay's requests, session and
        // events are then the same on every run (and its clock is the transcript's). Only a
        // generated reply is stamped now.
        if !is_scripted {
            reply.timestamp = now_ms();
        }
        // The reply's own figure, counted the way the next request will count it.
        reply.usage = Default::default();
        let output = model
            .counter
            .count_message(&AgentMessage::Assistant(reply.clone()));
        reply.usage.input = prompt_tokens;
        reply.usage.output = output;
        reply.usage.total_tokens = Some(prompt_tokens.saturating_add(output));
        tracing::debug!(
            provider = %self.id,
            model = %request.model,
            prompt_tokens,
            output_tokens = output,
            window = model.window,
            scripted = is_scripted,
            "simulated reply"
        );
        Ok(ModelResponse {
            message: reply,
            retries: 0,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use rampart_context::overflow::is_likely_context_overflow_error;
    use rampart_message::wire::SharedMessage;

    use super::*;
    use crate::{ApiKind, ModelEntry, ProviderErrorKind};

    fn entry(id: &str, window: u64, tokenizer: Option<&str>) -> ModelEntry {
        ModelEntry {
            provider: "sim".into(),
            id: id.into(),
            context_window: Some(window),
            context_tokens: None,
            tokenizer: tokenizer.map(|t| t.parse().unwrap()),
            max_tokens: None,
        }
    }

    fn settings(models: Vec<ModelEntry>, wording: Option<&str>) -> ProviderSettings {
        ProviderSettings {
            id: "sim".into(),
            api: ApiKind::Sim,
            base_url: None,
            api_key_env: None,
            timeout: Duration::from_secs(120),
            stream_idle_timeout: Duration::from_secs(300),
            max_retries: 3,
            retry_base: Duration::from_millis(500),
            models,
            overflow_wording: wording.map(|w| w.parse().unwrap()),
            speaks: None,
        }
    }

    fn user(text: &str) -> SharedMessage {
        Arc::new(AgentMessage::user_text(text, 1))
    }

    fn request(model: &str, messages: Vec<SharedMessage>) -> ModelRequest {
        ModelRequest {
            model: model.into(),
            system: None,
            messages: messages.into(),
            max_tokens: None,
            deadline: None,
            ..Default::default()
        }
    }

    fn text_of(m: &AssistantMessage) -> String {
        m.content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text(t) => Some(t.text.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_prompt_that_fits_gets_a_generated_reply_with_usage() {
        let sim = SimProvider::new(&settings(vec![entry("small", 1000, None)], None)).unwrap();
        // 400 chars = 100 tokens; system 40 chars = 10 tokens.
        let mut req = request("small", vec![user(&"a".repeat(400))]);
        req.system = Some("s".repeat(40));
        let reply = sim.complete(&req).unwrap().message;
        assert_eq!(
            text_of(&reply),
            "(sim) reply to turn with 110 prompt tokens"
        );
        assert_eq!(
            (
                reply.api.as_str(),
                reply.provider.as_str(),
                reply.model.as_str()
            ),
            ("sim", "sim", "small")
        );
        assert_eq!(reply.stop_reason, StopReason::Stop);
        assert!(reply.timestamp > 0);
        assert_eq!(reply.usage.input, 110);
        let out = TokenCounter::estimate().count_message(&AgentMessage::Assistant(reply.clone()));
        assert_eq!(reply.usage.output, out);
        assert_eq!(reply.usage.total_tokens, Some(110 + out));
        assert_eq!(sim.requests_seen(), 1);
        assert_eq!(sim.last_prompt_tokens(), Some(110));
    }

    #[test]
    fn an_oversized_prompt_overflows_with_the_anthropic_text_by_default() {
        let sim = SimProvider::new(&settings(vec![entry("small", 100, None)], None)).unwrap();
        let err = sim
            .complete(&request("small", vec![user(&"a".repeat(404))]))
            .unwrap_err();
        assert_eq!(err.kind(), ProviderErrorKind::ContextOverflow);
        let ProviderError::ContextOverflow {
            provider,
            message,
            observed_tokens,
        } = err
        else {
            unreachable!()
        };
        assert_eq!(provider, "sim");
        assert_eq!(message, "prompt is too long: 101 tokens > 100 maximum");
        assert_eq!(observed_tokens, Some(101));
        // Exactly at the window fits.
        assert!(
            sim.complete(&request("small", vec![user(&"a".repeat(400))]))
                .is_ok()
        );
        let log = sim.log();
        assert_eq!((log.requests, log.overflows), (2, 1));
    }

    #[test]
    fn every_wording_is_recognised_as_an_overflow() {
        for wording in OverflowWording::ALL {
            let sim =
                SimProvider::new(&settings(vec![entry("m", 100, None)], Some(wording.name())))
                    .unwrap();
            assert_eq!(sim.wording(), wording);
            let err = sim
                .complete(&request("m", vec![user(&"a".repeat(2000))]))
                .unwrap_err();
            let ProviderError::ContextOverflow {
                message,
                observed_tokens,
                ..
            } = err
            else {
                panic!("{wording}: {err}")
            };
            assert!(
                is_likely_context_overflow_error(&message),
                "{wording}: {message}"
            );
            let expected = match wording {
                OverflowWording::Anthropic | OverflowWording::OpenAi => Some(500),
                _ => None,
            };
            assert_eq!(observed_tokens, expected, "{wording}: {message}");
            if expected.is_none() && wording == OverflowWording::Gemini {
                assert!(message.contains("(500)") && message.contains("(100)"));
            }
        }
    }

    #[test]
    fn wording_names_parse_exactly() {
        assert_eq!(
            "gemini".parse::<OverflowWording>(),
            Ok(OverflowWording::Gemini)
        );
        assert!("Gemini".parse::<OverflowWording>().is_err());
    }

    #[test]
    fn repeated_ids_are_config_errors() {
        let e = SimProvider::new(&settings(
            vec![entry("m", 100, None), entry("m", 200, None)],
            None,
        ))
        .unwrap_err();
        assert_eq!(e.key, "models.providers.sim.models[1].id");
    }

    #[test]
    fn context_tokens_take_precedence_over_the_window() {
        let mut e = entry("m", 1000, None);
        e.context_tokens = Some(50);
        let sim = SimProvider::new(&settings(vec![e, entry("plain", 1000, None)], None)).unwrap();
        assert_eq!(sim.window("m"), Some(50));
        assert_eq!(sim.window("plain"), Some(1000));
        let mut none = entry("d", 0, None);
        none.context_window = None;
        let sim = SimProvider::new(&settings(vec![none], None)).unwrap();
        assert_eq!(sim.window("d"), Some(DEFAULT_CONTEXT_TOKENS));
    }

    #[test]
    fn an_unknown_model_is_refused_naming_the_known_ones() {
        let sim = SimProvider::new(&settings(
            vec![entry("small", 100, None), entry("large", 1000, None)],
            None,
        ))
        .unwrap();
        let err = sim
            .complete(&request("smal", vec![user("hi")]))
            .unwrap_err();
        assert_eq!(err.kind(), ProviderErrorKind::BadRequest);
        let text = err.to_string();
        assert!(
            text.contains("`smal`") && text.contains("small, large"),
            "{text}"
        );
        assert_eq!(sim.window("smal"), None);
        // With no models configured at all, any id gets the default window.
        let sim = SimProvider::new(&settings(vec![], None)).unwrap();
        assert_eq!(sim.window("anything"), Some(DEFAULT_CONTEXT_TOKENS));
        assert!(sim.complete(&request("anything", vec![user("hi")])).is_ok());
    }

    #[test]
    fn scripted_replies_come_first_and_keep_their_stop_reason() {
        let sim = SimProvider::new(&settings(vec![entry("m", 100, None)], None)).unwrap();
        let AgentMessage::Assistant(mut recorded) =
            AgentMessage::assistant_text("recorded answer", "anthropic-messages", "x", "y", 7)
        else {
            unreachable!()
        };
        recorded.stop_reason = StopReason::ToolUse;
        recorded.usage.input = 99_999;
        sim.push_reply(recorded);
        assert_eq!(sim.pending_replies(), 1);
        // An overflow does not take the scripted reply.
        assert!(
            sim.complete(&request("m", vec![user(&"a".repeat(1000))]))
                .is_err()
        );
        assert_eq!(sim.pending_replies(), 1);
        let reply = sim
            .complete(&request("m", vec![user("hello")]))
            .unwrap()
            .message;
        assert_eq!(text_of(&reply), "recorded answer");
        assert_eq!(reply.stop_reason, StopReason::ToolUse);
        assert_eq!(
            (
                reply.api.as_str(),
                reply.provider.as_str(),
                reply.model.as_str()
            ),
            ("sim", "sim", "m")
        );
        assert_eq!(reply.usage.input, 2);
        assert_eq!(reply.usage.output, 4); // "recorded answer": 15 chars
        assert_eq!(
            reply.timestamp, 7,
            "a scripted reply keeps its recorded time"
        );
        assert_eq!(sim.log().scripted, 1);
        // Then generated again.
        let reply = sim.complete(&request("m", vec![user("hello")])).unwrap();
        assert!(text_of(&reply.message).starts_with("(sim) reply"));
        sim.push_reply(reply.message);
        sim.clear_replies();
        assert_eq!(sim.pending_replies(), 0);
    }

    #[test]
    fn each_model_counts_with_its_tokenizer_and_memoises() {
        let sim = SimProvider::new(&settings(
            vec![
                entry("est", 100_000, None),
                entry("exact", 100_000, Some("o200k_base")),
            ],
            None,
        ))
        .unwrap();
        let history: Vec<SharedMessage> = (0..50)
            .map(|i| user(&format!("message number {i} with some words in it")))
            .collect();
        sim.complete(&request("est", history.clone())).unwrap();
        let first = sim.last_prompt_tokens().unwrap();
        sim.complete(&request("est", history.clone())).unwrap();
        assert_eq!(sim.last_prompt_tokens(), Some(first));
        // Each message counted once; the same list again resumes from the last sum, with no
        // lookup at all.
        let stats = sim.models["est"].counter.memo_stats();
        assert_eq!((stats.misses, stats.hits), (50, 0));
        sim.complete(&request("exact", history)).unwrap();
        let exact = sim.last_prompt_tokens().unwrap();
        if rampart_context::tokens::EXACT_TOKENS_AVAILABLE {
            assert_ne!(exact, first, "a real BPE count differs from the estimate");
        }
    }

    #[test]
    fn the_provider_is_shareable_across_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<SimProvider>();
        let sim =
            Arc::new(SimProvider::new(&settings(vec![entry("m", 1000, None)], None)).unwrap());
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let sim = Arc::clone(&sim);
                std::thread::spawn(move || {
                    for _ in 0..10 {
                        sim.complete(&request("m", vec![user("hi")])).unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(sim.requests_seen(), 40);
    }
}
