#![allow(clippy::expect_used, clippy::unwrap_used)]
//! Issue 29 item 3: what a WebAssembly engine costs. `assemble` of the README's keep-last
//! engine at 1,000 and 10,000 messages: in Rust in the host's process (`fx-readme-keep-last`,
//! an `export_engine!` library, whose lists cross as deltas) and as a component run by wasmtime
//! (`examples/engines/wasm`, `isolation = "wasm"`, whose lists cross as full JSON). Steady state
//! (the same history every call) and growing (two new messages a call). And the start-up of the
//! component: compile, instantiate, `hello` (what `rampart run` pays once per command).
//!
//! Run with `.ci/wasm && cargo bench -p rampart-host --features wasm --bench wasm`. Without the
//! component (`.ci/wasm` builds it) the bench prints `SKIPPED:` and measures nothing. Numbers go
//! in BENCHMARKS.md.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use rampart_host::config::WasmSettings;
use rampart_host::engine::handle::EngineHandle;
use rampart_host::engine::loader::{LoadRequest, load_engine, load_wasm};

mod common;
use common::{built_library, growing, history, params, window_request};

/// The example component as `.ci/wasm` builds it.
fn component() -> Option<PathBuf> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let path = target.join("wasm-guests/wasm32-wasip2/release/keep_last_wasm.wasm");
    path.is_file().then_some(path)
}

fn keep_last(path: PathBuf) -> LoadRequest {
    let mut req = window_request(path);
    req.id = "keep-last".into();
    req.config = serde_json::json!({"keep": 50});
    req
}

fn assemble(c: &mut Criterion) {
    let Some(wasm) = component() else {
        println!("SKIPPED: the keep-last component is not built; run .ci/wasm first");
        return;
    };
    let engines: Vec<(&str, EngineHandle)> = vec![
        (
            "rust_inprocess",
            load_engine(keep_last(built_library("fx_readme_keep_last"))).expect("load rust"),
        ),
        (
            "wasm",
            load_wasm(keep_last(wasm.clone()), WasmSettings::default()).expect("load wasm"),
        ),
    ];
    let mut group = c.benchmark_group("wasm_assemble");
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(8));
    for n in [1_000usize, 10_000] {
        let messages = history(n);
        for (name, engine) in &engines {
            group.bench_with_input(BenchmarkId::new(*name, n), &messages, |b, m| {
                b.iter(|| black_box(engine.call(params(m.clone())).expect("assemble")))
            });
            group.bench_function(BenchmarkId::new(format!("{name}_growing"), n), |b| {
                b.iter_custom(|iters| growing(engine, n, iters))
            });
        }
    }
    group.finish();

    let mut group = c.benchmark_group("wasm_start");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("compile_instantiate_hello", |b| {
        b.iter(|| {
            let engine =
                load_wasm(keep_last(wasm.clone()), WasmSettings::default()).expect("load wasm");
            black_box(engine.shutdown().ok())
        })
    });
    group.finish();
}

criterion_group!(benches, assemble);
criterion_main!(benches);
