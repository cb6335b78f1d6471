//! A scripted HTTP server on 127.0.0.1 for tests that talk to a model over the network.
//!
//! Tests queue [`Reply`]s; each request the server receives is recorded and answered with the
//! next reply in the queue (or a 500 saying the script ran out). Everything is std-only and
//! every response closes its connection, so a test never depends on keep-alive behaviour.
//!
//! ```ignore
//! let server = Loopback::start();
//! server.push(openai_text_stream("Hello!", 12, 3));
//! let settings = /* a ProviderSettings with base_url = Some(server.url()) */;
//! // ... run the provider or the binary against it ...
//! let sent = server.requests();
//! assert_eq!(sent[0].path, "/v1/chat/completions");
//! assert_eq!(sent[0].body["model"], "gpt-test");
//! ```
//!
//! API in short:
//! - [`Loopback::start`], [`Loopback::url`] (`http://127.0.0.1:PORT/v1`), [`Loopback::push`],
//!   [`Loopback::requests`], [`Loopback::request_count`], [`Loopback::pending`];
//!   dropping the server stops it. [`Loopback::scripted`]: a server that, once its queue is
//!   empty, answers each request with what a function of that request says (a scripted model
//!   for clients whose requests the test cannot predict, such as real agents).
//! - [`Reply::json`], [`Reply::text`], [`Reply::sse`], [`Reply::truncated_sse`],
//!   [`Reply::hang`], [`Reply::close`], and [`Reply::with_header`] on any of them.
//! - Ready-made answers: [`openai_text_stream`], [`openai_tool_call_stream`], [`openai_stream`],
//!   [`openai_overflow_error`], [`anthropic_text_stream`], [`anthropic_tool_use_stream`],
//!   [`anthropic_stream`], [`anthropic_overflow_error`].
//! - [`refused_url`]: a URL nothing listens on.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// A running loopback server. Dropping it stops the server.
pub struct Loopback {
    addr: SocketAddr,
    state: Arc<State>,
    accept: Option<JoinHandle<()>>,
}

/// Answers a request the queue has no reply for.
type Responder = Box<dyn Fn(&Recorded) -> Reply + Send + Sync>;

#[derive(Default)]
struct State {
    replies: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Recorded>>,
    stop: AtomicBool,
    responder: Option<Responder>,
}

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// `POST`, `GET`, …
    pub method: String,
    /// The request target, e.g. `/v1/chat/completions`.
    pub path: String,
    /// Headers in arrival order, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body as JSON; `Value::Null` when empty, a JSON string when not JSON.
    pub body: Value,
    /// The body as received.
    pub raw_body: String,
}

impl Recorded {
    /// The first header called `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A scripted answer.
#[derive(Debug, Clone)]
pub struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Body,
    /// Waited after reading the request, before answering: a slow model.
    delay: Duration,
    /// Waited between the events of a stream: a model that thinks while it answers.
    gap: Duration,
}

#[derive(Debug, Clone)]
enum Body {
    Bytes(Vec<u8>),
    Sse {
        events: Vec<String>,
        complete: bool,
    },
    Hang(Duration),
    /// A 200 event stream that sends only SSE comments (`: keep-alive`) every `every`, for
    /// `total`, then closes without an event: a provider that is alive and says nothing.
    KeepAlive {
        every: Duration,
        total: Duration,
    },
    Close,
}

