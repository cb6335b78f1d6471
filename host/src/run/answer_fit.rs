//! Fitting a proxied client's answer bound (`max_tokens`) to the model's window.
//!
//! Claude Code asks for 32,000 answer tokens whatever the model; at a 40,000-token window that
//! reserve left the prompt 8,000 tokens, less than the client's own system prompt and tools, so
//! the very first request was refused. A bound that takes more than half the window leaves no
//! room for the prompt: the precheck then reserves only the floor (`serve.minAnswerTokens`), and
//! each request asks for what fits beside its prompt, never more than the client asked and
//! never less than the floor. `rampart run` and `replay` do not fit: their bound is the model's.

use std::sync::{Arc, Mutex};

use rampart_context::guards::precheck::PRE_PROMPT_SAFETY_FACTOR;

use crate::providers::ClientFields;

/// Whether an answer bound of `requested` tokens leaves no room for the prompt in `window`:
/// it takes more than half the window.
pub fn leaves_no_room(window: u64, requested: u64) -> bool {
    requested > window / 2
}

/// The answer tokens the precheck reserves: the client's bound when it leaves room for the
/// prompt, else the floor (never above the bound: a client asking for less gets no more).
pub fn reserve_cap(window: u64, requested: u64, floor: u64) -> u64 {
    if leaves_no_room(window, requested) {
        requested.min(floor)
    } else {
        requested
    }
}

/// The bound a request of `prompt_tokens` (the run loop's count) is sent with: what the window
/// leaves beside the prompt with the precheck's safety margin, within [floor, requested].
pub fn grant(window: u64, requested: u64, floor: u64, prompt_tokens: u64) -> u64 {
    let estimated = (prompt_tokens as f64 * PRE_PROMPT_SAFETY_FACTOR).ceil() as u64;
    window
        .saturating_sub(estimated)
        .clamp(requested.min(floor), requested)
}

/// Anthropic refuses a request whose `thinking.budget_tokens` is not below `max_tokens`, and
/// Claude Code sends a budget one below its own bound (31,999 with 32,000). When the bound is
/// lowered to `granted`, such a budget is lowered with it, to `granted − 1` as Claude Code would
/// have chosen (never below Anthropic's minimum of 1,024; a grant that small leaves it as sent).
/// Returns the budget sent and the one lowered to, for the log.
pub fn fit_thinking(fields: &mut ClientFields, granted: u64) -> Option<(u64, u64)> {
    let budget = fields
        .fields
        .get_mut("thinking")?
        .as_object_mut()?
        .get_mut("budget_tokens")?;
    let sent = budget.as_u64()?;
    let lowered = granted.checked_sub(1)?;
    if sent < granted || lowered < MIN_THINKING_BUDGET {
        return None;
    }
    *budget = lowered.into();
    Some((sent, lowered))
}

/// Anthropic's smallest `thinking.budget_tokens`.
pub const MIN_THINKING_BUDGET: u64 = 1_024;

/// What the last attempt of a turn counted and asked for, kept for the client's answer (the
/// header when the bound was lowered) and for its error when nothing fitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FitRecord {
    /// The request's tokens, as the run loop counted them.
    pub prompt_tokens: u64,
    /// The model's window.
    pub window: u64,
    /// The answer bound in force (the client's `max_tokens`, or the model's `maxTokens`).
    pub requested: Option<u64>,
    /// The bound sent upstream, once a request was sent.
    pub granted: Option<u64>,
    /// The floor (`serve.minAnswerTokens`).
    pub floor: u64,
}

impl FitRecord {
    /// The bound sent, when it is lower than the one asked for.
    pub fn lowered(&self) -> Option<(u64, u64)> {
        match (self.granted, self.requested) {
            (Some(granted), Some(requested)) if granted < requested => Some((granted, requested)),
            _ => None,
        }
    }
}

/// Fitting in force for a run (`rampart serve`): the floor, and the record of the last attempt,
/// shared with the server, which reads it while the answer streams.
#[derive(Debug, Clone)]
pub struct AnswerFit {
    /// `serve.minAnswerTokens`.
    pub floor: u64,
    last: Arc<Mutex<Option<FitRecord>>>,
}

impl AnswerFit {
    /// Fitting with `floor` as the smallest bound a request is sent with.
    pub fn new(floor: u64) -> Self {
        Self {
            floor,
            last: Arc::default(),
        }
    }

    /// The last attempt's record.
    pub fn last(&self) -> Option<FitRecord> {
        *self.last.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps `record` as the last attempt's (the run loop's attempts, and serve's side requests).
    pub(crate) fn record(&self, record: FitRecord) {
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(record);
    }
}

#[cfg(test)]
#[path = "answer_fit_tests.rs"]
mod tests;
