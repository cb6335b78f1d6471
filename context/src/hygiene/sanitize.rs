//! Tool-call input sanitising and the stripping of tool-result `details`.

use std::collections::HashSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::builder::ListBuilder;
use super::calls::{CallRef, call_ref, is_blank, is_signed_thinking};
use super::report::PassReport;
use rampart_message::MessageList;
use rampart_message::{AgentMessage, AssistantMessage, ContentBlock, ToolResultMessage};

/// The longest tool name providers accept.
pub const MAX_TOOL_NAME_LEN: usize = 64;

/// Tool names a transcript may call, compared without regard to ASCII case.
///
/// Why a type rather than a slice: the check runs for every tool call on every turn, so the set
/// is built once (lower-cased) and probed without allocating.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolAllowlist {
    names: HashSet<String>,
}

impl ToolAllowlist {
    /// An allowlist of `names` (surrounding whitespace ignored).
    pub fn new<I, S>(names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Self {
            names: names
                .into_iter()
                .map(|n| n.as_ref().trim().to_ascii_lowercase())
                .collect(),
        }
    }

    /// Whether `name` is allowed, ignoring ASCII case.
    pub fn contains(&self, name: &str) -> bool {
        let mut buf = [0u8; MAX_TOOL_NAME_LEN];
        match buf.get_mut(..name.len()) {
            Some(slot) if name.is_ascii() => {
                slot.copy_from_slice(name.as_bytes());
                slot.make_ascii_lowercase();
                std::str::from_utf8(slot).is_ok_and(|lower| self.names.contains(lower))
            }
            // Longer or non-ASCII names fail the name rules anyway; stay correct regardless.
            _ => self.names.contains(&name.to_ascii_lowercase()),
        }
    }
}

impl<S: AsRef<str>> FromIterator<S> for ToolAllowlist {
    fn from_iter<I: IntoIterator<Item = S>>(iter: I) -> Self {
        Self::new(iter)
    }
}

/// Options of [`sanitize_tool_call_inputs`].
#[derive(Debug, Clone, Copy, Default)]
pub struct SanitizeOptions<'a> {
    /// Only these tools may be called; `None` allows every well-formed name.
    pub allowed_tool_names: Option<&'a ToolAllowlist>,
    /// Anthropic verifies signed thinking byte for byte when a turn is replayed, so an edited
    /// turn with signed thinking is rejected. With this set, a turn holding signed (or
    /// redacted) thinking and tool calls is either kept exactly as it is, when every call is
    /// valid and its ids are unique, or dropped whole.
    pub preserve_signed_thinking: bool,
}

/// What [`sanitize_tool_call_inputs`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SanitizeReport {
    /// Tool-call blocks removed from assistant turns that were otherwise kept or emptied.
    pub dropped_calls: usize,
    /// Ids of those blocks (possibly blank), in transcript order.
    pub dropped_call_ids: Vec<String>,
    /// Calls whose padded name was trimmed.
    pub trimmed_names: usize,
    /// Assistant messages removed because no block was left.
    pub dropped_messages: usize,
    /// Assistant turns with signed thinking dropped whole because a call was invalid.
    pub dropped_thinking_turns: usize,
}

impl PassReport for SanitizeReport {
    fn changed(&self) -> bool {
        self.dropped_calls > 0
            || self.trimmed_names > 0
            || self.dropped_messages > 0
            || self.dropped_thinking_turns > 0
    }

    fn absorb(&mut self, other: Self) {
        self.dropped_calls += other.dropped_calls;
        self.dropped_call_ids.extend(other.dropped_call_ids);
        self.trimmed_names += other.trimmed_names;
        self.dropped_messages += other.dropped_messages;
        self.dropped_thinking_turns += other.dropped_thinking_turns;
    }
}

/// What to do with one tool-call block.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Keep,
    Trim,
    Drop,
}

/// Whether `name` is a well-formed tool name: 1–64 characters of `A–Z a–z 0–9 _ : . -`.
///
/// Why these rules: they are what the strictest provider accepts, and MCP tools are commonly
/// named `server__tool` or `server:tool`, which they allow.
pub fn is_valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TOOL_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b':' | b'.' | b'-'))
}

/// Whether a call block carries arguments. `toolCall` blocks always have the field in our model
/// (pi writes it), so a JSON `null` is what "missing" means; raw blocks may use `input`,
/// `arguments` or `args`.
fn has_input(block: &ContentBlock) -> bool {
    match block {
        ContentBlock::ToolCall(call) => !call.arguments.is_null(),
        ContentBlock::Other(raw) => ["input", "arguments", "args"]
            .iter()
            .any(|k| raw.get(*k).is_some_and(|v| !v.is_null())),
        _ => true,
    }
}

