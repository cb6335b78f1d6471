//! Token accounting: one counter for the host and every engine.
//!
//! Why one: a budget must mean the same thing on both sides of the ABI. If the host's guard and
//! an engine's `assemble` counted differently, one would let through what the other refuses.
//! So every party counts with a [`TokenCounter`], and the model configuration says which
//! [`CountMode`] a model uses ([`CountMode::for_model`] gives a default the host may override).
//!
//! # Modes
//!
//! - **Estimate** (the default): pi's `estimateTokens`, `ceil(chars / 4)` per message, where
//!   characters are weighted as OpenClaw's `estimateStringChars` does: each CJK, Hangul or kana
//!   character counts 4 ([`estimate_string_chars`], [`is_cjk`] lists the ranges). Right within
//!   a few tens of percent for most models, and free of any vocabulary.
//! - **Exact**: a real BPE count with OpenAI's o200k_base or cl100k_base vocabulary, for models
//!   that use them. Needs the `exact-tokens` cargo feature (on by default); without it, Exact
//!   counts as Estimate does, and [`TokenCounter::is_exact`] says so.
//! - **Calibrated**: pi's `estimateContextTokens`. The context size is the usage the provider
//!   reported on the last assistant reply that was neither aborted nor failed
//!   ([`usage_context_tokens`], pi's `calculateContextTokens`), plus estimates of the messages
//!   after it. The provider's own figure is the truth for everything it saw; only what came
//!   since is estimated. Per-message figures are estimates.
//!
//! # What a message counts
//!
//! The same parts of a message count in every mode, following pi:
//! - user, tool result, custom: the text of their content;
//! - assistant: text, thinking text, and for each tool call its name plus its arguments as
//!   compact JSON;
//! - bash execution: command plus output;
//! - compaction and branch summaries: the summary;
//! - a role we do not know: its whole JSON, so that nothing is ever free.
//!
//! Images have no text to count. Each costs [`IMAGE_CHARS`] (4,800 characters, pi's figure for
//! tool results and custom messages) in Estimate, and [`IMAGE_TOKENS`] (the same 1,200 tokens)
//! in Exact. We charge user images the same, where pi charges nothing: a picture a user pastes
//! costs the provider as much as one a tool returns, and a budget that ignores it overflows.
//!
//! Figures do not include the few tokens of framing a provider adds around each message: that
//! depends on the wire format, and the host's reserve absorbs it.
//!
//! # Counting once
//!
//! A turn hands over the whole history again. [`TokenCounter::count_messages`] and its
//! siblings remember each shared message's figure (the memo is described in `memo.rs`: keyed by
//! the `Arc`'s allocation, which a held `Weak` keeps from being reused, and swept of dead
//! entries), so an unchanged history costs one lookup per message. Clones of a counter share
//! its memo: build one counter per model and clone it, rather than one per call.

#[cfg(feature = "exact-tokens")]
mod exact;
mod memo;
pub(crate) use memo::AddressHasher;

use std::borrow::Borrow;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

use rampart_engine_api::tokens::{Part, visit_parts};
use rampart_message::{AgentMessage, MessageList, SharedMessage, StopReason, Usage};

pub use memo::MemoStats;
/// The estimate is defined once, in the engine API, so that an engine without this library
/// estimates exactly as the host does.
pub use rampart_engine_api::tokens::{
    CHARS_PER_TOKEN, IMAGE_CHARS, estimate_message_tokens, estimate_string_chars, is_cjk,
    message_chars,
};

/// Tokens one image is worth in Exact mode: [`IMAGE_CHARS`] at 4 characters a token, so that
/// the modes agree on images.
pub const IMAGE_TOKENS: u64 = IMAGE_CHARS / CHARS_PER_TOKEN;

/// Whether this build can count exactly (the `exact-tokens` feature). Why public: a host can
/// warn when its configuration asks for exact counts that this engine build will estimate.
pub const EXACT_TOKENS_AVAILABLE: bool = cfg!(feature = "exact-tokens");

// ---------------------------------------------------------------------------
// Modes
// ---------------------------------------------------------------------------

/// A BPE vocabulary for exact counts. Why only these two: they are the OpenAI encodings of
/// every current model (o200k_base from GPT-4o on, cl100k_base for GPT-4 and GPT-3.5), and a
/// crate ships them for offline use. Other vendors' tokenizers are not public in that form;
/// their models use Estimate or Calibrated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Encoding {
    /// `o200k_base`: GPT-4o, GPT-4.1, GPT-4.5, GPT-5, o1, o3, o4.
    #[serde(rename = "o200k_base")]
    O200kBase,
    /// `cl100k_base`: GPT-4, GPT-3.5 and the text-embedding-3 models.
    #[serde(rename = "cl100k_base")]
    Cl100kBase,
}

