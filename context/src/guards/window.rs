//! Layer 1: the context-window guard (reference §3).
//!
//! Why: a model with a tiny window cannot hold a system prompt, tools and a conversation. Every
//! later layer (tool-result caps, compaction, pruning) would thrash against it, so such a model
//! is refused before any request, with an error a person can act on; a small but usable window
//! only earns a warning.
//!
//! The window comes from several places (models config, the model's own metadata, a default,
//! an agent-wide cap); [`resolve_context_window`] picks one with the reference's priorities and
//! says which, so the log line can tell a user which setting to change.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Below this many tokens a model is refused.
pub const CONTEXT_WINDOW_HARD_MIN_TOKENS: u64 = 16_000;

/// Below this many tokens a model is used with a warning.
pub const CONTEXT_WINDOW_WARN_BELOW_TOKENS: u64 = 32_000;

/// The window assumed when nothing says otherwise; the usual window of current models.
pub const DEFAULT_CONTEXT_TOKENS: u64 = 200_000;

/// Which setting the window came from, so logs and errors can name what to change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum WindowSource {
    /// `agents.defaults.contextTokens`, an agent-wide cap below the model's window.
    AgentContextTokens,
    /// `models.providers.<p>.models[]` in the configuration.
    ModelsConfig,
    /// The model's own metadata.
    Model,
    /// [`DEFAULT_CONTEXT_TOKENS`] or the caller's default.
    Default,
}

impl WindowSource {
    /// The reference's spelling (`agentContextTokens`, `modelsConfig`, `model`, `default`), used
    /// in log lines.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AgentContextTokens => "agentContextTokens",
            Self::ModelsConfig => "modelsConfig",
            Self::Model => "model",
            Self::Default => "default",
        }
    }
}

impl fmt::Display for WindowSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The two window numbers a model entry may carry. Raw JSON numbers: a configuration can say
/// `-1`, `0`, `1e400` or `12000.7`, and only positive finite values count (floored).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WindowNumbers {
    /// `contextTokens`: the usable budget; preferred over `context_window`.
    #[serde(default)]
    pub context_tokens: Option<f64>,
    /// `contextWindow`: the model's full window.
    #[serde(default)]
    pub context_window: Option<f64>,
}

/// Everything the window may be resolved from. The host looks up the model entry (normalising
/// provider aliases such as `z-ai` for `z.ai`) and fills this in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WindowSources {
    /// The model's entry under `models.providers.<p>.models`.
    #[serde(default)]
    pub models_config: WindowNumbers,
    /// The model's own metadata.
    #[serde(default)]
    pub model: WindowNumbers,
    /// The default; [`DEFAULT_CONTEXT_TOKENS`] when absent or not a positive number.
    #[serde(default)]
    pub default_tokens: Option<f64>,
    /// `agents.defaults.contextTokens`: a cap that can only lower the window.
    #[serde(default)]
    pub agent_context_tokens: Option<f64>,
}

/// The resolved window and where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextWindowInfo {
    /// The window, in tokens.
    pub tokens: u64,
    /// The setting it came from.
    pub source: WindowSource,
}

/// A positive finite number, floored; anything else does not count.
fn positive(value: Option<f64>) -> Option<u64> {
    let v = value?;
    if !v.is_finite() || v <= 0.0 {
        return None;
    }
    // `as` saturates at u64::MAX for huge finite values, which is the right reading.
    let floored = v.floor() as u64;
    (floored > 0).then_some(floored)
}

fn numbers(n: &WindowNumbers) -> Option<u64> {
    positive(n.context_tokens).or_else(|| positive(n.context_window))
}

/// Resolves the window: the models-config entry (`contextTokens`, then `contextWindow`), else the
/// model's metadata (same order), else the default; then the agent cap if it is below that.
pub fn resolve_context_window(sources: &WindowSources) -> ContextWindowInfo {
    let base = if let Some(tokens) = numbers(&sources.models_config) {
        ContextWindowInfo {
            tokens,
            source: WindowSource::ModelsConfig,
        }
    } else if let Some(tokens) = numbers(&sources.model) {
        ContextWindowInfo {
            tokens,
            source: WindowSource::Model,
        }
    } else {
        ContextWindowInfo {
            tokens: positive(sources.default_tokens).unwrap_or(DEFAULT_CONTEXT_TOKENS),
            source: WindowSource::Default,
        }
    };
    match positive(sources.agent_context_tokens) {
        Some(cap) if cap < base.tokens => ContextWindowInfo {
            tokens: cap,
            source: WindowSource::AgentContextTokens,
        },
        _ => base,
    }
}

/// What to do about a window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuardVerdict {
    /// Log [`warn_log_line`] and go on.
    pub warn: bool,
    /// Refuse the model with [`block_message`] before any request.
    pub block: bool,
}

/// `warn = 0 < tokens < warn_below`, `block = 0 < tokens < hard_min`. A window of 0 means
/// "unknown" and is neither.
pub fn evaluate(info: &ContextWindowInfo, warn_below: u64, hard_min: u64) -> GuardVerdict {
    GuardVerdict {
        warn: info.tokens > 0 && info.tokens < warn_below,
        block: info.tokens > 0 && info.tokens < hard_min,
    }
}

/// [`evaluate`] with the standard thresholds (warn below 32,000, block below 16,000).
pub fn evaluate_default(info: &ContextWindowInfo) -> GuardVerdict {
    evaluate(
        info,
        CONTEXT_WINDOW_WARN_BELOW_TOKENS,
        CONTEXT_WINDOW_HARD_MIN_TOKENS,
    )
}

