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
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::de::DeTable;

pub mod agents;
mod error;
pub mod memory;
pub mod models;
pub mod serve;
mod source;
mod validate;

pub use agents::AgentDefaults;
pub use error::ConfigError;
use error::join_paths;
pub use models::{ApiKind, ModelEntry, ModelName, ModelsConfig, ProviderSettings};
pub use source::ModelsConfigError;
use validate::{Validator, line_col};

/// File name looked up in the current directory and in the user config directory.
pub const CONFIG_FILE_NAME: &str = "plugins.toml";

/// Environment variable that names the config file when `--config` is not given.
pub const CONFIG_ENV_VAR: &str = "RAMPART_CONFIG";

/// Id of the engine linked into the host; the default of `plugins.slots.contextEngine`.
pub const BUILTIN_ENGINE_ID: &str = "legacy";

/// Id of the memory engine built into the host; the default of `plugins.slots.memory`.
pub const BUILTIN_MEMORY_ID: &str = "memory-core";

/// The value of `plugins.slots.memory` that turns long-term memory off.
pub const MEMORY_OFF: &str = "none";

/// Default deadline for one engine call (`plugins.callTimeoutMs`), in milliseconds.
pub const DEFAULT_CALL_TIMEOUT_MS: u64 = 30_000;

/// Default deadline for loading and constructing an engine (`plugins.loadTimeoutMs`), in ms.
pub const DEFAULT_LOAD_TIMEOUT_MS: u64 = 5_000;

/// Largest accepted timeout, in milliseconds (24 hours); larger values are surely typos.
pub const MAX_TIMEOUT_MS: u64 = 86_400_000;

/// Default wait for another process's session write lock (`session.writeLockTimeoutMs`).
pub const DEFAULT_SESSION_LOCK_TIMEOUT_MS: u64 = 10_000;

/// Default cap on the compaction checkpoints kept per session in the registry
/// (`session.maxCompactionCheckpoints`), OpenClaw's 25.
pub const DEFAULT_MAX_COMPACTION_CHECKPOINTS: usize = 25;

const TOP_KEYS: &[&str] = &["plugins", "models", "agents", "session", "serve"];
const SERVE_KEYS: &[&str] = &[
    "listen",
    "authToken",
    "maxConcurrent",
    "maxQueue",
    "sideRequests",
    "systemPrompt",
    "memoryTools",
    "engineTools",
    "engineCredentials",
    "allowedHosts",
    "allowedOrigins",
    "maxConnections",
    "sessionCacheMiB",
    "minAnswerTokens",
    "headerTimeoutMs",
    "bodyTimeoutMs",
    "drainTimeoutMs",
    "store",
];
const STORE_KEYS: &[&str] = &["url", "passwordEnv", "poolSize", "lockConnections"];
const SIDE_REQUEST_KEYS: &[&str] = &["enabled", "probeMaxTokens", "smallModels"];
const SESSION_KEYS: &[&str] = &["writeLockTimeoutMs", "maxCompactionCheckpoints"];
const PLUGINS_KEYS: &[&str] = &[
    "searchPaths",
    "callTimeoutMs",
    "loadTimeoutMs",
    "slots",
    "engines",
];
const SLOTS_KEYS: &[&str] = &["contextEngine", "memory"];
const ENGINE_KEYS: &[&str] = &[
    "path",
    "command",
    "required",
    "config",
    "isolation",
    "restart",
    "limits",
    "wasm",
];
const WASM_KEYS: &[&str] = &["dir", "memoryMb"];
const RESTART_KEYS: &[&str] = &["max", "within"];
const LIMITS_KEYS: &[&str] = &["memoryMb", "cpuSeconds"];

/// Largest `restart.max`: more restarts than this within a window is a crash loop, not bad luck.
pub const MAX_RESTARTS: u32 = 100;

