//! The summariser interface, and [`Control`]: cancellation and the deadline every call obeys.
//!
//! Why a trait: the orchestrator is the same whether summaries come from the host's model
//! (the legacy engine implements [`Summarizer`] over `llm.complete`), from the embedded
//! [`super::ExtractiveSummarizer`], or from a scripted test double.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rampart_message::SharedMessage;

/// Produces summaries. Implementations are called from several threads at once (part
/// summaries run concurrently), hence `Sync`.
pub trait Summarizer: Sync {
    /// Answers one request with the summary text, or says why it could not. Must honour
    /// `request.control`: stop waiting when it is cancelled or its deadline passes (pass
    /// [`Control::remaining`] on as the request timeout), because a call that ignores it keeps
    /// the whole compaction waiting.
    fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, SummarizeError>;

    /// The compaction model's context window in tokens. Every request is sized to fit it
    /// (prompt plus `max_tokens`), so the summarisation request can never overflow by
    /// construction, only by estimate error (which [`SummarizeError::Overflow`] reports).
    fn context_window(&self) -> u64;

    /// A name for events and logs: the model id, or `extractive`.
    fn label(&self) -> &str;
}

/// What a request is for, so a summariser (or a test) can tell the calls apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SummaryKind {
    /// A call summarising part `index` (0-based) of `of` parts; the parts run concurrently
    /// and are merged afterwards. A part larger than one request takes several calls, each
    /// carrying the running summary in `previous_summary`.
    Part {
        /// Which part, from 0.
        index: usize,
        /// How many parts.
        of: usize,
    },
    /// Chunk `index` (0-based) of `of` of a history summarised in one sequence (no parts).
    Chunk {
        /// Which chunk, from 0.
        index: usize,
        /// How many chunks were planned (shrinking may add calls).
        of: usize,
    },
    /// Merging the part summaries (given as user messages) into one.
    Merge,
    /// Summarising the prefix of a turn the cut split.
    TurnPrefix,
    /// Summarising history set aside by history-share pruning.
    DroppedHistory,
}

/// One summarisation request. Borrowed: it lives for the call only.
#[derive(Debug, Clone, Copy)]
pub struct SummaryRequest<'a> {
    /// What the call is for.
    pub kind: SummaryKind,
    /// The system prompt.
    pub system: &'a str,
    /// The full user content: the conversation in `<conversation>` tags, the previous summary,
    /// the task and the instructions. A model-backed summariser sends exactly this.
    pub prompt: &'a str,
    /// The messages the prompt's conversation was made from (for a merge: the part summaries
    /// as user messages). The extractive summariser reads these instead of the text. They are
    /// whole even when the prompt had to shorten one to fit the window.
    pub messages: &'a [SharedMessage],
    /// The running summary this call extends, also inside `prompt`.
    pub previous_summary: Option<&'a str>,
    /// The answer's token budget.
    pub max_tokens: u64,
    /// Cancellation and deadline for this call.
    pub control: &'a Control,
}

/// Why a summariser gave no summary. The orchestrator reacts per variant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SummarizeError {
    /// The request did not fit the model's window. The orchestrator shrinks the request and
    /// tries again; it never gives up on the first overflow.
    #[error("the summarization request overflowed the model's context window{}",
        observed_tokens.map(|t| format!(" ({t} tokens)")).unwrap_or_default())]
    Overflow {
        /// The prompt size the provider reported, when it did.
        observed_tokens: Option<u64>,
    },
    /// The call ran out of time. Ends the whole compaction at once.
    #[error("the summarization call timed out")]
    Timeout,
    /// The call was cancelled. Ends the whole compaction at once.
    #[error("the summarization call was cancelled")]
    Cancelled,
    /// No model can be used (none configured, no credentials). Not retried: the orchestrator
    /// goes straight to its extractive fallback.
    #[error("the summarization model is unavailable: {0}")]
    Unavailable(String),
    /// Any other failure. Retried (3 attempts by default), then the fallback levels apply.
    #[error("the summarization call failed: {0}")]
    Failed(String),
}

/// Why work stopped early: the deadline passed or someone cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interrupt {
    /// The deadline passed.
    Timeout,
    /// The cancel flag was raised.
    Cancelled,
}

