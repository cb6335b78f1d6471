//! Shortening the arguments of tool calls that already ran, in the request only.
//!
//! Why: an agent that writes a file sends the whole file as a tool-call argument, and that
//! call stays in the history. The tool-result guards never look at it (it is not a result), and
//! compaction keeps the latest turns verbatim, so one 50,000-character `write` can hold a
//! small window over its budget with nothing left to cut. Once the call has its result, the
//! model does not need the full text again (it is on disk, and the result says what happened),
//! so long string arguments are cut to head and tail with a notice, exactly like a tool result.
//! A call still waiting for its result is never touched, and the session keeps everything.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::tool_result::{
    TruncateOptions, calculate_max_tool_result_chars, truncate_tool_result_text,
};
use rampart_message::{AgentMessage, ContentBlock};
use rampart_message::{MessageList, SharedMessage};

/// What [`cap_executed_tool_arguments`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ToolArgsReport {
    /// The per-argument limit in characters.
    pub max_chars: usize,
    /// Indices (in the list) of the assistant messages whose calls were shortened.
    pub shortened: Vec<usize>,
    /// Characters removed, together.
    pub removed_chars: usize,
}

/// The per-argument limit for a prompt budget of `budget_tokens`: a quarter of it, in
/// characters at four per token, but never more than the window's tool-result cap. Why a
/// quarter: an executed call's text is the least useful thing in the prompt (its result says
/// what happened), yet head and tail keep enough to recognise it.
pub fn executed_argument_limit(
    budget_tokens: u64,
    context_window: u64,
    max_chars_cap: usize,
) -> usize {
    let quarter = (budget_tokens.saturating_mul(4) / 4) as usize;
    quarter.min(calculate_max_tool_result_chars(
        context_window,
        max_chars_cap,
    ))
}

/// Shortens each string argument longer than `max_chars` in tool calls that already have a
/// result in `list`. Returns the input itself when nothing is that long.
pub fn cap_executed_tool_arguments(
    list: &MessageList,
    max_chars: usize,
) -> (MessageList, ToolArgsReport) {
    let mut report = ToolArgsReport {
        max_chars,
        ..ToolArgsReport::default()
    };
    let answered: std::collections::HashSet<&str> =
        list.iter().filter_map(|m| m.tool_call_id()).collect();
    let mut out: Option<Vec<SharedMessage>> = None;
    for (index, message) in list.iter().enumerate() {
        let replacement = match message.as_ref() {
            AgentMessage::Assistant(a)
                if a.content.iter().any(|b| {
                    matches!(b, ContentBlock::ToolCall(c)
                        if answered.contains(c.id.as_str()) && longest_string(&c.arguments) > max_chars)
                }) =>
            {
                let mut copy = a.clone();
                for block in &mut copy.content {
                    if let ContentBlock::ToolCall(c) = block
                        && answered.contains(c.id.as_str())
                    {
                        report.removed_chars += shorten(&mut c.arguments, max_chars);
                    }
                }
                report.shortened.push(index);
                Some(Arc::new(AgentMessage::Assistant(copy)))
            }
            _ => None,
        };
        match (replacement, &mut out) {
            (Some(new), Some(out)) => out.push(new),
            (Some(new), None) => {
                let mut v = list[..index].to_vec();
                v.push(new);
                out = Some(v);
            }
            (None, Some(out)) => out.push(message.clone()),
            (None, None) => {}
        }
    }
    match out {
        Some(v) => (v.into(), report),
        None => (list.clone(), report),
    }
}

/// What [`cap_executed_tool_arguments_with`] keeps between calls: the last list it left
/// unchanged, and the limit it had.
///
/// Why: the pass runs before every model call over the whole history, and a history that grew
/// by messages without tool calls or results cannot have gained an argument to cut (a call
/// becomes "executed" only when its result arrives). Keep one per run loop; clones share it.
#[derive(Debug, Clone, Default)]
pub struct ToolArgsMemo {
    last: crate::list_resume::ListResume<usize, ()>,
}

/// [`cap_executed_tool_arguments`], resumed: when `list` [extends](MessageList::extends) the
/// last list it left unchanged (with the same limit) by messages that neither call a tool nor
/// answer one, the answer is the same without reading the history again.
pub fn cap_executed_tool_arguments_with(
    list: &MessageList,
    max_chars: usize,
    memo: &ToolArgsMemo,
) -> (MessageList, ToolArgsReport) {
    let unchanged_since = memo.last.resume(list, &max_chars).map(|last| last.from);
    let touches_tools =
        |m: &SharedMessage| m.tool_call_id().is_some() || m.tool_calls().next().is_some();
    let (out, report) = match unchanged_since {
        Some(from) if !list[from..].iter().any(touches_tools) => (
            list.clone(),
            ToolArgsReport {
                max_chars,
                ..ToolArgsReport::default()
            },
        ),
        _ => cap_executed_tool_arguments(list, max_chars),
    };
    if MessageList::same_list(&out, list) {
        memo.last.keep(list, max_chars, ());
    } else {
        memo.last.forget();
    }
    (out, report)
}

