use rampart_sessions::blobs::{BlobMedium, BlobRef};
use rampart_store_postgres::testing::TestDatabase;

use super::*;

/// A transcript with a message too long for one line goes into the database with its
/// content kept as a blob there (before the session naming it), readable in full.
#[test]
fn an_import_that_shortens_a_line_stores_its_blob_in_the_database() {
    let Some(db) = TestDatabase::create("import with blobs") else {
        return;
    };
    let store = db.store().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let long: String = (0..60_000).map(|i| format!("output line {i}\n")).collect();
    let file = dir.path().join("chat.json");
    std::fs::write(
        &file,
        serde_json::to_vec(&serde_json::json!([
            {"role": "user", "content": long},
            {"role": "assistant", "content": "Read it."}
        ]))
        .unwrap(),
    )
    .unwrap();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = import(
        &store,
        &file,
        Some("agent:long"),
        256 * 1024,
        &mut out,
        &mut err,
    )
    .unwrap();
    let (out, err) = (
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("stored 1 blobs"), "{out}");
    let entry = store.get("agent:long").unwrap().unwrap();
    let log = String::from_utf8(store.log_bytes(&entry.session_id).unwrap().unwrap()).unwrap();
    let reference = BlobRef::of(long.as_bytes());
    assert!(
        log.contains(&reference.to_string()),
        "the shortened line names its blob"
    );
    assert!(
        log.lines().all(|l| l.len() <= 256 * 1024),
        "every line fits"
    );
    assert_eq!(
        store.blob_medium().get(&reference).unwrap(),
        long.as_bytes()
    );
}
