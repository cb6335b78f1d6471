//! Model providers: the one place a request leaves the host.
//!
//! Every provider takes the same [`ModelRequest`] (pi messages after the hygiene choke point)
//! and answers with a pi assistant message plus the provider's usage, or a typed
//! [`ProviderError`]. The classification matters more than the text: the run loop compacts on
//! [`ProviderErrorKind::ContextOverflow`], retries only [`ProviderErrorKind::Transient`] and
//! [`ProviderErrorKind::RateLimited`], and stops with a clear message on everything else. A
//! rate limit that mentions tokens ("tokens per minute") is never an overflow: compacting would
//! not help and would destroy history for nothing.
//!
//! - [`sim`]: the embedded simulator, the default model. No network.
//! - [`openai`]: chat completions (`/v1/chat/completions`), streaming with usage; any
//!   OpenAI-compatible server (llama.cpp, vLLM, Ollama) through `baseUrl`.
//! - [`responses`]: OpenAI Responses (`/v1/responses`), streaming; keeps reasoning items,
//!   built-in and custom tools end to end for a Responses client (Codex).
//! - [`anthropic`]: the messages API (`/v1/messages`), streaming.

#![warn(missing_docs)]

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use rampart_engine_api::AgentMessage;

use rampart_message::AssistantMessage;
use rampart_message::wire::{MessageList, SharedMessage};

pub mod anthropic;
pub mod client_fields;
pub mod http;
pub mod openai;
pub mod responses;
pub mod settings;
pub mod sim;
pub mod splice;
pub mod text;
pub mod unsent;

pub use client_fields::{ClientFields, FieldsWire};
pub use settings::{ApiKind, ModelEntry, ProviderSettings};
pub use unsent::UnsentSink;

/// `text` as a clause to go on with: without its trailing full stop and spaces (a provider's
/// message quoted inside a sentence of ours).
fn clause(text: &str) -> &str {
    text.trim_end().trim_end_matches('.')
}

/// Whether a message goes to the model at all. pi's `!!` shell runs are recorded with
/// `excludeFromContext: true`: the user ran them for themselves, and the model must not see
/// them. Both wire converters skip them here, in one place.
///
/// Assistant turns that ended in an error or were aborted are left out too, as pi's adapters
/// do: their tool calls never ran, the pairing repair gives them no results, and a provider
/// would reject the unanswered calls with a 400.
pub fn sent_to_model(message: &rampart_engine_api::AgentMessage) -> bool {
    use rampart_engine_api::AgentMessage;
    use rampart_message::StopReason;
    match message {
        AgentMessage::BashExecution(b) => b.exclude_from_context != Some(true),
        AgentMessage::Assistant(a) => {
            !matches!(a.stop_reason, StopReason::Error | StopReason::Aborted)
        }
        _ => true,
    }
}

/// Whether a provider speaking `wire` (pi's `api` name, e.g. `anthropic-messages`) sends
/// `message`: every message [`sent_to_model`] lets through, except an opaque message
/// ([`rampart_message::opaque`]) of another wire, which that wire has no form for, and a
/// malformed one, which no wire can place. Why not in [`sent_to_model`]: that one also says
/// which stored messages a client re-sends (serve's history matching), and a client re-sends
/// its opaque messages whichever upstream serves it.
pub fn sent_on(message: &AgentMessage, wire: &str) -> bool {
    if message.role() == rampart_message::opaque::OPAQUE_ROLE {
        return rampart_message::opaque::as_opaque(message).is_some_and(|o| o.wire == wire);
    }
    sent_to_model(message)
}

/// Reports to the request's [`Forwarded::unsent`] the opaque messages a provider speaking
/// `wire` leaves out of it ([`sent_on`]). Each provider calls it once per request it sends.
pub fn report_unsent(request: &ModelRequest, wire: &str) {
    let Some(sink) = &request.forwarded.unsent else {
        return;
    };
    let left_out = request
        .messages
        .iter()
        .filter(|m| m.role() == rampart_message::opaque::OPAQUE_ROLE && !sent_on(m, wire))
        .count();
    sink.left_out(wire, left_out as u64);
}

