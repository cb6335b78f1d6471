//! `agents.defaults`: the model list, the window cap, the tool-result cap, compaction and
//! pruning settings, read once when the configuration is loaded.
//!
//! ```toml
//! [agents.defaults]
//! contextTokens = 100000                 # a cap that may only lower a model's window
//! [agents.defaults.model]
//! primary = "sim/small"                  # provider/model
//! fallbacks = ["sim/large"]
//! [agents.defaults.contextLimits]
//! toolResultMaxChars = 40000
//! [agents.defaults.compaction]           # rampart_context::compaction::settings
//! reserveTokens = 20000
//! [agents.defaults.contextPruning]       # rampart_context::pruning
//! mode = "cache-ttl"
//! ```
//!
//! Compaction and pruning are read by the same parsers the legacy engine uses
//! (`rampart_context`), so a key means the same to the host and to the engine, with one set of
//! limits and one set of defaults.

use rampart_context::compaction::settings::CompactionSettings;
use rampart_context::pruning::{EffectiveSettings, PruningSettings};
use serde_json::json;

use super::models::ModelName;
use super::source::{ModelsConfigError, Source, describe};

/// The keys `agents.defaults` may hold. An unknown key is an error naming these, because a
/// misspelt key would otherwise leave a default the user believes they changed.
pub const AGENT_DEFAULTS_KEYS: &[&str] = &[
    "model",
    "contextTokens",
    "contextLimits",
    "compaction",
    "contextPruning",
    "workspace",
    "repoRoot",
    "userTimezone",
    "systemPromptOverride",
    "bootstrapMaxChars",
    "bootstrapTotalMaxChars",
    "bootstrapPromptTruncationWarning",
    "memorySearch",
];

/// The keys of `agents.defaults.contextLimits`.
const CONTEXT_LIMITS_KEYS: &[&str] = &["toolResultMaxChars"];

/// `agents.defaults`, checked.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AgentDefaults {
    /// `contextTokens`: a cap that may only lower a model's window.
    pub context_tokens: Option<u64>,
    /// `model.primary` (or `model` as a string).
    pub primary: Option<ModelName>,
    /// `model.fallbacks`, in order.
    pub fallbacks: Vec<ModelName>,
    /// `contextLimits.toolResultMaxChars`.
    pub tool_result_max_chars: Option<u64>,
    /// `compaction`, with every default filled in.
    pub compaction: CompactionSettings,
    /// `contextPruning`, as written (checked).
    pub context_pruning: PruningSettings,
    /// What pruning runs with: `Some` when `contextPruning.mode` is `cache-ttl`.
    pub pruning: Option<EffectiveSettings>,
    /// `workspace`: the agent workspace (bootstrap files, memory files, skills), as written;
    /// resolve it with [`AgentDefaults::workspace_dir`]. OpenClaw's key.
    pub workspace: Option<std::path::PathBuf>,
    /// `repoRoot`: the repository named in the prompt's runtime line (else the workspace's git
    /// root).
    pub repo_root: Option<std::path::PathBuf>,
    /// `userTimezone`: the time zone the prompt names (else the host's, else UTC). The prompt
    /// never holds the time itself, so the cache holds.
    pub user_timezone: Option<String>,
    /// `systemPromptOverride`: replaces the whole built system prompt (trimmed; ignored when
    /// blank).
    pub system_prompt_override: Option<String>,
    /// `bootstrapMaxChars` and `bootstrapTotalMaxChars`: the caps on the workspace files in the
    /// prompt, per file and in all (defaults 20,000 and 150,000).
    pub bootstrap_limits: rampart_prompt::BootstrapLimits,
    /// `bootstrapPromptTruncationWarning`: `off`, `once` or `always` (default `always`: a cut
    /// file is never silent).
    pub bootstrap_truncation_warning: rampart_prompt::TruncationWarningMode,
    /// `memorySearch`: the built-in memory engine's settings and embedding provider.
    pub memory_search: super::memory::MemorySearchConfig,
}

