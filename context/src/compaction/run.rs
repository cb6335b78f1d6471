//! The orchestrator: [`compact`] turns a [`Preparation`] into a summary.
//!
//! The flow (OpenClaw's safeguard, §7.2, with the differences noted):
//!
//! 1. No real conversation before the cut: a minimal structured summary (still a boundary, so
//!    the trigger does not loop), with the tool failures and file lists.
//! 2. History-share pruning: when the kept part is large relative to the summariser's window,
//!    the oldest history is set aside and summarised separately; that summary becomes the
//!    previous summary of the main one.
//! 3. The latest user turns are quoted verbatim in the suffix (within 6,000 characters, the
//!    newest lines first). Unlike OpenClaw they are also summarised: the quote cuts each
//!    message at 600 characters and may leave out the oldest lines, and what it cuts would
//!    otherwise be lost.
//! 4. Staged summarisation: history that does not fit one request is split by token share
//!    into `parts` which are summarised **concurrently** (at most `maxConcurrency` calls in
//!    flight), then merged. A split turn's prefix is summarised alongside. Chunks and parts are
//!    sized by what each message costs in the request (tool results appear cut to 2,000
//!    characters), not by its size in the context, which would make several times more
//!    requests than needed.
//! 5. Every request is sized to the summariser's window before it is sent (prompt plus answer
//!    budget); one that does not fit is split, a single message too large is shortened for the
//!    request with a note, and an `Overflow` answer shrinks the request and tries again. Failed
//!    calls are retried (3 attempts); then the fallback levels apply: 0 full, 1 without
//!    oversized messages, 2 statistics plus an extractive summary that says the model failed.
//! 6. Optional quality guard, then the suffix and the 16,000-character cap.
//!
//! The staged summarisation lives in `stages.rs`, single requests (sizing, retries, the bound
//! on calls in flight) in `requests.rs`; both are private parts of this module.
//!
//! # What the engine must do with the result
//!
//! [`compact`] does no I/O, so every `Err` leaves the session untouched: the engine appends
//! the `compaction` entry only for `Ok`.
//!
//! - `Ok(summary)`: append the entry (`summary`, `first_kept_entry_id`, `tokens_before`,
//!   `details`); `compacted: true`. `fallback_level > 0` still compacted, but is worth an event.
//! - [`CompactionError::NothingToCompact`]: `{ok: true, compacted: false, reason}`; the overflow
//!   loop must not count it as a compaction (pain point 5).
//! - [`CompactionError::Timeout`], [`CompactionError::Cancelled`]: `{ok: false, compacted:
//!   false}`; nothing was written, the pre-compaction context stands.
//! - [`CompactionError::SummarizationFailed`]: only with `extractiveFallback: false`; same as
//!   above, and a failure for the circuit breaker.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use self::job::{Job, Label, Task};
use self::requests::Permits;
use super::extractive::ExtractiveSummarizer;
use super::file_ops::{CompactionDetails, collect_tool_failures, format_tool_failures_section};
use super::history_share::{HistoryShareReport, prune_history_for_context_share};
use super::identifiers::extract_opaque_identifiers;
use super::instructions::{
    SUMMARIZATION_SYSTEM_PROMPT, build_request_instructions, quality_feedback,
};
use super::prepare::{Preparation, SkipReason};
use super::quality::{
    QualityAudit, audit_summary_quality, build_structured_fallback_summary, extract_latest_user_ask,
};
use super::settings::CompactionSettings;
use super::split::SAFETY_MARGIN;
use super::suffix::{
    MAX_COMPACTION_SUMMARY_CHARS, MAX_PRESERVED_TURNS_SECTION_CHARS, assemble_suffix,
    cap_summary_preserving_suffix, format_file_operations, format_preserved_turns_section_within,
    format_split_turn_section, split_preserved_recent_turns,
};
use super::summarizer::{Control, Interrupt, Summarizer, SummaryKind};
use super::transcript::message_text;
use crate::tokens::TokenCounter;
use rampart_message::SharedMessage;
use rampart_message::{AgentMessage, CompactionSummaryMessage, Extra};

