//! `plugins.toml`: where it is found, what it may contain, and the resolved [`Config`].
//!
//! The file uses OpenClaw's key names (`plugins.slots.contextEngine`,
//! `plugins.engines.<id>`, `plugins.searchPaths`, ...) so an OpenClaw user recognises every
//! knob. Parsing keeps byte spans (via [`toml::de::DeTable`]) and validates by hand, so every
//! error names the file, the 1-based line and column, the dotted key and what is allowed.
//! When several problems exist, the one earliest in the file is reported.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// File name looked up in the current directory and in the user config directory.
pub const CONFIG_FILE_NAME: &str = "plugins.toml";

/// Environment variable that names the config file when `--config` is not given.
pub const CONFIG_ENV_VAR: &str = "RAMPART_CONFIG";

/// Id of the engine linked into the host; the default of `plugins.slots.contextEngine`.
pub const BUILTIN_ENGINE_ID: &str = "legacy";

/// Default deadline for one engine call (`plugins.callTimeoutMs`), in milliseconds.
pub const DEFAULT_CALL_TIMEOUT_MS: u64 = 30_000;

/// Default deadline for loading and constructing an engine (`plugins.loadTimeoutMs`), in ms.
pub const DEFAULT_LOAD_TIMEOUT_MS: u64 = 5_000;

/// Largest accepted timeout, in milliseconds (24 hours); larger values are surely typos.
pub const MAX_TIMEOUT_MS: u64 = 86_400_000;

const TOP_KEYS: &[&str] = &["plugins", "models", "agents"];
const PLUGINS_KEYS: &[&str] = &[
    "searchPaths",
    "callTimeoutMs",
    "loadTimeoutMs",
    "slots",
    "engines",
];
const SLOTS_KEYS: &[&str] = &["contextEngine"];
const ENGINE_KEYS: &[&str] = &["path", "required", "config"];
const ENGINE_ID_RULE: &str = "a non-empty id of ASCII letters, digits, `-` and `_`";

/// Where the configuration came from, so `rampart config check` can say which file (and
/// which search rule) is in effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// The path given with `--config`.
    Explicit(PathBuf),
    /// The path named by the `RAMPART_CONFIG` environment variable.
    Env(PathBuf),
    /// `plugins.toml` in the current directory.
    CurrentDir(PathBuf),
    /// `<user config dir>/rampart/plugins.toml`.
    UserConfigDir(PathBuf),
    /// No file was found: the built-in defaults apply (the `legacy` engine, no plugins).
    Defaults {
        /// The candidate files that were looked for and did not exist, in search order.
        searched: Vec<PathBuf>,
    },
}

impl ConfigSource {
    /// The config file, or `None` for the built-in defaults.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Self::Explicit(p) | Self::Env(p) | Self::CurrentDir(p) | Self::UserConfigDir(p) => {
                Some(p)
            }
            Self::Defaults { .. } => None,
        }
    }

    /// A short human description of the rule that selected this source.
    pub fn rule(&self) -> &'static str {
        match self {
            Self::Explicit(_) => "from --config",
            Self::Env(_) => "from $RAMPART_CONFIG",
            Self::CurrentDir(_) => "found in the current directory",
            Self::UserConfigDir(_) => "found in the user config directory",
            Self::Defaults { .. } => "no plugins.toml found; built-in defaults",
        }
    }
}

impl fmt::Display for ConfigSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Defaults { searched } => {
                write!(f, "built-in defaults (no plugins.toml found")?;
                if !searched.is_empty() {
                    write!(f, "; looked for {}", join_paths(searched))?;
                }
                write!(f, ")")
            }
            other => match other.path() {
                Some(p) => write!(f, "{} ({})", p.display(), other.rule()),
                None => write!(f, "{}", other.rule()),
            },
        }
    }
}

/// The resolved configuration the host runs with.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The file this was read from; `None` for the built-in defaults. Used in messages.
    pub source_file: Option<PathBuf>,
    /// Id of the engine in the `contextEngine` slot (`plugins.slots.contextEngine`,
    /// trimmed; `legacy` when absent or empty).
    pub context_engine: String,
    /// Line of `plugins.slots.contextEngine` in the file, so an unknown id can be reported
    /// where it was written; `None` when the default applies.
    pub context_engine_line: Option<usize>,
    /// Directories searched for engine libraries by id (`plugins.searchPaths`), in order,
    /// relative entries already resolved against the config file's directory.
    pub search_paths: Vec<PathBuf>,
    /// Deadline for each engine call (`plugins.callTimeoutMs`, default 30 s).
    pub call_timeout: Duration,
    /// Deadline for loading and constructing an engine (`plugins.loadTimeoutMs`, default 5 s).
    pub load_timeout: Duration,
    /// Engines declared under `plugins.engines.<id>`, by id.
    pub engines: BTreeMap<String, EngineEntry>,
    /// The free-form top-level `models` table; its schema is defined by later work.
    pub models: toml::Table,
    /// The free-form top-level `agents` table; its schema is defined by later work.
    pub agents: toml::Table,
    /// Where each key under `models` and `agents` was written, as `(line, column)`, by dotted
    /// key with `[i]` for array items (`models.providers.sim.models[0].contextWindow`). The
    /// modules that give those tables meaning check them later, and their errors must still
    /// point at the line.
    pub key_positions: BTreeMap<String, (usize, usize)>,
}

impl Config {
    /// Where `key` (dotted, `[i]` for array items) was written; falls back to the nearest
    /// enclosing key that was recorded, so a missing key points at its table.
    pub fn position_of(&self, key: &str) -> Option<(usize, usize)> {
        let mut k = key;
        loop {
            if let Some(p) = self.key_positions.get(k) {
                return Some(*p);
            }
            let cut = k.rfind(['.', '['])?;
            k = &k[..cut];
        }
    }
}

