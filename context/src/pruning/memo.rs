//! [`PruneMemo`]: what pruning learned about each shared message, kept across turns.
//!
//! Why: pruning is request-local, so every turn hands it the same untouched history again.
//! Without a memo a turn recounts every message (OpenClaw spends most of its pruning time
//! there) and rebuilds every trimmed or cleared result, so it costs O(bytes of history) and
//! hands the provider layer new allocations for the same text each time. With the memo a turn
//! costs one lookup per message, and a pruned result is the same `Arc` turn after turn, which
//! the token counter's memo and the ABI's pointer-identity deltas both reward.
//!
//! Same keying as the token counter's memo (`tokens/memo.rs`): the key is the message's
//! allocation, pinned by a [`Weak`] so its address cannot be reused while the entry exists and
//! so `Arc::get_mut` cannot change a message we remember. Dead entries are swept when the map
//! doubles. It is a separate map rather than that one because the values differ: besides a
//! count, an entry keeps the trimmed and cleared versions of a tool result.

use std::collections::HashMap;
use std::fmt;
use std::hash::BuildHasherDefault;

use crate::tokens::AddressHasher;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use super::estimate::{Measure, measure};
use super::facts::{Facts, Replacement, compute_clear, compute_soft_trim};
use super::settings::SoftTrim;
use crate::tokens::MemoStats;
use rampart_message::SharedMessage;
use rampart_message::{AgentMessage, ToolResultMessage};

/// The sweep mark never goes below this many entries, so small memos never sweep.
const MIN_SWEEP: usize = 4_096;

/// More live entries than this after a sweep, and the memo starts over.
const MAX_ENTRIES: usize = 1 << 20;

/// Remembers, per shared message, its pruning size and its pruned versions, so that repeated
/// pruning of a growing history costs O(messages) per turn.
///
/// Keep one per session (or per engine) and pass it to
/// [`crate::pruning::prune_context_messages_with`] on every turn. Clones share the memo; it is
/// `Send + Sync` and locks once per pruning call. Derived versions depend on the soft-trim
/// settings and the placeholder: a call with different ones drops them (counts are kept).
#[derive(Clone, Default)]
pub struct PruneMemo {
    inner: Arc<Mutex<State>>,
}

impl PruneMemo {
    /// An empty memo.
    pub fn new() -> Self {
        Self::default()
    }

    /// Lookups answered from the memo, messages measured, entries held (dead ones not yet
    /// swept included). Why: callers and benches can check that steady-state turns hit.
    pub fn stats(&self) -> MemoStats {
        let state = self.lock();
        MemoStats {
            hits: state.hits,
            misses: state.misses,
            entries: state.entries.len(),
        }
    }

    /// Forgets everything (for every clone).
    pub fn clear(&self) {
        *self.lock() = State::default();
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while the lock is held; should something, the map is still sound.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl fmt::Debug for PruneMemo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PruneMemo")
            .field("stats", &self.stats())
            .finish()
    }
}

#[derive(Default)]
pub(crate) struct State {
    entries: HashMap<usize, Entry, BuildHasherDefault<AddressHasher>>,
    sweep_at: usize,
    /// The soft trim and placeholder the derived versions in `entries` were made with.
    derived_for: Option<(SoftTrim, String)>,
    hits: u64,
    misses: u64,
}

struct Entry {
    /// Pins the allocation so that its address stays ours.
    message: Weak<AgentMessage>,
    measure: Measure,
    /// `None` until computed; `Some(None)` when the soft trim leaves the result as it is.
    trimmed: Option<Option<Replacement>>,
    /// `None` until computed; `Some(None)` when the result already is the placeholder.
    cleared: Option<Option<Replacement>>,
}

fn key(message: &SharedMessage) -> usize {
    Arc::as_ptr(message) as usize
}

impl State {
    /// Drops derived versions made with other settings than these.
    pub(crate) fn prepare(&mut self, trim: &SoftTrim, placeholder: &str) {
        let same = self
            .derived_for
            .as_ref()
            .is_some_and(|(t, p)| t == trim && p == placeholder);
        if !same {
            for entry in self.entries.values_mut() {
                entry.trimmed = None;
                entry.cleared = None;
            }
            self.derived_for = Some((*trim, placeholder.to_owned()));
        }
    }

