//! The in-memory tool-loop guard (reference §4.1), run on the context before every model call.
//!
//! Why: inside one agent turn the model can call tools many times, and nothing else looks at the
//! context between those calls. Without a check, a single huge result (or a pile of them) is
//! sent to the provider, which answers with an overflow error after a slow, billed round trip.
//! This guard shrinks oversized results in a *copy* of the context (the session keeps the
//! originals) and stops the loop early with a recognisable error when the whole context is
//! already too big, so the overflow recovery (compaction, then truncation) can take over.

use std::io;
use std::sync::Arc;

use serde_json::Value;

use super::tool_result::NOTICE_SEPARATOR;
use super::tool_result::{byte_offset, char_len, cut_head_at_newline, format_truncation_notice};
use crate::message_memo::MessageMemo;
use rampart_engine_api::error::{EngineError, ErrorKind};
use rampart_message::{AgentMessage, Content, ContentBlock, TextContent, ToolResultMessage};
use rampart_message::{MessageList, SharedMessage};

/// Characters per token for ordinary messages in this guard's estimate.
pub const CHARS_PER_TOKEN_ESTIMATE: usize = 4;

/// Characters per token for tool results: tool output (code, JSON, logs) tokenises about twice
/// as densely as prose, so results are weighted double.
pub const TOOL_RESULT_CHARS_PER_TOKEN_ESTIMATE: usize = 2;

/// The share of the window one tool result may take before it is truncated in the copy.
pub const SINGLE_TOOL_RESULT_CONTEXT_SHARE: f64 = 0.5;

/// The share of the window the whole context may take before the loop is stopped, leaving room
/// for the answer and for estimate error.
pub const PREEMPTIVE_OVERFLOW_RATIO: f64 = 0.9;

/// What one image counts for in this estimate, in characters.
pub const IMAGE_CHAR_ESTIMATE: usize = 8_000;

/// What a tool call counts for when its arguments cannot be serialised.
pub const TOOL_CALL_FALLBACK_CHARS: usize = 128;

/// What a message of a role without its own rule counts for.
pub const OTHER_ROLE_CHARS: usize = 256;

/// The floor of both limits, in characters, so tiny or unknown windows still allow a message.
pub const MIN_GUARD_CHARS: usize = 1_024;

/// The error text when the context is too big in the tool loop. Exact, because the overflow
/// recovery and users recognise it.
pub const TOOL_LOOP_OVERFLOW_MESSAGE: &str =
    "Context overflow: estimated context size exceeds safe threshold during tool loop.";

/// `[... N more characters truncated]`, the notice this guard appends (`N` at least 1).
pub fn format_context_limit_truncation_notice(omitted_chars: usize) -> String {
    format_truncation_notice(omitted_chars)
}

/// The context is estimated above the safe threshold: stop the tool loop and recover.
///
/// Its `Display` is exactly [`TOOL_LOOP_OVERFLOW_MESSAGE`]; the figures are for logs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", TOOL_LOOP_OVERFLOW_MESSAGE)]
pub struct ContextOverflow {
    /// The context's estimate, in characters (after truncating oversized results).
    pub estimated_chars: usize,
    /// The threshold it exceeded.
    pub max_context_chars: usize,
}

impl From<ContextOverflow> for EngineError {
    fn from(e: ContextOverflow) -> Self {
        EngineError::new(ErrorKind::Engine, e.to_string()).with_details(serde_json::json!({
            "estimatedChars": e.estimated_chars,
            "maxContextChars": e.max_context_chars,
        }))
    }
}

/// What [`guard_tool_loop`] did.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ToolLoopReport {
    /// `max(1024, floor(window · 4 · 0.9))`.
    pub max_context_chars: usize,
    /// `max(1024, floor(window · 2 · 0.5))`.
    pub max_single_tool_result_chars: usize,
    /// The context's estimate after truncation, in characters.
    pub estimated_chars: usize,
    /// Indices of the tool results that were truncated (or lost their `details`).
    pub truncated: Vec<usize>,
}

