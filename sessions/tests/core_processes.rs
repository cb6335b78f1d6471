//! Several processes, one session: crash safety under SIGKILL, concurrent appenders, and the
//! cross-process lock (timeout naming the holder, recovery from a dead holder).
//!
//! The child processes are this test binary run again with `--exact <child test> --ignored`
//! and an environment variable naming the job, so everything works under plain `cargo test`.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rampart_message::AgentMessage;
use rampart_sessions::lock::{LockHolder, SessionLock};
use rampart_sessions::{
    ErrorKind, FsyncPolicy, LoadOptions, Session, SessionHeader, SessionOptions, load_file,
};

const CHILD_ENV: &str = "RAMPART_CORE_CHILD";
const PATH_ENV: &str = "RAMPART_CORE_PATH";
const COUNT_ENV: &str = "RAMPART_CORE_COUNT";
const FSYNC_ENV: &str = "RAMPART_CORE_FSYNC";

fn spawn_child(job: &str, test: &str, path: &Path, extra: &[(&str, String)]) -> Child {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([
            "--exact",
            test,
            "--nocapture",
            "--ignored",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, job)
        .env(PATH_ENV, path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (key, value) in extra {
        command.env(key, value);
    }
    command.spawn().unwrap()
}

/// Reads the child's protocol tokens on a thread, so the parent can wait for "ready" and
/// still collect everything printed before the child dies. libtest writes its own text to the
/// same stdout (`test child_appender ... ` without a newline), so protocol tokens are marked
/// with `@@` and picked out of whatever line they land on.
fn stdout_lines(child: &mut Child) -> mpsc::Receiver<String> {
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            for token in line.split("@@").skip(1) {
                let token = token.split_whitespace().next().unwrap_or("");
                if tx.send(token.to_owned()).is_err() {
                    return;
                }
            }
        }
    });
    rx
}

fn wait_for(rx: &mpsc::Receiver<String>, wanted: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line == wanted => return,
            Ok(_) => {}
            Err(error) => panic!("child never printed {wanted:?}: {error}"),
        }
    }
}

fn new_session(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    Session::create(
        &path,
        SessionHeader::new("/work"),
        SessionOptions::default(),
    )
    .unwrap();
    path
}

/// The child's job, if this process is a child running `job`.
fn child_job(job: &str) -> Option<PathBuf> {
    (std::env::var(CHILD_ENV).ok()? == job).then(|| PathBuf::from(std::env::var(PATH_ENV).unwrap()))
}

/// A message whose size varies: mostly small, now and then large enough to span many pages,
/// so a kill can land in the middle of a write.
fn message(n: usize) -> AgentMessage {
    let size = if n.is_multiple_of(97) {
        100_000
    } else {
        40 + n % 400
    };
    AgentMessage::user_text(format!("{n}:{}", "x".repeat(size)), n as u64)
}

// ---------------------------------------------------------------------------
// Children
// ---------------------------------------------------------------------------

#[test]
#[ignore = "child process of crash_safety_under_sigkill"]
fn child_appender() {
    let Some(path) = child_job("append") else {
        return;
    };
    let count: usize = std::env::var(COUNT_ENV).unwrap().parse().unwrap();
    let fsync = match std::env::var(FSYNC_ENV).as_deref() {
        Ok("always") => FsyncPolicy::Always,
        Ok("never") => FsyncPolicy::Never,
        _ => FsyncPolicy::PerTurn,
    };
    let options = SessionOptions {
        fsync,
        lock_timeout: Duration::from_secs(60),
        ..SessionOptions::default()
    };
    let mut session = Session::open(&path, options).unwrap();
    println!("@@ready");
    for n in 0..count {
        let id = session.append_message(message(n)).unwrap();
        // Printed only after the append returned: the parent treats these as promises.
        println!("@@{id}");
        if (n + 1).is_multiple_of(10) {
            session.sync().unwrap();
        }
    }
    session.sync().unwrap();
    println!("@@done");
}

#[test]
#[ignore = "child process of lock tests"]
fn child_lock_holder() {
    let Some(path) = child_job("hold-lock") else {
        return;
    };
    let lock = SessionLock::open(&path).unwrap();
    let _guard = lock.acquire(Duration::from_secs(10)).unwrap();
    println!("@@locked");
    // Hold it until the parent kills this process (or give up after a while).
    std::thread::sleep(Duration::from_secs(60));
}

