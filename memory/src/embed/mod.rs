//! Embedding providers: the [`Embedder`] trait, its error, and two providers.
//!
//! - [`OpenAiEmbedder`]: any OpenAI-compatible `POST {base}/embeddings` endpoint (OpenAI,
//!   llama.cpp's server, Ollama, vLLM, …).
//! - [`LocalEmbedder`]: a static model2vec model read from a directory; no network, and fast
//!   enough to embed on every sync.
//!
//! No provider at all is a supported setup: search is then keyword-only (FTS).

mod local;
mod openai;

pub use local::LocalEmbedder;
pub use openai::{OpenAiConfig, OpenAiEmbedder};

use std::path::PathBuf;

/// Something that turns texts into vectors.
///
/// Implementations must be thread-safe: the index embeds from its sync thread and from
/// searches at the same time. `embed` is blocking.
pub trait Embedder: Send + Sync {
    /// The provider's id (`"openai"`, `"local"`, `"ollama"`, …), shown in status and results.
    fn provider(&self) -> &str;
    /// The model's id.
    fn model(&self) -> &str;
    /// The vectors' length, when known before the first call (an OpenAI-compatible server
    /// only tells with its first answer).
    fn dims(&self) -> Option<usize>;
    /// What else, besides provider and model, makes two embedders give different vectors
    /// (an endpoint, a model file's digest). Cached embeddings are kept apart by it, and a
    /// change of it reindexes.
    fn provider_key(&self) -> String {
        String::new()
    }
    /// One vector per text, in order. Implementations batch as their backend needs.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
}

/// Why embedding failed. Every variant says what to do; [`EmbedError::is_quota`] tells a
/// provider that is out of quota (or rate limited) from everything else, since the user's
/// remedy differs (top up or switch, versus fix the configuration).
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The provider refused for quota or rate limit (HTTP 429, `insufficient_quota`).
    #[error(
        "embedding provider {provider} at {url} refused for quota (HTTP {status}): {message}; top up or switch embedding provider, then retry"
    )]
    Quota {
        /// The provider's id.
        provider: String,
        /// The endpoint called.
        url: String,
        /// The HTTP status (429, or another status whose body named the quota).
        status: u16,
        /// The provider's own words, shortened.
        message: String,
    },
    /// The provider refused the credentials (HTTP 401 or 403).
    #[error(
        "embedding provider {provider} at {url} refused the API key (HTTP {status}): {message}; check the key configured for this provider"
    )]
    Auth {
        /// The provider's id.
        provider: String,
        /// The endpoint called.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The provider's own words, shortened.
        message: String,
    },
    /// Any other HTTP error status.
    #[error(
        "embedding provider {provider} at {url} answered HTTP {status}: {message}; check the base URL and the model name"
    )]
    Http {
        /// The provider's id.
        provider: String,
        /// The endpoint called.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The provider's own words, shortened.
        message: String,
    },
    /// The request did not complete (connection refused, timeout, TLS).
    #[error(
        "could not reach embedding provider {provider} at {url}: {message}; check that the server is running and reachable"
    )]
    Network {
        /// The provider's id.
        provider: String,
        /// The endpoint called.
        url: String,
        /// What failed.
        message: String,
    },
    /// The answer was not what the API promises (not JSON, wrong count, no numbers).
    #[error(
        "embedding provider {provider} at {url} sent an answer this client cannot use: {message}; check that the endpoint is OpenAI-compatible"
    )]
    BadResponse {
        /// The provider's id.
        provider: String,
        /// The endpoint called.
        url: String,
        /// What was wrong with it.
        message: String,
    },
    /// A vector's length differs from the index's (the model changed behind the same name).
    #[error(
        "embedding provider {provider} returned vectors of {got} dimensions where the index has {expected}; rebuild the index (delete its database file) or restore the previous model"
    )]
    Dimensions {
        /// The provider's id.
        provider: String,
        /// The length in the index.
        expected: usize,
        /// The length returned.
        got: usize,
    },
    /// A local model could not be read or used.
    #[error("local embedding model {}: {message}; check that the directory holds a model2vec model (model.safetensors, tokenizer.json, config.json)", path.display())]
    Model {
        /// The model file or directory.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// A failure of a caller-supplied embedder, in its own words.
    #[error("embedding provider {provider} failed: {message}")]
    Other {
        /// The provider's id.
        provider: String,
        /// Its message.
        message: String,
    },
}

impl EmbedError {
    /// Whether the provider is out of quota or rate limited: a typed [`EmbedError::Quota`],
    /// or another error whose text names a quota or HTTP 429 (for embedders that only give
    /// text).
    pub fn is_quota(&self) -> bool {
        match self {
            Self::Quota { .. } => true,
            Self::Other { message, .. } => text_mentions_quota(message),
            _ => false,
        }
    }

    /// A short lower-case name for structured logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Quota { .. } => "quota",
            Self::Auth { .. } => "auth",
            Self::Http { .. } => "http",
            Self::Network { .. } => "network",
            Self::BadResponse { .. } => "bad_response",
            Self::Dimensions { .. } => "dimensions",
            Self::Model { .. } => "model",
            Self::Other { .. } => "other",
        }
    }
}

/// Whether an error text is about a quota or rate limit: it mentions `quota`, or `429` as a
/// number of its own. Why "of its own": the text of an HTTP error names its URL, and a port
/// such as `34291` holds the digits `429` (a loopback provider on such a port was reported as
/// out of quota).
pub fn text_mentions_quota(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    if lower.contains("quota") {
        return true;
    }
    let bytes = lower.as_bytes();
    lower.match_indices("429").any(|(at, _)| {
        let before = at.checked_sub(1).map(|i| bytes[i]);
        let after = bytes.get(at + 3).copied();
        !before.is_some_and(|b| b.is_ascii_digit()) && !after.is_some_and(|b| b.is_ascii_digit())
    })
}