/// The two limits for a window of `ctx_window_tokens`: `(max_context_chars,
/// max_single_tool_result_chars)`.
pub fn tool_loop_limits(ctx_window_tokens: u64) -> (usize, usize) {
    let ctx = ctx_window_tokens as f64;
    let context = (ctx * CHARS_PER_TOKEN_ESTIMATE as f64 * PREEMPTIVE_OVERFLOW_RATIO).floor();
    let single =
        (ctx * TOOL_RESULT_CHARS_PER_TOKEN_ESTIMATE as f64 * SINGLE_TOOL_RESULT_CONTEXT_SHARE)
            .floor();
    (
        (context as usize).max(MIN_GUARD_CHARS),
        (single as usize).max(MIN_GUARD_CHARS),
    )
}

/// The most characters of text the guard leaves in one tool result for a window of
/// `ctx_window_tokens` (notice included): what a longer result is cut to. Engines are told
/// (`tool_result_max_chars` of `assemble` and `after_turn`) so that they budget what the model
/// is sent, not the whole result.
pub fn tool_result_text_budget(ctx_window_tokens: u64) -> usize {
    text_budget(tool_loop_limits(ctx_window_tokens).1)
}

/// The text budget of a result whose estimate may be `max_single` characters: results are
/// weighted [`TOOL_RESULT_CHARS_PER_TOKEN_ESTIMATE`] against [`CHARS_PER_TOKEN_ESTIMATE`].
fn text_budget(max_single: usize) -> usize {
    max_single / (CHARS_PER_TOKEN_ESTIMATE / TOOL_RESULT_CHARS_PER_TOKEN_ESTIMATE)
}

/// Checks and shrinks the context before a model call inside the tool loop.
///
/// 1. Each tool result estimated above the single-result limit is truncated in a copy: its text
///    is cut to `floor(limit / 2)` characters (at the last newline beyond 70 %), ends with
///    `[... N more characters truncated]`, and its `details` are dropped.
/// 2. If the whole estimate is above the context limit, the call fails with
///    [`ContextOverflow`]. Older results are not rewritten under aggregate pressure; that is
///    the overflow recovery's job.
///
/// Unchanged input comes back as the same list ([`MessageList::same_list`]); otherwise only the
/// truncated results are new `Arc`s and the input list is untouched.
pub fn guard_tool_loop(
    list: &MessageList,
    ctx_window_tokens: u64,
) -> Result<(MessageList, ToolLoopReport), ContextOverflow> {
    guard(list, ctx_window_tokens, |m| estimate_message_chars(m))
}

/// What [`guard_tool_loop_with`] keeps from one call to the next: each message's estimate, and
/// the last verdict that changed nothing, to resume from.
///
/// Why: the guard runs before every model call over the whole history, which only grows
/// between calls. With each estimate kept, a call cost a lookup per message; resuming from the
/// last list when the new one [extends](MessageList::extends) it costs the new messages
/// (BENCHMARKS.md, issue 24 item 10). Keep one per run loop; clones share it.
#[derive(Debug, Clone, Default)]
pub struct ToolLoopMemo {
    chars: MessageMemo<usize>,
    /// The last list that passed with nothing truncated, under its window, with its estimate.
    last: crate::list_resume::ListResume<u64, usize>,
}

impl ToolLoopMemo {
    /// An empty memo.
    pub fn new() -> Self {
        Self::default()
    }

    /// How often an estimate was reused (`hits`) or made (`misses`).
    pub fn stats(&self) -> crate::tokens::MemoStats {
        self.chars.stats()
    }
}

