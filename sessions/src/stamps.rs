//! Where a session's new entries get their ids and timestamps.
//!
//! A live session stamps entries with random ids and the wall clock ([`Stamps::Live`], the
//! default), as pi does. A replay must write the same session, and so the same events and
//! requests, every time it is run on the same transcript: its entries get ids from a counter
//! and times from a clock the replay sets to the recorded messages' times
//! ([`Stamps::Scripted`]). Entry ids reach the engines (`firstKeptEntryId` of a compaction)
//! and entry times reach the model (the `timestamp` of a compaction summary), so both must be
//! reproducible for a replay's outputs to be.
#![warn(missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// How new entries are stamped (see the module docs).
#[derive(Debug, Clone, Default)]
pub enum Stamps {
    /// Random 8-hex ids, the wall clock.
    #[default]
    Live,
    /// Ids from a counter and times from a clock someone else sets.
    Scripted(Arc<ScriptedStamps>),
}

impl PartialEq for Stamps {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Live, Self::Live) => true,
            (Self::Scripted(a), Self::Scripted(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for Stamps {}

impl Stamps {
    /// A fresh entry id that `taken` does not report as used.
    pub fn entry_id(&self, taken: impl Fn(&str) -> bool) -> String {
        match self {
            Self::Live => crate::ids::new_entry_id(taken),
            Self::Scripted(s) => s.entry_id(taken),
        }
    }

    /// The time of a new entry, as pi writes entry timestamps (`2026-03-01T09:00:00.000Z`).
    pub fn timestamp(&self) -> String {
        match self {
            Self::Live => crate::ids::now_iso(),
            Self::Scripted(s) => s.timestamp(),
        }
    }
}

/// A clock that only moves when told to, and a counter for entry ids: the stamps of a
/// session whose contents must not depend on when or how often it is written.
#[derive(Debug, Default)]
pub struct ScriptedStamps {
    now_ms: AtomicU64,
    issued: AtomicU64,
}

impl ScriptedStamps {
    /// A clock standing at `now_ms` (Unix milliseconds); no id issued yet.
    pub fn new(now_ms: u64) -> Self {
        Self {
            now_ms: AtomicU64::new(now_ms),
            issued: AtomicU64::new(0),
        }
    }

    /// The clock's time, in Unix milliseconds.
    pub fn now_ms(&self) -> u64 {
        self.now_ms.load(Ordering::Relaxed)
    }

    /// Moves the clock to `now_ms`. It never goes back: a recording whose times are out of
    /// order (clock skew between machines) leaves it where it was, so "time since" figures
    /// computed from it are never negative.
    pub fn advance_to(&self, now_ms: u64) {
        self.now_ms.fetch_max(now_ms, Ordering::Relaxed);
    }

    /// The clock's time as an entry timestamp.
    pub fn timestamp(&self) -> String {
        millis_to_iso(self.now_ms())
    }

    /// The next id of the counter (`00000001`, `00000002`, …: 8 lower-case hex characters,
    /// the shape pi's tools expect) that `taken` does not report as used.
    pub fn entry_id(&self, taken: impl Fn(&str) -> bool) -> String {
        loop {
            let n = self.issued.fetch_add(1, Ordering::Relaxed) + 1;
            // Past 2^32 ids the counter keeps going in the uuid-shaped form pi also accepts.
            let candidate = if n <= u64::from(u32::MAX) {
                format!("{n:08x}")
            } else {
                format!("00000000-0000-4000-8000-{n:012x}")
            };
            if !taken(&candidate) {
                return candidate;
            }
        }
    }
}

/// Unix milliseconds as pi writes entry timestamps; the epoch for a time chrono cannot show.
pub fn millis_to_iso(ms: u64) -> String {
    let ms = i64::try_from(ms).unwrap_or(i64::MAX);
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
#[path = "stamps_tests.rs"]
mod tests;
