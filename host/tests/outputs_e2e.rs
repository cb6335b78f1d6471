//! End to end: output files (`--events`, `replay --requests-out` and `--report`, `eval --out`,
//! `context show --html`, `sessions export --out`) never replace an input, replace an existing
//! file only with `--overwrite`, and then whole.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{text, write_config};

/// A real transcript of the repository's examples (0.6 MB; a replay takes a fraction of a
/// second).
fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/sessions/openclaw-coding-b1809e0c.jsonl")
}

/// `rampart` in `dir` with an empty config there, temporary files and sessions under it.
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
        .env("RUST_LOG", "warn")
        .env("TMPDIR", &tmp)
        .env("XDG_CONFIG_HOME", dir.join("no-xdg-config"))
        .env("XDG_DATA_HOME", dir.join("no-xdg-data"))
        .current_dir(dir)
        .output()
        .unwrap()
}

/// A directory with an empty config and a copy of the example as `t.jsonl`.
fn setup() -> (tempfile::TempDir, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), "");
    let bytes = std::fs::read(example()).unwrap();
    std::fs::write(dir.path().join("t.jsonl"), &bytes).unwrap();
    (dir, bytes)
}

fn refused(out: &Output, wanted: &str) {
    assert_eq!(out.status.code(), Some(2), "{}", text(out));
    assert!(
        text(out).contains(wanted),
        "wanted `{wanted}` in:\n{}",
        text(out)
    );
}

#[test]
fn an_output_naming_the_transcript_is_refused_and_the_transcript_kept() {
    let (dir, bytes) = setup();
    let d = dir.path();
    std::fs::hard_link(d.join("t.jsonl"), d.join("hard.jsonl")).unwrap();
    std::os::unix::fs::symlink(d.join("t.jsonl"), d.join("soft.jsonl")).unwrap();
    let cases: Vec<Vec<&str>> = vec![
        // Used to truncate the transcript to 0 bytes, then fail on the empty file.
        vec!["replay", "t.jsonl", "--requests-out", "t.jsonl"],
        vec!["--events", "t.jsonl", "replay", "t.jsonl"],
        vec!["--overwrite", "replay", "t.jsonl", "--report", "./t.jsonl"],
        // Links to it are the same file.
        vec![
            "--overwrite",
            "replay",
            "t.jsonl",
            "--requests-out",
            "hard.jsonl",
        ],
        vec!["--overwrite", "replay", "t.jsonl", "--report", "soft.jsonl"],
        vec!["--overwrite", "--events", "soft.jsonl", "replay", "t.jsonl"],
        // Used to replace the transcript with the table, exit 0.
        vec![
            "eval",
            "t.jsonl",
            "--engines",
            "legacy",
            "--windows",
            "64000",
            "--out",
            "t.jsonl",
        ],
        vec![
            "--overwrite",
            "eval",
            "t.jsonl",
            "--engines",
            "legacy",
            "--windows",
            "64000",
            "--out",
            "hard.jsonl",
        ],
    ];
    for args in cases {
        let out = rampart(d, &args);
        refused(&out, "transcript");
        assert!(text(&out).contains("choose another path"), "{}", text(&out));
        assert_eq!(
            std::fs::read(d.join("t.jsonl")).unwrap(),
            bytes,
            "{args:?} changed the transcript"
        );
    }
}

