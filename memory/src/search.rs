//! The search pipeline (`openclaw-behaviour.md` §11 and `prompt-and-memory.md` §2.7).
//!
//! With an embedding provider: keyword candidates (the AND query) and vector candidates
//! (cosine), merged with the hybrid weights, then the `min_score` filter, relaxed to
//! `min(min_score, text_weight)` for keyword matches when nothing passes, since a strong
//! keyword match alone can never reach 0.35 with a text weight of 0.3. Hybrid off or no
//! FTS: vector only.
//!
//! Without a provider (keyword-only): the AND query; if it finds nothing, each keyword of the
//! query alone, keeping each chunk's best score; the threshold drops to 0 when nothing passes,
//! because BM25 scores are not on the vector scale and a user with no provider should still
//! get the best matches. Decay applies in every mode, and so does MMR when it is on (OpenClaw
//! leaves MMR out of keyword-only search; a user who turned it on expects it there too).
//!
//! Vectors are searched in an in-memory matrix (loaded once after each sync) when it fits
//! `vector_cache_max_bytes`; larger indexes use sqlite-vec's KNN, else a scan of the stored
//! vectors.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::embed::Embedder;
use crate::error::MemoryError;
use crate::fts_query::{FtsQuery, bm25_rank_to_score, extract_keywords};
use crate::hybrid::{
    Candidate, DecayContext, MergeOptions, Merged, compare_results, finish, merge_hybrid_results,
};
use crate::settings::{MemorySettings, Source};
use crate::store::{ChunkRow, Store};
use crate::vectors::{VectorMatrix, is_zero};

/// How a search found its results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchMode {
    /// Keyword and vector results merged.
    Hybrid,
    /// Vector results only (hybrid off, or no FTS).
    Vector,
    /// Keyword results only: no embedding provider.
    FtsOnly,
    /// Neither a provider nor FTS: nothing can be searched.
    Unavailable,
}

impl SearchMode {
    /// `"hybrid"`, `"vector"`, `"fts-only"` or `"unavailable"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Hybrid => "hybrid",
            Self::Vector => "vector",
            Self::FtsOnly => "fts-only",
            Self::Unavailable => "unavailable",
        }
    }
}

/// A search's parameters; unset values come from the settings.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SearchParams {
    /// Most results (default: the settings' `max_results`, 6).
    pub max_results: Option<usize>,
    /// Lowest score kept, before the relaxation rules (default: the settings' `min_score`).
    pub min_score: Option<f64>,
}

/// One result.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchResult {
    /// The file (`MEMORY.md`, `memory/2026-04-01.md`, `sessions/a.jsonl`).
    pub path: String,
    /// First line, 1-based.
    pub start_line: usize,
    /// Last line, 1-based, inclusive.
    pub end_line: usize,
    /// The score: higher is better.
    pub score: f64,
    /// The chunk's text, at most `snippet_max_chars` characters.
    pub snippet: String,
    /// Where the file comes from.
    pub source: Source,
}

/// A search's results and how they were found.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchOutcome {
    /// Best first (by score, then path).
    pub results: Vec<SearchResult>,
    /// How they were found.
    pub mode: SearchMode,
    /// The embedding provider, if any.
    pub provider: Option<String>,
    /// The embedding model, if any.
    pub model: Option<String>,
    /// Candidates fetched per side.
    pub candidates: usize,
    /// Keyword candidates found.
    pub keyword_hits: usize,
    /// Vector candidates found.
    pub vector_hits: usize,
}

/// The in-memory vector matrix, loaded on first use and dropped when the index changes.
#[derive(Debug, Default)]
pub struct VectorCache {
    slot: Mutex<Slot>,
}

#[derive(Debug, Default)]
enum Slot {
    /// Not looked at since the last change.
    #[default]
    Unknown,
    /// Loaded.
    Loaded(Arc<VectorMatrix>),
    /// Too large for the cache: searched in SQLite until the index changes.
    TooLarge,
}

impl VectorCache {
    /// Forgets the matrix (after a sync wrote something).
    pub fn invalidate(&self) {
        *self.slot.lock().unwrap_or_else(PoisonError::into_inner) = Slot::Unknown;
    }

    /// The matrix for vectors of `dims`, loading it if it fits in `max_bytes`; `None` when it
    /// does not fit.
    pub fn get(
        &self,
        store: &Store,
        dims: usize,
        max_bytes: usize,
    ) -> Result<Option<Arc<VectorMatrix>>, MemoryError> {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        match &*slot {
            Slot::Loaded(m) if m.dims() == dims => return Ok(Some(Arc::clone(m))),
            Slot::TooLarge => return Ok(None),
            _ => {}
        }
        let (_, _, with_vectors) = store.counts()?;
        if with_vectors.saturating_mul(dims * 4 + 8) > max_bytes {
            *slot = Slot::TooLarge;
            return Ok(None);
        }
        let matrix = Arc::new(store.load_matrix(dims)?);
        tracing::debug!(
            rows = matrix.len(),
            dims,
            bytes = matrix.bytes(),
            "vector matrix loaded"
        );
        *slot = Slot::Loaded(Arc::clone(&matrix));
        Ok(Some(matrix))
    }
}

