//! End to end: `rampart sessions migrate` between a sessions directory and a PostgreSQL store,
//! both ways, on a database of the test's own (SKIPPED without a server, unless
//! RAMPART_REQUIRE_POSTGRES=1).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use rampart_message::AgentMessage;
use rampart_sessions::SessionHeader;
use rampart_sessions::SessionOptions;
use rampart_sessions::store::shared::{EntryFields, SharedStore};
use rampart_sessions::store::{RegistryChange, SessionStore, UsageSample};
use rampart_store_postgres::testing::TestDatabase;
use serde_json::json;

/// A sessions directory with two conversations, their counters and a field rampart does not
/// know.
fn sessions_dir(dir: &std::path::Path) -> SessionStore {
    let store = SessionStore::open(dir).unwrap();
    for (key, words) in [
        ("agent:one", ["alpha", "beta"]),
        ("agent:two", ["gamma", "delta"]),
    ] {
        let mut fields = EntryFields::new();
        fields.insert("label".into(), json!(format!("{key} label")));
        store
            .create(&mut |_| key.to_owned(), SessionHeader::new("/w"), fields)
            .unwrap();
        let entry = SharedStore::get(&store, key).unwrap().unwrap();
        let mut session =
            SharedStore::open(&store, key, &entry, SessionOptions::default()).unwrap();
        for word in words {
            session
                .append_message(AgentMessage::user_text(word, 1))
                .unwrap();
        }
        session.sync().unwrap();
        let usage = UsageSample {
            input: 100,
            output: 7,
            context_used: 107,
            ..UsageSample::default()
        };
        SharedStore::record(&store, key, vec![RegistryChange::Usage(usage)], 5).unwrap();
    }
    store
}

fn migrate(from: &str, to: &str) -> (bool, String) {
    let out = common::rampart(&["sessions", "migrate", "--from", from, "--to", to]);
    (out.status.success(), common::text(&out))
}

#[test]
fn sessions_move_to_postgres_and_back_byte_for_byte() {
    let Some(db) = TestDatabase::create("sessions migrate") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let original = sessions_dir(&dir.path().join("before"));
    let before = original.dir().to_str().unwrap().to_owned();

    let (ok, text) = migrate(&before, db.url());
    assert!(ok, "{text}");
    assert!(text.contains("migrated 2 sessions"), "{text}");
    let database = db.store().unwrap();
    for (key, entry) in original.list().unwrap() {
        let stored = database.get(&key).unwrap().unwrap();
        assert_eq!(stored, entry, "{key}");
        let file = std::fs::read(original.session_file_path(&key, &entry).unwrap()).unwrap();
        assert_eq!(
            database.log_bytes(&entry.session_id).unwrap().unwrap(),
            file,
            "{key}"
        );
    }

    // Again: nothing is copied twice, nothing is overwritten.
    let (ok, text) = migrate(&before, db.url());
    assert!(ok, "{text}");
    assert!(
        text.contains("migrated 0 sessions") && text.contains("2 already there"),
        "{text}"
    );
    assert_eq!(database.count().unwrap(), 2);

    // And back, into a new directory: the same files and entries.
    let after = dir.path().join("after");
    let (ok, text) = migrate(db.url(), after.to_str().unwrap());
    assert!(ok, "{text}");
    assert!(text.contains("migrated 2 sessions"), "{text}");
    let back = SessionStore::open(&after).unwrap();
    for (key, entry) in original.list().unwrap() {
        assert_eq!(back.get(&key).unwrap().unwrap(), entry, "{key}");
        assert_eq!(
            std::fs::read(back.session_file_path(&key, &entry).unwrap()).unwrap(),
            std::fs::read(original.session_file_path(&key, &entry).unwrap()).unwrap(),
            "{key}"
        );
    }
    let out = common::rampart(&[
        "--sessions-dir",
        after.to_str().unwrap(),
        "sessions",
        "show",
        "agent:two",
    ]);
    let text = common::text(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("gamma") && text.contains("delta"), "{text}");
}

#[test]
fn migrate_needs_one_directory_and_one_database() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    std::fs::create_dir(&a).unwrap();
    let (ok, text) = migrate(a.to_str().unwrap(), dir.path().join("b").to_str().unwrap());
    assert!(!ok, "{text}");
    assert!(text.contains("postgres://"), "{text}");
    let (ok, text) = migrate(
        dir.path().join("missing").to_str().unwrap(),
        "postgres://nobody@127.0.0.1:1/none",
    );
    assert!(!ok, "{text}");
    assert!(text.contains("no such sessions directory"), "{text}");
}
