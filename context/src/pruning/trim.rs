//! The two rewrites pruning applies to an old tool result: the soft trim (head, tail and a
//! notice; images replaced by a marker) and the hard clear (a placeholder).
//!
//! Lengths here are JavaScript string lengths (UTF-16 code units), because they are what the
//! user configured (`headChars`, `maxChars`) and what the notice reports, and OpenClaw measures
//! them with `length`. Where a cut would fall inside a surrogate pair, the pair is left out
//! whole: JavaScript would split it into a lone surrogate, which is not valid text.

use rampart_message::{AgentMessage, Content, ContentBlock, ToolResultMessage};

use super::settings::SoftTrim;

/// What an image in a trimmed or flattened tool result becomes.
///
/// Why a marker rather than nothing: the model should know there was an image it can no
/// longer see, rather than read the surrounding text as complete.
pub const PRUNED_IMAGE_MARKER: &str = "[image removed during context pruning]";

/// What separates the head and the tail of a trimmed result.
const ELLIPSIS: &str = "\n...\n";

/// The notice at the end of a trimmed result, telling the model how much it does not see.
/// The figures are the configured head and tail and the length of the whole text.
pub fn format_trim_notice(head_chars: u64, tail_chars: u64, total_chars: u64) -> String {
    format!(
        "[Tool result trimmed: kept first {head_chars} chars and last {tail_chars} chars of {total_chars} chars.]"
    )
}

/// How a soft trim changed a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SoftTrimKind {
    /// Cut to head, tail and notice.
    Trimmed,
    /// Short enough to keep whole, but its images were replaced by [`PRUNED_IMAGE_MARKER`].
    ImagesRemoved,
}

/// The soft trim of one tool result: the new text and what was done, or `None` when the
/// result stays as it is (short enough and without images).
///
/// The result's text blocks, with each image as [`PRUNED_IMAGE_MARKER`], are joined with `\n`.
/// If that is longer than `max_chars` and the head and tail do not cover it, the result becomes
/// `head + "\n...\n" + tail + "\n\n" + notice`. Otherwise a result with images becomes the
/// joined text. Blocks that are neither text nor image do not survive a rewrite, as in OpenClaw.
pub(crate) fn soft_trim(
    result: &ToolResultMessage,
    settings: &SoftTrim,
) -> Option<(String, SoftTrimKind)> {
    let (parts, has_images) = parts(&result.content);
    let separators = (parts.len() as u64).saturating_sub(1);
    let keep_whole = || has_images.then(|| (parts.join("\n"), SoftTrimKind::ImagesRemoved));
    // A string has no more UTF-16 units than UTF-8 bytes: most results are shown short enough
    // without counting them.
    let bytes = parts.iter().map(|p| p.len() as u64).sum::<u64>() + separators;
    if bytes <= settings.max_chars {
        return keep_whole();
    }
    let lengths: Vec<u64> = parts.iter().map(|p| utf16_len(p)).collect();
    let total = lengths.iter().sum::<u64>() + separators;
    let head = settings.head_chars;
    let tail = settings.tail_chars;
    if total <= settings.max_chars || head.saturating_add(tail) >= total {
        return keep_whole();
    }
    let mut text = take_head(&parts, &lengths, head);
    text.push_str(ELLIPSIS);
    text.push_str(&take_tail(&parts, &lengths, tail));
    text.push_str("\n\n");
    text.push_str(&format_trim_notice(head, tail, total));
    Some((text, SoftTrimKind::Trimmed))
}

/// Whether `result` already is what clearing it with `placeholder` would give, so that
/// clearing it again keeps the same message (and the same `Arc`).
pub(crate) fn is_cleared(result: &ToolResultMessage, placeholder: &str) -> bool {
    match &result.content {
        Content::Blocks(blocks) => matches!(
            blocks.as_slice(),
            [ContentBlock::Text(t)] if t.text == placeholder && t.text_signature.is_none() && t.extra.is_empty()
        ),
        Content::Text(_) => false,
    }
}

/// `result` with its content replaced by one text block, every other field kept (details
/// included: they never reach the model, and the host may still want them).
pub(crate) fn with_text(result: &ToolResultMessage, text: String) -> AgentMessage {
    AgentMessage::ToolResult(ToolResultMessage {
        tool_call_id: result.tool_call_id.clone(),
        tool_name: result.tool_name.clone(),
        content: Content::text_block(text),
        details: result.details.clone(),
        is_error: result.is_error,
        timestamp: result.timestamp,
        extra: result.extra.clone(),
    })
}

