//! The HTTP server: routes, admission (a lane per conversation, a global bound, 429 when the
//! queue is full), and one request's way through identity, the conversation, the run loop and
//! back in the client's wire.
//!
//! Turns are blocking (the run loop, the engine, the providers), so each runs on tokio's
//! blocking pool inside its conversation's lane ([`rampart_sessions::lanes::Lanes`]); the async
//! side only parses, admits and answers. A streaming client's answer is passed on as the
//! upstream streams it: the provider hands its pieces to a channel (`Forwarded::deltas`), and
//! the response starts with the first piece of content, so a failure before it keeps its own
//! status.
//!
//! A turn appends the request's unseen messages and the answer, and syncs; it does not end the
//! turn the way `rampart run` does (`Runner::finish_turn` would answer the model's tool calls
//! with synthetic errors): the client runs the tools and sends their results next time.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use rampart_context::tokens::TokenCounter;
use rampart_message::wire::SharedMessage;
use rampart_message::{AgentMessage, AssistantMessage};
use rampart_sessions::import::api_request::chat_fields;
use rampart_sessions::lanes::Lanes;
use rampart_sessions::store::now_unix_ms;
use rampart_sessions::store::shared::SharedStore;
use serde_json::{Value, json};

use super::conversations::{self, ConversationError};
use super::identity::{ClientSession, Endpoint, Identity, identify};
use super::inbound::{self, ClientRequest, Wire};
use super::metrics::Metrics;
use super::not_forwarded::{NotForwarded, NotForwardedLog};
use super::outbound::{self, AnswerMeta, ErrorKind, ResponsesEcho, StreamEncoder};
use crate::blobs::BlobStore;
use crate::config::serve::SystemPromptSource;
use crate::config::{Config, ModelName};
use crate::engine::services::EventSink;
use crate::engine::slot::{EngineSlot, HostResources};
use crate::prompt::PromptAssembler;
use crate::providers::registry::Providers;
use crate::providers::{
    ApiKind, BreakpointMatcher, ClientBreakpoints, ClientCredential, ClientSystem, DeltaSink,
    Forwarded, ModelRequest, ProviderError, StreamDelta, UnsentSink,
};
use crate::run::answer_fit::AnswerFit;
use crate::run::host_tools::{HostTools, answer_host_tool_calls};
use crate::run::llm::{EngineCredentialBook, ProvidersLlm};
use crate::run::{ModelSource, RegistryWrites, RunEvents, RunSettings, Runner, TurnError};

/// The largest request body accepted (a long agent history with images).
pub const MAX_BODY_BYTES: usize = 256 * 1024 * 1024;

/// Conversations kept open in memory between requests.
pub const SESSION_CACHE_CAPACITY: usize = 128;

/// Seconds a client is told to wait when the queue is full.
pub const RETRY_AFTER_SECONDS: u64 = 1;

/// What every request shares.
pub struct ServerState {
    config: Config,
    store: Arc<dyn SharedStore>,
    events: EventSink,
    providers: Arc<Providers>,
    slot: EngineSlot,
    /// What each conversation's client presented, for the engine's model calls on its behalf.
    engine_credentials: Arc<EngineCredentialBook>,
    lanes: Lanes,
    admitted: AtomicUsize,
    /// Requests answered (admitted and done), for the allocator's trim.
    finished: AtomicU64,
    /// When freed memory is handed back to the system ([`super::allocator`]).
    trimmer: super::allocator::Trimmer,
    limit: usize,
    metrics: Metrics,
    /// What clients sent that was not forwarded upstream: counted, warned once per conversation.
    not_forwarded: NotForwardedLog,
    /// The Responses answers given, for a later request's `previous_response_id`.
    responses: super::response_log::ResponseLog,
    /// The decoded messages of recent chat-completions requests, by their bytes.
    inbound: super::inbound_memo::InboundMemo,
    next_id: AtomicU64,
    sessions: conversations::SessionCache,
    /// Long-term memory: the slot the memory tools and the flush use, and the workspace the
    /// flush writes notes in ([`ServerState::with_memory`]); off by default.
    memory: crate::memory::MemorySlot,
    workspace: Option<std::path::PathBuf>,
    /// The registry's counters, written in batches ([`super::registry_writes`]).
    registry: Arc<super::registry_writes::RegistryBatcher>,
    /// The system prompt's sources, when `serve.systemPrompt` asks for Rampart's prompt.
    prompt: Option<PromptAssembler>,
    /// What the request guard checks before a handler runs ([`super::guard`]).
    guard: Arc<super::guard::Guard>,
    /// When this server started, in Unix seconds: the `created` of the models it lists (they
    /// became available here then; OpenAI's model objects require the field).
    started_unix: u64,
    /// What `GET /ui` shows, fed by a tap on `events` ([`super::dashboard`]).
    dashboard: Arc<super::dashboard::Dashboard>,
    /// Turned true when the server starts shutting down: ends the `/ui/events` streams, which
    /// would otherwise hold their connections to the drain deadline.
    stopping: tokio::sync::watch::Sender<bool>,
    /// The originals of capped tool results, for `/ui/blobs/…` (`None`: the store keeps none).
    blobs: Option<BlobStore>,
}

impl std::fmt::Debug for ServerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerState")
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl ServerState {
    /// The state for `config` on `store`: providers and the engine slot built once. Everything
    /// a conversation needs between requests is in `store`; what is kept here (the engine,
    /// providers, lanes, open sessions) is rebuilt or caught up from it, so replicas sharing one
    /// store serve the same conversations.
    pub fn new(
        config: Config,
        store: Arc<dyn SharedStore>,
        events: EventSink,
    ) -> anyhow::Result<Self> {
        let providers = Arc::new(Providers::from_config(&config)?);
        let credentials = Arc::new(EngineCredentialBook::new(config.serve.engine_credentials));
        let resources = HostResources {
            blobs: store.blobs().map(BlobStore::on),
            llm: Some(Arc::new(
                ProvidersLlm::new(Arc::clone(&providers))
                    .with_credentials(Arc::clone(&credentials)),
            )),
            // Beside a sessions directory; none on a database (replicas do not share a disk).
            state_root: store.local_dir().map(|dir| (dir.join("engines"), false)),
            ..Default::default()
        };
        let slot = EngineSlot::resolve_full(&config, &events, &resources)?;
        let serve = &config.serve;
        // The workspace sits beside the sessions directory unless the config names it.
        let prompt = (serve.system_prompt != SystemPromptSource::Client).then(|| {
            let sessions_dir = store
                .local_dir()
                .map(std::path::Path::to_path_buf)
                .or_else(rampart_sessions::store::default_sessions_dir)
                .unwrap_or_else(|| std::path::PathBuf::from("sessions"));
            PromptAssembler::new(&config, &sessions_dir)
        });
        let guard = Arc::new(super::guard::Guard {
            settings: serve.clone(),
            bound: super::guard::Bound::default(),
            max_body: MAX_BODY_BYTES,
        });
        let dashboard = Arc::new(super::dashboard::Dashboard::default());
        let fed = Arc::clone(&dashboard);
        if !events.set_tap(Arc::new(move |source, event| {
            fed.observe(source, event, now_unix_ms());
        })) {
            tracing::warn!("the event sink already has a tap: /ui will show no conversations");
        }
        Ok(Self {
            engine_credentials: credentials,
            started_unix: now_unix_ms() / 1000,
            blobs: store.blobs().map(BlobStore::on),
            dashboard,
            stopping: tokio::sync::watch::Sender::new(false),
            guard,
            prompt,
            lanes: Lanes::new(serve.max_concurrent),
            limit: serve.max_concurrent + serve.max_queue,
            admitted: AtomicUsize::new(0),
            finished: AtomicU64::new(0),
            trimmer: Default::default(),
            metrics: Metrics::default(),
            not_forwarded: NotForwardedLog::default(),
            responses: Default::default(),
            inbound: Default::default(),
            next_id: AtomicU64::new(1),
            sessions: conversations::SessionCache::new(
                SESSION_CACHE_CAPACITY,
                u64::try_from(serve.session_cache_mib)
                    .unwrap_or(u64::MAX)
                    .saturating_mul(1 << 20),
            ),
            memory: crate::memory::MemorySlot::off(),
            workspace: None,
            registry: super::registry_writes::RegistryBatcher::start(
                Arc::clone(&store),
                config.session.max_compaction_checkpoints,
            ),
            config,
            store,
            events,
            providers,
            slot,
        })
    }

    /// Long-term memory for this server: `slot` answers the memory tools (for clients that opt
    /// in) and the pre-compaction flush writes its notes in `workspace`.
    pub fn with_memory(
        mut self,
        slot: crate::memory::MemorySlot,
        workspace: std::path::PathBuf,
    ) -> Self {
        self.memory = slot;
        self.workspace = Some(workspace);
        self
    }

    /// Prices for `/ui`'s spend in dollars (`rampart serve --prices FILE`).
    pub fn with_prices(self, prices: Option<crate::replay::prices::Prices>) -> Self {
        if let Some(prices) = prices {
            self.dashboard.set_prices(prices);
        }
        self
    }

    /// Stops the engine.
    pub fn shutdown(&self) {
        self.registry.stop();
        self.memory.shutdown();
        self.slot.shutdown();
    }
}

