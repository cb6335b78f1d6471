//! The promises of [`SharedStore`], as checks any backend can run: the file store, the memory
//! store and the PostgreSQL store (`rampart-store-postgres`) run the same ones, so a backend
//! that passes them serves `rampart serve` replicas as the others do.
//!
//! Each check takes `handles`, which opens a new handle on one fresh store every time it is
//! called, the way each replica (process) opens its own: what one handle writes, the others
//! must see, and the locks must exclude across them. A backend's tests run them all with
//! [`shared_store_conformance!`](crate::shared_store_conformance), one `#[test]` per check.
//!
//! The checks panic on a broken promise (they are test code, shipped in the library so another
//! crate's tests can call them).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use rampart_message::AgentMessage;
use serde_json::Value;

use super::shared::{EntryFields, SharedStore};
use super::{CompactionCheckpoint, CompactionSnapshot, RegistryChange, StoreError, UsageSample};
use crate::entry::SessionHeader;
use crate::{Session, SessionError, SessionOptions};

/// Opens a new handle on the store under test (see the module docs).
pub type Handles<'a> = &'a dyn Fn() -> Box<dyn SharedStore>;

/// Runs every check as its own `#[test]`. `$fixture` is a function returning
/// `Option<impl Fn() -> Box<dyn SharedStore>>` that makes a fresh store per call; `None`
/// means the backend is not available here and the check is skipped (the fixture says so).
#[macro_export]
macro_rules! shared_store_conformance {
    ($fixture:path) => {
        $crate::shared_store_conformance!(@checks $fixture;
            create_is_create_if_absent,
            pick_is_told_which_keys_are_taken,
            an_opened_session_keeps_what_was_appended_and_record_updates_the_entry,
            another_handles_appends_are_seen_before_the_next_append,
            the_write_lock_excludes_other_handles_until_released,
            concurrent_appends_are_each_kept_exactly_once,
            concurrent_creates_of_one_key_make_one_session,
            record_many_applies_each_batch_in_order_and_skips_unknown_keys,
            family_is_newest_first_and_exact_by_key,
            entries_keep_fields_they_do_not_know,
            a_store_in_use_reports_itself_reachable,
            blobs_stored_through_one_handle_are_read_through_another,
        );
    };
    (@checks $fixture:path; $($check:ident),* $(,)?) => {
        $(
            #[test]
            fn $check() {
                if let Some(handles) = $fixture() {
                    $crate::store::conformance::$check(&handles);
                }
            }
        )*
    };
}

fn create(store: &dyn SharedStore, key: &str) -> (String, bool) {
    let mut fields = EntryFields::new();
    fields.insert("origin".into(), Value::from("test"));
    store
        .create(&mut |_| key.to_owned(), SessionHeader::new("/w"), fields)
        .unwrap()
}

fn open(store: &dyn SharedStore, key: &str) -> Session {
    let entry = store.get(key).unwrap().expect("the key is registered");
    store.open(key, &entry, SessionOptions::default()).unwrap()
}

fn user(text: &str) -> AgentMessage {
    AgentMessage::user_text(text, 1)
}

/// The user texts of the session's active branch, in order.
fn texts(session: &Session) -> Vec<String> {
    session
        .context()
        .messages
        .iter()
        .map(|m| match m.as_ref() {
            AgentMessage::User(u) => u.content.joined_text(),
            other => other.role().to_owned(),
        })
        .collect()
}

/// Every entry continues the one before it in the log: no fork, nothing twice.
fn assert_linear(session: &Session) {
    let entries = session.entries();
    for pair in entries.windows(2) {
        assert_eq!(
            pair[1].parent_id.as_deref(),
            Some(pair[0].id.as_str()),
            "entry {} does not continue {}: the history forked",
            pair[1].id,
            pair[0].id
        );
    }
}

fn usage(context_used: u64) -> UsageSample {
    UsageSample {
        input: context_used,
        output: 1,
        context_used,
        ..UsageSample::default()
    }
}

