//! Plumbing shared by the network providers ([`super::openai`], [`super::anthropic`]): the
//! blocking client, the API key, the retry loop, error classification and an SSE reader.
//!
//! The providers only know their wire format. Everything that decides *what kind* of failure
//! happened lives here, so that a 429 or a "prompt is too long" means the same thing whichever
//! API said it, and the run loop can branch on [`ProviderErrorKind`](super::ProviderErrorKind)
//! alone.
//!
//! The key is read from the environment on every request (not when the provider is built), so a
//! config may list providers the user has no key for, and a rotated key is picked up without a
//! restart. It only ever travels inside a type whose `Debug` prints `***` and in a header marked
//! sensitive, and any server text that echoes it is redacted before it reaches an error.

use std::fmt;
use std::io::{self, BufRead, BufReader, Read};
use std::time::{Duration, Instant};

use rampart_context::overflow::{is_likely_context_overflow_error, observed_overflow_tokens};
use reqwest::blocking::{Client, Response};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use super::{ProviderError, ProviderSettings};

/// No back-off, `Retry-After` included, waits longer than this: a user is waiting on the turn,
/// and a server asking for more is better answered with an error they can see.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(30);

/// How much of a server's error body an error message keeps; bodies can be whole HTML pages.
const MAX_ERROR_TEXT: usize = 2000;

/// An API key read from the environment. Its `Debug` prints `***`, so a key cannot leak through
/// a `{:?}` of any struct that holds one.
struct ApiKey(String);

impl ApiKey {
    /// The key itself, for the one place that writes it into a header.
    fn expose(&self) -> &str {
        &self.0
    }

