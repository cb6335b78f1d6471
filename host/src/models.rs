//! Models and agent defaults from `plugins.toml`, and layer 1 of the defence: the
//! context-window guard with failover to the next model.
//!
//! Keys follow OpenClaw:
//! ```toml
//! [agents.defaults]
//! contextTokens = 100000                 # a cap that may only lower a model's window
//! [agents.defaults.model]
//! primary = "sim/small"                  # provider/model
//! fallbacks = ["sim/large"]
//! [agents.defaults.contextLimits]
//! toolResultMaxChars = 40000
//! [[models.providers.sim.models]]
//! id = "small"
//! contextWindow = 8000                   # the model's window
//! contextTokens = 6000                   # optional: the usable budget, preferred when set
//! ```
//!
//! The guard runs before any provider request: below 32,000 tokens it warns, below 16,000 it
//! blocks with the reference's message, and a block moves on to the next model of the agent's
//! fallback list. With none left, the turn stops with that message.

use rampart_context::guards::window::{
    ContextWindowInfo, WindowNumbers, WindowSources, block_log_line, block_message,
    evaluate_default, resolve_context_window, warn_log_line,
};

use crate::config::Config;

/// A model setting that has the wrong shape. Names the file and the key and what is allowed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}: `{key}` {problem}")]
pub struct ModelsConfigError {
    /// Where: the config file with the key's `:line:column` when it was written there (the
    /// nearest enclosing table's when the key is missing), or "built-in defaults".
    pub file: String,
    /// The dotted key.
    pub key: String,
    /// What is wrong and what is allowed.
    pub problem: String,
}

/// One `[[models.providers.<p>.models]]` entry.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelEntry {
    /// The provider id (the table key).
    pub provider: String,
    /// The model id.
    pub id: String,
    /// `contextWindow`.
    pub context_window: Option<f64>,
    /// `contextTokens`.
    pub context_tokens: Option<f64>,
    /// `tokenizer`: how prompts to this model are counted (`estimate`, `o200k_base`, …).
    pub tokenizer: Option<String>,
}

/// `agents.defaults`, as far as this build uses it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AgentDefaults {
    /// `contextTokens`.
    pub context_tokens: Option<f64>,
    /// `model.primary`, as `provider/model`.
    pub primary: Option<String>,
    /// `model.fallbacks`, in order.
    pub fallbacks: Vec<String>,
    /// `contextLimits.toolResultMaxChars`.
    pub tool_result_max_chars: Option<u64>,
}

fn file_of(config: &Config) -> String {
    config
        .source_file
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "built-in defaults".to_string())
}

/// A models/agents error located at `key`, so an editor can jump to it.
pub(crate) fn err(config: &Config, key: &str, problem: impl Into<String>) -> ModelsConfigError {
    let file = match config.position_of(key) {
        Some((line, column)) if config.source_file.is_some() => {
            format!("{}:{line}:{column}", file_of(config))
        }
        _ => file_of(config),
    };
    ModelsConfigError {
        file,
        key: key.to_string(),
        problem: problem.into(),
    }
}

/// A value as a person reads it in an error: its type and, for scalars, the value.
pub(crate) fn describe(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => format!("string {s:?}"),
        toml::Value::Integer(i) => format!("integer {i}"),
        toml::Value::Float(f) => format!("float {f}"),
        toml::Value::Boolean(b) => format!("boolean {b}"),
        toml::Value::Datetime(_) => "a date".to_string(),
        toml::Value::Array(_) => "an array".to_string(),
        toml::Value::Table(_) => "a table".to_string(),
    }
}

pub(crate) fn number(
    config: &Config,
    key: &str,
    v: Option<&toml::Value>,
) -> Result<Option<f64>, ModelsConfigError> {
    match v {
        None => Ok(None),
        Some(toml::Value::Integer(i)) if *i > 0 => Ok(Some(*i as f64)),
        Some(toml::Value::Float(f)) if f.is_finite() && *f > 0.0 => Ok(Some(*f)),
        Some(other) => Err(err(
            config,
            key,
            format!(
                "must be a positive number of tokens, found {}",
                describe(other)
            ),
        )),
    }
}

