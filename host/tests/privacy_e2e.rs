//! End to end: what the user's conversations are kept in is theirs alone (session files,
//! blobs, the memory index and their directories are owner-only, as `sessions.json` always
//! was), file names and snippets never drive the user's terminal, and a line too long to load
//! is explained in terms the user can act on.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{text, write_config};

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/sessions/openclaw-coding-b1809e0c.jsonl")
}

/// `rampart` in `dir` (config `dir/plugins.toml`, sessions in `dir/data/sessions`, the memory
/// workspace in `dir/data/workspace`).
fn rampart(dir: &Path, args: &[&str]) -> Output {
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    Command::new(env!("CARGO_BIN_EXE_rampart"))
        .arg("--config")
        .arg(dir.join("plugins.toml"))
        .arg("--sessions-dir")
        .arg(dir.join("data").join("sessions"))
        .args(args)
        .env_remove("RAMPART_CONFIG")
        .env_remove("OPENAI_API_KEY")
        .env("RUST_LOG", "warn")
        .env("TMPDIR", &tmp)
        .env("XDG_CONFIG_HOME", dir.join("no-xdg-config"))
        .env("XDG_DATA_HOME", dir.join("no-xdg-data"))
        .current_dir(dir)
        .output()
        .unwrap()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Every file and directory under `dir`.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        out.push(path.clone());
        if path.is_dir() {
            walk(&path, out);
        }
    }
}