/// The routes.
pub fn router(state: Arc<ServerState>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/messages", post(messages))
        .route("/v1/responses", post(responses))
        .route("/v1/messages/count_tokens", post(count_tokens))
        .route("/v1/models", get(models))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/ui", get(ui))
        .route("/ui/events", get(ui_events))
        .route("/ui/app.js", get(ui_app))
        .route("/ui/blobs/{reference}", get(ui_blob))
        .route("/ui/conversations/{session}/chart", get(ui_chart))
        .route(
            "/ui/conversations/{session}/compactions/{number}",
            get(ui_compaction),
        )
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        // Host, Origin, token, content type and the body read: before any handler.
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state.guard),
            super::guard::guard,
        ))
        .with_state(state)
}

/// How often an idle server hands freed memory back to the system.
const TRIM_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// Serves `state` on `listener` until SIGTERM or Ctrl-C, then lets requests in flight finish
/// within `serve.drainTimeoutMs` ([`super::listener`]).
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<ServerState>,
) -> std::io::Result<()> {
    if let Ok(addr) = listener.local_addr() {
        state.guard.bound.set(addr);
    }
    let settings = &state.config.serve;
    let limits = super::listener::Limits {
        max_connections: settings.max_connections,
        header_timeout: settings.header_timeout,
        drain_timeout: settings.drain_timeout,
    };
    // Freed memory goes back to the system when the server is idle ([`super::allocator`]).
    let trimming = Arc::clone(&state);
    tokio::spawn(async move {
        let mut every = tokio::time::interval(TRIM_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            let (answered, in_flight) = (
                trimming.finished.load(Ordering::Relaxed),
                trimming.admitted.load(Ordering::Acquire),
            );
            if trimming.trimmer.claim(answered, in_flight) {
                let _ = tokio::task::spawn_blocking(super::allocator::trim).await;
            }
        }
    });
    let stopping = state.stopping.clone();
    let shutdown = async move {
        shutdown_signal().await;
        stopping.send_replace(true);
    };
    super::listener::serve(listener, router(Arc::clone(&state)), limits, shutdown).await
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
    tracing::info!("shutting down: finishing the requests in flight");
}

/// Binds `addr` and serves until a signal; `on_bound` hears the address actually bound (the
/// port, when 0 was asked for).
pub fn run_blocking(
    state: ServerState,
    addr: SocketAddr,
    on_bound: impl FnOnce(SocketAddr) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("rampart-serve")
        .build()?;
    let state = Arc::new(state);
    let result = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
            anyhow::anyhow!("cannot listen on {addr}: {e}; is another server using the port?")
        })?;
        on_bound(listener.local_addr()?)?;
        serve(listener, Arc::clone(&state)).await?;
        anyhow::Ok(())
    });
    state.shutdown();
    // Turns still running on the blocking pool are left behind at the drain deadline.
    runtime.shutdown_timeout(state.config.serve.drain_timeout);
    result
}

// ---------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------

/// `GET /ui`: the live page ([`super::dashboard`]), behind the same guard as the API. The
/// memory engine's status is a call into it, so the page is built on the blocking pool.
async fn ui(State(state): State<Arc<ServerState>>) -> Response {
    state.metrics.request("ui", 200);
    let built = Arc::clone(&state);
    let page = tokio::task::spawn_blocking(move || {
        let memory = &built.memory;
        let panels = super::dashboard::Panels {
            engine: Some(built.slot.health()),
            memory: Some(super::dashboard::MemoryPanel {
                configured: memory.configured_id().to_string(),
                on: memory.is_on(),
                quarantined: memory.quarantined(),
                status: memory.is_on().then(|| memory.status()),
            }),
        };
        built.dashboard.render(now_unix_ms(), &panels)
    })
    .await;
    match page {
        Ok(page) => ui_answer(StatusCode::OK, "text/html; charset=utf-8", page),
        Err(e) => ui_answer(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain; charset=utf-8",
            format!("the page could not be built: {e}\n"),
        ),
    }
}

/// A `/ui` answer with the page's security headers.
fn ui_answer(status: StatusCode, content_type: &'static str, body: impl Into<Body>) -> Response {
    let mut response =
        (status, [(header::CONTENT_TYPE, content_type)], body.into()).into_response();
    for (name, value) in super::dashboard::SECURITY_HEADERS {
        response
            .headers_mut()
            .insert(name, HeaderValue::from_static(value));
    }
    response
}

/// `GET /ui/blobs/sha256:<hex>`: the original of a capped tool result, as plain text the
/// browser shows and never interprets (`nosniff`, the page's Content-Security-Policy, a
/// sandbox). Only a blob reference is accepted (`sha256:` and 64 hex digits, checked before
/// the store sees it), so no other file can be named; behind the same guard as the API.
async fn ui_blob(
    State(state): State<Arc<ServerState>>,
    axum::extract::Path(reference): axum::extract::Path<String>,
) -> Response {
    let Some(reference) = super::dashboard::blob_reference(&reference) else {
        state.metrics.request("ui_blob", 400);
        return ui_answer(
            StatusCode::BAD_REQUEST,
            "text/plain; charset=utf-8",
            "not a blob reference: /ui/blobs/ takes `sha256:` and 64 hex digits, as the page \
             links them\n",
        );
    };
    let Some(blobs) = state.blobs.clone() else {
        state.metrics.request("ui_blob", 404);
        return ui_answer(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "this server's store keeps no blobs\n",
        );
    };
    let wanted = reference.clone();
    let read = tokio::task::spawn_blocking(move || blobs.get(&wanted)).await;
    match read {
        Ok(Ok(bytes)) => {
            state.metrics.request("ui_blob", 200);
            let mut response = ui_answer(StatusCode::OK, "text/plain; charset=utf-8", bytes);
            let headers = response.headers_mut();
            headers.insert(
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static("default-src 'none'; sandbox"),
            );
            if let Ok(disposition) = HeaderValue::from_str(&format!(
                "inline; filename=\"{}.txt\"",
                reference.replace(':', "-")
            )) {
                headers.insert(header::CONTENT_DISPOSITION, disposition);
            }
            response
        }
        Ok(Err(e)) => {
            tracing::debug!(blob = %reference, error = %e, "a /ui/blobs request found no blob");
            state.metrics.request("ui_blob", 404);
            ui_answer(
                StatusCode::NOT_FOUND,
                "text/plain; charset=utf-8",
                format!("no blob {reference} in this server's store\n"),
            )
        }
        Err(e) => {
            state.metrics.request("ui_blob", 500);
            ui_answer(
                StatusCode::INTERNAL_SERVER_ERROR,
                "text/plain; charset=utf-8",
                format!("the blob could not be read: {e}\n"),
            )
        }
    }
}

/// `GET /ui/conversations/<session>/chart`: the conversation's chart as an SVG document, drawn
/// by the same code as the page's ([`crate::chart`]); the page's script swaps it in as calls
/// arrive.
async fn ui_chart(
    State(state): State<Arc<ServerState>>,
    axum::extract::Path(session): axum::extract::Path<String>,
) -> Response {
    match state.dashboard.chart_svg(&session) {
        Some(svg) => {
            state.metrics.request("ui_chart", 200);
            ui_answer(StatusCode::OK, "image/svg+xml; charset=utf-8", svg)
        }
        None => {
            state.metrics.request("ui_chart", 404);
            ui_answer(
                StatusCode::NOT_FOUND,
                "text/plain; charset=utf-8",
                "no such conversation on this server's page\n",
            )
        }
    }
}

/// `GET /ui/conversations/<session>/compactions/<n>`: what the conversation's `n`th compaction
/// (as the page numbers them) removed, the summary it wrote, and the tokens before and after,
/// read from the session in the store ([`super::compaction_page`]).
async fn ui_compaction(
    State(state): State<Arc<ServerState>>,
    axum::extract::Path((session, number)): axum::extract::Path<(String, String)>,
) -> Response {
    let not_found = |state: &ServerState, what: &str| {
        state.metrics.request("ui_compaction", 404);
        ui_answer(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            format!("{what}\n"),
        )
    };
    let Some(view) = state.dashboard.conversation(&session) else {
        return not_found(&state, "no such conversation on this server's page");
    };
    let Some((n, mark)) = number
        .parse::<usize>()
        .ok()
        .filter(|n| *n >= 1)
        .and_then(|n| Some((n, view.compactions.get(n - 1)?.clone())))
    else {
        return not_found(&state, "no such compaction in this conversation");
    };
    let facts = super::compaction_page::CompactionFacts {
        session_id: view.session_id.clone(),
        number: n,
        reason: mark.reason.clone(),
        before_call: mark.at_call + 1,
        tokens_before: mark.tokens_before,
        tokens_after: mark.tokens_after,
    };
    let store = Arc::clone(&state.store);
    let key = view.key.clone();
    let entry_id = mark.entry_id.clone();
    let read = tokio::task::spawn_blocking(move || -> Result<_, String> {
        let entry_id = entry_id.ok_or_else(|| {
            "the engine kept its own record of this compaction (no entry in the session)"
                .to_string()
        })?;
        let key = key.ok_or_else(|| {
            "this page does not know the conversation's registry key (it was not opened \
             through this server)"
                .to_string()
        })?;
        let entry = store
            .get(&key)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("conversation `{key}` is no longer registered"))?;
        let session = store
            .open(&key, &entry, rampart_sessions::SessionOptions::default())
            .map_err(|e| e.to_string())?;
        super::compaction_page::CompactionRecord::from_tree(session.tree(), &entry_id)
            .map_err(|e| e.to_string())
    })
    .await
    .unwrap_or_else(|e| Err(format!("the session could not be read: {e}")));
    if let Err(why) = &read {
        tracing::warn!(session = %view.session_id, compaction = n, reason = %why, "a compaction's record could not be read");
    }
    state.metrics.request("ui_compaction", 200);
    let page = super::compaction_page::render(&facts, read.as_ref().map_err(String::as_str));
    ui_answer(StatusCode::OK, "text/html; charset=utf-8", page)
}

