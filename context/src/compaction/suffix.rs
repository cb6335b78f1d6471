//! The suffix after the summary body, and the 16,000-character cap that never cuts it.
//!
//! The suffix holds what must survive whatever the model wrote: the split turn's context, the
//! latest turns quoted verbatim, the tool failures and the file lists. The body is capped
//! first so the suffix is kept whole (OpenClaw's `capCompactionSummaryPreservingSuffix`). The
//! workspace-rules (`AGENTS.md`) section of OpenClaw is left out: reading workspace files is
//! I/O, which this library does not do.

use std::collections::HashSet;

use super::file_ops::CompactionDetails;
use super::settings::MAX_RECENT_TURNS_PRESERVE;
use super::transcript::message_text;
use crate::hygiene::calls::call_ref;
use crate::pairing::{ErroredAssistantPolicy, repair_tool_use_result_pairing};
use rampart_message::{AgentMessage, Content};
use rampart_message::{MessageList, SharedMessage};

/// The longest summary, suffix included (`MAX_COMPACTION_SUMMARY_CHARS`).
pub const MAX_COMPACTION_SUMMARY_CHARS: usize = 16_000;
/// The file-lists section at most (`MAX_FILE_OPS_SECTION_CHARS`).
pub const MAX_FILE_OPS_SECTION_CHARS: usize = 2_000;
/// One file list at most (`MAX_FILE_OPS_LIST_CHARS`).
pub const MAX_FILE_OPS_LIST_CHARS: usize = 900;
/// Appended to a body cut to fit (`SUMMARY_TRUNCATED_MARKER`).
pub const SUMMARY_TRUNCATED_MARKER: &str = "\n\n[Compaction summary truncated to fit budget]";
/// Characters of one preserved message at most (`MAX_RECENT_TURN_TEXT_CHARS`).
pub const MAX_RECENT_TURN_TEXT_CHARS: usize = 600;
/// The heading of the preserved turns.
pub const PRESERVED_TURNS_HEADING: &str = "## Recent turns preserved verbatim";
/// The heading that introduces a split turn's prefix summary.
pub const SPLIT_TURN_HEADING: &str = "**Turn Context (split turn):**";

/// The latest user turns to quote verbatim, and the rest (`splitPreservedRecentTurns`).
#[derive(Debug, Clone, Default)]
pub struct PreservedSplit {
    /// Everything else, pairing-repaired.
    pub summarizable: Vec<SharedMessage>,
    /// The quoted messages (user, assistant, tool results), in order.
    pub preserved: Vec<SharedMessage>,
}

