//! Which conversation a request belongs to, as far as the client says: a pure function of the
//! request's headers and its parsed body. History matching ([`super::history`]) then decides,
//! within what this names, which stored branch the request continues.
//!
//! The client's own session id, first found in this order:
//! 1. `x-rampart-session` (any client that wants to say it explicitly);
//! 2. Claude Code's `X-Claude-Code-Session-Id` header (sent since v2.1.86), else the
//!    `session_id` inside its body's `metadata.user_id`, in either shape: the legacy
//!    `user_<hash>_account_<uuid>_session_<uuid>`, or a JSON-encoded object with `session_id`;
//! 3. the Codex CLI's `session-id` header (older versions: `session_id`), with its `thread-id`
//!    (a subagent shares its root's session id and has a thread of its own);
//! 4. `prompt_cache_key`, else `user`, in an OpenAI body.
//!
//! Side requests never touch a conversation: `count_tokens`, and what the configurable
//! [`SideRequestRule`] recognises, by the request's shape rather than its model: Claude Code's
//! quota probe with `max_tokens: 1`; its one-shot calls (no tools, one user message) that ask
//! for a JSON-schema answer, as Claude Code 2.1's session title is asked for on the main model;
//! and older versions' title and topic calls on a small model (no tools, one user message).

use axum::http::HeaderMap;
use serde_json::Value;

/// The configurable rule (`[serve.sideRequests]`), read with the rest of the config.
pub use crate::config::serve::SideRequestRule;

/// Longest client id kept as written in a registry key; longer ones are hashed.
pub const MAX_CLIENT_ID_CHARS: usize = 128;

/// The client's session, as the request names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientSession {
    /// `x-rampart-session`.
    Explicit(String),
    /// Claude Code's session id (header, or `metadata.user_id`).
    ClaudeCode {
        /// The session uuid.
        session: String,
        /// Where it was found.
        source: ClaudeCodeSource,
    },
    /// The Codex CLI's `session-id`, with the `thread-id` that tells a subagent from its root.
    Codex {
        /// The session id.
        session: String,
        /// The thread, when the client sent one.
        thread: Option<String>,
    },
    /// An OpenAI body's `prompt_cache_key` or `user`.
    OpenAi {
        /// The value.
        key: String,
        /// Which field it came from.
        field: OpenAiField,
    },
}

/// Where Claude Code's session id was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaudeCodeSource {
    /// The `X-Claude-Code-Session-Id` header.
    Header,
    /// `metadata.user_id`, legacy `user_…_account_…_session_<uuid>`.
    LegacyUserId,
    /// `metadata.user_id` holding a JSON-encoded object with `session_id`.
    JsonUserId,
}

/// The OpenAI body field an id came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenAiField {
    /// `prompt_cache_key`.
    PromptCacheKey,
    /// `user`.
    User,
}

impl ClientSession {
    /// The registry key of the conversation this id names (its root; children get their own
    /// keys under it). Ids that are long or hold unusual characters are hashed, so a key stays
    /// readable and bounded.
    pub fn root_key(&self) -> String {
        match self {
            Self::Explicit(id) => format!("serve:rampart:{}", key_part(id)),
            Self::ClaudeCode { session, .. } => format!("serve:claude-code:{}", key_part(session)),
            Self::Codex { session, .. } => format!("serve:codex:{}", key_part(session)),
            Self::OpenAi {
                key,
                field: OpenAiField::PromptCacheKey,
            } => format!("serve:openai:{}", key_part(key)),
            Self::OpenAi {
                key,
                field: OpenAiField::User,
            } => format!("serve:openai-user:{}", key_part(key)),
        }
    }

    /// The Codex thread, when there is one: a thread other than the root's is a subagent.
    pub fn thread(&self) -> Option<&str> {
        match self {
            Self::Codex { thread, .. } => thread.as_deref(),
            _ => None,
        }
    }

    /// The session id itself (for Codex: the session, not the thread).
    pub fn id(&self) -> &str {
        match self {
            Self::Explicit(id) => id,
            Self::ClaudeCode { session, .. } | Self::Codex { session, .. } => session,
            Self::OpenAi { key, .. } => key,
        }
    }
}

/// `id` as part of a registry key: kept when short and plain, else `h-` and a hash.
fn key_part(id: &str) -> String {
    let plain = id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if plain && !id.is_empty() && id.chars().count() <= MAX_CLIENT_ID_CHARS {
        id.to_ascii_lowercase()
    } else {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(id.as_bytes());
        let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        format!("h-{hex}")
    }
}

/// Which endpoint a request came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `POST /v1/chat/completions`.
    ChatCompletions,
    /// `POST /v1/messages`.
    Messages,
    /// `POST /v1/responses` (its body read as the chat request it means).
    Responses,
    /// `POST /v1/messages/count_tokens`.
    CountTokens,
}

/// Why a request was taken as a side request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SideReason {
    /// `count_tokens`: no model call, no conversation.
    CountTokens,
    /// `max_tokens` at or below the probe limit (Claude Code's quota check sends 1).
    QuotaProbe {
        /// The request's `max_tokens`.
        max_tokens: u64,
    },
    /// A small model, no tools, a single user message (older Claude Code's title and topic
    /// calls, on haiku).
    SmallModelOneShot {
        /// The model the request named.
        model: String,
    },
    /// No tools, a single user message, and an answer constrained to a JSON schema
    /// (`output_config.format`): Claude Code 2.1's session title call, sent on the main model
    /// with the main `max_tokens`, so neither tells it from the session's first request. A
    /// coding agent's real turn always declares its tools.
    SchemaOneShot {
        /// The model the request named.
        model: String,
    },
}

