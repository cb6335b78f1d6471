//! Content too large for one session line goes to the blob store before the line is written.
//!
//! The session loader refuses a line over its limit (64 MiB by default), so a writer that
//! wrote one would lose the entry on the next load and cut the branch there (issue 12, defect
//! 6). Every path that writes entries (a turn's appends, an import) passes each message through
//! [`spill_oversized`] first: the largest text blocks are stored whole in the blob store (the
//! blob written and synced before the line that names it) and replaced by their head and tail
//! with a notice naming the blob, until the line fits. The session crate refuses, as a last
//! guard, any line still over the limit.

use std::io::Write;

use rampart_context::guards::tool_result::{TruncateOptions, truncate_tool_result_text};
use rampart_message::{AgentMessage, Content, ContentBlock};

use crate::blobs::{BlobError, BlobStore};

/// Characters of a spilled block kept in the line, head and tail together.
pub const SPILL_KEEP_CHARS: usize = 64 * 1024;

/// What [`spill_oversized`] did to one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spill {
    /// The blobs written, one per spilled block.
    pub blobs: Vec<String>,
    /// The line's length in bytes before.
    pub line_bytes_before: usize,
}

/// `message` with its largest text blocks moved to `blobs` until its JSON is at most
/// `max_line_bytes` long (with room for the entry around it), and what was moved; `None` when it
/// already fits. A message that does not fit even then is returned as far as it got; the
/// session's writer refuses it with an error naming the size.
pub fn spill_oversized(
    message: &AgentMessage,
    blobs: &BlobStore,
    max_line_bytes: usize,
) -> Result<Option<(AgentMessage, Spill)>, BlobError> {
    // The entry around the message (type, ids, timestamp) takes a few hundred bytes.
    let budget = max_line_bytes.saturating_sub(4096);
    // Cheap exit: JSON escaping at most sextuples a byte (`\u0000`).
    if raw_bytes(message).saturating_mul(6) <= budget {
        return Ok(None);
    }
    let before = json_len(message);
    if before <= budget {
        return Ok(None);
    }
    let mut spilled = message.clone();
    let mut written = Vec::new();
    let mut size = before;
    while size > budget {
        let Some(text) = largest_text(&mut spilled).filter(|t| t.len() > SPILL_KEEP_CHARS * 4)
        else {
            break;
        };
        let reference = blobs.put(text.as_bytes())?;
        let notice_ref = format!("blob {reference}");
        let cut = truncate_tool_result_text(
            text,
            SPILL_KEEP_CHARS,
            &TruncateOptions {
                min_keep_chars: SPILL_KEEP_CHARS / 2,
                full_output_ref: Some(&notice_ref),
            },
        )
        .text
        .into_owned();
        *text = cut;
        written.push(reference);
        size = json_len(&spilled);
    }
    if written.is_empty() {
        return Ok(None);
    }
    tracing::info!(
        line_bytes_before = before,
        line_bytes_after = size,
        blobs = written.len(),
        "content too large for one session line was moved to the blob store"
    );
    Ok(Some((
        spilled,
        Spill {
            blobs: written,
            line_bytes_before: before,
        },
    )))
}

/// Bytes of the message's text, thinking, images and tool-call arguments: a lower bound of
/// its JSON length, and within a factor six of it.
fn raw_bytes(message: &AgentMessage) -> usize {
    let block = |b: &ContentBlock| match b {
        ContentBlock::Text(t) => t.text.len(),
        ContentBlock::Thinking(t) => t.thinking.len(),
        ContentBlock::Image(i) => i.data.len(),
        ContentBlock::ToolCall(c) => value_raw_bytes(&c.arguments),
        ContentBlock::Other(o) => map_raw_bytes(o),
    };
    let content = |c: &Content| match c {
        Content::Text(t) => t.len(),
        Content::Blocks(blocks) => blocks.iter().map(block).sum(),
    };
    match message {
        AgentMessage::User(u) => content(&u.content),
        AgentMessage::Assistant(a) => a.content.iter().map(block).sum(),
        AgentMessage::ToolResult(r) => content(&r.content),
        other => json_len(other),
    }
}

/// A size of `value` whose six times is never below its JSON length, found without writing it:
/// its strings and keys unescaped with their quotes (escaping at most sextuples a byte), its
/// brackets and separators, four bytes a scalar (a number's JSON is at most 24 bytes).
/// Serialising every tool call's arguments only to measure them was about 3 % of the
/// instructions of a new conversation's first request in serve.
fn value_raw_bytes(value: &serde_json::Value) -> usize {
    use serde_json::Value;
    match value {
        Value::Null | Value::Bool(_) | Value::Number(_) => 4,
        Value::String(s) => s.len() + 2,
        Value::Array(items) => {
            1 + items
                .iter()
                .map(|v| value_raw_bytes(v) + 1)
                .sum::<usize>()
                .max(1)
        }
        Value::Object(map) => map_raw_bytes(map),
    }
}

/// [`value_raw_bytes`] of an object: each key with its quotes, colon and separator, each value,
/// the braces.
fn map_raw_bytes(map: &serde_json::Map<String, serde_json::Value>) -> usize {
    1 + map
        .iter()
        .map(|(key, value)| key.len() + 4 + value_raw_bytes(value))
        .sum::<usize>()
        .max(1)
}

/// The message's JSON length, counted without building the string.
fn json_len(message: &AgentMessage) -> usize {
    struct Count(usize);
    impl Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = serde_json::to_writer(&mut count, message);
    count.0
}

/// The largest text the message holds (a text block, or a plain-string content).
fn largest_text(message: &mut AgentMessage) -> Option<&mut String> {
    fn from_blocks(blocks: &mut [ContentBlock]) -> Option<&mut String> {
        blocks
            .iter_mut()
            .filter_map(|b| match b {
                ContentBlock::Text(t) => Some(&mut t.text),
                // Thinking is replayed to the provider with its signature: never shortened.
                _ => None,
            })
            .max_by_key(|t| t.len())
    }
    fn from_content(content: &mut Content) -> Option<&mut String> {
        match content {
            Content::Text(t) => Some(t),
            Content::Blocks(blocks) => from_blocks(blocks),
        }
    }
    match message {
        AgentMessage::User(u) => from_content(&mut u.content),
        AgentMessage::Assistant(a) => from_blocks(&mut a.content),
        AgentMessage::ToolResult(r) => from_content(&mut r.content),
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#[path = "spill_tests.rs"]
mod tests;
