//! [`LockHolder`]: who holds (or last held) a session lock, and whether that process still
//! lives. Apart from the lock itself so that the error type can name the holder without the
//! error and the lock depending on each other.
#![warn(missing_docs)]

use std::fmt;
#[cfg(unix)]
use std::io;

use serde::{Deserialize, Serialize};

/// Who holds (or last held) a session lock, as recorded in the lock sidecar.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockHolder {
    /// The holder's process id.
    pub pid: u32,
    /// The holder's start time as the OS counts it (Linux: clock ticks since boot), so a pid
    /// reused by a later process is not mistaken for the holder. `None` where unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_start: Option<u64>,
    /// When the holder took the lock (ISO 8601).
    pub acquired_at: String,
}

impl fmt::Display for LockHolder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "process {} (holding it since {})",
            self.pid, self.acquired_at
        )
    }
}

impl LockHolder {
    /// The record for the current process, taking the lock now.
    pub(crate) fn current() -> Self {
        // A process's start time never changes: read once, not at every lock a server takes
        // (a `/proc` read per turn). Kept with the pid it was read for, so a forked child
        // reads its own.
        static OWN_START: std::sync::OnceLock<(u32, Option<u64>)> = std::sync::OnceLock::new();
        let pid = std::process::id();
        let &(known, start) = OWN_START.get_or_init(|| (pid, process_start_time(pid)));
        let process_start = if known == pid {
            start
        } else {
            process_start_time(pid)
        };
        Self {
            pid,
            process_start,
            acquired_at: crate::ids::now_iso(),
        }
    }

    /// Whether the recorded process still exists (and is the same process, where start times
    /// can be compared). `true` when it cannot be told, so nothing is called dead by guess.
    pub fn is_alive(&self) -> bool {
        if !pid_exists(self.pid) {
            return false;
        }
        match (self.process_start, process_start_time(self.pid)) {
            (Some(recorded), Some(now)) => recorded == now,
            _ => true,
        }
    }
}

/// Whether a process with this pid exists.
#[cfg(unix)]
pub(crate) fn pid_exists(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: `kill` with signal 0 sends nothing; it only checks that the pid exists and
    // may be signalled. It has no memory-safety preconditions.
    let result = unsafe { libc::kill(pid, 0) };
    if result == 0 {
        return true;
    }
    // EPERM: it exists but belongs to someone else.
    io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

#[cfg(not(unix))]
pub(crate) fn pid_exists(_pid: u32) -> bool {
    true
}

/// The process start time in clock ticks since boot (Linux `/proc/<pid>/stat`, field 22).
fn process_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain spaces; count from after it.
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(19)?.parse().ok()
}
