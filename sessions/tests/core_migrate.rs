//! Migrations of synthetic v1 and v2 files: what is converted, what is kept, where the
//! original goes, and the edge cases the real pi v1 files do not have.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;

use rampart_message::AgentMessage;
use rampart_sessions::entry::EntryBody;
use rampart_sessions::{LoadOptions, Session, SessionOptions, load_file};
use serde_json::{Value, json};

fn write_lines(path: &std::path::Path, lines: &[Value]) {
    let text: String = lines.iter().map(|v| format!("{v}\n")).collect();
    fs::write(path, text).unwrap();
}

#[test]
fn v2_hook_messages_become_custom_and_the_original_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v2.jsonl");
    let original = [
        json!({"type":"session","version":2,"id":"s","timestamp":"2025-06-01T00:00:00.000Z","cwd":"/"}),
        json!({"type":"message","id":"aaaaaaaa","parentId":null,"timestamp":"2025-06-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}),
        json!({"type":"message","id":"bbbbbbbb","parentId":"aaaaaaaa","timestamp":"2025-06-01T00:00:02.000Z","message":{"role":"hookMessage","customType":"reminder","content":"remember","display":true,"timestamp":2}}),
    ];
    write_lines(&path, &original);
    let before = fs::read(&path).unwrap();

    // A plain load migrates in memory only.
    let loaded = load_file(&path, &LoadOptions::default()).unwrap();
    assert_eq!(loaded.header.version, Some(3));
    assert_eq!(fs::read(&path).unwrap(), before);

    let session = Session::open(&path, SessionOptions::default()).unwrap();
    let migration = session.report().migration.clone().unwrap();
    assert_eq!(migration.from_version, 2);
    assert_eq!(migration.hook_messages_renamed, 1);
    assert_eq!(migration.entries_given_ids, 0);
    assert_eq!(
        migration.original_kept_at.unwrap(),
        dir.path().join("v2.jsonl.v2.bak")
    );
    assert_eq!(
        fs::read(dir.path().join("v2.jsonl.v2.bak")).unwrap(),
        before
    );
    assert!(matches!(
        session.entries()[1].body.message(),
        Some(AgentMessage::Custom(_))
    ));
    let roles: Vec<String> = session
        .context()
        .messages
        .iter()
        .map(|m| m.role().to_owned())
        .collect();
    assert_eq!(roles, ["user", "custom"]);
    drop(session);

    let migrated: Vec<Value> = fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(migrated[0]["version"], 3);
    // Ids and links are kept as they were; only the role changed.
    assert_eq!(migrated[2]["id"], "bbbbbbbb");
    assert_eq!(migrated[2]["message"]["role"], "custom");
    let mut expected = original[2].clone();
    expected["message"]["role"] = json!("custom");
    assert_eq!(migrated[2], expected);
}

#[test]
fn v1_edge_cases_corrupt_target_and_taken_backup_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.jsonl");
    let user = |text: &str| json!({"type":"message","timestamp":"2025-01-01T00:00:00.000Z","message":{"role":"user","content":text,"timestamp":1}});
    let mut text = String::new();
    text.push_str(&format!(
        "{}\n",
        json!({"type":"session","id":"s","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/","provider":"anthropic"})
    ));
    text.push_str(&format!("{}\n", user("one")));
    text.push_str("{this line is damaged\n"); // index 2
    text.push_str(&format!("{}\n", user("three")));
    text.push_str(&format!(
        "{}\n",
        json!({"type":"compaction","timestamp":"2025-01-01T00:00:00.000Z","summary":"s","firstKeptEntryIndex":2,"tokensBefore":7})
    ));
    text.push_str(&format!("{}\n", user("after")));
    fs::write(&path, &text).unwrap();
    fs::write(dir.path().join("v1.jsonl.v1.bak"), b"someone else's file").unwrap();

    let session = Session::open(&path, SessionOptions::default()).unwrap();
    let migration = session.report().migration.clone().unwrap();
    assert_eq!(migration.first_kept_converted, 1);
    assert_eq!(migration.notes.len(), 1, "{:?}", migration.notes);
    assert!(
        migration.notes[0].contains("line 5"),
        "{:?}",
        migration.notes
    );
    // The damaged line is reported and kept in the original.
    assert_eq!(session.report().corrupt_lines.len(), 1);
    assert_eq!(session.report().corrupt_lines[0].line, 3);
    // The taken backup name is left alone.
    let kept = migration.original_kept_at.unwrap();
    assert_eq!(kept, dir.path().join("v1.jsonl.v1.bak.1"));
    assert_eq!(
        fs::read(dir.path().join("v1.jsonl.v1.bak")).unwrap(),
        b"someone else's file"
    );
    assert_eq!(fs::read_to_string(&kept).unwrap(), text);

    // Index 2 was the damaged line: the cut moves to the next usable entry ("three").
    let entries = session.entries();
    assert_eq!(entries.len(), 4);
    let EntryBody::Compaction(c) = &entries[2].body else {
        panic!("{:?}", entries[2].body)
    };
    assert_eq!(c.first_kept_entry_id, entries[1].id);
    let ctx = session.context();
    assert_eq!(ctx.messages.len(), 3, "summary, three, after");
}
