//! The conversation as the summariser reads it: messages serialised to labelled text
//! (pi's `serializeConversation`), plus the text helpers the other modules share.
//!
//! Why text and not a replayed conversation: a model handed real turns tends to continue the
//! conversation instead of summarising it. Tool results are cut to 2,000 characters because
//! their full text is rarely needed to say what happened, and `details` never appear (they are
//! UI data, not something the model saw).

use crate::tokens::TokenCounter;
use rampart_message::SharedMessage;
use rampart_message::{AgentMessage, BashExecutionMessage, Content, ContentBlock};

/// Characters of a tool result kept in the serialised conversation.
pub const TOOL_RESULT_MAX_CHARS: usize = 2_000;

/// How pi shows a compaction summary to the model; the same wrapping is used when an earlier
/// summary appears mid-history.
pub const COMPACTION_SUMMARY_PREFIX: &str = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n";
/// Closes [`COMPACTION_SUMMARY_PREFIX`].
pub const COMPACTION_SUMMARY_SUFFIX: &str = "\n</summary>";
/// How pi shows a branch summary to the model.
pub const BRANCH_SUMMARY_PREFIX: &str =
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n";
/// Closes [`BRANCH_SUMMARY_PREFIX`].
pub const BRANCH_SUMMARY_SUFFIX: &str = "</summary>";

/// Serialises `messages` for the summariser: one labelled part per message (an assistant
/// message may give up to three), joined by blank lines.
pub fn serialize_conversation<'a>(messages: impl IntoIterator<Item = &'a AgentMessage>) -> String {
    let mut out = String::new();
    for message in messages {
        push_message(&mut out, message);
    }
    out
}

/// Appends the serialised parts of one message to `out`, separated from what is there by a
/// blank line.
pub fn push_message(out: &mut String, message: &AgentMessage) {
    let mut part = |label: &str, body: &str| {
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(label);
        out.push_str(body);
    };
    match message {
        AgentMessage::User(u) => {
            let text = concat_text(&u.content);
            if !text.is_empty() {
                part("[User]: ", &text);
            }
        }
        AgentMessage::Custom(c) => {
            let text = concat_text(&c.content);
            if !text.is_empty() {
                part("[User]: ", &text);
            }
        }
        AgentMessage::BashExecution(b) if b.exclude_from_context != Some(true) => {
            part("[User]: ", &bash_execution_text(b));
        }
        AgentMessage::CompactionSummary(s) => {
            let text = format!(
                "{COMPACTION_SUMMARY_PREFIX}{}{COMPACTION_SUMMARY_SUFFIX}",
                s.summary
            );
            part("[User]: ", &text);
        }
        AgentMessage::BranchSummary(s) => {
            let text = format!(
                "{BRANCH_SUMMARY_PREFIX}{}{BRANCH_SUMMARY_SUFFIX}",
                s.summary
            );
            part("[User]: ", &text);
        }
        AgentMessage::Assistant(a) => {
            let mut thinking: Vec<&str> = Vec::new();
            let mut text: Vec<&str> = Vec::new();
            let mut calls: Vec<String> = Vec::new();
            for block in &a.content {
                match block {
                    ContentBlock::Text(t) => text.push(&t.text),
                    ContentBlock::Thinking(t) => thinking.push(&t.thinking),
                    ContentBlock::ToolCall(c) => calls.push(format_call(&c.name, &c.arguments)),
                    _ => {}
                }
            }
            if !thinking.is_empty() {
                part("[Assistant thinking]: ", &thinking.join("\n"));
            }
            if !text.is_empty() {
                part("[Assistant]: ", &text.join("\n"));
            }
            if !calls.is_empty() {
                part("[Assistant tool calls]: ", &calls.join("; "));
            }
        }
        AgentMessage::ToolResult(r) => {
            let text = concat_text(&r.content);
            if !text.is_empty() {
                part(
                    "[Tool result]: ",
                    &truncate_with_note(&text, TOOL_RESULT_MAX_CHARS),
                );
            }
        }
        // `!!` commands and roles pi does not send to the model are left out, as pi does.
        AgentMessage::BashExecution(_) | AgentMessage::Other(_) => {}
    }
}

/// Each message serialised on its own (`""` for one that shows nothing), so a caller can
/// measure messages and join ranges of them without serialising twice.
pub fn serialize_each(messages: &[SharedMessage]) -> Vec<String> {
    messages
        .iter()
        .map(|m| {
            let mut s = String::new();
            push_message(&mut s, m);
            s
        })
        .collect()
}

/// What each serialised message costs in a request: its tokens plus one for the separator
/// (none for a message that shows nothing).
pub fn request_costs(serialized: &[String], counter: &TokenCounter) -> Vec<u64> {
    serialized
        .iter()
        .map(|s| {
            if s.is_empty() {
                0
            } else {
                counter.count_text(s) + 1
            }
        })
        .collect()
}

/// The serialised messages joined as [`serialize_conversation`] joins them.
pub fn join_serialized(parts: &[String]) -> String {
    let mut out = String::with_capacity(parts.iter().map(|p| p.len() + 2).sum());
    for part in parts.iter().filter(|p| !p.is_empty()) {
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(part);
    }
    out
}

/// `name(k=json, …)`: a tool call with its arguments (in the order the JSON map keeps them:
/// sorted by key in this build). Arguments that are not an object (which pi never writes) are
/// shown whole.
pub fn format_call(name: &str, arguments: &serde_json::Value) -> String {
    match arguments {
        serde_json::Value::Object(map) => {
            let args: Vec<String> = map.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("{name}({})", args.join(", "))
        }
        serde_json::Value::Null => format!("{name}()"),
        other => format!("{name}({other})"),
    }
}

