//! Syncing: incremental counts, reindexing, damaged databases, transcripts, provider failures.

use std::fs;
use std::sync::Arc;

use rampart_memory::{
    Embedder, MemoryIndex, MemorySettings, SearchParams, Source, SyncReason, VectorBackend,
};

use crate::common::{Agent, SwitchEmbedder, local_model};

fn paths(index: &MemoryIndex, query: &str) -> Vec<String> {
    index
        .search(query, &SearchParams::default())
        .unwrap()
        .results
        .into_iter()
        .map(|r| r.path)
        .collect()
}

#[test]
fn syncs_count_added_changed_removed_and_unchanged_files() {
    let agent = Agent::new();
    agent.write("MEMORY.md", "# Me\nI prefer tea over coffee.\n");
    agent.write("memory/a.md", "The staging server is called heron.\n");
    agent.write("memory/b.md", "The cat is named pumpernickel.\n");
    let index = agent.open_keyword();

    let first = index.sync(SyncReason::Manual).unwrap();
    assert_eq!(first.full_reindex.as_deref(), Some("new index"));
    assert_eq!(
        (first.files_added, first.files_changed, first.files_removed),
        (3, 0, 0)
    );
    assert_eq!(first.chunks_written, 3);
    assert_eq!(first.embeddings_computed, 0);

    let again = index.sync(SyncReason::Manual).unwrap();
    assert_eq!(again.full_reindex, None);
    assert_eq!(
        (
            again.files_added,
            again.files_changed,
            again.files_unchanged
        ),
        (0, 0, 3)
    );
    assert_eq!(again.chunks_written, 0);

    agent.write("memory/a.md", "The staging server is called egret now.\n");
    agent.remove("memory/b.md");
    let third = index.sync(SyncReason::Manual).unwrap();
    assert_eq!(
        (
            third.files_added,
            third.files_changed,
            third.files_removed,
            third.files_unchanged
        ),
        (0, 1, 1, 1)
    );
    assert_eq!(third.chunks_written, 1);
    assert_eq!(third.chunks_removed, 2);
    assert_eq!(paths(&index, "egret"), vec!["memory/a.md"]);
    assert!(
        paths(&index, "heron").is_empty(),
        "the old text of a.md is gone"
    );
    assert!(
        paths(&index, "pumpernickel").is_empty(),
        "b.md's chunks are gone"
    );
    let status = index.status();
    assert_eq!((status.files, status.chunks), (2, 2));
}

#[test]
fn a_provider_change_reindexes_and_the_cache_spares_recomputing() {
    let agent = Agent::new();
    agent.write("memory/a.md", "alpha beta gamma\n");
    agent.write("memory/b.md", "delta epsilon\n");
    let (_m, model) = local_model(&["alpha", "beta", "gamma", "delta", "epsilon"], &[], 16);

    let keyword = agent.open_keyword();
    keyword.sync(SyncReason::Manual).unwrap();
    assert_eq!(keyword.status().chunks_with_vectors, 0);
    drop(keyword);

    let counting = SwitchEmbedder::new(model.clone());
    let (index, _) = agent.open(MemorySettings::default(), Some(counting.clone()));
    let report = index.sync(SyncReason::Manual).unwrap();
    assert!(
        report.full_reindex.as_deref().unwrap().contains("local"),
        "{report:?}"
    );
    assert_eq!(report.files_added, 2);
    assert_eq!(report.embeddings_computed, 2);
    assert_eq!(index.status().chunks_with_vectors, 2);
    assert_eq!(index.status().provider_summary, "local/tiny-model");

    // A forced rebuild takes every vector from the cache.
    let rebuilt = index.reindex(SyncReason::Manual).unwrap();
    assert_eq!(rebuilt.embeddings_computed, 0);
    assert_eq!(rebuilt.embeddings_cached, 2);
    drop(index);

    // Same provider and model: no reindex.
    let (index, _) = agent.open(
        MemorySettings::default(),
        Some(model.clone() as Arc<dyn Embedder>),
    );
    let report = index.sync(SyncReason::Manual).unwrap();
    assert_eq!(report.full_reindex, None);
    assert_eq!(report.files_unchanged, 2);
    drop(index);

    // A chunking change reindexes too.
    let settings = MemorySettings {
        chunk_tokens: 100,
        ..Default::default()
    };
    let (index, _) = agent.open(settings, Some(model));
    assert!(
        index
            .sync(SyncReason::Manual)
            .unwrap()
            .full_reindex
            .is_some()
    );
}

