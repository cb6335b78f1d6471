//! The conformance run on real libraries: engines that keep the contract pass every check, and
//! a broken one fails the check it breaks, with the reason, without taking the run down.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use rampart_engine_test::conformance::run;

/// A library cargo built next to this test binary (as a dev-dependency).
fn library(name: &str) -> PathBuf {
    let file = format!(
        "{}{}{}",
        std::env::consts::DLL_PREFIX,
        name.replace('-', "_"),
        std::env::consts::DLL_SUFFIX
    );
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    [deps.to_path_buf(), deps.parent().unwrap().to_path_buf()]
        .into_iter()
        .map(|d| d.join(&file))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("{file} was not built next to {}", exe.display()))
}

#[test]
fn the_window_engine_conforms() {
    let report = run(
        &library("rampart-window"),
        serde_json::json!({"keepRecentTokens": 500}),
    );
    assert!(report.passed(), "{report:#?}");
    assert_eq!(report.engine_id.as_deref(), Some("window"));
    assert_eq!(report.checks.len(), 10);
}

#[test]
fn the_readme_example_conforms() {
    let report = run(
        &library("fx-readme-keep-last"),
        serde_json::json!({"keep": 6}),
    );
    assert!(report.passed(), "{report:#?}");
}

/// A panic in `assemble` is a failed check naming the panic; the run goes on to the next check.
#[test]
fn a_panicking_engine_fails_the_check_it_breaks() {
    let report = run(&library("fx-panic-assemble"), serde_json::json!({}));
    assert!(!report.passed());
    let why = report.failure("assemble-history").unwrap();
    assert!(why.contains("panicked"), "{why}");
    assert_eq!(report.failure("load"), None);
    assert_eq!(report.failure("unknown-method"), None);
    assert!(report.checks.iter().any(|c| c.name == "dispose"));
}

/// A library that is not an engine fails `load`, and nothing else runs.
#[test]
fn a_plain_library_fails_to_load() {
    let report = run(&library("fx-not-abi"), serde_json::json!({}));
    assert_eq!(report.checks.len(), 1);
    assert!(report.failure("load").is_some(), "{report:#?}");
}
