//! End to end: `rampart sessions import|list|show|export` on the real transcripts in
//! ../shared/data/sessions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};

use common::*;
use rampart_sessions::{LoadOptions, load_file};

fn data_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/sessions");
    assert!(
        dir.is_dir(),
        "the shared test data is missing: expected {} (CI checks shared/ out beside the repo)",
        dir.display()
    );
    dir
}

fn transcripts() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![data_dir()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let name = path.file_name().unwrap().to_string_lossy().to_string();
                if name != "README.md" && !name.ends_with(".meta.json") {
                    out.push(path);
                }
            }
        }
    }
    out.sort();
    assert!(
        out.len() >= 30,
        "expected the full corpus, found {}",
        out.len()
    );
    out
}

fn sessions(dir: &Path, args: &[&str]) -> std::process::Output {
    let mut all = vec!["sessions", "--sessions-dir", dir.to_str().unwrap()];
    all.extend_from_slice(args);
    rampart(&all)
}

#[test]
fn every_transcript_imports_and_loads_cleanly() {
    let store = tempfile::tempdir().unwrap();
    for (i, file) in transcripts().iter().enumerate() {
        let key = format!("t{i}");
        let out = sessions(
            store.path(),
            &["import", file.to_str().unwrap(), "--as", &key],
        );
        assert!(out.status.success(), "{}: {}", file.display(), text(&out));
        // Every session file written loads with no corrupt line.
        for line in String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.starts_with("imported"))
        {
            let written = line.rsplit("→ ").next().unwrap().trim();
            let loaded = load_file(Path::new(written), &LoadOptions::default()).unwrap();
            assert!(loaded.report.corrupt_lines.is_empty(), "{written}");
            assert!(!loaded.tree.is_empty(), "{written} is empty");
        }
    }
    let list = sessions(store.path(), &["list"]);
    assert!(list.status.success());
    assert!(
        text(&list).contains("t0 ") && text(&list).contains("t5 "),
        "{}",
        text(&list)
    );
}

#[test]
fn pi_v3_import_round_trips_entry_by_entry() {
    let store = tempfile::tempdir().unwrap();
    let source =
        data_dir().join("openclaw-linux2010/main__8d0416c9-a2b4-43d0-a16d-755e39f36d39.jsonl");
    let out = sessions(
        store.path(),
        &["import", source.to_str().unwrap(), "--as", "Main"],
    );
    assert!(out.status.success(), "{}", text(&out));
    let written = store
        .path()
        .join("8d0416c9-a2b4-43d0-a16d-755e39f36d39.jsonl");
    let original: Vec<serde_json::Value> = std::fs::read_to_string(&source)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let copy: Vec<serde_json::Value> = std::fs::read_to_string(&written)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(original.len(), copy.len());
    for (i, (a, b)) in original.iter().zip(&copy).enumerate() {
        assert_eq!(a, b, "line {}", i + 1);
    }
    // The key is case-insensitive and the same key cannot be imported twice.
    let again = sessions(
        store.path(),
        &["import", source.to_str().unwrap(), "--as", "MAIN"],
    );
    assert_eq!(again.status.code(), Some(1));
    assert!(text(&again).contains("already exists"), "{}", text(&again));
}

