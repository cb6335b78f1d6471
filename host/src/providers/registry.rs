//! Providers from the configuration: `[models.providers.<id>]` tables, checked and built.
//!
//! Keys follow OpenClaw's spelling, so an OpenClaw user recognises them:
//! ```toml
//! [models.providers.local-llama]
//! api = "openai-completions"        # or "openai"; "anthropic-messages" / "anthropic"; "sim"
//! baseUrl = "http://127.0.0.1:8080/v1"
//! apiKeyEnv = "LLAMA_KEY"           # the variable holding the key; never the key itself
//! timeoutSeconds = 120              # one attempt's limit
//! maxRetries = 3                    # retries of 429 and 5xx answers
//! retryBaseMs = 500                 # the first back-off, doubled per retry
//! [[models.providers.local-llama.models]]
//! id = "qwen"
//! contextWindow = 32768
//! tokenizer = "estimate"
//! ```
//!
//! Why strict: a misspelt key (`baseURL`, `contextWindows`) would otherwise be ignored and the
//! host would run with a default the user believes they changed. Every unknown key, wrong type
//! and missing `api` is an error that names the file, the full dotted key and what is allowed.
//!
//! Three ids are known without configuration: `sim` (the embedded simulator, always present,
//! with a model `default` of 200,000 tokens), `openai` and `anthropic` (their public endpoints
//! and the usual `OPENAI_API_KEY` / `ANTHROPIC_API_KEY` variables). A table for one of them
//! may omit `api`; any other id must say which API it speaks, and a network provider other
//! than those two must give its `baseUrl`.
//!
//! Provider ids compare without case and punctuation (`Z-AI` finds `z.ai`), as in
//! [`crate::models`].

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rampart_context::guards::window::DEFAULT_CONTEXT_TOKENS;
use rampart_context::tokens::CountMode;

use super::anthropic::AnthropicProvider;
use super::openai::OpenAiProvider;
use super::sim::{OverflowWording, SimProvider};
use super::{ApiKind, Provider, ProviderError, ProviderSettings};
use crate::config::Config;
use crate::models::{ModelEntry, ModelsConfigError};

/// The id of the embedded simulator, present with or without configuration.
pub const SIM_PROVIDER_ID: &str = "sim";

/// The simulator's model that always exists, so that `sim/default` works out of the box.
pub const SIM_DEFAULT_MODEL: &str = "default";

/// `timeoutSeconds` when absent: long enough for a large streamed answer.
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 120;

/// `maxRetries` when absent.
pub const DEFAULT_MAX_RETRIES: u32 = 3;

/// `retryBaseMs` when absent.
pub const DEFAULT_RETRY_BASE_MS: u64 = 500;

/// `baseUrl` of the `openai` provider when absent.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// `apiKeyEnv` of the `openai` provider when absent.
pub const OPENAI_API_KEY_ENV: &str = "OPENAI_API_KEY";

/// `baseUrl` of the `anthropic` provider when absent.
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com/v1";

/// `apiKeyEnv` of the `anthropic` provider when absent.
pub const ANTHROPIC_API_KEY_ENV: &str = "ANTHROPIC_API_KEY";

/// The keys a `[models.providers.<id>]` table may hold.
pub const PROVIDER_KEYS: &[&str] = &[
    "api",
    "baseUrl",
    "apiKeyEnv",
    "timeoutSeconds",
    "maxRetries",
    "retryBaseMs",
    "overflowWording",
    "models",
];

/// The keys a model entry may hold: ours, plus OpenClaw's model metadata (`name`, `reasoning`,
/// `input`, `cost`, `maxTokens`), accepted and type-checked so that an OpenClaw models list can
/// be pasted in, though this host does not use them.
pub const MODEL_KEYS: &[&str] = &[
    "id",
    "contextWindow",
    "contextTokens",
    "tokenizer",
    "name",
    "reasoning",
    "input",
    "cost",
    "maxTokens",
];

/// The ids that need no `api` (and, for the network ones, no `baseUrl`).
const WELL_KNOWN: &[&str] = &["sim", "openai", "anthropic"];

/// What can go wrong finding or building a provider.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// A `models.providers` setting is malformed.
    #[error(transparent)]
    Config(#[from] ModelsConfigError),
    /// A provider's constructor refused its settings.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// A model name without the `provider/` part.
    #[error(
        "model name {name:?} must have the form \"provider/model\", for example \"sim/default\" or \"openai/gpt-4o\""
    )]
    BadModelName {
        /// The name as given.
        name: String,
    },
    /// A provider id that is neither configured nor well known.
    #[error(
        "no provider `{provider}`: add a [models.providers.{provider}] table with `api` (and `baseUrl`), or use one of: {}",
        known.join(", ")
    )]
    UnknownProvider {
        /// The id asked for.
        provider: String,
        /// The ids available.
        known: Vec<String>,
    },
}

/// Splits `provider/model` at the first slash (model ids may contain slashes themselves, as in
/// `openrouter/meta-llama/llama-3`). Both parts must be non-empty.
pub fn split_model_name(name: &str) -> Result<(&str, &str), RegistryError> {
    match name.split_once('/') {
        Some((provider, model)) if !provider.trim().is_empty() && !model.trim().is_empty() => {
            Ok((provider.trim(), model.trim()))
        }
        _ => Err(RegistryError::BadModelName {
            name: name.to_string(),
        }),
    }
}

// ---------------------------------------------------------------------------
// Reading the tables
// ---------------------------------------------------------------------------

