//! Errors of the session core, with an exhaustive classification.
//!
//! Every variant names the session file it is about and says what the user can do, because a
//! session error usually surfaces to a person reading a log line, not to code that can recover.
//! Callers that do want to branch on the failure use [`SessionError::kind`], which is total: a
//! new variant must pick a kind, so no failure falls through a `match` unclassified.
#![warn(missing_docs)]

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::holder::LockHolder;

/// What kind of failure a [`SessionError`] is, for callers that react differently per kind
/// (retry on `Locked`, reload on `Conflict`, show the user the rest).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The operating system refused a read, write, sync or rename.
    Io,
    /// The file is not a pi session at all (empty, binary, no header line).
    NotASession,
    /// The file is a session in a format version this build cannot read (newer than v3).
    Unsupported,
    /// An entry id that the caller named does not exist in the session.
    NotFound,
    /// Another process holds the session's write lock and did not let go in time.
    Locked,
    /// The file changed underneath this process in a way appends cannot follow (replaced,
    /// truncated); the session must be opened again.
    Conflict,
    /// The caller asked for something the session cannot do (a file that already exists, an
    /// entry that cannot be serialised).
    InvalidRequest,
}

impl ErrorKind {
    /// A short lower-case name for structured logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Io => "io",
            Self::NotASession => "not_a_session",
            Self::Unsupported => "unsupported",
            Self::NotFound => "not_found",
            Self::Locked => "locked",
            Self::Conflict => "conflict",
            Self::InvalidRequest => "invalid_request",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failure of a session operation. The `Display` text is meant for people: what happened,
/// to which file (and line, where there is one), and what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// An I/O call failed. `action` says what was being attempted, in words.
    #[error("could not {action} {}: {source}; check that the path exists, is writable and the disk is not full", path.display())]
    Io {
        /// The file or directory the call was about.
        path: PathBuf,
        /// What was being attempted ("read", "append to", "sync", …).
        action: &'static str,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },

    /// The file has no bytes at all. An empty file is not a session (a session always has a
    /// header line), so it is refused rather than silently treated as new.
    #[error("{} is empty (0 bytes), so it is not a pi session (line 1 must be the session header); delete it or create the session anew", path.display())]
    EmptyFile {
        /// The empty file.
        path: PathBuf,
    },

    /// Line `line` should be the session header and is not (binary data, invalid JSON, another
    /// JSON shape, a header without a required field).
    #[error("{}:{line} is not a pi session header: {problem}; this file is not a session (or its first line is damaged: restore it from a backup)", path.display())]
    NotASession {
        /// The file.
        path: PathBuf,
        /// The 1-based line that was expected to be the header.
        line: u64,
        /// What is wrong with it, in words.
        problem: String,
    },

    /// The header declares a format version this build does not know.
    #[error("{}:1 declares session format version {version}, newer than the version 3 this build reads; open it with a newer Rampart", path.display())]
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// The version the header declares.
        version: u64,
    },

    /// The caller named an entry id that is not in the session.
    #[error("entry `{id}` does not exist in {}; list the session's entries to pick an existing id", path.display())]
    UnknownEntry {
        /// The session file.
        path: PathBuf,
        /// The id that was asked for.
        id: String,
    },

    /// The write lock stayed taken for the whole wait.
    #[error("{} is locked by {holder_text} (lock file {}); gave up after {waited:?}. Wait for that process to finish, or stop it if it hangs: the lock is released as soon as it exits", path.display(), lock_path.display(), holder_text = HolderText(holder.as_ref()))]
    Locked {
        /// The session file.
        path: PathBuf,
        /// The lock sidecar.
        lock_path: PathBuf,
        /// Who holds the lock, as recorded in the sidecar (absent if it could not be read).
        holder: Option<LockHolder>,
        /// How long this process waited.
        waited: Duration,
    },

    /// The file on disk is no longer the one this process loaded (replaced by another
    /// program, or shorter than what was already read), so appending could corrupt it.
    #[error("{} changed underneath this process: {problem}; open the session again to see its current content", path.display())]
    Conflict {
        /// The session file.
        path: PathBuf,
        /// What changed, in words.
        problem: String,
    },

    /// The operation cannot be done as asked.
    #[error("{}: {problem}", path.display())]
    InvalidRequest {
        /// The session file the request was about.
        path: PathBuf,
        /// What is wrong and what to do instead.
        problem: String,
    },
}

impl SessionError {
    /// The classification of this error; total over all variants.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Io { .. } => ErrorKind::Io,
            Self::EmptyFile { .. } | Self::NotASession { .. } => ErrorKind::NotASession,
            Self::UnsupportedVersion { .. } => ErrorKind::Unsupported,
            Self::UnknownEntry { .. } => ErrorKind::NotFound,
            Self::Locked { .. } => ErrorKind::Locked,
            Self::Conflict { .. } => ErrorKind::Conflict,
            Self::InvalidRequest { .. } => ErrorKind::InvalidRequest,
        }
    }

    /// Whether the session's medium could not be reached (a shared store's database lost its
    /// connection: an I/O error of kind [`io::ErrorKind::NotConnected`]), so the same call may
    /// succeed later. A server answers these with "try again" (503), not as a failed request.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Self::Io { source, .. } if source.kind() == io::ErrorKind::NotConnected)
    }

    /// The session (or sidecar) file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            Self::Io { path, .. }
            | Self::EmptyFile { path }
            | Self::NotASession { path, .. }
            | Self::UnsupportedVersion { path, .. }
            | Self::UnknownEntry { path, .. }
            | Self::Locked { path, .. }
            | Self::Conflict { path, .. }
            | Self::InvalidRequest { path, .. } => path,
        }
    }

    /// Shorthand for [`SessionError::Io`].
    pub(crate) fn io(path: impl Into<PathBuf>, action: &'static str, source: io::Error) -> Self {
        Self::Io {
            path: path.into(),
            action,
            source,
        }
    }
}

/// Renders the lock holder for the `Locked` message ("process 1234 (started …)").
struct HolderText<'a>(Option<&'a LockHolder>);

impl fmt::Display for HolderText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(holder) => write!(f, "{holder}"),
            None => f.write_str("another process (its pid could not be read from the lock file)"),
        }
    }
}

/// Result alias for this crate's session operations.
pub type Result<T, E = SessionError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_names_the_file() {
        let path = PathBuf::from("/tmp/s.jsonl");
        let errors = [
            SessionError::io(&path, "read", io::Error::other("boom")),
            SessionError::EmptyFile { path: path.clone() },
            SessionError::NotASession {
                path: path.clone(),
                line: 1,
                problem: "binary".into(),
            },
            SessionError::UnsupportedVersion {
                path: path.clone(),
                version: 9,
            },
            SessionError::UnknownEntry {
                path: path.clone(),
                id: "abcd1234".into(),
            },
            SessionError::Locked {
                path: path.clone(),
                lock_path: path.with_extension("jsonl.lock"),
                holder: None,
                waited: Duration::from_millis(5),
            },
            SessionError::Conflict {
                path: path.clone(),
                problem: "replaced".into(),
            },
            SessionError::InvalidRequest {
                path: path.clone(),
                problem: "exists".into(),
            },
        ];
        for error in errors {
            assert!(error.to_string().contains("/tmp/s.jsonl"), "{error}");
            assert_eq!(error.path(), path.as_path());
            assert!(!error.kind().as_str().is_empty());
        }
    }
}