#[test]
fn a_damaged_database_is_moved_aside_and_rebuilt_from_the_markdown() {
    let agent = Agent::new();
    agent.write(
        "MEMORY.md",
        "Wifi password hint: the name of the first dog.\n",
    );
    agent.write(
        "memory/2026-01-02.md",
        "Met Priya about the lighthouse project.\n",
    );
    let before: Vec<Vec<u8>> = ["MEMORY.md", "memory/2026-01-02.md"]
        .iter()
        .map(|p| fs::read(agent.workspace.join(p)).unwrap())
        .collect();
    {
        let index = agent.open_keyword();
        index.sync(SyncReason::Manual).unwrap();
    }
    for companion in ["-wal", "-shm"] {
        let _ = fs::remove_file(format!("{}{companion}", agent.db.display()));
    }
    fs::write(&agent.db, b"\x00\x01garbage that is not SQLite".repeat(100)).unwrap();

    let (index, open) = agent.open(MemorySettings::default(), None);
    let moved = open
        .quarantined
        .clone()
        .expect("the damaged file is reported on open");
    assert!(open.created);
    assert!(moved.to.exists(), "moved aside, not deleted");
    assert!(fs::read(&moved.to).unwrap().starts_with(b"\x00\x01garbage"));
    assert_eq!(index.status().quarantined.as_ref(), Some(&moved));

    let report = index.sync(SyncReason::Manual).unwrap();
    assert_eq!(
        report.quarantined.as_ref(),
        Some(&moved),
        "and in the first sync report"
    );
    assert_eq!(report.files_added, 2);
    assert_eq!(paths(&index, "lighthouse"), vec!["memory/2026-01-02.md"]);
    // The second sync does not report it again.
    assert_eq!(index.sync(SyncReason::Manual).unwrap().quarantined, None);

    let after: Vec<Vec<u8>> = ["MEMORY.md", "memory/2026-01-02.md"]
        .iter()
        .map(|p| fs::read(agent.workspace.join(p)).unwrap())
        .collect();
    assert_eq!(before, after, "the markdown is never written");
}

fn transcript() -> String {
    [
        r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#,
        r#"{"type":"message","id":"a1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"How do we roll out the kubernetes upgrade?","timestamp":1}}"#,
        r#"{"type":"thinking_level_change","id":"a2","parentId":"a1","timestamp":"2026-01-01T00:00:02.000Z","thinkingLevel":"high"}"#,
        r#"{"type":"message","id":"a3","parentId":"a2","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"assistant","content":[{"type":"text","text":"Drain one node pool at a time."}],"api":"x","provider":"p","model":"m","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":2}}"#,
    ]
    .join("\n")
}

#[test]
fn transcripts_are_indexed_when_sessions_are_a_source_with_jsonl_lines() {
    let agent = Agent::new();
    fs::write(agent.sessions.join("s1.jsonl"), transcript()).unwrap();

    let default = agent.open_keyword();
    default.sync(SyncReason::Manual).unwrap();
    assert!(
        paths(&default, "kubernetes").is_empty(),
        "sessions are opt-in"
    );
    drop(default);

    let settings = MemorySettings {
        sources: vec![Source::Memory, Source::Sessions],
        ..Default::default()
    };
    let (index, _) = agent.open(settings, None);
    let report = index.sync(SyncReason::Manual).unwrap();
    assert_eq!(report.files_added, 1);
    let outcome = index
        .search("kubernetes upgrade", &SearchParams::default())
        .unwrap();
    assert_eq!(outcome.results.len(), 1);
    let hit = &outcome.results[0];
    assert_eq!(hit.path, "sessions/s1.jsonl");
    assert_eq!(hit.source, Source::Sessions);
    // The text's lines 1–2 are the JSONL's lines 2 and 4.
    assert_eq!((hit.start_line, hit.end_line), (2, 4));
    assert!(
        hit.snippet
            .starts_with("User: How do we roll out the kubernetes upgrade?\nAssistant: Drain")
    );
}