/// `GET /ui/app.js`: the page's script, embedded in the binary ([`super::dashboard::APP_JS`]).
async fn ui_app(State(state): State<Arc<ServerState>>) -> Response {
    state.metrics.request("ui_app", 200);
    ui_answer(
        StatusCode::OK,
        "text/javascript; charset=utf-8",
        super::dashboard::APP_JS,
    )
}

/// `GET /ui/events`: the dashboard's updates as server-sent events, for the page's script
/// ([`super::dashboard::event_stream`]); behind the same guard as the API.
async fn ui_events(State(state): State<Arc<ServerState>>) -> Response {
    state.metrics.request("ui_events", 200);
    let stream =
        super::dashboard::event_stream(state.dashboard.subscribe(), state.stopping.subscribe());
    let mut response = (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        axum::body::Body::from_stream(stream),
    )
        .into_response();
    response.headers_mut().insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    response
}

async fn chat_completions(
    State(state): State<Arc<ServerState>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    conversation_route(
        &state,
        Endpoint::ChatCompletions,
        Wire::OpenAi,
        uri.query(),
        headers,
        body,
    )
    .await
}

/// `POST /v1/responses`: the Codex CLI's wire, read as the chat request it means.
async fn responses(
    State(state): State<Arc<ServerState>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let query = uri.query();
    conversation_route(
        &state,
        Endpoint::Responses,
        Wire::Responses,
        query,
        headers,
        body,
    )
    .await
}

async fn messages(
    State(state): State<Arc<ServerState>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let query = uri.query();
    conversation_route(
        &state,
        Endpoint::Messages,
        Wire::Anthropic,
        query,
        headers,
        body,
    )
    .await
}

/// A conversation endpoint's request, counted in the metrics under the endpoint's name.
async fn conversation_route(
    state: &Arc<ServerState>,
    endpoint: Endpoint,
    wire: Wire,
    query: Option<&str>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let name = match endpoint {
        Endpoint::ChatCompletions => "chat_completions",
        Endpoint::Responses => "responses",
        Endpoint::Messages => "messages",
        Endpoint::CountTokens => "count_tokens",
    };
    let query = query.map(str::to_owned);
    let response = conversation_request(state, endpoint, wire, query, headers, body).await;
    state.metrics.request(name, response.status().as_u16());
    response
}

async fn count_tokens(
    State(state): State<Arc<ServerState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let response = count_tokens_inner(&state, &headers, &body);
    state
        .metrics
        .request("count_tokens", response.status().as_u16());
    response
}

fn count_tokens_inner(state: &ServerState, headers: &HeaderMap, body: &[u8]) -> Response {
    if let Err(r) = authorize(state, Wire::Anthropic, headers) {
        return r;
    }
    let request = match parse(Wire::Anthropic, body) {
        Ok(r) => r,
        Err(r) => return r,
    };
    let counter = TokenCounter::for_model(&request.model);
    let messages: Vec<SharedMessage> = Arc::unwrap_or_clone(request.messages);
    let tokens = counter.count_total(&messages)
        + request
            .system
            .as_deref()
            .map_or(0, |s| counter.count_text(s));
    json_response(StatusCode::OK, json!({"input_tokens": tokens}))
}

async fn models(State(state): State<Arc<ServerState>>, headers: HeaderMap) -> Response {
    let wire = wire_of_headers(&headers);
    let response = match authorize(&state, wire, &headers) {
        Err(r) => r,
        Ok(_) => {
            let created = state.started_unix;
            let data: Vec<Value> = state
                .config
                .models
                .providers()
                .flat_map(|p| {
                    p.models.iter().map(move |m| {
                        json!({"id": format!("{}/{}", p.id, m.id), "object": "model",
                               "created": created,
                               "type": "model", "owned_by": p.id, "display_name": m.id})
                    })
                })
                .collect();
            json_response(
                StatusCode::OK,
                json!({"object": "list", "data": data, "has_more": false}),
            )
        }
    };
    state.metrics.request("models", response.status().as_u16());
    response
}

/// `GET /healthz`: the engine, and whether the store answers (a round trip to a database
/// store, on the blocking pool). 503 with `Retry-After` while it does not, so a load balancer
/// sends conversations to a replica that can store them.
async fn healthz(State(state): State<Arc<ServerState>>) -> Response {
    let store = Arc::clone(&state.store);
    let health = tokio::task::spawn_blocking(move || store.health()).await;
    let (status, store) = match health {
        Ok(h) => {
            let mut fields = h.detail;
            fields.insert("backend".into(), json!(h.backend));
            fields.insert("reachable".into(), json!(h.reachable));
            let status = if h.reachable {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            (status, Value::Object(fields))
        }
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"reachable": false, "error": e.to_string()}),
        ),
    };
    state.metrics.request("healthz", status.as_u16());
    let word = if status == StatusCode::OK {
        "ok"
    } else {
        "unavailable"
    };
    let mut response = json_response(
        status,
        json!({"status": word, "engine": state.slot.configured_id(), "store": store}),
    );
    if status != StatusCode::OK {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
    }
    response
}

async fn metrics(State(state): State<Arc<ServerState>>, headers: HeaderMap) -> Response {
    if let Err(r) = authorize(&state, Wire::OpenAi, &headers) {
        return r;
    }
    state.metrics.request("metrics", 200);
    let known = state.store.family("serve:", None).ok().map(|l| l.len());
    let mut text = state
        .metrics
        .render(state.admitted.load(Ordering::Relaxed), known);
    text.push_str(&state.not_forwarded.render());
    text.push_str(&super::metrics::render_engine(&state.slot.health()));
    // The store's figures from the same check `/healthz` makes (a database round trip, on the
    // blocking pool).
    let store = Arc::clone(&state.store);
    if let Ok(health) = tokio::task::spawn_blocking(move || store.health()).await {
        text.push_str(&super::metrics::render_store(&health));
    }
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        text,
    )
        .into_response()
}

/// An on/off request header: `Some(true)` for `on`/`true`/`1`, `Some(false)` for
/// `off`/`false`/`0`, `None` when absent or anything else.
fn header_switch(headers: &HeaderMap, name: &str) -> Option<bool> {
    let value = headers
        .get(name)?
        .to_str()
        .ok()?
        .trim()
        .to_ascii_lowercase();
    match value.as_str() {
        "on" | "true" | "1" => Some(true),
        "off" | "false" | "0" => Some(false),
        _ => None,
    }
}

/// `x-api-key` or `anthropic-version` means an Anthropic client.
fn wire_of_headers(headers: &HeaderMap) -> Wire {
    if headers.contains_key("x-api-key") || headers.contains_key("anthropic-version") {
        Wire::Anthropic
    } else {
        Wire::OpenAi
    }
}

// ---------------------------------------------------------------------------
// A conversation request
// ---------------------------------------------------------------------------

/// Counts an admitted request until it is answered.
struct Admission<'a>(&'a ServerState);

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        self.0.finished.fetch_add(1, Ordering::Relaxed);
        self.0.admitted.fetch_sub(1, Ordering::AcqRel);
    }
}

