//! A session file through its life: create, append every entry type, branch, reset, reopen,
//! unknown entries surviving, rewrites as new branches, fsync policies.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;

use rampart_message::{AgentMessage, Content};
use rampart_sessions::entry::EntryBody;
use rampart_sessions::rewrite::{REASON_EMPTY_SESSION, REASON_NO_MATCH, REASON_NO_REPLACEMENTS};
use rampart_sessions::{
    FsyncPolicy, LeafSelector, LoadOptions, Session, SessionHeader, SessionOptions, load_file,
};
use serde_json::{Value, json};

fn options(fsync: FsyncPolicy) -> SessionOptions {
    SessionOptions {
        fsync,
        ..SessionOptions::default()
    }
}

fn lines(path: &std::path::Path) -> Vec<Value> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn text(message: &AgentMessage) -> String {
    serde_json::to_value(message).unwrap()["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn create_append_every_type_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let header = SessionHeader::new("/work/project");
    let session_id = header.id.clone();
    let mut s = Session::create(&path, header, options(FsyncPolicy::Always)).unwrap();
    assert!(Session::create(&path, SessionHeader::new("/"), SessionOptions::default()).is_err());

    let model = s
        .append_model_change("anthropic", "claude-sonnet-4-5")
        .unwrap();
    s.append_thinking_level_change("high").unwrap();
    let u1 = s
        .append_message(AgentMessage::user_text("hello", 1))
        .unwrap();
    s.append_message(AgentMessage::assistant_text(
        "hi",
        "anthropic-messages",
        "anthropic",
        "claude-sonnet-4-5",
        2,
    ))
    .unwrap();
    s.append_custom("model-snapshot", Some(json!({"k": 1})))
        .unwrap();
    s.append_custom_message("note", Content::Text("injected".into()), true, None)
        .unwrap();
    s.append_label(&u1, Some("start".into())).unwrap();
    assert!(s.append_label("nope", None).is_err());
    s.append_session_info(Some("demo".into())).unwrap();
    let compaction = s
        .append_compaction(
            "summary so far",
            u1.clone(),
            1234,
            Some(json!({"files": []})),
            None,
        )
        .unwrap();
    let last = s
        .append_message(AgentMessage::user_text("after", 3))
        .unwrap();
    s.sync().unwrap();

    let ctx = s.context();
    assert_eq!(ctx.thinking_level, "high");
    assert_eq!(ctx.model.as_ref().unwrap().model_id, "claude-sonnet-4-5");
    let roles: Vec<&str> = ctx.messages.iter().map(|m| m.role()).collect();
    assert_eq!(
        roles,
        ["compactionSummary", "user", "assistant", "custom", "user"]
    );
    assert_eq!(ctx.compaction_id.as_deref(), Some(compaction.as_str()));
    drop(s);

    // On disk: header first, then every entry as one line, linked in order.
    let on_disk = lines(&path);
    assert_eq!(on_disk[0]["type"], "session");
    assert_eq!(on_disk[0]["version"], 3);
    assert_eq!(on_disk[0]["id"], session_id.as_str());
    assert_eq!(on_disk.len(), 11);
    assert_eq!(on_disk[1]["id"], model.as_str());
    assert_eq!(on_disk[1]["parentId"], Value::Null);
    for pair in on_disk[1..].windows(2) {
        assert_eq!(pair[1]["parentId"], pair[0]["id"]);
        assert_eq!(pair[1]["id"].as_str().unwrap().len(), 8);
    }

    let reopened = Session::open(&path, SessionOptions::default()).unwrap();
    assert!(reopened.report().is_clean());
    assert_eq!(reopened.leaf_id(), Some(last.as_str()));
    assert_eq!(reopened.entries().len(), 10);
}

#[test]
fn branch_and_reset_leaf() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.jsonl");
    let mut s =
        Session::create(&path, SessionHeader::new("/"), options(FsyncPolicy::Never)).unwrap();
    let a = s.append_message(AgentMessage::user_text("a", 1)).unwrap();
    let b = s.append_message(AgentMessage::user_text("b", 2)).unwrap();
    s.branch(&a).unwrap();
    let c = s.append_message(AgentMessage::user_text("c", 3)).unwrap();
    assert_eq!(
        s.tree().get(&c).unwrap().parent_id.as_deref(),
        Some(a.as_str())
    );
    let texts: Vec<String> = s.context().messages.iter().map(|m| text(m)).collect();
    assert_eq!(texts, ["a", "c"]);
    assert!(s.branch("zzzzzzzz").is_err());

    s.reset_leaf();
    assert!(s.context().messages.is_empty());
    let root = s
        .append_message(AgentMessage::user_text("new root", 4))
        .unwrap();
    assert_eq!(s.tree().get(&root).unwrap().parent_id, None);

    let summary = s
        .branch_with_summary(Some(&b), "tried c instead", None, None)
        .unwrap();
    let entry = s.tree().get(&summary).unwrap();
    assert_eq!(entry.parent_id.as_deref(), Some(b.as_str()));
    let roles: Vec<String> = s
        .context()
        .messages
        .iter()
        .map(|m| m.role().to_owned())
        .collect();
    assert_eq!(roles, ["user", "user", "branchSummary"]);
    drop(s);

    // After a reload the leaf is the last entry in the file, as in pi.
    let loaded = load_file(&path, &LoadOptions::default()).unwrap();
    assert_eq!(loaded.tree.leaf_id(), Some(summary.as_str()));
    assert_eq!(loaded.tree.children(&a).len(), 2);
}

