use super::*;

#[test]
fn a_new_database_gets_the_current_schema_and_reopens_without_migrating_again() {
    let dir = std::env::temp_dir().join(format!("lossless-store-{}", std::process::id()));
    let path = dir.join("main.sqlite");
    let _ = std::fs::remove_dir_all(&dir);
    let (store, opened) = Store::open(&path, 1).unwrap();
    assert_eq!(opened, Opened::Fine);
    let c = store.conversation("s1", 1).unwrap();
    assert_eq!(store.conversation("s1", 2).unwrap(), c);
    drop(store);
    let (store, opened) = Store::open(&path, 2).unwrap();
    assert_eq!(opened, Opened::Fine);
    let version: i64 = store
        .conn()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    assert_eq!(store.conversation("s1", 3).unwrap(), c);
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
