//! The one door every request goes through before a handler sees it: who may call, from where,
//! with what, and how much the server reads before it knows.
//!
//! In order: the `Host` header (DNS rebinding: a web page whose name now points at 127.0.0.1
//! must not read the answers), the `Origin` header (CSRF: a web page the user visits must not
//! spend their keys or write into their conversations), `serve.authToken` from the headers
//! alone, then on the API routes a JSON `Content-Type` and a body read under a size limit and
//! `serve.bodyTimeoutMs`. Nothing of an unauthenticated request's body is read. Every refusal,
//! and axum's empty 404 and 405, is answered in the client's error format, chosen by the route.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;

use super::inbound::Wire;
use super::outbound::{self, ErrorKind};
use crate::config::serve::ServeSettings;

/// What the guard needs to know about the server besides its settings.
#[derive(Debug, Default)]
pub struct Bound {
    addr: std::sync::OnceLock<SocketAddr>,
}

impl Bound {
    /// Records the address the server listens on (its IP is an accepted `Host`).
    pub fn set(&self, addr: SocketAddr) {
        let _ = self.addr.set(addr);
    }

    fn ip(&self) -> Option<IpAddr> {
        self.addr.get().map(SocketAddr::ip)
    }
}

/// The settings and state the guard reads, cheap to share with the middleware.
#[derive(Debug)]
pub struct Guard {
    /// `[serve]`: the token, the allowed hosts and origins, the body timeout.
    pub settings: ServeSettings,
    /// The bound address, once known.
    pub bound: Bound,
    /// The largest body accepted.
    pub max_body: usize,
}

/// The wire a request's errors are written in: the Anthropic routes answer in Anthropic's
/// shape, the Responses route and the rest in OpenAI's unless the headers say Anthropic.
pub fn wire_for(path: &str, headers: &HeaderMap) -> Wire {
    if path.starts_with("/v1/messages") {
        Wire::Anthropic
    } else if path.starts_with("/v1/chat/completions") {
        Wire::OpenAi
    } else if path.starts_with("/v1/responses") {
        Wire::Responses
    } else if headers.contains_key("x-api-key") || headers.contains_key("anthropic-version") {
        Wire::Anthropic
    } else {
        Wire::OpenAi
    }
}

/// True when `headers` carry `token` (as `x-rampart-token`, `Authorization: Bearer` or
/// `x-api-key`).
pub fn carries_token(headers: &HeaderMap, token: &str) -> bool {
    let value = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    let bearer = value("authorization").map(|v| {
        v.strip_prefix("Bearer ")
            .or_else(|| v.strip_prefix("bearer "))
            .unwrap_or(v)
            .trim()
    });
    [value("x-rampart-token"), bearer, value("x-api-key")]
        .iter()
        .flatten()
        .any(|v| *v == token)
}

/// The refusal of a request without `serve.authToken`.
pub const TOKEN_REQUIRED: &str = "this rampart serve requires its token (`serve.authToken`): \
     send it as `x-rampart-token`, `Authorization: Bearer` or `x-api-key`";

/// The host part of a `Host` header, lowercase, without its port (`[::1]:8787` gives `::1`).
pub fn host_name(value: &str) -> String {
    let value = value.trim();
    let name = if let Some(rest) = value.strip_prefix('[') {
        rest.split(']').next().unwrap_or(rest)
    } else {
        match value.rsplit_once(':') {
            Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name,
            _ => value,
        }
    };
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// Whether a `Host` naming `name` is this server: a loopback address, `localhost`, the bound
/// address (any address when bound to all interfaces: a literal address cannot be rebound),
/// or a name in `allowed` (`"*"`: any).
pub fn host_allowed(name: &str, bound: Option<IpAddr>, allowed: &[String]) -> bool {
    if allowed.iter().any(|a| a == "*" || a == name) {
        return true;
    }
    if name == "localhost" || name.ends_with(".localhost") {
        return true;
    }
    match name.parse::<IpAddr>() {
        Ok(ip) => ip.is_loopback() || bound.is_some_and(|b| b.is_unspecified() || b == ip),
        Err(_) => false,
    }
}

/// Whether a browser `Origin` is one `allowed` lists (`"*"`: any).
pub fn origin_allowed(origin: &str, allowed: &[String]) -> bool {
    let origin = origin.trim().trim_end_matches('/').to_ascii_lowercase();
    allowed.iter().any(|a| a == "*" || *a == origin)
}

/// Whether `headers` declare a JSON body (`application/json`, with parameters or not, or a
/// `+json` type).
pub fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .is_some_and(|v| {
            v == "application/json" || (v.starts_with("application/") && v.ends_with("+json"))
        })
}

fn refuse(wire: Wire, status: StatusCode, kind: ErrorKind, message: &str) -> Response {
    (
        status,
        axum::Json(outbound::error_body(wire, kind, message)),
    )
        .into_response()
}

