//! The per-session write lock, shared by every process that writes the session.
//!
//! An advisory `flock` on a sidecar `<session>.lock` (through fs4). The sidecar, not the
//! session file, carries the lock so that locking never depends on how the session file is
//! opened, and so a migration can replace the session file while the lock stays put.
//!
//! * **Who holds it.** The holder writes its pid, its process start time and the time it took
//!   the lock into the sidecar. A writer that gives up waiting reads that and names the pid
//!   in its error, so the user knows which process to look at.
//! * **Dead holders.** The kernel drops a `flock` when its process dies, however it dies, so
//!   a lock is never left held by a dead process. Only the sidecar's *text* can be stale; the
//!   next holder notices a record of a process that is gone (or whose pid now belongs to a
//!   process started later), logs that it recovered the lock, and overwrites the record.
//! * **Never deleted.** The sidecar stays after use. Deleting it would let two processes lock
//!   two different files of the same name; a blank sidecar (one record of spaces) costs nothing.
//! * Waiting polls `try_lock` with a short backoff up to the configured timeout, because a
//!   blocking `flock` cannot be given a deadline.
//!
//! A lock is per open file description, so two `Session`s for one file in the same process
//! exclude each other too.
#![warn(missing_docs)]

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::{Result, SessionError};
pub use crate::holder::LockHolder;

/// The lock sidecar of one session file.
#[derive(Debug)]
pub struct SessionLock {
    session: PathBuf,
    path: PathBuf,
    file: File,
}

/// Proof that the lock is held; released (and the holder record cleared) on drop.
#[derive(Debug)]
pub struct LockGuard {
    file: File,
    path: PathBuf,
}

impl SessionLock {
    /// Opens (creating if needed) the lock sidecar `<session>.lock`.
    pub fn open(session: &Path) -> Result<Self> {
        let path = lock_path(session);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| SessionError::io(&path, "open the lock file", e))?;
        Ok(Self {
            session: session.into(),
            path,
            file,
        })
    }

    /// The sidecar's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Who the sidecar says holds the lock (or last held it); `None` if it records nobody.
    pub fn holder(&self) -> Option<LockHolder> {
        read_holder(&self.file)
    }

    /// Takes the lock, waiting up to `timeout`. The error names the holder's pid.
    pub fn acquire(&self, timeout: Duration) -> Result<LockGuard> {
        let started = Instant::now();
        let mut pause = Duration::from_millis(1);
        let mut announced = false;
        loop {
            match fs4::FileExt::try_lock(&self.file) {
                Ok(()) => break,
                Err(fs4::TryLockError::WouldBlock) => {}
                Err(fs4::TryLockError::Error(error)) => {
                    return Err(SessionError::io(&self.path, "lock", error));
                }
            }
            let waited = started.elapsed();
            if waited >= timeout {
                let holder = self.holder();
                tracing::warn!(
                    file = %self.session.display(),
                    lock_file = %self.path.display(),
                    holder_pid = holder.as_ref().map(|h| h.pid),
                    waited_ms = u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
                    "gave up waiting for the session write lock"
                );
                return Err(SessionError::Locked {
                    path: self.session.clone(),
                    lock_path: self.path.clone(),
                    holder,
                    waited,
                });
            }
            if !announced {
                announced = true;
                tracing::debug!(
                    file = %self.session.display(),
                    holder_pid = self.holder().map(|h| h.pid),
                    "waiting for the session write lock"
                );
            }
            std::thread::sleep(pause.min(timeout - waited));
            pause = (pause * 2).min(Duration::from_millis(25));
        }

        let guard_file = match self.file.try_clone() {
            Ok(file) => file,
            Err(error) => {
                let _ = fs4::FileExt::unlock(&self.file);
                return Err(SessionError::io(
                    &self.path,
                    "duplicate the handle of",
                    error,
                ));
            }
        };
        let me = LockHolder::current();
        if let Some(previous) = read_holder(&self.file)
            && previous.pid != me.pid
            && !previous.is_alive()
        {
            tracing::info!(
                file = %self.session.display(),
                stale_pid = previous.pid,
                since = %previous.acquired_at,
                "recovered a session lock last recorded by a process that no longer runs"
            );
        }
        // The record is advice for people and error messages, not part of the locking, so a
        // failure to write it is logged and the lock is still used.
        if let Err(error) = write_holder(&self.file, &me) {
            tracing::debug!(lock_file = %self.path.display(), %error, "could not record the lock holder");
        }
        Ok(LockGuard {
            file: guard_file,
            path: self.path.clone(),
        })
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        // Clear the record first: once unlocked, the text would name a process that no longer
        // holds the lock. Overwritten in place with blanks, not truncated: a truncation frees
        // the file's block and the next record allocates it again, both journalled, on every
        // turn of every conversation.
        let _ = clear_holder(&self.file);
        if let Err(error) = fs4::FileExt::unlock(&self.file) {
            tracing::warn!(lock_file = %self.path.display(), %error, "could not release the session lock; it is released when this process exits");
        }
    }
}

