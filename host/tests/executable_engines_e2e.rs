//! Issue 29, item 1: engines that are programs of their own (`command = [...]`), speaking the
//! engine protocol of docs/engine-protocol.md. The example engines in examples/engines/ (Python,
//! and TypeScript on node) pass the conformance run through the pipe, serve `rampart run` and
//! `rampart replay` from plugins.toml, and every way an executable can fail is contained with
//! one line naming what happened.
//!
//! Missing python3, node or the pinned TypeScript compiler (`.ci/engines`) prints `SKIPPED:`,
//! unless `RAMPART_REQUIRE_EXECUTABLE_ENGINES=1` (CI), which makes it a failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use common::{QUARANTINED, Through, rampart, text, write_config};
use rampart_engine_api::protocol::AssembleParams;
use rampart_engine_test::conformance::run_on;
use rampart_host::config::{EngineCommand, ProcessSettings};
use rampart_host::engine::loader::{LoadRequest, load_executable};
use rampart_host::engine::services::{EventSink, HostServices};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/engines")
}

/// `why` as a `SKIPPED:` line, or a failure under `RAMPART_REQUIRE_EXECUTABLE_ENGINES=1`.
fn skipped(why: &str) {
    common::skipped(
        "RAMPART_REQUIRE_EXECUTABLE_ENGINES",
        "executable engines",
        why,
    );
}

fn runs(program: &str, arg: &str) -> bool {
    Command::new(program)
        .arg(arg)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// python3, or `None` after a `SKIPPED:` line.
fn python() -> Option<&'static str> {
    if runs("python3", "--version") {
        Some("python3")
    } else {
        skipped("python3 is not on PATH");
        None
    }
}

/// The node example compiled by the pinned `tsc` into `dir`: the `.js` to run with node.
fn compiled_node_example(dir: &Path) -> Option<PathBuf> {
    if !runs("node", "--version") {
        skipped("node is not on PATH");
        return None;
    }
    let modules = std::env::var_os("RAMPART_ENGINES_TS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_TARGET_TMPDIR"))
                .parent()
                .unwrap()
                .join("engines-ts")
        })
        .join("node_modules");
    let tsc = modules.join(".bin/tsc");
    if !tsc.exists() {
        skipped(&format!(
            "the TypeScript compiler is not installed at {} (run .ci/engines)",
            tsc.display()
        ));
        return None;
    }
    let out = Command::new(&tsc)
        .args(["--strict", "--module", "nodenext", "--target", "es2022"])
        .args(["--types", "node", "--typeRoots"])
        .arg(modules.join("@types"))
        .arg("--outDir")
        .arg(dir)
        .arg(examples().join("node/keep_last.ts"))
        .output()
        .unwrap();
    assert!(out.status.success(), "tsc: {}", text(&out));
    Some(dir.join("keep_last.js"))
}

fn request(id: &str, call_timeout: Duration) -> LoadRequest {
    LoadRequest {
        id: id.to_string(),
        verify_id: true,
        path: PathBuf::new(),
        config: serde_json::json!({"keep": 6}),
        services: Arc::new(HostServices::new(id, EventSink::tracing_only())),
        load_timeout: Duration::from_secs(10),
        call_timeout,
        max_log_level: None,
    }
}

fn command(program: &str, args: &[&Path]) -> EngineCommand {
    EngineCommand {
        program: PathBuf::from(program),
        args: args.iter().map(|a| a.display().to_string()).collect(),
        dir: std::env::temp_dir(),
    }
}

