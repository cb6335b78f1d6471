//! The `[serve]` table: how `rampart serve` listens, who may call it, and how much it runs at
//! once. Read by the span-aware reader with the rest of the file, so errors are located.

use std::net::SocketAddr;

/// The address `rampart serve` binds when neither `--listen` nor `serve.listen` says.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8787";

/// Default of `serve.maxConcurrent`: conversations whose turns run at once.
pub const DEFAULT_MAX_CONCURRENT: usize = 16;

/// Default of `serve.maxQueue`: requests that may wait for a lane or a permit before the
/// server answers 429.
pub const DEFAULT_MAX_QUEUE: usize = 256;

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
    /// `[serve.store]`: where the conversations live (default: the sessions directory).
    pub store: StoreSettings,
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
            store: StoreSettings::default(),
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