impl Default for Config {
    /// The configuration used when no file exists: the built-in `legacy` engine, no plugins.
    fn default() -> Self {
        Self {
            source_file: None,
            context_engine: BUILTIN_ENGINE_ID.to_owned(),
            context_engine_line: None,
            search_paths: Vec::new(),
            call_timeout: Duration::from_millis(DEFAULT_CALL_TIMEOUT_MS),
            load_timeout: Duration::from_millis(DEFAULT_LOAD_TIMEOUT_MS),
            engines: BTreeMap::new(),
            models: toml::Table::new(),
            agents: toml::Table::new(),
            key_positions: BTreeMap::new(),
        }
    }
}

/// One `[plugins.engines.<id>]` table.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineEntry {
    /// The engine id (the table's key); ASCII letters, digits, `-` and `_`.
    pub id: String,
    /// The library to load (`path`), resolved against the config file's directory; `None`
    /// means "find it by id in `plugins.searchPaths`".
    pub path: Option<PathBuf>,
    /// Whether a failure of this engine stops the host instead of falling back to `legacy`.
    pub required: bool,
    /// The `config` table, converted to a JSON object, handed to the engine's constructor.
    pub config: serde_json::Value,
    /// 1-based line where the engine's table is defined, for error messages.
    pub line: usize,
}

/// Everything that can go wrong finding, reading or validating `plugins.toml`.
///
/// Located variants carry the file (as given), the 1-based line and column, the dotted key
/// path, what was found and what is allowed.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
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
        "{}:{line}:{column}: invalid TOML: {message}. Fix the syntax at that spot.",
        file.display()
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
         directory.",
        location_prefix(file.as_deref(), *line),
        available.join(", ")
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

fn location_prefix(file: Option<&Path>, line: Option<usize>) -> String {
    match (file, line) {
        (Some(f), Some(l)) => format!("{}:{l}: ", f.display()),
        (Some(f), None) => format!("{}: ", f.display()),
        _ => String::new(),
    }
}