#[test]
fn an_output_is_never_the_configuration_a_prices_file_or_a_session() {
    let (dir, _) = setup();
    let d = dir.path();
    std::fs::write(d.join("prices.toml"), "input = 3.0\noutput = 15.0\n").unwrap();
    let out = rampart(
        d,
        &[
            "--overwrite",
            "replay",
            "t.jsonl",
            "--prices",
            "prices.toml",
            "--report",
            "prices.toml",
        ],
    );
    refused(&out, "the --prices file");
    assert_eq!(
        std::fs::read_to_string(d.join("prices.toml")).unwrap(),
        "input = 3.0\noutput = 15.0\n"
    );
    let out = rampart(
        d,
        &[
            "--overwrite",
            "--events",
            "plugins.toml",
            "replay",
            "t.jsonl",
        ],
    );
    refused(&out, "the configuration");
    assert_eq!(std::fs::read(d.join("plugins.toml")).unwrap(), b"");
    // Two outputs on one file.
    let out = rampart(
        d,
        &[
            "replay",
            "t.jsonl",
            "--report",
            "r.out",
            "--requests-out",
            "./r.out",
        ],
    );
    refused(&out, "give each output its own path");
    assert!(!d.join("r.out").exists());

    // A session: the one exported, the one shown, any file of the sessions directory.
    let out = rampart(d, &["sessions", "import", "t.jsonl", "--as", "t"]);
    assert!(out.status.success(), "{}", text(&out));
    let sessions = d.join("data").join("sessions");
    let file = std::fs::read_dir(&sessions)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .unwrap();
    let session = std::fs::read(&file).unwrap();
    let registry = std::fs::read(sessions.join("sessions.json")).unwrap();
    let file_arg = file.display().to_string();
    let out = rampart(
        d,
        &[
            "--overwrite",
            "sessions",
            "export",
            "t",
            "--format",
            "markdown",
            "--out",
            &file_arg,
        ],
    );
    refused(&out, "the session exported");
    let out = rampart(
        d,
        &[
            "--overwrite",
            "context",
            "show",
            "--session",
            &file_arg,
            "--html",
            &file_arg,
        ],
    );
    refused(&out, "the session");
    let registry_arg = sessions.join("sessions.json").display().to_string();
    let out = rampart(
        d,
        &[
            "--overwrite",
            "--events",
            &registry_arg,
            "context",
            "show",
            "--session",
            "t",
        ],
    );
    refused(&out, "a file of the sessions directory");
    assert_eq!(std::fs::read(&file).unwrap(), session);
    assert_eq!(
        std::fs::read(sessions.join("sessions.json")).unwrap(),
        registry
    );
}

#[test]
fn an_existing_output_is_replaced_only_with_overwrite_and_then_whole() {
    let (dir, _) = setup();
    let d = dir.path();
    std::fs::write(d.join("notes.txt"), "my notes\n").unwrap();
    let notes = || std::fs::read_to_string(d.join("notes.txt")).unwrap();
    let cases: Vec<Vec<&str>> = vec![
        // Used to overwrite the notes and exit 0.
        vec!["replay", "t.jsonl", "--report", "notes.txt"],
        vec!["replay", "t.jsonl", "--requests-out", "notes.txt"],
        vec!["--events", "notes.txt", "replay", "t.jsonl"],
        vec![
            "eval",
            "t.jsonl",
            "--engines",
            "legacy",
            "--windows",
            "64000",
            "--out",
            "notes.txt",
        ],
        vec!["context", "show", "--html", "notes.txt"],
    ];
    for args in cases {
        let out = rampart(d, &args);
        refused(&out, "already exists; pass --overwrite to replace it");
        assert_eq!(notes(), "my notes\n", "{args:?}");
    }
    // Nothing was left beside it.
    let leftovers: Vec<_> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("notes.txt") && n != "notes.txt")
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    let out = rampart(
        d,
        &["--overwrite", "replay", "t.jsonl", "--report", "notes.txt"],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(notes().starts_with("<!DOCTYPE html>"), "{}", notes());
    let out = rampart(
        d,
        &[
            "--overwrite",
            "--events",
            "notes.txt",
            "replay",
            "t.jsonl",
            "--requests-out",
            "req.jsonl",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let events = notes();
    assert!(!events.is_empty());
    for line in events.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(v["kind"].is_string(), "{line}");
    }
    assert!(std::fs::metadata(d.join("req.jsonl")).unwrap().len() > 0);

    // sessions export: markdown used to overwrite; pi refused, and now both say what to do.
    let out = rampart(d, &["sessions", "import", "t.jsonl", "--as", "t"]);
    assert!(out.status.success(), "{}", text(&out));
    std::fs::write(d.join("export.md"), "keep me\n").unwrap();
    for format in ["markdown", "pi", "openai"] {
        let out = rampart(
            d,
            &[
                "sessions",
                "export",
                "t",
                "--format",
                format,
                "--out",
                "export.md",
            ],
        );
        refused(&out, "--overwrite");
        assert_eq!(
            std::fs::read_to_string(d.join("export.md")).unwrap(),
            "keep me\n"
        );
    }
    let out = rampart(
        d,
        &[
            "--overwrite",
            "sessions",
            "export",
            "t",
            "--format",
            "pi",
            "--out",
            "export.md",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let exported = std::fs::read_to_string(d.join("export.md")).unwrap();
    assert!(
        exported.starts_with("{\"type\":\"session\""),
        "{exported:.200}"
    );
}
