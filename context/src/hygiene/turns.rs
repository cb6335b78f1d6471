//! Provider-specific turn validation: the shapes Anthropic and Gemini refuse.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::builder::ListBuilder;
use super::calls::{call_ref, for_each_result, is_errored, is_thinking, next_assistant};
use super::report::PassReport;
use super::sanitize::with_content;
use rampart_message::{AgentMessage, AssistantMessage, Content, ContentBlock, UserMessage};
use rampart_message::{MessageList, SharedMessage};

/// The text left in an assistant turn whose every tool call was removed for lack of a result.
///
/// Why not leave it empty: Anthropic rejects an assistant message without content, and the
/// model should see that it had called tools there.
pub const OMITTED_CALLS_TEXT: &str = "[tool calls removed: no results were recorded for them]";

/// The user message put in front of a transcript that starts with an assistant turn.
///
/// Why: Gemini (and several OpenAI-compatible servers) require the conversation to open with a
/// user turn; a transcript cut by compaction or history limits may not.
pub const BOOTSTRAP_USER_TEXT: &str = "(conversation continues from an earlier session)";

/// What [`validate_anthropic_turns`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AnthropicTurnsReport {
    /// Tool-call blocks removed because no result answered them before the next assistant turn.
    pub stripped_calls: usize,
    /// Assistant turns whose whole content was replaced (thinking turns with an unanswered call,
    /// or turns left without blocks).
    pub replaced_turns: usize,
    /// User messages merged into the user message before them.
    pub merged_users: usize,
    /// `error`/`aborted` assistant turns with no content left, dropped (in the request only)
    /// so the user messages around them could merge.
    pub dropped_empty_turns: usize,
}

impl PassReport for AnthropicTurnsReport {
    fn changed(&self) -> bool {
        self.stripped_calls > 0
            || self.replaced_turns > 0
            || self.merged_users > 0
            || self.dropped_empty_turns > 0
    }

    fn absorb(&mut self, other: Self) {
        self.stripped_calls += other.stripped_calls;
        self.replaced_turns += other.replaced_turns;
        self.merged_users += other.merged_users;
        self.dropped_empty_turns += other.dropped_empty_turns;
    }
}

/// Whether `call_id` (with `name`) is answered in `span`. With `check_name`, a result that
/// recorded a different non-blank tool name does not count.
fn answered(span: &[SharedMessage], call_id: &str, name: &str, check_name: bool) -> bool {
    let mut found = false;
    for message in span {
        for_each_result(message, |id, recorded| {
            let name_ok = !check_name
                || recorded.is_none_or(|r| r.trim().is_empty() || r.trim() == name.trim());
            found |= id == call_id && name_ok;
        });
        if found {
            return true;
        }
    }
    false
}

/// The content an assistant turn gets when its tool calls cannot be kept.
fn replacement(assistant: &AssistantMessage) -> Vec<ContentBlock> {
    if is_errored(assistant) {
        Vec::new()
    } else {
        vec![ContentBlock::text(OMITTED_CALLS_TEXT)]
    }
}

/// Makes a transcript acceptable to Anthropic's messages API:
///
/// 1. every tool call must be answered by a result before the next assistant turn. Unanswered
///    calls are removed; a turn left without blocks gets [`OMITTED_CALLS_TEXT`] (or no content
///    for `error`/`aborted` turns, which are not sent anyway). A turn with thinking is signed as
///    a whole, so it is kept only when every call is answered (by a result recording the same
///    tool name, if it recorded one); otherwise all its content is replaced likewise.
/// 2. an `error` or `aborted` turn left with no content is dropped: Anthropic refuses an
///    empty assistant message, and the turn said nothing. (OpenClaw kept it, and the user
///    messages on either side then stood apart.)
/// 3. consecutive user messages are merged into one: blocks concatenated (a string content
///    becomes a text block, so nothing is lost), the later message's fields and timestamp
///    kept.
///
/// Results are recognised in every shape [`crate::hygiene`] knows (tool-result messages, raw
/// `tool` messages, `tool_result` blocks). Returns `input` itself when nothing changes.
pub fn validate_anthropic_turns(input: &MessageList) -> (MessageList, AnthropicTurnsReport) {
    let mut report = AnthropicTurnsReport::default();
    let stripped = strip_dangling_calls(input, &mut report);
    let kept = drop_empty_errored_turns(&stripped, &mut report);
    let merged = merge_runs(&kept, is_user, merge_users, &mut report.merged_users);
    (merged, report)
}