async fn conversation_request(
    state: &Arc<ServerState>,
    endpoint: Endpoint,
    wire: Wire,
    query: Option<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let credential = match authorize(state, wire, &headers) {
        Ok(c) => c,
        Err(r) => return r,
    };
    // A body is indexed by its bytes: the messages a recent request decoded are taken as they
    // were, and only the rest of the body is parsed (`inbound_memo`).
    let (slices, continuation) = state.inbound.index(wire, &body);
    let now_ms = now_unix_ms();
    let continued = continuation.and_then(|continuation| {
        continue_request(state, wire, endpoint, &headers, continuation, now_ms)
    });
    let (raw, mut continued) = match continued {
        Some(mut continued) => (std::mem::take(&mut continued.raw), Some(continued)),
        None => match serde_json::from_slice(&body) {
            Ok(v) => (v, None),
            Err(e) => {
                return error_response(
                    wire,
                    StatusCode::BAD_REQUEST,
                    ErrorKind::InvalidRequest,
                    &format!("the request body is not JSON ({e}); send a JSON object"),
                );
            }
        },
    };
    // What a Responses answer repeats of the request, taken before the body is converted.
    let echo = match wire {
        Wire::Responses => match ResponsesEcho::of_request(&raw) {
            Ok(echo) => Some(echo),
            Err(why) => {
                return error_response(
                    wire,
                    StatusCode::BAD_REQUEST,
                    ErrorKind::InvalidRequest,
                    &why,
                );
            }
        },
        Wire::OpenAi | Wire::Anthropic => None,
    };
    // `previous_response_id` names an answer serve gave: the turn continues its history, or
    // is refused saying why (never answered as a fresh conversation).
    let prior = match raw.get("previous_response_id").filter(|v| !v.is_null()) {
        Some(previous) if wire == Wire::Responses => {
            match state.responses.resolve(previous, None) {
                Ok(stored) => Some(stored),
                Err(e) => {
                    return error_response(
                        wire,
                        StatusCode::BAD_REQUEST,
                        ErrorKind::InvalidRequest,
                        &e.to_string(),
                    );
                }
            }
        }
        _ => None,
    };
    // Answers are kept for `previous_response_id` unless the client asked OpenAI's `store:
    // false` (Codex does: it sends the whole history each time).
    let store_answer = wire == Wire::Responses && raw.get("store") != Some(&Value::Bool(false));
    // A Responses body is read as the chat request it means, by the rule and the decoder alike.
    let mut responses_not_forwarded = Vec::new();
    let mut responses_tools = Vec::new();
    let mut responses_system = None;
    let mut responses_kept = None;
    // A continued request was converted already (its new items only).
    let converted = match (wire, continued.as_mut().and_then(|c| c.converted.take())) {
        (Wire::Responses, Some(converted)) => Some(Ok(converted)),
        (Wire::Responses, None) => Some(inbound::responses_as_chat_after(
            &raw,
            prior.as_ref().map_or(&[][..], |p| p.messages.as_slice()),
        )),
        (Wire::OpenAi | Wire::Anthropic, _) => None,
    };
    let raw = match converted {
        Some(Ok(converted)) => {
            responses_kept = super::inbound_memo::ResponsesKept::of(&raw, &converted);
            for w in &converted.warnings {
                tracing::debug!(warning = %w, "responses request conversion");
            }
            responses_not_forwarded = converted.not_forwarded;
            responses_tools = converted.tools;
            responses_system = converted.system_form;
            converted.chat
        }
        Some(Err(e)) => {
            return error_response(
                wire,
                StatusCode::BAD_REQUEST,
                ErrorKind::InvalidRequest,
                &e.0,
            );
        }
        None => raw,
    };
    let raw = name_the_primary(raw, wire, &state.config);
    let (identity, request) = match continued {
        Some(continued) => (continued.identity, continued.request),
        None => {
            let identity = identify(endpoint, &headers, &raw, &state.config.serve.side_requests);
            match inbound::decode(wire, &raw, now_ms) {
                Ok(r) => (identity, r),
                Err(e) => {
                    return error_response(
                        wire,
                        StatusCode::BAD_REQUEST,
                        ErrorKind::InvalidRequest,
                        &e.0,
                    );
                }
            }
        }
    };
    // Kept for the request that continues this conversation.
    let mut request = request;
    if let (Some(slices), Identity::Conversation(_)) = (&slices, &identity) {
        request.seen.kept_as = state.inbound.keep(&body, slices, &request, responses_kept);
    }
    for w in &request.warnings {
        tracing::debug!(warning = %w, "request conversion");
    }
    let label = conversation_label(&identity);
    if let Some(prior) = prior {
        if prior.conversation != label {
            let e = super::response_log::PreviousResponseError::OtherConversation {
                id: raw["previous_response_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                theirs: prior.conversation,
                ours: label,
            };
            return error_response(
                wire,
                StatusCode::BAD_REQUEST,
                ErrorKind::InvalidRequest,
                &e.to_string(),
            );
        }
        request.fields.fields.remove("previous_response_id");
        let mut messages = Vec::clone(&prior.messages);
        messages.extend(Arc::unwrap_or_clone(std::mem::take(&mut request.messages)));
        request.messages = Arc::new(messages);
    }
    // A chat client's own declared tools were captured with its fields; a Responses client's
    // are the ones its body declared before it was read as a chat body.
    if wire == Wire::Responses {
        request.fields.tools = responses_tools;
        request.system_form = responses_system;
    }
    request.not_forwarded.extend(responses_not_forwarded);
    let upstream = upstream_api(state, &request.model);
    // A Responses upstream takes a Responses client's tools and items as they are.
    if wire == Wire::Responses && upstream == Some(ApiKind::OpenAiResponses) {
        request.not_forwarded.retain(|kind| {
            !matches!(
                kind,
                NotForwarded::NonFunctionTool | NotForwarded::ResponsesItem
            )
        });
    }
    // A chat client's message-level fields reach a chat upstream (and the simulator) only.
    if wire == Wire::OpenAi
        && matches!(
            upstream,
            Some(ApiKind::AnthropicMessages | ApiKind::OpenAiResponses)
        )
    {
        let carrying = request
            .messages
            .iter()
            .filter(|m| chat_fields(m).is_some())
            .count();
        request.not_forwarded.extend(std::iter::repeat_n(
            NotForwarded::ChatMessageField,
            carrying,
        ));
    }
    report_not_forwarded(state, &label, &request.not_forwarded);
    let conversation = label.clone();
    // What a stored answer continues: the messages it answers (the answer joins them).
    let answered = store_answer.then(|| (label, Vec::clone(&request.messages)));
    request.memory_tools = state.config.serve.memory_tools
        || header_switch(&headers, "x-rampart-memory") == Some(true);
    // The engine's tools are offered unless the server or the client turns them off.
    request.engine_tools = state.config.serve.engine_tools
        && header_switch(&headers, "x-rampart-engine-tools") != Some(false);
    // Admission: a bounded queue, never an unbounded one.
    if state.admitted.fetch_add(1, Ordering::AcqRel) >= state.limit {
        state.admitted.fetch_sub(1, Ordering::AcqRel);
        let mut r = error_response(
            wire,
            StatusCode::TOO_MANY_REQUESTS,
            ErrorKind::Overloaded,
            "rampart serve is at its limit of queued requests (`serve.maxConcurrent` + \
             `serve.maxQueue`); retry after the time in Retry-After",
        );
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
        return r;
    }
    let admission_state = Arc::clone(state);
    let worker_state = Arc::clone(state);
    // A streaming client gets the upstream's pieces as they arrive.
    let (sender, receiver) = if request.stream {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<StreamDelta>();
        (Some(tx), Some(rx))
    } else {
        (None, None)
    };
    // What was streamed, kept so that a client that goes away mid-answer leaves the partial
    // answer in its conversation, marked aborted.
    let log = sender.as_ref().map(|_| Arc::new(StreamLog::default()));
    let forwarded = Forwarded {
        tools: request.tools.clone(),
        credential,
        deltas: sender.map(|tx| {
            let log = log.clone();
            DeltaSink::new(move |delta| {
                if let Some(log) = &log {
                    log.push(&delta);
                }
                // `false` once the client is gone: the provider stops reading the answer.
                tx.send(delta).is_ok()
            })
        }),
        prompt_cache: true,
        client_breakpoints: client_breakpoints(&request),
        headers: passthrough_headers(&headers),
        client_fields: Some(request.fields.clone()),
        query,
        unsent: Some(unsent_sink(state, conversation)),
        client_system: request
            .system_form
            .clone()
            .zip(request.system.clone())
            .map(|(form, text)| ClientSystem { text, form }),
    };
    let (model, include_usage) = (request.model.clone(), request.include_usage);
    let id = answer_id(state, wire);
    let remember = answered.map(|(conversation, mut messages)| {
        let state = Arc::clone(state);
        let id = id.clone();
        move |reply: &AssistantMessage| {
            messages.push(Arc::new(AgentMessage::Assistant(reply.clone())));
            let stored = super::response_log::StoredResponse {
                conversation,
                messages: Arc::new(messages),
            };
            state.responses.remember(&id, stored);
        }
    });
    // How the answer bound is fitted to the window; read here for a streamed answer's header.
    let fit = AnswerFit::new(state.config.serve.min_answer_tokens);
    let worker_fit = fit.clone();
    let join = tokio::task::spawn_blocking(move || {
        let _admission = Admission(&admission_state);
        match identity {
            Identity::Side(reason) => {
                tracing::debug!(?reason, model = %request.model, "side request");
                side_request(&worker_state, request, forwarded, &worker_fit)
            }
            Identity::Conversation(client) => conversation_turn(
                &worker_state,
                request,
                client.as_ref(),
                forwarded,
                worker_fit,
                log.as_deref(),
            ),
        }
    });
    if let Some(mut rx) = receiver {
        // Nothing is sent before the first piece of content: until then a failure still gets
        // its own status. The channel closes when the turn ends.
        while let Some(delta) = rx.recv().await {
            if delta != StreamDelta::Attempt {
                let answer = StreamAnswer {
                    wire,
                    id: &id,
                    model: &model,
                    include_usage,
                    echo: echo.as_ref(),
                    lowered: fit.last().and_then(|r| r.lowered()),
                    remember: remember.map(|r| Box::new(r) as Remember),
                };
                return stream_response(answer, delta, rx, join);
            }
        }
    }
    match join.await {
        Ok(Ok(answer)) => {
            if let Some(remember) = remember {
                remember(&answer.reply);
            }
            answer.into_response(&id, echo.as_ref())
        }
        Ok(Err(failure)) => failure.into_response(wire),
        Err(e) => error_response(
            wire,
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorKind::Server,
            &format!(
                "the turn stopped unexpectedly ({e}); the conversation is as it was before the answer"
            ),
        ),
    }
}

/// A request that continues a recently decoded one ([`continue_request`]).
struct Continued {
    /// The rest of the body (only the new messages) as the client's wire wrote it: a Responses
    /// body before its conversion, another after the primary was named in it.
    raw: Value,
    identity: Identity,
    request: ClientRequest,
    /// A Responses body's conversion, its chat form the one decoded.
    converted: Option<inbound::ResponsesAsChat>,
}

/// A request whose leading messages are a recent request's, byte for byte: those are taken
/// decoded and only the rest of the body is parsed ([`super::inbound_memo`]). `None` sends the
/// body down the whole path: the rest is not valid, it is a side request, or the new messages
/// cannot be decoded alone.
fn continue_request(
    state: &ServerState,
    wire: Wire,
    endpoint: Endpoint,
    headers: &HeaderMap,
    continuation: super::inbound_memo::Continuation,
    now_ms: u64,
) -> Option<Continued> {
    let rest: Value = serde_json::from_slice(&continuation.rest).ok()?;
    // A Responses body is read as the chat body it means; the rest of the server reads the
    // body as sent (its echo, `store`) and the conversion beside it.
    let (raw, mut converted) = match wire {
        Wire::Responses => {
            let converted =
                super::inbound_memo::responses_rest_as_chat(&rest, &continuation.prior)?;
            (rest, Some(converted))
        }
        Wire::OpenAi | Wire::Anthropic => (name_the_primary(rest, wire, &state.config), None),
    };
    if let Some(converted) = &mut converted {
        converted.chat = name_the_primary(std::mem::take(&mut converted.chat), wire, &state.config);
    }
    let chat = converted.as_ref().map_or(&raw, |c| &c.chat);
    // A side request is told by its messages being one user line: read the whole body.
    let identity = match identify(endpoint, headers, chat, &state.config.serve.side_requests) {
        Identity::Side(_) => return None,
        conversation => conversation,
    };
    let request = super::inbound_memo::decode_continuing(wire, chat, continuation.prior, now_ms)?;
    tracing::trace!(
        messages = request.messages.len(),
        rest_bytes = continuation.rest.len(),
        "request continues a decoded one"
    );
    Some(Continued {
        raw,
        identity,
        request,
        converted,
    })
}

/// An OpenAI body (chat or Responses) that names no model (absent, null or empty) names the
/// configured primary instead: serve sends every conversation to the primary whatever the
/// client names, OpenAI's specification lets a Responses request leave `model` out, and the
/// answer then says which model answered. Anthropic's API requires `model`, so its bodies are
/// left as they are (and refused without one).
fn name_the_primary(mut raw: Value, wire: Wire, config: &Config) -> Value {
    // A model of another type is left for the decoder to refuse, naming the field.
    let unnamed = match raw.get("model") {
        None | Some(Value::Null) => true,
        Some(Value::String(m)) => m.trim().is_empty(),
        Some(_) => false,
    };
    if wire != Wire::Anthropic && unnamed {
        let primary = config
            .agent_defaults
            .primary
            .clone()
            .unwrap_or_else(crate::run::default_model);
        if let Some(obj) = raw.as_object_mut() {
            obj.insert("model".into(), json!(primary.to_string()));
        }
    }
    raw
}

/// The conversation a request is counted and remembered under: its client's root key,
/// `unnamed` without one, `side` for a side request.
fn conversation_label(identity: &Identity) -> String {
    match identity {
        Identity::Conversation(Some(session)) => session.root_key(),
        Identity::Conversation(None) => "unnamed".to_owned(),
        Identity::Side(_) => "side".to_owned(),
    }
}

/// The API of the provider a request for `model` goes to first (its primary route).
fn upstream_api(state: &ServerState, model: &str) -> Option<ApiKind> {
    let routes = route(&state.config, model).ok()?;
    let first = routes.first()?;
    state.providers.settings(&first.provider).map(|s| s.api)
}

/// Where the upstream's provider reports the client's opaque messages (an Anthropic `system`
/// message inside `messages`) its wire has no form for: counted and warned as what the
/// request carried that is not forwarded, once per upstream request that left them out.
fn unsent_sink(state: &Arc<ServerState>, conversation: String) -> UnsentSink {
    let state = Arc::clone(state);
    UnsentSink::new(move |wire, count| {
        tracing::debug!(conversation = %conversation, upstream_wire = wire, count, "opaque messages left out");
        let items = vec![NotForwarded::SystemMessage; usize::try_from(count).unwrap_or(0)];
        report_not_forwarded(&state, &conversation, &items);
    })
}

/// Counts what a request carried that is not forwarded and warns about each kind once per
/// `conversation` ([`conversation_label`]).
fn report_not_forwarded(state: &ServerState, conversation: &str, items: &[NotForwarded]) {
    if items.is_empty() {
        return;
    }
    for (kind, count) in state.not_forwarded.record(conversation, items) {
        tracing::warn!(
            conversation = %conversation,
            kind = kind.label(),
            count,
            "the client sent content rampart serve does not forward upstream; the model does not \
             see it (counted in rampart_serve_content_not_forwarded_total; warned once per \
             conversation)"
        );
    }
}

/// The client's own prompt-cache breakpoints, recognised in the managed prompt by content
/// (`history::same_message`, the rule that places a request).
fn client_breakpoints(request: &ClientRequest) -> ClientBreakpoints {
    let marked = request.breakpoints.clone();
    ClientBreakpoints {
        system: request.system_breakpoint,
        marks: (!marked.is_empty()).then(|| {
            Arc::new(move |m: &AgentMessage| {
                marked
                    .iter()
                    .any(|sent| super::history::same_message(m, sent))
            }) as BreakpointMatcher
        }),
    }
}

/// How a streamed answer is written: the client's wire, the model it named, whether it asked
/// for a usage chunk, and what a Responses answer repeats of its request.
struct StreamAnswer<'a> {
    wire: Wire,
    /// The answer's id.
    id: &'a str,
    model: &'a str,
    include_usage: bool,
    echo: Option<&'a ResponsesEcho>,
    /// The answer bound sent and the one asked for, when serve lowered it.
    lowered: Option<(u64, u64)>,
    /// Keeps the answer for `previous_response_id` once it is complete.
    remember: Option<Remember>,
}

