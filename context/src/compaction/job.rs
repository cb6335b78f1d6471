//! What one sequence of summarisation requests is asked to do. The planner (`stages.rs`)
//! builds jobs and the request loop (`requests.rs`) runs them; the job lives apart from both so
//! that dependencies go one way: stages → requests → job.

use crate::compaction::instructions::{
    MERGE_SUMMARIES_INSTRUCTIONS, SUMMARIZE_TASK, TURN_PREFIX_INSTRUCTIONS, UPDATE_TASK,
};
use crate::compaction::summarizer::SummaryKind;

/// What the requests of a sequence are asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Task {
    History,
    Merge,
    TurnPrefix,
}

impl Task {
    pub(super) fn text(self, has_previous: bool) -> &'static str {
        match self {
            Self::History if has_previous => UPDATE_TASK,
            Self::History => SUMMARIZE_TASK,
            Self::Merge => MERGE_SUMMARIES_INSTRUCTIONS,
            Self::TurnPrefix => TURN_PREFIX_INSTRUCTIONS,
        }
    }
}

/// How a sequence labels its requests.
#[derive(Debug, Clone, Copy)]
pub(super) enum Label {
    /// `Chunk { index, of }` per request.
    Chunks,
    /// The same kind for every request.
    Fixed(SummaryKind),
}

impl Label {
    pub(super) fn kind(self, index: usize, of: usize) -> SummaryKind {
        match self {
            Self::Chunks => SummaryKind::Chunk { index, of },
            Self::Fixed(kind) => kind,
        }
    }
}

/// One sequence of summarisation requests.
#[derive(Clone, Copy)]
pub(super) struct Job<'j> {
    pub(super) label: Label,
    pub(super) task: Task,
    pub(super) instructions: &'j str,
    pub(super) max_chunk: u64,
    pub(super) max_tokens: u64,
}
