//! The per-message memo: count a message once and keep the figure.
//!
//! Why: a turn hands the engine and the host the whole history again, and counting it again
//! makes a turn cost O(bytes of history) (OpenClaw spends most of its pruning time recounting).
//! Messages are shared as `Arc<AgentMessage>` and never change once shared, so an allocation
//! stands for its content, and a repeated count costs one hash lookup per message.
//!
//! Design:
//! - The key is the allocation's address. Each entry holds a [`Weak`] to that allocation, and a
//!   `Weak` keeps the allocation (though not the message's own heap data) from being freed, so
//!   the address cannot be reused by another message while the entry exists. A hit is
//!   therefore always the same allocation.
//! - The same `Weak` makes the count safe against mutation: `Arc::get_mut` refuses while a
//!   `Weak` exists, and `Arc::make_mut` moves the value to a new allocation, which is a new key.
//! - An entry whose message has no strong handle left is dead. When the map reaches its sweep
//!   mark, dead entries are dropped and the mark moves to twice the live size (at least
//!   [`MIN_SWEEP`]), so upkeep is amortised O(1) per insert and the map holds at most about
//!   twice the live messages. Beyond [`MAX_ENTRIES`] live entries the memo starts over: counts
//!   are cheap to redo and memory is not.
//! - One lock is taken per batch (a whole history), not per message. Messages not in the memo
//!   are counted outside the lock, so a long exact count never blocks other threads' hits.
//! - Hits and misses are counted, so callers and tests can see that the memo works.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use rampart_message::AgentMessage;
use rampart_message::SharedMessage;

/// The sweep mark never goes below this many entries, so small memos never sweep.
const MIN_SWEEP: usize = 4_096;

/// More live entries than this after a sweep, and the memo is cleared.
const MAX_ENTRIES: usize = 1 << 21;

/// What the memo has done so far; see [`super::TokenCounter::memo_stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoStats {
    /// Counts answered from the memo.
    pub hits: u64,
    /// Counts computed (and then remembered). A shared message is computed once for as long
    /// as it lives, unless the memo was cleared or started over.
    pub misses: u64,
    /// Entries held now, dead ones not yet swept included.
    pub entries: usize,
}

struct Entry {
    /// Pins the allocation so that its address stays ours (see the module docs).
    message: Weak<AgentMessage>,
    tokens: u64,
}

#[derive(Default)]
struct State {
    entries: HashMap<usize, Entry, BuildHasherDefault<AddressHasher>>,
    sweep_at: usize,
}

#[derive(Default)]
pub(crate) struct Memo {
    state: Mutex<State>,
    hits: AtomicU64,
    misses: AtomicU64,
}

fn key(message: &SharedMessage) -> usize {
    Arc::as_ptr(message) as usize
}

impl Memo {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while the lock is held; should something, the map is still sound.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Calls `found(i, tokens)` for every message of `messages` in the memo, and returns the
    /// indices of the others.
    pub(crate) fn probe(
        &self,
        messages: &[SharedMessage],
        mut found: impl FnMut(usize, u64),
    ) -> Vec<usize> {
        let mut missing = Vec::new();
        {
            let state = self.lock();
            for (i, message) in messages.iter().enumerate() {
                match state.entries.get(&key(message)) {
                    // The entry pins this address, so a live entry here is this message.
                    Some(entry) if entry.message.strong_count() > 0 => found(i, entry.tokens),
                    _ => missing.push(i),
                }
            }
        }
        let hits = (messages.len() - missing.len()) as u64;
        self.hits.fetch_add(hits, Ordering::Relaxed);
        missing
    }

    /// Remembers `tokens` for each `(index into messages, tokens)` pair.
    pub(crate) fn remember(&self, messages: &[SharedMessage], counted: &[(usize, u64)]) {
        if counted.is_empty() {
            return;
        }
        self.misses
            .fetch_add(counted.len() as u64, Ordering::Relaxed);
        let mut state = self.lock();
        for &(i, tokens) in counted {
            let Some(message) = messages.get(i) else {
                continue;
            };
            if state.entries.len() >= state.sweep_at.max(MIN_SWEEP) {
                state.sweep();
            }
            state.entries.insert(
                key(message),
                Entry {
                    message: Arc::downgrade(message),
                    tokens,
                },
            );
        }
    }

    pub(crate) fn clear(&self) {
        let mut state = self.lock();
        state.entries = HashMap::default();
        state.sweep_at = 0;
    }

    pub(crate) fn stats(&self) -> MemoStats {
        MemoStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            entries: self.lock().entries.len(),
        }
    }
}

impl State {
    fn sweep(&mut self) {
        self.entries
            .retain(|_, entry| entry.message.strong_count() > 0);
        if self.entries.len() > MAX_ENTRIES {
            self.entries = HashMap::default();
        }
        self.sweep_at = (self.entries.len() * 2).max(MIN_SWEEP);
    }
}

/// A hasher for addresses. Why not the default SipHash: a lookup per message per turn is the
/// whole cost of a memoised count, and addresses need no protection against chosen inputs.
/// The multiply folds high bits into low ones, so aligned addresses still spread over buckets.
/// Shared with the pruning memo, which keys by the same `Arc` addresses.
#[derive(Default)]
pub(crate) struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn write_u64(&mut self, n: u64) {
        let product = u128::from(self.0 ^ n) * 0x9E37_79B9_7F4A_7C15;
        self.0 = (product as u64) ^ ((product >> 64) as u64);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn message(i: usize) -> SharedMessage {
        Arc::new(AgentMessage::user_text(format!("m{i}"), 0))
    }

    #[test]
    fn dead_entries_are_swept_and_the_map_stays_bounded() {
        let memo = Memo::default();
        let kept: Vec<_> = (0..10).map(message).collect();
        memo.remember(&kept, &(0..10).map(|i| (i, 1)).collect::<Vec<_>>());
        for round in 0..5 {
            // Messages that die right after being counted.
            let batch: Vec<_> = (0..MIN_SWEEP)
                .map(|i| message(round * MIN_SWEEP + i))
                .collect();
            let counted: Vec<_> = (0..batch.len()).map(|i| (i, 2)).collect();
            memo.remember(&batch, &counted);
        }
        let stats = memo.stats();
        assert!(stats.entries <= 2 * MIN_SWEEP, "{stats:?}");
        // The live ones survived every sweep.
        let mut hits = 0;
        assert!(memo.probe(&kept, |_, t| hits += t).is_empty());
        assert_eq!(hits, 10);
    }

    #[test]
    fn a_dead_entry_is_a_miss() {
        let memo = Memo::default();
        let a = message(1);
        memo.remember(std::slice::from_ref(&a), &[(0, 7)]);
        let weak = Arc::downgrade(&a);
        drop(a);
        assert_eq!(weak.strong_count(), 0);
        // A new message may or may not land elsewhere; either way it is not a hit.
        let b = message(1);
        assert_eq!(memo.probe(std::slice::from_ref(&b), |_, _| {}), vec![0]);
    }
}
