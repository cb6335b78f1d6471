//! Issue 29, item 3: engines that are WebAssembly components (`isolation = "wasm"`, the host's
//! `wasm` feature), run by wasmtime through `engine-api/wit/engine.wit`. The example
//! (`examples/engines/wasm`, keep-last in Rust for wasm32-wasip2) passes the conformance run and
//! serves `rampart run` and `rampart replay` from plugins.toml; a misbehaving component
//! (`tests/wasm-faults`: an infinite loop, a memory bomb, a trap, a panic, a file-system probe)
//! is contained with one quarantine line naming the cause, and the host carries on.
//!
//! The components are built with `cargo build --target wasm32-wasip2 --release` into
//! `target/wasm-guests` (`.ci/wasm` installs the target and fetches the crates first). When that
//! cannot be done the tests print `SKIPPED:`, unless `RAMPART_REQUIRE_WASM=1` (CI), which makes
//! it a failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use common::{QUARANTINED, Through, rampart, text, write_config};
use rampart_engine_api::ErrorKind;
use rampart_engine_test::conformance::run_on;
use rampart_host::config::WasmSettings;
use rampart_host::engine::handle::EngineOrigin;
use rampart_host::engine::loader::{LoadRequest, load_wasm};
use rampart_host::engine::services::{EventSink, HostServices};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `why` as a `SKIPPED:` line, or a failure under `RAMPART_REQUIRE_WASM=1`.
fn skipped(why: &str) {
    common::skipped("RAMPART_REQUIRE_WASM", "wasm engines", why);
}

/// Builds the guest crates (once per test run; cargo makes it a no-op when they are fresh) and
/// answers the directory of their `.wasm` files, or why not.
fn guests() -> Result<PathBuf, String> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
                .parent()
                .unwrap()
                .join("wasm-guests");
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            for krate in ["examples/engines/wasm", "tests/wasm-faults"] {
                let out = Command::new(&cargo)
                    .args(["build", "--offline", "--locked", "--release"])
                    .args(["--target", "wasm32-wasip2", "--manifest-path"])
                    .arg(repo().join(krate).join("Cargo.toml"))
                    .env("CARGO_TARGET_DIR", &target)
                    .output()
                    .map_err(|e| format!("cannot run cargo: {e}"))?;
                if !out.status.success() {
                    let err = String::from_utf8_lossy(&out.stderr);
                    let last: Vec<&str> = err.lines().rev().take(3).collect();
                    return Err(format!(
                        "cannot build {krate} for wasm32-wasip2 (run .ci/wasm): {}",
                        last.into_iter().rev().collect::<Vec<_>>().join(" / ")
                    ));
                }
            }
            Ok(target.join("wasm32-wasip2/release"))
        })
        .clone()
}

/// The component `name` (`keep_last_wasm`, `wasm_faults`), or `None` after a `SKIPPED:` line.
fn guest(name: &str) -> Option<PathBuf> {
    match guests() {
        Ok(dir) => Some(dir.join(format!("{name}.wasm"))),
        Err(why) => {
            skipped(&why);
            None
        }
    }
}

fn request(id: &str, path: &Path, config: serde_json::Value) -> LoadRequest {
    LoadRequest {
        id: id.to_string(),
        verify_id: true,
        path: path.to_path_buf(),
        config,
        services: Arc::new(HostServices::new(id, EventSink::tracing_only())),
        load_timeout: Duration::from_secs(10),
        call_timeout: Duration::from_secs(10),
        max_log_level: None,
    }
}

#[test]
fn the_wasm_example_passes_the_conformance_run() {
    let Some(wasm) = guest("keep_last_wasm") else {
        return;
    };
    let handle = load_wasm(
        request("keep-last", &wasm, serde_json::json!({"keep": 6})),
        WasmSettings::default(),
    )
    .unwrap();
    assert_eq!(handle.origin(), &EngineOrigin::Wasm(wasm.clone()));
    assert_eq!(handle.child_pid(), None, "it runs in the host's process");
    assert!(
        handle.speaks_message_refs(),
        "lists cross as deltas (messageRefs)"
    );
    // A growing history, as turns send it: after the first call only the new messages cross,
    // and the answer is a run of the call's own list.
    common::keeps_the_newest_six(&handle, &[20, 22, 30]);
    let report = run_on(Ok(&Through(&handle)));
    assert!(report.passed(), "{report:#?}");
    assert_eq!(report.engine_id.as_deref(), Some("keep-last"));
    assert_eq!(report.checks.len(), 10, "{report:#?}");
}