/// The pieces of text a trim works on, and whether any image was among them.
fn parts(content: &Content) -> (Vec<&str>, bool) {
    match content {
        Content::Text(text) => (vec![text.as_str()], false),
        Content::Blocks(blocks) => {
            let mut has_images = false;
            let parts = blocks
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Text(t) => Some(t.text.as_str()),
                    ContentBlock::Image(_) => {
                        has_images = true;
                        Some(PRUNED_IMAGE_MARKER)
                    }
                    _ => None,
                })
                .collect();
            (parts, has_images)
        }
    }
}

/// The first `units` UTF-16 units of the parts joined with `\n`.
fn take_head(parts: &[&str], lengths: &[u64], units: u64) -> String {
    let mut out = String::new();
    let mut remaining = units;
    for (i, (part, &len)) in parts.iter().zip(lengths).enumerate() {
        if remaining == 0 {
            break;
        }
        if i > 0 {
            out.push('\n');
            remaining -= 1;
            if remaining == 0 {
                break;
            }
        }
        if len <= remaining {
            out.push_str(part);
            remaining -= len;
        } else {
            out.push_str(utf16_prefix(part, remaining));
            remaining = 0;
        }
    }
    out
}

/// The last `units` UTF-16 units of the parts joined with `\n`.
fn take_tail(parts: &[&str], lengths: &[u64], units: u64) -> String {
    let mut pieces: Vec<&str> = Vec::new();
    let mut remaining = units;
    for i in (0..parts.len()).rev() {
        if remaining == 0 {
            break;
        }
        let len = lengths[i];
        if len <= remaining {
            pieces.push(parts[i]);
            remaining -= len;
        } else {
            pieces.push(utf16_suffix(parts[i], remaining));
            break;
        }
        if remaining > 0 && i > 0 {
            pieces.push("\n");
            remaining -= 1;
        }
    }
    pieces.iter().rev().copied().collect()
}

/// JavaScript's `text.length`: one unit per character, two for characters outside the Basic
/// Multilingual Plane. Counted on bytes without decoding: every byte but a continuation byte
/// starts a character, and a four-byte lead starts a surrogate pair. A chunk of 128 bytes sums
/// in a `u8`, which the compiler vectorises 16 or 32 bytes wide: valid UTF-8 has no more units
/// than bytes, so a chunk sums to at most 129 (a split sequence's lead can add 2 at its end).
/// Results with a few CJK characters in them would otherwise be decoded character by
/// character, which was most of a cold pruning call.
pub(crate) fn utf16_len(text: &str) -> u64 {
    text.as_bytes()
        .chunks(128)
        .map(|chunk| {
            let units = chunk.iter().fold(0u8, |sum, &b| {
                // `b as i8 >= -64`: not a continuation byte (0x80–0xBF).
                sum.wrapping_add(u8::from(b as i8 >= -64) + u8::from(b >= 0xF0))
            });
            u64::from(units)
        })
        .sum()
}

/// The longest prefix of `text` of at most `units` UTF-16 units.
fn utf16_prefix(text: &str, units: u64) -> &str {
    if text.is_ascii() {
        return &text[..text.len().min(usize::try_from(units).unwrap_or(usize::MAX))];
    }
    let mut used = 0u64;
    for (at, c) in text.char_indices() {
        used += c.len_utf16() as u64;
        if used > units {
            return &text[..at];
        }
    }
    text
}

