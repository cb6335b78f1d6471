//! Bringing the index up to date with the files (`prompt-and-memory.md` §2.4).
//!
//! A sync is incremental. A file whose size and modification time match its record is not
//! read (unless it changed in the last two seconds, where a second edit can keep both); one
//! that is read but hashes the same only has its record updated; the others are chunked and
//! replace their old chunks. Files gone from disk lose their chunks. The index is rebuilt
//! from scratch when the provider, model, provider key or chunking changed.
//!
//! Embeddings come from the cache when the same text was embedded before (by hash), else
//! from the provider, outside the write lock so that searches go on meanwhile. If the
//! provider fails, chunks are still written without vectors (keyword search finds them), the
//! error is in the report, and a later sync fills the missing vectors in.
//!
//! Writes are grouped: files are written a few megabytes at a time, each group in one
//! transaction with prepared statements. A file's passages are replaced whole (deleted, then
//! inserted, in that transaction), so a sync that races another one cannot leave a passage
//! twice; syncs of one index are also one process at a time ([`crate::sync_lock`]).

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use crate::chunking::{Chunk, chunk_markdown, hex};
use crate::embed::{EmbedError, Embedder};
use crate::error::MemoryError;
use crate::fts_query::index_text;
use crate::quarantine::Quarantined;
use crate::settings::{MemorySettings, Source};
use crate::sources::{FileProblem, SourceFile, list_memory_files, list_session_files};
use crate::store::{FileRecord, NewChunk, Store};
use crate::transcripts::transcript_text;

/// Why a sync ran (for logs and the report).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncReason {
    /// The host asked (a command, a test).
    Manual,
    /// A session started.
    SessionStart,
    /// A search found the index empty, or dirty.
    Search,
    /// The file watcher saw a change.
    Watch,
    /// A timer.
    Interval,
    /// The database was damaged and has been replaced.
    Recovery,
}

impl SyncReason {
    /// A short lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Manual => "manual",
            Self::SessionStart => "session-start",
            Self::Search => "search",
            Self::Watch => "watch",
            Self::Interval => "interval",
            Self::Recovery => "recovery",
        }
    }
}

/// What a sync did.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncReport {
    /// Why it ran.
    pub reason: SyncReason,
    /// Why everything was reindexed, when it was (a new index, a provider, model or chunking
    /// change, a forced sync).
    pub full_reindex: Option<String>,
    /// Files indexed for the first time.
    pub files_added: usize,
    /// Files whose content changed.
    pub files_changed: usize,
    /// Files gone from disk (or from the sources), whose chunks were removed.
    pub files_removed: usize,
    /// Files found unchanged.
    pub files_unchanged: usize,
    /// Chunks written.
    pub chunks_written: usize,
    /// Chunks removed (replaced or of removed files).
    pub chunks_removed: usize,
    /// Texts the provider embedded.
    pub embeddings_computed: usize,
    /// Texts whose vector came from the cache.
    pub embeddings_cached: usize,
    /// The provider's failure, if any: the chunks concerned were written without vectors.
    pub embedding_error: Option<String>,
    /// Files that could not be read (their previous chunks, if any, are kept).
    pub problems: Vec<FileProblem>,
    /// The damaged database moved aside before this sync, if any.
    pub quarantined: Option<Quarantined>,
    /// How long it took.
    pub duration: Duration,
}

impl SyncReport {
    fn new(reason: SyncReason) -> Self {
        Self {
            reason,
            full_reindex: None,
            files_added: 0,
            files_changed: 0,
            files_removed: 0,
            files_unchanged: 0,
            chunks_written: 0,
            chunks_removed: 0,
            embeddings_computed: 0,
            embeddings_cached: 0,
            embedding_error: None,
            problems: Vec::new(),
            quarantined: None,
            duration: Duration::ZERO,
        }
    }

    /// Whether the index changed.
    pub fn changed_index(&self) -> bool {
        self.full_reindex.is_some()
            || self.chunks_written > 0
            || self.chunks_removed > 0
            || self.files_removed > 0
            || self.embeddings_computed > 0
            || self.embeddings_cached > 0
    }
}

