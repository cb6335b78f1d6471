//! The conversation one API request carries, as pi messages: what `rampart serve` reads from a
//! client that re-sends its whole history on every call.
//!
//! The conversions are the importers' own, so that a recorded transcript and a live request of
//! the same shape become the same messages: chat-completions `messages` go through
//! [`super::openai_chat`]'s converter (tool calls with their parsed arguments, `tool` results
//! named after their calls, `system`/`developer` as the system prompt), and Anthropic
//! `messages` through the Claude Code importer, whose lines carry Anthropic messages
//! (`tool_use` as tool calls, each `tool_result` block as its own result, thinking with its
//! signature, images). An Anthropic message the importer has no type for (role `system`, which
//! Claude Code sends inside `messages`) is kept whole at its position as an opaque message
//! ([`rampart_message::opaque`]), so that an Anthropic upstream receives it back unchanged.

use std::collections::VecDeque;

use rampart_message::AgentMessage;
use rampart_message::opaque::{ANTHROPIC_MESSAGES, opaque_message};
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

/// The `extra` key of a user, assistant or tool message holding the message-level fields of a
/// chat-completions client's message that pi's message has no place for (a user's `name`, an
/// assistant's `refusal` or `audio`, a tool result's own `name`, fields a provider added), as
/// the client wrote them. Why: the chat writer puts them back, so a chat upstream receives the
/// message as the client sent it; before, they were dropped on the way in.
pub const CHAT_FIELDS_KEY: &str = "rampartChatFields";

