//! The engine's `tracing` events and its events reach the host, across the ABI. In a file of its
//! own because it installs a process-global subscriber.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};

use common::*;
use rampart_engine_api::protocol::{AssembleParams, SessionRef};
use rampart_host::config;
use rampart_host::engine::services::EventSink;
use rampart_host::engine::slot::EngineSlot;

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn engine_tracing_and_events_reach_the_host() {
    let logs = Buffer::default();
    let writer = logs.clone();
    tracing_subscriber::fmt()
        .json()
        .with_max_level(tracing::Level::DEBUG)
        .with_writer(move || writer.clone())
        .init();

    let dir = tempfile::tempdir().unwrap();
    let cfg = config_for(dir.path(), "fx-minimal", &fixture("fx-minimal"), "");
    let cfg = config::load(&config::locate(Some(&cfg)).unwrap()).unwrap();
    let events = Buffer::default();
    let slot = EngineSlot::resolve(&cfg, &EventSink::to_writer(Box::new(events.clone()))).unwrap();
    let out = slot
        .assemble(AssembleParams {
            session: SessionRef {
                session_id: "sess-42".into(),
                ..Default::default()
            },
            messages: history(5),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(out.messages.len(), 1);

    let logs = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    let line = logs
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["fields"]["message"] == "fx-minimal assembled")
        .unwrap_or_else(|| panic!("the engine's tracing event did not arrive:\n{logs}"));
    assert_eq!(line["fields"]["engine"], "fx-minimal");
    assert_eq!(line["level"], "INFO");
    let fields: serde_json::Value =
        serde_json::from_str(line["fields"]["fields"].as_str().unwrap()).unwrap();
    assert_eq!(fields, serde_json::json!({"kept": 1, "total": 5}));

    let events = String::from_utf8(events.0.lock().unwrap().clone()).unwrap();
    let event: serde_json::Value = serde_json::from_str(events.lines().next().unwrap()).unwrap();
    assert_eq!(event["engine"], "fx-minimal");
    assert_eq!(event["kind"], "fx_minimal_assemble");
    assert_eq!(event["sessionId"], "sess-42");
    assert_eq!(event["data"]["total"], 5);
}