#[test]
fn unknown_entries_and_fields_survive_appends_and_saves() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("u.jsonl");
    let original = [
        json!({"type":"session","version":3,"id":"x","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/","future":{"a":1}}),
        json!({"type":"hologram","id":"aaaaaaaa","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","payload":[1,2,{"deep":null}]}),
        json!({"type":"message","id":"bbbbbbbb","parentId":"aaaaaaaa","timestamp":"2026-01-01T00:00:00.000Z","newField":true,"message":{"role":"user","content":"hi","timestamp":1,"mood":"good"}}),
        json!({"type":"compaction","id":"cccccccc","parentId":"bbbbbbbb","timestamp":"2026-01-01T00:00:00.000Z","summary":"s","firstKeptEntryId":"bbbbbbbb","tokensBefore":5,"details":null,"extra":"kept"}),
        // A known type that does not fit the model: kept verbatim.
        json!({"type":"label","id":"dddddddd","parentId":"cccccccc","timestamp":"2026-01-01T00:00:00.000Z","targetId":7}),
    ];
    let text: String = original.iter().map(|v| format!("{v}\n")).collect();
    fs::write(&path, &text).unwrap();

    let mut s = Session::open(&path, SessionOptions::default()).unwrap();
    assert_eq!(s.report().kept_verbatim.len(), 1);
    assert_eq!(s.report().kept_verbatim[0].line, 5);
    assert!(matches!(s.entries()[0].body, EntryBody::Other(_)));
    assert!(matches!(s.entries()[3].body, EntryBody::Other(_)));
    s.append_message(AgentMessage::user_text("new", 2)).unwrap();
    let copy = dir.path().join("copy.jsonl");
    s.save_as(&copy).unwrap();
    assert!(s.save_as(&copy).is_err(), "never overwrites");
    drop(s);

    for file in [&path, &copy] {
        let back = lines(file);
        assert_eq!(&back[..original.len()], &original[..], "{}", file.display());
        assert_eq!(back.len(), original.len() + 1);
    }
    // The original bytes are still the file's prefix.
    assert!(fs::read_to_string(&path).unwrap().starts_with(&text));
}