/// The middleware: see the module's documentation.
pub async fn guard(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_owned();
    let wire = wire_for(&path, request.headers());
    let headers = request.headers();
    let settings = &guard.settings;
    if let Some(host) = headers.get(header::HOST) {
        let name = host.to_str().map(host_name).unwrap_or_default();
        if !host_allowed(&name, guard.bound.ip(), &settings.allowed_hosts) {
            tracing::warn!(host = ?host, path, "request refused: foreign Host header");
            return refuse(
                wire,
                StatusCode::FORBIDDEN,
                ErrorKind::Forbidden,
                &format!(
                    "the Host header names {name:?}, which is not this server; a web page may be \
                     trying to reach it. Call it as localhost or by its address, or add the name \
                     to `serve.allowedHosts`"
                ),
            );
        }
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let text = origin.to_str().unwrap_or_default();
        if !origin_allowed(text, &settings.allowed_origins) {
            tracing::warn!(origin = ?origin, path, "request refused: browser Origin not allowed");
            return refuse(
                wire,
                StatusCode::FORBIDDEN,
                ErrorKind::Forbidden,
                &format!(
                    "requests from web pages are refused (Origin {text:?}): add the origin to \
                     `serve.allowedOrigins` to allow it"
                ),
            );
        }
    }
    if let Some(token) = settings.auth_token.as_deref()
        && path != "/healthz"
        && !carries_token(headers, token)
    {
        return refuse(
            wire,
            StatusCode::UNAUTHORIZED,
            ErrorKind::Authentication,
            TOKEN_REQUIRED,
        );
    }
    // Only the routes that take a body have one read and checked; a POST elsewhere gets the
    // router's 404 or 405 (with its Allow header), not a complaint about its content type.
    let request = if request.method() == Method::POST && BODY_ROUTES.contains(&path.as_str()) {
        if !is_json(headers) {
            let sent = headers
                .get(header::CONTENT_TYPE)
                .map(|v| format!("{:?}", v.to_str().unwrap_or("(not text)")))
                .unwrap_or_else(|| "none".to_owned());
            return refuse(
                wire,
                StatusCode::BAD_REQUEST,
                ErrorKind::InvalidRequest,
                &format!(
                    "the request's Content-Type is {sent}; send the JSON body with \
                     `Content-Type: application/json`"
                ),
            );
        }
        match read_body(&guard, wire, request).await {
            Ok(request) => request,
            Err(refusal) => return *refusal,
        }
    } else {
        request
    };
    let response = next.run(request).await;
    with_error_body(wire, response)
}

/// The routes that take a JSON body (all by POST).
const BODY_ROUTES: &[&str] = &[
    "/v1/chat/completions",
    "/v1/responses",
    "/v1/messages",
    "/v1/messages/count_tokens",
];

/// The request with its body read whole, within the size limit and `serve.bodyTimeoutMs`.
async fn read_body(guard: &Guard, wire: Wire, request: Request) -> Result<Request, Box<Response>> {
    let too_large = || {
        Box::new(refuse(
            wire,
            StatusCode::PAYLOAD_TOO_LARGE,
            ErrorKind::InvalidRequest,
            &format!(
                "the request body is larger than rampart serve accepts ({} MB)",
                guard.max_body / (1024 * 1024)
            ),
        ))
    };
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > guard.max_body as u64) {
        return Err(too_large());
    }
    let (parts, body) = request.into_parts();
    let mut stream = body.into_data_stream();
    let mut bytes: Vec<u8> = Vec::with_capacity(
        declared
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(0)
            .min(1024 * 1024),
    );
    let timeout = guard.settings.body_timeout;
    let read = tokio::time::timeout(timeout, async {
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| {
                Box::new(refuse(
                    wire,
                    StatusCode::BAD_REQUEST,
                    ErrorKind::InvalidRequest,
                    &format!("the request body could not be read: {e}"),
                ))
            })?;
            if bytes.len() + chunk.len() > guard.max_body {
                return Err(too_large());
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(())
    })
    .await;
    match read {
        Ok(Ok(())) => Ok(Request::from_parts(parts, Body::from(Bytes::from(bytes)))),
        Ok(Err(refusal)) => Err(refusal),
        Err(_) => Err(Box::new(refuse(
            wire,
            StatusCode::REQUEST_TIMEOUT,
            ErrorKind::InvalidRequest,
            &format!(
                "the request body did not arrive within {} ms (`serve.bodyTimeoutMs`)",
                timeout.as_millis()
            ),
        ))),
    }
}

/// axum's own 404 and 405 carry no body: they get one in the client's error format.
fn with_error_body(wire: Wire, response: Response) -> Response {
    let status = response.status();
    if !matches!(
        status,
        StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED
    ) || response.headers().contains_key(header::CONTENT_TYPE)
    {
        return response;
    }
    let message = if status == StatusCode::NOT_FOUND {
        "no such route; rampart serve answers POST /v1/chat/completions, /v1/responses, \
         /v1/messages, /v1/messages/count_tokens and GET /v1/models, /healthz, /metrics, /ui, \
         /ui/events, /ui/app.js, /ui/blobs/sha256:HEX, /ui/conversations/ID/chart and \
         /ui/conversations/ID/compactions/N"
    } else {
        "this route does not take that method (see the Allow header)"
    };
    let (mut parts, _) = response.into_parts();
    let fresh = refuse(wire, status, ErrorKind::InvalidRequest, message);
    parts.headers.remove(header::CONTENT_LENGTH);
    for (name, value) in fresh.headers() {
        parts.headers.insert(name.clone(), value.clone());
    }
    Response::from_parts(parts, fresh.into_body())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "guard_tests.rs"]
mod tests;