/// What keeps a complete answer (the [`super::response_log`]).
type Remember = Box<dyn FnOnce(&AssistantMessage) + Send>;

/// A streamed answer written as its pieces arrive; it ends with the stored answer's stop reason
/// and usage, or with an in-stream error.
fn stream_response(
    answer: StreamAnswer<'_>,
    first: StreamDelta,
    rx: tokio::sync::mpsc::UnboundedReceiver<StreamDelta>,
    join: tokio::task::JoinHandle<Result<Answer, Failure>>,
) -> Response {
    let meta = AnswerMeta {
        id: answer.id,
        model: answer.model,
        created: now_unix_ms() / 1000,
        echo: answer.echo,
    };
    let mut encoder = StreamEncoder::new(answer.wire, &meta, answer.include_usage);
    let mut pending: std::collections::VecDeque<String> = encoder.begin().into();
    pending.extend(encoder.delta(&first));
    struct Pump {
        rx: tokio::sync::mpsc::UnboundedReceiver<StreamDelta>,
        join: Option<tokio::task::JoinHandle<Result<Answer, Failure>>>,
        encoder: StreamEncoder,
        pending: std::collections::VecDeque<String>,
        remember: Option<Remember>,
    }
    let pump = Pump {
        rx,
        join: Some(join),
        encoder,
        pending,
        remember: answer.remember,
    };
    let frames = futures_util::stream::unfold(pump, |mut p| async move {
        loop {
            if let Some(frame) = p.pending.pop_front() {
                return Some((Ok::<Bytes, std::convert::Infallible>(Bytes::from(frame)), p));
            }
            let join = p.join.as_mut()?;
            match p.rx.recv().await {
                Some(delta) => {
                    let frames = p.encoder.delta(&delta);
                    p.pending.extend(frames);
                }
                None => {
                    let frames = match join.await {
                        Ok(Ok(answer)) => {
                            if let Some(remember) = p.remember.take() {
                                remember(&answer.reply);
                            }
                            p.encoder.finish(&answer.reply)
                        }
                        Ok(Err(f)) => p.encoder.fail(f.kind, &f.message),
                        Err(e) => p.encoder.fail(
                            ErrorKind::Server,
                            &format!("the turn stopped unexpectedly ({e})"),
                        ),
                    };
                    p.join = None;
                    p.pending.extend(frames);
                }
            }
        }
    });
    let mut response = Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(frames))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response());
    mark_lowered(&mut response, answer.lowered);
    response
}

/// The header that tells a client its `max_tokens` was lowered to fit the window:
/// `x-rampart-max-tokens: GRANTED; requested=ASKED`.
pub const MAX_TOKENS_HEADER: &str = "x-rampart-max-tokens";

fn mark_lowered(response: &mut Response, lowered: Option<(u64, u64)>) {
    if let Some((granted, requested)) = lowered
        && let Ok(value) = HeaderValue::from_str(&format!("{granted}; requested={requested}"))
    {
        response.headers_mut().insert(MAX_TOKENS_HEADER, value);
    }
}

fn answer_id(state: &ServerState, wire: Wire) -> String {
    let n = state.next_id.fetch_add(1, Ordering::Relaxed);
    match wire {
        Wire::OpenAi => format!("chatcmpl-rampart-{:x}-{n}", now_unix_ms()),
        Wire::Anthropic => format!("msg_rampart_{:x}_{n}", now_unix_ms()),
        Wire::Responses => format!("resp_rampart_{:x}_{n}", now_unix_ms()),
    }
}

/// An answer ready to write in the client's wire.
struct Answer {
    wire: Wire,
    model: String,
    stream: bool,
    include_usage: bool,
    reply: AssistantMessage,
    /// The answer bound sent and the one asked for, when serve lowered it.
    lowered: Option<(u64, u64)>,
}

