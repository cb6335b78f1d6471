//! End to end, over real sockets: what `rampart serve` refuses before a handler runs (foreign
//! `Host`, browser `Origin`, non-JSON bodies, a missing token before the body is read), the
//! connection bounds (header and body timeouts, the drain deadline on SIGTERM), and its errors
//! in the client's format.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::loopback::{Loopback, Reply, openai_text_stream};
use serde_json::{Value, json};

/// A `rampart serve` process on a free loopback port; killed when dropped.
struct Serve {
    child: Child,
    addr: String,
    _dir: tempfile::TempDir,
}

impl Serve {
    fn start(config: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config_path = common::write_config(dir.path(), config);
        let mut child = Command::new(env!("CARGO_BIN_EXE_rampart"))
            .args([
                "--config",
                config_path.to_str().unwrap(),
                "--sessions-dir",
                dir.path().join("sessions").to_str().unwrap(),
                "serve",
                "--listen",
                "127.0.0.1:0",
            ])
            .env_remove("RAMPART_CONFIG")
            .env("RUST_LOG", "warn")
            .current_dir(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("rampart serve listening on http://")
            .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
            .to_owned();
        Serve {
            child,
            addr,
            _dir: dir,
        }
    }

    fn connect(&self) -> TcpStream {
        let stream = TcpStream::connect(&self.addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream
    }

    /// Sends `head` (request line and headers, without the blank line) and `body` as they are,
    /// and reads the answer: its status and body.
    fn raw(&self, head: &str, body: &[u8]) -> (u16, String) {
        let mut stream = self.connect();
        let head = format!(
            "{head}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(body).unwrap();
        read_response(&mut stream)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The status and body of the HTTP/1.1 response on `stream` (read to its end).
fn read_response(stream: &mut TcpStream) -> (u16, String) {
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP response: {text:?}"));
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (status, body.to_owned())
}

fn config(url: &str, extra: &str) -> String {
    format!(
        r#"
[agents.defaults.model]
primary = "up/gpt-up"

[agents.defaults.compaction]
model = "sim/default"

[models.providers.up]
api = "openai-completions"
baseUrl = "{url}"
maxRetries = 0
timeoutSeconds = 20

[[models.providers.up.models]]
id = "gpt-up"
contextWindow = 128000
{extra}
"#
    )
}

fn chat_body() -> Vec<u8> {
    serde_json::to_vec(&json!({"model": "gpt-up", "messages": [{"role": "user", "content": "hi"}]}))
        .unwrap()
}

#[test]
fn a_web_page_cannot_reach_the_server() {
    let up = Loopback::start();
    let serve = Serve::start(&config(&up.url(), ""));
    let port = serve.addr.rsplit(':').next().unwrap().to_owned();
    // The CSRF / DNS-rebinding request of the issue: refused, never forwarded.
    let (status, body) = serve.raw(
        &format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: attacker.example:{port}\r\n\
             Origin: http://attacker.example:{port}\r\nContent-Type: text/plain"
        ),
        &chat_body(),
    );
    assert_eq!(status, 403, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("serve.allowedHosts"),
        "{v}"
    );
    // A browser Origin alone (same Host) is refused too, in Anthropic's shape on its route.
    let (status, body) = serve.raw(
        &format!(
            "POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
             Origin: http://attacker.example\r\nContent-Type: application/json"
        ),
        br#"{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}"#,
    );
    assert_eq!(status, 403, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["type"], "error");
    assert_eq!(v["error"]["type"], "permission_error");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("serve.allowedOrigins"),
        "{v}"
    );
    // A non-JSON body on an API route: a 400 naming the header.
    let (status, body) = serve.raw(
        &format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: text/plain"
        ),
        &chat_body(),
    );
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("Content-Type"), "{body}");
    // DNS rebinding reads /healthz and /metrics too.
    for path in ["/healthz", "/metrics"] {
        let (status, _) = serve.raw(
            &format!("GET {path} HTTP/1.1\r\nHost: attacker.example:{port}"),
            b"",
        );
        assert_eq!(status, 403, "{path}");
    }
    assert_eq!(
        up.request_count(),
        0,
        "a refused request reached the upstream"
    );
    // The same request from a real client (its address as Host, JSON) is served.
    up.push(openai_text_stream("hello", 5, 1));
    let (status, body) = serve.raw(
        &format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json"
        ),
        &chat_body(),
    );
    assert_eq!(status, 200, "{body}");
    let (status, _) = serve.raw(
        &format!("GET /healthz HTTP/1.1\r\nHost: localhost:{port}"),
        b"",
    );
    assert_eq!(status, 200);
}

