//! Maximal marginal relevance: re-ranking results so that near-duplicates do not fill the
//! list (`openclaw-behaviour.md` §11, MMR).
//!
//! Each step picks the item with the best `λ·relevance − (1−λ)·(its highest similarity to
//! an item already picked)`, relevance being the score rescaled to [0, 1] and similarity the
//! Jaccard index of the texts' token sets. Generic over the item so the merge can use it
//! without this module knowing result types.

use std::collections::HashSet;

use crate::cjk::is_cjk_letter;

/// The tokens MMR compares: lower-case ASCII words (`[a-z0-9_]+`), every CJK letter, and
/// every pair of adjacent CJK letters.
pub fn mmr_tokens(text: &str) -> HashSet<String> {
    let mut tokens = HashSet::new();
    let lower = text.to_lowercase();
    let mut word = String::new();
    let mut previous_cjk: Option<char> = None;
    for c in lower.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
        } else if !word.is_empty() {
            tokens.insert(std::mem::take(&mut word));
        }
        if is_cjk_letter(c) {
            tokens.insert(c.to_string());
            if let Some(p) = previous_cjk {
                tokens.insert([p, c].iter().collect());
            }
            previous_cjk = Some(c);
        } else {
            previous_cjk = None;
        }
    }
    if !word.is_empty() {
        tokens.insert(word);
    }
    tokens
}

/// The Jaccard index of two sets: 1 when both are empty, 0 when only one is.
pub fn jaccard(a: &HashSet<String>, b: &HashSet<String>) -> f64 {
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let (small, large) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    let common = small.iter().filter(|t| large.contains(*t)).count();
    common as f64 / (a.len() + b.len() - common) as f64
}

/// `λ·relevance − (1−λ)·max_similarity`.
pub fn mmr_score(relevance: f64, max_similarity: f64, lambda: f64) -> f64 {
    lambda * relevance - (1.0 - lambda) * max_similarity
}

/// `items` in MMR order. λ is clamped to [0, 1]; λ = 1 is a plain sort by score. Ties go to
/// the higher original score.
pub fn mmr_rerank<T>(
    items: Vec<T>,
    lambda: f64,
    score: impl Fn(&T) -> f64,
    content: impl Fn(&T) -> &str,
) -> Vec<T> {
    let lambda = if lambda.is_finite() {
        lambda.clamp(0.0, 1.0)
    } else {
        0.7
    };
    let mut items = items;
    if items.len() <= 1 {
        return items;
    }
    if lambda >= 1.0 {
        items.sort_by(|a, b| score(b).total_cmp(&score(a)));
        return items;
    }
    let tokens: Vec<HashSet<String>> = items.iter().map(|i| mmr_tokens(content(i))).collect();
    let scores: Vec<f64> = items.iter().map(&score).collect();
    let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let min = scores.iter().copied().fold(f64::INFINITY, f64::min);
    let range = max - min;
    let relevance = |s: f64| if range > 0.0 { (s - min) / range } else { 1.0 };

    let mut remaining: Vec<usize> = (0..items.len()).collect();
    // For each remaining item, its highest similarity to the picked ones so far.
    let mut max_sim = vec![0.0f64; items.len()];
    let mut order = Vec::with_capacity(items.len());
    while !remaining.is_empty() {
        let mut best: Option<(usize, f64)> = None;
        for (pos, &i) in remaining.iter().enumerate() {
            let value = mmr_score(relevance(scores[i]), max_sim[i], lambda);
            let better = match best {
                None => true,
                Some((b, best_value)) => {
                    value > best_value || (value == best_value && scores[i] > scores[remaining[b]])
                }
            };
            if better {
                best = Some((pos, value));
            }
        }
        let Some((pos, _)) = best else { break };
        let picked = remaining.swap_remove(pos);
        // `swap_remove` changed the order of `remaining`; keep it in the original order so
        // ties keep falling to the earlier item.
        remaining.sort_unstable();
        for &i in &remaining {
            let sim = jaccard(&tokens[picked], &tokens[i]);
            if sim > max_sim[i] {
                max_sim[i] = sim;
            }
        }
        order.push(picked);
    }
    let mut slots: Vec<Option<T>> = items.into_iter().map(Some).collect();
    order.into_iter().filter_map(|i| slots[i].take()).collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "mmr_tests.rs"]
mod tests;
