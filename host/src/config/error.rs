//! [`ConfigError`]: every way finding, reading or validating `plugins.toml` can fail, each with
//! the file, line, column and key, and what to do.

use std::path::{Path, PathBuf};

/// Everything that can go wrong finding, reading or validating `plugins.toml`.
///
/// Located variants carry the file (as given), the 1-based line and column, the dotted key
/// path, what was found and what is allowed.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A `models` or `agents` setting is malformed (located at its key).
    #[error(transparent)]
    Settings(#[from] super::ModelsConfigError),
    /// `--config` named a file that does not exist.
    #[error(
        "config file `{}` given with --config does not exist. Check the path, or leave out \
         --config to use the search order ($RAMPART_CONFIG, ./plugins.toml, the user config \
         directory).",
        path.display()
    )]
    ExplicitNotFound {
        /// The path as given (joined to the current directory when relative).
        path: PathBuf,
    },
    /// `$RAMPART_CONFIG` named a file that does not exist.
    #[error(
        "config file `{}` named by $RAMPART_CONFIG does not exist. Fix the variable, or unset \
         it to use ./plugins.toml or the user config directory.",
        path.display()
    )]
    EnvNotFound {
        /// The path from the variable (joined to the current directory when relative).
        path: PathBuf,
    },
    /// The file exists but could not be read (permissions, a directory, not UTF-8, ...).
    #[error(
        "cannot read config file `{}`: {source}. Check that it is a readable UTF-8 text file.",
        path.display()
    )]
    Read {
        /// The file that could not be read.
        path: PathBuf,
        /// The underlying I/O error.
        source: std::io::Error,
    },
    /// The file is not valid TOML.
    #[error(
        "{}:{line}:{column}: invalid TOML: {}. Fix the syntax at that spot.",
        file.display(),
        crate::prose::clause(message)
    )]
    Syntax {
        /// The config file.
        file: PathBuf,
        /// 1-based line of the problem.
        line: usize,
        /// 1-based column (in characters) of the problem.
        column: usize,
        /// The TOML parser's description of the problem.
        message: String,
    },
    /// A key that the schema does not know.
    #[error(
        "{}:{line}:{column}: unknown key `{key}`; allowed keys here: {}. Fix the key or remove it.",
        file.display(),
        allowed.join(", ")
    )]
    UnknownKey {
        /// The config file.
        file: PathBuf,
        /// 1-based line of the key.
        line: usize,
        /// 1-based column of the key.
        column: usize,
        /// Dotted path of the unknown key, e.g. `plugins.engines.window.requird`.
        key: String,
        /// The keys allowed in that table.
        allowed: Vec<String>,
    },
    /// A value of the wrong TOML type.
    #[error(
        "{}:{line}:{column}: `{key}` must be {expected}, found {found}",
        file.display()
    )]
    WrongType {
        /// The config file.
        file: PathBuf,
        /// 1-based line of the value.
        line: usize,
        /// 1-based column of the value.
        column: usize,
        /// Dotted path of the key.
        key: String,
        /// What the key accepts, e.g. `a string`.
        expected: &'static str,
        /// What was found, e.g. `integer 5`.
        found: String,
    },
    /// A value of the right type that is not acceptable (bad id, out of range, empty path).
    #[error(
        "{}:{line}:{column}: invalid value for `{key}`: found {found}; allowed: {allowed}.",
        file.display()
    )]
    InvalidValue {
        /// The config file.
        file: PathBuf,
        /// 1-based line of the value.
        line: usize,
        /// 1-based column of the value.
        column: usize,
        /// Dotted path of the key.
        key: String,
        /// What was found.
        found: String,
        /// What is allowed.
        allowed: String,
    },
    /// The selected engine id is not built in, not declared and not in any search path.
    #[error(
        "{}unknown engine id `{id}`; available ids: {}. Pick one of them, add \
         `[plugins.engines.{id}]` with a `path`, or put the library in a `plugins.searchPaths` \
         directory.{}",
        location_prefix(file.as_deref(), *line),
        available.join(", "),
        no_file_found(searched)
    )]
    UnknownEngine {
        /// The config file that selected the id, if any.
        file: Option<PathBuf>,
        /// 1-based line of `plugins.slots.contextEngine`, if it came from the file.
        line: Option<usize>,
        /// The unknown id.
        id: String,
        /// The ids that would work: built in, declared, and found in the search paths.
        available: Vec<String>,
        /// Where `plugins.toml` was looked for, when none was found.
        searched: Vec<PathBuf>,
    },
    /// A declared engine without `path` whose library is in none of the search paths.
    #[error(
        "{}engine `{id}` has no `path` and none of {} is in the search paths ({}). Set \
         `plugins.engines.{id}.path` or add the library's directory to `plugins.searchPaths`.",
        location_prefix(file.as_deref(), Some(*line)),
        file_names.join(", "),
        join_paths(search_paths)
    )]
    EngineNotFound {
        /// The config file declaring the engine, if any.
        file: Option<PathBuf>,
        /// 1-based line of the engine's table.
        line: usize,
        /// The engine id.
        id: String,
        /// The library file names that were looked for.
        file_names: Vec<String>,
        /// The directories that were searched.
        search_paths: Vec<PathBuf>,
    },
    /// More than one library in the search paths matches the id.
    #[error(
        "engine id `{id}` matches more than one library: `{}` and `{}`. Set \
         `plugins.engines.{id}.path` to the one you want, or remove the other.",
        first.display(),
        second.display()
    )]
    AmbiguousEngine {
        /// The engine id.
        id: String,
        /// The first match, in search order.
        first: PathBuf,
        /// The second match.
        second: PathBuf,
    },
}

pub(super) fn location_prefix(file: Option<&Path>, line: Option<usize>) -> String {
    match (file, line) {
        (Some(f), Some(l)) => format!("{}:{l}: ", f.display()),
        (Some(f), None) => format!("{}: ", f.display()),
        _ => String::new(),
    }
}

pub(super) fn join_paths(paths: &[PathBuf]) -> String {
    if paths.is_empty() {
        return "none".to_owned();
    }
    paths
        .iter()
        .map(|p| format!("`{}`", p.display()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The sentence that says no `plugins.toml` was found and where it was looked for (empty when
/// a file was read).
fn no_file_found(searched: &[PathBuf]) -> String {
    if searched.is_empty() {
        return String::new();
    }
    let places: Vec<String> = searched
        .iter()
        .map(|p| format!("`{}`", p.display()))
        .collect();
    format!(
        " No plugins.toml was found (looked for {}), so only the built-in engine is known: pass \
         --config FILE, or set RAMPART_CONFIG.",
        places.join(", ")
    )
}
