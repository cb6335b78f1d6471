//! `GET /ui/events` over a real socket: a subscriber hears the call a chat turn makes, the
//! stream ends when the server is stopped (it must not hold the shutdown to the drain
//! deadline), and a browser page from a foreign origin cannot subscribe. The page's other
//! routes: a capped result's original under `/ui/blobs/` (and nothing else there), a
//! compaction's detail page read from the session, escaped, and the engine's calls in
//! `/metrics`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::{BufRead, BufReader};
use std::time::Duration;

use common::loopback::{Loopback, openai_overflow_error, openai_text_stream};
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

/// The config above, with compactions summarised by the simulator (no model call).
fn compacting_config(url: &str) -> String {
    format!(
        "{}\n[agents.defaults.compaction]\nmodel = \"sim/default\"\n",
        config(url)
    )
}

fn get(url: &str) -> reqwest::blocking::Response {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
        .get(url)
        .send()
        .unwrap()
}

/// The first `href="PREFIX…"` on `page`, without its quotes.
fn link(page: &str, prefix: &str) -> Option<String> {
    let start = page.find(&format!("href=\"{prefix}"))? + 6;
    Some(page[start..].split('"').next()?.to_owned())
}

#[test]
fn a_capped_results_original_is_served_by_its_reference_and_nothing_else_is() {
    let up = Loopback::start();
    let serve = ServeProcess::start(&config(&up.url()));
    // Above the cap of a 32,000-token window (0.3 of it, four characters a token): the
    // stored result is cut in its middle, where this marker sits.
    let original = format!(
        "{}MIDDLE-MARKER-7731{}",
        "head line of the tool output\n".repeat(1_000),
        "tail line of the tool output\n".repeat(1_000)
    );
    up.push(openai_text_stream("Read it.", 12_000, 3));
    serve.chat(&[
        json!({"role": "user", "content": "Read the log."}),
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1",
            "type": "function", "function": {"name": "read", "arguments": "{}"}}]}),
        json!({"role": "tool", "tool_call_id": "call_1", "content": original}),
    ]);
    let page = get(&format!("{}/ui", serve.base)).text().unwrap();
    let href = link(&page, "ui/blobs/sha256:").unwrap_or_else(|| panic!("no blob link: {page}"));
    let blob = get(&format!("{}/{href}", serve.base));
    assert_eq!(blob.status().as_u16(), 200);
    assert_eq!(blob.headers()["content-type"], "text/plain; charset=utf-8");
    assert_eq!(blob.headers()["x-content-type-options"], "nosniff");
    assert!(
        blob.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("sandbox")
    );
    assert_eq!(blob.text().unwrap(), original, "the whole original");

    let zeros = format!("sha256:{}", "0".repeat(64));
    for (path, status) in [
        (zeros.as_str(), 404),
        ("..%2F..%2Fconfig.toml", 400),
        ("sha256:..%2F..%2Fplugins.toml", 400),
        ("sha256%3A..%2Fblobs", 400),
        (&format!("{zeros}%2F..")[..], 400),
        ("sha256:abc", 400),
    ] {
        let r = get(&format!("{}/ui/blobs/{path}", serve.base));
        assert_eq!(r.status().as_u16(), status, "{path}");
        assert_eq!(r.headers()["content-type"], "text/plain; charset=utf-8");
    }
    // A path that leaves the route is the router's 404, never a file.
    let r = get(&format!("{}/ui/blobs/../../plugins.toml", serve.base));
    assert_ne!(r.status().as_u16(), 200);
    let foreign = reqwest::blocking::Client::new()
        .get(format!("{}/{href}", serve.base))
        .header("origin", "https://evil.example")
        .send()
        .unwrap();
    assert_eq!(foreign.status().as_u16(), 403, "the API's guard");
}

