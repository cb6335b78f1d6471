//! The legacy engine's `compact`: the compaction library driven with the host's model, one
//! compaction per session at a time, a circuit breaker, and answers that never pretend.
//!
//! The host appends the `compaction` entry only when this answers `compacted: true` with a
//! summary, so a timeout, a cancel or a failure here leaves the session file as it was.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rampart_context::compaction::{
    self, CompactionError, CompactionSettings, CompactionSummary, ContextEntry, Control,
    ExtractiveSummarizer, Preparation, PrepareOptions, SummarizeError, Summarizer, SummaryRequest,
};
use rampart_context::events::{CompactionPrepared, Event};
use rampart_context::overflow::is_likely_context_overflow_error;
use rampart_context::tokens::{CountMode, TokenCounter};
use rampart_engine_api::host::{LlmFailure, LlmRequest};
use rampart_engine_api::protocol::{
    CompactParams, CompactResult, CompactionOutcome, PrepareCompaction,
};
use rampart_engine_api::{AgentMessage, CallContext, ErrorKind, Host, LogLevel};
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
    /// Per session, the compaction prepared ahead of need (`maintain`), or the thread
    /// preparing it.
    prepared: Mutex<HashMap<String, Prepared>>,
}

/// A compaction prepared ahead of need, or the thread preparing it with a real model.
#[derive(Debug)]
enum Prepared {
    Running(JoinHandle<Option<ReadySummary>>),
    Ready(Box<ReadySummary>),
}

/// A summary made before the budget asked for it, and what it replaces.
#[derive(Debug)]
struct ReadySummary {
    /// The entry ids of the context the summary replaces, oldest first: everything before the
    /// first kept entry. A later context that starts with exactly these can take the summary.
    covered: Vec<String>,
    summary: CompactionSummary,
    /// Tokens of the summary message, counted as the compaction counts it.
    summary_tokens: u64,
    prepared_ms: u64,
}

/// Why a compaction did not produce a summary.
enum NotDone {
    Skipped(String),
    Failed(CompactionError),
}

/// The `details` of a compaction's outcome: the file lists the next compaction starts from,
/// and figures for events.
fn outcome_details(done: &CompactionSummary, started: Instant) -> serde_json::Value {
    json!({
        "readFiles": done.details.read_files,
        "modifiedFiles": done.details.modified_files,
        "fallbackLevel": done.fallback_level,
        "parts": done.parts,
        "calls": done.calls,
        "summaryChars": done.summary_chars,
        "summarizer": done.summarizer,
        "engineMs": started.elapsed().as_millis() as u64,
    })
}

/// The host's summariser for `p`: its compaction model through `llm.complete`, else the
/// embedded one.
fn summarizer_for(host: &Host, p: &CompactParams) -> Option<HostSummarizer> {
    p.compaction_model.as_ref().map(|m| HostSummarizer {
        host: host.clone(),
        model: format!("{}/{}", m.provider, m.id),
        window: m.context_window.unwrap_or(200_000),
        session_id: Some(p.session.session_id.clone()).filter(|s| !s.is_empty()),
    })
}

fn counter_for(p: &CompactParams) -> TokenCounter {
    TokenCounter::new(
        p.model
            .as_ref()
            .map_or(CountMode::Estimate, |m| CountMode::for_model(&m.id)),
    )
}

