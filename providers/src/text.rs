//! What a message says as plain text, for the wire formats that have no place for it.
//!
//! Why one module: chat-completions and Anthropic messages both lack roles pi has (shell runs,
//! summaries, custom messages). Each is sent as a user message that says what it is, worded the
//! same for every provider, so a model reads the same transcript whichever API it is behind.

use rampart_engine_api::AgentMessage;
use rampart_message::{Content, ContentBlock};
use serde_json::Value;

/// Text a message carries, with images as a short placeholder (they cannot be text).
pub fn content_text(content: &Content) -> String {
    match content {
        Content::Text(t) => t.clone(),
        Content::Blocks(blocks) => {
            let parts: Vec<String> = blocks
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Text(t) => Some(t.text.clone()),
                    ContentBlock::Image(i) => Some(format!("[image {}]", i.mime_type)),
                    ContentBlock::Other(block) => Some(other_block_text(block)),
                    _ => None,
                })
                .collect();
            parts.join("\n")
        }
    }
}

/// How long the JSON of a block of an unknown kind may be when it is shown as text.
const OTHER_BLOCK_CHARS: usize = 2_000;

/// A content block no wire format has a form for, as text that says what it was: Claude Code
/// puts `tool_reference` blocks (the tools a tool search loaded) in tool results, and sent as
/// nothing they made the result empty, which a provider refuses or a model misreads. A
/// `tool_reference` reads `[tool reference: NAME]`; any other kind `[KIND block: JSON]`, the
/// JSON cut at 2,000 characters.
pub fn other_block_text(block: &serde_json::Map<String, Value>) -> String {
    let kind = block
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("untyped");
    if kind == "tool_reference"
        && let Some(name) = block.get("tool_name").and_then(Value::as_str)
    {
        return format!("[tool reference: {name}]");
    }
    let mut fields = block.clone();
    fields.remove("type");
    let json = Value::Object(fields).to_string();
    let mut shown: String = json.chars().take(OTHER_BLOCK_CHARS).collect();
    if shown.len() < json.len() {
        shown.push('…');
    }
    format!("[{kind} block: {shown}]")
}

/// The user-message text a role without a chat equivalent is sent as: bash runs, summaries
/// (in pi's injection wording), custom messages and roles we do not know. `None` for the
/// roles every chat API has (user, assistant, tool result).
pub fn as_user_text(message: &AgentMessage) -> Option<String> {
    Some(match message {
        AgentMessage::User(_) | AgentMessage::Assistant(_) | AgentMessage::ToolResult(_) => {
            return None;
        }
        AgentMessage::Custom(m) => content_text(&m.content),
        AgentMessage::BashExecution(m) => {
            let code = match m.exit_code {
                Some(Some(c)) => format!(" (exit code {c})"),
                _ => String::new(),
            };
            format!("Ran `{}`{code}\n```\n{}\n```", m.command, m.output)
        }
        // pi's injection text, so a model sees a summary exactly as pi would show it.
        AgentMessage::CompactionSummary(m) => format!(
            "The conversation history before this point was compacted into the following \
             summary:\n\n<summary>\n{}\n</summary>",
            m.summary
        ),
        AgentMessage::BranchSummary(m) => format!(
            "The following is a summary of a branch that this conversation came back \
             from:\n\n<summary>\n{}\n</summary>",
            m.summary
        ),
        AgentMessage::Other(map) => Value::Object(map.clone()).to_string(),
    })
}

/// A system prompt as a wire carries it: Rampart's cache marker
/// ([`rampart_prompt::CACHE_BOUNDARY`]) is a sentinel between the prompt builder and the
/// providers, and reaches no model. Every provider sends the system prompt through this, the
/// one choke point: a wire with prompt-cache breakpoints (Anthropic) takes the two halves
/// ([`WireSystem::blocks`]), every other wire (OpenAI-style, the simulator) and every count
/// of the prompt the text with the marker stripped ([`WireSystem::text`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireSystem<'a> {
    raw: &'a str,
}

/// The system prompt `raw` as the wire carries it (see [`WireSystem`]).
pub fn wire_system(raw: &str) -> WireSystem<'_> {
    WireSystem { raw }
}

impl<'a> WireSystem<'a> {
    /// The prompt as one text, each marker replaced by a newline: what a wire without cache
    /// breakpoints sends, and what the run loop and the simulator count.
    pub fn text(&self) -> std::borrow::Cow<'a, str> {
        if self.raw.contains(rampart_prompt::CACHE_BOUNDARY) {
            std::borrow::Cow::Owned(rampart_prompt::strip_cache_boundary(self.raw))
        } else {
            std::borrow::Cow::Borrowed(self.raw)
        }
    }

    /// The prompt as text blocks: the stable prefix (what a breakpoint caches) and the
    /// dynamic suffix after the marker, or the one text when there is no marker or a half
    /// would be blank (a wire rejects blank text blocks).
    pub fn blocks(&self) -> Vec<std::borrow::Cow<'a, str>> {
        match rampart_prompt::split_at_cache_boundary(self.raw) {
            Some((stable, dynamic)) if !stable.trim().is_empty() && !dynamic.trim().is_empty() => {
                vec![
                    std::borrow::Cow::Borrowed(stable),
                    std::borrow::Cow::Borrowed(dynamic),
                ]
            }
            _ => vec![self.text()],
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "text_tests.rs"]
mod tests;
