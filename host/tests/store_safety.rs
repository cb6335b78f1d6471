//! Issue 12, defect 1: ids that come from files never become paths outside the store.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use rampart_host::commands::sessions_import::import_into;
use rampart_sessions::store::{SessionStore, is_safe_session_id};

/// A pi session whose header id is `../escaped` imports under a fresh id, inside the store,
/// with a warning that names the field; nothing is written beside the store.
#[test]
fn a_header_id_that_climbs_out_of_the_store_is_replaced() {
    let root = tempfile::tempdir().unwrap();
    let store_dir = root.path().join("store");
    let store = SessionStore::open(&store_dir).unwrap();
    let source = root.path().join("source").join("evil.jsonl");
    std::fs::create_dir_all(source.parent().unwrap()).unwrap();
    std::fs::write(
        &source,
        concat!(
            r#"{"type":"session","version":3,"id":"../escaped","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp"}"#,
            "\n",
            r#"{"type":"message","id":"a1b2c3d4","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}"#,
            "\n"
        ),
    )
    .unwrap();

    let outcomes = import_into(&store, &source, None).unwrap();

    assert_eq!(outcomes.len(), 1);
    let outcome = &outcomes[0];
    assert!(
        is_safe_session_id(&outcome.session_id),
        "{}",
        outcome.session_id
    );
    assert_eq!(outcome.file.parent().unwrap(), store_dir.as_path());
    assert!(
        outcome
            .warnings
            .iter()
            .any(|w| w.contains("header `id`") && w.contains("../escaped")),
        "{:?}",
        outcome.warnings
    );
    // Nothing beside the store or the source.
    let mut top: Vec<String> = std::fs::read_dir(root.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    top.sort();
    assert_eq!(top, ["source", "store"]);
    // The original id is kept in the new file's header.
    let header = std::fs::read_to_string(&outcome.file).unwrap();
    assert!(
        header.contains("\"sourceHeaderId\":\"../escaped\""),
        "{header}"
    );
}

#[test]
fn safe_ids_are_file_names_and_nothing_else() {
    for ok in ["0b9c7f2e-3a1d-4f55-9e0a-1c2d3e4f5a6b", "main", "a.b_c-1"] {
        assert!(is_safe_session_id(ok), "{ok}");
    }
    for bad in [
        "",
        "../escaped",
        "a/b",
        "a\\b",
        ".hidden",
        "..",
        "x\0y",
        &"x".repeat(201),
    ] {
        assert!(!is_safe_session_id(bad), "{bad:?}");
    }
}

/// A registry entry whose `sessionFile` climbs out of the store (or whose `sessionId` is a
/// path) is refused by `run`, naming the key and the field; nothing is written outside.
#[test]
fn registry_entries_that_lead_outside_the_store_are_refused() {
    let root = tempfile::tempdir().unwrap();
    let store_dir = root.path().join("store");
    std::fs::create_dir_all(&store_dir).unwrap();
    std::fs::write(
        store_dir.join("sessions.json"),
        r#"{
  "climb": {"sessionId": "abc", "sessionFile": "../escaped.jsonl", "updatedAt": 1},
  "byid": {"sessionId": "../escaped", "updatedAt": 1}
}"#,
    )
    .unwrap();
    let config = root.path().join("plugins.toml");
    std::fs::write(&config, "").unwrap();
    for (key, field) in [("climb", "sessionFile"), ("byid", "sessionId")] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_rampart"))
            .arg("--config")
            .arg(&config)
            .arg("--sessions-dir")
            .arg(&store_dir)
            .args(["run", "hello", "--session", key])
            .env_remove("RAMPART_CONFIG")
            .current_dir(root.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        assert!(
            stderr.contains(key) && stderr.contains(field) && stderr.contains("outside"),
            "{stderr}"
        );
    }
    let mut top: Vec<String> = std::fs::read_dir(root.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    top.sort();
    assert_eq!(top, ["plugins.toml", "store"], "nothing beside the store");
}

/// Issue 12, defect 6, writing side: a tool result too large for one line is imported with its
/// text in the blob store (written before the line), so every line of the new file loads and
/// nothing is cut from the branch. The limit is lowered so the test need not write 64 MiB.
#[test]
fn an_import_never_writes_a_line_the_loader_would_refuse() {
    use rampart_host::commands::sessions_import::import_into_with;
    use rampart_sessions::{LoadOptions, load_file};

    let root = tempfile::tempdir().unwrap();
    let store = SessionStore::open(root.path().join("store")).unwrap();
    let source = root.path().join("big.jsonl");
    let big: String = (0..100_000).map(|i| format!("row {i}\\n")).collect();
    let lines = [
        r#"{"type":"session","version":3,"id":"big-session","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp"}"#.to_string(),
        r#"{"type":"message","id":"a0000001","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"read it","timestamp":1}}"#.to_string(),
        format!(
            r#"{{"type":"message","id":"a0000002","parentId":"a0000001","timestamp":"2026-01-01T00:00:02.000Z","message":{{"role":"toolResult","toolCallId":"c1","toolName":"read","content":[{{"type":"text","text":"{big}"}}],"isError":false,"timestamp":2}}}}"#
        ),
        r#"{"type":"message","id":"a0000003","parentId":"a0000002","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"user","content":"thanks","timestamp":3}}"#.to_string(),
    ];
    std::fs::write(&source, lines.join("\n") + "\n").unwrap();
    let limit = 256 * 1024;

    let outcome = import_into_with(&store, &source, Some("big"), limit)
        .unwrap()
        .remove(0);

    let written = std::fs::read_to_string(&outcome.file).unwrap();
    assert!(
        written.lines().all(|l| l.len() <= limit),
        "a line over the limit was written"
    );
    let loaded = load_file(
        &outcome.file,
        &LoadOptions {
            max_line_bytes: limit,
            record_corrupt_lines: false,
        },
    )
    .unwrap();
    assert!(loaded.report.is_clean(), "{:?}", loaded.report);
    assert_eq!(loaded.tree.len(), 3, "no entry lost");
    let warning = outcome
        .warnings
        .iter()
        .find(|w| w.contains("blob") && w.contains(":3:"))
        .unwrap_or_else(|| panic!("{:?}", outcome.warnings));
    let reference = warning
        .split_whitespace()
        .find(|w| w.starts_with("sha256:"))
        .unwrap();
    let blob = store
        .dir()
        .join("blobs")
        .read_dir()
        .unwrap()
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
        .map(|f| f.unwrap().path())
        .find(|p| reference.contains(&*p.file_name().unwrap().to_string_lossy()))
        .expect("the blob the warning names exists");
    assert_eq!(
        std::fs::read_to_string(blob).unwrap(),
        big.replace("\\n", "\n")
    );
}

/// The same for another tool's transcript, which is converted and written entry by entry: the
/// oversized tool result is spilled on its way to the new file, the warning names the source
/// line it came from, and the store holds only the session, its registry and the blob (the
/// file the entries waited in had no name).
#[test]
fn a_streamed_import_spills_an_oversized_result_and_names_its_line() {
    use rampart_host::commands::sessions_import::import_into_with;
    use rampart_sessions::{LoadOptions, load_file};

    let root = tempfile::tempdir().unwrap();
    let store = SessionStore::open(root.path().join("store")).unwrap();
    let source = root.path().join("claude.jsonl");
    let big: String = (0..100_000).map(|i| format!("row {i}\\n")).collect();
    let lines = [
        r#"{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"s","cwd":"/w","timestamp":"2025-07-14T23:04:11.646Z","message":{"role":"user","content":"read it"}}"#.to_string(),
        r#"{"type":"assistant","uuid":"u2","parentUuid":"u1","sessionId":"s","timestamp":"2025-07-14T23:04:12.000Z","message":{"id":"m1","role":"assistant","model":"claude-x","content":[{"type":"tool_use","id":"t1","name":"Read","input":{}}],"stop_reason":"tool_use"}}"#.to_string(),
        format!(
            r#"{{"type":"user","uuid":"u3","parentUuid":"u2","sessionId":"s","timestamp":"2025-07-14T23:04:13.000Z","message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t1","content":"{big}"}}]}}}}"#
        ),
        r#"{"type":"user","uuid":"u4","parentUuid":"u3","sessionId":"s","timestamp":"2025-07-14T23:04:14.000Z","message":{"role":"user","content":"thanks"}}"#.to_string(),
    ];
    std::fs::write(&source, lines.join("\n") + "\n").unwrap();
    let limit = 256 * 1024;

    let outcome = import_into_with(&store, &source, Some("cc"), limit)
        .unwrap()
        .remove(0);

    let written = std::fs::read_to_string(&outcome.file).unwrap();
    assert!(written.lines().all(|l| l.len() <= limit));
    let loaded = load_file(
        &outcome.file,
        &LoadOptions {
            max_line_bytes: limit,
            record_corrupt_lines: false,
        },
    )
    .unwrap();
    assert!(loaded.report.is_clean(), "{:?}", loaded.report);
    assert_eq!(loaded.tree.len(), outcome.entries);
    assert!(
        outcome.warnings.iter().any(
            |w| w.starts_with(&format!("{}:3: ", source.display())) && w.contains("blob store")
        ),
        "{:?}",
        outcome.warnings
    );
    let mut names: Vec<String> = std::fs::read_dir(store.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut expected = vec![
        "blobs".to_string(),
        outcome
            .file
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned(),
        "sessions.json".to_string(),
        "sessions.json.lock".to_string(),
    ];
    expected.sort();
    assert_eq!(names, expected);
}