/// A plugins.toml in `dir` selecting `id` as the component `wasm` (copied beside it), with
/// `extra` lines in its table and its `config`.
fn config(dir: &Path, id: &str, wasm: &Path, extra: &str, engine_config: &str) -> PathBuf {
    let name = wasm.file_name().unwrap().to_str().unwrap();
    std::fs::copy(wasm, dir.join(name)).unwrap();
    write_config(
        dir,
        &format!(
            "[plugins]\ncallTimeoutMs = 3000\nloadTimeoutMs = 10000\n[plugins.slots]\n\
             contextEngine = \"{id}\"\n[plugins.engines.{id}]\npath = \"{name}\"\n\
             isolation = \"wasm\"\n{extra}\n[plugins.engines.{id}.config]\n{engine_config}\n"
        ),
    )
}

fn run_in(dir: &Path, cfg: &Path, args: &[&str]) -> Output {
    let sessions = dir.join("sessions");
    let mut all = vec![
        "--config",
        cfg.to_str().unwrap(),
        "--sessions-dir",
        sessions.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    rampart(&all)
}

#[test]
fn the_wasm_example_is_selected_in_plugins_toml_and_serves_run_and_replay() {
    let Some(wasm) = guest("keep_last_wasm") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "keep-last", &wasm, "", "keep = 4");
    let out = run_in(dir.path(), &cfg, &["config", "check"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let list = run_in(dir.path(), &cfg, &["engines", "list"]);
    let all = text(&list);
    assert_eq!(list.status.code(), Some(0), "{all}");
    assert!(
        all.contains("* keep-last  active (Keep last N 0.1.0)") && all.contains(".wasm (wasm)]"),
        "{all}"
    );
    for turn in ["hello", "and again", "one more"] {
        let out = run_in(dir.path(), &cfg, &["run", turn]);
        let all = text(&out);
        assert_eq!(out.status.code(), Some(0), "{all}");
        assert!(!all.contains(QUARANTINED), "{all}");
        assert!(!String::from_utf8_lossy(&out.stdout).trim().is_empty());
    }
    let transcript = repo().join("examples/sessions/openclaw-main-3479d118.jsonl");
    let out = run_in(
        dir.path(),
        &cfg,
        &["replay", transcript.to_str().unwrap(), "--window", "32000"],
    );
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(all.contains("engine: keep-last"), "{all}");
    assert!(!all.contains(QUARANTINED), "{all}");
    let out = rampart(&["engines", "check", wasm.to_str().unwrap()]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(all.contains("id:          keep-last"), "{all}");
}

/// `rampart run hello` completed with the built-in engine and logged one quarantine line for
/// `operation` containing each of `causes`.
fn contained(out: &Output, operation: &str, causes: &[&str]) {
    let all = text(out);
    assert_eq!(out.status.code(), Some(0), "the host finished: {all}");
    assert!(
        !String::from_utf8_lossy(&out.stdout).trim().is_empty(),
        "an answer: {all}"
    );
    let lines: Vec<&str> = all.lines().filter(|l| l.contains(QUARANTINED)).collect();
    assert_eq!(lines.len(), 1, "one quarantine line: {all}");
    let line = lines[0];
    assert!(
        line.contains(&format!(
            "context engine \"faults\" failed during {operation}"
        )) && line.contains("continuing with the built-in engine"),
        "{line}"
    );
    for cause in causes {
        assert!(line.contains(cause), "{cause:?} in {line}");
    }
}

/// `rampart run hello` with the faults component told to do `fault`.
fn run_fault(fault: &str, extra: &str) -> Option<Output> {
    let wasm = guest("wasm_faults")?;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        "faults",
        &wasm,
        extra,
        &format!("fault = \"{fault}\""),
    );
    let cfg_text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        cfg_text.replace("callTimeoutMs = 3000", "callTimeoutMs = 500"),
    )
    .unwrap();
    Some(run_in(dir.path(), &cfg, &["run", "hello"]))
}

#[test]
fn an_infinite_loop_is_stopped_at_the_call_deadline() {
    let Some(out) = run_fault("loop", "") else {
        return;
    };
    contained(
        &out,
        "assemble",
        &[
            "no answer to `assemble` within 500 ms (plugins.callTimeoutMs)",
            "the WebAssembly engine was interrupted",
        ],
    );
}

#[test]
fn a_memory_bomb_stops_at_the_memory_cap() {
    let Some(out) = run_fault("memory", "wasm = { memoryMb = 32 }") else {
        return;
    };
    contained(
        &out,
        "assemble",
        &[
            "the WebAssembly engine ran out of memory during `assemble`",
            "past its cap of 32 MiB (wasm.memoryMb)",
        ],
    );
}

#[test]
fn a_trap_and_a_panic_are_one_line_each() {
    let Some(out) = run_fault("trap", "") else {
        return;
    };
    contained(
        &out,
        "assemble",
        &[
            "the WebAssembly engine trapped during `assemble`",
            "unreachable",
        ],
    );
    let Some(out) = run_fault("panic", "") else {
        return;
    };
    contained(
        &out,
        "assemble",
        &[
            "the WebAssembly engine trapped during `assemble`",
            "its last words on stderr:",
            "faults: told to panic",
        ],
    );
}

#[test]
fn the_file_system_is_refused_unless_a_directory_is_granted() {
    // Nothing granted: the engine cannot even see /etc/passwd.
    let Some(out) = run_fault("fs", "") else {
        return;
    };
    contained(&out, "assemble", &["cannot read /etc/passwd"]);

    // `wasm.dir` grants one directory, at its own path, and nothing beside it.
    let wasm = guest("wasm_faults").unwrap();
    let granted = tempfile::tempdir().unwrap();
    let note = granted.path().join("note.txt");
    std::fs::write(&note, "granted line\nsecond\n").unwrap();
    let settings = WasmSettings {
        dir: Some(granted.path().to_path_buf()),
        ..WasmSettings::default()
    };
    let probe = |file: &Path| {
        let handle = load_wasm(
            request(
                "faults",
                &wasm,
                serde_json::json!({"fault": "fs", "file": file}),
            ),
            settings.clone(),
        )
        .unwrap();
        handle.call_json("assemble", "{\"messages\":[]}")
    };
    let answer = probe(&note).unwrap();
    assert!(
        answer.contains("\"systemPromptAddition\":\"granted line\""),
        "{answer}"
    );
    let refused = probe(Path::new("/etc/passwd")).unwrap_err();
    assert_eq!(refused.kind, ErrorKind::Engine, "{refused:?}");
    assert!(
        refused.message.contains("cannot read /etc/passwd"),
        "{refused:?}"
    );
}

#[test]
fn host_services_answer_through_the_import() {
    let Some(wasm) = guest("wasm_faults") else {
        return;
    };
    let handle = load_wasm(
        request("faults", &wasm, serde_json::json!({"fault": "service"})),
        WasmSettings::default(),
    )
    .unwrap();
    // A host without a sessions directory has no state directory: the engine gets the host's
    // `unsupported`, through the WIT import, as kind 1.
    let err = handle.call_json("assemble", "{}").unwrap_err();
    assert!(err.message.contains("state.dir failed: kind 1"), "{err:?}");
}

#[test]
fn a_file_that_is_not_a_component_is_one_line_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("junk.wasm");
    std::fs::write(&wasm, b"\0asm not really").unwrap();
    let cfg = write_config(
        dir.path(),
        "[plugins.slots]\ncontextEngine = \"faults\"\n[plugins.engines.faults]\n\
         path = \"junk.wasm\"\nisolation = \"wasm\"\n",
    );
    let out = run_in(dir.path(), &cfg, &["run", "hello"]);
    contained(
        &out,
        "load",
        &[&format!(
            "`{}` cannot be run as a WebAssembly engine",
            wasm.display()
        )],
    );
}
