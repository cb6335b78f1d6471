//! The legacy engine's `compact`: the compaction library driven with the host's model, one
//! compaction per session at a time, a circuit breaker, and answers that never pretend.
//!
//! The host appends the `compaction` entry only when this answers `compacted: true` with a
//! summary, so a timeout, a cancel or a failure here leaves the session file as it was.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rampart_context::compaction::{
    self, CompactionError, CompactionSettings, ContextEntry, Control, ExtractiveSummarizer,
    PrepareOptions, SummarizeError, Summarizer, SummaryRequest,
};
use rampart_context::overflow::is_likely_context_overflow_error;
use rampart_context::tokens::{CountMode, TokenCounter};
use rampart_engine_api::host::{LlmFailure, LlmRequest};
use rampart_engine_api::protocol::{CompactParams, CompactResult, CompactionOutcome};
use rampart_engine_api::{AgentMessage, CallContext, ErrorKind, Host};
use serde_json::json;

/// Consecutive failures and when compaction may run again, per session.
#[derive(Debug, Default, Clone, Copy)]
struct Breaker {
    failures: u32,
    open_until: Option<Instant>,
}

/// The compaction half of the legacy engine.
#[derive(Debug)]
pub(crate) struct Compactor {
    settings: CompactionSettings,
    breakers: Mutex<HashMap<String, Breaker>>,
    running: Mutex<HashSet<String>>,
}

/// Removes the session from the running set however `compact` ends.
struct Running<'a> {
    set: &'a Mutex<HashSet<String>>,
    session: String,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if let Ok(mut set) = self.set.lock() {
            set.remove(&self.session);
        }
    }
}

fn not_compacted(ok: bool, reason: impl Into<String>) -> CompactResult {
    CompactResult {
        ok,
        compacted: false,
        reason: Some(reason.into()),
        result: None,
    }
}

impl Compactor {
    pub(crate) fn new(settings: CompactionSettings) -> Self {
        Self {
            settings,
            breakers: Mutex::default(),
            running: Mutex::default(),
        }
    }

    pub(crate) fn compact(&self, cx: &CallContext<'_>, p: CompactParams) -> CompactResult {
        let session = p.session.session_id.clone();
        // One compaction per session: a second one would summarise the same history and race
        // the first for the session file.
        let Some(_running) = self.enter(&session) else {
            return not_compacted(false, "a compaction of this session is already running");
        };
        if let Some(wait) = self.paused_for(&session) {
            return not_compacted(
                false,
                format!(
                    "compaction is paused for this session after {} consecutive failures; \
                     the next attempt is allowed in {}s",
                    self.failures(&session),
                    wait.as_secs().max(1)
                ),
            );
        }
        if p.messages.len() != p.entry_ids.len() {
            return not_compacted(
                false,
                format!(
                    "the host sent {} messages but {} entry ids; cannot name the first kept entry",
                    p.messages.len(),
                    p.entry_ids.len()
                ),
            );
        }
        let entries: Vec<ContextEntry> = p
            .entry_ids
            .iter()
            .zip(p.messages.iter())
            .map(|(id, m)| ContextEntry {
                entry_id: id.clone(),
                message: m.clone(),
            })
            .collect();
        let counter = TokenCounter::new(
            p.model
                .as_ref()
                .map_or(CountMode::Estimate, |m| CountMode::for_model(&m.id)),
        );
        let mut settings = self.settings.clone();
        if let Some(instructions) = p.custom_instructions.as_ref().filter(|s| !s.is_empty()) {
            settings.custom_instructions = Some(instructions.clone());
        }
        let options = PrepareOptions {
            previous_details: None,
            token_budget: p.token_budget,
        };
        let prep = match compaction::prepare_with(&entries, &settings, &counter, &options) {
            Ok(prep) => prep,
            Err(skip) => return not_compacted(true, skip.to_string()),
        };

        let control = Control::new().with_timeout(settings.timeout());
        let model = p.compaction_model.as_ref().map(|m| {
            (
                format!("{}/{}", m.provider, m.id),
                m.context_window.unwrap_or(200_000),
            )
        });
        let host_summarizer = model.as_ref().map(|(name, window)| HostSummarizer {
            host: cx.host().clone(),
            model: name.clone(),
            window: *window,
        });
        let extractive = ExtractiveSummarizer::default();
        let summarizer: &dyn Summarizer = match &host_summarizer {
            Some(s) => s,
            None => &extractive,
        };
        let started = Instant::now();
        match compaction::compact(&prep, &settings, summarizer, &counter, &control) {
            Ok(done) => {
                self.succeeded(&session);
                CompactResult {
                    ok: true,
                    compacted: true,
                    reason: None,
                    result: Some(CompactionOutcome {
                        summary: Some(done.summary.clone()),
                        first_kept_entry_id: Some(done.first_kept_entry_id.clone()),
                        tokens_before: done.tokens_before,
                        tokens_after: Some(done.tokens_after_estimate),
                        details: json!({
                            "readFiles": done.details.read_files,
                            "modifiedFiles": done.details.modified_files,
                            "fallbackLevel": done.fallback_level,
                            "parts": done.parts,
                            "calls": done.calls,
                            "summaryChars": done.summary_chars,
                            "summarizer": done.summarizer,
                            "engineMs": started.elapsed().as_millis() as u64,
                        }),
                    }),
                }
            }
            Err(CompactionError::NothingToCompact { reason }) => {
                not_compacted(true, reason.to_string())
            }
            Err(e @ CompactionError::Cancelled) => not_compacted(false, e.to_string()),
            Err(e) => {
                self.failed(&session);
                not_compacted(false, e.to_string())
            }
        }
    }

