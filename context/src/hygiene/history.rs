//! Passes over the shape of the history: the turn limit, old images, stale usage.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::builder::ListBuilder;
use super::report::PassReport;
use crate::message_memo::MessageMemo;
use rampart_message::{
    AgentMessage, AssistantMessage, Content, ContentBlock, Cost, ToolResultMessage, Usage,
    UserMessage,
};
use rampart_message::{MessageList, SharedMessage};

/// What [`limit_history_turns`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct LimitReport {
    /// Messages cut from the front of the history.
    pub dropped: usize,
}

impl PassReport for LimitReport {
    fn changed(&self) -> bool {
        self.dropped > 0
    }

    fn absorb(&mut self, other: Self) {
        self.dropped += other.dropped;
    }
}

/// Keeps the history from the `limit`-th most recent user message on.
///
/// Why: channels (group chats, DMs) configure how many user turns of history the model sees.
/// `None`, zero or a negative limit means no limit; so does a history with no more than `limit`
/// user messages. In those cases `input` itself is returned. Only `user` messages count as
/// turns (custom and bash-execution messages do not). The cut can leave results whose call was
/// cut off: run [`crate::pairing::repair_tool_use_result_pairing`] afterwards, as
/// [`crate::hygiene::run`] does.
pub fn limit_history_turns(input: &MessageList, limit: Option<i64>) -> (MessageList, LimitReport) {
    let unchanged = || (input.clone(), LimitReport::default());
    let Some(limit) = limit.filter(|l| *l > 0) else {
        return unchanged();
    };
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let mut users = 0usize;
    let mut start = 0usize;
    for (i, message) in input.iter().enumerate().rev() {
        if matches!(message.as_ref(), AgentMessage::User(_)) {
            if users == limit {
                // One user message more than the limit: keep from the limit-th on.
                return (
                    input[start..].to_vec().into(),
                    LimitReport { dropped: start },
                );
            }
            users += 1;
            start = i;
        }
    }
    unchanged()
}

/// How many of the most recent completed turns keep their images.
pub const PRESERVE_RECENT_COMPLETED_TURNS: usize = 3;

/// The text an image of an old turn is replaced with.
///
/// Why: the model described or acted on the image when it first saw it; resending the bytes
/// every turn costs thousands of tokens each. The marker tells it an image was there.
pub const PRUNED_IMAGE_TEXT: &str =
    "[image no longer attached: the model saw it in an earlier turn]";

/// What [`prune_processed_history_images`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ImagePruneReport {
    /// Image blocks replaced by [`PRUNED_IMAGE_TEXT`].
    pub images_replaced: usize,
    /// Messages that had at least one image replaced.
    pub messages_changed: usize,
}

impl PassReport for ImagePruneReport {
    fn changed(&self) -> bool {
        self.images_replaced > 0
    }

    fn absorb(&mut self, other: Self) {
        self.images_replaced += other.images_replaced;
        self.messages_changed += other.messages_changed;
    }
}

/// Where the history stops being "processed": the start of the oldest of the last
/// [`PRESERVE_RECENT_COMPLETED_TURNS`] completed turns, if there are that many.
///
/// A turn opens at a user message, or at a tool result when no turn is open, and is completed
/// by the next assistant message. So in a tool loop (user, assistant with calls, results,
/// assistant) each assistant reply completes a turn.
fn processed_prefix(input: &MessageList) -> Option<usize> {
    let mut recent = [0usize; PRESERVE_RECENT_COMPLETED_TURNS];
    let mut completed = 0usize;
    let mut open = None;
    for (i, message) in input.iter().enumerate() {
        match message.as_ref() {
            AgentMessage::User(_) | AgentMessage::ToolResult(_) => {
                open.get_or_insert(i);
            }
            AgentMessage::Assistant(_) => {
                if let Some(start) = open.take() {
                    recent[completed % PRESERVE_RECENT_COMPLETED_TURNS] = start;
                    completed += 1;
                }
            }
            _ => {}
        }
    }
    (completed >= PRESERVE_RECENT_COMPLETED_TURNS)
        .then(|| recent[completed % PRESERVE_RECENT_COMPLETED_TURNS])
}