/// The messages of `messages` that [`sent_to_model`] lets through: what every wire adapter
/// sends, so the simulator counts what a real provider would receive and `--requests-out`
/// records it (an errored turn's unanswered tool call used to appear there, and counted in the
/// simulated prompt). The same allocations: a token memo keyed by message stays warm.
pub fn wire_messages(messages: &[SharedMessage]) -> std::borrow::Cow<'_, [SharedMessage]> {
    if messages.iter().all(|m| sent_to_model(m)) {
        return std::borrow::Cow::Borrowed(messages);
    }
    std::borrow::Cow::Owned(
        messages
            .iter()
            .filter(|m| sent_to_model(m))
            .cloned()
            .collect(),
    )
}

/// [`wire_messages`] as a list: the request's own list (a shared handle, no copy) when every
/// message is sent, the filtered copy otherwise.
pub fn wire_list(messages: &MessageList) -> MessageList {
    match wire_messages(messages) {
        std::borrow::Cow::Borrowed(_) => messages.clone(),
        std::borrow::Cow::Owned(sent) => sent.into(),
    }
}

/// One request to a model: what the run loop hands a provider after hygiene, assemble and the
/// precheck. Providers translate it to their wire format and never change the messages' meaning.
#[derive(Debug, Clone, Default)]
pub struct ModelRequest {
    /// The provider's model id (the part after `provider/`).
    pub model: String,
    /// The system prompt, with the engine's `systemPromptAddition` already placed (right after
    /// the builder's cache marker, or first when there is none). It may hold the marker
    /// ([`rampart_prompt::CACHE_BOUNDARY`]): each provider sends it through
    /// [`text::wire_system`], so no model sees it.
    pub system: Option<String>,
    /// The conversation in pi's message format: the run loop's list itself (a shared
    /// handle), so handing it to a provider, recording it and counting it copy nothing.
    pub messages: MessageList,
    /// An upper bound on the answer's tokens; `None` lets the provider pick.
    pub max_tokens: Option<u64>,
    /// When the caller stops waiting (a compaction's safety timeout). The request, its retries
    /// and its back-off all end by then, so a cancelled compaction leaves no request running.
    pub deadline: Option<std::time::Instant>,
    /// What a client of `rampart serve` sent that goes upstream with the managed context: its
    /// tools and its key. Empty for the host's own requests.
    pub forwarded: Forwarded,
}

/// What a proxied client's request carries upstream besides the messages (`rampart serve`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Forwarded {
    /// The tools the client declared; each provider writes them in its own wire form.
    pub tools: Vec<ToolSpec>,
    /// The client's own key, used when the provider has no `apiKeyEnv` of its own.
    pub credential: Option<ClientCredential>,
    /// Where the pieces of a streamed answer go as they arrive, for a client that streams.
    pub deltas: Option<DeltaSink>,
    /// Mark the managed prompt's prefix for the provider's prompt cache (Anthropic: a
    /// `cache_control` breakpoint on the system prompt and on the last message).
    pub prompt_cache: bool,
    /// Where the client put its own breakpoints; used instead of the two above when any of
    /// them still points into the managed prompt.
    pub client_breakpoints: ClientBreakpoints,
    /// The client's headers that may go upstream (lower-case names, repeated values joined
    /// by `, `), all but [`never_forwarded`] ones. A provider sends all of them when the client
    /// speaks its family's API ([`Forwarded::passthrough`]), else only the
    /// [`PASSTHROUGH_HEADERS`] of its own family: Claude Code's betas (and the OAuth beta its
    /// subscription logins need) must reach Anthropic, or features the body uses are refused.
    pub headers: Vec<(String, String)>,
    /// The client's top-level request fields the engine does not manage (`temperature`,
    /// `thinking`, `reasoning`, …); each provider writes them into its body
    /// ([`ClientFields::merge`]). `None` for the host's own requests.
    pub client_fields: Option<ClientFields>,
    /// The query of the client's request path (Claude Code's `beta=true`), sent to an
    /// upstream of the client's API family ([`Forwarded::upstream_url`]).
    pub query: Option<String>,
    /// Where a provider reports the opaque messages it could not send ([`report_unsent`]);
    /// `rampart serve` counts and warns about them per conversation. `None`: nobody asks.
    pub unsent: Option<UnsentSink>,
    /// The client's system prompt as it wrote it, written so by an upstream of its wire while
    /// the system prompt is still the text read from it.
    pub client_system: Option<ClientSystem>,
}

