//! The replay's model and where its session lives.
//!
//! The replay's model is the embedded simulator, set in the typed configuration as if the user
//! had written:
//!
//! ```toml
//! [[models.providers.sim.models]]
//! id = "replay"              # or the --model name
//! contextWindow = 32000      # --window
//! tokenizer = "estimate"     # what --model implies, or --tokenizer
//! [models.providers.sim]
//! overflowWording = "openai" # what --model implies, or --overflow-wording
//! [agents.defaults.model]
//! primary = "sim/replay"     # no fallbacks: the replay measures one window
//! ```
//!
//! `agents.defaults.contextTokens` is removed (the window is `--window`, whatever the agent cap
//! says) and so is `agents.defaults.compaction.model` unless `--compaction-model` names one: a
//! replay needs no network and no keys, and compaction uses the engine's embedded summariser.
//!
//! `--model` mapping ([`ModelProfile::from_flags`]), by the model id (any `provider/` prefix
//! dropped, case ignored):
//!
//! | model id | tokenizer | overflow wording | the simulator speaks |
//! |---|---|---|---|
//! | `gpt-4o*`, `gpt-4.1*`, `gpt-4.5*`, `gpt-5*`, `gpt-oss*`, `o1*`, `o3*`, `o4*`, `chatgpt-4o*` | `o200k_base` | `openai` | `openai-completions` |
//! | `gpt-4*`, `gpt-3.5*`, `gpt-35*` | `cl100k_base` | `openai` | `openai-completions` |
//! | other `gpt-*`, `chatgpt*`, `text-*` | `estimate` | `openai` | `openai-completions` |
//! | `claude-*` (and `anthropic/…`) | `estimate` (Claude's tokenizer is not public) | `anthropic` | `anthropic-messages` |
//! | `gemini-*` | `estimate` | `gemini` | (generic: no Gemini adapter yet) |
//! | Bedrock ids (`anthropic.…`, `amazon.…`, `meta.…`, `mistral.…`, `cohere.…`, `ai21.…`) | `estimate` | `bedrock` | `anthropic-messages` for `anthropic.…`, else generic |
//! | `llama*`, `qwen*`, `mistral*`, `mixtral*`, `gemma*`, `phi*`, `deepseek*` | `estimate` | `ollama` | `openai-completions` |
//! | anything else | `estimate` | the config's, else `anthropic` | the config's `speaks`, else generic |
//!
//! "Speaks" is `models.providers.sim.speaks`: the replay runs that API's hygiene (turn
//! validation, tool-id grammar, signed thinking) and `--requests-out` records, beside the pi
//! messages, the `wire` body that API's adapter would send.

use std::path::{Path, PathBuf};

use rampart_context::tokens::CountMode;
use rampart_sessions::store::{SessionStore, StoreError, normalize_key};

use crate::config::models::SIM_PROVIDER_ID;
use crate::config::{ApiKind, Config, ModelEntry, ModelName};
use crate::providers::sim::OverflowWording;
use crate::scratch::ScratchDir;

/// The window when `--window` is not given: OpenClaw's default context size.
pub const DEFAULT_WINDOW: u64 = rampart_context::guards::window::DEFAULT_CONTEXT_TOKENS;

/// The simulated model's id when `--model` is not given.
pub const DEFAULT_MODEL_ID: &str = "replay";

/// Why a replay could not be set up. Each names the flag or setting to change.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A flag's value is not allowed.
    #[error("{flag}: {problem}")]
    BadFlag {
        /// The flag, as typed (`--tokenizer`).
        flag: &'static str,
        /// What is wrong and what is allowed.
        problem: String,
    },
    /// The config holds something the replay cannot work with.
    #[error("{file}: {problem}")]
    Config {
        /// The config file (or "built-in defaults").
        file: String,
        /// What is wrong and what to do.
        problem: String,
    },
    /// The replay's directory could not be made.
    #[error("cannot create the replay directory `{}`: {source}; check free space and permissions, or pass --sessions-dir DIR", path.display())]
    Dir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The sessions registry could not be opened or written.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The simulated model a replay runs against: its id, tokenizer and overflow wording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelProfile {
    /// The simulator's model id (`replay`, or the `--model` id).
    pub id: String,
    /// How prompts are counted.
    pub tokenizer: CountMode,
    /// Whose overflow text the simulator answers with; `None` keeps the config's (default
    /// `anthropic`).
    pub wording: Option<OverflowWording>,
    /// `--model`, when it names no family the mapping knows and the tokenizer or the wording
    /// was not given by flag: the replay then says what it fell back to.
    pub unrecognised: Option<String>,
    /// The API the simulator stands in for (`models.providers.sim.speaks`): the family's
    /// hygiene runs and `--requests-out` records the body its adapter would send.
    pub speaks: Option<ApiKind>,
}

