//! Reading a memory file for `memory_get` (`prompt-and-memory.md` §2.6).
//!
//! Only memory files may be read: `MEMORY.md`, `memory.md`, `DREAMS.md`, files under
//! `memory/`, or inside the extra paths, and only `.md`. Anything else (including a path
//! that climbs out with `..`, a symlink, or a path that resolves outside through a linked
//! directory) is refused with "path required", OpenClaw's wording. A memory file that does
//! not exist reads as empty text: the model often asks for today's note before it exists.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::MemoryError;
use crate::sources::{index_name, is_memory_path, resolve_lexically};

/// What `memory_get` returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadResult {
    /// The file, as search names it.
    pub path: String,
    /// The text read (empty for a missing file or a range past its end).
    pub text: String,
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
    let refuse = || MemoryError::PathNotAllowed {
        path: requested.to_string(),
    };
    if raw.is_empty() {
        return Err(refuse());
    }
    let abs = resolve_lexically(workspace, Path::new(raw));
    let name = index_name(workspace, &abs);
    let in_workspace = abs.starts_with(workspace) && abs != workspace;
    let mut root: Option<PathBuf> =
        (in_workspace && is_memory_path(&name)).then(|| workspace.to_path_buf());
    if root.is_none() {
        root = allowing_extra_path(workspace, extra_paths, &abs);
    }
    let Some(root) = root else {
        return Err(refuse());
    };
    if abs.extension().is_none_or(|e| e != "md") {
        return Err(refuse());
    }
    let meta = match fs::symlink_metadata(&abs) {
        Ok(m) => m,
        Err(e)
            if e.kind() == io::ErrorKind::NotFound || e.kind() == io::ErrorKind::NotADirectory =>
        {
            return Ok(ReadResult {
                path: name,
                text: String::new(),
            });
        }
        Err(source) => {
            return Err(MemoryError::Io {
                path: abs,
                action: "inspect",
                source,
            });
        }
    };
    if !meta.file_type().is_file() {
        return Err(refuse());
    }
    // A directory on the way may be a link to elsewhere: the real file must be under the
    // real root.
    let real = fs::canonicalize(&abs).map_err(|source| MemoryError::Io {
        path: abs.clone(),
        action: "resolve",
        source,
    })?;
    let real_root = fs::canonicalize(&root).unwrap_or(root);
    if !real.starts_with(&real_root) {
        return Err(refuse());
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
    Ok(ReadResult { path: name, text })
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
