//! End to end: engines resolved from plugins.toml, crossing the real ABI, and the failure policy
//! for every kind of broken library.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use rampart_engine_api::ErrorKind;
use rampart_engine_api::protocol::{AfterTurnParams, AssembleParams, SessionRef};
use rampart_host::config;
use rampart_host::engine::handle::EngineOrigin;
use rampart_host::engine::services::EventSink;
use rampart_host::engine::slot::{EngineSlot, SlotCallError, SlotState};

fn slot_for(dir: &std::path::Path, id: &str, lib: &std::path::Path, extra: &str) -> EngineSlot {
    let path = config_for(dir, id, lib, extra);
    let cfg = config::load(&config::locate(Some(&path)).unwrap()).unwrap();
    EngineSlot::resolve(&cfg, &EventSink::tracing_only()).unwrap()
}

fn assemble_params(n: usize) -> AssembleParams {
    AssembleParams {
        session: SessionRef {
            session_id: "s1".into(),
            ..Default::default()
        },
        messages: history(n),
        ..Default::default()
    }
}

fn quarantine_reason(slot: &EngineSlot) -> String {
    match slot.state() {
        SlotState::Quarantined(q) => q.line(),
        SlotState::Active => panic!("expected a quarantine, engine is active"),
    }
}

#[test]
fn window_is_resolved_from_config_and_assembles_differently_from_legacy() {
    let dir = tempfile::tempdir().unwrap();
    let slot = slot_for(
        dir.path(),
        "window",
        &fixture("rampart-window"),
        "[plugins.engines.window.config]\nkeepRecentTokens = 1000",
    );
    let active = slot.active();
    assert_eq!(active.id(), "window");
    assert!(matches!(active.origin(), EngineOrigin::Library(_)));
    assert_eq!(slot.state(), SlotState::Active);

    let windowed = slot.assemble(assemble_params(50)).unwrap();
    let legacy = slot.legacy().call(assemble_params(50)).unwrap();
    assert_eq!(
        legacy.messages.len(),
        50,
        "legacy passes the history through"
    );
    assert!(windowed.messages.len() < 50 && !windowed.messages.is_empty());
    assert!(
        windowed.estimated_tokens <= 1000,
        "{}",
        windowed.estimated_tokens
    );
    // The window keeps the newest messages, in order.
    assert_eq!(
        windowed.messages[..],
        history(50)[50 - windowed.messages.len()..]
    );
}

#[test]
fn the_binary_swaps_strategy_by_config_alone() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_for(dir.path(), "window", &fixture("rampart-window"), "");
    let out = rampart(&["engines", "list", "--config", cfg.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let t = text(&out);
    assert!(
        t.lines()
            .any(|l| l.starts_with("* window") && l.contains("active")),
        "{t}"
    );

    let probe = rampart(&["--config", cfg.to_str().unwrap(), "engines", "probe"]);
    assert!(probe.status.success(), "{}", text(&probe));
    assert!(text(&probe).contains("engine: window"), "{}", text(&probe));
    let legacy_cfg = write_config(dir.path(), "[plugins.slots]\ncontextEngine = \"legacy\"\n");
    let probe_legacy = rampart(&["engines", "probe", "--config", legacy_cfg.to_str().unwrap()]);
    assert!(
        text(&probe_legacy).contains("12 messages in, 12 out"),
        "{}",
        text(&probe_legacy)
    );
    assert!(text(&probe).contains("12 messages in,") && !text(&probe).contains("12 out"));
    // Issue 24, defect 11: legacy leaves the count to its caller (0), which the probe printed
    // as "estimated tokens 0" for 12 messages; it counts them as the host would.
    let t = text(&probe_legacy);
    let tokens: u64 = t
        .split("estimated tokens ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in: {t}"));
    assert!(tokens > 12 * 40, "12 messages of about 60 tokens each: {t}");
    assert!(t.contains("counted by rampart"), "{t}");
}

