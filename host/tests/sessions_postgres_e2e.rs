//! End to end: every `rampart sessions` command on a PostgreSQL store (`--store` or the
//! configuration's `[serve.store]`), and `sessions migrate` between a sessions directory and a
//! database, both ways; each test on a database of its own (SKIPPED without a server, unless
//! RAMPART_REQUIRE_POSTGRES=1).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use rampart_message::AgentMessage;
use rampart_sessions::SessionHeader;
use rampart_sessions::SessionOptions;
use rampart_sessions::store::shared::{EntryFields, SharedStore};
use rampart_sessions::store::{RegistryChange, SessionStore, UsageSample};
use rampart_store_postgres::testing::TestDatabase;
use serde_json::json;

/// A sessions directory with two conversations, their counters and a field rampart does not
/// know.
fn sessions_dir(dir: &std::path::Path) -> SessionStore {
    let store = SessionStore::open(dir).unwrap();
    for (key, words) in [
        ("agent:one", ["alpha", "beta"]),
        ("agent:two", ["gamma", "delta"]),
    ] {
        let mut fields = EntryFields::new();
        fields.insert("label".into(), json!(format!("{key} label")));
        store
            .create(&mut |_| key.to_owned(), SessionHeader::new("/w"), fields)
            .unwrap();
        let entry = SharedStore::get(&store, key).unwrap().unwrap();
        let mut session =
            SharedStore::open(&store, key, &entry, SessionOptions::default()).unwrap();
        for word in words {
            session
                .append_message(AgentMessage::user_text(word, 1))
                .unwrap();
        }
        session.sync().unwrap();
        let usage = UsageSample {
            input: 100,
            output: 7,
            context_used: 107,
            ..UsageSample::default()
        };
        SharedStore::record(&store, key, vec![RegistryChange::Usage(usage)], 5).unwrap();
    }
    store
}

fn migrate(from: &str, to: &str) -> (bool, String) {
    let out = common::rampart(&["sessions", "migrate", "--from", from, "--to", to]);
    (out.status.success(), common::text(&out))
}

#[test]
fn sessions_move_to_postgres_and_back_byte_for_byte() {
    let Some(db) = TestDatabase::create("sessions migrate") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let original = sessions_dir(&dir.path().join("before"));
    let before = original.dir().to_str().unwrap().to_owned();

    let (ok, text) = migrate(&before, db.url());
    assert!(ok, "{text}");
    assert!(text.contains("migrated 2 sessions"), "{text}");
    let database = db.store().unwrap();
    for (key, entry) in original.list().unwrap() {
        let stored = database.get(&key).unwrap().unwrap();
        assert_eq!(stored, entry, "{key}");
        let file = std::fs::read(original.session_file_path(&key, &entry).unwrap()).unwrap();
        assert_eq!(
            database.log_bytes(&entry.session_id).unwrap().unwrap(),
            file,
            "{key}"
        );
    }

    // Again: nothing is copied twice, nothing is overwritten.
    let (ok, text) = migrate(&before, db.url());
    assert!(ok, "{text}");
    assert!(
        text.contains("migrated 0 sessions") && text.contains("2 already there"),
        "{text}"
    );
    assert_eq!(database.count().unwrap(), 2);

    // And back, into a new directory: the same files and entries.
    let after = dir.path().join("after");
    let (ok, text) = migrate(db.url(), after.to_str().unwrap());
    assert!(ok, "{text}");
    assert!(text.contains("migrated 2 sessions"), "{text}");
    let back = SessionStore::open(&after).unwrap();
    for (key, entry) in original.list().unwrap() {
        assert_eq!(back.get(&key).unwrap().unwrap(), entry, "{key}");
        assert_eq!(
            std::fs::read(back.session_file_path(&key, &entry).unwrap()).unwrap(),
            std::fs::read(original.session_file_path(&key, &entry).unwrap()).unwrap(),
            "{key}"
        );
    }
    let out = common::rampart(&[
        "--sessions-dir",
        after.to_str().unwrap(),
        "sessions",
        "show",
        "agent:two",
    ]);
    let text = common::text(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("gamma") && text.contains("delta"), "{text}");
}