/// Largest `limits.memoryMb` (1 TiB) and `limits.cpuSeconds` (a week); larger values are typos.
pub const MAX_MEMORY_MB: u64 = 1 << 20;
/// See [`MAX_MEMORY_MB`].
pub const MAX_CPU_SECONDS: u64 = 7 * 86_400;
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
    /// Where `plugins.toml` was looked for when none was found (empty when one was read):
    /// errors that need a file (an engine id only a file could declare) say where it was
    /// looked for, so a user outside the repository learns why only `legacy` is known.
    pub searched: Vec<PathBuf>,
    /// Id of the engine in the `contextEngine` slot (`plugins.slots.contextEngine`,
    /// trimmed; `legacy` when absent or empty).
    pub context_engine: String,
    /// Line of `plugins.slots.contextEngine` in the file, so an unknown id can be reported
    /// where it was written; `None` when the default applies.
    pub context_engine_line: Option<usize>,
    /// Id of the engine in the `memory` slot (`plugins.slots.memory`, trimmed):
    /// [`BUILTIN_MEMORY_ID`] when absent or empty, [`MEMORY_OFF`] for no memory.
    pub memory_engine: String,
    /// Directories searched for engine libraries by id (`plugins.searchPaths`), in order,
    /// relative entries already resolved against the config file's directory.
    pub search_paths: Vec<PathBuf>,
    /// Deadline for each engine call (`plugins.callTimeoutMs`, default 30 s).
    pub call_timeout: Duration,
    /// Deadline for loading and constructing an engine (`plugins.loadTimeoutMs`, default 5 s).
    pub load_timeout: Duration,
    /// Engines declared under `plugins.engines.<id>`, by id.
    pub engines: BTreeMap<String, EngineEntry>,
    /// `models.providers`: every provider and its models, checked.
    pub models: ModelsConfig,
    /// `agents.defaults`, checked.
    pub agent_defaults: AgentDefaults,
    /// `session`: how sessions are shared between processes.
    pub session: SessionSettings,
    /// `serve`: how `rampart serve` listens and how much it runs at once.
    pub serve: serve::ServeSettings,
}

/// The `[session]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSettings {
    /// How long a turn waits for another process's write lock on its session before failing
    /// with an error naming that process (`writeLockTimeoutMs`, default 10 s). A turn holds
    /// the lock from reading the context to appending the answer, so this is the time a
    /// second writer will wait for a turn in progress.
    pub write_lock_timeout: Duration,
    /// How many compaction checkpoints the registry keeps per session, newest last
    /// (`maxCompactionCheckpoints`, default 25; OpenClaw's cap). Older ones are dropped from
    /// the registry only: the compaction entries stay in the transcript.
    pub max_compaction_checkpoints: usize,
}

impl Default for SessionSettings {
    fn default() -> Self {
        Self {
            write_lock_timeout: Duration::from_millis(DEFAULT_SESSION_LOCK_TIMEOUT_MS),
            max_compaction_checkpoints: DEFAULT_MAX_COMPACTION_CHECKPOINTS,
        }
    }
}

impl Default for Config {
    /// The configuration used when no file exists: the built-in `legacy` engine, no plugins.
    fn default() -> Self {
        Self {
            source_file: None,
            searched: Vec::new(),
            context_engine: BUILTIN_ENGINE_ID.to_owned(),
            context_engine_line: None,
            memory_engine: BUILTIN_MEMORY_ID.to_owned(),
            search_paths: Vec::new(),
            call_timeout: Duration::from_millis(DEFAULT_CALL_TIMEOUT_MS),
            load_timeout: Duration::from_millis(DEFAULT_LOAD_TIMEOUT_MS),
            engines: BTreeMap::new(),
            models: ModelsConfig::default(),
            agent_defaults: AgentDefaults::default(),
            session: SessionSettings::default(),
            serve: serve::ServeSettings::default(),
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
    /// Where the engine's code runs (`isolation`: a child process unless `"inprocess"`; the
    /// built-in engine always runs in the host).
    pub isolation: Isolation,
    /// `command = ["python3", "engine.py"]`: the engine is an executable that speaks the
    /// engine protocol (docs/engine-protocol.md) on its stdin and stdout, instead of a library
    /// (`path`). Exactly one of `path` and `command`; an executable always runs in a child.
    pub command: Option<EngineCommand>,
}

/// An engine that is a program of its own (`plugins.engines.<id>.command`).
///
/// Why: a library must be Rust built against the same `abi_stable`; a program in any language
/// that reads and writes the protocol's frames can be an engine, hosted in a child process
/// exactly like a library under `rampart engine-host`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineCommand {
    /// The program. A bare name (`python3`) is looked up in `PATH` when the child starts; one
    /// with a directory in it (`./engine`, `bin/engine`) was resolved against the config
    /// file's directory, like `path`.
    pub program: PathBuf,
    /// The arguments, as written.
    pub args: Vec<String>,
    /// The config file's directory: the command runs there, so a relative argument (the script
    /// in `["python3", "engine.py"]`) names a file beside plugins.toml, as `path` would.
    pub dir: PathBuf,
}

impl std::fmt::Display for EngineCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.program.display())?;
        for arg in &self.args {
            if arg.is_empty() || arg.contains(char::is_whitespace) {
                write!(f, " {arg:?}")?;
            } else {
                write!(f, " {arg}")?;
            }
        }
        Ok(())
    }
}