impl Encoding {
    /// The name configuration uses, as tiktoken spells it.
    pub fn name(self) -> &'static str {
        match self {
            Self::O200kBase => "o200k_base",
            Self::Cl100kBase => "cl100k_base",
        }
    }

    /// The encoding an OpenAI model id uses, or `None` for a model not known to use one.
    /// A provider prefix (`openai/gpt-4o`) and a fine-tune prefix (`ft:gpt-4o-mini:…`) are
    /// ignored, and case does not matter.
    pub fn for_model(model_id: &str) -> Option<Self> {
        const O200K: &[&str] = &[
            "gpt-4o",
            "chatgpt-4o",
            "gpt-4.1",
            "gpt-4.5",
            "gpt-5",
            "gpt-oss",
            "o1",
            "o3",
            "o4",
        ];
        const CL100K: &[&str] = &[
            "gpt-4",
            "gpt-3.5",
            "gpt-35",
            "text-embedding-3",
            "text-embedding-ada-002",
        ];
        let id = model_id.rsplit('/').next().unwrap_or(model_id);
        let id = id.trim().to_ascii_lowercase();
        let id = id.strip_prefix("ft:").unwrap_or(&id);
        // A family name matches when the id continues with a separator, so that `gpt-4`
        // does not claim `gpt-4o` and `o1` does not claim `o1x`.
        let family = |prefix: &&str| {
            id.strip_prefix(*prefix)
                .is_some_and(|rest| !rest.starts_with(|c: char| c.is_ascii_alphanumeric()))
        };
        if O200K.iter().any(family) {
            Some(Self::O200kBase)
        } else if CL100K.iter().any(family) {
            Some(Self::Cl100kBase)
        } else {
            None
        }
    }
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Encoding {
    type Err = ParseCountModeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "o200k_base" => Ok(Self::O200kBase),
            "cl100k_base" => Ok(Self::Cl100kBase),
            _ => Err(ParseCountModeError {
                input: s.to_owned(),
                expected: "\"o200k_base\" or \"cl100k_base\"",
            }),
        }
    }
}

/// How a [`TokenCounter`] counts. See the module docs for what each mode means.
///
/// In configuration it is written `"estimate"`, `"calibrated"`, `{"exact": "o200k_base"}`, or
/// as a shorthand the encoding alone (`"o200k_base"`, `"cl100k_base"`), which means Exact.
/// It serialises in the first three forms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CountMode {
    /// `ceil(chars / 4)` per message, CJK-weighted; images at fixed costs.
    #[default]
    Estimate,
    /// A real BPE count with this encoding (Estimate when built without `exact-tokens`).
    Exact(Encoding),
    /// The last reported usage plus estimates of the messages after it.
    Calibrated,
}

impl CountMode {
    /// A sensible default for a model id: Exact with the model's encoding for OpenAI models
    /// ([`Encoding::for_model`]: GPT-4o, GPT-4.1, GPT-5, o1, o3, o4 → o200k_base; GPT-4,
    /// GPT-3.5 → cl100k_base), Estimate for everything else. Why not Calibrated by default:
    /// it needs provider usage in the history, which a fresh or imported session lacks; the
    /// host's model configuration can choose it.
    pub fn for_model(model_id: &str) -> Self {
        Encoding::for_model(model_id).map_or(Self::Estimate, Self::Exact)
    }

    /// The configuration spelling: `estimate`, `calibrated`, or the encoding name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Estimate => "estimate",
            Self::Calibrated => "calibrated",
            Self::Exact(encoding) => encoding.name(),
        }
    }
}

impl fmt::Display for CountMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for CountMode {
    type Err = ParseCountModeError;

    /// Accepts `estimate`, `calibrated`, `o200k_base` and `cl100k_base` (the last two meaning
    /// Exact), the names a configuration file uses.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "estimate" => Ok(Self::Estimate),
            "calibrated" => Ok(Self::Calibrated),
            "o200k_base" => Ok(Self::Exact(Encoding::O200kBase)),
            "cl100k_base" => Ok(Self::Exact(Encoding::Cl100kBase)),
            _ => Err(ParseCountModeError {
                input: s.to_owned(),
                expected: if s == "exact" {
                    "an encoding for exact counts: \"o200k_base\" or \"cl100k_base\""
                } else {
                    "\"estimate\", \"calibrated\", \"o200k_base\" or \"cl100k_base\""
                },
            }),
        }
    }
}