impl Reply {
    /// A JSON answer with `status`.
    pub fn json(status: u16, value: Value) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: Body::Bytes(value.to_string().into_bytes()),
            delay: Duration::ZERO,
            gap: Duration::ZERO,
        }
    }

    /// A plain-text answer with `status` (a proxy's HTML error page, say).
    pub fn text(status: u16, body: &str) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "text/plain".into())],
            body: Body::Bytes(body.as_bytes().to_vec()),
            delay: Duration::ZERO,
            gap: Duration::ZERO,
        }
    }

    /// A 200 `text/event-stream`, chunked, one chunk (flushed) per event. Each string is a whole
    /// event without its trailing blank line, e.g. `data: {...}` or `event: ping\ndata: {}`.
    pub fn sse(events: Vec<String>) -> Self {
        Self {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            body: Body::Sse {
                events,
                complete: true,
            },
            delay: Duration::ZERO,
            gap: Duration::ZERO,
        }
    }

    /// Like [`Reply::sse`], but the connection drops after `events` in the middle of a further
    /// event, without ending the chunked body: what a client sees when a stream is cut.
    pub fn truncated_sse(events: Vec<String>) -> Self {
        Self {
            body: Body::Sse {
                events,
                complete: false,
            },
            ..Self::sse(Vec::new())
        }
    }

    /// Reads the request, then says nothing for `duration` and closes: a server that hangs.
    pub fn hang(duration: Duration) -> Self {
        Self {
            status: 0,
            headers: Vec::new(),
            body: Body::Hang(duration),
            delay: Duration::ZERO,
            gap: Duration::ZERO,
        }
    }

    /// Reads the request and closes the connection without answering.
    pub fn close() -> Self {
        Self {
            status: 0,
            headers: Vec::new(),
            body: Body::Close,
            delay: Duration::ZERO,
            gap: Duration::ZERO,
        }
    }

    /// A 200 event stream of keep-alive comments only, every `every` for `total`.
    pub fn keep_alive_only(every: Duration, total: Duration) -> Self {
        Self {
            body: Body::KeepAlive { every, total },
            ..Self::sse(Vec::new())
        }
    }

    /// The same stream, with `gap` between its events.
    pub fn paced(mut self, gap: Duration) -> Self {
        self.gap = gap;
        self
    }

    /// The same reply, sent `delay` after the request was read.
    pub fn delayed(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Adds a response header (e.g. `retry-after`).
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers
            .push((name.to_ascii_lowercase(), value.to_owned()));
        self
    }
}

impl Loopback {
    /// Starts a server on an ephemeral port of 127.0.0.1.
    pub fn start() -> Self {
        Self::start_with(None)
    }

    /// Starts a server that answers with `responder` whenever no queued reply is left.
    pub fn scripted(responder: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) -> Self {
        Self::start_with(Some(Box::new(responder)))
    }

    fn start_with(responder: Option<Responder>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let state = Arc::new(State {
            responder,
            ..State::default()
        });
        let accept_state = Arc::clone(&state);
        let accept = std::thread::Builder::new()
            .name("loopback-accept".into())
            .spawn(move || accept_loop(&listener, &accept_state))
            .expect("spawn loopback thread");
        Self {
            addr,
            state,
            accept: Some(accept),
        }
    }

    /// A server with `replies` already queued.
    pub fn with_replies(replies: impl IntoIterator<Item = Reply>) -> Self {
        let server = Self::start();
        for reply in replies {
            server.push(reply);
        }
        server
    }

    /// The base URL as a provider's `baseUrl`: `http://127.0.0.1:PORT/v1`.
    pub fn url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The socket address, for URLs of another shape.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues a reply; replies are served in the order pushed.
    pub fn push(&self, reply: Reply) -> &Self {
        self.state.replies.lock().unwrap().push_back(reply);
        self
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.state.requests.lock().unwrap().clone()
    }

    /// How many requests arrived.
    pub fn request_count(&self) -> usize {
        self.state.requests.lock().unwrap().len()
    }

    /// How many queued replies were not used yet.
    pub fn pending(&self) -> usize {
        self.state.replies.lock().unwrap().len()
    }
}

impl Drop for Loopback {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept so the thread sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(handle) = self.accept.take() {
            let _ = handle.join();
        }
    }
}

/// A URL nothing listens on: a port bound and released again, so connecting is refused.
pub fn refused_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local addr");
    drop(listener);
    format!("http://{addr}/v1")
}

fn accept_loop(listener: &TcpListener, state: &Arc<State>) {
    for stream in listener.incoming() {
        if state.stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = stream else { continue };
        let state = Arc::clone(state);
        // One thread per connection, so a hanging reply does not hold up the next request.
        std::thread::spawn(move || {
            let _ = serve(stream, &state);
        });
    }
}

