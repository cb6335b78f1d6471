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

use crate::config::{Config, ModelName};

/// Resolves the window of `provider/model`: the models config, then what the model itself
/// reports, then the default; an agent cap only lowers it.
pub fn resolve_window(
    config: &Config,
    name: &ModelName,
    reported: WindowNumbers,
) -> ContextWindowInfo {
    let entry = config.models.model(name);
    // The resolver takes raw numbers, as any source may give (its reference cases include
    // `-1` and `1e400`); the configuration's are already whole positive tokens.
    let raw = |n: Option<u64>| n.map(|n| n as f64);
    resolve_context_window(&WindowSources {
        models_config: WindowNumbers {
            context_tokens: raw(entry.and_then(|e| e.context_tokens)),
            context_window: raw(entry.and_then(|e| e.context_window)),
        },
        model: reported,
        default_tokens: None,
        agent_context_tokens: raw(config.agent_defaults.context_tokens),
    })
}

/// A model the guard let through.
#[derive(Debug, Clone, PartialEq)]
pub struct GuardedModel {
    /// The model.
    pub name: ModelName,
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

/// Layer 1: walks `candidates` (primary first, then fallbacks) and returns the first one whose
/// window is not blocked. `reported` gives what a provider itself says of a model's window
/// (none of ours does; the configured numbers are the models-config source, read once).
pub fn guard_models(
    config: &Config,
    candidates: &[ModelName],
    reported: impl Fn(&ModelName) -> WindowNumbers,
) -> Result<GuardedModel, AllModelsBlocked> {
    let mut blocked = Vec::new();
    let mut last_message = block_message(0);
    for name in candidates {
        let (provider, model) = (name.provider.as_str(), name.model.as_str());
        let window = resolve_window(config, name, reported(name));
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
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "models_tests.rs"]
mod tests;
