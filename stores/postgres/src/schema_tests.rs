use rampart_sessions::store::shared::SharedStore;

use super::*;
use crate::PgStore;
use crate::PgStoreError;
use crate::testing::TestDatabase;

#[test]
fn an_empty_database_is_migrated_to_the_latest_version() {
    let Some(db) = TestDatabase::create("empty") else {
        return;
    };
    let store = db.store().unwrap();
    assert_eq!(store.schema_version().unwrap(), latest());
    assert!(latest() >= 3);
    // Every version is recorded once, and opening again applies nothing.
    drop(store);
    let again = db.store().unwrap();
    assert_eq!(again.schema_version().unwrap(), latest());
    db.execute(&format!(
        "DO $$ BEGIN IF (SELECT count(*) FROM rampart_schema) <> {} THEN \
         RAISE EXCEPTION 'versions recorded twice'; END IF; END $$",
        MIGRATIONS.len()
    ))
    .unwrap();
}

#[test]
fn a_database_at_the_previous_version_is_migrated_and_keeps_its_rows() {
    let Some(db) = TestDatabase::create("previous") else {
        return;
    };
    let previous = latest() - 1;
    let old = PgStore::open_at(&db.options(), previous, true).unwrap();
    assert_eq!(old.schema_version().unwrap(), previous);
    drop(old);
    db.execute(
        "INSERT INTO rampart_registry (key, session_id, updated_at, entry) VALUES \
         ('agent:old', 'old-session', 5, \
          '{\"sessionId\":\"old-session\",\"updatedAt\":5,\"label\":\"kept\"}')",
    )
    .unwrap();
    // A session log of the previous version (one append), kept through the migration.
    db.execute(
        "INSERT INTO rampart_logs (session_id) VALUES ('old-session'); \
         INSERT INTO rampart_lines (log, start_offset, end_offset, bytes) \
         SELECT id, 0, 6, 'line\n\n'::bytea FROM rampart_logs WHERE session_id = 'old-session'",
    )
    .unwrap();
    let store = db.store().unwrap();
    assert_eq!(store.schema_version().unwrap(), latest());
    let entry = store.get("agent:old").unwrap().unwrap();
    assert_eq!(entry.extra.get("label"), Some(&serde_json::json!("kept")));
    assert_eq!(
        store.log_bytes("old-session").unwrap().as_deref(),
        Some(&b"line\n\n"[..])
    );
    // Version 3's blobs work on the migrated database.
    let blobs = store.blobs().expect("the database keeps blobs");
    let reference = rampart_sessions::blobs::BlobRef::of(b"an original");
    assert!(
        blobs
            .put(rampart_sessions::blobs::Blob::new(
                &reference,
                b"an original"
            ))
            .unwrap()
    );
    assert_eq!(blobs.get(&reference).unwrap(), b"an original");
    // The new version's tables work.
    let (key, created) = store
        .create(
            &mut |_| "agent:new".to_owned(),
            rampart_sessions::SessionHeader::new("/w"),
            Default::default(),
        )
        .unwrap();
    assert!(created);
    let entry = store.get(&key).unwrap().unwrap();
    store
        .open(&key, &entry, rampart_sessions::SessionOptions::default())
        .unwrap();
}

#[test]
fn a_schema_newer_than_this_build_is_refused() {
    let Some(db) = TestDatabase::create("newer") else {
        return;
    };
    drop(db.store().unwrap());
    let future = latest() + 1;
    db.execute(&format!(
        "INSERT INTO rampart_schema (version, description) VALUES ({future}, 'from the future')"
    ))
    .unwrap();
    let err = db.store().unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, crate::PgStoreError::SchemaTooNew { found, supported, .. }
            if found == future && supported == latest()),
        "{text}"
    );
    assert!(
        text.contains(&format!("schema version {future}"))
            && text.contains(&format!("the {} this rampart knows", latest())),
        "{text}"
    );
}

#[test]
fn replicas_starting_together_migrate_once() {
    let Some(db) = TestDatabase::create("together") else {
        return;
    };
    let options = db.options();
    std::thread::scope(|scope| {
        let starting: Vec<_> = (0..3)
            .map(|_| scope.spawn(|| PgStore::open(&options)))
            .collect();
        for replica in starting {
            replica.join().unwrap().unwrap();
        }
    });
    let store = db.store().unwrap();
    assert_eq!(store.schema_version().unwrap(), latest());
    db.execute(&format!(
        "DO $$ BEGIN IF (SELECT count(*) FROM rampart_schema) <> {} THEN \
         RAISE EXCEPTION 'a version was applied twice'; END IF; END $$",
        MIGRATIONS.len()
    ))
    .unwrap();
}

#[test]
fn a_reading_command_finds_no_store_in_an_empty_database_and_creates_none() {
    let Some(db) = TestDatabase::create("open existing") else {
        return;
    };
    let e = PgStore::open_existing(&db.options()).unwrap_err();
    assert!(matches!(e, PgStoreError::NoStore { .. }), "{e}");
    assert!(e.to_string().contains("no rampart session store"), "{e}");
    // Nothing was created: a store opened for writing still starts from an empty database.
    let store = PgStore::open(&db.options()).unwrap();
    assert_eq!(store.schema_version().unwrap(), latest());
    let again = PgStore::open_existing(&db.options()).unwrap();
    assert_eq!(again.schema_version().unwrap(), latest());
}
