//! What `rampart serve` asks of the C allocator (glibc on Linux; elsewhere nothing): fewer
//! arenas, and memory freed by finished requests handed back to the system once the server
//! is idle.
//!
//! Why: a request continuing a 200k-token conversation allocates and frees megabytes, on
//! whichever thread the blocking pool gives it. glibc keeps a separate arena for each thread
//! that finds the others busy (up to eight per core) and keeps what is freed in each for
//! reuse, so after a burst of concurrent requests the process held three to four times what
//! it was using (measured: 75 MiB resident of which `malloc_trim` returned 20, and 154 MiB
//! after the load bench's concurrent runs). Capping the arenas at the core count and trimming
//! when no request is in flight keeps resident memory near what is live. Neither changes
//! what any request computes; a user's own `MALLOC_ARENA_MAX` is left as it is.

use std::sync::atomic::{AtomicU64, Ordering};

/// Limits the allocator to one arena per core (at least two), unless `MALLOC_ARENA_MAX` is
/// set. Called before the server starts its threads, which each may take an arena.
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        if std::env::var_os("MALLOC_ARENA_MAX").is_some() {
            return;
        }
        let cores = std::thread::available_parallelism().map_or(2, usize::from);
        let arenas = libc::c_int::try_from(cores.max(2)).unwrap_or(libc::c_int::MAX);
        // SAFETY: `mallopt` only sets a tunable of the allocator; it is called once, at
        // start-up, and any value is valid for M_ARENA_MAX.
        let applied = unsafe { libc::mallopt(libc::M_ARENA_MAX, arenas) };
        tracing::debug!(arenas, applied, "allocator arenas limited");
    }
}

/// When to hand freed memory back: after requests were answered, once none is in flight.
#[derive(Debug, Default)]
pub struct Trimmer {
    /// Requests answered when the last trim ran.
    trimmed_at: AtomicU64,
}

impl Trimmer {
    /// Whether to trim now, given the requests answered so far and those in flight: some
    /// were answered since the last trim, and none is running (a trim walks the allocator's
    /// free lists under its locks, which a request would wait for). A `true` counts as the
    /// trim: the caller runs [`trim`].
    pub fn claim(&self, answered: u64, in_flight: usize) -> bool {
        if in_flight > 0 || answered <= self.trimmed_at.load(Ordering::Relaxed) {
            return false;
        }
        self.trimmed_at.store(answered, Ordering::Relaxed);
        true
    }
}

/// Hands memory the allocator holds free back to the system.
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: `malloc_trim` only releases free memory of the allocator's own arenas.
        let released = unsafe { libc::malloc_trim(0) };
        tracing::trace!(released, "allocator trimmed");
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "allocator_tests.rs"]
mod tests;