/// What a search runs against.
pub struct SearchInput<'a> {
    /// The index.
    pub store: &'a Mutex<Store>,
    /// The settings, clamped.
    pub settings: &'a MemorySettings,
    /// The embedding provider, if any.
    pub embedder: Option<&'a dyn Embedder>,
    /// The vector matrix cache.
    pub vectors: &'a VectorCache,
    /// Now, in Unix milliseconds (for temporal decay).
    pub now_ms: i64,
}

fn lock(store: &Mutex<Store>) -> MutexGuard<'_, Store> {
    store.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Searches the index. A blank query gives no results. Fails only when the provider cannot
/// embed the query or the database fails.
pub fn search(
    input: &SearchInput<'_>,
    query: &str,
    params: &SearchParams,
) -> Result<SearchOutcome, MemoryError> {
    let settings = input.settings;
    let max_results = params.max_results.unwrap_or(settings.max_results).max(1);
    let min_score = params
        .min_score
        .filter(|s| s.is_finite())
        .unwrap_or(settings.min_score);
    let candidates = settings.candidates(max_results);
    let mut outcome = SearchOutcome {
        results: Vec::new(),
        mode: SearchMode::FtsOnly,
        provider: input.embedder.map(|e| e.provider().to_string()),
        model: input.embedder.map(|e| e.model().to_string()),
        candidates,
        keyword_hits: 0,
        vector_hits: 0,
    };
    let cleaned = query.trim();
    let fts = lock(input.store).fts_available();
    let Some(embedder) = input.embedder else {
        if !fts {
            tracing::warn!("memory search: no provider and FTS unavailable");
            outcome.mode = SearchMode::Unavailable;
            return Ok(outcome);
        }
        if cleaned.is_empty() {
            return Ok(outcome);
        }
        let merged = keyword_only(input, cleaned, candidates, &mut outcome)?;
        let strict: Vec<Merged> = merged
            .iter()
            .filter(|m| m.score >= min_score)
            .cloned()
            .collect();
        let chosen = if strict.is_empty() { merged } else { strict };
        outcome.results = finalize(chosen, max_results, settings.snippet_max_chars);
        return Ok(outcome);
    };
    outcome.mode = if settings.hybrid_enabled && fts {
        SearchMode::Hybrid
    } else {
        SearchMode::Vector
    };
    if cleaned.is_empty() {
        return Ok(outcome);
    }

    let keyword: Vec<Candidate> = if outcome.mode == SearchMode::Hybrid {
        match FtsQuery::parse(cleaned) {
            Some(q) => keyword_candidates(&lock(input.store), &q.match_expression(), candidates)?,
            None => Vec::new(),
        }
    } else {
        Vec::new()
    };
    outcome.keyword_hits = keyword.len();

    let query_vector = embedder
        .embed(&[cleaned])?
        .into_iter()
        .next()
        .unwrap_or_default();
    let vector = if is_zero(&query_vector) {
        Vec::new()
    } else {
        vector_candidates(input, &query_vector, candidates)?
    };
    outcome.vector_hits = vector.len();

    let (vector_weight, text_weight) = settings.effective_weights();
    if outcome.mode == SearchMode::Vector {
        let merged = with_decay(input, |decay| {
            let as_merged = vector
                .into_iter()
                .map(|c| merged_from(c, false))
                .collect::<Vec<_>>();
            finish(as_merged, decay.as_ref(), mmr_lambda(settings))
        })?;
        let kept = merged
            .into_iter()
            .filter(|m| m.score >= min_score)
            .collect();
        outcome.results = finalize(kept, max_results, settings.snippet_max_chars);
        return Ok(outcome);
    }

    let had_keyword_hits = !keyword.is_empty();
    let merged = with_decay(input, |decay| {
        merge_hybrid_results(
            vector,
            keyword,
            &MergeOptions {
                vector_weight,
                text_weight,
                decay,
                mmr_lambda: mmr_lambda(settings),
            },
        )
    })?;
    let strict: Vec<Merged> = merged
        .iter()
        .filter(|m| m.score >= min_score)
        .cloned()
        .collect();
    let chosen = if !strict.is_empty() || !had_keyword_hits {
        strict
    } else {
        let relaxed = min_score.min(text_weight);
        merged
            .into_iter()
            .filter(|m| m.keyword_hit && m.score >= relaxed)
            .collect()
    };
    outcome.results = finalize(chosen, max_results, settings.snippet_max_chars);
    Ok(outcome)
}