fn count_images(content: &Content) -> usize {
    content
        .blocks()
        .iter()
        .filter(|b| matches!(b, ContentBlock::Image(_)))
        .count()
}

fn without_images(content: &Content) -> Content {
    Content::Blocks(
        content
            .blocks()
            .iter()
            .map(|b| match b {
                ContentBlock::Image(_) => ContentBlock::text(PRUNED_IMAGE_TEXT),
                other => other.clone(),
            })
            .collect(),
    )
}

/// Replaces the image blocks of user messages and tool results that lie before the last
/// [`PRESERVE_RECENT_COMPLETED_TURNS`] completed turns with [`PRUNED_IMAGE_TEXT`].
///
/// The session keeps the images (messages are shared and never edited in place: changed ones
/// are new `Arc`s); only the request loses them. Returns `input` itself when no old image is
/// left.
pub fn prune_processed_history_images(input: &MessageList) -> (MessageList, ImagePruneReport) {
    let mut report = ImagePruneReport::default();
    let Some(cutoff) = processed_prefix(input) else {
        return (input.clone(), report);
    };
    let mut out = ListBuilder::new(input);
    for (i, message) in input.iter().enumerate() {
        let replaced = match message.as_ref() {
            _ if i >= cutoff => None,
            AgentMessage::User(u) => Some(count_images(&u.content)).filter(|n| *n > 0).map(|n| {
                let m = AgentMessage::User(UserMessage {
                    content: without_images(&u.content),
                    timestamp: u.timestamp,
                    extra: u.extra.clone(),
                });
                (n, m)
            }),
            AgentMessage::ToolResult(r) => {
                Some(count_images(&r.content)).filter(|n| *n > 0).map(|n| {
                    let m = AgentMessage::ToolResult(ToolResultMessage {
                        content: without_images(&r.content),
                        tool_call_id: r.tool_call_id.clone(),
                        tool_name: r.tool_name.clone(),
                        details: r.details.clone(),
                        is_error: r.is_error,
                        timestamp: r.timestamp,
                        extra: r.extra.clone(),
                    });
                    (n, m)
                })
            }
            _ => None,
        };
        match replaced {
            Some((n, m)) => {
                report.images_replaced += n;
                report.messages_changed += 1;
                out.push(Arc::new(m));
            }
            None => out.keep(i),
        }
    }
    (out.finish(), report)
}

/// What [`strip_stale_usage_before_latest_compaction`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct StaleUsageReport {
    /// Assistant messages whose usage was zeroed.
    pub zeroed: usize,
}

impl PassReport for StaleUsageReport {
    fn changed(&self) -> bool {
        self.zeroed > 0
    }

    fn absorb(&mut self, other: Self) {
        self.zeroed += other.zeroed;
    }
}

fn is_zero_usage(u: &Usage) -> bool {
    let c = &u.cost;
    u.input == 0
        && u.output == 0
        && u.cache_read == 0
        && u.cache_write == 0
        && u.total_tokens.is_none_or(|t| t == 0)
        && u.extra.is_empty()
        && c.input == 0.0
        && c.output == 0.0
        && c.cache_read == 0.0
        && c.cache_write == 0.0
        && c.total == 0.0
        && c.extra.is_empty()
}

fn zero_usage() -> Usage {
    Usage {
        total_tokens: Some(0),
        cost: Cost::default(),
        ..Usage::default()
    }
}

/// Zeroes the usage of assistant messages from before the latest compaction: those before the
/// latest compaction summary, and those after it whose timestamp is not later than the
/// summary's (the kept tail, which predates the compaction).
///
/// Why: usage records how large the context was when that reply was made. Before the
/// compaction it was larger than it is now; a reader that takes the last reported usage as the
/// current context size would otherwise compact again at once. Returns `input` itself when
/// there is no compaction summary or nothing left to zero.
pub fn strip_stale_usage_before_latest_compaction(
    input: &MessageList,
) -> (MessageList, StaleUsageReport) {
    strip_stale_usage(input, |_, a| Arc::new(zeroed_usage(a)))
}