fn serve(stream: TcpStream, state: &State) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let Some(request) = read_request(&mut reader)? else {
        return Ok(()); // the wake-up connection of Drop, or a client that gave up
    };
    let reply = state.replies.lock().unwrap().pop_front();
    let reply = reply.or_else(|| state.responder.as_ref().map(|answer| answer(&request)));
    state.requests.lock().unwrap().push(request);
    let reply = reply.unwrap_or_else(|| {
        Reply::json(
            500,
            json!({"error": {"message": "loopback: no scripted reply left", "type": "server_error"}}),
        )
    });
    write_reply(stream, reply, state)
}

fn read_request(reader: &mut BufReader<TcpStream>) -> std::io::Result<Option<Recorded>> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            break;
        }
        let trimmed = line.trim_end();
        if trimmed.is_empty() {
            break;
        }
        if let Some((name, value)) = trimmed.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let length = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let raw_body = String::from_utf8_lossy(&body).into_owned();
    let body = if raw_body.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&raw_body).unwrap_or_else(|_| Value::String(raw_body.clone()))
    };
    Ok(Some(Recorded {
        method,
        path,
        headers,
        body,
        raw_body,
    }))
}

fn write_reply(mut stream: TcpStream, reply: Reply, state: &State) -> std::io::Result<()> {
    std::thread::sleep(reply.delay);
    let head = |extra: &str| {
        let mut head = format!("HTTP/1.1 {} {}\r\n", reply.status, reason(reply.status));
        for (name, value) in &reply.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str(extra);
        head.push_str("connection: close\r\n\r\n");
        head
    };
    match &reply.body {
        Body::Bytes(bytes) => {
            stream.write_all(head(&format!("content-length: {}\r\n", bytes.len())).as_bytes())?;
            stream.write_all(bytes)?;
        }
        Body::Sse { events, complete } => {
            stream.write_all(head("transfer-encoding: chunked\r\n").as_bytes())?;
            stream.flush()?;
            for (i, event) in events.iter().enumerate() {
                if i > 0 {
                    std::thread::sleep(reply.gap);
                }
                write_chunk(
                    &mut stream,
                    &format!("{}\n\n", event.trim_end_matches('\n')),
                )?;
            }
            if *complete {
                stream.write_all(b"0\r\n\r\n")?;
            } else {
                write_chunk(&mut stream, "data: {\"cut\": \"mid-ev")?;
            }
        }
        Body::Hang(duration) => {
            let until = Instant::now() + *duration;
            while Instant::now() < until && !state.stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Body::KeepAlive { every, total } => {
            stream.write_all(head("transfer-encoding: chunked\r\n").as_bytes())?;
            stream.flush()?;
            let until = Instant::now() + *total;
            while Instant::now() < until && !state.stop.load(Ordering::SeqCst) {
                write_chunk(&mut stream, ": keep-alive\n\n")?;
                std::thread::sleep(*every);
            }
        }
        Body::Close => {}
    }
    stream.flush()?;
    stream.shutdown(std::net::Shutdown::Both)
}

fn write_chunk(stream: &mut TcpStream, data: &str) -> std::io::Result<()> {
    stream.write_all(format!("{:x}\r\n{data}\r\n", data.len()).as_bytes())?;
    stream.flush()
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}

// ---------------------------------------------------------------------------
// Ready-made answers
// ---------------------------------------------------------------------------

/// An OpenAI stream of `chunks` (each sent as `data: <json>`), ended by `data: [DONE]`.
pub fn openai_stream(chunks: Vec<Value>) -> Reply {
    let mut events: Vec<String> = chunks.iter().map(|c| format!("data: {c}")).collect();
    events.push("data: [DONE]".to_owned());
    Reply::sse(events)
}

/// Splits `text` into a few pieces, so that streams exercise accumulation.
fn pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(size.max(1))
        .map(|c| c.iter().collect())
        .collect()
}

