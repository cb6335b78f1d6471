//! What can go wrong reading a workspace, as typed values whose text names the file and says
//! what to do: these surface in a log line or `rampart context show`, read by a person.

use std::path::PathBuf;

/// Loading the bootstrap files failed as a whole. Single files never fail a load: a file that
/// cannot be read counts as missing, with a [`ReadProblem`] in the set's warnings.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    /// The workspace directory itself cannot be opened.
    #[error(
        "the agent workspace {path} cannot be read ({source}); create it, or point \
         agents.defaults.workspace in plugins.toml at an existing directory"
    )]
    Workspace {
        /// The workspace directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The workspace path names something that is not a directory.
    #[error(
        "the agent workspace {path} is not a directory; point agents.defaults.workspace in \
         plugins.toml at a directory"
    )]
    NotADirectory {
        /// The workspace path.
        path: PathBuf,
    },
}

/// Why a bootstrap file that exists was treated as missing. Each is a deliberate refusal, not
/// a crash: the prompt must never carry a file from outside the workspace, nor an unbounded one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadProblem {
    /// The file has more than one hard link, so it may be a file from elsewhere.
    #[error(
        "{path} has other hard links, so it may belong outside the workspace; it is treated \
         as missing. Replace it with a plain copy"
    )]
    Hardlink {
        /// The file.
        path: PathBuf,
    },
    /// The file is a symlink that leads outside the workspace.
    #[error(
        "{path} is a link leading outside the workspace; it is treated as missing. Copy the \
         file into the workspace instead"
    )]
    EscapingLink {
        /// The file.
        path: PathBuf,
    },
    /// The file is larger than the read limit.
    #[error(
        "{path} is {bytes} bytes, over the {limit}-byte limit for a bootstrap file; it is \
         treated as missing. Move detail into other files and keep this one short"
    )]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// The name exists but is not a regular file.
    #[error("{path} is not a regular file; it is treated as missing. Remove or rename it")]
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// The operating system refused the read.
    #[error("{path} cannot be read ({message}); it is treated as missing. Check its permissions")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's reason.
        message: String,
    },
}

/// A skill that was left out of the catalog, or a skills directory that was only partly read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkillIssue {
    /// SKILL.md is larger than the limit.
    #[error(
        "{path} is {bytes} bytes, over the {limit}-byte limit for SKILL.md; the skill is \
         skipped. Move detail into files the skill points to"
    )]
    TooLarge {
        /// The SKILL.md.
        path: PathBuf,
        /// Its size.
        bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// SKILL.md cannot be read.
    #[error("{path} cannot be read ({message}); the skill is skipped. Check its permissions")]
    Unreadable {
        /// The SKILL.md.
        path: PathBuf,
        /// The operating system's reason.
        message: String,
    },
    /// SKILL.md has no description, so the model could never tell when to use it.
    #[error(
        "{path} has no `description:` in its front matter; the skill is skipped. Add one line \
         saying when the skill applies"
    )]
    NoDescription {
        /// The SKILL.md.
        path: PathBuf,
    },
    /// The skill directory, or its SKILL.md, is a link leading outside its skills directory.
    #[error(
        "{path} leads outside {root}; the skill is skipped. Put the skill itself there \
         instead of a link"
    )]
    EscapingLink {
        /// The skill directory or SKILL.md.
        path: PathBuf,
        /// The skills directory it was found in.
        root: PathBuf,
    },
    /// A skills directory has more entries than are looked at.
    #[error(
        "{root} has more than {limit} entries; only the first {limit} (by name) were looked \
         at. Remove directories that are not skills"
    )]
    TooManyCandidates {
        /// The skills directory.
        root: PathBuf,
        /// How many are looked at.
        limit: usize,
    },
    /// A skills directory has more skills than are loaded from one place.
    #[error(
        "{root} has more than {limit} skills; only the first {limit} (by name) were loaded. \
         Remove skills you do not use"
    )]
    TooManySkills {
        /// The skills directory.
        root: PathBuf,
        /// How many are loaded.
        limit: usize,
    },
}
