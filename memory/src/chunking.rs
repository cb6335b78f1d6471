//! Markdown cut into overlapping chunks by an estimated token budget (`prompt-and-memory.md`
//! §2.3).
//!
//! The budget is in characters: `max(32, tokens × 4)`, with CJK characters weighing 4 each
//! since one is about a token. Lines are kept whole where they fit; a line longer than the
//! budget is cut, and a CJK-heavy piece is cut again every `tokens` characters so that a
//! single piece cannot outweigh a chunk. When a chunk is full the trailing lines worth at
//! least the overlap are carried into the next one, so a fact on a boundary is in both.

use sha2::{Digest, Sha256};

use crate::cjk::weighted_len;

/// One chunk of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// The first line of the chunk, 1-based.
    pub start_line: usize,
    /// The last line of the chunk, 1-based and inclusive.
    pub end_line: usize,
    /// The chunk's text: its lines (or pieces of a long line) joined with `\n`.
    pub text: String,
    /// SHA-256 of `text`, lower-case hex: the key of the embedding cache.
    pub hash: String,
}

/// The SHA-256 of `text` as lower-case hex.
pub fn hash_text(text: &str) -> String {
    hex(&Sha256::digest(text.as_bytes()))
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

struct Piece<'a> {
    text: &'a str,
    line: usize,
    weight: usize,
}

/// Cuts `content` into chunks of about `tokens` tokens with `overlap` tokens carried over.
/// Chunks that are only whitespace are left out (there is nothing to find in them).
pub fn chunk_markdown(content: &str, tokens: usize, overlap: usize) -> Vec<Chunk> {
    let tokens = tokens.max(1);
    let max_chars = (tokens * 4).max(32);
    let overlap_chars = overlap.min(tokens - 1) * 4;
    let mut chunks = Vec::new();
    let mut current: Vec<Piece<'_>> = Vec::new();
    let mut current_weight = 0usize;

    for (index, line) in content.split('\n').enumerate() {
        let line_no = index + 1;
        for segment in split_line(line, max_chars, tokens) {
            // Each piece also costs its line break.
            let weight = weighted_len(segment) + 1;
            if current_weight + weight > max_chars && !current.is_empty() {
                push_chunk(&mut chunks, &current);
                carry_overlap(&mut current, &mut current_weight, overlap_chars);
                // A carry that does not fit beside this piece would either make a chunk over
                // budget or be flushed alone as a copy of the chunk just written (OpenClaw
                // does both with long lines); the piece starts the chunk instead.
                if current_weight + weight > max_chars {
                    current.clear();
                    current_weight = 0;
                }
            }
            current.push(Piece {
                text: segment,
                line: line_no,
                weight,
            });
            current_weight += weight;
        }
    }
    push_chunk(&mut chunks, &current);
    chunks
}

/// A line as pieces no heavier than the budget: cut every `max_chars` characters, and a
/// piece that still weighs more (CJK) cut every `tokens` characters.
fn split_line(line: &str, max_chars: usize, tokens: usize) -> Vec<&str> {
    if line.is_empty() {
        return vec![""];
    }
    let mut out = Vec::new();
    for coarse in slices_of(line, max_chars) {
        if weighted_len(coarse) > max_chars {
            out.extend(slices_of(coarse, tokens));
        } else {
            out.push(coarse);
        }
    }
    out
}

/// `text` cut every `n` characters (never inside a character).
fn slices_of(text: &str, n: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut count = 0;
    for (i, _) in text.char_indices() {
        if count == n {
            out.push(&text[start..i]);
            start = i;
            count = 0;
        }
        count += 1;
    }
    out.push(&text[start..]);
    out
}

fn push_chunk(chunks: &mut Vec<Chunk>, pieces: &[Piece<'_>]) {
    let (Some(first), Some(last)) = (pieces.first(), pieces.last()) else {
        return;
    };
    let mut text = String::with_capacity(pieces.iter().map(|p| p.text.len() + 1).sum());
    for (i, piece) in pieces.iter().enumerate() {
        if i > 0 {
            text.push('\n');
        }
        text.push_str(piece.text);
    }
    if text.trim().is_empty() {
        return;
    }
    chunks.push(Chunk {
        start_line: first.line,
        end_line: last.line,
        hash: hash_text(&text),
        text,
    });
}

/// Keeps the trailing pieces worth at least `overlap_chars` (at least one piece when there is
/// any overlap), and nothing when there is no overlap.
fn carry_overlap(current: &mut Vec<Piece<'_>>, weight: &mut usize, overlap_chars: usize) {
    if overlap_chars == 0 {
        current.clear();
        *weight = 0;
        return;
    }
    let mut kept_weight = 0;
    let mut keep_from = current.len();
    while keep_from > 0 {
        keep_from -= 1;
        kept_weight += current[keep_from].weight;
        if kept_weight >= overlap_chars {
            break;
        }
    }
    current.drain(..keep_from);
    *weight = kept_weight;
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "chunking_tests.rs"]
mod tests;
