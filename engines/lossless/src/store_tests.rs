use super::*;

#[test]
fn a_new_database_gets_the_current_schema_and_reopens_without_migrating_again() {
    let dir = std::env::temp_dir().join(format!("lossless-store-{}", std::process::id()));
    let path = dir.join("main.sqlite");
    let _ = std::fs::remove_dir_all(&dir);
    let (store, opened) = Store::open(&path, 1).unwrap();
    assert_eq!(opened, Opened::Fine);
    let c = store.conversation("s1", None, 1).unwrap();
    assert_eq!(store.conversation("s1", None, 2).unwrap(), c);
    drop(store);
    let (store, opened) = Store::open(&path, 2).unwrap();
    assert_eq!(opened, Opened::Fine);
    let version: i64 = store
        .conn()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    assert_eq!(store.conversation("s1", None, 3).unwrap(), c);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_damaged_database_is_moved_aside_not_deleted() {
    let dir = std::env::temp_dir().join(format!("lossless-damaged-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("main.sqlite");
    std::fs::write(&path, vec![0x5a; 8192]).unwrap();
    let (_store, opened) = Store::open(&path, 77).unwrap();
    let Opened::MovedAside(aside) = opened else {
        panic!("expected the file moved aside, got {opened:?}")
    };
    assert_eq!(std::fs::read(&aside).unwrap(), vec![0x5a; 8192]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A version-1 database (before user files had names) is migrated in place: its rows stay,
/// and the new columns are there.
#[test]
fn a_version_one_database_is_migrated_keeping_its_rows() {
    let dir = std::env::temp_dir().join(format!("lossless-v1-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("main.sqlite");
    {
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(MIGRATIONS[0]).unwrap();
        conn.execute_batch(
            "PRAGMA user_version = 1; \
             INSERT INTO conversations (conversation_id, session_id, created_at) VALUES (1, 's1', 0); \
             INSERT INTO large_files (file_id, conversation_id, tool_name, tool_call_id, byte_size, \
             line_count, content, created_at) VALUES ('file_1', 1, 'read', 'c1', 3, 1, 'abc', 0);",
        )
        .unwrap();
    }
    let (store, opened) = Store::open(&path, 5).unwrap();
    assert_eq!(opened, Opened::Fine);
    let (version, content, name): (i64, String, Option<String>) = (
        store
            .conn()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap(),
        store
            .conn()
            .query_row("SELECT content FROM large_files", [], |r| r.get(0))
            .unwrap(),
        store
            .conn()
            .query_row("SELECT file_name FROM large_files", [], |r| r.get(0))
            .unwrap(),
    );
    assert_eq!(
        (version, content.as_str(), name),
        (SCHEMA_VERSION, "abc", None)
    );
    // Version 3: conversations name the one they replaced (none for the old rows).
    let previous: Option<i64> = store
        .conn()
        .query_row("SELECT previous_id FROM conversations LIMIT 1", [], |r| {
            r.get(0)
        })
        .unwrap_or(None);
    assert_eq!(previous, None);
    let _ = std::fs::remove_dir_all(&dir);
}
