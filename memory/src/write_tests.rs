use std::fs;
use std::path::{Path, PathBuf};

use super::*;
use crate::error::ErrorKind;

const NOTE: &str = "memory/2026-11-26.md";

/// A workspace `ws` and, beside it, a directory `outside` holding `2026-11-26.md` and
/// `secret.md` that no write may reach.
fn places() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let outside = dir.path().join("outside");
    fs::create_dir_all(&ws).unwrap();
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("2026-11-26.md"), "outside note\n").unwrap();
    fs::write(outside.join("secret.md"), "secret\n").unwrap();
    (dir, ws, outside)
}

fn untouched(outside: &Path) {
    for (name, was) in [
        ("2026-11-26.md", "outside note\n"),
        ("secret.md", "secret\n"),
    ] {
        let now = fs::read_to_string(outside.join(name)).unwrap();
        assert!(
            now == was,
            "{name} outside the workspace was written: {} lines now",
            now.lines().count()
        );
    }
    let mut names: Vec<String> = fs::read_dir(outside)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["2026-11-26.md", "secret.md"],
        "nothing created outside"
    );
}

#[test]
fn appends_whole_lines_creating_the_directory_and_the_file() {
    let (_d, ws, _) = places();
    let n = append_memory_file(&ws, NOTE, "- first  \n\n").unwrap();
    assert_eq!(n, "- first\n".len() as u64);
    fs::write(
        ws.join(NOTE),
        format!("{}- no newline", fs::read_to_string(ws.join(NOTE)).unwrap()),
    )
    .unwrap();
    append_memory_file(&ws, NOTE, "- second").unwrap();
    assert_eq!(
        fs::read_to_string(ws.join(NOTE)).unwrap(),
        "- first\n- no newline\n- second\n"
    );
}

#[cfg(unix)]
#[test]
fn a_new_note_is_private_to_its_owner() {
    use std::os::unix::fs::PermissionsExt;
    let (_d, ws, _) = places();
    append_memory_file(&ws, NOTE, "- x").unwrap();
    let mode = fs::metadata(ws.join(NOTE)).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
}

#[test]
fn only_workspace_memory_files_named_plainly_are_written() {
    let (_d, ws, outside) = places();
    for (path, start) in [
        ("", "no path given"),
        ("../outside/secret.md", "../outside/secret.md is outside"),
        (
            "memory/../../outside/secret.md",
            "memory/../../outside/secret.md is outside",
        ),
        ("/tmp/x.md", "/tmp/x.md is outside"),
        ("notes.md", "notes.md is not a memory file"),
        ("memory/x.txt", "memory/x.txt is not a markdown file"),
    ] {
        let e = append_memory_file(&ws, path, "- x").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::PathNotAllowed, "{path}: {e}");
        assert!(e.to_string().starts_with(start), "{path}: {e}");
    }
    untouched(&outside);
}

#[cfg(unix)]
#[test]
fn a_note_that_is_a_link_to_a_file_outside_is_refused() {
    let (_d, ws, outside) = places();
    fs::create_dir_all(ws.join("memory")).unwrap();
    std::os::unix::fs::symlink(outside.join("2026-11-26.md"), ws.join(NOTE)).unwrap();
    for _ in 0..3 {
        let e = append_memory_file(&ws, NOTE, "- leaked").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::PathNotAllowed, "{e}");
        assert!(
            e.to_string()
                .starts_with("memory/2026-11-26.md is a symbolic link"),
            "{e}"
        );
    }
    untouched(&outside);
}

#[cfg(unix)]
#[test]
fn a_dangling_link_is_refused_and_its_target_not_created() {
    let (_d, ws, outside) = places();
    fs::create_dir_all(ws.join("memory")).unwrap();
    std::os::unix::fs::symlink(outside.join("new.md"), ws.join(NOTE)).unwrap();
    let e = append_memory_file(&ws, NOTE, "- leaked").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::PathNotAllowed, "{e}");
    untouched(&outside);
}

#[cfg(unix)]
#[test]
fn a_memory_directory_that_is_a_link_is_refused_and_nothing_created_behind_it() {
    let (_d, ws, outside) = places();
    std::os::unix::fs::symlink(&outside, ws.join("memory")).unwrap();
    for note in [NOTE, "memory/2026-11-27.md"] {
        let e = append_memory_file(&ws, note, "- leaked").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::PathNotAllowed, "{e}");
        assert!(
            e.to_string()
                .contains("goes through a symbolic link (memory)"),
            "{e}"
        );
    }
    untouched(&outside);
}

