//! Preparation: from the context the model sees, decide what to summarise and what to keep
//! (pi's `prepareCompaction` and `findCutPoint`, with OpenClaw's safeguard checks).
//!
//! The input is the active branch after the last compaction, as the model sees it: possibly a
//! leading [`AgentMessage::CompactionSummary`] carrying the previous summary, then messages.
//! The cut keeps about `keepRecentTokens` of recent history verbatim; it never falls on a tool
//! result, so a kept result always has its call.
//!
//! One improvement over pi: everything before the cut is summarised, including messages an
//! earlier compaction kept verbatim. pi starts summarising after the previous compaction
//! *entry*, so the messages that compaction kept (which sit before its entry in the file) fall
//! out of the context at the next compaction without ever being summarised.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::file_ops::{CompactionDetails, FileOps};
use super::settings::CompactionSettings;
use super::transcript::message_text;
use crate::tokens::{CountMode, TokenCounter, last_usage_anchor};
use rampart_message::SharedMessage;
use rampart_message::{AgentMessage, Content, ContentBlock};

/// One message of the context with the id of the session entry it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextEntry {
    /// The session entry id (8 hex characters in pi's format); what `firstKeptEntryId` names.
    pub entry_id: String,
    /// The message as the model sees it.
    pub message: SharedMessage,
}

/// Why there is nothing to compact. Not a failure: the engine answers
/// `{ok: true, compacted: false, reason}` and the overflow loop does not retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "camelCase")]
pub enum SkipReason {
    /// The context is empty.
    #[error("nothing to compact: the context is empty")]
    Empty,
    /// Nothing but heartbeats, silent replies and tool noise (OpenClaw's wording).
    #[error("no real conversation messages")]
    NoRealConversation,
    /// The context is only the previous compaction's summary.
    #[error("already compacted")]
    AlreadyCompacted,
    /// Everything after the previous summary fits in `keepRecentTokens`, so the cut would
    /// keep it all.
    #[error("nothing to compact: the recent history fits within keepRecentTokens")]
    WithinKeepRecent,
}

/// Inputs beyond the context and settings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PrepareOptions {
    /// The file lists the previous compaction entry stored in its `details`. When `None`, a
    /// `details` field on the leading summary message is used if present.
    pub previous_details: Option<CompactionDetails>,
    /// The budget the compacted context must fit (`CompactParams.token_budget`). When set,
    /// at most half of it is kept verbatim. Why: with a small window, keeping the usual
    /// 20,000 recent tokens can leave nothing to compact and the overflow unsolved.
    pub token_budget: Option<u64>,
    /// Tokens the context will grow by before this compaction is used: a compaction prepared
    /// ahead of need (`MaintainParams::prepare_compaction`) is swapped in only when the
    /// budget is reached. Its kept tail is cut that much shorter, and the summary's room is
    /// what it will be then, so the swapped-in context lands where a compaction made at that
    /// moment would have, summary size included. 0 for a compaction used at once.
    pub growth_tokens: u64,
}

/// Where the cut falls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CutPoint {
    /// The first message kept verbatim.
    pub first_kept_index: usize,
    /// When the cut is inside a turn: where that turn starts.
    pub turn_start_index: Option<usize>,
    /// Whether the cut splits a turn (the first kept message is not a user message).
    pub is_split_turn: bool,
}

/// What [`super::compact`] works from.
#[derive(Debug, Clone, PartialEq)]
pub struct Preparation {
    /// The entry id of the first kept message: the `compaction` entry's `firstKeptEntryId`.
    pub first_kept_entry_id: String,
    /// Its index in the context.
    pub first_kept_index: usize,
    /// The history to summarise: everything after the leading summary up to the cut (or up to
    /// the split turn's start).
    pub messages_to_summarize: Vec<SharedMessage>,
    /// The start of a split turn, summarised separately so the kept suffix makes sense.
    pub turn_prefix_messages: Vec<SharedMessage>,
    /// The messages kept verbatim, from the cut on.
    pub kept_messages: Vec<SharedMessage>,
    /// Whether the cut splits a turn.
    pub is_split_turn: bool,
    /// The previous compaction's summary, from the leading summary message.
    pub previous_summary: Option<String>,
    /// The context size before compaction, as the counter figures it.
    pub tokens_before: u64,
    /// Tokens of the kept messages.
    pub kept_tokens: u64,
    /// Files read and modified, this history's and the previous compaction's.
    pub details: CompactionDetails,
    /// Whether the messages to summarise (or the turn prefix) hold real conversation; without
    /// it compaction writes a minimal boundary summary instead of calling a model.
    pub has_real_conversation: bool,
    /// The `keepRecentTokens` the cut used.
    pub keep_recent_tokens: u64,
    /// The most tokens the summary may take so that summary plus kept messages fit the
    /// caller's budget (`PrepareOptions::token_budget`), when one was given. Why: the
    /// 16,000-character cap alone is about 4,000 tokens of English but up to 16,000 tokens of
    /// CJK text, which in a small window leaves the compacted context still too large, and the
    /// next compaction would find nothing left to cut.
    pub summary_token_cap: Option<u64>,
}