/// A client's system prompt as it wrote it, and the text Rampart read from it. Why both: the
/// engine and the configured prompt work on text, and a prompt they did not change goes back
/// to the client's wire as the client wrote it (issue 25): an Anthropic client's `system`
/// blocks (Claude Code sends three, two with `cache_control`) with their breakpoints where the
/// client put them, a Responses client's `instructions` and the developer messages that open
/// its `input` (Codex sends its instructions so). A prompt they changed (an engine's
/// addition, `serve.systemPrompt` other than `client`) is written from the text.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientSystem {
    /// The text the conversation's system prompt was read as.
    pub text: String,
    /// How the client wrote it.
    pub form: SystemForm,
}

/// How a client wrote its system prompt ([`ClientSystem`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SystemForm {
    /// The client's wire: only an upstream of the same wire writes the prompt so.
    pub wire: FieldsWire,
    /// Anthropic: the `system` blocks, verbatim. Responses: the `developer` (or `system`)
    /// message items `input` opened with, verbatim, which go before the conversation's items.
    pub blocks: Vec<serde_json::Value>,
    /// Responses: the request's `instructions` as sent (`None`: it had none).
    pub instructions: Option<serde_json::Value>,
}

impl ClientSystem {
    /// How the client wrote the prompt, when an upstream of `wire` writes `system` (the system
    /// prompt a request carries) and that is still the text read from it.
    pub fn form_for(&self, wire: FieldsWire, system: Option<&str>) -> Option<&SystemForm> {
        (self.form.wire == wire && system == Some(self.text.as_str())).then_some(&self.form)
    }

    /// How many `cache_control` breakpoints the blocks carry.
    pub fn breakpoints(&self) -> usize {
        self.form
            .blocks
            .iter()
            .filter(|b| b.get("cache_control").is_some())
            .count()
    }
}

/// The client headers `rampart serve` passes to an upstream of another family than the
/// client's API (lower case): the ones that upstream's features need.
pub const PASSTHROUGH_HEADERS: &[&str] =
    &["anthropic-beta", "openai-organization", "openai-project"];

/// Whether a client header is never sent upstream, whatever the family: the transport's own
/// and hop-by-hop headers (the HTTP client writes its own), the client's credentials (its key
/// travels as [`ClientCredential`], under the existing key rule; serve's token stays with
/// serve), the body's framing and version (the provider writes the body, so it names them),
/// cookies, and proxy headers a client could use to pose as another origin.
pub fn never_forwarded(name: &str) -> bool {
    const NAMES: &[&str] = &[
        "host",
        "content-length",
        "content-type",
        "content-encoding",
        "transfer-encoding",
        "accept-encoding",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
        "authorization",
        "x-api-key",
        "cookie",
        "anthropic-version",
        "forwarded",
        "via",
        "x-real-ip",
        "origin",
        "referer",
    ];
    const PREFIXES: &[&str] = &["proxy-", "x-forwarded-", "x-rampart-"];
    NAMES.contains(&name) || PREFIXES.iter().any(|p| name.starts_with(p))
}

