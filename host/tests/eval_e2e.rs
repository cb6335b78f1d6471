//! Issue 14, item 5: `rampart eval` replays engines × transcripts × windows and writes one
//! table in four formats; a cell whose engine cannot load is a row saying why.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::Path;

use common::{fixture, text};
use serde_json::Value;

fn rampart_in(dir: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_rampart"))
        .args(args)
        .env_remove("RAMPART_CONFIG")
        .env("RUST_LOG", "warn")
        .current_dir(dir)
        .output()
        .unwrap()
}

#[test]
fn eval_compares_engines_across_windows_in_every_format() {
    let tmp = tempfile::tempdir().unwrap();
    let config = common::config_for(tmp.path(), "window", &fixture("rampart_window"), "");
    let example = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/sessions/openclaw-main-3479d118.jsonl");
    let run = |transcript: &Path, engines: &str, format: &str| {
        rampart_in(
            tmp.path(),
            &[
                "--config",
                config.to_str().unwrap(),
                "eval",
                transcript.to_str().unwrap(),
                "--engines",
                engines,
                "--windows",
                "32000",
                "--format",
                format,
            ],
        )
    };
    let out = run(&example, "legacy,window", "json");
    assert!(out.status.success(), "{}", text(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let cells = doc["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2, "2 engines × 1 transcript × 1 window");
    for c in cells {
        assert!(c["failure"].is_null(), "{c}");
        assert_eq!(c["calls"], 517);
        assert!(c["retentionPct"].as_f64().unwrap() > 0.0, "{c}");
        assert!(c["facts"].as_u64().unwrap() > 100);
    }
    let legacy = &cells[0];
    assert_eq!(legacy["engine"], "legacy");
    assert!(legacy["compactions"].as_u64().unwrap() > 0);
    assert!(legacy["cacheBreaks"].as_u64().unwrap() >= legacy["compactions"].as_u64().unwrap());
    // The sliding window never compacts but drops history: it breaks the cache at most calls,
    // and what it dropped is gone (no summary): it retains less.
    let window = &cells[1];
    assert_eq!(window["engine"], "window");
    assert_eq!(window["compactions"], 0);
    assert!(window["cacheBreaks"].as_u64().unwrap() > 100, "{window}");
    assert!(window["retentionPct"].as_f64() < legacy["retentionPct"].as_f64());

    let small = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/sessions/openclaw-coding-b1809e0c.jsonl");
    let md = String::from_utf8(run(&small, "legacy", "markdown").stdout).unwrap();
    assert_eq!(md.lines().count(), 3, "header, rule, one row: {md}");
    assert!(md.starts_with("| engine | transcript | window |"), "{md}");
    let html = String::from_utf8(run(&small, "legacy", "html").stdout).unwrap();
    assert!(
        html.starts_with("<!DOCTYPE html>") && html.matches("<tr>").count() == 2,
        "{html}"
    );
    let table = String::from_utf8(run(&small, "legacy", "text").stdout).unwrap();
    assert!(
        table.lines().next().unwrap().contains("retention %"),
        "{table}"
    );

    let failed = rampart_in(
        tmp.path(),
        &[
            "eval",
            example.to_str().unwrap(),
            "--engines",
            "nope",
            "--windows",
            "32000",
        ],
    );
    assert_eq!(failed.status.code(), Some(1));
    let row = String::from_utf8_lossy(&failed.stdout);
    assert!(
        row.contains("nope") && row.contains("failed:") && row.contains("available ids"),
        "{row}"
    );
}

/// Issue 27, item 4: the "recoverable" column. The lossless engine keeps what it compacted and
/// offers recall tools, so a probe built from the words around each lost fact brings back
/// facts the final request no longer shows; legacy offers no recall tools of its own (only
/// memory notes), so it recovers less. Measured without a model.
#[test]
fn eval_counts_what_the_engines_recall_tools_bring_back() {
    let tmp = tempfile::tempdir().unwrap();
    let config = common::config_for(
        tmp.path(),
        "lossless",
        &fixture("rampart-lossless"),
        &format!(
            "[plugins.engines.lossless.config]\nstateDir = \"{}\"\n",
            tmp.path().join("state").display()
        ),
    );
    let example = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/sessions/openclaw-coding-b1809e0c.jsonl");
    let out = rampart_in(
        tmp.path(),
        &[
            "--config",
            config.to_str().unwrap(),
            "eval",
            example.to_str().unwrap(),
            "--engines",
            "legacy,lossless",
            "--windows",
            "32000",
            "--format",
            "json",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let cells = doc["cells"].as_array().unwrap();
    let pct = |c: &Value, k: &str| c[k].as_f64().unwrap_or_else(|| panic!("{k}: {c}"));
    let (legacy, lossless) = (&cells[0], &cells[1]);
    assert_eq!(lossless["engine"], "lossless");
    assert!(lossless["failure"].is_null(), "{lossless}");
    assert!(pct(lossless, "recoverablePct") > 10.0, "{lossless}");
    assert!(
        pct(lossless, "recoverablePct") > pct(legacy, "recoverablePct"),
        "{legacy}\n{lossless}"
    );
    // Never more than what was lost.
    for c in cells {
        assert!(
            pct(c, "retentionPct") + pct(c, "recoverablePct") <= 100.0 + 1e-9,
            "{c}"
        );
    }
}