/// [`strip_stale_usage_before_latest_compaction`] with each zeroed copy kept in `memo` for as
/// long as its original lives: every turn after a compaction hands the same history again, and
/// copying each stale reply again (new allocations, which the token counter's memo and the
/// engine ABI's deltas then see as new messages) made a turn cost O(bytes of history).
pub fn strip_stale_usage_before_latest_compaction_with(
    input: &MessageList,
    memo: &MessageMemo<SharedMessage>,
) -> (MessageList, StaleUsageReport) {
    memo.batch(|memo| {
        strip_stale_usage(input, |shared, a| {
            memo.get_or_insert_with(shared, |_| Arc::new(zeroed_usage(a)))
        })
    })
}

/// The pass, with `zeroed` giving the usage-zeroed copy of an input message.
fn strip_stale_usage(
    input: &MessageList,
    mut zeroed: impl FnMut(&SharedMessage, &AssistantMessage) -> SharedMessage,
) -> (MessageList, StaleUsageReport) {
    let mut report = StaleUsageReport::default();
    let latest = input
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, m)| match m.as_ref() {
            AgentMessage::CompactionSummary(s) => Some((i, s.timestamp)),
            _ => None,
        });
    let Some((at, compacted)) = latest else {
        return (input.clone(), report);
    };
    let mut out = ListBuilder::new(input);
    for (i, message) in input.iter().enumerate() {
        match message.as_ref() {
            AgentMessage::Assistant(a)
                if (i < at || a.timestamp <= compacted) && !is_zero_usage(&a.usage) =>
            {
                report.zeroed += 1;
                out.push(zeroed(message, a));
            }
            _ => out.keep(i),
        }
    }
    (out.finish(), report)
}

/// The stale-usage rule for a message after the latest compaction (dated `compacted`): its
/// usage-zeroed copy (kept in `memo`) when it is a reply not later than the summary that still
/// reports usage, as [`strip_stale_usage_before_latest_compaction_with`] would make it.
pub(super) fn zeroed_if_stale(
    message: &SharedMessage,
    compacted: u64,
    memo: &mut crate::message_memo::MemoBatch<'_, SharedMessage>,
) -> Option<SharedMessage> {
    match message.as_ref() {
        AgentMessage::Assistant(a) if a.timestamp <= compacted && !is_zero_usage(&a.usage) => {
            Some(memo.get_or_insert_with(message, |_| Arc::new(zeroed_usage(a))))
        }
        _ => None,
    }
}

