//! The session registry against real files: round trips, key rules, atomicity, locking.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::Path;
use std::process::Command;

use proptest::prelude::*;
use rampart_sessions::store::{
    CompactionCheckpoint, CompactionSnapshot, RegistryChange, SessionEntry, SessionStore,
    StoreError, UsageSample,
};
use serde_json::{Value, json};

fn write(dir: &Path, text: &str) {
    fs::write(dir.join("sessions.json"), text).unwrap();
}

fn read_json(dir: &Path) -> Value {
    serde_json::from_str(&fs::read_to_string(dir.join("sessions.json")).unwrap()).unwrap()
}

fn dir_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// An entry shaped like OpenClaw writes them, with fields Rampart does not model.
fn openclaw_entry() -> Value {
    json!({
        "sessionId": "2f6c0d1e-aaaa-bbbb-cccc-0123456789ab",
        "updatedAt": 1_760_000_000_000u64,
        "sessionFile": "2f6c0d1e.jsonl",
        "inputTokens": 1200,
        "outputTokens": 300,
        "totalTokens": 15000,
        "totalTokensFresh": true,
        "contextTokens": 200000,
        "cacheRead": 9000,
        "cacheWrite": 100,
        "compactionCount": 1,
        "compactionCheckpoints": [{
            "checkpointId": "cp-1",
            "sessionKey": "agent:main:main",
            "sessionId": "2f6c0d1e-aaaa-bbbb-cccc-0123456789ab",
            "createdAt": 1_759_999_000_000u64,
            "reason": "overflow",
            "tokensBefore": 190000,
            "tokensAfter": 14000,
            "firstKeptEntryId": "a1b2c3d4",
            "futureCheckpointField": {"nested": [1, 2, 3]},
            "preCompaction": {"sessionId": "2f6c0d1e", "leafId": "deadbeef", "branchName": "x"},
            "postCompaction": {"sessionId": "2f6c0d1e", "entryId": "cafebabe"}
        }],
        "modelProvider": "anthropic",
        "model": "claude-sonnet",
        "thinkingLevel": "low",
        "deliveryContext": {"channel": "telegram", "to": "12345", "threadId": null},
        "skillsSnapshot": {"prompt": "…", "skills": [{"name": "a"}]},
        "label": "Bug hunt ✨",
        "abortedLastRun": false
    })
}

#[test]
fn round_trip_keeps_unknown_fields_verbatim() {
    let dir = tempfile::tempdir().unwrap();
    let original = openclaw_entry();
    write(
        dir.path(),
        &serde_json::to_string_pretty(&json!({ "agent:main:main": original })).unwrap(),
    );
    let store = SessionStore::open(dir.path()).unwrap();

    let entry = store.get("agent:main:main").unwrap().unwrap();
    assert_eq!(entry.total_tokens, Some(15000));
    assert_eq!(entry.compaction_checkpoints.len(), 1);
    assert_eq!(
        entry.compaction_checkpoints[0]
            .pre_compaction
            .leaf_id
            .as_deref(),
        Some("deadbeef")
    );
    assert_eq!(entry.extra["model"], json!("claude-sonnet"));

    // Touch another session: the first must come back exactly as it was.
    store
        .upsert("agent:main:other", SessionEntry::new("other", 1))
        .unwrap();
    assert_eq!(store.writes(), 1);
    let file = read_json(dir.path());
    assert_eq!(file["agent:main:main"], original);
    assert_eq!(file["agent:main:other"]["sessionId"], json!("other"));
}

#[test]
fn file_is_pretty_printed_with_two_spaces() {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::open(dir.path()).unwrap();
    store.upsert("k", SessionEntry::new("s", 7)).unwrap();
    let text = fs::read_to_string(store.path()).unwrap();
    assert_eq!(
        text,
        "{\n  \"k\": {\n    \"sessionId\": \"s\",\n    \"updatedAt\": 7,\n    \"compactionCount\": 0\n  }\n}"
    );
}