/// `create` is create-if-absent, case-insensitive, and keeps the entry's fields.
pub fn create_is_create_if_absent(handles: Handles<'_>) {
    let store = handles();
    let (key, created) = create(store.as_ref(), "Serve:One");
    assert_eq!((key.as_str(), created), ("serve:one", true));
    let first = store.get("serve:one").unwrap().unwrap();
    assert_eq!(
        create(store.as_ref(), "serve:one"),
        ("serve:one".into(), false)
    );
    // The second call changed nothing: same session, same file.
    assert_eq!(
        store.get("SERVE:ONE").unwrap().unwrap().session_id,
        first.session_id
    );
    assert_eq!(first.extra.get("origin"), Some(&Value::from("test")));
    assert_eq!(store.count().unwrap(), 1);
    // Another handle (another replica) sees the same registry.
    let other = handles();
    assert_eq!(
        other.get("serve:one").unwrap().unwrap().session_id,
        first.session_id
    );
    assert_eq!(
        create(other.as_ref(), "SERVE:one"),
        ("serve:one".into(), false)
    );
}

/// `pick` is told which keys are taken, and `family` finds them.
pub fn pick_is_told_which_keys_are_taken(handles: Handles<'_>) {
    let store = handles();
    let next = |store: &dyn SharedStore| {
        store
            .create(
                &mut |taken| {
                    (1..)
                        .map(|n| format!("fam:{n}"))
                        .find(|k| !taken(k))
                        .unwrap()
                },
                SessionHeader::new("/w"),
                EntryFields::new(),
            )
            .unwrap()
    };
    assert_eq!(next(store.as_ref()), ("fam:1".into(), true));
    assert_eq!(next(store.as_ref()), ("fam:2".into(), true));
    // Another handle is told about the keys the first one took.
    assert_eq!(next(handles().as_ref()), ("fam:3".into(), true));
    create(store.as_ref(), "other");
    let family: Vec<String> = store
        .family("fam:", Some("other"))
        .unwrap()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(family.len(), 4, "{family:?}");
    assert!(store.family("nothing:", None).unwrap().is_empty());
    // A prefix is a prefix, not a pattern: `%` and `_` match themselves only.
    assert!(store.family("fam%", None).unwrap().is_empty());
    assert!(store.family("fam_", None).unwrap().is_empty());
}

/// What is appended is read back by a new handle; `record` updates the entry.
pub fn an_opened_session_keeps_what_was_appended_and_record_updates_the_entry(
    handles: Handles<'_>,
) {
    let store = handles();
    let (key, _) = create(store.as_ref(), "k");
    let mut session = open(store.as_ref(), &key);
    session.append_message(user("hello")).unwrap();
    session.sync().unwrap();
    let again = open(handles().as_ref(), &key);
    assert_eq!(texts(&again), ["hello"]);
    assert_eq!(again.header().id, session.header().id);

    let updated = store
        .record(&key, vec![RegistryChange::Usage(usage(12))], 5)
        .unwrap()
        .unwrap();
    assert_eq!(updated.total_tokens, Some(12));
    assert_eq!(handles().get(&key).unwrap().unwrap().total_tokens, Some(12));
    assert!(store.record(&key, Vec::new(), 5).unwrap().is_none());
    assert!(matches!(
        store.record("missing", vec![RegistryChange::Usage(usage(1))], 5),
        Err(StoreError::UnknownSession { .. })
    ));
}

/// A replica that keeps a conversation open sees another replica's append when it takes the
/// lock, before it appends: the history continues, it does not fork.
pub fn another_handles_appends_are_seen_before_the_next_append(handles: Handles<'_>) {
    let (a_store, b_store) = (handles(), handles());
    let (key, _) = create(a_store.as_ref(), "serve:shared");
    let mut a = open(a_store.as_ref(), &key);
    a.append_message(user("one")).unwrap();
    let mut b = open(b_store.as_ref(), &key);
    assert_eq!(texts(&b), ["one"]);
    b.append_message(user("two")).unwrap();
    b.sync().unwrap();

    let caught_up = a.hold(Duration::from_secs(5)).unwrap();
    assert_eq!(caught_up.new_entries, 1, "a must notice b's append");
    assert_eq!(texts(&a), ["one", "two"]);
    a.append_message(user("three")).unwrap();
    a.release();

    b.hold(Duration::from_secs(5)).unwrap();
    b.release();
    assert_eq!(texts(&b), ["one", "two", "three"]);
    let fresh = open(handles().as_ref(), &key);
    assert_eq!(texts(&fresh), ["one", "two", "three"]);
    assert_linear(&fresh);
}

