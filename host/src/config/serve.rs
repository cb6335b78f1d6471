//! The `[serve]` table: how `rampart serve` listens, who may call it, and how much it runs at
//! once. Read by the span-aware reader with the rest of the file, so errors are located.

use std::net::SocketAddr;
use std::time::Duration;

/// The address `rampart serve` binds when neither `--listen` nor `serve.listen` says.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8787";

/// Default of `serve.maxConcurrent`: conversations whose turns run at once.
pub const DEFAULT_MAX_CONCURRENT: usize = 16;

/// Default of `serve.maxQueue`: requests that may wait for a lane or a permit before the
/// server answers 429.
pub const DEFAULT_MAX_QUEUE: usize = 256;

/// Default of `serve.maxConnections`: open client connections at once; more wait in the
/// kernel's backlog until one closes.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// Default of `serve.sessionCacheMiB`: the session log, in MiB, the conversations kept open
/// between requests may hold between them (about three times that in memory: each tree parsed,
/// and its messages' upstream form). 32 MiB keeps about forty 200k-token conversations open, or
/// every one of the 128 the cache counts when they are small.
pub const DEFAULT_SESSION_CACHE_MIB: usize = 32;

/// Default of `serve.headerTimeoutMs`: a client has this long to send a request's headers.
pub const DEFAULT_HEADER_TIMEOUT_MS: u64 = 10_000;

/// Default of `serve.bodyTimeoutMs`: a client has this long to send a request's body.
pub const DEFAULT_BODY_TIMEOUT_MS: u64 = 60_000;

/// Default of `serve.drainTimeoutMs`: after SIGTERM, requests in flight get this long before
/// their connections are closed.
pub const DEFAULT_DRAIN_TIMEOUT_MS: u64 = 30_000;

/// Default of `serve.minAnswerTokens`: the smallest answer bound a request is sent with when
/// the client's `max_tokens` leaves no room for the prompt.
pub const DEFAULT_MIN_ANSWER_TOKENS: u64 = 4_096;

/// The `[serve]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeSettings {
    /// `listen`: the address to bind (`--listen` overrides it).
    pub listen: Option<SocketAddr>,
    /// `authToken`: when set, every request must carry it (`Authorization: Bearer`,
    /// `x-api-key` or `x-rampart-token`). Required to bind anything but loopback.
    pub auth_token: Option<String>,
    /// `maxConcurrent`: turns running at once, across conversations (default 16).
    pub max_concurrent: usize,
    /// `maxQueue`: requests waiting beyond those; one more is answered 429 with `Retry-After`
    /// (default 256).
    pub max_queue: usize,
    /// `[serve.sideRequests]`: which requests are answered without touching a conversation.
    pub side_requests: SideRequestRule,
    /// `systemPrompt`: whose system prompt goes upstream (default the client's: most clients
    /// bring their own).
    pub system_prompt: SystemPromptSource,
    /// `memoryTools`: offer `memory_search` and `memory_get` to the model and answer them in
    /// the server, for clients that declare no tools of those names (default off: a client's
    /// tool list is its own unless it opts in, here or with `x-rampart-memory: on`).
    pub memory_tools: bool,
    /// `engineTools`: offer the context engine's own tools (engine API 1.2; the lossless
    /// engine's recall tools, say) to the model and answer them in the server, hidden from the
    /// client (default on: an engine that keeps history out of the window needs them to bring
    /// it back; a client turns them off per request with `x-rampart-engine-tools: off`).
    pub engine_tools: bool,
    /// `engineCredentials`: whose key the context engine's own model calls for a conversation
    /// (compaction summaries, prepared compactions) go upstream with ([`EngineCredentials`]).
    pub engine_credentials: EngineCredentials,
    /// `allowedHosts`: host names (lowercase, no port) accepted in the `Host` header besides
    /// loopback addresses, `localhost` and the bound address; `"*"` accepts any. A foreign
    /// `Host` is how DNS rebinding lets a web page read the server's answers.
    pub allowed_hosts: Vec<String>,
    /// `allowedOrigins`: browser origins (`scheme://host[:port]`, lowercase) whose requests are
    /// served; `"*"` accepts any. Requests with any other `Origin` are refused: a web page the
    /// user visits must not spend their keys or write into their conversations.
    pub allowed_origins: Vec<String>,
    /// `maxConnections`: client connections open at once (default 1024).
    pub max_connections: usize,
    /// `sessionCacheMiB`: the session log, in MiB, the conversations kept open between requests
    /// may hold between them (default 32; 0 keeps none open). A conversation over it is read
    /// from the store on each request.
    pub session_cache_mib: usize,
    /// `headerTimeoutMs`: the time a client has to send a request's headers.
    pub header_timeout: Duration,
    /// `bodyTimeoutMs`: the time a client has to send a request's body.
    pub body_timeout: Duration,
    /// `drainTimeoutMs`: after SIGTERM, how long requests in flight may finish before every
    /// connection is closed and the server exits.
    pub drain_timeout: Duration,
    /// `[serve.store]`: where the conversations live (default: the sessions directory).
    pub store: StoreSettings,
    /// `minAnswerTokens` (default 4,096): when a client's `max_tokens` takes more than half the
    /// window, requests ask for what fits beside the prompt, never less than this (nor more
    /// than the client asked); a prompt that leaves less is compacted, or refused.
    pub min_answer_tokens: u64,
}

