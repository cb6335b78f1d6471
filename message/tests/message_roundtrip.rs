//! Round-trip tests for the message model against real pi / OpenClaw sessions
//! and hand-written edge cases. The model's contract is that parse → serialise
//! gives back the same JSON value, so that is what every test checks.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use rampart_message::{AgentMessage, BashExecutionMessage, Content, ContentBlock, StopReason};
use serde::Deserialize;
use serde_json::{Map, Value, json};

// ---------------------------------------------------------------------------
// Real session files
// ---------------------------------------------------------------------------

/// `shared/` sits beside the checkout (locally and in CI), not inside it.
fn sessions_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/sessions");
    assert!(
        dir.is_dir(),
        "session test data not found at {}: the `shared` directory must be checked out \
         beside the repository (…/shared next to …/main)",
        dir.display()
    );
    dir
}

fn jsonl_files(subdir: &str) -> Vec<PathBuf> {
    let dir = sessions_dir().join(subdir);
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .jsonl files in {}", dir.display());
    files
}

/// Only the `message` field of an entry, parsed straight from the line's
/// text so the streaming (role-first) path is the one exercised.
#[derive(Deserialize)]
struct MessageEntry {
    message: AgentMessage,
}

/// The first place where two JSON values differ, for readable failures on
/// messages that can be 100 KB long.
fn first_diff(path: &str, a: &Value, b: &Value) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for key in x.keys().chain(y.keys()) {
                let sub = format!("{path}.{key}");
                match (x.get(key), y.get(key)) {
                    (Some(u), Some(v)) => {
                        if let Some(diff) = first_diff(&sub, u, v) {
                            return Some(diff);
                        }
                    }
                    (u, v) => return Some(format!("{sub}: {u:?} vs {v:?}")),
                }
            }
            None
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (u, v))| first_diff(&format!("{path}[{i}]"), u, v)),
        _ if a == b => None,
        _ => Some(format!("{path}: {a} vs {b}")),
    }
}

#[derive(Default, Debug)]
struct Counts {
    messages: usize,
    by_role: BTreeMap<String, usize>,
}

/// Round-trips every message of every file in `subdir`, asserting that each
/// one comes back as the same JSON value and is fully typed (no fallback
/// variants: every role and block type in the real data is a known one).
fn roundtrip_dir(subdir: &str) -> Counts {
    let mut counts = Counts::default();
    for path in jsonl_files(subdir) {
        let text = fs::read_to_string(&path).unwrap();
        for (index, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let at = format!("{}:{}", path.display(), index + 1);
            let entry: Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("{at}: bad JSON: {e}"));
            if entry["type"] != "message" {
                continue;
            }
            let original = &entry["message"];

            let parsed = serde_json::from_str::<MessageEntry>(line)
                .unwrap_or_else(|e| panic!("{at}: message does not parse: {e}"))
                .message;
            let back = serde_json::to_value(&parsed).unwrap();
            if let Some(diff) = first_diff("message", original, &back) {
                panic!("{at}: round trip changed the message: {diff}");
            }
            assert_eq!(&back, original, "{at}");

            // Same result through the buffered path (from a `Value`, whose
            // keys are sorted, so `role` is not first).
            let from_value: AgentMessage = serde_json::from_value(original.clone())
                .unwrap_or_else(|e| panic!("{at}: message does not parse from a Value: {e}"));
            assert_eq!(
                from_value, parsed,
                "{at}: buffered and streaming parse differ"
            );

            assert!(
                !matches!(parsed, AgentMessage::Other(_)),
                "{at}: role {:?} fell back to Other",
                parsed.role()
            );
            let blocks: &[ContentBlock] = match &parsed {
                AgentMessage::Assistant(m) => &m.content,
                AgentMessage::User(m) => m.content.blocks(),
                AgentMessage::ToolResult(m) => m.content.blocks(),
                AgentMessage::Custom(m) => m.content.blocks(),
                _ => &[],
            };
            for block in blocks {
                assert!(
                    !matches!(block, ContentBlock::Other(_)),
                    "{at}: block type {:?} fell back to Other",
                    block.block_type()
                );
            }

            counts.messages += 1;
            *counts.by_role.entry(parsed.role().to_owned()).or_default() += 1;
        }
    }
    counts
}