fn strip_dangling_calls(input: &MessageList, report: &mut AnthropicTurnsReport) -> MessageList {
    let messages: &[SharedMessage] = input;
    let mut out = ListBuilder::new(input);
    for (i, message) in messages.iter().enumerate() {
        let AgentMessage::Assistant(assistant) = message.as_ref() else {
            out.keep(i);
            continue;
        };
        if !assistant.content.iter().any(|b| call_ref(b).is_some()) {
            out.keep(i);
            continue;
        }
        let span = &messages[i + 1..next_assistant(messages, i + 1)];
        let thinking = assistant.content.iter().any(is_thinking);
        let is_answered = |block: &ContentBlock| {
            call_ref(block).is_none_or(|c| answered(span, c.id, c.name, thinking))
        };
        let unanswered = assistant.content.iter().filter(|b| !is_answered(b)).count();
        if unanswered == 0 {
            out.keep(i);
            continue;
        }
        report.stripped_calls += unanswered;
        let content = if thinking {
            None
        } else {
            let kept: Vec<ContentBlock> = assistant
                .content
                .iter()
                .filter(|b| is_answered(b))
                .cloned()
                .collect();
            Some(kept).filter(|k| !k.is_empty())
        };
        let content = content.unwrap_or_else(|| {
            report.replaced_turns += 1;
            replacement(assistant)
        });
        out.push(Arc::new(AgentMessage::Assistant(with_content(
            assistant, content,
        ))));
    }
    out.finish()
}

fn drop_empty_errored_turns(input: &MessageList, report: &mut AnthropicTurnsReport) -> MessageList {
    let empty_errored = |m: &AgentMessage| matches!(m, AgentMessage::Assistant(a) if is_errored(a) && a.content.is_empty());
    if !input.iter().any(|m| empty_errored(m)) {
        return input.clone();
    }
    let mut out = ListBuilder::new(input);
    for (i, message) in input.iter().enumerate() {
        if empty_errored(message) {
            report.dropped_empty_turns += 1;
        } else {
            out.keep(i);
        }
    }
    out.finish()
}

fn is_user(message: &AgentMessage) -> bool {
    matches!(message, AgentMessage::User(_))
}

fn is_assistant(message: &AgentMessage) -> bool {
    matches!(message, AgentMessage::Assistant(_))
}

/// Replaces every run of two or more consecutive messages matching `member` with
/// `merge(run)`, counting the messages merged away in `merged`.
fn merge_runs(
    input: &MessageList,
    member: fn(&AgentMessage) -> bool,
    merge: fn(&[SharedMessage]) -> Option<AgentMessage>,
    merged: &mut usize,
) -> MessageList {
    let messages: &[SharedMessage] = input;
    let mut out = ListBuilder::new(input);
    let mut i = 0;
    while i < messages.len() {
        let run_end = if member(&messages[i]) {
            messages[i..]
                .iter()
                .position(|m| !member(m))
                .map_or(messages.len(), |p| i + p)
        } else {
            i + 1
        };
        let merged_message = if run_end - i > 1 {
            merge(&messages[i..run_end])
        } else {
            None
        };
        match merged_message {
            Some(message) => {
                *merged += run_end - i - 1;
                out.push(Arc::new(message));
            }
            None => (i..run_end).for_each(|j| out.keep(j)),
        }
        i = run_end;
    }
    out.finish()
}

fn into_blocks(content: &Content, blocks: &mut Vec<ContentBlock>) {
    match content {
        Content::Text(text) => blocks.push(ContentBlock::text(text.clone())),
        Content::Blocks(b) => blocks.extend_from_slice(b),
    }
}

fn merge_users(run: &[SharedMessage]) -> Option<AgentMessage> {
    let mut blocks = Vec::new();
    let mut last = None;
    for message in run {
        if let AgentMessage::User(u) = message.as_ref() {
            into_blocks(&u.content, &mut blocks);
            last = Some(u);
        }
    }
    last.map(|last| {
        AgentMessage::User(UserMessage {
            content: Content::Blocks(blocks),
            timestamp: last.timestamp,
            extra: last.extra.clone(),
        })
    })
}

/// What [`validate_gemini_turns`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct GeminiTurnsReport {
    /// Assistant messages merged into the assistant message before them.
    pub merged_assistants: usize,
}

impl PassReport for GeminiTurnsReport {
    fn changed(&self) -> bool {
        self.merged_assistants > 0
    }

    fn absorb(&mut self, other: Self) {
        self.merged_assistants += other.merged_assistants;
    }
}

/// Makes a transcript acceptable to Gemini, which requires model and user turns to alternate:
/// consecutive assistant messages are merged into one. Blocks are concatenated; usage, stop
/// reason and (when present) error message come from the later message, everything else
/// (model, timestamp, …) from the earliest. Returns `input` itself when nothing changes.
pub fn validate_gemini_turns(input: &MessageList) -> (MessageList, GeminiTurnsReport) {
    let mut report = GeminiTurnsReport::default();
    let out = merge_runs(
        input,
        is_assistant,
        merge_assistants,
        &mut report.merged_assistants,
    );
    (out, report)
}

