//! `agents.defaults.memorySearch`: the built-in memory engine's settings, read once into
//! [`rampart_memory::MemorySettings`] plus the embedding provider to use. OpenClaw's key names
//! where it has them (`provider`, `model`, `local.modelPath`, `sources`, `extraPaths`,
//! `chunking`, `query.hybrid…`, `cache.enabled`, `store.path`); ours are marked.
//!
//! ```toml
//! [agents.defaults.memorySearch]
//! provider = "local"                     # auto (default), openai, local, none
//! local.modelPath = "~/models/potion-base-8M"
//! sources = ["memory", "sessions"]
//! query = { maxResults = 8, hybrid = { mmr = { enabled = true } } }
//! ```

use std::path::PathBuf;
use std::time::Duration;

use rampart_memory::settings::{CitationsMode, MemorySettings, Source as MemorySource};
use serde_json::Value;

use super::source::{ModelsConfigError, Source};

const KEY: &str = "agents.defaults.memorySearch";
const KEYS: &[&str] = &[
    "enabled",
    "provider",
    "model",
    "remote",
    "local",
    "sources",
    "extraPaths",
    "chunking",
    "query",
    "cache",
    "sync",
    "citations",
    "store",
];

/// Which embedding provider the built-in memory engine uses (`memorySearch.provider`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum EmbeddingChoice {
    /// `auto` (default): the local model when `local.modelPath` exists, else an
    /// OpenAI-compatible endpoint when its key is set, else none (keyword-only search, and
    /// `rampart memory status` says so).
    #[default]
    Auto,
    /// `openai`: an OpenAI-compatible `/embeddings` endpoint (OpenAI, llama.cpp, Ollama, vLLM).
    OpenAi,
    /// `local`: a static (model2vec) model read from `local.modelPath`.
    Local,
    /// `none`: keyword-only search.
    None,
}

/// `agents.defaults.memorySearch`, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct MemorySearchConfig {
    /// What is indexed and how search ranks.
    pub settings: MemorySettings,
    /// `provider`.
    pub provider: EmbeddingChoice,
    /// `model`: the embedding model of an OpenAI-compatible endpoint (default
    /// `text-embedding-3-small`).
    pub model: Option<String>,
    /// `remote.baseUrl`: the endpoint (default `https://api.openai.com/v1`).
    pub remote_base_url: Option<String>,
    /// `remote.apiKeyEnv` (ours, as for chat providers): the variable holding its key
    /// (default `OPENAI_API_KEY`; a local server needs none).
    pub remote_api_key_env: Option<String>,
    /// `local.modelPath`: the model2vec model directory.
    pub local_model_path: Option<PathBuf>,
    /// `sync.watch` (default true): re-index when memory files change, in processes that live
    /// on (`rampart serve`).
    pub watch: bool,
    /// `store.path`: the index file (default `<data dir>/memory/<agentId>.sqlite`).
    pub store_path: Option<PathBuf>,
}

impl Default for MemorySearchConfig {
    fn default() -> Self {
        Self {
            settings: MemorySettings::default(),
            provider: EmbeddingChoice::Auto,
            model: None,
            remote_base_url: None,
            remote_api_key_env: None,
            local_model_path: None,
            watch: true,
            store_path: None,
        }
    }
}

/// A tiny reader over the table's JSON form with located errors.
struct Reader<'a, 'b> {
    source: &'a Source<'b>,
}

impl Reader<'_, '_> {
    fn err(&self, key: &str, problem: impl Into<String>) -> ModelsConfigError {
        self.source.err(key, problem.into())
    }