/// What a sync works on.
pub struct SyncInput<'a> {
    /// The agent's workspace.
    pub workspace: &'a Path,
    /// The transcripts' directory, when sessions are indexed.
    pub sessions_dir: Option<&'a Path>,
    /// The settings, clamped.
    pub settings: &'a MemorySettings,
    /// The embedding provider, if any.
    pub embedder: Option<&'a dyn Embedder>,
    /// Why the sync runs.
    pub reason: SyncReason,
    /// Reindex everything even if nothing seems to have changed.
    pub force: bool,
}

/// Most bytes of chunk text written in one transaction.
const GROUP_BYTES: usize = 4 * 1024 * 1024;
/// Most texts sent to the provider in one call from the sync (the provider batches further).
const EMBED_BATCH: usize = 256;
/// Files modified this recently are hashed even when size and time match.
const RECENT_MS: i64 = 2_000;

fn lock(store: &Mutex<Store>) -> MutexGuard<'_, Store> {
    store.lock().unwrap_or_else(PoisonError::into_inner)
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn mtime_ms(meta: &fs::Metadata) -> i64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The identity of what the index was built with; any change reindexes.
pub fn index_signature(settings: &MemorySettings, embedder: Option<&dyn Embedder>) -> String {
    let (provider, model, key) = match embedder {
        Some(e) => (
            e.provider().to_string(),
            e.model().to_string(),
            e.provider_key(),
        ),
        None => ("none".to_string(), String::new(), String::new()),
    };
    format!(
        "{provider}|{model}|{key}|tokens={}|overlap={}|fts=cjk-split-1",
        settings.effective_chunk_tokens(),
        settings.effective_overlap()
    )
}

/// A file to (re)write.
struct Pending {
    record: FileRecord,
    chunks: Vec<Chunk>,
    existed: bool,
}

