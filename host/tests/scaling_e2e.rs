//! Scaling: `sessions show` of a large session stays within twice the file in memory, and
//! prints what a load of it gives. The real binary runs; its peak resident set comes from the
//! kernel (`/proc/PID/status`), not from a timing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::json;

use crate::common;

/// Writes a pi v3 session of `entries` tiny alternating user/assistant messages (as
/// `host/benches/gen_tiny_transcript.py` makes them) and returns its size.
fn tiny_session(path: &Path, entries: usize) -> u64 {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let header = json!({"type": "session", "version": 3, "id": "tiny-session",
        "timestamp": "2026-02-01T00:00:00.000Z", "cwd": "/tmp/tiny"});
    writeln!(out, "{header}").unwrap();
    let mut parent: Option<String> = None;
    for i in 0..entries {
        let id = format!("{i:08x}");
        let message = if i % 2 == 0 {
            json!({"role": "user", "content": [{"type": "text", "text": format!("alpha bravo {i}")}],
                "timestamp": 1_770_000_000_000u64 + i as u64})
        } else {
            json!({"role": "assistant", "content": [{"type": "text", "text": "ok charlie delta"}],
                "api": "openai-completions", "provider": "sim", "model": "tiny",
                "usage": {"input": 0, "output": 4, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 4,
                    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
                "stopReason": "stop", "timestamp": 1_770_000_000_000u64 + i as u64})
        };
        let entry = json!({"type": "message", "id": id, "parentId": parent,
            "timestamp": "2026-02-01T00:00:00.000Z", "message": message});
        writeln!(out, "{entry}").unwrap();
        parent = Some(id);
    }
    out.flush().unwrap();
    std::fs::metadata(path).unwrap().len()
}

/// The high-water mark of `pid`'s resident set (`VmHWM`), in bytes, while it runs.
fn vm_hwm(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Runs `rampart` with `args` and returns whether it succeeded and the peak of its resident
/// set, read from `/proc` (`VmHWM`) each time a piece of its output has been read. The output
/// is far larger than a pipe holds, so the process is alive (waiting for the pipe) at each
/// read; and what `sessions show` builds before printing (the structure, or formerly the
/// whole load) is built before its first line, so the mark read then already holds it.
///
/// Why not `wait4`'s `ru_maxrss`: Linux carries a process's high-water mark across `exec`, so
/// a child of this (large, multi-threaded) test process reports the test process's own peak.
fn peak_rss_while_printing(args: &[&str]) -> (bool, u64) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rampart"))
        .args(args)
        .env_remove("RAMPART_CONFIG")
        .env("RUST_LOG", "error")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut buf = vec![0u8; 1 << 16];
    let (mut peak, mut samples) = (0, 0);
    loop {
        let n = stdout.read(&mut buf).unwrap();
        if let Some(mark) = vm_hwm(child.id()) {
            peak = peak.max(mark);
            samples += 1;
        }
        if n == 0 {
            break;
        }
    }
    let ok = child.wait().unwrap().success();
    assert!(samples > 10, "only {samples} readings of the peak");
    (ok, peak)
}

/// A session of 150,000 tiny entries (about 45 MB): a load held every entry whole, some 2.5 KB
/// each for entries this small, so `sessions show` peaked near 8 times the file. It now reads
/// the structure (about 100 bytes an entry) and then one entry at a time.
#[test]
fn sessions_show_of_a_large_session_stays_within_twice_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tiny.jsonl");
    let size = tiny_session(&file, 150_000);
    let sessions = dir.path().join("sessions");
    let file_arg = file.to_str().unwrap();
    let sessions_arg = sessions.to_str().unwrap();
    for json in [false, true] {
        let mut args = vec!["--sessions-dir", sessions_arg, "sessions", "show", file_arg];
        if json {
            args.push("--json");
        }
        let (ok, peak) = peak_rss_while_printing(&args);
        assert!(ok);
        assert!(
            peak <= 2 * size,
            "sessions show{} peaked at {} MB for a {} MB file",
            if json { " --json" } else { "" },
            peak >> 20,
            size >> 20
        );
    }
}

/// What the streamed `sessions show` prints is what it printed from a load: the header line
/// (entries, leaf, messages, thinking, model), then one line per message, in order.
#[test]
fn sessions_show_streams_every_message_of_the_branch_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tiny.jsonl");
    tiny_session(&file, 2_001);
    let sessions = dir.path().join("sessions");
    let out = common::rampart(&[
        "--sessions-dir",
        sessions.to_str().unwrap(),
        "sessions",
        "show",
        file.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", common::text(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[1],
        "entries: 2001, leaf: 000007d0, messages on the branch: 2001, thinking: off, model: sim/tiny"
    );
    assert_eq!(lines.len(), 2 + 2_001);
    assert!(lines[2].starts_with("    0  user "), "{}", lines[2]);
    assert!(lines[2].ends_with("alpha bravo 0"), "{}", lines[2]);
    assert!(lines[2002].starts_with(" 2000  user "), "{}", lines[2002]);
    assert!(lines[2002].ends_with("alpha bravo 2000"), "{}", lines[2002]);

    let out = common::rampart(&[
        "--sessions-dir",
        sessions.to_str().unwrap(),
        "sessions",
        "show",
        file.to_str().unwrap(),
        "--json",
    ]);
    assert!(out.status.success(), "{}", common::text(&out));
    let messages: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(messages.len(), 2_001);
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(messages[2000]["content"][0]["text"], "alpha bravo 2000");
}