fn merge_assistants(run: &[SharedMessage]) -> Option<AgentMessage> {
    let mut assistants = run.iter().filter_map(|m| match m.as_ref() {
        AgentMessage::Assistant(a) => Some(a),
        _ => None,
    });
    let first = assistants.next()?;
    let mut merged = with_content(first, first.content.clone());
    for later in assistants {
        merged.content.extend_from_slice(&later.content);
        merged.usage = later.usage.clone();
        merged.stop_reason = later.stop_reason.clone();
        if later.error_message.is_some() {
            merged.error_message = later.error_message.clone();
        }
    }
    Some(AgentMessage::Assistant(merged))
}

/// What [`sanitize_google_turn_ordering`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct TurnOrderingReport {
    /// Whether a bootstrap user message was put in front.
    pub bootstrap_added: bool,
}

impl PassReport for TurnOrderingReport {
    fn changed(&self) -> bool {
        self.bootstrap_added
    }

    fn absorb(&mut self, other: Self) {
        self.bootstrap_added |= other.bootstrap_added;
    }
}

/// Puts a short user message ([`BOOTSTRAP_USER_TEXT`]) in front of a transcript whose first
/// message is an assistant turn, or that has no message at all (a subagent's transcript holds
/// its answers but not the prompt its parent gave it, and no provider takes an empty request).
/// Idempotent; returns `input` itself when the transcript already opens with something else.
pub fn sanitize_google_turn_ordering(input: &MessageList) -> (MessageList, TurnOrderingReport) {
    let timestamp = match input.first().map(|m| m.as_ref()) {
        None => 0,
        Some(AgentMessage::Assistant(first)) => first.timestamp,
        Some(_) => return (input.clone(), TurnOrderingReport::default()),
    };
    let mut out = Vec::with_capacity(input.len() + 1);
    out.push(Arc::new(AgentMessage::User(UserMessage {
        content: Content::Text(BOOTSTRAP_USER_TEXT.to_owned()),
        timestamp,
        extra: Default::default(),
    })));
    out.extend_from_slice(input);
    (
        out.into(),
        TurnOrderingReport {
            bootstrap_added: true,
        },
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::hygiene::test_support::{
        answer, assistant_blocks, calls, list, result, roles, stop_reason, user,
    };
    use rampart_message::StopReason;

    fn content(message: &AgentMessage) -> Vec<&str> {
        match message {
            AgentMessage::Assistant(a) => a.content.iter().map(ContentBlock::block_type).collect(),
            AgentMessage::User(u) => u
                .content
                .blocks()
                .iter()
                .map(ContentBlock::block_type)
                .collect(),
            _ => Vec::new(),
        }
    }

    #[test]
    fn an_empty_aborted_turn_is_dropped_and_the_users_around_it_merge_keeping_every_text() {
        let string_user = AgentMessage::User(UserMessage {
            content: Content::Text("first, as a string".into()),
            timestamp: 1,
            extra: Default::default(),
        });
        let input = list(vec![
            string_user,
            assistant_blocks(vec![], "aborted"),
            user("second, as blocks"),
            answer("done"),
        ]);
        let (out, report) = validate_anthropic_turns(&input);
        assert_eq!(roles(&out), ["user", "assistant"]);
        assert_eq!(report.dropped_empty_turns, 1);
        assert_eq!(report.merged_users, 1);
        let AgentMessage::User(merged) = out[0].as_ref() else {
            panic!("a user message first")
        };
        let texts: Vec<&str> = merged
            .content
            .blocks()
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(texts, ["first, as a string", "second, as blocks"]);
        // A turn that said something is not this pass's to drop.
        let spoke = list(vec![
            user("a"),
            assistant_blocks(vec![json!({"type": "text", "text": "partial"})], "aborted"),
            user("b"),
        ]);
        assert_eq!(validate_anthropic_turns(&spoke).1.dropped_empty_turns, 0);
    }

    #[test]
    fn unanswered_calls_are_stripped_and_an_empty_turn_gets_a_marker() {
        let input = list(vec![
            user("u"),
            assistant_blocks(
                vec![
                    json!({"type": "text", "text": "two calls"}),
                    json!({"type": "toolCall", "id": "a", "name": "read", "arguments": {}}),
                    json!({"type": "toolCall", "id": "b", "name": "read", "arguments": {}}),
                ],
                "toolUse",
            ),
            result("a", "read"),
            calls(&[("c", "exec")], "toolUse"),
            user("next"),
        ]);
        let (out, report) = validate_anthropic_turns(&input);
        assert_eq!(content(&out[1]), ["text", "toolCall"]);
        assert!(matches!(&out[3].as_ref(), AgentMessage::Assistant(a)
            if matches!(&a.content[..], [ContentBlock::Text(t)] if t.text == OMITTED_CALLS_TEXT)));
        assert_eq!(report.stripped_calls, 2);
        assert_eq!(report.replaced_turns, 1);
        assert!(Arc::ptr_eq(&out[2], &input[2]));
    }

    #[test]
    fn an_errored_turn_left_empty_is_dropped() {
        let input = list(vec![
            user("u"),
            calls(&[("c", "exec")], "aborted"),
            user("v"),
        ]);
        let (out, report) = validate_anthropic_turns(&input);
        assert_eq!(roles(&out), ["user"], "the users around it merged");
        assert_eq!(content(&out[0]), ["text", "text"]);
        assert_eq!((report.stripped_calls, report.dropped_empty_turns), (1, 1));
        let answered = list(vec![
            user("u"),
            calls(&[("c", "exec")], "aborted"),
            result("c", "exec"),
        ]);
        let (kept, _) = validate_anthropic_turns(&answered);
        assert_eq!(
            stop_reason(&kept[1]),
            Some(&StopReason::Aborted),
            "a call with its result stays"
        );
    }

    #[test]
    fn a_thinking_turn_is_replaced_whole_when_a_call_is_unanswered_or_misnamed() {
        let thinking = json!({"type": "thinking", "thinking": "hmm", "thinkingSignature": "s"});
        let turn = |names: [&str; 2]| {
            assistant_blocks(
                vec![
                    thinking.clone(),
                    json!({"type": "toolCall", "id": "a", "name": names[0], "arguments": {}}),
                    json!({"type": "toolCall", "id": "b", "name": names[1], "arguments": {}}),
                ],
                "toolUse",
            )
        };
        let answered = list(vec![
            user("u"),
            turn(["read", "exec"]),
            result("a", "read"),
            result("b", "exec"),
        ]);
        let (out, _) = validate_anthropic_turns(&answered);
        assert!(MessageList::same_list(&out, &answered));

        let misnamed = list(vec![
            user("u"),
            turn(["read", "exec"]),
            result("a", "read"),
            result("b", "write"),
        ]);
        let (out, report) = validate_anthropic_turns(&misnamed);
        assert_eq!(content(&out[1]), ["text"]);
        assert_eq!(report.replaced_turns, 1);
    }

    #[test]
    fn consecutive_users_are_merged_keeping_the_later_fields() {
        let mut later = user("second");
        if let AgentMessage::User(u) = &mut later {
            u.timestamp = 9;
            u.content = Content::Text("second".into());
        }
        let input = list(vec![user("first"), later, answer("a")]);
        let (out, report) = validate_anthropic_turns(&input);
        assert_eq!(roles(&out), ["user", "assistant"]);
        assert_eq!(content(&out[0]), ["text", "text"]);
        assert_eq!(out[0].timestamp(), Some(9));
        assert_eq!(report.merged_users, 1);
        assert!(Arc::ptr_eq(&out[1], &input[2]));
    }

    #[test]
    fn consecutive_assistants_are_merged_for_gemini() {
        let mut failed = answer("partial");
        if let AgentMessage::Assistant(a) = &mut failed {
            a.stop_reason = StopReason::Error;
            a.error_message = Some("boom".into());
        }
        let input = list(vec![user("u"), failed, answer("retry")]);
        let (out, report) = validate_gemini_turns(&input);
        assert_eq!(roles(&out), ["user", "assistant"]);
        assert_eq!(content(&out[1]), ["text", "text"]);
        assert_eq!(stop_reason(&out[1]), Some(&StopReason::Stop));
        assert!(matches!(out[1].as_ref(), AgentMessage::Assistant(a)
            if a.error_message.as_deref() == Some("boom")));
        assert_eq!(report.merged_assistants, 1);
        let (again, _) = validate_gemini_turns(&out);
        assert!(MessageList::same_list(&again, &out));
    }

    #[test]
    fn an_assistant_first_transcript_gets_a_bootstrap_user_once() {
        let input = list(vec![answer("hello"), user("u")]);
        let (out, report) = sanitize_google_turn_ordering(&input);
        assert_eq!(roles(&out), ["user", "assistant", "user"]);
        assert!(report.bootstrap_added);
        let (again, report) = sanitize_google_turn_ordering(&out);
        assert!(MessageList::same_list(&again, &out));
        assert!(!report.changed());
    }
}