/// Brings the index in `store` up to date.
pub fn run_sync(store: &Mutex<Store>, input: &SyncInput<'_>) -> Result<SyncReport, MemoryError> {
    let started = Instant::now();
    let mut report = SyncReport::new(input.reason);
    let signature = index_signature(input.settings, input.embedder);
    let model = input
        .embedder
        .map(|e| e.model().to_string())
        .unwrap_or_default();

    let (known, mut dims) = {
        let mut guard = lock(store);
        let previous = guard.meta("index_signature")?;
        if input.force || previous.as_deref() != Some(signature.as_str()) {
            let why = match (&previous, input.force) {
                (_, true) => "forced".to_string(),
                (None, false) => "new index".to_string(),
                (Some(old), false) => format!("built with {old}, now {signature}"),
            };
            // Cleared first: if the process dies in between, the old signature makes the
            // next sync clear again.
            guard.clear_index()?;
            guard.transaction(|s| {
                s.set_meta("index_signature", &signature)?;
                s.set_meta("provider", input.embedder.map_or("none", |e| e.provider()))?;
                s.set_meta("model", &model)?;
                s.set_meta("dims", "")
            })?;
            tracing::info!(reason = %why, "memory index rebuilt from scratch");
            report.full_reindex = Some(why);
        }
        let dims = guard.meta("dims")?.and_then(|d| d.parse::<usize>().ok());
        if let Some(d) = dims {
            // sqlite-vec may be available now and not when the vectors were written.
            guard.ensure_vec_table(d)?;
        }
        (guard.files()?, dims)
    };

    let (mut files, problems) = list_memory_files(input.workspace, &input.settings.extra_paths);
    report.problems.extend(problems);
    if input.settings.indexes_sessions()
        && let Some(dir) = input.sessions_dir
    {
        let (sessions, problems) = list_session_files(dir);
        files.extend(sessions);
        report.problems.extend(problems);
    }

    // Files are read, chunked and written a group at a time, so a first sync of a large
    // memory holds a few megabytes of chunks, not all of them.
    let now = now_ms();
    let chunking = (
        input.settings.effective_chunk_tokens(),
        input.settings.effective_overlap(),
    );
    let mut seen: HashSet<String> = HashSet::with_capacity(files.len());
    let mut touched: Vec<FileRecord> = Vec::new();
    let mut provider_failed = false;
    let mut group: Vec<Pending> = Vec::new();
    let mut group_bytes = 0;
    let last = files.len().saturating_sub(1);
    for (i, file) in files.iter().enumerate() {
        seen.insert(file.path.clone());
        let record = known.get(&file.path);
        match examine(file, record, now, chunking) {
            Ok(Examined::Unchanged) => report.files_unchanged += 1,
            Ok(Examined::Touched(r)) => {
                report.files_unchanged += 1;
                touched.push(r);
            }
            Ok(Examined::Changed(record_new, chunks)) => {
                group_bytes += chunks.iter().map(|c| c.text.len()).sum::<usize>();
                group.push(Pending {
                    record: record_new,
                    chunks,
                    existed: record.is_some(),
                });
            }
            Err(problem) => report.problems.push(problem),
        }
        if !group.is_empty() && (group_bytes >= GROUP_BYTES || i == last) {
            write_group(
                store,
                input,
                &model,
                std::mem::take(&mut group),
                &mut dims,
                &mut provider_failed,
                &mut report,
            )?;
            group_bytes = 0;
        }
    }
    let removed: Vec<String> = known
        .keys()
        .filter(|p| !seen.contains(*p))
        .cloned()
        .collect();

    if !removed.is_empty() || !touched.is_empty() {
        let mut guard = lock(store);
        let removed_chunks = guard.transaction(|s| {
            let mut n = 0;
            for path in &removed {
                n += s.remove_file(path)?;
            }
            for record in &touched {
                s.upsert_file(record)?;
            }
            Ok(n)
        })?;
        report.files_removed = removed.len();
        report.chunks_removed += removed_chunks;
    }

    if let Some(embedder) = input.embedder
        && !provider_failed
    {
        backfill(store, input, embedder, &model, &mut dims, &mut report)?;
    }

    lock(store).set_meta("last_sync_at", &now_ms().to_string())?;
    report.duration = started.elapsed();
    tracing::info!(
        reason = input.reason.as_str(),
        added = report.files_added,
        changed = report.files_changed,
        removed = report.files_removed,
        unchanged = report.files_unchanged,
        chunks = report.chunks_written,
        embedded = report.embeddings_computed,
        cached = report.embeddings_cached,
        problems = report.problems.len(),
        ms = report.duration.as_millis() as u64,
        "memory sync done"
    );
    Ok(report)
}

enum Examined {
    Unchanged,
    Touched(FileRecord),
    Changed(FileRecord, Vec<Chunk>),
}

/// Decides what a file needs, reading it only when its size or time changed.
fn examine(
    file: &SourceFile,
    record: Option<&FileRecord>,
    now: i64,
    (tokens, overlap): (usize, usize),
) -> Result<Examined, FileProblem> {
    let problem = |what: &str, e: std::io::Error| FileProblem {
        path: file.abs.clone(),
        message: format!(
            "could not {what}: {e}; check its permissions (its previous chunks are kept)"
        ),
    };
    let meta = fs::metadata(&file.abs).map_err(|e| problem("inspect", e))?;
    let mtime = mtime_ms(&meta);
    let size = meta.len();
    if let Some(r) = record
        && r.size == size
        && r.mtime_ms == mtime
        && now - mtime > RECENT_MS
        && r.source == file.source
    {
        return Ok(Examined::Unchanged);
    }
    let bytes = fs::read(&file.abs).map_err(|e| problem("read", e))?;
    let (hash, chunks) = match file.source {
        Source::Memory => (hex(&Sha256::digest(&bytes)), None),
        Source::Sessions => {
            let transcript = transcript_text(&String::from_utf8_lossy(&bytes));
            let mut hasher = Sha256::new();
            hasher.update(transcript.text.as_bytes());
            for line in &transcript.line_map {
                hasher.update(line.to_le_bytes());
            }
            (hex(&hasher.finalize()), Some(transcript))
        }
    };
    let new_record = FileRecord {
        path: file.path.clone(),
        source: file.source,
        hash: hash.clone(),
        mtime_ms: mtime,
        size,
    };
    if record.is_some_and(|r| r.hash == hash && r.source == file.source) {
        return Ok(Examined::Touched(new_record));
    }
    let chunks = match chunks {
        None => chunk_markdown(&String::from_utf8_lossy(&bytes), tokens, overlap),
        Some(t) => {
            let mut chunks = chunk_markdown(&t.text, tokens, overlap);
            for c in &mut chunks {
                c.start_line = t.source_line(c.start_line);
                c.end_line = t.source_line(c.end_line);
            }
            chunks
        }
    };
    Ok(Examined::Changed(new_record, chunks))
}