fn verdict(block: &ContentBlock, call: CallRef<'_>, opts: &SanitizeOptions<'_>) -> Verdict {
    // The common case, a well-formed call, without decoding any string.
    if is_valid_tool_name(call.name)
        && !is_blank(call.id)
        && has_input(block)
        && opts
            .allowed_tool_names
            .is_none_or(|a| a.contains(call.name))
    {
        return Verdict::Keep;
    }
    let name = call.name.trim();
    let allowed = opts.allowed_tool_names.is_none_or(|a| a.contains(name));
    if !has_input(block) || is_blank(call.id) || !is_valid_tool_name(name) || !allowed {
        Verdict::Drop
    } else if name.len() != call.name.len() {
        Verdict::Trim
    } else {
        Verdict::Keep
    }
}

fn with_trimmed_name(block: &ContentBlock) -> ContentBlock {
    match block {
        ContentBlock::ToolCall(call) => {
            let mut call = call.clone();
            call.name = call.name.trim().to_owned();
            ContentBlock::ToolCall(call)
        }
        ContentBlock::Other(raw) => {
            let mut raw = raw.clone();
            if let Some(Value::String(name)) = raw.get_mut("name") {
                *name = name.trim().to_owned();
            }
            ContentBlock::Other(raw)
        }
        other => other.clone(),
    }
}

/// True when two call blocks of `assistant` share an id.
fn has_duplicate_call_ids(assistant: &AssistantMessage) -> bool {
    let calls = || assistant.content.iter().filter_map(call_ref);
    calls()
        .enumerate()
        .any(|(k, c)| calls().take(k).any(|p| p.id == c.id))
}

/// Removes tool calls a provider would reject, so no request fails on a malformed call the
/// model produced earlier (a streaming cut, a hallucinated tool, a renamed tool):
///
/// - a call without arguments (`null`), with a blank id, with a name that breaks
///   [`is_valid_tool_name`] after trimming, or (with an allowlist) naming a tool not in it, is
///   dropped; a padded but otherwise valid name is trimmed;
/// - an assistant message that loses calls and has no block left is dropped;
/// - `toolCall`, `toolUse` and `functionCall` blocks are all checked;
/// - [`SanitizeOptions::preserve_signed_thinking`] applies the all-or-nothing rule to turns with
///   signed thinking.
///
/// The results of dropped calls become orphans, which the pairing repair removes next.
/// Returns `input` itself when nothing changes.
pub fn sanitize_tool_call_inputs(
    input: &MessageList,
    opts: &SanitizeOptions<'_>,
) -> (MessageList, SanitizeReport) {
    let mut out = ListBuilder::new(input);
    let mut report = SanitizeReport::default();
    for (i, message) in input.iter().enumerate() {
        let AgentMessage::Assistant(assistant) = message.as_ref() else {
            out.keep(i);
            continue;
        };
        let mut needs_edit = false;
        let mut has_calls = false;
        let mut signed = false;
        for block in &assistant.content {
            if let Some(call) = call_ref(block) {
                has_calls = true;
                needs_edit |= verdict(block, call, opts) != Verdict::Keep;
            } else {
                signed |= is_signed_thinking(block);
            }
        }
        if opts.preserve_signed_thinking && signed && has_calls {
            if needs_edit || has_duplicate_call_ids(assistant) {
                report.dropped_thinking_turns += 1;
            } else {
                out.keep(i);
            }
            continue;
        }
        if !needs_edit {
            out.keep(i);
            continue;
        }
        let mut content = Vec::with_capacity(assistant.content.len());
        for block in &assistant.content {
            match call_ref(block).map(|call| (call, verdict(block, call, opts))) {
                None | Some((_, Verdict::Keep)) => content.push(block.clone()),
                Some((_, Verdict::Trim)) => {
                    report.trimmed_names += 1;
                    content.push(with_trimmed_name(block));
                }
                Some((call, Verdict::Drop)) => {
                    report.dropped_calls += 1;
                    report.dropped_call_ids.push(call.id.to_owned());
                }
            }
        }
        if content.is_empty() {
            report.dropped_messages += 1;
        } else {
            out.push(Arc::new(AgentMessage::Assistant(with_content(
                assistant, content,
            ))));
        }
    }
    (out.finish(), report)
}

/// A copy of `assistant` with other content, without cloning the old content first.
pub(crate) fn with_content(
    assistant: &AssistantMessage,
    content: Vec<ContentBlock>,
) -> AssistantMessage {
    AssistantMessage {
        content,
        api: assistant.api.clone(),
        provider: assistant.provider.clone(),
        model: assistant.model.clone(),
        usage: assistant.usage.clone(),
        stop_reason: assistant.stop_reason.clone(),
        timestamp: assistant.timestamp,
        error_message: assistant.error_message.clone(),
        extra: assistant.extra.clone(),
    }
}