/// The longest suffix of `text` of at most `units` UTF-16 units.
fn utf16_suffix(text: &str, units: u64) -> &str {
    if text.is_ascii() {
        let keep = text.len().min(usize::try_from(units).unwrap_or(usize::MAX));
        return &text[text.len() - keep..];
    }
    let mut used = 0u64;
    for (at, c) in text.char_indices().rev() {
        used += c.len_utf16() as u64;
        if used > units {
            return &text[at + c.len_utf8()..];
        }
    }
    text
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::pruning::test_support::*;

    fn result(message: AgentMessage) -> ToolResultMessage {
        match message {
            AgentMessage::ToolResult(r) => r,
            other => panic!("not a tool result: {other:?}"),
        }
    }

    fn trim(max: u64, head: u64, tail: u64) -> SoftTrim {
        SoftTrim {
            max_chars: max,
            head_chars: head,
            tail_chars: tail,
        }
    }

    #[test]
    fn trims_across_block_boundaries() {
        // The reference case: blocks "AAAAA", "BBBBB", maxChars 5, head 7, tail 3.
        let r = result(tool_blocks(
            "t1",
            "exec",
            vec![text_block("AAAAA"), text_block("BBBBB")],
        ));
        let (text, kind) = soft_trim(&r, &trim(5, 7, 3)).unwrap();
        assert_eq!(kind, SoftTrimKind::Trimmed);
        assert_eq!(
            text,
            "AAAAA\nB\n...\nBBB\n\n[Tool result trimmed: kept first 7 chars and last 3 chars of 11 chars.]"
        );
    }

    #[test]
    fn tail_takes_separators_between_whole_parts() {
        let r = result(tool_blocks(
            "t",
            "x",
            vec![text_block("abcdef"), text_block("gh"), text_block("ij")],
        ));
        // Joined: "abcdef\ngh\nij" (12 units). A tail of 7 is "f\ngh\nij".
        let (text, _) = soft_trim(&r, &trim(5, 2, 7)).unwrap();
        assert!(text.starts_with("ab\n...\nf\ngh\nij\n\n"), "{text}");
        assert!(text.ends_with("of 12 chars.]"), "{text}");
    }

    #[test]
    fn short_or_covered_results_stay_unless_they_have_images() {
        let r = result(tool("t", "x", "0123456789"));
        assert_eq!(soft_trim(&r, &trim(10, 1, 1)), None);
        assert_eq!(soft_trim(&r, &trim(5, 5, 5)), None);
        let with_image = result(tool_blocks("t", "x", vec![text_block("visible"), image()]));
        assert_eq!(
            soft_trim(&with_image, &trim(4_000, 1_500, 1_500)),
            Some((
                "visible\n[image removed during context pruning]".to_owned(),
                SoftTrimKind::ImagesRemoved
            ))
        );
        let image_only = result(tool_blocks("t", "x", vec![image()]));
        assert_eq!(
            soft_trim(&image_only, &trim(5_000, 2_000, 2_000))
                .unwrap()
                .0,
            PRUNED_IMAGE_MARKER
        );
    }

    #[test]
    fn images_inside_a_trim_become_markers() {
        let r = result(tool_blocks(
            "t",
            "read",
            vec![
                text_block(&"A".repeat(120)),
                image(),
                text_block(&"B".repeat(120)),
            ],
        ));
        let (text, kind) = soft_trim(&r, &trim(200, 170, 30)).unwrap();
        assert_eq!(kind, SoftTrimKind::Trimmed);
        assert!(text.contains(PRUNED_IMAGE_MARKER), "{text}");
        assert!(text.contains("[Tool result trimmed: kept first 170 chars and last 30 chars"));
    }

    #[test]
    fn string_content_is_trimmed_too() {
        let r: ToolResultMessage = serde_json::from_value(serde_json::json!({
            "toolCallId": "t", "toolName": "x", "content": "abcdefghij".repeat(1000),
            "isError": false, "timestamp": 1
        }))
        .unwrap();
        let (text, _) = soft_trim(&r, &trim(10, 6, 6)).unwrap();
        assert!(text.starts_with("abcdef\n...\nefghij\n\n"), "{text}");
    }

    #[test]
    fn cuts_never_split_a_character() {
        // "😀" is two UTF-16 units; "é" one; "上" one.
        assert_eq!(utf16_len("a😀é上"), 5);
        assert_eq!(utf16_prefix("a😀é上", 2), "a");
        assert_eq!(utf16_prefix("a😀é上", 3), "a😀");
        assert_eq!(utf16_suffix("a😀é上", 3), "é上");
        assert_eq!(utf16_suffix("😀é上", 3), "é上");
        assert_eq!(utf16_suffix("😀é上", 4), "😀é上");
        assert_eq!(utf16_prefix("abc", 10), "abc");
        assert_eq!(utf16_suffix("abc", 2), "bc");
        let r = result(tool("t", "x", &"上".repeat(10)));
        let (text, _) = soft_trim(&r, &trim(5, 2, 3)).unwrap();
        assert!(text.starts_with("上上\n...\n上上上\n\n"), "{text}");
        assert!(text.ends_with("of 10 chars.]"), "{text}");
    }

    proptest::proptest! {
        #[test]
        fn utf16_len_is_javascripts_length(text in proptest::prelude::any::<String>()) {
            proptest::prop_assert_eq!(utf16_len(&text), text.encode_utf16().count() as u64);
        }
    }

    #[test]
    fn cleared_detection_is_exact() {
        assert!(is_cleared(
            &result(tool("t", "x", "[cleared]")),
            "[cleared]"
        ));
        assert!(!is_cleared(
            &result(tool("t", "x", "[cleared] ")),
            "[cleared]"
        ));
        assert!(!is_cleared(
            &result(tool_blocks(
                "t",
                "x",
                vec![text_block("[cleared]"), image()]
            )),
            "[cleared]"
        ));
    }

    #[test]
    fn rewrites_keep_every_other_field() {
        let r = result(tool("t9", "exec", "abc"));
        let AgentMessage::ToolResult(out) = with_text(&r, "new".to_owned()) else {
            panic!("not a tool result");
        };
        assert_eq!(out.content, Content::text_block("new"));
        assert_eq!(
            ToolResultMessage {
                content: r.content.clone(),
                ..out
            },
            r
        );
    }
}
