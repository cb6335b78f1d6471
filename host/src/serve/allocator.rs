//! What `rampart serve` asks of the allocators: memory freed by finished requests handed back
//! to the system once the server is idle, and fewer glibc arenas.
//!
//! The binary allocates with jemalloc on Linux (`main.rs`; BENCHMARKS.md, "The allocator"):
//! measured against glibc's malloc on serve's requests, it spends 16–17 % less CPU on a request
//! continuing a 200k-token conversation and answers 15–25 % more small requests per second at
//! eight connections, and after the load bench both hold the same resident memory (53–54 MiB).
//! C code (SQLite, the system's libraries) still allocates with glibc.
//!
//! Why trim: a request continuing a 200k-token conversation allocates and frees megabytes, on
//! whichever thread the blocking pool gives it, and an allocator keeps what is freed for reuse,
//! so after a burst of concurrent requests the process held several times what it was using
//! (with glibc alone: 75 MiB resident of which `malloc_trim` returned 20, and 154 MiB after
//! the load bench's concurrent runs). Purging when no request is in flight keeps resident
//! memory near what is live; glibc's arenas are capped at the core count for the same reason.
//! Neither changes what any request computes; a user's own `MALLOC_ARENA_MAX` is left as it is.

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

/// Hands memory the allocators hold free back to the system: jemalloc's (the binary's, on
/// Linux) and glibc's (C code's).
pub fn trim() {
    #[cfg(target_os = "linux")]
    {
        // 4096 is MALLCTL_ARENAS_ALL: the control applies to every arena.
        // SAFETY: `arena.<i>.purge` is a void control (no value read or written) that returns
        // the unused dirty pages of the arenas to the system; it only touches free memory.
        let purged = unsafe {
            tikv_jemalloc_sys::mallctl(
                c"arena.4096.purge".as_ptr(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
            )
        };
        tracing::trace!(purged, "jemalloc purged");
    }
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
