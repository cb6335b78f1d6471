//! End to end: the scratch directories of a replay (`rampart-replay-<pid>-…`,
//! `rampart-replay-memory-<pid>-…`) are removed when the replay is stopped by SIGTERM or
//! Ctrl-C, and what a killed one left is swept at the next start, while a running replay's and
//! a kept one's stay. Real processes, a private TMPDIR each.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{text, write_config};

/// The longest example (about 2 s to replay in a debug build): long enough to be stopped in
/// the middle.
fn long_example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/sessions/openclaw-main-3479d118.jsonl")
}

fn short_example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/sessions/openclaw-coding-b1809e0c.jsonl")
}

fn command(dir: &Path, args: &[&str]) -> Command {
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_rampart"));
    c.arg("--config")
        .arg(dir.join("plugins.toml"))
        .args(args)
        .env_remove("RAMPART_CONFIG")
        .env("RUST_LOG", "warn")
        .env("TMPDIR", &tmp)
        .env("XDG_CONFIG_HOME", dir.join("no-xdg-config"))
        .env("XDG_DATA_HOME", dir.join("no-xdg-data"))
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    c
}

fn start_replay(dir: &Path, file: &Path) -> Child {
    command(
        dir,
        &["replay", file.to_str().unwrap(), "--window", "32000"],
    )
    .spawn()
    .unwrap()
}

/// The scratch directories in the private TMPDIR.
fn scratch(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("tmp"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("rampart-replay-"))
        .collect();
    names.sort();
    names
}

/// The scratch directories of process `pid` (its session's and its memory's).
fn of(dir: &Path, pid: u32) -> Vec<String> {
    scratch(dir)
        .into_iter()
        .filter(|n| {
            n.starts_with(&format!("rampart-replay-{pid}-"))
                || n.starts_with(&format!("rampart-replay-memory-{pid}-"))
        })
        .collect()
}

/// Waits until `child` has both its scratch directories, each with its marker: a directory
/// whose marker is not written yet is (by design) never swept, so killing the child between
/// the two would leave one behind and the test would judge a race, not the sweep.
fn wait_for_scratch(dir: &Path, child: &mut Child) {
    let started = Instant::now();
    let ready = |names: Vec<String>| {
        names.len() == 2
            && names.iter().all(|n| {
                dir.join("tmp")
                    .join(n)
                    .join(rampart_host::scratch::MARKER)
                    .is_file()
            })
    };
    while !ready(of(dir, child.id())) {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the replay ended ({status}) before its scratch directories were seen");
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no scratch directories"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn signal(child: &Child, signal: i32) {
    // SAFETY: sending a signal to our own child.
    let r = unsafe { libc::kill(child.id() as libc::pid_t, signal) };
    assert_eq!(r, 0);
}

#[test]
fn a_replay_stopped_by_sigterm_or_ctrl_c_leaves_no_scratch_directory() {
    for (sig, code) in [(libc::SIGTERM, 143), (libc::SIGINT, 130)] {
        let dir = tempfile::tempdir().unwrap();
        write_config(dir.path(), "");
        let mut child = start_replay(dir.path(), &long_example());
        wait_for_scratch(dir.path(), &mut child);
        signal(&child, sig);
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(code),
            "signal {sig}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(scratch(dir.path()), Vec::<String>::new(), "signal {sig}");
    }
}

#[test]
fn what_a_killed_replay_left_is_swept_at_the_next_start_but_not_a_running_or_kept_one() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_config(d, "");

    // A replay killed outright (as by the OOM killer or a crash) cannot clean up.
    let mut killed = start_replay(d, &long_example());
    wait_for_scratch(d, &mut killed);
    signal(&killed, libc::SIGKILL);
    killed.wait().unwrap();
    let left = of(d, killed.id());
    assert_eq!(left.len(), 2, "{:?}", scratch(d));

    // A kept replay's directory is the user's.
    let out = command(d, &["replay", short_example().to_str().unwrap(), "--keep"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let kept: Vec<String> = scratch(d)
        .into_iter()
        .filter(|n| !left.contains(n))
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");

    // The next replay sweeps the dead one's, and a third leaves the running one's alone.
    let mut running = start_replay(d, &long_example());
    wait_for_scratch(d, &mut running);
    let out = command(d, &["replay", short_example().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let now = scratch(d);
    for gone in &left {
        assert!(!now.contains(gone), "{gone} was not swept: {now:?}");
    }
    assert!(now.contains(&kept[0]), "{now:?}");
    assert_eq!(of(d, running.id()).len(), 2, "{now:?}");
    assert!(
        running.try_wait().unwrap().is_none(),
        "the long replay ended too soon for this test"
    );
    signal(&running, libc::SIGTERM);
    running.wait().unwrap();
    assert_eq!(scratch(d), kept);
}
