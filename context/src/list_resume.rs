//! The one home of "resume a whole-history pass from its last run when the history only grew".
//!
//! Why: the passes that run before every model call (hygiene, the tool-loop guard, the
//! executed-argument caps, the request's token sum) each read the whole history, which between
//! two calls only grows. Each keeps the last list it ran over, the setting it ran with, and what
//! it needs to go on (a sum, a verdict, its output); when the next list
//! [extends](MessageList::extends) that one (the same messages, by identity, first) under the
//! same setting, the pass reads only the new messages. Four passes had four copies of that
//! bookkeeping and of its poisoned-lock handling; this is the one.

use std::sync::{Arc, Mutex, MutexGuard};

use rampart_message::MessageList;

/// The last run of a pass: the list it ran over, under setting `K`, with state `S`. Clones
/// share it (the memos that hold one are cloned into every copy of a run loop).
#[derive(Debug)]
pub struct ListResume<K, S> {
    last: Arc<Mutex<Option<Last<K, S>>>>,
}

#[derive(Debug)]
struct Last<K, S> {
    list: MessageList,
    key: K,
    state: S,
}

impl<K, S> Clone for ListResume<K, S> {
    fn clone(&self) -> Self {
        Self {
            last: Arc::clone(&self.last),
        }
    }
}

impl<K, S> Default for ListResume<K, S> {
    fn default() -> Self {
        Self {
            last: Arc::new(Mutex::new(None)),
        }
    }
}

/// Where a pass resumes: the length of the list it last ran over (the new messages are
/// `list[from..]`), and what it kept with that list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resumed<S> {
    /// How many messages of the new list the last run already covered.
    pub from: usize,
    /// What the last run kept to go on with.
    pub state: S,
}

impl<K: PartialEq, S: Clone> ListResume<K, S> {
    /// The last run to go on from, when `list` extends the list it ran over under the same
    /// `key`; `None` when the pass must run whole. The lock is not held afterwards, so a long
    /// pass never blocks another thread sharing the memo.
    pub fn resume(&self, list: &MessageList, key: &K) -> Option<Resumed<S>> {
        self.lock()
            .as_ref()
            .filter(|last| last.key == *key && list.extends(&last.list))
            .map(|last| Resumed {
                from: last.list.len(),
                state: last.state.clone(),
            })
    }

    /// Keeps `list`, run over under `key`, with `state`, for the next call to resume from.
    pub fn keep(&self, list: &MessageList, key: K, state: S) {
        *self.lock() = Some(Last {
            list: list.clone(),
            key,
            state,
        });
    }

    /// Forgets the last run (the pass's result cannot be resumed from: it changed the list).
    pub fn forget(&self) {
        *self.lock() = None;
    }

    fn lock(&self) -> MutexGuard<'_, Option<Last<K, S>>> {
        // A pass that panicked left at worst a stale entry, which `resume` checks like any
        // other: the memo is still sound, so a poisoned lock is taken as it is.
        match self.last.lock() {
            Ok(last) => last,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "list_resume_tests.rs"]
mod tests;