/// Reads `agents.defaults`.
pub fn agent_defaults(config: &Config) -> Result<AgentDefaults, ModelsConfigError> {
    let Some(defaults) = config.agents.get("defaults") else {
        return Ok(AgentDefaults::default());
    };
    let Some(defaults) = defaults.as_table() else {
        return Err(err(config, "agents.defaults", "must be a table"));
    };
    let mut out = AgentDefaults {
        context_tokens: number(
            config,
            "agents.defaults.contextTokens",
            defaults.get("contextTokens"),
        )?,
        ..AgentDefaults::default()
    };
    match defaults.get("model") {
        None => {}
        Some(toml::Value::String(s)) => out.primary = Some(s.clone()),
        Some(toml::Value::Table(t)) => {
            out.primary = match t.get("primary") {
                None => None,
                Some(toml::Value::String(s)) => Some(s.clone()),
                Some(other) => {
                    return Err(err(
                        config,
                        "agents.defaults.model.primary",
                        format!(
                            "must be a string like \"provider/model\", found {}",
                            describe(other)
                        ),
                    ));
                }
            };
            if let Some(f) = t.get("fallbacks") {
                let list = f.as_array().ok_or_else(|| {
                    err(
                        config,
                        "agents.defaults.model.fallbacks",
                        "must be an array of \"provider/model\" strings",
                    )
                })?;
                for item in list {
                    let s = item.as_str().ok_or_else(|| {
                        err(
                            config,
                            "agents.defaults.model.fallbacks",
                            format!(
                                "must hold strings like \"provider/model\", found {}",
                                describe(item)
                            ),
                        )
                    })?;
                    out.fallbacks.push(s.to_string());
                }
            }
        }
        Some(other) => {
            return Err(err(
                config,
                "agents.defaults.model",
                format!(
                    "must be a string or a table with `primary` and `fallbacks`, found {}",
                    describe(other)
                ),
            ));
        }
    }
    if let Some(limits) = defaults.get("contextLimits") {
        let t = limits
            .as_table()
            .ok_or_else(|| err(config, "agents.defaults.contextLimits", "must be a table"))?;
        out.tool_result_max_chars = number(
            config,
            "agents.defaults.contextLimits.toolResultMaxChars",
            t.get("toolResultMaxChars"),
        )?
        .map(|n| n as u64);
    }
    Ok(out)
}

