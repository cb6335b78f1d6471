//! The workspace's bootstrap files: which are read for a run, how they are read (confined to
//! the workspace), and the set the prompt injects, in its own order.
//!
//! The files come from the **agent workspace** the caller names, never from the process's
//! working directory, and a set is a snapshot: [`crate::BootstrapCache`] keeps one per session
//! until the session is reset, so an edit mid-session is seen by the next session, not the
//! next turn (the prompt prefix stays cacheable).

use std::fs;
use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};

use crate::budget::{
    BootstrapLimits, BootstrapWarning, ContextFile, FileStat, SourceFile, apply_budget,
};
use crate::error::{BootstrapError, ReadProblem};
use crate::mode::SessionKind;

/// The operating rules of the agent.
pub const AGENTS_MD: &str = "AGENTS.md";
/// The persona and tone.
pub const SOUL_MD: &str = "SOUL.md";
/// Notes about the tools (not which tools exist).
pub const TOOLS_MD: &str = "TOOLS.md";
/// Who the agent is.
pub const IDENTITY_MD: &str = "IDENTITY.md";
/// Who the user is.
pub const USER_MD: &str = "USER.md";
/// What to check on a heartbeat; injected below the cache marker, as it changes often.
pub const HEARTBEAT_MD: &str = "HEARTBEAT.md";
/// First-run instructions for a new workspace.
pub const BOOTSTRAP_MD: &str = "BOOTSTRAP.md";
/// Long-term memory, injected whole within its budget.
pub const MEMORY_MD: &str = "MEMORY.md";
/// The lower-case spelling of [`MEMORY_MD`], used when that is absent.
pub const MEMORY_MD_LOWER: &str = "memory.md";

/// The files read for a main session, in load order (then MEMORY.md or memory.md).
pub const LOAD_ORDER: [&str; 7] = [
    AGENTS_MD,
    SOUL_MD,
    TOOLS_MD,
    IDENTITY_MD,
    USER_MD,
    HEARTBEAT_MD,
    BOOTSTRAP_MD,
];

/// The files a subagent or cron run gets: the rules, tools notes, persona, identity and user
/// (OpenClaw's code injects these five, not the two its docs once said; issue 27038).
pub const WORKER_FILES: [&str; 5] = [AGENTS_MD, SOUL_MD, TOOLS_MD, IDENTITY_MD, USER_MD];

/// The largest bootstrap file read at all; a larger one counts as missing.
pub const MAX_FILE_BYTES: u64 = 2 * 1024 * 1024;

/// What to load for one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootstrapRequest {
    /// The agent workspace (`agents.defaults.workspace`, resolved by the host).
    pub workspace_dir: PathBuf,
    /// The session key: subagent and cron keys get [`WORKER_FILES`] only.
    pub session_key: String,
    /// The budget.
    pub limits: BootstrapLimits,
    /// Whether this run answers a heartbeat poll (it always gets HEARTBEAT.md).
    pub heartbeat_run: bool,
    /// `lightContext`: a heartbeat run gets HEARTBEAT.md only, any other run no files.
    pub light_context: bool,
    /// Whether HEARTBEAT.md is loaded outside heartbeat runs. The host clears it for the
    /// default agent when heartbeat guidance is off, as OpenClaw does.
    pub heartbeat_file: bool,
}

impl BootstrapRequest {
    /// A request for a normal run of session `session_key` in `workspace_dir`, with the
    /// default caps.
    pub fn new(workspace_dir: impl Into<PathBuf>, session_key: impl Into<String>) -> Self {
        Self {
            workspace_dir: workspace_dir.into(),
            session_key: session_key.into(),
            limits: BootstrapLimits::default(),
            heartbeat_run: false,
            light_context: false,
            heartbeat_file: true,
        }
    }