/// Issue 13, item 2: importing and exporting an unchanged pi v3 file gives its lines back byte
/// for byte (key order, number spelling, escapes), so tool-call arguments reach a provider in
/// the order the model wrote them. The one reason a line may differ: a header whose keys
/// another tool reordered is written in pi's order (pi-mono's files were migrated in place by a
/// script that appended `version`); its content is the same.
#[test]
fn an_unchanged_pi_v3_file_round_trips_byte_for_byte() {
    let mut checked = 0;
    for source in transcripts() {
        let Ok(bytes) = std::fs::read(&source) else {
            continue;
        };
        let first = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
        let Ok(header) = serde_json::from_slice::<serde_json::Value>(first) else {
            continue;
        };
        if header["type"] != "session" || header["version"] != 3 {
            continue;
        }
        let store = tempfile::tempdir().unwrap();
        let out = sessions(
            store.path(),
            &["import", source.to_str().unwrap(), "--as", "k"],
        );
        assert!(out.status.success(), "{}: {}", source.display(), text(&out));
        let exported = store.path().join("exported.jsonl");
        let out = sessions(
            store.path(),
            &[
                "export",
                "k",
                "--format",
                "pi",
                "--out",
                exported.to_str().unwrap(),
            ],
        );
        assert!(out.status.success(), "{}: {}", source.display(), text(&out));
        let written = std::fs::read(&exported).unwrap();
        let original: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
        let copy: Vec<&[u8]> = written.split(|b| *b == b'\n').collect();
        assert_eq!(original.len(), copy.len(), "{}", source.display());
        for (i, (a, b)) in original.iter().zip(&copy).enumerate().skip(1) {
            assert!(
                a == b,
                "{}:{}: the line changed\n  was: {}\n  now: {}",
                source.display(),
                i + 1,
                String::from_utf8_lossy(a),
                String::from_utf8_lossy(b)
            );
        }
        let header_copy: serde_json::Value = serde_json::from_slice(copy[0]).unwrap();
        assert_eq!(
            header,
            header_copy,
            "{}: the header's content",
            source.display()
        );
        if !source.to_string_lossy().contains("pi-mono") {
            assert_eq!(
                original[0],
                copy[0],
                "{}: a header pi wrote",
                source.display()
            );
        }
        checked += 1;
    }
    assert!(
        checked >= 8,
        "only {checked} pi v3 files in the shared data"
    );
}

#[test]
fn show_and_export_the_active_branch() {
    let store = tempfile::tempdir().unwrap();
    let source =
        data_dir().join("openclaw-linux2010/main__8a7d4bc6-2a83-4509-894a-88a52483a1d4.jsonl");
    assert!(
        sessions(
            store.path(),
            &["import", source.to_str().unwrap(), "--as", "s"]
        )
        .status
        .success()
    );

    let json = sessions(store.path(), &["show", "s", "--json"]);
    assert!(json.status.success(), "{}", text(&json));
    let messages: Vec<serde_json::Value> = serde_json::from_slice(&json.stdout).unwrap();
    assert!(!messages.is_empty());
    assert!(messages.iter().all(|m| m["role"].is_string()));

    let human = sessions(store.path(), &["show", "s"]);
    assert!(
        text(&human).contains(&format!("messages on the branch: {}", messages.len())),
        "{}",
        text(&human)
    );

    let openai = sessions(store.path(), &["export", "s", "--format", "openai"]);
    assert!(openai.status.success(), "{}", text(&openai));
    let chat: Vec<serde_json::Value> = serde_json::from_slice(&openai.stdout).unwrap();
    assert_eq!(chat.len(), messages.len());
    // Every tool message answers a call made by an earlier assistant message.
    let mut calls = std::collections::HashSet::new();
    for m in &chat {
        if let Some(list) = m["tool_calls"].as_array() {
            for c in list {
                calls.insert(c["id"].as_str().unwrap().to_string());
            }
        }
        if m["role"] == "tool" {
            assert!(calls.contains(m["tool_call_id"].as_str().unwrap()), "{m}");
        }
    }

    let md = sessions(store.path(), &["export", "s", "--format", "markdown"]);
    assert!(text(&md).contains("## User") && text(&md).contains("## Assistant"));

    let copy = store.path().join("copy.jsonl");
    let pi = sessions(
        store.path(),
        &[
            "export",
            "s",
            "--format",
            "pi",
            "--out",
            copy.to_str().unwrap(),
        ],
    );
    assert!(pi.status.success(), "{}", text(&pi));
    let loaded = load_file(&copy, &LoadOptions::default()).unwrap();
    assert_eq!(loaded.header.id, "8a7d4bc6-2a83-4509-894a-88a52483a1d4");

    // An older branch can be shown by its leaf.
    let first_entry = loaded.tree.entries()[3].id.clone();
    let branch = sessions(
        store.path(),
        &["show", "s", "--json", "--branch", &first_entry],
    );
    let early: Vec<serde_json::Value> = serde_json::from_slice(&branch.stdout).unwrap();
    assert!(early.len() < messages.len());
    let missing = sessions(store.path(), &["show", "s", "--branch", "ffffffff"]);
    assert!(!missing.status.success());
    assert!(
        text(&missing).contains("`ffffffff` is not in"),
        "{}",
        text(&missing)
    );
}

