#![allow(clippy::expect_used, clippy::unwrap_used)]
//! Issue 29 item 2: what the C ABI costs. `assemble` of the README's keep-last engine at 1,000
//! and 10,000 messages: in Rust (`fx-readme-keep-last`, an `export_engine!` library, whose
//! lists cross as deltas) and in C (`examples/engines/c/keep_last.c`, compiled here with
//! `gcc -O2`, whose lists cross as full JSON), both in the host's process, and the C engine in
//! a child. Steady state (the same history every call) and growing (two new messages a call).
//!
//! Run with `cargo bench -p rampart-host --bench c_abi`. Needs `gcc`; without it the bench
//! prints `SKIPPED:` and measures nothing. Numbers go in BENCHMARKS.md.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use rampart_engine_api::MessageList;
use rampart_host::config::ProcessSettings;
use rampart_host::engine::handle::EngineHandle;
use rampart_host::engine::loader::{LoadRequest, load_engine, load_engine_in_child};

mod common;
use common::{built_library, history, params, window_request};

/// The C example compiled into `dir`, or `None` without gcc.
fn c_example(dir: &Path) -> Option<PathBuf> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()?
        .to_path_buf();
    let out = dir.join("libkeep_last_c.so");
    let built = std::process::Command::new("gcc")
        .args(["-std=c11", "-O2", "-shared", "-fPIC", "-I"])
        .arg(repo.join("engine-api/include"))
        .arg(repo.join("examples/engines/c/keep_last.c"))
        .arg("-o")
        .arg(&out)
        .status()
        .is_ok_and(|s| s.success());
    built.then_some(out)
}

fn keep_last(path: PathBuf) -> LoadRequest {
    let mut req = window_request(path);
    req.id = "keep-last".into();
    req.config = serde_json::json!({"keep": 50});
    req
}

/// 200 successive histories, each two messages longer than the one before.
fn turns(n: usize) -> Vec<MessageList> {
    let mut v = history(n).to_vec();
    (0..200)
        .map(|_| {
            v.extend(history(2).iter().cloned());
            MessageList::from(v.clone())
        })
        .collect()
}

fn assemble(c: &mut Criterion) {
    let scratch = tempfile::tempdir().expect("temp dir");
    let Some(c_lib) = c_example(scratch.path()) else {
        println!("SKIPPED: gcc is not installed; the C ABI bench needs it");
        return;
    };
    rampart_host::engine::process::set_engine_host_exe(env!("CARGO_BIN_EXE_rampart").into());
    let engines: Vec<(&str, EngineHandle)> = vec![
        (
            "rust_inprocess",
            load_engine(keep_last(built_library("fx_readme_keep_last"))).expect("load rust"),
        ),
        (
            "c_inprocess",
            load_engine(keep_last(c_lib.clone())).expect("load C"),
        ),
        (
            "c_child",
            load_engine_in_child(keep_last(c_lib), ProcessSettings::default()).expect("child"),
        ),
    ];
    let mut group = c.benchmark_group("c_abi_assemble");
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(8));
    for n in [1_000usize, 10_000] {
        let messages = history(n);
        let grown = turns(n);
        for (name, engine) in &engines {
            group.bench_with_input(BenchmarkId::new(*name, n), &messages, |b, m| {
                b.iter(|| black_box(engine.call(params(m.clone())).expect("assemble")))
            });
            group.bench_with_input(
                BenchmarkId::new(format!("{name}_growing"), n),
                &grown,
                |b, t| {
                    let mut i = 0;
                    b.iter(|| {
                        i = (i + 1) % t.len();
                        black_box(engine.call(params(t[i].clone())).expect("assemble"))
                    })
                },
            );
        }
    }
    group.finish();
}

criterion_group!(benches, assemble);
criterion_main!(benches);
