//! One syncing process at a time per index: an advisory lock (`flock`, through fs4) on a
//! sidecar `<index>.lock`, held for the whole of a sync.
//!
//! Why: each sync reads which files the index holds, then writes the ones it lacks. Two
//! processes syncing at once (a `rampart memory index` while `rampart serve`'s watcher syncs,
//! or a few `index` runs started together) each found the index empty and each wrote every
//! passage, so every search hit came back several times. With the lock the second sync starts
//! after the first and finds everything up to date. (The writes are also idempotent per file,
//! see [`crate::sync`], so even a process without the lock cannot duplicate passages.)
//!
//! - **Who holds it.** The holder writes its pid and the time it took the lock into the
//!   sidecar; a process that gives up waiting names them in its error.
//! - **Dead holders.** The kernel drops a `flock` when its process dies, however it dies.
//! - **Never deleted.** Deleting the sidecar would let two processes lock two different files
//!   of the same name.
//! - A lock is per open file description, so two [`MemoryIndex`](crate::MemoryIndex)es of one
//!   file in the same process exclude each other too.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::MemoryError;

/// How long a sync waits for another process's sync before giving up with
/// [`MemoryError::Locked`]. A first sync of a large memory with a remote embedding provider
/// can take minutes; an incremental one takes milliseconds.
pub const SYNC_LOCK_WAIT: Duration = Duration::from_secs(300);

/// The sync lock of one index, held until dropped.
#[derive(Debug)]
pub struct SyncLock {
    file: File,
    path: PathBuf,
}

/// `<index>.lock`.
pub fn lock_path(db_path: &Path) -> PathBuf {
    let mut name = db_path.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

impl SyncLock {
    /// Takes the lock of the index at `db_path`, waiting up to `timeout` for another process
    /// to release it.
    pub fn acquire(db_path: &Path, timeout: Duration) -> Result<SyncLock, MemoryError> {
        let path = lock_path(db_path);
        let io = |action: &'static str, path: &Path| {
            let path = path.to_path_buf();
            move |source| MemoryError::Io {
                path,
                action,
                source,
            }
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io("open the lock file", &path))?;
        let started = Instant::now();
        let mut pause = Duration::from_millis(2);
        let mut announced = false;
        loop {
            // Fully qualified: `File` has an inherent `try_lock` on newer toolchains.
            match fs4::FileExt::try_lock(&file) {
                Ok(()) => break,
                Err(fs4::TryLockError::WouldBlock) => {}
                Err(fs4::TryLockError::Error(e)) => return Err(io("lock", &path)(e)),
            }
            let waited = started.elapsed();
            if waited >= timeout {
                let holder = read_holder(&file);
                tracing::warn!(
                    index = %db_path.display(),
                    lock_file = %path.display(),
                    holder = holder.as_deref().unwrap_or("unknown"),
                    waited_ms = u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
                    "gave up waiting for another process's memory sync"
                );
                return Err(MemoryError::Locked {
                    path: db_path.to_path_buf(),
                    lock_path: path,
                    holder,
                    waited,
                });
            }
            if !announced {
                announced = true;
                tracing::info!(
                    index = %db_path.display(),
                    holder = read_holder(&file).as_deref().unwrap_or("unknown"),
                    "another process is syncing this memory index; waiting for it"
                );
            }
            std::thread::sleep(pause.min(timeout - waited));
            pause = (pause * 2).min(Duration::from_millis(50));
        }
        let lock = SyncLock { file, path };
        // The record is advice for error messages, not part of the locking: a failure to
        // write it is logged and the lock still used.
        if let Err(e) = lock.record_holder() {
            tracing::debug!(lock_file = %lock.path.display(), error = %e, "could not record the memory sync lock's holder");
        }
        Ok(lock)
    }

    fn record_holder(&self) -> std::io::Result<()> {
        let mut file = &self.file;
        file.set_len(0)?;
        file.seek(SeekFrom::Start(0))?;
        let since = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ");
        write!(file, "process {} (since {since})", std::process::id())
    }
}

impl Drop for SyncLock {
    fn drop(&mut self) {
        // Cleared first: once unlocked, the text would name a process that no longer holds it.
        let _ = self.file.set_len(0);
        if let Err(e) = fs4::FileExt::unlock(&self.file) {
            tracing::warn!(lock_file = %self.path.display(), error = %e, "could not release the memory sync lock; it is released when this process exits");
        }
    }
}

/// What the lock file says about its holder (`process 4242 (since …)`), if anything.
fn read_holder(file: &File) -> Option<String> {
    let mut text = String::new();
    let mut f = file;
    f.seek(SeekFrom::Start(0)).ok()?;
    f.take(200).read_to_string(&mut text).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "sync_lock_tests.rs"]
mod tests;
