use super::*;
use crate::store::UsageSample;

/// A fresh sessions directory per check; every handle opens it again, as a process would.
fn file_store() -> Option<impl Fn() -> Box<dyn SharedStore>> {
    let dir = tempfile::tempdir().unwrap();
    Some(move || {
        Box::new(SessionStore::open(dir.path().join("sessions")).unwrap()) as Box<dyn SharedStore>
    })
}

/// A fresh memory store per check; handles are clones of it.
fn memory_store() -> Option<impl Fn() -> Box<dyn SharedStore>> {
    let store = MemoryStore::new(None);
    Some(move || Box::new(store.clone()) as Box<dyn SharedStore>)
}

mod file {
    crate::shared_store_conformance!(super::file_store);
}

mod memory {
    crate::shared_store_conformance!(super::memory_store);
}

fn create(store: &dyn SharedStore, key: &str) -> (String, bool) {
    store
        .create(
            &mut |_| key.to_owned(),
            SessionHeader::new("/w"),
            EntryFields::new(),
        )
        .unwrap()
}

/// The file store parses `sessions.json` once per distinct text, and still sees every write,
/// its own or another handle's (another process, as far as the file is concerned).
#[test]
fn the_file_store_reuses_its_parse_until_the_file_changes() {
    let dir = tempfile::tempdir().unwrap();
    let a = SessionStore::open(dir.path()).unwrap();
    let b = SessionStore::open(dir.path()).unwrap();
    create(&a, "one");
    let first = a.snapshot().unwrap();
    let again = a.snapshot().unwrap();
    assert!(
        std::sync::Arc::ptr_eq(&first, &again),
        "an unchanged file is not parsed again"
    );
    // Another handle writes: the next read sees it.
    create(&b, "two");
    assert_eq!(SharedStore::count(&a).unwrap(), 2);
    let usage = UsageSample {
        input: 5,
        context_used: 7,
        ..UsageSample::default()
    };
    b.record("one", vec![RegistryChange::Usage(usage)], 5)
        .unwrap();
    assert_eq!(
        SharedStore::get(&a, "one").unwrap().unwrap().total_tokens,
        Some(7)
    );
}
