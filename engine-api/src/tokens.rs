//! Token estimates an engine can make on its own, and exact counts it can ask the host for.
//!
//! Why here: every engine needs a token figure to fit a budget, but exact BPE counting needs
//! vocabularies of tens of megabytes. Linking them into every engine library made a
//! sliding-window engine 50 MB. So this crate carries only the estimate (pi's
//! `ceil(chars / 4)`, with OpenClaw's CJK weighting), which is free of any vocabulary, and an
//! engine that needs exact figures asks the host ([`crate::Host::count_tokens`]), which counts
//! with the model's tokenizer. The defence library (`rampart-context`) builds its counters on
//! the same definitions, so a budget means the same thing on both sides of the ABI.
//!
//! [`visit_parts`] decides which text of a message reaches the model in every mode, so an
//! estimate and an exact count differ only in how a piece of text is turned into tokens, never
//! in which text is counted.

use serde::{Deserialize, Serialize};

use crate::message::{AgentMessage, Content, ContentBlock};

/// Characters per token in the estimate. Why 4: the long-standing rule of thumb for English
/// text with BPE tokenizers, used by pi and OpenClaw alike.
pub const CHARS_PER_TOKEN: u64 = 4;

/// Estimate characters one image is worth (pi's constant for tool results and custom
/// messages). Why fixed: an image has no text, and its real cost depends on its size and the
/// provider; 4,800 characters (1,200 tokens) is in the range providers charge for a typical
/// screenshot.
pub const IMAGE_CHARS: u64 = 4_800;

/// The estimated tokens of one message: `ceil(chars / 4)` of [`message_chars`], rounded per
/// message as pi does.
pub fn estimate_message_tokens(message: &AgentMessage) -> u64 {
    message_chars(message).div_ceil(CHARS_PER_TOKEN)
}

/// The estimate characters of `message`: the CJK-weighted characters of the parts that count
/// ([`visit_parts`]), plus [`IMAGE_CHARS`] per image.
pub fn message_chars(message: &AgentMessage) -> u64 {
    let mut chars = 0u64;
    visit_parts(message, &mut |part| {
        chars += match part {
            Part::Text(text) => estimate_string_chars(text),
            Part::Owned(text) => estimate_string_chars(&text),
            Part::Image => IMAGE_CHARS,
        }
    });
    chars
}

/// Parameters of the `tokens.count` host service: count these messages with a tokenizer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct TokenCountRequest {
    /// The tokenizer: `estimate`, `o200k_base`, `cl100k_base`, or a model name
    /// (`provider/model` or a bare id) whose tokenizer the host knows. Empty: the host's
    /// current chat model.
    pub tokenizer: String,
    /// The messages to count, each on its own.
    pub messages: Vec<AgentMessage>,
}

/// Answer of `tokens.count`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct TokenCount {
    /// One figure per requested message, in order.
    pub counts: Vec<u64>,
    /// Whether the figures are exact BPE counts (false: the host estimated too).
    pub exact: bool,
    /// The tokenizer the host counted with (`o200k_base`, `estimate`, …).
    pub tokenizer: String,
}

/// The weight of one CJK character, in estimate characters. Why 4: tokenizers spend about one
/// token per CJK character but one per four Latin characters, so counting each CJK character
/// as four keeps `chars / 4` honest for every script (OpenClaw's `CHARS_PER_TOKEN_ESTIMATE`).
const CJK_WEIGHT: u64 = 4;

/// Bytes of a `u64` word with the high bit set: a word is all ASCII when none of these is set.
const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

/// Whether `c` is in one of the ranges OpenClaw's `estimateStringChars` weights as a CJK
/// character (`src/utils/cjk-chars.ts`, April 2026):
///
/// | range | what it holds |
/// |---|---|
/// | U+2E80–U+9FFF | CJK radicals, Kangxi, CJK symbols and punctuation, Hiragana, Katakana, Bopomofo, Hangul compatibility jamo, CJK strokes, enclosed CJK, Extension A, CJK Unified Ideographs |
/// | U+A000–U+A4FF | Yi syllables and radicals, Lisu |
/// | U+AC00–U+D7AF | Hangul syllables |
/// | U+F900–U+FAFF | CJK compatibility ideographs |
/// | U+FF01–U+FF60 | fullwidth ASCII forms and punctuation |
/// | U+FFE0–U+FFE6 | fullwidth currency and symbol signs |
/// | U+20000–U+2FA1F | CJK Extensions B–F and the compatibility supplement |
///
/// Why these and not a narrower "ideographs only" set: they are the characters a tokenizer
/// spends about one token on, and matching OpenClaw keeps our budgets comparable with its own.
/// Hangul Jamo (U+1100–U+11FF) and halfwidth katakana (U+FF61–U+FF9F) are outside, as there.
pub fn is_cjk(c: char) -> bool {
    is_cjk_code_point(c as u32)
}

