//! The real session files in `shared/data/sessions`: every v3 file loads cleanly, round-trips
//! to equal JSON entry by entry, and builds a context; the pi v1 files migrate with all their
//! messages and valid compaction cut points.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::{Path, PathBuf};

use rampart_message::AgentMessage;
use rampart_sessions::entry::EntryBody;
use rampart_sessions::{
    LeafSelector, LoadOptions, Session, SessionOptions, build_session_context, load_file,
    save_session,
};
use serde_json::Value;

fn data_dir(folder: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/data/sessions")
        .join(folder);
    assert!(
        dir.is_dir(),
        "the test data folder {} is missing: these tests need the shared session corpus \
         (shared/data/sessions next to the workspace); restore it rather than skipping the test",
        dir.display()
    );
    dir
}

fn jsonl_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .jsonl files in {}", dir.display());
    files
}

/// Read-only loads: the corpus directory is read-only and must stay untouched.
fn read_only() -> LoadOptions {
    LoadOptions {
        record_corrupt_lines: false,
        ..LoadOptions::default()
    }
}

fn json_lines(path: &Path) -> Vec<Value> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn v3_files_load_clean_round_trip_and_build_context() {
    let out = tempfile::tempdir().unwrap();
    let mut saw_five_compactions = false;
    let mut saw_branch_points = 0;
    for path in jsonl_files(&data_dir("openclaw-linux2010")) {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let loaded = load_file(&path, &read_only()).unwrap();
        assert!(
            loaded.report.is_clean(),
            "{name}: unexpected load report {:#?}",
            loaded.report
        );
        assert_eq!(loaded.report.format_version, 3, "{name}");

        let copy = out.path().join(&name);
        save_session(&copy, &loaded.header, &loaded.tree).unwrap();
        let original = json_lines(&path);
        let saved = json_lines(&copy);
        assert_eq!(original.len(), saved.len(), "{name}: line count");
        for (index, (a, b)) in original.iter().zip(&saved).enumerate() {
            assert_eq!(
                a,
                b,
                "{name}: line {} differs after a round trip",
                index + 1
            );
        }

        let ctx = build_session_context(&loaded.tree, LeafSelector::Current);
        assert!(!ctx.messages.is_empty(), "{name}: empty context");
        assert!(ctx.model.is_some(), "{name}: no model");
        let compactions = loaded
            .tree
            .entries()
            .iter()
            .filter(|e| matches!(e.body, EntryBody::Compaction(_)))
            .count();
        if compactions == 5 {
            saw_five_compactions = true;
            assert!(
                matches!(&*ctx.messages[0], AgentMessage::CompactionSummary(_)),
                "{name}: the last compaction is applied"
            );
            assert!(ctx.compaction_id.is_some());
        }
        let mut children = std::collections::HashMap::<&str, usize>::new();
        for entry in loaded.tree.entries() {
            if let Some(parent) = &entry.parent_id {
                *children.entry(parent).or_default() += 1;
            }
        }
        saw_branch_points += children.values().filter(|&&n| n > 1).count();
    }
    assert!(
        saw_five_compactions,
        "the file with 5 compactions was not seen"
    );
    assert!(
        saw_branch_points >= 12,
        "branch points seen: {saw_branch_points}"
    );
}

#[test]
fn v3_files_open_for_appending_and_keep_their_content() {
    let dir = tempfile::tempdir().unwrap();
    let source = jsonl_files(&data_dir("openclaw-linux2010"))
        .into_iter()
        .find(|p| p.to_string_lossy().contains("8d0416c9"))
        .unwrap();
    let path = dir.path().join("s.jsonl");
    fs::copy(&source, &path).unwrap();
    let before = fs::read(&path).unwrap();
    let mut session = Session::open(&path, SessionOptions::default()).unwrap();
    let context_len = session.context().messages.len();
    let id = session
        .append_message(AgentMessage::user_text("one more", 1))
        .unwrap();
    session.sync().unwrap();
    assert_eq!(session.context().messages.len(), context_len + 1);
    drop(session);
    let after = fs::read(&path).unwrap();
    assert_eq!(
        &after[..before.len()],
        &before[..],
        "existing bytes are never touched"
    );
    let reloaded = load_file(&path, &read_only()).unwrap();
    assert_eq!(reloaded.tree.leaf_id(), Some(id.as_str()));
}

fn message_values(path: &Path) -> Vec<Value> {
    json_lines(path)
        .into_iter()
        .filter(|v| v["type"] == "message")
        .map(|mut v| v["message"].take())
        .collect()
}

