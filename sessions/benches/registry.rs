//! Reading the registry of a server with 1,000 conversations: parsed on every read
//! (`SessionStore::list`), against the snapshot that parses only when the text changed
//! (`SharedStore::family`, what `rampart serve` does on every request); and registering one
//! more conversation in a registry of 10,000 (`SharedStore::create`, what serve does for every
//! new conversation: it used to parse, compare, serialise and rewrite the whole registry).
#![allow(clippy::expect_used)]

use criterion::Criterion;
use rampart_sessions::entry::SessionHeader;
use rampart_sessions::store::SessionStore;
use rampart_sessions::store::shared::{EntryFields, SharedStore};

fn main() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = SessionStore::open(dir.path()).expect("a store");
    for n in 0..1_000 {
        create(&store, n);
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

    let big = tempfile::tempdir().expect("a temporary directory");
    let store = SessionStore::open(big.path()).expect("a store");
    for n in 0..10_000 {
        create(&store, n);
    }
    let mut group = c.benchmark_group("registry_10000");
    group.sample_size(20);
    let mut next = 10_000;
    group.bench_function("create_one_more", |b| {
        b.iter(|| {
            next += 1;
            create(&store, next);
        })
    });
    group.bench_function("snapshot_family_after_a_create", |b| {
        b.iter(|| {
            next += 1;
            create(&store, next);
            SharedStore::family(&store, "serve:rampart:client-42", None)
                .expect("family")
                .len()
        })
    });
    group.finish();
    c.final_summary();
}

/// Registers conversation `n` the way serve does (a new session file and its entry).
fn create(store: &SessionStore, n: usize) {
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
