use rampart_sessions::SessionHeader;
use rampart_sessions::store::SessionEntry;
use rampart_sessions::store::shared::{EntryFields, SharedStore};

use crate::Imported;
use crate::testing::TestDatabase;

#[test]
fn a_log_without_an_entry_and_an_entry_without_a_log_are_both_found() {
    let Some(db) = TestDatabase::create("audit") else {
        return;
    };
    let store = db.store().unwrap();
    let (key, _) = store
        .create(
            &mut |_| "kept".to_owned(),
            SessionHeader::new("/w"),
            EntryFields::new(),
        )
        .unwrap();
    let kept = store.get(&key).unwrap().unwrap();
    assert!(store.unregistered_logs().unwrap().is_empty());
    assert!(store.keys_without_log().unwrap().is_empty());

    // A crash between the log and its entry, by hand: a log nobody names.
    db.execute("INSERT INTO rampart_logs (session_id) VALUES ('lost-one')")
        .unwrap();
    db.execute(
        "INSERT INTO rampart_lines (log, start_offset, end_offset, bytes) \
         SELECT id, 0, 4, 'abc\n'::bytea FROM rampart_logs WHERE session_id = 'lost-one'",
    )
    .unwrap();
    // And an entry whose log was deleted.
    let gone = SessionEntry::new("gone-one", 1);
    assert_eq!(
        store.import_session("gone", &gone, b"x\n").unwrap(),
        Imported::Written
    );
    db.execute("DELETE FROM rampart_logs WHERE session_id = 'gone-one'")
        .unwrap();

    let orphans = store.unregistered_logs().unwrap();
    assert_eq!(orphans.len(), 1, "{orphans:?}");
    assert_eq!(orphans[0].session_id, "lost-one");
    assert_eq!(orphans[0].bytes, 4);
    assert!(orphans[0].created_at_ms > 0);
    assert_eq!(
        store.keys_without_log().unwrap(),
        vec![("gone".to_owned(), "gone-one".to_owned())]
    );
    // The healthy session is in neither list.
    assert!(orphans.iter().all(|o| o.session_id != kept.session_id));
}