#[test]
fn a_compactions_page_shows_what_it_removed_and_its_summary_escaped() {
    let up = Loopback::start();
    let serve = ServeProcess::start(&compacting_config(&up.url()));
    let mut history = vec![json!({"role": "system", "content": "Be brief."})];
    for n in 0..5u64 {
        up.push(openai_text_stream(
            &format!("Noted part {n}."),
            2000 + 1500 * n,
            4,
        ));
        history.push(json!({"role": "user", "content": format!(
            "Part {n} <script>alert('part {n}')</script>: {}",
            "lorem ipsum dolor sit amet ".repeat(220)
        )}));
        let v = serve.chat(&history);
        history.push(v["choices"][0]["message"].clone());
    }
    up.push(openai_overflow_error(32_000, 40_000));
    up.push(openai_text_stream("All parts summarised.", 3000, 5));
    history.push(json!({"role": "user", "content": "Summarise all parts."}));
    serve.chat(&history);

    let page = get(&format!("{}/ui", serve.base)).text().unwrap();
    let href = link(&page, "ui/conversations/")
        .filter(|h| h.ends_with("/compactions/1"))
        .unwrap_or_else(|| panic!("no compaction link: {page}"));
    let detail = get(&format!("{}/{href}", serve.base));
    assert_eq!(detail.status().as_u16(), 200);
    assert_eq!(detail.headers()["content-type"], "text/html; charset=utf-8");
    assert!(
        detail.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("script-src 'self'")
    );
    let html = detail.text().unwrap();
    assert_eq!(html.matches("<script").count(), 0, "{html}");
    let summary = html
        .split("<pre id=\"summary\">")
        .nth(1)
        .and_then(|rest| rest.split("</pre>").next())
        .unwrap_or_else(|| panic!("no summary: {html}"));
    assert!(summary.len() > 20, "{summary}");
    assert!(
        html.contains("<td>user</td><td>Part 0 &lt;script&gt;alert(&#39;part 0&#39;)&lt;/script&gt;: lorem ipsum"),
        "the first part, removed, as text: {html}"
    );
    let number = |id: &str| -> u64 {
        html.split(&format!("id=\"{id}\">"))
            .nth(1)
            .and_then(|rest| rest.split('<').next())
            .and_then(|n| n.replace(',', "").parse().ok())
            .unwrap_or_else(|| panic!("no {id}: {html}"))
    };
    assert!(number("tokens-before") > number("tokens-after"), "{html}");

    let base = href.trim_end_matches("/compactions/1");
    for missing in [
        format!("{base}/compactions/2"),
        format!("{base}/compactions/0"),
        format!("{base}/compactions/x"),
        "ui/conversations/nobody/compactions/1".to_string(),
    ] {
        let r = get(&format!("{}/{missing}", serve.base));
        assert_eq!(r.status().as_u16(), 404, "{missing}");
    }
    let chart = get(&format!("{}/{base}/chart", serve.base));
    assert_eq!(
        chart.headers()["content-type"],
        "image/svg+xml; charset=utf-8"
    );
    let svg = chart.text().unwrap();
    assert!(
        svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""),
        "{svg}"
    );
    assert_eq!(svg.matches("class=\"point\"").count(), 6, "{svg}");
    assert_eq!(
        svg.matches("<path class=\"compaction\"").count(),
        1,
        "{svg}"
    );

    // The engine's calls, as the page's health panel counts them, in /metrics too.
    let metrics = get(&format!("{}/metrics", serve.base)).text().unwrap();
    let assembles: u64 = metrics
        .lines()
        .find(|l| {
            l.starts_with(
                "rampart_serve_engine_calls_total{engine=\"legacy\",operation=\"assemble\"}",
            )
        })
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("{metrics}"));
    assert!(assembles >= 6, "{metrics}");
    assert!(
        metrics.contains("rampart_serve_engine_quarantined{engine=\"legacy\"} 0"),
        "{metrics}"
    );
    assert!(page.contains("<h2>Context engine</h2>"), "{page}");
}

#[test]
fn with_prices_the_page_shows_spend_in_dollars_and_a_bad_file_stops_the_start() {
    let up = Loopback::start();
    let dir = tempfile::tempdir().unwrap();
    let prices = dir.path().join("prices.toml");
    std::fs::write(&prices, "input = 3.0\noutput = 15.0\n").unwrap();
    let serve =
        ServeProcess::start_with_flags(&config(&up.url()), &["--prices", prices.to_str().unwrap()]);
    up.push(openai_text_stream("Noted.", 1_000_000, 1_000));
    serve.chat(&[json!({"role": "user", "content": "Hello"})]);
    let page = get(&format!("{}/ui", serve.base)).text().unwrap();
    // A million prompt tokens at $3 and a thousand answer tokens at $15 per million.
    assert!(page.contains("<b id=\"spend-total\">$3.0150</b>"), "{page}");
    assert!(page.contains("$3.0150 (1,001,000 tokens)"), "{page}");

    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "input = \"cheap\"\n").unwrap();
    let config_path = common::write_config(dir.path(), &config(&up.url()));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rampart"))
        .args(["--config", config_path.to_str().unwrap()])
        .args(["--sessions-dir", dir.path().join("s").to_str().unwrap()])
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--prices",
            bad.to_str().unwrap(),
        ])
        .env_remove("RAMPART_CONFIG")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.toml") && err.contains("`input` must be a number"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "it never listened");
}
