//! Issue 29 item 2: engines in C and C++ through the C ABI (`engine-api/include/rampart_engine.h`).
//!
//! Each test compiles its engine with the machine's compiler into a temporary directory: the
//! README's keep-last engine in C and in C++ (`examples/engines/`), and `c_abi/faults.c` built
//! with one `FAULT_*` define per broken rule. A missing `gcc`/`g++` prints `SKIPPED: …` and
//! passes, unless `RAMPART_REQUIRE_CC=1` (set by `.ci/run`) makes it a failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use rampart_engine_test::conformance;
use rampart_host::engine::loader::{LoadRequest, load_engine, load_engine_in_child};
use rampart_host::engine::services::{EventSink, HostServices};

use crate::common::{QUARANTINED, Through, config_for, rampart, text};

/// The repository's root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Whether `compiler` runs here; `None` after printing why the test is skipped.
fn compiler(compiler: &str) -> Option<&str> {
    let found = Command::new(compiler)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if found {
        return Some(compiler);
    }
    if std::env::var("RAMPART_REQUIRE_CC").is_ok_and(|v| v == "1") {
        panic!("`{compiler}` is required (RAMPART_REQUIRE_CC=1) but does not run");
    }
    println!("SKIPPED: `{compiler}` is not installed; the C ABI engines cannot be compiled");
    None
}

/// Compiles `source` (relative to the repository) with `defines` into `dir/lib<name>.so`.
fn build(cc: &str, source: &str, defines: &[&str], dir: &Path, name: &str) -> PathBuf {
    let out = dir.join(format!("lib{name}.so"));
    let std = if cc.ends_with("++") {
        "-std=c++17"
    } else {
        "-std=c11"
    };
    let result = Command::new(cc)
        .args([std, "-O2", "-shared", "-fPIC", "-Wall", "-Wextra"])
        .arg("-I")
        .arg(repo().join("engine-api/include"))
        .args(defines)
        .arg(repo().join(source))
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        result.status.success(),
        "{cc} {source} {defines:?}: {}",
        text(&result)
    );
    out
}

/// The two examples: compiler, source, name.
const EXAMPLES: [(&str, &str, &str); 2] = [
    ("gcc", "examples/engines/c/keep_last.c", "Keep last N (C)"),
    (
        "g++",
        "examples/engines/cpp/keep_last.cpp",
        "Keep last N (C++)",
    ),
];

fn request(path: &Path, config: serde_json::Value) -> LoadRequest {
    LoadRequest {
        id: "keep-last".into(),
        verify_id: true,
        path: path.to_path_buf(),
        config,
        services: Arc::new(HostServices::new("keep-last", EventSink::tracing_only())),
        load_timeout: Duration::from_secs(20),
        call_timeout: Duration::from_secs(20),
        max_log_level: None,
    }
}

