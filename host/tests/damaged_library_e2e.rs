//! Issue 12, defect 5: a truncated copy of a real engine library never kills the host. Before,
//! `engines list`, `probe`, `replay` and `run` died by SIGBUS (exit 135) when the cut went
//! through the library's loaded segments, even with `required = false`. Now every command
//! reports the library as cut short and, unless the engine is required, goes on with `legacy`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Output;

use common::{config_for, fixture, rampart, text};

fn no_signal(out: &Output, what: &str) {
    assert_eq!(
        out.status.signal(),
        None,
        "{what} died by a signal: {}",
        text(out)
    );
}

fn example_session() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/sessions")
        .read_dir()
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .expect("an example session")
}

#[test]
fn a_truncated_engine_library_is_quarantined_never_a_signal() {
    let whole = std::fs::read(fixture("rampart-window")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("librampart_window.so");
    let session = example_session();
    // Cuts through the loaded segments (the first few percent of a debug build) and near the
    // end (through the debug sections and the section header table).
    for cut in [4096, whole.len() / 50, whole.len() / 10, whole.len() - 1] {
        std::fs::write(&lib, &whole[..cut]).unwrap();
        let relaxed = config_for(dir.path(), "window", &lib, "required = false");
        let cfg = relaxed.to_str().unwrap();

        let out = rampart(&["config", "check", "--config", cfg]);
        no_signal(&out, "config check");
        assert_eq!(out.status.code(), Some(1), "cut {cut}: {}", text(&out));
        assert!(
            text(&out).contains("cut short"),
            "cut {cut}: {}",
            text(&out)
        );

        for args in [
            vec!["engines", "list", "--config", cfg],
            vec!["engines", "probe", "--config", cfg],
        ] {
            let out = rampart(&args);
            no_signal(&out, &args.join(" "));
            assert_eq!(out.status.code(), Some(0), "cut {cut}: {}", text(&out));
            assert!(
                text(&out).contains("cut short"),
                "cut {cut}: {}",
                text(&out)
            );
        }

        let sessions = dir.path().join(format!("sessions-{cut}"));
        let out = rampart(&[
            "--config",
            cfg,
            "--sessions-dir",
            sessions.to_str().unwrap(),
            "run",
            "hello",
        ]);
        no_signal(&out, "run");
        assert_eq!(out.status.code(), Some(0), "cut {cut}: {}", text(&out));

        let out = rampart(&[
            "--config",
            cfg,
            "replay",
            session.to_str().unwrap(),
            "--window",
            "32000",
            "--json",
        ]);
        no_signal(&out, "replay");
        assert_eq!(out.status.code(), Some(0), "cut {cut}: {}", text(&out));

        // Required: the command stops with the engine's line, still without a signal.
        let required = config_for(dir.path(), "window", &lib, "required = true");
        let out = rampart(&["engines", "probe", "--config", required.to_str().unwrap()]);
        no_signal(&out, "required probe");
        assert_ne!(out.status.code(), Some(0), "cut {cut}: {}", text(&out));
        assert!(
            text(&out).contains("cut short"),
            "cut {cut}: {}",
            text(&out)
        );
    }
}
