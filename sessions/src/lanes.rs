//! In-process lanes: one serial queue per session key, plus a global bound on how many
//! sessions run at once.
//!
//! Why both: two turns of one session must never interleave (they append to the same
//! transcript and the same registry entry), while different sessions may run in parallel up
//! to what the machine and the provider's rate limits allow.
//!
//! # Entering a lane
//!
//! [`Lanes::run`] first waits for the key's lane (first come, first served), then for a
//! global permit, then runs the work on the calling thread. The order matters: a caller
//! queued behind a busy session does not sit on a permit that another session could use.
//!
//! # Work that is already inside a lane
//!
//! A turn that overflows the context compacts from inside its own lane. Queuing that
//! compaction on the same lane would wait for the turn, which waits for the compaction: a
//! deadlock. So:
//!
//! - **Same key, same thread**: [`Lanes::run`] sees (through a thread-local stack of held
//!   lanes) that this thread already holds the lane and runs the work directly.
//! - **Same key, another thread** (e.g. a compaction moved to a worker thread to enforce a
//!   timeout): pass the [`LaneGuard`] from [`Lanes::run_with_guard`] to it and call
//!   [`LaneGuard::run_direct`]. The guard is a borrow, so it cannot outlive the lane.
//! - **Another key while holding a lane**: the nested work takes the other key's lane as
//!   usual but *borrows the outer permit* instead of taking a second one, so nesting can never
//!   deadlock on the global limit. Lanes are still taken one at a time, so callers must not
//!   create cycles (session A's work entering B while B's work enters A): that is an ordinary
//!   lock-order deadlock and no queue can resolve it.
//!
//! # Fairness
//!
//! Waiters on one key are served in arrival order. The single exception is nested work that
//! borrows a permit: while the global limit is saturated it may pass waiters that are only
//! waiting for a permit, because those waiters may need exactly the permit the nested work's
//! outer lane holds. Lane heads that wait for a permit are served in arrival order too.
//!
//! Keys are normalised with [`crate::store::normalize_key`], so `Main` and `main` share a
//! lane just as they share a registry entry.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::store::normalize_key;

/// Distinguishes `Lanes` instances in the thread-local stack: holding lane `x` of one
/// instance says nothing about lane `x` of another.
static NEXT_LANES_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// `(lanes id, key)` for every lane the current thread is inside, innermost last.
    static HELD: RefCell<Vec<(u64, String)>> = const { RefCell::new(Vec::new()) };
}

/// Per-session serial lanes with a global concurrency limit. Cheap to clone; clones share
/// the same lanes.
#[derive(Clone)]
pub struct Lanes {
    shared: Arc<Shared>,
}

impl fmt::Debug for Lanes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lanes")
            .field("global_limit", &self.shared.limit)
            .field("running", &self.running())
            .finish()
    }
}

struct Shared {
    id: u64,
    limit: usize,
    state: Mutex<State>,
    /// Signalled whenever a lane or permit is taken, released or given up; waiters re-check
    /// their own eligibility (simple, and the number of waiters is small).
    changed: Condvar,
}

#[derive(Default)]
struct State {
    next_ticket: u64,
    /// Global permits taken (nested work that borrows a permit does not count).
    in_use: usize,
    /// Keys whose lane is held.
    busy: HashSet<String>,
    /// Everyone waiting, by arrival ticket.
    waiters: BTreeMap<u64, Waiter>,
    /// Waiting tickets per key, in arrival order.
    queues: HashMap<String, VecDeque<u64>>,
}

struct Waiter {
    key: String,
    borrows_permit: bool,
}

/// Which wait a [`LaneTimeout`] gave up on, so the message can say what to change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneStage {
    /// The session's own lane was busy (another turn or compaction of it was running or
    /// queued first).
    SessionLane,
    /// The lane was free but the global limit was reached.
    GlobalLimit,
}

impl fmt::Display for LaneStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::SessionLane => {
                "another turn or compaction of this session was still running or queued \
                 ahead; retry when it finishes, or allow a longer wait"
            }
            Self::GlobalLimit => {
                "the global limit of concurrently running sessions was reached; retry later, \
                 or raise the global limit"
            }
        })
    }
}

/// [`Lanes::try_run`] gave up before the work could start. The work did not run.
#[derive(Debug, thiserror::Error)]
#[error("gave up waiting for session lane `{key}` after {waited:?}: {stage}")]
pub struct LaneTimeout {
    /// The (normalised) session key.
    pub key: String,
    /// How long the caller waited.
    pub waited: Duration,
    /// What it was waiting for when it gave up.
    pub stage: LaneStage,
}