/// Where an engine library's code runs (`plugins.engines.<id>.isolation`). The built-in engine
/// always runs in the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Isolation {
    /// `"inprocess"`: loaded into the host. A few tens of µs faster per call; a segfault,
    /// abort, `exit` or runaway allocation in the library ends the host.
    InProcess,
    /// `"process"`: loaded by a child `rampart engine-host`, spoken to over a pipe. Any death
    /// of the child becomes a quarantine (or a restart).
    Process(ProcessSettings),
    /// `"wasm"`: `path` is a WebAssembly component (`engine-api/wit/engine.wit`) run by wasmtime
    /// in the host's process, with no file system unless `wasm.dir` grants one, no network, the
    /// call's deadline and a memory cap. A trap, an overrun or the cap is a quarantine. Needs a
    /// host built with the `wasm` feature.
    Wasm(WasmSettings),
}

/// Default `wasm.memoryMb`: enough for an engine holding a long history as JSON several times
/// over, small enough that a runaway allocation stops long before it troubles the host.
pub const DEFAULT_WASM_MEMORY_MB: u64 = 256;

/// Largest `wasm.memoryMb`: a 32-bit WebAssembly memory cannot grow past 4 GiB.
pub const MAX_WASM_MEMORY_MB: u64 = 4096;

/// How a WebAssembly engine is confined (`plugins.engines.<id>.wasm = { dir, memoryMb }`).
///
/// Why: a component can only touch what the host hands it, so the configuration is the whole
/// list of what it may touch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WasmSettings {
    /// `wasm.dir`: a directory the engine may read and write, resolved against the config
    /// file's directory and seen by the engine at the same absolute path; `None` grants no file
    /// system at all.
    pub dir: Option<PathBuf>,
    /// `wasm.memoryMb`: the most linear memory the engine may grow to, in MiB; a `memory.grow`
    /// past it traps.
    pub memory_mb: u64,
}

impl Default for WasmSettings {
    fn default() -> Self {
        Self {
            dir: None,
            memory_mb: DEFAULT_WASM_MEMORY_MB,
        }
    }
}

/// The default for a library: its own process. Measured (BENCHMARKS.md, issue 18), a child costs
/// about 4 ms to start and 50 µs per call, against a host that a third-party library could
/// otherwise end with one bad pointer.
impl Default for Isolation {
    fn default() -> Self {
        Isolation::Process(ProcessSettings::default())
    }
}

/// How an engine in a child process is kept: restarts and resource limits.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProcessSettings {
    /// `restart = { max, within }`: restart a dead child, with back-off, at most `max` times
    /// within `within`; `None` quarantines at the first death.
    pub restart: Option<RestartPolicy>,
    /// `limits = { memoryMb, cpuSeconds }`, applied to the child as rlimits.
    pub limits: ProcessLimits,
}

/// `restart = { max = 3, within = "10m" }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartPolicy {
    /// Restarts allowed within the window.
    pub max: u32,
    /// The sliding window the restarts are counted in.
    pub within: Duration,
}

/// `limits = { memoryMb = 512, cpuSeconds = 60 }`: rlimits of the engine's child process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProcessLimits {
    /// The child's address space, in MiB (`RLIMIT_AS`): an allocation past it fails, and a Rust
    /// engine aborts, which the host sees as the child's death.
    pub memory_mb: Option<u64>,
    /// The child's CPU time, in seconds (`RLIMIT_CPU`): past it the kernel sends `SIGXCPU`,
    /// then `SIGKILL`.
    pub cpu_seconds: Option<u64>,
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
        let searched = match source {
            ConfigSource::Defaults { searched } => searched.clone(),
            _ => Vec::new(),
        };
        return Ok(Config {
            searched,
            ..Config::default()
        });
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
        lines: validate::LineIndex::new(text),
    };
    let (mut config, raw) = v.config(root.get_ref());
    if let Some((_, err)) = v.errors.into_iter().min_by_key(|(offset, _)| *offset) {
        return Err(err);
    }
    // The tables the span walk leaves free-form get their types now, once: every command sees
    // the same checked values, and `config check` refuses what any command would.
    let source = source::Source {
        file: Some(file),
        positions: &v.positions,
        models: &raw.models,
        agents: &raw.agents,
    };
    config.models = ModelsConfig::parse(&source)?;
    config.agent_defaults = AgentDefaults::parse(&source)?;
    Ok(config)
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
                    searched: self.searched.clone(),
                }),
            },
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#[path = "mod_tests.rs"]
mod tests;
