//! The recall tools through the engine's JSON dispatch, as a host calls them: what was
//! compacted out of the window comes back by search, description and expansion; what the
//! model gets wrong is answered as a tool error; another conversation's ids are not found.
use std::sync::Arc;

use rampart_engine_api::protocol::{AfterTurnParams, AssembleParams, method};
use rampart_engine_api::tools::{ToolCallParams, ToolCallResult, ToolsListParams, ToolsListResult};
use rampart_engine_api::{AgentMessage, MessageList, SharedMessage};
use rampart_engine_test::{FakeHost, Harness, build};
use serde_json::{Value, json};

use crate::LosslessEngine;
use crate::config::Config;

fn engine(dir: &std::path::Path) -> LosslessEngine {
    let config = json!({
        "stateDir": dir, "summarizer": "extractive", "freshTailCount": 4,
        "leafChunkTokens": 600, "leafMinFanout": 3, "condensedTargetTokens": 100
    });
    LosslessEngine::new(Config::from_json(&config).unwrap(), None)
}

fn temp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("lossless-tools-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Twenty turns; turn 2 holds a fact (a path and a number) that a summary will not keep word
/// for word.
fn history() -> Vec<SharedMessage> {
    let mut out = Vec::new();
    for i in 0..20 {
        let fact = if i == 2 {
            " the build cache lives at /var/cache/quartz-17/obj and holds 48213 entries."
        } else {
            ""
        };
        out.push(Arc::new(AgentMessage::user_text(
            format!(
                "question {i} about TOPIC_{i}:{fact} {}",
                "detail ".repeat(40)
            ),
            1_700_000_000_000 + i as u64 * 60_000,
        )));
        out.push(Arc::new(build::assistant_text(&format!(
            "answer {i}: {}",
            "because ".repeat(40)
        ))));
    }
    out
}

fn session(p: &mut rampart_engine_api::protocol::SessionRef, id: &str) {
    p.session_id = id.into();
}

/// A session `id` of twenty turns, swept at a small budget so its start is summarised.
fn compacted(h: &Harness<LosslessEngine>, id: &str) {
    let msgs = history();
    let mut p = AssembleParams {
        messages: MessageList::from(msgs.clone()),
        token_budget: Some(100_000),
        ..Default::default()
    };
    session(&mut p.session, id);
    let _: Value = h.call(method::ASSEMBLE, &p).unwrap();
    let mut t = AfterTurnParams {
        token_budget: Some(2_000),
        ..Default::default()
    };
    session(&mut t.session, id);
    let _: Value = h.call(method::AFTER_TURN, &t).unwrap();
    p.token_budget = Some(2_000);
    let out: Value = h.call(method::ASSEMBLE, &p).unwrap();
    let text = out.to_string();
    assert!(
        text.contains("<summary id="),
        "the sweep summarised nothing"
    );
    assert!(
        !text.contains("48213"),
        "the fact must be out of the window for this test to mean anything"
    );
}

fn call(h: &Harness<LosslessEngine>, session_id: &str, name: &str, args: Value) -> ToolCallResult {
    let mut p = ToolCallParams {
        name: name.into(),
        arguments: args,
        call_id: "call_1".into(),
        ..Default::default()
    };
    session(&mut p.session, session_id);
    h.call(method::TOOLS_CALL, &p).unwrap()
}

fn answer(r: &ToolCallResult) -> Value {
    assert!(!r.is_error, "unexpected tool error: {}", r.content);
    serde_json::from_str(&r.content).unwrap()
}

#[test]
fn the_engine_lists_three_tools_a_host_can_offer_and_announces_them() {
    let dir = temp("list");
    let host = FakeHost::new();
    let h = Harness::new(engine(&dir), &host);
    let listed: ToolsListResult = h
        .call(method::TOOLS_LIST, &ToolsListParams::default())
        .unwrap();
    let names: Vec<_> = listed.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["lcm_grep", "lcm_describe", "lcm_expand"]);
    for t in &listed.tools {
        assert_eq!(t.problem(), None, "{}", t.name);
    }
    use rampart_engine_api::ContextEngine;
    assert!(
        h.engine()
            .info()
            .protocol
            .supports(&rampart_engine_api::protocol::Feature::EngineTools)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The fact left the window in a summary; grep finds its message, describe reads it whole,
/// and expanding the summary that covers it brings the message back.
#[test]
fn a_compacted_fact_comes_back_through_grep_describe_and_expand() {
    let dir = temp("recall");
    let host = FakeHost::new();
    let h = Harness::new(engine(&dir), &host);
    compacted(&h, "s1");

    let found = answer(&call(&h, "s1", "lcm_grep", json!({"pattern": "quartz-17"})));
    let hits = found["hits"].as_array().unwrap();
    assert!(!hits.is_empty(), "{found}");
    let msg = hits
        .iter()
        .find(|h| h["id"].as_str().unwrap().starts_with("msg#"))
        .unwrap_or_else(|| panic!("no message hit: {found}"));
    let read = answer(&call(&h, "s1", "lcm_describe", json!({"id": msg["id"]})));
    assert_eq!(read["type"], "message");
    assert!(
        read["content"].as_str().unwrap().contains("48213 entries"),
        "{read}"
    );

    // The summary that stands for that message, by the store's own links.
    let message_id: i64 = msg["id"].as_str().unwrap()[4..].parse().unwrap();
    let summary: String = h
        .engine()
        .with_conv("s1", None, |store, _, _| {
            Ok(store
                .conn()
                .query_row(
                    "SELECT summary_id FROM summary_messages WHERE message_id = ?1",
                    [message_id],
                    |r| r.get(0),
                )
                .unwrap())
        })
        .unwrap();
    let described = answer(&call(&h, "s1", "lcm_describe", json!({"id": summary})));
    assert_eq!(described["type"], "summary");
    assert!(
        described["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m == &msg["id"]),
        "{described}"
    );
    let expanded = answer(&call(
        &h,
        "s1",
        "lcm_expand",
        json!({"id": summary, "includeMessages": true, "tokenCap": 16000}),
    ));
    assert!(expanded.to_string().contains("48213 entries"), "{expanded}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// What the model gets wrong is a tool error naming the problem, never an engine failure.
#[test]
fn mistakes_are_answered_as_tool_errors_the_model_can_fix() {
    let dir = temp("mistakes");
    let host = FakeHost::new();
    let h = Harness::new(engine(&dir), &host);
    compacted(&h, "s1");
    let cases = [
        ("lcm_grep", json!({"pattern": "a|b"}), "substring"),
        ("lcm_grep", json!({"pattern": "x", "limit": 500}), "limit"),
        (
            "lcm_grep",
            json!({"pattern": "x", "mode": "fuzzy"}),
            "fuzzy",
        ),
        ("lcm_grep", json!({}), "pattern"),
        ("lcm_grep", json!({"pattern": "x", "colour": 1}), "colour"),
        (
            "lcm_describe",
            json!({"id": "../../etc/passwd"}),
            "not an id",
        ),
        ("lcm_describe", json!({"id": "msg#abc"}), "number"),
        ("lcm_expand", json!({"id": "msg#1"}), "not a summary id"),
        (
            "lcm_expand",
            json!({"id": "sum_0", "maxDepth": 99}),
            "maxDepth",
        ),
        (
            "lcm_expand",
            json!({"id": "sum_0", "tokenCap": 0}),
            "tokenCap",
        ),
        ("lcm_forget", json!({}), "not a tool"),
    ];
    for (tool, args, says) in cases {
        let r = call(&h, "s1", tool, args.clone());
        assert!(r.is_error, "{tool} {args}: {}", r.content);
        assert!(r.content.contains(says), "{tool} {args}: {}", r.content);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Ids are scoped to the calling conversation: another session's summary and messages are
/// "not found in this scope", and its facts are not found by search.
#[test]
fn another_conversations_history_is_out_of_scope() {
    let dir = temp("scope");
    let host = FakeHost::new();
    let h = Harness::new(engine(&dir), &host);
    compacted(&h, "s1");
    // A second session of the same agent, with different words.
    let mut p = AssembleParams {
        messages: MessageList::from(vec![Arc::new(AgentMessage::user_text(
            "an unrelated conversation",
            1_700_000_000_000,
        )) as SharedMessage]),
        token_budget: Some(100_000),
        ..Default::default()
    };
    session(&mut p.session, "s2");
    let _: Value = h.call(method::ASSEMBLE, &p).unwrap();

    let (summary, message): (String, i64) = h
        .engine()
        .with_conv("s1", None, |store, conv, _| {
            Ok(store
                .conn()
                .query_row(
                    "SELECT s.summary_id, m.message_id FROM summary_messages m \
                     JOIN summaries s ON s.summary_id = m.summary_id \
                     WHERE s.conversation_id = ?1 LIMIT 1",
                    [conv.id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .unwrap())
        })
        .unwrap();
    for (tool, id) in [
        ("lcm_describe", summary.clone()),
        ("lcm_expand", summary.clone()),
        ("lcm_describe", format!("msg#{message}")),
    ] {
        let r = answer(&call(&h, "s2", tool, json!({"id": id})));
        assert!(
            r["error"]
                .as_str()
                .unwrap()
                .contains("not found in this scope"),
            "{tool} {id}: {r}"
        );
    }
    let found = answer(&call(&h, "s2", "lcm_grep", json!({"pattern": "quartz-17"})));
    assert_eq!(found["count"], 0, "{found}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A tool result the host capped names its original's blob; the engine stores the original
/// (read back through the host) as the text recall searches, while the message it sends stays
/// the capped one. What was cut out of the window is found and read whole.
#[test]
fn a_capped_results_original_is_what_recall_finds() {
    use rampart_engine_api::message::ORIGINAL_BLOB_KEY;
    let dir = temp("capped");
    let host = FakeHost::new();
    let h = Harness::new(engine(&dir), &host);
    let original = format!(
        "{}\nFATAL: quota exceeded on volume vol-7731 while writing\n{}",
        "ok line\n".repeat(200),
        "ok line\n".repeat(200)
    );
    let mut capped = AgentMessage::tool_result(
        "c1",
        "exec",
        "ok line\n[... 3000 more characters truncated; full output: blob sha256:aa]",
        false,
        1_700_000_000_000,
    );
    if let AgentMessage::ToolResult(r) = &mut capped {
        r.extra.insert(ORIGINAL_BLOB_KEY.into(), json!("sha256:aa"));
    }
    let messages: Vec<SharedMessage> = vec![
        Arc::new(AgentMessage::user_text("run the job", 1_700_000_000_000)),
        Arc::new(build::assistant_calls(&[(
            "c1",
            "exec",
            json!({"cmd": "job"}),
        )])),
        Arc::new(capped),
    ];
    let asked = std::cell::RefCell::new(Vec::new());
    h.engine()
        .with_conv("s1", None, |store, conv, _| {
            crate::conv::reconcile(
                store,
                conv,
                &messages,
                crate::conv::Sizes {
                    retain_depth: 2,
                    tool_output: 8_000,
                    file: 25_000,
                },
                0,
                &|r| {
                    asked.borrow_mut().push(r.to_owned());
                    Some(original.clone())
                },
            )
        })
        .unwrap();
    assert_eq!(asked.borrow().as_slice(), ["sha256:aa"]);
    let found = answer(&call(
        &h,
        "s1",
        "lcm_grep",
        json!({"pattern": "quota exceeded volume"}),
    ));
    let hit = &found["hits"][0];
    assert!(
        hit["snippet"].as_str().unwrap().contains("vol-7731"),
        "{found}"
    );
    let read = answer(&call(&h, "s1", "lcm_describe", json!({"id": hit["id"]})));
    assert_eq!(read["bytes"], original.len(), "{read}");
    // Assembly still sends the message as the session has it.
    let mut p = AssembleParams {
        messages: MessageList::from(messages.clone()),
        token_budget: Some(100_000),
        ..Default::default()
    };
    session(&mut p.session, "s1");
    let out: Value = h.call(method::ASSEMBLE, &p).unwrap();
    assert!(!out.to_string().contains("vol-7731"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `lcm_grep` in regex mode finds by pattern what words cannot (`quartz-\d+`); what is not a
/// regular expression, or is longer than 500 characters, is a tool error saying so; a pattern
/// built to hang a backtracking matcher is answered (this crate matches in linear time). A
/// full-text pattern with regex syntax is told to use regex mode (§8.20).
#[test]
fn grep_takes_regular_expressions() {
    let dir = temp("regex");
    let host = FakeHost::new();
    let h = Harness::new(engine(&dir), &host);
    compacted(&h, "s1");

    let found = answer(&call(
        &h,
        "s1",
        "lcm_grep",
        json!({"pattern": r"QUARTZ-\d+/obj", "mode": "regex"}),
    ));
    let hits = found["hits"].as_array().unwrap();
    assert!(
        hits.iter()
            .any(|h| h["id"].as_str().unwrap().starts_with("msg#")
                && h["snippet"].as_str().unwrap().contains("quartz-17/obj")),
        "{found}"
    );
    let words = call(&h, "s1", "lcm_grep", json!({"pattern": "quartz|cache"}));
    assert!(
        words.is_error && words.content.contains("regex mode"),
        "{}",
        words.content
    );
    let bad = call(
        &h,
        "s1",
        "lcm_grep",
        json!({"pattern": "(unclosed", "mode": "regex"}),
    );
    assert!(
        bad.is_error && bad.content.contains("not a regular expression"),
        "{}",
        bad.content
    );
    let long = call(
        &h,
        "s1",
        "lcm_grep",
        json!({"pattern": "a".repeat(501), "mode": "regex"}),
    );
    assert!(
        long.is_error && long.content.contains("500"),
        "{}",
        long.content
    );
    let hostile = call(
        &h,
        "s1",
        "lcm_grep",
        json!({"pattern": "(d+e*)+$x", "mode": "regex"}),
    );
    assert_eq!(answer(&hostile)["count"], 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `since` and `before` narrow `lcm_grep` to what was said in a time (messages by their own
/// time, ISO 8601, UTC unless an offset is given); a time that is not ISO 8601, or a range
/// that ends before it starts, is a tool error naming the field.
#[test]
fn grep_narrows_to_a_time() {
    let dir = temp("since");
    let host = FakeHost::new();
    let h = Harness::new(engine(&dir), &host);
    compacted(&h, "s1");
    // Turn i's question was asked at 2023-11-14T22:13:20Z plus i minutes.
    // The messages found: a hit's snippet, then the values of each message folded into it
    // (the questions differ only in their numbers).
    let in_range = |args: Value| -> Vec<String> {
        let found = answer(&call(&h, "s1", "lcm_grep", args));
        let mut messages = Vec::new();
        for hit in found["hits"].as_array().unwrap() {
            if !hit["id"].as_str().unwrap().starts_with("msg#") {
                continue;
            }
            messages.push(hit["snippet"].as_str().unwrap().to_string());
            for alike in hit["alike"].as_array().into_iter().flatten() {
                messages.push(alike["values"].to_string());
            }
        }
        messages
    };
    let hits = in_range(json!({"pattern": "question", "since": "2023-11-14T22:15",
                                "before": "2023-11-14T22:16"}));
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert!(hits[0].contains("question 2 "), "{hits:?}");
    // The same minute, written in another zone.
    let hits = in_range(
        json!({"pattern": "question", "since": "2023-11-15T06:15+08:00",
                                "before": "2023-11-15T06:16+08:00", "mode": "substring"}),
    );
    assert_eq!(hits.len(), 1, "{hits:?}");
    let hits = in_range(json!({"pattern": "question \\d+ about", "mode": "regex",
                                "since": "2023-11-14T22:30"}));
    assert_eq!(hits.len(), 3, "questions 17, 18 and 19: {hits:?}");
    // Without a range, all twenty.
    assert_eq!(
        in_range(json!({"pattern": "question", "mode": "substring", "limit": 50})).len(),
        20
    );
    let wrong = call(
        &h,
        "s1",
        "lcm_grep",
        json!({"pattern": "question", "since": "yesterday"}),
    );
    assert!(
        wrong.is_error && wrong.content.contains("`since`"),
        "{}",
        wrong.content
    );
    let backwards = call(
        &h,
        "s1",
        "lcm_grep",
        json!({"pattern": "question", "since": "2023-11-15", "before": "2023-11-14"}),
    );
    assert!(
        backwards.is_error && backwards.content.contains("earlier"),
        "{}",
        backwards.content
    );
    let _ = std::fs::remove_dir_all(&dir);
}
