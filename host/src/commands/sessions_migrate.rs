//! `rampart sessions migrate --from DIR --to postgres://…` (and back): every registered session
//! and its registry entry, and every blob (the originals of shortened content), copied between
//! a sessions directory and a PostgreSQL store. Blobs go first, each checked against its hash,
//! so a copied session never names a blob the destination lacks.
//!
//! pi JSONL is the interchange format: a session's bytes are copied as they are (a v1/v2 file
//! is written as v3 first, as opening it would), so a session read on either side is the same
//! file. Nothing in the destination is overwritten: a key already there is left as it is and
//! counted, and a file of the same name with other content is an error for that session. The
//! source is only read. Each session is copied whole or not at all, so the command can be run
//! again after a failure; what was copied is then counted as already there.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, bail};
use rampart_sessions::blobs::{Blob, BlobError, BlobMedium, BlobRef, FileBlobs};
use rampart_sessions::store::shared::SharedStore;
use rampart_sessions::store::{SessionEntry, SessionStore};
use rampart_sessions::{LoadOptions, parse_bytes, save_session};
use rampart_store_postgres::{Imported, PgStore, PgStoreOptions, is_postgres_url};

/// What a migration did, for its closing line.
#[derive(Debug, Default)]
struct Tally {
    copied: usize,
    already_there: usize,
    failed: usize,
}

/// What [`copy_blobs`] did.
#[derive(Debug, Default)]
pub struct BlobTally {
    /// Blobs written to the destination.
    pub copied: usize,
    /// Blobs the destination had already.
    pub already_there: usize,
    /// Blobs that could not be copied, each with why (named on the command's error output).
    pub failed: Vec<(BlobRef, BlobError)>,
}

/// Copies every blob of `from` that `to` lacks, each checked against its name on the way (a
/// damaged source blob is reported, never copied). Blobs are immutable, so one already in
/// `to` is left as it is. Fails only when `from` cannot be listed.
pub fn copy_blobs(from: &dyn BlobMedium, to: &dyn BlobMedium) -> Result<BlobTally, BlobError> {
    let mut tally = BlobTally::default();
    for reference in from.list()? {
        let copied = to.contains(&reference).and_then(|there| {
            if there {
                return Ok(false);
            }
            let bytes = from.get(&reference)?;
            to.put(Blob::checked(&reference, &bytes, from.describe())?)?;
            Ok(true)
        });
        match copied {
            Ok(true) => tally.copied += 1,
            Ok(false) => tally.already_there += 1,
            Err(e) => tally.failed.push((reference, e)),
        }
    }
    tracing::debug!(
        from = %from.describe().display(),
        to = %to.describe().display(),
        copied = tally.copied,
        already_there = tally.already_there,
        failed = tally.failed.len(),
        "blobs copied"
    );
    Ok(tally)
}

/// Copies the blobs (before the sessions, so no copied line names a blob the destination
/// lacks), naming each failure on `err`; returns the closing line's part and the failures.
fn migrate_blobs(
    from: &dyn BlobMedium,
    to: &dyn BlobMedium,
    err: &mut dyn Write,
) -> anyhow::Result<(String, usize)> {
    let tally = copy_blobs(from, to)?;
    for (reference, e) in &tally.failed {
        writeln!(err, "error: blob `{reference}`: {e}")?;
    }
    Ok((
        format!(
            "; blobs: {} copied, {} already there",
            tally.copied, tally.already_there
        ),
        tally.failed.len(),
    ))
}