/// Picks the last `turns` (at most 12) user turns: every user and assistant message from the
/// `turns`-th last user message on, plus the results of the picked assistants' calls. With
/// fewer user messages than `turns`, it picks every user message plus trailing conversation
/// messages up to `2 · turns` in all.
pub fn split_preserved_recent_turns(messages: &[SharedMessage], turns: usize) -> PreservedSplit {
    let turns = turns.min(MAX_RECENT_TURNS_PRESERVE);
    let unchanged = || PreservedSplit {
        summarizable: messages.to_vec(),
        preserved: Vec::new(),
    };
    if turns == 0 {
        return unchanged();
    }
    let conversation: Vec<usize> = (0..messages.len())
        .filter(|&i| {
            matches!(
                messages[i].as_ref(),
                AgentMessage::User(_) | AgentMessage::Assistant(_)
            )
        })
        .collect();
    let users: Vec<usize> = conversation
        .iter()
        .copied()
        .filter(|&i| matches!(messages[i].as_ref(), AgentMessage::User(_)))
        .collect();
    if conversation.is_empty() {
        return unchanged();
    }
    let mut keep = vec![false; messages.len()];
    if users.len() >= turns {
        let boundary = users[users.len() - turns];
        for &i in conversation.iter().filter(|&&i| i >= boundary) {
            keep[i] = true;
        }
    } else {
        let limit = turns * 2;
        let mut count = 0;
        for &i in &users {
            keep[i] = true;
            count += 1;
        }
        for &i in conversation.iter().rev() {
            if !keep[i] {
                keep[i] = true;
                count += 1;
            }
            if count >= limit {
                break;
            }
        }
    }
    let mut call_ids: HashSet<&str> = HashSet::new();
    for (i, m) in messages.iter().enumerate() {
        if keep[i]
            && let AgentMessage::Assistant(a) = m.as_ref()
        {
            call_ids.extend(a.content.iter().filter_map(call_ref).map(|c| c.id));
        }
    }
    if let Some(first) = keep.iter().position(|k| *k)
        && !call_ids.is_empty()
    {
        for i in first..messages.len() {
            if let Some(id) = messages[i].tool_call_id()
                && call_ids.contains(id)
            {
                keep[i] = true;
            }
        }
    }
    let rest: MessageList = messages
        .iter()
        .zip(&keep)
        .filter(|(_, k)| !**k)
        .map(|(m, _)| m.clone())
        .collect();
    let (repaired, _) = repair_tool_use_result_pairing(&rest, ErroredAssistantPolicy::Preserve);
    PreservedSplit {
        summarizable: repaired.to_vec(),
        preserved: messages
            .iter()
            .zip(&keep)
            .filter(|(m, k)| {
                **k && matches!(
                    m.as_ref(),
                    AgentMessage::User(_)
                        | AgentMessage::Assistant(_)
                        | AgentMessage::ToolResult(_)
                )
            })
            .map(|(m, _)| m.clone())
            .collect(),
    }
}

/// One line per message: `- User: …`, `- Assistant: …`, `- Tool result (<name>): …`, the text
/// cut at 600 characters plus `...`, non-text blocks counted as `[non-text content: image x2]`.
pub fn format_context_messages(messages: &[SharedMessage]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| {
            let label = match m.as_ref() {
                AgentMessage::User(_) => "User".to_owned(),
                AgentMessage::Assistant(_) => "Assistant".to_owned(),
                AgentMessage::ToolResult(r) => {
                    let name = if r.tool_name.trim().is_empty() {
                        "tool"
                    } else {
                        &r.tool_name
                    };
                    format!("Tool result ({name})")
                }
                _ => return None,
            };
            let text = message_text(m);
            let placeholder = non_text_placeholder(m);
            let rendered = match (text.is_empty(), placeholder) {
                (false, Some(p)) => format!("{text}\n{p}"),
                (false, None) => text,
                (true, Some(p)) => p,
                (true, None) => return None,
            };
            let trimmed = match rendered.char_indices().nth(MAX_RECENT_TURN_TEXT_CHARS) {
                Some((cut, _)) => format!("{}...", &rendered[..cut]),
                None => rendered,
            };
            Some(format!("- {label}: {trimmed}"))
        })
        .collect()
}

/// `[non-text content: toolCall x2, image]` for the non-text blocks of a message, in order of
/// first appearance; `None` for string content or text only.
fn non_text_placeholder(message: &AgentMessage) -> Option<String> {
    let blocks = match message {
        AgentMessage::User(u) => match &u.content {
            Content::Blocks(b) => b.as_slice(),
            Content::Text(_) => return None,
        },
        AgentMessage::ToolResult(r) => match &r.content {
            Content::Blocks(b) => b.as_slice(),
            Content::Text(_) => return None,
        },
        AgentMessage::Assistant(a) => a.content.as_slice(),
        _ => return None,
    };
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for block in blocks {
        let kind = match block.block_type() {
            "" => "unknown",
            "text" => continue,
            other => other,
        };
        match counts.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, n)) => *n += 1,
            None => counts.push((kind, 1)),
        }
    }
    if counts.is_empty() {
        return None;
    }
    let parts: Vec<String> = counts
        .iter()
        .map(|(k, n)| {
            if *n > 1 {
                format!("{k} x{n}")
            } else {
                (*k).to_owned()
            }
        })
        .collect();
    Some(format!("[non-text content: {}]", parts.join(", ")))
}