/// The chat fields a message keeps under [`CHAT_FIELDS_KEY`], if any: what a chat writer puts
/// back, and what an upstream of another wire cannot take.
pub fn chat_fields(message: &AgentMessage) -> Option<&Map<String, Value>> {
    let extra = match message {
        AgentMessage::User(m) => &m.extra,
        AgentMessage::Assistant(m) => &m.extra,
        AgentMessage::ToolResult(m) => &m.extra,
        _ => return None,
    };
    extra.get(CHAT_FIELDS_KEY).and_then(Value::as_object)
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
        let (kind, mut rest) = converter.convert(&mut b, msg, &at, timestamp_ms, &info);
        match kind {
            ImportedKind::SystemPrompt { text, .. } => system.push(text),
            ImportedKind::Message(mut m) => {
                // A tool result's `name` names its tool in pi's model, but it is kept as the
                // client wrote it too (present or not).
                if m.role() == "toolResult"
                    && let Some(name) = msg.get("name")
                {
                    rest.insert("name".to_owned(), name.clone());
                }
                if !rest.is_empty()
                    && let Some(extra) = message_extra(&mut m)
                {
                    extra.insert(CHAT_FIELDS_KEY.to_owned(), Value::Object(rest));
                }
                out.messages.push(m);
            }
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

/// The `extra` map of a user, assistant or tool-result message.
fn message_extra(message: &mut AgentMessage) -> Option<&mut rampart_message::Extra> {
    match message {
        AgentMessage::User(m) => Some(&mut m.extra),
        AgentMessage::Assistant(m) => Some(&mut m.extra),
        AgentMessage::ToolResult(m) => Some(&mut m.extra),
        _ => None,
    }
}

/// An Anthropic messages request's `system` and `messages`, stamped `timestamp_iso` (RFC 3339).
pub fn from_anthropic_messages(
    system: Option<&Value>,
    messages: &[Value],
    timestamp_iso: &str,
) -> RequestConversation {
    let mut import = ClaudeImport::new(&Origin { path: None });
    let mut out = RequestConversation::default();
    let timestamp_ms =
        super::timestamp::parse_iso(timestamp_iso).map_or(0, super::timestamp::to_millis);
    // Messages kept whole, by their index in `messages`, to be put back at their place.
    let mut opaque: VecDeque<(usize, AgentMessage)> = VecDeque::new();
    for (index, message) in messages.iter().enumerate() {
        let Some(msg) = message.as_object() else {
            out.warnings
                .push(format!("messages[{index}]: not a JSON object; left out"));
            continue;
        };
        let role = match msg.get("role").and_then(Value::as_str) {
            Some(role @ ("user" | "assistant")) => role,
            _ => {
                opaque.push_back((
                    index,
                    opaque_message(ANTHROPIC_MESSAGES, msg.clone(), timestamp_ms),
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
        import.object_line(index + 1, line);
    }
    let imported = import.finish();
    for item in imported.items {
        if let ImportedKind::Message(m) = item.kind {
            // An item's line is its message's index plus one.
            let index = item.source_line.map_or(usize::MAX, |line| line - 1);
            while opaque.front().is_some_and(|(at, _)| *at < index) {
                if let Some((_, kept)) = opaque.pop_front() {
                    out.messages.push(kept);
                }
            }
            out.messages.push(m);
        }
    }
    out.messages
        .extend(opaque.into_iter().map(|(_, kept)| kept));
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
    fn an_anthropic_system_message_is_kept_whole_at_its_place() {
        let agents = json!({"role": "system", "content": [
            {"type": "text", "text": "Agent types: general, explore", "extra": [1, {"k": null}]}
        ]});
        let messages = vec![
            json!({"role": "user", "content": "hello"}),
            agents.clone(),
            json!({"role": "assistant", "content": [{"type": "text", "text": "hi"}]}),
            json!({"role": "user", "content": "and?"}),
        ];
        let c = from_anthropic_messages(None, &messages, "2026-01-01T00:00:00.000Z");
        let roles: Vec<&str> = c.messages.iter().map(AgentMessage::role).collect();
        assert_eq!(
            roles,
            [
                "user",
                rampart_message::opaque::OPAQUE_ROLE,
                "assistant",
                "user"
            ]
        );
        let kept = rampart_message::opaque::as_opaque(&c.messages[1]).expect("opaque");
        assert_eq!(kept.wire, ANTHROPIC_MESSAGES);
        assert_eq!(&Value::Object(kept.item.clone()), &agents);
        assert_eq!(c.messages[1].timestamp(), Some(1_767_225_600_000));
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    }

    #[test]
    fn an_anthropic_system_message_first_or_last_keeps_its_place() {
        let note = json!({"role": "system", "content": "note"});
        let messages = vec![
            note.clone(),
            json!({"role": "user", "content": "hello"}),
            note.clone(),
        ];
        let c = from_anthropic_messages(None, &messages, "2026-01-01T00:00:00.000Z");
        let roles: Vec<&str> = c.messages.iter().map(AgentMessage::role).collect();
        let opaque = rampart_message::opaque::OPAQUE_ROLE;
        assert_eq!(roles, [opaque, "user", opaque]);
    }

    #[test]
    fn anthropic_tool_results_keep_how_the_client_wrote_them() {
        use rampart_message::tool_result_form::AnthropicToolResultForm;
        let messages = vec![
            json!({"role": "user", "content": "go"}),
            json!({"role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "Read", "input": {}},
                {"type": "tool_use", "id": "t2", "name": "Read", "input": {}}
            ]}),
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "short"},
                {"type": "tool_result", "tool_use_id": "t2", "is_error": true,
                 "content": [{"type": "text", "text": "failed"}]}
            ]}),
        ];
        let c = from_anthropic_messages(None, &messages, "2026-01-01T00:00:00.000Z");
        let forms: Vec<AnthropicToolResultForm> = c
            .messages
            .iter()
            .filter_map(|m| match m {
                AgentMessage::ToolResult(r) => Some(AnthropicToolResultForm::read(&r.extra)),
                _ => None,
            })
            .collect();
        assert_eq!(
            forms,
            [
                AnthropicToolResultForm {
                    content_string: true,
                    is_error_omitted: true
                },
                AnthropicToolResultForm::default()
            ]
        );
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