/// Runs `sessions migrate` (see the module docs). Exit code 1 when a session could not be
/// copied (each is named on `err`), else 0.
pub fn migrate(
    from: &str,
    to: &str,
    password_env: Option<&str>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<i32> {
    // The destination is created when empty; a source must be a store already.
    let database = |url: &str, destination: bool| -> anyhow::Result<PgStore> {
        let mut options = PgStoreOptions::from_url(url)?;
        if let Some(var) = password_env {
            options = options.password_from_env(var)?;
        }
        Ok(if destination {
            PgStore::open(&options)?
        } else {
            PgStore::open_existing(&options)?
        })
    };
    let tally = match (is_postgres_url(from), is_postgres_url(to)) {
        (false, true) => {
            let dir = Path::new(from);
            if !dir.is_dir() {
                bail!("--from {}: no such sessions directory", dir.display());
            }
            let source = SessionStore::open_read_only(dir)?;
            let target = database(to, true)?;
            let (blobs, blobs_failed) = migrate_blobs(
                &FileBlobs::in_sessions_dir(source.dir()),
                &target.blob_medium(),
                err,
            )?;
            let mut tally = into_database(&source, &target, err)?;
            writeln!(
                out,
                "migrated {} sessions from {} to {}; {} already there (left as they were){blobs}",
                tally.copied,
                dir.display(),
                target.name().display(),
                tally.already_there
            )?;
            tally.failed += blobs_failed;
            tally
        }
        (true, false) => {
            let source = database(from, false)?;
            let target = SessionStore::open(to)?;
            let (blobs, blobs_failed) = migrate_blobs(
                &source.blob_medium(),
                &FileBlobs::in_sessions_dir(target.dir()),
                err,
            )?;
            let mut tally = out_of_database(&source, &target, err)?;
            writeln!(
                out,
                "migrated {} sessions from {} to {}; {} already there (left as they were){blobs}",
                tally.copied,
                source.name().display(),
                target.dir().display(),
                tally.already_there
            )?;
            tally.failed += blobs_failed;
            tally
        }
        _ => bail!(
            "sessions migrate moves sessions between a sessions directory and a PostgreSQL \
             store: give one of --from and --to as postgres://USER@HOST:PORT/DATABASE and the \
             other as a directory"
        ),
    };
    if tally.failed > 0 {
        writeln!(
            err,
            "{} sessions or blobs were not migrated (see above); fix them and run the command \
             again: what was copied is kept",
            tally.failed
        )?;
        return Ok(1);
    }
    Ok(0)
}

/// The bytes to store for the session file at `path`: as they are for v3, else the file as
/// v3 (what opening it would write), without changing the file.
fn v3_bytes(path: &Path) -> anyhow::Result<Vec<u8>> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let loaded = parse_bytes(&bytes, &LoadOptions::default())
        .with_context(|| format!("{} is not a session", path.display()))?;
    if loaded.report.migration.is_none() {
        return Ok(bytes);
    }
    let scratch = tempfile::tempdir()?;
    let upgraded = scratch.path().join("v3.jsonl");
    save_session(&upgraded, &loaded.header, &loaded.tree)?;
    Ok(std::fs::read(&upgraded)?)
}

fn into_database(
    source: &SessionStore,
    target: &PgStore,
    err: &mut dyn Write,
) -> anyhow::Result<Tally> {
    let mut tally = Tally::default();
    for (key, entry) in source.list()? {
        let copied = source
            .session_file_path(&key, &entry)
            .map_err(anyhow::Error::from)
            .and_then(|path| v3_bytes(&path))
            .and_then(|bytes| {
                let imported = target.import_session(&key, &entry, &bytes)?;
                // Read back what was stored: the copy must be the file.
                if imported != Imported::AlreadyThere
                    && target.log_bytes(&entry.session_id)?.as_deref() != Some(&bytes[..])
                {
                    bail!("the stored copy differs from the file");
                }
                Ok(imported)
            });
        match copied {
            Ok(Imported::AlreadyThere) => tally.already_there += 1,
            Ok(_) => tally.copied += 1,
            Err(e) => {
                tally.failed += 1;
                writeln!(err, "error: `{key}`: {}", crate::prose::error_chain(&e))?;
            }
        }
    }
    let orphans = source.unregistered_files()?;
    if !orphans.is_empty() {
        writeln!(
            err,
            "note: {} session files no registry entry names were not migrated; register them \
             with `rampart sessions doctor --relink` and run the command again",
            orphans.len()
        )?;
    }
    Ok(tally)
}

fn out_of_database(
    source: &PgStore,
    target: &SessionStore,
    err: &mut dyn Write,
) -> anyhow::Result<Tally> {
    let mut tally = Tally::default();
    let mut register: Vec<(String, SessionEntry)> = Vec::new();
    for (key, mut entry) in source.family("", None)? {
        if target.get(&key)?.is_some() {
            tally.already_there += 1;
            continue;
        }
        let file = format!("{}.jsonl", entry.session_id);
        let copied = source
            .log_bytes(&entry.session_id)
            .map_err(anyhow::Error::from)
            .and_then(|bytes| {
                let bytes = bytes.context("the store has no log for this entry's session")?;
                write_new(&target.dir().join(&file), &bytes)
            });
        match copied {
            Ok(()) => {
                entry.session_file = Some(file);
                register.push((key, entry));
            }
            Err(e) => {
                tally.failed += 1;
                writeln!(err, "error: `{key}`: {}", crate::prose::error_chain(&e))?;
            }
        }
    }
    // One registry write for all, each key only if still absent.
    let added = target.update(|map| {
        let mut added = 0;
        for (key, entry) in register {
            if let std::collections::btree_map::Entry::Vacant(slot) = map.entry(key) {
                slot.insert(entry);
                added += 1;
            }
        }
        added
    })?;
    tally.copied += added;
    Ok(tally)
}

/// Writes `bytes` as the new file `path` (temp file, fsync, rename that refuses to replace);
/// a file already there with the same bytes is fine, one with others is an error.
fn write_new(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if let Ok(existing) = std::fs::read(path) {
        if existing == bytes {
            return Ok(());
        }
        bail!(
            "{} exists with other content; it was left as it is",
            path.display()
        );
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist_noclobber(path)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {}", path.display(), e.error))?;
    Ok(())
}