impl Answer {
    fn into_response(self, id: &str, echo: Option<&ResponsesEcho>) -> Response {
        let meta = AnswerMeta {
            id,
            model: &self.model,
            created: now_unix_ms() / 1000,
            echo,
        };
        if self.stream {
            let frames = match self.wire {
                Wire::OpenAi => outbound::openai_sse(&self.reply, &meta, self.include_usage),
                Wire::Anthropic => outbound::anthropic_sse(&self.reply, &meta),
                Wire::Responses => outbound::responses_sse(&self.reply, &meta),
            };
            let mut response = Response::builder()
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, "text/event-stream")
                .header(header::CACHE_CONTROL, "no-cache")
                .body(Body::from(frames.concat()))
                .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response());
            mark_lowered(&mut response, self.lowered);
            return response;
        }
        let body = match self.wire {
            Wire::OpenAi => outbound::openai_response(&self.reply, &meta),
            Wire::Anthropic => outbound::anthropic_response(&self.reply, &meta),
            Wire::Responses => outbound::responses_response(&self.reply, &meta),
        };
        let mut response = json_response(StatusCode::OK, body);
        mark_lowered(&mut response, self.lowered);
        response
    }
}

/// The pieces of the current streamed attempt, as the client was sent them.
#[derive(Debug, Default)]
struct StreamLog(std::sync::Mutex<Vec<StreamDelta>>);

impl StreamLog {
    fn push(&self, delta: &StreamDelta) {
        let mut log = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if *delta == StreamDelta::Attempt {
            log.clear();
        } else {
            log.push(delta.clone());
        }
    }

    /// The answer so far as an aborted assistant message; `None` when nothing was streamed.
    fn partial(&self, provider: &str, model: &str) -> Option<AssistantMessage> {
        use rampart_message::{ContentBlock, StopReason, ToolCall};
        let log = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let mut content: Vec<ContentBlock> = Vec::new();
        let mut text_block = None;
        let mut calls: Vec<(u64, String)> = Vec::new();
        for delta in log.iter() {
            match delta {
                StreamDelta::Text { block, text } => {
                    match (content.last_mut(), text_block == Some(*block)) {
                        (Some(ContentBlock::Text(t)), true) => t.text.push_str(text),
                        _ => content.push(ContentBlock::text(text.clone())),
                    }
                    text_block = Some(*block);
                }
                StreamDelta::ToolCallStart { index, id, name } => {
                    text_block = None;
                    calls.push((*index, String::new()));
                    content.push(ContentBlock::ToolCall(ToolCall {
                        id: id.clone(),
                        name: name.clone(),
                        arguments: Value::Object(Default::default()),
                        thought_signature: None,
                        extra: Default::default(),
                    }));
                }
                StreamDelta::ToolCallArguments { index, fragment } => {
                    if let Some((_, args)) = calls.iter_mut().rev().find(|(i, _)| i == index) {
                        args.push_str(fragment);
                    }
                }
                StreamDelta::Item { item, .. } => {
                    text_block = None;
                    content.push(crate::providers::responses::opaque::opaque_block(
                        item.clone(),
                    ));
                }
                StreamDelta::Attempt | StreamDelta::ItemId { .. } => {}
            }
        }
        if content.is_empty() {
            return None;
        }
        let mut args = calls.into_iter().map(|(_, a)| a);
        for block in &mut content {
            if let ContentBlock::ToolCall(c) = block
                && let Some(raw) = args.next()
            {
                c.arguments = serde_json::from_str(&raw).unwrap_or(Value::String(raw));
            }
        }
        Some(AssistantMessage {
            content,
            api: String::new(),
            provider: provider.to_owned(),
            model: model.to_owned(),
            usage: Default::default(),
            stop_reason: StopReason::Aborted,
            timestamp: now_unix_ms(),
            error_message: Some("the client disconnected before the answer was complete".into()),
            extra: Default::default(),
        })
    }
}

/// Why a request got no answer, as the client will read it.
#[derive(Debug)]
struct Failure {
    status: StatusCode,
    kind: ErrorKind,
    message: String,
    /// The upstream's `Retry-After`, passed on with its 429.
    retry_after: Option<std::time::Duration>,
}

impl Failure {
    fn new(status: StatusCode, kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            status,
            kind,
            message: message.into(),
            retry_after: None,
        }
    }

    /// The failure in the client's wire, with the upstream's `Retry-After` (whole seconds,
    /// rounded up) when it sent one.
    fn into_response(self, wire: Wire) -> Response {
        let mut response = error_response(wire, self.status, self.kind, &self.message);
        if let Some(after) = self.retry_after {
            let seconds = after.as_secs() + u64::from(after.subsec_nanos() > 0);
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// The models a request may use: the configured model it names (`provider/model`, or an id
/// one provider lists), else the agent's default list.
fn route(config: &Config, model: &str) -> Result<Vec<ModelName>, Failure> {
    if let Ok(name) = model.parse::<ModelName>()
        && config.models.providers().any(|p| p.id == name.provider)
    {
        return Ok(vec![name]);
    }
    if let Some(p) = config
        .models
        .providers()
        .find(|p| p.models.iter().any(|m| m.id == model))
    {
        return Ok(vec![ModelName::new(p.id.clone(), model)]);
    }
    RunSettings::from_config(config)
        .map(|s| s.candidates)
        .map_err(|e| {
            Failure::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                ErrorKind::Server,
                e.to_string(),
            )
        })
}

/// A side request's answer bound, fitted to the model's window like a turn's
/// ([`crate::run::answer_fit::grant`], with the client's thinking budget kept below it): the
/// bound sent, and `(granted, asked)` when it is lower than the client asked. The prompt is the
/// estimate of its system text, messages and tools (a side request is small; the margin of the
/// precheck's safety factor covers the estimate).
fn fit_side_request(
    state: &ServerState,
    name: &ModelName,
    system: Option<&str>,
    messages: &[SharedMessage],
    asked: Option<u64>,
    forwarded: &mut Forwarded,
    fit: &AnswerFit,
) -> (Option<u64>, Option<(u64, u64)>) {
    let Some(asked) = asked else {
        return (None, None);
    };
    let window = crate::models::resolve_window(&state.config, name, Default::default()).tokens;
    if window == 0 {
        return (Some(asked), None);
    }
    use rampart_engine_api::tokens::{CHARS_PER_TOKEN, estimate_string_chars};
    let text_tokens = |text: &str| estimate_string_chars(text).div_ceil(CHARS_PER_TOKEN);
    let prompt = system.map_or(0, text_tokens)
        + messages
            .iter()
            .map(|m| rampart_engine_api::tokens::estimate_message_tokens(m))
            .sum::<u64>()
        + forwarded
            .tools
            .iter()
            .map(|t| text_tokens(&t.counted_text()))
            .sum::<u64>();
    let granted = crate::run::answer_fit::grant(window, asked, fit.floor, prompt);
    // Recorded as a turn's fit is, for a streamed answer's header.
    fit.record(crate::run::answer_fit::FitRecord {
        prompt_tokens: prompt,
        window,
        requested: Some(asked),
        granted: Some(granted),
        floor: fit.floor,
    });
    if granted >= asked {
        return (Some(asked), None);
    }
    if let Some(fields) = forwarded.client_fields.as_mut() {
        crate::run::answer_fit::fit_thinking(fields, granted);
    }
    tracing::info!(model = %name, window, prompt_tokens = prompt, requested = asked, granted,
        "side request: the client's max_tokens leaves no room for the prompt; asking for what fits");
    (Some(granted), Some((granted, asked)))
}

/// A side request: straight to the model, no conversation, no engine.
fn side_request(
    state: &ServerState,
    request: ClientRequest,
    forwarded: Forwarded,
    fit: &AnswerFit,
) -> Result<Answer, Failure> {
    let name = route(&state.config, &request.model)?
        .into_iter()
        .next()
        .ok_or_else(|| {
            Failure::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                ErrorKind::Server,
                "no model is configured",
            )
        })?;
    let resolved = state
        .providers
        .resolve(&name)
        .map_err(|e| turn_failure(&e))?;
    let messages: Vec<SharedMessage> = request.messages.to_vec();
    // A bound the window cannot hold beside the prompt is fitted as a turn's is (Claude Code
    // asks 32,000 answer tokens of a 16,000-token local model for its title call too).
    let mut forwarded = forwarded;
    let (max_tokens, lowered) = fit_side_request(
        state,
        &name,
        request.system.as_deref(),
        &messages,
        request.max_tokens,
        &mut forwarded,
        fit,
    );
    let started = Instant::now();
    let answer = resolved
        .provider
        .complete(&ModelRequest {
            model: name.model.clone(),
            system: request.system.clone(),
            messages: messages.into(),
            max_tokens,
            deadline: None,
            forwarded,
        })
        .map_err(|e| provider_failure(&e))?;
    state.metrics.side_request(started.elapsed());
    Ok(Answer {
        wire: request.wire,
        model: request.model,
        stream: request.stream,
        include_usage: request.include_usage,
        reply: answer.message,
        lowered,
    })
}