#[test]
fn migrate_needs_one_directory_and_one_database() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    std::fs::create_dir(&a).unwrap();
    let (ok, text) = migrate(a.to_str().unwrap(), dir.path().join("b").to_str().unwrap());
    assert!(!ok, "{text}");
    assert!(text.contains("postgres://"), "{text}");
    let (ok, text) = migrate(
        dir.path().join("missing").to_str().unwrap(),
        "postgres://nobody@127.0.0.1:1/none",
    );
    assert!(!ok, "{text}");
    assert!(text.contains("no such sessions directory"), "{text}");
}

fn shared_sessions() -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/sessions");
    assert!(
        dir.is_dir(),
        "the shared test data is missing: expected {} (CI checks shared/ out beside the repo)",
        dir.display()
    );
    dir
}

/// `rampart sessions ARGS --store URL`.
fn on_database(url: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec!["sessions", "--store", url];
    all.extend_from_slice(args);
    common::rampart(&all)
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Issue 28, item 3: every `rampart sessions` command on a PostgreSQL store, as on a
/// directory: a pi file imported there is listed, shown, exported byte for byte, and its key is
/// not taken twice.
#[test]
fn every_sessions_command_works_on_a_database() {
    let Some(db) = TestDatabase::create("sessions commands") else {
        return;
    };
    let source = shared_sessions()
        .join("openclaw-linux2010/main__8a7d4bc6-2a83-4509-894a-88a52483a1d4.jsonl");
    let src = source.to_str().unwrap();

    // A command that reads finds no store in an empty database, and creates none.
    let out = on_database(db.url(), &["list"]);
    assert!(!out.status.success());
    let text = common::text(&out);
    assert!(text.contains("holds no rampart session store"), "{text}");
    let out = on_database(db.url(), &["list"]);
    assert!(!out.status.success(), "the first list created a store");

    let out = on_database(db.url(), &["import", src, "--as", "Agent:Main"]);
    assert!(out.status.success(), "{}", common::text(&out));
    let printed = stdout(&out);
    assert!(
        printed.contains("as `agent:main`") && printed.contains(db.url()),
        "{printed}"
    );
    // In the database, not in any directory: the store has it, as the file's bytes.
    let store = db.store().unwrap();
    let entry = store.get("agent:main").unwrap().unwrap();
    assert_eq!(
        store.log_bytes(&entry.session_id).unwrap().unwrap(),
        std::fs::read(&source).unwrap()
    );

    let out = on_database(db.url(), &["list"]);
    let listed = stdout(&out);
    assert!(out.status.success(), "{}", common::text(&out));
    assert!(
        listed.starts_with(&format!("sessions: {}", db.url())),
        "{listed}"
    );
    assert!(
        listed.contains("agent:main") && listed.contains(&entry.session_id),
        "{listed}"
    );

    // Shown by key and by session id, the same way a directory's session is.
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("local");
    let out = common::rampart(&[
        "--sessions-dir",
        local.to_str().unwrap(),
        "sessions",
        "import",
        src,
        "--as",
        "agent:main",
    ]);
    assert!(out.status.success(), "{}", common::text(&out));
    let from_dir = common::rampart(&[
        "--sessions-dir",
        local.to_str().unwrap(),
        "sessions",
        "show",
        "agent:main",
        "--json",
    ]);
    assert!(from_dir.status.success(), "{}", common::text(&from_dir));
    for id in ["agent:main", entry.session_id.as_str()] {
        let out = on_database(db.url(), &["show", id, "--json"]);
        assert!(out.status.success(), "{}", common::text(&out));
        assert_eq!(out.stdout, from_dir.stdout, "show --json {id}");
    }
    let out = on_database(db.url(), &["show", "agent:main"]);
    let shown = stdout(&out);
    assert!(
        shown.contains(&format!("{}, key `agent:main`", db.url())),
        "{shown}"
    );
    assert!(shown.lines().count() > 10, "{shown}");

    // Export: pi byte for byte, and the other formats as from a directory.
    let exported = dir.path().join("exported.jsonl");
    let out = on_database(
        db.url(),
        &[
            "export",
            "agent:main",
            "--format",
            "pi",
            "--out",
            exported.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", common::text(&out));
    assert!(
        std::fs::read(&exported).unwrap() == std::fs::read(&source).unwrap(),
        "the export differs from the file imported"
    );
    for format in ["openai", "markdown"] {
        let db_out = on_database(db.url(), &["export", "agent:main", "--format", format]);
        let dir_out = common::rampart(&[
            "--sessions-dir",
            local.to_str().unwrap(),
            "sessions",
            "export",
            "agent:main",
            "--format",
            format,
        ]);
        assert!(db_out.status.success(), "{}", common::text(&db_out));
        assert_eq!(db_out.stdout, dir_out.stdout, "export --format {format}");
    }

    // A key is never taken twice; an unknown session names the store and its keys.
    let out = on_database(db.url(), &["import", src, "--as", "agent:main"]);
    assert!(!out.status.success());
    let text = common::text(&out);
    assert!(
        text.contains("already exists") && text.contains(db.url()),
        "{text}"
    );
    assert_eq!(store.count().unwrap(), 1);
    let out = on_database(db.url(), &["show", "nope"]);
    assert!(!out.status.success());
    let text = common::text(&out);
    assert!(
        text.contains("no session `nope`") && text.contains("agent:main"),
        "{text}"
    );

    let out = on_database(db.url(), &["doctor"]);
    assert!(out.status.success(), "{}", common::text(&out));
    assert!(stdout(&out).contains("ok: 1 sessions registered"));
}

/// A replica killed between writing a session's log and registering it leaves a log no entry
/// names: `doctor` reports it, `--relink` registers it, nothing is deleted; an entry whose log
/// is gone is reported too.
#[test]
fn doctor_finds_and_relinks_a_database_orphan() {
    let Some(db) = TestDatabase::create("sessions doctor") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let original = sessions_dir(&dir.path().join("before"));
    let (ok, text) = migrate(original.dir().to_str().unwrap(), db.url());
    assert!(ok, "{text}");
    let store = db.store().unwrap();
    let orphaned = store.get("agent:two").unwrap().unwrap();
    db.execute("DELETE FROM rampart_registry WHERE key = 'agent:two'")
        .unwrap();

    let out = on_database(db.url(), &["doctor"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{}", common::text(&out));
    assert!(
        text.contains(&format!(
            "orphan: session `{}` (2 entries",
            orphaned.session_id
        )),
        "{text}"
    );
    assert!(text.contains("--relink"), "{text}");

    let out = on_database(db.url(), &["doctor", "--relink"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{}", common::text(&out));
    let key = format!("recovered:{}", orphaned.session_id);
    assert!(text.contains(&format!("relinked as `{key}`")), "{text}");
    let out = on_database(db.url(), &["show", &key]);
    let shown = stdout(&out);
    assert!(out.status.success(), "{}", common::text(&out));
    assert!(
        shown.contains("gamma") && shown.contains("delta"),
        "{shown}"
    );

    let out = on_database(db.url(), &["doctor"]);
    assert!(out.status.success(), "{}", common::text(&out));
    assert!(stdout(&out).contains("ok: 2 sessions registered"));

    // An entry whose log is gone.
    let one = store.get("agent:one").unwrap().unwrap();
    db.execute(&format!(
        "DELETE FROM rampart_logs WHERE session_id = '{}'",
        one.session_id
    ))
    .unwrap();
    let out = on_database(db.url(), &["doctor", "--relink"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{}", common::text(&out));
    assert!(
        text.contains("missing: `agent:one`") && text.contains("has no log"),
        "{text}"
    );
    assert!(store.get("agent:one").unwrap().is_some(), "nothing deleted");
}

/// With `[serve.store]` in the configuration, the sessions commands see what `rampart serve`
/// serves; `--sessions-dir` still picks a directory.
#[test]
fn the_configured_serve_store_is_the_default() {
    let Some(db) = TestDatabase::create("sessions config store") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let original = sessions_dir(&dir.path().join("before"));
    let (ok, text) = migrate(original.dir().to_str().unwrap(), db.url());
    assert!(ok, "{text}");
    let config = dir.path().join("plugins.toml");
    std::fs::write(&config, format!("[serve.store]\nurl = \"{}\"\n", db.url())).unwrap();
    let config = config.to_str().unwrap();

    let out = common::rampart(&["--config", config, "sessions", "list"]);
    let listed = stdout(&out);
    assert!(out.status.success(), "{}", common::text(&out));
    assert!(listed.contains(db.url()), "{listed}");
    assert!(
        listed.contains("agent:one") && listed.contains("agent:two"),
        "{listed}"
    );

    let empty = dir.path().join("empty");
    let out = common::rampart(&[
        "--config",
        config,
        "--sessions-dir",
        empty.to_str().unwrap(),
        "sessions",
        "list",
    ]);
    let listed = stdout(&out);
    assert!(out.status.success(), "{}", common::text(&out));
    assert!(listed.contains("no sessions yet"), "{listed}");
}

/// A Claude Code transcript and its subagents go into the database as they go into a
/// directory: seven sessions, the children spawned by the parent.
#[test]
fn a_claude_code_import_with_subagents_goes_into_the_database() {
    let Some(db) = TestDatabase::create("sessions import claude") else {
        return;
    };
    let source = shared_sessions()
        .join("claude-code-log/-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl");
    let out = on_database(
        db.url(),
        &["import", source.to_str().unwrap(), "--as", "lead"],
    );
    assert!(out.status.success(), "{}", common::text(&out));
    assert_eq!(stdout(&out).lines().count(), 7, "{}", stdout(&out));
    let store = db.store().unwrap();
    let children = store.family("lead:subagent:", None).unwrap();
    assert_eq!(children.len(), 6);
    for (key, entry) in &children {
        assert_eq!(entry.extra["spawnedBy"], "lead", "{key}");
        let bytes = store.log_bytes(&entry.session_id).unwrap().unwrap();
        let loaded =
            rampart_sessions::parse_bytes(&bytes, &rampart_sessions::LoadOptions::default())
                .unwrap();
        assert!(loaded.tree.len() > 5, "{key}");
    }
}

#[test]
fn migrate_carries_blobs_both_ways_and_reports_a_damaged_one() {
    use rampart_host::blobs::BlobStore;
    use rampart_sessions::blobs::{Blob, BlobMedium, BlobRef};

    let Some(db) = TestDatabase::create("migrate blobs") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let original = sessions_dir(&dir.path().join("before"));
    let before = original.dir().to_str().unwrap().to_owned();
    // The original of a capped tool result, kept beside the sessions; binary bytes included.
    let output: Vec<u8> = b"the whole tool output\n"
        .repeat(5000)
        .into_iter()
        .chain([0u8, 0xff, 0xfe])
        .collect();
    let on_disk = BlobStore::in_sessions_dir(original.dir())
        .put(&output)
        .unwrap();

    let (ok, text) = migrate(&before, db.url());
    assert!(ok, "{text}");
    assert!(
        text.contains("migrated 2 sessions") && text.contains("blobs: 1 copied, 0 already there"),
        "{text}"
    );
    let database = db.store().unwrap();
    let reference = BlobRef::parse(&on_disk).unwrap();
    assert!(database.blob_medium().get(&reference).unwrap() == output);
    // A person reads it from the database with `sessions blob`.
    let out = common::rampart(&["sessions", "--store", db.url(), "blob", &on_disk]);
    assert!(out.status.success(), "{}", common::text(&out));
    assert!(out.stdout == output, "`sessions blob` printed other bytes");

    // A blob a replica stored in the database only comes back to a directory too.
    let served = b"stored by a replica".to_vec();
    let served_ref = BlobRef::of(&served);
    database
        .blob_medium()
        .put(Blob::new(&served_ref, &served))
        .unwrap();
    let after = dir.path().join("after");
    let (ok, text) = migrate(db.url(), after.to_str().unwrap());
    assert!(ok, "{text}");
    assert!(text.contains("blobs: 2 copied, 0 already there"), "{text}");
    let back = BlobStore::in_sessions_dir(&after);
    assert!(back.get(&on_disk).unwrap() == output);
    assert_eq!(back.get(&served_ref.to_string()).unwrap(), served);
    let out = common::rampart(&[
        "--sessions-dir",
        after.to_str().unwrap(),
        "sessions",
        "blob",
        &served_ref.to_string(),
    ]);
    assert!(out.status.success(), "{}", common::text(&out));
    assert_eq!(out.stdout, served);

    // Again: nothing copied twice.
    let (ok, text) = migrate(&before, db.url());
    assert!(ok, "{text}");
    assert!(text.contains("blobs: 0 copied, 1 already there"), "{text}");

    // A blob file changed by hand is named and not copied; the command fails, the rest goes.
    let damaged = BlobStore::in_sessions_dir(original.dir())
        .put(b"will be damaged")
        .unwrap();
    let file = BlobStore::in_sessions_dir(original.dir())
        .path_of(&damaged)
        .unwrap()
        .unwrap();
    std::fs::write(&file, b"changed by hand").unwrap();
    let (ok, text) = migrate(&before, db.url());
    assert!(!ok, "{text}");
    assert!(
        text.contains(&damaged) && text.contains("changed or damaged"),
        "{text}"
    );
    assert!(
        !database
            .blob_medium()
            .contains(&BlobRef::parse(&damaged).unwrap())
            .unwrap()
    );
}

#[test]
fn a_missing_blob_is_named_by_sessions_blob() {
    let Some(db) = TestDatabase::create("sessions blob missing") else {
        return;
    };
    drop(db.store().unwrap());
    let absent = rampart_sessions::blobs::BlobRef::of(b"never stored").to_string();
    let out = common::rampart(&["sessions", "--store", db.url(), "blob", &absent]);
    let text = common::text(&out);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains(&absent) && text.contains(db.name()), "{text}");
    let out = common::rampart(&["sessions", "--store", db.url(), "blob", "sha256:12"]);
    let text = common::text(&out);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("64 hex digits"), "{text}");
}

/// `sessions doctor` names a blob a session refers to that its store lacks (a directory copied
/// without `blobs/`, then migrated), on the directory and on the database alike; once the blob
/// is there, both are fine.
#[test]
fn doctor_names_a_blob_a_session_refers_to_that_the_store_lacks() {
    use rampart_host::blobs::BlobStore;

    let Some(db) = TestDatabase::create("doctor blobs") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let sessions = dir.path().join("sessions");
    let store = SessionStore::open(&sessions).unwrap();
    store
        .create(
            &mut |_| "agent:capped".to_owned(),
            SessionHeader::new("/w"),
            EntryFields::new(),
        )
        .unwrap();
    let original = b"the whole output of the tool".repeat(100);
    let reference = rampart_sessions::blobs::BlobRef::of(&original).to_string();
    let entry = SharedStore::get(&store, "agent:capped").unwrap().unwrap();
    let mut session =
        SharedStore::open(&store, "agent:capped", &entry, SessionOptions::default()).unwrap();
    session
        .append_message(AgentMessage::user_text(
            format!("the head [... 2700 more characters truncated; full output: {reference}]"),
            1,
        ))
        .unwrap();
    session.sync().unwrap();
    drop(session);
    let dir_arg = sessions.to_str().unwrap();

    let out = common::rampart(&["--sessions-dir", dir_arg, "sessions", "doctor"]);
    let text = common::text(&out);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("missing blob") && text.contains(&reference),
        "{text}"
    );

    let (ok, text) = migrate(dir_arg, db.url());
    assert!(ok, "{text}");
    let out = common::rampart(&["sessions", "--store", db.url(), "doctor"]);
    let text = common::text(&out);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("missing blob") && text.contains(&reference) && text.contains(db.name()),
        "{text}"
    );

    // The blob restored in the directory and migrated again: both stores are whole.
    BlobStore::in_sessions_dir(&sessions)
        .put(&original)
        .unwrap();
    let out = common::rampart(&["--sessions-dir", dir_arg, "sessions", "doctor"]);
    assert!(out.status.success(), "{}", common::text(&out));
    let (ok, text) = migrate(dir_arg, db.url());
    assert!(ok && text.contains("blobs: 1 copied"), "{text}");
    let out = common::rampart(&["sessions", "--store", db.url(), "doctor"]);
    let text = common::text(&out);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("ok: 1 sessions registered") && text.contains("1 blobs"),
        "{text}"
    );
}