    /// The files this request reads, in load order (MEMORY.md is decided on disk).
    fn wanted(&self) -> (Vec<&'static str>, bool) {
        if self.light_context {
            let files = if self.heartbeat_run {
                vec![HEARTBEAT_MD]
            } else {
                Vec::new()
            };
            return (files, false);
        }
        if SessionKind::of(&self.session_key).is_worker() {
            // Kept in load order, which the worker list is a subsequence of.
            let files = LOAD_ORDER
                .iter()
                .copied()
                .filter(|n| WORKER_FILES.contains(n))
                .collect();
            return (files, false);
        }
        let files = LOAD_ORDER
            .iter()
            .copied()
            .filter(|&n| n != HEARTBEAT_MD || self.heartbeat_file || self.heartbeat_run)
            .collect();
        (files, true)
    }
}

/// The bootstrap files of one session as the prompt injects them, with what the budget did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BootstrapSet {
    workspace_dir: PathBuf,
    limits: BootstrapLimits,
    files: Vec<ContextFile>,
    stats: Vec<FileStat>,
    warnings: Vec<BootstrapWarning>,
}

impl BootstrapSet {
    /// A set from files the host already has (a hook's list, a test), in load order, under
    /// `limits`. [`load_bootstrap`] is this over the files it read.
    pub fn from_sources(
        workspace_dir: impl Into<PathBuf>,
        sources: &[SourceFile],
        limits: BootstrapLimits,
    ) -> Self {
        let budgeted = apply_budget(sources, limits);
        Self {
            workspace_dir: workspace_dir.into(),
            limits,
            files: budgeted.files,
            stats: budgeted.stats,
            warnings: budgeted.warnings,
        }
    }

    /// The workspace the files came from.
    pub fn workspace_dir(&self) -> &Path {
        &self.workspace_dir
    }

    /// The caps the set was built under.
    pub fn limits(&self) -> BootstrapLimits {
        self.limits
    }

    /// The injected files, in load order.
    pub fn files(&self) -> &[ContextFile] {
        &self.files
    }

    /// What happened to each file, in load order.
    pub fn stats(&self) -> &[FileStat] {
        &self.stats
    }

    /// The warnings of the read and of the budget.
    pub fn warnings(&self) -> &[BootstrapWarning] {
        &self.warnings
    }

    /// Whether no file is injected.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Whether file `name` was found and read (not missing), compared case-insensitively.
    pub fn has_file(&self, name: &str) -> bool {
        self.stats
            .iter()
            .any(|s| !s.missing && s.name.eq_ignore_ascii_case(name))
    }

    /// The files above the cache marker ("# Project Context"), in prompt order: AGENTS, SOUL,
    /// IDENTITY, USER, TOOLS, BOOTSTRAP, MEMORY, then any other by name, then path.
    pub fn stable_files(&self) -> Vec<&ContextFile> {
        let mut files: Vec<&ContextFile> = self.files.iter().filter(|f| !is_dynamic(f)).collect();
        files.sort_by(|a, b| {
            let (ka, kb) = (base_lower(a), base_lower(b));
            prompt_rank(&ka)
                .cmp(&prompt_rank(&kb))
                .then_with(|| ka.cmp(&kb))
                .then_with(|| a.path.cmp(&b.path))
        });
        files
    }

    /// The files below the cache marker: HEARTBEAT.md, which changes often enough that
    /// above the marker it would break the prompt cache.
    pub fn dynamic_files(&self) -> Vec<&ContextFile> {
        self.files.iter().filter(|f| is_dynamic(f)).collect()
    }
}

/// The lower-cased base name of a file's path (its name when the path has none).
fn base_lower(file: &ContextFile) -> String {
    let path = file.path.replace('\\', "/");
    let base = path.rsplit('/').next().filter(|b| !b.is_empty());
    base.unwrap_or(&file.name).to_lowercase()
}

fn is_dynamic(file: &ContextFile) -> bool {
    base_lower(file) == "heartbeat.md"
}

/// Where a file goes in Project Context: the rules first, then persona and people, then
/// tools, first-run notes and memory.
fn prompt_rank(base_lower: &str) -> usize {
    match base_lower {
        "agents.md" => 10,
        "soul.md" => 20,
        "identity.md" => 30,
        "user.md" => 40,
        "tools.md" => 50,
        "bootstrap.md" => 60,
        "memory.md" => 70,
        _ => usize::MAX,
    }
}