/// Provider ids compare without case and punctuation, so `z-ai` matches `z.ai`.
pub(crate) fn normalize_provider(p: &str) -> String {
    p.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// Finds `provider`/`model` under `models.providers`.
pub fn model_entry(
    config: &Config,
    provider: &str,
    model: &str,
) -> Result<Option<ModelEntry>, ModelsConfigError> {
    let Some(providers) = config.models.get("providers") else {
        return Ok(None);
    };
    let providers = providers
        .as_table()
        .ok_or_else(|| err(config, "models.providers", "must be a table of providers"))?;
    let wanted = normalize_provider(provider);
    for (name, table) in providers {
        if normalize_provider(name) != wanted {
            continue;
        }
        let key = format!("models.providers.{name}.models");
        let Some(models) = table.get("models") else {
            continue;
        };
        let models = models
            .as_array()
            .ok_or_else(|| err(config, &key, "must be an array of tables with `id`"))?;
        for (i, m) in models.iter().enumerate() {
            let key_i = format!("{key}[{i}]");
            let t = m
                .as_table()
                .ok_or_else(|| err(config, &key_i, "must be a table with `id`"))?;
            let id = t.get("id").and_then(|v| v.as_str()).ok_or_else(|| {
                err(
                    config,
                    &format!("{key_i}.id"),
                    "is required and must be a string",
                )
            })?;
            if id != model {
                continue;
            }
            return Ok(Some(ModelEntry {
                provider: name.clone(),
                id: id.to_string(),
                context_window: number(
                    config,
                    &format!("{key_i}.contextWindow"),
                    t.get("contextWindow"),
                )?,
                context_tokens: number(
                    config,
                    &format!("{key_i}.contextTokens"),
                    t.get("contextTokens"),
                )?,
                tokenizer: t
                    .get("tokenizer")
                    .and_then(|v| v.as_str())
                    .map(str::to_string),
            }));
        }
    }
    Ok(None)
}

/// Resolves the window of `provider/model`: the models config, then what the model itself
/// reports, then the default; an agent cap only lowers it.
pub fn resolve_window(
    config: &Config,
    provider: &str,
    model: &str,
    reported: WindowNumbers,
) -> Result<ContextWindowInfo, ModelsConfigError> {
    let entry = model_entry(config, provider, model)?;
    let defaults = agent_defaults(config)?;
    Ok(resolve_context_window(&WindowSources {
        models_config: WindowNumbers {
            context_tokens: entry.as_ref().and_then(|e| e.context_tokens),
            context_window: entry.as_ref().and_then(|e| e.context_window),
        },
        model: reported,
        default_tokens: None,
        agent_context_tokens: defaults.context_tokens,
    }))
}

/// A model the guard let through.
#[derive(Debug, Clone, PartialEq)]
pub struct GuardedModel {
    /// `provider/model`.
    pub name: String,
    /// Its resolved window.
    pub window: ContextWindowInfo,
    /// True when its window is below the warning threshold.
    pub warned: bool,
    /// The models skipped before it, with their block lines.
    pub skipped: Vec<String>,
}

/// Every model was blocked: the turn stops with the last block message, before any request.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct AllModelsBlocked {
    /// The reference's message for the last model tried.
    pub message: String,
    /// One log line per blocked model.
    pub blocked: Vec<String>,
}

