//! Memory benchmarks: indexing throughput and search latency.
//!
//! Run with `cargo bench -p rampart-memory --bench memory`. What is measured:
//!
//! - `index/{keyword,local}-10mb`: a full sync of 10 MB of generated daily notes into a new
//!   database, keyword-only and with the local embedder (a generated model2vec model, 8,000
//!   words × 64 dimensions), with the bytes as throughput so criterion reports MB/s;
//! - `search/{keyword,local}/{10k,100k}`: one `MemoryIndex::search` of a two-word query
//!   (cycling through 200 queries) on an index of about 10,000 and 100,000 chunks (default
//!   chunking: 400 tokens, 80 overlap);
//! - printed to stderr before criterion starts: p50, p95 and p99 of single searches for the same
//!   four indexes (criterion's median is of batch means, not of single calls).
//!
//! Inputs (notes, model, indexes) are generated once into `<target dir>/bench-scratch/memory/`
//! and reused by later runs. Targets (`shared/PERFORMANCE.md` style): search p50 ≤ 5 ms at
//! 100k chunks; keyword-only indexing ≥ 5 MB/s.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::BatchSize::PerIteration;
use criterion::{Criterion, SamplingMode, Throughput};
use rampart_memory::fixtures::{FixtureModel, Rng, generate_notes, vocabulary};
use rampart_memory::{
    Embedder, IndexOptions, LocalEmbedder, MemoryIndex, SearchParams, SyncReason,
};

const VOCABULARY: usize = 8_000;
const DIMS: usize = 64;
/// Bytes of notes per chunk with the default chunking (1,600 chars, 320 carried over).
const BYTES_PER_CHUNK: usize = 1_280;

fn main() {
    let filter = filter_arg();
    let wants = |name: &str| {
        filter
            .as_deref()
            .is_none_or(|f| name.contains(f) || f.contains(name))
    };
    let scratch = target_dir().join("bench-scratch/memory");
    fs::create_dir_all(&scratch).unwrap();
    let words = vocabulary(VOCABULARY);
    let model_dir = scratch.join("model-8k-64");
    if !model_dir.join("model.safetensors").exists() {
        let refs: Vec<&str> = words.iter().map(String::as_str).collect();
        FixtureModel::new(&refs, DIMS).write(&model_dir).unwrap();
    }
    let model: Arc<dyn Embedder> = Arc::new(LocalEmbedder::load(&model_dir).unwrap());
    let queries = queries(&words);

    let mut c = Criterion::default().configure_from_args();
    if wants("index") {
        let ws = workspace(&scratch, "ws-10mb", 10 * 1024 * 1024, &words);
        let bytes = dir_bytes(&ws.join("memory"));
        let mut group = c.benchmark_group("index");
        // One sync takes about a second: ten of them, one per sample.
        group
            .sample_size(10)
            .sampling_mode(SamplingMode::Flat)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(10))
            .throughput(Throughput::Bytes(bytes));
        for (name, embedder) in [("keyword-10mb", None), ("local-10mb", Some(model.clone()))] {
            group.bench_function(name, |b| {
                b.iter_batched(
                    || tempfile::tempdir_in(&scratch).unwrap(),
                    |db_dir| {
                        let options = IndexOptions {
                            embedder: embedder.clone(),
                            ..IndexOptions::new(db_dir.path().join("index.sqlite"), &ws)
                        };
                        let (index, _) = MemoryIndex::open(options).unwrap();
                        black_box(index.sync(SyncReason::Manual).unwrap());
                        db_dir
                    },
                    PerIteration,
                );
            });
        }
        group.finish();
    }
    if wants("search") {
        let mut indexes = Vec::new();
        for (size, chunks) in [("10k", 10_000usize), ("100k", 100_000)] {
            let ws = workspace(
                &scratch,
                &format!("ws-{size}"),
                chunks * BYTES_PER_CHUNK,
                &words,
            );
            for (kind, embedder) in [("keyword", None), ("local", Some(model.clone()))] {
                let db = scratch.join(format!("index-{size}-{kind}.sqlite"));
                let options = IndexOptions {
                    embedder,
                    ..IndexOptions::new(&db, &ws)
                };
                let opening = Instant::now();
                let (index, _) = MemoryIndex::open(options).unwrap();
                let opened = opening.elapsed();
                let started = Instant::now();
                let report = index.sync(SyncReason::Manual).unwrap();
                let status = index.status();
                eprintln!(
                    "index {size}/{kind}: {} files, {} chunks ({} with vectors); open {:.0} ms; sync {:.1} s ({} written)",
                    status.files,
                    status.chunks,
                    status.chunks_with_vectors,
                    opened.as_secs_f64() * 1e3,
                    started.elapsed().as_secs_f64(),
                    report.chunks_written
                );
                report_percentiles(&format!("search/{kind}/{size}"), &index, &queries);
                indexes.push((format!("{kind}/{size}"), index));
            }
        }
        let mut group = c.benchmark_group("search");
        group
            .sample_size(20)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(5));
        for (name, index) in &indexes {
            let mut next = 0usize;
            group.bench_function(name.as_str(), |b| {
                b.iter(|| {
                    next = (next + 1) % queries.len();
                    black_box(
                        index
                            .search(&queries[next], &SearchParams::default())
                            .unwrap(),
                    )
                });
            });
        }
        group.finish();
    }
    c.final_summary();
}