impl Forwarded {
    /// `url` with the client's query added when the upstream speaks the client's API family
    /// (after the provider's own query, if its URL has one).
    pub fn upstream_url<'a>(&self, url: &'a str, upstream: FieldsWire) -> Cow<'a, str> {
        let same = self
            .client_fields
            .as_ref()
            .is_some_and(|f| f.wire.family() == upstream.family());
        match self.query.as_deref().filter(|q| same && !q.is_empty()) {
            Some(q) if url.contains('?') => Cow::Owned(format!("{url}&{q}")),
            Some(q) => Cow::Owned(format!("{url}?{q}")),
            None => Cow::Borrowed(url),
        }
    }

    /// The client headers to send to an `upstream`-wire provider: every forwarded one when the
    /// client speaks the same family's API (Responses counts as OpenAI), else only the
    /// [`PASSTHROUGH_HEADERS`] named for the upstream's family.
    pub fn passthrough(&self, upstream: FieldsWire) -> impl Iterator<Item = (&str, &str)> + '_ {
        let family = match upstream {
            FieldsWire::Anthropic => "anthropic-",
            FieldsWire::Chat | FieldsWire::Responses => "openai-",
        };
        let same = self
            .client_fields
            .as_ref()
            .is_some_and(|f| f.wire.family() == upstream.family());
        self.headers
            .iter()
            .filter(move |(name, _)| {
                same || (PASSTHROUGH_HEADERS.contains(&name.as_str()) && name.starts_with(family))
            })
            .map(|(name, value)| (name.as_str(), value.as_str()))
    }
}

/// A client's prompt-cache breakpoints (Anthropic `cache_control`), as the managed prompt can
/// still honour them: on the system prompt, and on the messages the predicate recognises. The
/// predicate compares by content, because the managed prompt is the stored conversation after
/// the engine's work, not the client's list (a compacted message has no breakpoint left).
#[derive(Clone, Default)]
pub struct ClientBreakpoints {
    /// The client marked its system prompt.
    pub system: bool,
    /// Whether a managed message is one the client marked; `None`: it marked none.
    pub marks: Option<BreakpointMatcher>,
}

/// Whether a managed message is one a client marked ([`ClientBreakpoints::marks`]).
pub type BreakpointMatcher = Arc<dyn Fn(&AgentMessage) -> bool + Send + Sync>;

impl ClientBreakpoints {
    /// Whether the client set any breakpoint.
    pub fn any(&self) -> bool {
        self.system || self.marks.is_some()
    }
}

impl std::fmt::Debug for ClientBreakpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBreakpoints")
            .field("system", &self.system)
            .field("marks", &self.marks.is_some())
            .finish()
    }
}

impl PartialEq for ClientBreakpoints {
    fn eq(&self, other: &Self) -> bool {
        self.system == other.system
            && match (&self.marks, &other.marks) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            }
    }
}

/// A piece of an answer as the upstream streams it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamDelta {
    /// A new streamed answer starts (the first, or a retry): pieces before it are void.
    Attempt,
    /// Text of the answer's content block `block` (0 when the wire has no blocks).
    Text {
        /// The upstream's block index: a new index is a new text block.
        block: u64,
        /// The text.
        text: String,
    },
    /// A tool call starts.
    ToolCallStart {
        /// Its position among the answer's tool calls (OpenAI) or its block (Anthropic).
        index: u64,
        /// Its id.
        id: String,
        /// The tool.
        name: String,
    },
    /// A fragment of a tool call's JSON arguments.
    ToolCallArguments {
        /// As in [`StreamDelta::ToolCallStart`].
        index: u64,
        /// The fragment.
        fragment: String,
    },
    /// The upstream's own id of an output item it started that the host's messages model (a
    /// Responses `message` or `function_call`), before the item's text or call. Why: a proxy
    /// answering a client of the same wire names the item as the upstream did, so the client
    /// sends back the id the upstream made; other receivers ignore it.
    ItemId {
        /// The upstream's output index (the [`StreamDelta::Text`] block, the
        /// [`StreamDelta::ToolCallStart`] index).
        index: u64,
        /// The item's id.
        id: String,
    },
    /// A whole output item the host's messages do not model (a Responses `reasoning` item,
    /// a built-in or custom tool call), as the upstream finished it; kept in the answer as an
    /// opaque block ([`responses::opaque`]) and passed on as is to a Responses client.
    Item {
        /// The upstream's output index.
        index: u64,
        /// The item, verbatim.
        item: serde_json::Value,
    },
}

/// A receiver of [`StreamDelta`]s. Sending never blocks. A receiver that answers `false` no
/// longer listens (a proxied client went away): the provider stops reading the answer and the
/// request ends as [`ProviderError::Cancelled`].
#[derive(Clone)]
pub struct DeltaSink(std::sync::Arc<dyn Fn(StreamDelta) -> bool + Send + Sync>);