/// `\n\n## Recent turns preserved verbatim\n…`, or `""` with nothing to show.
pub fn format_preserved_turns_section(messages: &[SharedMessage]) -> String {
    let lines = format_context_messages(messages);
    if lines.is_empty() {
        return String::new();
    }
    format!("\n\n{PRESERVED_TURNS_HEADING}\n{}", lines.join("\n"))
}

/// The preserved-turns section at most, in the orchestrator (ours; OpenClaw has no bound).
/// Why: three turns of an agent session can hold dozens of messages at 600 characters each,
/// and a section of 16,000 characters would push the whole summary body out of the cap. The
/// quoted turns are also summarised, so the oldest lines dropped here are not lost.
pub const MAX_PRESERVED_TURNS_SECTION_CHARS: usize = 6_000;

/// [`format_preserved_turns_section`] within `max_chars`: the newest lines that fit, after a
/// line saying how many earlier ones are left to the summary.
pub fn format_preserved_turns_section_within(
    messages: &[SharedMessage],
    max_chars: usize,
) -> String {
    let lines = format_context_messages(messages);
    if lines.is_empty() {
        return String::new();
    }
    let heading = format!("\n\n{PRESERVED_TURNS_HEADING}\n");
    // Room for the heading and the "earlier messages" line.
    let mut left = max_chars.saturating_sub(heading.chars().count() + 80);
    let mut kept = 0;
    for line in lines.iter().rev() {
        let len = line.chars().count() + 1;
        if len > left {
            break;
        }
        left -= len;
        kept += 1;
    }
    let dropped = lines.len() - kept;
    let mut out = heading;
    if dropped > 0 {
        out.push_str(&format!(
            "- ...{dropped} earlier messages of these turns are summarized above\n"
        ));
    }
    out.push_str(&lines[dropped..].join("\n"));
    out.trim_end().to_owned()
}

/// The split turn's section: `---`, the heading, and the prefix summary. At the head of the
/// suffix it reads `<body>\n\n---\n\n**Turn Context (split turn):**\n\n<prefix summary>`.
pub fn format_split_turn_section(prefix_summary: &str) -> String {
    if prefix_summary.trim().is_empty() {
        return String::new();
    }
    format!("---\n\n{SPLIT_TURN_HEADING}\n\n{prefix_summary}")
}

/// `<read-files>` and `<modified-files>` lists, each within 900 characters (closing with
/// `...and N more` when cut), the whole within 2,000; `""` when both are empty.
pub fn format_file_operations(details: &CompactionDetails) -> String {
    let sections: Vec<String> = [
        ("read-files", &details.read_files),
        ("modified-files", &details.modified_files),
    ]
    .into_iter()
    .map(|(tag, files)| bounded_file_list(tag, files, MAX_FILE_OPS_LIST_CHARS))
    .filter(|s| !s.is_empty())
    .collect();
    if sections.is_empty() {
        return String::new();
    }
    cap_summary(
        &format!("\n\n{}", sections.join("\n\n")),
        MAX_FILE_OPS_SECTION_CHARS,
    )
}

fn bounded_file_list(tag: &str, files: &[String], max_chars: usize) -> String {
    if files.is_empty() || max_chars == 0 {
        return String::new();
    }
    let open = format!("<{tag}>\n");
    let close = format!("\n</{tag}>");
    let mut used = open.chars().count() + close.chars().count();
    let mut body = String::new();
    for (i, file) in files.iter().enumerate() {
        let line = format!("{file}\n");
        let remaining = files.len() - i - 1;
        let overflow = if remaining > 0 {
            format!("...and {remaining} more\n").chars().count()
        } else {
            0
        };
        let line_len = line.chars().count();
        if used + line_len + overflow > max_chars {
            let overflow = format!("...and {} more\n", files.len() - i);
            if used + overflow.chars().count() <= max_chars {
                body.push_str(&overflow);
            }
            break;
        }
        body.push_str(&line);
        used += line_len;
    }
    if body.is_empty() {
        return String::new();
    }
    format!("{open}{body}{close}")
}