// ---------------------------------------------------------------------------
// Checks
// ---------------------------------------------------------------------------

/// Loads `path` and checks the tree: ids unique, every parent exists, no entry lost.
fn check_file(path: &Path, promised: &[String], context: &str) -> (usize, usize) {
    let loaded = load_file(
        path,
        &LoadOptions {
            record_corrupt_lines: false,
            ..LoadOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("{context}: the file does not load: {e}"));
    assert!(
        loaded.report.duplicate_ids.is_empty(),
        "{context}: duplicate ids"
    );
    let mut ids = HashSet::new();
    for entry in loaded.tree.entries() {
        assert!(
            ids.insert(entry.id.as_str()),
            "{context}: id {} twice",
            entry.id
        );
    }
    for entry in loaded.tree.entries() {
        if let Some(parent) = &entry.parent_id {
            assert!(
                ids.contains(parent.as_str()),
                "{context}: {} has a missing parent",
                entry.id
            );
        }
    }
    for id in promised {
        assert!(
            ids.contains(id.as_str()),
            "{context}: acknowledged entry {id} is missing"
        );
    }
    (loaded.tree.len(), loaded.report.corrupt_lines.len())
}

#[test]
fn crash_safety_under_sigkill() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let iterations = 200;
    // A fresh file every 20 kills: the file is reused (so torn tails from earlier kills are
    // recovered by later writers) but stays small enough to keep the test quick.
    let per_file = 20;
    let mut path = PathBuf::new();
    let mut promised: Vec<String> = Vec::new();
    let mut entries_before = 0;
    let mut unacknowledged = 0;
    let mut total_acknowledged = 0;
    let mut torn_lines = 0;
    for iteration in 0..iterations {
        if iteration % per_file == 0 {
            path = new_session(dir.path(), &format!("crash-{}.jsonl", iteration / per_file));
            promised.clear();
            entries_before = 0;
        }
        let fsync = match iteration % 5 {
            0 => "always",
            1 => "never",
            _ => "per-turn",
        };
        let mut child = spawn_child(
            "append",
            "child_appender",
            &path,
            &[(COUNT_ENV, "10000".into()), (FSYNC_ENV, fsync.into())],
        );
        let rx = stdout_lines(&mut child);
        wait_for(&rx, "ready");
        let pause = rand_millis(iteration, 20);
        std::thread::sleep(Duration::from_millis(pause));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let mut acknowledged = 0;
        while let Ok(line) = rx.recv_timeout(Duration::from_secs(5)) {
            if line != "done" {
                promised.push(line);
                acknowledged += 1;
            }
        }
        let context = format!("iteration {iteration} (killed after {pause} ms, fsync {fsync})");
        let (entries, corrupt) = check_file(&path, &promised, &context);
        torn_lines += corrupt;
        total_acknowledged += acknowledged;
        // At most one entry can be written but unacknowledged (killed between write and print).
        assert!(
            entries >= entries_before + acknowledged
                && entries <= entries_before + acknowledged + 1,
            "{context}: {entries} entries, expected {entries_before} + {acknowledged} (+1)"
        );
        unacknowledged += entries - entries_before - acknowledged;
        entries_before = entries;
    }
    // The final state of every file also opens for writing, recovering any torn tail.
    let mut session = Session::open(&path, SessionOptions::default()).unwrap();
    session
        .append_message(AgentMessage::user_text("after", 0))
        .unwrap();
    eprintln!(
        "crash test: {total_acknowledged} acknowledged appends, {unacknowledged} written but \
         not acknowledged, {torn_lines} torn lines seen (summed over loads)"
    );
}

/// A deterministic pseudo-random number in `0..=max` per iteration (no RNG dependency needed
/// for the spread of kill times).
fn rand_millis(iteration: u64, max: u64) -> u64 {
    let mut x = iteration.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    x ^= x >> 31;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 29;
    x % (max + 1)
}