impl DeltaSink {
    /// A sink calling `f` with each delta; `f` answers whether anyone still listens.
    pub fn new(f: impl Fn(StreamDelta) -> bool + Send + Sync + 'static) -> Self {
        Self(std::sync::Arc::new(f))
    }

    /// Hands on one delta; `false` when nobody listens any more.
    pub fn send(&self, delta: StreamDelta) -> bool {
        (self.0)(delta)
    }
}

impl std::fmt::Debug for DeltaSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DeltaSink")
    }
}

impl PartialEq for DeltaSink {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

/// A tool a client declared, in neither wire's shape: its name, description and JSON schema.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The tool's name.
    pub name: String,
    /// What it does, for the model.
    pub description: Option<String>,
    /// The JSON schema of its arguments.
    pub parameters: serde_json::Value,
}

impl ToolSpec {
    /// The spec of a chat-completions function tool (`{"type": "function", "function":
    /// {name, description, parameters, …}}`), or `None` when it names no function. One
    /// reading for serve's decoder and the chat provider, which sends a client's tool as it
    /// came only when this reading of it is still the spec the engine forwards
    /// ([`ToolSpec::matches_chat_tool`]).
    pub fn from_chat_tool(tool: &serde_json::Value) -> Option<ToolSpec> {
        tool.get("function").and_then(Self::from_function)
    }

    /// The spec of a Responses function tool (`{"type": "function", name, description,
    /// parameters, …}`, no `function` wrapper), or `None` when it names no function: how
    /// serve reads a Responses client's function tool, so that a provider can tell whether the
    /// engine still forwards it as declared ([`ToolSpec::matches_responses_tool`]).
    pub fn from_responses_tool(tool: &serde_json::Value) -> Option<ToolSpec> {
        Self::from_function(tool)
    }

    /// Whether [`ToolSpec::from_chat_tool`] reads `tool` as this spec, without building one
    /// (a provider asks it for every tool of every request).
    pub fn matches_chat_tool(&self, tool: &serde_json::Value) -> bool {
        tool.get("function").is_some_and(|f| self.is_function(f))
    }

    /// Whether [`ToolSpec::from_responses_tool`] reads `tool` as this spec.
    pub fn matches_responses_tool(&self, tool: &serde_json::Value) -> bool {
        self.is_function(tool)
    }

    /// The spec of an object with `name`, `description` and `parameters` (an object schema
    /// when absent).
    fn from_function(function: &serde_json::Value) -> Option<ToolSpec> {
        let name = function.get("name")?.as_str()?;
        Some(ToolSpec {
            name: name.to_owned(),
            description: function
                .get("description")
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned),
            parameters: function
                .get("parameters")
                .cloned()
                .unwrap_or_else(|| serde_json::json!({"type": "object"})),
        })
    }

    /// Whether [`ToolSpec::from_function`] of `function` would be this spec.
    fn is_function(&self, function: &serde_json::Value) -> bool {
        function.get("name").and_then(serde_json::Value::as_str) == Some(self.name.as_str())
            && function
                .get("description")
                .and_then(serde_json::Value::as_str)
                == self.description.as_deref()
            && match function.get("parameters") {
                Some(parameters) => *parameters == self.parameters,
                None => self.parameters == serde_json::json!({"type": "object"}),
            }
    }

    /// The text a tool's schema is counted as: its name, description and parameters as
    /// compact JSON. Why this form: each wire wraps the same three fields in its own few keys,
    /// and one form for every wire keeps the run loop's count, the precheck and `rampart
    /// context show` in agreement.
    pub fn counted_text(&self) -> String {
        /// The same object `json!` would build, serialised from borrows: building the value
        /// copied the whole schema (every `IndexMap` in it) on each count, once per request.
        #[derive(serde::Serialize)]
        struct Counted<'a> {
            name: &'a str,
            description: &'a Option<String>,
            parameters: &'a serde_json::Value,
        }
        serde_json::to_string(&Counted {
            name: &self.name,
            description: &self.description,
            parameters: &self.parameters,
        })
        .unwrap_or_default()
    }
}