impl<'de> Deserialize<'de> for CountMode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ModeVisitor;

        impl<'de> Visitor<'de> for ModeVisitor {
            type Value = CountMode;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "\"estimate\", \"calibrated\", \"o200k_base\", \"cl100k_base\" or \
                     {\"exact\": \"o200k_base\" | \"cl100k_base\"}",
                )
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<CountMode, E> {
                v.parse().map_err(E::custom)
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<CountMode, A::Error> {
                let Some(key) = map.next_key::<String>()? else {
                    return Err(de::Error::invalid_length(0, &self));
                };
                if key != "exact" {
                    return Err(de::Error::unknown_variant(&key, &["exact"]));
                }
                let encoding: Encoding = map.next_value()?;
                if map.next_key::<String>()?.is_some() {
                    return Err(de::Error::invalid_length(2, &self));
                }
                Ok(CountMode::Exact(encoding))
            }
        }

        deserializer.deserialize_any(ModeVisitor)
    }
}

/// A counting mode or encoding name that is not one of ours; the message lists the allowed
/// names, so a configuration error can say what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown token counting mode {input:?}: expected {expected}")]
pub struct ParseCountModeError {
    input: String,
    expected: &'static str,
}

// ---------------------------------------------------------------------------
// The counter
// ---------------------------------------------------------------------------

/// Per-message counts of a history and the figure to budget with.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenReport {
    /// One figure per message, in order. In Calibrated mode these are estimates.
    pub per_message: Vec<u64>,
    /// The size of the whole history: the sum of `per_message`, except in Calibrated mode
    /// with an anchor, where it is the anchor's usage plus the figures after it.
    pub total: u64,
    /// In Calibrated mode, the reply whose reported usage `total` starts from.
    pub anchor: Option<UsageAnchor>,
}

/// The assistant reply a calibrated count starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageAnchor {
    /// Its index in the messages counted.
    pub index: usize,
    /// Its context size as the provider reported it ([`usage_context_tokens`]).
    pub tokens: u64,
}

/// Counts tokens of text, messages and histories in one [`CountMode`], remembering the figure
/// of each shared message. Cheap to clone (clones share the memo), and `Send + Sync`, so one
/// counter can serve every thread of a host or an engine.
#[derive(Clone, Default)]
pub struct TokenCounter {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    mode: CountMode,
    memo: memo::Memo,
    /// The last list [`TokenCounter::count_list`] summed, and its sum.
    last_list: crate::list_resume::ListResume<(), u64>,
}

impl fmt::Debug for TokenCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenCounter")
            .field("mode", &self.inner.mode)
            .field("exact", &self.is_exact())
            .finish_non_exhaustive()
    }
}

impl TokenCounter {
    /// A counter in `mode`, with an empty memo.
    pub fn new(mode: CountMode) -> Self {
        Self {
            inner: Arc::new(Inner {
                mode,
                ..Inner::default()
            }),
        }
    }

    /// A counter in Estimate mode.
    pub fn estimate() -> Self {
        Self::new(CountMode::Estimate)
    }

    /// A counter in the default mode for `model_id` ([`CountMode::for_model`]).
    pub fn for_model(model_id: &str) -> Self {
        Self::new(CountMode::for_model(model_id))
    }

    /// The mode this counter was built with.
    pub fn mode(&self) -> CountMode {
        self.inner.mode
    }

    /// Whether counts are real BPE counts: Exact mode in a build with `exact-tokens`.
    pub fn is_exact(&self) -> bool {
        self.encoding().is_some()
    }

    /// Loads the vocabulary now (Exact mode), so that the first count of a turn does not pay
    /// for it. Counting loads it anyway; this only moves the cost.
    pub fn preload(&self) {
        #[cfg(feature = "exact-tokens")]
        if let Some(encoding) = self.encoding() {
            exact::preload(encoding);
        }
    }

    /// The tokens of `text` on its own. In Estimate and Calibrated mode, `ceil(chars / 4)`
    /// with CJK weighting.
    pub fn count_text(&self, text: &str) -> u64 {
        match self.encoding() {
            Some(encoding) => bpe_count(encoding, text),
            None => estimate_string_chars(text).div_ceil(CHARS_PER_TOKEN),
        }
    }

