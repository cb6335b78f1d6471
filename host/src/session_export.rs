//! Turning a branch's messages into other formats: OpenAI chat-completions messages (also what
//! an OpenAI-compatible provider receives) and Markdown for people.

use std::fmt::Write as _;

use rampart_engine_api::AgentMessage;
use rampart_message::{Content, ContentBlock};
use serde_json::{Value, json};

/// Text a message carries, with images as a short placeholder (they cannot be text).
fn content_text(content: &Content) -> String {
    match content {
        Content::Text(t) => t.clone(),
        Content::Blocks(blocks) => {
            let parts: Vec<String> = blocks
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Text(t) => Some(t.text.clone()),
                    ContentBlock::Image(i) => Some(format!("[image {}]", i.mime_type)),
                    _ => None,
                })
                .collect();
            parts.join("\n")
        }
    }
}

/// OpenAI content for a user turn: a string, or parts when there are images.
fn user_content(content: &Content) -> Value {
    match content {
        Content::Text(t) => Value::String(t.clone()),
        Content::Blocks(blocks) if blocks.iter().any(|b| matches!(b, ContentBlock::Image(_))) => {
            Value::Array(
                blocks
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::Text(t) => Some(json!({"type": "text", "text": t.text})),
                        ContentBlock::Image(i) => Some(json!({
                            "type": "image_url",
                            "image_url": {"url": format!("data:{};base64,{}", i.mime_type, i.data)}
                        })),
                        _ => None,
                    })
                    .collect(),
            )
        }
        other => Value::String(content_text(other)),
    }
}

/// One message in OpenAI chat-completions form. Roles chat-completions lacks (bash runs,
/// summaries, custom messages) become user messages that say what they are, so the model sees
/// everything the transcript holds.
pub fn to_openai_message(message: &AgentMessage) -> Value {
    match message {
        AgentMessage::User(m) => json!({"role": "user", "content": user_content(&m.content)}),
        AgentMessage::Assistant(m) => {
            let mut text = Vec::new();
            let mut reasoning = Vec::new();
            let mut calls = Vec::new();
            for block in &m.content {
                match block {
                    ContentBlock::Text(t) => text.push(t.text.clone()),
                    ContentBlock::Thinking(t) => reasoning.push(t.thinking.clone()),
                    ContentBlock::ToolCall(c) => calls.push(json!({
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments.to_string()},
                    })),
                    _ => {}
                }
            }
            let mut out = json!({
                "role": "assistant",
                "content": if text.is_empty() { Value::Null } else { Value::String(text.join("\n")) },
            });
            if !reasoning.is_empty() {
                out["reasoning_content"] = Value::String(reasoning.join("\n"));
            }
            if !calls.is_empty() {
                out["tool_calls"] = Value::Array(calls);
            }
            out
        }
        AgentMessage::ToolResult(m) => json!({
            "role": "tool",
            "tool_call_id": m.tool_call_id,
            "content": content_text(&m.content),
        }),
        AgentMessage::Custom(m) => json!({"role": "user", "content": content_text(&m.content)}),
        AgentMessage::BashExecution(m) => {
            let code = match m.exit_code {
                Some(Some(c)) => format!(" (exit code {c})"),
                _ => String::new(),
            };
            json!({
                "role": "user",
                "content": format!("Ran `{}`{code}\n```\n{}\n```", m.command, m.output),
            })
        }
        AgentMessage::CompactionSummary(m) => json!({
            "role": "user",
            // pi's injection text, so a model sees a summary exactly as pi would show it.
            "content": format!(
                "The conversation history before this point was compacted into the following \
                 summary:\n\n<summary>\n{}\n</summary>",
                m.summary
            ),
        }),
        AgentMessage::BranchSummary(m) => json!({
            "role": "user",
            "content": format!(
                "The following is a summary of a branch that this conversation came back \
                 from:\n\n<summary>\n{}\n</summary>",
                m.summary
            ),
        }),
        AgentMessage::Other(map) => json!({
            "role": "user",
            "content": Value::Object(map.clone()).to_string(),
        }),
    }
}