/// Cancellation and deadline, shared by every call of one compaction. Cheap to clone (clones
/// share the flags).
#[derive(Clone, Default)]
pub struct Control {
    /// This control's own flag, raised by [`Control::cancel`].
    flag: Arc<AtomicBool>,
    /// Flags of the controls this one was derived from: raising any of them cancels it too.
    parents: Vec<Arc<AtomicBool>>,
    deadline: Option<Instant>,
}

impl fmt::Debug for Control {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Control")
            .field("cancelled", &self.is_cancelled())
            .field("remaining", &self.remaining())
            .finish()
    }
}

impl Control {
    /// No deadline, not cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// A control cancelled through `flag`, which the caller keeps (for example the engine's
    /// per-call cancellation).
    pub fn with_cancel_flag(flag: Arc<AtomicBool>) -> Self {
        Self {
            flag,
            ..Self::default()
        }
    }

    /// The same control, ending at `deadline` (or the earlier deadline it already had).
    pub fn with_deadline(mut self, deadline: Instant) -> Self {
        self.deadline = Some(self.deadline.map_or(deadline, |d| d.min(deadline)));
        self
    }

    /// The same control, ending `timeout` from now at the latest.
    pub fn with_timeout(self, timeout: Duration) -> Self {
        let deadline = Instant::now().checked_add(timeout);
        match deadline {
            Some(d) => self.with_deadline(d),
            None => self,
        }
    }

    /// A control with its own cancel flag that is also cancelled when this one is, with the
    /// same deadline. Why: the orchestrator stops sibling calls after one part aborted without
    /// raising the caller's flag.
    pub fn child(&self) -> Self {
        let mut parents = self.parents.clone();
        parents.push(self.flag.clone());
        Self {
            flag: Arc::new(AtomicBool::new(false)),
            parents,
            deadline: self.deadline,
        }
    }

    /// Raises this control's flag (and so cancels its children).
    pub fn cancel(&self) {
        self.flag.store(true, Ordering::SeqCst);
    }

    /// Whether this control or one it derives from was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::SeqCst) || self.parents.iter().any(|p| p.load(Ordering::SeqCst))
    }

    /// The deadline, if there is one.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Time left before the deadline (zero once passed); `None` without a deadline.
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// Whether the deadline has passed.
    pub fn is_expired(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// `Err` once cancelled or past the deadline; cancellation wins when both hold.
    pub fn check(&self) -> Result<(), Interrupt> {
        if self.is_cancelled() {
            Err(Interrupt::Cancelled)
        } else if self.is_expired() {
            Err(Interrupt::Timeout)
        } else {
            Ok(())
        }
    }

    /// Sleeps for `duration`, waking early (with `Err`) on cancellation or the deadline.
    pub fn sleep(&self, duration: Duration) -> Result<(), Interrupt> {
        const STEP: Duration = Duration::from_millis(20);
        let end = Instant::now() + duration;
        loop {
            self.check()?;
            let now = Instant::now();
            if now >= end {
                return Ok(());
            }
            std::thread::sleep(STEP.min(end - now));
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn children_follow_their_parents_but_not_the_reverse() {
        let parent = Control::new();
        let child = parent.child();
        child.cancel();
        assert!(child.is_cancelled());
        assert!(!parent.is_cancelled());
        let other = parent.child();
        parent.cancel();
        assert!(other.is_cancelled());
        assert_eq!(other.check(), Err(Interrupt::Cancelled));
    }

    #[test]
    fn deadlines_only_get_earlier() {
        let c = Control::new().with_timeout(Duration::from_secs(3600));
        let late = c.deadline().unwrap();
        let c = c.with_deadline(Instant::now());
        assert!(c.deadline().unwrap() < late);
        assert!(c.is_expired());
        assert_eq!(c.check(), Err(Interrupt::Timeout));
        assert_eq!(c.sleep(Duration::from_secs(60)), Err(Interrupt::Timeout));
        assert_eq!(Control::new().remaining(), None);
        assert_eq!(Control::new().sleep(Duration::ZERO), Ok(()));
    }

    #[test]
    fn errors_read_well() {
        let e = SummarizeError::Overflow {
            observed_tokens: Some(9000),
        };
        assert_eq!(
            e.to_string(),
            "the summarization request overflowed the model's context window (9000 tokens)"
        );
    }
}
