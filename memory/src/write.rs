//! Appending to a memory file, for the pre-compaction memory flush: the one place where the
//! markdown of long-term memory is written by the program rather than by its user.
//!
//! The write must stay in the workspace whatever the file tree holds. Checking a path and then
//! opening it by name would leave a window in which a directory or the file is swapped for a
//! symbolic link (and a plain `open` follows links anyway), so on Unix the path is walked
//! with file descriptors instead: the workspace directory is opened, then each directory
//! below it with `openat(O_DIRECTORY | O_NOFOLLOW)` (created `0700` when missing), and the
//! file itself with `openat(O_APPEND | O_CREAT | O_NOFOLLOW)`, mode `0600`. Each step opens
//! a name inside a directory already held open, and refuses a link, so nothing swapped in at
//! any moment can lead the write out. (The workspace path itself may be a link: it is the
//! user's choice of where the workspace lives.) A refusal is a
//! [`MemoryError::PathNotAllowed`] that says what is wrong.
//!
//! Only the workspace's own memory files are written (`MEMORY.md`, `memory.md`,
//! `DREAMS.md`, `memory/…`, ending in `.md`), never the extra paths.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Component, Path};

use crate::error::{MemoryError, PathRefusal};
use crate::sources::is_memory_path;

/// Appends `text` to the memory file `note` (relative to `workspace`, such as
/// `memory/2026-11-26.md`) as whole lines: after a newline when the file does not end with
/// one, trailing whitespace trimmed, one newline at the end. The file and its directories are
/// created when missing. Returns the bytes written; the data is on disk when it returns.
pub fn append_memory_file(workspace: &Path, note: &str, text: &str) -> Result<u64, MemoryError> {
    let refuse = |why| MemoryError::PathNotAllowed {
        path: note.to_string(),
        why,
    };
    let parts = note_parts(note).map_err(refuse)?;
    let io_error = |action: &'static str| {
        let path = workspace.join(note);
        move |source| MemoryError::Io {
            path,
            action,
            source,
        }
    };
    let mut file = match open_for_append(workspace, &parts) {
        Ok(file) => file,
        Err(Opened::Refused(why)) => return Err(refuse(why)),
        Err(Opened::Io(e)) => return Err(io_error("open for appending")(e)),
    };
    let meta = file.metadata().map_err(io_error("inspect"))?;
    if !meta.file_type().is_file() {
        return Err(refuse(PathRefusal::NotRegularFile));
    }
    let needs_newline =
        meta.len() > 0 && last_byte(&file, meta.len()).map_err(io_error("read"))? != Some(b'\n');
    let mut body = String::new();
    if needs_newline {
        body.push('\n');
    }
    body.push_str(text.trim_end());
    body.push('\n');
    file.write_all(body.as_bytes())
        .map_err(io_error("append to"))?;
    file.sync_data().map_err(io_error("flush to disk"))?;
    Ok(body.len() as u64)
}

/// The names of `note`'s components, when it is a workspace memory file named plainly
/// (relative, no `.` or `..`).
fn note_parts(note: &str) -> Result<Vec<&std::ffi::OsStr>, PathRefusal> {
    if note.trim().is_empty() {
        return Err(PathRefusal::Empty);
    }
    let path = Path::new(note);
    let mut parts = Vec::new();
    for component in path.components() {
        match component {
            Component::Normal(name) => parts.push(name),
            _ => return Err(PathRefusal::OutsideWorkspace),
        }
    }
    if !is_memory_path(note) {
        return Err(PathRefusal::NotMemoryFile);
    }
    if path.extension().is_none_or(|e| e != "md") {
        return Err(PathRefusal::NotMarkdown);
    }
    Ok(parts)
}

/// Why opening failed.
enum Opened {
    Refused(PathRefusal),
    Io(io::Error),
}

impl From<io::Error> for Opened {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

/// The last byte of a file of `len` bytes.
fn last_byte(file: &File, len: u64) -> io::Result<Option<u8>> {
    let mut byte = [0u8; 1];
    #[cfg(unix)]
    let n = std::os::unix::fs::FileExt::read_at(file, &mut byte, len - 1)?;
    #[cfg(not(unix))]
    let n = {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = file;
        f.seek(SeekFrom::Start(len - 1))?;
        f.read(&mut byte)?
    };
    Ok((n == 1).then_some(byte[0]))
}

#[cfg(unix)]
fn open_for_append(workspace: &Path, parts: &[&std::ffi::OsStr]) -> Result<File, Opened> {
    let Some((file_name, dirs)) = parts.split_last() else {
        return Err(Opened::Refused(PathRefusal::Empty));
    };
    let mut dir = open_workspace(workspace)?;
    let mut walked = String::new();
    for name in dirs {
        if !walked.is_empty() {
            walked.push('/');
        }
        walked.push_str(&name.to_string_lossy());
        dir =
            unix::open_child_dir(&dir, name).map_err(|e| classify(&dir, name, &walked, e, true))?;
    }
    if !walked.is_empty() {
        walked.push('/');
    }
    walked.push_str(&file_name.to_string_lossy());
    let flags = libc::O_RDWR
        | libc::O_APPEND
        | libc::O_CREAT
        | libc::O_NOFOLLOW
        | libc::O_CLOEXEC
        // A FIFO planted under the note's name must not block the open; it is refused below.
        | libc::O_NONBLOCK;
    let fd = unix::openat(&dir, file_name, flags, 0o600)
        .map_err(|e| classify(&dir, file_name, &walked, e, false))?;
    Ok(File::from(fd))
}

/// Why an `openat` of `name` in `dir` failed, in words: a link or something that is not a
/// directory is a refusal, anything else an I/O error.
#[cfg(unix)]
fn classify(
    dir: &std::os::fd::OwnedFd,
    name: &std::ffi::OsStr,
    walked: &str,
    error: io::Error,
    want_dir: bool,
) -> Opened {
    let code = error.raw_os_error();
    if code != Some(libc::ELOOP) && code != Some(libc::ENOTDIR) && code != Some(libc::EMLINK) {
        return Opened::Io(error);
    }
    match unix::is_symlink_at(dir, name) {
        Ok(true) if want_dir => Opened::Refused(PathRefusal::LinkedDirectory {
            component: walked.to_string(),
        }),
        Ok(true) => Opened::Refused(PathRefusal::Symlink),
        Ok(false) => Opened::Refused(PathRefusal::NotRegularFile),
        Err(_) => Opened::Io(error),
    }
}

/// The workspace directory, opened (created when missing). Links in its own path are
/// followed: where the workspace lives is the user's choice.
#[cfg(unix)]
fn open_workspace(workspace: &Path) -> Result<std::os::fd::OwnedFd, Opened> {
    match unix::open_dir(workspace) {
        Ok(fd) => Ok(fd),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            std::fs::create_dir_all(workspace)?;
            Ok(unix::open_dir(workspace)?)
        }
        Err(e) => Err(Opened::Io(e)),
    }
}

