//! A hygiene run that continues the previous one: when the history is the last input with
//! plain messages appended, the result is the last result with those messages appended.
//!
//! Why: the run loop hands hygiene the whole history on every model call, and the history
//! only grows between calls. Each pass reads every message, so a call cost O(messages held)
//! even when nothing could have changed: in a replay of tiny messages at 32k, hygiene was the
//! largest single cost of a call (BENCHMARKS.md, issue 24 item 10). A resumed run costs a
//! pointer comparison per old message and the passes' rules for the new ones.
//!
//! When it is safe: every pass is local to what it repairs (tool calls and their results,
//! runs of same-role messages, the transcript's first message, images, replies before the
//! latest compaction), and a *plain* message ([`is_plain`]: a user or a finished assistant
//! message of non-empty text, no tool call, no result, no image, no summary) gives none of
//! them anything to do, provided it alternates with the message before it and that message is
//! plain too (so no call is left waiting for a result it will not get). The rules a plain
//! message can still meet — a reply dated before the latest compaction has its usage zeroed —
//! are applied to the new messages as the full pass would. Anything else (a history limit, an
//! image in the history, another list) is a full run. `resume_tests.rs` checks the
//! two agree on random transcripts grown in random steps, for every provider family.

use rampart_message::{AgentMessage, Content, ContentBlock, MessageList, StopReason};

use super::{HygienePolicy, HygieneReport, history};
use crate::list_resume::ListResume;
use crate::message_memo::MessageMemo;
use rampart_message::SharedMessage;

/// What a run leaves to resume from, beside its input (kept by [`ListResume`]): its result,
/// and the timestamp of the latest compaction summary in its input, if any.
#[derive(Debug, Clone)]
pub(super) struct Kept {
    output: MessageList,
    report: HygieneReport,
    compacted: Option<u64>,
    /// Whether `output` is the input itself (no pass changed anything).
    unchanged: bool,
}

/// The slot [`super::HygieneMemo`] keeps, shared by its clones like its other memos: the last
/// input, under the policy it ran with. Behind an `Arc`, so handing it to a resume copies no
/// report.
pub(super) type LastSlot = ListResume<HygienePolicy, std::sync::Arc<Kept>>;

impl Kept {
    /// What a full run over `input` leaves to resume from; `None` when no run can resume from
    /// it (a history limit, an image in it, or a last message that is not plain).
    pub(super) fn new(
        policy: &HygienePolicy,
        input: &MessageList,
        output: &MessageList,
        report: &HygieneReport,
    ) -> Option<Self> {
        let resumable = policy.history_limit.is_none()
            && input.last().is_some_and(|m| is_plain(m))
            && !input.iter().any(|m| has_image(m));
        let compacted = input.iter().rev().find_map(|m| match m.as_ref() {
            AgentMessage::CompactionSummary(s) => Some(s.timestamp),
            _ => None,
        });
        resumable.then(|| Self {
            output: output.clone(),
            report: report.clone(),
            compacted,
            unchanged: MessageList::same_list(output, input),
        })
    }

    /// The run over `input`, whose first `from` messages were this run's input, resumed from
    /// this one; `None` when the messages after them are not plain alternating messages (then
    /// only a full run can tell).
    pub(super) fn resume(
        &self,
        from: usize,
        input: &MessageList,
        zeroed_usage: &MessageMemo<SharedMessage>,
    ) -> Option<Self> {
        let added = &input[from..];
        let mut before = input[..from].last()?;
        for message in added {
            if !is_plain(message) || same_role(before, message) {
                return None;
            }
            before = message;
        }
        let mut report = self.report.clone();
        // The only rule a plain message meets: a reply dated no later than the latest
        // compaction is stale (the kept tail predates the summary).
        let mut changed: Vec<(usize, SharedMessage)> = Vec::new();
        if let Some(compacted) = self.compacted {
            zeroed_usage.batch(|memo| {
                for (i, message) in added.iter().enumerate() {
                    if let Some(copy) = history::zeroed_if_stale(message, compacted, memo) {
                        report.stale_usage.zeroed += 1;
                        changed.push((i, copy));
                    }
                }
            });
        }
        let unchanged = self.unchanged && changed.is_empty();
        let output = if unchanged {
            input.clone()
        } else {
            let mut out = Vec::with_capacity(self.output.len() + added.len());
            out.extend(self.output.iter().cloned());
            out.extend(added.iter().cloned());
            for (i, copy) in changed {
                out[self.output.len() + i] = copy;
            }
            MessageList::from(out)
        };
        Some(Self {
            output,
            report,
            compacted: self.compacted,
            unchanged,
        })
    }

    /// The run's result.
    pub(super) fn result(&self) -> (MessageList, HygieneReport) {
        (self.output.clone(), self.report.clone())
    }
}

/// A user message, or an assistant message that finished (`stop` or `length`), whose content
/// is nothing but non-empty text: no pass has anything to repair in it.
fn is_plain(message: &AgentMessage) -> bool {
    let text_only = |blocks: &[ContentBlock]| {
        !blocks.is_empty()
            && blocks
                .iter()
                .all(|b| matches!(b, ContentBlock::Text(t) if !t.text.is_empty()))
    };
    match message {
        AgentMessage::User(u) => match &u.content {
            Content::Text(text) => !text.is_empty(),
            Content::Blocks(blocks) => text_only(blocks),
        },
        AgentMessage::Assistant(a) => {
            matches!(a.stop_reason, StopReason::Stop | StopReason::Length)
                && a.error_message.is_none()
                && text_only(&a.content)
        }
        _ => false,
    }
}

/// Whether both are user messages or both assistant messages (a run the turn validations
/// would merge).
fn same_role(a: &AgentMessage, b: &AgentMessage) -> bool {
    matches!(
        (a, b),
        (AgentMessage::User(_), AgentMessage::User(_))
            | (AgentMessage::Assistant(_), AgentMessage::Assistant(_))
    )
}

/// Whether a message carries an image block (the image pass's business).
fn has_image(message: &AgentMessage) -> bool {
    let content = match message {
        AgentMessage::User(u) => &u.content,
        AgentMessage::ToolResult(r) => &r.content,
        AgentMessage::Custom(c) => &c.content,
        _ => return false,
    };
    content
        .blocks()
        .iter()
        .any(|b| matches!(b, ContentBlock::Image(_)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "resume_tests.rs"]
mod tests;