impl SideRequestRule {
    /// Whether `body`, sent to `endpoint`, is a side request, and why.
    pub fn side(&self, endpoint: Endpoint, body: &Value) -> Option<SideReason> {
        if endpoint == Endpoint::CountTokens {
            return Some(SideReason::CountTokens);
        }
        if !self.enabled {
            return None;
        }
        let max_tokens = ["max_tokens", "max_completion_tokens"]
            .iter()
            .find_map(|k| body.get(*k).and_then(Value::as_u64));
        if let Some(max_tokens) = max_tokens
            && max_tokens <= self.probe_max_tokens
        {
            return Some(SideReason::QuotaProbe { max_tokens });
        }
        let model = body.get("model").and_then(Value::as_str).unwrap_or("");
        let lower = model.to_ascii_lowercase();
        let small = self
            .small_models
            .iter()
            .any(|m| !m.is_empty() && lower.contains(&m.to_ascii_lowercase()));
        let no_tools = body
            .get("tools")
            .is_none_or(|t| t.as_array().is_none_or(Vec::is_empty));
        let messages = body.get("messages").and_then(Value::as_array);
        let one_user = messages.is_some_and(|m| {
            let conversational: Vec<&Value> = m
                .iter()
                .filter(|m| !matches!(role(m), Some("system" | "developer")))
                .collect();
            conversational.len() == 1 && role(conversational[0]) == Some("user")
        });
        if !(no_tools && one_user) {
            return None;
        }
        if asks_for_json_schema(body) {
            return Some(SideReason::SchemaOneShot {
                model: model.to_owned(),
            });
        }
        small.then(|| SideReason::SmallModelOneShot {
            model: model.to_owned(),
        })
    }
}

/// Whether an Anthropic body constrains its answer to a JSON schema: `output_config.format`
/// (or the beta's top-level `output_format`) of type `json_schema`. `output_config` alone is
/// not enough: Claude Code's real turns carry it too, for `effort`.
fn asks_for_json_schema(body: &Value) -> bool {
    let format = body
        .get("output_config")
        .and_then(|c| c.get("format"))
        .or_else(|| body.get("output_format"));
    format.and_then(|f| f.get("type")).and_then(Value::as_str) == Some("json_schema")
}

fn role(message: &Value) -> Option<&str> {
    message.get("role").and_then(Value::as_str)
}

/// What a request is, for conversation purposes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// A side request: answered, never recorded in a conversation.
    Side(SideReason),
    /// Part of a conversation; `None` when the client named no session (history decides alone).
    Conversation(Option<ClientSession>),
}

/// Which conversation the request belongs to, as far as its headers and body say.
pub fn identify(
    endpoint: Endpoint,
    headers: &HeaderMap,
    body: &Value,
    rule: &SideRequestRule,
) -> Identity {
    if let Some(reason) = rule.side(endpoint, body) {
        return Identity::Side(reason);
    }
    Identity::Conversation(client_session(headers, body))
}

/// The client's session id, in the order of the module documentation.
pub fn client_session(headers: &HeaderMap, body: &Value) -> Option<ClientSession> {
    if let Some(id) = header(headers, "x-rampart-session") {
        return Some(ClientSession::Explicit(id));
    }
    if let Some(session) = header(headers, "x-claude-code-session-id") {
        return Some(ClientSession::ClaudeCode {
            session,
            source: ClaudeCodeSource::Header,
        });
    }
    if let Some(user_id) = body
        .get("metadata")
        .and_then(|m| m.get("user_id"))
        .and_then(Value::as_str)
        && let Some((session, source)) = claude_code_user_id_session(user_id)
    {
        return Some(ClientSession::ClaudeCode { session, source });
    }
    if let Some(session) = header(headers, "session-id").or_else(|| header(headers, "session_id")) {
        let thread = header(headers, "thread-id").or_else(|| header(headers, "thread_id"));
        return Some(ClientSession::Codex { session, thread });
    }
    for (name, field) in [
        ("prompt_cache_key", OpenAiField::PromptCacheKey),
        ("user", OpenAiField::User),
    ] {
        if let Some(key) = body
            .get(name)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|k| !k.is_empty())
        {
            return Some(ClientSession::OpenAi {
                key: key.to_owned(),
                field,
            });
        }
    }
    None
}

/// The session id inside Claude Code's `metadata.user_id`, in either of its shapes.
pub fn claude_code_user_id_session(user_id: &str) -> Option<(String, ClaudeCodeSource)> {
    let trimmed = user_id.trim();
    if trimmed.starts_with('{') {
        let parsed: Value = serde_json::from_str(trimmed).ok()?;
        let session = parsed
            .get("session_id")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())?;
        return Some((session.to_owned(), ClaudeCodeSource::JsonUserId));
    }
    let (_, session) = trimmed.rsplit_once("_session_")?;
    let session = session.trim();
    (!session.is_empty()).then(|| (session.to_owned(), ClaudeCodeSource::LegacyUserId))
}

/// A header's value, trimmed; `None` when absent, empty or not text.
fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "identity_tests.rs"]
mod tests;
