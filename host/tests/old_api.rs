//! An engine built before the engine API was split still loads and works in today's host: the
//! 1.x promise, shown with `tests/old-api/fx-old-api`, compiled against a copy of the pre-split
//! `rampart-engine-api` 1.0.0 under its own name (`tests/old-api/engine-api`), in a workspace of
//! its own that this test builds with cargo.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::*;

use std::path::{Path, PathBuf};
use std::process::Command;

use rampart_engine_api::protocol::{AssembleParams, CompactParams, SessionRef};
use rampart_engine_api::tools::ToolCallParams;
use rampart_host::config;
use rampart_host::engine::handle::EngineOrigin;
use rampart_host::engine::services::EventSink;
use rampart_host::engine::slot::{EngineSlot, SlotState};

/// Builds the old engine (once per target directory; cargo skips it when nothing changed) and
/// returns its library.
fn old_engine() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let target = root.join("target/old-api");
    let cargo = option_env!("CARGO").unwrap_or("cargo");
    let out = Command::new(cargo)
        .args([
            "build",
            "--locked",
            "--quiet",
            "-p",
            "fx-old-api",
            "--manifest-path",
        ])
        .arg(root.join("tests/old-api/Cargo.toml"))
        .arg("--target-dir")
        .arg(&target)
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "building the old engine failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = format!(
        "{}fx_old_api{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    );
    target.join("debug").join(file)
}

#[test]
fn an_engine_built_against_the_pre_split_api_loads_and_answers() {
    let dir = tempfile::tempdir().unwrap();
    let path = config_for(
        dir.path(),
        "fx-old-api",
        &old_engine(),
        "[plugins.engines.fx-old-api.config]\nkeep = 3",
    );
    let cfg = config::load(&config::locate(Some(&path)).unwrap()).unwrap();
    let events = EventSink::tracing_only();
    events.start_recording();
    let slot = EngineSlot::resolve(&cfg, &events).unwrap();
    assert_eq!(slot.state(), SlotState::Active, "{:?}", slot.state());
    let engine = slot.active();
    assert_eq!(engine.id(), "fx-old-api");
    assert!(matches!(engine.origin(), EngineOrigin::Library(_)));
    assert_eq!(engine.info().protocol.version, "1.0.0");

    // Message lists cross as deltas: a first full list, then a grown one.
    let session = SessionRef {
        session_id: "s1".into(),
        ..Default::default()
    };
    let mut messages = history(10).to_vec();
    for round in 0..3 {
        let out = slot
            .assemble(AssembleParams {
                session: session.clone(),
                messages: messages.clone().into(),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(out.messages.len(), 3, "round {round}");
        assert!(std::sync::Arc::ptr_eq(
            out.messages.last().unwrap(),
            messages.last().unwrap()
        ));
        messages.extend(history(2).to_vec());
    }

    // And it calls back into the host.
    let result = slot
        .compact(CompactParams {
            session: session.clone(),
            messages: messages.clone().into(),
            ..Default::default()
        })
        .unwrap();
    assert!(result.ok && !result.compacted);
    assert!(
        result
            .reason
            .unwrap()
            .starts_with(&format!("saw {} messages", messages.len()))
    );
    let seen = events.drain();
    assert!(
        seen.iter()
            .any(|e| e.source == "fx-old-api" && e.kind == "old_api_compact"),
        "{seen:?}"
    );
    assert_eq!(slot.state(), SlotState::Active);

    // Engine tools (1.2) are never asked of an engine that did not announce them: it offers
    // none, and a stray call of a tool name is answered to the model, not held against it.
    assert!(slot.tools_list(session.clone()).unwrap().is_empty());
    let answer = slot
        .tools_call(ToolCallParams {
            session: session.clone(),
            name: "lcm_grep".into(),
            arguments: serde_json::json!({"pattern": "x"}),
            call_id: "c1".into(),
        })
        .unwrap();
    assert!(
        answer.is_error && answer.content.contains("not available"),
        "{answer:?}"
    );
    assert_eq!(
        slot.state(),
        SlotState::Active,
        "a 1.0 engine is not quarantined for 1.2"
    );
}