    /// `text` with every occurrence of the key replaced by `***`: servers sometimes quote the
    /// key they refused, and that text ends up in errors and logs.
    fn redact(&self, text: &str) -> String {
        if self.0.is_empty() {
            text.to_owned()
        } else {
            text.replace(&self.0, "***")
        }
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// How an API expects its key, since OpenAI and Anthropic differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthStyle {
    /// `Authorization: Bearer <key>` (OpenAI and compatible servers).
    Bearer,
    /// The key as the whole value of a named header (Anthropic's `x-api-key`).
    Header(&'static str),
}

/// Why one attempt failed, before the retry loop decides what to do about it. Provider code
/// returns these from its response readers; [`HttpClient::post`] turns them into
/// [`ProviderError`]s.
#[derive(Debug, Clone)]
pub enum Failure {
    /// The server said no: a non-2xx answer, or an error object inside a 2xx stream (with the
    /// HTTP status its error type stands for).
    Api {
        /// The HTTP status, or the equivalent status of an in-stream error.
        status: u16,
        /// The error body as received (JSON or not).
        body: String,
        /// The server's `Retry-After`, when it sent one.
        retry_after: Option<Duration>,
    },
    /// The connection broke, or the stream ended before its terminator: the same request may
    /// well succeed on a second try.
    Dropped(String),
    /// The answer cannot be read; a retry would read the same thing.
    Invalid(String),
    /// No answer (or no further bytes) within the timeout.
    Timeout,
    /// A stream sent no event (keep-alive comments aside) for this long.
    Idle(Duration),
    /// Nobody listens to the answer any more (a proxied client went away): stop, no retry.
    Cancelled,
}

impl From<io::Error> for Failure {
    /// A failed read of the response body. reqwest reports its timeout as an `io::Error` wrapping
    /// its own error, so both shapes are checked.
    fn from(e: io::Error) -> Self {
        let timed_out = e.kind() == io::ErrorKind::TimedOut
            || e.get_ref()
                .and_then(|inner| inner.downcast_ref::<reqwest::Error>())
                .is_some_and(reqwest::Error::is_timeout);
        if timed_out {
            Failure::Timeout
        } else {
            Failure::Dropped(format!(
                "the connection broke while reading the answer: {e}"
            ))
        }
    }
}

/// The blocking client plus what the retry loop needs from the settings. One per provider.
#[derive(Debug)]
pub struct HttpClient {
    client: Client,
    provider: String,
    api_key_env: Option<String>,
    auth: AuthStyle,
    timeout: Duration,
    stream_idle: Duration,
    max_retries: u32,
    retry_base: Duration,
    /// The last URL posted to and its parse. A provider posts to the same URL every request,
    /// and parsing it was about 2 % of a small request's time in serve.
    last_url: std::sync::Mutex<Option<(String, reqwest::Url)>>,
}

impl HttpClient {
    /// Builds the client once, so connections and TLS roots are reused across requests.
    /// `settings.timeout` bounds the wait for the answer's head and for each read of its body,
    /// so a long but lively stream is not cut while a silent server is.
    pub fn new(settings: &ProviderSettings, auth: AuthStyle) -> Result<Self, ProviderError> {
        let client = Client::builder()
            // Each request leaves in whole at once, not held back by Nagle's algorithm waiting
            // for the upstream's acknowledgement of its first segment.
            .tcp_nodelay(true)
            .timeout(settings.timeout)
            .connect_timeout(settings.timeout)
            .build()
            .map_err(|e| ProviderError::InvalidResponse {
                provider: settings.id.clone(),
                message: format!("cannot set up the HTTP client: {}", error_chain(&e)),
            })?;
        Ok(Self {
            client,
            provider: settings.id.clone(),
            api_key_env: settings.api_key_env.clone(),
            auth,
            timeout: settings.timeout,
            stream_idle: settings.stream_idle_timeout,
            max_retries: settings.max_retries,
            retry_base: settings.retry_base,
            last_url: std::sync::Mutex::new(None),
        })
    }

    /// `url` parsed, from [`Self::last_url`] when it is the same text. `None` when it does not
    /// parse: the request is then built from the text, and reqwest's error says why.
    fn parsed_url(&self, url: &str) -> Option<reqwest::Url> {
        if let Ok(last) = self.last_url.lock()
            && let Some((text, parsed)) = last.as_ref()
            && text == url
        {
            return Some(parsed.clone());
        }
        let parsed = reqwest::Url::parse(url).ok()?;
        if let Ok(mut last) = self.last_url.lock() {
            *last = Some((url.to_owned(), parsed.clone()));
        }
        Some(parsed)
    }

    /// POSTs `body` (JSON the provider wrote) to `url` and hands each 2xx answer to `read`, retrying 429s, 5xx,
    /// dropped connections and cut streams with exponential back-off. Returns what `read`
    /// produced and how many retries it took.
    ///
    /// The key is looked up first, so a missing key fails before anything is sent. `request`
    /// gives the model (for logs), the deadline and a proxied client's key.
    pub fn post<T>(
        &self,
        url: &str,
        request: &super::ModelRequest,
        headers: &[(&str, &str)],
        body: Vec<u8>,
        mut read: impl FnMut(Response) -> Result<T, Failure>,
    ) -> Result<(T, u32), ProviderError> {
        let (model, deadline) = (request.model.as_str(), request.deadline);
        let client_key = request.forwarded.credential.as_ref();
        // The provider's own key (`apiKeyEnv`) wins; without one, the key a proxied client
        // sent (`rampart serve`) goes upstream.
        let key = match (self.key(), client_key) {
            (Ok(Some(own)), _) => Some((own, false)),
            (Ok(None) | Err(ProviderError::MissingApiKey { .. }), Some(client)) => {
                Some((ApiKey(client.expose().to_owned()), client.is_bearer()))
            }
            (own, None) => own?.map(|k| (k, false)),
            (Err(e), Some(_)) => return Err(e),
        };
        let mut header_map = self.headers(headers, key.as_ref())?;
        // The body is JSON written by the provider (as reqwest's `json` would mark it).
        if !header_map.contains_key(reqwest::header::CONTENT_TYPE) {
            header_map.insert(
                reqwest::header::CONTENT_TYPE,
                reqwest::header::HeaderValue::from_static("application/json"),
            );
        }
        // A refusal of the client's key says so (there is no `apiKeyEnv` to check then).
        let from_client = matches!(
            (self.key(), client_key),
            (Ok(None) | Err(ProviderError::MissingApiKey { .. }), Some(_))
        );
        let key = key.map(|(k, _)| k);
        // Shared by every attempt, never copied: a 200k-token body is 800 KB.
        let body = bytes::Bytes::from(body);
        let target = self.parsed_url(url);
        let mut attempt: u32 = 0;
        loop {
            let builder = match &target {
                Some(parsed) => self.client.post(parsed.clone()),
                None => self.client.post(url),
            };
            let mut builder = builder.headers(header_map.clone()).body(body.clone());
            if let Some(deadline) = deadline {
                // The whole exchange, body included, ends at the caller's deadline.
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(self.timeout_error());
                }
                builder = builder.timeout(left);
            }
            let failure = match builder.send() {
                Ok(response) if response.status().is_success() => match read(response) {
                    Ok(value) => return Ok((value, attempt)),
                    Err(failure) => failure,
                },
                Ok(response) => error_answer(response),
                Err(e) => self.send_failure(url, &e, key.as_ref())?,
            };
            let retry = self.classify(failure, key.as_ref(), from_client)?;
            if attempt >= self.max_retries {
                return Err(retry.into_error(&self.provider, attempt));
            }
            let delay = retry
                .retry_after
                .unwrap_or_else(|| backoff(self.retry_base, attempt))
                .min(MAX_RETRY_DELAY);
            tracing::warn!(
                provider = %self.provider,
                model = %model,
                status = retry.status,
                attempt = attempt + 1,
                delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                error = %retry.message,
                "model request failed; retrying"
            );
            if deadline.is_some_and(|d| Instant::now() + delay >= d) {
                // No time left for another try: the caller has stopped waiting.
                return Err(self.timeout_error());
            }
            std::thread::sleep(delay);
            attempt += 1;
        }
    }

    /// `streamIdleTimeoutSeconds`: how long a stream may go without an event; what the
    /// providers give their [`SseReader`].
    pub fn stream_idle_timeout(&self) -> Duration {
        self.stream_idle
    }

    /// Reads the key named by `apiKeyEnv`. `Ok(None)` when no variable is configured: local
    /// servers (llama.cpp, vLLM, Ollama) take no key, and sending an empty one would be wrong.
    fn key(&self) -> Result<Option<ApiKey>, ProviderError> {
        let Some(var) = &self.api_key_env else {
            return Ok(None);
        };
        match std::env::var(var) {
            Ok(key) if !key.trim().is_empty() => Ok(Some(ApiKey(key.trim().to_owned()))),
            _ => Err(ProviderError::MissingApiKey {
                provider: self.provider.clone(),
                env_var: var.clone(),
            }),
        }
    }

    fn headers(
        &self,
        headers: &[(&str, &str)],
        key: Option<&(ApiKey, bool)>,
    ) -> Result<HeaderMap, ProviderError> {
        let invalid = |what: &str| ProviderError::BadRequest {
            provider: self.provider.clone(),
            status: 0,
            message: format!("{what} cannot be sent as an HTTP header"),
        };
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| invalid(name))?;
            let value = HeaderValue::from_str(value).map_err(|_| invalid(name))?;
            map.insert(header, value);
        }
        if let Some((key, bearer)) = key {
            let (name, raw) = match self.auth {
                _ if *bearer => ("authorization", format!("Bearer {}", key.expose())),
                AuthStyle::Bearer => ("authorization", format!("Bearer {}", key.expose())),
                AuthStyle::Header(name) => (name, key.expose().to_owned()),
            };
            // The error names the variable, never the value.
            let what = format!(
                "the key in ${}",
                self.api_key_env.as_deref().unwrap_or_default()
            );
            let mut value = HeaderValue::from_str(&raw).map_err(|_| invalid(&what))?;
            value.set_sensitive(true);
            map.insert(name, value);
        }
        Ok(map)
    }

    /// A request that got no HTTP answer. Refused connections and timeouts are final: retrying
    /// a server that is not there only makes the user wait longer for the same answer.
    fn send_failure(
        &self,
        url: &str,
        e: &reqwest::Error,
        key: Option<&ApiKey>,
    ) -> Result<Failure, ProviderError> {
        let redact = |text: String| key.map_or_else(|| text.clone(), |k| k.redact(&text));
        if e.is_timeout() {
            return Err(self.timeout_error());
        }
        if e.is_connect() {
            return Err(ProviderError::Unreachable {
                provider: self.provider.clone(),
                url: url.to_owned(),
                message: redact(root_cause(e)),
            });
        }
        Ok(Failure::Dropped(redact(format!(
            "the connection broke before an answer arrived: {}",
            error_chain(e)
        ))))
    }

    fn timeout_error(&self) -> ProviderError {
        ProviderError::Timeout {
            provider: self.provider.clone(),
            after: self.timeout,
        }
    }

    /// Final failures become the error; retryable ones are returned for the loop to wait on.
    fn classify(
        &self,
        failure: Failure,
        key: Option<&ApiKey>,
        from_client: bool,
    ) -> Result<Retry, ProviderError> {
        let redact = |text: &str| key.map_or_else(|| text.to_owned(), |k| k.redact(text));
        let provider = self.provider.clone();
        match failure {
            Failure::Timeout => Err(self.timeout_error()),
            // Final, like a timeout: the same request would very likely idle again, and the run
            // loop decides what a timeout means for the turn.
            Failure::Idle(after) => Err(ProviderError::StreamIdle { provider, after }),
            Failure::Cancelled => Err(ProviderError::Cancelled { provider }),
            Failure::Invalid(message) => Err(ProviderError::InvalidResponse {
                provider,
                message: redact(&message),
            }),
            Failure::Dropped(message) => Ok(Retry {
                rate_limited: false,
                status: None,
                message: redact(&message),
                retry_after: None,
            }),
            Failure::Api {
                status,
                body,
                retry_after,
            } => {
                let (message, full) = error_text(&body);
                let (message, full) = (redact(&message), redact(&full));
                if is_likely_context_overflow_error(&full) {
                    return Err(ProviderError::ContextOverflow {
                        provider,
                        observed_tokens: observed_overflow_tokens(&message)
                            .or_else(|| observed_overflow_tokens(&full)),
                        message,
                    });
                }
                match status {
                    401 | 403 => Err(ProviderError::Auth {
                        provider,
                        status,
                        message,
                        env_var: self
                            .api_key_env
                            .clone()
                            .unwrap_or_else(|| "apiKeyEnv".to_owned()),
                        from_client,
                    }),
                    429 => Ok(Retry {
                        rate_limited: true,
                        status: Some(status),
                        message,
                        retry_after,
                    }),
                    500..=599 => Ok(Retry {
                        rate_limited: false,
                        status: Some(status),
                        message,
                        retry_after,
                    }),
                    400..=499 => Err(ProviderError::BadRequest {
                        provider,
                        status,
                        message,
                    }),
                    _ => Err(ProviderError::InvalidResponse {
                        provider,
                        message: format!("unexpected HTTP {status}: {message}"),
                    }),
                }
            }
        }
    }
}