use crate::models::{describe, normalize_provider};

/// Builds errors that name the config file.
struct Ctx<'a> {
    config: &'a Config,
}

impl Ctx<'_> {
    /// An error at `key`, with the file and the key's line (see [`crate::models::err`]).
    fn err(&self, key: &str, problem: impl Into<String>) -> ModelsConfigError {
        crate::models::err(self.config, key, problem)
    }

    fn string<'v>(
        &self,
        key: &str,
        v: &'v toml::Value,
        what: &str,
    ) -> Result<&'v str, ModelsConfigError> {
        v.as_str()
            .ok_or_else(|| self.err(key, format!("must be {what}, found {}", describe(v))))
    }

    /// A positive number (integer or float), as the window settings are.
    fn positive(&self, key: &str, v: &toml::Value, what: &str) -> Result<f64, ModelsConfigError> {
        match v {
            toml::Value::Integer(i) if *i > 0 => Ok(*i as f64),
            toml::Value::Float(f) if f.is_finite() && *f > 0.0 => Ok(*f),
            other => Err(self.err(
                key,
                format!(
                    "must be a positive number of {what}, found {}",
                    describe(other)
                ),
            )),
        }
    }

    /// A whole number from 0 to `max`.
    fn count(
        &self,
        key: &str,
        v: &toml::Value,
        what: &str,
        max: u64,
    ) -> Result<u64, ModelsConfigError> {
        match v {
            toml::Value::Integer(i) if *i >= 0 && (*i as u64) <= max => Ok(*i as u64),
            other => Err(self.err(
                key,
                format!(
                    "must be a whole number of {what} from 0 to {max}, found {}",
                    describe(other)
                ),
            )),
        }
    }

    /// Refuses keys not in `allowed`, naming the first one and listing the allowed ones.
    fn known_keys(
        &self,
        prefix: &str,
        table: &toml::Table,
        allowed: &[&str],
    ) -> Result<(), ModelsConfigError> {
        for key in table.keys() {
            if allowed.contains(&key.as_str()) {
                continue;
            }
            let hint = if key == "apiKey" {
                "is not read: an API key in a config file ends up in repositories and logs. Put \
                 the key in an environment variable and name that variable in `apiKeyEnv`"
                    .to_string()
            } else {
                let close = closest(key, allowed)
                    .map(|a| format!(" (did you mean `{a}`?)"))
                    .unwrap_or_default();
                format!(
                    "is not a known key{close}. Allowed here: {}",
                    allowed.join(", ")
                )
            };
            return Err(self.err(&format!("{prefix}.{key}"), hint));
        }
        Ok(())
    }
}

/// The allowed key a misspelt one was most likely meant to be: equal but for case, or at most
/// two edits away (case ignored). `None` when nothing is that close.
fn closest<'a>(key: &str, allowed: &[&'a str]) -> Option<&'a str> {
    let key = key.to_ascii_lowercase();
    allowed
        .iter()
        .map(|a| (edit_distance(&key, &a.to_ascii_lowercase()), *a))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, a)| a)
}

/// Levenshtein distance over characters; keys are short, so the quadratic table is nothing.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitute = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = substitute.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// `models.providers`, when present. Anything but a table is an error.
fn providers_table(config: &Config) -> Result<Option<&toml::Table>, ModelsConfigError> {
    match config.models.get("providers") {
        None => Ok(None),
        Some(toml::Value::Table(t)) => Ok(Some(t)),
        Some(other) => Err(Ctx { config }.err(
            "models.providers",
            format!("must be a table of providers, found {}", describe(other)),
        )),
    }
}

/// The table whose key normalises to `id`'s normalisation. Two such tables (`z.ai` and `z-ai`)
/// are an error: which one wins would be an accident of ordering.
fn find_table<'c>(
    config: &'c Config,
    id: &str,
) -> Result<Option<(&'c String, &'c toml::Value)>, ModelsConfigError> {
    let Some(providers) = providers_table(config)? else {
        return Ok(None);
    };
    let wanted = normalize_provider(id);
    let mut found = providers
        .iter()
        .filter(|(name, _)| normalize_provider(name) == wanted);
    let first = found.next();
    if let (Some((a, _)), Some((b, _))) = (first, found.next()) {
        return Err(Ctx { config }.err(
            &format!("models.providers.{b}"),
            format!(
                "names the same provider as `models.providers.{a}` (ids compare without case \
                 and punctuation); merge the two tables"
            ),
        ));
    }
    Ok(first)
}

fn parse_api(ctx: &Ctx<'_>, key: &str, v: &toml::Value) -> Result<ApiKind, ModelsConfigError> {
    const ALLOWED: &str = "\"sim\", \"openai-completions\" (or \"openai\"), \
                           \"anthropic-messages\" (or \"anthropic\")";
    let s = ctx.string(key, v, &format!("one of {ALLOWED}"))?;
    match s {
        "sim" => Ok(ApiKind::Sim),
        "openai-completions" | "openai" => Ok(ApiKind::OpenAiCompletions),
        "anthropic-messages" | "anthropic" => Ok(ApiKind::AnthropicMessages),
        other => Err(ctx.err(key, format!("must be one of {ALLOWED}, found {other:?}"))),
    }
}

/// The API a well-known id speaks when its table does not say.
fn well_known_api(id: &str) -> Option<ApiKind> {
    match normalize_provider(id).as_str() {
        "sim" => Some(ApiKind::Sim),
        "openai" => Some(ApiKind::OpenAiCompletions),
        "anthropic" => Some(ApiKind::AnthropicMessages),
        _ => None,
    }
}

