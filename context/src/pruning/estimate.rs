//! How big pruning thinks a message is, in estimate characters.
//!
//! Why not [`crate::tokens::message_chars`]: pruning compares against OpenClaw's thresholds,
//! which were tuned with its pruner's own per-role rules (images at 8,000, fixed 256 for
//! summaries and custom messages, signatures counted, tool names not). Using the token
//! counter's rules would move every threshold a little. What is shared is the character
//! weighting: [`estimate_string_chars`] counts each CJK, Hangul or kana character as 4.

use serde_json::Value;

use crate::tokens::estimate_string_chars;
use rampart_message::{AgentMessage, AssistantMessage, Content, ContentBlock};

/// Characters per token: the context window in characters is `tokens × 4`.
pub const CHARS_PER_TOKEN: u64 = crate::tokens::CHARS_PER_TOKEN;

/// What one image counts in user messages and tool results. Why 8,000 and not the token
/// counter's 4,800: it is OpenClaw's pruning figure, and it makes image-heavy contexts start
/// pruning earlier, which is the point.
pub const IMAGE_CHARS: u64 = 8_000;

/// What a message of any other role (custom, bash execution, summaries, unknown) counts:
/// OpenClaw's flat figure. Pruning never touches those messages; the figure only keeps them
/// from being free in the ratio.
pub const OTHER_ROLE_CHARS: u64 = 256;

/// What a tool call's arguments count when they are absent (`null`): the JSON `{}`.
const EMPTY_ARGUMENTS_CHARS: u64 = 2;

/// A message's size for pruning, with the part that dropped thinking would remove.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Measure {
    /// Everything that counts.
    pub(crate) chars: u64,
    /// The part of `chars` in thinking and redacted-thinking blocks (assistants only).
    pub(crate) thinking: u64,
}

/// The estimate characters of `message`, as pruning counts them:
///
/// - user and tool result: text (CJK-weighted) plus [`IMAGE_CHARS`] per image;
/// - assistant: text, thinking, thinking signatures, redacted thinking data, and each tool
///   call's arguments as compact JSON (not its name);
/// - every other role: [`OTHER_ROLE_CHARS`].
///
/// Other block types inside user, tool-result and assistant content count nothing, as there.
/// Why count signatures: they are sent back to the provider and can be tens of kilobytes.
pub fn estimate_message_chars(message: &AgentMessage) -> u64 {
    measure(message).chars
}

pub(crate) fn measure(message: &AgentMessage) -> Measure {
    match message {
        AgentMessage::User(m) => plain(content_chars(&m.content)),
        AgentMessage::ToolResult(m) => plain(content_chars(&m.content)),
        AgentMessage::Assistant(m) => assistant_measure(m),
        _ => plain(OTHER_ROLE_CHARS),
    }
}

fn plain(chars: u64) -> Measure {
    Measure { chars, thinking: 0 }
}

/// Text and images of user or tool-result content.
pub(crate) fn content_chars(content: &Content) -> u64 {
    match content {
        Content::Text(text) => estimate_string_chars(text),
        Content::Blocks(blocks) => blocks
            .iter()
            .map(|b| match b {
                ContentBlock::Text(t) => estimate_string_chars(&t.text),
                ContentBlock::Image(_) => IMAGE_CHARS,
                _ => 0,
            })
            .sum(),
    }
}

fn assistant_measure(m: &AssistantMessage) -> Measure {
    let mut out = Measure::default();
    for block in &m.content {
        match block {
            ContentBlock::Text(t) => out.chars += estimate_string_chars(&t.text),
            ContentBlock::Thinking(t) => {
                let n = estimate_string_chars(&t.thinking)
                    + t.thinking_signature
                        .as_deref()
                        .map_or(0, estimate_string_chars);
                out.chars += n;
                out.thinking += n;
            }
            ContentBlock::ToolCall(call) => out.chars += arguments_chars(&call.arguments),
            // pi keeps Anthropic's `redacted_thinking` blocks as they came: opaque `data` that
            // is replayed verbatim, so it costs what it weighs.
            ContentBlock::Other(raw)
                if raw.get("type").and_then(Value::as_str) == Some("redacted_thinking") =>
            {
                let text = |key: &str| {
                    raw.get(key)
                        .and_then(Value::as_str)
                        .map_or(0, estimate_string_chars)
                };
                let n = text("data") + text("thinkingSignature");
                out.chars += n;
                out.thinking += n;
            }
            _ => {}
        }
    }
    out
}

fn arguments_chars(arguments: &Value) -> u64 {
    match arguments {
        Value::Null => EMPTY_ARGUMENTS_CHARS,
        // Serialising a JSON value cannot fail; were it to, count the empty object.
        other => serde_json::to_string(other)
            .map_or(EMPTY_ARGUMENTS_CHARS, |json| estimate_string_chars(&json)),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::pruning::test_support::*;
    use serde_json::json;

    #[test]
    fn per_role_rules() {
        assert_eq!(estimate_message_chars(&user("hello")), 5);
        assert_eq!(
            estimate_message_chars(&user_blocks(vec![
                json!({"type": "text", "text": "ab"}),
                image()
            ])),
            2 + 8_000
        );
        assert_eq!(
            estimate_message_chars(&tool_blocks(
                "t",
                "read",
                vec![text_block("abc"), image(), text_block("12345")]
            )),
            8 + 8_000
        );
        let custom: AgentMessage = serde_json::from_value(json!({
            "role": "custom", "customType": "x", "content": "y".repeat(10_000), "display": true, "timestamp": 1
        }))
        .unwrap();
        assert_eq!(estimate_message_chars(&custom), 256);
        let summary: AgentMessage = serde_json::from_value(json!({
            "role": "compactionSummary", "summary": "s".repeat(9_000), "tokensBefore": 1, "timestamp": 1
        }))
        .unwrap();
        assert_eq!(estimate_message_chars(&summary), 256);
    }

    #[test]
    fn assistant_counts_text_thinking_signatures_and_arguments() {
        let m = assistant(vec![
            json!({"type": "text", "text": "done"}),
            json!({"type": "thinking", "thinking": "hmm", "thinkingSignature": "S".repeat(40)}),
            json!({"type": "toolCall", "id": "c1", "name": "a_long_tool_name", "arguments": {"path": "a"}}),
            json!({"type": "toolCall", "id": "c2", "name": "x", "arguments": null}),
            json!({"type": "redacted_thinking", "data": "D".repeat(100), "thinkingSignature": "sig"}),
        ]);
        let measured = measure(&m);
        // 4 + (3 + 40) + len('{"path":"a"}') + 2 + (100 + 3)
        assert_eq!(measured.chars, 4 + 43 + 12 + 2 + 103);
        assert_eq!(measured.thinking, 43 + 103);
    }

    #[test]
    fn cjk_counts_four() {
        assert_eq!(estimate_message_chars(&user("上下文")), 12);
        assert_eq!(
            estimate_message_chars(&tool("t", "read", "한국어 ok")),
            12 + 3
        );
        // Extension B, outside the BMP: 4, not the surrogate pair's 2.
        assert_eq!(estimate_message_chars(&user(&"𠀀".repeat(50))), 200);
        let m = assistant(vec![
            json!({"type": "toolCall", "id": "c", "name": "n", "arguments": {"q": "金银"}}),
        ]);
        // {"q":"金银"}: 8 ASCII characters plus two CJK characters.
        assert_eq!(estimate_message_chars(&m), 8 + 8);
    }
}
