//! The conversation one API request carries, as pi messages: what `rampart serve` reads from a
//! client that re-sends its whole history on every call.
//!
//! The conversions are the importers' own, so that a recorded transcript and a live request of
//! the same shape become the same messages: chat-completions `messages` go through
//! [`super::openai_chat`]'s converter (tool calls with their parsed arguments, `tool` results
//! named after their calls, `system`/`developer` as the system prompt), and Anthropic
//! `messages` through the Claude Code importer, whose lines carry Anthropic messages
//! (`tool_use` as tool calls, each `tool_result` block as its own result, thinking with its
//! signature, images).

use rampart_message::AgentMessage;
use serde_json::{Map, Value, json};

use super::LineImport;
use super::builder::{Builder, plain_text};
use super::claude_code::ClaudeImport;
use super::openai_chat::{ChatConverter, ModelInfo};
use super::{ImportedKind, Origin, SourceFormat};

/// The conversation of one request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestConversation {
    /// The system prompt (several system parts joined by blank lines).
    pub system: Option<String>,
    /// The messages, system prompt excluded, in order.
    pub messages: Vec<AgentMessage>,
    /// What could not be converted exactly (kept verbatim where possible).
    pub warnings: Vec<String>,
}

/// A chat-completions request's `messages`, stamped `timestamp_ms`.
pub fn from_openai_chat(messages: &[Value], model: &str, timestamp_ms: u64) -> RequestConversation {
    let mut b = Builder::new();
    let mut converter = ChatConverter::default();
    let info = ModelInfo::chat(model);
    let mut out = RequestConversation::default();
    let mut system: Vec<String> = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        let at = format!("messages[{index}]");
        let Some(msg) = message.as_object() else {
            out.warnings
                .push(format!("{at}: not a JSON object; left out"));
            continue;
        };
        let (kind, _) = converter.convert(&mut b, msg, &at, timestamp_ms, &info);
        match kind {
            ImportedKind::SystemPrompt { text, .. } => system.push(text),
            ImportedKind::Message(m) => out.messages.push(m),
            _ => out
                .warnings
                .push(format!("{at}: a message pi cannot hold; left out")),
        }
    }
    out.warnings.extend(
        b.finish(SourceFormat::OpenAiChat, None, None, None)
            .warnings,
    );
    out.system = (!system.is_empty()).then(|| system.join("\n\n"));
    out
}

/// An Anthropic messages request's `system` and `messages`, stamped `timestamp_iso` (RFC 3339).
pub fn from_anthropic_messages(
    system: Option<&Value>,
    messages: &[Value],
    timestamp_iso: &str,
) -> RequestConversation {
    let mut import = ClaudeImport::new(&Origin { path: None });
    let mut out = RequestConversation::default();
    for (index, message) in messages.iter().enumerate() {
        let Some(msg) = message.as_object() else {
            out.warnings
                .push(format!("messages[{index}]: not a JSON object; left out"));
            continue;
        };
        let role = match msg.get("role").and_then(Value::as_str) {
            Some(role @ ("user" | "assistant")) => role,
            other => {
                out.warnings.push(format!(
                    "messages[{index}]: role {other:?} is neither user nor assistant; left out"
                ));
                continue;
            }
        };
        // A line of a Claude Code transcript holds exactly such a message.
        let mut line = Map::new();
        line.insert("type".into(), json!(role));
        line.insert("uuid".into(), json!(format!("request-{index}")));
        line.insert(
            "parentUuid".into(),
            if index == 0 {
                Value::Null
            } else {
                json!(format!("request-{}", index - 1))
            },
        );
        line.insert("timestamp".into(), json!(timestamp_iso));
        line.insert("message".into(), message.clone());
        import.line(index + 1, &Value::Object(line).to_string());
    }
    let imported = import.finish();
    for item in imported.items {
        if let ImportedKind::Message(m) = item.kind {
            out.messages.push(m);
        }
    }
    out.warnings.extend(
        imported
            .warnings
            .into_iter()
            .map(|w| w.replace("line ", "message ")),
    );
    out.system = system.and_then(|s| {
        let text = match s {
            Value::String(text) => text.clone(),
            other => plain_text(Some(other)),
        };
        (!text.is_empty()).then_some(text)
    });
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use rampart_message::{Content, ContentBlock};

    use super::*;

    #[test]
    fn chat_messages_with_tool_calls_and_results() {
        let messages = vec![
            json!({"role": "system", "content": "be brief"}),
            json!({"role": "user", "content": "read a"}),
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a\"}"}}
            ]}),
            json!({"role": "tool", "tool_call_id": "call_1", "content": "body"}),
        ];
        let c = from_openai_chat(&messages, "gpt-4o", 42);
        assert_eq!(c.system.as_deref(), Some("be brief"));
        assert_eq!(c.messages.len(), 3);
        let AgentMessage::Assistant(a) = &c.messages[1] else {
            panic!("{:?}", c.messages[1])
        };
        let ContentBlock::ToolCall(call) = &a.content[0] else {
            panic!()
        };
        assert_eq!(call.arguments, json!({"path": "a"}));
        let AgentMessage::ToolResult(r) = &c.messages[2] else {
            panic!()
        };
        assert_eq!((r.tool_name.as_str(), r.timestamp), ("read", 42));
    }

    #[test]
    fn anthropic_messages_split_tool_results_and_keep_the_prompt() {
        let messages = vec![
            json!({"role": "user", "content": [{"type": "text", "text": "read a", "cache_control": {"type": "ephemeral"}}]}),
            json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": "", "signature": "sig"},
                {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "a"}}
            ]}),
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "body"},
                {"type": "text", "text": "and now?"}
            ]}),
        ];
        let system = json!([{"type": "text", "text": "You are Claude Code."}]);
        let c = from_anthropic_messages(Some(&system), &messages, "2026-01-01T00:00:00.000Z");
        assert_eq!(c.system.as_deref(), Some("You are Claude Code."));
        assert_eq!(c.messages.len(), 4, "{:?}", c.messages);
        let AgentMessage::ToolResult(r) = &c.messages[2] else {
            panic!()
        };
        assert_eq!(
            (r.tool_call_id.as_str(), r.tool_name.as_str()),
            ("toolu_1", "Read")
        );
        let AgentMessage::User(u) = &c.messages[3] else {
            panic!()
        };
        assert!(matches!(&u.content, Content::Blocks(b) if b.len() == 1));
        assert!(c.messages.iter().all(|m| match m {
            AgentMessage::User(u) => u.timestamp > 0,
            _ => true,
        }));
    }
}
