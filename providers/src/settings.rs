//! What a provider is built from: its table of `models.providers`, parsed and checked by the
//! host's configuration (which names the file, line and key of any mistake) and handed here as
//! plain values. Why here and not in the configuration: the providers are built from these and
//! nothing else, so a provider crate needs no configuration parser to be constructed (tests and
//! tools make them by hand).

use std::time::Duration;

use rampart_context::tokens::CountMode;

use crate::sim::OverflowWording;

/// Which wire protocol a provider speaks (`models.providers.<id>.api`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiKind {
    /// The embedded simulator (`"sim"`).
    Sim,
    /// OpenAI chat completions (`"openai-completions"`, also accepted: `"openai"`).
    OpenAiCompletions,
    /// OpenAI Responses (`"openai-responses"`, also accepted: `"responses"`): the wire that
    /// keeps reasoning items, built-in tools, namespaces and custom tools, which chat
    /// completions has no form for.
    OpenAiResponses,
    /// Anthropic messages (`"anthropic-messages"`, also accepted: `"anthropic"`).
    AnthropicMessages,
}

/// One `[models.providers.<id>]` table, parsed and checked. Every provider is constructed from
/// one of these, so a key means the same thing everywhere.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderSettings {
    /// The table key, e.g. `openai` or `local-llama`.
    pub id: String,
    /// `api`.
    pub api: ApiKind,
    /// `baseUrl`, without a trailing slash; e.g. `https://api.openai.com/v1`.
    pub base_url: Option<String>,
    /// `apiKeyEnv`: the name of the environment variable holding the key. The key itself is
    /// never read from the config file, so it cannot end up in a repository or a log.
    pub api_key_env: Option<String>,
    /// `timeoutSeconds` (default 120): one attempt's limit.
    pub timeout: Duration,
    /// `streamIdleTimeoutSeconds` (default 300): the longest a streamed answer may go without
    /// an event. Keep-alive comments do not count, so a provider that keeps the connection
    /// alive and says nothing cannot hold a run forever.
    pub stream_idle_timeout: Duration,
    /// `maxRetries` (default 3): retries of 429 and 5xx answers, with exponential back-off.
    pub max_retries: u32,
    /// `retryBaseMs` (default 500): the first back-off; doubles per retry, capped at 30 s.
    pub retry_base: Duration,
    /// The provider's `models` entries.
    pub models: Vec<ModelEntry>,
    /// `overflowWording` (sim only): whose overflow error text the simulator answers with.
    pub overflow_wording: Option<OverflowWording>,
    /// `speaks` (sim only): the API the simulator stands in for (`"anthropic-messages"` or
    /// `"openai-completions"`). Its requests then get that API's hygiene (turn validation,
    /// tool-id grammar, signed thinking) and the wire body its adapter would send is recorded,
    /// so a replay shows what that provider would receive. `None`: the generic passes only.
    pub speaks: Option<ApiKind>,
}

/// One `[[models.providers.<p>.models]]` entry.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelEntry {
    /// The provider id (the table key).
    pub provider: String,
    /// The model id.
    pub id: String,
    /// `contextWindow`: the model's whole window, in tokens.
    pub context_window: Option<u64>,
    /// `contextTokens`: the usable budget, in tokens; preferred over `context_window`.
    pub context_tokens: Option<u64>,
    /// `tokenizer`: how prompts to this model are counted; `None` picks the model's default
    /// ([`CountMode::for_model`]).
    pub tokenizer: Option<CountMode>,
    /// `maxTokens`: the cap on an answer's tokens (OpenClaw's key), sent with each request.
    pub max_tokens: Option<u64>,
}
