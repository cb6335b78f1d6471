//! The shared token estimate: pi's `estimateTokens`, `ceil(chars / 4)` per message.
//!
//! One implementation for the host and every engine, so a budget means the same thing on both
//! sides of the ABI. What counts as a message's characters follows pi (reference §7.5):
//! - user: its text;
//! - assistant: text, thinking, and name plus JSON arguments of each tool call;
//! - tool result and custom: text, plus 4,800 characters per image;
//! - bash execution: command plus output;
//! - summaries: the summary text.
//!
//! Characters are Unicode scalar values, as JavaScript's `length` would count them closely
//! enough for a budget.

use crate::message::{AgentMessage, Content, ContentBlock};

/// Characters one image is worth in tool results and custom messages (pi's constant).
pub const IMAGE_CHARS: u64 = 4_800;

/// The estimated tokens of one message: `ceil(chars / 4)`.
pub fn estimate_message_tokens(message: &AgentMessage) -> u64 {
    message_chars(message).div_ceil(4)
}

/// The estimated tokens of a sequence of messages (the sum of the per-message estimates).
pub fn estimate_messages_tokens<'a>(messages: impl IntoIterator<Item = &'a AgentMessage>) -> u64 {
    messages.into_iter().map(estimate_message_tokens).sum()
}

/// The characters pi counts for `message`.
pub fn message_chars(message: &AgentMessage) -> u64 {
    match message {
        AgentMessage::User(m) => content_chars(&m.content, 0),
        AgentMessage::Assistant(m) => m.content.iter().map(assistant_block_chars).sum(),
        AgentMessage::ToolResult(m) => content_chars(&m.content, IMAGE_CHARS),
        AgentMessage::Custom(m) => content_chars(&m.content, IMAGE_CHARS),
        AgentMessage::BashExecution(m) => chars(&m.command) + chars(&m.output),
        AgentMessage::CompactionSummary(m) => chars(&m.summary),
        AgentMessage::BranchSummary(m) => chars(&m.summary),
        // A role we do not know: count its JSON, so it is never free.
        AgentMessage::Other(map) => serde_json::to_string(map).map(|s| chars(&s)).unwrap_or(0),
    }
}

fn chars(s: &str) -> u64 {
    s.chars().count() as u64
}

fn content_chars(content: &Content, image_chars: u64) -> u64 {
    match content {
        Content::Text(text) => chars(text),
        Content::Blocks(blocks) => blocks
            .iter()
            .map(|block| match block {
                ContentBlock::Text(t) => chars(&t.text),
                ContentBlock::Image(_) => image_chars,
                _ => 0,
            })
            .sum(),
    }
}

fn assistant_block_chars(block: &ContentBlock) -> u64 {
    match block {
        ContentBlock::Text(t) => chars(&t.text),
        ContentBlock::Thinking(t) => chars(&t.thinking),
        ContentBlock::ToolCall(call) => {
            let args = serde_json::to_string(&call.arguments)
                .map(|s| chars(&s))
                .unwrap_or(0);
            chars(&call.name) + args
        }
        _ => 0,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn chars_over_four_rounded_up() {
        let m = AgentMessage::user_text("abcde", 0);
        assert_eq!(estimate_message_tokens(&m), 2);
        let m = AgentMessage::user_text("", 0);
        assert_eq!(estimate_message_tokens(&m), 0);
    }

    #[test]
    fn tool_result_counts_text() {
        let m = AgentMessage::tool_result("c1", "read", "x".repeat(400), false, 0);
        assert_eq!(estimate_message_tokens(&m), 100);
    }
}