/// The write lock excludes every other handle until released, and a dropped session releases
/// it too.
pub fn the_write_lock_excludes_other_handles_until_released(handles: Handles<'_>) {
    let (a_store, b_store) = (handles(), handles());
    let (key, _) = create(a_store.as_ref(), "locked");
    let mut a = open(a_store.as_ref(), &key);
    let mut b = open(b_store.as_ref(), &key);
    a.hold(Duration::from_secs(5)).unwrap();
    let err = b.hold(Duration::from_millis(100)).unwrap_err();
    assert!(
        matches!(err, SessionError::Locked { .. }),
        "a second holder must wait and then give up: {err}"
    );
    // A waiter that gives up leaves nothing behind: appends of the holder go on.
    a.append_message(user("held")).unwrap();
    a.release();
    b.hold(Duration::from_secs(5)).unwrap();
    assert_eq!(texts(&b), ["held"]);
    // A holder that goes away (a dropped session) lets go of the lock.
    drop(b);
    a.hold(Duration::from_secs(5)).unwrap();
    a.release();
}

/// Appends from several handles at once, each taking the lock per append: every append is in
/// the log exactly once, and the log is one chain.
pub fn concurrent_appends_are_each_kept_exactly_once(handles: Handles<'_>) {
    const WRITERS: usize = 4;
    const EACH: usize = 8;
    let first = handles();
    let (key, _) = create(first.as_ref(), "busy");
    let stores: Vec<Box<dyn SharedStore>> = (0..WRITERS).map(|_| handles()).collect();
    std::thread::scope(|scope| {
        for (w, store) in stores.iter().enumerate() {
            let key = key.clone();
            scope.spawn(move || {
                let mut session = open(store.as_ref(), &key);
                for n in 0..EACH {
                    session.append_message(user(&format!("w{w}-{n}"))).unwrap();
                }
                session.sync().unwrap();
            });
        }
    });
    let session = open(handles().as_ref(), &key);
    let mut seen = texts(&session);
    assert_eq!(seen.len(), WRITERS * EACH, "{seen:?}");
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), WRITERS * EACH, "an append is in the log twice");
    assert_linear(&session);
}

/// Replicas that register the same key at once get one session.
pub fn concurrent_creates_of_one_key_make_one_session(handles: Handles<'_>) {
    const CREATORS: usize = 4;
    let stores: Vec<Box<dyn SharedStore>> = (0..CREATORS).map(|_| handles()).collect();
    let results: Vec<(String, bool)> = std::thread::scope(|scope| {
        let running: Vec<_> = stores
            .iter()
            .map(|store| scope.spawn(move || create(store.as_ref(), "serve:race")))
            .collect();
        running.into_iter().map(|t| t.join().unwrap()).collect()
    });
    assert_eq!(
        results.iter().filter(|(_, created)| *created).count(),
        1,
        "{results:?}"
    );
    let store = handles();
    assert_eq!(store.count().unwrap(), 1);
    let session = open(store.as_ref(), "serve:race");
    assert!(session.entries().is_empty());
}