/// A failure worth another attempt, and what to report if the attempts run out.
#[derive(Debug)]
struct Retry {
    rate_limited: bool,
    status: Option<u16>,
    message: String,
    retry_after: Option<Duration>,
}

impl Retry {
    fn into_error(self, provider: &str, retries: u32) -> ProviderError {
        let provider = provider.to_owned();
        match (self.rate_limited, self.status) {
            (true, Some(status)) => ProviderError::RateLimited {
                provider,
                status,
                message: self.message,
                retries,
                retry_after: self.retry_after,
            },
            (_, status) => ProviderError::Transient {
                provider,
                status,
                message: self.message,
                retries,
            },
        }
    }
}

/// The wait before retry number `attempt + 1`: `base`, doubling each time, capped.
fn backoff(base: Duration, attempt: u32) -> Duration {
    let factor = 1u32.checked_shl(attempt).unwrap_or(u32::MAX);
    base.saturating_mul(factor).min(MAX_RETRY_DELAY)
}

/// A non-2xx answer as a [`Failure`]; the body is read whole because error bodies are small
/// and the classification needs all of it.
fn error_answer(response: Response) -> Failure {
    let status = response.status().as_u16();
    let retry_after = retry_after(response.headers());
    let body = response.text().unwrap_or_default();
    Failure::Api {
        status,
        body,
        retry_after,
    }
}