/// A conversation turn: the conversation opened in its lane, the unseen messages appended, the
/// run loop, the answer.
fn conversation_turn(
    state: &ServerState,
    request: ClientRequest,
    client: Option<&ClientSession>,
    forwarded: Forwarded,
    fit: AnswerFit,
    log: Option<&StreamLog>,
) -> Result<Answer, Failure> {
    let wait = state.config.session.write_lock_timeout;
    let busy = |e: rampart_sessions::lanes::LaneTimeout| {
        Failure::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorKind::Server,
            format!(
                "the conversation is busy with another request ({e}); retry when it has \
                 been answered, or raise `session.writeLockTimeoutMs`"
            ),
        )
    };
    // A request with a client id is placed first, then waits in its own conversation's lane, so
    // a root and its subagents run side by side. One without is placed inside the lane of its
    // first message's bucket, so that two alike first requests cannot take one conversation.
    let (lane, chosen) = match client {
        Some(_) => {
            let chosen = conversations::choose_continuing(
                state.store.as_ref(),
                &state.sessions,
                client,
                &request.messages,
                request.seen.continues,
            )
            .map_err(|e| open_failure(&e))?;
            (chosen.key.clone(), Some(chosen))
        }
        None => (conversations::anon_bucket(&request.messages), None),
    };
    state
        .lanes
        .try_run(&lane, wait, || {
            turn_in_lane(state, request, client, chosen, forwarded, fit, log)
        })
        .map_err(busy)?
}

/// A failure of the session store that may pass (its database unreachable): 503 with
/// `Retry-After`, so the client (or a load balancer) tries again, here or at another replica.
/// Nothing of the turn was acknowledged, so the retry is the same turn.
fn store_unavailable(e: &dyn std::fmt::Display) -> Failure {
    let mut failure = Failure::new(
        StatusCode::SERVICE_UNAVAILABLE,
        ErrorKind::Overloaded,
        format!("{e}; retry after the time in Retry-After"),
    );
    failure.retry_after = Some(std::time::Duration::from_secs(RETRY_AFTER_SECONDS));
    failure
}

fn open_failure(e: &ConversationError) -> Failure {
    let unavailable = match e {
        ConversationError::Store(s) => s.is_unavailable(),
        ConversationError::Session(s) => s.is_unavailable(),
        ConversationError::Busy { .. } => false,
    };
    if unavailable {
        return store_unavailable(e);
    }
    match e {
        ConversationError::Busy { .. } => Failure::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorKind::Server,
            format!("{e}; retry once it is done, or raise `session.writeLockTimeoutMs`"),
        ),
        other => Failure::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorKind::Server,
            format!("the conversation could not be opened: {other}"),
        ),
    }
}

fn turn_in_lane(
    state: &ServerState,
    request: ClientRequest,
    client: Option<&ClientSession>,
    chosen: Option<conversations::Chosen>,
    forwarded: Forwarded,
    fit: AnswerFit,
    log: Option<&StreamLog>,
) -> Result<Answer, Failure> {
    let config = &state.config;
    let wait = config.session.write_lock_timeout;
    let chosen = match chosen {
        Some(c) => c,
        None => conversations::choose_continuing(
            state.store.as_ref(),
            &state.sessions,
            client,
            &request.messages,
            request.seen.continues,
        )
        .map_err(|e| open_failure(&e))?,
    };
    let mut conversation = conversations::open_chosen(
        state.store.as_ref(),
        &state.sessions,
        chosen,
        &request.messages,
        wait,
    )
    .map_err(|e| open_failure(&e))?;
    if conversation.created {
        state.metrics.conversation_created();
        tracing::info!(key = %conversation.key, spawned_by = ?conversation.spawned_by, "conversation created");
    }
    let session = &mut conversation.session;
    let placement = conversation.placement.clone();
    let moved = match &placement.attach_at {
        Some(id) => session.branch(id).map_err(|e| e.to_string()),
        None => {
            session.reset_leaf();
            Ok(())
        }
    };
    moved.map_err(|e| Failure::new(StatusCode::INTERNAL_SERVER_ERROR, ErrorKind::Server, e))?;
    tracing::debug!(key = %conversation.key, kind = ?placement.kind, matched = placement.matched,
        unseen = placement.unseen(&request.messages).len(), "request placed");

    let mut settings = RunSettings::from_config(config).map_err(|e| {
        Failure::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorKind::Server,
            e.to_string(),
        )
    })?;
    settings.candidates = route(config, &request.model)?;
    settings.max_output_tokens = request.max_tokens;
    settings.forwarded = forwarded;
    // A client's bound that leaves no room for the prompt is fitted to the window.
    settings.answer_fit = Some(fit.clone());
    // The host's tools, answered here and hidden from the client: the memory tools for a
    // client that opted in, the context engine's own unless it opted out, never one of a name
    // the client declares. Each model call's pieces are held until it is known whether it ends
    // in such calls (dropped: the server answers them) or is the answer (passed on).
    let mut engine_session = crate::run::session_ref(session);
    engine_session.session_key = Some(conversation.key.clone());
    let host_tools = {
        let tools = HostTools::none();
        let tools = if request.memory_tools {
            tools.with_memory(&state.memory)
        } else {
            tools
        };
        let tools = if request.engine_tools {
            tools.with_engine(&state.slot, engine_session)
        } else {
            tools
        };
        tools.without_client_tools(&request.tools)
    };
    let held_steps = (!host_tools.is_empty()).then(|| {
        settings.forwarded.tools.extend(host_tools.specs());
        let held = StepBuffer::new(settings.forwarded.deltas.take());
        settings.forwarded.deltas = held.sink();
        held
    });
    // `serve.systemPrompt`: the client's prompt (the default), Rampart's, or both.
    settings.system_prompt = match &state.prompt {
        Some(prompt) => prompt.for_client(
            config.serve.system_prompt,
            &conversation.key,
            &settings,
            request.system.as_deref(),
        ),
        None => request.system.clone(),
    };
    let session_id = session.header().id.clone();
    // The engine's model calls for this conversation go with what its client presented
    // (`serve.engineCredentials`).
    state
        .engine_credentials
        .remember(&session_id, settings.forwarded.credential.as_ref());
    state
        .dashboard
        .name(&session_id, &conversation.key, now_unix_ms());
    let events = RunEvents::new(state.events.clone(), Some(session_id.clone()));
    let runner = Runner::new(
        config,
        &state.slot,
        state.providers.as_ref(),
        settings,
        events,
    )
    .with_blobs_in(state.store.as_ref())
    .with_registry(
        state.store.as_ref(),
        conversation.key.clone(),
        RegistryWrites::Batched,
    )
    // The server and its engine live on between requests: the compaction the budget will
    // trigger is prepared after a turn and swapped in, so no request waits for a summariser.
    .preparing_compactions()
    // What the last request's runner counted of this conversation: only new messages count.
    .with_memos(std::mem::take(&mut conversation.memos));
    let runner = match &state.workspace {
        Some(workspace) => runner.with_memory_flush(&state.memory, workspace.clone()),
        None => runner,
    };
    let mut runner = runner;

    // The unseen messages in one append: a first request can carry a whole conversation.
    runner
        .append_all(
            session,
            placement
                .unseen(&request.messages)
                .iter()
                .map(|m| super::inbound_memo::stamped(m, request.now_ms))
                .collect(),
        )
        .map_err(|e| turn_failure(&e))?;
    // Where this request's messages now are, for the request that re-sends them.
    if let Some(generation) = request.seen.kept_as
        && let Some(note) = super::history::sent_entries(
            session.tree(),
            request.messages.len(),
            &state
                .sessions
                .known(&conversation.key, request.seen.continues),
        )
    {
        state
            .sessions
            .note_sent(&conversation.key, generation, note);
    }
    let started = Instant::now();
    let result = match &held_steps {
        Some(steps) => {
            // Results the client never sees are marked, so its next request, which lacks
            // them, still continues the conversation.
            let first = runner.run_turn(session, None);
            let result = answer_host_tool_calls(
                &mut runner,
                session,
                &host_tools,
                Some(&conversation.key),
                first,
                || steps.drop_step(),
                Some(super::history::SERVER_TOOL_MARK),
            );
            steps.release();
            result
        }
        None => runner.run_turn(session, None),
    };
    let upstream = started.elapsed();
    // The turn's counters join the next batch; the session file below is the turn's record.
    state
        .registry
        .add(conversation.key.clone(), runner.take_registry_changes());
    let memos = runner.take_memos();
    drop(runner);
    if let Err(TurnError::Provider(ProviderError::Cancelled { provider })) = &result
        && let Some(partial) = log.and_then(|l| l.partial(provider, &request.model))
    {
        // The client went away mid-answer: what it was shown stays, marked aborted (as pi
        // records an interrupted answer); an aborted turn is never sent to a model again.
        tracing::info!(key = %conversation.key, "client disconnected mid-answer; partial answer kept as aborted");
        if let Err(e) = session.append_message(AgentMessage::Assistant(partial)) {
            tracing::warn!(error = %e, "the partial answer could not be kept");
        }
    }
    if let Err(e) = session.sync() {
        return Err(Failure::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorKind::Server,
            format!("the answer could not be written to the conversation: {e}"),
        ));
    }
    // Kept open for the conversation's next request (a session that failed on the way is
    // dropped instead, and read again from its file next time).
    state
        .sessions
        .put(&conversation.key, conversation.session, memos);
    let report = result.map_err(|e| match e {
        TurnError::ContextOverflow { .. } => overflow_failure(&fit, &e),
        e => turn_failure(&e),
    })?;
    state.metrics.turn(upstream, report.compactions);
    state.dashboard.turn(
        &session_id,
        &conversation.key,
        state.slot.configured_id(),
        now_unix_ms(),
    );
    let reply = match &*report.reply {
        AgentMessage::Assistant(a) => a.clone(),
        _ => {
            return Err(Failure::new(
                StatusCode::BAD_GATEWAY,
                ErrorKind::Upstream,
                "the model's answer is not an assistant message",
            ));
        }
    };
    Ok(Answer {
        wire: request.wire,
        model: request.model,
        stream: request.stream,
        include_usage: request.include_usage,
        reply,
        lowered: fit.last().and_then(|r| r.lowered()),
    })
}