fn join_paths(paths: &[PathBuf]) -> String {
    if paths.is_empty() {
        return "none".to_owned();
    }
    paths
        .iter()
        .map(|p| format!("`{}`", p.display()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Finds the config file: `explicit` (`--config`), then `$RAMPART_CONFIG`, then
/// `./plugins.toml`, then `<user config dir>/rampart/plugins.toml`, else the defaults.
///
/// An explicit path or a set (non-empty) `$RAMPART_CONFIG` must exist.
pub fn locate(explicit: Option<&Path>) -> Result<ConfigSource, ConfigError> {
    let env = std::env::var_os(CONFIG_ENV_VAR);
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let user_dir = directories::BaseDirs::new().map(|d| d.config_dir().join("rampart"));
    let source = locate_with(explicit, env, &cwd, user_dir.as_deref())?;
    tracing::debug!(source = %source, "located configuration");
    Ok(source)
}

/// [`locate`] with its inputs made explicit, so it can be tested without touching the
/// process environment or current directory.
///
/// `env` is the value of `$RAMPART_CONFIG` (an empty value counts as unset), `cwd` the
/// directory relative paths are taken from, `user_config_dir` the `rampart` directory
/// inside the user's config directory (if the platform has one).
pub fn locate_with(
    explicit: Option<&Path>,
    env: Option<OsString>,
    cwd: &Path,
    user_config_dir: Option<&Path>,
) -> Result<ConfigSource, ConfigError> {
    if let Some(p) = explicit {
        let path = cwd.join(p);
        return if path.exists() {
            Ok(ConfigSource::Explicit(path))
        } else {
            Err(ConfigError::ExplicitNotFound { path })
        };
    }
    if let Some(value) = env.filter(|v| !v.is_empty()) {
        let path = cwd.join(value);
        return if path.exists() {
            Ok(ConfigSource::Env(path))
        } else {
            Err(ConfigError::EnvNotFound { path })
        };
    }
    let mut searched = Vec::new();
    let local = cwd.join(CONFIG_FILE_NAME);
    if local.is_file() {
        return Ok(ConfigSource::CurrentDir(local));
    }
    searched.push(local);
    if let Some(dir) = user_config_dir {
        let user = dir.join(CONFIG_FILE_NAME);
        if user.is_file() {
            return Ok(ConfigSource::UserConfigDir(user));
        }
        searched.push(user);
    }
    Ok(ConfigSource::Defaults { searched })
}

/// Reads and validates the configuration from `source`; the defaults need no file.
pub fn load(source: &ConfigSource) -> Result<Config, ConfigError> {
    let Some(path) = source.path() else {
        return Ok(Config::default());
    };
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text, path)
}

/// Parses and validates `text`, the contents of `file`. `file` is used in error messages
/// and as the base for relative paths in the file.
pub fn parse(text: &str, file: &Path) -> Result<Config, ConfigError> {
    let root = DeTable::parse(text).map_err(|e| {
        let (line, column) = line_col(text, e.span().map_or(0, |s| s.start));
        ConfigError::Syntax {
            file: file.to_path_buf(),
            line,
            column,
            message: e.message().trim_end_matches('.').to_owned(),
        }
    })?;
    let mut v = Validator {
        text,
        file,
        errors: Vec::new(),
        positions: BTreeMap::new(),
    };
    let mut config = v.config(root.get_ref());
    config.key_positions = std::mem::take(&mut v.positions);
    match v.errors.into_iter().min_by_key(|(offset, _)| *offset) {
        Some((_, err)) => Err(err),
        None => Ok(config),
    }
}

/// The library file names an engine `id` may have on this platform, most specific first:
/// `lib<id>.so` / `lib<id>.dylib` / `<id>.dll`, then the same with `-` replaced by `_`
/// (cargo names the library of crate `rampart-window` `librampart_window.so`).
pub fn engine_library_file_names(id: &str) -> Vec<String> {
    use std::env::consts::{DLL_PREFIX, DLL_SUFFIX};
    let mut names = vec![format!("{DLL_PREFIX}{id}{DLL_SUFFIX}")];
    let underscored = format!("{DLL_PREFIX}{}{DLL_SUFFIX}", id.replace('-', "_"));
    if !names.contains(&underscored) {
        names.push(underscored);
    }
    names
}

/// Whether `id` is a valid engine id: non-empty ASCII letters, digits, `-` and `_`.
pub fn is_valid_engine_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl Config {
    /// Every library in `search_paths` whose name fits `id` (see
    /// [`engine_library_file_names`]), in search order, without repeating a file. More than
    /// one result is an ambiguity the caller must refuse, naming both paths.
    pub fn find_in_search_paths(&self, id: &str) -> Vec<PathBuf> {
        let names = engine_library_file_names(id);
        let mut found: Vec<PathBuf> = Vec::new();
        let mut seen: Vec<PathBuf> = Vec::new();
        for dir in &self.search_paths {
            for name in &names {
                let candidate = dir.join(name);
                if !candidate.is_file() {
                    continue;
                }
                let key = candidate
                    .canonicalize()
                    .unwrap_or_else(|_| candidate.clone());
                if !seen.contains(&key) {
                    seen.push(key);
                    found.push(candidate);
                }
            }
        }
        found
    }

    /// Engine ids that can be selected: the built-in one, the declared ones, and those of
    /// the libraries found in the search paths (file name without prefix and suffix).
    /// Sorted, without duplicates. Used to answer an unknown id.
    pub fn available_engine_ids(&self) -> Vec<String> {
        use std::env::consts::{DLL_PREFIX, DLL_SUFFIX};
        let mut ids: Vec<String> = vec![BUILTIN_ENGINE_ID.to_owned()];
        ids.extend(self.engines.keys().cloned());
        for dir in &self.search_paths {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                let Some(name) = name.to_str() else { continue };
                let Some(id) = name
                    .strip_prefix(DLL_PREFIX)
                    .and_then(|n| n.strip_suffix(DLL_SUFFIX))
                else {
                    continue;
                };
                if is_valid_engine_id(id) && entry.path().is_file() {
                    ids.push(id.to_owned());
                }
            }
        }
        ids.sort();
        ids.dedup();
        ids
    }

    /// Where to load engine `id` from: `Ok(None)` means the built-in engine (`legacy`
    /// without an explicit `path`). A declared `path` wins; otherwise exactly one match in
    /// the search paths. Errors: ambiguous match, declared engine not found, unknown id
    /// (listing [`Config::available_engine_ids`]).
    pub fn resolve_engine_path(&self, id: &str) -> Result<Option<PathBuf>, ConfigError> {
        let entry = self.engines.get(id);
        if let Some(path) = entry.and_then(|e| e.path.clone()) {
            return Ok(Some(path));
        }
        if id == BUILTIN_ENGINE_ID {
            return Ok(None);
        }
        let mut found = self.find_in_search_paths(id).into_iter();
        match (found.next(), found.next()) {
            (Some(first), Some(second)) => Err(ConfigError::AmbiguousEngine {
                id: id.to_owned(),
                first,
                second,
            }),
            (Some(only), None) => Ok(Some(only)),
            _ => match entry {
                Some(e) => Err(ConfigError::EngineNotFound {
                    file: self.source_file.clone(),
                    line: e.line,
                    id: id.to_owned(),
                    file_names: engine_library_file_names(id),
                    search_paths: self.search_paths.clone(),
                }),
                None => Err(ConfigError::UnknownEngine {
                    file: self.source_file.clone(),
                    line: if id == self.context_engine {
                        self.context_engine_line
                    } else {
                        None
                    },
                    id: id.to_owned(),
                    available: self.available_engine_ids(),
                }),
            },
        }
    }
}

/// 1-based line and column (in characters) of byte `offset` in `text`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// Appends `key` to a dotted path, quoting it when it is not a bare TOML key.
fn join_key(prefix: &str, key: &str) -> String {
    let bare = is_valid_engine_id(key);
    let key = if bare {
        key.to_owned()
    } else {
        format!("{key:?}")
    };
    if prefix.is_empty() {
        key
    } else {
        format!("{prefix}.{key}")
    }
}

/// What a value is, for "found ..." in messages: `integer 5`, `string "yes"`, `table`.
fn describe(value: &DeValue<'_>) -> String {
    match value {
        DeValue::String(s) => {
            let mut shown: String = s.chars().take(60).collect();
            if shown.len() < s.len() {
                shown.push('…');
            }
            format!("string {shown:?}")
        }
        DeValue::Integer(i) => format!("integer {i}"),
        DeValue::Float(x) => format!("float {}", x.as_str()),
        DeValue::Boolean(b) => format!("boolean {b}"),
        DeValue::Datetime(d) => format!("datetime {d}"),
        DeValue::Array(_) => "array".to_owned(),
        DeValue::Table(_) => "table".to_owned(),
    }
}

type SpannedValue<'i> = Spanned<DeValue<'i>>;

/// Walks the spanned document, building the [`Config`] and collecting located errors.
struct Validator<'a> {
    text: &'a str,
    file: &'a Path,
    errors: Vec<(usize, ConfigError)>,
    /// Positions of the free-form keys, see [`Config::key_positions`].
    positions: BTreeMap<String, (usize, usize)>,
}