/// Embeds and writes one group of files in one transaction.
fn write_group(
    store: &Mutex<Store>,
    input: &SyncInput<'_>,
    model: &str,
    group: Vec<Pending>,
    dims: &mut Option<usize>,
    provider_failed: &mut bool,
    report: &mut SyncReport,
) -> Result<(), MemoryError> {
    let mut vectors: HashMap<String, Vec<f32>> = HashMap::new();
    let mut fresh: Vec<String> = Vec::new();
    if let Some(embedder) = input.embedder {
        let texts: Vec<(&str, &str)> = group
            .iter()
            .flat_map(|f| f.chunks.iter().map(|c| (c.hash.as_str(), c.text.as_str())))
            .collect();
        (vectors, fresh) = embed_texts(
            store,
            input,
            embedder,
            &texts,
            dims,
            provider_failed,
            report,
        )?;
    }
    let mut guard = lock(store);
    if let Some(d) = *dims {
        guard.ensure_vec_table(d)?;
    }
    let (written, removed) = guard.transaction(|s| {
        let mut written = 0;
        let mut removed = 0;
        for file in &group {
            // Whatever is stored for the file goes, even when this sync found it new: another
            // process (or a sync of an older version) may have written it meanwhile, and the
            // file's passages must be there once.
            removed += s.remove_file(&file.record.path)?;
            let mut stored = HashSet::with_capacity(file.chunks.len());
            for chunk in &file.chunks {
                // A line cut into identical pieces (a long rule of `=`) gives identical
                // passages at one place: one is stored, the index being unique on them.
                if !stored.insert((chunk.start_line, chunk.end_line, chunk.hash.as_str())) {
                    continue;
                }
                let vector = vectors.get(&chunk.hash).map(Vec::as_slice);
                let fts = index_text(&chunk.text);
                s.insert_chunk(&NewChunk {
                    path: &file.record.path,
                    source: file.record.source,
                    start_line: chunk.start_line,
                    end_line: chunk.end_line,
                    hash: &chunk.hash,
                    model: if vector.is_some() { model } else { "" },
                    text: &chunk.text,
                    fts_text: &fts,
                    embedding: vector,
                })?;
                written += 1;
            }
            s.upsert_file(&file.record)?;
        }
        if input.settings.cache_enabled
            && let Some(embedder) = input.embedder
        {
            for hash in &fresh {
                if let Some(v) = vectors.get(hash) {
                    s.put_cached_embedding(
                        embedder.provider(),
                        embedder.model(),
                        &embedder.provider_key(),
                        hash,
                        v,
                    )?;
                }
            }
        }
        Ok((written, removed))
    })?;
    for file in &group {
        if file.existed {
            report.files_changed += 1;
        } else {
            report.files_added += 1;
        }
    }
    report.chunks_written += written;
    report.chunks_removed += removed;
    Ok(())
}

/// Vectors by text hash.
type Vectors = HashMap<String, Vec<f32>>;