    /// The tokens of one message, computed now (nothing is remembered: a bare reference has no
    /// identity to remember it by). Prefer [`Self::count_shared`] for shared messages.
    pub fn count_message(&self, message: &AgentMessage) -> u64 {
        match self.encoding() {
            Some(encoding) => {
                let mut tokens = 0u64;
                visit_parts(message, &mut |part| {
                    tokens += match part {
                        Part::Text(text) => bpe_count(encoding, text),
                        Part::Owned(text) => bpe_count(encoding, &text),
                        Part::Image => IMAGE_TOKENS,
                    }
                });
                tokens
            }
            None => message_chars(message).div_ceil(CHARS_PER_TOKEN),
        }
    }

    /// The tokens of one shared message, from the memo when it was counted before.
    pub fn count_shared(&self, message: &SharedMessage) -> u64 {
        self.count_total(std::slice::from_ref(message))
    }

    /// Per-message counts of `messages` and the figure to budget with (see [`TokenReport`]).
    /// Each message is counted once for as long as it lives; later calls look it up.
    pub fn count_messages(&self, messages: &[SharedMessage]) -> TokenReport {
        let mut per_message = vec![0u64; messages.len()];
        let missing = self
            .inner
            .memo
            .probe(messages, |i, tokens| per_message[i] = tokens);
        let counted = self.count_missing(messages, &missing);
        for &(i, tokens) in &counted {
            per_message[i] = tokens;
        }
        let sum = |figures: &[u64]| figures.iter().fold(0u64, |a, &t| a.saturating_add(t));
        let anchor = match self.inner.mode {
            CountMode::Calibrated => last_usage_anchor(messages),
            _ => None,
        };
        let total = match anchor {
            Some(a) => a
                .tokens
                .saturating_add(sum(per_message.get(a.index + 1..).unwrap_or(&[]))),
            None => sum(&per_message),
        };
        TokenReport {
            per_message,
            total,
            anchor,
        }
    }

    /// The sum of the per-message counts of `messages`, memoised like
    /// [`Self::count_messages`] but without building the list. No usage calibration: this is
    /// what a slice of history costs, as an engine needs when it chooses what to keep.
    pub fn count_total(&self, messages: &[SharedMessage]) -> u64 {
        let mut total = 0u64;
        let missing = self
            .inner
            .memo
            .probe(messages, |_, tokens| total = total.saturating_add(tokens));
        for (_, tokens) in self.count_missing(messages, &missing) {
            total = total.saturating_add(tokens);
        }
        total
    }

    /// [`Self::count_total`] of a list, resuming from the last list this counter summed that
    /// way when `list` [extends](MessageList::extends) it: a history that grew by a turn costs
    /// the turn's messages, not a lookup per message of the history (a replay of tiny messages
    /// spent a tenth of each call on those lookups, BENCHMARKS.md issue 24 item 10).
    pub fn count_list(&self, list: &MessageList) -> u64 {
        // The memo's lock is not held while counting: a long exact count must not block the
        // other threads that share this counter.
        let total = match self.inner.last_list.resume(list, &()) {
            Some(last) => last
                .state
                .saturating_add(self.count_total(&list[last.from..])),
            None => self.count_total(list),
        };
        self.inner.last_list.keep(list, (), total);
        total
    }

    /// The size of the context `messages` make. In Calibrated mode that is pi's
    /// `estimateContextTokens`: the last usable reported usage ([`last_usage_anchor`]) plus the
    /// counts of the messages after it, or the sum of all counts when no reply reported any.
    /// In the other modes it is [`Self::count_total`]. Only the messages after the anchor are
    /// counted, so a calibrated figure costs O(new messages).
    pub fn context_tokens(&self, messages: &[SharedMessage]) -> u64 {
        if self.inner.mode == CountMode::Calibrated
            && let Some(anchor) = last_usage_anchor(messages)
        {
            let after = messages.get(anchor.index + 1..).unwrap_or(&[]);
            return anchor.tokens.saturating_add(self.count_total(after));
        }
        self.count_total(messages)
    }

    /// What the memo has done so far: hits, computed counts, entries held.
    pub fn memo_stats(&self) -> MemoStats {
        self.inner.memo.stats()
    }

    /// Forgets every remembered figure (for every clone of this counter).
    pub fn clear_memo(&self) {
        self.inner.memo.clear();
    }

    fn encoding(&self) -> Option<Encoding> {
        match self.inner.mode {
            CountMode::Exact(encoding) if EXACT_TOKENS_AVAILABLE => Some(encoding),
            _ => None,
        }
    }