/// The error a user sees for a blocked model: `Model context window too small (<n> tokens).
/// Minimum is 16000.` Exact, because it is the reference's user-visible text.
pub fn block_message(tokens: u64) -> String {
    format!(
        "Model context window too small ({tokens} tokens). Minimum is {CONTEXT_WINDOW_HARD_MIN_TOKENS}."
    )
}

/// The log line for a blocked model, naming provider, model, window and its source.
pub fn block_log_line(provider: &str, model: &str, info: &ContextWindowInfo) -> String {
    format!(
        "blocked model (context window too small): {provider}/{model} ctx={} (min={CONTEXT_WINDOW_HARD_MIN_TOKENS}) source={}",
        info.tokens, info.source
    )
}

/// The log line for a small (warned) window.
pub fn warn_log_line(provider: &str, model: &str, info: &ContextWindowInfo) -> String {
    format!(
        "low context window: {provider}/{model} ctx={} (warn<{CONTEXT_WINDOW_WARN_BELOW_TOKENS}) source={}",
        info.tokens, info.source
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(window: f64) -> WindowSources {
        WindowSources {
            model: WindowNumbers {
                context_tokens: None,
                context_window: Some(window),
            },
            ..WindowSources::default()
        }
    }

    // Reference §13 item 1.
    #[test]
    fn model_8000_warns_and_blocks() {
        let info = resolve_context_window(&model(8000.0));
        assert_eq!(
            info,
            ContextWindowInfo {
                tokens: 8000,
                source: WindowSource::Model
            }
        );
        assert_eq!(
            evaluate_default(&info),
            GuardVerdict {
                warn: true,
                block: true
            }
        );
    }

    #[test]
    fn model_24000_warns_only() {
        let v = evaluate_default(&resolve_context_window(&model(24_000.0)));
        assert_eq!(
            v,
            GuardVerdict {
                warn: true,
                block: false
            }
        );
    }

    #[test]
    fn model_64000_is_fine() {
        let v = evaluate_default(&resolve_context_window(&model(64_000.0)));
        assert_eq!(v, GuardVerdict::default());
    }

    #[test]
    fn agent_cap_below_model_wins() {
        let mut s = model(200_000.0);
        s.agent_context_tokens = Some(20_000.0);
        let info = resolve_context_window(&s);
        assert_eq!(info.source, WindowSource::AgentContextTokens);
        assert_eq!(info.tokens, 20_000);
        assert_eq!(
            evaluate_default(&info),
            GuardVerdict {
                warn: true,
                block: false
            }
        );
    }

    #[test]
    fn agent_cap_above_model_is_ignored() {
        let mut s = model(64_000.0);
        s.agent_context_tokens = Some(128_000.0);
        let info = resolve_context_window(&s);
        assert_eq!(
            info,
            ContextWindowInfo {
                tokens: 64_000,
                source: WindowSource::Model
            }
        );
    }

    #[test]
    fn models_config_context_tokens_first() {
        let s = WindowSources {
            models_config: WindowNumbers {
                context_tokens: Some(12_000.0),
                context_window: Some(1_050_000.0),
            },
            ..WindowSources::default()
        };
        let info = resolve_context_window(&s);
        assert_eq!(
            info,
            ContextWindowInfo {
                tokens: 12_000,
                source: WindowSource::ModelsConfig
            }
        );
    }

    #[test]
    fn nothing_gives_default() {
        let info = resolve_context_window(&WindowSources::default());
        assert_eq!(info.source, WindowSource::Default);
        assert_eq!(info.tokens, DEFAULT_CONTEXT_TOKENS);
        assert!(!evaluate_default(&info).warn);
    }

    #[test]
    fn custom_thresholds() {
        let info = ContextWindowInfo {
            tokens: 10_000,
            source: WindowSource::Model,
        };
        assert_eq!(
            evaluate(&info, 12_000, 9_000),
            GuardVerdict {
                warn: true,
                block: false
            }
        );
    }

    // Edge cases of "positive finite, floored".
    #[test]
    fn only_positive_finite_numbers_count() {
        for bad in [0.0, -5.0, f64::NAN, f64::INFINITY, 0.5] {
            let s = WindowSources {
                models_config: WindowNumbers {
                    context_tokens: Some(bad),
                    context_window: None,
                },
                model: WindowNumbers {
                    context_tokens: None,
                    context_window: Some(50_000.9),
                },
                agent_context_tokens: Some(bad),
                default_tokens: Some(bad),
            };
            let info = resolve_context_window(&s);
            assert_eq!(
                info,
                ContextWindowInfo {
                    tokens: 50_000,
                    source: WindowSource::Model
                },
                "{bad}"
            );
        }
        let s = WindowSources {
            default_tokens: Some(-1.0),
            ..WindowSources::default()
        };
        assert_eq!(resolve_context_window(&s).tokens, DEFAULT_CONTEXT_TOKENS);
    }

    #[test]
    fn zero_window_is_unknown_not_blocked() {
        let info = ContextWindowInfo {
            tokens: 0,
            source: WindowSource::Default,
        };
        assert_eq!(evaluate_default(&info), GuardVerdict::default());
    }

    #[test]
    fn texts() {
        assert_eq!(
            block_message(8000),
            "Model context window too small (8000 tokens). Minimum is 16000."
        );
        let info = ContextWindowInfo {
            tokens: 8000,
            source: WindowSource::Model,
        };
        assert_eq!(
            block_log_line("ollama", "tiny", &info),
            "blocked model (context window too small): ollama/tiny ctx=8000 (min=16000) source=model"
        );
        assert_eq!(
            warn_log_line("ollama", "tiny", &info),
            "low context window: ollama/tiny ctx=8000 (warn<32000) source=model"
        );
    }
}
