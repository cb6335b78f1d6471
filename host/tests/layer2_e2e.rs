//! Layer 2 through the engine: a huge tool result is capped at ingest with its original kept in
//! the blob store, and a session's tool results are truncated by branch-and-reappend.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use rampart_engine_api::AgentMessage;
use rampart_host::blobs::BlobStore;
use rampart_host::config::Config;
use rampart_host::engine::services::EventSink;
use rampart_host::engine::slot::EngineSlot;
use rampart_host::persist::{ingest_and_append, truncate_tool_results_in_session};
use rampart_message::{Content, ContentBlock};
use rampart_sessions::entry::SessionHeader;
use rampart_sessions::{LoadOptions, Session, SessionOptions, load_file};

fn assistant_call(id: &str) -> AgentMessage {
    serde_json::from_value(serde_json::json!({
        "role": "assistant",
        "content": [{"type": "toolCall", "id": id, "name": "exec", "arguments": {"command": "cat big.log"}}],
        "api": "openai-completions", "provider": "sim", "model": "sim-1",
        "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
        "stopReason": "toolUse", "timestamp": 1
    }))
    .unwrap()
}

fn text_of(message: &AgentMessage) -> String {
    let AgentMessage::ToolResult(m) = message else {
        panic!("not a tool result: {message:?}")
    };
    match &m.content {
        Content::Text(t) => t.clone(),
        Content::Blocks(b) => b
            .iter()
            .filter_map(|b| {
                if let ContentBlock::Text(t) = b {
                    Some(t.text.clone())
                } else {
                    None
                }
            })
            .collect(),
    }
}

/// A sessions directory with a blob store, the default slot (legacy) wired to it, and a new
/// session file.
struct Setup {
    dir: tempfile::TempDir,
    blobs: BlobStore,
    slot: EngineSlot,
    path: std::path::PathBuf,
    session: Session,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let blobs = BlobStore::in_sessions_dir(dir.path());
    let slot = EngineSlot::resolve_with(
        &Config::default(),
        &EventSink::tracing_only(),
        Some(blobs.clone()),
    )
    .unwrap();
    let path = dir.path().join("s.jsonl");
    let session =
        Session::create(&path, SessionHeader::new("/tmp"), SessionOptions::default()).unwrap();
    Setup {
        dir,
        blobs,
        slot,
        path,
        session,
    }
}

#[test]
fn a_5mb_tool_result_is_capped_and_its_original_kept_byte_for_byte() {
    let Setup {
        dir: _dir,
        blobs,
        slot,
        path,
        mut session,
    } = setup();
    session
        .append_message(AgentMessage::user_text("show me the log", 0))
        .unwrap();
    session.append_message(assistant_call("call_1")).unwrap();

    // 5 MB of log lines ending in an error: the tail matters.
    let mut original = String::new();
    let mut i = 0;
    while original.len() < 5 * 1024 * 1024 {
        original.push_str(&format!(
            "2026-03-01T09:00:{:02}Z worker {i} processed batch ok\n",
            i % 60
        ));
        i += 1;
    }
    original.push_str("FATAL: disk quota exceeded while writing /var/data/out.bin (exit code 3)\n");
    let result = AgentMessage::tool_result("call_1", "exec", original.clone(), true, 2);
    let persisted = ingest_and_append(&slot, &mut session, Arc::new(result), None).unwrap();
    assert!(persisted.replaced);
    session.sync().unwrap();

    let loaded = load_file(&path, &LoadOptions::default()).unwrap();
    let stored = loaded
        .tree
        .get(&persisted.entry_id)
        .unwrap()
        .body
        .message()
        .unwrap()
        .clone();
    let text = text_of(&stored);
    assert!(text.len() < 60_000, "capped to {} chars", text.len());
    assert!(
        text.contains("more characters truncated"),
        "no notice in the capped result"
    );
    assert!(
        text.contains("FATAL: disk quota exceeded"),
        "the important tail was kept"
    );
    let reference = text
        .split_whitespace()
        .find(|w| w.starts_with("sha256:"))
        .map(|w| {
            w.trim_end_matches(|c: char| !c.is_ascii_hexdigit())
                .to_string()
        })
        .expect("the notice names the blob");
    assert_eq!(
        blobs.get(&reference).unwrap(),
        original.as_bytes(),
        "blob differs from the original"
    );
    // The call and its (capped) result are still paired.
    let AgentMessage::ToolResult(r) = &stored else {
        unreachable!()
    };
    assert_eq!(r.tool_call_id, "call_1");
    // And the result names its original in a field of its own, for engines to read back.
    assert_eq!(
        r.extra.get(rampart_message::ORIGINAL_BLOB_KEY),
        Some(&serde_json::Value::String(reference.clone()))
    );
}

