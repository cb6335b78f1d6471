//! Single requests: sizing each to the summariser's window (splitting or shortening what does
//! not fit), the call with its retries, and the bound on calls in flight.

use std::collections::VecDeque;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tracing::warn;

use super::job::Job;
use super::{MAX_SHRINK_STEPS, Run, SHORTENED_FOR_WINDOW_NOTE};
use crate::compaction::instructions::{SUMMARIZATION_SYSTEM_PROMPT, build_prompt};
use crate::compaction::split::{DEFAULT_SUMMARY_FALLBACK, chunk_costs};
use crate::compaction::summarizer::{Control, Interrupt, SummarizeError, SummaryRequest};
use crate::compaction::transcript::{
    join_serialized, request_costs, serialize_each, truncate_with_note,
};
use rampart_message::SharedMessage;

/// How one summariser call (with its retries) ended without a summary.
#[derive(Debug, Clone)]
pub(super) enum CallError {
    Interrupted(Interrupt),
    Unavailable(String),
    Failed(String),
    Overflow(Option<u64>),
}

impl CallError {
    pub(super) fn describe(&self) -> String {
        match self {
            Self::Interrupted(Interrupt::Timeout) => "timed out".to_owned(),
            Self::Interrupted(Interrupt::Cancelled) => "cancelled".to_owned(),
            Self::Unavailable(m) => format!("model unavailable: {m}"),
            Self::Failed(m) => m.clone(),
            Self::Overflow(observed) => format!(
                "the request still overflowed the window after shrinking{}",
                observed
                    .map(|t| format!(" ({t} tokens)"))
                    .unwrap_or_default()
            ),
        }
    }
}

/// A sequence of requests that stopped early.
#[derive(Debug)]
pub(super) struct ChunkFailure {
    pub(super) error: CallError,
    /// The running summary when something was summarised before the failure.
    pub(super) partial: Option<String>,
    /// The first message not covered by `partial`.
    pub(super) resume_at: usize,
    pub(super) completed: usize,
    pub(super) planned: usize,
}

/// A piece of a sequence: a range of its messages, and how far it was shrunk.
#[derive(Debug, Clone)]
struct Piece {
    range: Range<usize>,
    shrinks: u32,
    /// For a single message: the characters of its serialised text to send.
    conversation_chars: Option<usize>,
}

/// A counting semaphore for summariser calls in flight.
pub(super) struct Permits {
    pub(super) in_flight: Mutex<usize>,
    pub(super) freed: Condvar,
    pub(super) max: usize,
}

pub(super) struct Permit<'p>(&'p Permits);

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let mut n = lock(&self.0.in_flight);
        *n = n.saturating_sub(1);
        self.0.freed.notify_one();
    }
}

impl Permits {
    pub(super) fn new(max: usize) -> Self {
        Self {
            in_flight: Mutex::new(0),
            freed: Condvar::new(),
            max: max.max(1),
        }
    }

    pub(super) fn acquire(&self, control: &Control) -> Result<Permit<'_>, Interrupt> {
        let mut n = lock(&self.in_flight);
        while *n >= self.max {
            control.check()?;
            n = self
                .freed
                .wait_timeout(n, Duration::from_millis(20))
                .map(|(guard, _)| guard)
                .unwrap_or_else(|poisoned| poisoned.into_inner().0);
        }
        *n += 1;
        Ok(Permit(self))
    }
}

