//! An OpenAI-compatible embeddings endpoint: `POST {base_url}/embeddings` with
//! `{"model", "input": [...]}`, answered by `{"data": [{"embedding": [...], "index": n}]}`.
//!
//! Blocking (reqwest's blocking client): call it from a plain thread, or from
//! `spawn_blocking` inside an async runtime. The key is optional because local servers
//! (llama.cpp, Ollama, vLLM) need none.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{EmbedError, Embedder};

/// How to reach the endpoint. `Default` is OpenAI's `text-embedding-3-small`.
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// The provider's id as shown to users (`"openai"`, `"ollama"`, …).
    pub provider: String,
    /// The API base, without `/embeddings` (`https://api.openai.com/v1`).
    pub base_url: String,
    /// Sent as `Authorization: Bearer …` when present.
    pub api_key: Option<String>,
    /// The model name sent in each request.
    pub model: String,
    /// The vectors' length, if known; otherwise learnt from the first answer.
    pub dims: Option<usize>,
    /// Most texts in one request.
    pub batch_size: usize,
    /// Most characters in one request (about 4 a token), so a batch stays under the
    /// provider's per-request token limit.
    pub batch_max_chars: usize,
    /// Time allowed for one request.
    pub timeout: Duration,
    /// Retries after a rate limit (429 without `insufficient_quota`), a 5xx or a network
    /// failure.
    pub max_retries: u32,
    /// Wait before the first retry; doubled for each next one.
    pub retry_backoff: Duration,
    /// Extra request headers (an organisation id, a proxy's key).
    pub headers: Vec<(String, String)>,
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        Self {
            provider: "openai".to_string(),
            base_url: "https://api.openai.com/v1".to_string(),
            api_key: None,
            model: "text-embedding-3-small".to_string(),
            dims: None,
            batch_size: 64,
            batch_max_chars: 32_000,
            timeout: Duration::from_secs(60),
            max_retries: 2,
            retry_backoff: Duration::from_millis(500),
            headers: Vec::new(),
        }
    }
}

/// An [`Embedder`] over an OpenAI-compatible endpoint.
pub struct OpenAiEmbedder {
    config: OpenAiConfig,
    url: String,
    client: reqwest::blocking::Client,
    learnt_dims: AtomicUsize,
    key: String,
}

impl std::fmt::Debug for OpenAiEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key stays out of logs.
        f.debug_struct("OpenAiEmbedder")
            .field("provider", &self.config.provider)
            .field("url", &self.url)
            .field("model", &self.config.model)
            .finish()
    }
}

/// What one attempt came to.
enum Attempt {
    Done(Vec<Vec<f32>>),
    Retry(EmbedError),
    Fail(EmbedError),
}

impl OpenAiEmbedder {
    /// An embedder for `config`. Nothing is sent until the first `embed`.
    pub fn new(config: OpenAiConfig) -> Result<Self, EmbedError> {
        let url = format!("{}/embeddings", config.base_url.trim_end_matches('/'));
        let client = reqwest::blocking::Client::builder()
            .timeout(config.timeout)
            .build()
            .map_err(|e| EmbedError::Network {
                provider: config.provider.clone(),
                url: url.clone(),
                message: format!("could not set up the HTTP client: {e}"),
            })?;
        let mut hasher = Sha256::new();
        for part in [&config.provider, &url, &config.model] {
            hasher.update(part.as_bytes());
            hasher.update([0]);
        }
        let mut header_names: Vec<&str> = config.headers.iter().map(|(k, _)| k.as_str()).collect();
        header_names.sort_unstable();
        for name in header_names {
            hasher.update(name.to_ascii_lowercase().as_bytes());
            hasher.update([0]);
        }
        let digest = hasher.finalize();
        let key = crate::chunking::hex(&digest[..8]);
        Ok(Self {
            learnt_dims: AtomicUsize::new(config.dims.unwrap_or(0)),
            config,
            url,
            client,
            key,
        })
    }

