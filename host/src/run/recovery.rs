//! Overflow recovery (reference §7.4): compaction through the engine, then one in-session
//! tool-result truncation pass, then an error the user can act on.
//!
//! Why this order: compaction keeps the meaning of the whole history in a summary, while
//! truncation only shortens tool outputs, which cannot help when the conversation itself is too
//! long; and giving up is the last resort, with a message that says what to do.

use std::time::Instant;

use rampart_context::guards::precheck::{
    PRE_PROMPT_SAFETY_FACTOR, PRECHECK_OVERFLOW_MESSAGE, PrecheckInput, precheck,
};
use rampart_context::guards::tool_result::session_likely_has_oversized_tool_results;
use rampart_context::overflow::{CONTEXT_OVERFLOW_USER_MESSAGE, is_compaction_failure_error};
use rampart_engine_api::protocol::{CompactParams, CompactResult, ModelRef, PrepareCompaction};
use rampart_sessions::Session;
use rampart_sessions::store::{CompactionCheckpoint, CompactionSnapshot, RegistryChange};
use serde_json::json;

use super::events::*;
use super::{OverflowKind, Recovery, Runner, TurnError, session_ref};
use crate::config::ModelName;
use crate::engine::slot::{RequiredEngineFailed, SlotCallError};
use crate::persist::{PersistError, truncate_tool_results_in_session};

/// Why a compaction did not happen.
#[derive(Debug)]
pub(crate) enum CompactFailure {
    /// It failed; the turn may go on (truncation, then the overflow error).
    Failed(String),
    /// A `required = true` engine failed: the turn stops with its line.
    Required(RequiredEngineFailed),
}

impl std::fmt::Display for CompactFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Failed(reason) => f.write_str(reason),
            Self::Required(failed) => write!(f, "{failed}"),
        }
    }
}

pub(super) fn model_name(model: &ModelRef) -> ModelName {
    ModelName::new(model.provider.clone(), model.id.clone())
}

/// Compactions one turn may run for overflows (`MAX_OVERFLOW_COMPACTION_ATTEMPTS`).
pub const MAX_OVERFLOW_COMPACTION_ATTEMPTS: u32 = 3;

