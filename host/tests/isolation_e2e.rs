//! Issue 18: engines in a child process. Each fault fixture runs in both modes: in the host's
//! process the test documents that the host dies (it runs `rampart` as a child and reads how it
//! ended); with `isolation = "process"` it proves containment: the command completes with the
//! built-in engine and one line naming the signal or exit status.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::Output;

use common::{QUARANTINED, config_for, fixture, rampart, text};

/// A config for fixture `name` in `mode` (`inprocess` or `process`), with `extra` lines.
fn config(dir: &Path, name: &str, mode: &str, extra: &str) -> String {
    let path = config_for(
        dir,
        name,
        &fixture(name),
        &format!("isolation = \"{mode}\"\n{extra}"),
    );
    path.to_str().unwrap().to_string()
}

fn run_hello(dir: &Path, cfg: &str) -> Output {
    let sessions = dir.join("sessions");
    rampart(&[
        "--config",
        cfg,
        "--sessions-dir",
        sessions.to_str().unwrap(),
        "run",
        "hello",
    ])
}

/// `rampart run hello` with the address space of the whole host limited to `mb` MiB, as the
/// out-of-memory killer would end it (the test must not eat the shared machine).
fn run_hello_limited(dir: &Path, cfg: &str, mb: u64) -> Output {
    let sessions = dir.join("sessions");
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_rampart"));
    command
        .args(["--config", cfg, "--sessions-dir"])
        .arg(&sessions)
        .args(["run", "hello"])
        .env_remove("RAMPART_CONFIG")
        .env("RUST_LOG", "warn")
        .env("MALLOC_ARENA_MAX", "2");
    let bytes = mb << 20;
    // SAFETY: setrlimit only, in the forked child before exec.
    unsafe {
        command.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command.output().unwrap()
}

/// The host completed, and logged exactly one quarantine line, for `operation`, containing
/// `cause`.
fn contained(out: &Output, engine: &str, operation: &str, cause: &str) {
    contained_with(out, 0, engine, operation, cause);
}

/// [`contained`] for a command whose fallback answer ends with exit status `code`.
fn contained_with(out: &Output, code: i32, engine: &str, operation: &str, cause: &str) {
    let all = text(out);
    assert_eq!(out.status.code(), Some(code), "the host finished: {all}");
    let lines: Vec<&str> = all.lines().filter(|l| l.contains(QUARANTINED)).collect();
    assert_eq!(lines.len(), 1, "one quarantine line: {all}");
    let line = lines[0];
    assert!(
        line.contains(&format!(
            "context engine \"{engine}\" failed during {operation}"
        )) && line.contains(cause)
            && line.contains("continuing with the built-in engine"),
        "{line}"
    );
}

fn died_by(out: &Output, signals: &[i32], what: &str) {
    assert!(
        out.status.signal().is_some_and(|s| signals.contains(&s)),
        "{what}: expected the host to die by one of {signals:?}, it ended with {:?}: {}",
        out.status,
        text(out)
    );
}

#[test]
fn a_segfault_in_assemble_kills_the_host_in_process_and_is_contained_in_a_child() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "fx-segv-assemble", "inprocess", "");
    died_by(&run_hello(dir.path(), &cfg), &[libc::SIGSEGV], "in process");

    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "fx-segv-assemble", "process", "");
    let out = run_hello(dir.path(), &cfg);
    contained(
        &out,
        "fx-segv-assemble",
        "assemble",
        "died: killed by signal 11 (SIGSEGV",
    );
    assert!(
        !String::from_utf8_lossy(&out.stdout).trim().is_empty(),
        "an answer"
    );
}

#[test]
fn an_abort_in_compact_kills_the_host_in_process_and_is_contained_in_a_child() {
    for mode in ["inprocess", "process"] {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(dir.path(), "fx-abort-compact", mode, "");
        let sessions = dir.path().join("sessions");
        let sessions = sessions.to_str().unwrap();
        let out = rampart(&["--config", &cfg, "--sessions-dir", sessions, "run", "hello"]);
        assert_eq!(out.status.code(), Some(0), "{mode}: {}", text(&out));
        let out = rampart(&[
            "--config",
            &cfg,
            "--sessions-dir",
            sessions,
            "compact",
            "main",
        ]);
        if mode == "inprocess" {
            died_by(&out, &[libc::SIGABRT], "in process");
        } else {
            // The built-in engine answers the compaction: a session this short has nothing
            // to compact, which `rampart compact` reports with status 1.
            contained_with(
                &out,
                1,
                "fx-abort-compact",
                "compact",
                "died: killed by signal 6 (SIGABRT",
            );
            assert!(
                text(&out).contains("engine legacy says"),
                "the fallback answered: {}",
                text(&out)
            );
        }
    }
}