#[test]
fn two_processes_append_concurrently() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = new_session(dir.path(), "shared.jsonl");
    let mut children: Vec<(Child, mpsc::Receiver<String>)> = (0..2)
        .map(|_| {
            let mut child = spawn_child(
                "append",
                "child_appender",
                &path,
                &[(COUNT_ENV, "500".into()), (FSYNC_ENV, "never".into())],
            );
            let rx = stdout_lines(&mut child);
            (child, rx)
        })
        .collect();
    let mut promised = Vec::new();
    for (child, rx) in &mut children {
        let status = child.wait().unwrap();
        assert!(status.success(), "an appender failed: {status}");
        let lines: Vec<String> = rx.iter().collect();
        assert_eq!(lines.first().map(String::as_str), Some("ready"));
        assert_eq!(lines.last().map(String::as_str), Some("done"));
        promised.extend(lines[1..lines.len() - 1].iter().cloned());
    }
    assert_eq!(promised.len(), 1000);

    // Every line is one whole JSON object: nothing interleaved.
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.ends_with('\n'));
    for (n, line) in text.lines().enumerate() {
        serde_json::from_str::<serde_json::Value>(line)
            .unwrap_or_else(|e| panic!("line {} is not JSON: {e}", n + 1));
    }
    assert_eq!(text.lines().count(), 1001);
    let (entries, corrupt) = check_file(&path, &promised, "concurrent appends");
    assert_eq!(corrupt, 0);
    assert_eq!(entries, 1000);

    // Each writer caught up before appending and followed the shared tail, so the two
    // streams form one linear conversation rather than two forks.
    let loaded = load_file(&path, &LoadOptions::default()).unwrap();
    let all = loaded.tree.entries();
    for pair in all.windows(2) {
        assert_eq!(pair[1].parent_id.as_ref(), Some(&pair[0].id));
    }
}

#[test]
fn second_writer_times_out_naming_the_holder_pid() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = new_session(dir.path(), "locked.jsonl");
    let mut holder = spawn_child("hold-lock", "child_lock_holder", &path, &[]);
    let rx = stdout_lines(&mut holder);
    wait_for(&rx, "locked");

    let mut session = Session::open(
        &path,
        SessionOptions {
            lock_timeout: Duration::from_millis(300),
            ..SessionOptions::default()
        },
    )
    .unwrap();
    let started = Instant::now();
    let error = session
        .append_message(AgentMessage::user_text("blocked", 1))
        .unwrap_err();
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(error.kind(), ErrorKind::Locked);
    let text = error.to_string();
    assert!(text.contains(&format!("process {}", holder.id())), "{text}");
    assert!(text.contains("locked.jsonl"), "{text}");
    assert!(session.entries().is_empty(), "nothing was appended");

    holder.kill().unwrap();
    holder.wait().unwrap();
    session
        .append_message(AgentMessage::user_text("after the holder died", 1))
        .unwrap();
}

#[test]
fn lock_left_by_a_dead_process_is_recovered() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = new_session(dir.path(), "stale.jsonl");
    let mut holder = spawn_child("hold-lock", "child_lock_holder", &path, &[]);
    let rx = stdout_lines(&mut holder);
    wait_for(&rx, "locked");
    let dead_pid = holder.id();
    holder.kill().unwrap();
    holder.wait().unwrap();

    // The record still names the dead process: it never got to clear it.
    let lock = SessionLock::open(&path).unwrap();
    let stale: LockHolder = lock.holder().unwrap();
    assert_eq!(stale.pid, dead_pid);
    assert!(!stale.is_alive());

    // The kernel released the flock when the process died, so the next writer goes ahead
    // at once and overwrites the record.
    let mut session = Session::open(
        &path,
        SessionOptions {
            lock_timeout: Duration::from_millis(500),
            ..SessionOptions::default()
        },
    )
    .unwrap();
    let started = Instant::now();
    session
        .append_message(AgentMessage::user_text("recovered", 1))
        .unwrap();
    assert!(started.elapsed() < Duration::from_millis(500));
    let guard = lock.acquire(Duration::from_secs(1)).unwrap();
    assert_eq!(lock.holder().unwrap().pid, std::process::id());
    drop(guard);
    assert!(lock.holder().is_none(), "a released lock records nobody");
}