/// [`guard_tool_loop`] with what `memo` keeps across calls: a turn costs the messages added
/// since the last call when the list only grew (and nothing had to be truncated), else one
/// lookup per message instead of reading the text of the whole history again (and serialising
/// every tool call's arguments). The verdict is the one [`guard_tool_loop`] gives.
pub fn guard_tool_loop_with(
    list: &MessageList,
    ctx_window_tokens: u64,
    memo: &ToolLoopMemo,
) -> Result<(MessageList, ToolLoopReport), ContextOverflow> {
    let resume = memo
        .last
        .resume(list, &ctx_window_tokens)
        .map(|last| (last.from, last.state));
    let result = memo.chars.batch(|chars| {
        let mut estimate_of =
            |m: &SharedMessage| chars.get_or_insert_with(m, estimate_message_chars);
        match resume {
            Some((from, before)) => {
                resume_guard(list, from, before, ctx_window_tokens, &mut estimate_of)
                    .unwrap_or_else(|| guard(list, ctx_window_tokens, estimate_of))
            }
            None => guard(list, ctx_window_tokens, estimate_of),
        }
    });
    match &result {
        Ok((out, report)) if report.truncated.is_empty() && MessageList::same_list(out, list) => {
            memo.last
                .keep(list, ctx_window_tokens, report.estimated_chars)
        }
        _ => memo.last.forget(),
    }
    result
}

/// The guard's verdict on `list` given that its first `from` messages passed untouched with an
/// estimate of `before` characters; `None` when a new message would be truncated (only the
/// whole guard makes the copy).
fn resume_guard(
    list: &MessageList,
    from: usize,
    before: usize,
    ctx_window_tokens: u64,
    estimate_of: &mut impl FnMut(&SharedMessage) -> usize,
) -> Option<Result<(MessageList, ToolLoopReport), ContextOverflow>> {
    let (max_context, max_single) = tool_loop_limits(ctx_window_tokens);
    let mut total = before;
    for shared in &list[from..] {
        let estimate = estimate_of(shared);
        if estimate > max_single && matches!(shared.as_ref(), AgentMessage::ToolResult(_)) {
            return None;
        }
        total = total.saturating_add(estimate);
    }
    if total > max_context {
        return Some(Err(ContextOverflow {
            estimated_chars: total,
            max_context_chars: max_context,
        }));
    }
    Some(Ok((
        list.clone(),
        ToolLoopReport {
            max_context_chars: max_context,
            max_single_tool_result_chars: max_single,
            estimated_chars: total,
            truncated: Vec::new(),
        },
    )))
}

/// The guard, with `estimate` giving each input message's [`estimate_message_chars`].
fn guard(
    list: &MessageList,
    ctx_window_tokens: u64,
    mut estimate_of: impl FnMut(&SharedMessage) -> usize,
) -> Result<(MessageList, ToolLoopReport), ContextOverflow> {
    let (max_context, max_single) = tool_loop_limits(ctx_window_tokens);
    let mut report = ToolLoopReport {
        max_context_chars: max_context,
        max_single_tool_result_chars: max_single,
        ..ToolLoopReport::default()
    };
    let mut copy: Option<Vec<SharedMessage>> = None;
    let mut total = 0usize;
    for (index, shared) in list.iter().enumerate() {
        let mut estimate = estimate_of(shared);
        if estimate > max_single
            && let AgentMessage::ToolResult(tr) = shared.as_ref()
        {
            let truncated = truncate_for_loop(tr, text_budget(max_single));
            estimate = estimate_message_chars(&truncated);
            let copy = copy.get_or_insert_with(|| list[..index].to_vec());
            copy.push(Arc::new(truncated));
            report.truncated.push(index);
        } else if let Some(copy) = copy.as_mut() {
            copy.push(Arc::clone(shared));
        }
        total = total.saturating_add(estimate);
    }
    report.estimated_chars = total;
    if total > max_context {
        return Err(ContextOverflow {
            estimated_chars: total,
            max_context_chars: max_context,
        });
    }
    let out = match copy {
        Some(v) => MessageList::from(v),
        None => list.clone(),
    };
    Ok((out, report))
}