/// [`prepare_with`] with default options.
pub fn prepare(
    entries: &[ContextEntry],
    settings: &CompactionSettings,
    counter: &TokenCounter,
) -> Result<Preparation, SkipReason> {
    prepare_with(entries, settings, counter, &PrepareOptions::default())
}

/// Decides the cut and collects what compaction needs, or says why there is nothing to do.
pub fn prepare_with(
    entries: &[ContextEntry],
    settings: &CompactionSettings,
    counter: &TokenCounter,
    options: &PrepareOptions,
) -> Result<Preparation, SkipReason> {
    if entries.is_empty() {
        return Err(SkipReason::Empty);
    }
    let messages: Vec<SharedMessage> = entries.iter().map(|e| e.message.clone()).collect();
    let (previous_summary, previous_ts, boundary) = match messages[0].as_ref() {
        AgentMessage::CompactionSummary(s) => (Some(s.summary.clone()), Some(s.timestamp), 1),
        _ => (None, None, 0),
    };
    if boundary == messages.len() {
        return Err(SkipReason::AlreadyCompacted);
    }
    if !(boundary..messages.len()).any(|i| is_real_conversation_message(&messages, i)) {
        return Err(SkipReason::NoRealConversation);
    }
    let mut keep_recent = settings.effective_keep_recent_tokens();
    if let Some(budget) = options.token_budget {
        // Two fifths each for the kept history and the summary, a fifth of slack for the
        // system prompt and for a cut that lands past the target.
        keep_recent = keep_recent.min((budget * 2 / 5).max(1));
        // Ahead of need, the tail still grows by `growth_tokens` before the swap.
        keep_recent = keep_recent.saturating_sub(options.growth_tokens).max(1);
    }
    let per = counter.count_messages(&messages).per_message;
    let sum = |r: std::ops::Range<usize>| per[r].iter().fold(0u64, |a, &t| a.saturating_add(t));
    let mut cut = find_cut_point(&messages, &per, boundary, messages.len(), keep_recent);
    if let Some(budget) = options.token_budget {
        // A kept tail larger than the whole budget can never fit, however short the summary
        // (one 40,000-character answer in a 32k window): move the cut past it, so the large
        // message is summarised instead of kept, rather than failing every retry.
        while sum(cut.first_kept_index..messages.len())
            > budget.saturating_sub(options.growth_tokens)
        {
            let Some(next) =
                (cut.first_kept_index + 1..messages.len()).find(|&i| is_cut_point(&messages[i]))
            else {
                break;
            };
            cut = cut_at(&messages, boundary, next);
        }
    }
    if cut.first_kept_index <= boundary {
        return Err(SkipReason::WithinKeepRecent);
    }
    let first_kept = cut.first_kept_index;
    let history_end = match cut.turn_start_index {
        Some(start) if cut.is_split_turn => start,
        _ => first_kept,
    };

    let mut files = FileOps::new();
    let stored = options.previous_details.clone().or_else(|| {
        messages[..boundary].iter().find_map(|m| match m.as_ref() {
            AgentMessage::CompactionSummary(s) => {
                s.extra.get("details").map(CompactionDetails::from_value)
            }
            _ => None,
        })
    });
    if let Some(details) = &stored {
        files.add_details(details);
    }
    for m in &messages[boundary..first_kept] {
        files.add_message(m);
    }

    Ok(Preparation {
        first_kept_entry_id: entries[first_kept].entry_id.clone(),
        first_kept_index: first_kept,
        messages_to_summarize: messages[boundary..history_end].to_vec(),
        turn_prefix_messages: messages[history_end..first_kept].to_vec(),
        kept_messages: messages[first_kept..].to_vec(),
        is_split_turn: cut.is_split_turn,
        previous_summary,
        tokens_before: tokens_before(&messages, &per, boundary, previous_ts, counter),
        kept_tokens: sum(first_kept..messages.len()),
        details: files.details(),
        has_real_conversation: (boundary..first_kept)
            .any(|i| is_real_conversation_message(&messages, i)),
        keep_recent_tokens: keep_recent,
        // At most two fifths of the budget: the kept history may grow to another two fifths
        // (`keep_recent` is capped alike), so summary and kept messages fit together
        // until the next compaction, which then has something other than its summary to cut.
        summary_token_cap: options.token_budget.map(|budget| {
            budget
                .saturating_sub(sum(first_kept..messages.len()) + options.growth_tokens)
                .max(budget / 4)
                .min(budget * 2 / 5)
                .max(1)
        }),
    })
}

