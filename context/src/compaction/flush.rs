//! When the pre-compaction memory flush runs: OpenClaw's gate (`prompt-and-memory.md` §2.10),
//! with two of its faults fixed.
//!
//! The flush is a silent turn that writes durable facts to `memory/YYYY-MM-DD.md` before a
//! compaction summarises them away. It is due once the next request is within
//! `softThresholdTokens` of the compaction trigger, at most once per compaction cycle:
//! - **#25880**: OpenClaw's threshold subtracts `reserveTokensFloor` from the window, not the
//!   reserve the precheck really keeps, so with a large reserve the compaction came first and
//!   the flush never ran. Here the caller passes the effective reserve
//!   ([`super::settings::CompactionSettings::reserve_for`]), the same number the compaction
//!   trigger uses.
//! - **#47143**: OpenClaw records the flushed cycle as a number and compares it with the
//!   compaction count, so before the first compaction (both 0) it counted as already flushed
//!   and never fired. Here "never flushed" is `None`, distinct from "flushed in cycle 0".
//!
//! A stale token count (one not measured for the coming request) never fires it, as in
//! OpenClaw: a flush is a model call, and guessing would spend one for nothing.

use super::settings::MemoryFlushSettings;

/// What the gate looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlushInput {
    /// The model's context window, after caps.
    pub window: u64,
    /// The reserve the precheck keeps free below the window (the effective one).
    pub reserve: u64,
    /// Tokens of the coming request: the prompt as it stands, the last answer and the new
    /// message.
    pub tokens: u64,
    /// Whether `tokens` was measured for this request (not carried over from an older one).
    pub fresh: bool,
    /// The transcript's size on disk.
    pub transcript_bytes: u64,
    /// Compactions of the session so far (its compaction cycle).
    pub compactions: u64,
    /// The cycle the last flush ran in; `None` when it never ran.
    pub flushed_in_cycle: Option<u64>,
}

/// Why the flush is due, or why not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushDecision {
    /// Due: the coming request is past the threshold.
    DueTokens {
        /// `window − reserve − softThresholdTokens`.
        threshold: u64,
    },
    /// Due: the transcript is past `forceFlushTranscriptBytes`.
    DueTranscriptSize,
    /// Not due: turned off.
    Disabled,
    /// Not due: already ran in this compaction cycle.
    AlreadyFlushed,
    /// Not due: the token count is stale.
    Stale,
    /// Not due: below the threshold.
    Below {
        /// The threshold.
        threshold: u64,
    },
}

impl FlushDecision {
    /// Whether the flush should run now.
    pub fn is_due(self) -> bool {
        matches!(self, Self::DueTokens { .. } | Self::DueTranscriptSize)
    }
}

/// `window − reserve − soft`, never below zero.
pub fn flush_threshold(window: u64, reserve: u64, soft: u64) -> u64 {
    window.saturating_sub(reserve).saturating_sub(soft)
}

/// Whether the flush is due (see the module docs).
pub fn flush_decision(settings: &MemoryFlushSettings, input: &FlushInput) -> FlushDecision {
    if !settings.enabled {
        return FlushDecision::Disabled;
    }
    if input.flushed_in_cycle == Some(input.compactions) {
        return FlushDecision::AlreadyFlushed;
    }
    if settings.force_flush_transcript_bytes > 0
        && input.transcript_bytes >= settings.force_flush_transcript_bytes
    {
        return FlushDecision::DueTranscriptSize;
    }
    let threshold = flush_threshold(input.window, input.reserve, settings.soft_threshold_tokens);
    if !input.fresh {
        return FlushDecision::Stale;
    }
    if input.tokens >= threshold {
        FlushDecision::DueTokens { threshold }
    } else {
        FlushDecision::Below { threshold }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "flush_tests.rs"]
mod tests;