/// A copy of `tr` with its text cut to `text_budget` characters (notice included) shared among
/// text blocks by length, and without `details`.
fn truncate_for_loop(tr: &ToolResultMessage, text_budget: usize) -> AgentMessage {
    let content = match &tr.content {
        Content::Text(text) => Content::Text(cut_text(text, text_budget)),
        Content::Blocks(blocks) => {
            let total: usize = blocks
                .iter()
                .map(|b| match b {
                    ContentBlock::Text(t) => char_len(&t.text),
                    _ => 0,
                })
                .sum();
            Content::Blocks(
                blocks
                    .iter()
                    .map(|block| match block {
                        ContentBlock::Text(t) if total > text_budget => {
                            let len = char_len(&t.text);
                            let share =
                                (text_budget as u128 * len as u128 / total.max(1) as u128) as usize;
                            ContentBlock::Text(TextContent {
                                text: cut_text(&t.text, share),
                                text_signature: t.text_signature.clone(),
                                extra: t.extra.clone(),
                            })
                        }
                        other => other.clone(),
                    })
                    .collect(),
            )
        }
    };
    AgentMessage::ToolResult(ToolResultMessage {
        tool_call_id: tr.tool_call_id.clone(),
        tool_name: tr.tool_name.clone(),
        content,
        details: None,
        is_error: tr.is_error,
        timestamp: tr.timestamp,
        extra: tr.extra.clone(),
    })
}

/// The head of `text` plus the notice, within `budget` characters when the budget allows it
/// (the notice is kept even when it alone exceeds the budget).
fn cut_text(text: &str, budget: usize) -> String {
    const LOOP_NEWLINE_SHARE: f64 = 0.7;
    if text.len() <= budget {
        return text.to_owned();
    }
    let total = char_len(text);
    if total <= budget {
        return text.to_owned();
    }
    let reserve = NOTICE_SEPARATOR.len() + char_len(&format_truncation_notice(total));
    let keep = budget.saturating_sub(reserve);
    let end = cut_head_at_newline(text, byte_offset(text, keep), keep, LOOP_NEWLINE_SHARE);
    let head = &text[..end];
    let omitted = total - char_len(head);
    let mut out = String::with_capacity(head.len() + reserve);
    out.push_str(head);
    out.push_str(NOTICE_SEPARATOR);
    out.push_str(&format_context_limit_truncation_notice(omitted));
    out
}

// ---------------------------------------------------------------------------
// The estimator
// ---------------------------------------------------------------------------

/// This guard's character estimate of one message (reference §4.1):
///
/// - user: text length, 8,000 per image, JSON length of any other block;
/// - assistant: text and thinking length, JSON length of each tool call's arguments (128 when
///   they cannot be serialised), JSON length of any other block;
/// - tool result (also an unknown message with role `tool`): content plus `details` JSON,
///   weighted ×2 because tool output is token-dense;
/// - any other role: 256.
///
/// Why a separate estimate from [`crate::tokens`]: it must match the reference guard's
/// thresholds, which were tuned against this weighting.
pub fn estimate_message_chars(msg: &AgentMessage) -> usize {
    match msg {
        AgentMessage::User(m) => content_chars(&m.content),
        AgentMessage::Assistant(m) => m.content.iter().map(assistant_block_chars).sum(),
        AgentMessage::ToolResult(m) => {
            let details = match &m.details {
                None | Some(Value::Null) => 0,
                Some(v) => json_chars(v).unwrap_or(0),
            };
            weight_tool_result(content_chars(&m.content) + details)
        }
        AgentMessage::Other(raw) if raw.get("role").and_then(Value::as_str) == Some("tool") => {
            let content = match raw.get("content") {
                Some(Value::String(s)) => char_len(s),
                Some(Value::Array(blocks)) => blocks.iter().map(raw_block_chars).sum(),
                Some(other) => json_chars(other).unwrap_or(0),
                None => 0,
            };
            let details = match raw.get("details") {
                None | Some(Value::Null) => 0,
                Some(v) => json_chars(v).unwrap_or(0),
            };
            weight_tool_result(content + details)
        }
        _ => OTHER_ROLE_CHARS,
    }
}