#[test]
fn unknown_formats_and_sessions_get_clear_errors() {
    let store = tempfile::tempdir().unwrap();
    let csv = store.path().join("data.csv");
    std::fs::write(&csv, "a,b,c\n1,2,3\n").unwrap();
    let out = sessions(store.path(), &["import", csv.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let t = text(&out);
    assert!(
        t.contains("data.csv") && t.contains("Claude Code") && t.contains("SWE-agent"),
        "{t}"
    );

    let missing = sessions(store.path(), &["show", "nope"]);
    assert!(!missing.status.success());
    assert!(
        text(&missing).contains("no session `nope`"),
        "{}",
        text(&missing)
    );
}

#[test]
fn importing_a_file_with_a_torn_line_writes_nothing_beside_it() {
    let src = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let file = src.path().join("torn.jsonl");
    std::fs::write(
        &file,
        concat!(
            r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp"}"#,
            "\n",
            r#"{"type":"message","id":"a1b2c3d4","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}"#,
            "\n",
            r#"{"type":"message","id":"#,
            "\n"
        ),
    )
    .unwrap();
    let before: Vec<_> = std::fs::read_dir(src.path()).unwrap().collect();

    let out = sessions(store.path(), &["import", file.to_str().unwrap()]);

    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after: Vec<_> = std::fs::read_dir(src.path()).unwrap().collect();
    assert_eq!(
        after.len(),
        before.len(),
        "nothing was written next to the source"
    );
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.contains(&format!("{}:3:", file.display())),
        "the torn line is named with its file: {said}"
    );
}

/// Issue 12, defect 9: an import error goes to stderr and names the file; stdout stays empty,
/// so a script that reads it never takes the error for a result.
#[test]
fn an_import_error_goes_to_stderr_naming_the_file() {
    let store = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    let file = src.path().join("garbage.jsonl");
    std::fs::write(&file, "not json at all\n{\"x\":1}\n").unwrap();

    let out = sessions(store.path(), &["import", file.to_str().unwrap()]);

    assert_eq!(out.status.code(), Some(1));
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("error:") && err.contains("garbage.jsonl"),
        "{err}"
    );
}

