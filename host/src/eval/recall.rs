//! Recoverable retention: of the facts the final request lost, which ones the tools the host
//! offers the model (the engine's recall tools, the memory tools) can bring back, measured
//! without a model.
//!
//! The probe stands in for a model that remembers roughly what was said but not the detail:
//! for each lost fact it takes up to [`PROBE_WORDS`] words from *around* the fact in the
//! message it was mined from (never the fact, nor a word the fact contains), searches with
//! them, and reads what the search names, within [`MAX_CALLS_PER_FACT`] tool calls and
//! [`MAX_TOKENS_PER_FACT`] tokens of answers. The fact counts when a tool answer holds it.
//!
//! Which tools: `lcm_grep` (with the tool's own default number of hits, as a model reading
//! its schema asks) then `lcm_describe` of its hits (the lossless engine), and
//! `memory_search` then `memory_get` of its first hit (memory notes the flushes wrote). A
//! fact is never "recovered" by a tool the cell's engine and memory do not offer.

use std::collections::{HashMap, HashSet};

use rampart_engine_api::AgentMessage;
use serde_json::{Value, json};

use crate::providers::text::{as_user_text, content_text};

/// Words of context a probe searches with.
pub const PROBE_WORDS: usize = 3;
/// Tool calls the probe makes at most for one fact.
pub const MAX_CALLS_PER_FACT: usize = 4;
/// Tokens of tool answers the probe reads at most for one fact (bytes / 4).
pub const MAX_TOKENS_PER_FACT: usize = 8_000;
/// Bytes before a hit's offset the probe reads from (the fact may precede the words found).
const READ_BEFORE_HIT: u64 = 512;
/// How far from the fact (in bytes, each side) the probe's words may be.
const CONTEXT_BYTES: usize = 160;

/// Tools a probe can call: answered by name with JSON arguments; `None` when not offered.
pub trait RecallTools {
    /// Whether `name` is offered.
    fn offers(&self, name: &str) -> bool;
    /// The tool's answer text.
    fn call(&self, name: &str, arguments: Value) -> Option<String>;
}

impl RecallTools for (crate::run::host_tools::HostTools<'_>, Option<String>) {
    fn offers(&self, name: &str) -> bool {
        self.0.answers(name)
    }

    fn call(&self, name: &str, arguments: Value) -> Option<String> {
        let call = rampart_message::ToolCall {
            id: "eval_probe".into(),
            name: name.into(),
            arguments,
            thought_signature: None,
            extra: Default::default(),
        };
        self.0
            .answer(&call, self.1.as_deref())
            .map(|(text, _)| text)
    }
}

/// The transcript's words and how often each occurs, so that a probe can prefer the words a
/// reader would remember: a name that occurs once says where a fact was, `href` or `status`
/// (which occur in every other tool output) says nothing. Built once per transcript.
pub struct ProbeIndex {
    /// The text of each user, tool and other non-assistant message, in order.
    texts: Vec<String>,
    /// Occurrences of each probe-able word (lowercase) across `texts`.
    counts: HashMap<String, u32>,
}

impl ProbeIndex {
    /// Indexes the user, tool and other non-assistant messages of a transcript (the ones
    /// facts are mined from).
    pub fn new<'a>(messages: impl IntoIterator<Item = &'a AgentMessage>) -> Self {
        let texts: Vec<String> = messages
            .into_iter()
            .filter_map(|m| match m {
                AgentMessage::User(m) => Some(content_text(&m.content)),
                AgentMessage::ToolResult(m) => Some(content_text(&m.content)),
                AgentMessage::Assistant(_) => None,
                other => Some(as_user_text(other).unwrap_or_default()),
            })
            .collect();
        let mut counts: HashMap<String, u32> = HashMap::new();
        for text in &texts {
            for (start, end) in words(text) {
                *counts.entry(text[start..end].to_lowercase()).or_default() += 1;
            }
        }
        Self { texts, counts }
    }

    /// The probe words for `fact`: up to [`PROBE_WORDS`] words (see [`words`]) within
    /// [`CONTEXT_BYTES`] of its first mention, in text order, none of them a common word or a
    /// word the fact contains. The rarest words in the transcript are taken first, the nearest
    /// among equally rare ones: a reader remembers the distinctive words around a detail, not
    /// the markup or boilerplate every message shares. `None` when the fact has no such context.
    pub fn probe(&self, fact: &str) -> Option<String> {
        let text = self.texts.iter().find(|t| t.contains(fact))?;
        let at = text.find(fact)?;
        let end = at + fact.len();
        let fact_lower = fact.to_lowercase();
        let mut candidates: Vec<(u32, usize, usize, String)> = Vec::new();
        let mut seen = HashSet::new();
        for (start, stop) in words(text) {
            // Only whole words outside the fact, within reach of it.
            let overlaps = start < end && stop > at;
            let distance = if stop <= at {
                at - stop
            } else {
                start.saturating_sub(end)
            };
            let word = text[start..stop].to_lowercase();
            if overlaps
                || distance > CONTEXT_BYTES
                || fact_lower.contains(&word)
                || STOP_WORDS.contains(&word.as_str())
                || !seen.insert(word.clone())
            {
                continue;
            }
            let count = self.counts.get(&word).copied().unwrap_or(1);
            candidates.push((count, distance, start, word));
        }
        candidates.sort();
        candidates.truncate(PROBE_WORDS);
        if candidates.is_empty() {
            return None;
        }
        candidates.sort_by_key(|c| c.2);
        Some(
            candidates
                .into_iter()
                .map(|c| c.3)
                .collect::<Vec<_>>()
                .join(" "),
        )
    }
}