/// A panic in another worker must not turn into a second panic here.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Run<'_> {
    /// One sequence of requests over `messages`, each carrying the running summary. Pieces
    /// that do not fit the window are split (or, for one message, shortened) before the call;
    /// an overflow answer does the same after it.
    pub(super) fn summarize_chunks(
        &self,
        messages: &[SharedMessage],
        previous: Option<&str>,
        job: Job<'_>,
    ) -> Result<String, ChunkFailure> {
        if messages.is_empty() {
            return Ok(previous.unwrap_or(DEFAULT_SUMMARY_FALLBACK).to_owned());
        }
        // Each message is serialised once: measured for the plan, joined for the requests.
        let serialized = serialize_each(messages);
        let planned = chunk_costs(&request_costs(&serialized, self.counter), job.max_chunk);
        let planned_count = planned.len();
        let mut queue: VecDeque<Piece> = planned
            .into_iter()
            .map(|range| Piece {
                range,
                shrinks: 0,
                conversation_chars: None,
            })
            .collect();
        let mut summary: Option<String> = previous.map(str::to_owned);
        let mut completed = 0usize;
        let mut call_index = 0usize;
        let fail = |error: CallError, summary: &Option<String>, completed: usize, at: usize| {
            ChunkFailure {
                error,
                partial: if completed > 0 { summary.clone() } else { None },
                resume_at: at,
                completed,
                planned: planned_count,
            }
        };
        while let Some(piece) = queue.pop_front() {
            if let Err(i) = self.check() {
                return Err(fail(
                    CallError::Interrupted(i),
                    &summary,
                    completed,
                    piece.range.start,
                ));
            }
            let slice = &messages[piece.range.clone()];
            let task = job.task.text(summary.is_some());
            let fixed_prompt = build_prompt("", None, task, job.instructions);
            let fixed = self.system_tokens + self.counter.count_text(&fixed_prompt);
            let available = self
                .window
                .saturating_sub(job.max_tokens)
                .saturating_sub(fixed);
            // The running summary may take half of what is left; more is cut for the request.
            let previous_for_request = summary.as_deref().map(|p| self.fit_text(p, available / 2));
            let previous_tokens = previous_for_request
                .as_deref()
                .map_or(0, |p| self.counter.count_text(p) + 16);
            let conversation_budget = available.saturating_sub(previous_tokens);
            let mut conversation = join_serialized(&serialized[piece.range.clone()]);
            if let Some(chars) = piece.conversation_chars {
                conversation = shorten_for_window(&conversation, chars);
            }
            let conversation_tokens = self.counter.count_text(&conversation);
            if conversation_budget == 0 || conversation_tokens > conversation_budget {
                match self.shrink(
                    &piece,
                    &conversation,
                    conversation_tokens,
                    conversation_budget,
                ) {
                    Some(pieces) => {
                        for p in pieces.into_iter().rev() {
                            queue.push_front(p);
                        }
                        continue;
                    }
                    None => {
                        let error = CallError::Failed(format!(
                            "a request of {} tokens cannot fit the {}-token window of {} (answer budget {}, fixed prompt {})",
                            conversation_tokens + fixed + previous_tokens,
                            self.window,
                            self.summarizer.label(),
                            job.max_tokens,
                            fixed
                        ));
                        return Err(fail(error, &summary, completed, piece.range.start));
                    }
                }
            }
            let prompt = build_prompt(
                &conversation,
                previous_for_request.as_deref(),
                task,
                job.instructions,
            );
            let request = SummaryRequest {
                kind: job.label.kind(call_index, planned_count),
                system: SUMMARIZATION_SYSTEM_PROMPT,
                prompt: &prompt,
                messages: slice,
                previous_summary: previous_for_request.as_deref(),
                max_tokens: job.max_tokens,
                control: &self.control,
            };
            call_index += 1;
            match self.call(&request) {
                Ok(text) => {
                    summary = Some(text);
                    completed += 1;
                }
                Err(CallError::Overflow(observed)) => {
                    let measured = observed
                        .map(|o| o.saturating_sub(fixed + previous_tokens))
                        .filter(|t| *t > 0)
                        .unwrap_or(conversation_tokens.max(1) * 2);
                    warn!(target: "rampart::compaction", observed = ?observed, window = self.window, "summarization request overflowed; shrinking it");
                    match self.shrink(&piece, &conversation, measured, conversation_budget) {
                        Some(pieces) => {
                            for p in pieces.into_iter().rev() {
                                queue.push_front(p);
                            }
                        }
                        None => {
                            return Err(fail(
                                CallError::Overflow(observed),
                                &summary,
                                completed,
                                piece.range.start,
                            ));
                        }
                    }
                }
                Err(e) => return Err(fail(e, &summary, completed, piece.range.start)),
            }
        }
        Ok(summary.unwrap_or_else(|| DEFAULT_SUMMARY_FALLBACK.to_owned()))
    }

    /// A smaller version of `piece`: its two halves, or for one message a shorter text
    /// (scaled by how far over budget it was). `None` once it cannot shrink any more.
    fn shrink(
        &self,
        piece: &Piece,
        conversation: &str,
        tokens: u64,
        budget: u64,
    ) -> Option<Vec<Piece>> {
        if piece.shrinks >= MAX_SHRINK_STEPS {
            return None;
        }
        let shrinks = piece.shrinks + 1;
        if piece.range.len() > 1 {
            let mid = piece.range.start + piece.range.len() / 2;
            return Some(vec![
                Piece {
                    range: piece.range.start..mid,
                    shrinks,
                    conversation_chars: None,
                },
                Piece {
                    range: mid..piece.range.end,
                    shrinks,
                    conversation_chars: None,
                },
            ]);
        }
        if budget == 0 {
            return None;
        }
        let chars = conversation.chars().count();
        let scale = (budget as f64 / tokens.max(1) as f64).min(0.5);
        let target = ((chars as f64) * scale * 0.9).floor() as usize;
        // Below this the request says nothing useful about the message.
        (target >= 200).then(|| {
            vec![Piece {
                range: piece.range.clone(),
                shrinks,
                conversation_chars: Some(target),
            }]
        })
    }

    /// `text` cut (with a note) to about `tokens` tokens, or whole when it fits.
    fn fit_text(&self, text: &str, tokens: u64) -> String {
        let have = self.counter.count_text(text);
        if have <= tokens {
            return text.to_owned();
        }
        let chars = text.chars().count() as f64 * tokens as f64 / have.max(1) as f64 * 0.9;
        truncate_with_note(text, chars.floor() as usize)
    }

    /// One summariser call with retries. Failed calls are retried with backoff (the wait
    /// stops on cancellation or the deadline); overflow and unavailability are returned at
    /// once for the caller to handle; timeout and cancellation stop the whole run.
    pub(super) fn call(&self, request: &SummaryRequest<'_>) -> Result<String, CallError> {
        let attempts = self.settings.retry.attempts.max(1);
        let mut last = String::new();
        for attempt in 1..=attempts {
            self.check().map_err(CallError::Interrupted)?;
            let permit = self
                .permits
                .acquire(&self.control)
                .map_err(|i| CallError::Interrupted(self.interrupted(i)))?;
            self.calls.fetch_add(1, Ordering::SeqCst);
            let result = self.summarizer.summarize(request);
            drop(permit);
            let error = match result {
                Ok(text) if !text.trim().is_empty() => return Ok(text),
                Ok(_) => SummarizeError::Failed("the summarizer returned an empty summary".into()),
                Err(e) => e,
            };
            // Whatever the summariser said, a cancelled or expired run ends here.
            self.check().map_err(CallError::Interrupted)?;
            match error {
                SummarizeError::Timeout => {
                    return Err(CallError::Interrupted(self.interrupted(Interrupt::Timeout)));
                }
                SummarizeError::Cancelled => {
                    return Err(CallError::Interrupted(
                        self.interrupted(Interrupt::Cancelled),
                    ));
                }
                SummarizeError::Overflow { observed_tokens } => {
                    return Err(CallError::Overflow(observed_tokens));
                }
                SummarizeError::Unavailable(m) => return Err(CallError::Unavailable(m)),
                SummarizeError::Failed(m) => last = m,
            }
            warn!(target: "rampart::compaction", kind = ?request.kind, attempt, attempts, error = last.as_str(), "summarization call failed");
            if attempt < attempts {
                let delay = self.settings.retry.delay(attempt, jitter());
                self.control
                    .sleep(delay)
                    .map_err(|i| CallError::Interrupted(self.interrupted(i)))?;
            }
        }
        Err(CallError::Failed(last))
    }
}

/// The serialised conversation of one message cut to `chars`, with a note saying so.
fn shorten_for_window(conversation: &str, chars: usize) -> String {
    match conversation.char_indices().nth(chars) {
        None => conversation.to_owned(),
        Some((cut, _)) => {
            let omitted = conversation[cut..].chars().count();
            format!(
                "{}\n\n[... {omitted} more characters truncated]\n{SHORTENED_FOR_WINDOW_NOTE}",
                &conversation[..cut]
            )
        }
    }
}

/// A sample in `[-1, 1]` for retry jitter. Why not a fixed value: concurrent parts that fail
/// together should not retry in lockstep; `RandomState` is randomly keyed per instance.
fn jitter() -> f64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u64(0x9e37_79b9_7f4a_7c15);
    (h.finish() as f64 / u64::MAX as f64) * 2.0 - 1.0
}