/// Proof that a lane is held, handed to the work by [`Lanes::run_with_guard`].
///
/// Pass it (by reference) to code that must run inside the same lane, possibly on another
/// thread, and call [`LaneGuard::run_direct`] there. Its lifetime is tied to the lane, so it
/// cannot be used after the lane is released.
#[derive(Debug)]
pub struct LaneGuard {
    lanes_id: u64,
    key: String,
}

impl LaneGuard {
    /// The (normalised) key of the lane this guard proves.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Runs `work` inside this guard's lane without queuing (the overflow-compaction path).
    ///
    /// On another thread this also marks that thread as inside the lane, so `Lanes::run` for
    /// the same key there runs directly too, and other keys borrow the outer permit. The
    /// caller is responsible for not running two pieces of work in the lane at once — the
    /// usual shape is a lane holder that waits for the worker it handed the guard to.
    pub fn run_direct<R>(&self, work: impl FnOnce() -> R) -> R {
        let _marked = StackMark::push(self.lanes_id, &self.key);
        work()
    }
}

/// An entry on the thread-local stack, popped on drop (including during a panic).
struct StackMark {
    lanes_id: u64,
    key: String,
}

impl StackMark {
    fn push(lanes_id: u64, key: &str) -> Self {
        HELD.with(|held| held.borrow_mut().push((lanes_id, key.to_owned())));
        Self {
            lanes_id,
            key: key.to_owned(),
        }
    }
}

impl Drop for StackMark {
    fn drop(&mut self) {
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            if let Some(at) = held
                .iter()
                .rposition(|(id, key)| *id == self.lanes_id && *key == self.key)
            {
                held.remove(at);
            }
        });
    }
}

/// A taken lane (and permit, unless borrowed); released on drop, so a panicking job frees
/// its lane while the panic propagates.
struct Taken<'a> {
    shared: &'a Shared,
    key: String,
    borrows_permit: bool,
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.busy.remove(&self.key);
        if !self.borrows_permit {
            state.in_use = state.in_use.saturating_sub(1);
        }
        drop(state);
        self.shared.changed.notify_all();
        tracing::trace!(key = %self.key, "session lane released");
    }
}

impl Lanes {
    /// Lanes allowing at most `global_limit` sessions to run at once. A limit of 0 would make
    /// every call wait forever, so it is raised to 1 (with a warning).
    pub fn new(global_limit: usize) -> Self {
        if global_limit == 0 {
            tracing::warn!("global lane limit 0 would block every session; using 1");
        }
        Self {
            shared: Arc::new(Shared {
                id: NEXT_LANES_ID.fetch_add(1, Ordering::Relaxed),
                limit: global_limit.max(1),
                state: Mutex::new(State::default()),
                changed: Condvar::new(),
            }),
        }
    }

    /// The global limit in force.
    pub fn global_limit(&self) -> usize {
        self.shared.limit
    }

    /// How many global permits are taken right now (for status displays and tests).
    pub fn running(&self) -> usize {
        self.shared.lock().in_use
    }

    /// How many callers are queued (for a lane or a permit) right now; with
    /// [`Lanes::running`], what a status display needs to show a backlog.
    pub fn waiting(&self) -> usize {
        self.shared.lock().waiters.len()
    }

    /// Whether the current thread is inside `key`'s lane (directly or through
    /// [`LaneGuard::run_direct`]). Lets code assert it is on the overflow path.
    pub fn holds(&self, key: &str) -> bool {
        let key = normalize_key(key);
        HELD.with(|held| {
            held.borrow()
                .iter()
                .any(|(id, k)| *id == self.shared.id && *k == key)
        })
    }

    /// Runs `work` on this thread inside `key`'s lane, waiting as long as it takes; see the
    /// module docs for re-entry. A panic in `work` releases the lane and propagates.
    pub fn run<R>(&self, key: &str, work: impl FnOnce() -> R) -> R {
        self.run_with_guard(key, |_| work())
    }

    /// Like [`Lanes::run`], and hands `work` a [`LaneGuard`] to pass to code (or threads)
    /// that must run inside the same lane.
    pub fn run_with_guard<R>(&self, key: &str, work: impl FnOnce(&LaneGuard) -> R) -> R {
        loop {
            // Without a deadline `enter` only returns once the lane is taken; the retry keeps
            // that true without an unwrap should it ever change.
            if let Ok((guard, _taken, _mark)) = self.enter(key, None) {
                return work(&guard);
            }
        }
    }

