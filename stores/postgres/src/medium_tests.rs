use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use rampart_sessions::store::shared::{EntryFields, SharedStore};
use rampart_sessions::{SessionHeader, SessionOptions};

use super::*;
use crate::PgStore;
use crate::testing::TestDatabase;

/// A store on a fresh database with one session; the medium of that session's log.
fn one_session(label: &str) -> Option<(TestDatabase, PgStore, String)> {
    let db = TestDatabase::create(label)?;
    let store = db.store().unwrap();
    let (key, _) = store
        .create(
            &mut |_| "k".to_owned(),
            SessionHeader::new("/w"),
            EntryFields::new(),
        )
        .unwrap();
    Some((db, store, key))
}

fn medium(store: &PgStore) -> PgMedium {
    PgMedium::new(Arc::clone(&store.db), 1, "s")
}

fn contents(medium: &PgMedium) -> Vec<u8> {
    let mut bytes = vec![0; usize::try_from(medium.len().unwrap()).unwrap()];
    let n = medium.read_at(&mut bytes, 0).unwrap();
    bytes.truncate(n);
    bytes
}

/// Two writers that both saw the same end (one of them lost its lock without knowing): the
/// second append is refused by the primary key, and nothing of it is written.
#[test]
fn an_append_at_an_offset_another_writer_took_is_refused() {
    let Some((_db, store, _key)) = one_session("offsets") else {
        return;
    };
    let (a, b) = (medium(&store), medium(&store));
    let end = a.len().unwrap();
    assert_eq!(b.len().unwrap(), end);
    a.append(b"{\"from\":\"a\"}\n").unwrap();
    let err = b.append(b"{\"from\":\"b\"}\n").unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::AlreadyExists, "{err}");
    let text = String::from_utf8(contents(&a)).unwrap();
    assert!(text.ends_with("{\"from\":\"a\"}\n"), "{text}");
    assert!(!text.contains("\"b\""), "{text}");
    // Caught up, b appends after a.
    b.len().unwrap();
    b.append(b"{\"from\":\"b\"}\n").unwrap();
    assert!(
        String::from_utf8(contents(&a))
            .unwrap()
            .ends_with("{\"from\":\"b\"}\n")
    );
}

/// The waiter gives up at its deadline, not much later, and names the holder.
#[test]
fn a_lock_wait_ends_at_its_deadline_and_names_the_holder() {
    let Some((_db, store, _key)) = one_session("deadline") else {
        return;
    };
    let (a, b) = (medium(&store), medium(&store));
    let _held = a.lock(Duration::from_secs(2)).unwrap();
    let started = Instant::now();
    let err = b.lock(Duration::from_millis(300)).unwrap_err();
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_millis(1500),
        "{waited:?}"
    );
    match err {
        SessionError::Locked { holder, .. } => {
            assert_eq!(holder.map(|h| h.pid), Some(std::process::id()));
        }
        other => panic!("expected Locked, got {other}"),
    }
}

/// A holder whose connection the database ended (a replica cut off): the database releases
/// the lock, another handle takes it, and the old holder can no longer append.
#[test]
fn a_holder_whose_connection_died_loses_the_lock_and_cannot_append() {
    let Some((db, store, _key)) = one_session("died") else {
        return;
    };
    let (a, b) = (medium(&store), medium(&store));
    let end = a.len().unwrap();
    let _held = a.lock(Duration::from_secs(2)).unwrap();
    db.execute(&format!(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = '{}' AND application_name LIKE 'rampart pid % since %'",
        db.name()
    ))
    .unwrap();
    let _taken = b.lock(Duration::from_secs(5)).unwrap();
    let err = a.append(b"{\"late\":true}\n").unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::NotConnected, "{err}");
    assert_eq!(
        b.len().unwrap(),
        end,
        "the old holder wrote without its lock"
    );
}

const CHILD_URL: &str = "RAMPART_PG_TEST_HOLDER_URL";

/// Not a test on its own: the process [`a_killed_holders_lock_is_released_by_the_database`]
/// starts, which holds the session's lock until it is killed.
#[test]
#[ignore = "run by a_killed_holders_lock_is_released_by_the_database"]
fn lock_holder_child() {
    let Ok(url) = std::env::var(CHILD_URL) else {
        return;
    };
    let options = crate::PgStoreOptions::from_url(&url).unwrap();
    let store = PgStore::open(&options).unwrap();
    let entry = store.get("k").unwrap().unwrap();
    let mut session = store.open("k", &entry, SessionOptions::default()).unwrap();
    session.hold(Duration::from_secs(5)).unwrap();
    println!("HOLDING");
    std::thread::sleep(Duration::from_secs(120));
}

/// A replica killed with SIGKILL while it holds a conversation's lock: the database releases
/// the lock as the process's connection closes, with no timeout to wait out.
#[test]
fn a_killed_holders_lock_is_released_by_the_database() {
    let Some((db, store, key)) = one_session("killed") else {
        return;
    };
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "medium::tests::lock_holder_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_URL, db.url())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let holding = lines.any(|l| l.is_ok_and(|l| l.contains("HOLDING")));
    assert!(holding, "the child never took the lock");

    let entry = store.get(&key).unwrap().unwrap();
    let mut session = store.open(&key, &entry, SessionOptions::default()).unwrap();
    match session.hold(Duration::from_millis(200)) {
        Err(SessionError::Locked { holder, .. }) => {
            assert_eq!(holder.map(|h| h.pid), Some(child.id()));
        }
        other => panic!("the child's lock did not exclude: {other:?}"),
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let started = Instant::now();
    session.hold(Duration::from_secs(10)).unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the lock was released late: {:?}",
        started.elapsed()
    );
}

#[test]
fn holder_names_are_read_back() {
    let holder = parse_holder("rampart pid 4242 since 2026-01-02T03:04:05Z").unwrap();
    assert_eq!(
        (holder.pid, holder.acquired_at.as_str()),
        (4242, "2026-01-02T03:04:05Z")
    );
    assert!(parse_holder("psql").is_none());
}
