//! File mechanics of the registry: parsing with duplicate detection, atomic replacement and
//! the cross-process lock. Kept apart from the API so each piece can be read on its own.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde::de::{MapAccess, Visitor};

use super::StoreError;
use super::types::{SessionEntry, SessionMap};

/// The file's entries in file order, duplicates included.
///
/// Deserialising straight into a map would let a later mixed-case key silently replace an
/// earlier one; collecting pairs lets the caller merge by `updatedAt` and say so.
pub(super) struct RawEntries(pub(super) Vec<(String, SessionEntry)>);

impl<'de> Deserialize<'de> for RawEntries {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct PairsVisitor(PhantomData<RawEntries>);

        impl<'de> Visitor<'de> for PairsVisitor {
            type Value = RawEntries;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object mapping session keys to session entries")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawEntries, A::Error> {
                let mut pairs = Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some((key, entry)) = map.next_entry::<String, SessionEntry>()? {
                    pairs.push((key, entry));
                }
                Ok(RawEntries(pairs))
            }
        }

        deserializer.deserialize_map(PairsVisitor(PhantomData))
    }
}

/// Each entry's text in the registry as written (`  "key": {…}`, indented as
/// `serde_json::to_string_pretty` indents a member of the top-level object), by key.
pub(super) type Pieces = std::collections::HashMap<String, std::sync::Arc<str>>;

/// `serde_json::to_string_pretty(map)`, byte for byte, serialising only the entries that have
/// no piece in `pieces` or that `unchanged` says changed since their piece was written: the
/// others reuse their text. `pieces` is left holding exactly the pieces of `map`.
///
/// Why: serve registers every new conversation in `sessions.json`, and serialising every
/// entry for each registration was most of a new conversation's cost once a server had held a
/// few thousand; comparing an entry with its previous version is far cheaper than writing it.
pub(super) fn pretty_splicing(
    map: &SessionMap,
    pieces: &mut Pieces,
    unchanged: impl Fn(&str, &SessionEntry) -> bool,
) -> Result<String, serde_json::Error> {
    let mut text = String::with_capacity(pieces.values().map(|p| p.len() + 2).sum::<usize>() + 4);
    text.push('{');
    for (index, (key, entry)) in map.iter().enumerate() {
        text.push_str(if index == 0 { "\n" } else { ",\n" });
        match pieces.get(key).filter(|_| unchanged(key, entry)) {
            Some(piece) => text.push_str(piece),
            None => {
                let piece: std::sync::Arc<str> = std::sync::Arc::from(pretty_piece(key, entry)?);
                text.push_str(&piece);
                pieces.insert(key.clone(), piece);
            }
        }
    }
    text.push_str(if map.is_empty() { "}" } else { "\n}" });
    if pieces.len() > map.len() {
        pieces.retain(|key, _| map.contains_key(key));
    }
    Ok(text)
}

/// One entry as a member of the pretty-printed top-level object, without the separators.
fn pretty_piece(key: &str, entry: &SessionEntry) -> Result<String, serde_json::Error> {
    let one = std::collections::BTreeMap::from([(key, entry)]);
    let whole = serde_json::to_string_pretty(&one)?;
    Ok(whole
        .strip_prefix("{\n")
        .and_then(|t| t.strip_suffix("\n}"))
        .unwrap_or(&whole)
        .to_owned())
}

/// Parses the registry text. Whitespace-only text is an empty registry: there is nothing a
/// user could lose, and a crash between `create` and the first write leaves such a file.
pub(super) fn parse(path: &Path, text: &str) -> Result<Vec<(String, SessionEntry)>, StoreError> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    match serde_json::from_str::<RawEntries>(text) {
        Ok(RawEntries(pairs)) => Ok(pairs),
        Err(error) => {
            // serde_json appends " at line L column C" to its message; we report the position
            // in our own words, so strip it rather than say it twice.
            let full = error.to_string();
            let suffix = format!(" at line {} column {}", error.line(), error.column());
            let reason = full.strip_suffix(&suffix).unwrap_or(&full).to_owned();
            Err(StoreError::Malformed {
                path: path.to_owned(),
                line: error.line(),
                column: error.column(),
                reason,
            })
        }
    }
}