#[test]
fn small_results_and_other_messages_pass_untouched() {
    let Setup {
        dir: _dir,
        blobs,
        slot,
        mut session,
        ..
    } = setup();
    let small = Arc::new(AgentMessage::tool_result("c", "read", "tiny", false, 0));
    let p = ingest_and_append(&slot, &mut session, small.clone(), None).unwrap();
    assert!(!p.replaced);
    assert!(!blobs.place().exists(), "no blob for a result that fits");
    let stored = session
        .tree()
        .get(&p.entry_id)
        .unwrap()
        .body
        .message()
        .unwrap()
        .clone();
    let AgentMessage::ToolResult(r) = &stored else {
        unreachable!()
    };
    assert!(r.extra.get(rampart_message::ORIGINAL_BLOB_KEY).is_none());
}

#[test]
fn session_tool_results_are_truncated_on_a_new_branch_and_the_originals_stay() {
    let Setup {
        dir: _dir,
        path,
        mut session,
        ..
    } = setup();
    session
        .append_message(AgentMessage::user_text("go", 0))
        .unwrap();
    let body = "alpha beta gamma delta epsilon ".repeat(600);
    for n in 0..3 {
        let id = format!("call_{n}");
        session.append_message(assistant_call(&id)).unwrap();
        session
            .append_message(AgentMessage::tool_result(
                &id,
                "exec",
                body.clone(),
                false,
                3,
            ))
            .unwrap();
    }
    let before = session.tree().len();
    let result = truncate_tool_results_in_session(&mut session, 128_000, 40_000).unwrap();
    assert!(result.changed, "{result:?}");
    assert!(result.rewritten_entries > 0 && result.bytes_freed > 0);
    // The file only grew: every original entry is still there.
    assert!(session.tree().len() > before);
    let loaded = load_file(&path, &LoadOptions::default()).unwrap();
    let context = rampart_sessions::build_session_context(
        &loaded.tree,
        rampart_sessions::LeafSelector::Current,
    );
    let total: usize = context
        .messages
        .iter()
        .filter(|m| matches!(***m, AgentMessage::ToolResult(_)))
        .map(|m| text_of(m).len())
        .sum();
    assert!(
        total < 3 * body.len(),
        "the active branch is smaller: {total}"
    );
    let originals = loaded
        .tree
        .entries()
        .iter()
        .filter_map(|e| e.body.message())
        .filter(|m| matches!(m, AgentMessage::ToolResult(_)) && text_of(m) == body)
        .count();
    assert_eq!(
        originals, 3,
        "the originals are kept on the abandoned branch"
    );
    // Nothing left to do the second time.
    let again = truncate_tool_results_in_session(&mut session, 128_000, 40_000).unwrap();
    assert!(!again.changed, "{again:?}");
}

#[test]
fn pending_calls_get_synthetic_results_at_persistence_except_for_errored_turns() {
    use rampart_host::persist::SessionWriter;
    let Setup {
        dir: _dir,
        blobs,
        slot,
        path,
        mut session,
    } = setup();
    let mut writer = SessionWriter::new(128_000, 40_000, Some(blobs));
    writer
        .append(
            &slot,
            &mut session,
            Arc::new(assistant_call("call_1")),
            None,
        )
        .unwrap();
    let failed: AgentMessage = serde_json::from_value(serde_json::json!({
        "role": "assistant", "content": [{"type": "text", "text": "provider failed"}],
        "api": "x", "provider": "sim", "model": "sim-1",
        "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
        "stopReason": "error", "errorMessage": "boom", "timestamp": 2
    }))
    .unwrap();
    writer
        .append(&slot, &mut session, Arc::new(failed), None)
        .unwrap();
    writer.finish_turn(&mut session).unwrap();
    let loaded = load_file(&path, &LoadOptions::default()).unwrap();
    let roles: Vec<&str> = loaded
        .tree
        .entries()
        .iter()
        .filter_map(|e| e.body.message())
        .map(|m| m.role())
        .collect();
    assert_eq!(roles, ["assistant", "toolResult", "assistant"]);
    let synthetic = loaded.tree.entries()[1].body.message().unwrap();
    let AgentMessage::ToolResult(r) = synthetic else {
        unreachable!()
    };
    assert_eq!(r.tool_call_id, "call_1");
    assert!(r.is_error);
    assert!(text_of(synthetic).contains("missing tool result"));
}

