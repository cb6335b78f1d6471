//! A branch as Markdown, for people (`sessions export --format markdown`).

use std::fmt::Write as _;

use rampart_engine_api::AgentMessage;
use rampart_message::ContentBlock;
use serde_json::Value;

use crate::providers::text::content_text;

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