#[test]
fn keys_are_lower_cased_on_write_and_read() {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::open(dir.path()).unwrap();
    store
        .upsert("Agent:Main:Main", SessionEntry::new("s1", 1))
        .unwrap();
    assert_eq!(
        store.get("AGENT:main:MAIN").unwrap().unwrap().session_id,
        "s1"
    );
    let keys: Vec<String> = store.list().unwrap().into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys, ["agent:main:main"]);
    // A closure inserting a mixed-case key is normalised too.
    store
        .update(|map| map.insert("Other".into(), SessionEntry::new("s2", 2)))
        .unwrap();
    assert!(read_json(dir.path()).get("other").is_some());
    assert!(read_json(dir.path()).get("Other").is_none());
}

#[test]
fn mixed_case_duplicates_merge_to_newest_and_keep_a_backup() {
    let dir = tempfile::tempdir().unwrap();
    let original = r#"{
  "Agent:Main": {"sessionId": "middle", "updatedAt": 7},
  "agent:main": {"sessionId": "newest", "updatedAt": 10, "label": "keep me"},
  "AGENT:MAIN": {"sessionId": "oldest", "updatedAt": 5},
  "solo": {"sessionId": "solo", "updatedAt": 1}
}"#;
    write(dir.path(), original);
    let store = SessionStore::open(dir.path()).unwrap();
    let all = store.list().unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(all[0].0, "agent:main");
    assert_eq!(all[0].1.session_id, "newest");
    assert_eq!(all[0].1.extra["label"], json!("keep me"));

    // Reading never rewrites; a no-op update neither.
    store.update(|_| ()).unwrap();
    assert_eq!(fs::read_to_string(store.path()).unwrap(), original);

    // The first real write drops the duplicates, and keeps the original text beside it.
    store
        .update(|map| map.get_mut("solo").unwrap().updated_at = 2)
        .unwrap();
    let file = read_json(dir.path());
    assert_eq!(file.as_object().unwrap().len(), 2);
    assert_eq!(file["agent:main"]["sessionId"], json!("newest"));
    let backups: Vec<String> = dir_names(dir.path())
        .into_iter()
        .filter(|n| n.contains("premerge"))
        .collect();
    assert_eq!(backups.len(), 1, "{backups:?}");
    assert_eq!(
        fs::read_to_string(dir.path().join(&backups[0])).unwrap(),
        original
    );
}

#[test]
fn unchanged_store_is_not_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    // Key order and spacing unlike ours: a no-op must not reformat the user's file.
    let original = "{\"b\":{\"updatedAt\":2,\"sessionId\":\"b\",\"x\":1},\n \"a\":{\"sessionId\":\"a\",\"updatedAt\":1}}\n";
    write(dir.path(), original);
    let store = SessionStore::open(dir.path()).unwrap();
    let before = fs::metadata(store.path()).unwrap();
    let before_mtime = before.modified().unwrap();

    store.update(|_| ()).unwrap();
    store
        .update(|map| map.get_mut("a").unwrap().updated_at = 1)
        .unwrap();
    store.get("a").unwrap();
    store.list().unwrap();
    let after = fs::metadata(store.path()).unwrap();
    assert_eq!(store.writes(), 0);
    assert_eq!(fs::read_to_string(store.path()).unwrap(), original);
    assert_eq!(before_mtime, after.modified().unwrap());
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        assert_eq!(before.ino(), after.ino(), "the file was not replaced");
    }

    // A real change writes once; repeating it is a no-op again.
    store
        .update(|map| map.get_mut("a").unwrap().updated_at = 3)
        .unwrap();
    store
        .update(|map| map.get_mut("a").unwrap().updated_at = 3)
        .unwrap();
    assert_eq!(store.writes(), 1);

    // An empty directory stays empty when nothing is registered.
    let empty = tempfile::tempdir().unwrap();
    let store = SessionStore::open(empty.path()).unwrap();
    store.update(|_| ()).unwrap();
    assert!(!store.path().exists());
}

#[test]
fn atomic_writes_leave_no_temp_files() {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::open(dir.path()).unwrap();
    for i in 0..5 {
        store
            .upsert(&format!("k{i}"), SessionEntry::new(format!("s{i}"), i))
            .unwrap();
    }
    assert_eq!(store.writes(), 5);
    assert_eq!(
        dir_names(dir.path()),
        ["sessions.json", "sessions.json.lock"]
    );
}

