//! Reading the registry of a server with 1,000 conversations: parsed on every read
//! (`SessionStore::list`), against the snapshot that parses only when the text changed
//! (`SharedStore::family`, what `rampart serve` does on every request).
#![allow(clippy::expect_used)]

use criterion::Criterion;
use rampart_sessions::entry::SessionHeader;
use rampart_sessions::store::SessionStore;
use rampart_sessions::store::shared::{EntryFields, SharedStore};

fn main() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = SessionStore::open(dir.path()).expect("a store");
    for n in 0..1_000 {
        let mut fields = EntryFields::new();
        fields.insert("origin".into(), serde_json::json!("rampart serve"));
        store
            .create(
                &mut |_| format!("serve:rampart:client-{n}"),
                SessionHeader::new("/work"),
                fields,
            )
            .expect("create");
    }
    let mut c = Criterion::default().configure_from_args();
    let mut group = c.benchmark_group("registry_1000");
    group.bench_function("parse_every_read", |b| {
        b.iter(|| store.list().expect("list").len())
    });
    group.bench_function("snapshot_family", |b| {
        b.iter(|| {
            SharedStore::family(&store, "serve:rampart:client-42", None)
                .expect("family")
                .len()
        })
    });
    group.finish();
    c.final_summary();
}
