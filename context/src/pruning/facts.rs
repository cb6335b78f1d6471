//! What pruning does to one message, and where a pruning call gets it: computed on the spot
//! ([`Direct`]) or remembered ([`super::PruneMemo`]). Apart from `prune.rs` and `memo.rs` so
//! that both depend on it, and not on each other.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::estimate::{Measure, measure};
use super::settings::SoftTrim;
use super::trim::{self, SoftTrimKind};
use crate::tokens::estimate_string_chars;
use rampart_message::{SharedMessage, ToolResultMessage};

/// What pruning did to one tool result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PruneAction {
    /// Cut to its head and tail with a notice (step 5).
    SoftTrimmed,
    /// Kept whole, but its images were replaced by a marker (step 5).
    ImagesRemoved,
    /// Replaced by the placeholder (step 6). A result trimmed first and then cleared reports
    /// only this.
    HardCleared,
}

/// A pruned version of one tool result.
#[derive(Debug, Clone)]
pub(crate) struct Replacement {
    pub(crate) message: SharedMessage,
    /// Its estimate characters.
    pub(crate) chars: u64,
    pub(crate) action: PruneAction,
}

/// Where a pruning call gets sizes and pruned versions: computed on the spot, or from a
/// [`PruneMemo`].
pub(crate) trait Facts {
    /// The measure of every message of `list`, in order.
    fn measure_all(&mut self, list: &[SharedMessage]) -> Vec<Measure>;
    /// `result` (the content of `message`) soft-trimmed, or `None` if trimming leaves it.
    fn soft_trimmed(
        &mut self,
        message: &SharedMessage,
        result: &ToolResultMessage,
        trim: &SoftTrim,
    ) -> Option<Replacement>;
    /// `result` cleared, or `None` if it already is the placeholder.
    fn cleared(
        &mut self,
        message: &SharedMessage,
        result: &ToolResultMessage,
        placeholder: &str,
    ) -> Option<Replacement>;
}

/// No memo: everything is computed on the spot.
pub(crate) struct Direct;

impl Facts for Direct {
    fn measure_all(&mut self, list: &[SharedMessage]) -> Vec<Measure> {
        list.iter().map(|m| measure(m)).collect()
    }

    fn soft_trimmed(
        &mut self,
        _: &SharedMessage,
        result: &ToolResultMessage,
        trim: &SoftTrim,
    ) -> Option<Replacement> {
        compute_soft_trim(result, trim)
    }

    fn cleared(
        &mut self,
        _: &SharedMessage,
        result: &ToolResultMessage,
        placeholder: &str,
    ) -> Option<Replacement> {
        compute_clear(result, placeholder)
    }
}

pub(crate) fn compute_soft_trim(
    result: &ToolResultMessage,
    trim: &SoftTrim,
) -> Option<Replacement> {
    let (text, kind) = trim::soft_trim(result, trim)?;
    Some(Replacement {
        chars: estimate_string_chars(&text),
        message: Arc::new(trim::with_text(result, text)),
        action: match kind {
            SoftTrimKind::Trimmed => PruneAction::SoftTrimmed,
            SoftTrimKind::ImagesRemoved => PruneAction::ImagesRemoved,
        },
    })
}

pub(crate) fn compute_clear(result: &ToolResultMessage, placeholder: &str) -> Option<Replacement> {
    if trim::is_cleared(result, placeholder) {
        return None;
    }
    Some(Replacement {
        chars: estimate_string_chars(placeholder),
        message: Arc::new(trim::with_text(result, placeholder.to_owned())),
        action: PruneAction::HardCleared,
    })
}
