use rampart_engine_api::host::EngineEvent;
use serde_json::json;

use super::*;

const BLOB: &str = "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";

fn event(session: &str, kind: &str, data: serde_json::Value) -> EngineEvent {
    EngineEvent {
        kind: kind.to_string(),
        session_id: Some(session.to_string()),
        data,
    }
}

fn call(d: &Dashboard, session: &str, turn: u64, prompt: u64, now: u64) {
    d.observe(
        "host",
        &event(
            session,
            "request",
            json!({"turn": turn, "attempt": 1, "model": "m", "window": 1000,
                   "estimatedTokens": prompt, "messages": 3}),
        ),
        now,
    );
    d.observe(
        "host",
        &event(
            session,
            "response",
            json!({"turn": turn, "attempt": 1, "promptTokens": prompt,
                   "outputTokens": 5, "retries": 0}),
        ),
        now,
    );
    d.turn(session, &format!("serve:{session}"), "window", now);
}

#[test]
fn conversations_are_listed_newest_first_with_their_calls_and_compactions() {
    let d = Dashboard::default();
    call(&d, "old", 1, 100, 1_000);
    call(&d, "new", 1, 200, 2_000);
    call(&d, "new", 2, 900, 3_000);
    d.observe(
        "lcm",
        &event("new", "prune", json!({"softTrimmed": 1})),
        3_400,
    );
    d.observe(
        "host",
        &event(
            "new",
            "compaction_end",
            json!({"reason": "budget", "compacted": true, "tokensBefore": 900,
                   "tokensAfter": 150, "durationMs": 3, "summaryChars": 420,
                   "entryId": "e1", "firstKeptEntryId": "k1"}),
        ),
        3_500,
    );
    call(&d, "new", 3, 300, 4_000);
    let list = d.conversations();
    let ids: Vec<&str> = list.iter().map(|v| v.session_id.as_str()).collect();
    assert_eq!(ids, ["new", "old"]);
    let new = &list[0];
    assert_eq!(new.calls, [200, 900, 300]);
    assert_eq!(new.window, 1000);
    assert_eq!(new.turns, 3);
    assert_eq!(
        new.engine, "lcm",
        "the engine that spoke, over the configured one"
    );
    assert_eq!(list[1].engine, "window");
    assert_eq!(
        new.compactions,
        [CompactionMark {
            at_call: 2,
            reason: "budget".into(),
            tokens_before: Some(900),
            tokens_after: Some(150),
            summary_chars: Some(420),
            entry_id: Some("e1".into()),
        }]
    );
    assert_eq!(new.key.as_deref(), Some("serve:new"));
    let html = d.render(5_000, &Panels::default());
    assert_eq!(html.matches("class=\"point\"").count(), 4);
    assert_eq!(html.matches("class=\"compaction\"").count(), 1);
    assert!(
        html.contains("<td class=\"n\">900</td><td class=\"n\">150</td>"),
        "{html}"
    );
    assert!(html.find("href=\"#s-new\"") < html.find("href=\"#s-old\""));
    assert!(
        html.contains("href=\"ui/conversations/new/compactions/1\""),
        "the marker and the row link to the detail page: {html}"
    );
    assert_eq!(
        html.matches("href=\"ui/conversations/new/compactions/1\"")
            .count(),
        2,
        "{html}"
    );
    // The chart served alone is the one on the page, with its namespace.
    let svg = d.chart_svg("new").unwrap();
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert_eq!(svg.matches("class=\"point\"").count(), 3);
    assert!(d.chart_svg("nobody").is_none());
    // Named when a turn opens it, before any event.
    d.name("opened", "serve:opened", 6_000);
    assert_eq!(
        d.conversation("opened").unwrap().key.as_deref(),
        Some("serve:opened")
    );
}

#[test]
fn hostile_text_is_escaped_and_the_only_script_is_the_pages_own() {
    let d = Dashboard::default();
    let hostile = "<script>alert(1)</script>\"'&";
    call(&d, hostile, 1, 10, 1);
    d.observe(
        "<img src=x onerror=alert(2)>",
        &event(
            hostile,
            "ingest_cap",
            json!({"originalChars": 10, "blob": "<b>blob</b>"}),
        ),
        2,
    );
    let html = d.render(3, &Panels::default());
    assert_eq!(
        html.matches("<script").count(),
        1,
        "only the page's own script: {html}"
    );
    assert!(html.contains("<script src=\"ui/app.js\" defer></script>"));
    assert!(!html.contains("<img"), "{html}");
    assert!(!html.contains("<b>blob"), "{html}");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&amp;"));
    assert!(
        !html.contains("blob&lt;"),
        "a blob that is not a reference is neither linked nor shown: {html}"
    );
}