impl ModelProfile {
    /// The profile for `--model`, `--tokenizer` and `--overflow-wording` (the last two override
    /// what the model implies). See the module docs for the mapping.
    pub fn from_flags(
        model: Option<&str>,
        tokenizer: Option<&str>,
        wording: Option<&str>,
    ) -> Result<Self, SetupError> {
        let id = model
            .map(|m| m.rsplit('/').next().unwrap_or(m).trim().to_string())
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| DEFAULT_MODEL_ID.to_string());
        let mut profile = match model {
            Some(m) => Self::for_model(m, &id),
            None => Self {
                id: id.clone(),
                tokenizer: CountMode::Estimate,
                wording: None,
                unrecognised: None,
                speaks: None,
            },
        };
        if profile.unrecognised.is_some() && tokenizer.is_some() && wording.is_some() {
            profile.unrecognised = None;
        }
        if let Some(t) = tokenizer {
            profile.tokenizer = t.parse().map_err(|e| SetupError::BadFlag {
                flag: "--tokenizer",
                problem: format!("{e}"),
            })?;
        }
        if let Some(w) = wording {
            profile.wording = Some(w.parse().map_err(|_| SetupError::BadFlag {
                flag: "--overflow-wording",
                problem: format!(
                    "unknown wording {w:?}; expected one of {}",
                    OverflowWording::allowed()
                ),
            })?);
        }
        Ok(profile)
    }

    fn for_model(full: &str, id: &str) -> Self {
        let lower = id.to_ascii_lowercase();
        let provider = full
            .split_once('/')
            .map(|(p, _)| p.to_ascii_lowercase())
            .unwrap_or_default();
        let starts = |prefixes: &[&str]| prefixes.iter().any(|p| lower.starts_with(p));
        let tokenizer = CountMode::for_model(id);
        let wording = if starts(&[
            "anthropic.",
            "amazon.",
            "meta.",
            "mistral.",
            "cohere.",
            "ai21.",
        ]) {
            Some(OverflowWording::Bedrock)
        } else if starts(&["claude"]) || provider == "anthropic" {
            Some(OverflowWording::Anthropic)
        } else if starts(&["gpt", "chatgpt", "text-", "o1", "o3", "o4"]) || provider == "openai" {
            Some(OverflowWording::OpenAi)
        } else if starts(&["gemini"]) || provider == "google" || provider == "gemini" {
            Some(OverflowWording::Gemini)
        } else if starts(&[
            "llama", "qwen", "mistral", "mixtral", "gemma", "phi", "deepseek",
        ]) || provider == "ollama"
        {
            Some(OverflowWording::Ollama)
        } else {
            None
        };
        let recognised = wording.is_some() || tokenizer != CountMode::Estimate;
        let speaks = match wording {
            Some(OverflowWording::Anthropic) => Some(ApiKind::AnthropicMessages),
            Some(OverflowWording::Bedrock) if lower.starts_with("anthropic.") => {
                Some(ApiKind::AnthropicMessages)
            }
            // Local models are served through OpenAI-compatible servers (llama.cpp, vLLM,
            // Ollama's /v1).
            Some(OverflowWording::OpenAi | OverflowWording::Ollama) => {
                Some(ApiKind::OpenAiCompletions)
            }
            _ => None,
        };
        Self {
            id: id.to_string(),
            tokenizer,
            wording,
            unrecognised: (!recognised).then(|| full.to_string()),
            speaks,
        }
    }

    /// The warning for a `--model` the mapping does not know, naming what the replay counts
    /// with and answers overflows in (`wording`: the simulator's, after the config).
    pub fn fallback_note(&self, wording: &str) -> Option<String> {
        self.unrecognised.as_ref().map(|model| {
            format!(
                "--model {model}: not a model family this replay knows (see `rampart replay \
                 --help`); prompts are counted with the `{}` tokenizer and overflows are \
                 answered in `{wording}` wording. Pass --tokenizer and --overflow-wording to \
                 choose",
                self.tokenizer.name()
            )
        })
    }

    /// `sim/<id>`, the name requests and rows carry.
    pub fn model_name(&self) -> ModelName {
        ModelName::new(SIM_PROVIDER_ID, self.id.clone())
    }
}