#[test]
fn configured_hosts_and_origins_are_served() {
    let up = Loopback::start();
    up.push(openai_text_stream("hello", 5, 1));
    let serve = Serve::start(&config(
        &up.url(),
        "\n[serve]\nallowedHosts = [\"Rampart.Internal\"]\nallowedOrigins = [\"http://localhost:3000\"]\n",
    ));
    let (status, body) = serve.raw(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: rampart.internal:8787\r\n\
         Origin: http://localhost:3000\r\nContent-Type: application/json; charset=utf-8",
        &chat_body(),
    );
    assert_eq!(status, 200, "{body}");
    let (status, _) = serve.raw("GET /healthz HTTP/1.1\r\nHost: other.internal", b"");
    assert_eq!(status, 403);
}

#[test]
fn a_bad_allowed_host_is_a_located_config_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = common::write_config(
        dir.path(),
        &config(
            "http://127.0.0.1:9",
            "\n[serve]\nallowedHosts = [\"http://evil/\"]\n",
        ),
    );
    let out = common::rampart(&[
        "--config",
        path.to_str().unwrap(),
        "serve",
        "--listen",
        "127.0.0.1:0",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", common::text(&out));
    let text = common::text(&out);
    assert!(text.contains("plugins.toml:19:"), "{text}");
    assert!(text.contains("serve.allowedHosts[0]"), "{text}");
    assert!(text.contains("a URL"), "{text}");
}

#[test]
fn the_token_is_checked_before_the_body_is_read() {
    let up = Loopback::start();
    let serve = Serve::start(&config(&up.url(), "\n[serve]\nauthToken = \"let-me-in\"\n"));
    // 200 MB announced, none sent: the answer comes at once, without waiting for the body.
    let mut stream = serve.connect();
    let started = Instant::now();
    stream
        .write_all(
            b"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
              Content-Length: 200000000\r\n\r\n{\"model\":",
        )
        .unwrap();
    let mut reader = BufReader::new(stream);
    let mut status_line = String::new();
    reader.read_line(&mut status_line).unwrap();
    assert!(status_line.contains(" 401 "), "{status_line:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(up.request_count(), 0);
}

#[test]
fn slow_headers_and_bodies_are_cut_off() {
    let up = Loopback::start();
    let serve = Serve::start(&config(
        &up.url(),
        "\n[serve]\nheaderTimeoutMs = 300\nbodyTimeoutMs = 300\n",
    ));
    // Half the headers, then silence: the connection is closed after the timeout.
    let mut stream = serve.connect();
    let started = Instant::now();
    stream
        .write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .unwrap();
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(250) && waited < Duration::from_secs(5),
        "closed after {waited:?}"
    );
    // A body announced and never finished: 408 in the client's format.
    let mut stream = serve.connect();
    let started = Instant::now();
    stream
        .write_all(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
              Content-Length: 1000\r\n\r\n{\"model\":",
        )
        .unwrap();
    let (status, body) = read_response(&mut stream);
    assert_eq!(status, 408, "{body}");
    assert!(body.contains("serve.bodyTimeoutMs"), "{body}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(up.request_count(), 0);
}

#[test]
fn sigterm_with_a_half_open_connection_exits_within_the_drain_deadline() {
    let up = Loopback::start();
    let mut serve = Serve::start(&config(
        &up.url(),
        "\n[serve]\nheaderTimeoutMs = 60000\ndrainTimeoutMs = 500\n",
    ));
    let mut half_open = serve.connect();
    half_open
        .write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .unwrap();
    let idle = serve.connect();
    // Let the server take both connections in.
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    let status = Command::new("kill")
        .args(["-TERM", &serve.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exited = loop {
        if let Some(code) = serve.child.try_wait().unwrap() {
            break code;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "rampart serve still running {:?} after SIGTERM",
            started.elapsed()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(exited.code(), Some(0));
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    drop((half_open, idle));
}

#[test]
fn errors_are_in_the_clients_format() {
    let up = Loopback::start();
    let serve = Serve::start(&config(&up.url(), ""));
    // Unknown route and wrong method: JSON, not an empty body.
    let (status, body) = serve.raw("GET /v1/nope HTTP/1.1\r\nHost: 127.0.0.1", b"");
    assert_eq!(status, 404);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
    let (status, body) = serve.raw("GET /v1/messages HTTP/1.1\r\nHost: 127.0.0.1", b"");
    assert_eq!(status, 405);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["type"], "error", "{v}");
    // Over the size limit: 413 in Anthropic's shape on its route, before the body is read.
    let mut stream = serve.connect();
    stream
        .write_all(
            b"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
              Content-Length: 300000000\r\n\r\n",
        )
        .unwrap();
    let mut reader = BufReader::new(stream);
    let mut status_line = String::new();
    reader.read_line(&mut status_line).unwrap();
    assert!(status_line.contains(" 413 "), "{status_line:?}");
    let mut rest = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
            break;
        }
        rest.push_str(&line);
    }
    assert!(
        rest.to_ascii_lowercase().contains("application/json"),
        "{rest}"
    );
}

#[test]
fn bad_fields_get_a_400_naming_them_and_nothing_is_forwarded() {
    let up = Loopback::start();
    let serve = Serve::start(&config(&up.url(), ""));
    let post = |path: &str, body: Value| {
        serve.raw(
            &format!("POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"),
            &serde_json::to_vec(&body).unwrap(),
        )
    };
    let cases = [
        (
            "/v1/chat/completions",
            json!({"model": "gpt-up", "messages": [{"role": "user", "content": 42}]}),
            "messages[0].content",
        ),
        (
            "/v1/chat/completions",
            json!({"model": "gpt-up", "messages": [{"role": "user", "content": "hi"}], "max_tokens": "ten"}),
            "max_tokens",
        ),
        (
            "/v1/chat/completions",
            json!({"model": "gpt-up", "messages": [{"role": "user", "content": "hi"}], "stream": "yes"}),
            "stream",
        ),
        (
            "/v1/messages",
            json!({"model": "gpt-up", "max_tokens": 5, "system": 7,
                   "messages": [{"role": "user", "content": "hi"}]}),
            "system",
        ),
        (
            "/v1/messages",
            json!({"model": "gpt-up", "max_tokens": 5, "messages": [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "t1", "name": "f", "input": {}},
                    {"type": "tool_use", "id": "t1", "name": "f", "input": {}}]}]}),
            "messages[1].content[1].id",
        ),
    ];
    for (path, body, field) in cases {
        let (status, text) = post(path, body);
        assert_eq!(status, 400, "{path} {field}: {text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        let message = if path == "/v1/messages" {
            assert_eq!(v["type"], "error", "{v}");
            v["error"]["message"].as_str().unwrap().to_owned()
        } else {
            assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
            v["error"]["message"].as_str().unwrap().to_owned()
        };
        assert!(
            message.contains(&format!("`{field}`")),
            "{field}: {message}"
        );
    }
    assert_eq!(up.request_count(), 0);
    // An assistant that only called tools, with `content: null`, is valid OpenAI.
    up.push(openai_text_stream("done", 5, 1));
    let (status, text) = post(
        "/v1/chat/completions",
        json!({"model": "gpt-up", "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"}]}),
    );
    assert_eq!(status, 200, "{text}");
}