/// A key a client sent (`Authorization: Bearer …` or `x-api-key`). Its `Debug` prints `***`,
/// it is never logged, stored in a session, or echoed in an error.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientCredential {
    key: String,
    bearer: bool,
}

impl ClientCredential {
    /// A key, sent upstream the way the provider takes keys; `None` when blank.
    pub fn new(key: &str) -> Option<Self> {
        let key = key.trim();
        (!key.is_empty()).then(|| Self {
            key: key.to_owned(),
            bearer: false,
        })
    }

    /// A token that must go upstream as `Authorization: Bearer` whatever the provider's key
    /// header: what an Anthropic client sends there may be an OAuth token (a Claude
    /// subscription login), which Anthropic refuses as `x-api-key`. `None` when blank.
    pub fn bearer(token: &str) -> Option<Self> {
        Self::new(token).map(|c| Self { bearer: true, ..c })
    }

    /// Whether it goes upstream as `Authorization: Bearer` regardless of the provider.
    pub fn is_bearer(&self) -> bool {
        self.bearer
    }

    /// The key itself, for the one place that writes it into a header.
    pub(crate) fn expose(&self) -> &str {
        &self.key
    }
}

impl std::fmt::Debug for ClientCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

/// A model's answer.
#[derive(Debug, Clone)]
pub struct ModelResponse {
    /// The answer as a pi assistant message: `api`, `provider` and `model` are filled, `usage`
    /// carries the provider's reported counts (input, output, cache read/write).
    pub message: AssistantMessage,
    /// How many transient failures were retried before this answer.
    pub retries: u32,
}

/// The exhaustive classification of provider failures. The run loop branches on this, never on
/// error text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderErrorKind {
    /// The prompt does not fit the model's window: compact or truncate, then retry.
    ContextOverflow,
    /// 429 or a throttling message, still failing after the retries.
    RateLimited,
    /// A 5xx, a dropped connection or a stream that ended early, still failing after the
    /// retries.
    Transient,
    /// 401/403: the key is wrong or lacks access.
    Auth,
    /// The environment variable named for the API key is unset or empty.
    MissingApiKey,
    /// The server could not be reached at all (DNS, refused connection).
    Unreachable,
    /// No answer within the configured timeout.
    Timeout,
    /// Any other 4xx: the request itself is wrong.
    BadRequest,
    /// The server answered something this client cannot read.
    InvalidResponse,
    /// The caller cancelled the request.
    Cancelled,
}

