//! The memory settings, with OpenClaw's defaults and clamping rules.
//!
//! The host reads `plugins.toml` into [`MemorySettings`]; nothing here parses text. The values
//! are kept as the user wrote them, and the index works on [`MemorySettings::clamped`], so a
//! status page can show both what was asked and what is used.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// Where an indexed file comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Source {
    /// `MEMORY.md` / `memory.md`, `memory/**/*.md` and the extra paths.
    Memory,
    /// The agent's pi session transcripts (`*.jsonl`), opt-in.
    Sessions,
}

impl Source {
    /// The name stored in the database and shown to the model (`"memory"`, `"sessions"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::Sessions => "sessions",
        }
    }

    /// The source a stored name stands for; unknown names are `None`.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "memory" => Some(Self::Memory),
            "sessions" => Some(Self::Sessions),
            _ => None,
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// When `memory_search` appends a `Source: <path>#L<n>` line to its snippets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CitationsMode {
    /// Always.
    On,
    /// Never (the prompt then tells the model not to cite paths).
    Off,
    /// In direct chats only: not when the session key has a `group` or `channel` part.
    #[default]
    Auto,
}

impl CitationsMode {
    /// `"on"`, `"off"` or `"auto"`, as in the configuration and the tool result.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::On => "on",
            Self::Off => "off",
            Self::Auto => "auto",
        }
    }

    /// Whether citations are shown in a conversation with this session key (none counts as a
    /// direct chat). Keys are split on `:`; a `group` or `channel` part makes it a shared chat.
    pub fn applies_to(self, session_key: Option<&str>) -> bool {
        match self {
            Self::On => true,
            Self::Off => false,
            Self::Auto => !session_key.is_some_and(|key| {
                key.split(':').any(|part| {
                    let part = part.trim().to_ascii_lowercase();
                    part == "group" || part == "channel"
                })
            }),
        }
    }
}

/// Everything that decides what is indexed and how search ranks it.
///
/// `Default` gives OpenClaw's defaults (`openclaw-behaviour.md` §11). Values out of range are
/// accepted here and clamped by [`MemorySettings::clamped`], which the index applies when it
/// opens.
#[derive(Debug, Clone, PartialEq)]
pub struct MemorySettings {
    /// Whether the memory tools exist at all (`memorySearch.enabled`, default true). When false,
    /// the tools answer "memory search disabled".
    pub enabled: bool,
    /// What is indexed (default `[Memory]`). `Sessions` also needs a sessions directory from
    /// the host, which is how the experimental opt-in is expressed.
    pub sources: Vec<Source>,
    /// More directories (walked for `.md`) or single `.md` files, relative to the workspace
    /// or absolute.
    pub extra_paths: Vec<PathBuf>,
    /// Chunk size in estimated tokens (default 400; 4 characters a token).
    pub chunk_tokens: usize,
    /// Overlap between consecutive chunks in estimated tokens (default 80; at most
    /// `chunk_tokens - 1`).
    pub chunk_overlap: usize,
    /// Results returned by a search when the caller gives no number (default 6).
    pub max_results: usize,
    /// Results scoring below this are dropped, except by the relaxation rules (default 0.35).
    pub min_score: f64,
    /// Whether keyword (FTS) and vector results are merged (default true). Off: vector only.
    pub hybrid_enabled: bool,
    /// Weight of the vector score in the merge (default 0.7; clamped to [0, 1], then
    /// normalised with `text_weight` to sum 1).
    pub vector_weight: f64,
    /// Weight of the keyword score in the merge (default 0.3; see `vector_weight`).
    pub text_weight: f64,
    /// Candidates fetched from each side: `min(200, max(1, floor(max_results × this)))`
    /// (default 4; clamped to 1–20).
    pub candidate_multiplier: f64,
    /// Maximal marginal relevance re-ranking of merged results (default off).
    pub mmr_enabled: bool,
    /// MMR's balance between relevance (1) and diversity (0) (default 0.7; clamped to [0, 1]).
    pub mmr_lambda: f64,
    /// Older dated notes (`memory/YYYY-MM-DD.md`, transcripts) score lower (default off).
    pub temporal_decay_enabled: bool,
    /// Age at which a score is halved, in days (default 30; at least 1).
    pub half_life_days: f64,
    /// Whether embeddings are kept in the database by text hash, so unchanged text is never
    /// embedded twice (default true).
    pub cache_enabled: bool,
    /// Longest snippet in a search result, in characters (default 700).
    pub snippet_max_chars: usize,
    /// When snippets carry a `Source:` line (default auto).
    pub citations: CitationsMode,
    /// Quiet time after the last file change before the watcher re-syncs (default 1.5 s).
    pub watch_debounce: Duration,
    /// Whether a search on an index with unsynced changes starts a background sync (default
    /// true; OpenClaw's `sync.onSearch`).
    pub sync_on_search: bool,
    /// Largest vector matrix kept in memory for search, in bytes (default 256 MiB). Larger
    /// indexes are searched in SQLite (sqlite-vec, else a scan), which is slower but does
    /// not hold every vector in memory.
    pub vector_cache_max_bytes: usize,
}