/// Histories with fewer messages are never split into parts (`minMessagesForSplit`).
pub const MIN_MESSAGES_FOR_SPLIT: usize = 4;
/// How often one request may be split or shortened before its piece counts as failed.
pub const MAX_SHRINK_STEPS: u32 = 10;
/// The smallest answer budget a request gets, whatever the window and cap.
pub const MIN_SUMMARY_TOKENS: u64 = 256;
/// Messages at the end of the summarised history whose identifiers the quality audit checks.
pub const QUALITY_IDENTIFIER_SEED_MESSAGES: usize = 10;
/// The note a request carries when one message had to be shortened to fit the window.
pub const SHORTENED_FOR_WINDOW_NOTE: &str =
    "[This message was shortened to fit the summarization model's context window.]";

/// A compaction that happened: what the engine writes, plus figures for events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionSummary {
    /// The summary that replaces the history (at most 16,000 characters).
    pub summary: String,
    /// The first entry kept verbatim.
    pub first_kept_entry_id: String,
    /// The context size before, as prepared.
    pub tokens_before: u64,
    /// The context size after: the summary message plus the kept messages, counted with the
    /// same counter. An estimate; the engine may discard it when it exceeds `tokens_before`.
    pub tokens_after_estimate: u64,
    /// 0: full model summary; 1: oversized messages left out (and noted); 2: statistics plus
    /// an extractive summary, with the model's failure stated in the text. The highest level
    /// any stage needed.
    pub fallback_level: u8,
    /// Parts the main history was split into (1 when it fit one sequence of requests).
    pub parts: usize,
    /// Summariser calls made, retries included.
    pub calls: usize,
    /// Characters of `summary`.
    pub summary_chars: usize,
    /// The file lists to store with the entry.
    pub details: CompactionDetails,
    /// The summariser's label.
    pub summarizer: String,
    /// Summaries generated (more than 1 when the quality guard asked for retries).
    pub quality_attempts: usize,
    /// The last quality audit, when the guard ran.
    pub quality: Option<QualityAudit>,
    /// History-share pruning, when it set history aside.
    pub history_share: Option<HistoryShareReport>,
}

/// Why a compaction did not happen. Every variant leaves the session untouched (see the
/// module docs for what the engine answers).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompactionError {
    /// There was nothing to compact; not a failure.
    #[error("{reason}")]
    NothingToCompact {
        /// Why.
        reason: SkipReason,
    },
    /// The deadline (the caller's, or `timeoutSeconds`) passed, or a summariser call timed
    /// out. Everything stopped at once.
    #[error("Compaction timed out after {elapsed_ms} ms (limit {limit_ms} ms)")]
    Timeout {
        /// Time spent.
        elapsed_ms: u64,
        /// The time allowed.
        limit_ms: u64,
    },
    /// The caller cancelled (or a summariser call reported cancellation).
    #[error("Compaction cancelled")]
    Cancelled,
    /// Every model attempt failed and the extractive fallback is turned off
    /// (`extractiveFallback: false`).
    #[error(
        "summarization failed: All summarization attempts failed for {messages} messages. Last error: {last_error}"
    )]
    SummarizationFailed {
        /// Messages of the stage that failed.
        messages: usize,
        /// The summariser's last error.
        last_error: String,
    },
}

impl From<SkipReason> for CompactionError {
    fn from(reason: SkipReason) -> Self {
        Self::NothingToCompact { reason }
    }
}

/// Compacts `prep`: summarises what leaves the context and assembles the summary the engine
/// writes. See the module docs for the flow and for what each error means to the engine.
///
/// The deadline is the earlier of `control`'s and `settings.timeout_seconds` from now.
pub fn compact(
    prep: &Preparation,
    settings: &CompactionSettings,
    summarizer: &dyn Summarizer,
    counter: &TokenCounter,
    control: &Control,
) -> Result<CompactionSummary, CompactionError> {
    let run = Run::new(settings, summarizer, counter, control);
    let result = run.compact(prep);
    let elapsed = run.started.elapsed();
    match result {
        Ok(summary) => {
            info!(
                target: "rampart::compaction",
                summarizer = summary.summarizer.as_str(),
                tokens_before = summary.tokens_before,
                tokens_after = summary.tokens_after_estimate,
                fallback_level = summary.fallback_level,
                parts = summary.parts,
                calls = summary.calls,
                summary_chars = summary.summary_chars,
                elapsed_ms = elapsed.as_millis() as u64,
                "compaction finished"
            );
            Ok(summary)
        }
        Err(StageError::Interrupted(_)) => {
            let error = match run.interrupt_reason() {
                Some(Interrupt::Cancelled) => CompactionError::Cancelled,
                _ => CompactionError::Timeout {
                    elapsed_ms: elapsed.as_millis() as u64,
                    limit_ms: run.limit.as_millis() as u64,
                },
            };
            warn!(target: "rampart::compaction", error = %error, calls = run.calls(), "compaction stopped; the session is untouched");
            Err(error)
        }
        Err(StageError::Failed {
            messages,
            last_error,
        }) => {
            warn!(target: "rampart::compaction", messages, error = last_error.as_str(), "compaction failed; the session is untouched");
            Err(CompactionError::SummarizationFailed {
                messages,
                last_error,
            })
        }
        Err(StageError::Skip(reason)) => Err(reason.into()),
    }
}

