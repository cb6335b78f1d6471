//! Staged summarisation: one sequence of requests, or parts summarised concurrently and
//! merged, with the fallback levels around each (`summarizeInStages`,
//! `summarizeWithFallback`).

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tracing::{debug, warn};

use super::job::{Job, Label, Task};
use super::requests::{CallError, ChunkFailure, lock};
use super::{MIN_MESSAGES_FOR_SPLIT, Run, StageError, Staged};
use crate::compaction::instructions::chunk_label;
use crate::compaction::split::{
    DEFAULT_SUMMARY_FALLBACK, adaptive_ratio_for, is_oversized_for_summary, max_chunk_tokens,
    normalize_parts, split_by_cost_share,
};
use crate::compaction::summarizer::{Interrupt, SummaryKind};
use crate::compaction::time::format_utc_minute;
use crate::compaction::transcript::{request_costs, serialize_each};
use rampart_message::AgentMessage;
use rampart_message::SharedMessage;

impl Run<'_> {
    /// The largest chunk for `messages` (`max(1, floor(window · adaptive ratio) − 4096)`),
    /// with each message sized as it appears in a request.
    pub(super) fn max_chunk_for(&self, messages: &[SharedMessage]) -> u64 {
        let costs = request_costs(&serialize_each(messages), self.counter);
        self.max_chunk_from(&costs)
    }

    pub(super) fn max_chunk_from(&self, costs: &[u64]) -> u64 {
        let total = costs.iter().fold(0u64, |a, &t| a.saturating_add(t));
        max_chunk_tokens(
            self.window,
            adaptive_ratio_for(total, costs.len(), self.window),
        )
    }

    pub(super) fn summarize_in_stages(
        &self,
        messages: &[SharedMessage],
        previous: Option<&str>,
        instructions: &str,
        max_tokens: u64,
        kind: SummaryKind,
    ) -> Result<Staged, StageError> {
        self.summarize_in_stages_counted(messages, previous, instructions, max_tokens, kind)
            .map(|(s, _)| s)
    }

    /// `summarizeInStages`: one sequence when the history fits a chunk (or is too short to
    /// split), otherwise parts by token share summarised concurrently and merged. Returns the
    /// summary and the number of parts.
    pub(super) fn summarize_in_stages_counted(
        &self,
        messages: &[SharedMessage],
        previous: Option<&str>,
        instructions: &str,
        max_tokens: u64,
        kind: SummaryKind,
    ) -> Result<(Staged, usize), StageError> {
        if messages.is_empty() {
            let text = previous.unwrap_or(DEFAULT_SUMMARY_FALLBACK).to_owned();
            return Ok((Staged::plain(text), 1));
        }
        // Sized by what each message costs in a request (tool results are cut to 2,000
        // characters there), not by its size in the context: planning by context size would
        // make several times more, much smaller, requests.
        let costs = request_costs(&serialize_each(messages), self.counter);
        let max_chunk = self.max_chunk_from(&costs);
        let total = costs.iter().fold(0u64, |a, &t| a.saturating_add(t));
        let parts = normalize_parts(self.settings.parts, messages.len());
        let label = match kind {
            SummaryKind::Chunk { .. } => Label::Chunks,
            other => Label::Fixed(other),
        };
        let job = Job {
            label,
            task: Task::History,
            instructions,
            max_chunk,
            max_tokens,
        };
        if parts <= 1 || messages.len() < MIN_MESSAGES_FOR_SPLIT || total <= max_chunk {
            return Ok((self.summarize_with_fallback(messages, previous, job)?, 1));
        }
        let ranges = split_by_cost_share(messages, parts, &costs);
        let of = ranges.len();
        debug!(target: "rampart::compaction", parts = of, tokens = total, max_chunk, "summarizing parts concurrently");
        let results = self.run_parts(messages, &ranges, job);
        let mut level = 0;
        let mut notes = Vec::new();
        let mut merge_input = Vec::with_capacity(of);
        for (index, (result, range)) in results.into_iter().zip(&ranges).enumerate() {
            let staged = result?;
            level = level.max(staged.level);
            notes.extend(staged.notes);
            let label = chunk_label(index, of, &time_range(&messages[range.clone()]));
            merge_input.push(Arc::new(AgentMessage::user_text(
                format!("{label}\n{}", staged.text),
                index as u64 + 1,
            )));
        }
        let merged = self.summarize_with_fallback(
            &merge_input,
            previous,
            Job {
                label: Label::Fixed(SummaryKind::Merge),
                task: Task::Merge,
                max_chunk: self.max_chunk_for(&merge_input),
                ..job
            },
        )?;
        // A model merge may drop what the parts said about left-out content; restate it.
        let missing: Vec<String> = notes
            .into_iter()
            .filter(|n| !merged.text.contains(n.as_str()))
            .collect();
        let text = if missing.is_empty() {
            merged.text
        } else {
            format!("{}\n\n{}", merged.text, missing.join("\n"))
        };
        let mut all_notes = merged.notes;
        all_notes.extend(missing);
        Ok((
            Staged {
                text,
                level: level.max(merged.level),
                notes: all_notes,
            },
            of,
        ))
    }

    /// Summarises the parts on up to `maxConcurrency` threads (this one included). A thread
    /// that cannot be spawned just means fewer workers.
    pub(super) fn run_parts(
        &self,
        messages: &[SharedMessage],
        ranges: &[Range<usize>],
        job: Job<'_>,
    ) -> Vec<Result<Staged, StageError>> {
        let of = ranges.len();
        let slots: Vec<Mutex<Option<Result<Staged, StageError>>>> =
            (0..of).map(|_| Mutex::new(None)).collect();
        let next = AtomicUsize::new(0);
        let worker = || {
            loop {
                let index = next.fetch_add(1, Ordering::SeqCst);
                if index >= of {
                    break;
                }
                let result = match self.check() {
                    Err(i) => Err(StageError::Interrupted(i)),
                    Ok(()) => self.summarize_with_fallback(
                        &messages[ranges[index].clone()],
                        None,
                        Job {
                            label: Label::Fixed(SummaryKind::Part { index, of }),
                            ..job
                        },
                    ),
                };
                if matches!(result, Err(StageError::Interrupted(_))) {
                    // Stop the siblings at once instead of letting them finish their parts.
                    self.control.cancel();
                }
                *lock(&slots[index]) = Some(result);
            }
        };
        let workers = of.min(self.settings.max_concurrency.max(1));
        std::thread::scope(|scope| {
            let mut handles = Vec::new();
            for n in 1..workers {
                let spawned = std::thread::Builder::new()
                    .name(format!("compaction-part-{n}"))
                    .spawn_scoped(scope, worker);
                match spawned {
                    Ok(h) => handles.push(h),
                    Err(e) => {
                        warn!(target: "rampart::compaction", error = %e, "could not start a summarization worker; continuing with fewer");
                        break;
                    }
                }
            }
            worker();
            for h in handles {
                if let Err(panic) = h.join() {
                    std::panic::resume_unwind(panic);
                }
            }
        });
        slots
            .into_iter()
            .map(|slot| {
                slot.into_inner()
                    .unwrap_or_else(PoisonError::into_inner)
                    .unwrap_or(Err(StageError::Interrupted(Interrupt::Cancelled)))
            })
            .collect()
    }

    /// `summarizeWithFallback`: level 0 (everything), level 1 (oversized messages left out and
    /// noted), level 2 (statistics plus an extractive summary, stating the failure).
    pub(super) fn summarize_with_fallback(
        &self,
        messages: &[SharedMessage],
        previous: Option<&str>,
        job: Job<'_>,
    ) -> Result<Staged, StageError> {
        if messages.is_empty() {
            let text = previous.unwrap_or(DEFAULT_SUMMARY_FALLBACK).to_owned();
            return Ok(Staged::plain(text));
        }
        let first = match self.summarize_chunks(messages, previous, job) {
            Ok(text) => return Ok(Staged::plain(text)),
            Err(f) => f,
        };
        if let CallError::Interrupted(i) = first.error {
            return Err(StageError::Interrupted(i));
        }
        warn!(target: "rampart::compaction", kind = ?job.label.kind(0, 1), error = first.error.describe().as_str(), completed = first.completed, planned = first.planned, "full summarization failed");
        let oversized: Vec<bool> = messages
            .iter()
            .map(|m| is_oversized_for_summary(m, self.window, self.counter))
            .collect();
        let oversized_count = oversized.iter().filter(|o| **o).count();
        let mut last_error = first.error.clone();
        if !matches!(first.error, CallError::Unavailable(_))
            && oversized_count > 0
            && oversized_count < messages.len()
        {
            let small: Vec<SharedMessage> = messages
                .iter()
                .zip(&oversized)
                .filter(|(_, o)| !**o)
                .map(|(m, _)| m.clone())
                .collect();
            let notes: Vec<String> = messages
                .iter()
                .zip(&oversized)
                .filter(|(_, o)| **o)
                .map(|(m, _)| {
                    let k = (self.counter.count_shared(m) as f64 / 1000.0).round() as u64;
                    format!("[Large {} (~{k}K tokens) omitted from summary]", m.role())
                })
                .collect();
            match self.summarize_chunks(&small, previous, job) {
                Ok(text) => {
                    return Ok(Staged {
                        text: format!("{text}\n\n{}", notes.join("\n")),
                        level: 1,
                        notes,
                    });
                }
                Err(f) => {
                    if let CallError::Interrupted(i) = f.error {
                        return Err(StageError::Interrupted(i));
                    }
                    warn!(target: "rampart::compaction", error = f.error.describe().as_str(), "summarization without oversized messages also failed");
                    last_error = f.error;
                }
            }
        }
        if !self.settings.extractive_fallback {
            return Err(StageError::Failed {
                messages: messages.len(),
                last_error: last_error.describe(),
            });
        }
        let note = format!(
            "[{} messages were summarized without a model because {} failed: {}]",
            messages.len(),
            self.summarizer.label(),
            last_error.describe()
        );
        Ok(Staged {
            text: self.statistics_summary(
                messages,
                previous,
                job,
                &first,
                &last_error,
                oversized_count,
            ),
            level: 2,
            notes: vec![note],
        })
    }

    /// Level 2: what the model summarised before failing (if anything), then an extractive
    /// summary of the rest, headed by the statistics and a plain statement of the failure.
    pub(super) fn statistics_summary(
        &self,
        messages: &[SharedMessage],
        previous: Option<&str>,
        job: Job<'_>,
        first: &ChunkFailure,
        last_error: &CallError,
        oversized: usize,
    ) -> String {
        let mut head = vec![
            format!(
                "[Model summary failed ({}: {}); statistics-only fallback: the sections below were extracted from the transcript without a model.]",
                self.summarizer.label(),
                last_error.describe()
            ),
            format!(
                "Context contained {} messages ({oversized} oversized).",
                messages.len()
            ),
        ];
        let (base, rest) = match &first.partial {
            Some(partial) => {
                head.push(format!(
                    "[Partial summary: chunks 1-{done} of {planned} were summarized. Chunks {next}-{planned} could not be processed.]",
                    done = first.completed,
                    planned = first.planned.max(first.completed + 1),
                    next = first.completed + 1,
                ));
                (
                    Some(partial.as_str()),
                    &messages[first.resume_at.min(messages.len())..],
                )
            }
            None => (previous, messages),
        };
        let kind = match job.task {
            Task::Merge => SummaryKind::Merge,
            _ => job.label.kind(0, 1),
        };
        let budget = usize::try_from(job.max_tokens.saturating_mul(4)).unwrap_or(usize::MAX);
        let body = self.extractive.summarize_messages(kind, rest, base, budget);
        format!("{}\n\n{body}", head.join("\n"))
    }
}

/// ` [YYYY-MM-DD HH:MM — YYYY-MM-DD HH:MM UTC]` for the messages' timestamps, or `""`
/// without any.
pub(super) fn time_range(messages: &[SharedMessage]) -> String {
    let stamps = messages
        .iter()
        .filter_map(|m| m.timestamp())
        .filter(|t| *t > 0);
    let (lo, hi) = stamps.fold((u64::MAX, 0u64), |(lo, hi), t| (lo.min(t), hi.max(t)));
    if lo == u64::MAX {
        return String::new();
    }
    if lo == hi {
        format!(" [{} UTC]", format_utc_minute(lo))
    } else {
        format!(
            " [{} — {} UTC]",
            format_utc_minute(lo),
            format_utc_minute(hi)
        )
    }
}