#[test]
fn upstream_refusals_reach_the_client_as_they_are() {
    let up = Loopback::start();
    let serve = Serve::start(&config(&up.url(), ""));
    let post = |extra: &str| {
        serve.raw(
            &format!(
                "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n\
                 Content-Type: application/json\r\nAuthorization: Bearer sk-client-key{extra}"
            ),
            &chat_body(),
        )
    };
    // The client's key refused: the message says it was the client's, not `$apiKeyEnv`'s.
    up.push(Reply::json(
        401,
        json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}),
    ));
    let (status, body) = post("");
    assert_eq!(status, 401, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("came from the client"), "{message}");
    assert!(!message.contains("apiKeyEnv"), "{message}");
    assert!(!body.contains("sk-client-key"), "{body}");
    // An upstream 429's Retry-After is passed on.
    up.push(
        Reply::json(
            429,
            json!({"error": {"message": "slow down", "type": "rate_limit_error"}}),
        )
        .with_header("Retry-After", "7"),
    );
    let mut stream = serve.connect();
    stream
        .write_all(
            format!(
                "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n\
                 Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                chat_body().len()
            )
            .as_bytes(),
        )
        .unwrap();
    stream.write_all(&chat_body()).unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    let head = raw.split("\r\n\r\n").next().unwrap().to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 429"), "{head}");
    assert!(head.contains("\r\nretry-after: 7"), "{head}");
}

