//! The pre-compaction memory flush in the run loop: when the next request is within
//! `memoryFlush.softThresholdTokens` of the compaction trigger (or a compaction is about to
//! happen because the prompt does not fit), and no flush ran in this compaction cycle, the
//! durable facts of the context are written to today's memory note first
//! ([`crate::memory::flush`] has the pieces; the gate is `rampart_context`'s).
//!
//! A flush never fails a turn: whatever goes wrong is logged, recorded in the event and the
//! session entry, and the turn goes on.

use std::path::PathBuf;
use std::sync::Arc;

use rampart_context::compaction::flush::{FlushDecision, FlushInput, flush_decision};
use rampart_context::events::{Event, MemoryFlush};
use rampart_engine_api::memory::MemorySyncParams;
use rampart_message::{AgentMessage, SharedMessage};
use rampart_sessions::Session;
use rampart_sessions::fold::BranchFold;
use serde_json::json;

use super::{ResolvedModel, Runner};
use crate::memory::MemorySlot;
use crate::memory::flush::{
    FLUSH_ENTRY, FlushState, MAX_FLUSH_STEPS, answer_tool, append_note, extractive_note,
    flush_state, note_at, system_prompt, tool_calls, tool_specs, user_prompt,
};
use crate::providers::{Forwarded, ModelRequest};

/// Where a runner's flushes write: the memory slot (synced after a note) and the workspace.
pub struct FlushHook<'a> {
    /// The memory slot; no flush while it is off.
    pub slot: &'a MemorySlot,
    /// The agent workspace the note is appended in.
    pub workspace: PathBuf,
    /// The branch's compaction cycle and last flush, kept up to date turn by turn.
    pub branch: BranchFold<FlushState>,
}

/// What brought the flush check on.
pub(super) enum FlushTrigger<'p> {
    /// A request about to be sent: its token estimate, its messages and system prompt.
    Request {
        /// Tokens of the request.
        tokens: u64,
        /// Its messages.
        messages: &'p [SharedMessage],
        /// Its system prompt.
        system: Option<&'p str>,
    },
    /// The prompt does not fit: a compaction comes next. No model can read the context now,
    /// so the note is extractive.
    Overflow,
}

impl<'a> Runner<'a> {
    /// Flushes durable facts to long-term memory before compactions (see the module docs).
    pub fn with_memory_flush(mut self, slot: &'a MemorySlot, workspace: PathBuf) -> Self {
        self.memory_flush = Some(FlushHook {
            slot,
            workspace,
            branch: BranchFold::new(),
        });
        self
    }