/// Starts `engine` as the slot would, checks it gets plain message arrays (it does not announce
/// `messageRefs`) by a typed `assemble` that keeps whole units, then runs the conformance
/// checks through its pipe.
fn conforms(engine: EngineCommand) {
    let handle = load_executable(
        request("keep-last", Duration::from_secs(10)),
        engine,
        ProcessSettings::default(),
    )
    .unwrap();
    assert!(handle.child_pid().is_some(), "it runs in a child process");
    assert!(
        !handle.speaks_message_refs(),
        "an engine that does not announce messageRefs gets plain JSON arrays"
    );
    let history = common::history(20);
    let out = handle
        .call(AssembleParams {
            messages: history.clone(),
            token_budget: Some(100_000),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(out.messages.len(), 6, "keep = 6");
    assert_eq!(
        &out.messages[..],
        &history[14..],
        "the newest six, unchanged"
    );
    let report = run_on(Ok(&Through(&handle)));
    assert!(report.passed(), "{report:#?}");
    assert_eq!(report.engine_id.as_deref(), Some("keep-last"));
    assert_eq!(report.checks.len(), 10, "{report:#?}");
}

#[test]
fn the_python_example_passes_the_conformance_run_through_its_pipe() {
    let Some(python) = python() else { return };
    conforms(command(python, &[&examples().join("python/keep_last.py")]));
}

#[test]
fn the_node_example_passes_the_conformance_run_through_its_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let Some(js) = compiled_node_example(dir.path()) else {
        return;
    };
    conforms(command("node", &[&js]));
}

/// A plugins.toml in `dir` selecting `keep-last` as `command`, with `extra` engine lines.
fn config(dir: &Path, command: &str, extra: &str) -> PathBuf {
    write_config(
        dir,
        &format!(
            "[plugins]\ncallTimeoutMs = 3000\nloadTimeoutMs = 5000\n[plugins.slots]\n\
             contextEngine = \"keep-last\"\n[plugins.engines.keep-last]\ncommand = {command}\n\
             {extra}\n[plugins.engines.keep-last.config]\nkeep = 4\n"
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

/// Selected in plugins.toml, the engine is listed as active in a child, answers `engines check`
/// and serves `rampart run` (several turns) and `rampart replay` without a quarantine.
fn serves(dir: &Path, cfg: &Path, check: &[&str]) {
    let list = run_in(dir, cfg, &["engines", "list"]);
    let all = text(&list);
    assert_eq!(list.status.code(), Some(0), "{all}");
    assert!(
        all.contains("* keep-last  active (Keep last N 0.1.0, in a child process, pid"),
        "{all}"
    );
    for turn in ["hello", "and again", "one more"] {
        let out = run_in(dir, cfg, &["run", turn]);
        let all = text(&out);
        assert_eq!(out.status.code(), Some(0), "{all}");
        assert!(!all.contains(QUARANTINED), "{all}");
        assert!(!String::from_utf8_lossy(&out.stdout).trim().is_empty());
    }
    let transcript = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/sessions/openclaw-main-3479d118.jsonl");
    let out = run_in(
        dir,
        cfg,
        &["replay", transcript.to_str().unwrap(), "--window", "32000"],
    );
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(all.contains("engine: keep-last"), "{all}");
    assert!(!all.contains(QUARANTINED), "{all}");
    let mut args = vec!["engines", "check", "--command"];
    args.extend_from_slice(check);
    let out = rampart(&args);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(all.contains("ok: command `"), "{all}");
    assert!(all.contains("id:          keep-last"), "{all}");
}

#[test]
fn the_python_example_is_selected_in_plugins_toml_and_serves_run_and_replay() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    // Relative to plugins.toml, like `path`: the script sits beside it.
    let script = dir.path().join("keep_last.py");
    std::fs::copy(examples().join("python/keep_last.py"), &script).unwrap();
    let cfg = config(dir.path(), &format!("[\"{python}\", \"keep_last.py\"]"), "");
    serves(dir.path(), &cfg, &[python, script.to_str().unwrap()]);
}

#[test]
fn the_node_example_is_selected_in_plugins_toml_and_serves_run_and_replay() {
    let dir = tempfile::tempdir().unwrap();
    let Some(js) = compiled_node_example(dir.path()) else {
        return;
    };
    let cfg = config(dir.path(), "[\"node\", \"keep_last.js\"]", "");
    serves(dir.path(), &cfg, &["node", js.to_str().unwrap()]);
}

/// `rampart run hello` completed with the built-in engine and logged one quarantine line, for
/// `operation`, containing each of `causes`.
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
            "context engine \"keep-last\" failed during {operation}"
        )) && line.contains("continuing with the built-in engine"),
        "{line}"
    );
    for cause in causes {
        assert!(line.contains(cause), "{cause:?} in {line}");
    }
}