/// The whole compaction of `p` without touching any state of the engine: where to cut, then
/// the summary. `growth_tokens` is [`PrepareOptions::growth_tokens`] (0 when used at once).
fn summarise(
    host: &Host,
    settings: &CompactionSettings,
    p: &CompactParams,
    growth_tokens: u64,
) -> Result<(Preparation, CompactionSummary), NotDone> {
    if p.messages.len() != p.entry_ids.len() {
        return Err(NotDone::Skipped(format!(
            "the host sent {} messages but {} entry ids; cannot name the first kept entry",
            p.messages.len(),
            p.entry_ids.len()
        )));
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
    let counter = counter_for(p);
    let mut settings = settings.clone();
    if let Some(instructions) = p.custom_instructions.as_ref().filter(|s| !s.is_empty()) {
        settings.custom_instructions = Some(instructions.clone());
    }
    let options = PrepareOptions {
        previous_details: None,
        token_budget: p.token_budget,
        growth_tokens,
    };
    let prep = compaction::prepare_with(&entries, &settings, &counter, &options)
        .map_err(|skip| NotDone::Skipped(skip.to_string()))?;
    let control = Control::new().with_timeout(settings.timeout());
    let host_summarizer = summarizer_for(host, p);
    let extractive = ExtractiveSummarizer::default();
    let summarizer: &dyn Summarizer = match &host_summarizer {
        Some(s) => s,
        None => &extractive,
    };
    match compaction::compact(&prep, &settings, summarizer, &counter, &control) {
        Ok(done) => Ok((prep, done)),
        Err(CompactionError::NothingToCompact { reason }) => {
            Err(NotDone::Skipped(reason.to_string()))
        }
        Err(e) => Err(NotDone::Failed(e)),
    }
}

/// Prepares `p`'s compaction and says so with a [`CompactionPrepared`] event.
fn prepare_summary(
    host: &Host,
    settings: &CompactionSettings,
    session: &str,
    p: &CompactParams,
    growth_tokens: u64,
    background: bool,
) -> Option<ReadySummary> {
    let started = Instant::now();
    let result = summarise(host, settings, p, growth_tokens);
    let duration_ms = started.elapsed().as_millis() as u64;
    let (event, ready) = match result {
        Ok((prep, summary)) => {
            let summary_tokens = summary
                .tokens_after_estimate
                .saturating_sub(prep.kept_tokens);
            let event = CompactionPrepared {
                ready: true,
                input_tokens: prep.tokens_before.saturating_sub(prep.kept_tokens),
                output_tokens: summary_tokens,
                first_kept_entry_id: Some(summary.first_kept_entry_id.clone()),
                duration_ms,
                background,
                why: None,
            };
            let ready = ReadySummary {
                covered: p.entry_ids[..prep.first_kept_index].to_vec(),
                summary,
                summary_tokens,
                prepared_ms: duration_ms,
            };
            (event, Some(ready))
        }
        Err(not) => {
            let why = match not {
                NotDone::Skipped(why) => why,
                NotDone::Failed(e) => e.to_string(),
            };
            let event = CompactionPrepared {
                ready: false,
                duration_ms,
                background,
                why: Some(why),
                ..CompactionPrepared::default()
            };
            (event, None)
        }
    };
    let _ = host.emit_event(&Event::CompactionPrepared(event).envelope(Some(session.to_string())));
    ready
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
            prepared: Mutex::default(),
        }
    }

    /// `maintain` with a compaction to prepare: makes its summary now (inline with the
    /// embedded summariser, on a thread of its own with a model) unless one that still fits
    /// is ready or on its way. Nothing is written: the summary waits for `compact`.
    pub(crate) fn prepare(&self, cx: &CallContext<'_>, request: PrepareCompaction) {
        let session = request.compact.session.session_id.clone();
        // Manual compactions bring their own instructions; a prepared summary would ignore
        // them, so none is made for such a request.
        if request
            .compact
            .custom_instructions
            .as_ref()
            .is_some_and(|s| !s.is_empty())
            || self.paused_for(&session).is_some()
        {
            return;
        }
        let Ok(mut prepared) = self.prepared.lock() else {
            return;
        };
        let current = match prepared.remove(&session) {
            Some(Prepared::Running(handle)) if !handle.is_finished() => {
                // One preparation per session at a time.
                prepared.insert(session, Prepared::Running(handle));
                return;
            }
            Some(Prepared::Running(handle)) => handle.join().ok().flatten(),
            Some(Prepared::Ready(ready)) => Some(*ready),
            None => None,
        };
        if let Some(ready) = current.filter(|r| r.continues_into(&request.compact.entry_ids)) {
            prepared.insert(session, Prepared::Ready(Box::new(ready)));
            return;
        }
        let host = cx.host().clone();
        if request.compact.compaction_model.is_none() {
            // The embedded summariser is quick and calls nobody: inline, after the answer.
            drop(prepared);
            let ready = prepare_summary(
                &host,
                &self.settings,
                &session,
                &request.compact,
                request.growth_tokens,
                false,
            );
            if let (Some(ready), Ok(mut prepared)) = (ready, self.prepared.lock()) {
                prepared.insert(session, Prepared::Ready(Box::new(ready)));
            }
            return;
        }
        // A model takes seconds: it writes while the agent goes on.
        let settings = self.settings.clone();
        let key = session.clone();
        let spawned = std::thread::Builder::new()
            .name("rampart-compaction-prep".into())
            .spawn(move || {
                prepare_summary(
                    &host,
                    &settings,
                    &key,
                    &request.compact,
                    request.growth_tokens,
                    true,
                )
            });
        match spawned {
            Ok(handle) => {
                prepared.insert(session, Prepared::Running(handle));
            }
            Err(e) => cx.host().log(
                LogLevel::Warn,
                "rampart_legacy::compact",
                &format!("could not start a compaction preparation thread: {e}"),
                &serde_json::Value::Null,
            ),
        }
    }

    /// The prepared summary of `session`, waiting for it when it is still being written
    /// (the wait is shorter than writing one now).
    fn take_prepared(&self, session: &str) -> Option<ReadySummary> {
        let taken = self.prepared.lock().ok()?.remove(session)?;
        match taken {
            Prepared::Ready(ready) => Some(*ready),
            Prepared::Running(handle) => handle.join().ok().flatten(),
        }
    }

    /// `p` answered with a prepared summary, when it still applies and the result fits
    /// `p.token_budget`; `None` sends the caller to a compaction made now.
    fn swap_in(&self, ready: ReadySummary, p: &CompactParams) -> Option<CompactResult> {
        let started = Instant::now();
        if !ready.continues_into(&p.entry_ids) || p.messages.len() != p.entry_ids.len() {
            return None;
        }
        let first_kept = ready.covered.len();
        let counter = counter_for(p);
        let kept_tokens = counter.count_messages(&p.messages[first_kept..]).total;
        let tokens_before = counter.count_messages(&p.messages).total;
        let tokens_after = ready.summary_tokens.saturating_add(kept_tokens);
        if p.token_budget.is_some_and(|budget| tokens_after > budget) {
            return None;
        }
        let done = ready.summary;
        Some(CompactResult {
            ok: true,
            compacted: true,
            reason: None,
            result: Some(CompactionOutcome {
                summary: Some(done.summary.clone()),
                first_kept_entry_id: Some(done.first_kept_entry_id.clone()),
                tokens_before,
                tokens_after: Some(tokens_after),
                details: {
                    let mut details = outcome_details(&done, started);
                    details["prepared"] = json!(true);
                    details["preparedMs"] = json!(ready.prepared_ms);
                    details
                },
            }),
        })
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
        let prepared = self
            .take_prepared(&session)
            .filter(|_| p.custom_instructions.as_ref().is_none_or(|s| s.is_empty()));
        if let Some(result) = prepared.and_then(|ready| self.swap_in(ready, &p)) {
            self.succeeded(&session);
            return result;
        }
        let started = Instant::now();
        match summarise(cx.host(), &self.settings, &p, 0) {
            Ok((_, done)) => {
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
                        details: outcome_details(&done, started),
                    }),
                }
            }
            Err(NotDone::Skipped(reason)) => not_compacted(true, reason),
            Err(NotDone::Failed(e @ CompactionError::Cancelled)) => {
                not_compacted(false, e.to_string())
            }
            Err(NotDone::Failed(e)) => {
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

impl ReadySummary {
    /// Whether a context with `entry_ids` still starts with what this summary replaces, and
    /// keeps its first kept entry: the history is append-only between compactions, so this
    /// holds until the next compaction (or a branch below the cut).
    fn continues_into(&self, entry_ids: &[String]) -> bool {
        entry_ids.len() > self.covered.len()
            && entry_ids[..self.covered.len()] == self.covered[..]
            && entry_ids[self.covered.len()] == self.summary.first_kept_entry_id
    }
}

/// Summaries from the host's model through `llm.complete`.
struct HostSummarizer {
    host: Host,
    model: String,
    window: u64,
    /// The session compacted: the host answers with its conversation's credential.
    session_id: Option<String>,
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
            session_id: self.session_id.clone(),
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
                // A refused key is refused again on every retry: the compaction goes
                // straight to its fallback instead of paying three round trips and back-off.
                (_, Some(LlmFailure::Auth)) => SummarizeError::Unavailable(e.message),
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
    use std::time::Duration;

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
            session_id: None,
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

    /// A refused key (401/403, or no key at all) is not retried: the same key would be
    /// refused again, and each retry cost the compaction a round trip and its back-off.
    #[test]
    fn an_auth_failure_is_not_retried() {
        let error = EngineError::new(ErrorKind::Host, "anthropic: 401 invalid x-api-key")
            .with_llm_failure(&LlmFailure::Auth);
        assert!(matches!(
            summarize_with(error),
            SummarizeError::Unavailable(_)
        ));
    }

    /// A host that records the events an engine emits and answers `llm.complete` with a
    /// structured summary once its gate is open.
    #[derive(Default)]
    struct GatedModel {
        open: std::sync::Mutex<bool>,
        opened: std::sync::Condvar,
        calls: AtomicUsize,
        events: std::sync::Mutex<Vec<serde_json::Value>>,
    }

    impl GatedModel {
        fn open(&self) {
            *self.open.lock().unwrap() = true;
            self.opened.notify_all();
        }

        fn prepared_events(&self) -> Vec<serde_json::Value> {
            self.events
                .lock()
                .unwrap()
                .iter()
                .filter(|e| e["kind"] == "compaction_prepared")
                .map(|e| e["data"].clone())
                .collect()
        }
    }

    impl HostApi for GatedModel {
        fn log(&self, _: LogLevel, _: &str, _: &str, _: &str) {}
        fn call(&self, method: &str, payload: &str) -> Result<String, EngineError> {
            match method {
                "events.emit" => {
                    let event: serde_json::Value = serde_json::from_str(payload).unwrap();
                    self.events.lock().unwrap().push(event);
                    Ok("null".into())
                }
                "llm.complete" => {
                    let mut open = self.open.lock().unwrap();
                    while !*open {
                        open = self.opened.wait(open).unwrap();
                    }
                    self.calls.fetch_add(1, Ordering::SeqCst);
                    let text = "## Decisions\n- keep going\n## Open TODOs\n- none\n\
                                ## Constraints/Rules\n- none\n## Pending user asks\n- question 39\n\
                                ## Exact identifiers\n- none";
                    Ok(
                        json!({"text": text, "model": "p/m", "inputTokens": 1, "outputTokens": 1})
                            .to_string(),
                    )
                }
                other => Err(EngineError::unsupported(other)),
            }
        }
    }

    /// `params(turns)` with `extra` more turns after it: the same history, grown.
    fn grown(turns: usize, extra: usize) -> CompactParams {
        let mut p = params(turns + extra);
        p.token_budget = params(turns).token_budget;
        p
    }

    /// `params(40)` for the embedded summariser, with room for the summary beside the tail.
    fn inline_params() -> CompactParams {
        let mut p = params(40);
        p.compaction_model = None;
        p.token_budget = Some(30_000);
        p
    }

    fn prepare_request(p: CompactParams) -> PrepareCompaction {
        PrepareCompaction {
            compact: p,
            growth_tokens: 0,
        }
    }

    #[test]
    fn a_summary_prepared_inline_is_swapped_in_once_the_history_grew() {
        let api = Arc::new(GatedModel::default());
        let host = Host::new(api.clone());
        let cancel = std::sync::atomic::AtomicBool::new(false);
        let cx = CallContext::new(&host, &cancel, None);
        let compactor = Compactor::new(CompactionSettings::default());
        let early = inline_params();

        compactor.prepare(&cx, prepare_request(early.clone()));

        let events = api.prepared_events();
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0]["ready"], true);
        assert_eq!(events[0]["background"], false);
        let first_kept = events[0]["firstKeptEntryId"].as_str().unwrap().to_string();

        // Two turns later the budget asks: the prepared summary is used as it is.
        let mut later = grown(40, 2);
        later.compaction_model = None;
        later.token_budget = early.token_budget;
        let r = compactor.compact(&cx, later.clone());
        assert!(r.ok && r.compacted, "{r:?}");
        let outcome = r.result.unwrap();
        assert_eq!(outcome.details["prepared"], true);
        assert_eq!(
            outcome.first_kept_entry_id.as_deref(),
            Some(first_kept.as_str())
        );
        assert!(outcome.tokens_after.unwrap() <= 30_000);
        assert!(outcome.tokens_after.unwrap() < outcome.tokens_before);
        // Used once: the next compaction makes its own.
        let again = compactor.compact(&cx, later).result.unwrap();
        assert!(again.details.get("prepared").is_none());
        assert_eq!(api.calls.load(Ordering::SeqCst), 0, "no model was asked");
    }

    #[test]
    fn a_prepared_summary_of_another_history_or_too_large_is_not_used() {
        let api = Arc::new(GatedModel::default());
        let host = Host::new(api.clone());
        let cancel = std::sync::atomic::AtomicBool::new(false);
        let cx = CallContext::new(&host, &cancel, None);
        let compactor = Compactor::new(CompactionSettings::default());
        let early = inline_params();

        // The history was edited below the cut (another branch): its ids differ.
        compactor.prepare(&cx, prepare_request(early.clone()));
        let mut edited = early.clone();
        edited.entry_ids[0] = "ffffffff".into();
        let r = compactor.compact(&cx, edited).result.unwrap();
        assert!(r.details.get("prepared").is_none());

        // The same history, but the compaction must now fit far less than the prepared
        // summary plus what it keeps.
        compactor.prepare(&cx, prepare_request(early.clone()));
        let mut tight = early.clone();
        tight.token_budget = Some(3_000);
        let r = compactor.compact(&cx, tight).result.unwrap();
        assert!(r.details.get("prepared").is_none());
        assert!(r.tokens_after.unwrap() <= 3_000 + 3_000 / 5);

        // A manual compaction with instructions never takes a summary made without them.
        compactor.prepare(&cx, prepare_request(early.clone()));
        let mut manual = early;
        manual.custom_instructions = Some("focus on the database".into());
        let r = compactor.compact(&cx, manual).result.unwrap();
        assert!(r.details.get("prepared").is_none());
    }

    /// With a model, `maintain` returns while the model is still writing: the summary is made
    /// concurrently with the agent's next calls, and `compact` swaps it in.
    #[test]
    fn with_a_model_the_summary_is_written_in_the_background() {
        let api = Arc::new(GatedModel::default());
        let host = Host::new(api.clone());
        let compactor = Arc::new(Compactor::new(CompactionSettings::default()));
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        {
            let compactor = compactor.clone();
            let host = host.clone();
            std::thread::spawn(move || {
                let cancel = std::sync::atomic::AtomicBool::new(false);
                let cx = CallContext::new(&host, &cancel, None);
                compactor.prepare(&cx, prepare_request(params(40)));
                done_tx.send(()).unwrap();
            });
        }
        // The model has not answered (its gate is shut), yet `maintain` is back.
        done_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("maintain waited for the model");
        assert_eq!(api.calls.load(Ordering::SeqCst), 0);
        assert!(api.prepared_events().is_empty());

        api.open();
        let cancel = std::sync::atomic::AtomicBool::new(false);
        let cx = CallContext::new(&host, &cancel, None);
        let r = compactor.compact(&cx, grown(40, 1));
        let outcome = r.result.unwrap();
        assert_eq!(outcome.details["prepared"], true);
        let events = api.prepared_events();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0]["background"], true);
        assert_eq!(events[0]["ready"], true);
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
