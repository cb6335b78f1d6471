//! End to end: `rampart config check` and the global flags.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;

#[test]
fn unknown_key_names_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(
        dir.path(),
        "[plugins.slots]\ncontextEngine = \"legacy\"\n\n[plugins.engines.window]\nrequird = true\n",
    );
    let out = rampart(&["config", "check", "--config", cfg.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let t = text(&out);
    assert!(t.contains(&format!("{}:5:1", cfg.display())), "{t}");
    assert!(
        t.contains("`plugins.engines.window.requird`")
            && t.contains("path, command, required, config"),
        "{t}"
    );
}

#[test]
fn wrong_type_names_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(dir.path(), "[plugins.slots]\ncontextEngine = 5\n");
    let out = rampart(&["config", "check", "--config", cfg.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let t = text(&out);
    assert!(
        t.contains(":2:17") && t.contains("`plugins.slots.contextEngine` must be a string"),
        "{t}"
    );
}

#[test]
fn unknown_engine_id_lists_the_available_ones() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(
        dir.path(),
        "[plugins.slots]\ncontextEngine = \"windw\"\n[plugins.engines.window]\npath = \"libwindow.so\"\n",
    );
    let out = rampart(&["config", "check", "--config", cfg.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let t = text(&out);
    assert!(
        t.contains("unknown engine id `windw`") && t.contains("legacy, window"),
        "{t}"
    );
    // The running host is not stopped by it: it falls back to legacy and says why.
    let list = rampart(&["engines", "list", "--config", cfg.to_str().unwrap()]);
    assert!(list.status.success());
    assert!(
        text(&list).contains("unknown engine id `windw`"),
        "{}",
        text(&list)
    );
}

#[test]
fn global_flags_work_before_and_after_the_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_for(dir.path(), "window", &fixture("rampart-window"), "");
    let c = cfg.to_str().unwrap();
    for args in [
        vec!["--config", c, "--log-format", "json", "config", "check"],
        vec!["config", "check", "--config", c, "--log-format", "json"],
    ] {
        let out = rampart(&args);
        assert!(out.status.success(), "{args:?}: {}", text(&out));
        assert!(text(&out).contains("engine window:"), "{}", text(&out));
    }
    // JSON logs: every stderr line is a JSON object.
    let broken = config_for(dir.path(), "fx", &dir.path().join("libnothing.so"), "");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rampart"))
        .args([
            "engines",
            "list",
            "--log-format",
            "json",
            "--config",
            broken.to_str().unwrap(),
        ])
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.trim().is_empty());
    for line in stderr.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        if v["fields"]["operation"] == "load" {
            assert_eq!(v["fields"]["engine"], "fx");
        }
    }
}

/// Issue 12, defect 8: `config check` refuses what `run` or `replay` would refuse or misread,
/// each with the file, line and key.
#[test]
fn config_check_refuses_what_any_command_would() {
    let cases = [
        (
            "[plugins.slots]\ncontextEngine = \"x\"\n[plugins.engines.x]\npath = \"/nonexistent/libx.so\"\n",
            ":3:",
            "plugins.engines.x.path",
        ),
        (
            "[agents.defaults]\ncontextToken = 5\n",
            ":2:",
            "agents.defaults.contextToken",
        ),
        ("[agents]\nlist = []\n", ":2:", "agents.list"),
        ("[models]\nfoo = 1\n", ":2:", "models.foo"),
        (
            "[agents.defaults.contextPruning]\nmode = \"cache-ttl\"\nttl = \"-5m\"\n",
            ":3:",
            "agents.defaults.contextPruning.ttl",
        ),
        (
            "[agents.defaults.contextPruning]\nmode = \"cache-ttl\"\nttl = \"soon\"\n",
            ":3:",
            "agents.defaults.contextPruning.ttl",
        ),
        (
            "[agents.defaults.compaction]\ntimeoutSeconds = 0\n",
            ":2:",
            "agents.defaults.compaction.timeoutSeconds",
        ),
        (
            "[agents.defaults.model]\nprimary = \"gpt-4o\"\n",
            ":2:",
            "agents.defaults.model.primary",
        ),
    ];
    for (body, line, key) in cases {
        let dir = tempfile::tempdir().unwrap();
        let cfg = write_config(dir.path(), body);
        let out = rampart(&["config", "check", "--config", cfg.to_str().unwrap()]);
        let t = text(&out);
        assert_eq!(out.status.code(), Some(1), "{body}\n{t}");
        assert!(
            t.contains(&format!("{}{line}", cfg.display())),
            "{body}\n{t}"
        );
        assert!(t.contains(key), "{body}\n{t}");
    }
}