fn file_of(config: &Config) -> String {
    config
        .source_file
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "built-in defaults".to_string())
}

/// The config a replay runs with: `config` with the simulated model of `profile` at `window`
/// as the only model, `engine` (when given) in the `contextEngine` slot, and compaction
/// summaries from `compaction_model` or else the engine's embedded summariser.
pub fn replay_config(
    mut config: Config,
    profile: &ModelProfile,
    window: u64,
    engine: Option<&str>,
    compaction_model: Option<&str>,
) -> Result<Config, SetupError> {
    if window == 0 {
        return Err(SetupError::BadFlag {
            flag: "--window",
            problem: "must be a positive number of tokens".to_string(),
        });
    }
    if let Some(id) = engine {
        let id = id.trim();
        if !crate::config::is_valid_engine_id(id) {
            return Err(SetupError::BadFlag {
                flag: "--engine",
                problem: format!(
                    "{id:?} is not an engine id (letters, digits, `-` and `_`); see `rampart \
                     engines list`"
                ),
            });
        }
        config.context_engine = id.to_string();
        config.context_engine_line = None;
    }
    let compaction_model = compaction_model
        .map(|name| {
            name.parse::<ModelName>().map_err(|e| SetupError::BadFlag {
                flag: "--compaction-model",
                problem: e.to_string(),
            })
        })
        .transpose()?;
    let file = file_of(&config);

    let mut sim = config
        .models
        .provider(SIM_PROVIDER_ID)
        .cloned()
        .ok_or_else(|| SetupError::Config {
            file: file.clone(),
            problem: "no `sim` provider".to_string(),
        })?;
    if sim.api != ApiKind::Sim {
        return Err(SetupError::Config {
            file,
            problem: format!(
                "`models.providers.sim.api` is {:?}, but a replay needs the embedded simulator \
                 under the id `sim`; remove that `api` or rename the provider",
                sim.api
            ),
        });
    }
    if let Some(w) = profile.wording {
        sim.overflow_wording = Some(w);
    }
    if profile.speaks.is_some() {
        sim.speaks = profile.speaks;
    }
    sim.models.retain(|m| m.id != profile.id);
    sim.models.push(ModelEntry {
        provider: sim.id.clone(),
        id: profile.id.clone(),
        context_window: Some(window),
        context_tokens: None,
        tokenizer: Some(profile.tokenizer),
        max_tokens: None,
    });
    config.models.insert(sim);

    let defaults = &mut config.agent_defaults;
    defaults.context_tokens = None;
    defaults.primary = Some(profile.model_name());
    defaults.fallbacks.clear();
    defaults.compaction.model = compaction_model.map(|m| m.to_string());
    Ok(config)
}

/// The directory a replay's session and blobs go into, and its registry.
#[derive(Debug)]
pub struct ReplayDir {
    /// The directory.
    pub dir: PathBuf,
    /// Its `sessions.json`.
    pub store: SessionStore,
    /// The temporary directory the replay made (removed at the end, on a signal, or by the
    /// next start's sweep if the process dies; see [`crate::scratch`]); `None` for
    /// `--sessions-dir`.
    scratch: Option<ScratchDir>,
}

impl ReplayDir {
    /// `sessions_dir` when given (created if needed, always kept), else a fresh temporary
    /// directory `rampart-replay-<pid>-…`, removed at the end unless `keep`.
    pub fn prepare(sessions_dir: Option<&Path>, keep: bool) -> Result<Self, SetupError> {
        let (dir, scratch) = match sessions_dir {
            Some(d) => (d.to_path_buf(), None),
            None => {
                let scratch = ScratchDir::create("replay").map_err(|source| SetupError::Dir {
                    path: std::env::temp_dir(),
                    source,
                })?;
                (scratch.path().to_path_buf(), Some(scratch))
            }
        };
        let store = SessionStore::open(&dir)?;
        // A directory the user keeps is theirs from the start: not removed if the replay is
        // stopped, nor swept later.
        let scratch = match scratch {
            Some(s) if keep => {
                s.keep();
                None
            }
            other => other,
        };
        Ok(Self {
            dir,
            store,
            scratch,
        })
    }