/// Reads the bootstrap files `request` asks for and applies the budget.
///
/// Each file is read from the workspace only: a link leading outside it, a file with other
/// hard links, one over [`MAX_FILE_BYTES`], or one the system refuses counts as missing, with
/// a warning saying why. MEMORY.md is read if present, else memory.md; with neither there is
/// no entry at all (every other file has one, missing or not).
///
/// # Errors
/// [`BootstrapError`] when the workspace directory itself cannot be opened.
pub fn load_bootstrap(request: &BootstrapRequest) -> Result<BootstrapSet, BootstrapError> {
    let shown = std::path::absolute(&request.workspace_dir)
        .unwrap_or_else(|_| request.workspace_dir.clone());
    let root =
        fs::canonicalize(&request.workspace_dir).map_err(|source| BootstrapError::Workspace {
            path: shown.clone(),
            source,
        })?;
    if !root.is_dir() {
        return Err(BootstrapError::NotADirectory { path: shown });
    }

    let (names, with_memory) = request.wanted();
    let mut sources = Vec::with_capacity(names.len() + 1);
    let mut problems = Vec::new();
    for name in names {
        let (source, problem) = read_source(&root, &shown, name);
        sources.push(source);
        problems.extend(problem);
    }
    if with_memory {
        for name in [MEMORY_MD, MEMORY_MD_LOWER] {
            if fs::symlink_metadata(root.join(name)).is_ok() {
                let (source, problem) = read_source(&root, &shown, name);
                sources.push(source);
                problems.extend(problem);
                break;
            }
        }
    }

    let mut set = BootstrapSet::from_sources(shown, &sources, request.limits);
    // The read problems come first: they explain a "[MISSING]" the budget then shows.
    let mut warnings: Vec<BootstrapWarning> = problems
        .into_iter()
        .map(BootstrapWarning::Unreadable)
        .collect();
    warnings.append(&mut set.warnings);
    set.warnings = warnings;
    Ok(set)
}

fn read_source(root: &Path, shown: &Path, name: &str) -> (SourceFile, Option<ReadProblem>) {
    let path = shown.join(name);
    let (content, problem) = match read_confined(root, name) {
        Ok(content) => (content, None),
        Err(problem) => (None, Some(problem)),
    };
    (
        SourceFile {
            name: name.to_string(),
            path,
            content,
        },
        problem,
    )
}

/// Reads `root/name` if it is a regular file inside `root` (canonical) with one link and at
/// most [`MAX_FILE_BYTES`]; `Ok(None)` when it does not exist.
pub fn read_confined(root: &Path, name: &str) -> Result<Option<String>, ReadProblem> {
    let path = root.join(name);
    let io = |e: std::io::Error| ReadProblem::Io {
        path: path.clone(),
        message: e.to_string(),
    };
    let meta = match fs::symlink_metadata(&path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    let real = if meta.file_type().is_symlink() {
        match fs::canonicalize(&path) {
            Ok(real) => real,
            // A dangling link is a file that is not there.
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(e)),
        }
    } else {
        path.clone()
    };
    if !real.starts_with(root) {
        return Err(ReadProblem::EscapingLink { path });
    }
    let file = open_no_follow(&real).map_err(io)?;
    // Checked on the open file: the open refuses a link, so a file swapped for one after the
    // checks above is not read, and the kind, links and size are those of what is read.
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(ReadProblem::NotAFile { path });
    }
    if has_other_links(&meta) {
        return Err(ReadProblem::Hardlink { path });
    }
    let too_large = |bytes| ReadProblem::TooLarge {
        path: path.clone(),
        bytes,
        limit: MAX_FILE_BYTES,
    };
    if meta.len() > MAX_FILE_BYTES {
        return Err(too_large(meta.len()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

#[cfg(unix)]
fn open_no_follow(path: &Path) -> std::io::Result<fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

#[cfg(not(unix))]
fn open_no_follow(path: &Path) -> std::io::Result<fs::File> {
    fs::File::open(path)
}

#[cfg(unix)]
fn has_other_links(meta: &fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    meta.nlink() > 1
}

/// Link counts are not available from std elsewhere; such files are read.
#[cfg(not(unix))]
fn has_other_links(_meta: &fs::Metadata) -> bool {
    false
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "bootstrap_tests.rs"]
mod tests;