/// pi's `findCutPoint` over `messages[start..end]`: walk back from the newest message adding
/// up `tokens`, and once `keep_recent_tokens` is reached cut at the first valid cut point at
/// or after that message. Valid cut points are user, assistant, bash, custom and summary
/// messages, never a tool result. If the budget is never reached, everything is kept (the cut
/// is the first cut point). A cut on a non-user message splits the turn that started at the
/// nearest user, bash, custom or branch-summary message before it.
pub fn find_cut_point(
    messages: &[SharedMessage],
    tokens: &[u64],
    start: usize,
    end: usize,
    keep_recent_tokens: u64,
) -> CutPoint {
    let is_cut_point = |i: usize| is_cut_point(&messages[i]);
    let Some(first_cut) = (start..end).find(|&i| is_cut_point(i)) else {
        return CutPoint {
            first_kept_index: start,
            turn_start_index: None,
            is_split_turn: false,
        };
    };
    let mut cut = first_cut;
    let mut accumulated = 0u64;
    for i in (start..end).rev() {
        accumulated = accumulated.saturating_add(tokens.get(i).copied().unwrap_or(0));
        if accumulated >= keep_recent_tokens {
            // pi cuts at the first cut point at or after `i`. When there is none (the history
            // ends in a tool call and its large result), pi keeps everything and the next
            // compaction finds nothing to do while the context still overflows; cutting at the
            // last cut point before `i` keeps the pair together and summarises the rest.
            if let Some(c) = (i..end)
                .find(|&c| is_cut_point(c))
                .or_else(|| (start..i).rev().find(|&c| is_cut_point(c)))
            {
                cut = c;
            }
            break;
        }
    }
    cut_at(messages, start, cut)
}

/// Whether a message may be the first one kept (never a tool result: it would be orphaned).
fn is_cut_point(message: &AgentMessage) -> bool {
    matches!(
        message,
        AgentMessage::User(_)
            | AgentMessage::Assistant(_)
            | AgentMessage::BashExecution(_)
            | AgentMessage::Custom(_)
            | AgentMessage::BranchSummary(_)
            | AgentMessage::CompactionSummary(_)
    )
}

/// The cut at `cut`, with the split-turn facts: a cut on a non-user message splits the turn
/// that started at the nearest user, bash, custom or branch-summary message at or before it.
fn cut_at(messages: &[SharedMessage], start: usize, cut: usize) -> CutPoint {
    if matches!(messages[cut].as_ref(), AgentMessage::User(_)) {
        return CutPoint {
            first_kept_index: cut,
            turn_start_index: None,
            is_split_turn: false,
        };
    }
    let turn_start = (start..=cut).rev().find(|&i| {
        matches!(
            messages[i].as_ref(),
            AgentMessage::User(_)
                | AgentMessage::BashExecution(_)
                | AgentMessage::Custom(_)
                | AgentMessage::BranchSummary(_)
        )
    });
    CutPoint {
        first_kept_index: cut,
        turn_start_index: turn_start,
        is_split_turn: turn_start.is_some(),
    }
}