/// `Retry-After` in seconds (or OpenAI's `retry-after-ms`). The HTTP-date form is ignored:
/// servers of model APIs send seconds, and a wrong guess only changes the wait.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let header = |name: &str| headers.get(name)?.to_str().ok()?.trim().parse::<f64>().ok();
    let delay = header("retry-after-ms")
        .map(|ms| ms / 1000.0)
        .or_else(|| header("retry-after"))?;
    (delay.is_finite() && delay >= 0.0)
        .then(|| Duration::from_secs_f64(delay.min(MAX_RETRY_DELAY.as_secs_f64())))
}

/// The error's own words (`error.message` when the body is the usual JSON, else the body), and
/// the text overflow recognition looks at: those words plus the raw body, because some servers
/// put the telling part (a code like `context_length_exceeded`) outside the message.
pub fn error_text(body: &str) -> (String, String) {
    let body = body.trim();
    let json: Option<Value> = serde_json::from_str(body).ok();
    let message = json.as_ref().and_then(|v| {
        let error = v.get("error").unwrap_or(v);
        error
            .get("message")
            .and_then(Value::as_str)
            .or_else(|| error.as_str())
            .map(str::to_owned)
    });
    let raw = shorten(body);
    match message {
        Some(message) if !message.is_empty() => {
            let full = format!("{message}\n{raw}");
            (shorten(&message), full)
        }
        _ if raw.is_empty() => ("(empty error body)".to_owned(), String::new()),
        _ => (raw.clone(), raw),
    }
}

