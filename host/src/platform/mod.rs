//! What differs between Unix and Windows for the host, in one place: how an engine's child
//! process is confined (dies with the host, resource limits), how its end is named, how
//! `rampart engine-host` moves the protocol off the stdout an engine could print to, and whether
//! a process id is alive (the sweep of scratch directories).
//!
//! Why one module: the rest of the host states what it needs (`confine_child`,
//! `abnormal_end`, `protocol_stdout`, `process_alive`, `LIMITS_ABSENT`) and stays free of `cfg`s; each
//! platform's file says how, and what it cannot do. Linux and macOS use `unix.rs`;
//! `windows.rs` is the `x86_64-pc-windows-gnu` build (`.ci/windows`).

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use unix::*;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use windows::*;