/// `<session>.lock`.
pub fn lock_path(session: &Path) -> PathBuf {
    let mut name = session.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

fn read_holder(file: &File) -> Option<LockHolder> {
    let mut buf = vec![0u8; 512];
    let n = crate::split::ReadAt::read_at(file, &mut buf, 0).ok()?;
    let text = std::str::from_utf8(&buf[..n]).ok()?;
    serde_json::from_str(text.trim()).ok()
}

/// How many bytes a holder record occupies: the record, padded with spaces, and a newline. A
/// record is written over the last one in place (and blanked in place on release), so the
/// sidecar keeps this length and is never truncated while a server takes its lock every turn.
/// A record is about 90 bytes; the room is for longer pids and timestamps.
const RECORD_WIDTH: usize = 256;

fn write_holder(file: &File, holder: &LockHolder) -> io::Result<()> {
    let mut text = serde_json::to_string(holder)?;
    if text.len() >= RECORD_WIDTH {
        // Never with today's fields; kept correct if the record grows.
        file.set_len(0)?;
        text.push('\n');
        return write_all_at(file, text.as_bytes(), 0);
    }
    if file.metadata()?.len() > RECORD_WIDTH as u64 {
        // A longer sidecar (an older version's, or an oversized record's) would keep its
        // tail after the record.
        file.set_len(0)?;
    }
    let mut record = text.into_bytes();
    record.resize(RECORD_WIDTH - 1, b' ');
    record.push(b'\n');
    write_all_at(file, &record, 0)
}

/// Blanks the record in place: [`read_holder`] reads blanks as nobody. A sidecar longer than
/// a record (written by a version that did not pad, or an oversized record) is truncated.
fn clear_holder(file: &File) -> io::Result<()> {
    if file.metadata()?.len() > RECORD_WIDTH as u64 {
        return file.set_len(0);
    }
    let mut blank = [b' '; RECORD_WIDTH];
    blank[RECORD_WIDTH - 1] = b'\n';
    write_all_at(file, &blank, 0)
}

#[cfg(unix)]
fn write_all_at(file: &File, bytes: &[u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, bytes, offset)
}

#[cfg(windows)]
fn write_all_at(file: &File, bytes: &[u8], offset: u64) -> io::Result<()> {
    let mut done = 0;
    while done < bytes.len() {
        done +=
            std::os::windows::fs::FileExt::seek_write(file, &bytes[done..], offset + done as u64)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn second_lock_in_the_same_process_times_out_naming_the_pid() {
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("s.jsonl");
        let a = SessionLock::open(&session).unwrap();
        let b = SessionLock::open(&session).unwrap();
        let guard = a.acquire(Duration::from_secs(1)).unwrap();
        let err = b.acquire(Duration::from_millis(30)).unwrap_err();
        assert!(matches!(err, SessionError::Locked { .. }));
        assert!(
            err.to_string()
                .contains(&format!("process {}", std::process::id())),
            "{err}"
        );
        drop(guard);
        let _again = b.acquire(Duration::from_millis(30)).unwrap();
        assert_eq!(b.holder().unwrap().pid, std::process::id());
    }

    #[test]
    fn a_released_lock_records_nobody_and_the_sidecar_keeps_one_record_of_room() {
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("s.jsonl");
        let lock = SessionLock::open(&session).unwrap();
        for _ in 0..3 {
            let guard = lock.acquire(Duration::from_secs(1)).unwrap();
            assert_eq!(lock.holder().unwrap().pid, std::process::id());
            drop(guard);
            assert_eq!(lock.holder(), None, "a released lock names nobody");
        }
        let len = std::fs::metadata(lock.path()).unwrap().len();
        assert_eq!(len, RECORD_WIDTH as u64, "blanked in place, never grown");
    }

    #[test]
    fn a_longer_sidecar_from_an_older_version_is_cut_to_one_record() {
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("s.jsonl");
        let old = format!(
            "{{\"pid\":{},\"acquiredAt\":\"2026-01-01T00:00:00Z\"}}\n{}",
            std::process::id(),
            " ".repeat(600)
        );
        std::fs::write(lock_path(&session), old).unwrap();
        let lock = SessionLock::open(&session).unwrap();
        let guard = lock.acquire(Duration::from_secs(1)).unwrap();
        assert_eq!(lock.holder().unwrap().pid, std::process::id());
        assert_eq!(
            std::fs::metadata(lock.path()).unwrap().len(),
            RECORD_WIDTH as u64
        );
        drop(guard);
        assert_eq!(lock.holder(), None);
    }

    #[test]
    fn own_process_is_alive_and_start_time_is_known_on_linux() {
        let me = LockHolder::current();
        assert!(me.is_alive());
        if cfg!(target_os = "linux") {
            assert!(me.process_start.is_some());
            let reused = LockHolder {
                process_start: me.process_start.map(|t| t + 1),
                ..me
            };
            assert!(!reused.is_alive());
        }
    }
}