#[test]
fn rewrite_appends_a_new_branch_and_keeps_the_originals() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.jsonl");
    let mut s = Session::create(
        &path,
        SessionHeader::new("/"),
        options(FsyncPolicy::PerTurn),
    )
    .unwrap();

    assert_eq!(
        s.rewrite(&[]).unwrap().reason.as_deref(),
        Some(REASON_NO_REPLACEMENTS)
    );
    assert_eq!(
        s.rewrite(&[("x".into(), AgentMessage::user_text("", 0))])
            .unwrap()
            .reason
            .as_deref(),
        Some(REASON_EMPTY_SESSION)
    );

    let u1 = s
        .append_message(AgentMessage::user_text("question", 1))
        .unwrap();
    let big = s
        .append_message(AgentMessage::tool_result(
            "call_1",
            "read",
            "x".repeat(50_000),
            false,
            2,
        ))
        .unwrap();
    let a1 = s
        .append_message(AgentMessage::assistant_text("answer", "api", "p", "m", 3))
        .unwrap();
    let label = s.append_label(&a1, Some("good answer".into())).unwrap();
    let compaction = s
        .append_compaction("sum", big.clone(), 99, None, None)
        .unwrap();
    let tail = s
        .append_message(AgentMessage::user_text("more", 4))
        .unwrap();
    let bytes_before = fs::read(&path).unwrap();
    let entries_before = s.entries().len();

    let unchanged = s
        .rewrite(&[(label.clone(), AgentMessage::user_text("", 0))])
        .unwrap();
    assert_eq!(unchanged.reason.as_deref(), Some(REASON_NO_MATCH));
    assert!(!unchanged.changed);
    assert_eq!(fs::read(&path).unwrap(), bytes_before, "nothing written");

    let capped = AgentMessage::tool_result("call_1", "read", "[truncated]", false, 2);
    let result = s.rewrite(&[(big.clone(), capped.clone())]).unwrap();
    assert!(result.changed);
    assert_eq!(result.rewritten_entries, 1);
    assert!(result.bytes_freed >= 49_000, "{}", result.bytes_freed);
    assert_eq!(result.reason, None);

    // Originals stay; the file only grew.
    let after = fs::read(&path).unwrap();
    assert_eq!(&after[..bytes_before.len()], &bytes_before[..]);
    assert_eq!(s.entries().len(), entries_before + 5);
    for id in [&u1, &big, &a1, &label, &compaction, &tail] {
        assert!(s.tree().get(id).is_some());
    }

    // The new branch hangs off u1, the leaf moved to its end, references were remapped.
    let branch = s.tree().active_branch();
    let ids: Vec<String> = branch.iter().map(|e| e.id.clone()).collect();
    assert_eq!(ids[0], u1);
    assert_eq!(branch.len(), 6);
    assert!(
        !ids[1..]
            .iter()
            .any(|id| [&big, &a1, &label, &compaction, &tail].contains(&id))
    );
    assert_eq!(s.leaf_id(), Some(ids[5].as_str()));
    assert_eq!(branch[1].body.message(), Some(&capped));
    let EntryBody::Label(l) = &branch[3].body else {
        panic!()
    };
    assert_eq!(l.target_id, ids[2]);
    let EntryBody::Compaction(c) = &branch[4].body else {
        panic!()
    };
    assert_eq!(c.first_kept_entry_id, ids[1]);
    let ctx = s.context();
    assert_eq!(ctx.messages.len(), 4);
    assert_eq!(&*ctx.messages[1], &capped);

    // The abandoned branch still builds its old context.
    let old = s.context_at(LeafSelector::Id(&tail));
    assert_eq!(text(&old.messages[1]).len(), 50_000);
    drop(s);

    // After a reload the leaf is the rewritten branch's end (the last entry in the file).
    let reloaded = load_file(&path, &LoadOptions::default()).unwrap();
    assert_eq!(reloaded.tree.leaf_id(), Some(ids[5].as_str()));
}

#[test]
fn a_second_handle_catches_up_before_appending() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("two.jsonl");
    let mut first =
        Session::create(&path, SessionHeader::new("/"), SessionOptions::default()).unwrap();
    let mut second = Session::open(&path, SessionOptions::default()).unwrap();
    let a = first
        .append_message(AgentMessage::user_text("from first", 1))
        .unwrap();
    let b = second
        .append_message(AgentMessage::user_text("from second", 2))
        .unwrap();
    assert_eq!(
        second.tree().get(&b).unwrap().parent_id.as_deref(),
        Some(a.as_str())
    );
    let refresh = first.refresh().unwrap();
    assert_eq!(refresh.new_entries, 1);
    assert!(refresh.leaf_followed);
    assert_eq!(first.leaf_id(), Some(b.as_str()));

    // A handle that branched on purpose keeps its branch.
    first.branch(&a).unwrap();
    second
        .append_message(AgentMessage::user_text("second again", 3))
        .unwrap();
    let c = first
        .append_message(AgentMessage::user_text("fork", 4))
        .unwrap();
    assert_eq!(
        first.tree().get(&c).unwrap().parent_id.as_deref(),
        Some(a.as_str())
    );
    assert_eq!(first.entries().len(), 4);
}

