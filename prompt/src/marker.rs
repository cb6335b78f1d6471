//! The cache-boundary marker and the context engine's addition.
//!
//! Everything above the marker is the same from turn to turn, so a provider can cache it; the
//! provider layer splits the prompt there ([`split_at_cache_boundary`]) and sends the marker
//! to no model. What changes per turn (HEARTBEAT.md, the extra system prompt, the runtime, and
//! the engine's `systemPromptAddition`) goes below it.
//!
//! The marker is Rampart's own (`RAMPART_CACHE_BOUNDARY`, where OpenClaw writes
//! `OPENCLAW_CACHE_BOUNDARY`): it is a sentinel between this crate and the host's providers,
//! never read by a model or written in a workspace, so its spelling is ours to choose.

use crate::parts::{PartKind, Piece};
use crate::text::{normalize_block, normalize_lines};

/// The marker as it appears in the prompt, with the newlines that set it on a line of its own.
pub const CACHE_BOUNDARY: &str = "\n<!-- RAMPART_CACHE_BOUNDARY -->\n";

/// The marker's comment alone, as it might be pasted into an addition.
const CACHE_BOUNDARY_COMMENT: &str = "<!-- RAMPART_CACHE_BOUNDARY -->";

/// The text before the marker (without trailing whitespace) and after it (without leading
/// whitespace), or `None` when there is no marker.
pub fn split_at_cache_boundary(text: &str) -> Option<(&str, &str)> {
    let at = text.find(CACHE_BOUNDARY)?;
    Some((
        text[..at].trim_end(),
        text[at + CACHE_BOUNDARY.len()..].trim_start(),
    ))
}

/// `text` with each marker replaced by a newline, for a provider with no prompt cache.
pub fn strip_cache_boundary(text: &str) -> String {
    text.replace(CACHE_BOUNDARY, "\n")
}

/// `text` with any marker in it replaced by a newline, and the bare comment removed (the
/// newlines that join sections would otherwise complete it). Applied to everything the prompt
/// takes from outside (files, the extra prompt, the heartbeat prompt, the addition): the
/// providers split at the first marker, so a marker in a workspace file would move the cache
/// boundary into that file.
pub fn defuse_marker(text: &str) -> String {
    if text.contains(CACHE_BOUNDARY_COMMENT) {
        text.replace(CACHE_BOUNDARY, "\n")
            .replace(CACHE_BOUNDARY_COMMENT, "")
    } else {
        text.to_string()
    }
}

/// The addition as it is inserted: without markers ([`defuse_marker`]), then
/// [`normalize_block`].
pub fn normalize_addition(addition: &str) -> String {
    normalize_block(&defuse_marker(addition))
}

/// `system_prompt` with the engine's `addition` right after the marker, then a blank line,
/// then the rest of the dynamic suffix (normalised like the addition); with no marker, the
/// addition and a blank line go first. An empty addition changes nothing.
pub fn insert_addition(system_prompt: &str, addition: &str) -> String {
    let pieces = match system_prompt.find(CACHE_BOUNDARY) {
        Some(at) => vec![
            (PartKind::Override, system_prompt[..at].to_string()),
            (PartKind::CacheBoundary, CACHE_BOUNDARY.to_string()),
            (
                PartKind::Override,
                system_prompt[at + CACHE_BOUNDARY.len()..].to_string(),
            ),
        ],
        None => vec![(PartKind::Override, system_prompt.to_string())],
    };
    insert_addition_into(pieces, addition)
        .into_iter()
        .map(|(_, text)| text)
        .collect()
}

/// [`insert_addition`] over the pieces of a prompt, so that the breakdown follows the text.
/// Each dynamic piece is normalised on its own; as every piece but the last ends with its
/// joining newline, that is the normalisation of the whole suffix.
pub(crate) fn insert_addition_into(mut pieces: Vec<Piece>, addition: &str) -> Vec<Piece> {
    let addition = normalize_addition(addition);
    if addition.is_empty() {
        return pieces;
    }
    let Some(at) = pieces
        .iter()
        .position(|(k, _)| *k == PartKind::CacheBoundary)
    else {
        let mut out = Vec::with_capacity(pieces.len() + 1);
        out.push((PartKind::EngineAddition, format!("{addition}\n\n")));
        out.append(&mut pieces);
        return out;
    };

    let mut dynamic: Vec<Piece> = pieces.split_off(at + 1);
    let (marker_kind, marker_text) = pieces
        .pop()
        .unwrap_or((PartKind::CacheBoundary, String::new()));
    // What followed the marker inside its piece (the joining newline) starts the suffix.
    if let Some(rest) = marker_text.strip_prefix(CACHE_BOUNDARY)
        && !rest.is_empty()
    {
        dynamic.insert(0, (marker_kind, rest.to_string()));
    }

    let mut stable = pieces;
    trim_end_pieces(&mut stable);

    for (_, text) in dynamic.iter_mut() {
        *text = normalize_lines(text);
    }
    trim_start_pieces(&mut dynamic);
    trim_end_pieces(&mut dynamic);

    let mut out = stable;
    out.push((PartKind::CacheBoundary, CACHE_BOUNDARY.to_string()));
    if dynamic.is_empty() {
        out.push((PartKind::EngineAddition, addition));
    } else {
        out.push((PartKind::EngineAddition, format!("{addition}\n\n")));
        out.append(&mut dynamic);
    }
    out
}

/// Trailing whitespace removed across pieces, dropping pieces left empty.
fn trim_end_pieces(pieces: &mut Vec<Piece>) {
    while let Some((_, text)) = pieces.last_mut() {
        let kept = text.trim_end().len();
        text.truncate(kept);
        if !text.is_empty() {
            break;
        }
        pieces.pop();
    }
}

/// Leading whitespace removed across pieces, dropping pieces left empty.
fn trim_start_pieces(pieces: &mut Vec<Piece>) {
    let mut drop = 0;
    for (_, text) in pieces.iter_mut() {
        let trimmed = text.trim_start();
        if trimmed.is_empty() {
            drop += 1;
            continue;
        }
        *text = trimmed.to_string();
        break;
    }
    pieces.drain(..drop);
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "marker_tests.rs"]
mod tests;