/// How a stage ended without a summary.
#[derive(Debug)]
enum StageError {
    Interrupted(Interrupt),
    Failed { messages: usize, last_error: String },
    Skip(SkipReason),
}

/// A stage's summary and the fallback level it took.
#[derive(Debug, Clone, Default)]
struct Staged {
    text: String,
    level: u8,
    /// Notes that must survive a merge: oversized messages left out, model failures.
    notes: Vec<String>,
}

impl Staged {
    fn plain(text: String) -> Self {
        Self {
            text,
            ..Self::default()
        }
    }
}

struct Run<'a> {
    settings: &'a CompactionSettings,
    summarizer: &'a dyn Summarizer,
    counter: &'a TokenCounter,
    /// Derived from the caller's: raising it stops every call of this run, not the caller.
    control: Control,
    permits: Permits,
    calls: AtomicUsize,
    /// The first interrupt seen (0 none, 1 timeout, 2 cancelled).
    interrupt: AtomicU8,
    window: u64,
    extractive: ExtractiveSummarizer,
    started: Instant,
    limit: Duration,
    system_tokens: u64,
}

impl<'a> Run<'a> {
    fn new(
        settings: &'a CompactionSettings,
        summarizer: &'a dyn Summarizer,
        counter: &'a TokenCounter,
        control: &Control,
    ) -> Self {
        let started = Instant::now();
        let limit = settings.timeout();
        let control = control.child().with_timeout(limit);
        let limit = control
            .deadline()
            .map_or(limit, |d| d.saturating_duration_since(started));
        Self {
            settings,
            summarizer,
            counter,
            control,
            permits: Permits::new(settings.max_concurrency),
            calls: AtomicUsize::new(0),
            interrupt: AtomicU8::new(0),
            window: summarizer.context_window().max(1),
            extractive: ExtractiveSummarizer::default(),
            started,
            limit,
            system_tokens: counter.count_text(SUMMARIZATION_SYSTEM_PROMPT),
        }
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    fn interrupt_reason(&self) -> Option<Interrupt> {
        match self.interrupt.load(Ordering::SeqCst) {
            1 => Some(Interrupt::Timeout),
            2 => Some(Interrupt::Cancelled),
            _ => None,
        }
    }

    /// Records the first interrupt and stops every other call of the run.
    fn interrupted(&self, reason: Interrupt) -> Interrupt {
        let code = match reason {
            Interrupt::Timeout => 1,
            Interrupt::Cancelled => 2,
        };
        let _ = self
            .interrupt
            .compare_exchange(0, code, Ordering::SeqCst, Ordering::SeqCst);
        self.control.cancel();
        reason
    }

    fn check(&self) -> Result<(), Interrupt> {
        self.control.check().map_err(|i| self.interrupted(i))
    }

    fn compact(&self, prep: &Preparation) -> Result<CompactionSummary, StageError> {
        if prep.messages_to_summarize.is_empty() && prep.turn_prefix_messages.is_empty() {
            return Err(StageError::Skip(SkipReason::WithinKeepRecent));
        }
        self.check().map_err(StageError::Interrupted)?;
        let settings = self.settings;
        let failures = collect_tool_failures(prep.summarized_messages());
        let failures_section = format_tool_failures_section(&failures);
        let files_section = format_file_operations(&prep.details);
        info!(
            target: "rampart::compaction",
            summarizer = self.summarizer.label(),
            window = self.window,
            messages = prep.messages_to_summarize.len(),
            turn_prefix = prep.turn_prefix_messages.len(),
            kept = prep.kept_messages.len(),
            tokens_before = prep.tokens_before,
            "compaction started"
        );

        if !prep.has_real_conversation {
            // Still a boundary, so the trigger does not fire again at once (#41981).
            let body = build_structured_fallback_summary(prep.previous_summary.as_deref());
            let suffix = assemble_suffix(&[&failures_section, &files_section]);
            let summary = self.cap(prep, &body, &suffix);
            return Ok(self.finish(prep, summary, 0, 0, 0, None, None));
        }

        // Step 5: history-share pruning; the set-aside history gets its own summary.
        let mut to_summarize = prep.messages_to_summarize.clone();
        let mut previous = prep.previous_summary.clone();
        let mut history_share = None;
        // What the set-aside history's summary needed, carried into the result.
        let mut dropped_level = 0;
        let mut dropped_notes = Vec::new();
        let summarizable = self
            .counter
            .count_total(&prep.messages_to_summarize)
            .saturating_add(self.counter.count_total(&prep.turn_prefix_messages));
        let new_content = prep.tokens_before.saturating_sub(summarizable);
        let max_history =
            (self.window as f64 * settings.max_history_share * SAFETY_MARGIN).floor() as u64;
        let base_instructions = self.instructions(None);
        let turns = settings.effective_recent_turns_preserve();
        let preserved_before = split_preserved_recent_turns(&to_summarize, turns).preserved;
        // Under a small summary cap the quoted turns give way first: they repeat the end of
        // what the body summarises, while the body's identifiers exist nowhere else.
        let preserved_limit = prep
            .summary_token_cap
            .map_or(MAX_PRESERVED_TURNS_SECTION_CHARS, |cap| {
                MAX_PRESERVED_TURNS_SECTION_CHARS.min(usize::try_from(cap).unwrap_or(usize::MAX))
            });
        let fixed_suffix_text = [
            format_preserved_turns_section_within(&preserved_before, preserved_limit).as_str(),
            &failures_section,
            &files_section,
        ]
        .concat();
        let fixed_suffix = fixed_suffix_text.chars().count();
        let (body_chars, prefix_chars) = self.body_budget(prep, fixed_suffix);
        let mut max_tokens = self.answer_tokens(0.8, body_chars);
        if let Some(cap) = prep.summary_token_cap {
            // The whole summary must fit the cap, or `cap` cuts the end of the body (the
            // identifiers and tool activity): ask for no more than the suffix leaves.
            let suffix_tokens = self.counter.count_text(&fixed_suffix_text);
            max_tokens = max_tokens.min(cap.saturating_sub(suffix_tokens).max(MIN_SUMMARY_TOKENS));
        }
        let prefix_max_tokens = self.answer_tokens(0.5, prefix_chars);
        if new_content > max_history && !to_summarize.is_empty() {
            let pruned = prune_history_for_context_share(
                &to_summarize,
                self.window,
                settings.max_history_share,
                2,
                self.counter,
            );
            if pruned.report.dropped_chunks > 0 {
                warn!(
                    target: "rampart::compaction",
                    dropped_chunks = pruned.report.dropped_chunks,
                    dropped_messages = pruned.report.dropped_messages,
                    kept_tokens = pruned.report.kept_tokens,
                    "history exceeds its share of the summarizer window; summarizing the oldest part separately"
                );
                to_summarize = pruned.messages;
                if !pruned.dropped.is_empty() {
                    let dropped = self.summarize_in_stages(
                        &pruned.dropped,
                        previous.as_deref(),
                        &base_instructions,
                        max_tokens,
                        SummaryKind::DroppedHistory,
                    )?;
                    dropped_level = dropped.level;
                    dropped_notes = dropped.notes;
                    previous = Some(dropped.text);
                }
                history_share = Some(pruned.report);
            }
        }

        // Step 6: the latest turns, quoted verbatim (and still summarised, see module docs).
        let preserved_section = if history_share.is_some() {
            format_preserved_turns_section_within(
                &split_preserved_recent_turns(&to_summarize, turns).preserved,
                preserved_limit,
            )
        } else {
            format_preserved_turns_section_within(&preserved_before, preserved_limit)
        };

        let mut seed: Vec<SharedMessage> = to_summarize.clone();
        seed.extend(prep.turn_prefix_messages.iter().cloned());
        let latest_ask = extract_latest_user_ask(&seed);
        let identifier_seed: Vec<String> = seed
            .iter()
            .rev()
            .take(QUALITY_IDENTIFIER_SEED_MESSAGES)
            .rev()
            .map(|m| message_text(m))
            .filter(|t| !t.is_empty())
            .collect();
        let identifiers = extract_opaque_identifiers(&identifier_seed.join("\n"));

        // Steps 7–9: summaries, with quality retries.
        let attempts = settings.quality_attempts();
        let mut best: Option<(Staged, String, Option<QualityAudit>)> = None;
        let mut feedback: Option<String> = None;
        let mut made = 0;
        let mut parts = 1;
        for attempt in 0..attempts {
            let instructions = self.instructions(feedback.as_deref());
            let outcome = self.attempt(
                prep,
                &to_summarize,
                previous.as_deref(),
                &instructions,
                max_tokens,
                prefix_max_tokens,
            );
            let (history, prefix, attempt_parts) = match outcome {
                Ok(v) => v,
                // A quality retry that runs out of time keeps the summary already made.
                Err(StageError::Interrupted(Interrupt::Timeout)) if best.is_some() => {
                    warn!(target: "rampart::compaction", attempt = attempt + 1, "quality retry timed out; keeping the previous summary");
                    break;
                }
                Err(e) => return Err(e),
            };
            made += 1;
            parts = attempt_parts;
            let audit = (attempts > 1).then(|| {
                audit_summary_quality(
                    &history.text,
                    &identifiers,
                    latest_ask.as_deref(),
                    settings.identifier_policy,
                )
            });
            let ok = audit.as_ref().is_none_or(|a| a.ok);
            // A retry that needed a worse fallback level does not replace a better summary.
            let better = best
                .as_ref()
                .is_none_or(|(b, _, _)| history.level <= b.level);
            if better {
                best = Some((history, prefix, audit.clone()));
            }
            if ok || attempt + 1 == attempts {
                break;
            }
            let reasons = audit.map(|a| a.reasons).unwrap_or_default();
            info!(target: "rampart::compaction", attempt = attempt + 1, reasons = reasons.join(", ").as_str(), "summary failed the quality audit; regenerating");
            feedback = Some(quality_feedback(settings.identifier_policy, &reasons));
        }
        let Some((history, prefix, quality)) = best else {
            return Err(StageError::Interrupted(Interrupt::Timeout));
        };

        // Steps 10–11: suffix, cap.
        let split_section = format_split_turn_section(&prefix);
        let suffix = assemble_suffix(&[
            &split_section,
            &preserved_section,
            &failures_section,
            &files_section,
        ]);
        // The main summary was written on top of the set-aside history's; restate what that
        // one said about left-out content if the model dropped it.
        let missing: Vec<&String> = dropped_notes
            .iter()
            .filter(|n| !history.text.contains(n.as_str()))
            .collect();
        let body = if missing.is_empty() {
            history.text
        } else {
            let notes: Vec<&str> = missing.iter().map(|n| n.as_str()).collect();
            format!("{}\n\n{}", history.text, notes.join("\n"))
        };
        let summary = self.cap(prep, &body, &suffix);
        Ok(self.finish(
            prep,
            summary,
            history.level.max(dropped_level),
            parts,
            made,
            quality,
            history_share,
        ))
    }

    #[allow(clippy::too_many_arguments)]
    fn finish(
        &self,
        prep: &Preparation,
        summary: String,
        level: u8,
        parts: usize,
        attempts: usize,
        quality: Option<QualityAudit>,
        history_share: Option<HistoryShareReport>,
    ) -> CompactionSummary {
        let message = AgentMessage::CompactionSummary(CompactionSummaryMessage {
            summary: summary.clone(),
            tokens_before: prep.tokens_before,
            timestamp: 0,
            extra: Extra::new(),
        });
        CompactionSummary {
            summary_chars: summary.chars().count(),
            tokens_after_estimate: self
                .counter
                .count_message(&message)
                .saturating_add(prep.kept_tokens),
            summary,
            first_kept_entry_id: prep.first_kept_entry_id.clone(),
            tokens_before: prep.tokens_before,
            fallback_level: level,
            parts,
            calls: self.calls(),
            details: prep.details.clone(),
            summarizer: self.summarizer.label().to_owned(),
            quality_attempts: attempts,
            quality,
            history_share,
        }
    }

    fn instructions(&self, feedback: Option<&str>) -> String {
        let s = self.settings;
        build_request_instructions(
            s.identifier_policy,
            s.identifier_instructions.as_deref(),
            s.custom_instructions.as_deref(),
            feedback,
        )
    }

    /// The 16,000-character cap, tightened until the summary also fits
    /// [`Preparation::summary_token_cap`]: the cap in characters shrinks in proportion to the
    /// overshoot, a few times at most (the count of a capped text is close to linear in its
    /// length), keeping the suffix as the plain cap does.
    fn cap(&self, prep: &Preparation, body: &str, suffix: &str) -> String {
        let mut max_chars = MAX_COMPACTION_SUMMARY_CHARS;
        let mut summary = cap_summary_preserving_suffix(body, suffix, max_chars);
        let Some(limit) = prep.summary_token_cap else {
            return summary;
        };
        for _ in 0..4 {
            let tokens = self.counter.count_text(&summary);
            if tokens <= limit {
                break;
            }
            let scaled =
                (max_chars as u128 * u128::from(limit) / u128::from(tokens.max(1))) as usize;
            max_chars = scaled.saturating_sub(32).max(200);
            summary = cap_summary_preserving_suffix(body, suffix, max_chars);
        }
        summary
    }

    /// Characters left for the body (and for a split turn's prefix summary) once the suffix
    /// sections known in advance are accounted for. Why: asking the model for more than the
    /// 16,000-character cap keeps only means the cap cuts its answer.
    fn body_budget(&self, prep: &Preparation, fixed_suffix_chars: usize) -> (usize, usize) {
        let left = MAX_COMPACTION_SUMMARY_CHARS.saturating_sub(fixed_suffix_chars);
        let prefix = if prep.is_split_turn && !prep.turn_prefix_messages.is_empty() {
            (left / 4).min(4_000)
        } else {
            0
        };
        (left - prefix, prefix)
    }

    /// The answer budget: `share` of the effective reserve, at most a quarter of the window,
    /// and no more than `chars` characters' worth.
    fn answer_tokens(&self, share: f64, chars: usize) -> u64 {
        let reserve = (self.settings.effective_reserve_tokens() as f64 * share).floor() as u64;
        let by_chars = (chars as u64).div_ceil(4);
        reserve
            .min(self.window / 4)
            .min(by_chars)
            .max(MIN_SUMMARY_TOKENS)
    }

    /// One summary attempt: the history (staged) and, concurrently, a split turn's prefix.
    fn attempt(
        &self,
        prep: &Preparation,
        to_summarize: &[SharedMessage],
        previous: Option<&str>,
        instructions: &str,
        max_tokens: u64,
        prefix_max_tokens: u64,
    ) -> Result<(Staged, String, usize), StageError> {
        let prefix_messages = &prep.turn_prefix_messages;
        let wants_prefix = prep.is_split_turn && !prefix_messages.is_empty();
        let prefix_job = || -> Result<Staged, StageError> {
            let max_chunk = self.max_chunk_for(prefix_messages);
            self.summarize_with_fallback(
                prefix_messages,
                None,
                Job {
                    label: Label::Fixed(SummaryKind::TurnPrefix),
                    task: Task::TurnPrefix,
                    instructions,
                    max_chunk,
                    max_tokens: prefix_max_tokens,
                },
            )
        };
        let history_job = || -> Result<(Staged, usize), StageError> {
            if to_summarize.is_empty() {
                let text = build_structured_fallback_summary(previous);
                return Ok((Staged::plain(text), 1));
            }
            let staged = self.summarize_in_stages_counted(
                to_summarize,
                previous,
                instructions,
                max_tokens,
                SummaryKind::Chunk { index: 0, of: 1 },
            )?;
            Ok(staged)
        };
        let (history, prefix) = std::thread::scope(|scope| {
            let handle = if wants_prefix {
                std::thread::Builder::new()
                    .name("compaction-prefix".into())
                    .spawn_scoped(scope, prefix_job)
                    .ok()
            } else {
                None
            };
            let history = history_job();
            let prefix = match handle {
                Some(h) => match h.join() {
                    Ok(r) => Some(r),
                    Err(panic) => std::panic::resume_unwind(panic),
                },
                None if wants_prefix => Some(prefix_job()),
                None => None,
            };
            (history, prefix)
        });
        let (history, parts) = history?;
        let (prefix_text, level) = match prefix {
            Some(p) => {
                let p = p?;
                (p.text, p.level)
            }
            None => (String::new(), 0),
        };
        Ok((
            Staged {
                text: history.text,
                level: history.level.max(level),
                notes: history.notes,
            },
            prefix_text,
            parts,
        ))
    }
}

#[path = "job.rs"]
mod job;
#[path = "requests.rs"]
mod requests;
#[path = "stages.rs"]
mod stages;

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;