    fn table<'v>(
        &self,
        key: &str,
        value: &'v Value,
        allowed: &[&str],
    ) -> Result<&'v serde_json::Map<String, Value>, ModelsConfigError> {
        let table = value
            .as_object()
            .ok_or_else(|| self.err(key, format!("must be a table, found {value}")))?;
        for k in table.keys() {
            if !allowed.contains(&k.as_str()) {
                return Err(self.err(
                    &format!("{key}.{k}"),
                    format!("is not a known key. Allowed here: {}", allowed.join(", ")),
                ));
            }
        }
        Ok(table)
    }

    fn boolean(&self, key: &str, value: &Value) -> Result<bool, ModelsConfigError> {
        value
            .as_bool()
            .ok_or_else(|| self.err(key, format!("must be true or false, found {value}")))
    }

    fn string(&self, key: &str, value: &Value) -> Result<String, ModelsConfigError> {
        value
            .as_str()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .ok_or_else(|| self.err(key, format!("must be a non-empty string, found {value}")))
    }

    fn number(&self, key: &str, value: &Value, lo: f64, hi: f64) -> Result<f64, ModelsConfigError> {
        match value.as_f64() {
            Some(n) if (lo..=hi).contains(&n) => Ok(n),
            _ => Err(self.err(
                key,
                format!("must be a number from {lo} to {hi}, found {value}"),
            )),
        }
    }

    fn count(
        &self,
        key: &str,
        value: &Value,
        lo: u64,
        hi: u64,
    ) -> Result<usize, ModelsConfigError> {
        match value.as_u64() {
            Some(n) if (lo..=hi).contains(&n) => Ok(n as usize),
            _ => Err(self.err(
                key,
                format!("must be a whole number from {lo} to {hi}, found {value}"),
            )),
        }
    }
}

impl MemorySearchConfig {
    /// Reads `agents.defaults.memorySearch` from its JSON form.
    pub(super) fn parse(source: &Source<'_>, value: &Value) -> Result<Self, ModelsConfigError> {
        let r = Reader { source };
        let table = r.table(KEY, value, KEYS)?;
        let mut out = Self::default();
        let s = &mut out.settings;
        for (key, v) in table {
            let path = format!("{KEY}.{key}");
            match key.as_str() {
                "enabled" => s.enabled = r.boolean(&path, v)?,
                "provider" => {
                    out.provider = match v.as_str().map(str::trim) {
                        Some("auto") => EmbeddingChoice::Auto,
                        Some("openai") => EmbeddingChoice::OpenAi,
                        Some("local") => EmbeddingChoice::Local,
                        Some("none") => EmbeddingChoice::None,
                        _ => {
                            return Err(r.err(
                                &path,
                                format!(
                                    "must be \"auto\", \"openai\", \"local\" or \"none\", found {v}"
                                ),
                            ));
                        }
                    }
                }
                "model" => out.model = Some(r.string(&path, v)?),
                "remote" => {
                    let t = r.table(&path, v, &["baseUrl", "apiKeyEnv"])?;
                    if let Some(u) = t.get("baseUrl") {
                        out.remote_base_url = Some(r.string(&format!("{path}.baseUrl"), u)?);
                    }
                    if let Some(e) = t.get("apiKeyEnv") {
                        out.remote_api_key_env = Some(r.string(&format!("{path}.apiKeyEnv"), e)?);
                    }
                }
                "local" => {
                    let t = r.table(&path, v, &["modelPath"])?;
                    if let Some(p) = t.get("modelPath") {
                        out.local_model_path =
                            Some(PathBuf::from(r.string(&format!("{path}.modelPath"), p)?));
                    }
                }
                "sources" => {
                    let items = v.as_array().ok_or_else(|| {
                        r.err(&path, "must be an array such as [\"memory\", \"sessions\"]")
                    })?;
                    s.sources = items
                        .iter()
                        .map(|i| {
                            i.as_str().and_then(MemorySource::parse).ok_or_else(|| {
                                r.err(
                                    &path,
                                    format!("holds {i}; allowed: \"memory\", \"sessions\""),
                                )
                            })
                        })
                        .collect::<Result<_, _>>()?;
                }
                "extraPaths" => {
                    let items = v
                        .as_array()
                        .ok_or_else(|| r.err(&path, "must be an array of paths"))?;
                    s.extra_paths = items
                        .iter()
                        .map(|i| r.string(&path, i).map(PathBuf::from))
                        .collect::<Result<_, _>>()?;
                }
                "chunking" => {
                    let t = r.table(&path, v, &["tokens", "overlap"])?;
                    if let Some(n) = t.get("tokens") {
                        s.chunk_tokens = r.count(&format!("{path}.tokens"), n, 8, 100_000)?;
                    }
                    if let Some(n) = t.get("overlap") {
                        s.chunk_overlap = r.count(&format!("{path}.overlap"), n, 0, 100_000)?;
                    }
                }
                "query" => query(&r, &path, v, s)?,
                "cache" => {
                    let t = r.table(&path, v, &["enabled"])?;
                    if let Some(b) = t.get("enabled") {
                        s.cache_enabled = r.boolean(&format!("{path}.enabled"), b)?;
                    }
                }
                "sync" => {
                    let t = r.table(&path, v, &["watch", "watchDebounceMs", "onSearch"])?;
                    if let Some(b) = t.get("watch") {
                        out.watch = r.boolean(&format!("{path}.watch"), b)?;
                    }
                    if let Some(n) = t.get("watchDebounceMs") {
                        let ms = r.count(&format!("{path}.watchDebounceMs"), n, 0, 600_000)?;
                        s.watch_debounce = Duration::from_millis(ms as u64);
                    }
                    if let Some(b) = t.get("onSearch") {
                        s.sync_on_search = r.boolean(&format!("{path}.onSearch"), b)?;
                    }
                }
                "citations" => {
                    s.citations = match v.as_str() {
                        Some("on") => CitationsMode::On,
                        Some("off") => CitationsMode::Off,
                        Some("auto") => CitationsMode::Auto,
                        _ => {
                            return Err(r.err(
                                &path,
                                format!("must be \"on\", \"off\" or \"auto\", found {v}"),
                            ));
                        }
                    }
                }
                "store" => {
                    let t = r.table(&path, v, &["path"])?;
                    if let Some(p) = t.get("path") {
                        out.store_path = Some(PathBuf::from(r.string(&format!("{path}.path"), p)?));
                    }
                }
                _ => {}
            }
        }
        Ok(out)
    }
}