    /// Like [`Lanes::run`], but gives up after `timeout` if the lane or a permit is still not
    /// available. Re-entry into a held lane never waits, so it never times out.
    pub fn try_run<R>(
        &self,
        key: &str,
        timeout: Duration,
        work: impl FnOnce() -> R,
    ) -> Result<R, LaneTimeout> {
        self.try_run_with_guard(key, timeout, |_| work())
    }

    /// [`Lanes::try_run`] with a [`LaneGuard`] for the work.
    pub fn try_run_with_guard<R>(
        &self,
        key: &str,
        timeout: Duration,
        work: impl FnOnce(&LaneGuard) -> R,
    ) -> Result<R, LaneTimeout> {
        // A timeout too large to represent as an instant means "wait forever".
        let deadline = Instant::now().checked_add(timeout);
        let (guard, _taken, _mark) = self.enter(key, deadline)?;
        Ok(work(&guard))
    }

    /// Takes the lane (or recognises that this thread holds it); `deadline: None` waits
    /// forever. Callers bind the result as `(guard, _taken, _mark)`: bindings drop in reverse
    /// order, so the stack mark is popped before the lane is released.
    fn enter(
        &self,
        key: &str,
        deadline: Option<Instant>,
    ) -> Result<(LaneGuard, Option<Taken<'_>>, StackMark), LaneTimeout> {
        let key = normalize_key(key);
        let id = self.shared.id;
        let (same_key, any_lane) = HELD.with(|held| {
            let held = held.borrow();
            (
                held.iter().any(|(i, k)| *i == id && *k == key),
                held.iter().any(|(i, _)| *i == id),
            )
        });
        let guard = LaneGuard {
            lanes_id: id,
            key: key.clone(),
        };
        if same_key {
            tracing::trace!(key = %key, "already inside this session lane; running directly");
            let mark = StackMark::push(id, &key);
            return Ok((guard, None, mark));
        }
        let taken = self.acquire(&key, any_lane, deadline)?;
        let mark = StackMark::push(id, &key);
        Ok((guard, Some(taken), mark))
    }

    fn acquire(
        &self,
        key: &str,
        borrows_permit: bool,
        deadline: Option<Instant>,
    ) -> Result<Taken<'_>, LaneTimeout> {
        let shared = &*self.shared;
        let started = Instant::now();
        let mut state = shared.lock();
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        state.waiters.insert(
            ticket,
            Waiter {
                key: key.to_owned(),
                borrows_permit,
            },
        );
        state
            .queues
            .entry(key.to_owned())
            .or_default()
            .push_back(ticket);

        let mut announced = false;
        loop {
            if state.eligible(ticket, shared.limit) {
                state.take(ticket);
                drop(state);
                // Taking changes what others may do (e.g. a borrower passing a queued head);
                // let them re-check rather than reason about which cases matter.
                shared.changed.notify_all();
                if announced {
                    tracing::debug!(
                        key,
                        waited_ms =
                            u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                        borrows_permit,
                        "session lane acquired after waiting"
                    );
                }
                return Ok(Taken {
                    shared,
                    key: key.to_owned(),
                    borrows_permit,
                });
            }
            if !announced {
                announced = true;
                tracing::debug!(
                    key,
                    stage = ?state.stage_of(ticket),
                    running = state.in_use,
                    global_limit = shared.limit,
                    "waiting for session lane"
                );
            }
            state = match deadline {
                None => shared
                    .changed
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        let stage = state.stage_of(ticket);
                        state.withdraw(ticket);
                        drop(state);
                        // Our departure may make a later waiter eligible.
                        shared.changed.notify_all();
                        let waited = started.elapsed();
                        tracing::debug!(
                            key,
                            ?stage,
                            waited_ms = u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
                            "gave up waiting for session lane"
                        );
                        return Err(LaneTimeout {
                            key: key.to_owned(),
                            waited,
                            stage,
                        });
                    }
                    shared
                        .changed
                        .wait_timeout(state, deadline - now)
                        .map(|(state, _)| state)
                        .unwrap_or_else(|poisoned| poisoned.into_inner().0)
                }
            };
        }
    }
}

