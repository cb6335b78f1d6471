//! Compaction (layer 3 of the context defence): replace old history with a structured summary.
//!
//! Why a library in engine-api rather than code inside the legacy engine: compaction is the
//! layer users most often see break (orphaned tool pairs, summarisation requests that overflow
//! themselves, hangs, lost context), so its algorithm is pure, tested on its own, and reusable
//! by any engine. Nothing here does I/O: the engine reads the session, calls [`prepare()`] and
//! [`compact`], and appends the `compaction` entry only when [`compact`] returned `Ok`. A failed,
//! timed-out or cancelled compaction therefore leaves the session exactly as it was.
//!
//! The pipeline, module by module:
//!
//! - [`settings`]: `agents.defaults.compaction.*`, validated with errors that name the key;
//! - [`prepare`](mod@prepare): where to cut, what to summarise, what to keep ([`Preparation`]);
//! - [`split`], [`history_share`]: token-share splitting that never separates a tool call from
//!   its results, chunking, and history-share pruning;
//! - [`transcript`], [`instructions`]: what the summariser is asked (serialised conversation and
//!   prompts);
//! - [`summarizer`]: the [`Summarizer`] trait a model (or a test script) implements, and
//!   [`Control`] for cancellation and deadlines;
//! - [`extractive`]: the embedded deterministic summariser used without a compaction model and
//!   as the last fallback;
//! - [`quality`], [`identifiers`]: the quality audit and the structured fallback summary;
//! - [`suffix`], [`file_ops`]: the sections appended after the summary body, and the 16k cap;
//! - [`run`]: the orchestrator, [`compact`].

pub mod extractive;
pub mod file_ops;
pub mod flush;
pub mod history_share;
pub mod identifiers;
pub mod instructions;
pub mod prepare;
pub mod quality;
pub mod run;
pub mod settings;
pub mod split;
pub mod suffix;
pub mod summarizer;
pub mod transcript;

mod time;

#[cfg(test)]
pub(crate) mod test_support;

pub use extractive::{EXTRACTIVE_LABEL, ExtractiveSummarizer};
pub use file_ops::CompactionDetails;
pub use prepare::{ContextEntry, Preparation, PrepareOptions, SkipReason, prepare, prepare_with};
pub use run::{CompactionError, CompactionSummary, compact};
pub use settings::{CompactionConfigError, CompactionSettings};
pub use summarizer::{Control, SummarizeError, Summarizer, SummaryKind, SummaryRequest};