/// The words of `text` as byte ranges: runs of letters and digits (what a full-text index
/// takes as one term) with four or more letters, leaving out hexadecimal runs with a digit
/// (hashes and ids: no one remembers `3cdfb9`, and they are facts, not context). An ideograph
/// or syllable of Chinese, Japanese or Korean counts as two letters: two of them (`你好`) make
/// a word as `hello` does, where "four letters" would have left a CJK message no words at all.
fn words(text: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut start: Option<usize> = None;
    text.char_indices()
        .chain([(text.len(), ' ')])
        .filter_map(move |(i, c)| {
            if c.is_alphanumeric() {
                start.get_or_insert(i);
                return None;
            }
            let from = start.take()?;
            let token = &text[from..i];
            let letters: usize = token
                .chars()
                .filter(|c| c.is_alphabetic())
                .map(|c| if is_wide_letter(c) { 2 } else { 1 })
                .sum();
            let hex = token.chars().any(|c| c.is_ascii_digit())
                && token.chars().all(|c| c.is_ascii_hexdigit());
            (letters >= 4 && !hex).then_some((from, i))
        })
}

/// Whether `c` is a CJK ideograph, kana or Hangul syllable: one such character carries about
/// what two Latin letters do.
fn is_wide_letter(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF        // Hiragana, Katakana
        | 0x3400..=0x4DBF      // CJK Extension A
        | 0x4E00..=0x9FFF      // CJK Unified Ideographs
        | 0xAC00..=0xD7AF      // Hangul syllables
        | 0xF900..=0xFAFF      // CJK Compatibility Ideographs
        | 0x20000..=0x2FA1F) // CJK Extensions B–F, Compatibility Supplement
}

/// The probe words for `fact` in `messages` (see [`ProbeIndex::probe`]); builds the index, so
/// for many facts of one transcript build a [`ProbeIndex`] once instead.
pub fn probe_words<'a>(
    fact: &str,
    messages: impl IntoIterator<Item = &'a AgentMessage>,
) -> Option<String> {
    ProbeIndex::new(messages).probe(fact)
}

/// Whether each of `facts` (with its probe, `None` when it has none) is brought back by
/// `tools` (see the module docs).
pub fn recoverable(facts: &[(String, Option<String>)], tools: &dyn RecallTools) -> Vec<bool> {
    facts
        .iter()
        .map(|(fact, probe)| {
            let ok = probe.as_deref().is_some_and(|p| recover(fact, p, tools));
            if !ok {
                tracing::debug!(fact = %fact, probe = ?probe, "a lost fact the probe did not bring back");
            }
            ok
        })
        .collect()
}

/// A probe's budget for one fact.
struct Budget {
    calls: usize,
    tokens: usize,
}

impl Budget {
    fn spend(&mut self, answer: &str) -> bool {
        if self.calls == 0 || self.tokens == 0 {
            return false;
        }
        self.calls -= 1;
        self.tokens = self.tokens.saturating_sub(answer.len().div_ceil(4));
        true
    }
}

fn recover(fact: &str, probe: &str, tools: &dyn RecallTools) -> bool {
    let mut budget = Budget {
        calls: MAX_CALLS_PER_FACT,
        tokens: MAX_TOKENS_PER_FACT,
    };
    let mut ask = |name: &str, args: Value| -> Option<String> {
        if budget.calls == 0 || budget.tokens == 0 {
            return None;
        }
        let answer = tools.call(name, args)?;
        // The part of an answer past the budget is not read.
        let readable = answer
            .char_indices()
            .take_while(|(i, _)| i / 4 < budget.tokens)
            .last()
            .map(|(i, c)| &answer[..i + c.len_utf8()])
            .unwrap_or("")
            .to_owned();
        budget.spend(&answer);
        Some(readable)
    };
    if tools.offers("lcm_grep")
        && let Some(found) = ask(
            "lcm_grep",
            // No limit: the tool's own default, as a model that reads the tool's schema asks.
            json!({"pattern": probe, "mode": "full_text"}),
        )
    {
        if found.contains(fact) {
            return true;
        }
        // Each hit is read from a little before where its words occur.
        let hits: Vec<(String, u64)> = serde_json::from_str::<Value>(&found)
            .ok()
            .and_then(|v| v["hits"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|h| {
                let id = h["id"].as_str()?.to_owned();
                Some((id, h["offset"].as_u64().unwrap_or(0)))
            })
            .collect();
        if tools.offers("lcm_describe") {
            for (id, offset) in hits {
                let args = json!({"id": id, "offset": offset.saturating_sub(READ_BEFORE_HIT)});
                match ask("lcm_describe", args) {
                    Some(text) if text.contains(fact) => return true,
                    Some(_) => {}
                    None => break,
                }
            }
        }
    }
    if tools.offers("memory_search")
        && let Some(found) = ask("memory_search", json!({"query": probe}))
    {
        if found.contains(fact) {
            return true;
        }
        let path = serde_json::from_str::<Value>(&found)
            .ok()
            .and_then(|v| v["results"][0]["path"].as_str().map(str::to_owned));
        if let Some(path) = path
            && tools.offers("memory_get")
            && ask("memory_get", json!({"path": path})).is_some_and(|t| t.contains(fact))
        {
            return true;
        }
    }
    false
}

/// Words too common to find anything by.
const STOP_WORDS: &[&str] = &[
    "about", "after", "also", "been", "before", "being", "below", "both", "could", "does", "done",
    "each", "file", "files", "from", "have", "here", "into", "just", "like", "line", "lines",
    "made", "make", "more", "most", "must", "need", "only", "other", "over", "same", "should",
    "some", "such", "than", "that", "their", "them", "then", "there", "these", "they", "this",
    "those", "true", "false", "null", "under", "upon", "very", "want", "were", "what", "when",
    "where", "which", "while", "will", "with", "would", "your", "yours",
];

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "recall_tests.rs"]
mod tests;
