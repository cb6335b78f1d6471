//! `models.providers`: every provider table and its models, read once when the configuration
//! is loaded, with errors that name the file, line, column and key.
//!
//! Keys follow OpenClaw's spelling, so an OpenClaw user recognises them:
//! ```toml
//! [models.providers.local-llama]
//! api = "openai-completions"        # or "openai"; "openai-responses" / "responses";
//!                                   # "anthropic-messages" / "anthropic"; "sim"
//! baseUrl = "http://127.0.0.1:8080/v1"
//! apiKeyEnv = "LLAMA_KEY"           # the variable holding the key; never the key itself
//! timeoutSeconds = 120              # one attempt's limit
//! streamIdleTimeoutSeconds = 300    # a stream that sends no event (keep-alives only) this long fails
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
//! than those two must give its `baseUrl`. Provider ids compare without case and punctuation
//! (`Z-AI` finds `z.ai`).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use rampart_context::guards::window::DEFAULT_CONTEXT_TOKENS;
use rampart_context::tokens::CountMode;

use super::source::{ModelsConfigError, Source, describe};
use crate::providers::sim::OverflowWording;
/// Defined with the providers they build (`rampart-providers`); read from the config here.
pub use rampart_providers::settings::{ApiKind, ModelEntry, ProviderSettings};

/// A model name, `provider/model`. Why a type: the name was split by hand in six places with
/// three different fallbacks; parsing it once makes a name without a provider an error where
/// it is written.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ModelName {
    /// The provider id, as written.
    pub provider: String,
    /// The model id: everything after the first slash (`openrouter/meta-llama/llama-3` has the
    /// model `meta-llama/llama-3`).
    pub model: String,
}

/// A model name without its `provider/` part, or with an empty side.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "model name {name:?} must have the form \"provider/model\", for example \"sim/default\" or \"openai/gpt-4o\""
)]
pub struct BadModelName {
    /// The name as given.
    pub name: String,
}

impl ModelName {
    /// `provider/model`.
    pub fn new(provider: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            provider: provider.into(),
            model: model.into(),
        }
    }
}

impl FromStr for ModelName {
    type Err = BadModelName;
    fn from_str(name: &str) -> Result<Self, BadModelName> {
        match name.split_once('/') {
            Some((provider, model)) if !provider.trim().is_empty() && !model.trim().is_empty() => {
                Ok(Self::new(provider.trim(), model.trim()))
            }
            _ => Err(BadModelName {
                name: name.to_string(),
            }),
        }
    }
}

/// As its `provider/model` text, in events and JSON output.
impl serde::Serialize for ModelName {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for ModelName {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for ModelName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.provider, self.model)
    }
}

/// Provider ids compare without case and punctuation, so `z-ai` matches `z.ai`.
pub fn normalize_provider(p: &str) -> String {
    p.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// Every provider of a configuration: the tables of `models.providers` and the well-known ids,
/// checked, by normalised id.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelsConfig {
    providers: BTreeMap<String, ProviderSettings>,
}

impl Default for ModelsConfig {
    /// The providers that exist without configuration: `sim`, `openai`, `anthropic`.
    fn default() -> Self {
        let providers = WELL_KNOWN
            .iter()
            .filter_map(|id| Some((id.to_string(), builtin_settings(id, well_known_api(id)?))))
            .collect();
        Self { providers }
    }
}

impl ModelsConfig {
    /// Reads every `[models.providers.*]` table plus the well-known ids.
    pub(super) fn parse(source: &Source<'_>) -> Result<Self, ModelsConfigError> {
        if let Some(key) = source.models.keys().find(|k| k.as_str() != "providers") {
            return Err(source.err(
                &format!("models.{key}"),
                "is not a known key. Allowed here: providers",
            ));
        }
        let mut ids: Vec<String> = WELL_KNOWN.iter().map(|s| s.to_string()).collect();
        if let Some(providers) = providers_table(source)? {
            ids.extend(providers.keys().cloned());
        }
        let mut providers = BTreeMap::new();
        for id in ids {
            let key = normalize_provider(&id);
            if providers.contains_key(&key) {
                continue;
            }
            providers.insert(key, provider_settings(source, &id)?);
        }
        Ok(Self { providers })
    }

    /// The settings of provider `id` (compared without case and punctuation).
    pub fn provider(&self, id: &str) -> Option<&ProviderSettings> {
        self.providers.get(&normalize_provider(id))
    }

    /// The entry of `name`'s model, when its provider lists it.
    pub fn model(&self, name: &ModelName) -> Option<&ModelEntry> {
        self.provider(&name.provider)?
            .models
            .iter()
            .find(|m| m.id == name.model)
    }

    /// Every provider's settings, by normalised id.
    pub fn providers(&self) -> impl Iterator<Item = &ProviderSettings> {
        self.providers.values()
    }

    /// The provider ids, as their tables spell them, sorted by normalised id.
    pub fn ids(&self) -> Vec<String> {
        self.providers.values().map(|s| s.id.clone()).collect()
    }

    /// Adds or replaces a provider (a replay adds its simulator this way).
    pub fn insert(&mut self, settings: ProviderSettings) {
        self.providers
            .insert(normalize_provider(&settings.id), settings);
    }
}

/// The id of the embedded simulator, present with or without configuration.
pub const SIM_PROVIDER_ID: &str = "sim";

/// The simulator's model that always exists, so that `sim/default` works out of the box.
pub const SIM_DEFAULT_MODEL: &str = "default";

