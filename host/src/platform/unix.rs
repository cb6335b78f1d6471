//! Linux and macOS: an engine's child takes `PR_SET_PDEATHSIG` (Linux) and its rlimits in
//! `pre_exec`, and a death by signal is named with the signal.

use std::fs::File;
use std::os::fd::FromRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitStatus};

use crate::config::ProcessLimits;

/// Why `limits` cannot be configured on this platform; `None`: they can (rlimits).
pub const LIMITS_ABSENT: Option<&str> = None;

/// Makes the child started by `command` die with the host (Linux: `PR_SET_PDEATHSIG`) and take
/// `limits` as rlimits (`RLIMIT_AS`, `RLIMIT_CPU`) before it runs anything.
pub fn confine_child(command: &mut Command, limits: ProcessLimits) -> std::io::Result<()> {
    let parent = std::process::id();
    // SAFETY: the closure runs in the forked child before exec and only makes
    // async-signal-safe system calls (prctl, getppid, setrlimit, _exit).
    unsafe {
        command.pre_exec(move || child_setup(parent, limits));
    }
    Ok(())
}

/// The phrase for a child killed by a signal (`killed by signal 11 (SIGSEGV: …)`); `None` when
/// it exited, which the caller words from the status code.
pub fn abnormal_end(status: &ExitStatus) -> Option<String> {
    let signal = status.signal()?;
    let (name, why) = match signal {
        libc::SIGSEGV => ("SIGSEGV", ": a segmentation fault"),
        libc::SIGABRT => (
            "SIGABRT",
            ": an abort (a Rust abort, a failed allocation, a stack overflow)",
        ),
        libc::SIGKILL => (
            "SIGKILL",
            ": killed (the out-of-memory killer, the cpuSeconds hard limit, or kill -9)",
        ),
        libc::SIGXCPU => ("SIGXCPU", ": past limits.cpuSeconds"),
        libc::SIGBUS => ("SIGBUS", ": a bus error"),
        libc::SIGILL => ("SIGILL", ": an illegal instruction"),
        libc::SIGFPE => ("SIGFPE", ": an arithmetic fault"),
        libc::SIGTERM => ("SIGTERM", ""),
        libc::SIGTRAP => ("SIGTRAP", ""),
        _ => ("", ""),
    };
    Some(if name.is_empty() {
        format!("killed by signal {signal}")
    } else {
        format!("killed by signal {signal} ({name}{why})")
    })
}

/// The protocol's stream for `rampart engine-host`: a duplicate of fd 1, after which fd 1 is
/// pointed at stderr, so whatever an engine prints reaches the host's log, never the pipe.
pub fn protocol_stdout() -> std::io::Result<File> {
    // SAFETY: plain descriptor calls on descriptors this process owns; `dup` returns a new
    // descriptor nothing else refers to, which the `File` then owns.
    unsafe {
        let fd = libc::dup(1);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::dup2(2, 1) < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(File::from_raw_fd(fd))
    }
}

/// Whether a process with `pid` exists (a live process of another user counts), for the sweep
/// of scratch directories whose owner died ([`crate::scratch::sweep_stale`]).
pub fn process_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return true;
    };
    if pid <= 0 {
        return true;
    }
    // SAFETY: signal 0 checks for existence and permission only; nothing is sent.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Runs in the forked child before exec: dies with the host, then takes its rlimits.
fn child_setup(parent: u32, limits: ProcessLimits) -> std::io::Result<()> {
    // SAFETY: async-signal-safe system calls on the child's own process state.
    unsafe {
        #[cfg(target_os = "linux")]
        {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The host may have died between fork and prctl; then nobody would signal us.
            if libc::getppid() as u32 != parent {
                libc::_exit(1);
            }
        }
        if let Some(mb) = limits.memory_mb {
            let bytes = mb.saturating_mul(1 << 20) as libc::rlim_t;
            let limit = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        if let Some(seconds) = limits.cpu_seconds {
            // Soft: SIGXCPU; one second later, hard: SIGKILL.
            let limit = libc::rlimit {
                rlim_cur: seconds as libc::rlim_t,
                rlim_max: seconds.saturating_add(1) as libc::rlim_t,
            };
            if libc::setrlimit(libc::RLIMIT_CPU, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    // `parent` is only read on Linux.
    let _ = parent;
    Ok(())
}