/// `a` with its usage zeroed.
fn zeroed_usage(a: &AssistantMessage) -> AgentMessage {
    AgentMessage::Assistant(AssistantMessage {
        usage: zero_usage(),
        content: a.content.clone(),
        api: a.api.clone(),
        provider: a.provider.clone(),
        model: a.model.clone(),
        stop_reason: a.stop_reason.clone(),
        timestamp: a.timestamp,
        error_message: a.error_message.clone(),
        extra: a.extra.clone(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::hygiene::test_support::{answer, calls, list, result, roles, user};

    fn texts(list: &MessageList) -> Vec<String> {
        list.iter()
            .map(|m| match m.as_ref() {
                AgentMessage::User(u) => match u.content.blocks().first() {
                    Some(ContentBlock::Text(t)) => t.text.clone(),
                    _ => String::new(),
                },
                AgentMessage::Assistant(a) => match a.content.first() {
                    Some(ContentBlock::Text(t)) => t.text.clone(),
                    _ => String::new(),
                },
                _ => String::new(),
            })
            .collect()
    }

    fn six() -> MessageList {
        list(
            (0..6)
                .map(|i| {
                    let text = format!("message {i}");
                    if i % 2 == 0 {
                        user(&text)
                    } else {
                        answer(&text)
                    }
                })
                .collect(),
        )
    }

    // Reference cases (openclaw-behaviour.md §13 item 7).

    #[test]
    fn a_limit_keeps_that_many_user_turns() {
        let input = six();
        let (two, report) = limit_history_turns(&input, Some(2));
        assert_eq!(two.len(), 4);
        assert_eq!(texts(&two)[0], "message 2");
        assert_eq!(report.dropped, 2);
        assert!(Arc::ptr_eq(&two[0], &input[2]));

        let (one, _) = limit_history_turns(&input, Some(1));
        assert_eq!(texts(&one), ["message 4", "message 5"]);
    }

    #[test]
    fn no_limit_returns_the_same_list() {
        let input = six();
        for limit in [None, Some(0), Some(-1), Some(3), Some(100)] {
            let (out, report) = limit_history_turns(&input, limit);
            assert!(MessageList::same_list(&out, &input), "{limit:?}");
            assert!(!report.changed());
        }
        let empty = MessageList::new();
        let (out, _) = limit_history_turns(&empty, Some(5));
        assert!(out.is_empty());
    }

    #[test]
    fn consecutive_assistants_stay_with_their_user_turn() {
        let input = list(vec![
            user("u1"),
            answer("a1"),
            answer("a2"),
            user("u2"),
            answer("a3"),
        ]);
        let (out, _) = limit_history_turns(&input, Some(1));
        assert_eq!(roles(&out), ["user", "assistant"]);
    }

    fn image_user(text: &str) -> AgentMessage {
        serde_json::from_value(json!({
            "role": "user",
            "content": [{"type": "text", "text": text},
                        {"type": "image", "data": "aGk=", "mimeType": "image/png"}],
            "timestamp": 1
        }))
        .unwrap()
    }

    fn images(message: &AgentMessage) -> usize {
        match message {
            AgentMessage::User(u) => count_images(&u.content),
            AgentMessage::ToolResult(r) => count_images(&r.content),
            _ => 0,
        }
    }

    #[test]
    fn images_of_the_last_three_completed_turns_are_kept() {
        let input = list(vec![
            image_user("t1"),
            answer("a1"),
            image_user("t2"),
            calls(&[("c", "screenshot")], "toolUse"),
            result("c", "screenshot"),
            answer("a2"),
            image_user("t4"),
            answer("a4"),
            image_user("t5 still open"),
        ]);
        let (out, report) = prune_processed_history_images(&input);
        // Completed turns start at 0, 2, 4 and 6; the last three start at 2.
        assert_eq!(report.images_replaced, 1);
        assert_eq!(images(&out[0]), 0);
        assert_eq!(images(&input[0]), 1, "the input message is not edited");
        assert!((1..input.len()).all(|i| Arc::ptr_eq(&out[i], &input[i])));
        let (again, report) = prune_processed_history_images(&out);
        assert!(MessageList::same_list(&again, &out));
        assert!(!report.changed());
    }

    #[test]
    fn fewer_than_three_completed_turns_keep_every_image() {
        let input = list(vec![
            image_user("t1"),
            answer("a1"),
            image_user("t2"),
            answer("a2"),
        ]);
        let (out, _) = prune_processed_history_images(&input);
        assert!(MessageList::same_list(&out, &input));
    }

    fn summary(timestamp: u64) -> AgentMessage {
        serde_json::from_value(json!({
            "role": "compactionSummary", "summary": "s", "tokensBefore": 1000,
            "timestamp": timestamp
        }))
        .unwrap()
    }

    fn usage_of(message: &AgentMessage) -> u64 {
        match message {
            AgentMessage::Assistant(a) => a.usage.input + a.usage.output,
            _ => 0,
        }
    }

    #[test]
    fn usage_before_the_latest_compaction_is_zeroed() {
        let mut newer = answer("new");
        if let AgentMessage::Assistant(a) = &mut newer {
            a.timestamp = 100;
        }
        // The kept tail after the summary predates it (timestamp 2 ≤ 50); the new reply does not.
        let input = list(vec![
            answer("old"),
            summary(10),
            summary(50),
            answer("kept"),
            newer,
        ]);
        let (out, report) = strip_stale_usage_before_latest_compaction(&input);
        assert_eq!(report.zeroed, 2);
        assert_eq!(usage_of(&out[0]), 0);
        assert_eq!(usage_of(&out[3]), 0);
        assert!(Arc::ptr_eq(&out[4], &input[4]));
        assert_eq!(usage_of(&input[0]), 15, "the input message is not edited");
        let (again, _) = strip_stale_usage_before_latest_compaction(&out);
        assert!(MessageList::same_list(&again, &out));

        let none = six();
        let (out, _) = strip_stale_usage_before_latest_compaction(&none);
        assert!(MessageList::same_list(&out, &none));
    }
}