#[cfg(unix)]
#[test]
fn a_fifo_under_the_notes_name_is_refused_without_blocking() {
    let (_d, ws, _) = places();
    fs::create_dir_all(ws.join("memory")).unwrap();
    let path = std::ffi::CString::new(ws.join(NOTE).to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    let e = append_memory_file(&ws, NOTE, "- x").unwrap_err();
    assert!(e.to_string().contains("is not a regular file"), "{e}");
}

/// The workspace's own path may go through a link (where it lives is the user's choice).
#[cfg(unix)]
#[test]
fn a_workspace_reached_through_a_link_is_written() {
    let (d, ws, _) = places();
    let alias = d.path().join("alias");
    std::os::unix::fs::symlink(&ws, &alias).unwrap();
    append_memory_file(&alias, NOTE, "- via the alias").unwrap();
    assert_eq!(
        fs::read_to_string(ws.join(NOTE)).unwrap(),
        "- via the alias\n"
    );
}

/// Exchanges two names atomically (`renameat2(RENAME_EXCHANGE)`), so that at every instant
/// one is the real entry and the other the link.
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) {
    let a = std::ffi::CString::new(a.to_str().unwrap()).unwrap();
    let b = std::ffi::CString::new(b.to_str().unwrap()).unwrap();
    // SAFETY: two NUL-terminated paths that outlive the call.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
}

/// Appends while another thread keeps swapping `a` and `b` (one real, one a link out of the
/// workspace), until both outcomes were seen many times (or 20 s passed): appends through the
/// real entry succeed, those that meet the link are refused. Returns the appends that
/// succeeded; the caller checks that none reached outside, then calls [`Raced::exercised`].
#[cfg(target_os = "linux")]
fn race(ws: &Path, a: PathBuf, b: PathBuf) -> Raced {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                exchange(&a, &b);
                swaps += 1;
            }
            swaps
        })
    };
    let (mut written, mut refused) = (0usize, 0usize);
    let started = std::time::Instant::now();
    while (written < 50 || refused < 50) && started.elapsed() < std::time::Duration::from_secs(20) {
        match append_memory_file(ws, NOTE, &format!("- line {written}")) {
            Ok(_) => written += 1,
            Err(e) if e.kind() == ErrorKind::PathNotAllowed => refused += 1,
            Err(e) => panic!("{e}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    Raced {
        written,
        refused,
        swaps,
    }
}

/// How a [`race`] went.
#[cfg(target_os = "linux")]
struct Raced {
    written: usize,
    refused: usize,
    swaps: u64,
}

#[cfg(target_os = "linux")]
impl Raced {
    /// Asserts that the writes met both the real entry and the link many times.
    fn exercised(&self) {
        assert!(
            self.written >= 50 && self.refused >= 50,
            "the race was not exercised: {} written, {} refused, {} swaps",
            self.written,
            self.refused,
            self.swaps
        );
    }
}

/// `memory` swapped for a link to the outside directory between any two steps of the write.
#[cfg(target_os = "linux")]
#[test]
fn a_memory_directory_swapped_for_a_link_mid_write_never_leads_out() {
    let (_d, ws, outside) = places();
    fs::create_dir_all(ws.join("memory")).unwrap();
    std::os::unix::fs::symlink(&outside, ws.join("memory.swap")).unwrap();
    let raced = race(&ws, ws.join("memory"), ws.join("memory.swap"));
    untouched(&outside);
    raced.exercised();
    // Every successful append is in the real directory, whichever name it has now.
    let real = ["memory", "memory.swap"]
        .iter()
        .map(|n| ws.join(n))
        .find(|p| !fs::symlink_metadata(p).unwrap().file_type().is_symlink())
        .unwrap();
    let lines = fs::read_to_string(real.join("2026-11-26.md"))
        .unwrap()
        .lines()
        .count();
    assert_eq!(lines, raced.written);
}

/// The note itself swapped for a link to a file outside between any two steps of the write.
#[cfg(target_os = "linux")]
#[test]
fn a_note_swapped_for_a_link_mid_write_never_leads_out() {
    let (_d, ws, outside) = places();
    fs::create_dir_all(ws.join("memory")).unwrap();
    fs::write(ws.join(NOTE), "").unwrap();
    let swap = ws.join("memory/swap.md");
    std::os::unix::fs::symlink(outside.join("2026-11-26.md"), &swap).unwrap();
    let raced = race(&ws, ws.join(NOTE), swap.clone());
    untouched(&outside);
    raced.exercised();
    let real = [ws.join(NOTE), swap]
        .into_iter()
        .find(|p| !fs::symlink_metadata(p).unwrap().file_type().is_symlink())
        .unwrap();
    assert_eq!(
        fs::read_to_string(real).unwrap().lines().count(),
        raced.written
    );
}