/// A load-time fault: the slot falls back to legacy with the reason, and with
/// `required = true` the binary exits non-zero with that line.
fn assert_load_fault(id: &str, lib: &std::path::Path, expected: &str) {
    let dir = tempfile::tempdir().unwrap();
    let slot = slot_for(dir.path(), id, lib, "");
    assert_eq!(slot.active().id(), "legacy");
    let line = quarantine_reason(&slot);
    assert!(line.contains(expected), "expected `{expected}` in: {line}");
    assert!(
        line.contains(&format!("context engine \"{id}\" failed during")),
        "{line}"
    );
    // The host keeps working on legacy.
    assert_eq!(slot.assemble(assemble_params(4)).unwrap().messages.len(), 4);

    let required = config_for(dir.path(), id, lib, "required = true");
    let out = rampart(&["engines", "list", "--config", required.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let t = text(&out);
    assert!(t.contains(expected) && t.contains("required = true"), "{t}");

    let relaxed = config_for(dir.path(), id, lib, "required = false");
    let out = rampart(&["engines", "list", "--config", relaxed.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("quarantined"), "{}", text(&out));
}

#[test]
fn garbage_file() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("libgarbage.so");
    std::fs::write(&lib, b"\x7fELF this is not really a library, just bytes").unwrap();
    assert_load_fault("garbage", &lib, "is not a loadable shared library");
}

#[test]
fn missing_file() {
    let dir = tempfile::tempdir().unwrap();
    assert_load_fault(
        "missing",
        &dir.path().join("libmissing.so"),
        "does not exist",
    );
}

#[test]
fn plain_cdylib_without_the_abi() {
    assert_load_fault("plain", &fixture("fx-not-abi"), "not a Rampart engine");
}

#[test]
fn constructor_that_errors() {
    assert_load_fault(
        "fx-ctor-error",
        &fixture("fx-ctor-error"),
        "missing credentials file",
    );
}

#[test]
fn constructor_that_panics() {
    assert_load_fault(
        "fx-ctor-panic",
        &fixture("fx-ctor-panic"),
        "engine panicked in new_engine: fixture constructor exploded",
    );
}

#[test]
fn id_mismatch() {
    assert_load_fault(
        "fx-id-mismatch",
        &fixture("fx-id-mismatch"),
        "reports engine id `somebody-else` but the configuration loads it as `fx-id-mismatch`",
    );
}

#[test]
fn library_built_for_api_2() {
    assert_load_fault(
        "fx-api2",
        &fixture("fx-api2"),
        "was built for engine API 2.0.0",
    );
}

#[test]
fn legacy_id_is_reserved_for_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_for(dir.path(), "legacy", &fixture("rampart-window"), "");
    let out = rampart(&["config", "check", "--config", cfg.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains("`legacy` is built in"),
        "{}",
        text(&out)
    );
}

#[test]
fn panic_inside_assemble_quarantines_and_legacy_answers() {
    let dir = tempfile::tempdir().unwrap();
    let slot = slot_for(
        dir.path(),
        "fx-panic-assemble",
        &fixture("fx-panic-assemble"),
        "",
    );
    assert_eq!(slot.active().id(), "fx-panic-assemble");
    let result = slot.assemble(assemble_params(6)).unwrap();
    assert_eq!(result.messages.len(), 6, "legacy served the call");
    let line = quarantine_reason(&slot);
    assert!(
        line.contains("during assemble") && line.contains("fixture assemble exploded"),
        "{line}"
    );
    assert_eq!(slot.active().id(), "legacy");
    // What /ui and /metrics show: the quarantine, and each engine's call.
    let health = slot.health();
    assert_eq!(health.configured, "fx-panic-assemble");
    assert_eq!(health.active, "legacy");
    assert_eq!(
        health.quarantine.as_ref().map(|q| q.operation.as_str()),
        Some("assemble")
    );
    let calls: Vec<(&str, &str, u64, u64)> = health
        .calls
        .iter()
        .map(|(e, op, c)| (e.as_str(), op.as_str(), c.calls, c.failures))
        .collect();
    assert_eq!(
        calls,
        [
            ("fx-panic-assemble", "assemble", 1, 1),
            ("legacy", "assemble", 1, 0)
        ]
    );

    let required = slot_for(
        dir.path(),
        "fx-panic-assemble",
        &fixture("fx-panic-assemble"),
        "required = true",
    );
    match required.assemble(assemble_params(6)) {
        Err(SlotCallError::Required(e)) => assert!(e.to_string().contains("panicked"), "{e}"),
        other => panic!("expected a required-engine failure, got {other:?}"),
    }
    let cfg = config_for(
        dir.path(),
        "fx-panic-assemble",
        &fixture("fx-panic-assemble"),
        "required = true",
    );
    let out = rampart(&["engines", "probe", "--config", cfg.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("fixture assemble exploded"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_call_that_hangs_past_its_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("cancelled");
    let extra = format!(
        "[plugins.engines.fx-hang.config]\ncancelMarker = \"{}\"",
        marker.display()
    );
    let slot = slot_for(dir.path(), "fx-hang", &fixture("fx-hang"), &extra);
    let started = Instant::now();
    let result = slot.assemble(assemble_params(3)).unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the host stopped waiting"
    );
    assert_eq!(result.messages.len(), 3, "legacy served the call");
    let line = quarantine_reason(&slot);
    assert!(
        line.contains("timeout") && line.contains("callTimeoutMs"),
        "{line}"
    );
    // The engine saw the cancellation the host raised.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !marker.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        marker.exists(),
        "the hung call never observed its cancel flag"
    );

    let cfg = config_for(
        dir.path(),
        "fx-hang",
        &fixture("fx-hang"),
        "required = true",
    );
    let out = rampart(&["engines", "probe", "--config", cfg.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("timeout"), "{}", text(&out));
}

#[test]
fn two_engines_in_one_process_stay_distinct() {
    let dir_a = tempfile::tempdir().unwrap();
    let dir_b = tempfile::tempdir().unwrap();
    let window = slot_for(dir_a.path(), "window", &fixture("rampart-window"), "");
    let minimal = slot_for(dir_b.path(), "fx-minimal", &fixture("fx-minimal"), "");
    assert_eq!(window.active().id(), "window");
    assert_eq!(minimal.active().id(), "fx-minimal");
    let a = window.assemble(assemble_params(10)).unwrap();
    let b = minimal.assemble(assemble_params(10)).unwrap();
    assert_eq!(a.messages.len(), 10, "20k tokens of budget keep all ten");
    assert_eq!(b.messages.len(), 1, "fx-minimal keeps only the newest");
    // Loading window again gives a working, separate instance of the same library.
    let again = slot_for(dir_a.path(), "window", &fixture("rampart-window"), "");
    assert_eq!(
        again.assemble(assemble_params(10)).unwrap().messages.len(),
        10
    );
}

#[test]
fn methods_the_engine_does_not_know_fall_back_to_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let slot = slot_for(dir.path(), "fx-minimal", &fixture("fx-minimal"), "");
    let engine = slot.active();
    // A method from some future API version.
    let err = engine
        .call_json("summarize_v9", "{\"depth\": 3}")
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unsupported);
    assert_eq!(
        slot.call_with("summarize_v9", |e| e.call_json("summarize_v9", "{}"))
            .unwrap(),
        None
    );
    // Optional methods it did not implement: the host uses its defaults and keeps the engine.
    slot.after_turn(AfterTurnParams {
        session: SessionRef {
            session_id: "s".into(),
            ..Default::default()
        },
        messages: history(4),
        pre_prompt_message_count: 2,
        ..Default::default()
    })
    .unwrap();
    assert!(!slot.declined("maintain"));
    let maintained = slot.maintain(Default::default()).unwrap();
    assert!(!maintained.changed);
    // Declined once, the host builds no compaction for it to prepare (it would ignore it).
    assert!(slot.declined("maintain"));
    assert!(!slot.declined("assemble"));
    let boot = slot.bootstrap(Default::default()).unwrap();
    assert!(!boot.bootstrapped);
    assert_eq!(
        slot.state(),
        SlotState::Active,
        "unsupported is not a failure"
    );
    // Fields from the future in the parameters are ignored, not rejected.
    let answer = engine
        .call_json(
            "assemble",
            r#"{"sessionId":"s","messages":[],"fromTheFuture":{"x":1}}"#,
        )
        .unwrap();
    assert!(answer.contains("\"messages\":[]"), "{answer}");
}

#[test]
fn engines_check_reports_or_explains() {
    let ok = rampart(&[
        "engines",
        "check",
        fixture("rampart-window").to_str().unwrap(),
    ]);
    assert!(ok.status.success(), "{}", text(&ok));
    let t = text(&ok);
    assert!(
        t.contains("id:          window")
            && t.contains(&format!("api version: {}", rampart_engine_api::API_VERSION)),
        "{t}"
    );

    let legacy = rampart(&[
        "engines",
        "check",
        fixture("rampart-legacy-engine").to_str().unwrap(),
    ]);
    assert!(
        text(&legacy).contains("id:          legacy"),
        "{}",
        text(&legacy)
    );

    for (lib, why) in [
        (fixture("fx-not-abi"), "not a Rampart engine"),
        (fixture("fx-api2"), "built for engine API 2.0.0"),
        (fixture("fx-ctor-panic"), "fixture constructor exploded"),
    ] {
        let out = rampart(&["engines", "check", lib.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        let t = text(&out);
        assert!(
            t.contains(why) && t.contains(lib.file_name().unwrap().to_str().unwrap()),
            "{t}"
        );
    }
    let missing = rampart(&["engines", "check", "/nonexistent/libnothing.so"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(text(&missing).contains("/nonexistent/libnothing.so` does not exist"));
}

#[test]
fn library_and_linked_window_agree_turn_after_turn() {
    use rampart_engine_api::Host;
    use rampart_host::engine::handle::EngineHandle;
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let slot = slot_for(
        dir.path(),
        "window",
        &fixture("rampart-window"),
        "[plugins.engines.window.config]\nkeepRecentTokens = 1500",
    );
    let library = slot.active();
    let services =
        rampart_host::engine::services::HostServices::new("window", EventSink::tracing_only());
    let linked = EngineHandle::linked(
        Arc::new(rampart_window::WindowEngine::new(1500)),
        Host::new(Arc::new(services)),
        Duration::from_secs(10),
    );
    // A growing history, as turns append to it: unchanged messages are the same allocations.
    let mut messages = history(40).to_vec();
    for turn in 0..5 {
        let params = AssembleParams {
            messages: messages.clone().into(),
            ..assemble_params(0)
        };
        let a = library.call(params.clone()).unwrap();
        let b = linked.call(params).unwrap();
        assert_eq!(a.messages, b.messages, "turn {turn}");
        assert_eq!(a.estimated_tokens, b.estimated_tokens, "turn {turn}");
        // What came back across the ABI are the host's own messages, not copies.
        let offset = messages.len() - a.messages.len();
        for (i, m) in a.messages.iter().enumerate() {
            assert!(
                Arc::ptr_eq(m, &messages[offset + i]),
                "turn {turn}, message {i} was copied"
            );
        }
        messages.extend(history(3 + turn).iter().cloned());
    }
    assert_eq!(slot.state(), SlotState::Active);
}

#[test]
fn the_readme_example_engine_builds_loads_and_works() {
    // The fixture is the README's code block, verbatim.
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let fixture_src = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/fx-readme-keep-last/src/lib.rs"
    ))
    .unwrap();
    let code = fixture_src.split_once("\n\n").unwrap().1;
    assert!(
        readme.contains(code),
        "README example and fixture differ; copy the README block"
    );

    let dir = tempfile::tempdir().unwrap();
    let slot = slot_for(
        dir.path(),
        "keep-last",
        &fixture("fx-readme-keep-last"),
        "[plugins.engines.keep-last.config]\nkeep = 3",
    );
    assert_eq!(slot.active().id(), "keep-last");
    let out = slot.assemble(assemble_params(10)).unwrap();
    assert_eq!(out.messages[..], history(10)[7..]);
}

#[test]
fn an_id_found_twice_in_the_search_paths_is_refused_naming_both() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let name = format!(
        "{}window{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    );
    std::fs::copy(fixture("rampart-window"), a.path().join(&name)).unwrap();
    std::fs::copy(fixture("rampart-window"), b.path().join(&name)).unwrap();
    let cfg = write_config(
        a.path(),
        &format!(
            "[plugins]\nsearchPaths = [\"{}\", \"{}\"]\n[plugins.slots]\ncontextEngine = \"window\"\n",
            a.path().display(),
            b.path().display()
        ),
    );
    let cfg = config::load(&config::locate(Some(&cfg)).unwrap()).unwrap();
    let slot = EngineSlot::resolve(&cfg, &EventSink::tracing_only()).unwrap();
    let line = quarantine_reason(&slot);
    assert!(
        line.contains(&a.path().join(&name).display().to_string()),
        "{line}"
    );
    assert!(
        line.contains(&b.path().join(&name).display().to_string()),
        "{line}"
    );
    // With only one of them, the id resolves by search path.
    std::fs::remove_file(b.path().join(&name)).unwrap();
    let slot = EngineSlot::resolve(&cfg, &EventSink::tracing_only()).unwrap();
    assert_eq!(slot.active().id(), "window");
}