/// The streamed pieces of one model call, held until the call's end says whether they are the
/// answer (passed on to the client) or a memory-tool step the server answers (dropped).
struct StepBuffer {
    client: Option<DeltaSink>,
    held: Arc<std::sync::Mutex<Vec<StreamDelta>>>,
}

impl StepBuffer {
    fn new(client: Option<DeltaSink>) -> Self {
        Self {
            client,
            held: Arc::default(),
        }
    }

    /// The sink the provider writes to (none when the client does not stream).
    fn sink(&self) -> Option<DeltaSink> {
        self.client.as_ref()?;
        let held = Arc::clone(&self.held);
        Some(DeltaSink::new(move |delta| {
            held.lock().unwrap_or_else(|p| p.into_inner()).push(delta);
            true
        }))
    }

    fn drop_step(&self) {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    fn release(&self) {
        let pieces = std::mem::take(&mut *self.held.lock().unwrap_or_else(|p| p.into_inner()));
        if let Some(client) = &self.client {
            for piece in pieces {
                if !client.send(piece) {
                    break;
                }
            }
        }
    }
}

fn provider_failure(e: &ProviderError) -> Failure {
    let (status, kind) = match e {
        ProviderError::ContextOverflow { .. } => (400, ErrorKind::InvalidRequest),
        ProviderError::RateLimited { status, .. } => (*status, ErrorKind::RateLimit),
        ProviderError::Transient { status, .. } => (status.unwrap_or(502), ErrorKind::Upstream),
        ProviderError::Auth { status, .. } => (*status, ErrorKind::Authentication),
        ProviderError::MissingApiKey { .. } => (401, ErrorKind::Authentication),
        ProviderError::Unreachable { .. } | ProviderError::InvalidResponse { .. } => {
            (502, ErrorKind::Upstream)
        }
        ProviderError::Timeout { .. } | ProviderError::StreamIdle { .. } => {
            (504, ErrorKind::Upstream)
        }
        ProviderError::BadRequest { status, .. } => (
            if (400..500).contains(status) {
                *status
            } else {
                400
            },
            ErrorKind::InvalidRequest,
        ),
        ProviderError::Cancelled { .. } => (502, ErrorKind::Upstream),
    };
    let mut failure = Failure::new(
        StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY),
        kind,
        e.to_string(),
    );
    if let ProviderError::RateLimited { retry_after, .. } = e {
        failure.retry_after = *retry_after;
    }
    failure
}

/// A turn whose prompt could not be made to fit, worded for a proxy's client: the prompt, the
/// window and the answer bound in numbers, and what the client or the operator can change.
/// (`rampart run`'s wording suggests OpenClaw's `/reset`, which no proxied client has.)
fn overflow_failure(fit: &AnswerFit, e: &TurnError) -> Failure {
    let Some(record) = fit.last() else {
        return turn_failure(e);
    };
    let asked = match record.requested {
        Some(k) => format!(
            "the client asked for {k} answer tokens, and at least {} of them \
             (`serve.minAnswerTokens`) must fit beside the prompt",
            k.min(record.floor)
        ),
        None => "the client set no answer bound".to_owned(),
    };
    Failure::new(
        StatusCode::BAD_REQUEST,
        ErrorKind::InvalidRequest,
        format!(
            "rampart serve: the prompt is {} tokens after compaction and the model's window is {} \
             tokens; {asked}. Nothing more could be compacted (the system prompt, the tools and \
             the latest messages stay). Lower max_tokens, use a model with a larger window, \
             send fewer tools or a shorter system prompt, or lower `serve.minAnswerTokens` in \
             the server's plugins.toml.",
            record.prompt_tokens, record.window
        ),
    )
}

fn turn_failure(e: &TurnError) -> Failure {
    match e {
        TurnError::Provider(p) => provider_failure(p),
        TurnError::Blocked { message, blocked } => Failure::new(
            StatusCode::BAD_REQUEST,
            ErrorKind::InvalidRequest,
            format!(
                "rampart serve: {message} Blocked: {}. Name a model with a larger window, or \
                 correct the model's `contextWindow` in the server's plugins.toml if it has more.",
                blocked.join("; ")
            ),
        ),
        TurnError::ContextOverflow { .. } => Failure::new(
            StatusCode::BAD_REQUEST,
            ErrorKind::InvalidRequest,
            e.to_string(),
        ),
        TurnError::RequiredEngine(_) => Failure::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorKind::Server,
            format!(
                "{e}; the context engine is required (`required = true`): fix it, or let it fall back to legacy"
            ),
        ),
        TurnError::Config(_) | TurnError::UnknownModel { .. } => Failure::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorKind::Server,
            format!("{e}; check the server's plugins.toml"),
        ),
        TurnError::Persist(crate::persist::PersistError::Session(s)) if s.is_unavailable() => {
            store_unavailable(e)
        }
        // The database keeping the blobs did not answer: as unavailable as the session's.
        TurnError::Persist(crate::persist::PersistError::Blob(b)) if b.is_unavailable() => {
            store_unavailable(e)
        }
        TurnError::Persist(_) | TurnError::CompactionFailed { .. } => Failure::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorKind::Server,
            e.to_string(),
        ),
    }
}

// ---------------------------------------------------------------------------
// Keys, parsing, answers
// ---------------------------------------------------------------------------

/// Checks `serve.authToken` when set, and returns the key the client sent for upstream: its
/// `x-api-key`, else its `Authorization: Bearer`, unless that value is the server's token.
#[allow(clippy::result_large_err)]
fn authorize(
    state: &ServerState,
    wire: Wire,
    headers: &HeaderMap,
) -> Result<Option<ClientCredential>, Response> {
    let value = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .map(str::to_owned)
    };
    let bearer = value("authorization").map(|v| {
        v.strip_prefix("Bearer ")
            .or_else(|| v.strip_prefix("bearer "))
            .unwrap_or(&v)
            .trim()
            .to_owned()
    });
    let api_key = value("x-api-key");
    let token = state.config.serve.auth_token.as_deref();
    // The guard checked it before the body was read; checked again here so that no handler
    // depends on the layer being in place.
    if let Some(token) = token
        && !super::guard::carries_token(headers, token)
    {
        return Err(error_response(
            wire,
            StatusCode::UNAUTHORIZED,
            ErrorKind::Authentication,
            super::guard::TOKEN_REQUIRED,
        ));
    }
    let not_token = |k: &String| Some(k.as_str()) != token;
    // An Anthropic client's bearer token (with no `x-api-key` beside it) stays a bearer token
    // upstream: an OAuth login (a Claude subscription) only works that way, and the current
    // Anthropic SDKs send keys that way too. An OpenAI client only has the bearer form, so its
    // token is a key, sent the way the provider takes keys.
    Ok(
        match (api_key.filter(not_token), bearer.filter(not_token)) {
            (Some(key), _) => ClientCredential::new(&key),
            (None, Some(token)) if wire == Wire::Anthropic => ClientCredential::bearer(&token),
            (None, Some(key)) => ClientCredential::new(&key),
            (None, None) => None,
        },
    )
}

/// The client headers that may go upstream: all but those
/// [`crate::providers::never_forwarded`] names and those its `Connection` header names
/// (hop-by-hop by the client's word), values that are not visible ASCII left out; repeated
/// values joined by `, `. The provider picks those meant for its family.
fn passthrough_headers(headers: &HeaderMap) -> Vec<(String, String)> {
    let hop_by_hop: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().to_ascii_lowercase())
        .collect();
    let mut out: Vec<(String, String)> = Vec::new();
    for name in headers.keys() {
        let name = name.as_str();
        if crate::providers::never_forwarded(name) || hop_by_hop.iter().any(|h| h == name) {
            continue;
        }
        let values: Vec<&str> = headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        if !values.is_empty() {
            out.push((name.to_owned(), values.join(", ")));
        }
    }
    out
}

#[allow(clippy::result_large_err)]
fn parse(wire: Wire, body: &[u8]) -> Result<ClientRequest, Response> {
    let raw: Value = serde_json::from_slice(body).map_err(|e| {
        error_response(
            wire,
            StatusCode::BAD_REQUEST,
            ErrorKind::InvalidRequest,
            &format!("the request body is not JSON ({e}); send a JSON object"),
        )
    })?;
    inbound::decode(wire, &raw, now_unix_ms()).map_err(|e| {
        error_response(
            wire,
            StatusCode::BAD_REQUEST,
            ErrorKind::InvalidRequest,
            &e.0,
        )
    })
}

fn json_response(status: StatusCode, body: Value) -> Response {
    (status, axum::Json(body)).into_response()
}

fn error_response(wire: Wire, status: StatusCode, kind: ErrorKind, message: &str) -> Response {
    json_response(status, outbound::error_body(wire, kind, message))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "server_tests.rs"]
mod tests;