    /// Counts the messages at `missing` (outside the memo's lock) and remembers them.
    fn count_missing(&self, messages: &[SharedMessage], missing: &[usize]) -> Vec<(usize, u64)> {
        let counted: Vec<(usize, u64)> = missing
            .iter()
            .filter_map(|&i| Some((i, self.count_message(messages.get(i)?))))
            .collect();
        self.inner.memo.remember(messages, &counted);
        counted
    }
}

#[cfg(feature = "exact-tokens")]
fn bpe_count(encoding: Encoding, text: &str) -> u64 {
    exact::count(encoding, text)
}

/// Without `exact-tokens` no counter reaches this (it has no encoding); kept so that the
/// counting code reads the same in both builds.
#[cfg(not(feature = "exact-tokens"))]
fn bpe_count(_encoding: Encoding, text: &str) -> u64 {
    estimate_string_chars(text).div_ceil(CHARS_PER_TOKEN)
}

// ---------------------------------------------------------------------------
// Free functions: the estimate and usage calibration without a counter
// ---------------------------------------------------------------------------

/// The estimated tokens of a sequence of messages: the sum of the per-message estimates
/// (rounded per message, as pi does).
pub fn estimate_messages_tokens<'a>(messages: impl IntoIterator<Item = &'a AgentMessage>) -> u64 {
    messages.into_iter().map(estimate_message_tokens).sum()
}

/// The context size a reply's usage reports: `totalTokens` when present and non-zero, else
/// input + output + cache reads + cache writes (pi's `calculateContextTokens`). Why output too:
/// the reply becomes part of the next request's context.
pub fn usage_context_tokens(usage: &Usage) -> u64 {
    match usage.total_tokens {
        Some(total) if total > 0 => total,
        _ => usage
            .input
            .saturating_add(usage.output)
            .saturating_add(usage.cache_read)
            .saturating_add(usage.cache_write),
    }
}

/// The last assistant reply whose usage can anchor a calibrated count: not aborted, not
/// failed (as pi), and reporting a non-zero size. Why skip a zero: synthetic replies and usage
/// cleared as stale (OpenClaw zeroes usage from before the latest compaction) carry no
/// information, and anchoring on them would drop everything before them from the count. pi
/// would anchor on a zero; this is the one place we differ.
pub fn last_usage_anchor<M: Borrow<AgentMessage>>(messages: &[M]) -> Option<UsageAnchor> {
    messages
        .iter()
        .enumerate()
        .rev()
        .find_map(|(index, message)| match message.borrow() {
            AgentMessage::Assistant(reply)
                if !matches!(reply.stop_reason, StopReason::Aborted | StopReason::Error) =>
            {
                let tokens = usage_context_tokens(&reply.usage);
                (tokens > 0).then_some(UsageAnchor { index, tokens })
            }
            _ => None,
        })
}

/// pi's `estimateContextTokens` for messages without a counter: the last usable usage plus the
/// estimates of the messages after it, or the estimate of everything without one. Nothing is
/// memoised; with shared messages prefer a Calibrated [`TokenCounter::context_tokens`].
pub fn estimate_context_tokens<M: Borrow<AgentMessage>>(messages: &[M]) -> u64 {
    let (base, after) = match last_usage_anchor(messages) {
        Some(anchor) => (
            anchor.tokens,
            messages.get(anchor.index + 1..).unwrap_or(&[]),
        ),
        None => (0, messages),
    };
    after.iter().fold(base, |total, m| {
        total.saturating_add(estimate_message_tokens(m.borrow()))
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn chars_over_four_rounded_up() {
        let m = AgentMessage::user_text("abcde", 0);
        assert_eq!(estimate_message_tokens(&m), 2);
        let m = AgentMessage::user_text("", 0);
        assert_eq!(estimate_message_tokens(&m), 0);
    }

    #[test]
    fn tool_result_counts_text() {
        let m = AgentMessage::tool_result("c1", "read", "x".repeat(400), false, 0);
        assert_eq!(estimate_message_tokens(&m), 100);
    }

    #[test]
    fn counter_is_send_sync_and_cheap_to_clone() {
        fn assert_send_sync<T: Send + Sync + Clone>() {}
        assert_send_sync::<TokenCounter>();
        let a = TokenCounter::estimate();
        let b = a.clone();
        assert!(Arc::ptr_eq(&a.inner, &b.inner));
    }

    #[test]
    fn exact_falls_back_only_without_the_feature() {
        let counter = TokenCounter::new(CountMode::Exact(Encoding::O200kBase));
        assert_eq!(counter.is_exact(), EXACT_TOKENS_AVAILABLE);
        if !EXACT_TOKENS_AVAILABLE {
            assert_eq!(counter.count_text("abcdefgh"), 2);
        }
    }
}
