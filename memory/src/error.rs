//! Errors of the memory index, with an exhaustive classification.
//!
//! Every variant names the file it is about and says what to do. [`MemoryError::kind`] is
//! total, so a caller that branches on failures cannot miss a new one. Whatever fails, the
//! markdown files are never written: they are the source of truth and the index is derived
//! from them.

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::embed::EmbedError;

/// What kind of failure a [`MemoryError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The operating system refused a read, rename or directory listing.
    Io,
    /// SQLite failed on a healthy-looking database (locked, disk full, read-only).
    Database,
    /// The database file is damaged or is not a memory index.
    Corrupt,
    /// The embedding provider failed.
    Embedding,
    /// A path that `memory_get` may not read, or the memory flush may not write.
    PathNotAllowed,
    /// Another process is updating the index and did not finish in time.
    Locked,
    /// Memory is turned off in the settings.
    Disabled,
    /// The file watcher could not start.
    Watch,
}

impl ErrorKind {
    /// A short lower-case name for structured logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Io => "io",
            Self::Database => "database",
            Self::Corrupt => "corrupt",
            Self::Embedding => "embedding",
            Self::PathNotAllowed => "path_not_allowed",
            Self::Locked => "locked",
            Self::Disabled => "disabled",
            Self::Watch => "watch",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failure of the memory index. The `Display` text is for people.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// A file-system call failed.
    #[error("could not {action} {}: {source}; check that it exists and is readable (and the directory writable)", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being attempted ("read", "list", "rename", …).
        action: &'static str,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// SQLite failed.
    #[error("memory index {}: {action} failed: {source}; check that the disk is not full and no other program holds the file (the index can be deleted: it is rebuilt from the markdown)", path.display())]
    Database {
        /// The database file.
        path: PathBuf,
        /// What was being done, in words.
        action: String,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
    /// The database is damaged, or is some other program's database.
    #[error("memory index {} is unusable ({detail}); it is moved aside and rebuilt from the markdown", path.display())]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// What was found.
        detail: String,
    },
    /// The embedding provider failed.
    #[error("{source}")]
    Embedding {
        /// The provider's error.
        #[from]
        source: EmbedError,
    },
    /// `memory_get` was asked for a file it may not read, or the flush for one it may not
    /// write. The message says what is wrong with the path, first.
    #[error("{}", why.describe(path))]
    PathNotAllowed {
        /// The path as asked.
        path: String,
        /// What is wrong with it.
        why: PathRefusal,
    },
    /// Another process holds the index's sync lock past the deadline.
    #[error("memory index {} is being updated by {}; waited {}s for it. Wait for that to finish and retry, or stop that process if it hangs (lock file {})", path.display(), holder.as_deref().unwrap_or("another process"), waited.as_secs(), lock_path.display())]
    Locked {
        /// The index.
        path: PathBuf,
        /// Its lock file.
        lock_path: PathBuf,
        /// Who holds the lock, as its lock file says (`process 4242 (since …)`).
        holder: Option<String>,
        /// How long this process waited.
        waited: std::time::Duration,
    },
    /// Memory is off.
    #[error("memory search disabled; turn it on in the memory settings to use it")]
    Disabled,
    /// The watcher could not watch a path.
    #[error("could not watch {} for memory changes: {source}; check the inotify watch limit (fs.inotify.max_user_watches) or sync by hand", path.display())]
    Watch {
        /// The path.
        path: PathBuf,
        /// notify's error.
        #[source]
        source: notify::Error,
    },
}

impl MemoryError {
    /// The failure's kind.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Io { .. } => ErrorKind::Io,
            Self::Database { .. } => ErrorKind::Database,
            Self::Corrupt { .. } => ErrorKind::Corrupt,
            Self::Embedding { .. } => ErrorKind::Embedding,
            Self::PathNotAllowed { .. } => ErrorKind::PathNotAllowed,
            Self::Locked { .. } => ErrorKind::Locked,
            Self::Disabled => ErrorKind::Disabled,
            Self::Watch { .. } => ErrorKind::Watch,
        }
    }

    /// Whether this is an embedding provider out of quota (or rate limited): the failure
    /// result of `memory_search` then tells the user to top up or switch providers.
    pub fn is_quota(&self) -> bool {
        match self {
            Self::Embedding { source } => source.is_quota(),
            _ => false,
        }
    }

    /// A database error, classified: SQLite's "corrupt" and "not a database" codes become
    /// [`MemoryError::Corrupt`] so that the caller moves the file aside.
    pub fn database(
        path: &std::path::Path,
        action: impl Into<String>,
        source: rusqlite::Error,
    ) -> Self {
        let action = action.into();
        if is_corruption(&source) {
            return Self::Corrupt {
                path: path.to_path_buf(),
                detail: format!("{action}: {source}"),
            };
        }
        Self::Database {
            path: path.to_path_buf(),
            action,
            source,
        }
    }
}

/// What is wrong with a path the memory tools refuse. Each says it in its own words, so a
/// person (or a model) knows what to change rather than reading a generic "path required".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathRefusal {
    /// No path was given.
    Empty,
    /// It leads out of the workspace (`..`, or an absolute path elsewhere) and into no
    /// configured extra path.
    OutsideWorkspace,
    /// It is in the workspace but is not one of the memory files.
    NotMemoryFile,
    /// It does not end in `.md`.
    NotMarkdown,
    /// It is a symbolic link: memory files are only used where they are, so a link cannot
    /// lead reads or writes out of the workspace.
    Symlink,
    /// A directory on the way (`component`, as search names paths) is a symbolic link.
    LinkedDirectory {
        /// The linked directory.
        component: String,
    },
    /// It is a directory, a FIFO, a socket or a device.
    NotRegularFile,
    /// It leads outside its root (`real`) through a linked directory.
    ResolvesOutside {
        /// Where it really is.
        real: PathBuf,
    },
}

/// What memory files are, for the messages that refuse a path.
const MEMORY_FILES: &str = "memory files are MEMORY.md, memory.md, DREAMS.md, files under memory/ and the configured extra paths, ending in .md";

impl PathRefusal {
    /// The whole message for `path`: what is wrong with it, then what to do.
    pub fn describe(&self, path: &str) -> String {
        match self {
            Self::Empty => format!("no path given: name a memory file ({MEMORY_FILES})"),
            Self::OutsideWorkspace => format!(
                "{path} is outside the agent workspace and the configured extra paths; {MEMORY_FILES}"
            ),
            Self::NotMemoryFile => format!("{path} is not a memory file; {MEMORY_FILES}"),
            Self::NotMarkdown => format!("{path} is not a markdown file; {MEMORY_FILES}"),
            Self::Symlink => format!(
                "{path} is a symbolic link; memory files are used only where they are, never through a link: replace the link with the file itself"
            ),
            Self::LinkedDirectory { component } => format!(
                "{path} goes through a symbolic link ({component}); memory files are used only where they are, never through a link: replace the link with the directory itself"
            ),
            Self::NotRegularFile => {
                format!(
                    "{path} is not a regular file (a directory, FIFO or device); name a .md file"
                )
            }
            Self::ResolvesOutside { real } => format!(
                "{path} resolves to {} through a linked directory, outside where memory files are; replace the link with the directory itself",
                real.display()
            ),
        }
    }
}

/// Whether SQLite reported a damaged file.
pub fn is_corruption(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
    )
}