impl AgentDefaults {
    /// Reads `agents.defaults`.
    pub(super) fn parse(source: &Source<'_>) -> Result<Self, ModelsConfigError> {
        for key in source.agents.keys() {
            if key != "defaults" {
                return Err(source.err(
                    &format!("agents.{key}"),
                    "is not a known key. Allowed here: defaults",
                ));
            }
        }
        let Some(defaults) = source.agents.get("defaults") else {
            return Ok(Self::default());
        };
        let Some(defaults) = defaults.as_table() else {
            return Err(source.err(
                "agents.defaults",
                format!("must be a table, found {}", describe(defaults)),
            ));
        };
        for key in defaults.keys() {
            if !AGENT_DEFAULTS_KEYS.contains(&key.as_str()) {
                return Err(source.err(
                    &format!("agents.defaults.{key}"),
                    format!(
                        "is not a known key. Allowed here: {}",
                        AGENT_DEFAULTS_KEYS.join(", ")
                    ),
                ));
            }
        }
        let mut out = Self {
            context_tokens: positive(
                source,
                "agents.defaults.contextTokens",
                defaults.get("contextTokens"),
            )?,
            ..Self::default()
        };
        // Compaction and pruning are read by the engine's own parsers, from their JSON form.
        let json = |key: &str| -> Result<Option<serde_json::Value>, ModelsConfigError> {
            defaults
                .get(key)
                .map(|v| {
                    serde_json::to_value(v).map_err(|e| {
                        source.err(
                            &format!("agents.defaults.{key}"),
                            format!("cannot be read: {e}"),
                        )
                    })
                })
                .transpose()
        };
        match defaults.get("model") {
            None => {}
            Some(toml::Value::String(s)) => {
                out.primary = Some(model_name(source, "agents.defaults.model", s)?);
            }
            Some(toml::Value::Table(t)) => {
                for key in t.keys() {
                    if !["primary", "fallbacks"].contains(&key.as_str()) {
                        return Err(source.err(
                            &format!("agents.defaults.model.{key}"),
                            "is not a known key. Allowed here: primary, fallbacks",
                        ));
                    }
                }
                out.primary = match t.get("primary") {
                    None => None,
                    Some(toml::Value::String(s)) => {
                        Some(model_name(source, "agents.defaults.model.primary", s)?)
                    }
                    Some(other) => {
                        return Err(source.err(
                            "agents.defaults.model.primary",
                            format!(
                                "must be a string like \"provider/model\", found {}",
                                describe(other)
                            ),
                        ));
                    }
                };
                if let Some(f) = t.get("fallbacks") {
                    let key = "agents.defaults.model.fallbacks";
                    let list = f.as_array().ok_or_else(|| {
                        source.err(key, "must be an array of \"provider/model\" strings")
                    })?;
                    for item in list {
                        let s = item.as_str().ok_or_else(|| {
                            source.err(
                                key,
                                format!(
                                    "must hold strings like \"provider/model\", found {}",
                                    describe(item)
                                ),
                            )
                        })?;
                        out.fallbacks.push(model_name(source, key, s)?);
                    }
                }
            }
            Some(other) => {
                return Err(source.err(
                    "agents.defaults.model",
                    format!(
                        "must be a string or a table with `primary` and `fallbacks`, found {}",
                        describe(other)
                    ),
                ));
            }
        }
        if let Some(limits) = defaults.get("contextLimits") {
            let key = "agents.defaults.contextLimits";
            let t = limits.as_table().ok_or_else(|| {
                source.err(key, format!("must be a table, found {}", describe(limits)))
            })?;
            for k in t.keys() {
                if !CONTEXT_LIMITS_KEYS.contains(&k.as_str()) {
                    return Err(source.err(
                        &format!("{key}.{k}"),
                        format!(
                            "is not a known key. Allowed here: {}",
                            CONTEXT_LIMITS_KEYS.join(", ")
                        ),
                    ));
                }
            }
            out.tool_result_max_chars = positive(
                source,
                "agents.defaults.contextLimits.toolResultMaxChars",
                t.get("toolResultMaxChars"),
            )?;
        }
        for (key, slot) in [
            ("workspace", &mut out.workspace),
            ("repoRoot", &mut out.repo_root),
        ] {
            if let Some(text) = non_blank(source, key, defaults.get(key))? {
                *slot = Some(std::path::PathBuf::from(text));
            }
        }
        out.user_timezone = non_blank(source, "userTimezone", defaults.get("userTimezone"))?;
        out.system_prompt_override = non_blank(
            source,
            "systemPromptOverride",
            defaults.get("systemPromptOverride"),
        )?;
        let per_file = positive(
            source,
            "agents.defaults.bootstrapMaxChars",
            defaults.get("bootstrapMaxChars"),
        )?;
        let total = positive(
            source,
            "agents.defaults.bootstrapTotalMaxChars",
            defaults.get("bootstrapTotalMaxChars"),
        )?;
        out.bootstrap_limits = rampart_prompt::BootstrapLimits::new(
            per_file.map_or(0, |n| n as usize),
            total.map_or(0, |n| n as usize),
        );
        if let Some(v) = defaults.get("bootstrapPromptTruncationWarning") {
            let key = "agents.defaults.bootstrapPromptTruncationWarning";
            out.bootstrap_truncation_warning = match v.as_str() {
                Some("off") => rampart_prompt::TruncationWarningMode::Off,
                Some("once") => rampart_prompt::TruncationWarningMode::Once,
                Some("always") => rampart_prompt::TruncationWarningMode::Always,
                _ => {
                    return Err(source.err(
                        key,
                        format!(
                            "must be \"off\", \"once\" or \"always\", found {}",
                            describe(v)
                        ),
                    ));
                }
            };
        }
        if let Some(raw) = json("memorySearch")? {
            out.memory_search = super::memory::MemorySearchConfig::parse(source, &raw)?;
        }
        if let Some(raw) = json("compaction")? {
            out.compaction = CompactionSettings::from_value(&raw)
                .map_err(|e| source.err(e.path(), e.problem()))?;
        }
        if let Some(raw) = json("contextPruning")? {
            let located = |e: rampart_context::pruning::PruningConfigError| {
                source.err(&e.key, e.problem.clone())
            };
            out.context_pruning = PruningSettings::from_json(&raw).map_err(located)?;
            out.pruning = out.context_pruning.effective().map_err(located)?;
        }
        Ok(out)
    }

