//! Keyword queries for the FTS5 index, and the conversion of its BM25 rank to a score.
//!
//! FTS5's `unicode61` tokenizer treats a run of CJK characters as one token, so in a Chinese
//! sentence (which has no spaces) the whole sentence would be one token and a query for a
//! word inside it would never match. The index therefore stores its text with every CJK
//! letter as its own token ([`index_text`]), and a query's CJK run becomes a phrase of its
//! characters ([`FtsQuery::match_expression`]): `"金银价格"` then matches the four adjacent
//! characters wherever they appear. Latin text is stored and matched unchanged.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::LazyLock;

use regex::Regex;

use crate::cjk::is_cjk_letter;

#[allow(clippy::expect_used)] // A constant pattern: covered by every test of this module.
static TOKEN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[\p{L}\p{N}_]+").expect("the token pattern compiles"));

/// The tokens of a keyword query: runs of letters, digits and `_`, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FtsQuery {
    tokens: Vec<String>,
}

impl FtsQuery {
    /// The query's tokens (`[\p{L}\p{N}_]+`); `None` when it has none.
    pub fn parse(raw: &str) -> Option<FtsQuery> {
        let tokens: Vec<String> = TOKEN
            .find_iter(raw)
            .map(|m| m.as_str().replace('"', ""))
            .filter(|t| !t.is_empty())
            .collect();
        (!tokens.is_empty()).then_some(FtsQuery { tokens })
    }

    /// A query for one keyword (as [`extract_keywords`] gives them).
    pub fn keyword(keyword: &str) -> Option<FtsQuery> {
        Self::parse(keyword)
    }

    /// The tokens.
    pub fn tokens(&self) -> &[String] {
        &self.tokens
    }

    /// OpenClaw's `buildFtsQuery`: each token quoted, joined with ` AND `.
    pub fn reference_string(&self) -> String {
        self.tokens
            .iter()
            .map(|t| format!("\"{t}\""))
            .collect::<Vec<_>>()
            .join(" AND ")
    }

    /// The `MATCH` expression for this index: as [`FtsQuery::reference_string`], with CJK
    /// letters spaced inside their quotes so each run is a phrase of characters.
    pub fn match_expression(&self) -> String {
        self.tokens
            .iter()
            .map(|t| {
                let spaced = index_text(t);
                format!(
                    "\"{}\"",
                    spaced.split_whitespace().collect::<Vec<_>>().join(" ")
                )
            })
            .collect::<Vec<_>>()
            .join(" AND ")
    }
}

/// OpenClaw's `buildFtsQuery(raw)`: `None` when `raw` has no token.
pub fn build_fts_query(raw: &str) -> Option<String> {
    FtsQuery::parse(raw).map(|q| q.reference_string())
}

/// The text the keyword index stores for `text`: unchanged unless it has CJK letters, which
/// get a space on each side so that the tokenizer sees one token per character.
pub fn index_text(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_cjk_letter) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + text.len() / 2);
    for c in text.chars() {
        if is_cjk_letter(c) {
            out.push(' ');
            out.push(c);
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// OpenClaw's `bm25RankToScore`: FTS5's rank (negative, lower is better) as a score in
/// (0, 1]. Not a number gives 0.001.
pub fn bm25_rank_to_score(rank: f64) -> f64 {
    if !rank.is_finite() {
        return 1.0 / 1000.0;
    }
    if rank < 0.0 {
        let relevance = -rank;
        relevance / (1.0 + relevance)
    } else {
        1.0 / (1.0 + rank)
    }
}

/// Words that carry no meaning in a memory search (English question words and fillers,
/// and the commonest Chinese particles).
const STOP_WORDS: &[&str] = &[
    "a", "about", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by", "can", "could",
    "did", "do", "does", "for", "from", "had", "has", "have", "how", "i", "if", "in", "into", "is",
    "it", "its", "me", "my", "of", "on", "or", "our", "remember", "should", "so", "that", "the",
    "their", "them", "there", "these", "they", "this", "to", "us", "was", "we", "were", "what",
    "when", "where", "which", "who", "why", "will", "with", "would", "you", "your",
];

const CJK_STOP_CHARS: &[char] = &[
    '的', '了', '是', '在', '和', '有', '我', '你', '他', '她', '它', '们', '吗', '呢', '吧', '啊',
    'の', 'は', 'が', 'を', 'に', 'で', 'と', 'も',
];

/// The keywords of a query, for the keyword-only fallback that searches each one alone when
/// the whole query matches nothing: lower-cased words of two characters or more that are not
/// stop words, and for CJK runs their character pairs (a single character alone), since CJK
/// words are mostly one or two characters and nothing marks where they end.
pub fn extract_keywords(query: &str) -> Vec<String> {
    let mut words = Vec::new();
    for token in TOKEN.find_iter(query) {
        let lower = token.as_str().to_lowercase();
        let mut latin = String::new();
        let mut run: Vec<char> = Vec::new();
        for c in lower.chars() {
            if is_cjk_letter(c) {
                latin_keyword(&mut latin, &mut words);
                run.push(c);
            } else {
                words.extend(cjk_keywords(&run));
                run.clear();
                latin.push(c);
            }
        }
        latin_keyword(&mut latin, &mut words);
        words.extend(cjk_keywords(&run));
    }
    let mut seen = HashSet::new();
    words.retain(|w| seen.insert(w.clone()));
    words
}

/// Moves `latin` to `out` when it is a keyword (two characters or more, not a stop word).
fn latin_keyword(latin: &mut String, out: &mut Vec<String>) {
    let word = std::mem::take(latin);
    if word.chars().count() >= 2 && !STOP_WORDS.contains(&word.as_str()) {
        out.push(word);
    }
}

/// A CJK run's keywords: the run is cut at stop characters, and each piece gives its
/// character pairs, or the character itself when it is one character long.
fn cjk_keywords(run: &[char]) -> Vec<String> {
    let mut out = Vec::new();
    for piece in run.split(|c| CJK_STOP_CHARS.contains(c)) {
        match piece.len() {
            0 => {}
            1 => out.push(piece[0].to_string()),
            _ => out.extend(piece.windows(2).map(|pair| pair.iter().collect::<String>())),
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "fts_query_tests.rs"]
mod tests;