/// Issue 12, defect 9: one invalid UTF-8 byte used to reject the whole file. Now it costs its
/// line, named as `file:line` on stderr, and every other line is imported; a broken JSON
/// document names `file:line:column`, never `<input>`.
#[test]
fn an_invalid_byte_costs_its_line_and_is_named_with_file_and_line() {
    let store = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    // A pi v3 file: the middle message carries one byte that is not UTF-8.
    let pi = src.path().join("pi.jsonl");
    let mut bytes = Vec::new();
    bytes.extend_from_slice(
        br#"{"type":"session","version":3,"id":"s-bad-byte","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp"}"#,
    );
    bytes.push(b'\n');
    bytes.extend_from_slice(
        br#"{"type":"message","id":"a0000001","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"first","timestamp":1}}"#,
    );
    bytes.push(b'\n');
    bytes.extend_from_slice(
        br#"{"type":"message","id":"a0000002","parentId":"a0000001","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"user","content":"bad "#,
    );
    bytes.push(0xff);
    bytes.extend_from_slice(br#" byte","timestamp":2}}"#);
    bytes.push(b'\n');
    bytes.extend_from_slice(
        br#"{"type":"message","id":"a0000003","parentId":"a0000001","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"user","content":"third","timestamp":3}}"#,
    );
    bytes.push(b'\n');
    std::fs::write(&pi, &bytes).unwrap();

    let out = sessions(
        store.path(),
        &["import", pi.to_str().unwrap(), "--as", "pi"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains(&format!("{}:3:", pi.display())), "{err}");
    let shown = sessions(store.path(), &["show", "pi", "--json"]);
    let messages: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(messages.as_array().unwrap().len(), 2, "{messages}");

    // A JSON document cut short: file, line and column.
    let doc = src.path().join("chat.json");
    std::fs::write(
        &doc,
        "[\n  {\"role\": \"user\", \"content\": \"hi\"},\n  {\"role\": ",
    )
    .unwrap();
    let out = sessions(store.path(), &["import", doc.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("{}:3:", doc.display())), "{err}");
    assert!(!err.contains("<input>"), "{err}");
}

/// Issue 12, defect 10: a session file no registry entry names (a process killed before it
/// registered its session) is reported by `sessions doctor` and relinked by `--relink`, with
/// its turns intact; an entry whose file is gone is reported. Nothing is deleted.
#[test]
fn doctor_reports_and_relinks_orphans() {
    let store = tempfile::tempdir().unwrap();
    let dir = store.path();
    let config = dir.join("plugins.toml");
    std::fs::write(&config, "").unwrap();
    let run = |prompt: &str, key: &str| {
        let out = rampart(&[
            "--config",
            config.to_str().unwrap(),
            "--sessions-dir",
            dir.to_str().unwrap(),
            "run",
            prompt,
            "--session",
            key,
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    };
    run("kept turn", "kept");
    run("orphaned turn", "gone");
    // Drop `gone` from the registry, as a crash between writing and registering would leave it.
    let registry = dir.join("sessions.json");
    let mut map: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&registry).unwrap()).unwrap();
    let orphan_id = map["gone"]["sessionId"].as_str().unwrap().to_string();
    map.as_object_mut().unwrap().remove("gone");
    map["lost"] = serde_json::json!({"sessionId": "not-there", "updatedAt": 1});
    std::fs::write(&registry, serde_json::to_string_pretty(&map).unwrap()).unwrap();

    let out = sessions(dir, &["doctor"]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("orphan:") && said.contains(&orphan_id),
        "{said}"
    );
    assert!(said.contains("missing: `lost`"), "{said}");
    assert!(!said.contains(".lock"), "sidecars are not sessions: {said}");

    let out = sessions(dir, &["doctor", "--relink"]);
    let said = text(&out);
    assert!(
        said.contains(&format!("relinked as `recovered:{orphan_id}`")),
        "{said}"
    );
    let shown = sessions(dir, &["show", &format!("recovered:{orphan_id}"), "--json"]);
    let messages: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(
        messages[0]["content"][0]["text"], "orphaned turn",
        "{messages}"
    );

    // Once the missing entry is removed, the directory is healthy.
    let mut map: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&registry).unwrap()).unwrap();
    map.as_object_mut().unwrap().remove("lost");
    std::fs::write(&registry, serde_json::to_string_pretty(&map).unwrap()).unwrap();
    let out = sessions(dir, &["doctor"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("ok: 2 sessions registered"),
        "{}",
        text(&out)
    );
}

/// Issue 13, item 1: a message that plays no part in the context (here: no role) is never
/// silent. `sessions import`, `sessions show` and a replay's summary each say how many, at
/// which line and why; messages whose optional fields are odd (no `cost`) stay in.
#[test]
fn messages_left_out_of_the_context_are_named_by_import_show_and_replay() {
    let dir = tempfile::tempdir().unwrap();
    let header = r#"{"type":"session","version":3,"id":"6f1c0a8e-6a41-4d8e-9d3e-0c4b8f0e2a12","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#;
    let user = r#"{"type":"message","id":"u1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hello","timestamp":1}}"#;
    let no_cost = r#"{"type":"message","id":"a1","parentId":"u1","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"hi"}],"api":"x","provider":"x","model":"m","usage":{"input":5,"output":1,"cacheRead":0,"cacheWrite":0},"stopReason":"stop","timestamp":2}}"#;
    let no_role = r#"{"type":"message","id":"u2","parentId":"a1","timestamp":"2026-01-01T00:00:03.000Z","message":{"content":"lost?","timestamp":3}}"#;
    let answer = r#"{"type":"message","id":"a2","parentId":"u2","timestamp":"2026-01-01T00:00:04.000Z","message":{"role":"assistant","content":[{"type":"text","text":"yes"}],"api":"x","provider":"x","model":"m","usage":{"input":5,"output":1,"cacheRead":0,"cacheWrite":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":4}}"#;
    let source = dir.path().join("odd.jsonl");
    std::fs::write(
        &source,
        [header, user, no_cost, no_role, answer].join("\n") + "\n",
    )
    .unwrap();
    let store = dir.path().join("store");
    let said = "1 message plays no part in the context (line 4): the message has no `role`";

    let out = sessions(&store, &["import", source.to_str().unwrap(), "--as", "odd"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(said),
        "{}",
        text(&out)
    );

    let out = sessions(&store, &["show", "odd"]);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains(said), "{shown}");
    assert!(
        shown.contains("messages on the branch: 3"),
        "the assistant without cost stays: {shown}"
    );

    let out = rampart(&["replay", source.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let notes = summary["summary"]["notes"].to_string();
    assert!(
        notes.contains("1 message plays no part in the context (line 4)"),
        "{notes}"
    );
    assert_eq!(
        summary["summary"]["calls"], 2,
        "both assistant turns are replayed"
    );
}

/// Issue 13, item 3: importing a Claude Code session imports the subagents beside it as
/// sessions of their own, each registered as spawned by the parent at the tool call that ran
/// it (`spawnedBy`, as OpenClaw's registry records spawned sessions).
#[test]
fn a_claude_code_import_brings_its_subagents_as_spawned_sessions() {
    let store = tempfile::tempdir().unwrap();
    let source = data_dir()
        .join("claude-code-log/-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl");
    let out = sessions(
        store.path(),
        &["import", source.to_str().unwrap(), "--as", "lead"],
    );
    assert!(out.status.success(), "{}", text(&out));
    let printed = String::from_utf8_lossy(&out.stdout);
    assert_eq!(printed.lines().count(), 7, "{printed}");
    let registry = rampart_sessions::store::SessionStore::open(store.path()).unwrap();
    let children: Vec<_> = registry
        .list()
        .unwrap()
        .into_iter()
        .filter(|(key, _)| key.starts_with("lead:subagent:"))
        .collect();
    assert_eq!(children.len(), 6);
    for (key, entry) in &children {
        assert_eq!(entry.extra["spawnedBy"], "lead", "{key}");
        assert!(
            entry.extra["spawnedByToolCallId"]
                .as_str()
                .unwrap()
                .starts_with("toolu_")
        );
        assert!(
            entry.extra["label"].is_string(),
            "{key}: the task from .meta.json"
        );
        let file = registry.session_file_path(key, entry).unwrap();
        let loaded = load_file(&file, &LoadOptions::default()).unwrap();
        assert!(loaded.tree.len() > 5, "{key}");
    }
    let parent_calls: std::collections::HashSet<String> = children
        .iter()
        .map(|(_, e)| e.extra["spawnedByToolCallId"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(parent_calls.len(), 6, "each subagent at its own call");
}