/// `[serve.store]`: a store every replica reaches, instead of the sessions directory of this
/// machine. `--store URL` overrides `url`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StoreSettings {
    /// `url`: `postgres://USER@HOST:PORT/DATABASE`, never with a password (refused, so it is
    /// not copied around with the file).
    pub url: Option<String>,
    /// `passwordEnv`: the environment variable holding the database password, read when the
    /// server starts (none: the database needs no password).
    pub password_env: Option<String>,
    /// `poolSize`: connections for registry and session reads and writes (default 8).
    pub pool_size: Option<usize>,
    /// `lockConnections`: connections that hold a conversation's lock, one per turn in flight
    /// (default `maxConcurrent`, so every running turn has one).
    pub lock_connections: Option<usize>,
}

/// Whose key the context engine's model calls for a conversation use (`serve.engineCredentials`).
///
/// Why the client's by default: a proxy's users bring their own keys, and the server often has
/// none; summaries sent without one were refused (401) and the compaction fell back to an
/// extract, after a second and a half of failed calls. The memory flush already went with the
/// client's key: one rule for every call made on a conversation's behalf.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EngineCredentials {
    /// `"client"`: the key the conversation's client presented on its latest request (the
    /// provider's own `apiKeyEnv` when it has one wins, as for the client's own requests).
    #[default]
    Client,
    /// `"provider"`: only the provider's `apiKeyEnv`; a client's key never pays for them.
    Provider,
    /// `"none"`: the engine may not call a model; it summarises without one (an extract).
    None,
}

/// Whose system prompt `rampart serve` sends upstream (`serve.systemPrompt`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SystemPromptSource {
    /// The client's, unchanged (Claude Code, Codex and the SDKs bring their own).
    #[default]
    Client,
    /// Rampart's, built from the workspace; the client's is dropped.
    Rampart,
    /// Rampart's, with the client's after it under its own heading.
    Merge,
}

impl Default for ServeSettings {
    fn default() -> Self {
        Self {
            listen: None,
            auth_token: None,
            max_concurrent: DEFAULT_MAX_CONCURRENT,
            max_queue: DEFAULT_MAX_QUEUE,
            side_requests: SideRequestRule::default(),
            system_prompt: SystemPromptSource::default(),
            memory_tools: false,
            engine_tools: true,
            engine_credentials: EngineCredentials::Client,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            session_cache_mib: DEFAULT_SESSION_CACHE_MIB,
            header_timeout: Duration::from_millis(DEFAULT_HEADER_TIMEOUT_MS),
            body_timeout: Duration::from_millis(DEFAULT_BODY_TIMEOUT_MS),
            drain_timeout: Duration::from_millis(DEFAULT_DRAIN_TIMEOUT_MS),
            store: StoreSettings::default(),
            min_answer_tokens: DEFAULT_MIN_ANSWER_TOKENS,
        }
    }
}

