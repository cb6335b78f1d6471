//! Large `<file>` blocks in user messages (reference §1.5, §8.18): a pasted or attached file
//! above `largeFileThresholdTokens` is stored aside as a `file_…` row and the model is sent a
//! one-line reference with a structural outline instead of the bytes.
//!
//! Why: a 30k-token CSV pasted once would otherwise ride along in every request until a sweep
//! summarises it, and most of a window spent on a file the model has already read is the
//! failure this engine exists to prevent. Nothing is lost: the session keeps the message as
//! the user sent it (the replacement lives only in the requests this engine assembles), the
//! store keeps the whole file, and `lcm_describe` reads it back a page at a time.

use rampart_engine_api::message::{Content, ContentBlock};
use rampart_engine_api::{AgentMessage, SharedMessage};

use crate::text::{cut_to_tokens, hash_hex, text_tokens};

/// One `<file>` block taken out of a user message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileBlock {
    /// `file_` + 16 hex digits, derived from the conversation, the name and the bytes, so
    /// the same file in the same conversation always gets the same id.
    pub id: String,
    /// The `name` attribute (`file` when it has none).
    pub name: String,
    /// The `mime` attribute, else guessed from the name's extension.
    pub mime: String,
    /// The block's content, as the user sent it.
    pub content: String,
}

/// The user message with every `<file>` block larger than `threshold_tokens` replaced by its
/// reference and outline, and the blocks taken out; `None` when there is no such block (the
/// message is sent as it is).
pub fn referenced(
    message: &AgentMessage,
    conversation: i64,
    threshold_tokens: u64,
) -> Option<(SharedMessage, Vec<FileBlock>)> {
    let AgentMessage::User(user) = message else {
        return None;
    };
    // Every message passes here at ingest and when a conversation is loaded: one scan for the
    // tag, and nothing copied, unless there is a file.
    let tagged = match &user.content {
        Content::Text(text) => text.contains("<file"),
        Content::Blocks(parts) => parts
            .iter()
            .any(|p| matches!(p, ContentBlock::Text(t) if t.text.contains("<file"))),
    };
    if !tagged {
        return None;
    }
    let mut blocks = Vec::new();
    let content = match &user.content {
        Content::Text(text) => {
            Content::Text(replace(text, conversation, threshold_tokens, &mut blocks))
        }
        Content::Blocks(parts) => Content::Blocks(
            parts
                .iter()
                .map(|part| match part {
                    ContentBlock::Text(t) => {
                        let mut t = t.clone();
                        t.text = replace(&t.text, conversation, threshold_tokens, &mut blocks);
                        ContentBlock::Text(t)
                    }
                    other => other.clone(),
                })
                .collect(),
        ),
    };
    if blocks.is_empty() {
        return None;
    }
    let mut user = user.clone();
    user.content = content;
    Some((std::sync::Arc::new(AgentMessage::User(user)), blocks))
}

/// `text` with its large `<file …>…</file>` blocks replaced; the blocks go to `out`.
fn replace(text: &str, conversation: i64, threshold: u64, out: &mut Vec<FileBlock>) -> String {
    if !text.contains("<file") {
        return text.to_string();
    }
    let mut result = String::with_capacity(text.len().min(4096));
    let mut rest = text;
    while let Some(open) = find_open_tag(rest) {
        let Some(tag_end) = rest[open..].find('>').map(|i| open + i) else {
            break;
        };
        let Some(close) = rest[tag_end + 1..].find("</file>").map(|i| tag_end + 1 + i) else {
            break;
        };
        let attributes = &rest[open + "<file".len()..tag_end];
        let content = rest[tag_end + 1..close].trim_matches('\n');
        let end = close + "</file>".len();
        if text_tokens(content) <= threshold {
            result.push_str(&rest[..end]);
        } else {
            let name = attribute(attributes, "name").unwrap_or("file").to_string();
            let mime = attribute(attributes, "mime")
                .map(str::to_string)
                .unwrap_or_else(|| guess_mime(&name).to_string());
            let id = format!(
                "file_{}",
                hash_hex(&[
                    &conversation.to_le_bytes(),
                    name.as_bytes(),
                    content.as_bytes()
                ])
            );
            result.push_str(&rest[..open]);
            result.push_str(&format!(
                "[LCM File: {id} | {name} | {mime} | {} bytes]\n{}\n(The file is stored aside: \
                 lcm_describe with id {id} reads it, 32 KiB a page.)",
                content.len(),
                outline(content, &mime)
            ));
            out.push(FileBlock {
                id,
                name,
                mime,
                content: content.to_string(),
            });
        }
        rest = &rest[end..];
    }
    result.push_str(rest);
    result
}

/// The start of the next `<file` tag (followed by a space or `>`, so `<filename>` is not one).
fn find_open_tag(text: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = text[from..].find("<file").map(|i| from + i) {
        match text[i + "<file".len()..].chars().next() {
            Some(c) if c == '>' || c.is_whitespace() => return Some(i),
            _ => from = i + 1,
        }
    }
    None
}

/// The value of `key="…"` (or `key='…'`) in a tag's attributes.
fn attribute<'a>(attributes: &'a str, key: &str) -> Option<&'a str> {
    let mut from = 0;
    while let Some(i) = attributes[from..].find(key).map(|i| from + i) {
        let before_ok = i == 0 || attributes[..i].ends_with(char::is_whitespace);
        let after = &attributes[i + key.len()..];
        if before_ok && let Some(value) = after.strip_prefix('=') {
            let quote = value.chars().next()?;
            if quote == '"' || quote == '\'' {
                let value = &value[1..];
                return value.find(quote).map(|end| &value[..end]);
            }
        }
        from = i + key.len();
    }
    None
}

fn guess_mime(name: &str) -> &'static str {
    match name
        .rsplit('.')
        .next()
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("csv") => "text/csv",
        Some("tsv") => "text/tab-separated-values",
        Some("json") => "application/json",
        Some("yaml" | "yml") => "application/yaml",
        Some("xml") => "application/xml",
        Some("md") => "text/markdown",
        _ => "text/plain",
    }
}

/// A deterministic outline of a file: its size in lines, then for tables the header and the
/// column count, for JSON the top-level keys, and for everything the first and last 500
/// characters (the fallback of the reference when no model is asked).
pub fn outline(content: &str, mime: &str) -> String {
    let lines = content.lines().count();
    let mut out = format!("Outline: {lines} lines.");
    let separator = match mime {
        "text/csv" => Some(','),
        "text/tab-separated-values" => Some('\t'),
        _ => None,
    };
    if let Some(sep) = separator {
        let header = content.lines().next().unwrap_or("");
        out.push_str(&format!(
            " Table of {} columns and {} rows; header: {}",
            header.split(sep).count(),
            lines.saturating_sub(1),
            cut_to_tokens(header, 200)
        ));
    } else if mime == "application/json"
        && let Ok(serde_json::Value::Object(map)) = serde_json::from_str(content)
    {
        let keys: Vec<&str> = map.keys().map(String::as_str).take(40).collect();
        out.push_str(&format!(" Top-level keys: {}.", keys.join(", ")));
    }
    let head = cut_to_tokens(content, 125);
    let mut tail_start = content.len().saturating_sub(500);
    while !content.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    out.push_str(&format!(
        "\nBegins: {head}\n…\nEnds: {}",
        &content[tail_start..]
    ));
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "files_tests.rs"]
mod tests;