fn query(
    r: &Reader<'_, '_>,
    path: &str,
    v: &Value,
    s: &mut MemorySettings,
) -> Result<(), ModelsConfigError> {
    let t = r.table(path, v, &["maxResults", "minScore", "hybrid"])?;
    if let Some(n) = t.get("maxResults") {
        s.max_results = r.count(&format!("{path}.maxResults"), n, 1, 200)?;
    }
    if let Some(n) = t.get("minScore") {
        s.min_score = r.number(&format!("{path}.minScore"), n, 0.0, 1.0)?;
    }
    let Some(h) = t.get("hybrid") else {
        return Ok(());
    };
    let hp = format!("{path}.hybrid");
    let allowed = [
        "enabled",
        "vectorWeight",
        "textWeight",
        "candidateMultiplier",
        "mmr",
        "temporalDecay",
    ];
    let h = r.table(&hp, h, &allowed)?;
    if let Some(b) = h.get("enabled") {
        s.hybrid_enabled = r.boolean(&format!("{hp}.enabled"), b)?;
    }
    if let Some(n) = h.get("vectorWeight") {
        s.vector_weight = r.number(&format!("{hp}.vectorWeight"), n, 0.0, 1.0)?;
    }
    if let Some(n) = h.get("textWeight") {
        s.text_weight = r.number(&format!("{hp}.textWeight"), n, 0.0, 1.0)?;
    }
    if let Some(n) = h.get("candidateMultiplier") {
        s.candidate_multiplier = r.number(&format!("{hp}.candidateMultiplier"), n, 1.0, 20.0)?;
    }
    if let Some(m) = h.get("mmr") {
        let mp = format!("{hp}.mmr");
        let m = r.table(&mp, m, &["enabled", "lambda"])?;
        if let Some(b) = m.get("enabled") {
            s.mmr_enabled = r.boolean(&format!("{mp}.enabled"), b)?;
        }
        if let Some(n) = m.get("lambda") {
            s.mmr_lambda = r.number(&format!("{mp}.lambda"), n, 0.0, 1.0)?;
        }
    }
    if let Some(d) = h.get("temporalDecay") {
        let dp = format!("{hp}.temporalDecay");
        let d = r.table(&dp, d, &["enabled", "halfLifeDays"])?;
        if let Some(b) = d.get("enabled") {
            s.temporal_decay_enabled = r.boolean(&format!("{dp}.enabled"), b)?;
        }
        if let Some(n) = d.get("halfLifeDays") {
            s.half_life_days = r.number(&format!("{dp}.halfLifeDays"), n, 1.0, 36_500.0)?;
        }
    }
    Ok(())
}