    /// Runs the flush when it is due.
    pub(super) fn maybe_flush_memory(
        &mut self,
        session: &mut Session,
        resolved: &ResolvedModel,
        trigger: FlushTrigger<'_>,
    ) {
        let Some(hook) = &self.memory_flush else {
            return;
        };
        let slot = hook.slot;
        let settings = &self.settings.compaction.memory_flush;
        if !settings.enabled || !slot.is_on() {
            return;
        }
        let window = resolved.context_window;
        // The effective reserve: what lies between the window and the compaction trigger
        // (pain point 25880: not `reserveTokensFloor`).
        let trigger_at = self.compaction_budget(window, resolved.max_output_tokens);
        let reserve = window.saturating_sub(trigger_at);
        let tokens = match &trigger {
            FlushTrigger::Request { tokens, .. } => *tokens,
            FlushTrigger::Overflow => u64::MAX,
        };
        let bytes = session.report().bytes;
        let threshold = rampart_context::compaction::flush::flush_threshold(
            window,
            reserve,
            settings.soft_threshold_tokens,
        );
        // The cheap test first; the branch's state below costs the entries added since the last
        // turn that looked.
        if tokens < threshold && bytes < settings.force_flush_transcript_bytes {
            return;
        }
        let Some(hook) = self.memory_flush.as_mut() else {
            return;
        };
        let FlushState {
            compactions,
            flushed_in_cycle,
        } = flush_state(session.tree(), &mut hook.branch);
        let workspace = hook.workspace.clone();
        let settings = &self.settings.compaction.memory_flush;
        let decision = flush_decision(
            settings,
            &FlushInput {
                window,
                reserve,
                tokens,
                fresh: true,
                transcript_bytes: bytes,
                compactions,
                flushed_in_cycle,
            },
        );
        let reason = match decision {
            FlushDecision::DueTokens { .. } => "tokens",
            FlushDecision::DueTranscriptSize => "transcriptSize",
            _ => return,
        };
        let note = note_at(self.now_ms());
        let mut event = MemoryFlush {
            cycle: compactions,
            reason: reason.to_owned(),
            note: note.clone(),
            ..MemoryFlush::default()
        };
        let model_flush = match &trigger {
            FlushTrigger::Request {
                messages, system, ..
            } if !resolved.provider.is_simulated() => Some((*messages, *system)),
            _ => None,
        };
        match model_flush {
            Some((messages, system)) => {
                event.by = "model".to_owned();
                let outcome = self.flush_with_model(resolved, &workspace, &note, messages, system);
                event.calls = outcome.calls;
                event.bytes = outcome.bytes;
                event.error = outcome.error;
            }
            None => {
                event.by = "extractive".to_owned();
                let messages: Vec<SharedMessage> =
                    session.context().into_list().iter().cloned().collect();
                let text = extractive_note(&messages, compactions);
                match append_note(&workspace, &note, &text) {
                    Ok(n) => event.bytes = n,
                    Err(e) => event.error = Some(format!("could not append to {note}: {e}")),
                }
            }
        }
        match &event.error {
            Some(error) => {
                tracing::warn!(note = %note, by = %event.by, error = %error, "memory flush failed; the turn goes on");
            }
            None => {
                tracing::info!(note = %note, by = %event.by, bytes = event.bytes, cycle = compactions, "memory flushed before compaction");
            }
        }
        if event.bytes > 0
            && let Err(e) = slot.sync(MemorySyncParams {
                reason: "flush".to_owned(),
                force: false,
            })
        {
            tracing::warn!(error = %e, "memory index not updated after the flush; the next search re-reads the note");
        }
        let record = json!({
            "cycle": event.cycle,
            "reason": event.reason,
            "note": event.note,
            "bytes": event.bytes,
            "by": event.by,
            "calls": event.calls,
            "error": event.error,
        });
        // Recorded even when it failed: a flush that cannot write would otherwise be retried
        // (and fail) on every turn of the cycle.
        if let Err(e) = session.append_custom(FLUSH_ENTRY, Some(record)) {
            tracing::warn!(error = %e, "the memory flush could not be recorded in the session");
        }
        self.events.emit(Event::MemoryFlush(event));
    }

    /// The silent turn: the context, the flush prompts, and the `read`/`write` tools, for at
    /// most [`MAX_FLUSH_STEPS`] model calls. Nothing of it enters the session.
    fn flush_with_model(
        &self,
        resolved: &ResolvedModel,
        workspace: &std::path::Path,
        note: &str,
        messages: &[SharedMessage],
        system: Option<&str>,
    ) -> FlushOutcome {
        let settings = &self.settings.compaction.memory_flush;
        let flush_system = system_prompt(settings, note);
        let system = Some(match system {
            Some(s) if !s.trim().is_empty() => format!("{s}\n\n{flush_system}"),
            _ => flush_system,
        });
        let mut list: Vec<SharedMessage> = messages.to_vec();
        list.push(Arc::new(AgentMessage::user_text(
            user_prompt(settings, note),
            self.now_ms(),
        )));
        let forwarded = Forwarded {
            tools: tool_specs(note),
            credential: self.settings.forwarded.credential.clone(),
            ..Forwarded::default()
        };
        let mut outcome = FlushOutcome::default();
        for _ in 0..MAX_FLUSH_STEPS {
            let request = ModelRequest {
                model: resolved.name.model.clone(),
                system: system.clone(),
                messages: list.clone().into(),
                max_tokens: resolved.max_output_tokens,
                deadline: None,
                forwarded: forwarded.clone(),
            };
            outcome.calls += 1;
            let reply = match resolved.provider.complete(&request) {
                Ok(r) => r.message,
                Err(e) => {
                    outcome.error = Some(format!("the model could not be asked: {e}"));
                    return outcome;
                }
            };
            let reply = AgentMessage::Assistant(reply);
            let calls = tool_calls(&reply);
            list.push(Arc::new(reply));
            if calls.is_empty() {
                break;
            }
            for call in calls {
                let answer = answer_tool(workspace, note, &call.name, &call.arguments);
                outcome.bytes += answer.bytes;
                let failed = answer.error.is_some();
                if failed {
                    // The flush goes on (the model may answer NO_REPLY); the event and the log
                    // keep the reason.
                    outcome.error = answer.error;
                }
                list.push(Arc::new(AgentMessage::tool_result(
                    &call.id,
                    &call.name,
                    answer.text,
                    failed,
                    self.now_ms(),
                )));
            }
        }
        outcome
    }
}

#[derive(Debug, Default)]
struct FlushOutcome {
    calls: u32,
    bytes: u64,
    error: Option<String>,
}