/// `baseUrl` and `apiKeyEnv` defaults of a well-known network provider speaking its own API.
fn well_known_endpoint(id: &str, api: ApiKind) -> Option<(&'static str, &'static str)> {
    match (normalize_provider(id).as_str(), api) {
        ("openai", ApiKind::OpenAiCompletions) => Some((OPENAI_BASE_URL, OPENAI_API_KEY_ENV)),
        ("anthropic", ApiKind::AnthropicMessages) => {
            Some((ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY_ENV))
        }
        _ => None,
    }
}

/// Settings with every default, for a well-known id that has no table.
fn builtin_settings(id: &str, api: ApiKind) -> ProviderSettings {
    let endpoint = well_known_endpoint(id, api);
    let mut settings = ProviderSettings {
        id: id.to_string(),
        api,
        base_url: endpoint.map(|(url, _)| url.to_string()),
        api_key_env: endpoint.map(|(_, env)| env.to_string()),
        timeout: Duration::from_secs(DEFAULT_TIMEOUT_SECONDS),
        max_retries: DEFAULT_MAX_RETRIES,
        retry_base: Duration::from_millis(DEFAULT_RETRY_BASE_MS),
        models: Vec::new(),
        overflow_wording: None,
    };
    if api == ApiKind::Sim {
        add_sim_default(&mut settings);
    }
    settings
}

/// The simulator always serves `default` (200,000 tokens, estimate), also when the user lists
/// other models, so that the out-of-the-box model name keeps working.
fn add_sim_default(settings: &mut ProviderSettings) {
    if settings.models.iter().any(|m| m.id == SIM_DEFAULT_MODEL) {
        return;
    }
    settings.models.push(ModelEntry {
        provider: settings.id.clone(),
        id: SIM_DEFAULT_MODEL.to_string(),
        context_window: Some(DEFAULT_CONTEXT_TOKENS as f64),
        context_tokens: None,
        tokenizer: Some(CountMode::Estimate.name().to_string()),
    });
}

fn parse_models(
    ctx: &Ctx<'_>,
    provider: &str,
    v: &toml::Value,
) -> Result<Vec<ModelEntry>, ModelsConfigError> {
    let key = format!("models.providers.{provider}.models");
    let list = v.as_array().ok_or_else(|| {
        ctx.err(
            &key,
            format!(
                "must be an array of tables with `id`, found {}",
                describe(v)
            ),
        )
    })?;
    let mut out: Vec<ModelEntry> = Vec::with_capacity(list.len());
    for (i, item) in list.iter().enumerate() {
        let key_i = format!("{key}[{i}]");
        let table = item.as_table().ok_or_else(|| {
            ctx.err(
                &key_i,
                format!("must be a table with `id`, found {}", describe(item)),
            )
        })?;
        ctx.known_keys(&key_i, table, MODEL_KEYS)?;
        let id_key = format!("{key_i}.id");
        let id = match table.get("id") {
            None => return Err(ctx.err(&id_key, "is required: the model's id, e.g. \"gpt-4o\"")),
            Some(v) => ctx.string(&id_key, v, "a non-empty string")?,
        };
        if id.trim().is_empty() {
            return Err(ctx.err(&id_key, "must be a non-empty string"));
        }
        if let Some(j) = out.iter().position(|m| m.id == id) {
            return Err(ctx.err(
                &id_key,
                format!("repeats the model id {id:?} of `{key}[{j}]`; each model may appear once"),
            ));
        }
        let number = |name: &str| -> Result<Option<f64>, ModelsConfigError> {
            table
                .get(name)
                .map(|v| ctx.positive(&format!("{key_i}.{name}"), v, "tokens"))
                .transpose()
        };
        let context_window = number("contextWindow")?;
        let context_tokens = number("contextTokens")?;
        number("maxTokens")?;
        let tokenizer = match table.get("tokenizer") {
            None => None,
            Some(v) => {
                let tk = format!("{key_i}.tokenizer");
                let allowed = "\"estimate\", \"calibrated\", \"o200k_base\" or \"cl100k_base\"";
                let s = ctx.string(&tk, v, &format!("one of {allowed}"))?;
                s.parse::<CountMode>()
                    .map_err(|e| ctx.err(&tk, e.to_string()))?;
                Some(s.to_string())
            }
        };
        // OpenClaw's metadata: accepted, type-checked, unused.
        if let Some(v) = table.get("name") {
            ctx.string(&format!("{key_i}.name"), v, "a string")?;
        }
        if let Some(v) = table.get("reasoning")
            && !v.is_bool()
        {
            return Err(ctx.err(
                &format!("{key_i}.reasoning"),
                format!("must be true or false, found {}", describe(v)),
            ));
        }
        if let Some(v) = table.get("input") {
            let ok = v
                .as_array()
                .is_some_and(|a| a.iter().all(toml::Value::is_str));
            if !ok {
                return Err(ctx.err(
                    &format!("{key_i}.input"),
                    format!(
                        "must be an array of strings such as [\"text\", \"image\"], found {}",
                        describe(v)
                    ),
                ));
            }
        }
        if let Some(v) = table.get("cost")
            && !v.is_table()
        {
            return Err(ctx.err(
                &format!("{key_i}.cost"),
                format!(
                    "must be a table such as {{ input = 3, output = 15 }}, found {}",
                    describe(v)
                ),
            ));
        }
        out.push(ModelEntry {
            provider: provider.to_string(),
            id: id.to_string(),
            context_window,
            context_tokens,
            tokenizer,
        });
    }
    Ok(out)
}