#[test]
fn openclaw_v3_sessions_round_trip() {
    let counts = roundtrip_dir("openclaw-linux2010");
    eprintln!("openclaw-linux2010: {counts:?}");
    assert!(counts.messages > 0, "no messages found");
}

#[test]
fn pi_mono_v1_sessions_round_trip() {
    let counts = roundtrip_dir("pi-mono");
    eprintln!("pi-mono: {counts:?}");
    assert!(counts.messages > 0, "no messages found");
    // The only bashExecution messages in the corpus are here.
    assert!(counts.by_role.get("bashExecution").is_some_and(|n| *n > 0));
}

// ---------------------------------------------------------------------------
// Edge cases
// ---------------------------------------------------------------------------

/// Parses `text`, checks the result serialises back to the same value, and
/// returns it.
fn roundtrip_text(text: &str) -> AgentMessage {
    let original: Value = serde_json::from_str(text).unwrap();
    let parsed: AgentMessage = serde_json::from_str(text).unwrap();
    assert_eq!(serde_json::to_value(&parsed).unwrap(), original, "{text}");
    let buffered: AgentMessage = serde_json::from_value(original).unwrap();
    assert_eq!(buffered, parsed, "buffered parse differs for {text}");
    parsed
}

#[test]
fn unknown_role_survives() {
    let text = r#"{"role":"hookMessage","customType":"x","content":"hi","display":true,"timestamp":5,"nested":{"a":[1,null]}}"#;
    let msg = roundtrip_text(text);
    assert!(matches!(msg, AgentMessage::Other(_)));
    assert_eq!(msg.role(), "hookMessage");
    assert_eq!(msg.timestamp(), Some(5));
    assert_eq!(msg.tool_calls().count(), 0);

    // Role not first: the buffered path must also fall back.
    let msg = roundtrip_text(r#"{"a":1,"role":"brandNew"}"#);
    assert_eq!(msg.role(), "brandNew");
}

#[test]
fn unknown_block_type_survives() {
    let text = r#"{"role":"assistant","content":[
        {"type":"redactedThinking","data":"abc","extra":{"k":1}},
        {"data":"x","type":"audio"},
        {"type":"text","text":"ok"}],
      "api":"anthropic-messages","provider":"anthropic","model":"m",
      "usage":{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":3,
               "cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},
      "stopReason":"stop","timestamp":1}"#;
    let AgentMessage::Assistant(m) = roundtrip_text(text) else {
        panic!("not an assistant message");
    };
    assert_eq!(m.content[0].block_type(), "redactedThinking");
    assert!(matches!(m.content[0], ContentBlock::Other(_)));
    assert_eq!(m.content[1].block_type(), "audio");
    assert!(matches!(m.content[2], ContentBlock::Text(_)));
}

#[test]
fn unknown_fields_survive_everywhere() {
    let text = r#"{"role":"assistant","content":[
        {"type":"thinking","thinking":"hm","thinkingSignature":"sig","redacted":false},
        {"type":"toolCall","id":"c1","name":"read","arguments":{"path":"a"},"partialJson":"{\"pa"},
        {"type":"text","text":"t","textSignature":"msg_1","future":[1,2]}],
      "api":"openai-responses","provider":"openai","model":"gpt",
      "usage":{"input":1,"output":2,"cacheRead":3,"cacheWrite":4,"totalTokens":10,"reasoning":7,
               "cost":{"input":0.1,"output":0.2,"cacheRead":0,"cacheWrite":0,"total":0.30000000000000004,"currency":"USD"}},
      "stopReason":"toolUse","timestamp":1,"errorMessage":"e","responseId":"r1","meta":null}"#;
    let msg = roundtrip_text(text);
    let AgentMessage::Assistant(m) = &msg else {
        panic!("not an assistant message");
    };
    assert_eq!(m.extra.get("responseId"), Some(&json!("r1")));
    assert_eq!(m.extra.get("meta"), Some(&Value::Null));
    assert_eq!(m.usage.extra.get("reasoning"), Some(&json!(7)));
    assert_eq!(m.usage.cost.extra.get("currency"), Some(&json!("USD")));
    assert_eq!(m.stop_reason, StopReason::ToolUse);
    let calls: Vec<_> = msg.tool_calls().collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].id, "c1");
    assert_eq!(calls[0].extra.get("partialJson"), Some(&json!("{\"pa")));
}