impl Shared {
    /// The state is only mutated in short sections that cannot panic half-way, so a poisoned
    /// mutex (a panic elsewhere while holding it) still guards consistent data.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl State {
    /// Whether `ticket` may take its lane now. See the module docs for the rules.
    fn eligible(&self, ticket: u64, limit: usize) -> bool {
        let Some(me) = self.waiters.get(&ticket) else {
            return false;
        };
        if self.busy.contains(&me.key) {
            return false;
        }
        let saturated = self.in_use >= limit;
        if let Some(queue) = self.queues.get(&me.key) {
            for earlier in queue.iter().take_while(|t| **t != ticket) {
                let Some(other) = self.waiters.get(earlier) else {
                    continue;
                };
                // FIFO per key, except that a permit borrower may pass waiters that are stuck
                // on the saturated global limit (they may be waiting for our outer permit).
                if !me.borrows_permit || other.borrows_permit || !saturated {
                    return false;
                }
            }
        }
        if me.borrows_permit {
            return true;
        }
        if saturated {
            return false;
        }
        // Lane heads that arrived earlier and only wait for a permit get theirs first.
        let ahead = self
            .waiters
            .range(..ticket)
            .filter(|(t, w)| {
                !w.borrows_permit
                    && w.key != me.key
                    && !self.busy.contains(&w.key)
                    && self.queues.get(&w.key).and_then(|q| q.front()) == Some(*t)
            })
            .count();
        self.in_use + ahead < limit
    }

    fn stage_of(&self, ticket: u64) -> LaneStage {
        let Some(me) = self.waiters.get(&ticket) else {
            return LaneStage::SessionLane;
        };
        let first_in_queue = self.queues.get(&me.key).and_then(|q| q.front()) == Some(&ticket);
        if self.busy.contains(&me.key) || !first_in_queue {
            LaneStage::SessionLane
        } else {
            LaneStage::GlobalLimit
        }
    }

    fn take(&mut self, ticket: u64) {
        if let Some(waiter) = self.remove_waiter(ticket) {
            if !waiter.borrows_permit {
                self.in_use += 1;
            }
            self.busy.insert(waiter.key);
        }
    }

    fn withdraw(&mut self, ticket: u64) {
        self.remove_waiter(ticket);
    }

    fn remove_waiter(&mut self, ticket: u64) -> Option<Waiter> {
        let waiter = self.waiters.remove(&ticket)?;
        if let Some(queue) = self.queues.get_mut(&waiter.key) {
            if let Some(at) = queue.iter().position(|t| *t == ticket) {
                queue.remove(at);
            }
            if queue.is_empty() {
                // Keys come and go with sessions; do not keep an empty queue per key forever.
                self.queues.remove(&waiter.key);
            }
        }
        Some(waiter)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn waiter(state: &mut State, key: &str, borrows_permit: bool) -> u64 {
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        state.waiters.insert(
            ticket,
            Waiter {
                key: key.into(),
                borrows_permit,
            },
        );
        state
            .queues
            .entry(key.into())
            .or_default()
            .push_back(ticket);
        ticket
    }

    #[test]
    fn same_key_is_fifo() {
        let mut s = State::default();
        let a = waiter(&mut s, "k", false);
        let b = waiter(&mut s, "k", false);
        assert!(!s.eligible(b, 4));
        assert!(s.eligible(a, 4));
        s.take(a);
        assert!(!s.eligible(b, 4), "lane busy");
    }

    #[test]
    fn permit_heads_are_served_in_arrival_order() {
        let mut s = State {
            in_use: 1,
            ..State::default()
        };
        let a = waiter(&mut s, "a", false);
        let b = waiter(&mut s, "b", false);
        // One free permit (limit 2): only the earlier head may take it.
        assert!(s.eligible(a, 2));
        assert!(!s.eligible(b, 2));
        // Two free permits: both.
        assert!(s.eligible(b, 3));
    }

    #[test]
    fn borrower_passes_only_permit_blocked_waiters() {
        let mut s = State {
            in_use: 1,
            ..State::default()
        };
        let head = waiter(&mut s, "y", false);
        let nested = waiter(&mut s, "y", true);
        assert!(s.eligible(nested, 1), "saturated: borrower may pass");
        assert!(
            !s.eligible(nested, 2),
            "a permit is free: the head goes first"
        );
        assert!(s.eligible(head, 2));
    }

    #[test]
    fn stage_reports_what_blocks() {
        let mut s = State {
            in_use: 1,
            ..State::default()
        };
        let a = waiter(&mut s, "a", false);
        assert_eq!(s.stage_of(a), LaneStage::GlobalLimit);
        s.busy.insert("a".into());
        assert_eq!(s.stage_of(a), LaneStage::SessionLane);
        s.withdraw(a);
        assert!(s.queues.is_empty() && s.waiters.is_empty());
    }
}