fn mmr_lambda(settings: &MemorySettings) -> Option<f64> {
    settings
        .mmr_enabled
        .then(|| settings.effective_mmr_lambda())
}

/// Runs `f` with the decay context when decay is on (file times read from the index).
fn with_decay<T>(
    input: &SearchInput<'_>,
    f: impl FnOnce(Option<DecayContext<'_>>) -> T,
) -> Result<T, MemoryError> {
    if !input.settings.temporal_decay_enabled {
        return Ok(f(None));
    }
    let store = lock(input.store);
    let mtime = |path: &str| store.file_mtime(path).ok().flatten();
    Ok(f(Some(DecayContext {
        now_ms: input.now_ms,
        half_life_days: input.settings.effective_half_life_days(),
        mtime_ms: &mtime,
    })))
}

/// Keyword-only candidates, scored, decayed, sorted (and MMR-ordered when on).
fn keyword_only(
    input: &SearchInput<'_>,
    query: &str,
    candidates: usize,
    outcome: &mut SearchOutcome,
) -> Result<Vec<Merged>, MemoryError> {
    let mut hits = {
        let store = lock(input.store);
        let mut hits = match FtsQuery::parse(query) {
            Some(q) => keyword_candidates(&store, &q.match_expression(), candidates)?,
            None => Vec::new(),
        };
        if hits.is_empty() {
            // Nothing has every word: each keyword alone, each chunk keeping its best score.
            let mut best: HashMap<i64, Candidate> = HashMap::new();
            for keyword in extract_keywords(query) {
                let Some(q) = FtsQuery::keyword(&keyword) else {
                    continue;
                };
                for hit in keyword_candidates(&store, &q.match_expression(), candidates)? {
                    match best.get_mut(&hit.id) {
                        Some(existing) if existing.score >= hit.score => {}
                        Some(existing) => *existing = hit,
                        None => {
                            best.insert(hit.id, hit);
                        }
                    }
                }
            }
            hits = best.into_values().collect();
        }
        hits
    };
    outcome.keyword_hits = hits.len();
    hits.sort_by_key(|h| h.id);
    let settings = input.settings;
    with_decay(input, |decay| {
        let merged = hits.into_iter().map(|c| merged_from(c, true)).collect();
        finish(merged, decay.as_ref(), mmr_lambda(settings))
    })
}

fn merged_from(c: Candidate, keyword_hit: bool) -> Merged {
    Merged {
        id: c.id,
        path: c.path,
        start_line: c.start_line,
        end_line: c.end_line,
        source: c.source,
        snippet: c.snippet,
        score: c.score,
        keyword_hit,
    }
}

fn candidate(row: ChunkRow, score: f64) -> Candidate {
    Candidate {
        id: row.id,
        path: row.path,
        start_line: row.start_line,
        end_line: row.end_line,
        source: row.source,
        snippet: row.text,
        score,
    }
}

fn keyword_candidates(
    store: &Store,
    expression: &str,
    limit: usize,
) -> Result<Vec<Candidate>, MemoryError> {
    Ok(store
        .keyword_search(expression, limit)?
        .into_iter()
        .map(|row| candidate(row.chunk, bm25_rank_to_score(row.rank)))
        .collect())
}

fn vector_candidates(
    input: &SearchInput<'_>,
    query: &[f32],
    limit: usize,
) -> Result<Vec<Candidate>, MemoryError> {
    let store = lock(input.store);
    let matrix = input
        .vectors
        .get(&store, query.len(), input.settings.vector_cache_max_bytes)?;
    let hits = match matrix {
        Some(m) => m.search(query, limit),
        None => match store.vec_knn(query, limit)? {
            Some(hits) => hits,
            None => store.scan_vectors(query, limit)?,
        },
    };
    let ids: Vec<i64> = hits.iter().map(|h| h.0).collect();
    let mut rows = store.chunks(&ids)?;
    Ok(hits
        .into_iter()
        .filter_map(|(id, score)| rows.remove(&id).map(|row| candidate(row, f64::from(score))))
        .collect())
}

/// The first `max_results`, sorted by score then path, snippets cut to `snippet_max` chars.
fn finalize(chosen: Vec<Merged>, max_results: usize, snippet_max: usize) -> Vec<SearchResult> {
    let mut top: Vec<Merged> = chosen.into_iter().take(max_results).collect();
    top.sort_by(compare_results);
    top.into_iter()
        .map(|m| SearchResult {
            path: m.path,
            start_line: m.start_line,
            end_line: m.end_line,
            score: m.score,
            snippet: truncate_chars(&m.snippet, snippet_max),
            source: m.source,
        })
        .collect()
}

/// `text` cut to at most `max` characters.
pub fn truncate_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => text[..i].to_string(),
        None => text.to_string(),
    }
}
