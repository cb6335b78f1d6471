//! The `rampart sessions` commands on a PostgreSQL store: list, show, export, import, blob and
//! doctor, doing what they do on a sessions directory.
//!
//! A session in the database is its pi JSONL log, the bytes a session file would hold. So
//! `show` and `export` read the log into a private scratch file and go through the same code
//! as a file (`export --format pi` of a session imported from a pi file gives that file back,
//! byte for byte), and `import` writes the new session into a private scratch directory first,
//! exactly as into a sessions directory, then copies each session and its entry into the
//! database in one transaction that never overwrites a key.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use rampart_sessions::store::shared::SharedStore;
use rampart_sessions::store::{SessionEntry, SessionStore, normalize_key};
use rampart_sessions::{LoadOptions, parse_bytes};
use rampart_store_postgres::{Imported, PgStore};

use super::sessions::{self, SessionsCommand};
use super::sessions_doctor::{recovered_key, report_missing_blobs};
use super::sessions_import::import_into_with;
use rampart_sessions::blobs::{BlobMedium, FileBlobs};

use super::sessions_migrate::copy_blobs;
use crate::blobs::BlobStore;
use crate::output_file::Inputs;
use crate::terminal::escape;

/// Runs `cmd` on the database `store` (`migrate` is not one of these: it names its stores).
pub fn run(
    cmd: SessionsCommand,
    store: &PgStore,
    overwrite: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<i32> {
    match cmd {
        SessionsCommand::List => list(store, out),
        SessionsCommand::Show { id, branch, json } => {
            let session = Scratch::of(store, &id)?;
            sessions::show_file(&session.path, &session.label, branch.as_deref(), json, out)
        }
        SessionsCommand::Export {
            id,
            format,
            out: target,
        } => {
            let session = Scratch::of(store, &id)?;
            let mut inputs = Inputs::new();
            inputs.file("the session exported", &session.path);
            sessions::export_file(
                &session.path,
                &inputs,
                format,
                target.as_deref(),
                overwrite,
                out,
            )
        }
        SessionsCommand::Blob {
            reference,
            out: target,
        } => sessions::print_blob(
            &BlobStore::on(std::sync::Arc::new(store.blob_medium())),
            &reference,
            &Inputs::new(),
            target.as_deref(),
            overwrite,
            std::io::IsTerminal::is_terminal(&std::io::stdout()),
            out,
        ),
        SessionsCommand::Import { file, key } => import(
            store,
            &file,
            key.as_deref(),
            rampart_sessions::load::DEFAULT_MAX_LINE_BYTES,
            out,
            err,
        ),
        SessionsCommand::Doctor { relink } => doctor(store, relink, out),
        SessionsCommand::Migrate { .. } => anyhow::bail!(
            "sessions migrate names its stores with --from and --to; drop --store (and any \
             [serve.store] it came from does not apply)"
        ),
    }
}

/// The store's name as messages show it.
fn place(store: &PgStore) -> String {
    store.name().display().to_string()
}

/// `sessions list`: the registry, newest first; the last column is the log's name (what
/// `sessions migrate` names its file).
fn list(store: &PgStore, out: &mut dyn Write) -> anyhow::Result<i32> {
    let rows = store
        .family("", None)?
        .into_iter()
        .map(|(key, entry)| {
            let log = format!("{}.jsonl", entry.session_id);
            (key, entry, log)
        })
        .collect();
    sessions::print_list(&place(store), "LOG", rows, out)
}

/// A session of the database as a file of its own, for the commands that read files; the
/// file is removed with the value.
struct Scratch {
    _dir: Option<tempfile::TempDir>,
    path: PathBuf,
    label: String,
}

impl Scratch {
    /// The session `id` (a key, a session id, or a session file on disk) of `store`.
    fn of(store: &PgStore, id: &str) -> anyhow::Result<Self> {
        let Some((key, entry)) = find(store, id)? else {
            let path = Path::new(id);
            if path.is_file() {
                return Ok(Self {
                    _dir: None,
                    path: path.to_path_buf(),
                    label: path.display().to_string(),
                });
            }
            let keys: Vec<String> = store
                .family("", None)?
                .into_iter()
                .map(|(k, _)| k)
                .collect();
            anyhow::bail!("{}", sessions::no_such_session_in(&place(store), &keys, id));
        };
        let label = format!("{}, key `{key}`", place(store));
        let bytes = store.log_bytes(&entry.session_id)?.with_context(|| {
            format!(
                "`{key}` names session `{}`, which has no log in {}; `rampart sessions doctor` \
                 lists such entries",
                entry.session_id,
                place(store)
            )
        })?;
        // Private to this user (tempfile makes the directory 0700), gone when done.
        let dir = tempfile::Builder::new()
            .prefix("rampart-session-")
            .tempdir()?;
        let path = dir.path().join(format!("{}.jsonl", entry.session_id));
        std::fs::write(&path, &bytes)
            .with_context(|| format!("cannot write the scratch copy {}", path.display()))?;
        Ok(Self {
            _dir: Some(dir),
            path,
            label,
        })
    }
}

/// The entry of `id` as a registry key (any case), else as a session id.
fn find(store: &PgStore, id: &str) -> anyhow::Result<Option<(String, SessionEntry)>> {
    let key = normalize_key(id);
    if let Some(entry) = store.get(&key)? {
        return Ok(Some((key, entry)));
    }
    Ok(store
        .family("", None)?
        .into_iter()
        .find(|(_, e)| e.session_id == id))
}

/// `sessions import` into the database: the importers write into a scratch sessions
/// directory, then each session goes in with its entry. Every key is checked free before
/// anything is written, and the write itself never replaces a key another writer took since.
/// Lines longer than `max_line_bytes` are shortened with their content kept as blobs, which
/// are stored in the database before the sessions naming them (tests pass a small limit).
pub(crate) fn import(
    store: &PgStore,
    file: &Path,
    key: Option<&str>,
    max_line_bytes: usize,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<i32> {
    let scratch = tempfile::Builder::new()
        .prefix("rampart-import-")
        .tempdir()?;
    let staging = SessionStore::open(scratch.path())?;
    let outcomes = match import_into_with(&staging, file, key, max_line_bytes) {
        Ok(o) => o,
        Err(e) => {
            writeln!(err, "error: {e}")?;
            return Ok(1);
        }
    };
    for o in &outcomes {
        if store.get(&o.key)?.is_some() {
            writeln!(
                err,
                "error: a session with key `{}` already exists in {}; choose another key with \
                 --as. Nothing was imported",
                escape(&o.key),
                place(store)
            )?;
            return Ok(1);
        }
    }
    // The originals the import shortened go in first: a session line never names a blob the
    // store does not have.
    let copied = copy_blobs(
        &FileBlobs::in_sessions_dir(staging.dir()),
        &store.blob_medium(),
    )?;
    if !copied.failed.is_empty() {
        for (reference, e) in &copied.failed {
            writeln!(err, "error: blob `{reference}`: {e}")?;
        }
        writeln!(
            err,
            "error: the originals above could not be stored in {}, so no session naming them \
             was imported; fix the cause and import again",
            place(store)
        )?;
        return Ok(1);
    }
    if copied.copied > 0 {
        writeln!(
            out,
            "stored {} blobs (originals of shortened content) in {}",
            copied.copied,
            place(store)
        )?;
    }
    for o in &outcomes {
        let entry = staging
            .get(&o.key)?
            .with_context(|| format!("the import did not register `{}`", o.key))?;
        let bytes = std::fs::read(&o.file)
            .with_context(|| format!("cannot read the imported session {}", o.file.display()))?;
        if store.import_session(&o.key, &entry, &bytes)? == Imported::AlreadyThere {
            writeln!(
                err,
                "error: another writer registered `{}` in {} while this import ran; it was left \
                 as it is. Choose another key with --as",
                escape(&o.key),
                place(store)
            )?;
            return Ok(1);
        }
        let into = format!("{} ({}.jsonl)", place(store), o.session_id);
        sessions::print_imported(o, &into, out, err)?;
    }
    Ok(0)
}

/// `sessions doctor` on the database: entries whose log is missing, blobs a session names that
/// the store lacks, and logs no entry names (a replica killed between writing a session and
/// registering it). `--relink` registers each readable orphan as `recovered:<session id>`;
/// nothing is deleted or rewritten.
fn doctor(store: &PgStore, relink: bool, out: &mut dyn Write) -> anyhow::Result<i32> {
    let mut problems = 0usize;
    for (key, session_id) in store.keys_without_log()? {
        problems += 1;
        writeln!(
            out,
            "missing: `{}` names session `{}`, which has no log in {}; restore the log, or \
             delete the row of rampart_registry",
            escape(&key),
            escape(&session_id),
            place(store)
        )?;
    }
    let blobs = store.blob_medium();
    for (key, entry) in store.family("", None)? {
        if let Some(bytes) = store.log_bytes(&entry.session_id)? {
            problems += report_missing_blobs(&key, &bytes, &blobs, out)?;
        }
    }
    let orphans = store.unregistered_logs()?;
    let mut relinked = 0usize;
    for orphan in &orphans {
        let id = &orphan.session_id;
        let bytes = store.log_bytes(id)?.unwrap_or_default();
        let options = LoadOptions {
            record_corrupt_lines: false,
            ..LoadOptions::default()
        };
        let entries = match parse_bytes(&bytes, &options) {
            Ok(loaded) => loaded.tree.len(),
            Err(e) => {
                problems += 1;
                writeln!(
                    out,
                    "unreadable: the log of session `{}` in {}: {}; left as it is",
                    escape(id),
                    place(store),
                    escape(&e.to_string())
                )?;
                continue;
            }
        };
        writeln!(
            out,
            "orphan: session `{}` ({entries} entries, {} bytes) in {} is in no registry entry",
            escape(id),
            orphan.bytes,
            place(store)
        )?;
        if !relink {
            problems += 1;
            continue;
        }
        let key = recovered_key(id);
        let mut entry = SessionEntry::new(id.clone(), orphan.created_at_ms);
        entry.session_file = Some(format!("{id}.jsonl"));
        match store.import_session(&key, &entry, &bytes)? {
            Imported::AlreadyThere => {
                problems += 1;
                writeln!(
                    out,
                    "  not relinked: the key `{}` is taken by another session; register this \
                     one by hand",
                    escape(&key)
                )?;
            }
            Imported::Written | Imported::SharedLog => {
                relinked += 1;
                writeln!(out, "  relinked as `{}`", escape(&key))?;
            }
        }
    }
    if problems == 0 {
        writeln!(
            out,
            "ok: {} sessions registered in {}, {} blobs{}",
            store.count()?,
            place(store),
            store.blob_medium().list()?.len(),
            if relinked > 0 {
                format!(", {relinked} relinked")
            } else {
                String::new()
            }
        )?;
        return Ok(0);
    }
    if !relink && !orphans.is_empty() {
        writeln!(
            out,
            "run `rampart sessions doctor --relink` to register the orphans (nothing is deleted)"
        )?;
    }
    Ok(1)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "sessions_database_tests.rs"]
mod tests;