/// Joins the suffix sections in order (split turn, preserved turns, tool failures, file
/// lists), making sure it starts with a blank line so it never runs into the body.
pub fn assemble_suffix(sections: &[&str]) -> String {
    let mut suffix = String::new();
    for section in sections.iter().filter(|s| !s.is_empty()) {
        if suffix.trim().is_empty() {
            suffix = section.trim_start().to_owned();
        } else {
            suffix.push_str(section);
        }
    }
    if !suffix.is_empty() && !suffix.starts_with(char::is_whitespace) {
        suffix.insert_str(0, "\n\n");
    }
    suffix
}

/// `summary` within `max_chars` characters: cut and closed with
/// [`SUMMARY_TRUNCATED_MARKER`], or only cut when even the marker does not fit.
pub fn cap_summary(summary: &str, max_chars: usize) -> String {
    if max_chars == 0 || summary.chars().count() <= max_chars {
        return summary.to_owned();
    }
    let marker_len = SUMMARY_TRUNCATED_MARKER.chars().count();
    if max_chars <= marker_len {
        return take_chars(summary, max_chars).to_owned();
    }
    format!(
        "{}{SUMMARY_TRUNCATED_MARKER}",
        take_chars(summary, max_chars - marker_len)
    )
}

/// The body capped to what the suffix leaves of `max_chars`, then the suffix whole. A suffix
/// that alone reaches `max_chars` keeps its tail (the diagnostics) over its head.
pub fn cap_summary_preserving_suffix(body: &str, suffix: &str, max_chars: usize) -> String {
    if suffix.is_empty() {
        return cap_summary(body, max_chars);
    }
    if max_chars == 0 {
        return cap_summary(&format!("{body}{suffix}"), max_chars);
    }
    let suffix_len = suffix.chars().count();
    if suffix_len >= max_chars {
        return last_chars(suffix, max_chars).to_owned();
    }
    format!("{}{suffix}", cap_summary(body, max_chars - suffix_len))
}

fn take_chars(text: &str, n: usize) -> &str {
    match text.char_indices().nth(n) {
        Some((cut, _)) => &text[..cut],
        None => text,
    }
}