    /// The live entry for `message`, if there is one.
    fn live(&mut self, message: &SharedMessage) -> Option<&mut Entry> {
        self.entries
            .get_mut(&key(message))
            .filter(|e| e.message.strong_count() > 0)
    }

    fn insert(&mut self, message: &SharedMessage, measure: Measure) {
        if self.entries.len() >= self.sweep_at.max(MIN_SWEEP) {
            self.sweep();
        }
        self.entries.insert(
            key(message),
            Entry {
                message: Arc::downgrade(message),
                measure,
                trimmed: None,
                cleared: None,
            },
        );
    }

    fn sweep(&mut self) {
        self.entries.retain(|_, e| e.message.strong_count() > 0);
        if self.entries.len() > MAX_ENTRIES {
            self.entries = HashMap::default();
        }
        self.sweep_at = (self.entries.len() * 2).max(MIN_SWEEP);
    }
}

impl Facts for State {
    fn measure_all(&mut self, list: &[SharedMessage]) -> Vec<Measure> {
        let mut out = Vec::with_capacity(list.len());
        for message in list {
            if let Some(entry) = self.live(message) {
                out.push(entry.measure);
                self.hits += 1;
                continue;
            }
            let measured = measure(message);
            self.misses += 1;
            self.insert(message, measured);
            out.push(measured);
        }
        out
    }

    fn soft_trimmed(
        &mut self,
        message: &SharedMessage,
        result: &ToolResultMessage,
        trim: &SoftTrim,
    ) -> Option<Replacement> {
        match self.live(message) {
            Some(entry) => entry
                .trimmed
                .get_or_insert_with(|| compute_soft_trim(result, trim))
                .clone(),
            // Only after the memo started over in the middle of this call.
            None => compute_soft_trim(result, trim),
        }
    }

    fn cleared(
        &mut self,
        message: &SharedMessage,
        result: &ToolResultMessage,
        placeholder: &str,
    ) -> Option<Replacement> {
        match self.live(message) {
            Some(entry) => entry
                .cleared
                .get_or_insert_with(|| compute_clear(result, placeholder))
                .clone(),
            None => compute_clear(result, placeholder),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::pruning::test_support::*;

    #[test]
    fn the_memo_can_be_shared_between_threads() {
        fn shareable<T: Send + Sync>() {}
        shareable::<PruneMemo>();
    }

    #[test]
    fn counts_each_message_once_and_sweeps_dead_ones() {
        let memo = PruneMemo::new();
        let kept = list(vec![user("a"), tool("t", "x", "bcd")]);
        let first = memo.lock().measure_all(&kept);
        let again = memo.lock().measure_all(&kept);
        assert_eq!(first, again);
        assert_eq!(first[1].chars, 3);
        assert_eq!(memo.stats().hits, 2);
        assert_eq!(memo.stats().misses, 2);

        for round in 0..4 {
            // Messages that die right after being measured.
            let batch = list(
                (0..MIN_SWEEP)
                    .map(|i| user(&format!("{round}-{i}")))
                    .collect(),
            );
            memo.lock().measure_all(&batch);
        }
        let stats = memo.stats();
        assert!(stats.entries <= 2 * MIN_SWEEP + 2, "{stats:?}");
        let hits = stats.hits;
        memo.lock().measure_all(&kept);
        assert_eq!(
            memo.stats().hits,
            hits + 2,
            "the live entries survived the sweeps"
        );
    }

    #[test]
    fn derived_versions_are_dropped_when_settings_change() {
        let memo = PruneMemo::new();
        let l = list(vec![tool("t", "x", &"x".repeat(100))]);
        let AgentMessage::ToolResult(r) = l[0].as_ref() else {
            panic!()
        };
        let trim = SoftTrim {
            max_chars: 10,
            head_chars: 2,
            tail_chars: 2,
        };
        let mut state = memo.lock();
        state.prepare(&trim, "[x]");
        state.measure_all(&l);
        let a = state.soft_trimmed(&l[0], r, &trim).unwrap();
        let b = state.soft_trimmed(&l[0], r, &trim).unwrap();
        assert!(Arc::ptr_eq(&a.message, &b.message), "the same trimmed Arc");
        let other = SoftTrim {
            head_chars: 5,
            ..trim
        };
        state.prepare(&other, "[x]");
        let c = state.soft_trimmed(&l[0], r, &other).unwrap();
        assert!(!Arc::ptr_eq(&a.message, &c.message));
        assert!(c.chars > a.chars);
    }
}