/// The estimate of a whole context, in characters.
pub fn estimate_context_chars(messages: &[SharedMessage]) -> usize {
    messages
        .iter()
        .map(|m| estimate_message_chars(m))
        .fold(0, usize::saturating_add)
}

/// `max(chars, ceil(chars · 4 / 2))`, i.e. twice the characters.
fn weight_tool_result(chars: usize) -> usize {
    let weighted =
        (chars * CHARS_PER_TOKEN_ESTIMATE).div_ceil(TOOL_RESULT_CHARS_PER_TOKEN_ESTIMATE);
    weighted.max(chars)
}

fn content_chars(content: &Content) -> usize {
    match content {
        Content::Text(text) => char_len(text),
        Content::Blocks(blocks) => blocks.iter().map(content_block_chars).sum(),
    }
}

fn content_block_chars(block: &ContentBlock) -> usize {
    match block {
        ContentBlock::Text(t) => char_len(&t.text),
        ContentBlock::Image(_) => IMAGE_CHAR_ESTIMATE,
        other => json_chars(other).unwrap_or(0),
    }
}

fn assistant_block_chars(block: &ContentBlock) -> usize {
    match block {
        ContentBlock::Text(t) => char_len(&t.text),
        ContentBlock::Thinking(t) => char_len(&t.thinking),
        ContentBlock::ToolCall(call) => {
            json_chars(&call.arguments).unwrap_or(TOOL_CALL_FALLBACK_CHARS)
        }
        other => json_chars(other).unwrap_or(0),
    }
}

fn raw_block_chars(block: &Value) -> usize {
    match block.get("type").and_then(Value::as_str) {
        Some("text") => block
            .get("text")
            .and_then(Value::as_str)
            .map_or(0, char_len),
        Some("image") => IMAGE_CHAR_ESTIMATE,
        _ => json_chars(block).unwrap_or(0),
    }
}

/// Characters of the compact JSON form of `value`, counted while serialising (no buffer).
fn json_chars<T: serde::Serialize + ?Sized>(value: &T) -> Option<usize> {
    struct CharCounter(usize);
    impl io::Write for CharCounter {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            // Every character has exactly one byte that is not a UTF-8 continuation byte.
            self.0 += buf.iter().filter(|&&b| (b as i8) >= -0x40).count();
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut counter = CharCounter(0);
    serde_json::to_writer(&mut counter, value).ok()?;
    Some(counter.0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn limits_for_a_1000_token_window() {
        assert_eq!(tool_loop_limits(1000), (3600, 1024));
        assert_eq!(tool_loop_limits(0), (1024, 1024));
        assert_eq!(tool_loop_limits(128_000), (460_800, 128_000));
    }

    #[test]
    fn json_chars_counts_characters_not_bytes() {
        assert_eq!(json_chars(&serde_json::json!({"a": "é"})), Some(9));
        assert_eq!(json_chars(&serde_json::json!("日本")), Some(4));
    }

    #[test]
    fn weighting() {
        assert_eq!(weight_tool_result(0), 0);
        assert_eq!(weight_tool_result(5000), 10_000);
    }

    #[test]
    fn other_roles_count_256() {
        let m =
            AgentMessage::Other(serde_json::from_str(r#"{"role":"x","content":"abc"}"#).unwrap());
        assert_eq!(estimate_message_chars(&m), 256);
        let tool = AgentMessage::Other(
            serde_json::from_str(r#"{"role":"tool","content":"abcd","details":{"k":1}}"#).unwrap(),
        );
        assert_eq!(estimate_message_chars(&tool), (4 + 7) * 2);
    }
}