#[cfg(unix)]
#[test]
fn user_permissions_on_the_registry_are_kept() {
    use std::os::unix::fs::PermissionsExt;

    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::open(dir.path()).unwrap();
    store.upsert("k", SessionEntry::new("s", 1)).unwrap();
    assert_eq!(
        fs::metadata(store.path()).unwrap().permissions().mode() & 0o777,
        0o600
    );
    fs::set_permissions(store.path(), fs::Permissions::from_mode(0o640)).unwrap();
    store.upsert("k", SessionEntry::new("s", 2)).unwrap();
    assert_eq!(
        fs::metadata(store.path()).unwrap().permissions().mode() & 0o777,
        0o640
    );
}

#[test]
fn malformed_file_is_reported_and_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::open(dir.path()).unwrap();
    store.upsert("k", SessionEntry::new("s", 1)).unwrap();

    let broken = "{\n  \"k\": {\"sessionId\": \"s\", \"updatedAt\": 1},,\n}\n";
    write(dir.path(), broken);
    let err = store
        .update(|map| map.get_mut("k").map(|e| e.updated_at = 2))
        .unwrap_err();
    match &err {
        StoreError::Malformed { path, line, .. } => {
            assert_eq!(path, store.path());
            assert_eq!(*line, 2);
        }
        other => panic!("unexpected error {other:?}"),
    }
    let message = err.to_string();
    assert!(
        message.contains(&store.path().display().to_string()),
        "{message}"
    );
    assert!(message.contains("line 2"), "{message}");
    assert!(
        message.contains("fix the file") && message.contains("move it aside"),
        "{message}"
    );
    assert_eq!(fs::read_to_string(store.path()).unwrap(), broken);
    assert!(matches!(
        store.upsert("k", SessionEntry::new("s", 3)),
        Err(StoreError::Malformed { .. })
    ));
    assert_eq!(fs::read_to_string(store.path()).unwrap(), broken);

    // Opening reports it too, and so do structurally wrong files.
    assert!(matches!(
        SessionStore::open(dir.path()),
        Err(StoreError::Malformed { .. })
    ));
    for bad in [
        "[]",
        "{\"k\": {\"updatedAt\": 1}}",
        "{\"k\": {\"sessionId\": \"s\", \"updatedAt\": -1}}",
    ] {
        write(dir.path(), bad);
        let err = SessionStore::open(dir.path()).unwrap_err();
        assert!(matches!(err, StoreError::Malformed { .. }), "{bad}: {err}");
    }
}

#[test]
fn usage_is_recorded_as_last_run_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::open(dir.path()).unwrap();
    store.upsert("k", SessionEntry::new("s", 1)).unwrap();
    let usage = UsageSample {
        input: 1000,
        output: 200,
        cache_read: 5000,
        cache_write: 10,
        context_used: 6210,
        context_window: Some(200_000),
    };
    store.record_usage("K", usage).unwrap();
    let entry = store
        .record_usage(
            "k",
            UsageSample {
                input: 1100,
                ..usage
            },
        )
        .unwrap();
    assert_eq!(
        entry.input_tokens,
        Some(1100),
        "a snapshot, not a running sum"
    );
    assert_eq!(entry.output_tokens, Some(200));
    assert_eq!(entry.cache_read, Some(5000));
    assert_eq!(entry.total_tokens, Some(6210));
    assert_eq!(entry.total_tokens_fresh, Some(true));
    assert_eq!(entry.context_tokens, Some(200_000));
    assert!(entry.updated_at > 1);
    assert_eq!(store.get("k").unwrap().unwrap(), entry);

    let err = store.record_usage("missing", usage).unwrap_err();
    assert!(matches!(err, StoreError::UnknownSession { ref key, .. } if key == "missing"));
}

fn checkpoint(n: u32, tokens_after: Option<u64>) -> CompactionCheckpoint {
    CompactionCheckpoint {
        checkpoint_id: format!("cp-{n}"),
        session_key: "k".into(),
        session_id: "s".into(),
        created_at: 1,
        reason: "overflow".into(),
        tokens_before: Some(190_000),
        tokens_after,
        summary: None,
        first_kept_entry_id: Some("a1b2c3d4".into()),
        pre_compaction: CompactionSnapshot {
            session_id: "s".into(),
            leaf_id: Some("00000001".into()),
            ..Default::default()
        },
        post_compaction: CompactionSnapshot {
            session_id: "s".into(),
            entry_id: Some("00000002".into()),
            ..Default::default()
        },
        extra: Default::default(),
    }
}

