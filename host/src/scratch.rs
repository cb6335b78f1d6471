//! Scratch directories and files a command removes when it ends, however it ends.
//!
//! A replay (and every cell of an eval) writes its session, blobs and scratch memory into
//! temporary directories, `rampart-replay-<pid>-…` and `rampart-replay-memory-<pid>-…`, up to
//! tens of MB each; an output file being replaced is written aside first
//! ([`crate::output_file`]). A normal end removes them (their owners' `Drop`), but Ctrl-C,
//! SIGTERM or a crash used to leave them behind in the temporary directory for good. So:
//!
//! - every such path is registered here while it exists ([`Registration`]), and
//!   [`clean_up_on_signals`] (installed by `replay` and `eval`) removes the registered paths on
//!   SIGINT or SIGTERM, then exits with the conventional code (130, 143);
//! - what a process that died without cleaning up (SIGKILL, a crash, a power cut) left is
//!   swept at the next start ([`sweep_stale`]): a scratch directory carries its owner's pid in
//!   its name and a marker file inside, and is removed once no process has that pid. A
//!   directory the user asked to keep (`--keep`) has no marker and is never swept; neither is
//!   anything an older version left (it has none either).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// What every scratch directory's name starts with.
pub const PREFIX: &str = "rampart-";

/// The file inside a scratch directory that says it may be swept once its owner is dead.
/// A directory kept for the user loses it.
pub const MARKER: &str = ".rampart-scratch";

/// The paths removed on a signal, with the id of their registration.
static ON_SIGNAL: Mutex<Vec<(u64, PathBuf)>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn registered() -> std::sync::MutexGuard<'static, Vec<(u64, PathBuf)>> {
    // A panic while holding the list cannot leave it half-changed (push and retain).
    ON_SIGNAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A path removed if the process is stopped by a signal while this lives (see the module
/// docs). Dropping it forgets the path, without removing it.
#[derive(Debug)]
pub struct Registration(u64);

impl Registration {
    /// Registers `path` (a file or a directory).
    pub fn new(path: &Path) -> Self {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        registered().push((id, path.to_path_buf()));
        Self(id)
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        registered().retain(|(id, _)| *id != self.0);
    }
}

/// Removes every registered path. What is left (a file being created in a directory as it is
/// removed: the command's own threads go on writing until the process exits) is retried for
/// up to half a second, then reported.
pub fn remove_registered() {
    let paths: Vec<PathBuf> = registered().iter().map(|(_, p)| p.clone()).collect();
    for path in paths {
        remove_path(&path);
    }
}

/// How many times a scratch path is tried before it is reported, 20 ms apart. Three were too
/// few on a loaded machine: a replay's memory store, still writing while the signal thread
/// removed its directory, re-created a file each time and the directory was left (seen once in
/// CI's `a_replay_stopped_by_sigterm_or_ctrl_c_leaves_no_scratch_directory`; the next start
/// sweeps it, but a stopped command should leave nothing).
const REMOVE_ATTEMPTS: usize = 25;

fn remove_path(path: &Path) {
    for attempt in 0..REMOVE_ATTEMPTS {
        let result = match std::fs::symlink_metadata(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return,
            Err(e) => Err(e),
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
            Ok(_) => std::fs::remove_file(path),
        };
        match result {
            Ok(()) => return,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return,
            Err(e) if attempt + 1 == REMOVE_ATTEMPTS => {
                tracing::warn!(path = %path.display(), error = %e, "could not remove a scratch path; it is safe to delete by hand");
            }
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
        }
    }
}

/// A temporary directory `rampart-<kind>-<pid>-<random>` (owner-only) in the system's
/// temporary directory, removed when dropped, on a signal (see [`clean_up_on_signals`]), or
/// by the next start's [`sweep_stale`] if the process dies first; unless kept.
#[derive(Debug)]
pub struct ScratchDir {
    path: PathBuf,
    registration: Option<Registration>,
}

impl ScratchDir {
    /// Creates one for `kind` (`replay`, `replay-memory`; letters and `-`, no digit after a
    /// `-`, so the pid that follows is found again).
    pub fn create(kind: &str) -> io::Result<Self> {
        Self::create_in(&std::env::temp_dir(), kind)
    }

    /// [`ScratchDir::create`] in `parent`.
    pub fn create_in(parent: &Path, kind: &str) -> io::Result<Self> {
        let pid = std::process::id();
        let mut last = None;
        for _ in 0..16 {
            let suffix: u32 = rand_u32();
            let path = parent.join(format!("{PREFIX}{kind}-{pid}-{suffix:08x}"));
            match private_dir(&path) {
                Ok(()) => {
                    let registration = Registration::new(&path);
                    let dir = Self {
                        path,
                        registration: Some(registration),
                    };
                    std::fs::write(dir.path.join(MARKER), format!("{pid}\n"))?;
                    return Ok(dir);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no free scratch directory name")))
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Keeps the directory for the user: not removed at the end, on a signal or by a sweep.
    pub fn keep(mut self) -> PathBuf {
        let _ = std::fs::remove_file(self.path.join(MARKER));
        self.registration = None;
        std::mem::take(&mut self.path)
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        if self.registration.take().is_some()
            && let Err(e) = std::fs::remove_dir_all(&self.path)
            && e.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(dir = %self.path.display(), error = %e, "could not remove a scratch directory; it is safe to delete by hand");
        }
    }
}

/// Creates the directory `path`, readable by its owner only (it holds conversations).
pub fn private_dir(path: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new().mode(0o700).create(path)
    }
    // Windows: a new directory inherits its parent's ACL; the user's temporary directory is
    // already private to the user.
    #[cfg(not(unix))]
    std::fs::DirBuilder::new().create(path)
}

fn rand_u32() -> u32 {
    // No `rand` in the host: the time's nanoseconds and a counter are unique enough for a
    // name that is created exclusively (and retried).
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    (nanos ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15)) as u32
}

/// The pid in a scratch directory's name (`rampart-<kind>-<pid>-<suffix>`), if it is one.
pub fn owner_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(PREFIX)?;
    // The pid is the first `-`-separated part made of digits only, and a suffix follows it.
    let mut parts = rest.split('-');
    let kind_first = parts.next()?;
    if kind_first.is_empty() || kind_first.bytes().any(|b| b.is_ascii_digit()) {
        return None;
    }
    for part in parts.by_ref() {
        if !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) {
            let pid = part.parse().ok()?;
            return parts.next().filter(|s| !s.is_empty()).map(|_| pid);
        }
        if part.is_empty() || part.bytes().any(|b| b.is_ascii_digit()) {
            return None;
        }
    }
    None
}