/// Vectors for `(hash, text)` pairs: from the cache, then the provider (unless it already
/// failed in this sync). Returns the vectors by hash and the hashes the provider computed.
fn embed_texts(
    store: &Mutex<Store>,
    input: &SyncInput<'_>,
    embedder: &dyn Embedder,
    texts: &[(&str, &str)],
    dims: &mut Option<usize>,
    provider_failed: &mut bool,
    report: &mut SyncReport,
) -> Result<(Vectors, Vec<String>), MemoryError> {
    let mut vectors: HashMap<String, Vec<f32>> = HashMap::new();
    let mut missing: Vec<(&str, &str)> = Vec::new();
    let mut wanted: HashSet<&str> = HashSet::new();
    {
        let guard = lock(store);
        let key = embedder.provider_key();
        for &(hash, text) in texts {
            if !wanted.insert(hash) {
                continue;
            }
            let cached = if input.settings.cache_enabled {
                guard.cached_embedding(embedder.provider(), embedder.model(), &key, hash)?
            } else {
                None
            };
            match cached {
                Some(v) if dims.is_none_or(|d| d == v.len()) => {
                    *dims = Some(v.len());
                    report.embeddings_cached += 1;
                    vectors.insert(hash.to_string(), v);
                }
                _ => missing.push((hash, text)),
            }
        }
    }
    let mut fresh = Vec::new();
    if *provider_failed {
        return Ok((vectors, fresh));
    }
    for batch in missing.chunks(EMBED_BATCH) {
        let inputs: Vec<&str> = batch.iter().map(|(_, t)| *t).collect();
        let result = embedder.embed(&inputs).and_then(|out| {
            if out.len() != inputs.len() {
                return Err(EmbedError::Other {
                    provider: embedder.provider().to_string(),
                    message: format!("{} vectors for {} texts", out.len(), inputs.len()),
                });
            }
            for v in &out {
                let expected = dims.unwrap_or(v.len());
                if v.len() != expected || v.is_empty() {
                    return Err(EmbedError::Dimensions {
                        provider: embedder.provider().to_string(),
                        expected,
                        got: v.len(),
                    });
                }
                *dims = Some(expected);
            }
            Ok(out)
        });
        match result {
            Ok(out) => {
                report.embeddings_computed += out.len();
                for ((hash, _), v) in batch.iter().zip(out) {
                    fresh.push(hash.to_string());
                    vectors.insert(hash.to_string(), v);
                }
            }
            Err(e) => {
                tracing::warn!(provider = embedder.provider(), kind = e.kind(), error = %e, "memory sync: embedding failed; chunks are indexed without vectors");
                report.embedding_error = Some(e.to_string());
                *provider_failed = true;
                break;
            }
        }
    }
    if let Some(d) = *dims {
        lock(store).set_meta("dims", &d.to_string())?;
    }
    Ok((vectors, fresh))
}

/// Gives vectors to chunks written without them (an earlier provider failure).
fn backfill(
    store: &Mutex<Store>,
    input: &SyncInput<'_>,
    embedder: &dyn Embedder,
    model: &str,
    dims: &mut Option<usize>,
    report: &mut SyncReport,
) -> Result<(), MemoryError> {
    let mut after = 0i64;
    let mut failed = false;
    loop {
        let rows = lock(store).chunks_without_embedding(after, EMBED_BATCH)?;
        let Some(last) = rows.last() else { break };
        after = last.0;
        let texts: Vec<(&str, &str)> = rows
            .iter()
            .map(|(_, h, t)| (h.as_str(), t.as_str()))
            .collect();
        let (vectors, fresh) =
            embed_texts(store, input, embedder, &texts, dims, &mut failed, report)?;
        let mut guard = lock(store);
        if let Some(d) = *dims {
            guard.ensure_vec_table(d)?;
        }
        guard.transaction(|s| {
            for (id, hash, _) in &rows {
                if let Some(v) = vectors.get(hash) {
                    s.set_embedding(*id, model, v)?;
                }
            }
            if input.settings.cache_enabled {
                for hash in &fresh {
                    if let Some(v) = vectors.get(hash) {
                        s.put_cached_embedding(
                            embedder.provider(),
                            embedder.model(),
                            &embedder.provider_key(),
                            hash,
                            v,
                        )?;
                    }
                }
            }
            Ok(())
        })?;
        if failed {
            break;
        }
    }
    Ok(())
}