#[inline]
fn is_cjk_code_point(cp: u32) -> bool {
    matches!(
        cp,
        0x2E80..=0x9FFF
            | 0xA000..=0xA4FF
            | 0xAC00..=0xD7AF
            | 0xF900..=0xFAFF
            | 0xFF01..=0xFF60
            | 0xFFE0..=0xFFE6
            | 0x2_0000..=0x2_FA1F
    )
}

/// The estimate characters of `text`: what JavaScript's `text.length` gives, except that each
/// CJK character ([`is_cjk`]) counts 4. This is OpenClaw's `estimateStringChars`, the
/// CJK-aware count that pi's plain `length` lacks.
///
/// Why UTF-16 units rather than Unicode scalars: the reference implementations count with
/// `length`, so an emoji or another character outside the Basic Multilingual Plane counts 2,
/// as it does there. A CJK character counts 4 on either plane.
///
/// This is the hot path of the estimate, so it works on bytes: ASCII runs are skipped eight
/// bytes at a time, and only multi-byte sequences are decoded.
pub fn estimate_string_chars(text: &str) -> u64 {
    let bytes = text.as_bytes();
    let len = bytes.len();
    let mut count = 0u64;
    let mut i = 0;
    while i < len {
        let lead = bytes[i];
        if lead < 0x80 {
            let start = i;
            i += 1;
            while let Some(word) = bytes.get(i..i + 8) {
                let mut chunk = [0u8; 8];
                chunk.copy_from_slice(word);
                if u64::from_le_bytes(chunk) & HIGH_BITS != 0 {
                    break;
                }
                i += 8;
            }
            while i < len && bytes[i] < 0x80 {
                i += 1;
            }
            count += (i - start) as u64;
        } else if lead < 0xE0 {
            // Two-byte sequences (U+0080–U+07FF): no CJK there, one UTF-16 unit.
            count += 1;
            i += 2;
        } else if lead < 0xF0 {
            // `text` is valid UTF-8, so a three-byte lead has two continuation bytes.
            let cp = (u32::from(lead & 0x0F) << 12)
                | (u32::from(bytes[i + 1] & 0x3F) << 6)
                | u32::from(bytes[i + 2] & 0x3F);
            count += if is_cjk_code_point(cp) { CJK_WEIGHT } else { 1 };
            i += 3;
        } else {
            let cp = (u32::from(lead & 0x07) << 18)
                | (u32::from(bytes[i + 1] & 0x3F) << 12)
                | (u32::from(bytes[i + 2] & 0x3F) << 6)
                | u32::from(bytes[i + 3] & 0x3F);
            // A surrogate pair in JavaScript: 2 units, or 4 when it is a CJK character.
            count += if is_cjk_code_point(cp) { CJK_WEIGHT } else { 2 };
            i += 4;
        }
    }
    count
}

/// One piece of a message that reaches the model, as [`visit_parts`] reports it. Why public:
/// an exact counter (the host's, or an engine's own) must count the same pieces as the
/// estimate, or the two would disagree on what a message costs.
pub enum Part<'a> {
    /// Text the model reads.
    Text(&'a str),
    /// Text made for counting (JSON of tool arguments or of an unknown record).
    Owned(String),
    /// One image, which costs a fixed amount.
    Image,
}

/// Calls `f` with every part of `message` that counts, following pi's `estimateTokens`:
///
/// - user, tool result, custom: their content;
/// - assistant: its content, where a tool call is its name plus its JSON arguments and thinking
///   is its text (signatures are not counted, as in pi);
/// - bash execution: command, then output;
/// - compaction and branch summaries: the summary;
/// - an opaque message ([`rampart_message::opaque`]): the JSON of the client's item, which is
///   what its wire sends;
/// - a role we do not know: its whole JSON, so that nothing is ever free.
///
/// Content blocks count the same in every role: text, thinking, tool call as above, an image
/// as [`Part::Image`], and a block type we do not know as its JSON. pi counts only the block
/// types it expects in each role; the difference only shows on content pi never writes.
pub fn visit_parts<'a>(message: &'a AgentMessage, f: &mut impl FnMut(Part<'a>)) {
    match message {
        AgentMessage::User(m) => visit_content(&m.content, f),
        AgentMessage::Assistant(m) => m.content.iter().for_each(|b| visit_block(b, f)),
        AgentMessage::ToolResult(m) => visit_content(&m.content, f),
        AgentMessage::Custom(m) => visit_content(&m.content, f),
        AgentMessage::BashExecution(m) => {
            f(Part::Text(&m.command));
            f(Part::Text(&m.output));
        }
        AgentMessage::CompactionSummary(m) => f(Part::Text(&m.summary)),
        AgentMessage::BranchSummary(m) => f(Part::Text(&m.summary)),
        // An opaque message goes to the model as its client's item and nothing else.
        AgentMessage::Other(map) => match rampart_message::opaque::as_opaque(message) {
            Some(opaque) => f(Part::Owned(json_text(opaque.item))),
            None => f(Part::Owned(json_text(map))),
        },
    }
}