/// Removes the scratch directories in the system's temporary directory whose owner died
/// without removing them; returns how many. Errors are logged, never fatal: a sweep is
/// housekeeping.
pub fn sweep_stale() -> usize {
    sweep_stale_in(&std::env::temp_dir())
}

/// [`sweep_stale`] in `dir`.
pub fn sweep_stale_in(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(owner_pid) else {
            continue;
        };
        if pid == std::process::id() || crate::platform::process_alive(pid) {
            continue;
        }
        let path = entry.path();
        // Only what this user's rampart made and did not keep: a real directory (not a link
        // to one) with the marker.
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if !is_dir || !path.join(MARKER).is_file() || !owned_by_me(&path) {
            continue;
        }
        match std::fs::remove_dir_all(&path) {
            Ok(()) => {
                removed += 1;
                tracing::info!(dir = %path.display(), pid, "removed the scratch directory of a rampart that is gone");
            }
            Err(e) => {
                tracing::warn!(dir = %path.display(), error = %e, "could not remove a stale scratch directory; it is safe to delete by hand");
            }
        }
    }
    removed
}

#[cfg(unix)]
fn owned_by_me(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    std::fs::symlink_metadata(path).is_ok_and(|m| m.uid() == me)
}

#[cfg(not(unix))]
fn owned_by_me(_: &Path) -> bool {
    true
}

/// On SIGINT or SIGTERM: remove every registered path, then exit with 130 or 143 (128 + the
/// signal, as a shell reports it). Installed by the commands that make scratch directories
/// (`replay`, `eval`); the handlers are in place when this returns.
pub fn clean_up_on_signals() -> io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    #[cfg(unix)]
    let wait = {
        use tokio::signal::unix::{SignalKind, signal};
        let (mut interrupt, mut terminate) = runtime.block_on(async {
            Ok::<_, io::Error>((
                signal(SignalKind::interrupt())?,
                signal(SignalKind::terminate())?,
            ))
        })?;
        async move {
            tokio::select! {
                _ = interrupt.recv() => 130,
                _ = terminate.recv() => 143,
            }
        }
    };
    #[cfg(not(unix))]
    let wait = async {
        let _ = tokio::signal::ctrl_c().await;
        130
    };
    std::thread::Builder::new()
        .name("rampart-signals".into())
        .spawn(move || {
            let code = runtime.block_on(wait);
            tracing::debug!(code, "stopped by a signal; removing scratch files");
            remove_registered();
            std::process::exit(code);
        })?;
    Ok(())
}

#[cfg(test)]
#[path = "scratch_tests.rs"]
mod tests;
