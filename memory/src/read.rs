//! Reading a memory file for `memory_get` (`prompt-and-memory.md` §2.6).
//!
//! Only memory files may be read: `MEMORY.md`, `memory.md`, `DREAMS.md`, files under
//! `memory/`, or inside the extra paths, and only `.md`. Anything else is refused with a
//! [`PathRefusal`] that says what is wrong: a path that climbs out with `..`, one that is not
//! a memory file or not markdown, a symbolic link (the file, or a directory on the way), a
//! directory. A memory file that does not exist reads as empty text with `exists: false`: the
//! model often asks for today's note before it exists, and a person asking for it is told.
//!
//! The same rules decide what the memory flush may write ([`crate::write`]).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::{MemoryError, PathRefusal};
use crate::sources::{index_name, is_memory_path, resolve_lexically};

/// What `memory_get` returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadResult {
    /// The file, as search names it.
    pub path: String,
    /// The text read (empty for a missing file or a range past its end).
    pub text: String,
    /// Whether the file exists: a missing one reads as empty text, which a person must be
    /// able to tell from an empty file.
    pub exists: bool,
}

/// Reads `requested` (relative to `workspace`, or absolute), whole or `lines` lines from the
/// 1-based line `from`. `from` and `lines` of 0 count as absent.
pub fn read_memory_file(
    workspace: &Path,
    extra_paths: &[PathBuf],
    requested: &str,
    from: Option<usize>,
    lines: Option<usize>,
) -> Result<ReadResult, MemoryError> {
    let raw = requested.trim();
    let refuse = |why| MemoryError::PathNotAllowed {
        path: raw.to_string(),
        why,
    };
    if raw.is_empty() {
        return Err(refuse(PathRefusal::Empty));
    }
    let abs = resolve_lexically(workspace, Path::new(raw));
    let name = index_name(workspace, &abs);
    let root = memory_root(workspace, extra_paths, &abs, &name).map_err(refuse)?;
    let Some(meta) = unlinked_metadata(workspace, &root, &abs).map_err(|e| match e {
        Walk::Refused(why) => refuse(why),
        Walk::Io(e) => e,
    })?
    else {
        return Ok(ReadResult {
            path: name,
            text: String::new(),
            exists: false,
        });
    };
    if !meta.file_type().is_file() {
        return Err(refuse(PathRefusal::NotRegularFile));
    }
    // No link below the root was followed, so the real file is under the real root; checked
    // again on the resolved path in case the tree changed between the two looks.
    let real = fs::canonicalize(&abs).map_err(|source| MemoryError::Io {
        path: abs.clone(),
        action: "resolve",
        source,
    })?;
    let real_root = fs::canonicalize(&root).unwrap_or(root);
    if !real.starts_with(&real_root) {
        return Err(refuse(PathRefusal::ResolvesOutside { real }));
    }
    let bytes = fs::read(&abs).map_err(|source| MemoryError::Io {
        path: abs.clone(),
        action: "read",
        source,
    })?;
    let content = String::from_utf8_lossy(&bytes);
    let from = from.filter(|n| *n > 0);
    let lines = lines.filter(|n| *n > 0);
    if from.is_none() && lines.is_none() {
        return Ok(ReadResult {
            path: name,
            text: content.into_owned(),
            exists: true,
        });
    }
    let all: Vec<&str> = content.split('\n').collect();
    let start = from.unwrap_or(1).max(1) - 1;
    let count = lines.unwrap_or(all.len()).max(1);
    let text = all
        .iter()
        .skip(start)
        .take(count)
        .copied()
        .collect::<Vec<_>>()
        .join("\n");
    Ok(ReadResult {
        path: name,
        text,
        exists: true,
    })
}

/// The directory `abs` (named `name`) may be used under: the workspace for a memory file in
/// it, or the extra path that allows it; else why not. Lexical only: links are looked at by
/// the caller.
pub(crate) fn memory_root(
    workspace: &Path,
    extra_paths: &[PathBuf],
    abs: &Path,
    name: &str,
) -> Result<PathBuf, PathRefusal> {
    let in_workspace = abs.starts_with(workspace) && abs != workspace;
    let root = if in_workspace && is_memory_path(name) {
        workspace.to_path_buf()
    } else if let Some(extra) = allowing_extra_path(workspace, extra_paths, abs) {
        extra
    } else if in_workspace {
        return Err(PathRefusal::NotMemoryFile);
    } else {
        return Err(PathRefusal::OutsideWorkspace);
    };
    if abs.extension().is_none_or(|e| e != "md") {
        return Err(PathRefusal::NotMarkdown);
    }
    Ok(root)
}

/// Why [`unlinked_metadata`] gave up.
enum Walk {
    Refused(PathRefusal),
    Io(MemoryError),
}

/// The metadata of `abs` after checking that no part of it below `root` is a symbolic link;
/// `None` when it (or a directory on the way) does not exist.
fn unlinked_metadata(
    workspace: &Path,
    root: &Path,
    abs: &Path,
) -> Result<Option<fs::Metadata>, Walk> {
    let Ok(below) = abs.strip_prefix(root) else {
        return Err(Walk::Refused(PathRefusal::OutsideWorkspace));
    };
    let mut at = root.to_path_buf();
    let mut meta = None;
    let mut parts = below.components().peekable();
    while let Some(part) = parts.next() {
        at.push(part);
        let m = match fs::symlink_metadata(&at) {
            Ok(m) => m,
            Err(e)
                if e.kind() == io::ErrorKind::NotFound
                    || e.kind() == io::ErrorKind::NotADirectory =>
            {
                return Ok(None);
            }
            Err(source) => {
                return Err(Walk::Io(MemoryError::Io {
                    path: at,
                    action: "inspect",
                    source,
                }));
            }
        };
        if m.file_type().is_symlink() {
            return Err(Walk::Refused(if parts.peek().is_none() {
                PathRefusal::Symlink
            } else {
                PathRefusal::LinkedDirectory {
                    component: index_name(workspace, &at),
                }
            }));
        }
        meta = Some(m);
    }
    Ok(meta)
}

/// The extra path that allows `abs`, if one does: a directory containing it (symlinked
/// directories do not count), or the very `.md` file.
fn allowing_extra_path(workspace: &Path, extra_paths: &[PathBuf], abs: &Path) -> Option<PathBuf> {
    for extra in extra_paths {
        let extra = resolve_lexically(workspace, extra);
        let Ok(meta) = fs::symlink_metadata(&extra) else {
            continue;
        };
        if meta.file_type().is_dir() && abs.starts_with(&extra) && abs != extra {
            return Some(extra);
        }
        if meta.file_type().is_file()
            && extra.extension().is_some_and(|e| e == "md")
            && abs == extra
        {
            return extra.parent().map(Path::to_path_buf);
        }
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "read_tests.rs"]
mod tests;