/// A Python engine in `dir` that is the example with `patch` applied after importing it.
fn faulty(dir: &Path, patch: &str) -> String {
    let script = dir.join("faulty.py");
    std::fs::write(
        &script,
        format!(
            "import os, sys, time\nsys.path.insert(0, {:?})\nimport keep_last\n{patch}\n\
             keep_last.main()\n",
            examples().join("python").display().to_string()
        ),
    )
    .unwrap();
    "faulty.py".to_string()
}

#[test]
fn a_missing_executable_is_one_line_naming_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        "[\"rampart-no-such-engine-program\", \"x\"]",
        "",
    );
    let out = run_in(dir.path(), &cfg, &["run", "hello"]);
    contained(
        &out,
        "load",
        &[
            "cannot start the engine's command `rampart-no-such-engine-program x`",
            "No such file or directory",
            "fix `command` in plugins.toml",
        ],
    );
    // A path that does not exist, resolved against the config's directory.
    let cfg = config(dir.path(), "[\"./bin/engine\"]", "");
    let out = run_in(dir.path(), &cfg, &["run", "hello"]);
    let shown = dir.path().join("bin/engine");
    contained(&out, "load", &[&format!("command `{}`", shown.display())]);
}

#[test]
fn an_executable_that_exits_at_start_is_one_line_with_its_status_and_last_words() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let script = faulty(
        dir.path(),
        "sys.stderr.write('no model configured\\n'); sys.exit(3)",
    );
    let cfg = config(dir.path(), &format!("[\"{python}\", \"{script}\"]"), "");
    let out = run_in(dir.path(), &cfg, &["run", "hello"]);
    contained(
        &out,
        "load",
        &[
            "died while loading: exited with status 3",
            "no model configured",
        ],
    );
}

#[test]
fn an_executable_that_writes_garbage_to_stdout_is_killed_with_one_line() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let script = faulty(
        dir.path(),
        "sys.stdout.write('hello, I am an engine\\n'); sys.stdout.flush(); time.sleep(60)",
    );
    let cfg = config(dir.path(), &format!("[\"{python}\", \"{script}\"]"), "");
    let out = run_in(dir.path(), &cfg, &["run", "hello"]);
    contained(
        &out,
        "load",
        &["broke the protocol", "over the", "was killed"],
    );
}

#[test]
fn an_executable_that_hangs_past_the_deadline_is_killed() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let script = faulty(
        dir.path(),
        "keep_last.assemble = lambda keep, params: time.sleep(3600)",
    );
    let cfg = write_config(
        dir.path(),
        &format!(
            "[plugins]\ncallTimeoutMs = 500\n[plugins.slots]\ncontextEngine = \"keep-last\"\n\
             [plugins.engines.keep-last]\ncommand = [\"{python}\", \"{script}\"]\n"
        ),
    );
    let out = run_in(dir.path(), &cfg, &["run", "hello"]);
    contained(
        &out,
        "assemble",
        &[
            "no answer to `assemble` within 500 ms",
            "engine's process (pid",
            "was killed",
        ],
    );
}

