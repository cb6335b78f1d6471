//! `GET /ui/events` over a real socket: a subscriber hears the call a chat turn makes, the
//! stream ends when the server is stopped (it must not hold the shutdown to the drain
//! deadline), and a browser page from a foreign origin cannot subscribe.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::{BufRead, BufReader};
use std::time::Duration;

use common::loopback::{Loopback, openai_text_stream};
use common::serve::ServeProcess;
use serde_json::{Value, json};

fn config(url: &str) -> String {
    format!(
        r#"
[agents.defaults.model]
primary = "up/gpt-up"

[models.providers.up]
api = "openai-completions"
baseUrl = "{url}"
maxRetries = 0
timeoutSeconds = 20

[[models.providers.up.models]]
id = "gpt-up"
contextWindow = 32000

[serve]
drainTimeoutMs = 120000
"#
    )
}

/// The next `update` event's JSON on `lines`, skipping keep-alive comments.
fn next_update(lines: &mut impl Iterator<Item = std::io::Result<String>>) -> Value {
    let mut event = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(name) = line.strip_prefix("event: ") {
            event = name.to_owned();
        } else if let Some(data) = line.strip_prefix("data: ") {
            assert_eq!(event, "update", "{data}");
            return serde_json::from_str(data).unwrap();
        }
    }
    panic!("the stream ended before an update");
}

#[test]
fn a_subscriber_hears_the_call_and_the_stream_ends_on_sigterm() {
    let up = Loopback::start();
    let mut serve = ServeProcess::start(&config(&up.url()));
    // The drain deadline is two minutes and the client gives up after one: only the server
    // ending the stream when it stops lets the read below finish.
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let events = client
        .get(format!("{}/ui/events", serve.base))
        .send()
        .unwrap();
    assert_eq!(events.status().as_u16(), 200);
    assert_eq!(events.headers()["content-type"], "text/event-stream");
    assert_eq!(events.headers()["cache-control"], "no-cache");
    let mut lines = BufReader::new(events).lines();

    up.push(openai_text_stream("Noted.", 1234, 3));
    let answer = client
        .post(format!("{}/v1/chat/completions", serve.base))
        .json(&json!({"model": "gpt-up", "messages": [{"role": "user", "content": "Hello"}]}))
        .send()
        .unwrap();
    assert_eq!(answer.status().as_u16(), 200);
    let update = next_update(&mut lines);
    assert_eq!(update["kind"], "call", "{update}");
    assert_eq!(update["call"], 0, "{update}");
    assert_eq!(update["promptTokens"], 1234, "{update}");
    assert_eq!(update["window"], 32000, "{update}");
    assert!(
        update["conversation"]
            .as_str()
            .is_some_and(|s| !s.is_empty()),
        "{update}"
    );

    serve.terminate();
    // The turn's own update follows the call; then the stream ends.
    let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
    let data: Vec<Value> = rest
        .iter()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert!(
        data.iter().all(|u| u["kind"] == "turn"),
        "only the turn after the call: {rest:?}"
    );
    assert_eq!(serve.wait().code(), Some(0));
}

#[test]
fn the_pages_script_comes_from_the_binary_and_subscribes_to_the_stream() {
    let up = Loopback::start();
    let serve = ServeProcess::start(&config(&up.url()));
    let script = reqwest::blocking::get(format!("{}/ui/app.js", serve.base)).unwrap();
    assert_eq!(script.status().as_u16(), 200);
    assert_eq!(
        script.headers()["content-type"],
        "text/javascript; charset=utf-8"
    );
    assert_eq!(script.headers()["x-content-type-options"], "nosniff");
    let body = script.text().unwrap();
    assert!(body.contains("new EventSource('ui/events')"), "{body}");
    // No address but the SVG namespace's name: nothing is loaded from elsewhere.
    let elsewhere = body.replace("http://www.w3.org/2000/svg", "");
    assert!(
        !elsewhere.contains("http://") && !elsewhere.contains("https://"),
        "{body}"
    );
}

#[test]
fn a_foreign_origin_cannot_subscribe() {
    let up = Loopback::start();
    let serve = ServeProcess::start(&config(&up.url()));
    let refused = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
        .get(format!("{}/ui/events", serve.base))
        .header("origin", "https://evil.example")
        .send()
        .unwrap();
    assert_eq!(refused.status().as_u16(), 403);
    assert_ne!(
        refused
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("text/event-stream")
    );
}
