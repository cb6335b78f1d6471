//! Issue 24, defect 6: the commands that inspect an engine library (`engines check`,
//! `engines list`, `config check`) load it in a child process, as the slot does. A library
//! with an intact header and corrupt code used to kill `rampart engines check` with SIGTRAP
//! and no message, and one whose constructor exits ended it silently with that status.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use object::{Object, ObjectSection};

use crate::common::{fixture, rampart, text, write_config};

/// A copy of a real engine library whose code (`.text`) is overwritten with `int3`: its
/// headers, symbols and the abi_stable header are intact, so it maps, and the first
/// instruction it runs traps.
fn corrupt_code_library(dir: &Path) -> PathBuf {
    let original = fixture("fx-minimal");
    let mut bytes = std::fs::read(&original).unwrap();
    let (start, len) = {
        let file = object::File::parse(&*bytes).unwrap();
        let text = file.section_by_name(".text").expect("a .text section");
        let (start, len) = text.file_range().expect(".text is in the file");
        (start as usize, len as usize)
    };
    bytes[start..start + len].fill(0xCC);
    let path = dir.join(original.file_name().unwrap());
    std::fs::write(&path, bytes).unwrap();
    path
}

fn assert_said_why_and_exited_1(out: &std::process::Output, what: &str) {
    let t = text(out);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{what}: exit 1, never a signal or a silent status: {t}"
    );
    assert!(t.contains("error"), "{what}: one line says why: {t}");
}

#[test]
fn engines_check_survives_corrupt_code_and_an_exiting_constructor() {
    let dir = tempfile::tempdir().unwrap();
    let corrupt = corrupt_code_library(dir.path());
    let out = rampart(&["engines", "check", corrupt.to_str().unwrap()]);
    assert_said_why_and_exited_1(&out, "corrupt code");
    let t = text(&out);
    assert!(
        t.contains("signal") || t.contains("SIGTRAP") || t.contains("SIGILL"),
        "the line names how the loading process died: {t}"
    );

    let exiting = fixture("fx-exit-ctor");
    let out = rampart(&["engines", "check", exiting.to_str().unwrap()]);
    assert_said_why_and_exited_1(&out, "exiting constructor");
    assert!(
        text(&out).contains("status 3") || text(&out).contains("exit"),
        "{}",
        text(&out)
    );

    // A sound library still checks ok.
    let out = rampart(&["engines", "check", fixture("fx-minimal").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("ok:"), "{}", text(&out));
}

fn config_with(dir: &Path, id: &str, path: &Path, active: bool) -> PathBuf {
    let slot = if active {
        format!("[plugins.slots]\ncontextEngine = \"{id}\"\n\n")
    } else {
        String::new()
    };
    write_config(
        dir,
        &format!(
            "{slot}[plugins.engines.{id}]\npath = \"{}\"\n",
            path.display()
        ),
    )
}

#[test]
fn config_check_says_when_a_library_cannot_load() {
    let dir = tempfile::tempdir().unwrap();
    let corrupt = corrupt_code_library(dir.path());
    for (id, lib) in [("broken", corrupt), ("exits", fixture("fx-exit-ctor"))] {
        let cfg = config_with(dir.path(), id, &lib, false);
        let out = rampart(&["config", "check", "--config", cfg.to_str().unwrap()]);
        let t = text(&out);
        assert_eq!(out.status.code(), Some(1), "{id}: {t}");
        assert!(
            t.contains(&format!("error: engine {id}")) && t.contains("cannot be loaded"),
            "{id}: {t}"
        );
        assert!(!t.lines().any(|l| l == "ok"), "{id}: never ok: {t}");
    }
    // A sound library is named with what it says about itself.
    let cfg = config_with(dir.path(), "fx-minimal", &fixture("fx-minimal"), false);
    let out = rampart(&["config", "check", "--config", cfg.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

#[test]
fn engines_list_survives_a_library_that_cannot_load() {
    let dir = tempfile::tempdir().unwrap();
    let corrupt = corrupt_code_library(dir.path());
    for (id, lib) in [("broken", corrupt), ("exits", fixture("fx-exit-ctor"))] {
        let cfg = config_with(dir.path(), id, &lib, false);
        let out = rampart(&["engines", "list", "--config", cfg.to_str().unwrap()]);
        let t = text(&out);
        assert_eq!(out.status.code(), Some(0), "{id}: {t}");
        let row = t
            .lines()
            .find(|l| l.contains(id))
            .unwrap_or_else(|| panic!("a row for {id}: {t}"));
        assert!(row.contains("cannot load"), "{id}: {row}");
        assert!(t.contains("legacy"), "the rest of the list is there: {t}");
    }
}