fn last_chars(text: &str, n: usize) -> &str {
    let total = text.chars().count();
    match text.char_indices().nth(total.saturating_sub(n)) {
        Some((cut, _)) => &text[cut..],
        None => text,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::compaction::test_support::*;
    use serde_json::json;

    #[test]
    fn cap_reference_cases() {
        // §13 group 9.
        let capped = cap_summary(&"x".repeat(16_500), MAX_COMPACTION_SUMMARY_CHARS);
        assert!(capped.chars().count() <= 16_000);
        assert!(capped.ends_with("\n\n[Compaction summary truncated to fit budget]"));
        let tiny = cap_summary("## Decisions\n- a long body", 10);
        assert!(tiny.starts_with("## Decis"));
        assert!(!tiny.contains("truncated"));
        assert!(tiny.chars().count() <= 10);
        assert_eq!(cap_summary("short", 100), "short");
    }

    #[test]
    fn suffix_survives_and_a_huge_suffix_keeps_its_tail() {
        let out = cap_summary_preserving_suffix(&"b".repeat(20_000), "\n\nSUFFIX", 1000);
        assert_eq!(out.chars().count(), 1000);
        assert!(out.ends_with("\n\nSUFFIX"));
        assert!(out.contains(SUMMARY_TRUNCATED_MARKER));
        let suffix = format!("HEAD{}TAIL", "s".repeat(2000));
        let out = cap_summary_preserving_suffix("body", &suffix, 100);
        assert_eq!(out.chars().count(), 100);
        assert!(out.ends_with("TAIL"));
    }

    #[test]
    fn assemble_orders_and_separates() {
        let s = assemble_suffix(&[
            &format_split_turn_section("prefix"),
            "\n\n## Tool Failures\n- x",
        ]);
        assert_eq!(
            s,
            "\n\n---\n\n**Turn Context (split turn):**\n\nprefix\n\n## Tool Failures\n- x"
        );
        assert_eq!(assemble_suffix(&["", ""]), "");
    }

    #[test]
    fn file_lists_are_bounded() {
        let details = CompactionDetails {
            read_files: (0..200).map(|i| format!("/src/module_{i:03}.rs")).collect(),
            modified_files: vec!["/src/lib.rs".into()],
        };
        let text = format_file_operations(&details);
        assert!(text.starts_with("\n\n<read-files>\n/src/module_000.rs\n"));
        assert!(text.contains("more\n\n</read-files>"));
        assert!(text.ends_with("<modified-files>\n/src/lib.rs\n\n</modified-files>"));
        assert!(text.chars().count() <= MAX_FILE_OPS_SECTION_CHARS);
        let read_part = text.split("\n\n<modified-files>").next().unwrap();
        assert!(read_part.trim_start().chars().count() <= MAX_FILE_OPS_LIST_CHARS);
        assert_eq!(format_file_operations(&CompactionDetails::default()), "");
    }

    #[test]
    fn preserved_turns_keep_the_last_users_and_their_results() {
        let msgs = shared(vec![
            user("one"),
            assistant("a1"),
            user("two"),
            assistant_with_calls("checking", &[("c1", "read")]),
            tool_result("c1", "read", "data"),
            assistant("a2"),
            user("three"),
            assistant("a3"),
        ]);
        let split = split_preserved_recent_turns(&msgs, 2);
        assert_eq!(
            roles(&split.preserved),
            [
                "user",
                "assistant",
                "toolResult",
                "assistant",
                "user",
                "assistant"
            ]
        );
        assert_eq!(roles(&split.summarizable), ["user", "assistant"]);
        let section = format_preserved_turns_section(&split.preserved);
        assert!(section.starts_with("\n\n## Recent turns preserved verbatim\n- User: two\n"));
        assert!(section.contains("- Assistant: checking\n[non-text content: toolCall]"));
        assert!(section.contains("- Tool result (read): data"));
        // Fewer users than asked for: every user plus trailing conversation up to 2N.
        let split = split_preserved_recent_turns(&msgs, 5);
        assert_eq!(split.preserved.len(), 9 - 1);
        assert!(split_preserved_recent_turns(&msgs, 0).preserved.is_empty());
    }

    #[test]
    fn the_bounded_section_keeps_the_newest_lines() {
        let msgs = shared(
            (0..40)
                .map(|i| user(&format!("{i:02} {}", "m".repeat(300))))
                .collect(),
        );
        let all = format_preserved_turns_section(&msgs);
        assert!(all.chars().count() > MAX_PRESERVED_TURNS_SECTION_CHARS);
        let bounded =
            format_preserved_turns_section_within(&msgs, MAX_PRESERVED_TURNS_SECTION_CHARS);
        assert!(bounded.chars().count() <= MAX_PRESERVED_TURNS_SECTION_CHARS);
        assert!(bounded.contains("earlier messages of these turns are summarized above"));
        assert!(bounded.contains("- User: 39 "));
        assert!(!bounded.contains("- User: 00 "));
        let few = shared(vec![user("only")]);
        assert_eq!(
            format_preserved_turns_section_within(&few, 6_000),
            format_preserved_turns_section(&few)
        );
    }

    #[test]
    fn long_and_non_text_messages_are_abbreviated() {
        let image = serde_json::from_value(json!({
            "role": "user", "timestamp": 1,
            "content": [{"type": "image", "data": "AA", "mimeType": "image/png"},
                        {"type": "image", "data": "AA", "mimeType": "image/png"}]
        }))
        .unwrap();
        let lines = format_context_messages(&shared(vec![image, user(&"y".repeat(700))]));
        assert_eq!(lines[0], "- User: [non-text content: image x2]");
        assert_eq!(lines[1], format!("- User: {}...", "y".repeat(600)));
    }
}
