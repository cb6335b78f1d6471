//! Building the full prompt of the sample workspace (`tests/fixtures/workspace`).
//!
//! Run with `cargo bench -p rampart-prompt --bench build`. What is measured:
//!
//! - `build/cached`: a turn of a session whose bootstrap set is already in the
//!   [`BootstrapCache`] (what every turn but the first pays): the cache lookup and the build;
//! - `build/uncached`: the first turn of a session: reading the eight bootstrap files, the
//!   budget, discovering the skills, and the build.
//!
//! The medians are in `<target dir>/criterion/build/*/new/estimates.json` (`median`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::hint::black_box;
use std::sync::Arc;

use criterion::Criterion;
use rampart_prompt::{BootstrapCache, SkillsRequest, build_system_prompt, discover_skills};

const KEY: &str = "agent:main:main";

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("build");

    let cache = BootstrapCache::new();
    let request = common::bootstrap_request(KEY);
    let skills = common::skills();
    cache.get_or_load(&request).unwrap();
    group.bench_function("cached", |b| {
        b.iter(|| {
            let bootstrap = cache.get_or_load(&request).unwrap();
            let built = build_system_prompt(&common::inputs(KEY, bootstrap, Arc::clone(&skills)));
            black_box(built.text.len())
        })
    });

    group.bench_function("uncached", |b| {
        b.iter(|| {
            let cache = BootstrapCache::new();
            let bootstrap = cache.get_or_load(&request).unwrap();
            let skills = Arc::new(discover_skills(
                &SkillsRequest::new(common::workspace_dir()),
            ));
            let built = build_system_prompt(&common::inputs(KEY, bootstrap, skills));
            black_box(built.text.len())
        })
    });
    group.finish();
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    bench(&mut criterion);
    criterion.final_summary();
}