fn parse_provider(
    config: &Config,
    name: &str,
    value: &toml::Value,
) -> Result<ProviderSettings, ModelsConfigError> {
    let ctx = Ctx { config };
    let prefix = format!("models.providers.{name}");
    let key = |k: &str| format!("{prefix}.{k}");
    let table = value.as_table().ok_or_else(|| {
        ctx.err(
            &prefix,
            format!(
                "must be a table of provider settings, found {}",
                describe(value)
            ),
        )
    })?;
    ctx.known_keys(&prefix, table, PROVIDER_KEYS)?;

    let api = match table.get("api") {
        Some(v) => parse_api(&ctx, &key("api"), v)?,
        None => well_known_api(name).ok_or_else(|| {
            ctx.err(
                &key("api"),
                format!(
                    "is required for provider `{name}` (only {} may omit it): \"sim\", \
                     \"openai-completions\" or \"anthropic-messages\"",
                    WELL_KNOWN.join(", ")
                ),
            )
        })?,
    };
    let is_sim = api == ApiKind::Sim;
    let network_only = |k: &str| {
        ctx.err(
            &key(k),
            "does not apply to the simulator (api = \"sim\"), which makes no requests; remove it",
        )
    };

    let mut base_url = None;
    if let Some(v) = table.get("baseUrl") {
        if is_sim {
            return Err(network_only("baseUrl"));
        }
        let s = ctx.string(&key("baseUrl"), v, "an http:// or https:// URL")?;
        let trimmed = s.trim().trim_end_matches('/');
        let scheme_ok = ["http://", "https://"]
            .iter()
            .any(|p| trimmed.len() > p.len() && trimmed.to_ascii_lowercase().starts_with(p));
        if !scheme_ok {
            return Err(ctx.err(
                &key("baseUrl"),
                format!(
                    "must be an http:// or https:// URL such as \"http://127.0.0.1:8080/v1\", \
                     found {s:?}"
                ),
            ));
        }
        base_url = Some(trimmed.to_string());
    }
    let mut api_key_env = None;
    if let Some(v) = table.get("apiKeyEnv") {
        if is_sim {
            return Err(network_only("apiKeyEnv"));
        }
        let s = ctx.string(&key("apiKeyEnv"), v, "the name of an environment variable")?;
        let valid = !s.is_empty()
            && !s.starts_with(|c: char| c.is_ascii_digit())
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(ctx.err(
                &key("apiKeyEnv"),
                format!(
                    "must be the name of an environment variable (letters, digits and _, such \
                     as \"OPENAI_API_KEY\"), not the key itself; found a string of {} characters",
                    s.chars().count()
                ),
            ));
        }
        api_key_env = Some(s.to_string());
    }
    if !is_sim {
        let endpoint = well_known_endpoint(name, api);
        if base_url.is_none() {
            base_url = match endpoint {
                Some((url, _)) => Some(url.to_string()),
                None => {
                    return Err(ctx.err(
                        &key("baseUrl"),
                        format!(
                            "is required for provider `{name}`: only `openai` and `anthropic` \
                             speaking their own API have a default. Give the server's URL, e.g. \
                             \"http://127.0.0.1:8080/v1\""
                        ),
                    ));
                }
            };
        }
        if api_key_env.is_none() {
            api_key_env = endpoint.map(|(_, env)| env.to_string());
        }
    }

    let timeout = match table.get("timeoutSeconds") {
        None => Duration::from_secs(DEFAULT_TIMEOUT_SECONDS),
        Some(v) => {
            let secs = ctx.positive(&key("timeoutSeconds"), v, "seconds")?;
            Duration::try_from_secs_f64(secs).map_err(|_| {
                ctx.err(
                    &key("timeoutSeconds"),
                    format!("is too large to be a duration, found {}", describe(v)),
                )
            })?
        }
    };
    let max_retries = match table.get("maxRetries") {
        None => DEFAULT_MAX_RETRIES,
        Some(v) => {
            let n = ctx.count(&key("maxRetries"), v, "retries", u64::from(u32::MAX))?;
            u32::try_from(n).unwrap_or(u32::MAX)
        }
    };
    let retry_base = match table.get("retryBaseMs") {
        None => Duration::from_millis(DEFAULT_RETRY_BASE_MS),
        Some(v) => Duration::from_millis(ctx.count(
            &key("retryBaseMs"),
            v,
            "milliseconds",
            i64::MAX as u64,
        )?),
    };
    let overflow_wording = match table.get("overflowWording") {
        None => None,
        Some(v) => {
            let allowed = OverflowWording::allowed();
            let s = ctx.string(&key("overflowWording"), v, &format!("one of {allowed}"))?;
            if !is_sim {
                return Err(ctx.err(
                    &key("overflowWording"),
                    "only applies to the simulator (api = \"sim\"): a real provider words its \
                     own errors; remove it",
                ));
            }
            s.parse::<OverflowWording>().map_err(|_| {
                ctx.err(
                    &key("overflowWording"),
                    format!("must be one of {allowed}, found {s:?}"),
                )
            })?;
            Some(s.to_string())
        }
    };
    let models = match table.get("models") {
        None => Vec::new(),
        Some(v) => parse_models(&ctx, name, v)?,
    };

    let mut settings = ProviderSettings {
        id: name.to_string(),
        api,
        base_url,
        api_key_env,
        timeout,
        max_retries,
        retry_base,
        models,
        overflow_wording,
    };
    if is_sim {
        // Say the simulator's counting default out loud, so that the run loop, which reads
        // these settings and would otherwise pick a default by model id, counts as it does.
        for m in &mut settings.models {
            m.tokenizer
                .get_or_insert_with(|| CountMode::Estimate.name().to_string());
        }
        if normalize_provider(name) == SIM_PROVIDER_ID {
            add_sim_default(&mut settings);
        }
    }
    Ok(settings)
}