/// `text` cut to [`MAX_ERROR_TEXT`] characters, on a character boundary.
fn shorten(text: &str) -> String {
    match text.char_indices().nth(MAX_ERROR_TEXT) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// The innermost cause of an error: for a refused connection that is "Connection refused (os
/// error 111)", which is what a user needs, not reqwest's wrapping.
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// Every level of an error, joined, because reqwest's top level alone ("error sending request")
/// says nothing about what went wrong.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut cause = e.source();
    while let Some(next) = cause {
        let text = next.to_string();
        if parts.last() != Some(&text) {
            parts.push(text);
        }
        cause = next.source();
    }
    parts.join(": ")
}

/// The HTTP status an error type stands for, so that an error arriving inside a 2xx stream is
/// classified like the same error sent as a status. Covers Anthropic's documented types and
/// OpenAI's usual `type`/`code` values; `None` for anything else.
pub fn status_for_error_type(error_type: &str) -> Option<u16> {
    Some(match error_type {
        "invalid_request_error" | "context_length_exceeded" => 400,
        "authentication_error" | "invalid_api_key" => 401,
        "permission_error" => 403,
        "not_found_error" | "model_not_found" => 404,
        "request_too_large" => 413,
        "rate_limit_error" | "rate_limit_exceeded" | "tokens" | "requests" => 429,
        "api_error" | "server_error" | "internal_error" => 500,
        "service_unavailable" => 503,
        "overloaded_error" => 529,
        _ => return None,
    })
}