/// The length in bytes of the longest string anywhere in `value` (bytes bound characters
/// from above, so this is a cheap first test).
fn longest_string(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len(),
        Value::Array(items) => items.iter().map(longest_string).max().unwrap_or(0),
        Value::Object(map) => map.values().map(longest_string).max().unwrap_or(0),
        _ => 0,
    }
}

/// Cuts every string in `value` longer than `max_chars`; returns the characters removed.
fn shorten(value: &mut Value, max_chars: usize) -> usize {
    match value {
        Value::String(s) => {
            let cut = truncate_tool_result_text(s, max_chars, &TruncateOptions::default());
            if cut.omitted_chars == 0 {
                return 0;
            }
            let removed = cut.omitted_chars;
            *s = cut.text.into_owned();
            removed
        }
        Value::Array(items) => items.iter_mut().map(|v| shorten(v, max_chars)).sum(),
        Value::Object(map) => map.values_mut().map(|v| shorten(v, max_chars)).sum(),
        _ => 0,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn call(id: &str, content: &str) -> AgentMessage {
        serde_json::from_value(json!({
            "role": "assistant",
            "content": [{"type": "toolCall", "id": id, "name": "write",
                         "arguments": {"path": "big.txt", "content": content}}],
            "api": "sim", "provider": "sim", "model": "m",
            "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0,
                      "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
            "stopReason": "toolUse", "timestamp": 1
        }))
        .unwrap()
    }

    fn list(messages: Vec<AgentMessage>) -> MessageList {
        messages.into_iter().map(Arc::new).collect()
    }

    fn content_len(m: &AgentMessage) -> usize {
        match m {
            AgentMessage::Assistant(a) => match &a.content[0] {
                ContentBlock::ToolCall(c) => c.arguments["content"].as_str().unwrap().len(),
                _ => 0,
            },
            _ => 0,
        }
    }

    #[test]
    fn an_executed_call_with_a_huge_argument_is_shortened_in_the_request_only() {
        let big = "line of the file\n".repeat(5_000);
        let input = list(vec![
            AgentMessage::user_text("write it", 0),
            call("w1", &big),
            AgentMessage::tool_result("w1", "write", "wrote 85000 bytes", false, 2),
        ]);
        let (out, report) =
            cap_executed_tool_arguments(&input, executed_argument_limit(10_000, 32_000, 400_000));
        assert_eq!(report.shortened, [1]);
        assert!(report.removed_chars > 40_000);
        assert!(content_len(&out[1]) < 12_000);
        assert!(Arc::ptr_eq(&out[0], &input[0]) && Arc::ptr_eq(&out[2], &input[2]));
        // The input (the session's copy) is unchanged.
        assert_eq!(content_len(&input[1]), big.len());
        // The path is short and untouched.
        let AgentMessage::Assistant(a) = out[1].as_ref() else {
            panic!()
        };
        let ContentBlock::ToolCall(c) = &a.content[0] else {
            panic!()
        };
        assert_eq!(c.arguments["path"], "big.txt");
    }

    /// Resumed turn after turn, the pass answers as a whole pass does: plain turns are
    /// skipped, and the result that makes a waiting call executed still gets it shortened.
    #[test]
    fn a_resumed_pass_cuts_what_a_whole_pass_cuts() {
        let memo = ToolArgsMemo::default();
        let limit = executed_argument_limit(10_000, 32_000, 400_000);
        let mut history: Vec<SharedMessage> = Vec::new();
        for turn in 0..30 {
            history.push(Arc::new(AgentMessage::user_text(format!("turn {turn}"), 0)));
            match turn % 10 {
                3 => history.push(Arc::new(call(&format!("w{turn}"), &"x".repeat(90_000)))),
                6 => history.push(Arc::new(AgentMessage::tool_result(
                    format!("w{}", turn - 3),
                    "write",
                    "wrote it",
                    false,
                    2,
                ))),
                _ => history.push(Arc::new(AgentMessage::assistant_text(
                    "ok", "sim", "sim", "m", 1,
                ))),
            }
            let input = MessageList::from(history.clone());
            let (kept, kept_report) = cap_executed_tool_arguments_with(&input, limit, &memo);
            let (whole, whole_report) = cap_executed_tool_arguments(&input, limit);
            assert_eq!(kept_report, whole_report, "turn {turn}");
            let same = kept.iter().zip(whole.iter()).all(|(a, b)| **a == **b);
            assert!(same && kept.len() == whole.len(), "turn {turn}");
        }
    }

    #[test]
    fn a_call_waiting_for_its_result_and_short_arguments_are_left_alone() {
        let big = "x".repeat(100_000);
        let input = list(vec![AgentMessage::user_text("go", 0), call("w1", &big)]);
        let (out, report) =
            cap_executed_tool_arguments(&input, executed_argument_limit(10_000, 32_000, 400_000));
        assert!(MessageList::same_list(&out, &input));
        assert!(report.shortened.is_empty());
        let small = list(vec![
            call("w2", "short"),
            AgentMessage::tool_result("w2", "write", "ok", false, 2),
        ]);
        let (out, _) =
            cap_executed_tool_arguments(&small, executed_argument_limit(10_000, 32_000, 400_000));
        assert!(MessageList::same_list(&out, &small));
    }
}
