//! Several writers on one index: syncs racing each other (as `rampart memory index` races
//! `rampart serve`'s watcher) store each passage once, and an index that already holds
//! passages more than once is repaired.

use std::sync::{Arc, Barrier};

use rampart_memory::fixtures::{generate_notes, vocabulary};
use rampart_memory::{IndexOptions, MemoryIndex, SearchParams, SyncReason};

use crate::common::Agent;

/// An agent with a few hundred generated notes.
fn agent_with_many_notes() -> Agent {
    let agent = Agent::new();
    let words = vocabulary(400);
    for (path, text) in generate_notes(300_000, &words, 7) {
        agent.write(&path, &text);
    }
    agent.write("MEMORY.md", "The release train leaves on Thursdays.\n");
    agent
}

fn counts(index: &MemoryIndex) -> (usize, usize) {
    let s = index.status();
    (s.files, s.chunks)
}

/// Each index of the same file has its own connection, as separate processes do.
#[test]
fn indexes_of_one_file_syncing_at_once_store_each_passage_once() {
    let agent = agent_with_many_notes();
    // What one sync stores, in an index of its own.
    let expected = {
        let reference = agent.dir.path().join("reference.sqlite");
        let (index, _) = MemoryIndex::open(IndexOptions::new(reference, &agent.workspace)).unwrap();
        index.sync(SyncReason::Manual).unwrap();
        counts(&index)
    };
    for force in [false, true] {
        let barrier = Arc::new(Barrier::new(3));
        let handles: Vec<_> = (0..3)
            .map(|_| {
                let index = agent.open_keyword();
                let barrier = Arc::clone(&barrier);
                std::thread::spawn(move || {
                    barrier.wait();
                    if force {
                        index.reindex(SyncReason::Manual).unwrap();
                    } else {
                        index.sync(SyncReason::Manual).unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let index = agent.open_keyword();
        assert_eq!(counts(&index), expected, "force: {force}");
        let hits = index
            .search("release train Thursdays", &SearchParams::default())
            .unwrap()
            .results;
        assert_eq!(hits.len(), 1, "force: {force}: {hits:?}");
    }
}

/// An index written by concurrent syncs of an earlier version (every passage three times) is
/// deduplicated when opened: a plain sync then finds it whole.
#[test]
fn an_index_holding_passages_several_times_is_repaired() {
    let agent = agent_with_many_notes();
    let expected = {
        let index = agent.open_keyword();
        index.sync(SyncReason::Manual).unwrap();
        counts(&index)
    };
    {
        let conn = rusqlite::Connection::open(&agent.db).unwrap();
        conn.execute_batch(
            "DROP INDEX IF EXISTS idx_chunks_identity;
             CREATE TEMP TABLE old AS SELECT * FROM chunks;
             INSERT INTO chunks(path, source, start_line, end_line, hash, model, text, embedding, updated_at)
                 SELECT path, source, start_line, end_line, hash, model, text, embedding, updated_at FROM old;
             INSERT INTO chunks(path, source, start_line, end_line, hash, model, text, embedding, updated_at)
                 SELECT path, source, start_line, end_line, hash, model, text, embedding, updated_at FROM old;
             INSERT INTO chunks_fts(rowid, text) SELECT id, text FROM chunks WHERE id > (SELECT MAX(id) FROM old);",
        )
        .unwrap();
        let n: i64 = conn
            .query_row("SELECT COUNT(*) FROM chunks", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n as usize, expected.1 * 3);
    }
    let index = agent.open_keyword();
    index.sync(SyncReason::Manual).unwrap();
    assert_eq!(counts(&index), expected);
    let hits = index
        .search("release train Thursdays", &SearchParams::default())
        .unwrap()
        .results;
    assert_eq!(hits.len(), 1, "{hits:?}");
}