fn openai_chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({
        "id": "chatcmpl-loopback", "object": "chat.completion.chunk", "model": "loopback-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    })
}

fn openai_usage(prompt_tokens: u64, completion_tokens: u64) -> Value {
    json!({
        "id": "chatcmpl-loopback", "object": "chat.completion.chunk", "model": "loopback-model",
        "choices": [],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    })
}

/// A streamed OpenAI answer saying `text` (in several deltas), `finish_reason: stop`, and a
/// usage chunk with the given counts.
pub fn openai_text_stream(text: &str, prompt_tokens: u64, completion_tokens: u64) -> Reply {
    let mut chunks = vec![openai_chunk(
        json!({"role": "assistant", "content": ""}),
        None,
    )];
    chunks.extend(
        pieces(text, 5)
            .into_iter()
            .map(|p| openai_chunk(json!({"content": p}), None)),
    );
    chunks.push(openai_chunk(json!({}), Some("stop")));
    chunks.push(openai_usage(prompt_tokens, completion_tokens));
    openai_stream(chunks)
}

/// A streamed OpenAI answer calling tool `name` with call id `id`; `arguments` (JSON text) is
/// sent in small fragments as real servers do. Usage: 10 prompt, 5 completion tokens.
pub fn openai_tool_call_stream(id: &str, name: &str, arguments: &str) -> Reply {
    let mut chunks = vec![openai_chunk(
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}
        ]}),
        None,
    )];
    chunks.extend(pieces(arguments, 7).into_iter().map(|p| {
        openai_chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}),
            None,
        )
    }));
    chunks.push(openai_chunk(json!({}), Some("tool_calls")));
    chunks.push(openai_usage(10, 5));
    openai_stream(chunks)
}

/// OpenAI's real context-overflow answer (HTTP 400) for a `context`-token model sent a
/// `prompt`-token request.
pub fn openai_overflow_error(context: u64, prompt: u64) -> Reply {
    Reply::json(
        400,
        json!({"error": {
            "message": format!("This model's maximum context length is {context} tokens. However, your messages resulted in {prompt} tokens. Please reduce the length of the messages."),
            "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"
        }}),
    )
}

/// An Anthropic stream of named events: each `(name, data)` is sent as
/// `event: name\ndata: <json>`. Add `message_stop` yourself; a stream without it is incomplete.
pub fn anthropic_stream(events: Vec<(&str, Value)>) -> Reply {
    Reply::sse(
        events
            .into_iter()
            .map(|(name, data)| format!("event: {name}\ndata: {data}"))
            .collect(),
    )
}

fn anthropic_message_start(input_tokens: u64) -> (&'static str, Value) {
    (
        "message_start",
        json!({"type": "message_start", "message": {
            "id": "msg_loopback", "type": "message", "role": "assistant", "model": "loopback-model",
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1}
        }}),
    )
}

fn anthropic_end(stop_reason: &str, output_tokens: u64) -> Vec<(&'static str, Value)> {
    vec![
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                   "usage": {"output_tokens": output_tokens}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ]
}

/// A streamed Anthropic answer saying `text` (in several deltas, with a `ping`), `end_turn`,
/// and the given usage.
pub fn anthropic_text_stream(text: &str, input_tokens: u64, output_tokens: u64) -> Reply {
    let mut events = vec![
        anthropic_message_start(input_tokens),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        ("ping", json!({"type": "ping"})),
    ];
    events.extend(pieces(text, 5).into_iter().map(|p| {
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}}),
        )
    }));
    events.push((
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    events.extend(anthropic_end("end_turn", output_tokens));
    anthropic_stream(events)
}

/// A streamed Anthropic answer calling tool `name` with id `id`; `arguments` (JSON text) is
/// sent as `input_json_delta` fragments. Usage: 10 input, 5 output tokens.
pub fn anthropic_tool_use_stream(id: &str, name: &str, arguments: &str) -> Reply {
    let mut events = vec![
        anthropic_message_start(10),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        ),
    ];
    events.extend(pieces(arguments, 7).into_iter().map(|p| {
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
                   "delta": {"type": "input_json_delta", "partial_json": p}}),
        )
    }));
    events.push((
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    events.extend(anthropic_end("tool_use", 5));
    anthropic_stream(events)
}

/// Anthropic's real context-overflow answer (HTTP 400) for a `prompt`-token request to a
/// `maximum`-token model.
pub fn anthropic_overflow_error(prompt: u64, maximum: u64) -> Reply {
    Reply::json(
        400,
        json!({"type": "error", "error": {
            "type": "invalid_request_error",
            "message": format!("prompt is too long: {prompt} tokens > {maximum} maximum")
        }}),
    )
}