#[test]
fn string_and_block_content_both_survive() {
    let msg = roundtrip_text(r#"{"role":"user","content":"plain","timestamp":1}"#);
    let AgentMessage::User(m) = &msg else {
        panic!("not a user message")
    };
    assert_eq!(m.content, Content::Text("plain".into()));

    let msg = roundtrip_text(
        r#"{"role":"user","content":[{"type":"text","text":"a"},{"type":"image","data":"AAAA","mimeType":"image/png"}],"timestamp":1}"#,
    );
    let AgentMessage::User(m) = &msg else {
        panic!("not a user message")
    };
    assert!(matches!(&m.content, Content::Blocks(b) if b.len() == 2));

    let msg = roundtrip_text(
        r#"{"role":"toolResult","toolCallId":"c","toolName":"bash","content":"out","isError":false,"timestamp":1}"#,
    );
    assert_eq!(msg.tool_call_id(), Some("c"));
    roundtrip_text(r#"{"role":"user","content":[],"timestamp":1}"#);
    roundtrip_text(
        r#"{"role":"custom","customType":"note","content":"x","display":false,"details":{"a":1},"timestamp":1}"#,
    );
}

#[test]
fn explicit_nulls_and_absent_fields_stay_distinct() {
    // details: absent, null, value.
    for details in ["", r#","details":null"#, r#","details":{"k":[]}"#] {
        roundtrip_text(&format!(
            r#"{{"role":"toolResult","toolCallId":"c","toolName":"t","content":[]{details},"isError":true,"timestamp":1}}"#
        ));
    }
    // exitCode: absent (current pi), null (older pi), number.
    let base = r#""role":"bashExecution","command":"ls","output":"","cancelled":true,"truncated":false,"timestamp":1"#;
    let cases: [(&str, Option<Option<i64>>); 3] = [
        ("", None),
        (r#","exitCode":null"#, Some(None)),
        (r#","exitCode":-1"#, Some(Some(-1))),
    ];
    for (field, expected) in cases {
        let msg = roundtrip_text(&format!("{{{base}{field}}}"));
        let AgentMessage::BashExecution(BashExecutionMessage { exit_code, .. }) = msg else {
            panic!("not a bashExecution message");
        };
        assert_eq!(exit_code, expected, "{field}");
    }
    // Summaries.
    roundtrip_text(
        r#"{"role":"compactionSummary","summary":"s","tokensBefore":123,"timestamp":1}"#,
    );
    roundtrip_text(r#"{"role":"branchSummary","summary":"s","fromId":"ab12cd34","timestamp":1}"#);
}

#[test]
fn cost_numbers_keep_their_javascript_form() {
    let text = r#"{"role":"assistant","content":[],"api":"a","provider":"p","model":"m",
      "usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,
               "cost":{"input":3,"output":0.000015,"cacheRead":1.5e-7,"cacheWrite":-2,"total":0.1234567890123}},
      "stopReason":"aborted","timestamp":1}"#;
    let msg = roundtrip_text(text);
    let out = serde_json::to_string(&msg).unwrap();
    assert!(out.contains(r#""input":3,"#), "{out}");
    assert!(out.contains(r#""cacheWrite":-2,"#), "{out}");
    assert!(!out.contains("3.0"), "{out}");
}

#[test]
fn unknown_stop_reason_round_trips() {
    let text = r#"{"role":"assistant","content":[],"api":"a","provider":"p","model":"m",
      "usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,
               "cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},
      "stopReason":"contentFilter","timestamp":1}"#;
    let AgentMessage::Assistant(m) = roundtrip_text(text) else {
        panic!("not an assistant message");
    };
    assert_eq!(m.stop_reason, StopReason::Other("contentFilter".into()));
    assert_eq!(m.stop_reason.as_str(), "contentFilter");
}

#[test]
fn malformed_known_messages_are_errors() {
    // A known role with a missing required field must not silently become Other.
    assert!(serde_json::from_str::<AgentMessage>(r#"{"role":"user","content":"x"}"#).is_err());
    assert!(serde_json::from_str::<AgentMessage>(r#"{"content":"x","role":"user"}"#).is_err());
    // Duplicate tag keys are ambiguous.
    assert!(
        serde_json::from_str::<AgentMessage>(
            r#"{"role":"user","content":"x","timestamp":1,"role":"assistant"}"#
        )
        .is_err()
    );
    assert!(serde_json::from_str::<AgentMessage>(r#"{"role":"zzz","role":"user"}"#).is_err());
    // Missing or non-string tag.
    assert!(serde_json::from_str::<AgentMessage>(r#"{"content":"x"}"#).is_err());
    assert!(serde_json::from_str::<AgentMessage>(r#"{"content":"x","role":3}"#).is_err());
    assert!(serde_json::from_str::<AgentMessage>(r#"{"role":3}"#).is_err());
    assert!(serde_json::from_str::<AgentMessage>("{}").is_err());
    assert!(serde_json::from_str::<AgentMessage>(r#""user""#).is_err());
    // Content must be a string or an array.
    assert!(
        serde_json::from_str::<AgentMessage>(r#"{"role":"user","content":5,"timestamp":1}"#)
            .is_err()
    );
}

#[test]
fn constructors_write_pi_shapes() {
    let user = AgentMessage::user_text("hi", 7);
    assert_eq!(
        serde_json::to_string(&user).unwrap(),
        r#"{"role":"user","content":[{"type":"text","text":"hi"}],"timestamp":7}"#
    );

    let result = AgentMessage::tool_result("call_1", "bash", "done", false, 8);
    assert_eq!(
        serde_json::to_string(&result).unwrap(),
        r#"{"role":"toolResult","toolCallId":"call_1","toolName":"bash","content":[{"type":"text","text":"done"}],"isError":false,"timestamp":8}"#
    );
    assert_eq!(result.tool_call_id(), Some("call_1"));
    assert_eq!(result.role(), "toolResult");

    let assistant =
        AgentMessage::assistant_text("ok", "openai-completions", "ollama", "qwen3:8b", 9);
    assert_eq!(
        serde_json::to_string(&assistant).unwrap(),
        r#"{"role":"assistant","content":[{"type":"text","text":"ok"}],"api":"openai-completions","provider":"ollama","model":"qwen3:8b","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":9}"#
    );
    assert_eq!(assistant.tool_calls().count(), 0);
    assert_eq!(assistant.tool_call_id(), None);

    for msg in [user, result, assistant] {
        let text = serde_json::to_string(&msg).unwrap();
        assert_eq!(serde_json::from_str::<AgentMessage>(&text).unwrap(), msg);
    }
}

// ---------------------------------------------------------------------------
// Property: arbitrary extra fields on a user message survive
// ---------------------------------------------------------------------------

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e12f64..1e12).prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("\\PC{0,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Serialises `role` first, then the other fields, as pi does.
fn role_first_text(role: &str, fields: &Map<String, Value>) -> String {
    let mut out = format!(r#"{{"role":{}"#, serde_json::to_string(role).unwrap());
    for (key, value) in fields {
        out.push(',');
        out.push_str(&serde_json::to_string(key).unwrap());
        out.push(':');
        out.push_str(&serde_json::to_string(value).unwrap());
    }
    out.push('}');
    out
}

proptest! {
    #[test]
    fn user_message_extra_fields_survive(
        extra in prop::collection::btree_map(
            "\\PC{1,12}".prop_filter("known user-message key", |k| {
                !matches!(k.as_str(), "role" | "content" | "timestamp")
            }),
            json_value(),
            0..6,
        ),
        text in "\\PC{0,20}",
        timestamp in any::<u64>(),
    ) {
        let mut fields = Map::new();
        fields.insert("content".into(), json!([{"type": "text", "text": text}]));
        fields.insert("timestamp".into(), json!(timestamp));
        let extra: Map<String, Value> = extra.into_iter().collect();
        fields.extend(extra.clone());
        let text = role_first_text("user", &fields);
        let original: Value = serde_json::from_str(&text).unwrap();

        let parsed: AgentMessage = serde_json::from_str(&text).unwrap();
        let AgentMessage::User(user) = &parsed else {
            panic!("not a user message: {parsed:?}");
        };
        prop_assert_eq!(&user.extra, &extra);
        prop_assert_eq!(serde_json::to_value(&parsed).unwrap(), original.clone());

        let reparsed: AgentMessage =
            serde_json::from_str(&serde_json::to_string(&parsed).unwrap()).unwrap();
        prop_assert_eq!(&reparsed, &parsed);
        let buffered: AgentMessage = serde_json::from_value(original).unwrap();
        prop_assert_eq!(&buffered, &parsed);
    }
}