#[test]
fn a_stack_overflow_kills_the_host_in_process_and_is_contained_in_a_child() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "fx-stack-overflow", "inprocess", "");
    let out = run_hello(dir.path(), &cfg);
    died_by(&out, &[libc::SIGSEGV, libc::SIGABRT], "in process");

    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "fx-stack-overflow", "process", "");
    let out = run_hello(dir.path(), &cfg);
    contained(
        &out,
        "fx-stack-overflow",
        "assemble",
        "died: killed by signal",
    );
    let all = text(&out);
    assert!(
        all.contains("overflowed its stack"),
        "the child's last words: {all}"
    );
}

#[test]
fn exit_in_the_constructor_ends_the_host_in_process_and_is_contained_in_a_child() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "fx-exit-ctor", "inprocess", "");
    let out = run_hello(dir.path(), &cfg);
    assert_eq!(
        out.status.code(),
        Some(3),
        "the library's exit status is the host's: {}",
        text(&out)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).trim().is_empty(),
        "no answer"
    );

    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "fx-exit-ctor", "process", "");
    let out = run_hello(dir.path(), &cfg);
    contained(
        &out,
        "fx-exit-ctor",
        "load",
        "died while loading: exited with status 3",
    );
}

#[test]
fn unbounded_allocation_kills_the_host_in_process_and_is_contained_in_a_child() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "fx-alloc-unbounded", "inprocess", "");
    let out = run_hello_limited(dir.path(), &cfg, 1024);
    died_by(&out, &[libc::SIGABRT, libc::SIGKILL], "in process");

    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        "fx-alloc-unbounded",
        "process",
        "limits = { memoryMb = 512 }",
    );
    let out = run_hello(dir.path(), &cfg);
    contained(
        &out,
        "fx-alloc-unbounded",
        "assemble",
        "died: killed by signal 6 (SIGABRT",
    );
    assert!(
        text(&out).contains("memory allocation of"),
        "{}",
        text(&out)
    );
}

#[test]
fn garbage_on_stdout_corrupts_the_host_output_in_process_and_is_logged_from_a_child() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "fx-stdout-garbage", "inprocess", "");
    let out = run_hello(dir.path(), &cfg);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("FX-GARBAGE assemble was here"),
        "in process the library writes into the host's own output: {}",
        text(&out)
    );

    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "fx-stdout-garbage", "process", "");
    let out = run_hello(dir.path(), &cfg);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        !stdout.contains("FX-GARBAGE"),
        "the host's output is clean: {stdout}"
    );
    assert!(
        !text(&out).contains(QUARANTINED),
        "the engine kept serving: {}",
        text(&out)
    );
    assert!(
        stderr.contains("engine process stderr")
            && stderr.contains("FX-GARBAGE assemble was here")
            && stderr.contains("fx-stdout-garbage"),
        "the stray output reaches the log with the engine's id: {stderr}"
    );
}

/// `required = true` stops the host with the death's line instead of falling back.
#[test]
fn a_required_engine_whose_child_dies_stops_the_host_with_that_line() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "fx-segv-assemble", "process", "required = true");
    let out = run_hello(dir.path(), &cfg);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("failed during assemble")
            && all.contains("killed by signal 11 (SIGSEGV")
            && all.contains("required = true"),
        "{all}"
    );
    assert!(
        !all.contains("continuing with the built-in engine"),
        "{all}"
    );
}

/// Under `restart`, a dying child is started again, with back-off, up to `max` times; then
/// the engine is quarantined with the line saying so.
#[test]
fn a_child_that_keeps_dying_is_restarted_up_to_max_then_quarantined() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        "fx-segv-assemble",
        "process",
        "restart = { max = 2, within = \"10m\" }",
    );
    let out = run_hello(dir.path(), &cfg);
    contained(
        &out,
        "fx-segv-assemble",
        "assemble",
        "restarted 2 times within 600 s, giving up",
    );
    let restarts = text(&out).matches("restarting it").count();
    assert_eq!(restarts, 2, "{}", text(&out));
}

/// An engine in a child works as it does in the host: its service calls (events) are answered
/// by the host, and its `tracing` reaches the host's log under its id.
#[test]
fn an_engine_in_a_child_reaches_the_hosts_services_and_log() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "fx-minimal", "process", "");
    let sessions = dir.path().join("sessions");
    let events = dir.path().join("events.jsonl");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rampart"))
        .args(["--config", &cfg, "--sessions-dir"])
        .arg(&sessions)
        .arg("--events")
        .arg(&events)
        .args(["run", "hello"])
        .env_remove("RAMPART_CONFIG")
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(!all.contains(QUARANTINED), "{all}");
    let events = std::fs::read_to_string(&events).unwrap();
    assert!(
        events
            .lines()
            .any(|l| l.contains("\"engine\":\"fx-minimal\"") && l.contains("fx_minimal_assemble")),
        "{events}"
    );
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.lines()
            .any(|l| l.contains("fx-minimal assembled") && l.contains("fx-minimal")),
        "{log}"
    );
}

