#![allow(clippy::expect_used, clippy::unwrap_used)]
//! The layer-2 ingest cap end to end: a 5 MB tool result through the engine's `ingest`, the
//! persistence guard, the blob write of the original and the session append.
//!
//! Run with `cargo bench -p rampart-host --bench ingest`. Numbers go in BENCHMARKS.md.

use std::sync::Arc;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use rampart_engine_api::AgentMessage;
use rampart_engine_api::protocol::ModelRef;
use rampart_host::blobs::BlobStore;
use rampart_host::config::Config;
use rampart_host::engine::services::EventSink;
use rampart_host::engine::slot::EngineSlot;
use rampart_host::persist::SessionWriter;
use rampart_sessions::entry::SessionHeader;
use rampart_sessions::{FsyncPolicy, Session, SessionOptions};

/// A 5 MB build log ending in an error, unique per `seed` so every blob write is a real write
/// (the store skips contents it already has).
fn log(seed: u64) -> String {
    let mut text = format!("build {seed}\n");
    let line = "   Compiling crate-name v0.1.0 (/work/project/crates/crate-name) ... ok\n";
    while text.len() < 5 * 1024 * 1024 {
        text.push_str(line);
    }
    text.push_str("error[E0308]: mismatched types\n --> src/main.rs:4:5\n");
    text
}

fn ingest_cap(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let blobs = BlobStore::in_sessions_dir(dir.path());
    let slot = EngineSlot::resolve_with(
        &Config::default(),
        &EventSink::tracing_only(),
        Some(blobs.clone()),
    )
    .unwrap();
    let options = SessionOptions {
        fsync: FsyncPolicy::Never,
        ..SessionOptions::default()
    };
    let mut session = Session::create(
        &dir.path().join("bench.jsonl"),
        SessionHeader::new("/tmp"),
        options,
    )
    .unwrap();
    let model = ModelRef {
        provider: "sim".into(),
        id: "default".into(),
        context_window: Some(128_000),
    };
    let mut writer = SessionWriter::new(128_000, 400_000, Some(blobs));
    let mut seed = 0u64;
    let mut group = c.benchmark_group("ingest_cap");
    group.sample_size(20);
    group.bench_function("5mb_tool_result_with_blob_write", |b| {
        b.iter_batched(
            || {
                seed += 1;
                Arc::new(AgentMessage::tool_result(
                    "call_1",
                    "exec",
                    log(seed),
                    false,
                    seed,
                ))
            },
            |message| {
                writer
                    .append(&slot, &mut session, message, Some(model.clone()))
                    .unwrap()
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

criterion_group!(benches, ingest_cap);
criterion_main!(benches);