impl Default for MemorySettings {
    fn default() -> Self {
        Self {
            enabled: true,
            sources: vec![Source::Memory],
            extra_paths: Vec::new(),
            chunk_tokens: 400,
            chunk_overlap: 80,
            max_results: 6,
            min_score: 0.35,
            hybrid_enabled: true,
            vector_weight: DEFAULT_VECTOR_WEIGHT,
            text_weight: DEFAULT_TEXT_WEIGHT,
            candidate_multiplier: 4.0,
            mmr_enabled: false,
            mmr_lambda: 0.7,
            temporal_decay_enabled: false,
            half_life_days: 30.0,
            cache_enabled: true,
            snippet_max_chars: 700,
            citations: CitationsMode::Auto,
            watch_debounce: Duration::from_millis(1500),
            sync_on_search: true,
            vector_cache_max_bytes: 256 * 1024 * 1024,
        }
    }
}

const DEFAULT_VECTOR_WEIGHT: f64 = 0.7;
const DEFAULT_TEXT_WEIGHT: f64 = 0.3;

/// The most candidates fetched from either side of a hybrid search.
pub const MAX_CANDIDATES: usize = 200;

impl MemorySettings {
    /// A copy with every rule applied: weights clamped to [0, 1] and normalised, the
    /// candidate multiplier to 1–20, the overlap to at most `chunk_tokens - 1`, the half-life
    /// to at least 1 day, MMR's λ to [0, 1], and no zero sizes.
    pub fn clamped(&self) -> MemorySettings {
        let (vector_weight, text_weight) = self.effective_weights();
        let mut sources = self.sources.clone();
        sources.sort();
        sources.dedup();
        MemorySettings {
            chunk_tokens: self.effective_chunk_tokens(),
            chunk_overlap: self.effective_overlap(),
            max_results: self.max_results.max(1),
            min_score: if self.min_score.is_finite() {
                self.min_score
            } else {
                0.0
            },
            vector_weight,
            text_weight,
            candidate_multiplier: self.effective_candidate_multiplier(),
            mmr_lambda: self.effective_mmr_lambda(),
            half_life_days: self.effective_half_life_days(),
            snippet_max_chars: self.snippet_max_chars.max(1),
            sources,
            ..self.clone()
        }
    }

    /// The chunk size in tokens, at least 1.
    pub fn effective_chunk_tokens(&self) -> usize {
        self.chunk_tokens.max(1)
    }

    /// The overlap, at most `chunk_tokens - 1` (so every chunk moves forward).
    pub fn effective_overlap(&self) -> usize {
        self.chunk_overlap
            .min(self.effective_chunk_tokens().saturating_sub(1))
    }

    /// `(vector, text)`: each clamped to [0, 1], then divided by their sum; both zero (or not
    /// numbers) gives the defaults 0.7 / 0.3.
    pub fn effective_weights(&self) -> (f64, f64) {
        let clamp = |w: f64| {
            if w.is_finite() {
                w.clamp(0.0, 1.0)
            } else {
                0.0
            }
        };
        let vector = clamp(self.vector_weight);
        let text = clamp(self.text_weight);
        let sum = vector + text;
        if sum > 0.0 {
            (vector / sum, text / sum)
        } else {
            (DEFAULT_VECTOR_WEIGHT, DEFAULT_TEXT_WEIGHT)
        }
    }

    /// The candidate multiplier clamped to 1–20 (4 when not a number).
    pub fn effective_candidate_multiplier(&self) -> f64 {
        if self.candidate_multiplier.is_finite() {
            self.candidate_multiplier.clamp(1.0, 20.0)
        } else {
            4.0
        }
    }

    /// How many candidates each side of a search fetches for `max_results` results:
    /// `min(200, max(1, floor(max_results × multiplier)))`.
    pub fn candidates(&self, max_results: usize) -> usize {
        let wanted = (max_results as f64 * self.effective_candidate_multiplier()).floor();
        (wanted.max(1.0) as usize).min(MAX_CANDIDATES)
    }

    /// MMR's λ clamped to [0, 1] (0.7 when not a number).
    pub fn effective_mmr_lambda(&self) -> f64 {
        if self.mmr_lambda.is_finite() {
            self.mmr_lambda.clamp(0.0, 1.0)
        } else {
            0.7
        }
    }

    /// The half-life in days, at least 1 (30 when not a number).
    pub fn effective_half_life_days(&self) -> f64 {
        if self.half_life_days.is_finite() {
            self.half_life_days.max(1.0)
        } else {
            30.0
        }
    }

    /// Whether session transcripts are among the sources.
    pub fn indexes_sessions(&self) -> bool {
        self.sources.contains(&Source::Sessions)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "settings_tests.rs"]
mod tests;