impl Runner<'_> {
    /// Handles one overflow. `Ok(())` means "retry the attempt"; an error ends the turn.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn recover(
        &mut self,
        session: &mut Session,
        recovery: &mut Recovery,
        model: &ModelRef,
        window: u64,
        text: &str,
        observed_tokens: Option<u64>,
        compact_then_truncate: bool,
        attempt: u32,
    ) -> Result<(), TurnError> {
        // The precheck's own decision is the budget at work, not an overflow: no request was
        // refused, and labelling it `overflow` read as a bug (issue 14).
        let by_budget = text == PRECHECK_OVERFLOW_MESSAGE;
        self.events.emit(Event::Overflow(Overflow {
            attempt,
            message: text.to_string(),
            observed_tokens,
            window,
            trigger: by_budget.then(|| "budget".to_string()),
            ..Default::default()
        }));
        let compaction_failure = is_compaction_failure_error(text);
        if !compaction_failure && recovery.overflow_compactions < MAX_OVERFLOW_COMPACTION_ATTEMPTS {
            recovery.overflow_compactions += 1;
            let result = self.compact(
                session,
                model,
                window,
                observed_tokens,
                if by_budget { "budget" } else { "overflow" },
                recovery.overflow_compactions,
            );
            match result {
                Ok(true) => {
                    recovery.compacted += 1;
                    if compact_then_truncate && self.truncate_in_session(session, window)? {
                        recovery.truncation_passes += 1;
                    }
                    self.events.emit(Event::Retry(Retry {
                        attempt,
                        after: "compaction".into(),
                    }));
                    return Ok(());
                }
                Ok(false) => {}
                Err(CompactFailure::Required(failed)) => return Err(failed.into()),
                Err(CompactFailure::Failed(reason)) => {
                    tracing::warn!(
                        session = %session.header().id,
                        "auto-compaction failed for {}: {reason}",
                        session.header().id
                    );
                }
            }
        }
        if !recovery.truncation_tried {
            recovery.truncation_tried = true;
            let history = session.context().messages;
            if session_likely_has_oversized_tool_results(&history, window)
                && self.truncate_in_session(session, window)?
            {
                recovery.truncation_passes += 1;
                self.events.emit(Event::Retry(Retry {
                    attempt,
                    after: "truncation".into(),
                }));
                return Ok(());
            }
        }
        let kind = if compaction_failure {
            OverflowKind::CompactionFailure
        } else {
            OverflowKind::ContextOverflow
        };
        self.events.emit(Event::GiveUp(GiveUp {
            kind: serde_json::to_value(kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            message: CONTEXT_OVERFLOW_USER_MESSAGE.to_string(),
            cause: Some(text.to_string()),
            ..Default::default()
        }));
        Err(TurnError::ContextOverflow {
            kind,
            message: CONTEXT_OVERFLOW_USER_MESSAGE.to_string(),
            cause: text.to_string(),
        })
    }

    /// A compaction the user asked for (`rampart compact`): runs under the same guard and
    /// model choice as a turn, with `instructions` for the summariser. Returns whether
    /// anything was compacted; an engine failure is an error and leaves the session as it was.
    pub fn compact_now(
        &mut self,
        session: &mut Session,
        instructions: Option<String>,
    ) -> Result<bool, TurnError> {
        let (name, window) = self.guard()?;
        let model = super::model_ref(&name, window);
        self.custom_instructions = instructions;
        let result = self.compact(session, &model, window, None, "manual", 1);
        self.custom_instructions = None;
        result.map_err(|failure| match failure {
            CompactFailure::Required(failed) => TurnError::RequiredEngine(failed),
            CompactFailure::Failed(reason) => TurnError::CompactionFailed { reason },
        })
    }

    /// One in-session tool-result truncation pass; true when it changed the session.
    pub(super) fn truncate_in_session(
        &mut self,
        session: &mut Session,
        window: u64,
    ) -> Result<bool, TurnError> {
        let result =
            truncate_tool_results_in_session(session, window, self.settings.tool_result_max_chars)
                .map_err(PersistError::from)?;
        let changed = result.changed;
        self.events.emit(Event::TruncationPass(TruncationPass {
            changed,
            rewritten: result.rewritten_entries,
            bytes_freed: result.bytes_freed,
            reason: result.reason.clone(),
        }));
        Ok(changed)
    }

    /// Asks the engine to compact and, when it did, appends the compaction entry and updates
    /// the registry. `Ok(false)`: nothing compacted (with the reason logged); `Err`: failed.
    /// The session is only written after a successful compaction, so a failure leaves it as
    /// it was.
    pub(crate) fn compact(
        &mut self,
        session: &mut Session,
        model: &ModelRef,
        window: u64,
        observed_tokens: Option<u64>,
        reason: &str,
        attempt: u32,
    ) -> Result<bool, CompactFailure> {
        let params =
            self.compact_params(session, model, window, observed_tokens, reason, attempt)?;
        let started = Instant::now();
        self.events.emit(Event::CompactionStart(CompactionStart {
            reason: reason.to_string(),
            attempt,
            observed_tokens,
        }));
        // The engine stops at the compaction timeout; the host's backstop waits a little
        // longer so the engine's own, cleaner "timed out" answer arrives first.
        let backstop = self.settings.compaction_timeout + std::time::Duration::from_secs(30);
        let result = self.slot.compact_within(params, backstop);
        let duration_ms = started.elapsed().as_millis() as u64;
        let outcome = match result {
            Ok(r) => r,
            Err(e) => {
                self.emit_compaction_end(reason, duration_ms, None, Some(&e.to_string()), None);
                return Err(match e {
                    SlotCallError::Required(failed) => CompactFailure::Required(failed),
                    other => CompactFailure::Failed(other.to_string()),
                });
            }
        };
        let persisted = self.persist_compaction(session, &outcome, reason);
        let entry_id = persisted.as_ref().ok().and_then(Option::as_deref);
        let failure = match (&outcome, &persisted) {
            (_, Err(e)) => Some(e.clone()),
            (CompactResult { ok: false, .. }, _) => Some(
                outcome
                    .reason
                    .clone()
                    .unwrap_or_else(|| "compaction failed".to_string()),
            ),
            _ => None,
        };
        self.emit_compaction_end(
            reason,
            duration_ms,
            Some(&outcome),
            failure.as_deref(),
            entry_id,
        );
        if let Some(failure) = failure {
            return Err(CompactFailure::Failed(failure));
        }
        if !outcome.compacted {
            tracing::info!(
                session = %session.header().id,
                "auto-compaction failed for {}: {}",
                session.header().id,
                outcome.reason.as_deref().unwrap_or("nothing to compact")
            );
        }
        Ok(outcome.compacted)
    }

    /// The `compact` call for `session` as it stands: its branch, the entry ids, and the
    /// target the compacted context must fit.
    fn compact_params(
        &self,
        session: &Session,
        model: &ModelRef,
        window: u64,
        observed_tokens: Option<u64>,
        reason: &str,
        attempt: u32,
    ) -> Result<CompactParams, CompactFailure> {
        let context = session.context();
        let entry_ids = context
            .entry_indices
            .iter()
            .map(|&i| session.entries()[i].id.clone())
            .collect();
        let compaction_model = match self.models.compaction_model(self.config, model) {
            Ok(m) => m,
            Err(e) => return Err(CompactFailure::Failed(e.to_string())),
        };
        let budget = self.compaction_budget(window, self.output_cap(&model_name(model)));
        Ok(CompactParams {
            session: session_ref(session),
            // The compacted context must fit the target share of the prompt budget, not the
            // whole of it: hysteresis, so the next compaction is many calls away.
            token_budget: Some(self.compaction_target(budget)),
            force: true,
            current_token_count: observed_tokens,
            compaction_target: Some("budget".to_string()),
            custom_instructions: self.custom_instructions.clone(),
            runtime_context: json!({ "trigger": reason, "attempt": attempt }),
            messages: context.into_list(),
            entry_ids,
            model: Some(model.clone()),
            compaction_model,
        })
    }

    /// The tokens a compaction aims to leave out of `budget` (`targetShare`).
    fn compaction_target(&self, budget: u64) -> u64 {
        let share = self.settings.compaction.target_share_for(budget);
        (budget as f64 * share).floor() as u64
    }

    /// The compaction to prepare ahead of need after a turn whose next request will hold
    /// `next_tokens`: `Some` once that crosses `compaction.prepareAt` of the prompt budget
    /// (and only for a runner that [prepares compactions](super::Runner::preparing_compactions)).
    pub(super) fn compaction_to_prepare(
        &self,
        session: &Session,
        model: &ModelRef,
        window: u64,
        next_tokens: u64,
    ) -> Option<PrepareCompaction> {
        let share = self.settings.compaction.prepare_at?;
        if !self.prepares_compactions {
            return None;
        }
        let budget = self.compaction_budget(window, self.output_cap(&model_name(model)));
        // Past the budget the next attempt compacts at once; nothing to get ahead of.
        if (next_tokens as f64) < share * budget as f64 || next_tokens >= budget {
            return None;
        }
        let growth = budget - next_tokens;
        // A compaction keeps at most two fifths of its target verbatim. While more than that
        // is still to come, a cut made now would keep nothing but the growth, and the context
        // after the swap would be larger than after a compaction made at the budget (earlier
        // compactions, measured on the main job): wait until the cut can be the same one.
        if growth > self.compaction_target(budget) * 2 / 5 {
            return None;
        }
        // Asked already for this stretch of context, which has only grown since: the engine
        // holds (or is making) that preparation and keeps it while the context continues it.
        // Asking again on every turn built the compaction's parameters (every entry id of the
        // context) each time, a fifth of a replay's call (BENCHMARKS.md, issue 24 item 10).
        if let Some(asked) = &self.memos.prepare_asked
            && asked.window == window
            && asked.session_id == session.header().id
            && asked.mark.still_continued_by(session.tree())
        {
            return None;
        }
        let compact = self
            .compact_params(session, model, window, None, "budget", 1)
            .ok()?;
        Some(PrepareCompaction {
            compact,
            growth_tokens: growth,
        })
    }

    /// What the compacted (or assembled) context must fit: the prompt budget the precheck
    /// allows (the window less the reserve it keeps), before its safety factor. Handing the engine the window
    /// instead would let it keep more than the retry can send, and the overflow would repeat.
    pub(super) fn compaction_budget(&self, window: u64, output_cap: Option<u64>) -> u64 {
        let outcome = precheck(&PrecheckInput {
            estimated_tokens: 0,
            context_window: window,
            reserve_tokens: self.settings.compaction.reserve_for(window, output_cap),
            tool_result_reducible_chars: 0,
        });
        ((outcome.prompt_budget_before_reserve as f64) / PRE_PROMPT_SAFETY_FACTOR).floor() as u64
    }

    /// Appends the compaction entry `outcome` describes, when it has one; its id is returned.
    fn persist_compaction(
        &mut self,
        session: &mut Session,
        outcome: &CompactResult,
        reason: &str,
    ) -> Result<Option<String>, String> {
        let Some(result) = outcome.result.as_ref().filter(|_| outcome.compacted) else {
            return Ok(None);
        };
        let (Some(summary), Some(first_kept)) = (&result.summary, &result.first_kept_entry_id)
        else {
            // An engine that keeps its own store reports what it did without a summary for
            // the transcript; there is nothing for the host to append.
            return Ok(None);
        };
        let details = (!result.details.is_null()).then(|| result.details.clone());
        let leaf_before = session.leaf_id().map(str::to_string);
        let entry_id = session
            .append_compaction(
                summary.clone(),
                first_kept.clone(),
                result.tokens_before,
                details,
                None,
            )
            .map_err(|e| format!("could not append the compaction entry: {e}"))?;
        session
            .sync()
            .map_err(|e| format!("could not sync the session: {e}"))?;
        if let Some(key) = self.registry.as_ref().map(|link| link.key.clone()) {
            let checkpoint = CompactionCheckpoint {
                checkpoint_id: entry_id.clone(),
                session_key: key,
                session_id: session.header().id.clone(),
                created_at: self.now_ms(),
                reason: reason.to_string(),
                tokens_before: Some(result.tokens_before),
                tokens_after: result.tokens_after,
                summary: None,
                first_kept_entry_id: Some(first_kept.clone()),
                pre_compaction: CompactionSnapshot {
                    session_id: session.header().id.clone(),
                    session_file: Some(session.path().display().to_string()),
                    leaf_id: leaf_before,
                    ..Default::default()
                },
                post_compaction: CompactionSnapshot {
                    session_id: session.header().id.clone(),
                    session_file: Some(session.path().display().to_string()),
                    leaf_id: Some(entry_id.clone()),
                    entry_id: Some(entry_id.clone()),
                    ..Default::default()
                },
                extra: Default::default(),
            };
            self.queue_registry(RegistryChange::Compaction(Box::new(checkpoint)));
        }
        Ok(Some(entry_id))
    }

    fn emit_compaction_end(
        &self,
        reason: &str,
        duration_ms: u64,
        outcome: Option<&CompactResult>,
        error: Option<&str>,
        entry_id: Option<&str>,
    ) {
        let result = outcome.and_then(|o| o.result.as_ref());
        let details = result.map(|r| &r.details);
        self.events.emit(Event::CompactionEnd(CompactionEnd {
            reason: reason.to_string(),
            compacted: outcome.is_some_and(|o| o.compacted),
            tokens_before: result.map(|r| r.tokens_before),
            tokens_after: result.and_then(|r| r.tokens_after),
            duration_ms,
            summary_chars: result
                .and_then(|r| r.summary.as_ref())
                .map(|s| s.chars().count() as u64),
            fallback_level: details.and_then(|d| d.get("fallbackLevel")).cloned(),
            parts: details.and_then(|d| d.get("parts")).cloned(),
            error: error.map(str::to_string),
            why: outcome.and_then(|o| o.reason.clone()),
            prepared: details
                .and_then(|d| d.get("prepared"))
                .and_then(serde_json::Value::as_bool)
                .unwrap_or(false),
            entry_id: entry_id.map(str::to_string),
            first_kept_entry_id: entry_id
                .and(result)
                .and_then(|r| r.first_kept_entry_id.clone()),
        }));
    }
}
