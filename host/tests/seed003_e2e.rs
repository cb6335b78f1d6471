//! Seed 003's acceptance checks against the embedded simulator: a hundred tool-using turns
//! stay within the window, every request is well paired, an injected oversized tool result is
//! survived, and compaction is observable. (The compaction-timeout and small-window checks are
//! in `compaction_e2e.rs` and `run_e2e.rs`.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::HashSet;
use std::path::Path;

use common::Harness;
use rampart_engine_api::AgentMessage;
use rampart_host::blobs::BlobStore;
use rampart_host::config;
use rampart_host::run::RequestRecord;
use rampart_host::run::events::Event;
use rampart_message::wire::SharedMessage;
use rampart_message::{AssistantMessage, ContentBlock};
use serde_json::json;

const WINDOW: u64 = 32_000;

fn assistant(content: serde_json::Value, stop: &str, ts: u64) -> AssistantMessage {
    match common::assistant_blocks(content, stop, ts) {
        AgentMessage::Assistant(a) => a,
        _ => unreachable!(),
    }
}

/// Every tool call has exactly one result, right after its assistant message (and its
/// siblings' results), and no result is orphaned.
fn assert_paired(record: &RequestRecord) {
    let messages: &[SharedMessage] = &record.messages;
    let mut i = 0;
    while i < messages.len() {
        match &*messages[i] {
            AgentMessage::Assistant(a) => {
                let calls: Vec<&str> = a
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::ToolCall(c) => Some(c.id.as_str()),
                        _ => None,
                    })
                    .collect();
                let mut answered = HashSet::new();
                let mut j = i + 1;
                while j < messages.len() {
                    match &*messages[j] {
                        AgentMessage::ToolResult(r) => {
                            assert!(
                                calls.contains(&r.tool_call_id.as_str()),
                                "turn {} attempt {}: result {} does not answer the assistant before it",
                                record.turn,
                                record.attempt,
                                r.tool_call_id
                            );
                            assert!(answered.insert(r.tool_call_id.clone()), "duplicate result");
                            j += 1;
                        }
                        _ => break,
                    }
                }
                assert_eq!(
                    answered.len(),
                    calls.len(),
                    "turn {} attempt {}: a call without its result",
                    record.turn,
                    record.attempt
                );
                i = j;
            }
            AgentMessage::ToolResult(r) => panic!(
                "turn {} attempt {}: orphaned result {}",
                record.turn, record.attempt, r.tool_call_id
            ),
            _ => i += 1,
        }
    }
}

#[test]
fn a_hundred_tool_turns_stay_within_the_window_and_every_request_is_paired() {
    let dir = tempfile::tempdir().unwrap();
    let config = config::parse(
        &format!(
            "[agents.defaults.model]\nprimary = \"sim/mid\"\n\
             [[models.providers.sim.models]]\nid = \"mid\"\ncontextWindow = {WINDOW}\n"
        ),
        Path::new("plugins.toml"),
    )
    .unwrap();
    let blobs = BlobStore::in_sessions_dir(dir.path());
    let h = Harness::with_blobs(config, Some(blobs.clone()));
    let sim = h.providers.sim("sim").unwrap();
    let mut runner = h.runner().with_blobs(blobs);
    let mut session = common::new_session(dir.path());

    let mut records = Vec::new();
    let mut kinds = Vec::new();
    let mut caps = Vec::new();
    for turn in 0..100u64 {
        let id = format!("call_{turn}");
        sim.push_reply(assistant(
            json!([{"type": "toolCall", "id": id, "name": "read",
                    "arguments": {"path": format!("src/module_{turn}.rs")}}]),
            "toolUse",
            turn,
        ));
        let report = runner
            .run_turn(
                &mut session,
                Some(AgentMessage::user_text(
                    format!("Turn {turn}: read module {turn} and explain it."),
                    turn,
                )),
            )
            .unwrap();
        records.extend(report.requests);
        // Turn 50 injects a 2 MB result; the others are a few thousand characters.
        let output = if turn == 50 {
            "0123456789abcdef\n".repeat(120_000)
        } else {
            format!("fn module_{turn}() {{ /* body */ }}\n").repeat(100)
        };
        runner
            .append(
                &mut session,
                AgentMessage::tool_result(&id, "read", output, false, turn),
            )
            .unwrap();
        sim.push_reply(assistant(
            json!([{"type": "text", "text": format!("Module {turn} defines one function.")}]),
            "stop",
            turn,
        ));
        let report = runner.run_turn(&mut session, None).unwrap();
        records.extend(report.requests);
        runner.finish_turn(&mut session).unwrap();
        for recorded in runner.events().drain() {
            if let Some(Event::IngestCap(cap)) = recorded.event() {
                caps.push(cap);
            }
            kinds.push(recorded.kind);
        }
    }

    assert_eq!(
        records.len(),
        200,
        "every model call answered at the first attempt or after recovery"
    );
    for record in &records {
        assert!(
            record.prompt_tokens <= WINDOW,
            "turn {} attempt {}: {} tokens in a {WINDOW} window",
            record.turn,
            record.attempt,
            record.prompt_tokens
        );
        assert_paired(record);
    }
    // The history outgrew the window many times over: compaction ran, and was observed.
    assert!(kinds.iter().any(|k| k == "compaction_start"));
    assert!(kinds.iter().any(|k| k == "compaction_end"));
    // The 2 MB result was capped on its way in, its original kept in a blob, and the event
    // names the call and the tool whose output it capped.
    assert!(kinds.iter().any(|k| k == "ingest_cap"), "{kinds:?}");
    assert_eq!(caps.len(), 1, "{caps:?}");
    assert_eq!(caps[0].tool_name.as_deref(), Some("read"));
    assert_eq!(caps[0].tool_call_id.as_deref(), Some("call_50"));
    assert_eq!(caps[0].original_chars, 17 * 120_000);
    assert!(
        caps[0]
            .blob
            .as_ref()
            .is_some_and(|b| b.starts_with("sha256:"))
    );
    assert_eq!(
        sim.requests_seen() as usize,
        records.len() + sim.log().overflows as usize
    );
}
