//! Windows (`x86_64-pc-windows-gnu`): what the Unix side does with `pre_exec`, rlimits and
//! signals has no equivalent the host uses here, and says so.
//!
//! * Dying with the host: there is no `PR_SET_PDEATHSIG`. The child still ends with the host,
//!   because the host's end of its stdin closes when the host dies and `rampart engine-host`
//!   exits at the end of stdin; an executable engine must do the same (docs/engine-protocol.md).
//! * `limits = { memoryMb, cpuSeconds }`: rlimits do not exist; the configuration refuses the
//!   key with [`LIMITS_ABSENT`] rather than run an engine unlimited that was meant to be limited.
//! * Signals: a crashed child ends with an NTSTATUS exception code as its exit code, which
//!   [`abnormal_end`] names for the common crashes.
//! * Whether a process is alive (the scratch sweep): `OpenProcess` and its exit code
//!   ([`process_alive`]), where Unix sends signal 0.

use std::fs::File;
use std::os::windows::io::AsHandle;
use std::process::{Command, ExitStatus};

use windows_sys::Win32::Foundation::{
    CloseHandle, ERROR_INVALID_PARAMETER, GetLastError, STILL_ACTIVE,
};
use windows_sys::Win32::System::Console::{
    GetStdHandle, STD_ERROR_HANDLE, STD_OUTPUT_HANDLE, SetStdHandle,
};
use windows_sys::Win32::System::Threading::{
    GetExitCodeProcess, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION,
};

use crate::config::ProcessLimits;

/// Why `limits` cannot be configured on this platform, as the configuration error says it.
pub const LIMITS_ABSENT: Option<&str> = Some(
    "no `limits` on Windows: rlimits do not exist there, and rampart does not run an engine \
     unlimited that was configured to be limited. Remove the `limits` table on Windows",
);

/// Nothing to set up on Windows (see the module's documentation); configured `limits`, which
/// the configuration already refuses, are refused here too rather than ignored.
pub fn confine_child(_command: &mut Command, limits: ProcessLimits) -> std::io::Result<()> {
    if limits != ProcessLimits::default() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            LIMITS_ABSENT.unwrap_or_default(),
        ));
    }
    Ok(())
}

/// The phrase for a child that ended with one of the common crash codes (an access violation,
/// a stack overflow, a Rust abort, …); `None` for an ordinary exit code, which the caller words.
pub fn abnormal_end(status: &ExitStatus) -> Option<String> {
    let code = status.code()? as u32;
    let (name, why) = match code {
        0xC000_0005 => ("STATUS_ACCESS_VIOLATION", ": a segmentation fault"),
        0xC000_00FD => ("STATUS_STACK_OVERFLOW", ": a stack overflow"),
        0xC000_0409 => (
            "STATUS_STACK_BUFFER_OVERRUN",
            ": a fast fail (a Rust abort or panic in a no-unwind context)",
        ),
        0xC000_0017 => ("STATUS_NO_MEMORY", ": a failed allocation"),
        0xC000_001D => ("STATUS_ILLEGAL_INSTRUCTION", ": an illegal instruction"),
        0xC000_0094 => ("STATUS_INTEGER_DIVIDE_BY_ZERO", ": an arithmetic fault"),
        0x8000_0003 => ("STATUS_BREAKPOINT", ""),
        _ => return None,
    };
    Some(format!("ended with exception 0x{code:08X} ({name}{why})"))
}

/// The protocol's stream for `rampart engine-host`: a duplicate of the standard output handle,
/// after which the standard output handle (which Rust's `print!` reads at every write) and the
/// C runtime's descriptor 1 (a C engine's `printf`) are pointed at stderr.
pub fn protocol_stdout() -> std::io::Result<File> {
    let protocol = std::io::stdout().as_handle().try_clone_to_owned()?;
    // SAFETY: reading and replacing this process's standard handles; the stderr handle stays
    // owned by the process's standard handle table.
    unsafe {
        let stderr = GetStdHandle(STD_ERROR_HANDLE);
        if SetStdHandle(STD_OUTPUT_HANDLE, stderr) == 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::dup2(2, 1) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(File::from(protocol))
}

/// Whether a process with `pid` exists (one of another user counts: access denied means it
/// exists), for the sweep of scratch directories whose owner died
/// ([`crate::scratch::sweep_stale`]). When unsure, alive: a directory is never swept wrongly.
pub fn process_alive(pid: u32) -> bool {
    if pid == 0 {
        return true;
    }
    // SAFETY: OpenProcess returns a handle this function closes, or null; GetExitCodeProcess
    // writes one u32 it is given.
    unsafe {
        let process = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid);
        if process.is_null() {
            // No such process is ERROR_INVALID_PARAMETER; anything else (access denied) exists.
            return GetLastError() != ERROR_INVALID_PARAMETER;
        }
        let mut code = 0u32;
        let read = GetExitCodeProcess(process, &mut code);
        CloseHandle(process);
        // An exited process whose handle someone still holds can be opened: its exit code
        // says it ended.
        read == 0 || code == STILL_ACTIVE as u32
    }
}
