//! Item templates: how a Responses item Rampart models (a `message`, a `function_call`, a
//! `function_call_output`) was written, kept with the message that holds its content.
//!
//! Why: pi's messages hold what such an item *means* (a text, a call's name and arguments, an
//! output), not how the client or the model wrote it: the item's `id`, a call's `status`, a
//! text part's `annotations`, a field a newer API added. Codex sends all of those back on
//! every request, and a proxy that strips them is not transparent (README, "Differences a
//! client sees through serve"). So each such item is also kept as its *template*: the item as
//! it came, with the values the message models replaced by `null` (texts, a call's `call_id`,
//! `name` and `arguments`, an output) so that nothing is stored twice. The Responses writer
//! ([`super::items`]) fills the template with the message's values as they are now, so an item
//! the engine left alone goes out as it came (same keys, same order) and one it changed (a
//! capped output) goes out with the new value in the client's form.
//!
//! Where a template lives: a message item's on the first text block it became (one text block
//! per text part), a call's on its tool-call block, an output's on its tool-result message,
//! each in `extra` under [`TEMPLATE_KEY`]. Only shapes the filler can rebuild exactly get one
//! (a message whose parts are all texts, an output that is a string); any other item is written
//! in Rampart's own form, as before.

use rampart_message::{AgentMessage, Content, ContentBlock, Extra, ToolCall};
use serde_json::{Map, Value};

/// The `extra` key a template is kept under.
pub const TEMPLATE_KEY: &str = "rampartResponsesItem";

/// The content part types that carry a message's text.
const TEXT_PARTS: &[&str] = &["input_text", "output_text"];

/// The template of a `message` item whose content is a list of text parts (each part's
/// `text` nulled), or `None` for any other shape.
pub fn message_template(item: &Value) -> Option<Value> {
    let mut template = item.as_object()?.clone();
    if template.get("type").and_then(Value::as_str) != Some("message") {
        return None;
    }
    let parts = template.get_mut("content")?.as_array_mut()?;
    if parts.is_empty() {
        return None;
    }
    for part in parts.iter_mut() {
        let kind = part.get("type").and_then(Value::as_str)?;
        if !TEXT_PARTS.contains(&kind) || !part.get("text").is_some_and(Value::is_string) {
            return None;
        }
        *part.get_mut("text")? = Value::Null;
    }
    Some(Value::Object(template))
}

/// How many text parts a message template holds (the text blocks it fills).
pub fn message_parts(template: &Value) -> Option<usize> {
    (template.get("type").and_then(Value::as_str) == Some("message"))
        .then(|| template.get("content").and_then(Value::as_array))
        .flatten()
        .map(Vec::len)
        .filter(|n| *n > 0)
}

/// A message template filled with `texts` (one per part), when `role` is its role and the
/// counts agree.
pub fn fill_message(template: &Value, role: &str, texts: &[&str]) -> Option<Value> {
    if template.get("role").and_then(Value::as_str).unwrap_or(role) != role
        || message_parts(template)? != texts.len()
    {
        return None;
    }
    let mut item = template.clone();
    let parts = item.get_mut("content")?.as_array_mut()?;
    for (part, text) in parts.iter_mut().zip(texts) {
        *part.get_mut("text")? = Value::String((*text).to_owned());
    }
    Some(item)
}

/// The template of a `function_call` item.
pub fn call_template(item: &Value) -> Option<Value> {
    nulled(item, "function_call", &["call_id", "name", "arguments"])
}

/// A call template filled with `call` (its arguments written as `arguments`).
pub fn fill_call(template: &Value, call: &ToolCall, arguments: String) -> Option<Value> {
    filled(
        template,
        "function_call",
        [
            ("call_id", Value::String(call.id.clone())),
            ("name", Value::String(call.name.clone())),
            ("arguments", Value::String(arguments)),
        ],
    )
}

/// The template of a `function_call_output` item whose output is a string.
pub fn output_template(item: &Value) -> Option<Value> {
    item.get("output")
        .is_some_and(Value::is_string)
        .then(|| nulled(item, "function_call_output", &["call_id", "output"]))
        .flatten()
}

/// An output template filled with the result's call id and text.
pub fn fill_output(template: &Value, call_id: &str, output: String) -> Option<Value> {
    filled(
        template,
        "function_call_output",
        [
            ("call_id", Value::String(call_id.to_owned())),
            ("output", Value::String(output)),
        ],
    )
}

/// The template `extra` keeps, if any.
pub fn template_of(extra: &Extra) -> Option<&Value> {
    extra.get(TEMPLATE_KEY).filter(|t| t.is_object())
}

/// The template a text block keeps, if any.
pub fn block_template(block: &ContentBlock) -> Option<&Value> {
    match block {
        ContentBlock::Text(t) => template_of(&t.extra),
        ContentBlock::ToolCall(c) => template_of(&c.extra),
        _ => None,
    }
}

/// Removes every template from `message` (its own and its text blocks' and tool calls'): what a
/// client of another wire sent under [`TEMPLATE_KEY`] is not a Responses item, and must not
/// reach a Responses upstream as one. Returns how many were removed.
pub fn forget(message: &mut AgentMessage) -> usize {
    fn blocks(content: &mut Content) -> &mut [ContentBlock] {
        match content {
            Content::Blocks(blocks) => blocks,
            Content::Text(_) => &mut [],
        }
    }
    let (extra, blocks) = match message {
        AgentMessage::User(m) => (&mut m.extra, blocks(&mut m.content)),
        AgentMessage::Assistant(m) => (&mut m.extra, m.content.as_mut_slice()),
        AgentMessage::ToolResult(m) => (&mut m.extra, blocks(&mut m.content)),
        _ => return 0,
    };
    let mut removed = usize::from(extra.remove(TEMPLATE_KEY).is_some());
    for block in blocks {
        let extra = match block {
            ContentBlock::Text(t) => &mut t.extra,
            ContentBlock::ToolCall(c) => &mut c.extra,
            _ => continue,
        };
        removed += usize::from(extra.remove(TEMPLATE_KEY).is_some());
    }
    removed
}

/// `item` (of type `kind`) with `keys` nulled, keeping every key's place.
fn nulled(item: &Value, kind: &str, keys: &[&str]) -> Option<Value> {
    let mut template: Map<String, Value> = item.as_object()?.clone();
    if template.get("type").and_then(Value::as_str) != Some(kind) {
        return None;
    }
    for key in keys {
        if let Some(value) = template.get_mut(*key) {
            *value = Value::Null;
        }
    }
    Some(Value::Object(template))
}

/// `template` (of type `kind`) with `values` written in: in their places when the template has
/// them, else after its other keys.
fn filled<const N: usize>(
    template: &Value,
    kind: &str,
    values: [(&str, Value); N],
) -> Option<Value> {
    let mut item = template.as_object()?.clone();
    if item.get("type").and_then(Value::as_str) != Some(kind) {
        return None;
    }
    for (key, value) in values {
        item.insert(key.to_owned(), value);
    }
    Some(Value::Object(item))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "template_tests.rs"]
mod tests;