/// A whole branch as an OpenAI `messages` array.
pub fn to_openai_messages<'a>(messages: impl IntoIterator<Item = &'a AgentMessage>) -> Value {
    Value::Array(messages.into_iter().map(to_openai_message).collect())
}

/// A whole branch as Markdown.
pub fn to_markdown<'a>(
    title: &str,
    messages: impl IntoIterator<Item = &'a AgentMessage>,
) -> String {
    let mut out = format!("# {title}\n");
    for message in messages {
        let _ = match message {
            AgentMessage::User(m) => write!(out, "\n## User\n\n{}\n", content_text(&m.content)),
            AgentMessage::Assistant(m) => {
                let _ = write!(out, "\n## Assistant ({})\n", m.model);
                for block in &m.content {
                    let _ = match block {
                        ContentBlock::Text(t) => write!(out, "\n{}\n", t.text),
                        ContentBlock::Thinking(t) => {
                            write!(
                                out,
                                "\n> *thinking:* {}\n",
                                t.thinking.replace('\n', "\n> ")
                            )
                        }
                        ContentBlock::ToolCall(c) => write!(
                            out,
                            "\n**Tool call** `{}` (`{}`)\n\n```json\n{}\n```\n",
                            c.name, c.id, c.arguments
                        ),
                        ContentBlock::Image(i) => write!(out, "\n[image {}]\n", i.mime_type),
                        ContentBlock::Other(o) => {
                            write!(out, "\n```json\n{}\n```\n", Value::Object(o.clone()))
                        }
                    };
                }
                Ok(())
            }
            AgentMessage::ToolResult(m) => write!(
                out,
                "\n### Tool result `{}` (`{}`){}\n\n```\n{}\n```\n",
                m.tool_name,
                m.tool_call_id,
                if m.is_error { " — error" } else { "" },
                content_text(&m.content)
            ),
            AgentMessage::Custom(m) => {
                write!(
                    out,
                    "\n## {}\n\n{}\n",
                    m.custom_type,
                    content_text(&m.content)
                )
            }
            AgentMessage::BashExecution(m) => {
                write!(
                    out,
                    "\n## Shell\n\n```\n$ {}\n{}\n```\n",
                    m.command, m.output
                )
            }
            AgentMessage::CompactionSummary(m) => {
                write!(
                    out,
                    "\n## Summary of earlier conversation\n\n{}\n",
                    m.summary
                )
            }
            AgentMessage::BranchSummary(m) => {
                write!(out, "\n## Summary of another branch\n\n{}\n", m.summary)
            }
            AgentMessage::Other(map) => {
                write!(out, "\n```json\n{}\n```\n", Value::Object(map.clone()))
            }
        };
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn tool_calls_and_results_map_to_openai_fields() {
        let call: AgentMessage = serde_json::from_value(json!({
            "role": "assistant",
            "content": [{"type": "thinking", "thinking": "hmm"},
                        {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a"}}],
            "api": "x", "provider": "x", "model": "m",
            "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                      "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
            "stopReason": "toolUse", "timestamp": 0
        }))
        .unwrap();
        let result = AgentMessage::tool_result("c1", "read", "body", false, 0);
        let out = to_openai_messages([&call, &result]);
        assert_eq!(
            out[0]["tool_calls"][0]["function"]["arguments"],
            r#"{"path":"a"}"#
        );
        assert_eq!(out[0]["content"], Value::Null);
        assert_eq!(out[0]["reasoning_content"], "hmm");
        assert_eq!(
            out[1],
            json!({"role": "tool", "tool_call_id": "c1", "content": "body"})
        );
        let md = to_markdown("t", [&call, &result]);
        assert!(
            md.contains("**Tool call** `read` (`c1`)") && md.contains("### Tool result `read`")
        );
    }
}