fn next(rx: &mut tokio::sync::broadcast::Receiver<Update>) -> Option<(String, bool)> {
    let received = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(rx.recv());
    frame(received).map(|(bytes, last)| (String::from_utf8(bytes.to_vec()).unwrap(), last))
}

fn data(frame: &str) -> serde_json::Value {
    let line = frame
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .unwrap_or_else(|| panic!("no data line in {frame:?}"));
    serde_json::from_str(line).unwrap()
}

#[test]
fn observed_calls_and_markers_reach_a_subscriber_as_update_events() {
    let d = Dashboard::default();
    let mut rx = d.subscribe();
    call(&d, "s1", 1, 640, 1);
    d.observe(
        "lcm",
        &event(
            "s1",
            "compaction_end",
            json!({"reason": "overflow", "compacted": true, "tokensBefore": 640,
                   "tokensAfter": 90, "durationMs": 3}),
        ),
        2,
    );
    d.observe(
        "host",
        &event(
            "s1",
            "compaction_end",
            json!({"reason": "overflow", "compacted": true, "tokensBefore": 640,
                   "tokensAfter": 90, "durationMs": 3}),
        ),
        2,
    );
    d.observe(
        "lcm",
        &event(
            "s1",
            "ingest_cap",
            json!({"originalChars": 10, "blob": BLOB}),
        ),
        3,
    );
    d.observe(
        "lcm",
        &event(
            "s1",
            "prune",
            json!({"softTrimmed": 1, "hardCleared": 1, "charsBefore": 10, "charsAfter": 5}),
        ),
        4,
    );
    d.observe(
        "lcm",
        &event(
            "s1",
            "memory_flush",
            json!({"cycle": 1, "reason": "tokens", "note": "memory/n.md", "bytes": 9}),
        ),
        5,
    );
    let (text, last) = next(&mut rx).unwrap();
    assert!(!last);
    assert!(text.starts_with("event: update\ndata: "), "{text}");
    assert!(text.ends_with("\n\n"), "{text}");
    assert_eq!(
        data(&text),
        json!({"conversation": "s1", "kind": "call", "call": 0, "promptTokens": 640,
               "window": 1000, "engine": "", "spend": "645"})
    );
    assert_eq!(
        data(&next(&mut rx).unwrap().0),
        json!({"conversation": "s1", "kind": "turn", "call": 1, "window": 1000,
               "engine": "window"})
    );
    assert_eq!(
        data(&next(&mut rx).unwrap().0),
        json!({"conversation": "s1", "kind": "compaction", "call": 1, "window": 1000,
               "engine": "lcm", "reason": "overflow", "tokensBefore": 640, "tokensAfter": 90,
               "compaction": 1, "spend": "1,195"}),
        "one compaction: the engine's own copy of the host's event is not counted"
    );
    let cap = data(&next(&mut rx).unwrap().0);
    assert_eq!(cap["kind"], "cap");
    assert_eq!(cap["blob"], BLOB);
    assert_eq!(data(&next(&mut rx).unwrap().0)["kind"], "prune");
    assert_eq!(data(&next(&mut rx).unwrap().0)["kind"], "flush");
    let marks = &d.conversations()[0].marks[..2];
    assert_eq!(
        marks,
        &[
            Mark {
                kind: UpdateKind::Cap,
                at_call: 1
            },
            Mark {
                kind: UpdateKind::Prune,
                at_call: 1
            }
        ]
    );
}

#[test]
fn a_subscriber_that_falls_behind_is_told_to_reload_and_its_stream_ends() {
    let d = Dashboard::with_buffer(2);
    let mut rx = d.subscribe();
    // Five calls and five turns: ten updates, two held.
    for n in 0..5 {
        call(&d, "s1", n + 1, 100 + n, n);
    }
    let (text, last) = next(&mut rx).unwrap();
    assert!(last, "the reload is the stream's last event");
    assert!(text.starts_with("event: reload\n"), "{text}");
    assert_eq!(data(&text), json!({"missed": 8}));
}