/// `timeoutSeconds` when absent: long enough for a large streamed answer.
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 120;

/// `streamIdleTimeoutSeconds` when absent: as codex, long enough for a model that thinks for
/// minutes while its server sends keep-alives.
pub const DEFAULT_STREAM_IDLE_TIMEOUT_SECONDS: u64 = 300;

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
    "streamIdleTimeoutSeconds",
    "maxRetries",
    "retryBaseMs",
    "overflowWording",
    "speaks",
    "models",
];

/// The keys a model entry may hold: ours, plus OpenClaw's model metadata (`name`, `reasoning`,
/// `input`, `cost`, `maxTokens`), accepted and type-checked so that an OpenClaw models list can
/// be pasted in. `maxTokens` caps each answer; the others are not used.
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

/// Builds errors that name the config file.
struct Ctx<'a> {
    config: &'a Source<'a>,
}

impl Ctx<'_> {
    /// An error at `key`, with the file and the key's line.
    fn err(&self, key: &str, problem: impl Into<String>) -> ModelsConfigError {
        self.config.err(key, problem)
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
fn providers_table<'c>(
    config: &'c Source<'c>,
) -> Result<Option<&'c toml::Table>, ModelsConfigError> {
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
    config: &'c Source<'c>,
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
                           \"openai-responses\" (or \"responses\"), \
                           \"anthropic-messages\" (or \"anthropic\")";
    let s = ctx.string(key, v, &format!("one of {ALLOWED}"))?;
    match s {
        "sim" => Ok(ApiKind::Sim),
        "openai-completions" | "openai" => Ok(ApiKind::OpenAiCompletions),
        "openai-responses" | "responses" => Ok(ApiKind::OpenAiResponses),
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
        ("openai", ApiKind::OpenAiCompletions | ApiKind::OpenAiResponses) => {
            Some((OPENAI_BASE_URL, OPENAI_API_KEY_ENV))
        }
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
        stream_idle_timeout: Duration::from_secs(DEFAULT_STREAM_IDLE_TIMEOUT_SECONDS),
        max_retries: DEFAULT_MAX_RETRIES,
        retry_base: Duration::from_millis(DEFAULT_RETRY_BASE_MS),
        models: Vec::new(),
        overflow_wording: None,
        speaks: None,
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
        context_window: Some(DEFAULT_CONTEXT_TOKENS),
        context_tokens: None,
        tokenizer: Some(CountMode::Estimate),
        max_tokens: None,
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
        // Windows are whole tokens: a float (as some model lists write them) is floored.
        let number = |name: &str| -> Result<Option<u64>, ModelsConfigError> {
            table
                .get(name)
                .map(|v| ctx.positive(&format!("{key_i}.{name}"), v, "tokens"))
                .transpose()
                .map(|n| n.map(|n| n.floor() as u64))
        };
        let context_window = number("contextWindow")?;
        let context_tokens = number("contextTokens")?;
        let max_tokens = number("maxTokens")?;
        let tokenizer = match table.get("tokenizer") {
            None => None,
            Some(v) => {
                let tk = format!("{key_i}.tokenizer");
                let allowed = "\"estimate\", \"calibrated\", \"o200k_base\" or \"cl100k_base\"";
                let s = ctx.string(&tk, v, &format!("one of {allowed}"))?;
                Some(
                    s.parse::<CountMode>()
                        .map_err(|e| ctx.err(&tk, e.to_string()))?,
                )
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
            max_tokens,
        });
    }
    Ok(out)
}

fn parse_provider(
    config: &Source<'_>,
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
                     \"openai-completions\", \"openai-responses\" or \"anthropic-messages\"",
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
    let stream_idle_timeout = match table.get("streamIdleTimeoutSeconds") {
        None => Duration::from_secs(DEFAULT_STREAM_IDLE_TIMEOUT_SECONDS),
        Some(v) => {
            let secs = ctx.positive(&key("streamIdleTimeoutSeconds"), v, "seconds")?;
            Duration::try_from_secs_f64(secs).map_err(|_| {
                ctx.err(
                    &key("streamIdleTimeoutSeconds"),
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
            Some(s.parse::<OverflowWording>().map_err(|_| {
                ctx.err(
                    &key("overflowWording"),
                    format!("must be one of {allowed}, found {s:?}"),
                )
            })?)
        }
    };
    let speaks = match table.get("speaks") {
        None => None,
        Some(v) => {
            if !is_sim {
                return Err(ctx.err(
                    &key("speaks"),
                    "only applies to the simulator (api = \"sim\"): a real provider speaks its \
                     `api`; remove it",
                ));
            }
            match parse_api(&ctx, &key("speaks"), v)? {
                ApiKind::Sim => {
                    return Err(ctx.err(
                        &key("speaks"),
                        "names the API the simulator stands in for: \"openai-completions\" or \
                         \"anthropic-messages\", not \"sim\"",
                    ));
                }
                api => Some(api),
            }
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
        stream_idle_timeout,
        max_retries,
        retry_base,
        models,
        overflow_wording,
        speaks,
    };
    if is_sim {
        // Say the simulator's counting default out loud, so that the run loop, which reads
        // these settings and would otherwise pick a default by model id, counts as it does.
        for m in &mut settings.models {
            m.tokenizer.get_or_insert(CountMode::Estimate);
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
fn provider_settings(config: &Source<'_>, id: &str) -> Result<ProviderSettings, ModelsConfigError> {
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#[path = "models_tests.rs"]
mod tests;