    fn enter(&self, session: &str) -> Option<Running<'_>> {
        let mut set = self.running.lock().ok()?;
        set.insert(session.to_string()).then(|| Running {
            set: &self.running,
            session: session.to_string(),
        })
    }

    fn failures(&self, session: &str) -> u32 {
        self.breakers
            .lock()
            .ok()
            .and_then(|b| b.get(session).map(|b| b.failures))
            .unwrap_or(0)
    }

    /// How long compaction stays paused for `session`, if the breaker is open.
    fn paused_for(&self, session: &str) -> Option<Duration> {
        let breakers = self.breakers.lock().ok()?;
        let until = breakers.get(session)?.open_until?;
        until.checked_duration_since(Instant::now())
    }

    fn succeeded(&self, session: &str) {
        if let Ok(mut b) = self.breakers.lock() {
            b.remove(session);
        }
    }

    fn failed(&self, session: &str) {
        if let Ok(mut breakers) = self.breakers.lock() {
            let b = breakers.entry(session.to_string()).or_default();
            b.failures += 1;
            if let Some(backoff) = self.settings.circuit_breaker.backoff_after(b.failures) {
                b.open_until = Some(Instant::now() + backoff);
                tracing::warn!(
                    session,
                    failures = b.failures,
                    backoff_s = backoff.as_secs(),
                    "compaction keeps failing; pausing it for this session"
                );
            }
        }
    }
}

/// Summaries from the host's model through `llm.complete`.
struct HostSummarizer {
    host: Host,
    model: String,
    window: u64,
}