/// `hold` keeps the write lock across appends: another handle on the file cannot append until
/// it is released, and then sees everything the holder wrote before its own entry.
#[test]
fn hold_keeps_the_lock_for_a_whole_turn() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let short = SessionOptions {
        lock_timeout: std::time::Duration::from_millis(100),
        ..SessionOptions::default()
    };
    let mut first = Session::create(&path, SessionHeader::new("/w"), short.clone()).unwrap();
    let mut second = Session::open(&path, short).unwrap();

    first.hold(std::time::Duration::from_millis(100)).unwrap();
    assert!(first.is_held());
    first
        .append_message(AgentMessage::user_text("first prompt", 1))
        .unwrap();
    let blocked = second
        .append_message(AgentMessage::user_text("second prompt", 2))
        .unwrap_err();
    assert_eq!(
        blocked.kind(),
        rampart_sessions::ErrorKind::Locked,
        "{blocked}"
    );
    assert!(
        second.hold(std::time::Duration::from_millis(50)).is_err(),
        "a second holder waits, then fails"
    );
    first
        .append_message(AgentMessage::assistant_text(
            "first answer",
            "a",
            "p",
            "m",
            3,
        ))
        .unwrap();
    first.release();
    assert!(!first.is_held());

    let caught_up = second.hold(std::time::Duration::from_millis(100)).unwrap();
    assert_eq!(caught_up.new_entries, 2, "it read the whole first turn");
    second
        .append_message(AgentMessage::user_text("second prompt", 4))
        .unwrap();
    drop(second);
    let reopened = Session::open(&path, SessionOptions::default()).unwrap();
    let texts: Vec<String> = reopened
        .context()
        .messages
        .iter()
        .map(|m| text(m))
        .collect();
    assert_eq!(texts, ["first prompt", "first answer", "second prompt"]);
}

/// A request's conversation with an opaque message (an Anthropic `system` message kept whole)
/// and a tool result in the client's form is written to a pi session and reads back as the
/// same messages, the opaque item unchanged to the byte.
#[test]
fn a_request_with_an_opaque_message_reloads_unchanged() {
    use rampart_sessions::import::api_request::from_anthropic_messages;
    let agents = json!({"role": "system", "content": [
        {"type": "text", "text": "Agent types: general-purpose \u{1F600} \"quoted\"", "cache_control": {"type": "ephemeral"}}
    ], "extraField": [1.5, null, {"nested": true}]});
    let request = vec![
        json!({"role": "user", "content": "hello"}),
        agents.clone(),
        json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "a"}}
        ]}),
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "body"}
        ]}),
    ];
    let conversation = from_anthropic_messages(None, &request, "2026-01-01T00:00:00.000Z");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let mut s =
        Session::create(&path, SessionHeader::new("/"), options(FsyncPolicy::Never)).unwrap();
    for message in &conversation.messages {
        s.append_message(message.clone()).unwrap();
    }
    drop(s);
    let on_disk = lines(&path);
    assert_eq!(on_disk[2]["message"]["item"], agents, "{:?}", on_disk[2]);

    let reopened = Session::open(&path, SessionOptions::default()).unwrap();
    assert!(reopened.report().is_clean());
    let messages: Vec<AgentMessage> = reopened
        .tree()
        .active_branch()
        .into_iter()
        .filter_map(|e| e.body.message().cloned())
        .collect();
    assert_eq!(messages, conversation.messages);
    let kept = rampart_message::opaque::as_opaque(&messages[1]).unwrap();
    assert_eq!(
        serde_json::to_string(kept.item).unwrap(),
        serde_json::to_string(&agents).unwrap()
    );
}