#[test]
fn compaction_recomputes_counters_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::open(dir.path()).unwrap();
    store.upsert("k", SessionEntry::new("s", 1)).unwrap();
    store
        .record_usage(
            "k",
            UsageSample {
                input: 190_000,
                output: 10,
                context_used: 190_000,
                context_window: Some(200_000),
                ..Default::default()
            },
        )
        .unwrap();

    let entry = store
        .record_compaction("k", checkpoint(1, Some(12_000)), 25)
        .unwrap();
    assert_eq!(entry.compaction_count, 1);
    assert_eq!(entry.total_tokens, Some(12_000));
    assert_eq!(entry.total_tokens_fresh, Some(true));
    assert_eq!(
        entry.input_tokens, None,
        "the pre-compaction prompt size is stale"
    );
    assert_eq!(
        entry.context_tokens,
        Some(200_000),
        "the window does not change"
    );

    let entry = store
        .record_compaction("k", checkpoint(2, None), 25)
        .unwrap();
    assert_eq!(entry.compaction_count, 2);
    assert_eq!(entry.total_tokens, Some(12_000));
    assert_eq!(entry.total_tokens_fresh, Some(false));
    let ids: Vec<_> = entry
        .compaction_checkpoints
        .iter()
        .map(|c| c.checkpoint_id.as_str())
        .collect();
    assert_eq!(ids, ["cp-1", "cp-2"]);
    assert_eq!(
        read_json(dir.path())["k"]["compactionCheckpoints"][0]["preCompaction"]["leafId"],
        json!("00000001")
    );
}

#[test]
fn compaction_checkpoints_keep_only_the_newest_ones() {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::open(dir.path()).unwrap();
    store.upsert("k", SessionEntry::new("s", 1)).unwrap();
    for i in 1..=30 {
        store
            .record_compaction("k", checkpoint(i, Some(1_000)), 25)
            .unwrap();
    }
    let entry = store.get("k").unwrap().unwrap();
    assert_eq!(
        entry.compaction_count, 30,
        "the count still counts them all"
    );
    let ids: Vec<_> = entry
        .compaction_checkpoints
        .iter()
        .map(|c| c.checkpoint_id.clone())
        .collect();
    let expected: Vec<_> = (6..=30).map(|i| format!("cp-{i}")).collect();
    assert_eq!(ids, expected, "the 25 newest, oldest first");
    let entry = store
        .record_compaction("k", checkpoint(31, Some(1_000)), 3)
        .unwrap();
    assert_eq!(entry.compaction_checkpoints.len(), 3);
}

#[test]
fn upsert_carries_over_fields_it_does_not_set() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        r#"{"k": {"sessionId": "s", "updatedAt": 1, "label": "mine", "model": "m1"}}"#,
    );
    let store = SessionStore::open(dir.path()).unwrap();
    let mut fresh = SessionEntry::new("s2", 2);
    fresh.extra.insert("model".into(), json!("m2"));
    let previous = store.upsert("k", fresh).unwrap().unwrap();
    assert_eq!(previous.session_id, "s");
    let entry = store.get("k").unwrap().unwrap();
    assert_eq!(entry.session_id, "s2");
    assert_eq!(entry.extra["label"], json!("mine"));
    assert_eq!(entry.extra["model"], json!("m2"));
}

#[test]
fn nested_update_is_an_error_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::open(dir.path()).unwrap();
    let inner = store
        .update(|_| store.upsert("k", SessionEntry::new("s", 1)))
        .unwrap();
    assert!(matches!(inner, Err(StoreError::ReentrantUpdate { .. })));
    // The outer update released everything: the next one works.
    store.upsert("k", SessionEntry::new("s", 1)).unwrap();
}

#[test]
fn panicking_update_writes_nothing_and_releases_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::open(dir.path()).unwrap();
    store.upsert("k", SessionEntry::new("s", 1)).unwrap();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        store.update(|map| {
            map.clear();
            panic!("boom");
        })
    }));
    assert!(result.is_err());
    assert!(store.get("k").unwrap().is_some());
    store.upsert("k", SessionEntry::new("s", 2)).unwrap();
}

