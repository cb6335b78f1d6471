use super::*;
use crate::store::UsageSample;

/// Both stores keep the trait's promises the same way.
fn stores() -> (tempfile::TempDir, Vec<Box<dyn SharedStore>>) {
    let dir = tempfile::tempdir().unwrap();
    let file = SessionStore::open(dir.path().join("sessions")).unwrap();
    (dir, vec![Box::new(file), Box::new(MemoryStore::new(None))])
}

fn create(store: &dyn SharedStore, key: &str) -> (String, bool) {
    let mut fields = EntryFields::new();
    fields.insert("origin".into(), Value::from("test"));
    store
        .create(&mut |_| key.to_owned(), SessionHeader::new("/w"), fields)
        .unwrap()
}

#[test]
fn create_is_create_if_absent() {
    let (_dir, stores) = stores();
    for store in &stores {
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
    }
}

#[test]
fn pick_is_told_which_keys_are_taken() {
    let (_dir, stores) = stores();
    for store in &stores {
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
        assert_eq!(next(store.as_ref()).0, "fam:1");
        assert_eq!(next(store.as_ref()).0, "fam:2");
        create(store.as_ref(), "other");
        let family: Vec<String> = store
            .family("fam:", Some("other"))
            .unwrap()
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(family.len(), 3, "{family:?}");
        assert!(store.family("nothing:", None).unwrap().is_empty());
    }
}

#[test]
fn an_opened_session_keeps_what_was_appended_and_record_updates_the_entry() {
    let (_dir, stores) = stores();
    for store in &stores {
        let (key, _) = create(store.as_ref(), "k");
        let entry = store.get(&key).unwrap().unwrap();
        let mut session = store.open(&key, &entry, SessionOptions::default()).unwrap();
        session
            .append_message(rampart_message::AgentMessage::user_text("hello", 1))
            .unwrap();
        session.sync().unwrap();
        let again = store.open(&key, &entry, SessionOptions::default()).unwrap();
        assert_eq!(again.context().messages.len(), 1);

        let usage = UsageSample {
            input: 10,
            output: 2,
            context_used: 12,
            ..UsageSample::default()
        };
        let updated = store
            .record(&key, vec![RegistryChange::Usage(usage)], 5)
            .unwrap()
            .unwrap();
        assert_eq!(updated.total_tokens, Some(12));
        assert!(store.record(&key, Vec::new(), 5).unwrap().is_none());
        assert!(matches!(
            store.record(
                "missing",
                vec![RegistryChange::Usage(UsageSample::default())],
                5
            ),
            Err(StoreError::UnknownSession { .. })
        ));
    }
}

/// The file store parses `sessions.json` once per distinct text, and still sees every write,
/// its own or another handle's (another process, as far as the file is concerned).
#[test]
fn the_file_store_reuses_its_parse_until_the_file_changes() {
    let dir = tempfile::tempdir().unwrap();
    let a = SessionStore::open(dir.path()).unwrap();
    let b = SessionStore::open(dir.path()).unwrap();
    create(&a, "one");
    let first = a.snapshot().unwrap();
    let again = a.snapshot().unwrap();
    assert!(
        std::sync::Arc::ptr_eq(&first, &again),
        "an unchanged file is not parsed again"
    );
    // Another handle writes: the next read sees it.
    create(&b, "two");
    assert_eq!(SharedStore::count(&a).unwrap(), 2);
    let usage = UsageSample {
        input: 5,
        context_used: 7,
        ..UsageSample::default()
    };
    b.record("one", vec![RegistryChange::Usage(usage)], 5)
        .unwrap();
    assert_eq!(
        SharedStore::get(&a, "one").unwrap().unwrap().total_tokens,
        Some(7)
    );
}