#[test]
fn sessions_blobs_and_the_memory_index_are_owner_only() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_config(d, "");
    // A replay kept in the sessions directory writes a session, its registry and blobs (the
    // engine keeps capped tool results there); an import writes a session file.
    let out = rampart(d, &["replay", example().to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let out = rampart(
        d,
        &[
            "sessions",
            "import",
            example().to_str().unwrap(),
            "--as",
            "imported",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let ws = d.join("data").join("workspace");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(
        ws.join("MEMORY.md"),
        "# Memory\n\n- The queue runs on SQLite.\n",
    )
    .unwrap();
    let out = rampart(d, &["memory", "index"]);
    assert!(out.status.success(), "{}", text(&out));

    let sessions = d.join("data").join("sessions");
    let mut files = Vec::new();
    walk(&sessions, &mut files);
    let memory = d.join("data").join("memory");
    walk(&memory, &mut files);
    let (mut sessions_seen, mut blobs_seen, mut index_seen) = (0, 0, false);
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".lock") {
            // Empty lock files: they hold no conversation.
            continue;
        }
        if f.is_dir() {
            assert_eq!(mode(f), 0o700, "{}", f.display());
            continue;
        }
        assert_eq!(mode(f), 0o600, "{}", f.display());
        sessions_seen += usize::from(name.ends_with(".jsonl"));
        blobs_seen += usize::from(f.parent().unwrap().parent().unwrap().ends_with("blobs"));
        index_seen |= name == "main.sqlite";
    }
    assert_eq!(sessions_seen, 2, "{files:?}");
    assert!(blobs_seen > 0, "the replay stored no blob: {files:?}");
    assert!(index_seen, "{files:?}");
    for made in [&sessions, &sessions.join("blobs"), &memory] {
        assert_eq!(mode(made), 0o700, "{}", made.display());
    }
}

/// A pi v3 session whose messages hold terminal escapes.
fn session_with_escapes() -> String {
    let header = r#"{"type":"session","version":3,"id":"esc-test","timestamp":"2026-03-02T12:11:10.780Z","cwd":"/tmp"}"#;
    let user = serde_json::json!({
        "type": "message", "id": "u1", "parentId": null,
        "timestamp": "2026-03-02T12:11:11.000Z",
        "message": {"role": "user", "content": "clear \u{1b}[2J and \u{1b}]0;owned\u{7} title", "timestamp": 1}
    });
    let assistant = serde_json::json!({
        "type": "message", "id": "a1", "parentId": "u1",
        "timestamp": "2026-03-02T12:11:12.000Z",
        "message": {
            "role": "assistant", "content": [{"type": "text", "text": "done \u{1b}[0m"}],
            "api": "openai-completions", "provider": "openai", "model": "gpt-4o",
            "usage": {"input": 10, "output": 2, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 12,
                      "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
            "stopReason": "stop", "timestamp": 2
        }
    });
    format!("{header}\n{user}\n{assistant}\n")
}

#[test]
fn file_names_keys_and_snippets_are_printed_with_their_escapes_shown() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_config(d, "");
    let evil = d.join("red\u{1b}[31m.jsonl");
    std::fs::write(&evil, session_with_escapes()).unwrap();
    let evil_arg = evil.to_str().unwrap();
    let no_escape = |out: &Output, what: &str| {
        assert!(out.status.success(), "{what}: {}", text(out));
        let all = text(out);
        assert!(
            !all.contains('\u{1b}'),
            "{what} printed a raw ESC:\n{all:?}"
        );
        assert!(!all.contains('\u{7}'), "{what} printed a raw BEL:\n{all:?}");
        all
    };

    // The key comes from the file name.
    let out = rampart(d, &["sessions", "import", evil_arg]);
    let all = no_escape(&out, "sessions import");
    assert!(all.contains("red\\x1b[31m"), "{all}");
    let all = no_escape(&rampart(d, &["sessions", "list"]), "sessions list");
    assert!(all.contains("red\\x1b[31m"), "{all}");
    let all = no_escape(
        &rampart(d, &["sessions", "show", "red\u{1b}[31m"]),
        "sessions show",
    );
    assert!(
        all.contains("clear \\x1b[2J and \\x1b]0;owned\\x07 title"),
        "{all}"
    );
    // JSON keeps the text as it is (JSON escapes it itself).
    let out = rampart(d, &["sessions", "show", "red\u{1b}[31m", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v[0]["content"],
        "clear \u{1b}[2J and \u{1b}]0;owned\u{7} title"
    );

    // Errors name files too.
    let out = rampart(d, &["replay", evil_arg, "--session-index", "9"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(!text(&out).contains('\u{1b}'), "{:?}", text(&out));
    assert!(text(&out).contains("red\\x1b[31m"), "{}", text(&out));
    let all = no_escape(&rampart(d, &["replay", evil_arg]), "replay");
    assert!(all.contains("red\\x1b[31m.jsonl"), "{all}");
    let all = no_escape(
        &rampart(
            d,
            &[
                "eval",
                evil_arg,
                "--engines",
                "legacy",
                "--windows",
                "64000",
            ],
        ),
        "eval",
    );
    assert!(all.contains("red\\x1b[31m.jsonl"), "{all}");

    // Memory: a note's name and its text.
    let ws = d.join("data").join("workspace");
    std::fs::create_dir_all(ws.join("memory")).unwrap();
    std::fs::write(
        ws.join("memory").join("red\u{1b}[31m.md"),
        "# Notes\n\n- the deploy key rotates \u{1b}[8mhidden\u{1b}[0m monthly\n",
    )
    .unwrap();
    no_escape(&rampart(d, &["memory", "index"]), "memory index");
    let all = no_escape(
        &rampart(d, &["memory", "search", "deploy key rotates"]),
        "memory search",
    );
    assert!(all.contains("memory/red\\x1b[31m.md"), "{all}");
    assert!(all.contains("\\x1b[8mhidden\\x1b[0m"), "{all}");
    let all = no_escape(
        &rampart(d, &["memory", "get", "memory/red\u{1b}[31m.md"]),
        "memory get",
    );
    // Lines stay lines.
    assert!(
        all.contains("# Notes\n\n- the deploy key rotates \\x1b[8mhidden"),
        "{all}"
    );
}

#[test]
fn a_line_too_long_to_load_is_explained_in_the_users_terms() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_config(d, "");
    // One entry of 65 MiB, over the loader's 64 MiB line limit, between two good lines.
    let header = r#"{"type":"session","version":3,"id":"long-line","timestamp":"2026-03-02T12:11:10.780Z","cwd":"/tmp"}"#;
    let big = format!(
        r#"{{"type":"custom","customType":"x","id":"c1","parentId":null,"timestamp":"2026-03-02T12:11:11.000Z","data":"{}"}}"#,
        "a".repeat(65 << 20)
    );
    let path = d.join("long.jsonl");
    std::fs::write(&path, format!("{header}\n{big}\n")).unwrap();
    let out = rampart(d, &["sessions", "show", path.to_str().unwrap()]);
    drop(big);
    assert!(out.status.success(), "{}", text(&out));
    let all = text(&out);
    assert!(all.contains(":2: the line could not be read"), "{all}");
    assert!(all.contains("left out"), "{all}");
    assert!(all.contains("shorten its content"), "{all}");
    assert!(
        !all.contains("LoadOptions"),
        "an internal API named to the user: {all}"
    );
}