#[test]
fn a_hung_peer_gives_a_lock_timeout_naming_the_lock_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::open(dir.path()).unwrap();
    let (locked_tx, locked_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let store = &store;
    std::thread::scope(|scope| {
        scope.spawn(move || {
            store
                .update(|_| {
                    locked_tx.send(()).unwrap();
                    release_rx.recv().unwrap();
                })
                .unwrap();
        });
        locked_rx.recv().unwrap();
        let impatient = SessionStore::open(dir.path())
            .unwrap()
            .with_lock_timeout(std::time::Duration::from_millis(20));
        let err = impatient
            .upsert("k", SessionEntry::new("s", 1))
            .unwrap_err();
        assert!(matches!(err, StoreError::LockTimeout { .. }), "{err}");
        assert!(err.to_string().contains("sessions.json.lock"), "{err}");
        // Reads do not need the lock.
        assert!(impatient.list().unwrap().is_empty());
        release_tx.send(()).unwrap();
    });
    store.upsert("k", SessionEntry::new("s", 1)).unwrap();
}

fn increment(store: &SessionStore, times: u64) {
    for _ in 0..times {
        store
            .update(|map| map.get_mut("counter").unwrap().compaction_count += 1)
            .unwrap();
    }
}

#[test]
fn concurrent_threads_lose_no_increments() {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::open(dir.path()).unwrap();
    store.upsert("counter", SessionEntry::new("c", 1)).unwrap();
    // Separate handles per thread, as separate components of the host would have.
    std::thread::scope(|scope| {
        for _ in 0..3 {
            scope.spawn(|| increment(&SessionStore::open(dir.path()).unwrap(), 20));
        }
        scope.spawn(|| increment(&store, 20));
    });
    assert_eq!(store.get("counter").unwrap().unwrap().compaction_count, 80);
}

const CHILD_DIR_ENV: &str = "RAMPART_STORE_TEST_CHILD_DIR";
const CHILD_TEST: &str = "helper_child_process_increments";

/// The child test's full name as the test harness knows it: its module path within the test
/// binary, then its name.
fn child_test_name() -> String {
    match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::{CHILD_TEST}"),
        None => CHILD_TEST.to_string(),
    }
}

/// Not a test on its own: the body of the child processes spawned below.
#[test]
#[ignore = "helper run in child processes by concurrent_processes_lose_no_increments"]
fn helper_child_process_increments() {
    let dir = std::env::var_os(CHILD_DIR_ENV).expect("run by the parent test");
    increment(&SessionStore::open(dir).unwrap(), 25);
}