/// A proxied client's first request carries its whole conversation: written in one append, it
/// is stored exactly as one append per message stores it, with the same synthetic results for
/// a call the conversation never answered and the same cap on an oversized result.
#[test]
fn a_batch_of_messages_is_stored_as_one_by_one_appends_store_it() {
    use rampart_host::persist::SessionWriter;
    let big = "x".repeat(200_000);
    let conversation = || {
        vec![
            Arc::new(AgentMessage::user_text("read it", 1)),
            Arc::new(assistant_call("call_1")),
            Arc::new(AgentMessage::tool_result(
                "call_1",
                "read",
                big.clone(),
                false,
                2,
            )),
            Arc::new(assistant_call("call_2")),
            Arc::new(AgentMessage::user_text("never mind", 3)),
        ]
    };
    let stored = |batch: bool| {
        let Setup {
            dir: _dir,
            blobs,
            slot,
            path,
            mut session,
        } = setup();
        let mut writer = SessionWriter::new(128_000, 40_000, Some(blobs));
        if batch {
            let ids = writer
                .append_many(&slot, &mut session, conversation(), None)
                .unwrap();
            assert_eq!(ids.len(), 6, "five messages and one synthetic result");
        } else {
            for m in conversation() {
                writer.append(&slot, &mut session, m, None).unwrap();
            }
        }
        let caps = writer.take_caps().len();
        let loaded = load_file(&path, &LoadOptions::default()).unwrap();
        let messages: Vec<(String, String)> = loaded
            .tree
            .entries()
            .iter()
            .filter_map(|e| e.body.message())
            .map(|m| {
                let text = match m {
                    AgentMessage::ToolResult(_) => text_of(m),
                    other => serde_json::to_string(other).unwrap(),
                };
                (m.role().to_owned(), text)
            })
            .collect();
        (messages, caps)
    };
    let (one_by_one, caps) = stored(false);
    assert!(
        one_by_one
            .iter()
            .any(|(role, t)| role == "toolResult" && t.len() < 100_000),
        "the oversized result was capped"
    );
    assert!(
        one_by_one
            .iter()
            .any(|(_, t)| t.contains("missing tool result")),
        "{one_by_one:?}"
    );
    assert_eq!(stored(true), (one_by_one, caps));
}

/// Messages another holder keeps (serve's memo of the request they came in) are stored as
/// those very allocations when nothing changes them: the session and the memo hold one copy of
/// the conversation. A capped result is a new message, and the holder's original is untouched.
#[test]
fn messages_stored_unchanged_are_the_allocations_given() {
    use rampart_host::persist::SessionWriter;
    let Setup {
        dir: _dir,
        blobs,
        slot,
        path: _,
        mut session,
    } = setup();
    let held = vec![
        Arc::new(AgentMessage::user_text("read it", 1)),
        Arc::new(assistant_call("call_1")),
        Arc::new(AgentMessage::tool_result(
            "call_1",
            "read",
            "x".repeat(200_000),
            false,
            2,
        )),
        Arc::new(AgentMessage::user_text("thanks", 3)),
    ];
    let mut writer = SessionWriter::new(128_000, 40_000, Some(blobs));
    writer
        .append_many(&slot, &mut session, held.clone(), None)
        .unwrap();
    let stored: Vec<_> = session
        .tree()
        .entries()
        .iter()
        .filter_map(|e| e.body.shared_message().cloned())
        .collect();
    assert_eq!(stored.len(), 4);
    let same: Vec<bool> = stored
        .iter()
        .zip(&held)
        .map(|(s, h)| Arc::ptr_eq(s, h))
        .collect();
    assert_eq!(
        same,
        [true, true, false, true],
        "only the capped result is new"
    );
    assert_eq!(
        text_of(&held[2]).len(),
        200_000,
        "the holder's original is untouched"
    );
}