/// The context size before compaction. In Calibrated mode, usage reported before the leading
/// summary was written is ignored: it measured the context *before* the previous compaction,
/// and anchoring on it would overstate the size (pain point 7, stale token accounting).
fn tokens_before(
    messages: &[SharedMessage],
    per: &[u64],
    boundary: usize,
    previous_ts: Option<u64>,
    counter: &TokenCounter,
) -> u64 {
    let total = per.iter().fold(0u64, |a, &t| a.saturating_add(t));
    if counter.mode() != CountMode::Calibrated {
        return total;
    }
    let fresh = match previous_ts {
        Some(ts) => (boundary..messages.len())
            .find(|&i| messages[i].timestamp().is_some_and(|t| t >= ts))
            .unwrap_or(messages.len()),
        None => 0,
    };
    match last_usage_anchor(&messages[fresh..]) {
        Some(anchor) => {
            let after = fresh + anchor.index + 1;
            anchor
                .tokens
                .saturating_add(per[after..].iter().fold(0u64, |a, &t| a.saturating_add(t)))
        }
        None => total,
    }
}

/// Tool results count as real conversation when a real user-side message (user, custom, bash,
/// summary) is at most this many messages before them.
const TOOL_RESULT_REAL_CONVERSATION_LOOKBACK: usize = 20;

/// OpenClaw's `isRealConversationMessage`: a user, assistant, custom, bash or summary message
/// with meaningful content (not blank, not a silent reply, not only a heartbeat; tool calls
/// and thinking alone do not count), or a tool result with such a user-side message shortly
/// before it. Why: a context of heartbeats and tool noise has nothing worth a model call.
pub fn is_real_conversation_message(messages: &[SharedMessage], index: usize) -> bool {
    let message = messages[index].as_ref();
    match message {
        AgentMessage::ToolResult(_) => {
            let from = index.saturating_sub(TOOL_RESULT_REAL_CONVERSATION_LOOKBACK);
            (from..index).rev().any(|i| {
                matches!(
                    messages[i].as_ref(),
                    AgentMessage::User(_)
                        | AgentMessage::Custom(_)
                        | AgentMessage::BashExecution(_)
                        | AgentMessage::BranchSummary(_)
                        | AgentMessage::CompactionSummary(_)
                ) && has_meaningful_content(messages[i].as_ref())
            })
        }
        AgentMessage::Other(_) => false,
        _ => has_meaningful_content(message),
    }
}

/// The silent-reply token: the agent chose not to answer.
pub const SILENT_REPLY_TOKEN: &str = "NO_REPLY";
/// The heartbeat acknowledgement token.
pub const HEARTBEAT_TOKEN: &str = "HEARTBEAT_OK";

fn has_meaningful_content(message: &AgentMessage) -> bool {
    match message {
        AgentMessage::Custom(c) if !c.display => false,
        AgentMessage::BashExecution(b) => {
            b.exclude_from_context != Some(true)
                && meaningful_text(&format!("{}\n{}", b.command, b.output))
        }
        AgentMessage::CompactionSummary(_) | AgentMessage::BranchSummary(_) => {
            meaningful_text(&message_text(message))
        }
        AgentMessage::User(u) => meaningful_content(&u.content),
        AgentMessage::Custom(c) => meaningful_content(&c.content),
        AgentMessage::ToolResult(r) => meaningful_content(&r.content),
        AgentMessage::Assistant(a) => meaningful_blocks(&a.content),
        AgentMessage::Other(_) => false,
    }
}

fn meaningful_content(content: &Content) -> bool {
    match content {
        Content::Text(t) => meaningful_text(t),
        Content::Blocks(blocks) => meaningful_blocks(blocks),
    }
}

fn meaningful_blocks(blocks: &[ContentBlock]) -> bool {
    let mut other = false;
    for block in blocks {
        match block {
            ContentBlock::Text(t) if meaningful_text(&t.text) => return true,
            ContentBlock::Text(_) | ContentBlock::ToolCall(_) | ContentBlock::Thinking(_) => {}
            b if matches!(
                b.block_type(),
                "toolUse" | "functionCall" | "reasoning" | "redacted_thinking"
            ) => {}
            _ => other = true,
        }
    }
    other
}

fn meaningful_text(text: &str) -> bool {
    let trimmed = text.trim();
    if trimmed.is_empty() || trimmed == SILENT_REPLY_TOKEN {
        return false;
    }
    let stripped = trimmed
        .trim_start_matches(HEARTBEAT_TOKEN)
        .trim_end_matches(HEARTBEAT_TOKEN)
        .trim();
    !stripped.is_empty()
}