    /// A registry key for the replay of `input` not yet taken: `replay-<stem>`, then `-2`, ….
    pub fn free_key(&self, input: &Path) -> Result<String, SetupError> {
        let stem = input
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "session".into());
        let base = normalize_key(&format!("replay-{stem}"));
        let mut key = base.clone();
        let mut n = 1;
        while self.store.get(&key)?.is_some() {
            n += 1;
            key = format!("{base}-{n}");
        }
        Ok(key)
    }

    /// Whether the directory outlives the replay (`--sessions-dir`, or `--keep`).
    pub fn kept(&self) -> bool {
        self.scratch.is_none()
    }

    /// Ends the replay's use of the directory: a temporary one is removed unless kept.
    /// Returns the directory when it stays.
    pub fn finish(mut self) -> Option<PathBuf> {
        match self.scratch.take() {
            Some(scratch) => {
                drop(scratch);
                None
            }
            None => Some(self.dir.clone()),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use rampart_context::tokens::Encoding;

    #[test]
    fn models_map_to_their_tokenizer_and_wording() {
        let p = |m: &str| ModelProfile::from_flags(Some(m), None, None).unwrap();
        assert_eq!(p("gpt-4o").tokenizer, CountMode::Exact(Encoding::O200kBase));
        assert_eq!(p("gpt-4o").wording, Some(OverflowWording::OpenAi));
        assert_eq!(
            p("openai/gpt-4").tokenizer,
            CountMode::Exact(Encoding::Cl100kBase)
        );
        assert_eq!(p("openai/gpt-4").id, "gpt-4");
        assert_eq!(p("claude-sonnet-4-5").tokenizer, CountMode::Estimate);
        assert_eq!(
            p("claude-sonnet-4-5").wording,
            Some(OverflowWording::Anthropic)
        );
        assert_eq!(p("gemini-2.5-pro").wording, Some(OverflowWording::Gemini));
        assert_eq!(p("llama3.1:8b").wording, Some(OverflowWording::Ollama));
        assert_eq!(
            p("anthropic.claude-3-5-sonnet").wording,
            Some(OverflowWording::Bedrock)
        );
        assert_eq!(p("mystery").wording, None);
        assert_eq!(p("mystery").unrecognised.as_deref(), Some("mystery"));
        assert_eq!(p("gpt-4o").unrecognised, None);
        let note = p("mystery").fallback_note("anthropic").unwrap();
        assert!(
            note.contains("`estimate` tokenizer") && note.contains("`anthropic` wording"),
            "{note}"
        );
        let chosen = ModelProfile::from_flags(Some("mystery"), Some("estimate"), Some("openai"));
        assert_eq!(
            chosen.unwrap().unrecognised,
            None,
            "both chosen by flag: nothing to warn"
        );
        let none = ModelProfile::from_flags(None, None, None).unwrap();
        assert_eq!(none.id, "replay");
        assert_eq!(none.tokenizer, CountMode::Estimate);
        let over = ModelProfile::from_flags(Some("gpt-4o"), Some("estimate"), Some("gemini"));
        let over = over.unwrap();
        assert_eq!(over.tokenizer, CountMode::Estimate);
        assert_eq!(over.wording, Some(OverflowWording::Gemini));
        let bad = ModelProfile::from_flags(None, Some("exact"), None).unwrap_err();
        assert!(bad.to_string().starts_with("--tokenizer:"), "{bad}");
    }

    #[test]
    fn the_replay_config_names_one_simulated_model_at_the_window() {
        let text = r#"
[agents.defaults]
contextTokens = 50000
[agents.defaults.model]
primary = "anthropic/claude"
fallbacks = ["openai/gpt-4o"]
[agents.defaults.compaction]
model = "anthropic/claude"
"#;
        let config = crate::config::parse(text, Path::new("plugins.toml")).unwrap();
        let profile = ModelProfile::from_flags(Some("gpt-4o"), None, None).unwrap();
        let config = replay_config(config, &profile, 32_000, Some("window"), None).unwrap();
        assert_eq!(config.context_engine, "window");
        let defaults = &config.agent_defaults;
        assert_eq!(defaults.primary, Some("sim/gpt-4o".parse().unwrap()));
        assert!(defaults.fallbacks.is_empty());
        assert_eq!(defaults.context_tokens, None);
        let entry = config.models.model(&"sim/gpt-4o".parse().unwrap()).unwrap();
        assert_eq!(entry.context_window, Some(32_000));
        assert_eq!(entry.tokenizer.map(|t| t.name()), Some("o200k_base"));
        let providers = crate::providers::registry::Providers::from_config(&config).unwrap();
        let sim = providers.sim("sim").unwrap();
        assert_eq!(sim.window("gpt-4o"), Some(32_000));
        assert_eq!(sim.wording(), OverflowWording::OpenAi);
        assert!(
            config.agent_defaults.compaction.model.is_none(),
            "a replay summarises offline unless asked"
        );
    }
}