/// Reads and checks `[models.providers.<id>]` (ids compare without case and punctuation).
/// `sim`, `openai` and `anthropic` exist without a table, with their defaults; any other id
/// without a table is an error listing the configured ones. The settings' `id` is the table
/// key as written.
pub fn provider_settings(config: &Config, id: &str) -> Result<ProviderSettings, ModelsConfigError> {
    if let Some((name, value)) = find_table(config, id)? {
        return parse_provider(config, name, value);
    }
    if let Some(api) = well_known_api(id) {
        return Ok(builtin_settings(&normalize_provider(id), api));
    }
    let mut known: Vec<String> = WELL_KNOWN.iter().map(|s| s.to_string()).collect();
    if let Some(providers) = providers_table(config)? {
        known.extend(
            providers
                .keys()
                .filter(|k| well_known_api(k).is_none())
                .cloned(),
        );
    }
    Err(Ctx { config }.err(
        &format!("models.providers.{id}"),
        format!(
            "is not configured: add the table with `api` and `baseUrl`, or use one of: {}",
            known.join(", ")
        ),
    ))
}

/// Builds the provider its settings describe. The simulator fails only on settings the
/// registry would already have refused; the HTTP providers may refuse theirs.
pub fn build_provider(settings: ProviderSettings) -> Result<Arc<dyn Provider>, RegistryError> {
    tracing::debug!(provider = %settings.id, api = ?settings.api, "building provider");
    Ok(match settings.api {
        ApiKind::Sim => Arc::new(SimProvider::new(&settings)?),
        ApiKind::OpenAiCompletions => Arc::new(OpenAiProvider::new(settings)?),
        ApiKind::AnthropicMessages => Arc::new(AnthropicProvider::new(settings)?),
    })
}

// ---------------------------------------------------------------------------
// The registry
// ---------------------------------------------------------------------------

/// Every provider of a configuration, built at most once each and shared by every session.
///
/// All settings are read and checked when the registry is made, so a typo in any provider
/// table stops the host at start rather than at the first turn that uses it. Simulators are
/// built then too (they cannot fail later); the HTTP providers are built on first use, so a
/// configured but unused provider whose key is not set does not get in the way.
pub struct Providers {
    /// By normalised id.
    settings: BTreeMap<String, ProviderSettings>,
    /// Simulators by normalised id; the same instances are in `built`.
    sims: HashMap<String, Arc<SimProvider>>,
    /// Providers built so far, by normalised id.
    built: Mutex<HashMap<String, Arc<dyn Provider>>>,
}