#[test]
fn a_failing_provider_still_indexes_for_keywords_and_a_later_sync_fills_the_vectors() {
    let agent = Agent::new();
    agent.write("memory/a.md", "alpha beta\n");
    agent.write("memory/b.md", "gamma delta\n");
    let (_m, model) = local_model(&["alpha", "beta", "gamma", "delta"], &[], 16);
    let switch = SwitchEmbedder::new(model);
    switch.fail_with("embedding provider timeout");
    let (index, _) = agent.open(MemorySettings::default(), Some(switch.clone()));

    let report = index.sync(SyncReason::Manual).unwrap();
    assert!(
        report
            .embedding_error
            .as_deref()
            .unwrap()
            .contains("timeout")
    );
    assert_eq!(report.chunks_written, 2);
    let status = index.status();
    assert_eq!((status.chunks, status.chunks_with_vectors), (2, 0));
    assert!(status.last_sync.unwrap().error.unwrap().contains("timeout"));
    // The query cannot be embedded either: the search fails (the tool turns this into its
    // failure result).
    assert!(index.search("alpha", &SearchParams::default()).is_err());

    switch.recover();
    let report = index.sync(SyncReason::Manual).unwrap();
    assert_eq!(report.embedding_error, None);
    assert_eq!(report.files_unchanged, 2);
    assert_eq!(report.embeddings_computed, 2);
    assert_eq!(index.status().chunks_with_vectors, 2);
    let outcome = index.search("alpha", &SearchParams::default()).unwrap();
    assert_eq!(outcome.results[0].path, "memory/a.md");
    assert!(outcome.vector_hits > 0);
}

#[test]
fn status_says_keyword_only_without_a_provider() {
    let agent = Agent::new();
    agent.write("MEMORY.md", "hello\n");
    let index = agent.open_keyword();
    let before = index.status();
    assert_eq!(
        before.provider_summary,
        "keyword-only (no embedding provider)"
    );
    assert_eq!(before.search_mode, "fts-only");
    assert_eq!(before.provider, None);
    assert!(before.fts_available);
    assert_eq!(before.vector_backend, VectorBackend::SqliteVec);
    assert_eq!(before.last_sync, None);
    assert_eq!(before.db_path, agent.db);
    index.mark_dirty();
    assert!(index.status().dirty);
    index.sync(SyncReason::Manual).unwrap();
    let after = index.status();
    assert!(!after.dirty);
    assert_eq!((after.files, after.chunks), (1, 1));
    let last = after.last_sync.clone().unwrap();
    assert!(last.ok);
    assert_eq!(last.reason, "manual");
    let json = after.to_json();
    assert_eq!(
        json["providerSummary"],
        "keyword-only (no embedding provider)"
    );
    assert_eq!(json["vectorBackend"], "sqlite-vec");
}

#[test]
fn vectors_are_searched_in_memory_by_scan_or_by_sqlite_vec() {
    let agent = Agent::new();
    agent.write("memory/a.md", "alpha beta\n");
    agent.write("memory/b.md", "gamma delta\n");
    let (_m, model) = local_model(&["alpha", "beta", "gamma", "delta"], &[], 16);
    // In-memory matrix, scan of the stored vectors, then sqlite-vec's KNN (its table filled
    // from the stored vectors once the extension is there).
    for (no_vec, cache_bytes) in [(true, 256 << 20), (true, 0), (false, 0)] {
        let mut options = agent.options(
            MemorySettings {
                vector_cache_max_bytes: cache_bytes,
                ..Default::default()
            },
            Some(model.clone()),
        );
        options.disable_sqlite_vec = no_vec;
        let (index, open) = MemoryIndex::open(options).unwrap();
        let backend = if no_vec {
            VectorBackend::InProcess
        } else {
            VectorBackend::SqliteVec
        };
        assert_eq!(open.vector_backend, backend);
        index.sync(SyncReason::Manual).unwrap();
        let outcome = index.search("gamma", &SearchParams::default()).unwrap();
        assert_eq!(
            outcome.results[0].path, "memory/b.md",
            "cache {cache_bytes}"
        );
        assert!(outcome.vector_hits > 0);
    }
}

#[test]
fn settings_are_clamped_when_the_index_opens() {
    let agent = Agent::new();
    let settings = MemorySettings {
        vector_weight: 3.0,
        text_weight: 1.0,
        candidate_multiplier: 99.0,
        chunk_tokens: 50,
        chunk_overlap: 400,
        half_life_days: 0.0,
        ..Default::default()
    };
    let (index, _) = agent.open(settings, None);
    let used = index.settings();
    assert_eq!((used.vector_weight, used.text_weight), (0.5, 0.5));
    assert_eq!(used.candidate_multiplier, 20.0);
    assert_eq!(used.chunk_overlap, 49);
    assert_eq!(used.half_life_days, 1.0);
}

#[test]
fn a_background_sync_indexes_without_blocking_the_caller() {
    let agent = Agent::new();
    agent.write("MEMORY.md", "The spare key is under the blue pot.\n");
    let index = agent.open_keyword();
    assert!(index.sync_in_background(SyncReason::SessionStart));
    // Wait for it: the generous limit only keeps a broken sync from hanging the run.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while index.status().last_sync.is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "the background sync never ran"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let last = index.status().last_sync.unwrap();
    assert_eq!(last.reason, "session-start");
    assert!(last.ok);
    assert_eq!(index.status().files, 1);
}