impl Preparation {
    /// The messages that leave the context: those summarised and the turn prefix, in order.
    pub fn summarized_messages(&self) -> impl Iterator<Item = &SharedMessage> {
        self.messages_to_summarize
            .iter()
            .chain(&self.turn_prefix_messages)
    }

    /// Whether `message` is one of the kept ones (by identity).
    pub fn keeps(&self, message: &SharedMessage) -> bool {
        self.kept_messages.iter().any(|m| Arc::ptr_eq(m, message))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::compaction::test_support::*;
    use crate::pairing::{ErroredAssistantPolicy, repair_tool_use_result_pairing};
    use proptest::prelude::*;
    use rampart_message::MessageList;
    use serde_json::json;

    fn settings(keep: u64) -> CompactionSettings {
        CompactionSettings {
            keep_recent_tokens: Some(keep),
            ..CompactionSettings::default()
        }
    }

    #[test]
    fn find_cut_point_reference_cases() {
        // §13 group 13: [assistant] with 1000 → 0; with 50,000 everything is kept.
        let msgs = shared(vec![assistant("hello")]);
        let per = vec![2];
        assert_eq!(find_cut_point(&msgs, &per, 0, 1, 1000).first_kept_index, 0);
        assert_eq!(
            find_cut_point(&msgs, &per, 0, 1, 50_000).first_kept_index,
            0
        );
    }

    #[test]
    fn a_kept_message_larger_than_the_whole_budget_is_summarised_instead() {
        // The latest answer alone is over the budget: keeping it could never fit, so the cut
        // moves past it to the next cut point.
        let s = CompactionSettings::default();
        let counter = TokenCounter::estimate();
        let ctx = entries(vec![
            user("first question"),
            assistant(&"long answer ".repeat(4_000)),
            user("thanks"),
            assistant("you are welcome"),
        ]);
        let options = PrepareOptions {
            token_budget: Some(5_000),
            ..PrepareOptions::default()
        };
        let prep = prepare_with(&ctx, &s, &counter, &options).unwrap();
        assert_eq!(prep.first_kept_index, 2);
        assert!(prep.kept_tokens < 5_000);
    }

    #[test]
    fn a_history_ending_in_a_large_tool_result_cuts_before_its_call() {
        // user, assistant, user, call, result(huge): no cut point follows the result, so the
        // cut falls on the call, keeping the pair and summarising what came before.
        let msgs = shared(vec![
            user("first"),
            assistant("ok"),
            user("read it"),
            assistant_with_calls("", &[("c1", "read")]),
            tool_result("c1", "read", "x"),
        ]);
        let per = vec![10, 10, 10, 10, 9_000];
        let cut = find_cut_point(&msgs, &per, 0, msgs.len(), 5_000);
        assert_eq!(cut.first_kept_index, 3);
    }

    #[test]
    fn cuts_at_a_user_message_after_keeping_enough() {
        let ctx = entries(vec![
            user(&"a".repeat(4000)),
            assistant(&"b".repeat(4000)),
            user(&"c".repeat(4000)),
            assistant(&"d".repeat(4000)),
        ]);
        let counter = TokenCounter::estimate();
        let prep = prepare(&ctx, &settings(1500), &counter).unwrap();
        assert_eq!(prep.first_kept_index, 2);
        assert_eq!(prep.first_kept_entry_id, "00000002");
        assert!(!prep.is_split_turn);
        assert_eq!(prep.messages_to_summarize.len(), 2);
        assert_eq!(prep.kept_messages.len(), 2);
        assert_eq!(prep.tokens_before, 4000);
        assert_eq!(prep.kept_tokens, 2000);
        assert!(prep.has_real_conversation);
    }

    #[test]
    fn a_cut_inside_a_turn_splits_it() {
        let ctx = entries(vec![
            user("old question"),
            assistant(&"x".repeat(4000)),
            user("do the big task"),
            assistant_with_calls("step one", &[("c1", "read")]),
            tool_result("c1", "read", &"r".repeat(4000)),
            assistant(&"y".repeat(4000)),
        ]);
        let counter = TokenCounter::estimate();
        let prep = prepare(&ctx, &settings(1500), &counter).unwrap();
        // The walk reaches 1500 at the last assistant, a valid cut point.
        assert_eq!(prep.first_kept_index, 5);
        assert!(prep.is_split_turn);
        assert_eq!(roles(&prep.messages_to_summarize), ["user", "assistant"]);
        assert_eq!(
            roles(&prep.turn_prefix_messages),
            ["user", "assistant", "toolResult"]
        );
    }

    #[test]
    fn never_cuts_at_a_tool_result() {
        let ctx = entries(vec![
            user("go"),
            assistant_with_calls("", &[("c1", "read")]),
            tool_result("c1", "read", &"r".repeat(8000)),
            user("next"),
        ]);
        let counter = TokenCounter::estimate();
        let prep = prepare(&ctx, &settings(1000), &counter).unwrap();
        assert_eq!(prep.first_kept_index, 3);
        assert!(
            !prep
                .kept_messages
                .iter()
                .any(|m| m.tool_call_id().is_some())
        );
    }

    #[test]
    fn previous_summary_and_earlier_kept_messages_are_summarised() {
        let mut summary = summary_message("## Decisions\n- old");
        if let AgentMessage::CompactionSummary(s) = &mut summary {
            s.extra.insert(
                "details".into(),
                json!({"readFiles": ["/old/read.rs"], "modifiedFiles": ["/old/mod.rs"]}),
            );
        }
        let ctx = entries(vec![
            summary,
            user(&"kept by the last compaction ".repeat(200)),
            assistant(&"z".repeat(4000)),
            call_with_args("c1", "edit", json!({"path": "/new.rs"})),
            tool_result("c1", "edit", "ok"),
            user(&"latest ".repeat(300)),
            assistant(&"w".repeat(2000)),
        ]);
        let counter = TokenCounter::estimate();
        let prep = prepare(&ctx, &settings(1000), &counter).unwrap();
        assert_eq!(
            prep.previous_summary.as_deref(),
            Some("## Decisions\n- old")
        );
        assert_eq!(prep.first_kept_index, 5);
        // Everything after the leading summary, earlier-kept messages included.
        assert_eq!(prep.messages_to_summarize.len(), 4);
        assert_eq!(prep.details.read_files, ["/old/read.rs"]);
        assert_eq!(prep.details.modified_files, ["/new.rs", "/old/mod.rs"]);
    }

    #[test]
    fn skip_reasons() {
        let counter = TokenCounter::estimate();
        let s = CompactionSettings::default();
        assert_eq!(prepare(&[], &s, &counter), Err(SkipReason::Empty));
        assert_eq!(
            prepare(&entries(vec![summary_message("x")]), &s, &counter),
            Err(SkipReason::AlreadyCompacted)
        );
        assert_eq!(
            prepare(
                &entries(vec![user("HEARTBEAT_OK"), assistant("NO_REPLY")]),
                &s,
                &counter
            ),
            Err(SkipReason::NoRealConversation)
        );
        assert_eq!(
            prepare(&entries(vec![user("hi"), assistant("hello")]), &s, &counter),
            Err(SkipReason::WithinKeepRecent)
        );
        assert_eq!(
            SkipReason::NoRealConversation.to_string(),
            "no real conversation messages"
        );
        // A token budget lowers what is kept, so a small context can still be compacted.
        let ctx = entries(vec![
            user(&"a".repeat(8000)),
            assistant(&"b".repeat(8000)),
            user(&"c".repeat(4000)),
        ]);
        let options = PrepareOptions {
            token_budget: Some(2000),
            ..PrepareOptions::default()
        };
        let prep = prepare_with(&ctx, &s, &counter, &options).unwrap();
        assert_eq!(prep.keep_recent_tokens, 800, "two fifths of the budget");
        assert_eq!(prep.first_kept_index, 2);
    }

    /// A compaction prepared ahead of need, with the growth still to come, cuts where one
    /// made when the budget is reached would, and leaves its summary the same room: swapping
    /// it in later changes nothing but when the work was done.
    #[test]
    fn prepared_ahead_with_growth_cuts_where_a_compaction_at_the_budget_would() {
        let counter = TokenCounter::estimate();
        let s = CompactionSettings::default();
        let turn = |i: usize| {
            vec![
                user(&format!("question {i} {}", "q".repeat(1990))),
                assistant(&format!("answer {i} {}", "a".repeat(1990))),
            ]
        };
        let all: Vec<AgentMessage> = (0..20).flat_map(turn).collect();
        let shared: Vec<SharedMessage> = all.iter().cloned().map(Arc::new).collect();
        let budget = 8_000;
        let now = prepare_with(
            &entries(all.clone()),
            &s,
            &counter,
            &PrepareOptions {
                token_budget: Some(budget),
                ..PrepareOptions::default()
            },
        )
        .unwrap();
        // Two turns earlier, with those two turns announced as growth.
        let earlier = &all[..all.len() - 4];
        let growth = counter.count_messages(&shared[shared.len() - 4..]).total;
        let ahead = prepare_with(
            &entries(earlier.to_vec()),
            &s,
            &counter,
            &PrepareOptions {
                token_budget: Some(budget),
                growth_tokens: growth,
                ..PrepareOptions::default()
            },
        )
        .unwrap();
        assert_eq!(ahead.first_kept_index, now.first_kept_index);
        assert_eq!(ahead.kept_tokens + growth, now.kept_tokens);
        assert_eq!(ahead.summary_token_cap, now.summary_token_cap);
        // Without the growth, the early one would keep more and leave the summary less room
        // by the time it is used.
        let naive = prepare_with(
            &entries(earlier.to_vec()),
            &s,
            &counter,
            &PrepareOptions {
                token_budget: Some(budget),
                ..PrepareOptions::default()
            },
        )
        .unwrap();
        assert!(naive.first_kept_index < ahead.first_kept_index);
        assert!(naive.kept_tokens + growth > now.kept_tokens);
    }

    #[test]
    fn heartbeats_before_the_cut_mean_no_real_conversation_there() {
        let ctx = entries(vec![
            user("HEARTBEAT_OK"),
            assistant("HEARTBEAT_OK"),
            user(&"real question ".repeat(600)),
        ]);
        let counter = TokenCounter::estimate();
        let prep = prepare(&ctx, &settings(100), &counter).unwrap();
        assert!(!prep.has_real_conversation);
    }

    #[test]
    fn calibrated_tokens_ignore_usage_from_before_the_last_compaction() {
        let counter = TokenCounter::new(CountMode::Calibrated);
        let mut stale = assistant(&"k".repeat(400));
        if let AgentMessage::Assistant(a) = &mut stale {
            a.usage.total_tokens = Some(150_000);
            a.timestamp = 1;
        }
        let mut summary = summary_message("prev");
        if let AgentMessage::CompactionSummary(s) = &mut summary {
            s.timestamp = 10;
        }
        let mut late_user = AgentMessage::user_text("x".repeat(4000), 20);
        if let AgentMessage::User(u) = &mut late_user {
            u.timestamp = 20;
        }
        let ctx = entries(vec![summary, stale, late_user, user("y")]);
        let prep = prepare(&ctx, &settings(10), &counter).unwrap();
        assert!(prep.tokens_before < 10_000, "{}", prep.tokens_before);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn kept_messages_never_hold_orphans_when_the_input_was_paired(
            spec in arb_transcript(40), keep in 1u64..6000
        ) {
            let raw: MessageList = build_transcript(&spec).into();
            let (paired, _) = repair_tool_use_result_pairing(&raw, ErroredAssistantPolicy::Preserve);
            let (again, report) = repair_tool_use_result_pairing(&paired, ErroredAssistantPolicy::Preserve);
            prop_assume!(MessageList::same_list(&again, &paired) && !crate::hygiene::PassReport::changed(&report));
            let ctx: Vec<ContextEntry> = paired.iter().enumerate().map(|(i, m)| ContextEntry {
                entry_id: format!("{i:08x}"),
                message: m.clone(),
            }).collect();
            let counter = TokenCounter::estimate();
            if let Ok(prep) = prepare(&ctx, &settings(keep), &counter) {
                // The context after compaction: the summary, then the kept messages.
                let mut after = vec![Arc::new(summary_message("summary"))];
                after.extend(prep.kept_messages.iter().cloned());
                let after: MessageList = after.into();
                let (_, report) = repair_tool_use_result_pairing(&after, ErroredAssistantPolicy::Preserve);
                prop_assert!(report.dropped_orphans == 0, "orphaned result kept: {:?}", report);
                prop_assert!(report.added.is_empty(), "call kept without its result: {:?}", report);
                prop_assert_eq!(
                    prep.messages_to_summarize.len() + prep.turn_prefix_messages.len() + prep.kept_messages.len(),
                    ctx.len()
                );
            }
        }
    }
}