#[test]
fn the_c_and_cpp_examples_pass_the_conformance_run_in_process_and_in_a_child() {
    for (cc, source, name) in EXAMPLES {
        let Some(cc) = compiler(cc) else { return };
        let dir = tempfile::tempdir().unwrap();
        let lib = build(cc, source, &[], dir.path(), "keep_last");
        let config = serde_json::json!({"keep": 6});

        let report = conformance::run(&lib, config.clone());
        assert!(report.passed(), "{source}, the kit's loader: {report:#?}");
        assert_eq!(report.engine_id.as_deref(), Some("keep-last"));

        let here = load_engine(request(&lib, config.clone())).unwrap();
        assert_eq!(here.info().name, name);
        assert_eq!(here.child_pid(), None);
        let report = conformance::run_on(Ok(&Through(&here)));
        assert!(
            report.passed(),
            "{source}, in the host's process: {report:#?}"
        );

        let child = load_engine_in_child(request(&lib, config), Default::default()).unwrap();
        assert!(child.child_pid().is_some(), "{source} runs in a child");
        let report = conformance::run_on(Ok(&Through(&child)));
        assert!(report.passed(), "{source}, in a child: {report:#?}");

        let out = rampart(&["engines", "check", lib.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        assert!(
            text(&out).contains(&format!("name:        {name}")),
            "{}",
            text(&out)
        );
    }
}

/// The example keeps the newest whole units: a tool call is never cut from its results, and
/// the messages come back byte for byte.
#[test]
fn the_c_examples_keep_the_newest_messages_and_tool_calls_with_their_results() {
    use rampart_engine_api::protocol::{AssembleParams, AssembleResult};
    use rampart_engine_test::build as msg;
    let history: Vec<_> = vec![
        msg::user("first"),
        msg::assistant_calls(&[("c1", "read", serde_json::json!({"path": "a"}))]),
        msg::tool_result("c1", "read", "A"),
        msg::user("second \"quoted\" \\ text"),
        msg::assistant_calls(&[
            ("c2", "read", serde_json::json!({"path": "b"})),
            ("c3", "read", serde_json::json!({"path": "c"})),
        ]),
        msg::tool_result("c2", "read", "B"),
        msg::tool_result("c3", "read", "C"),
        msg::assistant_text("done"),
    ];
    let history: rampart_engine_api::MessageList = history.into_iter().map(Arc::new).collect();
    for (cc, source, _) in EXAMPLES {
        let Some(cc) = compiler(cc) else { return };
        let dir = tempfile::tempdir().unwrap();
        let lib = build(cc, source, &[], dir.path(), "keep_last");
        for (keep, expect_from) in [(4, 4), (3, 7), (5, 3), (100, 0), (0, 8)] {
            let engine = load_engine(request(&lib, serde_json::json!({"keep": keep}))).unwrap();
            let out: AssembleResult = engine
                .call(AssembleParams {
                    messages: history.clone(),
                    ..Default::default()
                })
                .unwrap();
            let expected: Vec<_> = history[expect_from..].to_vec();
            assert_eq!(
                out.messages.to_vec(),
                expected,
                "{source} with keep = {keep} keeps from message {expect_from}"
            );
            engine.shutdown().unwrap();
        }
    }
}

#[test]
fn a_c_engine_selected_in_plugins_toml_serves_runs_in_process_and_in_a_child() {
    for (cc, source, name) in EXAMPLES {
        let Some(cc) = compiler(cc) else { return };
        for mode in ["inprocess", "process"] {
            let dir = tempfile::tempdir().unwrap();
            let lib = build(cc, source, &[], dir.path(), "keep_last");
            let cfg = config_for(
                dir.path(),
                "keep-last",
                &lib,
                &format!("isolation = \"{mode}\"\n[plugins.engines.keep-last.config]\nkeep = 5"),
            );
            let cfg = cfg.to_str().unwrap();
            let sessions = dir.path().join("sessions");
            let sessions = sessions.to_str().unwrap();
            for prompt in ["hello", "and again"] {
                let out = rampart(&["--config", cfg, "--sessions-dir", sessions, "run", prompt]);
                assert_eq!(
                    out.status.code(),
                    Some(0),
                    "{source} {mode}: {}",
                    text(&out)
                );
                assert!(
                    !text(&out).contains(QUARANTINED),
                    "{source} {mode}: {}",
                    text(&out)
                );
                assert!(
                    !String::from_utf8_lossy(&out.stdout).trim().is_empty(),
                    "an answer"
                );
            }
            let out = rampart(&["--config", cfg, "engines", "probe"]);
            let all = text(&out);
            assert_eq!(out.status.code(), Some(0), "{all}");
            assert!(all.contains("engine: keep-last ("), "{all}");
            assert!(
                all.contains("assemble: 12 messages in, 5 out"),
                "{source} {mode}: {all}"
            );
            assert!(!all.contains("warning:"), "{all}");
            let out = rampart(&["--config", cfg, "engines", "list"]);
            let all = text(&out);
            assert!(all.contains(&format!("active ({name} 0.1.0")), "{all}");
            assert_eq!(
                all.contains("in a child process"),
                mode == "process",
                "{mode}: {all}"
            );
        }
    }
}

/// `rampart engines check` on a fault library: exit status 1 and one `error:` line.
fn refused(lib: &Path) -> String {
    let out = rampart(&["engines", "check", lib.to_str().unwrap()]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    let errors: Vec<&str> = all.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{all}");
    errors[0].to_string()
}

#[test]
fn a_wrong_abi_version_or_a_null_table_is_refused_with_one_line() {
    let Some(cc) = compiler("gcc") else { return };
    let dir = tempfile::tempdir().unwrap();
    let faults = "host/tests/c_abi/faults.c";
    let lib = build(cc, faults, &["-DFAULT_VERSION"], dir.path(), "version");
    let line = refused(&lib);
    assert!(
        line.contains("abi_version 7")
            && line.contains("C ABI 1")
            && line.contains("libversion.so"),
        "{line}"
    );
    let lib = build(cc, faults, &["-DFAULT_NULL_TABLE"], dir.path(), "null");
    let line = refused(&lib);
    assert!(
        line.contains("returned NULL") && line.contains("libnull.so"),
        "{line}"
    );

    // Selected for a run, the library's refusal is the one quarantine line and the built-in
    // engine answers.
    let cfg = config_for(dir.path(), "c-fault", &dir.path().join("libversion.so"), "");
    let sessions = dir.path().join("sessions");
    let out = rampart(&[
        "--config",
        cfg.to_str().unwrap(),
        "--sessions-dir",
        sessions.to_str().unwrap(),
        "run",
        "hello",
    ]);
    contained(&out, "load", "abi_version 7");
}

/// The host finished, with one quarantine line for `operation` naming `cause`.
fn contained(out: &Output, operation: &str, cause: &str) {
    let all = text(out);
    assert_eq!(out.status.code(), Some(0), "the host finished: {all}");
    let lines: Vec<&str> = all.lines().filter(|l| l.contains(QUARANTINED)).collect();
    assert_eq!(lines.len(), 1, "one quarantine line: {all}");
    assert!(
        lines[0].contains(&format!(
            "context engine \"c-fault\" failed during {operation}"
        )) && lines[0].contains(cause),
        "{}",
        lines[0]
    );
    assert!(
        !String::from_utf8_lossy(&out.stdout).trim().is_empty(),
        "the built-in engine answered: {all}"
    );
}

fn run_fault(define: &str, mode: &str) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let lib = build(
        "gcc",
        "host/tests/c_abi/faults.c",
        &[define],
        dir.path(),
        "fault",
    );
    let cfg = config_for(
        dir.path(),
        "c-fault",
        &lib,
        &format!("isolation = \"{mode}\""),
    );
    let sessions = dir.path().join("sessions");
    rampart(&[
        "--config",
        cfg.to_str().unwrap(),
        "--sessions-dir",
        sessions.to_str().unwrap(),
        "run",
        "hello",
    ])
}

#[test]
fn garbage_json_and_an_unknown_status_are_contained_with_one_line_in_both_modes() {
    if compiler("gcc").is_none() {
        return;
    }
    for mode in ["inprocess", "process"] {
        let out = run_fault("-DFAULT_GARBAGE", mode);
        contained(&out, "assemble", "does not decode");
        let out = run_fault("-DFAULT_STATUS", mode);
        contained(&out, "assemble", "status 42, which C ABI 1 does not define");
        assert!(
            text(&out).contains("something odd"),
            "the engine's message: {}",
            text(&out)
        );
    }
}

#[test]
fn an_abort_or_a_segfault_in_a_c_engine_is_contained_in_a_child() {
    if compiler("gcc").is_none() {
        return;
    }
    let out = run_fault("-DFAULT_ABORT", "process");
    contained(&out, "assemble", "died: killed by signal 6 (SIGABRT");
    let out = run_fault("-DFAULT_SEGV", "process");
    contained(&out, "assemble", "died: killed by signal 11 (SIGSEGV");
}

/// The README's smallest C engine compiles as printed, loads, and keeps every message. (It
/// does not validate parameters, so it would fail the conformance run's `invalid-params` check,
/// which the keep-last examples pass.)
#[test]
fn the_readmes_c_engine_compiles_loads_and_keeps_every_message() {
    let Some(cc) = compiler("gcc") else { return };
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let section = &readme[readme
        .find("### An engine in C")
        .expect("the README's C section")..];
    let start = section.find("```c\n").unwrap() + 5;
    let code = &section[start..start + section[start..].find("```").unwrap()];
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("keep_all.c");
    std::fs::write(&source, code).unwrap();
    let lib = dir.path().join("libkeep_all.so");
    let out = Command::new(cc)
        .args(["-shared", "-fPIC", "-I"])
        .arg(repo().join("engine-api/include"))
        .arg(&source)
        .arg("-o")
        .arg(&lib)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let out = rampart(&["engines", "check", lib.to_str().unwrap()]);
    assert!(
        text(&out).contains("id:          keep-all"),
        "{}",
        text(&out)
    );
    let mut req = request(&lib, serde_json::json!({}));
    req.id = "keep-all".into();
    let engine = load_engine(req).unwrap();
    let history = crate::common::history(30);
    let out = engine
        .call(rampart_engine_api::protocol::AssembleParams {
            messages: history.clone(),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(out.messages, history);
    engine.shutdown().unwrap();
}

/// The header's structs and the host's `#[repr(C)]` mirrors agree on every size and offset, as
/// the machine's C compiler lays them out.
#[test]
fn the_header_and_the_hosts_mirror_agree_on_the_layout() {
    use rampart_engine_api::c_abi::{CCallCtx, CEngineTable, CHostTable};
    use std::mem::{offset_of, size_of};
    let Some(cc) = compiler("gcc") else { return };
    let dir = tempfile::tempdir().unwrap();
    let fields: [(&str, &str, usize); 18] = [
        (
            "rampart_host",
            "abi_version",
            offset_of!(CHostTable, abi_version),
        ),
        (
            "rampart_host",
            "host_data",
            offset_of!(CHostTable, host_data),
        ),
        ("rampart_host", "log", offset_of!(CHostTable, log)),
        ("rampart_host", "call", offset_of!(CHostTable, call)),
        (
            "rampart_host",
            "free_buffer",
            offset_of!(CHostTable, free_buffer),
        ),
        (
            "rampart_call_ctx",
            "ctx_data",
            offset_of!(CCallCtx, ctx_data),
        ),
        (
            "rampart_call_ctx",
            "deadline_unix_ms",
            offset_of!(CCallCtx, deadline_unix_ms),
        ),
        (
            "rampart_call_ctx",
            "is_cancelled",
            offset_of!(CCallCtx, is_cancelled),
        ),
        (
            "rampart_engine_table_v1",
            "abi_version",
            offset_of!(CEngineTable, abi_version),
        ),
        (
            "rampart_engine_table_v1",
            "engine_info_json",
            offset_of!(CEngineTable, engine_info_json),
        ),
        (
            "rampart_engine_table_v1",
            "create",
            offset_of!(CEngineTable, create),
        ),
        (
            "rampart_engine_table_v1",
            "call",
            offset_of!(CEngineTable, call),
        ),
        (
            "rampart_engine_table_v1",
            "free_buffer",
            offset_of!(CEngineTable, free_buffer),
        ),
        (
            "rampart_engine_table_v1",
            "destroy",
            offset_of!(CEngineTable, destroy),
        ),
        ("rampart_host", "", size_of::<CHostTable>()),
        ("rampart_call_ctx", "", size_of::<CCallCtx>()),
        ("rampart_engine_table_v1", "", size_of::<CEngineTable>()),
        (
            "",
            "RAMPART_ENGINE_ABI_VERSION",
            rampart_engine_api::c_abi::C_ABI_VERSION as usize,
        ),
    ];
    let mut program = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include \"rampart_engine.h\"\nint main(void) {\n",
    );
    for (ty, field, _) in &fields {
        let expr = match (ty.is_empty(), field.is_empty()) {
            (true, _) => field.to_string(),
            (false, true) => format!("sizeof({ty})"),
            (false, false) => format!("offsetof({ty}, {field})"),
        };
        program.push_str(&format!("    printf(\"%zu\\n\", (size_t)({expr}));\n"));
    }
    program.push_str("    return 0;\n}\n");
    let source = dir.path().join("layout.c");
    std::fs::write(&source, program).unwrap();
    let exe = dir.path().join("layout");
    let out = Command::new(cc)
        .arg("-I")
        .arg(repo().join("engine-api/include"))
        .arg(&source)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let out = Command::new(&exe).output().unwrap();
    let printed: Vec<usize> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    for ((ty, field, rust), c) in fields.iter().zip(&printed) {
        assert_eq!(
            rust, c,
            "{ty} {field}: Rust says {rust}, the C compiler {c}"
        );
    }
    assert_eq!(printed.len(), fields.len());
}

/// The C example announces `messageRefs` and reads the delta form (protocol 4.1): as a
/// history grows turn by turn it is sent only the new messages and answers with a run of
/// them, in the host's process and in a child, and keeps answering right.
#[test]
fn the_c_example_is_sent_deltas_and_keeps_answering_right_as_the_history_grows() {
    let (cc, source, _) = EXAMPLES[0];
    let Some(cc) = compiler(cc) else { return };
    let dir = tempfile::tempdir().unwrap();
    let lib = build(cc, source, &[], dir.path(), "keep_last");
    let config = serde_json::json!({"keep": 6});
    let engines = [
        load_engine(request(&lib, config.clone())).unwrap(),
        load_engine_in_child(request(&lib, config), Default::default()).unwrap(),
    ];
    for engine in engines {
        assert!(
            engine.speaks_message_refs(),
            "{source} announces messageRefs"
        );
        // Growing, then shorter (a branch switch: a delta with a shorter keep).
        crate::common::keeps_the_newest_six(&engine, &[20, 22, 30, 31, 2_000, 2_002, 10]);
        engine.shutdown().unwrap();
    }
}
