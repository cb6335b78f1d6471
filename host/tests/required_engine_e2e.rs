//! Issue 12, defect 7: `required = true` holds for faults in every call, not only at load and
//! in `assemble`; and a quarantined engine is not called again in that process.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::Path;

use common::{config_for, fixture, rampart, text};

fn engine_config(dir: &Path, panic_in: &str, required: bool, log: &Path) -> String {
    let cfg = config_for(
        dir,
        "fx-compacts",
        &fixture("fx-compacts"),
        &format!(
            "required = {required}\n[plugins.engines.fx-compacts.config]\npanicIn = \"{panic_in}\"\n\
             callLog = \"{}\"\n",
            log.display()
        ),
    );
    cfg.to_str().unwrap().to_string()
}

/// A required engine that panics in `after_turn` or `maintain` stops `rampart run` with the
/// quarantine line; before, the host logged it and went on with `legacy`.
#[test]
fn a_required_engine_failing_after_the_answer_stops_the_run() {
    for method in ["after_turn", "maintain"] {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("calls.log");
        let cfg = engine_config(dir.path(), method, true, &log);
        let sessions = dir.path().join("sessions");
        let out = rampart(&[
            "--config",
            &cfg,
            "--sessions-dir",
            sessions.to_str().unwrap(),
            "run",
            "hello",
        ]);
        let all = text(&out);
        assert_eq!(out.status.code(), Some(1), "{method}: {all}");
        assert!(
            all.contains(&format!("failed during {method}")) && all.contains("required = true"),
            "{method}: {all}"
        );
        assert!(
            !all.contains("continuing with the built-in engine"),
            "{method}: {all}"
        );
    }
}

/// `rampart compact` with a required engine that panics in `compact` fails with its line and
/// leaves the session as it was.
#[test]
fn a_required_engine_failing_in_compact_stops_the_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.log");
    let cfg = engine_config(dir.path(), "compact", true, &log);
    let sessions = dir.path().join("sessions");
    let sessions = sessions.to_str().unwrap();
    let out = rampart(&["--config", &cfg, "--sessions-dir", sessions, "run", "hello"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let before = rampart(&[
        "--sessions-dir",
        sessions,
        "sessions",
        "show",
        "main",
        "--json",
    ]);
    let out = rampart(&[
        "--config",
        &cfg,
        "--sessions-dir",
        sessions,
        "compact",
        "main",
    ]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("failed during compact") && all.contains("required = true"),
        "{all}"
    );
    let after = rampart(&[
        "--sessions-dir",
        sessions,
        "sessions",
        "show",
        "main",
        "--json",
    ]);
    assert_eq!(before.stdout, after.stdout, "the session is as it was");
}

/// Not required: the first fault quarantines the engine, and no call of the rest of the
/// replay reaches it (each would have cost a fault, or a call deadline for a hang).
#[test]
fn a_quarantined_engine_is_not_called_again() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.log");
    let cfg = engine_config(dir.path(), "after_turn", false, &log);
    let session = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/sessions")
        .read_dir()
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .unwrap();
    let out = rampart(&[
        "--config",
        &cfg,
        "replay",
        session.to_str().unwrap(),
        "--window",
        "32000",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let calls: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let fault = calls
        .iter()
        .position(|c| c == "after_turn")
        .expect("after_turn was called");
    assert_eq!(
        calls.len(),
        fault + 1,
        "calls after the quarantine: {:?}",
        &calls[fault + 1..]
    );
    let rows = String::from_utf8_lossy(&out.stdout).lines().count();
    assert!(rows > 2, "the replay went on with legacy: {rows} rows");
}

/// Inside a turn: an overflow sends the turn to compaction, and the required engine panics
/// there. Before, the failure was logged and the turn went on to truncation and the overflow
/// error; now it stops with the engine's line, kind `required_engine`.
#[test]
fn a_required_engine_failing_in_a_turns_compaction_stops_the_turn() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.log");
    let cfg = config_for(
        dir.path(),
        "fx-compacts",
        &fixture("fx-compacts"),
        &format!(
            "required = true\n[plugins.engines.fx-compacts.config]\npanicIn = \"compact\"\n\
             callLog = \"{}\"\n\n[agents.defaults.model]\nprimary = \"sim/small\"\n\n\
             [[models.providers.sim.models]]\nid = \"small\"\ncontextWindow = 20000\n",
            log.display()
        ),
    );
    let sessions = dir.path().join("sessions");
    let prompt = "word ".repeat(24_000);
    let out = rampart(&[
        "--config",
        cfg.to_str().unwrap(),
        "--sessions-dir",
        sessions.to_str().unwrap(),
        "run",
        &prompt,
    ]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("failed during compact") && all.contains("required = true"),
        "{all}"
    );
    assert!(!all.contains("Context overflow"), "{all}");
    let calls = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        calls.lines().filter(|c| *c == "compact").count(),
        1,
        "one compaction, no retries with a failed engine: {calls}"
    );
}
