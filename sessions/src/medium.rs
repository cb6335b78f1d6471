//! Where a session's lines are kept: the one seam between a [`Session`](crate::Session) and its
//! storage.
//!
//! A session is an append-only log of JSONL lines with a write lock. Everything
//! [`Session`](crate::Session) does (the tree, catch-up, branching, rewrites, the line checks)
//! is about the lines; only five things are about where they live, and they are this trait:
//! read bytes at an offset, know the length, append whole lines as one unit, make them durable,
//! and take the write lock with a deadline. A second medium therefore gets every behaviour of a
//! session for free:
//! - [`FileMedium`] is the pi file on this machine, with the `flock` sidecar of [`crate::lock`];
//! - [`MemoryMedium`] keeps the bytes in this process, shared by every handle cloned from it.
//!   It is what tests use to run two `rampart serve` replicas against one store without files,
//!   and it shows the contract a shared database medium (PostgreSQL rows with an advisory lock)
//!   has to keep.
#![warn(missing_docs)]

use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::error::{Result, SessionError};
use crate::lock::SessionLock;
use crate::split::ReadAt;

/// Proof that a medium's write lock is held; dropping it releases the lock.
pub trait MediumGuard: Send + Debug {}

/// Where a session's lines are kept (see the module docs).
///
/// The contract a [`Session`](crate::Session) relies on:
/// - [`append`](Self::append) places its bytes at the end as one unit: another writer never
///   interleaves inside them, and a reader never sees half of them except after a crash;
/// - what one handle appended is visible to every other handle's [`len`](Self::len) and
///   [`read_at`](Self::read_at) once `append` returns;
/// - the lock excludes every other handle, in this process and in any other that shares the
///   store, until its guard is dropped; a waiter gives up after its timeout with
///   [`SessionError::Locked`];
/// - bytes are never changed or removed once appended. A medium that finds its log replaced or
///   shortened says so from [`check_current`](Self::check_current), and the session refuses to
///   write.
pub trait SessionMedium: Send + Sync + Debug {
    /// What errors and logs call this log: the file's path, or a name for another store.
    fn path(&self) -> &Path;
    /// The log's length in bytes now.
    fn len(&self) -> io::Result<u64>;
    /// Whether the log holds no bytes.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Reads into `buf` from `offset`; returns how many bytes were read (0 at the end).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// Appends `bytes` (whole lines) at the end, as one unit.
    fn append(&self, bytes: &[u8]) -> io::Result<()>;
    /// Makes everything appended so far durable.
    fn sync(&self) -> io::Result<()>;
    /// `Err` with the reason when this handle no longer writes the log the store names (the
    /// file was replaced or moved). Called under the lock before every append.
    fn check_current(&self) -> std::result::Result<(), String>;
    /// Takes the write lock, waiting up to `timeout`; the error names the holder when known.
    fn lock(&self, timeout: Duration) -> Result<Box<dyn MediumGuard>>;
}

/// Lets the loader read a medium as it reads a file.
pub(crate) struct MediumReader<'a>(pub(crate) &'a dyn SessionMedium);

impl ReadAt for MediumReader<'_> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.0.read_at(buf, offset)
    }
}

/// A pi session file on this machine: read + `O_APPEND`, locked through its `.lock` sidecar.
#[derive(Debug)]
pub struct FileMedium {
    path: PathBuf,
    file: File,
    identity: FileId,
    lock: SessionLock,
}

impl FileMedium {
    /// Opens the existing file at `path` for reading and appending, with its lock sidecar.
    pub fn open(path: &Path) -> Result<Self> {
        let lock = SessionLock::open(path)?;
        Self::open_with_lock(path, lock)
    }

    /// [`open`](Self::open) with a lock sidecar already opened.
    pub(crate) fn open_with_lock(path: &Path, lock: SessionLock) -> Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(path)
            .map_err(|e| SessionError::io(path, "open for appending", e))?;
        let identity = FileId::of(
            &file
                .metadata()
                .map_err(|e| SessionError::io(path, "read the metadata of", e))?,
        );
        Ok(Self {
            path: path.to_owned(),
            file,
            identity,
            lock,
        })
    }

    /// The open file (to read it as the loader does).
    pub(crate) fn file(&self) -> &File {
        &self.file
    }
}

impl MediumGuard for crate::lock::LockGuard {}

impl SessionMedium for FileMedium {
    fn path(&self) -> &Path {
        &self.path
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        ReadAt::read_at(&self.file, buf, offset)
    }

    fn append(&self, bytes: &[u8]) -> io::Result<()> {
        // One `write` of whole lines: with `O_APPEND` the kernel places it at the end as a
        // unit. `write_all` only loops if the OS accepts part of it (a full disk), in which
        // case the next catch-up quarantines the partial line.
        (&self.file).write_all(bytes)
    }

    fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn check_current(&self) -> std::result::Result<(), String> {
        match std::fs::metadata(&self.path) {
            Ok(at_path) if FileId::of(&at_path) == self.identity => Ok(()),
            Ok(_) => Err("the path now names a different file (it was replaced, e.g. by a migration or another tool)".into()),
            Err(error) => Err(format!("the file is no longer at its path ({error})")),
        }
    }

    fn lock(&self, timeout: Duration) -> Result<Box<dyn MediumGuard>> {
        Ok(Box::new(self.lock.acquire(timeout)?))
    }
}

/// Which file a handle is appending to, to notice when the path starts naming another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId {
    #[cfg(unix)]
    dev: u64,
    #[cfg(unix)]
    ino: u64,
}

impl FileId {
    fn of(meta: &std::fs::Metadata) -> Self {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            Self {
                dev: meta.dev(),
                ino: meta.ino(),
            }
        }
        #[cfg(not(unix))]
        {
            let _ = meta;
            Self {}
        }
    }
}

/// A log kept in this process's memory, shared by every clone (see the module docs).
///
/// Clones are handles on one log, as two processes' file handles are on one file: appends of
/// one are read by the others, and the lock excludes across clones. The lock is not
/// re-entrant: a second `lock` from a holder waits, as a second `flock` on another open file
/// description does.
#[derive(Debug, Clone)]
pub struct MemoryMedium {
    name: PathBuf,
    shared: Arc<MemoryLog>,
}

#[derive(Debug, Default)]
struct MemoryLog {
    bytes: Mutex<Vec<u8>>,
    locked: Mutex<bool>,
    released: Condvar,
}

impl MemoryMedium {
    /// An empty log called `name` in errors.
    pub fn new(name: impl Into<PathBuf>) -> Self {
        Self {
            name: name.into(),
            shared: Arc::default(),
        }
    }

    /// Everything appended so far.
    pub fn contents(&self) -> Vec<u8> {
        lock_ignoring_poison(&self.shared.bytes).clone()
    }
}

fn lock_ignoring_poison<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The write lock of a [`MemoryMedium`], released on drop.
#[derive(Debug)]
struct MemoryGuard(Arc<MemoryLog>);

impl MediumGuard for MemoryGuard {}

impl Drop for MemoryGuard {
    fn drop(&mut self) {
        *lock_ignoring_poison(&self.0.locked) = false;
        self.0.released.notify_one();
    }
}

impl SessionMedium for MemoryMedium {
    fn path(&self) -> &Path {
        &self.name
    }

    fn len(&self) -> io::Result<u64> {
        Ok(lock_ignoring_poison(&self.shared.bytes).len() as u64)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let bytes = lock_ignoring_poison(&self.shared.bytes);
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(bytes.len());
        let n = buf.len().min(bytes.len() - start);
        buf[..n].copy_from_slice(&bytes[start..start + n]);
        Ok(n)
    }

    fn append(&self, bytes: &[u8]) -> io::Result<()> {
        lock_ignoring_poison(&self.shared.bytes).extend_from_slice(bytes);
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        Ok(())
    }

    fn check_current(&self) -> std::result::Result<(), String> {
        Ok(())
    }

    fn lock(&self, timeout: Duration) -> Result<Box<dyn MediumGuard>> {
        let deadline = Instant::now() + timeout;
        let mut locked = lock_ignoring_poison(&self.shared.locked);
        while *locked {
            let now = Instant::now();
            if now >= deadline {
                return Err(SessionError::Locked {
                    path: self.name.clone(),
                    lock_path: self.name.clone(),
                    holder: None,
                    waited: timeout,
                });
            }
            locked = self
                .shared
                .released
                .wait_timeout(locked, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        *locked = true;
        Ok(Box::new(MemoryGuard(Arc::clone(&self.shared))))
    }
}

/// Writes `header_line` (with its newline) as the first bytes of an empty medium.
pub(crate) fn write_header(medium: &dyn SessionMedium, header_line: &str) -> Result<()> {
    let _guard = medium.lock(Duration::from_secs(10))?;
    let len = medium
        .len()
        .map_err(|e| SessionError::io(medium.path(), "read the size of", e))?;
    if len > 0 {
        return Err(SessionError::InvalidRequest {
            path: medium.path().to_owned(),
            problem: "the store already holds a session there; open it instead".into(),
        });
    }
    let mut line = Vec::with_capacity(header_line.len() + 1);
    line.write_all(header_line.as_bytes())
        .and_then(|()| line.write_all(b"\n"))
        .and_then(|()| medium.append(&line))
        .and_then(|()| medium.sync())
        .map_err(|e| SessionError::io(medium.path(), "create", e))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "medium_tests.rs"]
mod tests;