/// What [`strip_tool_result_details`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct DetailsReport {
    /// Tool results whose `details` were removed.
    pub stripped: usize,
}

impl PassReport for DetailsReport {
    fn changed(&self) -> bool {
        self.stripped > 0
    }

    fn absorb(&mut self, other: Self) {
        self.stripped += other.stripped;
    }
}

/// Removes `details` from tool results.
///
/// Why: `details` is structured data for UIs (diffs, exit codes, file lists) that never reaches
/// the model, but it can be large; token estimates and summarisation prompts built from the
/// messages must not count or include it. Provider serialisers already leave it out, which is
/// why [`crate::hygiene::run`] does not strip it by default (doing so would copy every result
/// that has details on every turn). Returns `input` itself when no result has details.
pub fn strip_tool_result_details(input: &MessageList) -> (MessageList, DetailsReport) {
    let mut out = ListBuilder::new(input);
    let mut report = DetailsReport::default();
    for (i, message) in input.iter().enumerate() {
        match message.as_ref() {
            AgentMessage::ToolResult(r) if r.details.is_some() => {
                report.stripped += 1;
                out.push(Arc::new(AgentMessage::ToolResult(ToolResultMessage {
                    details: None,
                    tool_call_id: r.tool_call_id.clone(),
                    tool_name: r.tool_name.clone(),
                    content: r.content.clone(),
                    is_error: r.is_error,
                    timestamp: r.timestamp,
                    extra: r.extra.clone(),
                })));
            }
            _ => out.keep(i),
        }
    }
    (out.finish(), report)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::hygiene::test_support::{assistant_blocks, list, result, roles, user};

    fn sanitize(input: &MessageList) -> (MessageList, SanitizeReport) {
        sanitize_tool_call_inputs(input, &SanitizeOptions::default())
    }

    fn call_ids(message: &AgentMessage) -> Vec<&str> {
        match message {
            AgentMessage::Assistant(a) => a
                .content
                .iter()
                .filter_map(call_ref)
                .map(|c| c.id)
                .collect(),
            _ => Vec::new(),
        }
    }

    fn block_types(message: &AgentMessage) -> Vec<&str> {
        match message {
            AgentMessage::Assistant(a) => a.content.iter().map(ContentBlock::block_type).collect(),
            _ => Vec::new(),
        }
    }

    // Reference cases (openclaw-behaviour.md §13 item 6). pi's `toolCall` always has an
    // `arguments` field, so "no args" is `null` in our model.

    #[test]
    fn an_assistant_left_without_blocks_is_dropped() {
        let input = list(vec![
            assistant_blocks(
                vec![json!({"type": "toolCall", "id": "c1", "name": "read", "arguments": null})],
                "toolUse",
            ),
            user("hello"),
        ]);
        let (out, report) = sanitize(&input);
        assert_eq!(roles(&out), ["user"]);
        assert!(Arc::ptr_eq(&out[0], &input[1]));
        assert_eq!(report.dropped_messages, 1);
        assert_eq!(report.dropped_calls, 1);
    }

    #[test]
    fn calls_without_id_or_with_bad_names_are_dropped_in_every_spelling() {
        let input = list(vec![assistant_blocks(
            vec![
                json!({"type": "toolCall", "id": "call_ok", "name": "read", "arguments": {}}),
                json!({"type": "toolCall", "id": "call_empty", "name": "", "arguments": {}}),
                json!({"type": "toolUse", "id": "call_blank", "name": "   ", "input": {}}),
                json!({"type": "functionCall", "id": "", "name": "read", "arguments": {}}),
            ],
            "toolUse",
        )]);
        let (out, report) = sanitize(&input);
        assert_eq!(call_ids(&out[0]), ["call_ok"]);
        assert_eq!(report.dropped_calls, 3);
        assert_eq!(report.dropped_call_ids, ["call_empty", "call_blank", ""]);
    }

    #[test]
    fn mcp_style_names_are_accepted() {
        let input = list(vec![assistant_blocks(
            vec![
                json!({"type": "toolCall", "id": "a", "name": "vigil-harbor__memory_status", "arguments": {}}),
                json!({"type": "toolCall", "id": "b", "name": "my.server:some_tool", "arguments": {}}),
            ],
            "toolUse",
        )]);
        let (out, report) = sanitize(&input);
        assert!(MessageList::same_list(&out, &input));
        assert!(!report.changed());
        assert!(!is_valid_tool_name(&"x".repeat(65)));
        assert!(is_valid_tool_name(&"x".repeat(64)));
        assert!(!is_valid_tool_name("bad name"));
    }

    #[test]
    fn an_allowlist_drops_other_tools_ignoring_case() {
        let input = list(vec![assistant_blocks(
            vec![
                json!({"type": "toolCall", "id": "a", "name": "READ", "arguments": {}}),
                json!({"type": "toolCall", "id": "b", "name": "write", "arguments": {}}),
            ],
            "toolUse",
        )]);
        let allow = ToolAllowlist::new(["read"]);
        let opts = SanitizeOptions {
            allowed_tool_names: Some(&allow),
            ..SanitizeOptions::default()
        };
        let (out, _) = sanitize_tool_call_inputs(&input, &opts);
        assert_eq!(call_ids(&out[0]), ["a"]);
    }

    #[test]
    fn other_blocks_survive_and_tool_use_counts_as_a_call() {
        let input = list(vec![assistant_blocks(
            vec![
                json!({"type": "text", "text": "let me look"}),
                json!({"type": "toolUse", "id": "ok", "name": "read", "input": {"path": "a"}}),
                json!({"type": "toolCall", "id": "bad", "name": "read", "arguments": null}),
            ],
            "toolUse",
        )]);
        let (out, _) = sanitize(&input);
        assert_eq!(block_types(&out[0]), ["text", "toolUse"]);
    }

    #[test]
    fn padded_names_are_trimmed_without_touching_the_input() {
        let input = list(vec![assistant_blocks(
            vec![json!({"type": "toolCall", "id": "a", "name": " read ", "arguments": {}})],
            "toolUse",
        )]);
        let (out, report) = sanitize(&input);
        assert_eq!(report.trimmed_names, 1);
        let AgentMessage::Assistant(a) = out[0].as_ref() else {
            panic!("not an assistant")
        };
        let ContentBlock::ToolCall(call) = &a.content[0] else {
            panic!("not a call")
        };
        assert_eq!(call.name, "read");
        assert_eq!(
            call_ref(&input_block(&input)).map(|c| c.name),
            Some(" read ")
        );
    }

    fn input_block(input: &MessageList) -> ContentBlock {
        match input[0].as_ref() {
            AgentMessage::Assistant(a) => a.content[0].clone(),
            _ => panic!("not an assistant"),
        }
    }

    #[test]
    fn signed_thinking_turns_are_kept_whole_or_dropped_whole() {
        let thinking = json!({"type": "thinking", "thinking": "hmm", "thinkingSignature": "sig"});
        let good = assistant_blocks(
            vec![
                thinking.clone(),
                json!({"type": "toolCall", "id": "a", "name": " read", "arguments": {}}),
            ],
            "toolUse",
        );
        let opts = SanitizeOptions {
            preserve_signed_thinking: true,
            ..SanitizeOptions::default()
        };
        // A padded name would be trimmed elsewhere; here the turn cannot be edited, so it goes.
        let input = list(vec![user("u"), good]);
        let (out, report) = sanitize_tool_call_inputs(&input, &opts);
        assert_eq!(roles(&out), ["user"]);
        assert_eq!(report.dropped_thinking_turns, 1);

        let duplicate_ids = assistant_blocks(
            vec![
                thinking.clone(),
                json!({"type": "toolCall", "id": "a", "name": "read", "arguments": {}}),
                json!({"type": "toolCall", "id": "a", "name": "exec", "arguments": {}}),
            ],
            "toolUse",
        );
        let (out, _) = sanitize_tool_call_inputs(&list(vec![duplicate_ids]), &opts);
        assert!(out.is_empty());

        let valid = list(vec![assistant_blocks(
            vec![
                thinking,
                json!({"type": "toolCall", "id": "a", "name": "read", "arguments": {}}),
            ],
            "toolUse",
        )]);
        let (out, _) = sanitize_tool_call_inputs(&valid, &opts);
        assert!(MessageList::same_list(&out, &valid));
    }

    #[test]
    fn details_are_stripped_into_new_messages() {
        let mut with_details = result("a", "read");
        if let AgentMessage::ToolResult(r) = &mut with_details {
            r.details = Some(json!({"diff": "…"}));
        }
        let input = list(vec![user("u"), with_details]);
        let (out, report) = strip_tool_result_details(&input);
        assert_eq!(report.stripped, 1);
        assert!(Arc::ptr_eq(&out[0], &input[0]));
        assert!(matches!(out[1].as_ref(), AgentMessage::ToolResult(r) if r.details.is_none()));
        assert!(matches!(input[1].as_ref(), AgentMessage::ToolResult(r) if r.details.is_some()));
        let (again, report) = strip_tool_result_details(&out);
        assert!(MessageList::same_list(&again, &out));
        assert!(!report.changed());
    }
}