/// `record_many` applies each conversation's changes in order, in one go, and skips keys that
/// are no longer registered.
pub fn record_many_applies_each_batch_in_order_and_skips_unknown_keys(handles: Handles<'_>) {
    let store = handles();
    create(store.as_ref(), "a");
    create(store.as_ref(), "b");
    let checkpoint = CompactionCheckpoint {
        checkpoint_id: "c1".into(),
        session_key: "b".into(),
        session_id: "s".into(),
        created_at: 1,
        reason: "manual".into(),
        tokens_before: Some(100),
        tokens_after: Some(40),
        summary: None,
        first_kept_entry_id: None,
        pre_compaction: CompactionSnapshot::default(),
        post_compaction: CompactionSnapshot::default(),
        extra: serde_json::Map::new(),
    };
    store
        .record_many(
            vec![
                (
                    "a".into(),
                    vec![
                        RegistryChange::Usage(usage(10)),
                        RegistryChange::Usage(usage(20)),
                    ],
                ),
                ("gone".into(), vec![RegistryChange::Usage(usage(5))]),
                (
                    "b".into(),
                    vec![
                        RegistryChange::Usage(usage(90)),
                        RegistryChange::Compaction(Box::new(checkpoint)),
                    ],
                ),
            ],
            5,
        )
        .unwrap();
    let reader = handles();
    assert_eq!(reader.get("a").unwrap().unwrap().total_tokens, Some(20));
    let b = reader.get("b").unwrap().unwrap();
    assert_eq!(
        (b.compaction_count, b.total_tokens, b.input_tokens),
        (1, Some(40), None)
    );
    assert_eq!(reader.count().unwrap(), 2);
    assert!(reader.get("gone").unwrap().is_none());
}

/// `family` lists the most recently updated first, and `exact` adds one key whatever its
/// prefix.
pub fn family_is_newest_first_and_exact_by_key(handles: Handles<'_>) {
    let store = handles();
    for key in ["fam:a", "fam:b", "fam:c", "elsewhere"] {
        create(store.as_ref(), key);
    }
    std::thread::sleep(Duration::from_millis(5));
    store
        .record("fam:b", vec![RegistryChange::Usage(usage(1))], 5)
        .unwrap();
    let family = handles().family("fam:", Some("elsewhere")).unwrap();
    let keys: Vec<&str> = family.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys.first(), Some(&"fam:b"), "{keys:?}");
    assert_eq!(keys.len(), 4, "{keys:?}");
    for pair in family.windows(2) {
        assert!(pair[0].1.updated_at >= pair[1].1.updated_at, "{keys:?}");
    }
}

/// Fields a store does not know (another program's) survive a registry update.
pub fn entries_keep_fields_they_do_not_know(handles: Handles<'_>) {
    let store = handles();
    let mut fields = EntryFields::new();
    fields.insert("spawnedBy".into(), Value::from("serve:parent"));
    fields.insert(
        "ui".into(),
        serde_json::json!({"pinned": true, "order": [3, 1]}),
    );
    let (key, _) = store
        .create(
            &mut |_| "child".to_owned(),
            SessionHeader::new("/w"),
            fields.clone(),
        )
        .unwrap();
    store
        .record(&key, vec![RegistryChange::Usage(usage(3))], 5)
        .unwrap();
    let entry = handles().get(&key).unwrap().unwrap();
    for (field, value) in &fields {
        assert_eq!(entry.extra.get(field), Some(value), "{field}");
    }
    // The session the entry names is the one created, and it can be appended to.
    let mut session = open(store.as_ref(), &key);
    session.append_session_info(Some("named".into())).unwrap();
    assert_eq!(session.entries().len(), 1);
}

/// `health` says the store answers, names its backend, and is still true after use.
pub fn a_store_in_use_reports_itself_reachable(handles: Handles<'_>) {
    let store = handles();
    create(store.as_ref(), "k");
    let health = store.health();
    assert!(health.reachable, "{health:?}");
    assert!(
        ["files", "memory", "postgres"].contains(&health.backend),
        "{health:?}"
    );
}

/// A blob one handle stores (a capped original), another handle reads, when the store keeps
/// blobs at all.
pub fn blobs_stored_through_one_handle_are_read_through_another(handles: Handles<'_>) {
    let (writer, reader) = (handles(), handles());
    let (Some(put), Some(get)) = (writer.blobs(), reader.blobs()) else {
        assert!(
            writer.blobs().is_none() && reader.blobs().is_none(),
            "every handle of one store keeps blobs, or none does"
        );
        return;
    };
    let bytes = b"the whole tool output".repeat(1000);
    let reference = crate::blobs::BlobRef::of(&bytes);
    put.put(crate::blobs::Blob::new(&reference, &bytes))
        .unwrap();
    assert!(get.get(&reference).unwrap() == bytes);
    assert!(get.list().unwrap().contains(&reference));
}