impl Validator<'_> {
    fn at(&self, span: &Range<usize>) -> (usize, usize) {
        line_col(self.text, span.start)
    }

    fn base_dir(&self) -> PathBuf {
        match self.file.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        }
    }

    /// Resolves a path from the file against the file's directory.
    fn resolve(&self, raw: &str) -> PathBuf {
        let p = Path::new(raw);
        if p.is_absolute() {
            return p.to_path_buf();
        }
        // Drop `./` so messages show `/etc/rampart/engines`, not `/etc/rampart/./engines`.
        let rest: PathBuf = p
            .components()
            .filter(|c| *c != std::path::Component::CurDir)
            .collect();
        self.base_dir().join(rest)
    }

    fn wrong_type(&mut self, key: &str, value: &SpannedValue<'_>, expected: &'static str) {
        let span = value.span();
        let (line, column) = self.at(&span);
        self.errors.push((
            span.start,
            ConfigError::WrongType {
                file: self.file.to_path_buf(),
                line,
                column,
                key: key.to_owned(),
                expected,
                found: describe(value.get_ref()),
            },
        ));
    }

    fn invalid(&mut self, key: &str, span: Range<usize>, found: String, allowed: &str) {
        let (line, column) = self.at(&span);
        self.errors.push((
            span.start,
            ConfigError::InvalidValue {
                file: self.file.to_path_buf(),
                line,
                column,
                key: key.to_owned(),
                found,
                allowed: allowed.to_owned(),
            },
        ));
    }

    /// Reports every key of `table` not in `allowed`.
    fn check_keys(&mut self, prefix: &str, table: &DeTable<'_>, allowed: &[&str]) {
        for key in table.keys() {
            if allowed.contains(&key.get_ref().as_ref()) {
                continue;
            }
            let span = key.span();
            let (line, column) = self.at(&span);
            self.errors.push((
                span.start,
                ConfigError::UnknownKey {
                    file: self.file.to_path_buf(),
                    line,
                    column,
                    key: join_key(prefix, key.get_ref()),
                    allowed: allowed.iter().map(|s| (*s).to_owned()).collect(),
                },
            ));
        }
    }

    fn table<'v, 'i>(&mut self, key: &str, value: &'v SpannedValue<'i>) -> Option<&'v DeTable<'i>> {
        match value.get_ref() {
            DeValue::Table(t) => Some(t),
            _ => {
                self.wrong_type(key, value, "a table");
                None
            }
        }
    }

    fn string<'v>(&mut self, key: &str, value: &'v SpannedValue<'_>) -> Option<&'v str> {
        match value.get_ref() {
            DeValue::String(s) => Some(s),
            _ => {
                self.wrong_type(key, value, "a string");
                None
            }
        }
    }

    fn boolean(&mut self, key: &str, value: &SpannedValue<'_>) -> Option<bool> {
        match value.get_ref() {
            DeValue::Boolean(b) => Some(*b),
            _ => {
                self.wrong_type(key, value, "a boolean (true or false)");
                None
            }
        }
    }

    fn millis(&mut self, key: &str, value: &SpannedValue<'_>) -> Option<Duration> {
        let DeValue::Integer(i) = value.get_ref() else {
            self.wrong_type(key, value, "an integer (milliseconds)");
            return None;
        };
        match u64::from_str_radix(i.as_str(), i.radix()) {
            Ok(ms) if (1..=MAX_TIMEOUT_MS).contains(&ms) => Some(Duration::from_millis(ms)),
            _ => {
                let allowed = format!("an integer from 1 to {MAX_TIMEOUT_MS} (milliseconds)");
                self.invalid(key, value.span(), describe(value.get_ref()), &allowed);
                None
            }
        }
    }

    /// A non-empty path string, resolved against the config file's directory.
    fn path(&mut self, key: &str, value: &SpannedValue<'_>) -> Option<PathBuf> {
        let raw = self.string(key, value)?;
        if raw.trim().is_empty() {
            self.invalid(
                key,
                value.span(),
                describe(value.get_ref()),
                "a non-empty path",
            );
            return None;
        }
        Some(self.resolve(raw))
    }

    fn config(&mut self, root: &DeTable<'_>) -> Config {
        let mut config = Config {
            source_file: Some(self.file.to_path_buf()),
            ..Config::default()
        };
        self.check_keys("", root, TOP_KEYS);
        if let Some(v) = root.get("models")
            && let Some(t) = self.table("models", v)
        {
            config.models = self.toml_table("models", t);
        }
        if let Some(v) = root.get("agents")
            && let Some(t) = self.table("agents", v)
        {
            config.agents = self.toml_table("agents", t);
        }
        if let Some(v) = root.get("plugins")
            && let Some(t) = self.table("plugins", v)
        {
            self.plugins(t, &mut config);
        }
        config
    }

    fn plugins(&mut self, plugins: &DeTable<'_>, config: &mut Config) {
        self.check_keys("plugins", plugins, PLUGINS_KEYS);
        if let Some(v) = plugins.get("searchPaths") {
            config.search_paths = self.search_paths(v);
        }
        if let Some(v) = plugins.get("callTimeoutMs")
            && let Some(d) = self.millis("plugins.callTimeoutMs", v)
        {
            config.call_timeout = d;
        }
        if let Some(v) = plugins.get("loadTimeoutMs")
            && let Some(d) = self.millis("plugins.loadTimeoutMs", v)
        {
            config.load_timeout = d;
        }
        if let Some(v) = plugins.get("slots")
            && let Some(slots) = self.table("plugins.slots", v)
        {
            self.check_keys("plugins.slots", slots, SLOTS_KEYS);
            let key = "plugins.slots.contextEngine";
            if let Some(v) = slots.get("contextEngine")
                && let Some(s) = self.string(key, v)
            {
                let id = s.trim();
                if id.is_empty() {
                    // An empty string means "the default".
                } else if is_valid_engine_id(id) {
                    config.context_engine = id.to_owned();
                    config.context_engine_line = Some(self.at(&v.span()).0);
                } else {
                    self.invalid(key, v.span(), describe(v.get_ref()), ENGINE_ID_RULE);
                }
            }
        }
        if let Some(v) = plugins.get("engines")
            && let Some(engines) = self.table("plugins.engines", v)
        {
            for (id, value) in engines.iter() {
                if let Some(entry) = self.engine(id, value) {
                    config.engines.insert(entry.id.clone(), entry);
                }
            }
        }
    }

    fn search_paths(&mut self, value: &SpannedValue<'_>) -> Vec<PathBuf> {
        let key = "plugins.searchPaths";
        let DeValue::Array(items) = value.get_ref() else {
            self.wrong_type(key, value, "an array of strings");
            return Vec::new();
        };
        let mut paths = Vec::new();
        for (i, item) in items.iter().enumerate() {
            if let Some(p) = self.path(&format!("{key}[{i}]"), item) {
                paths.push(p);
            }
        }
        paths
    }

    fn engine(
        &mut self,
        id: &Spanned<std::borrow::Cow<'_, str>>,
        value: &SpannedValue<'_>,
    ) -> Option<EngineEntry> {
        let prefix = join_key("plugins.engines", id.get_ref());
        let line = self.at(&id.span()).0;
        let valid_id = is_valid_engine_id(id.get_ref());
        if !valid_id {
            let found = format!("engine id {:?}", id.get_ref().as_ref());
            self.invalid("plugins.engines", id.span(), found, ENGINE_ID_RULE);
        }
        let table = self.table(&prefix, value)?;
        self.check_keys(&prefix, table, ENGINE_KEYS);
        let mut entry = EngineEntry {
            id: id.get_ref().to_string(),
            path: None,
            required: false,
            config: serde_json::Value::Object(serde_json::Map::new()),
            line,
        };
        if let Some(v) = table.get("path") {
            entry.path = self.path(&format!("{prefix}.path"), v);
        }
        if let Some(v) = table.get("required")
            && let Some(b) = self.boolean(&format!("{prefix}.required"), v)
        {
            entry.required = b;
        }
        if let Some(v) = table.get("config") {
            let key = format!("{prefix}.config");
            if let Some(t) = self.table(&key, v) {
                entry.config = serde_json::Value::Object(self.json_object(&key, t));
            }
        }
        valid_id.then_some(entry)
    }

    fn toml_table(&mut self, prefix: &str, table: &DeTable<'_>) -> toml::Table {
        let mut out = toml::Table::new();
        for (k, v) in table.iter() {
            let key = join_key(prefix, k.get_ref());
            if let Some(value) = self.toml_value(&key, v) {
                out.insert(k.get_ref().to_string(), value);
            }
        }
        out
    }

    fn toml_value(&mut self, key: &str, value: &SpannedValue<'_>) -> Option<toml::Value> {
        let position = self.at(&value.span());
        self.positions.insert(key.to_owned(), position);
        Some(match value.get_ref() {
            DeValue::String(s) => toml::Value::String(s.to_string()),
            DeValue::Integer(_) => toml::Value::Integer(self.integer(key, value)?),
            DeValue::Float(_) => toml::Value::Float(self.float(key, value)?),
            DeValue::Boolean(b) => toml::Value::Boolean(*b),
            DeValue::Datetime(d) => toml::Value::Datetime(*d),
            DeValue::Array(items) => toml::Value::Array(
                items
                    .iter()
                    .enumerate()
                    .filter_map(|(i, item)| self.toml_value(&format!("{key}[{i}]"), item))
                    .collect(),
            ),
            DeValue::Table(t) => toml::Value::Table(self.toml_table(key, t)),
        })
    }

    fn json_object(
        &mut self,
        prefix: &str,
        table: &DeTable<'_>,
    ) -> serde_json::Map<String, serde_json::Value> {
        let mut out = serde_json::Map::new();
        for (k, v) in table.iter() {
            let key = join_key(prefix, k.get_ref());
            if let Some(value) = self.json_value(&key, v) {
                out.insert(k.get_ref().to_string(), value);
            }
        }
        out
    }

    fn json_value(&mut self, key: &str, value: &SpannedValue<'_>) -> Option<serde_json::Value> {
        use serde_json::Value as J;
        Some(match value.get_ref() {
            DeValue::String(s) => J::String(s.to_string()),
            DeValue::Integer(_) => J::from(self.integer(key, value)?),
            DeValue::Float(_) => {
                let x = self.float(key, value)?;
                match serde_json::Number::from_f64(x) {
                    Some(n) => J::Number(n),
                    None => {
                        let found = describe(value.get_ref());
                        let allowed = "a finite number (JSON has no nan or inf)";
                        self.invalid(key, value.span(), found, allowed);
                        return None;
                    }
                }
            }
            DeValue::Boolean(b) => J::Bool(*b),
            DeValue::Datetime(d) => J::String(d.to_string()),
            DeValue::Array(items) => J::Array(
                items
                    .iter()
                    .enumerate()
                    .filter_map(|(i, item)| self.json_value(&format!("{key}[{i}]"), item))
                    .collect(),
            ),
            DeValue::Table(t) => J::Object(self.json_object(key, t)),
        })
    }

    fn integer(&mut self, key: &str, value: &SpannedValue<'_>) -> Option<i64> {
        let DeValue::Integer(i) = value.get_ref() else {
            return None;
        };
        match i64::from_str_radix(i.as_str(), i.radix()) {
            Ok(n) => Some(n),
            Err(_) => {
                let allowed = "an integer that fits in 64 bits";
                self.invalid(key, value.span(), describe(value.get_ref()), allowed);
                None
            }
        }
    }

    fn float(&mut self, key: &str, value: &SpannedValue<'_>) -> Option<f64> {
        let DeValue::Float(x) = value.get_ref() else {
            return None;
        };
        match x.as_str().parse::<f64>() {
            Ok(f) => Some(f),
            Err(_) => {
                let allowed = "a TOML float";
                self.invalid(key, value.span(), describe(value.get_ref()), allowed);
                None
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use std::fs;

    fn file() -> PathBuf {
        PathBuf::from("/etc/rampart/plugins.toml")
    }

    fn err(text: &str) -> ConfigError {
        parse(text, &file()).expect_err("expected an error")
    }

    const FULL: &str = r#"[plugins]
searchPaths = ["./target/debug", "/opt/engines"]
callTimeoutMs = 1500
loadTimeoutMs = 0x10
[plugins.slots]
contextEngine = "  window "
[plugins.engines.window]
path = "target/debug/librampart_window.so"
required = true
[plugins.engines.window.config]
keepRecentTokens = 20000
ratio = 0.5
names = ["a", "b"]
when = 1979-05-27T07:32:00Z
nested = { deep = true }

[plugins.engines.other-one]

[models.providers.sim]
models = [{ id = "x", contextWindow = 200000 }]

[agents.defaults]
contextTokens = 100000
"#;

    #[test]
    fn defaults_when_no_file() {
        let c = load(&ConfigSource::Defaults { searched: vec![] }).unwrap();
        assert_eq!(c, Config::default());
        assert_eq!(c.context_engine, "legacy");
        assert_eq!(c.call_timeout, Duration::from_secs(30));
        assert_eq!(c.load_timeout, Duration::from_secs(5));
        assert!(c.engines.is_empty() && c.search_paths.is_empty());
        assert!(c.source_file.is_none());
        // An empty file is the defaults plus a source file.
        let e = parse("", &file()).unwrap();
        assert_eq!(e.context_engine, "legacy");
        assert_eq!(e.source_file, Some(file()));
    }

    #[test]
    fn full_example_parses() {
        let c = parse(FULL, &file()).unwrap();
        assert_eq!(c.context_engine, "window");
        assert_eq!(c.context_engine_line, Some(6));
        assert_eq!(
            c.search_paths,
            vec![
                PathBuf::from("/etc/rampart/./target/debug"),
                PathBuf::from("/opt/engines")
            ]
        );
        assert_eq!(c.call_timeout, Duration::from_millis(1500));
        assert_eq!(c.load_timeout, Duration::from_millis(16));
        let w = &c.engines["window"];
        assert_eq!(w.id, "window");
        assert!(w.required);
        assert_eq!(w.line, 7);
        assert_eq!(
            w.path.as_deref(),
            Some(Path::new("/etc/rampart/target/debug/librampart_window.so"))
        );
        assert_eq!(
            w.config,
            serde_json::json!({
                "keepRecentTokens": 20000,
                "ratio": 0.5,
                "names": ["a", "b"],
                "when": "1979-05-27T07:32:00Z",
                "nested": {"deep": true},
            })
        );
        let o = &c.engines["other-one"];
        assert!(!o.required && o.path.is_none());
        assert_eq!(o.config, serde_json::json!({}));
        assert_eq!(o.line, 17);
        assert_eq!(
            c.models["providers"]["sim"]["models"][0]["contextWindow"].as_integer(),
            Some(200000)
        );
        assert_eq!(
            c.agents["defaults"]["contextTokens"].as_integer(),
            Some(100000)
        );
    }

    fn unknown_key(e: ConfigError) -> (String, usize, usize, Vec<String>) {
        match e {
            ConfigError::UnknownKey {
                key,
                line,
                column,
                allowed,
                ..
            } => (key, line, column, allowed),
            other => panic!("not UnknownKey: {other}"),
        }
    }

    #[test]
    fn unknown_key_top_level() {
        let e = err("[plugins]\n\n[plugin]\nx = 1\n");
        assert_eq!(
            e.to_string(),
            "/etc/rampart/plugins.toml:3:2: unknown key `plugin`; allowed keys here: \
             plugins, models, agents. Fix the key or remove it."
        );
        let (key, line, col, _) = unknown_key(e);
        assert_eq!((key.as_str(), line, col), ("plugin", 3, 2));
    }

    #[test]
    fn unknown_key_in_plugins() {
        let (key, line, col, allowed) =
            unknown_key(err("[plugins]\ncallTimeoutMs = 5\nsearchPath = []\n"));
        assert_eq!((key.as_str(), line, col), ("plugins.searchPath", 3, 1));
        assert!(allowed.contains(&"searchPaths".to_owned()));
    }

    #[test]
    fn unknown_key_in_slots() {
        let (key, line, _, allowed) = unknown_key(err(
            "[plugins.slots]\ncontextEngine = \"a\"\nmemory = \"b\"\n",
        ));
        assert_eq!((key.as_str(), line), ("plugins.slots.memory", 3));
        assert_eq!(allowed, vec!["contextEngine".to_owned()]);
    }

    #[test]
    fn unknown_key_in_engine() {
        let text = "[plugins]\nsearchPaths = []\n\n[plugins.engines.window]\npath = \"x.so\"\n\
                    \nrequird = false\n[plugins.engines.window.config]\nanything = 1\n";
        let e = err(text);
        assert_eq!(
            e.to_string(),
            "/etc/rampart/plugins.toml:7:1: unknown key `plugins.engines.window.requird`; \
             allowed keys here: path, required, config. Fix the key or remove it."
        );
    }

    #[test]
    fn earliest_error_is_reported() {
        // `zzz` sorts last but comes first in the file.
        let (key, line, _, _) = unknown_key(err("[plugins]\nzzz = 1\naaa = 2\n"));
        assert_eq!((key.as_str(), line), ("plugins.zzz", 2));
    }

    #[test]
    fn wrong_types() {
        let e = err("[plugins]\n\n[plugins.slots]\ncontextEngine = 5\n");
        assert_eq!(
            e.to_string(),
            "/etc/rampart/plugins.toml:4:17: `plugins.slots.contextEngine` must be a string, \
             found integer 5"
        );
        let e = err("[plugins.engines.w]\npath = \"a\"\nrequired = \"yes\"\n");
        assert_eq!(
            e.to_string(),
            "/etc/rampart/plugins.toml:3:12: `plugins.engines.w.required` must be a boolean \
             (true or false), found string \"yes\""
        );
        let e = err("plugins = 3\n");
        assert!(
            e.to_string()
                .contains("`plugins` must be a table, found integer 3")
        );
        let e = err("[plugins]\nsearchPaths = \"/x\"\n");
        assert!(e.to_string().contains("must be an array of strings"));
        let e = err("[plugins]\nsearchPaths = [\"/x\", 1]\n");
        assert!(
            e.to_string()
                .contains("`plugins.searchPaths[1]` must be a string")
        );
        let e = err("[plugins.engines.w]\nconfig = 1\n");
        assert!(
            e.to_string()
                .contains("`plugins.engines.w.config` must be a table")
        );
        let e = err("[plugins]\ncallTimeoutMs = 0\n");
        assert!(
            e.to_string()
                .contains("2:17: invalid value for `plugins.callTimeoutMs`: found integer 0")
        );
        let e = err("[plugins.engines.w.config]\nx = nan\n");
        assert!(e.to_string().contains("`plugins.engines.w.config.x`"));
    }

    #[test]
    fn syntax_error_names_line() {
        let e = err("[plugins]\ncallTimeoutMs = 1\nsearchPaths = [\n");
        match &e {
            ConfigError::Syntax { line, .. } => assert!(*line >= 3, "{e}"),
            other => panic!("not Syntax: {other}"),
        }
        let e = err("[plugins]\nx = \n");
        assert!(
            e.to_string()
                .starts_with("/etc/rampart/plugins.toml:2:5: invalid TOML: "),
            "{e}"
        );
    }

    #[test]
    fn relative_paths_resolve_against_config_dir() {
        let text = "[plugins]\nsearchPaths = [\"engines\", \"/abs\"]\n\
                    [plugins.engines.w]\npath = \"lib/libw.so\"\n";
        let c = parse(text, Path::new("/srv/conf/plugins.toml")).unwrap();
        assert_eq!(
            c.search_paths,
            vec![PathBuf::from("/srv/conf/engines"), PathBuf::from("/abs")]
        );
        assert_eq!(
            c.engines["w"].path.as_deref(),
            Some(Path::new("/srv/conf/lib/libw.so"))
        );
        // A bare file name never becomes a bare library name (which dlopen would search
        // the system for).
        let c = parse(text, Path::new("plugins.toml")).unwrap();
        assert_eq!(
            c.engines["w"].path.as_deref(),
            Some(Path::new("./lib/libw.so"))
        );
        let e = err("[plugins.engines.w]\npath = \"\"\n");
        assert!(e.to_string().contains("a non-empty path"), "{e}");
    }

    #[test]
    fn file_names_and_search_paths() {
        use std::env::consts::{DLL_PREFIX, DLL_SUFFIX};
        assert_eq!(
            engine_library_file_names("rampart-window"),
            vec![
                format!("{DLL_PREFIX}rampart-window{DLL_SUFFIX}"),
                format!("{DLL_PREFIX}rampart_window{DLL_SUFFIX}"),
            ]
        );
        assert_eq!(engine_library_file_names("w").len(), 1);

        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let name = format!("{DLL_PREFIX}rampart_window{DLL_SUFFIX}");
        fs::write(a.path().join(&name), b"").unwrap();
        fs::write(b.path().join(&name), b"").unwrap();
        let config = Config {
            search_paths: vec![
                a.path().to_path_buf(),
                a.path().to_path_buf(),
                b.path().to_path_buf(),
            ],
            ..Config::default()
        };
        let found = config.find_in_search_paths("rampart-window");
        assert_eq!(found, vec![a.path().join(&name), b.path().join(&name)]);
        assert!(config.find_in_search_paths("nothing").is_empty());
        let e = config.resolve_engine_path("rampart-window").unwrap_err();
        assert!(matches!(e, ConfigError::AmbiguousEngine { .. }), "{e}");
        assert!(
            e.to_string()
                .contains(&a.path().join(&name).display().to_string())
        );
        assert!(
            e.to_string()
                .contains(&b.path().join(&name).display().to_string())
        );

        let single = Config {
            search_paths: vec![a.path().to_path_buf()],
            ..Config::default()
        };
        assert_eq!(
            single.resolve_engine_path("rampart-window").unwrap(),
            Some(a.path().join(&name))
        );
        assert_eq!(single.resolve_engine_path("legacy").unwrap(), None);
        assert_eq!(
            single.available_engine_ids(),
            vec!["legacy".to_owned(), "rampart_window".to_owned()]
        );
        let e = single.resolve_engine_path("nope").unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown engine id `nope`; available ids: legacy, rampart_window. Pick one of them, \
             add `[plugins.engines.nope]` with a `path`, or put the library in a \
             `plugins.searchPaths` directory."
        );
    }

    #[test]
    fn unknown_context_engine_names_line() {
        let text = "[plugins.slots]\ncontextEngine = \"ghost\"\n[plugins.engines.declared]\n";
        let c = parse(text, &file()).unwrap();
        let e = c.resolve_engine_path("ghost").unwrap_err();
        assert!(
            e.to_string().starts_with(
                "/etc/rampart/plugins.toml:2: unknown engine id `ghost`; available ids: \
                 declared, legacy."
            ),
            "{e}"
        );
        let e = c.resolve_engine_path("declared").unwrap_err();
        assert!(
            matches!(e, ConfigError::EngineNotFound { line: 3, .. }),
            "{e}"
        );
    }

    #[test]
    fn engine_id_validation() {
        assert!(is_valid_engine_id("rampart-window_2"));
        assert!(!is_valid_engine_id(""));
        assert!(!is_valid_engine_id("a b"));
        assert!(!is_valid_engine_id("é"));
        let e = err("[plugins.engines.\"bad id\"]\npath = \"x\"\n");
        assert_eq!(
            e.to_string(),
            "/etc/rampart/plugins.toml:1:18: invalid value for `plugins.engines`: found engine \
             id \"bad id\"; allowed: a non-empty id of ASCII letters, digits, `-` and `_`."
        );
        let e = err("[plugins.engines.\"\"]\n");
        assert!(
            matches!(e, ConfigError::InvalidValue { line: 1, .. }),
            "{e}"
        );
        let e = err("[plugins.slots]\ncontextEngine = \"a/b\"\n");
        assert!(
            e.to_string()
                .contains("invalid value for `plugins.slots.contextEngine`"),
            "{e}"
        );
        // Empty means the default.
        let c = parse("[plugins.slots]\ncontextEngine = \"  \"\n", &file()).unwrap();
        assert_eq!(c.context_engine, "legacy");
        // Unknown keys under a quoted id are shown quoted.
        let (key, _, _, _) = unknown_key(err("[plugins.engines.ok]\n\"we ird\" = 1\n"));
        assert_eq!(key, "plugins.engines.ok.\"we ird\"");
    }

    #[test]
    fn explicit_path_must_exist() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.toml");
        let e = locate_with(Some(&missing), None, dir.path(), None).unwrap_err();
        assert!(matches!(&e, ConfigError::ExplicitNotFound { path } if *path == missing));
        assert!(e.to_string().contains("--config"), "{e}");
        let present = dir.path().join("mine.toml");
        fs::write(&present, "").unwrap();
        // Explicit wins over the env var and ./plugins.toml.
        fs::write(dir.path().join(CONFIG_FILE_NAME), "").unwrap();
        let s = locate_with(
            Some(Path::new("mine.toml")),
            Some("other.toml".into()),
            dir.path(),
            None,
        )
        .unwrap();
        assert_eq!(s, ConfigSource::Explicit(present));
    }

    #[test]
    fn env_var_rule() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(CONFIG_FILE_NAME), "").unwrap();
        let e = locate_with(None, Some("gone.toml".into()), dir.path(), None).unwrap_err();
        assert!(matches!(e, ConfigError::EnvNotFound { .. }));
        assert!(e.to_string().contains("$RAMPART_CONFIG"), "{e}");
        let env_file = dir.path().join("env.toml");
        fs::write(&env_file, "[plugins.slots]\ncontextEngine = \"w\"\n").unwrap();
        let s = locate_with(None, Some(env_file.clone().into()), dir.path(), None).unwrap();
        assert_eq!(s, ConfigSource::Env(env_file.clone()));
        assert_eq!(s.path(), Some(env_file.as_path()));
        assert_eq!(load(&s).unwrap().context_engine, "w");
        // An empty variable counts as unset.
        let s = locate_with(None, Some("".into()), dir.path(), None).unwrap();
        assert!(matches!(s, ConfigSource::CurrentDir(_)));
    }

    #[test]
    fn current_dir_then_user_dir_then_defaults() {
        let cwd = tempfile::tempdir().unwrap();
        let user = tempfile::tempdir().unwrap();
        let s = locate_with(None, None, cwd.path(), Some(user.path())).unwrap();
        assert_eq!(
            s,
            ConfigSource::Defaults {
                searched: vec![
                    cwd.path().join(CONFIG_FILE_NAME),
                    user.path().join(CONFIG_FILE_NAME)
                ]
            }
        );
        assert!(s.to_string().starts_with("built-in defaults"));
        fs::write(user.path().join(CONFIG_FILE_NAME), "").unwrap();
        let s = locate_with(None, None, cwd.path(), Some(user.path())).unwrap();
        assert_eq!(
            s,
            ConfigSource::UserConfigDir(user.path().join(CONFIG_FILE_NAME))
        );
        fs::write(cwd.path().join(CONFIG_FILE_NAME), "").unwrap();
        let s = locate_with(None, None, cwd.path(), Some(user.path())).unwrap();
        assert_eq!(
            s,
            ConfigSource::CurrentDir(cwd.path().join(CONFIG_FILE_NAME))
        );
        assert!(s.to_string().ends_with("(found in the current directory)"));
    }

    #[test]
    fn read_error_names_file() {
        let dir = tempfile::tempdir().unwrap();
        // A directory exists but cannot be read as a file.
        let e = load(&ConfigSource::Explicit(dir.path().to_path_buf())).unwrap_err();
        assert!(matches!(e, ConfigError::Read { .. }));
        assert!(
            e.to_string().contains(&dir.path().display().to_string()),
            "{e}"
        );
    }
}