#[test]
fn concurrent_processes_lose_no_increments() {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::open(dir.path()).unwrap();
    store.upsert("counter", SessionEntry::new("c", 1)).unwrap();
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..2)
        .map(|_| {
            Command::new(&exe)
                .args([
                    "--ignored",
                    "--exact",
                    &child_test_name(),
                    "--test-threads=1",
                ])
                .env(CHILD_DIR_ENV, dir.path())
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    increment(&store, 25);
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    assert_eq!(store.get("counter").unwrap().unwrap().compaction_count, 75);
    assert_eq!(
        dir_names(dir.path()),
        ["sessions.json", "sessions.json.lock"]
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Whatever case mix callers use, the file holds one lower-case key per session and
    /// reads back to what was written.
    #[test]
    fn any_keys_round_trip_normalised(
        entries in proptest::collection::vec(("[a-zA-Z:]{1,6}", 0u64..1000, "[a-z ]{0,8}"), 0..12)
    ) {
        let dir = tempfile::tempdir().unwrap();
        let store = SessionStore::open(dir.path()).unwrap();
        store.update(|map| {
            for (key, updated_at, label) in &entries {
                let mut entry = SessionEntry::new(key.clone(), *updated_at);
                entry.extra.insert("label".into(), json!(label));
                map.insert(key.clone(), entry);
            }
        }).unwrap();
        let loaded = store.load().unwrap();
        let distinct: std::collections::BTreeSet<String> =
            entries.iter().map(|(k, _, _)| k.to_lowercase()).collect();
        prop_assert_eq!(loaded.keys().cloned().collect::<std::collections::BTreeSet<_>>(), distinct);
        // Exact duplicates replace each other in the closure's map; case variants merge.
        let exact: std::collections::BTreeMap<&str, u64> =
            entries.iter().map(|(k, t, _)| (k.as_str(), *t)).collect();
        for (key, entry) in &loaded {
            prop_assert_eq!(&key.to_lowercase(), key);
            let newest = exact
                .iter()
                .filter(|(k, _)| k.to_lowercase() == *key)
                .map(|(_, t)| *t)
                .max()
                .unwrap();
            prop_assert_eq!(entry.updated_at, newest);
        }
        // A second handle reads exactly the same map.
        prop_assert_eq!(SessionStore::open(dir.path()).unwrap().load().unwrap(), loaded);
    }
}

/// Issue 12, defect 10: registry temp files a killed writer left behind are removed when the
/// store is opened, once their process is gone and they are old; a live writer's are kept.
#[test]
fn stale_temp_files_of_dead_writers_are_removed_on_open() {
    let dir = tempfile::tempdir().unwrap();
    SessionStore::open(dir.path()).unwrap();
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3_600);
    let make = |name: &str, modified: std::time::SystemTime| {
        let path = dir.path().join(name);
        let file = std::fs::File::create(&path).unwrap();
        file.set_modified(modified).unwrap();
        path
    };
    // A pid no process has (Linux caps pids far below this).
    let dead_old = make(".sessions.json.4000000000.00000000000000aa.tmp", old);
    let dead_young = make(
        ".sessions.json.4000000000.00000000000000bb.tmp",
        std::time::SystemTime::now(),
    );
    let live_old = make(
        &format!(".sessions.json.{}.00000000000000cc.tmp", std::process::id()),
        old,
    );
    let unrelated = make(".other.4000000000.00000000000000dd.tmp", old);

    SessionStore::open(dir.path()).unwrap();

    assert!(
        !dead_old.exists(),
        "the dead writer's old temp file is removed"
    );
    assert!(
        dead_young.exists(),
        "a young one may belong to a reused pid"
    );
    assert!(live_old.exists(), "a live writer's temp file is in use");
    assert!(
        unrelated.exists(),
        "only the registry's temp files are touched"
    );
}

#[test]
fn a_batch_of_changes_is_one_write_with_the_result_of_applying_them_one_by_one() {
    let usage = |input| UsageSample {
        input,
        output: 100,
        cache_read: 0,
        cache_write: 0,
        context_used: input + 100,
        context_window: Some(32_000),
    };
    let changes = vec![
        RegistryChange::Usage(usage(20_000)),
        RegistryChange::Compaction(Box::new(checkpoint(1, Some(8_000)))),
        RegistryChange::Usage(usage(9_000)),
        RegistryChange::Compaction(Box::new(checkpoint(2, None))),
        RegistryChange::Compaction(Box::new(checkpoint(3, Some(7_000)))),
    ];

    let one_by_one = tempfile::tempdir().unwrap();
    let single = SessionStore::open(one_by_one.path()).unwrap();
    single.upsert("k", SessionEntry::new("s", 1)).unwrap();
    for change in changes.clone() {
        match change {
            RegistryChange::Usage(u) => single.record_usage("k", u).map(|_| ()),
            RegistryChange::Compaction(c) => single.record_compaction("k", *c, 2).map(|_| ()),
        }
        .unwrap();
    }

    let batched = tempfile::tempdir().unwrap();
    let store = SessionStore::open(batched.path()).unwrap();
    store.upsert("k", SessionEntry::new("s", 1)).unwrap();
    let writes = store.writes();
    let mut entry = store.record("k", changes, 2).unwrap().unwrap();
    assert_eq!(store.writes(), writes + 1, "one atomic rewrite");
    let mut expected = single.get("k").unwrap().unwrap();
    entry.updated_at = 0;
    expected.updated_at = 0;
    assert_eq!(entry, expected);
    assert_eq!(entry.compaction_count, 3);
    assert_eq!(entry.compaction_checkpoints.len(), 2);
    assert_eq!(
        (entry.total_tokens, entry.input_tokens),
        (Some(7_000), None),
        "the last change (a compaction) decides the counters"
    );

    assert_eq!(store.record("k", Vec::new(), 2).unwrap(), None);
    assert_eq!(store.writes(), writes + 1, "an empty batch writes nothing");
}