#[test]
fn an_executable_that_dies_mid_call_is_quarantined_or_restarted() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let script = faulty(
        dir.path(),
        "keep_last.assemble = lambda keep, params: os._exit(9)",
    );
    let cfg = config(dir.path(), &format!("[\"{python}\", \"{script}\"]"), "");
    let out = run_in(dir.path(), &cfg, &["run", "hello"]);
    contained(
        &out,
        "assemble",
        &["the engine's process (pid", "died: exited with status 9"],
    );

    // Under a restart policy, a child that dies once is replaced and the call sent again: the
    // turn is served by the engine, and the restart is logged.
    let dir = tempfile::tempdir().unwrap();
    let once = dir.path().join("died-once");
    let script = faulty(
        dir.path(),
        &format!(
            "real = keep_last.assemble\n\
             def assemble(keep, params):\n\
             \x20   if not os.path.exists({once:?}):\n\
             \x20       open({once:?}, 'w').close(); os._exit(9)\n\
             \x20   return real(keep, params)\n\
             keep_last.assemble = assemble",
            once = once.display().to_string()
        ),
    );
    let cfg = config(
        dir.path(),
        &format!("[\"{python}\", \"{script}\"]"),
        "restart = { max = 2, within = \"1m\" }",
    );
    let out = run_in(dir.path(), &cfg, &["run", "hello"]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(!all.contains(QUARANTINED), "{all}");
    assert!(
        all.contains("the engine's process died (exited with status 9); restarting it"),
        "{all}"
    );
    assert!(once.exists(), "the first child died on its first call");
}

#[test]
fn command_and_path_together_or_a_bad_command_are_located_config_errors() {
    let dir = tempfile::tempdir().unwrap();
    for (body, expected) in [
        (
            "path = \"x.so\"\ncommand = [\"python3\", \"e.py\"]",
            "both `path` and `command`",
        ),
        ("command = []", "an empty array"),
        ("command = \"python3 e.py\"", "a non-empty array of strings"),
        ("command = [\"\"]", "the program to run"),
        (
            "command = [\"python3\"]\nisolation = \"inprocess\"",
            "always runs in its own process",
        ),
    ] {
        let cfg = write_config(
            dir.path(),
            &format!("[plugins.slots]\ncontextEngine = \"e\"\n[plugins.engines.e]\n{body}\n"),
        );
        let out = rampart(&["--config", cfg.to_str().unwrap(), "config", "check"]);
        let all = text(&out);
        assert_ne!(out.status.code(), Some(0), "{body}: {all}");
        assert!(
            all.contains(&format!("{}:", cfg.display())),
            "located: {all}"
        );
        assert!(all.contains("plugins.engines.e."), "names the key: {all}");
        assert!(all.contains(expected), "{body}: {all}");
    }
}

/// A program that answers the handshake with `engine` (the `ready` frame's field) and then
/// waits for the end of stdin.
fn answering(dir: &Path, engine: &str) -> String {
    let script = dir.join("answering.py");
    std::fs::write(
        &script,
        format!(
            "import json, struct, sys\n\
             head = sys.stdin.buffer.read(4)\n\
             sys.stdin.buffer.read(struct.unpack('>I', head)[0])\n\
             body = json.dumps({{'type': 'ready', 'version': 1, 'features': [], 'engine': {engine}}}).encode()\n\
             sys.stdout.buffer.write(struct.pack('>I', len(body)) + body)\n\
             sys.stdout.buffer.flush()\n\
             sys.stdin.buffer.read()\n"
        ),
    )
    .unwrap();
    "answering.py".to_string()
}