impl Summarizer for HostSummarizer {
    fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, SummarizeError> {
        if request.control.is_cancelled() {
            return Err(SummarizeError::Cancelled);
        }
        let timeout_ms = request.control.remaining().map(|d| d.as_millis() as u64);
        if timeout_ms == Some(0) {
            return Err(SummarizeError::Timeout);
        }
        let llm = LlmRequest {
            purpose: "compaction".to_string(),
            system: Some(request.system.to_string()),
            messages: vec![AgentMessage::user_text(request.prompt, 0)],
            max_tokens: Some(request.max_tokens),
            model: Some(self.model.clone()),
            timeout_ms,
        };
        match self.host.llm_complete(&llm) {
            Ok(answer) => Ok(answer.text),
            Err(e) => Err(match (e.kind, e.llm_failure()) {
                (ErrorKind::Timeout, _) => SummarizeError::Timeout,
                (ErrorKind::Cancelled, _) => SummarizeError::Cancelled,
                (ErrorKind::Unsupported, _) => SummarizeError::Unavailable(e.message),
                // The host classified the failure; the size it states is a number, not text.
                (_, Some(LlmFailure::ContextOverflow { observed_tokens })) => {
                    SummarizeError::Overflow { observed_tokens }
                }
                (_, Some(_)) => SummarizeError::Failed(e.message),
                // A host before 1.1 sends the provider's text only: it is still recognised as
                // an overflow, without the size.
                (_, None) if is_likely_context_overflow_error(&e.message) => {
                    SummarizeError::Overflow {
                        observed_tokens: None,
                    }
                }
                (_, None) => SummarizeError::Failed(e.message),
            }),
        }
    }

    fn context_window(&self) -> u64 {
        self.window
    }

