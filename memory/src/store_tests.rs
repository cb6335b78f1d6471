use super::*;

fn open(path: &Path) -> (Store, Option<Quarantined>) {
    Store::open(path, StoreOptions::default()).unwrap()
}

fn chunk<'a>(
    path: &'a str,
    text: &'a str,
    fts: &'a str,
    embedding: Option<&'a [f32]>,
) -> NewChunk<'a> {
    NewChunk {
        path,
        source: Source::Memory,
        start_line: 1,
        end_line: 3,
        hash: "h",
        model: "m",
        text,
        fts_text: fts,
        embedding,
    }
}

fn quarantined_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".corrupt-"))
        .collect();
    names.sort();
    names
}

#[test]
fn a_new_database_has_the_tables_fts_and_sqlite_vec() {
    let dir = tempfile::tempdir().unwrap();
    let (store, moved) = open(&dir.path().join("sub/agent.sqlite"));
    assert!(moved.is_none());
    assert!(store.fts_available());
    assert!(
        store.vec_available(),
        "sqlite-vec should load from the crate"
    );
    assert_eq!(
        store.meta("schema_version").unwrap().as_deref(),
        Some(SCHEMA_VERSION)
    );
    assert_eq!(store.counts().unwrap(), (0, 0, 0));
}

#[test]
fn garbage_bytes_are_moved_aside_and_a_new_index_made() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.sqlite");
    fs::write(
        &path,
        b"this is not a database at all, just some text".repeat(50),
    )
    .unwrap();
    let (store, moved) = open(&path);
    let moved = moved.expect("the file should be moved aside");
    assert!(moved.reason.contains("SQLite header"), "{}", moved.reason);
    assert!(moved.to.to_string_lossy().contains("agent.sqlite.corrupt-"));
    // The bytes are kept, not deleted.
    assert!(
        fs::read(&moved.to)
            .unwrap()
            .starts_with(b"this is not a database")
    );
    assert_eq!(quarantined_files(dir.path()).len(), 1);
    assert_eq!(store.counts().unwrap(), (0, 0, 0));
}

#[test]
fn a_truncated_database_is_moved_aside() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.sqlite");
    {
        let (mut store, _) = open(&path);
        let text = "lorem ipsum ".repeat(400);
        store
            .transaction(|s| {
                // Distinct passages: one passage is stored once.
                for line in 1..=50 {
                    s.insert_chunk(&NewChunk {
                        start_line: line,
                        end_line: line,
                        ..chunk("memory/a.md", &text, &text, None)
                    })?;
                }
                Ok(())
            })
            .unwrap();
        // Push everything from the log into the main file, then close.
        store
            .conn
            .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .unwrap();
    }
    let len = fs::metadata(&path).unwrap().len();
    assert!(len > 8192, "{len}");
    let file = fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(len / 2 + 100).unwrap();
    drop(file);
    let (store, moved) = open(&path);
    let moved = moved.expect("a truncated file is moved aside");
    assert!(moved.reason.contains("truncated"), "{}", moved.reason);
    assert_eq!(store.counts().unwrap(), (0, 0, 0));
}

#[test]
fn another_programs_database_is_moved_aside_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.sqlite");
    {
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE invoices(id INTEGER PRIMARY KEY, total REAL); INSERT INTO invoices VALUES (1, 9.5);")
            .unwrap();
    }
    let (_store, moved) = open(&path);
    let moved = moved.expect("a foreign database is moved aside");
    assert!(
        moved.reason.contains("not a memory index"),
        "{}",
        moved.reason
    );
    let conn = Connection::open(&moved.to).unwrap();
    let total: f64 = conn
        .query_row("SELECT total FROM invoices", [], |r| r.get(0))
        .unwrap();
    assert_eq!(total, 9.5);
}

#[test]
fn chunks_are_found_by_keyword_and_vector_and_removed_with_their_file() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, _) = open(&dir.path().join("a.sqlite"));
    store.ensure_vec_table(3).unwrap();
    let ids = store
        .transaction(|s| {
            Ok(vec![
                s.insert_chunk(&chunk(
                    "memory/a.md",
                    "the blue whale",
                    "the blue whale",
                    Some(&[1.0, 0.0, 0.0]),
                ))?,
                s.insert_chunk(&chunk(
                    "memory/b.md",
                    "a red fox",
                    "a red fox",
                    Some(&[0.0, 1.0, 0.0]),
                ))?,
            ])
        })
        .unwrap();
    let hits = store.keyword_search("\"whale\"", 10).unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].chunk.id, ids[0]);
    assert_eq!(hits[0].chunk.text, "the blue whale");
    assert!(hits[0].rank < 0.0);
    let knn = store.vec_knn(&[0.9, 0.1, 0.0], 2).unwrap().unwrap();
    assert_eq!(knn[0].0, ids[0]);
    assert!(knn[0].1 > 0.9);
    let scan = store.scan_vectors(&[0.9, 0.1, 0.0], 2).unwrap();
    assert_eq!(
        scan.iter().map(|h| h.0).collect::<Vec<_>>(),
        knn.iter().map(|h| h.0).collect::<Vec<_>>()
    );
    let matrix = store.load_matrix(3).unwrap();
    assert_eq!(matrix.search(&[0.0, 1.0, 0.0], 1)[0].0, ids[1]);

    assert_eq!(store.remove_file("memory/a.md").unwrap(), 1);
    assert!(store.keyword_search("\"whale\"", 10).unwrap().is_empty());
    assert!(
        store
            .vec_knn(&[1.0, 0.0, 0.0], 2)
            .unwrap()
            .unwrap()
            .iter()
            .all(|h| h.0 != ids[0])
    );
    // A query FTS5 cannot parse finds nothing instead of failing.
    assert!(store.keyword_search("\"unbalanced", 10).unwrap().is_empty());
}