/// `limits.cpuSeconds` ends a child that burns CPU (the kernel's SIGXCPU at the soft limit)
/// long before the call's deadline; in the host's process nothing would limit it.
#[test]
fn a_child_past_its_cpu_limit_is_ended_and_contained() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = common::write_config(
        dir.path(),
        &format!(
            "[plugins]\ncallTimeoutMs = 120000\n[plugins.slots]\ncontextEngine = \"fx-hang\"\n\
             [plugins.engines.fx-hang]\npath = \"{}\"\nisolation = \"process\"\n\
             limits = {{ cpuSeconds = 1 }}\n[plugins.engines.fx-hang.config]\nbusy = true\n",
            fixture("fx-hang").display()
        ),
    );
    let out = run_hello(dir.path(), cfg.to_str().unwrap());
    contained(
        &out,
        "fx-hang",
        "assemble",
        "killed by signal 24 (SIGXCPU: past limits.cpuSeconds)",
    );
}

/// A child never outlives its host: kill the host mid-call (the hang fixture holds the call),
/// and the child goes too.
#[test]
fn a_child_never_outlives_the_host() {
    let dir = tempfile::tempdir().unwrap();
    // A call deadline far beyond the test, so the host is surely mid-call when it is killed.
    let cfg = common::write_config(
        dir.path(),
        &format!(
            "[plugins]\ncallTimeoutMs = 600000\n[plugins.slots]\ncontextEngine = \"fx-hang\"\n\
             [plugins.engines.fx-hang]\npath = \"{}\"\nisolation = \"process\"\n",
            fixture("fx-hang").display()
        ),
    );
    let cfg = cfg.to_str().unwrap().to_string();
    let sessions = dir.path().join("sessions");
    let mut host = std::process::Command::new(env!("CARGO_BIN_EXE_rampart"))
        .args(["--config", &cfg, "--sessions-dir"])
        .arg(&sessions)
        .args(["run", "hello"])
        .env_remove("RAMPART_CONFIG")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let children = format!("/proc/{0}/task/{0}/children", host.id());
    let child = poll(|| {
        let all: Vec<u32> = std::fs::read_dir(format!("/proc/{}/task", host.id()))
            .ok()?
            .flatten()
            .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
            .flat_map(|c| {
                c.split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .collect::<Vec<u32>>()
            })
            .collect();
        all.first().copied()
    })
    .unwrap_or_else(|| panic!("no engine-host child under {children}"));
    host.kill().unwrap();
    host.wait().unwrap();
    let gone = poll(|| {
        let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).ok();
        // Gone, or a zombie waiting for init to reap it.
        match stat {
            None => Some(()),
            Some(s) if s.split_whitespace().nth(2) == Some("Z") => Some(()),
            Some(_) => None,
        }
    });
    assert!(gone.is_some(), "engine-host {child} outlived its host");
}