fn visit_content<'a>(content: &'a Content, f: &mut impl FnMut(Part<'a>)) {
    match content {
        Content::Text(text) => f(Part::Text(text)),
        Content::Blocks(blocks) => blocks.iter().for_each(|b| visit_block(b, f)),
    }
}

fn visit_block<'a>(block: &'a ContentBlock, f: &mut impl FnMut(Part<'a>)) {
    match block {
        ContentBlock::Text(t) => f(Part::Text(&t.text)),
        ContentBlock::Thinking(t) => f(Part::Text(&t.thinking)),
        ContentBlock::ToolCall(call) => {
            f(Part::Text(&call.name));
            f(Part::Owned(json_text(&call.arguments)));
        }
        ContentBlock::Image(_) => f(Part::Image),
        ContentBlock::Other(map) => f(Part::Owned(json_text(map))),
    }
}

/// Compact JSON, as `JSON.stringify` writes it. Serialising a JSON value cannot fail; were it
/// to, the part would count as empty rather than abort a count.
fn json_text<T: serde::Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The definition, one character at a time: the fast path must agree with it.
    fn reference(text: &str) -> u64 {
        text.chars()
            .map(|c| if is_cjk(c) { 4 } else { c.len_utf16() as u64 })
            .sum()
    }

    #[test]
    fn an_opaque_message_counts_as_its_clients_item() {
        let item = serde_json::json!({"role": "system", "content": "agents: a, b"});
        let message = rampart_message::opaque::opaque_message(
            "anthropic-messages",
            item.as_object().cloned().unwrap(),
            1_700_000_000_000,
        );
        assert_eq!(message_chars(&message), item.to_string().len() as u64);
    }

    #[test]
    fn ascii_counts_bytes() {
        assert_eq!(estimate_string_chars(""), 0);
        assert_eq!(estimate_string_chars("hello"), 5);
        assert_eq!(estimate_string_chars(&"x".repeat(1001)), 1001);
    }

    #[test]
    fn cjk_hangul_kana_count_four() {
        assert_eq!(estimate_string_chars("上下文"), 12);
        assert_eq!(estimate_string_chars("한국어"), 12);
        assert_eq!(estimate_string_chars("ひらがなカタカナ"), 32);
        // Fullwidth punctuation and the ideographic full stop are in the ranges too.
        assert_eq!(estimate_string_chars("。！"), 8);
        // Extension B, outside the BMP: one character of weight 4 (not a surrogate pair of 8).
        assert_eq!(estimate_string_chars("\u{20000}"), 4);
    }

    #[test]
    fn other_scripts_count_utf16_units() {
        assert_eq!(estimate_string_chars("é"), 1);
        assert_eq!(estimate_string_chars("Привет"), 6);
        // An emoji is a surrogate pair in JavaScript.
        assert_eq!(estimate_string_chars("😀"), 2);
        // Just outside the ranges.
        assert_eq!(estimate_string_chars("\u{2E7F}\u{FF00}\u{FF61}\u{1100}"), 4);
    }

    #[test]
    fn range_edges() {
        for (c, cjk) in [
            ('\u{2E80}', true),
            ('\u{9FFF}', true),
            ('\u{A000}', true),
            ('\u{A4FF}', true),
            ('\u{A500}', false),
            ('\u{ABFF}', false),
            ('\u{AC00}', true),
            ('\u{D7AF}', true),
            ('\u{D7B0}', false),
            ('\u{F8FF}', false),
            ('\u{F900}', true),
            ('\u{FAFF}', true),
            ('\u{FF01}', true),
            ('\u{FF60}', true),
            ('\u{FFE0}', true),
            ('\u{FFE6}', true),
            ('\u{FFE7}', false),
            ('\u{1FFFF}', false),
            ('\u{2FA1F}', true),
            ('\u{2FA20}', false),
        ] {
            assert_eq!(is_cjk(c), cjk, "U+{:04X}", c as u32);
        }
    }

    proptest! {
        #[test]
        fn fast_path_matches_the_definition(text in "(\\PC|[a-z ]{1,20}|[\u{3000}-\u{30ff}\u{4e00}-\u{4e20}]){0,40}") {
            prop_assert_eq!(estimate_string_chars(&text), reference(&text));
        }

        #[test]
        fn any_string(text in any::<String>()) {
            prop_assert_eq!(estimate_string_chars(&text), reference(&text));
        }
    }
}
