//! Which files are indexed (`prompt-and-memory.md` §2.2).
//!
//! Memory: `MEMORY.md` and `memory.md` in the workspace, every `.md` under `memory/`
//! (recursively), and the extra paths (directories walked, single files only when `.md`).
//! Symlinks are never followed, so a link cannot pull a file from outside the workspace
//! into the index (or loop); build, VCS and virtualenv directories are skipped. A file
//! reached twice (`MEMORY.md` and `memory.md` on a case-insensitive disk, an extra path
//! inside `memory/`) is indexed once, under the first name.
//!
//! Sessions (opt-in): the `*.jsonl` transcripts directly in the sessions directory, named
//! `sessions/<file>`.

use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use crate::settings::Source;

/// A file to index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// Its name in the index: relative to the workspace with `/` when inside it
    /// (`memory/2026-04-01.md`), else absolute; `sessions/<file>` for transcripts.
    pub path: String,
    /// Where it is on disk.
    pub abs: PathBuf,
    /// Where it comes from.
    pub source: Source,
}

/// A file or directory that could not be read while syncing; the sync goes on without it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileProblem {
    /// The file or directory.
    pub path: PathBuf,
    /// What went wrong and what to do.
    pub message: String,
}

/// Directory names never walked into.
pub const IGNORED_DIRS: &[&str] = &[
    ".git",
    "node_modules",
    ".pnpm-store",
    ".venv",
    "venv",
    ".tox",
    "__pycache__",
];

/// Whether a directory with this name is skipped.
pub fn is_ignored_dir(name: &str) -> bool {
    IGNORED_DIRS.contains(&name)
}

/// Whether a workspace-relative path (with `/`) is one `memory_get` may read without an
/// extra path: `MEMORY.md`, `memory.md`, `DREAMS.md` or anything under `memory/`.
pub fn is_memory_path(rel: &str) -> bool {
    matches!(rel, "MEMORY.md" | "memory.md" | "DREAMS.md")
        || (rel.starts_with("memory/") && rel.len() > "memory/".len())
}

/// `path` joined to `base` when relative, with `.` and `..` resolved by name (no file-system
/// access, so it works for paths that do not exist).
pub fn resolve_lexically(base: &Path, path: &Path) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    };
    let mut out = PathBuf::new();
    for component in joined.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The index name of `abs`: relative to `workspace` with `/` when inside it, else the
/// absolute path.
pub fn index_name(workspace: &Path, abs: &Path) -> String {
    match abs.strip_prefix(workspace) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/"),
        _ => abs.to_string_lossy().replace('\\', "/"),
    }
}

fn is_markdown(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "md")
}

struct Lister<'a> {
    workspace: &'a Path,
    seen: HashSet<PathBuf>,
    files: Vec<SourceFile>,
    problems: Vec<FileProblem>,
}

impl Lister<'_> {
    fn problem(&mut self, path: &Path, what: &str, e: &io::Error) {
        self.problems.push(FileProblem {
            path: path.to_path_buf(),
            message: format!("could not {what}: {e}; check its permissions"),
        });
    }

    /// Adds a regular (non-symlink) markdown file once per real path.
    fn add_file(&mut self, abs: &Path) {
        let meta = match fs::symlink_metadata(abs) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return,
            Err(e) => return self.problem(abs, "inspect", &e),
        };
        if !meta.file_type().is_file() || !is_markdown(abs) {
            return;
        }
        let real = fs::canonicalize(abs).unwrap_or_else(|_| abs.to_path_buf());
        if self.seen.insert(real) {
            self.files.push(SourceFile {
                path: index_name(self.workspace, abs),
                abs: abs.to_path_buf(),
                source: Source::Memory,
            });
        }
    }

    /// Walks a directory (not a symlink) for markdown files, depth first in name order.
    fn walk(&mut self, dir: &Path) {
        let entries = match fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return,
            Err(e) => return self.problem(dir, "list", &e),
        };
        let mut children: Vec<(PathBuf, fs::FileType)> = Vec::new();
        for entry in entries {
            match entry.and_then(|e| Ok((e.path(), e.file_type()?))) {
                Ok(child) => children.push(child),
                Err(e) => self.problem(dir, "list", &e),
            }
        }
        children.sort_by(|a, b| a.0.cmp(&b.0));
        for (path, kind) in children {
            if kind.is_symlink() {
                continue;
            }
            if kind.is_dir() {
                let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
                if !name.as_deref().is_some_and(is_ignored_dir) {
                    self.walk(&path);
                }
            } else if kind.is_file() {
                self.add_file(&path);
            }
        }
    }
}

/// The memory files of a workspace, with the problems met listing them.
pub fn list_memory_files(
    workspace: &Path,
    extra_paths: &[PathBuf],
) -> (Vec<SourceFile>, Vec<FileProblem>) {
    let mut lister = Lister {
        workspace,
        seen: HashSet::new(),
        files: Vec::new(),
        problems: Vec::new(),
    };
    lister.add_file(&workspace.join("MEMORY.md"));
    lister.add_file(&workspace.join("memory.md"));
    let memory_dir = workspace.join("memory");
    if fs::symlink_metadata(&memory_dir).is_ok_and(|m| m.file_type().is_dir()) {
        lister.walk(&memory_dir);
    }
    for extra in extra_paths {
        let abs = resolve_lexically(workspace, extra);
        match fs::symlink_metadata(&abs) {
            Ok(m) if m.file_type().is_dir() => lister.walk(&abs),
            Ok(m) if m.file_type().is_file() => lister.add_file(&abs),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                tracing::debug!(path = %abs.display(), "extra memory path does not exist");
            }
            Err(e) => lister.problem(&abs, "inspect", &e),
        }
    }
    (lister.files, lister.problems)
}

/// The transcripts (`*.jsonl`, not symlinks) directly in `dir`, in name order.
pub fn list_session_files(dir: &Path) -> (Vec<SourceFile>, Vec<FileProblem>) {
    let mut problems = Vec::new();
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return (Vec::new(), problems),
        Err(e) => {
            problems.push(FileProblem {
                path: dir.to_path_buf(),
                message: format!("could not list: {e}; check its permissions"),
            });
            return (Vec::new(), problems);
        }
    };
    let mut files = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        if !is_file || path.extension().is_none_or(|e| e != "jsonl") {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        files.push(SourceFile {
            path: format!("sessions/{name}"),
            abs: path,
            source: Source::Sessions,
        });
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    (files, problems)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "sources_tests.rs"]
mod tests;