#[test]
fn the_embedding_cache_is_keyed_by_provider_model_key_and_hash() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = open(&dir.path().join("a.sqlite"));
    store
        .put_cached_embedding("local", "m", "k1", "abc", &[0.5, 0.25])
        .unwrap();
    assert_eq!(
        store.cached_embedding("local", "m", "k1", "abc").unwrap(),
        Some(vec![0.5, 0.25])
    );
    assert_eq!(
        store.cached_embedding("local", "m", "k2", "abc").unwrap(),
        None
    );
    assert_eq!(
        store.cached_embedding("openai", "m", "k1", "abc").unwrap(),
        None
    );
}

#[test]
fn without_sqlite_vec_vectors_still_search_by_scan() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, _) = Store::open(
        &dir.path().join("a.sqlite"),
        StoreOptions {
            disable_sqlite_vec: true,
        },
    )
    .unwrap();
    assert!(!store.vec_available());
    store.ensure_vec_table(2).unwrap();
    let id = store
        .transaction(|s| s.insert_chunk(&chunk("memory/a.md", "x", "x", Some(&[0.0, 2.0]))))
        .unwrap();
    assert_eq!(store.vec_knn(&[0.0, 1.0], 3).unwrap(), None);
    let hits = store.scan_vectors(&[0.0, 1.0], 3).unwrap();
    assert_eq!(hits[0].0, id);
    assert!((hits[0].1 - 1.0).abs() < 1e-6);
}

#[test]
fn damaged_pages_behind_a_sound_header_are_found_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.sqlite");
    {
        let (mut store, _) = open(&path);
        let text = "lorem ipsum dolor ".repeat(300);
        store
            .transaction(|s| {
                // Distinct passages: one passage is stored once.
                for line in 1..=40 {
                    s.insert_chunk(&NewChunk {
                        start_line: line,
                        end_line: line,
                        ..chunk("memory/a.md", &text, &text, None)
                    })?;
                }
                Ok(())
            })
            .unwrap();
        store
            .conn
            .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .unwrap();
    }
    let mut bytes = fs::read(&path).unwrap();
    let len = bytes.len();
    // Keep the header page and the size; scribble over the pages after it.
    for b in &mut bytes[4096..len / 2] {
        *b = 0xA5;
    }
    fs::write(&path, &bytes).unwrap();
    let (store, moved) = open(&path);
    let moved = moved.expect("quick_check finds the damage");
    assert_eq!(
        fs::read(&moved.to).unwrap().len(),
        len,
        "moved aside intact"
    );
    assert_eq!(store.counts().unwrap(), (0, 0, 0));
}

/// A passage is stored once: the same `(path, start_line, end_line, hash)` again is refused
/// by the index, whoever writes it.
#[test]
fn a_passage_cannot_be_stored_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, _) = open(&dir.path().join("agent.sqlite"));
    store
        .transaction(|s| s.insert_chunk(&chunk("memory/a.md", "x", "x", None)))
        .unwrap();
    let again = store.transaction(|s| s.insert_chunk(&chunk("memory/a.md", "x", "x", None)));
    assert!(again.is_err());
    assert_eq!(store.counts().unwrap().1, 1);
}

#[cfg(unix)]
#[test]
fn a_new_index_and_its_directory_are_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory").join("main.sqlite");
    let (store, _) = open(&path);
    assert_eq!(mode(dir.path().join("memory").as_path()), 0o700);
    assert_eq!(mode(&path), 0o600);
    // SQLite's side files take the database's mode.
    let wal = dir.path().join("memory").join("main.sqlite-wal");
    if wal.exists() {
        assert_eq!(mode(&wal), 0o600);
    }
    drop(store);
    // An existing index keeps the mode its owner gave it.
    fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
    let (_store, _) = open(&path);
    assert_eq!(mode(&path), 0o640);
}

/// Several connections opening one new index at the same moment (three `memory index` runs
/// started together) all open it: none fails with "database is locked" while another switches
/// the file to WAL mode or writes the schema, and none takes the index another is still
/// making for someone else's database and moves it aside.
#[test]
fn connections_opening_a_new_index_together_all_open_it() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..40 {
        let path = dir.path().join(format!("index-{round}.sqlite"));
        let start = std::sync::Arc::new(std::sync::Barrier::new(6));
        let handles: Vec<_> = (0..6)
            .map(|_| {
                let (path, start) = (path.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    Store::open(&path, StoreOptions::default()).map(|_| ())
                })
            })
            .collect();
        for handle in handles {
            if let Err(e) = handle.join().unwrap() {
                panic!("round {round}: {e}");
            }
        }
        // Made: the next opens go without the lock.
        assert!(crate::quarantine::is_made(&path));
        // Nobody took another's index in the making for damage.
        assert_eq!(
            quarantined_files(dir.path()),
            Vec::<String>::new(),
            "round {round}"
        );
    }
    assert!(!crate::quarantine::is_made(&dir.path().join("none.sqlite")));
}
