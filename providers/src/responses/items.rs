//! The Responses `input` items of pi messages: what a Responses provider sends.
//!
//! A user message is a `message` item (`input_text`, `input_image`), an assistant message the
//! items of one model answer in order (`message` with `output_text`, one `function_call` per
//! tool call), a tool result a `function_call_output`. Roles Responses lacks (shell runs,
//! summaries, custom messages) become user messages that say what they are, as on the other
//! wires. Opaque items ([`super::opaque`]) are written back verbatim where they stand, which
//! splits the message around them. An item that came with a template ([`super::template`]) is
//! written from it, in the form the client or the model wrote it.

use rampart_engine_api::AgentMessage;
use rampart_message::{Content, ContentBlock};
use serde_json::{Value, json};

use super::opaque::opaque_item;
use super::template::{self, template_of};
use crate::text::{as_user_text, content_text, other_block_text};

/// The input items one message stands for (none for an assistant turn that held only
/// reasoning text no Responses model can take back).
pub fn message_items(message: &AgentMessage) -> Vec<Value> {
    match message {
        AgentMessage::User(m) => user_items(&m.content),
        AgentMessage::Assistant(m) => assistant_items(&m.content),
        AgentMessage::ToolResult(m) => {
            let output = content_text(&m.content);
            let templated = template_of(&m.extra)
                .and_then(|t| template::fill_output(t, &m.tool_call_id, output.clone()));
            vec![templated.unwrap_or_else(|| {
                json!({
                    "type": "function_call_output",
                    "call_id": m.tool_call_id,
                    "output": output,
                })
            })]
        }
        other => vec![user_message(vec![input_text(
            &as_user_text(other).unwrap_or_default(),
        )])],
    }
}

fn input_text(text: &str) -> Value {
    json!({"type": "input_text", "text": text})
}

fn user_message(parts: Vec<Value>) -> Value {
    json!({"type": "message", "role": "user", "content": parts})
}

/// A user turn: its parts as one `message` item, split where an opaque item stands.
fn user_items(content: &Content) -> Vec<Value> {
    let blocks = match content {
        Content::Text(text) => return vec![user_message(vec![input_text(text)])],
        Content::Blocks(blocks) => blocks,
    };
    let mut items = Vec::new();
    let mut parts = Vec::new();
    let mut at = 0;
    while let Some(block) = blocks.get(at) {
        if let Some((item, used)) = templated_message(&blocks[at..], "user") {
            if !parts.is_empty() {
                items.push(user_message(std::mem::take(&mut parts)));
            }
            items.push(item);
            at += used;
            continue;
        }
        at += 1;
        if let Some(item) = opaque_item(block) {
            if !parts.is_empty() {
                items.push(user_message(std::mem::take(&mut parts)));
            }
            items.push(item.clone());
            continue;
        }
        match block {
            ContentBlock::Text(t) => parts.push(input_text(&t.text)),
            ContentBlock::Image(i) => parts.push(json!({
                "type": "input_image",
                "image_url": format!("data:{};base64,{}", i.mime_type, i.data),
            })),
            ContentBlock::Other(block) => parts.push(input_text(&other_block_text(block))),
            // A user turn holds no thinking or tool calls; should one, there is no user form.
            ContentBlock::Thinking(_) | ContentBlock::ToolCall(_) => {}
        }
    }
    if !parts.is_empty() || items.is_empty() {
        items.push(user_message(parts));
    }
    items
}

/// An assistant turn: its text as `message` items (consecutive text blocks joined, as the
/// other wires join them), each tool call a `function_call`, each opaque item as it was.
/// Thinking text without an item behind it is left out: a Responses model takes its reasoning
/// back only as the item it produced (chat completions leaves it out the same way).
fn assistant_items(blocks: &[ContentBlock]) -> Vec<Value> {
    let mut items = Vec::new();
    let mut text: Vec<&str> = Vec::new();
    let flush = |text: &mut Vec<&str>, items: &mut Vec<Value>| {
        if !text.is_empty() {
            items.push(json!({
                "type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": text.join("\n")}],
            }));
            text.clear();
        }
    };
    let mut at = 0;
    while let Some(block) = blocks.get(at) {
        if let Some((item, used)) = templated_message(&blocks[at..], "assistant") {
            flush(&mut text, &mut items);
            items.push(item);
            at += used;
            continue;
        }
        at += 1;
        if let Some(item) = opaque_item(block) {
            flush(&mut text, &mut items);
            items.push(item.clone());
            continue;
        }
        match block {
            ContentBlock::Text(t) => text.push(&t.text),
            ContentBlock::ToolCall(c) => {
                flush(&mut text, &mut items);
                let arguments = match &c.arguments {
                    // Arguments that did not parse were kept as their text: sent as it was.
                    Value::String(raw) => raw.clone(),
                    other => other.to_string(),
                };
                let templated = template_of(&c.extra)
                    .and_then(|t| template::fill_call(t, c, arguments.clone()));
                items.push(templated.unwrap_or_else(|| {
                    json!({
                        "type": "function_call", "call_id": c.id, "name": c.name,
                        "arguments": arguments,
                    })
                }));
            }
            ContentBlock::Thinking(_) | ContentBlock::Image(_) | ContentBlock::Other(_) => {}
        }
    }
    flush(&mut text, &mut items);
    items
}

/// The `message` item a run of text blocks came from, rebuilt from the template on its first
/// block, and how many blocks it used: `None` unless the first block holds a template of
/// `role` and the blocks after it are the rest of its text parts (texts without one).
fn templated_message(blocks: &[ContentBlock], role: &str) -> Option<(Value, usize)> {
    let ContentBlock::Text(first) = blocks.first()? else {
        return None;
    };
    let template = template_of(&first.extra)?;
    let n = template::message_parts(template)?;
    let run = blocks.get(..n)?;
    let mut texts = Vec::with_capacity(n);
    for (i, block) in run.iter().enumerate() {
        match block {
            ContentBlock::Text(t) if i == 0 || template_of(&t.extra).is_none() => {
                texts.push(t.text.as_str());
            }
            _ => return None,
        }
    }
    Some((template::fill_message(template, role, &texts)?, n))
}