#[test]
fn an_executable_whose_handshake_fails_the_checks_is_refused_with_one_line() {
    let Some(python) = python() else { return };
    let info = |id: &str, version: &str| {
        format!(
            "{{'Ok': {{'id': '{id}', 'name': 'K', 'version': '0.1.0', 'protocol': \
             {{'protocol': 'rampart-engine', 'version': '{version}', 'features': []}}}}}}"
        )
    };
    for (engine, causes) in [
        (
            info("keep-last", "2.0.0"),
            vec!["incompatible engine ABI", "are different majors"],
        ),
        (
            info("other", "1.1.0"),
            vec!["reports engine id `other`", "loads it as `keep-last`"],
        ),
        (
            "{'Err': 'no model file at ./model.bin'}".to_string(),
            vec!["refused to start: no model file at ./model.bin"],
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let script = answering(dir.path(), &engine);
        let cfg = config(dir.path(), &format!("[\"{python}\", \"{script}\"]"), "");
        let out = run_in(dir.path(), &cfg, &["run", "hello"]);
        contained(&out, "load", &causes);
    }
}

/// Engine tools (API 1.2) through the pipe: a Python engine announces `engineTools`, lists a
/// tool and answers its calls; it passes the conformance run's `tools` check, and `rampart run`
/// offers its tool to the model and hands the engine's answer back as the tool's result. The
/// protocol document is all such an engine was written from.
#[test]
fn an_executable_engine_offers_tools_and_answers_them_through_the_pipe() {
    use crate::common::loopback::{Loopback, openai_text_stream, openai_tool_call_stream};
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("tooly.py");
    std::fs::write(
        &script,
        format!(
            r#"import json, os, sys
sys.path.insert(0, {examples:?})
from keep_last import read_frame, write_frame, assemble
TOOL = {{"name": "lookup_note", "description": "Look up a note by its key.",
        "parameters": {{"type": "object", "properties": {{"key": {{"type": "string"}}}}, "required": ["key"]}}}}
NOTES = {{"deploy": "the deploy key sits at vault path secret/quartz-17"}}
out = os.fdopen(os.dup(1), "wb")
os.dup2(2, 1)
pipe = sys.stdin.buffer
read_frame(pipe)
info = {{"id": "keep-last", "name": "Keep last N", "version": "0.1.0",
        "protocol": {{"protocol": "rampart-engine", "version": "1.2.0", "features": [{{"name": "engineTools"}}]}}}}
write_frame(out, {{"type": "ready", "version": 1, "features": ["shutdown"], "engine": {{"Ok": info}}}})
while (frame := read_frame(pipe)) is not None:
    if frame.get("type") == "shutdown":
        write_frame(out, {{"type": "reply", "id": frame["id"], "result": {{"ok": "{{}}"}}}})
        break
    if frame.get("type") != "call":
        continue
    method, params = frame["method"], json.loads(frame["payload"])
    if method == "assemble" and isinstance(params.get("messages"), list):
        result = {{"ok": json.dumps(assemble(50, params))}}
    elif method == "tools.list":
        result = {{"ok": json.dumps({{"tools": [TOOL]}})}}
    elif method == "tools.call" and params.get("name") == "lookup_note":
        key = (params.get("arguments") or {{}}).get("key")
        result = {{"ok": json.dumps({{"content": NOTES.get(key, "no note " + repr(key)), "isError": key not in NOTES}})}}
    elif method in ("assemble", "tools.call"):
        result = {{"err": {{"kind": 2, "message": method + ": parameters not understood", "details": None}}}}
    else:
        result = {{"err": {{"kind": 1, "message": "unsupported: " + method, "details": None}}}}
    write_frame(out, {{"type": "reply", "id": frame["id"], "result": result}})
"#,
            examples = examples().join("python").display().to_string()
        ),
    )
    .unwrap();

    // The conformance run through the pipe, its `tools` check included.
    let handle = load_executable(
        request("keep-last", Duration::from_secs(10)),
        command(python, &[&script]),
        ProcessSettings::default(),
    )
    .unwrap();
    let report = run_on(Ok(&Through(&handle)));
    assert!(report.passed(), "{report:#?}");
    assert!(report.checks.iter().any(|c| c.name == "tools"));

    // `rampart run`: the model calls the engine's tool and reads its answer.
    let up = Loopback::start();
    up.push(openai_tool_call_stream(
        "call_n1",
        "lookup_note",
        r#"{"key":"deploy"}"#,
    ));
    up.push(openai_text_stream("It is at secret/quartz-17.", 40, 6));
    let cfg = write_config(
        dir.path(),
        &format!(
            "[plugins]\ncallTimeoutMs = 5000\nloadTimeoutMs = 5000\n[plugins.slots]\n\
             contextEngine = \"keep-last\"\nmemory = \"none\"\n[plugins.engines.keep-last]\n\
             command = [\"{python}\", \"tooly.py\"]\n{}",
            crate::common::serve::upstream_config(&up.url())
        ),
    );
    let out = run_in(dir.path(), &cfg, &["run", "Where is the deploy key?"]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(!all.contains(QUARANTINED), "{all}");
    let requests = up.requests();
    assert_eq!(requests.len(), 2, "{all}");
    let first: serde_json::Value = serde_json::from_str(&requests[0].raw_body).unwrap();
    assert_eq!(
        first["tools"][0]["function"]["name"], "lookup_note",
        "{first}"
    );
    let second: serde_json::Value = serde_json::from_str(&requests[1].raw_body).unwrap();
    let result = common::last_message(&second);
    assert_eq!(result["role"], "tool");
    assert_eq!(
        result["content"],
        "the deploy key sits at vault path secret/quartz-17"
    );
}

/// `after_turn` is told the same token budget `assemble` was (the prompt budget, not the
/// window), and what the turn's request held by the host's count (`runtimeContext.promptTokens`,
/// the system prompt and tool schemas included): an engine that sweeps at a share of its budget
/// (the lossless engine) otherwise compares against a number 60 % too large at a 32k window and
/// sweeps only after the precheck has had to act. Both calls also say how far the tool-loop
/// guard cuts a tool result (`toolResultMaxChars`, engine API 1.4).
#[test]
fn after_turn_gets_the_budget_assemble_got_and_the_requests_count() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("seen.jsonl");
    std::fs::write(
        dir.path().join("recording.py"),
        format!(
            r#"import json, sys
sys.path.insert(0, {examples:?})
import keep_last
inner = keep_last.read_frame
def read_frame(pipe):
    frame = inner(pipe)
    if frame and frame.get("type") == "call" and frame["method"] in ("assemble", "after_turn"):
        params = json.loads(frame["payload"])
        with open({log:?}, "a") as f:
            f.write(json.dumps({{"method": frame["method"], "tokenBudget": params.get("tokenBudget"),
                                 "runtimeContext": params.get("runtimeContext"),
                                 "toolResultMaxChars": params.get("toolResultMaxChars")}}) + "\n")
    return frame
keep_last.read_frame = read_frame
keep_last.main()
"#,
            examples = examples().join("python").display().to_string(),
            log = log.display().to_string(),
        ),
    )
    .unwrap();
    let cfg = config(dir.path(), &format!("[\"{python}\", \"recording.py\"]"), "");
    let out = run_in(dir.path(), &cfg, &["run", "hello there"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let seen: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let budget_of = |method: &str| {
        seen.iter()
            .find(|v| v["method"] == method)
            .unwrap_or_else(|| panic!("no {method} call: {seen:?}"))["tokenBudget"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(budget_of("after_turn"), budget_of("assemble"), "{seen:?}");
    // Both are told how far the host's tool-loop guard cuts a tool result in the request.
    let cut_of = |method: &str| {
        seen.iter().find(|v| v["method"] == method).unwrap()["toolResultMaxChars"]
            .as_u64()
            .unwrap_or_else(|| panic!("no toolResultMaxChars in {method}: {seen:?}"))
    };
    assert_eq!(cut_of("after_turn"), cut_of("assemble"), "{seen:?}");
    assert!(cut_of("assemble") >= 1_024 / 2, "{seen:?}");
    let after = seen.iter().find(|v| v["method"] == "after_turn").unwrap();
    assert!(
        after["runtimeContext"]["promptTokens"]
            .as_u64()
            .unwrap_or(0)
            > 0,
        "{seen:?}"
    );
}

/// The Python example that speaks deltas (`messageRefs`, docs/engine-protocol.md 4.1) passes
/// the conformance run through its pipe, and answers what keep_last.py answers.
#[test]
fn the_python_deltas_example_passes_the_conformance_run_through_its_pipe() {
    let Some(python) = python() else { return };
    let handle = load_executable(
        request("keep-last", Duration::from_secs(10)),
        command(python, &[&examples().join("python/keep_last_deltas.py")]),
        ProcessSettings::default(),
    )
    .unwrap();
    assert!(handle.speaks_message_refs());
    // A growing history, as turns send it: the same six newest each time, as deltas.
    common::keeps_the_newest_six(&handle, &[20, 22, 30]);
    let report = run_on(Ok(&Through(&handle)));
    assert!(report.passed(), "{report:#?}");
    assert_eq!(report.checks.len(), 10, "{report:#?}");
}

/// Selected in plugins.toml, the deltas example replays the main job exactly as keep_last.py
/// does, and after the first turns it is sent only what is new: its `assemble` requests are
/// deltas against the list it kept, even though it declines `after_turn` and `maintain` every
/// turn (the host used to forget the kept list on any declined call and resend everything).
#[test]
fn the_deltas_example_is_sent_only_what_is_new_and_replays_like_the_plain_one() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("frames.jsonl");
    std::fs::write(
        dir.path().join("watched.py"),
        format!(
            r#"import json, sys
sys.path.insert(0, {examples:?})
import keep_last_deltas
inner = keep_last_deltas.read_frame
def read_frame(pipe):
    frame = inner(pipe)
    if frame and frame.get("type") == "call":
        messages = json.loads(frame["payload"]).get("messages")
        with open({log:?}, "a") as f:
            f.write(json.dumps({{"method": frame["method"],
                                 "delta": isinstance(messages, dict) and "base" in messages,
                                 "bytes": len(frame["payload"])}}) + "\n")
    return frame
keep_last_deltas.read_frame = read_frame
keep_last_deltas.main()
"#,
            examples = examples().join("python").display().to_string(),
            log = log.display().to_string(),
        ),
    )
    .unwrap();
    std::fs::copy(
        examples().join("python/keep_last.py"),
        dir.path().join("keep_last.py"),
    )
    .unwrap();
    let transcript = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/sessions/openclaw-main-3479d118.jsonl");
    let replay = |script: &str| {
        let cfg = config(dir.path(), &format!("[\"{python}\", \"{script}\"]"), "");
        let out = run_in(
            dir.path(),
            &cfg,
            &[
                "replay",
                transcript.to_str().unwrap(),
                "--window",
                "32000",
                "--json",
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let mut summary = v["summary"].clone();
        summary.as_object_mut().unwrap().remove("engine");
        summary.as_object_mut().unwrap().remove("servedBy");
        (summary, v["rows"].clone())
    };
    let plain = replay("keep_last.py");
    let deltas = replay("watched.py");
    assert_eq!(plain, deltas, "the same replay through either engine");
    let frames: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let assembles: Vec<_> = frames
        .iter()
        .filter(|f| f["method"] == "assemble")
        .collect();
    let as_deltas = assembles.iter().filter(|f| f["delta"] == true).count();
    assert!(assembles.len() > 500, "{}", assembles.len());
    assert!(
        as_deltas * 10 >= assembles.len() * 9,
        "{as_deltas} of {} assemble requests were deltas",
        assembles.len()
    );
    // `after_turn`, declined on the first turn, is not asked again (its parameters are the
    // whole request): each later turn gets its default, the answer ingested.
    let count = |method: &str| frames.iter().filter(|f| f["method"] == method).count();
    assert_eq!(
        count("after_turn"),
        1,
        "after_turn asked again after it was declined"
    );
    assert!(
        count("ingest_batch") >= assembles.len(),
        "{} ingest_batch calls for {} turns",
        count("ingest_batch"),
        assembles.len()
    );
}