/// Reads the file; `None` when it does not exist yet (a new registry).
pub(super) fn read_text(path: &Path) -> Result<Option<String>, StoreError> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(StoreError::Read {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Replaces `path` with `text` so that a reader (or a crash) sees either the old or the new
/// file, never a torn one: write a temp file in the same directory (rename is only atomic
/// within a filesystem), fsync it, rename it over the target, fsync the directory so the
/// rename itself survives a power cut.
pub(super) fn write_atomic(path: &Path, text: &str) -> Result<(), StoreError> {
    let write_error = |source: io::Error| StoreError::Write {
        path: path.to_owned(),
        source,
    };
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "sessions.json".to_owned());

    let (temp_path, mut file) = create_temp(dir, &file_name).map_err(write_error)?;
    // Removes the temp file on every early return: a failed write must leave the directory as
    // it was, not littered with half-written copies.
    let mut cleanup = TempCleanup(Some(temp_path.clone()));

    file.write_all(text.as_bytes()).map_err(write_error)?;
    // Keep the user's permissions on the registry (it may hold routing data they chose to
    // protect); a new registry gets the private default from `create_temp`.
    if let Ok(meta) = fs::metadata(path) {
        file.set_permissions(meta.permissions())
            .map_err(write_error)?;
    }
    file.sync_all().map_err(write_error)?;
    drop(file);

    rename_with_retry(&temp_path, path).map_err(write_error)?;
    cleanup.0 = None;

    sync_dir(dir);
    Ok(())
}

struct TempCleanup(Option<PathBuf>);

impl Drop for TempCleanup {
    fn drop(&mut self) {
        if let Some(path) = self.0.take()
            && let Err(error) = fs::remove_file(&path)
        {
            tracing::warn!(
                temp_file = %path.display(),
                %error,
                "could not remove a temporary registry file; it is safe to delete by hand"
            );
        }
    }
}

/// Creates `.<name>.<pid>.<random>.tmp` exclusively, so two writers never share a temp file.
fn create_temp(dir: &Path, file_name: &str) -> io::Result<(PathBuf, File)> {
    let mut last_error = None;
    for _ in 0..16 {
        let suffix: u64 = rand::random();
        let temp = dir.join(format!(
            ".{file_name}.{}.{suffix:016x}.tmp",
            std::process::id()
        ));
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            // Session registries name conversations; private by default.
            options.mode(0o600);
        }
        match options.open(&temp) {
            Ok(file) => return Ok((temp, file)),
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => last_error = Some(error),
            Err(error) => return Err(error),
        }
    }
    Err(last_error.unwrap_or_else(|| io::Error::other("no free temporary file name")))
}

/// Windows refuses to replace a file another process has open (antivirus, editors) for a
/// moment; retry a few times with growing pauses, as OpenClaw does (5 tries, 50·i ms).
fn rename_with_retry(from: &Path, to: &Path) -> io::Result<()> {
    const ATTEMPTS: u32 = if cfg!(windows) { 5 } else { 1 };
    let mut attempt = 1;
    loop {
        match fs::rename(from, to) {
            Ok(()) => return Ok(()),
            Err(error) if attempt < ATTEMPTS && error.kind() == io::ErrorKind::PermissionDenied => {
                thread::sleep(Duration::from_millis(50 * u64::from(attempt)));
                attempt += 1;
            }
            Err(error) => return Err(error),
        }
    }
}

/// Makes the rename durable. Failure is logged, not returned: the new file is already in
/// place and readable, so failing the update would misreport what happened.
fn sync_dir(dir: &Path) {
    #[cfg(unix)]
    {
        if let Err(error) = File::open(dir).and_then(|d| d.sync_all()) {
            tracing::warn!(
                dir = %dir.display(),
                %error,
                "could not fsync the sessions directory; the registry update may not survive a power loss"
            );
        }
    }
    #[cfg(not(unix))]
    {
        // Windows has no directory fsync; NTFS journals the rename's metadata.
        let _ = dir;
    }
}

/// An exclusive advisory lock on the `sessions.json.lock` sidecar, released on drop (and by
/// the OS if the process dies, so a crash never leaves a stale lock behind).
///
/// A sidecar rather than the registry itself because the registry is replaced by rename on
/// every write; a lock on the old inode would not exclude a writer that opened the new one.
pub(super) struct FileLock {
    file: File,
    path: PathBuf,
}

impl FileLock {
    /// Polls for the lock until `timeout`, with short sleeps: fs4's blocking lock cannot time
    /// out, and a hung peer must produce an error the user can act on, not a silent hang.
    pub(super) fn acquire(path: &Path, timeout: Duration) -> Result<Self, StoreError> {
        let lock_error = |source: io::Error| StoreError::Lock {
            path: path.to_owned(),
            source,
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(lock_error)?;
        let started = Instant::now();
        let mut pause = Duration::from_millis(1);
        loop {
            // Fully qualified: `File` has an inherent `try_lock` on newer toolchains, and the
            // workspace MSRV predates it.
            match fs4::FileExt::try_lock(&file) {
                Ok(()) => {
                    return Ok(Self {
                        file,
                        path: path.to_owned(),
                    });
                }
                Err(fs4::TryLockError::WouldBlock) => {}
                Err(fs4::TryLockError::Error(source)) => return Err(lock_error(source)),
            }
            let waited = started.elapsed();
            if waited >= timeout {
                return Err(StoreError::LockTimeout {
                    path: path.to_owned(),
                    waited,
                });
            }
            thread::sleep(pause.min(timeout.saturating_sub(waited)));
            pause = (pause * 2).min(Duration::from_millis(25));
        }
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        if let Err(error) = fs4::FileExt::unlock(&self.file) {
            // Closing the file below releases the lock anyway; this only explains a delay.
            tracing::debug!(lock_file = %self.path.display(), %error, "explicit unlock failed");
        }
    }
}
