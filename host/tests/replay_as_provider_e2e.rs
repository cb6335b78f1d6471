//! Issue 13, item 7: a replay as `claude-sonnet-4` runs Anthropic's hygiene, and every request
//! it records is one Anthropic would accept. The validator below is written from Anthropic's
//! documented rules, not from the hygiene code it checks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use rampart_host::engine::services::EventSink;
use rampart_host::replay::{EngineChoice, Replayer, setup, source};
use serde_json::Value;

fn transcripts() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/sessions");
    assert!(
        root.is_dir(),
        "the shared transcripts are missing: {}",
        root.display()
    );
    rampart_host::eval::transcripts_in(&root).unwrap()
}

/// Why Anthropic's messages API would refuse `body`, or `None`.
fn anthropic_refusal(body: &Value) -> Option<String> {
    let messages = body["messages"].as_array()?;
    if messages.is_empty() {
        return Some("no messages".into());
    }
    if messages[0]["role"] != "user" {
        return Some("the first message is not the user's".into());
    }
    let id_ok = |id: &str| {
        !id.is_empty()
            && id.len() <= 64
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    };
    let mut seen_ids = HashSet::new();
    let mut previous_calls: Vec<String> = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        let role = message["role"].as_str().unwrap_or("");
        if role != "user" && role != "assistant" {
            return Some(format!("message {i} has role {role:?}"));
        }
        if i > 0 && messages[i - 1]["role"] == message["role"] {
            return Some(format!("messages {} and {i} are both {role}", i - 1));
        }
        let Some(blocks) = message["content"].as_array() else {
            return Some(format!("message {i}'s content is not a list of blocks"));
        };
        if blocks.is_empty() {
            return Some(format!("message {i} is empty"));
        }
        let mut calls = Vec::new();
        let mut answered = HashSet::new();
        for block in blocks {
            match block["type"].as_str().unwrap_or("") {
                "text" => {
                    if block["text"].as_str().is_none_or(|t| t.trim().is_empty()) {
                        return Some(format!("message {i} has an empty text block"));
                    }
                }
                "tool_use" => {
                    let id = block["id"].as_str().unwrap_or("");
                    if role != "assistant" {
                        return Some(format!("message {i}: a tool_use in a user message"));
                    }
                    if !id_ok(id) {
                        return Some(format!(
                            "message {i}: tool_use id {id:?} breaks the grammar"
                        ));
                    }
                    if !seen_ids.insert(id.to_string()) {
                        return Some(format!("message {i}: tool_use id {id:?} used twice"));
                    }
                    calls.push(id.to_string());
                }
                "tool_result" => {
                    let id = block["tool_use_id"].as_str().unwrap_or("");
                    if role != "user" {
                        return Some(format!(
                            "message {i}: a tool_result in an assistant message"
                        ));
                    }
                    if !previous_calls.iter().any(|c| c == id) {
                        return Some(format!(
                            "message {i}: tool_result {id:?} answers no tool_use of message {}",
                            i.wrapping_sub(1)
                        ));
                    }
                    answered.insert(id.to_string());
                }
                "thinking" | "redacted_thinking" | "image" => {}
                other => return Some(format!("message {i}: block type {other:?}")),
            }
        }
        if role == "user" {
            if let Some(missing) = previous_calls.iter().find(|c| !answered.contains(*c)) {
                return Some(format!(
                    "message {i}: tool_use {missing:?} before it has no result"
                ));
            }
            previous_calls.clear();
        } else {
            if !previous_calls.is_empty() {
                return Some(format!(
                    "message {i}: the calls before it were not answered"
                ));
            }
            previous_calls = calls;
        }
    }
    None
}

#[test]
fn the_validator_refuses_what_anthropic_refuses() {
    let ok: Value = serde_json::json!({"messages": [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01", "name": "r", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01"}]}
    ]});
    assert_eq!(anthropic_refusal(&ok), None);
    let mut two_users = ok.clone();
    two_users["messages"][1] =
        serde_json::json!({"role": "user", "content": [{"type": "text", "text": "x"}]});
    assert!(anthropic_refusal(&two_users).is_some());
    let mut bad_id = ok.clone();
    bad_id["messages"][1]["content"][0]["id"] = "call|1".into();
    bad_id["messages"][2]["content"][0]["tool_use_id"] = "call|1".into();
    assert!(anthropic_refusal(&bad_id).unwrap().contains("grammar"));
    let mut empty = ok.clone();
    empty["messages"][1]["content"] = serde_json::json!([]);
    assert!(anthropic_refusal(&empty).is_some());
    let mut unanswered = ok.clone();
    unanswered["messages"][2]["content"][0] = serde_json::json!({"type": "text", "text": "go on"});
    assert!(anthropic_refusal(&unanswered).is_some());
}

#[test]
fn every_shared_transcript_replayed_as_claude_sends_only_what_anthropic_accepts() {
    let window = 64_000;
    let mut replayed = 0;
    let mut requests = 0;
    for file in transcripts() {
        let Ok(recorded) = source::load(&file, None) else {
            continue;
        };
        if recorded.calls() == 0 {
            continue;
        }
        let profile = setup::ModelProfile::from_flags(Some("claude-sonnet-4"), None, None).unwrap();
        let config = rampart_host::config::parse("", Path::new("plugins.toml")).unwrap();
        let config = setup::replay_config(config, &profile, window, None, None).unwrap();
        let place = setup::ReplayDir::prepare(None, false).unwrap();
        let replayer = Replayer::new(
            &config,
            &profile,
            window,
            &place,
            EventSink::tracing_only(),
            EngineChoice::Configured,
        )
        .unwrap()
        .recording_wire(true);
        let mut refusals = Vec::new();
        replayer
            .run(&recorded, false, &mut |row, sent| {
                for request in sent {
                    requests += 1;
                    let wire = request
                        .wire
                        .as_ref()
                        .expect("a replay as Claude records the wire");
                    if let Some(why) = anthropic_refusal(wire) {
                        refusals.push(format!("call {}: {why}", row.turn));
                    }
                }
                Ok(())
            })
            .unwrap();
        assert!(
            refusals.is_empty(),
            "{}: {} requests Anthropic would refuse, first: {}",
            file.display(),
            refusals.len(),
            refusals[0]
        );
        replayed += 1;
    }
    assert!(replayed >= 20, "only {replayed} transcripts replayed");
    assert!(requests > 1_000, "only {requests} requests checked");
}
