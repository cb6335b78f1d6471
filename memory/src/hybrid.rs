//! Merging vector and keyword results (`openclaw-behaviour.md` §11, `mergeHybridResults`).
//!
//! The two lists are joined by chunk id; a chunk found by both keeps the keyword snippet when
//! it has one. Its score is `vector_weight × vector score + text_weight × text score`, a side
//! that did not find it counting 0. Then temporal decay, a sort by score, and MMR when on.

use std::collections::HashMap;

use crate::decay::{decayed_score, note_timestamp_ms};
use crate::mmr::mmr_rerank;
use crate::settings::Source;

/// A chunk found by one side of a search, with that side's score.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// The chunk's id in the index.
    pub id: i64,
    /// The file, as the index names it (`memory/x.md`, `sessions/a.jsonl`).
    pub path: String,
    /// First line, 1-based.
    pub start_line: usize,
    /// Last line, 1-based, inclusive.
    pub end_line: usize,
    /// Where the file comes from.
    pub source: Source,
    /// The text shown for it.
    pub snippet: String,
    /// The side's score: cosine similarity, or the BM25 rank as a score.
    pub score: f64,
}

/// A merged result with its final score.
#[derive(Debug, Clone, PartialEq)]
pub struct Merged {
    /// The chunk's id in the index.
    pub id: i64,
    /// The file.
    pub path: String,
    /// First line, 1-based.
    pub start_line: usize,
    /// Last line, 1-based, inclusive.
    pub end_line: usize,
    /// Where the file comes from.
    pub source: Source,
    /// The text shown for it.
    pub snippet: String,
    /// `vector_weight × vector score + text_weight × text score`, decayed when decay is on.
    pub score: f64,
    /// Whether the keyword side found it (the relaxed threshold applies to those only).
    pub keyword_hit: bool,
}

/// Temporal decay as the merge applies it.
pub struct DecayContext<'a> {
    /// Now, in Unix milliseconds.
    pub now_ms: i64,
    /// The half-life in days.
    pub half_life_days: f64,
    /// A file's modification time in Unix milliseconds, when known.
    pub mtime_ms: &'a dyn Fn(&str) -> Option<i64>,
}

/// How to merge.
pub struct MergeOptions<'a> {
    /// Weight of the vector score.
    pub vector_weight: f64,
    /// Weight of the keyword score.
    pub text_weight: f64,
    /// Decay, when on.
    pub decay: Option<DecayContext<'a>>,
    /// MMR's λ, when MMR is on.
    pub mmr_lambda: Option<f64>,
}

/// The merged list, best first (or in MMR order).
pub fn merge_hybrid_results(
    vector: Vec<Candidate>,
    keyword: Vec<Candidate>,
    options: &MergeOptions<'_>,
) -> Vec<Merged> {
    let mut order: Vec<i64> = Vec::new();
    let mut by_id: HashMap<i64, (Candidate, f64, f64, bool)> = HashMap::new();
    for hit in vector {
        let score = hit.score;
        if !by_id.contains_key(&hit.id) {
            order.push(hit.id);
        }
        by_id.insert(hit.id, (hit, score, 0.0, false));
    }
    for hit in keyword {
        match by_id.get_mut(&hit.id) {
            Some(entry) => {
                entry.2 = hit.score;
                entry.3 = true;
                if !hit.snippet.is_empty() {
                    entry.0.snippet = hit.snippet;
                }
            }
            None => {
                order.push(hit.id);
                let score = hit.score;
                by_id.insert(hit.id, (hit, 0.0, score, true));
            }
        }
    }
    let merged: Vec<Merged> = order
        .into_iter()
        .filter_map(|id| by_id.remove(&id))
        .map(|(hit, vector_score, text_score, keyword_hit)| Merged {
            score: options.vector_weight * vector_score + options.text_weight * text_score,
            id: hit.id,
            path: hit.path,
            start_line: hit.start_line,
            end_line: hit.end_line,
            source: hit.source,
            snippet: hit.snippet,
            keyword_hit,
        })
        .collect();
    finish(merged, options.decay.as_ref(), options.mmr_lambda)
}

/// Decay, sort by score (best first; ties by path, then line), then MMR when on.
pub fn finish(
    mut merged: Vec<Merged>,
    decay: Option<&DecayContext<'_>>,
    mmr_lambda: Option<f64>,
) -> Vec<Merged> {
    if let Some(decay) = decay {
        let mut stamps: HashMap<String, Option<i64>> = HashMap::new();
        for hit in &mut merged {
            let ts = *stamps.entry(hit.path.clone()).or_insert_with(|| {
                note_timestamp_ms(&hit.path, hit.source, (decay.mtime_ms)(&hit.path))
            });
            hit.score = decayed_score(hit.score, ts, decay.now_ms, decay.half_life_days);
        }
    }
    merged.sort_by(compare_results);
    match mmr_lambda {
        Some(lambda) => mmr_rerank(merged, lambda, |m| m.score, |m| m.snippet.as_str()),
        None => merged,
    }
}

/// Best score first, then path, then start line: the order results are shown in.
pub fn compare_results(a: &Merged, b: &Merged) -> std::cmp::Ordering {
    b.score
        .total_cmp(&a.score)
        .then_with(|| a.path.cmp(&b.path))
        .then_with(|| a.start_line.cmp(&b.start_line))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "hybrid_tests.rs"]
mod tests;
