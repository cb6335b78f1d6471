//! A damaged index file is recognised early and moved aside, never deleted.
//!
//! The index is derived data: the markdown is the source of truth, so a damaged database
//! costs a rebuild, not a loss. Still, the file is renamed to `<name>.corrupt-<unix-ts>`
//! rather than removed, because it may be something else entirely (a path mix-up pointing at
//! another program's database) or be wanted for a bug report.
//!
//! The checks before SQLite opens the file are cheap and catch the usual damage: garbage
//! bytes (no SQLite header) and truncation (the header says the file is longer than it is).
//! SQLite's own `quick_check` runs after.

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// A database file moved aside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantined {
    /// Where the file was.
    pub from: PathBuf,
    /// Where it is now.
    pub to: PathBuf,
    /// Why it was moved.
    pub reason: String,
}

/// What a user reads: why the file was moved and where it is now, in one sentence (the notes
/// of `rampart memory index` and the log print this, never the struct's debug form).
impl std::fmt::Display for Quarantined {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {}; moved to {}",
            self.from.display(),
            self.reason,
            self.to.display()
        )
    }
}

const MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// Whether the file at `path` is a whole SQLite database already in WAL mode (its header's
/// format versions are 2): an index some process finished making, which a process may open
/// without the lock that makes a new one ([`crate::store::Store::open`]).
pub fn is_made(path: &Path) -> bool {
    let mut header = [0u8; 100];
    fs::File::open(path)
        .and_then(|mut file| file.read_exact(&mut header))
        .is_ok()
        && &header[..16] == MAGIC
        && header[18] == 2
        && header[19] == 2
}

/// Why the file at `path` is not a usable SQLite database, judged from its header and size;
/// `Ok(())` when it looks sound or does not exist (or is empty: SQLite makes an empty file a
/// new database).
pub fn check_header(path: &Path) -> io::Result<Result<(), String>> {
    let mut file = match fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Ok(())),
        Err(e) => return Err(e),
    };
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(Ok(()));
    }
    let mut header = [0u8; 100];
    let mut read = 0;
    while read < header.len() {
        match file.read(&mut header[read..])? {
            0 => break,
            n => read += n,
        }
    }
    if read < 16 || &header[..16] != MAGIC {
        return Ok(Err("it does not start with the SQLite header".to_string()));
    }
    if read < 100 {
        return Ok(Err(format!(
            "it is truncated: {len} bytes, shorter than the 100-byte header"
        )));
    }
    let page_size = match u16::from_be_bytes([header[16], header[17]]) {
        1 => 65_536u64,
        n => u64::from(n),
    };
    if !(512..=65_536).contains(&page_size) || !page_size.is_power_of_two() {
        return Ok(Err(format!(
            "its header has an invalid page size ({page_size})"
        )));
    }
    // Size checks are skipped while a write-ahead log exists: a checkpoint cut short by a
    // crash may leave the file shorter than its header says, and replaying the log repairs
    // that.
    let wal = PathBuf::from(format!("{}-wal", path.display()));
    let has_wal = fs::metadata(&wal).is_ok_and(|m| m.len() > 0);
    if !has_wal && len % page_size != 0 {
        return Ok(Err(format!(
            "it is truncated: {len} bytes is not a whole number of {page_size}-byte pages"
        )));
    }
    let change_counter = u32::from_be_bytes([header[24], header[25], header[26], header[27]]);
    let valid_for = u32::from_be_bytes([header[92], header[93], header[94], header[95]]);
    let pages = u64::from(u32::from_be_bytes([
        header[28], header[29], header[30], header[31],
    ]));
    // The page count is only trustworthy when written by the same transaction as the
    // change counter (always, for SQLite since 3.7.0).
    if !has_wal && change_counter == valid_for && pages > 0 && pages * page_size > len {
        return Ok(Err(format!(
            "it is truncated: the header counts {pages} pages ({} bytes) but the file has {len}",
            pages * page_size
        )));
    }
    Ok(Ok(()))
}

/// Renames `path` (and its `-wal` / `-shm` companions, if any) to
/// `<name>.corrupt-<unix-ts>`, adding `-1`, `-2`… if that name is taken.
pub fn move_aside(path: &Path, reason: &str) -> io::Result<Quarantined> {
    let ts = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let base = format!("{}.corrupt-{ts}", path.display());
    let mut to = PathBuf::from(&base);
    let mut n = 1;
    while to.exists() {
        to = PathBuf::from(format!("{base}-{n}"));
        n += 1;
    }
    fs::rename(path, &to)?;
    for suffix in ["-wal", "-shm"] {
        let companion = PathBuf::from(format!("{}{suffix}", path.display()));
        if companion.exists() {
            // A stale log beside a new database would be replayed into it.
            let target = PathBuf::from(format!("{}{suffix}", to.display()));
            fs::rename(&companion, &target)?;
        }
    }
    tracing::warn!(from = %path.display(), to = %to.display(), reason, "memory index moved aside");
    Ok(Quarantined {
        from: path.to_path_buf(),
        to,
        reason: reason.to_string(),
    })
}