/// The content type of an answer, lower-cased, without parameters; how a provider tells a
/// stream from a plain JSON answer.
pub fn content_type(response: &Response) -> String {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// Reads a whole (non-streamed) answer as JSON.
pub fn read_json(mut response: Response) -> Result<Value, Failure> {
    let mut body = String::new();
    response.read_to_string(&mut body)?;
    serde_json::from_str(&body)
        .map_err(|e| Failure::Invalid(format!("the answer is not JSON ({e}): {}", shorten(&body))))
}

/// Parses one SSE `data` payload as JSON; a payload that is not JSON cannot be retried away.
pub fn parse_event_json(data: &str) -> Result<Value, Failure> {
    serde_json::from_str(data).map_err(|e| {
        Failure::Invalid(format!(
            "a stream event is not JSON ({e}): {}",
            shorten(data)
        ))
    })
}

/// What a provider read from an answer, whatever its wire: made into pi's assistant message by
/// [`AnswerParts::into_message`], the one place every provider's answer takes that form.
pub struct AnswerParts {
    /// The blocks, in the order the model produced them.
    pub content: Vec<rampart_message::ContentBlock>,
    /// The usage, in pi's terms.
    pub usage: rampart_message::Usage,
    /// Why it stopped, and the provider's text when that was an error.
    pub stop: (rampart_message::StopReason, Option<String>),
    /// The model the server said answered.
    pub reported_model: Option<String>,
}

impl AnswerParts {
    /// The assistant message, stamped now, of provider `provider` on wire `api`: named after
    /// `requested_model` (what the request asked for, which the session records), or the model
    /// the server reported when the request named none.
    pub fn into_message(
        self,
        api: &str,
        provider: &str,
        requested_model: &str,
    ) -> rampart_message::AssistantMessage {
        let model = if requested_model.is_empty() {
            self.reported_model.unwrap_or_default()
        } else {
            requested_model.to_owned()
        };
        let (stop_reason, error_message) = self.stop;
        rampart_message::AssistantMessage {
            content: self.content,
            api: api.to_owned(),
            provider: provider.to_owned(),
            model,
            usage: self.usage,
            stop_reason,
            timestamp: now_ms(),
            error_message,
            extra: rampart_message::Extra::new(),
        }
    }
}

/// Milliseconds since the Unix epoch, pi's timestamp unit.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// One server-sent event: its `event:` name (`None` when the server gave none, which OpenAI
/// never does and Anthropic always does) and its `data:` lines joined with `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field.
    pub event: Option<String>,
    /// The `data:` lines, joined with newlines as the SSE spec says.
    pub data: String,
}

/// Reads server-sent events from a blocking byte stream, one event at a time, so an answer is
/// parsed as it arrives instead of after buffering the whole body.
///
/// A stream that stops in the middle of a line was cut and yields [`Failure::Dropped`]. A last
/// event that lacks only its blank line is still delivered: its content is complete, and
/// whether the *answer* is complete is for the provider to judge from its own terminator.
pub struct SseReader<R: Read> {
    reader: BufReader<R>,
    line: Vec<u8>,
    done: bool,
    /// The longest wait for an event, and when the last one arrived (or reading began).
    idle: Option<(Duration, Instant)>,
}

impl<R: Read> fmt::Debug for SseReader<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SseReader")
            .field("done", &self.done)
            .finish()
    }
}

impl<R: Read> SseReader<R> {
    /// Wraps `reader` (for example a [`Response`]).
    pub fn new(reader: R) -> Self {
        Self {
            reader: BufReader::new(reader),
            line: Vec::new(),
            done: false,
            idle: None,
        }
    }

    /// Like [`SseReader::new`], but fails with [`Failure::Idle`] once `idle` passes without an
    /// event. Why a clock of its own: comments (`: keep-alive`) and blank lines reset every
    /// per-read timeout, so a server that sends only them would hold the caller forever. The
    /// check runs as each line arrives; a server that sends nothing at all meets the
    /// per-read timeout instead.
    pub fn with_idle_timeout(reader: R, idle: Duration) -> Self {
        Self {
            idle: Some((idle, Instant::now())),
            ..Self::new(reader)
        }
    }

    fn read_event(&mut self) -> Result<Option<SseEvent>, Failure> {
        let mut event: Option<String> = None;
        let mut data: Option<String> = None;
        loop {
            self.line.clear();
            let n = self.reader.read_until(b'\n', &mut self.line)?;
            if n == 0 {
                self.done = true;
                return Ok(data.map(|data| SseEvent { event, data }));
            }
            if self.line.last() != Some(&b'\n') {
                self.done = true;
                return Err(Failure::Dropped(
                    "the stream ended in the middle of an event".to_owned(),
                ));
            }
            self.line.pop();
            if self.line.last() == Some(&b'\r') {
                self.line.pop();
            }
            if let Some((idle, since)) = self.idle
                && since.elapsed() > idle
            {
                self.done = true;
                return Err(Failure::Idle(idle));
            }
            let line = String::from_utf8_lossy(&self.line);
            if line.is_empty() {
                if let Some(data) = data {
                    if let Some((_, since)) = &mut self.idle {
                        *since = Instant::now();
                    }
                    return Ok(Some(SseEvent { event, data }));
                }
                // A blank line after only comments or an `event:` is no event (SSE spec).
                event = None;
                continue;
            }
            if line.starts_with(':') {
                continue;
            }
            let (field, value) = match line.split_once(':') {
                Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
                None => (line.as_ref(), ""),
            };
            match field {
                "event" => event = Some(value.to_owned()),
                "data" => match &mut data {
                    Some(buffer) => {
                        buffer.push('\n');
                        buffer.push_str(value);
                    }
                    None => data = Some(value.to_owned()),
                },
                _ => {}
            }
        }
    }
}

