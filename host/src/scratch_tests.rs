#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

#[test]
fn the_owner_pid_is_read_from_the_name() {
    assert_eq!(owner_pid("rampart-replay-123-0a1b2c3d"), Some(123));
    assert_eq!(owner_pid("rampart-replay-memory-77-00000001"), Some(77));
    // An older version's replay directory has a pid too (but no marker: never swept).
    assert_eq!(owner_pid("rampart-replay-4242-123456789"), Some(4242));
    for name in [
        "rampart-replay-memory-Ab3xYz", // an older version's memory scratch: no pid
        "rampart-replay-123",           // no suffix
        "rampart-replay-123-",
        "rampart-2-x",
        "other-replay-1-2",
        "rampart-replay-memory-",
        "rampart-",
    ] {
        assert_eq!(owner_pid(name), None, "{name}");
    }
}

#[test]
fn a_scratch_dir_is_private_marked_and_removed_on_drop() {
    let parent = tempfile::tempdir().unwrap();
    let dir = ScratchDir::create_in(parent.path(), "replay").unwrap();
    let path = dir.path().to_path_buf();
    let name = path.file_name().unwrap().to_str().unwrap();
    assert_eq!(owner_pid(name), Some(std::process::id()));
    assert!(path.join(MARKER).is_file());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
    }
    assert!(registered().iter().any(|(_, p)| *p == path));
    drop(dir);
    assert!(!path.exists());
    assert!(!registered().iter().any(|(_, p)| *p == path));
}

#[test]
fn a_kept_dir_stays_and_is_never_swept() {
    let parent = tempfile::tempdir().unwrap();
    let dir = ScratchDir::create_in(parent.path(), "replay").unwrap();
    let kept = dir.keep();
    assert!(kept.is_dir());
    assert!(!kept.join(MARKER).exists());
    assert!(!registered().iter().any(|(_, p)| *p == kept));
}

#[cfg(unix)]
#[test]
fn the_sweep_removes_only_marked_dirs_of_dead_owners() {
    let parent = tempfile::tempdir().unwrap();
    // A pid that is surely dead: a child that exited and was reaped.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let mut sleeper = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let live = sleeper.id();

    let make = |name: String, marked: bool| {
        let path = parent.path().join(name);
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("session.jsonl"), b"{}\n").unwrap();
        if marked {
            std::fs::write(path.join(MARKER), b"").unwrap();
        }
        path
    };
    let stale = make(format!("rampart-replay-{dead}-00000001"), true);
    let stale_memory = make(format!("rampart-replay-memory-{dead}-00000002"), true);
    let running = make(format!("rampart-replay-{live}-00000003"), true);
    let kept = make(format!("rampart-replay-{dead}-00000004"), false);
    let not_ours = make(format!("someone-{dead}-00000005"), true);

    assert_eq!(sweep_stale_in(parent.path()), 2);
    assert!(!stale.exists());
    assert!(!stale_memory.exists());
    assert!(running.is_dir());
    assert!(kept.is_dir());
    assert!(not_ours.is_dir());
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
}
