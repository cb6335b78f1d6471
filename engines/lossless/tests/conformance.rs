//! The engine-test kit's conformance run on the built `lossless` library.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use rampart_engine_test::conformance::run;

fn library() -> PathBuf {
    let file = format!(
        "{}rampart_lossless{}",
        std::env::consts::DLL_PREFIX,
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
fn the_lossless_engine_conforms() {
    let dir = std::env::temp_dir().join(format!("lossless-conformance-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let report = run(&library(), serde_json::json!({"stateDir": dir}));
    assert!(report.passed(), "{report:#?}");
    assert_eq!(report.engine_id.as_deref(), Some("lossless"));
    assert!(
        dir.join("main.sqlite").exists(),
        "the store was not created"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unknown_config_key_is_refused_by_name() {
    let report = run(&library(), serde_json::json!({"freshTailCont": 3}));
    let why = report.failure("load").unwrap();
    assert!(why.contains("freshTailCont"), "{why}");
}