/// The full answer on `stream`: status line and headers (lowercase) and body.
fn read_with_headers(stream: &mut TcpStream) -> (String, String) {
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (head.to_ascii_lowercase(), body.to_owned())
}

#[test]
fn the_live_page_is_behind_the_same_guard_and_escapes_what_clients_send() {
    let up = Loopback::start();
    let serve = Serve::start(&config(&up.url(), "\n[serve]\nauthToken = \"let-me-in\"\n"));
    let port = serve.addr.rsplit(':').next().unwrap().to_owned();
    // No token, a foreign Host, a browser Origin: refused like the API.
    let (status, body) = serve.raw(&format!("GET /ui HTTP/1.1\r\nHost: 127.0.0.1:{port}"), b"");
    assert_eq!(status, 401, "{body}");
    let (status, _) = serve.raw(
        &format!("GET /ui HTTP/1.1\r\nHost: attacker.example:{port}\r\nx-rampart-token: let-me-in"),
        b"",
    );
    assert_eq!(status, 403);
    let (status, _) = serve.raw(
        &format!(
            "GET /ui HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: http://attacker.example\r\n\
             x-rampart-token: let-me-in"
        ),
        b"",
    );
    assert_eq!(status, 403);
    // The page's other routes too: a blob, a chart, a compaction, without the token.
    let blob = format!("/ui/blobs/sha256:{}", "ab".repeat(32));
    for path in [
        blob.as_str(),
        "/ui/conversations/x/chart",
        "/ui/conversations/x/compactions/1",
    ] {
        let (status, body) = serve.raw(
            &format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}"),
            b"",
        );
        assert_eq!(status, 401, "{path}: {body}");
    }
    // A client's hostile message, then the page: the turn is listed, nothing of it runs.
    up.push(openai_text_stream("hello", 5, 1));
    let hostile = serde_json::to_vec(&json!({"model": "gpt-up", "messages": [
        {"role": "user", "content": "<script>alert(1)</script><img src=x onerror=alert(2)>"}]}))
    .unwrap();
    let (status, body) = serve.raw(
        &format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
             Content-Type: application/json\r\nx-rampart-token: let-me-in"
        ),
        &hostile,
    );
    assert_eq!(status, 200, "{body}");
    let mut stream = serve.connect();
    stream
        .write_all(
            format!(
                "GET /ui HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer let-me-in\r\n\
                 Connection: close\r\n\r\n"
            )
            .as_bytes(),
        )
        .unwrap();
    let (head, page) = read_with_headers(&mut stream);
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(
        head.contains("content-type: text/html; charset=utf-8"),
        "{head}"
    );
    assert!(
        head.contains("content-security-policy: default-src 'none'; script-src 'self';"),
        "{head}"
    );
    assert!(head.contains("x-content-type-options: nosniff"), "{head}");
    assert!(!head.contains("access-control-allow-origin"), "{head}");
    assert_eq!(
        page.matches("<tr class=\"conversation\"").count(),
        1,
        "{page}"
    );
    assert_eq!(page.matches("class=\"point\"").count(), 1, "{page}");
    assert_eq!(
        page.matches("<script").count(),
        1,
        "only the page's own script: {page}"
    );
    assert!(page.contains("<script src=\"ui/app.js\" defer></script>"));
    assert!(!page.contains("<img"), "{page}");
    assert!(
        !page.contains("let-me-in"),
        "the page shows the token: {page}"
    );
}
