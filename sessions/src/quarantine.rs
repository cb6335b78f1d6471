//! Corrupt lines: copied to a sidecar next to the session, never dropped, never edited.
//!
//! # Design: copy out, leave the session file alone
//!
//! A line that cannot be used (torn by a crash, invalid JSON, invalid UTF-8, binary junk,
//! longer than the line limit, an entry without an id) is **copied** into
//! `<session>.corrupt-<timestamp>` and skipped in memory. The session file itself is not
//! rewritten to remove it. Rewriting would be the riskier choice:
//!
//! * it would turn every load into a write of the whole file (100 MB for a large session);
//! * it replaces the file's inode, and any process that still holds the old file open (an
//!   appender in another process, a `tail -f`) would keep writing into a deleted file, which
//!   is exactly the silent data loss this is meant to prevent;
//! * loading would need the write lock and write permission, so a read-only session could
//!   not be read at all.
//!
//! What remains in the file is harmless: every later load skips the same line again, and
//! appends first end an unterminated last line with a newline so a new entry is never glued
//! onto a torn one. To keep the sidecars from growing on every load, each record carries the
//! line's offset, length and FNV-1a hash, and a line already recorded in an existing sidecar
//! is not recorded again.
//!
//! # Sidecar format
//!
//! Text header lines starting with `#`, then one record per line: a header line
//! `record line=<n> offset=<byte> length=<bytes> fnv1a64=<hex> reason=<text>`, then exactly
//! `length` bytes copied verbatim from the session, then a newline. The lengths make the
//! format unambiguous even when the copied bytes are binary or contain newlines.
#![warn(missing_docs)]

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use crate::fsutil;
use crate::split::{ReadAt, read_exact_at};

/// A line the loader could not use. The session file still holds it; a copy is in the
/// sidecar named by `sidecar` (when one could be written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorruptLine {
    /// 1-based line number in the session file.
    pub line: u64,
    /// Byte offset of the line's first byte.
    pub offset: u64,
    /// Length in bytes, without the newline.
    pub length: u64,
    /// Why the line was unusable, in words.
    pub reason: String,
    /// The sidecar file holding a copy of the line; `None` when recording was switched off or
    /// failed (see `LoadReport::sidecar_error`).
    pub sidecar: Option<PathBuf>,
}

/// The marker that makes a sidecar's name; `<session file name>.corrupt-<timestamp>`.
const SIDECAR_INFIX: &str = ".corrupt-";

/// Copies `lines` (read from `source`, the session's bytes) into a sidecar next to
/// `session_path`, skipping lines that an earlier sidecar already holds, and fills in each
/// line's `sidecar`. Errors leave the session untouched; the caller reports them.
pub(crate) fn record(
    session_path: &Path,
    source: &dyn ReadAt,
    lines: &mut [CorruptLine],
) -> io::Result<()> {
    if lines.is_empty() {
        return Ok(());
    }
    let mut hashes = Vec::with_capacity(lines.len());
    for line in lines.iter() {
        hashes.push(hash_range(source, line.offset, line.length)?);
    }
    let known = existing_records(session_path)?;
    let mut fresh = Vec::new();
    for (index, line) in lines.iter_mut().enumerate() {
        match known
            .iter()
            .find(|(key, _)| *key == (line.offset, line.length, hashes[index]))
        {
            Some((_, sidecar)) => line.sidecar = Some(sidecar.clone()),
            None => fresh.push(index),
        }
    }
    if fresh.is_empty() {
        return Ok(());
    }

    let (path, file) = create_sidecar(session_path)?;
    let mut out = BufWriter::new(file);
    writeln!(out, "# rampart corrupt-line sidecar, format 1")?;
    writeln!(out, "# session: {}", session_path.display())?;
    writeln!(
        out,
        "# Each record: a `record` line, then exactly `length` bytes copied verbatim from the"
    )?;
    writeln!(
        out,
        "# session file at `offset`, then a newline. The session file was not changed; the"
    )?;
    writeln!(
        out,
        "# loader skips these lines. Repair a line by hand and append it again if needed."
    )?;
    let mut buf = vec![0u8; 1 << 20];
    for &index in &fresh {
        let line = &lines[index];
        writeln!(
            out,
            "record line={} offset={} length={} fnv1a64={:016x} reason={}",
            line.line,
            line.offset,
            line.length,
            hashes[index],
            line.reason.replace(['\n', '\r'], " ")
        )?;
        copy_range(source, line.offset, line.length, &mut out, &mut buf)?;
        out.write_all(b"\n")?;
    }
    let file = out.into_inner().map_err(io::IntoInnerError::into_error)?;
    file.sync_all()?;
    fsutil::sync_parent_dir(&path)?;
    for &index in &fresh {
        lines[index].sidecar = Some(path.clone());
    }
    Ok(())
}

/// Creates a new, uniquely named sidecar for this session.
fn create_sidecar(session_path: &Path) -> io::Result<(PathBuf, File)> {
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S%.3fZ").to_string();
    for attempt in 0..1000u32 {
        // Built on the OS string so a non-UTF-8 session path still gets its own sidecar.
        let mut name = session_path.as_os_str().to_owned();
        name.push(SIDECAR_INFIX);
        name.push(&stamp);
        if attempt > 0 {
            name.push(format!("-{attempt}"));
        }
        let candidate = PathBuf::from(name);
        match crate::fsutil::owner_only(OpenOptions::new().write(true).create_new(true))
            .open(&candidate)
        {
            Ok(file) => return Ok((candidate, file)),
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(error) => return Err(error),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!(
            "no free corrupt-line sidecar name next to {}",
            session_path.display()
        ),
    ))
}

