//! `rampart sessions doctor [--relink]`: what crashes and hand edits left in a sessions
//! directory, and the repair that loses nothing.
//!
//! It reports
//! - session files no registry entry names (orphans: a process killed between writing its
//!   turn and registering its session, or a file copied in), with their id and size;
//! - registry entries whose file is missing, or whose path leads outside the directory;
//! - blobs a session names (`blob sha256:…`, `full output: sha256:…`: the originals of what was
//!   shortened) that the store does not hold, as after a copy of the sessions without their
//!   `blobs/`.
//!
//! `--relink` registers each orphan under `recovered:<session id>` (create-if-absent, under the
//! registry lock), so its turns can be shown, exported or continued. Nothing is deleted or
//! rewritten: a file that cannot be read is reported and left alone.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;

use rampart_sessions::blobs::{BlobMedium, BlobRef, FileBlobs};

use rampart_sessions::store::{SessionEntry, SessionStore, now_unix_ms};
use rampart_sessions::{LoadOptions, load_file};

use crate::terminal::escape;

/// The registry key an orphan is relinked under.
pub fn recovered_key(session_id: &str) -> String {
    format!("recovered:{}", session_id.to_lowercase())
}

/// Runs the doctor on `store`; exit code 0 when nothing is wrong (or everything found was
/// relinked), 1 otherwise.
pub fn doctor(
    store: &SessionStore,
    relink: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<i32> {
    let mut problems = 0usize;
    for (key, entry) in store.list()? {
        match store.session_file_path(&key, &entry) {
            Ok(file) if !file.is_file() => {
                problems += 1;
                writeln!(
                    out,
                    "missing: `{}` names {}, which does not exist; restore the file or remove \
                     the entry from {}",
                    escape(&key),
                    escape(&file.display().to_string()),
                    store.path().display()
                )?;
            }
            Ok(_) => {}
            Err(e) => {
                problems += 1;
                writeln!(out, "refused: {}", escape(&e.to_string()))?;
            }
        }
    }
    let blobs = FileBlobs::in_sessions_dir(store.dir());
    for (key, entry) in store.list()? {
        let Ok(file) = store.session_file_path(&key, &entry) else {
            continue;
        };
        let Ok(bytes) = std::fs::read(&file) else {
            continue;
        };
        problems += report_missing_blobs(&key, &bytes, &blobs, out)?;
    }
    let orphans = store.unregistered_files()?;
    let mut relinked = 0usize;
    for file in &orphans {
        let Some((session_id, entries)) = describe(file, out)? else {
            problems += 1;
            continue;
        };
        writeln!(
            out,
            "orphan: {} (session {}, {entries} entries) is in no registry entry",
            escape(&file.display().to_string()),
            escape(&session_id)
        )?;
        if !relink {
            problems += 1;
            continue;
        }
        let key = recovered_key(&session_id);
        let name = file.file_name().map(|n| n.to_string_lossy().into_owned());
        let done = store.update(|map| {
            if map.contains_key(&key) {
                return false;
            }
            let mut entry = SessionEntry::new(session_id.clone(), modified_ms(file));
            entry.session_file = name;
            map.insert(key.clone(), entry);
            true
        })?;
        if done {
            relinked += 1;
            writeln!(out, "  relinked as `{}`", escape(&key))?;
        } else {
            problems += 1;
            writeln!(
                err,
                "  not relinked: the key `{}` is taken by another file; register this one by \
                 hand",
                escape(&key)
            )?;
        }
    }
    if problems == 0 {
        writeln!(
            out,
            "ok: {} sessions registered{}",
            store.list()?.len(),
            if relinked > 0 {
                format!(", {relinked} relinked")
            } else {
                String::new()
            }
        )?;
        Ok(0)
    } else {
        if !relink && !orphans.is_empty() {
            writeln!(
                out,
                "run `rampart sessions doctor --relink` to register the orphans (nothing is \
                 deleted)"
            )?;
        }
        Ok(1)
    }
}

/// Where a shortened text names the blob of its original: `blob sha256:<hex>` (a line too long
/// for the session) or `full output: sha256:<hex>` (a capped tool result).
const BLOB_MARKERS: [&[u8]; 2] = [b"blob sha256:", b"full output: sha256:"];

/// The blobs the session bytes `bytes` name (see [`BLOB_MARKERS`]), each once, in order.
pub fn blob_references(bytes: &[u8]) -> BTreeSet<BlobRef> {
    let mut found = BTreeSet::new();
    for marker in BLOB_MARKERS {
        let prefix = marker.len() - "sha256:".len();
        for at in memchr::memmem::find_iter(bytes, marker) {
            let hex = at + marker.len();
            if let Some(reference) = bytes
                .get(hex..hex + 64)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(BlobRef::from_hex)
                && bytes.get(at + prefix..hex) == Some(&b"sha256:"[..])
            {
                found.insert(reference);
            }
        }
    }
    found
}

/// Reports each blob the session `key` (its bytes `bytes`) names that `blobs` lacks; returns
/// how many. Nothing is changed.
pub fn report_missing_blobs(
    key: &str,
    bytes: &[u8],
    blobs: &dyn BlobMedium,
    out: &mut dyn Write,
) -> anyhow::Result<usize> {
    let mut missing = 0;
    for reference in blob_references(bytes) {
        if !blobs.contains(&reference)? {
            missing += 1;
            writeln!(
                out,
                "missing blob: `{}` names {reference}, which {} does not hold; the original it \
                 kept is not here (copy the store's blobs with it: `rampart sessions migrate` \
                 carries them)",
                escape(key),
                escape(&blobs.describe().display().to_string())
            )?;
        }
    }
    Ok(missing)
}

/// The session id and entry count of `file`, read without writing anything; `None` (with the
/// reason printed) when it is not a readable session.
fn describe(file: &Path, out: &mut dyn Write) -> anyhow::Result<Option<(String, usize)>> {
    let options = LoadOptions {
        record_corrupt_lines: false,
        ..LoadOptions::default()
    };
    match load_file(file, &options) {
        Ok(loaded) => Ok(Some((loaded.header.id, loaded.tree.len()))),
        Err(e) => {
            writeln!(out, "unreadable: {}; left as it is", escape(&e.to_string()))?;
            Ok(None)
        }
    }
}

fn modified_ms(file: &Path) -> u64 {
    std::fs::metadata(file)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or_else(now_unix_ms, |d| {
            u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
        })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "sessions_doctor_tests.rs"]
mod tests;