impl<R: Read> Iterator for SseReader<R> {
    type Item = Result<SseEvent, Failure>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        self.read_event().transpose()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn events(raw: &str) -> Vec<Result<SseEvent, Failure>> {
        SseReader::new(raw.as_bytes()).collect()
    }

    fn ok(event: Option<&str>, data: &str) -> SseEvent {
        SseEvent {
            event: event.map(str::to_owned),
            data: data.to_owned(),
        }
    }

    /// Yields one `: keep-alive` comment per read, `pause` apart, forever.
    struct KeepAlives {
        pause: Duration,
    }

    impl Read for KeepAlives {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            std::thread::sleep(self.pause);
            let line = b": keep-alive\n\n";
            let n = line.len().min(buf.len());
            buf[..n].copy_from_slice(&line[..n]);
            Ok(n)
        }
    }

    #[test]
    fn a_stream_of_comments_only_fails_at_the_idle_timeout() {
        let mut reader = SseReader::with_idle_timeout(
            KeepAlives {
                pause: Duration::from_millis(5),
            },
            Duration::from_millis(50),
        );
        match reader.next() {
            Some(Err(Failure::Idle(after))) => assert_eq!(after, Duration::from_millis(50)),
            other => panic!("expected the idle failure, got {other:?}"),
        }
        assert!(reader.next().is_none(), "nothing after the failure");
    }

    #[test]
    fn events_reset_the_idle_clock() {
        let raw = "data: 1\n\n: ping\n\ndata: 2\n\n";
        let events: Vec<_> =
            SseReader::with_idle_timeout(raw.as_bytes(), Duration::from_secs(60)).collect();
        assert_eq!(events.len(), 2);
        assert!(events.iter().all(Result::is_ok));
    }

    #[test]
    fn sse_reads_names_multiline_data_crlf_and_comments() {
        let raw = ": keep-alive\r\n\r\nevent: ping\r\ndata: {}\r\n\r\ndata: a\ndata:b\n\ndata: [DONE]\n\n";
        let got: Vec<SseEvent> = events(raw).into_iter().map(Result::unwrap).collect();
        assert_eq!(
            got,
            vec![ok(Some("ping"), "{}"), ok(None, "a\nb"), ok(None, "[DONE]")]
        );
    }

    #[test]
    fn sse_delivers_a_last_event_without_blank_line_but_flags_a_cut_line() {
        let got = events("data: one\n\ndata: two\n");
        assert_eq!(got.len(), 2);
        assert_eq!(got[1].as_ref().unwrap(), &ok(None, "two"));

        let cut = events("data: one\n\ndata: {\"choi");
        assert!(matches!(cut.last(), Some(Err(Failure::Dropped(_)))));
    }

    #[test]
    fn error_text_prefers_the_json_message_and_keeps_the_body_for_recognition() {
        let (message, full) =
            error_text(r#"{"error":{"message":"too long","code":"context_length_exceeded"}}"#);
        assert_eq!(message, "too long");
        assert!(full.contains("context_length_exceeded"));
        assert_eq!(error_text("Bad Gateway").0, "Bad Gateway");
        assert_eq!(
            error_text(r#"{"error":"model not found"}"#).0,
            "model not found"
        );
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let base = Duration::from_millis(500);
        assert_eq!(backoff(base, 0), base);
        assert_eq!(backoff(base, 2), Duration::from_secs(2));
        assert_eq!(backoff(base, 40), MAX_RETRY_DELAY);
    }

    #[test]
    fn api_key_debug_hides_the_key() {
        let key = ApiKey("sk-secret-value".to_owned());
        assert_eq!(format!("{key:?}"), "***");
        assert_eq!(key.redact("bad key sk-secret-value"), "bad key ***");
    }
}