/// What identifies a recorded line: `(offset, length, FNV-1a hash)`.
type RecordKey = (u64, u64, u64);

/// The key of every record in this session's existing sidecars, with the sidecar holding it.
fn existing_records(session_path: &Path) -> io::Result<Vec<(RecordKey, PathBuf)>> {
    let Some(name) = session_path.file_name().and_then(|n| n.to_str()) else {
        return Ok(Vec::new());
    };
    let prefix = format!("{name}{SIDECAR_INFIX}");
    let dir = match session_path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let mut found = Vec::new();
    let mut seen = HashSet::new();
    for item in fs::read_dir(dir)? {
        let item = item?;
        let file_name = item.file_name();
        let Some(file_name) = file_name.to_str() else {
            continue;
        };
        if !file_name.starts_with(&prefix) {
            continue;
        }
        let path = item.path();
        // A sidecar we cannot read only costs a duplicate record; do not fail the load.
        match read_records(&path) {
            Ok(keys) => {
                for key in keys {
                    if seen.insert(key) {
                        found.push((key, path.clone()));
                    }
                }
            }
            Err(error) => tracing::debug!(
                sidecar = %path.display(),
                %error,
                "could not read an existing corrupt-line sidecar"
            ),
        }
    }
    Ok(found)
}

/// The record keys of one sidecar.
fn read_records(path: &Path) -> io::Result<Vec<RecordKey>> {
    let mut reader = BufReader::new(File::open(path)?);
    let mut keys = Vec::new();
    let mut header = Vec::new();
    loop {
        header.clear();
        if reader.read_until(b'\n', &mut header)? == 0 {
            return Ok(keys);
        }
        let Some(rest) = header.strip_prefix(b"record ") else {
            continue;
        };
        let text = String::from_utf8_lossy(rest);
        let field = |name: &str| -> Option<&str> {
            text.split(' ')
                .find_map(|part| part.strip_prefix(name)?.strip_prefix('='))
        };
        let (Some(offset), Some(length), Some(hash)) = (
            field("offset").and_then(|v| v.parse::<u64>().ok()),
            field("length").and_then(|v| v.parse::<u64>().ok()),
            field("fnv1a64").and_then(|v| u64::from_str_radix(v.trim(), 16).ok()),
        ) else {
            return Ok(keys);
        };
        keys.push((offset, length, hash));
        // Skip the copied bytes and their newline.
        let skipped = io::copy(&mut (&mut reader).take(length + 1), &mut io::sink())?;
        if skipped < length + 1 {
            return Ok(keys);
        }
    }
}

fn copy_range(
    source: &dyn ReadAt,
    offset: u64,
    length: u64,
    out: &mut impl Write,
    buf: &mut [u8],
) -> io::Result<()> {
    let mut done = 0u64;
    while done < length {
        let n = usize::try_from(length - done)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        read_exact_at(source, &mut buf[..n], offset + done)?;
        out.write_all(&buf[..n])?;
        done += n as u64;
    }
    Ok(())
}

/// FNV-1a (64-bit) of a byte range: a cheap fingerprint to recognise a line recorded before.
fn hash_range(source: &dyn ReadAt, offset: u64, length: u64) -> io::Result<u64> {
    let mut hash = Fnv::new();
    let mut buf = vec![0u8; usize::try_from(length.min(1 << 20)).unwrap_or(1 << 20)];
    let mut done = 0u64;
    while done < length {
        let n = usize::try_from(length - done)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        read_exact_at(source, &mut buf[..n], offset + done)?;
        hash.write(&buf[..n]);
        done += n as u64;
    }
    Ok(hash.0)
}

struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 ^= u64::from(byte);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn line(offset: u64, length: u64) -> CorruptLine {
        CorruptLine {
            line: 2,
            offset,
            length,
            reason: "bad\nthing".into(),
            sidecar: None,
        }
    }

    #[test]
    fn records_once_and_verbatim() {
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("s.jsonl");
        let data = b"head\n\xff\x00junk\nmore".to_vec();
        fs::write(&session, &data).unwrap();
        let mut lines = vec![line(5, 6)];
        record(&session, &data.as_slice(), &mut lines).unwrap();
        let sidecar = lines[0].sidecar.clone().unwrap();
        let text = fs::read(&sidecar).unwrap();
        assert!(text.windows(6).any(|w| w == b"\xff\x00junk"));
        assert!(String::from_utf8_lossy(&text).contains("line=2 offset=5 length=6"));
        assert!(String::from_utf8_lossy(&text).contains("session: "));

        // A second load records nothing new and points at the same sidecar.
        let mut again = vec![line(5, 6)];
        record(&session, &data.as_slice(), &mut again).unwrap();
        assert_eq!(again[0].sidecar.as_ref(), Some(&sidecar));
        let count = fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .contains(".corrupt-")
            })
            .count();
        assert_eq!(count, 1);

        // Different bytes at the same place are a new record.
        let changed = b"head\n\xff\x01junk\nmore".to_vec();
        let mut third = vec![line(5, 6)];
        record(&session, &changed.as_slice(), &mut third).unwrap();
        assert_ne!(third[0].sidecar.as_ref(), Some(&sidecar));
    }
}
