#![allow(clippy::expect_used, clippy::unwrap_used)]
//! Issue 29: what an executable engine (`command = [...]`) costs against the same engine as a
//! Rust library. The README's keep-last engine four ways: the library in the host, the library
//! in a child `rampart engine-host`, the Python example and the node example (compiled by the
//! pinned `tsc` of `.ci/engines`); `assemble` at 10 and 10,000 messages with a history that grows
//! by a turn per call, and the start of each (spawn, handshake).
//!
//! The examples do not announce `messageRefs`, so each call carries the whole history as plain
//! JSON, which the program parses: that, not the pipe, is most of their cost at 10,000 messages.
//!
//! Run with `cargo bench -p rampart-host --bench executable` (after `.ci/engines` for node).
//! An engine whose runtime is missing is left out with a line saying so. Numbers go in
//! BENCHMARKS.md.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use rampart_host::config::{EngineCommand, ProcessSettings};
use rampart_host::engine::handle::EngineHandle;
use rampart_host::engine::loader::{
    LoadRequest, load_engine, load_engine_in_child, load_executable,
};
use rampart_host::engine::services::{EventSink, HostServices};

mod common;
use common::growing;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/engines")
}

/// The fx-readme-keep-last library cargo built beside the bench.
fn keep_last_library() -> PathBuf {
    let file = format!(
        "{}fx_readme_keep_last{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    );
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap().to_path_buf();
    [deps.clone(), deps.parent().unwrap().to_path_buf()]
        .into_iter()
        .map(|d| d.join(&file))
        .find(|p| p.exists())
        .expect("fx_readme_keep_last was not built next to the bench binary")
}

fn request(path: PathBuf) -> LoadRequest {
    LoadRequest {
        id: "keep-last".into(),
        verify_id: true,
        path,
        config: serde_json::json!({"keep": 50}),
        services: Arc::new(HostServices::new("keep-last", EventSink::tracing_only())),
        load_timeout: Duration::from_secs(30),
        call_timeout: Duration::from_secs(60),
        max_log_level: None,
    }
}

/// The node example compiled into a directory that lives as long as the bench.
fn node_script() -> Option<PathBuf> {
    let modules = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/engines-ts/node_modules");
    let dir = std::env::temp_dir().join(format!("rampart-bench-node-{}", std::process::id()));
    let out = Command::new(modules.join(".bin/tsc"))
        .args(["--strict", "--module", "nodenext", "--target", "es2022"])
        .args(["--types", "node", "--typeRoots"])
        .arg(modules.join("@types"))
        .arg("--outDir")
        .arg(&dir)
        .arg(examples().join("node/keep_last.ts"))
        .output();
    match out {
        Ok(o) if o.status.success() => Some(dir.join("keep_last.js")),
        _ => {
            eprintln!("node example left out: no tsc in target/engines-ts (run .ci/engines)");
            None
        }
    }
}

/// The executables to measure: (name, command).
fn executables() -> Vec<(&'static str, EngineCommand)> {
    let mut out = Vec::new();
    let command = |program: &str, script: &Path| EngineCommand {
        program: program.into(),
        args: vec![script.display().to_string()],
        dir: std::env::temp_dir(),
    };
    out.push((
        "python",
        command("python3", &examples().join("python/keep_last.py")),
    ));
    out.push((
        "python_deltas",
        command("python3", &examples().join("python/keep_last_deltas.py")),
    ));
    if let Some(js) = node_script() {
        out.push(("node", command("node", &js)));
    }
    out
}

fn start(engine: &EngineCommand) -> EngineHandle {
    load_executable(
        request(engine.program.clone()),
        engine.clone(),
        ProcessSettings::default(),
    )
    .expect("start the executable engine")
}

fn assemble(c: &mut Criterion) {
    rampart_host::engine::process::set_engine_host_exe(env!("CARGO_BIN_EXE_rampart").into());
    let mut engines: Vec<(&str, EngineHandle)> = vec![
        (
            "rust_inprocess",
            load_engine(request(keep_last_library())).expect("load keep-last"),
        ),
        (
            "rust_child",
            load_engine_in_child(request(keep_last_library()), ProcessSettings::default())
                .expect("start keep-last in a child"),
        ),
    ];
    for (name, command) in executables() {
        engines.push((name, start(&command)));
    }
    let mut group = c.benchmark_group("executable_assemble_growing");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    for n in [10usize, 10_000] {
        for (name, engine) in &engines {
            group.bench_with_input(BenchmarkId::new(*name, n), &n, |b, &n| {
                b.iter_custom(|iters| growing(engine, n, iters))
            });
        }
    }
    group.finish();
}

fn startup(c: &mut Criterion) {
    let mut group = c.benchmark_group("executable_start");
    group.sample_size(10);
    for (name, command) in executables() {
        // Spawn and exec the runtime, its start, the handshake; the shutdown is not timed.
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let begin = Instant::now();
                    let handle = start(&command);
                    total += begin.elapsed();
                    let _ = handle.shutdown();
                }
                total
            })
        });
    }
    group.finish();
}

criterion_group!(benches, startup, assemble);
criterion_main!(benches);
