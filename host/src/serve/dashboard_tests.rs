use rampart_engine_api::host::EngineEvent;
use serde_json::json;

use super::*;

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
    d.turn(session, "window", now);
}

#[test]
fn conversations_are_listed_newest_first_with_their_calls_and_compactions() {
    let d = Dashboard::default();
    call(&d, "old", 1, 100, 1_000);
    call(&d, "new", 1, 200, 2_000);
    call(&d, "new", 2, 900, 3_000);
    d.observe(
        "lcm",
        &event(
            "new",
            "compaction_end",
            json!({"reason": "budget", "compacted": true, "tokensBefore": 900,
                   "tokensAfter": 150, "durationMs": 3, "summaryChars": 420}),
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
        }]
    );
    let html = d.render(5_000);
    assert_eq!(html.matches("class=\"point\"").count(), 4);
    assert_eq!(html.matches("class=\"compaction\"").count(), 1);
    assert!(
        html.contains("<td class=\"n\">900</td><td class=\"n\">150</td>"),
        "{html}"
    );
    assert!(html.find("href=\"#s-new\"") < html.find("href=\"#s-old\""));
}

#[test]
fn hostile_text_is_escaped_and_the_page_has_no_script() {
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
    let html = d.render(3);
    assert!(!html.contains("<script"), "{html}");
    assert!(!html.contains("<img"), "{html}");
    assert!(!html.contains("<b>blob"), "{html}");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&amp;"));
    assert!(html.contains("&lt;b&gt;blob&lt;/b&gt;"));
}
