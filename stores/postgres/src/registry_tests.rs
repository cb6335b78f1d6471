use rampart_sessions::SessionMedium;
use rampart_sessions::store::shared::SharedStore;

use super::*;
use crate::PgStoreOptions;
use crate::testing::TestDatabase;

/// A fresh database per check; every handle is a store of its own (its own runtime and
/// pools), as each replica is.
fn pg_store() -> Option<impl Fn() -> Box<dyn SharedStore>> {
    let db = TestDatabase::create("postgres conformance")?;
    let options = db.options();
    Some(move || {
        let _database_lives_as_long_as_its_handles = &db;
        Box::new(PgStore::open(&options).unwrap()) as Box<dyn SharedStore>
    })
}

mod conformance {
    rampart_sessions::shared_store_conformance!(super::pg_store);
}

fn create(store: &PgStore, key: &str) -> String {
    store
        .create(
            &mut |_| key.to_owned(),
            SessionHeader::new("/w"),
            EntryFields::new(),
        )
        .unwrap()
        .0
}

#[test]
fn the_store_is_named_by_its_url_without_a_password() {
    let Some(db) = TestDatabase::create("name") else {
        return;
    };
    let store = db.store().unwrap();
    let name = store.describe().to_string_lossy().into_owned();
    assert_eq!(
        name,
        format!("postgres://postgres@127.0.0.1:5432/{}", db.name())
    );
}

#[test]
fn a_session_in_the_database_is_pi_jsonl() {
    let Some(db) = TestDatabase::create("jsonl") else {
        return;
    };
    let store = db.store().unwrap();
    let key = create(&store, "k");
    let entry = store.get(&key).unwrap().unwrap();
    assert_eq!(
        entry.session_file.as_deref(),
        Some(format!("{}.jsonl", entry.session_id).as_str())
    );
    let mut session = store.open(&key, &entry, SessionOptions::default()).unwrap();
    session
        .append_message(rampart_message::AgentMessage::user_text("hi", 1))
        .unwrap();
    assert!(session.path().starts_with(store.name()));
    // The rows read back as the file a directory store would hold.
    let medium = PgMedium::new(Arc::clone(&store.db), 1, &entry.session_id);
    let len = medium.len().unwrap();
    let mut bytes = vec![0; usize::try_from(len).unwrap()];
    assert_eq!(medium.read_at(&mut bytes, 0).unwrap(), bytes.len());
    let text = String::from_utf8(bytes).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].contains("\"type\":\"session\""), "{text}");
    assert!(lines[1].contains("\"hi\""), "{text}");
    // A read from the middle of a row, across two rows, and past the end.
    let mut middle = vec![0; 10];
    let at = lines[0].len() as u64 - 4;
    assert_eq!(medium.read_at(&mut middle, at).unwrap(), 10);
    assert_eq!(&middle[..], &text.as_bytes()[at as usize..at as usize + 10]);
    assert_eq!(medium.read_at(&mut middle, len).unwrap(), 0);
}

#[test]
fn a_malformed_registry_row_is_reported_with_its_key() {
    let Some(db) = TestDatabase::create("malformed") else {
        return;
    };
    let store = db.store().unwrap();
    create(&store, "broken");
    db.execute("UPDATE rampart_registry SET entry = '{\"nope\": 1}' WHERE key = 'broken'")
        .unwrap();
    let err = store.get("broken").unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, StoreError::Database { .. }), "{text}");
    assert!(
        text.contains("`broken`") && text.contains("rampart_registry"),
        "{text}"
    );
    assert!(!err.is_unavailable());
}

/// `rampart serve` calls the store from async handlers too: a call on a tokio worker thread
/// must neither panic nor deadlock.
#[test]
fn the_store_can_be_called_from_a_tokio_worker_thread() {
    let Some(db) = TestDatabase::create("tokio") else {
        return;
    };
    let store = db.store().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let in_task = store.clone();
    let (count, created) = runtime.block_on(async move {
        tokio::spawn(async move {
            let key = create(&in_task, "from-async");
            let count = in_task.count().unwrap();
            (count, key)
        })
        .await
        .unwrap()
    });
    assert_eq!((count, created.as_str()), (1, "from-async"));
    // The last handle may also be dropped inside async code.
    runtime.block_on(async move { drop(store) });
}

#[test]
fn a_database_that_cannot_be_reached_is_a_clear_error_at_open() {
    let options = PgStoreOptions::from_url("postgres://rampart@127.0.0.1:1/nothing").unwrap();
    let err = PgStore::open(&options).unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, crate::PgStoreError::Unreachable { .. }),
        "{text}"
    );
    assert!(
        text.contains("postgres://rampart@127.0.0.1:1/nothing"),
        "{text}"
    );
}

/// A connection the database ended (a restart, a failover) fails the call in flight as
/// "unavailable", and the next call reconnects by itself.
#[test]
fn lost_connections_are_unavailable_and_the_store_recovers() {
    let Some(db) = TestDatabase::create("recovers") else {
        return;
    };
    let store = db.store().unwrap();
    create(&store, "k");
    db.execute(&format!(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = '{}' AND pid <> pg_backend_pid()",
        db.name()
    ))
    .unwrap();
    let mut failures = 0;
    let mut found = None;
    for _ in 0..3 {
        match store.get("k") {
            Ok(entry) => {
                found = entry;
                break;
            }
            Err(e) => {
                assert!(e.is_unavailable(), "{e}");
                failures += 1;
            }
        }
    }
    assert!(found.is_some(), "the store did not recover");
    assert!(failures <= 1, "{failures} failures after one restart");
    assert!(store.stats().counters.operations > 0);
}