/// `text` cut to `max_chars` characters with pi's note `\n\n[... N more characters
/// truncated]`, or `text` itself when it fits.
pub fn truncate_with_note(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        None => text.to_owned(),
        Some((cut, _)) => {
            let omitted = text[cut..].chars().count();
            format!(
                "{}\n\n[... {omitted} more characters truncated]",
                &text[..cut]
            )
        }
    }
}

/// The text blocks of `content` concatenated (pi joins them without a separator).
pub fn concat_text(content: &Content) -> String {
    match content {
        Content::Text(t) => t.clone(),
        Content::Blocks(blocks) => blocks
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect(),
    }
}

/// OpenClaw's `extractMessageText`: the non-blank text blocks, trimmed, joined by newlines.
/// Used for asks, preserved turns and identifier seeds.
pub fn message_text(message: &AgentMessage) -> String {
    let content = match message {
        AgentMessage::User(u) => &u.content,
        AgentMessage::Custom(c) => &c.content,
        AgentMessage::ToolResult(r) => &r.content,
        AgentMessage::Assistant(a) => {
            let parts: Vec<&str> = a
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Text(t) if !t.text.trim().is_empty() => Some(t.text.trim()),
                    _ => None,
                })
                .collect();
            return parts.join("\n").trim().to_owned();
        }
        AgentMessage::BashExecution(b) => return bash_execution_text(b),
        AgentMessage::CompactionSummary(s) => return s.summary.trim().to_owned(),
        AgentMessage::BranchSummary(s) => return s.summary.trim().to_owned(),
        AgentMessage::Other(_) => return String::new(),
    };
    match content {
        Content::Text(t) => t.trim().to_owned(),
        Content::Blocks(blocks) => {
            let parts: Vec<&str> = blocks
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Text(t) if !t.text.trim().is_empty() => Some(t.text.trim()),
                    _ => None,
                })
                .collect();
            parts.join("\n").trim().to_owned()
        }
    }
}

/// A user's shell command as pi shows it to the model.
pub fn bash_execution_text(b: &BashExecutionMessage) -> String {
    let mut text = format!("Ran `{}`\n", b.command);
    if b.output.is_empty() {
        text.push_str("(no output)");
    } else {
        text.push_str(&format!("```\n{}\n```", b.output));
    }
    match b.exit_code {
        _ if b.cancelled => text.push_str("\n\n(command cancelled)"),
        Some(Some(code)) if code != 0 => {
            text.push_str(&format!("\n\nCommand exited with code {code}"));
        }
        _ => {}
    }
    if b.truncated
        && let Some(path) = &b.full_output_path
    {
        text.push_str(&format!("\n\n[Output truncated. Full output: {path}]"));
    }
    text
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::compaction::test_support::*;
    use serde_json::json;

    #[test]
    fn serialises_like_pi() {
        let thinking = assistant_blocks(
            vec![
                json!({"type": "thinking", "thinking": "hmm"}),
                json!({"type": "text", "text": "Reading it."}),
                json!({"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "/a", "limit": 5}}),
                json!({"type": "toolCall", "id": "c2", "name": "exec", "arguments": {"cmd": "ls"}}),
            ],
            "toolUse",
        );
        let mut result = tool_result("c1", "read", "contents");
        if let AgentMessage::ToolResult(r) = &mut result {
            r.details = Some(json!({"secret": "ui only"}));
        }
        let text = serialize_conversation(&[user("hi"), thinking, result]);
        assert_eq!(
            text,
            "[User]: hi\n\n[Assistant thinking]: hmm\n\n[Assistant]: Reading it.\n\n\
             [Assistant tool calls]: read(path=\"/a\", limit=5); exec(cmd=\"ls\")\n\n\
             [Tool result]: contents"
        );
        assert!(!text.contains("ui only"));
    }

    #[test]
    fn serialising_each_then_joining_matches_the_whole() {
        let msgs = crate::compaction::test_support::shared(vec![
            user("a"),
            assistant_with_calls("", &[("c", "read")]),
            tool_result("c", "read", ""),
            user("b"),
        ]);
        let each = serialize_each(&msgs);
        assert_eq!(
            join_serialized(&each),
            serialize_conversation(msgs.iter().map(|m| m.as_ref()))
        );
        let costs = request_costs(&each, &TokenCounter::estimate());
        assert_eq!(costs[2], 0);
        assert_eq!(costs[0], 4);
    }

    #[test]
    fn long_tool_results_are_cut_with_the_note() {
        let text = serialize_conversation(&[tool_result("c", "read", &"x".repeat(2500))]);
        assert!(text.ends_with("\n\n[... 500 more characters truncated]"));
        assert_eq!(text.matches('x').count(), 2000);
        assert_eq!(truncate_with_note("short", 10), "short");
    }

    #[test]
    fn summaries_and_commands_read_as_user_input() {
        let text = serialize_conversation(&[summary_message("old")]);
        assert!(text.starts_with("[User]: The conversation history before this point"));
        let bash: AgentMessage = serde_json::from_value(json!({
            "role": "bashExecution", "command": "make", "output": "boom", "exitCode": 2,
            "cancelled": false, "truncated": false, "timestamp": 1
        }))
        .unwrap();
        let text = serialize_conversation(&[bash]);
        assert_eq!(
            text,
            "[User]: Ran `make`\n```\nboom\n```\n\nCommand exited with code 2"
        );
    }
}
