use std::io::Write;

use rampart_message::AgentMessage;
use serde_json::json;

use super::*;
use crate::context::build_session_context;
use crate::load::load_file;

/// A session file of `lines` (entry JSON objects) after a v3 header.
fn session_file(dir: &tempfile::TempDir, lines: &[serde_json::Value]) -> PathBuf {
    let path = dir.path().join("s.jsonl");
    let mut file = File::create(&path).unwrap();
    writeln!(
        file,
        "{}",
        json!({"type": "session", "version": 3, "id": "s1", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"})
    )
    .unwrap();
    for line in lines {
        writeln!(file, "{line}").unwrap();
    }
    path
}

fn message(id: &str, parent: Option<&str>, role: &str, text: &str) -> serde_json::Value {
    let message = match role {
        "assistant" => json!({"role": "assistant", "content": [{"type": "text", "text": text}],
            "api": "openai-completions", "provider": "prov", "model": format!("model-{id}"),
            "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
                "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
            "stopReason": "stop", "timestamp": 2}),
        _ => json!({"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1}),
    };
    json!({"type": "message", "id": id, "parentId": parent, "timestamp": "2026-01-01T00:00:01.000Z", "message": message})
}

fn entry(id: &str, parent: Option<&str>, body: serde_json::Value) -> serde_json::Value {
    let mut value = json!({"id": id, "parentId": parent, "timestamp": "2026-01-01T00:00:02.000Z"});
    for (k, v) in body.as_object().unwrap() {
        value[k] = v.clone();
    }
    value
}

/// What `build_session_context` over a full load gives, and what the reader streams, agree for
/// `leaf`: messages (by value), leaf, thinking level, model, compaction.
fn assert_same_as_a_load(path: &Path, leaf: LeafSelector<'_>) -> usize {
    // No sidecars: their names carry the time, which two reads need not share.
    let options = LoadOptions {
        record_corrupt_lines: false,
        ..LoadOptions::default()
    };
    let loaded = load_file(path, &options).unwrap();
    let context = build_session_context(&loaded.tree, leaf);
    let reader = BranchReader::open(path, &options)
        .unwrap()
        .expect("a v3 file streams");
    assert_eq!(reader.report(), &loaded.report);
    assert_eq!(reader.len(), loaded.tree.len());
    let branch = reader.branch(leaf).unwrap();
    assert_eq!(branch.leaf_id(), context.leaf_id.as_deref());
    assert_eq!(branch.thinking_level(), context.thinking_level);
    assert_eq!(branch.model(), context.model.as_ref());
    assert_eq!(branch.compaction_id(), context.compaction_id.as_deref());
    assert_eq!(branch.len(), context.messages.len());
    let streamed: Vec<AgentMessage> = branch.messages().map(|m| (*m.unwrap()).clone()).collect();
    let loaded: Vec<AgentMessage> = context.messages.iter().map(|m| (**m).clone()).collect();
    assert_eq!(streamed, loaded);
    streamed.len()
}

#[test]
fn a_compacted_branch_streams_the_messages_a_load_builds() {
    let dir = tempfile::tempdir().unwrap();
    let path = session_file(
        &dir,
        &[
            entry(
                "t1",
                None,
                json!({"type": "thinking_level_change", "thinkingLevel": "high"}),
            ),
            message("u1", Some("t1"), "user", "first"),
            message("a1", Some("u1"), "assistant", "one"),
            message("u2", Some("a1"), "user", "second"),
            message("a2", Some("u2"), "assistant", "two"),
            entry(
                "c1",
                Some("a2"),
                json!({"type": "compaction", "summary": "so far", "firstKeptEntryId": "u2", "tokensBefore": 99}),
            ),
            entry(
                "m1",
                Some("c1"),
                json!({"type": "custom_message", "customType": "note", "content": "hello", "display": true}),
            ),
            entry(
                "b0",
                Some("m1"),
                json!({"type": "branch_summary", "fromId": "a1", "summary": ""}),
            ),
            entry(
                "b1",
                Some("b0"),
                json!({"type": "branch_summary", "fromId": "a1", "summary": "elsewhere"}),
            ),
            entry(
                "x1",
                Some("b1"),
                json!({"type": "model_change", "provider": "p2", "modelId": "m2"}),
            ),
            message("u3", Some("x1"), "user", "third"),
            // A second branch from `a1`, left by the leaf.
            message("u9", Some("a1"), "user", "other way"),
            message("a3", Some("u3"), "assistant", "three"),
        ],
    );
    // Summary, u2, a2 (kept), the custom message, the branch summary, u3, a3.
    assert_eq!(assert_same_as_a_load(&path, LeafSelector::Current), 7);
    assert_eq!(assert_same_as_a_load(&path, LeafSelector::Id("u9")), 3);
    assert_eq!(assert_same_as_a_load(&path, LeafSelector::Id("x1")), 5);
    assert_eq!(assert_same_as_a_load(&path, LeafSelector::Id("nothing")), 7);
    assert_eq!(assert_same_as_a_load(&path, LeafSelector::Null), 0);
}

#[test]
fn damaged_lines_duplicates_and_late_parents_are_linked_as_a_load_links_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = vec![
        message("u1", None, "user", "first"),
        message("a1", Some("u1"), "assistant", "one"),
        // `u2` comes after its child: the link is made once every line is in.
        message("a2", Some("u2"), "assistant", "two"),
        message("u2", Some("a1"), "user", "second"),
        // A duplicated id: lookups find the later entry.
        message("a1", Some("u2"), "assistant", "one again"),
        message("u3", Some("a1"), "user", "third"),
    ];
    // A lost line between `u3` and its child: the child is linked around it.
    lines.push(json!("not an entry"));
    let path = session_file(&dir, &lines);
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(
        "{\"type\":\"message\",\"id\":\"l1\",\"parentId\":\"u3\",\"timestamp\":\"x\",broken\n",
    );
    text.push_str(&format!(
        "{}\n",
        message("u4", Some("l1"), "user", "after the hole")
    ));
    std::fs::write(&path, text).unwrap();
    let reader = BranchReader::open(&path, &LoadOptions::default())
        .unwrap()
        .unwrap();
    assert_eq!(reader.report().duplicate_ids.len(), 1);
    assert_eq!(reader.report().corrupt_lines.len(), 2);
    assert_eq!(reader.report().bridged.len(), 1);
    // u1, a1, u2, the later a1, u3, and u4 linked around the lost line.
    assert_eq!(assert_same_as_a_load(&path, LeafSelector::Current), 6);
    assert_eq!(assert_same_as_a_load(&path, LeafSelector::Id("a2")), 4);
}

#[test]
fn a_v1_file_does_not_stream() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.jsonl");
    std::fs::write(
        &path,
        "{\"type\":\"session\",\"id\":\"s\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/\"}\n",
    )
    .unwrap();
    assert!(
        BranchReader::open(&path, &LoadOptions::default())
            .unwrap()
            .is_none()
    );
}

#[test]
fn a_line_rewritten_after_the_first_read_is_an_error_not_another_message() {
    let dir = tempfile::tempdir().unwrap();
    let path = session_file(
        &dir,
        &[
            message("u1", None, "user", "first"),
            message("a1", Some("u1"), "assistant", "one"),
        ],
    );
    let reader = BranchReader::open(&path, &LoadOptions::default())
        .unwrap()
        .unwrap();
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("\"u1\"", "\"v1\"");
    std::fs::write(&path, text).unwrap();
    let branch = reader.branch(LeafSelector::Current);
    let error = match branch {
        Err(e) => e,
        Ok(branch) => branch.messages().find_map(Result::err).expect("an error"),
    };
    assert!(error.to_string().contains("no longer holds"), "{error}");
}

/// The structure a reader keeps is a few dozen bytes an entry, whatever the entries hold: the
/// reason `sessions show` of a million tiny entries no longer needs gigabytes.
#[test]
fn the_structure_kept_is_small_per_entry() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = Vec::new();
    let mut parent: Option<String> = None;
    for i in 0..20_000 {
        let id = format!("{i:08x}");
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        lines.push(message(&id, parent.as_deref(), role, "a few words"));
        parent = Some(id);
    }
    let path = session_file(&dir, &lines);
    let reader = BranchReader::open(&path, &LoadOptions::default())
        .unwrap()
        .unwrap();
    let per_entry = reader.links.heap_bytes() / reader.len();
    // About 100 (hash tables grow by doubling); a tree of stripped entries takes some 600, a
    // loaded tree some 2,500 for entries this small.
    assert!(per_entry <= 200, "{per_entry} bytes per entry");
    let branch = reader.branch(LeafSelector::Current).unwrap();
    assert_eq!(branch.messages().count(), 20_000);
}