impl std::fmt::Debug for Providers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Providers")
            .field("ids", &self.settings.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Providers {
    /// Reads every `[models.providers.*]` table plus the well-known ids, and builds the
    /// simulators.
    pub fn from_config(config: &Config) -> Result<Self, RegistryError> {
        let mut ids: Vec<String> = WELL_KNOWN.iter().map(|s| s.to_string()).collect();
        if let Some(providers) = providers_table(config)? {
            ids.extend(providers.keys().cloned());
        }
        let mut settings = BTreeMap::new();
        for id in ids {
            let key = normalize_provider(&id);
            if settings.contains_key(&key) {
                continue;
            }
            settings.insert(key, provider_settings(config, &id)?);
        }
        let mut sims = HashMap::new();
        let mut built: HashMap<String, Arc<dyn Provider>> = HashMap::new();
        for (key, s) in &settings {
            if s.api == ApiKind::Sim {
                let sim = Arc::new(SimProvider::new(s)?);
                built.insert(key.clone(), Arc::clone(&sim) as Arc<dyn Provider>);
                sims.insert(key.clone(), sim);
            }
        }
        tracing::debug!(providers = ?settings.keys().collect::<Vec<_>>(), "providers configured");
        Ok(Self {
            settings,
            sims,
            built: Mutex::new(built),
        })
    }

    /// The provider with this id, built on first use.
    pub fn provider(&self, id: &str) -> Result<Arc<dyn Provider>, RegistryError> {
        let key = normalize_provider(id);
        let mut built = lock(&self.built);
        if let Some(p) = built.get(&key) {
            return Ok(Arc::clone(p));
        }
        let Some(settings) = self.settings.get(&key) else {
            return Err(RegistryError::UnknownProvider {
                provider: id.to_string(),
                known: self.ids(),
            });
        };
        let provider = build_provider(settings.clone())?;
        built.insert(key, Arc::clone(&provider));
        Ok(provider)
    }

    /// The provider serving `provider/model`; the model id is the part after the first slash
    /// (see [`split_model_name`]).
    pub fn get(&self, name: &str) -> Result<Arc<dyn Provider>, RegistryError> {
        let (provider, _) = split_model_name(name)?;
        self.provider(provider)
    }

    /// The simulator with this id, when that provider is one: a replay queues recorded
    /// replies on it with [`SimProvider::push_reply`], and tests read its log.
    pub fn sim(&self, id: &str) -> Option<Arc<SimProvider>> {
        self.sims.get(&normalize_provider(id)).cloned()
    }

    /// The checked settings of a provider: its models' windows and tokenizers, for the guard
    /// and the precheck.
    pub fn settings(&self, id: &str) -> Option<&ProviderSettings> {
        self.settings.get(&normalize_provider(id))
    }

    /// The provider ids, as their tables spell them, sorted by normalised id.
    pub fn ids(&self) -> Vec<String> {
        self.settings.values().map(|s| s.id.clone()).collect()
    }
}

/// Locks, taking over a poisoned lock: the map is only ever inserted into whole entries.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::providers::ModelRequest;

    fn cfg(text: &str) -> Config {
        crate::config::parse(text, Path::new("plugins.toml")).unwrap()
    }

    fn settings_err(text: &str, id: &str) -> ModelsConfigError {
        provider_settings(&cfg(text), id).unwrap_err()
    }

    #[test]
    fn the_simulator_exists_without_any_config() {
        let s = provider_settings(&Config::default(), "sim").unwrap();
        assert_eq!(s.api, ApiKind::Sim);
        assert_eq!(s.id, "sim");
        assert_eq!(s.models.len(), 1);
        let m = &s.models[0];
        assert_eq!(m.id, "default");
        assert_eq!(m.context_window, Some(200_000.0));
        assert_eq!(m.tokenizer.as_deref(), Some("estimate"));
        assert_eq!(s.timeout, Duration::from_secs(120));
        assert_eq!(s.max_retries, 3);
        assert_eq!(s.retry_base, Duration::from_millis(500));
        assert_eq!((s.base_url, s.api_key_env), (None, None));

        let providers = Providers::from_config(&Config::default()).unwrap();
        let p = providers.get("sim/default").unwrap();
        assert_eq!(p.id(), "sim");
        let sim = providers.sim("sim").unwrap();
        assert_eq!(sim.window("default"), Some(200_000));
        assert!(providers.sim("openai").is_none());
    }

    #[test]
    fn user_sim_models_keep_the_default_model() {
        let c = cfg(concat!(
            "[models.providers.sim]\noverflowWording = \"openai\"\n",
            "[[models.providers.sim.models]]\nid = \"small\"\ncontextWindow = 8000\n",
            "tokenizer = \"o200k_base\"\n",
        ));
        let s = provider_settings(&c, "SIM").unwrap();
        let ids: Vec<_> = s.models.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["small", "default"]);
        assert_eq!(s.overflow_wording.as_deref(), Some("openai"));
        assert_eq!(s.models[0].tokenizer.as_deref(), Some("o200k_base"));
        // A user's own `default` wins.
        let c = cfg("[[models.providers.sim.models]]\nid = \"default\"\ncontextWindow = 9000\n");
        let s = provider_settings(&c, "sim").unwrap();
        assert_eq!(s.models.len(), 1);
        assert_eq!(s.models[0].context_window, Some(9000.0));
        // The simulator's counting default is written into the settings, so that everyone
        // reading them (the run loop's precheck) counts as the simulator does.
        assert_eq!(s.models[0].tokenizer.as_deref(), Some("estimate"));
    }

    #[test]
    fn well_known_network_providers_get_their_endpoints() {
        let s = provider_settings(&Config::default(), "openai").unwrap();
        assert_eq!(s.api, ApiKind::OpenAiCompletions);
        assert_eq!(s.base_url.as_deref(), Some("https://api.openai.com/v1"));
        assert_eq!(s.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
        let c = cfg("[models.providers.anthropic]\ntimeoutSeconds = 30\n");
        let s = provider_settings(&c, "anthropic").unwrap();
        assert_eq!(s.api, ApiKind::AnthropicMessages);
        assert_eq!(s.base_url.as_deref(), Some("https://api.anthropic.com/v1"));
        assert_eq!(s.api_key_env.as_deref(), Some("ANTHROPIC_API_KEY"));
        assert_eq!(s.timeout, Duration::from_secs(30));
        // Overrides are kept; a trailing slash is dropped.
        let c = cfg(
            "[models.providers.openai]\nbaseUrl = \"http://127.0.0.1:9/v1/\"\napiKeyEnv = \"MY_KEY\"\n",
        );
        let s = provider_settings(&c, "openai").unwrap();
        assert_eq!(s.base_url.as_deref(), Some("http://127.0.0.1:9/v1"));
        assert_eq!(s.api_key_env.as_deref(), Some("MY_KEY"));
    }

    #[test]
    fn api_aliases_and_custom_providers() {
        let c = cfg(concat!(
            "[models.providers.local-llama]\napi = \"openai\"\nbaseUrl = \"http://localhost:8080/v1\"\n",
            "maxRetries = 0\nretryBaseMs = 250\ntimeoutSeconds = 2.5\n",
            "[[models.providers.local-llama.models]]\nid = \"qwen\"\ncontextWindow = 32768\n",
            "name = \"Qwen\"\nreasoning = false\ninput = [\"text\"]\nmaxTokens = 4096\n",
            "cost = { input = 0, output = 0 }\n",
            "[models.providers.claude-proxy]\napi = \"anthropic\"\nbaseUrl = \"https://proxy.example/v1\"\n",
            "[models.providers.other]\napi = \"anthropic-messages\"\nbaseUrl = \"https://x.example\"\n",
            "[models.providers.fake]\napi = \"sim\"\n",
        ));
        let s = provider_settings(&c, "local_llama").unwrap();
        assert_eq!(s.id, "local-llama");
        assert_eq!(s.api, ApiKind::OpenAiCompletions);
        assert_eq!(s.api_key_env, None);
        assert_eq!(s.max_retries, 0);
        assert_eq!(s.retry_base, Duration::from_millis(250));
        assert_eq!(s.timeout, Duration::from_millis(2500));
        assert_eq!(s.models[0].provider, "local-llama");
        assert_eq!(s.models[0].context_window, Some(32768.0));
        assert_eq!(
            provider_settings(&c, "claude-proxy").unwrap().api,
            ApiKind::AnthropicMessages
        );
        assert_eq!(
            provider_settings(&c, "other").unwrap().api,
            ApiKind::AnthropicMessages
        );
        // A sim under another id gets no implicit `default`.
        let fake = provider_settings(&c, "fake").unwrap();
        assert_eq!(fake.api, ApiKind::Sim);
        assert!(fake.models.is_empty());
        // A network model's tokenizer is left to the run loop's default by model id.
        assert_eq!(s.models[0].tokenizer, None);

        let providers = Providers::from_config(&c).unwrap();
        assert!(providers.sim("fake").is_some());
        assert_eq!(
            providers.ids(),
            [
                "anthropic",
                "claude-proxy",
                "fake",
                "local-llama",
                "openai",
                "other",
                "sim"
            ]
        );
        let a = providers.get("local-llama/qwen").unwrap();
        let b = providers.get("LOCAL-LLAMA/other").unwrap();
        assert!(Arc::ptr_eq(&a, &b), "built once per id");
        assert_eq!(providers.settings("local-llama").unwrap().models.len(), 1);
    }

    #[test]
    fn unknown_keys_name_the_full_key_and_the_allowed_ones() {
        let e = settings_err(
            "[models.providers.openai]\nbaseURL = \"http://x\"\n",
            "openai",
        );
        assert_eq!(e.key, "models.providers.openai.baseURL");
        assert!(e.problem.contains("did you mean `baseUrl`"), "{e}");
        assert!(e.problem.contains("apiKeyEnv, timeoutSeconds"), "{e}");
        // The file, with the line and column of the misspelt key.
        assert_eq!(e.file, "plugins.toml:2:11");
        let e = settings_err(
            "[[models.providers.sim.models]]\nid = \"m\"\ncontextWindows = 5\n",
            "sim",
        );
        assert_eq!(e.key, "models.providers.sim.models[0].contextWindows");
        assert!(e.problem.contains("did you mean `contextWindow`"), "{e}");
        let e = settings_err("[models.providers.sim]\noverflowWordng = \"x\"\n", "sim");
        assert!(e.problem.contains("did you mean `overflowWording`"), "{e}");
        let e = settings_err("[models.providers.sim]\nfoo = 1\n", "sim");
        assert!(!e.problem.contains("did you mean"), "{e}");
        let e = settings_err("[models.providers.openai]\napiKey = \"sk-123\"\n", "openai");
        assert_eq!(e.key, "models.providers.openai.apiKey");
        assert!(
            e.problem.contains("apiKeyEnv") && !e.to_string().contains("sk-123"),
            "{e}"
        );
    }

    #[test]
    fn wrong_types_name_the_key_the_found_type_and_what_is_allowed() {
        let cases = [
            (
                "[models.providers.sim]\napi = 3\n",
                "models.providers.sim.api",
                "integer 3",
            ),
            (
                "[models.providers.openai]\ntimeoutSeconds = \"soon\"\n",
                "models.providers.openai.timeoutSeconds",
                "positive number",
            ),
            (
                "[models.providers.openai]\nmaxRetries = -1\n",
                "models.providers.openai.maxRetries",
                "integer -1",
            ),
            (
                "[models.providers.openai]\nmaxRetries = 1.5\n",
                "models.providers.openai.maxRetries",
                "whole number",
            ),
            (
                "[models.providers.openai]\nretryBaseMs = true\n",
                "models.providers.openai.retryBaseMs",
                "boolean true",
            ),
            (
                "[models.providers.openai]\nbaseUrl = \"api.openai.com\"\n",
                "models.providers.openai.baseUrl",
                "http:// or https://",
            ),
            (
                "[models.providers.openai]\napiKeyEnv = \"sk-abc def\"\n",
                "models.providers.openai.apiKeyEnv",
                "environment variable",
            ),
            (
                "[models.providers.sim]\nmodels = \"x\"\n",
                "models.providers.sim.models",
                "array of tables",
            ),
            (
                "[models.providers.sim]\nmodels = [1]\n",
                "models.providers.sim.models[0]",
                "integer 1",
            ),
            (
                "[[models.providers.sim.models]]\ncontextWindow = 5\n",
                "models.providers.sim.models[0].id",
                "required",
            ),
            (
                "[[models.providers.sim.models]]\nid = \"m\"\ncontextWindow = 0\n",
                "models.providers.sim.models[0].contextWindow",
                "integer 0",
            ),
            (
                "[[models.providers.sim.models]]\nid = \"m\"\ntokenizer = \"gpt2\"\n",
                "models.providers.sim.models[0].tokenizer",
                "o200k_base",
            ),
            (
                "[[models.providers.sim.models]]\nid = \"m\"\nreasoning = \"yes\"\n",
                "models.providers.sim.models[0].reasoning",
                "string \"yes\"",
            ),
            (
                "[[models.providers.sim.models]]\nid = \"m\"\ninput = \"text\"\n",
                "models.providers.sim.models[0].input",
                "array of strings",
            ),
            (
                "[[models.providers.sim.models]]\nid = \"m\"\n[[models.providers.sim.models]]\nid = \"m\"\n",
                "models.providers.sim.models[1].id",
                "repeats",
            ),
            (
                "[models.providers]\nsim = 1\n",
                "models.providers.sim",
                "integer 1",
            ),
            ("[models]\nproviders = 1\n", "models.providers", "integer 1"),
        ];
        for (text, key, found) in cases {
            // The provider asked for is the one the key names.
            let id = if key.starts_with("models.providers.openai") {
                "openai"
            } else {
                "sim"
            };
            let e = settings_err(text, id);
            assert_eq!(e.key, key, "{text}");
            assert!(e.problem.contains(found), "{text}: {e}");
            assert!(e.file.starts_with("plugins.toml:"), "{text}: {e}");
        }
    }

    #[test]
    fn sim_specific_and_network_specific_keys_are_refused_where_they_do_not_apply() {
        let e = settings_err(
            "[models.providers.sim]\nbaseUrl = \"http://x.example\"\n",
            "sim",
        );
        assert_eq!(e.key, "models.providers.sim.baseUrl");
        let e = settings_err(
            "[models.providers.openai]\noverflowWording = \"openai\"\n",
            "openai",
        );
        assert_eq!(e.key, "models.providers.openai.overflowWording");
        let e = settings_err(
            "[models.providers.sim]\noverflowWording = \"azure\"\n",
            "sim",
        );
        assert_eq!(e.key, "models.providers.sim.overflowWording");
        for name in [
            "anthropic",
            "openai",
            "gemini",
            "ollama",
            "bedrock",
            "azure",
        ] {
            assert!(e.problem.contains(name), "{e}");
        }
    }

    #[test]
    fn other_ids_need_an_api_and_a_base_url() {
        let e = settings_err(
            "[models.providers.local]\nbaseUrl = \"http://x.example\"\n",
            "local",
        );
        assert_eq!(e.key, "models.providers.local.api");
        assert!(e.problem.contains("openai-completions"), "{e}");
        let e = settings_err("[models.providers.local]\napi = \"ollama\"\n", "local");
        assert!(e.problem.contains("\"ollama\""), "{e}");
        let e = settings_err("[models.providers.local]\napi = \"openai\"\n", "local");
        assert_eq!(e.key, "models.providers.local.baseUrl");
        let e = provider_settings(&Config::default(), "groq").unwrap_err();
        assert_eq!(e.key, "models.providers.groq");
        assert!(e.problem.contains("sim, openai, anthropic"), "{e}");
        // Two spellings of one id are refused rather than one picked.
        let e = settings_err(
            "[models.providers.\"z.ai\"]\napi = \"sim\"\n[models.providers.z-ai]\napi = \"sim\"\n",
            "zai",
        );
        assert!(e.problem.contains("same provider"), "{e}");
    }

    #[test]
    fn model_names_need_a_provider_part() {
        assert_eq!(split_model_name("sim/small").unwrap(), ("sim", "small"));
        assert_eq!(
            split_model_name("openrouter/meta-llama/llama-3").unwrap(),
            ("openrouter", "meta-llama/llama-3")
        );
        for bad in ["small", "/small", "sim/", ""] {
            let e = split_model_name(bad).unwrap_err();
            assert!(e.to_string().contains("provider/model"), "{e}");
        }
        let providers = Providers::from_config(&Config::default()).unwrap();
        assert!(matches!(
            providers.get("default"),
            Err(RegistryError::BadModelName { .. })
        ));
        let e = providers.get("groq/llama").err().unwrap();
        assert!(
            e.to_string().contains("groq") && e.to_string().contains("anthropic, openai, sim"),
            "{e}"
        );
    }

    #[test]
    fn the_registry_hands_out_the_same_simulator_it_exposes() {
        let c = cfg("[[models.providers.sim.models]]\nid = \"small\"\ncontextWindow = 100\n");
        let providers = Providers::from_config(&c).unwrap();
        let sim = providers.sim("sim").unwrap();
        let AgentMessage::Assistant(reply) =
            AgentMessage::assistant_text("scripted", "x", "y", "z", 1)
        else {
            unreachable!()
        };
        sim.push_reply(reply);
        let p = providers.get("sim/small").unwrap();
        let answer = p
            .complete(&ModelRequest {
                model: "small".into(),
                system: None,
                messages: vec![Arc::new(AgentMessage::user_text("hi", 1))],
                max_tokens: None,
                deadline: None,
            })
            .unwrap();
        assert!(matches!(
            &answer.message.content[0],
            rampart_message::ContentBlock::Text(t) if t.text == "scripted"
        ));
        assert_eq!(sim.requests_seen(), 1);
        assert_eq!(sim.pending_replies(), 0);
    }

    #[test]
    fn build_provider_dispatches_on_the_api() {
        let s = provider_settings(&Config::default(), "openai").unwrap();
        assert_eq!(build_provider(s).unwrap().id(), "openai");
        let s = provider_settings(&Config::default(), "anthropic").unwrap();
        assert_eq!(build_provider(s).unwrap().id(), "anthropic");
        let mut s = provider_settings(&Config::default(), "sim").unwrap();
        s.overflow_wording = Some("nope".into());
        assert!(matches!(build_provider(s), Err(RegistryError::Config(_))));
    }

    use rampart_message::AgentMessage;
}