#[test]
fn the_event_stream_ends_when_the_server_stops() {
    use futures_util::StreamExt;
    let d = Dashboard::default();
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let _inside = runtime.enter();
    let mut stream = Box::pin(event_stream(d.subscribe(), stopping));
    call(&d, "s1", 1, 5, 1);
    let first = runtime.block_on(stream.next()).unwrap().unwrap();
    assert!(first.starts_with(b"event: update\n"));
    stop.send_replace(true);
    call(&d, "s1", 2, 6, 2);
    assert!(runtime.block_on(stream.next()).is_none());
}

#[test]
fn caps_prunes_and_flushes_are_markers_of_their_own_shape_with_a_title() {
    let d = Dashboard::default();
    call(&d, "s", 1, 100, 1);
    for (kind, data) in [
        ("ingest_cap", json!({"originalChars": 10})),
        ("prune", json!({"softTrimmed": 1})),
        ("memory_flush", json!({"cycle": 1})),
        ("ingest_cap", json!({"originalChars": 12})),
    ] {
        d.observe("lcm", &event("s", kind, data), 2);
    }
    call(&d, "s", 2, 200, 3);
    let html = d.render(4, &Panels::default());
    let shape = |class: &str| {
        let start = html
            .find(&format!("<path class=\"{class}\" d=\"M"))
            .unwrap_or_else(|| panic!("no {class} marker: {html}"));
        let rest = &html[start..];
        let d_attr = rest
            .split("d=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        let title = rest
            .split("<title>")
            .nth(1)
            .unwrap()
            .split('<')
            .next()
            .unwrap();
        // The shape without its position.
        let form: String = d_attr.chars().filter(|c| c.is_alphabetic()).collect();
        (form, title.to_owned())
    };
    assert_eq!(html.matches("class=\"cap\"").count(), 2, "{html}");
    assert_eq!(html.matches("class=\"prune\"").count(), 1, "{html}");
    assert_eq!(html.matches("class=\"flush\"").count(), 1, "{html}");
    let (cap, prune, flush) = (shape("cap"), shape("prune"), shape("flush"));
    assert_eq!(cap.1, "tool result capped before call 2");
    assert_eq!(prune.1, "prune before call 2");
    assert_eq!(flush.1, "memory flush before call 2");
    assert!(cap.0 != prune.0 && prune.0 != flush.0 && cap.0 != flush.0);
    assert!(html.contains("data-window=\"1000\""), "{html}");
    assert!(html.contains("data-t=\"200\""), "{html}");
}

#[test]
fn only_valid_blob_references_are_kept_and_linked() {
    assert_eq!(blob_reference(BLOB).as_deref(), Some(BLOB));
    assert_eq!(
        blob_reference(&BLOB.to_ascii_uppercase().replace("SHA256", "sha256")).as_deref(),
        Some(BLOB),
        "upper-case hex is the same blob"
    );
    for bad in [
        "sha256:../../etc/passwd",
        "sha256:2cf2",
        "md5:2cf24dba5fb0a30e26e83b2ac5b9e29e",
        &format!("{BLOB}/x"),
        &format!("{BLOB}0"),
        "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b982g",
    ] {
        assert_eq!(blob_reference(bad), None, "{bad}");
    }
    let d = Dashboard::default();
    call(&d, "s", 1, 100, 1);
    for blob in [BLOB, "sha256:\"><script>alert(1)</script>"] {
        d.observe(
            "legacy",
            &event(
                "s",
                "ingest_cap",
                json!({"originalChars": 10, "blob": blob}),
            ),
            2,
        );
    }
    let v = d.conversation("s").unwrap();
    assert_eq!(v.caps, 2);
    assert_eq!(v.capped_blobs, [BLOB]);
    let html = d.render(3, &Panels::default());
    assert!(
        html.contains(&format!(
            "<a class=\"blob\" href=\"ui/blobs/{BLOB}\"><code>{BLOB}</code></a>"
        )),
        "{html}"
    );
    assert_eq!(html.matches("<script").count(), 1, "{html}");
}

#[test]
fn the_panels_show_engine_health_memory_and_spend_escaped() {
    use crate::engine::slot::{CallStats, Quarantine};
    let d = Dashboard::default();
    call(&d, "s", 1, 1_000_000, 1);
    d.observe(
        "host",
        &event(
            "s",
            "memory_flush",
            json!({"cycle": 1, "reason": "tokens", "note": "memory/<b>n</b>.md", "bytes": 120}),
        ),
        2_000,
    );
    let panels = Panels {
        engine: Some(SlotHealth {
            configured: "lcm".into(),
            active: "legacy".into(),
            quarantine: Some(Quarantine {
                engine: "lcm".into(),
                operation: "assemble".into(),
                reason: "<script>boom</script>".into(),
            }),
            restarts: Some(3),
            calls: vec![(
                "legacy".into(),
                "assemble".into(),
                CallStats {
                    calls: 2,
                    failures: 0,
                    total: Duration::from_millis(3),
                    max: Duration::from_millis(2),
                },
            )],
        }),
        memory: Some(MemoryPanel {
            configured: "memory-core".into(),
            on: true,
            quarantined: None,
            status: Some(Ok(MemoryStatus {
                backend: "sqlite".into(),
                location: None,
                files: 4,
                chunks: 31,
                mode: "keyword-only".into(),
                provider: None,
                model: None,
                fallback: None,
                dirty: false,
                details: Vec::new(),
            })),
        }),
    };
    let tokens_only = d.render(4_000, &Panels::default());
    assert!(
        !tokens_only.contains('$'),
        "no prices, no dollars: {tokens_only}"
    );
    assert!(
        tokens_only.contains("<td class=\"n spend\">1,000,005</td>"),
        "{tokens_only}"
    );
    d.set_prices(Prices {
        input: 3.0,
        output: 15.0,
    });
    let html = d.render(4_000, &panels);
    assert!(!html.contains("<script>boom"), "{html}");
    assert!(
        html.contains("quarantined</span> during assemble: &lt;script&gt;boom"),
        "{html}"
    );
    assert!(html.contains("restarted 3 time(s)"), "{html}");
    assert!(
        html.contains("<td>legacy</td><td>assemble</td><td class=\"n\">2</td>"),
        "{html}"
    );
    assert!(html.contains("1.5 ms"), "the mean call: {html}");
    assert!(html.contains("index: 4 file(s), 31 passage(s)"), "{html}");
    assert!(html.contains("flushes: 1; last 2s ago"), "{html}");
    assert!(html.contains("memory/&lt;b&gt;n&lt;/b&gt;.md"), "{html}");
    // A million prompt tokens and five answer tokens at $3 / $15 per million.
    assert!(html.contains("<b id=\"spend-total\">$3.0001</b>"), "{html}");
    assert!(html.contains("$3.0001 (1,000,005 tokens)"), "{html}");
    // Updates carry the cell as the page reads it, so the script keeps it live.
    let mut rx = d.subscribe();
    call(&d, "s", 2, 1_000_000, 5_000);
    let update = data(&next(&mut rx).unwrap().0);
    assert_eq!(update["spend"], "$6.0001 (2,000,010 tokens)", "{update}");
}

#[test]
fn markers_stay_on_their_calls_when_the_oldest_calls_are_dropped() {
    let d = Dashboard::default();
    for n in 0..(MAX_CALLS as u64 + 1) {
        call(&d, "s", n + 1, 100 + n, n);
    }
    d.observe(
        "legacy",
        &event("s", "prune", json!({"softTrimmed": 1})),
        9_000,
    );
    call(&d, "s", 9_999, 5_000, 9_001);
    let v = d.conversation("s").unwrap();
    assert_eq!(v.calls.len(), MAX_CALLS);
    assert_eq!(v.dropped, 2);
    assert_eq!(v.answered, MAX_CALLS as u64 + 2);
    let chart = chart_of(&v);
    assert_eq!(chart.calls[0].label, 3, "the first call kept is the third");
    let prune = &chart.markers[0];
    assert_eq!(prune.kind, MarkerKind::Prune);
    // Before the last call: the last point on the chart, whatever was dropped.
    assert_eq!(prune.at, MAX_CALLS - 1);
    assert_eq!(chart.calls[prune.at].tokens, Some(5_000));
    assert_eq!(prune.title, format!("prune before call {}", MAX_CALLS + 2));
    // So many calls are a line: no dots, the page stays light.
    assert!(!chart.points);
    let svg = chart.render();
    assert_eq!(svg.matches("class=\"point\"").count(), 0);
    assert_eq!(svg.matches("class=\"tokens\"").count(), 1);
}