    /// The settings as the legacy engine is constructed from them: these typed values,
    /// serialised under OpenClaw's keys. Why from the typed values and not the file's table:
    /// a caller may have changed them (a replay sets the model and drops `contextTokens`), and
    /// the engine must see what the host runs with.
    pub fn engine_config(&self) -> serde_json::Value {
        let mut config = json!({
            "compaction": self.compaction,
            "contextPruning": self.context_pruning,
        });
        if let Some(tokens) = self.context_tokens {
            config["contextTokens"] = json!(tokens);
        }
        if let Some(chars) = self.tool_result_max_chars {
            config["contextLimits"] = json!({ "toolResultMaxChars": chars });
        }
        config
    }

    /// The agent workspace: `workspace` (a relative path is read against the config file's
    /// directory, `~/` against the home directory), else `workspace` beside the sessions
    /// directory, in the same data directory (`~/.local/share/rampart/workspace`), so a
    /// `--sessions-dir` elsewhere keeps everything of that agent together.
    pub fn workspace_dir(
        &self,
        config_file: Option<&std::path::Path>,
        sessions_dir: &std::path::Path,
    ) -> std::path::PathBuf {
        let Some(written) = &self.workspace else {
            let data_dir = sessions_dir
                .parent()
                .map_or_else(|| sessions_dir.to_path_buf(), std::path::Path::to_path_buf);
            return data_dir.join("workspace");
        };
        resolve_written_path(written, config_file)
    }

    /// `repoRoot` as a path, read like `workspace` (against the config file's directory, `~/`
    /// against the home directory); `None` when it is not set.
    pub fn repo_root_dir(
        &self,
        config_file: Option<&std::path::Path>,
    ) -> Option<std::path::PathBuf> {
        self.repo_root
            .as_ref()
            .map(|written| resolve_written_path(written, config_file))
    }

    /// The models to try, in order: the primary (or `default` when none is named), then the
    /// fallbacks.
    pub fn candidates(&self, default: &ModelName) -> Vec<ModelName> {
        let mut out = vec![self.primary.clone().unwrap_or_else(|| default.clone())];
        out.extend(self.fallbacks.iter().cloned());
        out
    }
}

/// A path as written in the config: `~/` against the home directory, a relative one against
/// the config file's directory (as written when there is no file).
fn resolve_written_path(
    written: &std::path::Path,
    config_file: Option<&std::path::Path>,
) -> std::path::PathBuf {
    if let Ok(rest) = written.strip_prefix("~")
        && let Some(home) = directories::BaseDirs::new()
    {
        return home.home_dir().join(rest);
    }
    if written.is_absolute() {
        return written.to_path_buf();
    }
    config_file
        .and_then(std::path::Path::parent)
        .map_or_else(|| written.to_path_buf(), |dir| dir.join(written))
}

/// A string setting of `agents.defaults`, trimmed; `None` when absent or blank.
fn non_blank(
    source: &Source<'_>,
    key: &str,
    v: Option<&toml::Value>,
) -> Result<Option<String>, ModelsConfigError> {
    match v {
        None => Ok(None),
        Some(toml::Value::String(s)) => Ok(Some(s.trim().to_owned()).filter(|s| !s.is_empty())),
        Some(other) => Err(source.err(
            &format!("agents.defaults.{key}"),
            format!("must be a string, found {}", describe(other)),
        )),
    }
}

fn model_name(source: &Source<'_>, key: &str, text: &str) -> Result<ModelName, ModelsConfigError> {
    text.parse::<ModelName>()
        .map_err(|e| source.err(key, e.to_string()))
}

/// A positive number of tokens or characters; a float is floored.
fn positive(
    source: &Source<'_>,
    key: &str,
    v: Option<&toml::Value>,
) -> Result<Option<u64>, ModelsConfigError> {
    match v {
        None => Ok(None),
        Some(toml::Value::Integer(i)) if *i > 0 => Ok(Some(*i as u64)),
        Some(toml::Value::Float(f)) if f.is_finite() && *f >= 1.0 => Ok(Some(f.floor() as u64)),
        Some(other) => Err(source.err(
            key,
            format!("must be a positive number, found {}", describe(other)),
        )),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "agents_tests.rs"]
mod tests;
