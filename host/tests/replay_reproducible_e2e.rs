//! End to end: a replay is reproducible. The README's main job (the real 517-call session
//! replayed at a 32k window with the repository's plugins.toml), run twice with `--json`,
//! `--requests-out` and `--events`, writes the same bytes both times, and every timestamp the
//! model received comes from the transcript, not from the clock of the machine replaying it.
//! With `--timings` the machine's measurements come back.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::text;
use serde_json::Value;

/// The repository root: the README's commands run from there.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The README's main job transcript.
const MAIN_JOB: &str = "examples/sessions/openclaw-main-3479d118.jsonl";

/// What one replay wrote: stdout (`--json`), `--requests-out` and `--events`.
struct Written {
    json: Vec<u8>,
    requests: Vec<u8>,
    events: Vec<u8>,
}

/// The README's main job with the three outputs into `dir`, from the repository root, with
/// the repository's plugins.toml and `extra` flags.
fn main_job(dir: &Path, extra: &[&str]) -> Written {
    std::fs::create_dir_all(dir).unwrap();
    let requests = dir.join("requests.jsonl");
    let events = dir.join("events.jsonl");
    let out: Output = std::process::Command::new(env!("CARGO_BIN_EXE_rampart"))
        .args(["replay", MAIN_JOB, "--window", "32000", "--json"])
        .arg("--requests-out")
        .arg(&requests)
        .arg("--events")
        .arg(&events)
        .args(extra)
        .current_dir(root())
        .env_remove("RAMPART_CONFIG")
        .env("RUST_LOG", "warn")
        .env("TMPDIR", dir)
        .env("XDG_CONFIG_HOME", dir.join("no-xdg-config"))
        .env("XDG_DATA_HOME", dir.join("no-xdg-data"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    Written {
        json: out.stdout,
        requests: std::fs::read(&requests).unwrap(),
        events: std::fs::read(&events).unwrap(),
    }
}

/// The first line where `a` and `b` differ, for a readable failure.
fn first_difference(a: &[u8], b: &[u8]) -> String {
    let (a, b) = (String::from_utf8_lossy(a), String::from_utf8_lossy(b));
    match a
        .lines()
        .zip(b.lines())
        .enumerate()
        .find(|(_, (x, y))| x != y)
    {
        Some((i, (x, y))) => {
            let cut = |s: &str| s.chars().take(400).collect::<String>();
            format!("line {}:\n  {}\n  {}", i + 1, cut(x), cut(y))
        }
        None => format!("lengths {} and {}", a.len(), b.len()),
    }
}

/// Every `timestamp` in `value`, numbers as they are and ISO strings as Unix milliseconds.
fn timestamps(value: &Value, out: &mut Vec<u64>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                if key == "timestamp" {
                    match v {
                        Value::Number(n) => out.extend(n.as_u64()),
                        Value::String(s) => out.extend(
                            chrono::DateTime::parse_from_rfc3339(s)
                                .ok()
                                .and_then(|d| u64::try_from(d.timestamp_millis()).ok()),
                        ),
                        _ => {}
                    }
                }
                timestamps(v, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| timestamps(v, out)),
        _ => {}
    }
}

fn lines(bytes: &[u8]) -> impl Iterator<Item = Value> + '_ {
    bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
}

#[test]
fn the_readme_main_job_writes_the_same_bytes_twice_with_the_transcripts_times() {
    let tmp = tempfile::tempdir().unwrap();
    let first = main_job(&tmp.path().join("1"), &[]);
    let second = main_job(&tmp.path().join("2"), &[]);

    assert!(!first.requests.is_empty() && !first.events.is_empty());
    for (what, a, b) in [
        ("--json", &first.json, &second.json),
        ("--requests-out", &first.requests, &second.requests),
        ("--events", &first.events, &second.events),
    ] {
        assert!(
            a == b,
            "{what} differs between two runs: {}",
            first_difference(a, b)
        );
    }

    // Every time the model was shown is one the transcript recorded.
    let transcript = std::fs::read(root().join(MAIN_JOB)).unwrap();
    let mut recorded = Vec::new();
    lines(&transcript).for_each(|l| timestamps(&l, &mut recorded));
    let recorded: HashSet<u64> = recorded.into_iter().collect();
    let mut sent = Vec::new();
    lines(&first.requests).for_each(|r| timestamps(&r["messages"], &mut sent));
    assert!(
        sent.len() > 1_000,
        "requests carry timestamps: {}",
        sent.len()
    );
    let foreign: Vec<u64> = sent.into_iter().filter(|t| !recorded.contains(t)).collect();
    assert!(
        foreign.is_empty(),
        "{} timestamps sent to the model are not in the transcript, e.g. {:?}",
        foreign.len(),
        &foreign[..foreign.len().min(5)]
    );

    // Without --timings, no measurement of this machine is in the outputs.
    let doc: Value = serde_json::from_slice(&first.json).unwrap();
    assert_eq!(doc["summary"]["timings"], Value::Null);
    assert_eq!(doc["summary"]["compactionMsOnPath"], Value::Null);
    assert!(doc["summary"]["compactions"].as_u64().unwrap() > 0);
    assert!(lines(&first.events).all(|e| e["data"].get("durationMs").is_none()));
}

#[test]
fn timings_bring_back_the_measurements() {
    let tmp = tempfile::tempdir().unwrap();
    let timed = main_job(tmp.path(), &["--timings"]);
    let doc: Value = serde_json::from_slice(&timed.json).unwrap();
    let s = &doc["summary"];
    assert!(
        s["timings"]["totalMs"].as_f64().unwrap() > 0.0,
        "{}",
        s["timings"]
    );
    assert!(s["compactionMsOnPath"].is_u64());
    assert!(
        doc["rows"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["compactionMs"].is_u64())
    );
    let ends: Vec<Value> = lines(&timed.events)
        .filter(|e| e["kind"] == "compaction_end")
        .collect();
    assert!(!ends.is_empty());
    assert!(ends.iter().all(|e| e["data"]["durationMs"].is_u64()));
}
