//! [`MessageMemo`]: a figure or a derived message remembered per shared message, so that a pass
//! a turn runs over the whole history costs one lookup per message instead of re-reading every
//! message's text (or re-copying it) on every turn.
//!
//! Same keying as the token counter's memo (`tokens/memo.rs`) and the pruning memo: the key is
//! the message's allocation, pinned by a [`Weak`] so its address cannot be reused by another
//! message while the entry exists, and so `Arc::get_mut` cannot change a message we remember.
//! Messages never change once shared, so an allocation stands for its content. Dead entries
//! (no strong handle left) are swept when the map reaches twice its live size, so upkeep is
//! amortised O(1) per insert; beyond [`MAX_ENTRIES`] live entries the memo starts over.
//!
//! Why a generic one: the tool-loop guard's character estimate and the hygiene's usage-zeroed
//! copies are each a pure function of one message, and both ran over the whole history on every
//! model call (a replay of 30,000 tiny lines spent a third of its time there).

use std::collections::HashMap;
use std::fmt;
use std::hash::BuildHasherDefault;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use rampart_message::{AgentMessage, SharedMessage};

use crate::tokens::{AddressHasher, MemoStats};

/// The sweep mark never goes below this many entries, so small memos never sweep.
const MIN_SWEEP: usize = 4_096;

/// More live entries than this after a sweep, and the memo starts over.
const MAX_ENTRIES: usize = 1 << 21;

struct Entry<V> {
    /// Pins the allocation so that its address stays this message's.
    message: Weak<AgentMessage>,
    value: V,
}

struct State<V> {
    entries: HashMap<usize, Entry<V>, BuildHasherDefault<AddressHasher>>,
    sweep_at: usize,
    hits: u64,
    misses: u64,
}

impl<V> Default for State<V> {
    fn default() -> Self {
        Self {
            entries: HashMap::default(),
            sweep_at: 0,
            hits: 0,
            misses: 0,
        }
    }
}

impl<V> State<V> {
    fn sweep(&mut self) {
        self.entries
            .retain(|_, entry| entry.message.strong_count() > 0);
        if self.entries.len() > MAX_ENTRIES {
            self.entries = HashMap::default();
        }
        self.sweep_at = (self.entries.len() * 2).max(MIN_SWEEP);
    }
}

/// A value of type `V` per shared message, computed once for as long as the message lives (see
/// the module docs). Clones share the memo; it is `Send + Sync` when `V` is, and a caller
/// takes its lock once per pass ([`MessageMemo::batch`]), not once per message.
pub struct MessageMemo<V> {
    inner: Arc<Mutex<State<V>>>,
}

impl<V> Clone for MessageMemo<V> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<V> Default for MessageMemo<V> {
    fn default() -> Self {
        Self {
            inner: Arc::new(Mutex::new(State::default())),
        }
    }
}

impl<V> fmt::Debug for MessageMemo<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MessageMemo")
            .field("stats", &self.stats())
            .finish()
    }
}

impl<V> MessageMemo<V> {
    /// An empty memo.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State<V>> {
        // Nothing panics while the lock is held; should something, the map is still sound.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Lookups answered from the memo, values computed, entries held (dead ones not yet swept
    /// included). Why: tests and benches can check that steady-state turns hit.
    pub fn stats(&self) -> MemoStats {
        let state = self.lock();
        MemoStats {
            hits: state.hits,
            misses: state.misses,
            entries: state.entries.len(),
        }
    }

    /// Runs `f` with the memo locked once, for a pass over many messages.
    pub fn batch<R>(&self, f: impl FnOnce(&mut MemoBatch<'_, V>) -> R) -> R {
        let mut batch = MemoBatch { state: self.lock() };
        f(&mut batch)
    }
}

/// The memo while a pass holds its lock ([`MessageMemo::batch`]).
pub struct MemoBatch<'m, V> {
    state: MutexGuard<'m, State<V>>,
}

impl<V: Clone> MemoBatch<'_, V> {
    /// The value remembered for `message`, or `make(message)` remembered now.
    pub fn get_or_insert_with(
        &mut self,
        message: &SharedMessage,
        make: impl FnOnce(&AgentMessage) -> V,
    ) -> V {
        let key = Arc::as_ptr(message) as usize;
        if let Some(entry) = self.state.entries.get(&key)
            // The entry pins this address, so a live entry here is this message.
            && entry.message.strong_count() > 0
        {
            let value = entry.value.clone();
            self.state.hits += 1;
            return value;
        }
        let value = make(message);
        self.state.misses += 1;
        if self.state.entries.len() >= self.state.sweep_at.max(MIN_SWEEP) {
            self.state.sweep();
        }
        self.state.entries.insert(
            key,
            Entry {
                message: Arc::downgrade(message),
                value: value.clone(),
            },
        );
        value
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "message_memo_tests.rs"]
mod tests;
