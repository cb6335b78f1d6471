use rampart_sessions::store::shared::SharedStore;

use super::*;
use crate::testing::TestDatabase;

/// A fresh database per check; every handle is a store of its own (its own runtime and
/// pools), as each replica is.
fn pg_blobs() -> Option<impl Fn() -> Box<dyn BlobMedium>> {
    let db = TestDatabase::create("postgres blob conformance")?;
    let options = db.options();
    Some(move || {
        let _database_lives_as_long_as_its_handles = &db;
        Box::new(PgStore::open(&options).unwrap().blob_medium()) as Box<dyn BlobMedium>
    })
}

mod conformance {
    rampart_sessions::blob_medium_conformance!(super::pg_blobs);
}

#[test]
fn the_same_bytes_stored_twice_are_one_row() {
    let Some(db) = TestDatabase::create("one row") else {
        return;
    };
    let store = db.store().unwrap();
    let blobs = store.blobs().expect("the database keeps blobs");
    let bytes = b"a tool output".repeat(100);
    let reference = BlobRef::of(&bytes);
    assert!(blobs.put(Blob::new(&reference, &bytes)).unwrap());
    // Through another replica's store too.
    let other = db.store().unwrap().blob_medium();
    assert!(!other.put(Blob::new(&reference, &bytes)).unwrap());
    db.execute(&format!(
        "DO $$ BEGIN IF (SELECT count(*) FROM rampart_blobs WHERE hash = '{}') <> 1 \
         OR (SELECT count(*) FROM rampart_blobs) <> 1 THEN \
         RAISE EXCEPTION 'not one row'; END IF; END $$",
        reference.hex()
    ))
    .unwrap();
}

#[test]
fn the_database_refuses_bytes_under_another_blobs_name() {
    let Some(db) = TestDatabase::create("refuses") else {
        return;
    };
    let store = db.store().unwrap();
    let name = BlobRef::of(b"the real bytes");
    // A row written by hand, not through a medium: the table's check still refuses it.
    let e = db
        .execute(&format!(
            "INSERT INTO rampart_blobs (hash, bytes) VALUES ('{}', 'other bytes'::bytea)",
            name.hex()
        ))
        .unwrap_err();
    assert!(e.contains("check constraint"), "{e}");
    let e = store.blob_medium().get(&name).unwrap_err();
    assert!(matches!(e, BlobError::Missing { .. }), "{e}");
}

#[test]
fn a_missing_blob_names_the_reference_and_the_store_without_a_password() {
    let Some(db) = TestDatabase::create("missing") else {
        return;
    };
    let store = db.store().unwrap();
    let absent = BlobRef::of(b"absent");
    let e = store.blob_medium().get(&absent).unwrap_err();
    let text = e.to_string();
    assert!(text.contains(&absent.to_string()), "{text}");
    assert!(text.contains(db.name()), "{text}");
    assert!(text.starts_with("no blob"), "{text}");
}

#[test]
fn an_unreachable_database_is_told_apart_from_a_missing_blob() {
    let Some(db) = TestDatabase::create("unreachable") else {
        return;
    };
    let store = db.store().unwrap();
    let blobs = store.blob_medium();
    db.execute_as_admin(&format!(
        "ALTER DATABASE {} ALLOW_CONNECTIONS false; \
         SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{}'",
        db.name(),
        db.name()
    ))
    .unwrap();
    let e = blobs.get(&BlobRef::of(b"x")).unwrap_err();
    assert!(e.is_unavailable(), "{e}");
    assert!(e.to_string().contains("cannot be reached"), "{e}");
    db.execute_as_admin(&format!(
        "ALTER DATABASE {} ALLOW_CONNECTIONS true",
        db.name()
    ))
    .unwrap();
}