/// A failed model request. Every variant names the provider so that a person reading it knows
/// which config entry to fix; none carries an API key.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProviderError {
    /// The provider said the prompt is too large for the model.
    #[error("{provider}: context overflow: {message}")]
    ContextOverflow {
        /// The provider id from the config.
        provider: String,
        /// The provider's error text, as received.
        message: String,
        /// The prompt size the provider reported in its error text, when it did.
        observed_tokens: Option<u64>,
    },
    /// Rate limited after all retries.
    #[error("{provider}: rate limited (HTTP {status}) after {retries} retries: {message}")]
    RateLimited {
        /// The provider id.
        provider: String,
        /// The HTTP status (429 usually).
        status: u16,
        /// The provider's text.
        message: String,
        /// Retries made.
        retries: u32,
        /// The provider's last `Retry-After`, passed on to a proxied client (`rampart serve`).
        retry_after: Option<std::time::Duration>,
    },
    /// A transient failure after all retries.
    #[error("{provider}: server error{} after {retries} retries: {message}", status.map(|s| format!(" (HTTP {s})")).unwrap_or_default())]
    Transient {
        /// The provider id.
        provider: String,
        /// The HTTP status, when there was a response.
        status: Option<u16>,
        /// What failed.
        message: String,
        /// Retries made.
        retries: u32,
    },
    /// The key was refused.
    #[error(
        "{provider}: the API key was refused (HTTP {status}): {}. {}",
        clause(message),
        if *from_client {
            "The key came from the client (rampart serve passes on the client's key when the \
             provider has none of its own): check the key the client is configured with.".to_owned()
        } else {
            format!("Check the key in ${env_var}.")
        }
    )]
    Auth {
        /// The provider id.
        provider: String,
        /// 401 or 403.
        status: u16,
        /// The provider's text.
        message: String,
        /// The environment variable the key came from.
        env_var: String,
        /// The key was the proxied client's own (`rampart serve`), not `env_var`'s.
        from_client: bool,
    },
    /// No key in the environment.
    #[error(
        "{provider}: no API key: the environment variable ${env_var} is not set. Set it, or change `models.providers.{provider}.apiKeyEnv` in the config."
    )]
    MissingApiKey {
        /// The provider id.
        provider: String,
        /// The variable that should hold the key.
        env_var: String,
    },
    /// Could not connect.
    #[error(
        "{provider}: cannot reach {url}: {}. Is the server running, and is `models.providers.{provider}.baseUrl` right?",
        clause(message)
    )]
    Unreachable {
        /// The provider id.
        provider: String,
        /// The URL tried.
        url: String,
        /// The connection error.
        message: String,
    },
    /// Timed out.
    #[error(
        "{provider}: no answer within {}s (`models.providers.{provider}.timeoutSeconds`)",
        after.as_secs()
    )]
    Timeout {
        /// The provider id.
        provider: String,
        /// The timeout that expired.
        after: Duration,
    },
    /// A streamed answer sent no event for too long (keep-alives only, or nothing).
    #[error(
        "{provider}: the answer's stream sent no event for {}s, only keep-alives \
         (`models.providers.{provider}.streamIdleTimeoutSeconds`)",
        after.as_secs()
    )]
    StreamIdle {
        /// The provider id.
        provider: String,
        /// The idle timeout that expired.
        after: Duration,
    },
    /// Any other 4xx.
    #[error("{provider}: request rejected (HTTP {status}): {message}")]
    BadRequest {
        /// The provider id.
        provider: String,
        /// The HTTP status.
        status: u16,
        /// The provider's text.
        message: String,
    },
    /// Unreadable answer.
    #[error("{provider}: unreadable answer: {message}")]
    InvalidResponse {
        /// The provider id.
        provider: String,
        /// What could not be read.
        message: String,
    },
    /// Cancelled by the caller.
    #[error("{provider}: request cancelled")]
    Cancelled {
        /// The provider id.
        provider: String,
    },
}

impl ProviderError {
    /// The classification the run loop branches on.
    pub fn kind(&self) -> ProviderErrorKind {
        match self {
            ProviderError::ContextOverflow { .. } => ProviderErrorKind::ContextOverflow,
            ProviderError::RateLimited { .. } => ProviderErrorKind::RateLimited,
            ProviderError::Transient { .. } => ProviderErrorKind::Transient,
            ProviderError::Auth { .. } => ProviderErrorKind::Auth,
            ProviderError::MissingApiKey { .. } => ProviderErrorKind::MissingApiKey,
            ProviderError::Unreachable { .. } => ProviderErrorKind::Unreachable,
            ProviderError::Timeout { .. } | ProviderError::StreamIdle { .. } => {
                ProviderErrorKind::Timeout
            }
            ProviderError::BadRequest { .. } => ProviderErrorKind::BadRequest,
            ProviderError::InvalidResponse { .. } => ProviderErrorKind::InvalidResponse,
            ProviderError::Cancelled { .. } => ProviderErrorKind::Cancelled,
        }
    }
}

/// A model backend. Implementations are blocking: the run loop is synchronous and a turn waits
/// for its answer anyway; streaming is read incrementally inside `complete`.
pub trait Provider: Send + Sync {
    /// The provider id from the config (`sim`, `openai`, a user's name for a local server).
    fn id(&self) -> &str;

    /// Sends one request and waits for the whole answer, retrying transient failures.
    fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError>;

    /// True for the embedded simulator, which answers without understanding: work that needs
    /// a model to write something (a memory note) is done by the embedded summariser instead.
    fn is_simulated(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tool_spec_tests;