/// 200 two-word queries from the middle of the vocabulary (words that are neither in every
/// chunk nor in none).
fn queries(words: &[String]) -> Vec<String> {
    let mut rng = Rng::new(42);
    (0..200)
        .map(|_| {
            let a = &words[100 + rng.below(2_900)];
            let b = &words[100 + rng.below(2_900)];
            format!("{a} {b}")
        })
        .collect()
}

/// p50, p95 and p99 of single searches, printed.
fn report_percentiles(name: &str, index: &MemoryIndex, queries: &[String]) {
    // The first search loads the vector matrix; it is not what a turn pays.
    index.search(&queries[0], &SearchParams::default()).unwrap();
    let mut times: Vec<Duration> = Vec::with_capacity(queries.len() * 2);
    let mut results = 0;
    for _ in 0..5 {
        for q in queries {
            let started = Instant::now();
            results += index
                .search(q, &SearchParams::default())
                .unwrap()
                .results
                .len();
            times.push(started.elapsed());
        }
    }
    times.sort();
    let at = |p: f64| times[((times.len() - 1) as f64 * p) as usize];
    eprintln!(
        "{name}: p50 {:.2} ms, p95 {:.2} ms, p99 {:.2} ms over {} searches ({:.1} results each)",
        at(0.5).as_secs_f64() * 1e3,
        at(0.95).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
        times.len(),
        results as f64 / times.len() as f64
    );
}

/// A workspace with about `bytes` of generated notes, written once.
fn workspace(scratch: &Path, name: &str, bytes: usize, words: &[String]) -> PathBuf {
    let ws = scratch.join(name);
    let done = ws.join(".complete");
    if done.exists() {
        return ws;
    }
    let _ = fs::remove_dir_all(&ws);
    fs::create_dir_all(ws.join("memory")).unwrap();
    for (path, text) in generate_notes(bytes, words, bytes as u64) {
        fs::write(ws.join(path), text).unwrap();
    }
    fs::write(
        ws.join("MEMORY.md"),
        "# Memory\n\nGenerated for the memory benchmarks.\n",
    )
    .unwrap();
    fs::write(&done, "").unwrap();
    ws
}

fn dir_bytes(dir: &Path) -> u64 {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum()
}

/// The target directory, from where cargo put this executable (`<target>/<profile>/deps/`).
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("locate the bench executable");
    exe.ancestors()
        .find(|dir| dir.file_name().is_some_and(|name| name == "deps"))
        .and_then(|deps| deps.parent()?.parent())
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from))
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

/// The benchmark filter given on the command line, if any.
fn filter_arg() -> Option<String> {
    // Criterion options that take a value, so their value is not mistaken for the filter.
    const WITH_VALUE: [&str; 12] = [
        "--sample-size",
        "--warm-up-time",
        "--measurement-time",
        "--nresamples",
        "--noise-threshold",
        "--confidence-level",
        "--significance-level",
        "--save-baseline",
        "--baseline",
        "--baseline-lenient",
        "--load-baseline",
        "--profile-time",
    ];
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if WITH_VALUE.contains(&arg.as_str()) {
            args.next();
        } else if !arg.starts_with('-') {
            return Some(arg);
        }
    }
    None
}