/// Why the guard could not run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GuardError {
    /// Every candidate was blocked.
    #[error(transparent)]
    Blocked(#[from] AllModelsBlocked),
    /// The configuration is malformed.
    #[error(transparent)]
    Config(#[from] ModelsConfigError),
}

/// Layer 1: walks `candidates` (`provider/model`, primary first, then fallbacks) and returns the
/// first one whose window is not blocked. `reported` gives a model's own window metadata.
pub fn guard_models(
    config: &Config,
    candidates: &[String],
    reported: impl Fn(&str, &str) -> WindowNumbers,
) -> Result<GuardedModel, GuardError> {
    let mut blocked = Vec::new();
    let mut last_message = block_message(0);
    for name in candidates {
        let (provider, model) = name.split_once('/').unwrap_or(("", name.as_str()));
        let window = resolve_window(config, provider, model, reported(provider, model))?;
        let verdict = evaluate_default(&window);
        if verdict.block {
            let line = block_log_line(provider, model, &window);
            tracing::warn!(
                provider,
                model,
                tokens = window.tokens,
                source = window.source.as_str(),
                "{line}"
            );
            blocked.push(line);
            last_message = block_message(window.tokens);
            continue;
        }
        if verdict.warn {
            tracing::warn!(
                provider,
                model,
                tokens = window.tokens,
                source = window.source.as_str(),
                "{}",
                warn_log_line(provider, model, &window)
            );
        }
        return Ok(GuardedModel {
            name: name.clone(),
            window,
            warned: verdict.warn,
            skipped: blocked,
        });
    }
    Err(AllModelsBlocked {
        message: last_message,
        blocked,
    }
    .into())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use rampart_context::guards::window::WindowSource;

    fn cfg(text: &str) -> Config {
        crate::config::parse(text, std::path::Path::new("plugins.toml")).unwrap()
    }

    fn none(_: &str, _: &str) -> WindowNumbers {
        WindowNumbers::default()
    }

    #[test]
    fn window_sources_follow_the_reference_order() {
        let c = cfg(
            "[[models.providers.openai.models]]\nid = \"m\"\ncontextTokens = 12000\ncontextWindow = 1050000\n",
        );
        let w = resolve_window(&c, "openai", "m", none("", "")).unwrap();
        assert_eq!((w.tokens, w.source), (12_000, WindowSource::ModelsConfig));
        // Provider aliases match.
        let c = cfg("[[models.providers.\"z.ai\".models]]\nid = \"g\"\ncontextWindow = 64000\n");
        assert_eq!(
            resolve_window(&c, "z-ai", "g", none("", ""))
                .unwrap()
                .tokens,
            64_000
        );
        // The agent cap only lowers.
        let c = cfg("[agents.defaults]\ncontextTokens = 20000\n");
        let reported = WindowNumbers {
            context_window: Some(200_000.0),
            context_tokens: None,
        };
        let w = resolve_window(&c, "p", "m", reported).unwrap();
        assert_eq!(
            (w.tokens, w.source),
            (20_000, WindowSource::AgentContextTokens)
        );
        let c = cfg("[agents.defaults]\ncontextTokens = 128000\n");
        let reported = WindowNumbers {
            context_window: Some(64_000.0),
            context_tokens: None,
        };
        let w = resolve_window(&c, "p", "m", reported).unwrap();
        assert_eq!((w.tokens, w.source), (64_000, WindowSource::Model));
        let w = resolve_window(&Config::default(), "p", "m", none("", "")).unwrap();
        assert_eq!((w.tokens, w.source), (200_000, WindowSource::Default));
    }

    #[test]
    fn a_blocked_model_fails_over_to_the_next() {
        let c = cfg(concat!(
            "[agents.defaults.model]\nprimary = \"sim/small\"\nfallbacks = [\"sim/large\"]\n",
            "[[models.providers.sim.models]]\nid = \"small\"\ncontextWindow = 8000\n",
            "[[models.providers.sim.models]]\nid = \"large\"\ncontextWindow = 64000\n",
        ));
        let d = agent_defaults(&c).unwrap();
        let mut candidates = vec![d.primary.clone().unwrap()];
        candidates.extend(d.fallbacks.clone());
        let chosen = guard_models(&c, &candidates, none).unwrap();
        assert_eq!(chosen.name, "sim/large");
        assert_eq!(chosen.skipped.len(), 1);
        assert!(
            chosen.skipped[0].contains("ctx=8000"),
            "{:?}",
            chosen.skipped
        );
        // Without the fallback the turn stops with the reference's message.
        let err = guard_models(&c, &candidates[..1], none).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Model context window too small (8000 tokens). Minimum is 16000."
        );
    }

    #[test]
    fn a_small_window_warns_but_runs() {
        let c = cfg("[[models.providers.sim.models]]\nid = \"m\"\ncontextWindow = 24000\n");
        let chosen = guard_models(&c, &["sim/m".to_string()], none).unwrap();
        assert!(chosen.warned);
    }

    #[test]
    fn malformed_settings_name_the_key() {
        let c = cfg("[agents.defaults]\ncontextTokens = \"lots\"\n");
        let e = agent_defaults(&c).unwrap_err();
        assert!(
            e.to_string().contains("agents.defaults.contextTokens")
                && e.to_string().contains("positive number"),
            "{e}"
        );
        let c = cfg("[[models.providers.sim.models]]\ncontextWindow = 5\n");
        let e = model_entry(&c, "sim", "x").unwrap_err();
        assert!(
            e.to_string().contains("models.providers.sim.models[0].id"),
            "{e}"
        );
    }

    #[test]
    fn errors_point_at_the_line_of_the_key_or_its_table() {
        let c = cfg("# models\n[agents.defaults]\ncontextTokens = \"lots\"\n");
        let e = agent_defaults(&c).unwrap_err();
        assert!(e.to_string().starts_with("plugins.toml:3:17: "), "{e}");
        // A missing key points at its table entry.
        let c = cfg("\n\n[[models.providers.sim.models]]\ncontextWindow = 5\n");
        let e = model_entry(&c, "sim", "x").unwrap_err();
        assert!(e.to_string().starts_with("plugins.toml:3:"), "{e}");
    }
}