    fn label(&self) -> &str {
        &self.model
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use rampart_engine_api::protocol::{ModelRef, SessionRef};
    use rampart_engine_api::{EngineError, HostApi, LogLevel};

    use super::*;

    /// A host whose model always fails, counting the calls.
    struct FailingModel(AtomicUsize);

    impl HostApi for FailingModel {
        fn log(&self, _: LogLevel, _: &str, _: &str, _: &str) {}
        fn call(&self, method: &str, _: &str) -> Result<String, EngineError> {
            if method == "llm.complete" {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
            Err(EngineError::new(
                ErrorKind::Host,
                "upstream 500: model exploded",
            ))
        }
    }

    fn params(turns: usize) -> CompactParams {
        let mut messages = Vec::new();
        let mut ids = Vec::new();
        for i in 0..turns {
            messages.push(Arc::new(AgentMessage::user_text(
                format!("question {i} {}", "words ".repeat(400)),
                i as u64,
            )));
            ids.push(format!("{:08x}", 2 * i));
            messages.push(Arc::new(AgentMessage::assistant_text(
                format!("answer {i} {}", "words ".repeat(400)),
                "sim",
                "sim",
                "m",
                i as u64,
            )));
            ids.push(format!("{:08x}", 2 * i + 1));
        }
        CompactParams {
            session: SessionRef {
                session_id: "s1".into(),
                ..SessionRef::default()
            },
            token_budget: Some(10_000),
            force: true,
            messages: messages.into(),
            entry_ids: ids,
            compaction_model: Some(ModelRef {
                provider: "p".into(),
                id: "m".into(),
                context_window: Some(128_000),
            }),
            ..CompactParams::default()
        }
    }

    fn strict_settings() -> CompactionSettings {
        CompactionSettings::from_value(&json!({
            "extractiveFallback": false,
            "retry": {"attempts": 1, "minDelayMs": 0, "maxDelayMs": 0, "jitter": 0},
            "circuitBreaker": {"failures": 2, "backoffSeconds": 300, "maxBackoffSeconds": 600}
        }))
        .unwrap()
    }

    #[test]
    fn repeated_failures_open_the_breaker_and_say_so() {
        let api = Arc::new(FailingModel(AtomicUsize::new(0)));
        let host = Host::new(api.clone());
        let cancel = std::sync::atomic::AtomicBool::new(false);
        let cx = CallContext::new(&host, &cancel, None);
        let compactor = Compactor::new(strict_settings());

        for _ in 0..2 {
            let r = compactor.compact(&cx, params(40));
            assert!(!r.ok && !r.compacted, "{r:?}");
            assert!(r.reason.unwrap().contains("model exploded"));
        }
        let calls = api.0.load(Ordering::SeqCst);
        assert!(calls > 0);
        // Open: no model call, and the reason says for how long.
        let r = compactor.compact(&cx, params(40));
        assert!(!r.ok);
        let reason = r.reason.unwrap();
        assert!(
            reason.contains("paused") && reason.contains("2 consecutive failures"),
            "{reason}"
        );
        assert_eq!(api.0.load(Ordering::SeqCst), calls);
        // Another session is not affected.
        let mut other = params(40);
        other.session.session_id = "s2".into();
        let r = compactor.compact(&cx, other);
        assert!(!r.reason.unwrap().contains("paused"));
    }

    #[test]
    fn without_a_model_the_embedded_summariser_compacts() {
        let api = Arc::new(FailingModel(AtomicUsize::new(0)));
        let host = Host::new(api.clone());
        let cancel = std::sync::atomic::AtomicBool::new(false);
        let cx = CallContext::new(&host, &cancel, None);
        let compactor = Compactor::new(CompactionSettings::default());
        let mut p = params(40);
        p.compaction_model = None;

        let r = compactor.compact(&cx, p);

        assert!(r.ok && r.compacted, "{r:?}");
        let outcome = r.result.unwrap();
        assert!(
            outcome
                .summary
                .unwrap()
                .to_lowercase()
                .contains("extractive")
        );
        assert!(outcome.tokens_after.unwrap() < outcome.tokens_before);
        assert_eq!(api.0.load(Ordering::SeqCst), 0, "no model was asked");
    }

    /// A host whose model fails with `error`.
    struct ModelError(EngineError);

    impl HostApi for ModelError {
        fn log(&self, _: LogLevel, _: &str, _: &str, _: &str) {}
        fn call(&self, _: &str, _: &str) -> Result<String, EngineError> {
            Err(self.0.clone())
        }
    }

    fn summarize_with(error: EngineError) -> SummarizeError {
        let summarizer = HostSummarizer {
            host: Host::new(Arc::new(ModelError(error))),
            model: "p/m".into(),
            window: 128_000,
        };
        let control = rampart_context::compaction::summarizer::Control::new();
        let request = SummaryRequest {
            kind: rampart_context::compaction::summarizer::SummaryKind::Part { index: 0, of: 1 },
            system: "s",
            prompt: "p",
            messages: &[],
            previous_summary: None,
            max_tokens: 100,
            control: &control,
        };
        summarizer.summarize(&request).unwrap_err()
    }

    /// The size an overflow states crosses as a number in the typed failure. It used to be
    /// read back out of the provider's text with a pattern, which found nothing in wordings
    /// that put no figure in the text.
    #[test]
    fn an_overflow_arrives_typed_with_its_size() {
        let error = EngineError::new(ErrorKind::Host, "p: context overflow: input too large")
            .with_llm_failure(&LlmFailure::ContextOverflow {
                observed_tokens: Some(150_000),
            });
        assert!(matches!(
            summarize_with(error),
            SummarizeError::Overflow {
                observed_tokens: Some(150_000)
            }
        ));
        // The class decides, not the wording: a rate limit that mentions tokens is no overflow.
        let error = EngineError::new(ErrorKind::Host, "429: too many tokens per minute")
            .with_llm_failure(&LlmFailure::RateLimited);
        assert!(matches!(summarize_with(error), SummarizeError::Failed(_)));
        // A host before 1.1 sends text only: still an overflow, without a size.
        let error = EngineError::new(ErrorKind::Host, "prompt is too long: 150000 tokens");
        assert!(matches!(
            summarize_with(error),
            SummarizeError::Overflow {
                observed_tokens: None
            }
        ));
    }

    #[test]
    fn a_second_compaction_of_the_same_session_is_refused_while_one_runs() {
        let compactor = Compactor::new(CompactionSettings::default());
        let held = compactor.enter("s1").unwrap();
        assert!(compactor.enter("s1").is_none());
        assert!(compactor.enter("s2").is_some());
        drop(held);
        assert!(compactor.enter("s1").is_some());
    }
}