/// `[serve.sideRequests]`: the rule for side requests (see `serve::identity`). `count_tokens`
/// is always one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SideRequestRule {
    /// `enabled` (default true). Off: only `count_tokens` is a side request.
    pub enabled: bool,
    /// `probeMaxTokens` (default 1): a request with `max_tokens` at most this is a probe
    /// (Claude Code's quota check).
    pub probe_max_tokens: u64,
    /// `smallModels` (default `["haiku"]`): model names containing one of these
    /// (case-insensitive) are small; a request to one with no tools and one user message is a
    /// side request (Claude Code's title and topic calls).
    pub small_models: Vec<String>,
}

impl Default for SideRequestRule {
    fn default() -> Self {
        Self {
            enabled: true,
            probe_max_tokens: 1,
            small_models: vec!["haiku".to_owned()],
        }
    }
}

/// Why `rampart serve` refuses an address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ListenError {
    /// A non-loopback address without `serve.authToken`.
    #[error(
        "refusing to listen on {addr}: it is not a loopback address and `serve.authToken` is not \
         set, so anyone who can reach it could spend your model keys and read your \
         conversations. Set `serve.authToken` in the config, or listen on 127.0.0.1"
    )]
    OpenWithoutToken {
        /// The address asked for.
        addr: SocketAddr,
    },
}

impl ServeSettings {
    /// The address to bind: `flag` (`--listen`), else `listen`, else [`DEFAULT_LISTEN`]; a
    /// non-loopback one only with an `authToken`.
    pub fn bind_addr(&self, flag: Option<SocketAddr>) -> Result<SocketAddr, ListenError> {
        let fallback = DEFAULT_LISTEN
            .parse()
            .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 8787)));
        let addr = flag.or(self.listen).unwrap_or(fallback);
        if !addr.ip().is_loopback() && self.auth_token.is_none() {
            return Err(ListenError::OpenWithoutToken { addr });
        }
        Ok(addr)
    }
}

/// Why an `allowedHosts` entry is refused, or `None` when it is a host name `rampart serve`
/// can compare with a `Host` header (it is compared lowercase, without the port).
pub fn host_entry_problem(entry: &str) -> Option<&'static str> {
    if entry == "*" {
        return None;
    }
    if entry.is_empty() {
        return Some("an empty host name");
    }
    if entry.contains("://") || entry.contains('/') {
        return Some("a URL; give the host name alone");
    }
    if entry.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Some("a host name with spaces or control characters");
    }
    let bare = entry.trim_start_matches('[').trim_end_matches(']');
    if !entry.starts_with('[') && entry.contains(':') && bare.parse::<std::net::Ipv6Addr>().is_err()
    {
        return Some("a host name with a port; give the name alone (any port is accepted)");
    }
    None
}

/// Why an `allowedOrigins` entry is refused, or `None` when it is an origin as browsers send
/// it (`http://` or `https://`, a host, an optional port, no path).
pub fn origin_entry_problem(entry: &str) -> Option<&'static str> {
    if entry == "*" {
        return None;
    }
    let Some(rest) = entry
        .strip_prefix("http://")
        .or_else(|| entry.strip_prefix("https://"))
    else {
        return Some("not an origin starting with http:// or https://");
    };
    if rest.is_empty() {
        return Some("an origin without a host");
    }
    if rest.contains('/') {
        return Some("an origin with a path; browsers send the origin without one");
    }
    if rest.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Some("an origin with spaces or control characters");
    }
    None
}