/// The few `libc` calls of the walk, each wrapped once.
#[cfg(unix)]
mod unix {
    use std::ffi::{CString, OsStr};
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;

    fn c_name(name: &OsStr) -> io::Result<CString> {
        CString::new(name.as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the path"))
    }

    fn owned(fd: libc::c_int) -> io::Result<OwnedFd> {
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by the kernel and is owned by nothing else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// `open(path, O_DIRECTORY)`, following links.
    pub(super) fn open_dir(path: &Path) -> io::Result<OwnedFd> {
        let path = c_name(path.as_os_str())?;
        // SAFETY: `path` is a NUL-terminated string that outlives the call.
        owned(unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        })
    }

    /// `openat(dir, name, flags, mode)`.
    pub(super) fn openat(
        dir: &OwnedFd,
        name: &OsStr,
        flags: libc::c_int,
        mode: libc::mode_t,
    ) -> io::Result<OwnedFd> {
        let name = c_name(name)?;
        // SAFETY: `dir` is an open descriptor and `name` a NUL-terminated string, both alive
        // for the call; `mode` is passed as the variadic argument `openat` reads with
        // O_CREAT.
        owned(unsafe {
            libc::openat(
                dir.as_raw_fd(),
                name.as_ptr(),
                flags,
                libc::c_uint::from(mode),
            )
        })
    }

    /// The directory `name` in `dir`, never through a link; created (`0700`) when missing.
    pub(super) fn open_child_dir(dir: &OwnedFd, name: &OsStr) -> io::Result<OwnedFd> {
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        match openat(dir, name, flags, 0) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let c = c_name(name)?;
                // SAFETY: as for `openat`.
                let rc = unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), 0o700) };
                if rc != 0 {
                    let e = io::Error::last_os_error();
                    // Another writer made it in between: use theirs (still without following
                    // a link).
                    if e.kind() != io::ErrorKind::AlreadyExists {
                        return Err(e);
                    }
                }
                openat(dir, name, flags, 0)
            }
            other => other,
        }
    }

    /// Whether `name` in `dir` is a symbolic link (not followed).
    pub(super) fn is_symlink_at(dir: &OwnedFd, name: &OsStr) -> io::Result<bool> {
        let c = c_name(name)?;
        let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: `dir` is open, `c` NUL-terminated, and `stat` points to writable memory of
        // the right size, which the kernel fills when the call succeeds.
        let rc = unsafe {
            libc::fstatat(
                dir.as_raw_fd(),
                c.as_ptr(),
                stat.as_mut_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the call succeeded, so `stat` is initialised.
        let stat = unsafe { stat.assume_init() };
        Ok(stat.st_mode & libc::S_IFMT == libc::S_IFLNK)
    }
}

/// Without `openat`: the path is checked for links part by part, then opened. A swap between
/// the two is not excluded here; Unix builds use the walk above.
#[cfg(not(unix))]
fn open_for_append(workspace: &Path, parts: &[&std::ffi::OsStr]) -> Result<File, Opened> {
    let mut at = workspace.to_path_buf();
    std::fs::create_dir_all(&at)?;
    let mut walked = String::new();
    for (i, name) in parts.iter().enumerate() {
        at.push(name);
        if !walked.is_empty() {
            walked.push('/');
        }
        walked.push_str(&name.to_string_lossy());
        let last = i + 1 == parts.len();
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(Opened::Refused(if last {
                    PathRefusal::Symlink
                } else {
                    PathRefusal::LinkedDirectory { component: walked }
                }));
            }
            Ok(m) if !last && !m.is_dir() => {
                return Err(Opened::Refused(PathRefusal::NotRegularFile));
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound && !last => std::fs::create_dir(&at)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(Opened::Io(e)),
        }
    }
    Ok(std::fs::OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(&at)?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "write_tests.rs"]
mod tests;