/// pi's v1 form of a session: the corpus holds pi's v1 fixtures, but a copy of the corpus may
/// have been migrated to v3 in place (a `version`, ids and parent ids, `firstKeptEntryId`). This
/// undoes exactly that, so the migration is tested on v1 input either way; a v1 file comes back
/// unchanged.
fn v1_form(mut lines: Vec<Value>) -> Vec<Value> {
    if lines[0].get("version").is_none() {
        return lines;
    }
    let position: std::collections::HashMap<String, usize> = lines
        .iter()
        .enumerate()
        .filter_map(|(i, l)| Some((l.get("id")?.as_str()?.to_string(), i)))
        .collect();
    lines[0].as_object_mut().unwrap().remove("version");
    for line in lines.iter_mut().skip(1) {
        let object = line.as_object_mut().unwrap();
        object.remove("id");
        object.remove("parentId");
        if let Some(Value::String(kept)) = object.remove("firstKeptEntryId") {
            object.insert("firstKeptEntryIndex".into(), position[&kept].into());
        }
    }
    lines
}

fn write_lines(path: &Path, lines: &[Value]) {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    fs::write(path, text).unwrap();
}

#[test]
fn pi_v1_files_migrate() {
    let dir = tempfile::tempdir().unwrap();
    for source in jsonl_files(&data_dir("pi-mono")) {
        let name = source.file_name().unwrap().to_string_lossy().into_owned();
        let path = dir.path().join(&name);
        write_lines(&path, &v1_form(json_lines(&source)));
        let original_bytes = fs::read(&path).unwrap();
        let original_lines = json_lines(&path);

        let session = Session::open(&path, SessionOptions::default()).unwrap();
        let migration = session.report().migration.clone().unwrap();
        assert_eq!(migration.from_version, 1, "{name}");
        assert_eq!(
            migration.entries_given_ids,
            original_lines.len() - 1,
            "{name}"
        );
        assert!(migration.notes.is_empty(), "{name}: {:?}", migration.notes);
        assert!(session.report().corrupt_lines.is_empty(), "{name}");
        assert!(
            session.report().kept_verbatim.is_empty(),
            "{name}: {:?}",
            session.report().kept_verbatim
        );

        // The original bytes are kept beside the new file, untouched.
        let kept = migration.original_kept_at.clone().unwrap();
        assert_eq!(kept, dir.path().join(format!("{name}.v1.bak")));
        assert_eq!(fs::read(&kept).unwrap(), original_bytes, "{name}");

        // The new file is v3 and every message survived, in order, unchanged.
        let migrated = json_lines(&path);
        assert_eq!(migrated[0]["version"], 3);
        assert_eq!(migrated.len(), original_lines.len());
        assert_eq!(
            message_values(&path),
            message_values(&kept),
            "{name}: messages"
        );
        let header_before = original_lines[0].as_object().unwrap();
        for (key, value) in header_before {
            assert_eq!(&migrated[0][key], value, "{name}: header field {key}");
        }

        // Ids form a linear chain; compactions point at an earlier entry.
        let entries = session.entries();
        for (i, entry) in entries.iter().enumerate() {
            assert_eq!(entry.id.len(), 8);
            let expected = (i > 0).then(|| entries[i - 1].id.clone());
            assert_eq!(entry.parent_id, expected, "{name}: chain at {i}");
        }
        let mut compactions = 0;
        for (i, entry) in entries.iter().enumerate() {
            if let EntryBody::Compaction(c) = &entry.body {
                compactions += 1;
                let kept_at = entries
                    .iter()
                    .position(|e| e.id == c.first_kept_entry_id)
                    .unwrap_or_else(|| panic!("{name}: firstKeptEntryId names nothing"));
                assert!(
                    kept_at < i,
                    "{name}: the kept entry comes before the compaction"
                );
                // firstKeptEntryIndex counted the header as 0, so entry k-1 in our list.
                let index = original_lines[i + 1]["firstKeptEntryIndex"]
                    .as_u64()
                    .unwrap() as usize;
                assert_eq!(kept_at, index - 1, "{name}: conversion of index {index}");
                assert!(matches!(
                    entries[kept_at].body.message(),
                    Some(AgentMessage::User(_))
                ));
            }
        }
        assert_eq!(compactions, migration.first_kept_converted, "{name}");
        if name == "before-compaction.jsonl" {
            assert_eq!(compactions, 2);
            let ctx = session.context();
            assert!(matches!(
                &*ctx.messages[0],
                AgentMessage::CompactionSummary(_)
            ));
        }
        drop(session);

        // Opening again finds a v3 file: no second migration, no second backup.
        let again = Session::open(&path, SessionOptions::default()).unwrap();
        assert!(again.report().migration.is_none());
        assert!(!dir.path().join(format!("{name}.v1.bak.1")).exists());
    }
}
