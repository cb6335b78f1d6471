use std::time::Duration;

use super::*;
use crate::error::ErrorKind;

#[test]
fn a_second_holder_waits_then_gives_up_naming_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("main.sqlite");
    let first = SyncLock::acquire(&db, Duration::from_secs(1)).unwrap();
    // Another open file description: `flock` excludes it as it would another process.
    let e = SyncLock::acquire(&db, Duration::from_millis(150)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Locked);
    let message = e.to_string();
    assert!(
        message.contains(&format!("process {}", std::process::id())),
        "{message}"
    );
    assert!(message.contains("main.sqlite.lock"), "{message}");
    drop(first);
    // Released: the next one takes it at once, and the record names nobody until then.
    assert_eq!(std::fs::read_to_string(lock_path(&db)).unwrap(), "");
    let again = SyncLock::acquire(&db, Duration::from_millis(150)).unwrap();
    drop(again);
}

#[test]
fn a_waiter_gets_the_lock_when_the_holder_lets_go() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("main.sqlite");
    let first = SyncLock::acquire(&db, Duration::from_secs(1)).unwrap();
    let waiter = {
        let db = db.clone();
        std::thread::spawn(move || SyncLock::acquire(&db, Duration::from_secs(10)).map(drop))
    };
    std::thread::sleep(Duration::from_millis(100));
    drop(first);
    waiter.join().unwrap().unwrap();
}