    /// The endpoint this embedder posts to.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn request(&self, texts: &[&str]) -> Attempt {
        let provider = &self.config.provider;
        let mut request = self
            .client
            .post(&self.url)
            .json(&json!({ "model": self.config.model, "input": texts }));
        if let Some(key) = self.config.api_key.as_deref().filter(|k| !k.is_empty()) {
            request = request.bearer_auth(key);
        }
        for (name, value) in &self.config.headers {
            request = request.header(name, value);
        }
        let response = match request.send() {
            Ok(r) => r,
            Err(e) => {
                return Attempt::Retry(EmbedError::Network {
                    provider: provider.clone(),
                    url: self.url.clone(),
                    message: error_chain(&e),
                });
            }
        };
        let status = response.status().as_u16();
        let body = match response.text() {
            Ok(b) => b,
            Err(e) => {
                return Attempt::Retry(EmbedError::Network {
                    provider: provider.clone(),
                    url: self.url.clone(),
                    message: format!("reading the answer failed: {}", error_chain(&e)),
                });
            }
        };
        if !(200..300).contains(&status) {
            return self.http_failure(status, &body);
        }
        match parse_embeddings(&body, texts.len()) {
            Ok(vectors) => Attempt::Done(vectors),
            Err(message) => Attempt::Fail(EmbedError::BadResponse {
                provider: provider.clone(),
                url: self.url.clone(),
                message,
            }),
        }
    }

    fn http_failure(&self, status: u16, body: &str) -> Attempt {
        let provider = self.config.provider.clone();
        let url = self.url.clone();
        let message = error_message(body);
        let lower = body.to_ascii_lowercase();
        if status == 429 || lower.contains("insufficient_quota") {
            let error = EmbedError::Quota {
                provider,
                url,
                status,
                message,
            };
            // Exhausted quota does not come back by waiting; a rate limit does.
            return if lower.contains("insufficient_quota") {
                Attempt::Fail(error)
            } else {
                Attempt::Retry(error)
            };
        }
        if status == 401 || status == 403 {
            return Attempt::Fail(EmbedError::Auth {
                provider,
                url,
                status,
                message,
            });
        }
        let error = EmbedError::Http {
            provider,
            url,
            status,
            message,
        };
        if status >= 500 {
            Attempt::Retry(error)
        } else {
            Attempt::Fail(error)
        }
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut wait = self.config.retry_backoff;
        let mut attempt = 0;
        loop {
            match self.request(texts) {
                Attempt::Done(vectors) => return Ok(vectors),
                Attempt::Fail(e) => return Err(e),
                Attempt::Retry(e) => {
                    if attempt >= self.config.max_retries {
                        return Err(e);
                    }
                    tracing::debug!(provider = %self.config.provider, error = %e, attempt, "embedding request failed, retrying");
                    thread::sleep(wait);
                    wait = wait.saturating_mul(2);
                    attempt += 1;
                }
            }
        }
    }
}

impl Embedder for OpenAiEmbedder {
    fn provider(&self) -> &str {
        &self.config.provider
    }

    fn model(&self) -> &str {
        &self.config.model
    }

    fn dims(&self) -> Option<usize> {
        match self.learnt_dims.load(Ordering::Relaxed) {
            0 => None,
            n => Some(n),
        }
    }

    fn provider_key(&self) -> String {
        self.key.clone()
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out = Vec::with_capacity(texts.len());
        let max_count = self.config.batch_size.max(1);
        let max_chars = self.config.batch_max_chars.max(1);
        let mut start = 0;
        while start < texts.len() {
            let mut end = start;
            let mut chars = 0;
            while end < texts.len() && end - start < max_count {
                let len = texts[end].len();
                if end > start && chars + len > max_chars {
                    break;
                }
                chars += len;
                end += 1;
            }
            let vectors = self.embed_batch(&texts[start..end])?;
            for v in &vectors {
                self.check_dims(v.len())?;
            }
            out.extend(vectors);
            start = end;
        }
        Ok(out)
    }
}

impl OpenAiEmbedder {
    fn check_dims(&self, got: usize) -> Result<(), EmbedError> {
        match self
            .learnt_dims
            .compare_exchange(0, got, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => Ok(()),
            Err(expected) if expected == got => Ok(()),
            Err(expected) => Err(EmbedError::Dimensions {
                provider: self.config.provider.clone(),
                expected,
                got,
            }),
        }
    }
}

/// The vectors of an answer, in input order (by `index` when the server gives it).
fn parse_embeddings(body: &str, expected: usize) -> Result<Vec<Vec<f32>>, String> {
    let value: Value =
        serde_json::from_str(body).map_err(|e| format!("the answer is not JSON ({e})"))?;
    let data = value
        .get("data")
        .and_then(Value::as_array)
        .ok_or("the answer has no `data` array")?;
    if data.len() != expected {
        return Err(format!(
            "{} vectors came back for {expected} texts",
            data.len()
        ));
    }
    let mut slots: Vec<Option<Vec<f32>>> = vec![None; expected];
    for (position, item) in data.iter().enumerate() {
        let index = match item.get("index").and_then(Value::as_u64) {
            Some(i) => usize::try_from(i).unwrap_or(usize::MAX),
            None => position,
        };
        let numbers = item
            .get("embedding")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("item {position} has no `embedding` array"))?;
        let vector = numbers
            .iter()
            .map(|n| n.as_f64().map(|x| x as f32))
            .collect::<Option<Vec<f32>>>()
            .ok_or_else(|| format!("item {position} has a value that is not a number"))?;
        let slot = slots
            .get_mut(index)
            .ok_or_else(|| format!("item {position} has index {index}, past the input"))?;
        *slot = Some(vector);
    }
    slots
        .into_iter()
        .enumerate()
        .map(|(i, v)| v.ok_or_else(|| format!("no vector for input {i}")))
        .collect()
}

/// The provider's message from an error body (`error.message`), else the body, shortened.
fn error_message(body: &str) -> String {
    let from_json = serde_json::from_str::<Value>(body).ok().and_then(|v| {
        let error = v.get("error")?;
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .or_else(|| error.as_str())?;
        let code = error
            .get("code")
            .and_then(Value::as_str)
            .or_else(|| error.get("type").and_then(Value::as_str));
        Some(match code {
            Some(code) if !message.contains(code) => format!("{message} ({code})"),
            _ => message.to_string(),
        })
    });
    let text = from_json.unwrap_or_else(|| body.trim().to_string());
    if text.chars().count() > 300 {
        let short: String = text.chars().take(300).collect();
        format!("{short}…")
    } else if text.is_empty() {
        "(empty body)".to_string()
    } else {
        text
    }
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