/// Polls `f` every 20 ms for up to 20 s (a loaded machine is slow; this is no timing claim).
fn poll<T>(mut f: impl FnMut() -> Option<T>) -> Option<T> {
    for _ in 0..1000 {
        if let Some(v) = f() {
            return Some(v);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    None
}

fn child_request(
    name: &str,
    restart: Option<rampart_host::config::RestartPolicy>,
) -> (
    rampart_host::engine::loader::LoadRequest,
    rampart_host::config::ProcessSettings,
) {
    use rampart_host::engine::services::{EventSink, HostServices};
    rampart_host::engine::process::set_engine_host_exe(env!("CARGO_BIN_EXE_rampart").into());
    let id = if name == "rampart-window" {
        "window"
    } else {
        name
    };
    let request = rampart_host::engine::loader::LoadRequest {
        id: id.to_string(),
        verify_id: true,
        path: fixture(name),
        config: serde_json::json!({}),
        services: std::sync::Arc::new(HostServices::new(id, EventSink::tracing_only())),
        load_timeout: std::time::Duration::from_secs(30),
        call_timeout: std::time::Duration::from_secs(60),
        max_log_level: None,
    };
    let settings = rampart_host::config::ProcessSettings {
        restart,
        ..Default::default()
    };
    (request, settings)
}

fn assemble(
    messages: rampart_engine_api::MessageList,
) -> rampart_engine_api::protocol::AssembleParams {
    rampart_engine_api::protocol::AssembleParams {
        session: rampart_engine_api::protocol::SessionRef {
            session_id: "iso".into(),
            ..Default::default()
        },
        messages,
        token_budget: Some(20_000),
        ..Default::default()
    }
}

/// Message lists cross the pipe as deltas: once the child holds a history, a turn that adds
/// two messages sends about those two, not the history. The answers are the in-process
/// engine's, and after the child is killed and restarted (its table lost), the host sends the
/// history in full once and the answers stay right.
#[test]
fn deltas_cross_the_pipe_and_survive_a_restart() {
    use rampart_host::engine::loader::{load_engine, load_engine_in_child};
    let restart = rampart_host::config::RestartPolicy {
        max: 1,
        within: std::time::Duration::from_secs(600),
    };
    let (request, settings) = child_request("rampart-window", Some(restart));
    let child = load_engine_in_child(request.clone(), settings).unwrap();
    let linked = load_engine(request).unwrap();
    let history = common::history(1_000).to_vec();
    let mut grown = history.clone();

    let first = child.call(assemble(history.clone().into())).unwrap();
    let expected = linked.call(assemble(history.clone().into())).unwrap();
    assert_eq!(first.messages.to_vec(), expected.messages.to_vec());
    let after_first = child.bytes_to_child().unwrap();

    grown.extend(common::history(2).iter().cloned());
    let second = child.call(assemble(grown.clone().into())).unwrap();
    let expected = linked.call(assemble(grown.clone().into())).unwrap();
    assert_eq!(second.messages.to_vec(), expected.messages.to_vec());
    let turn = child.bytes_to_child().unwrap() - after_first;
    assert!(
        turn * 50 < after_first,
        "a turn of two messages sent {turn} bytes; the whole history was {after_first}"
    );

    assert_eq!(child.restarts(), Some(0));
    assert_eq!(
        linked.restarts(),
        None,
        "an engine in the host has no process to restart"
    );
    // SAFETY: a signal to the child this test started.
    let pid = child.child_pid().unwrap();
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
    grown.extend(common::history(2).iter().cloned());
    let third = child.call(assemble(grown.clone().into())).unwrap();
    let expected = linked.call(assemble(grown.clone().into())).unwrap();
    assert_eq!(third.messages.to_vec(), expected.messages.to_vec());
    assert_ne!(child.child_pid(), Some(pid), "a new child serves");
    assert_eq!(child.restarts(), Some(1), "counted for /ui and /metrics");
}

/// `engines list` says where the active engine's code runs: a library's in a child by default,
/// in the host with `isolation = "inprocess"`.
#[test]
fn engines_list_says_whether_the_engine_runs_in_a_child() {
    for (extra, in_child) in [("", true), ("isolation = \"inprocess\"", false)] {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config_for(dir.path(), "fx-minimal", &fixture("fx-minimal"), extra);
        let out = rampart(&["engines", "list", "--config", cfg.to_str().unwrap()]);
        let all = text(&out);
        let row = all
            .lines()
            .find(|l| l.starts_with("* fx-minimal"))
            .unwrap_or_else(|| panic!("{all}"));
        assert!(row.contains("active ("), "{row}");
        assert_eq!(
            row.contains("in a child process, pid"),
            in_child,
            "{extra}: {row}"
        );
    }
}

/// The handshake of `rampart engine-host`, spoken by hand: a host of another protocol major is
/// refused with a message; a host that announces a feature the child does not know is served,
/// and the child announces only what it has.
#[test]
fn engine_host_handshake_refuses_another_major_and_ignores_unknown_features() {
    use rampart_host::engine::pipe::{
        FEATURES, Frame, Hello, PIPE_VERSION, read_frame, write_frame,
    };
    let hello = |version: u32| Hello {
        version,
        features: vec!["shutdown".into(), "telepathy".into()],
        engine_id: "fx-minimal".into(),
        verify_id: true,
        path: fixture("fx-minimal"),
        config: serde_json::json!({}),
        load_timeout_ms: 30_000,
        call_timeout_ms: 30_000,
        max_log_level: None,
    };
    for version in [PIPE_VERSION + 1, PIPE_VERSION] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_rampart"))
            .arg("engine-host")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = child.stdout.take().unwrap();
        write_frame(&mut stdin, &Frame::Hello(hello(version))).unwrap();
        let Frame::Ready(ready) = read_frame(&mut stdout).unwrap() else {
            panic!("expected ready")
        };
        assert_eq!(ready.version, PIPE_VERSION);
        if version == PIPE_VERSION {
            let info = ready.engine.unwrap();
            assert_eq!(info.id, "fx-minimal");
            assert_eq!(
                ready.features,
                FEATURES.iter().map(|f| f.to_string()).collect::<Vec<_>>()
            );
            drop(stdin);
            assert_eq!(
                child.wait().unwrap().code(),
                Some(0),
                "stdin's end ends the child"
            );
        } else {
            let why = ready.engine.unwrap_err();
            assert!(why.contains("engine-host protocol 1"), "{why}");
            assert_eq!(child.wait().unwrap().code(), Some(2));
        }
    }
}
