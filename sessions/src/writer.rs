//! A new session file written entry by entry, for writers that produce entries one at a time
//! (an import) and must not hold them all to call [`crate::save_session`].
//!
//! Entries go to an unnamed temporary file in the target's directory as they come, each line
//! checked as `save_session` checks it (the loader would refuse a longer or deeper one). The
//! header is only known at the end (an importer learns the session's start and working
//! directory as it reads), so [`NewSessionFile::finish`] writes the header and then copies the
//! entries after it into the new file, through the same atomic, create-only path as
//! `save_session`. A failed or abandoned file leaves nothing behind: the temporary file has no
//! name, and the new file appears whole or not at all.

use std::fs::File;
use std::io::{self, BufWriter, Seek, Write};
use std::path::{Path, PathBuf};

use crate::entry::{Entry, SessionHeader};
use crate::error::{Result, SessionError};
use crate::fsutil::{self, Place};
use crate::load::DEFAULT_MAX_LINE_BYTES;
use crate::session::{MAX_JSON_DEPTH, json_depth, line_too_deep, line_too_long};

/// A line buffer grown past this by one long entry is released after it.
const KEEP_LINE_BUFFER: usize = 4 << 20;

/// A session file being written (see the module docs).
#[derive(Debug)]
pub struct NewSessionFile {
    /// Where the file will be put; errors before then name it.
    dir: PathBuf,
    /// The entries so far, one line each.
    body: BufWriter<File>,
    /// The line being built.
    line: Vec<u8>,
    entries: usize,
}

impl NewSessionFile {
    /// Starts a file to be put in `dir` (where its entries wait, unnamed, until
    /// [`NewSessionFile::finish`]).
    pub fn create_in(dir: &Path) -> Result<Self> {
        let body = tempfile::tempfile_in(dir)
            .map_err(|e| SessionError::io(dir, "create a temporary file in", e))?;
        Ok(Self {
            dir: dir.to_path_buf(),
            body: BufWriter::with_capacity(64 << 10, body),
            line: Vec::new(),
            entries: 0,
        })
    }

    /// Appends `entry` as the next line. Fails, writing nothing, for a line the loader would
    /// refuse (too long or nested too deep).
    pub fn push(&mut self, entry: &Entry) -> Result<()> {
        if self.line.capacity() > KEEP_LINE_BUFFER {
            self.line = Vec::new();
        }
        self.line.clear();
        crate::compact_json::write(&mut self.line, entry)
            .map_err(|e| SessionError::io(&self.dir, "write an entry for", e.into()))?;
        self.check(entry, &self.line)?;
        self.line.push(b'\n');
        self.body
            .write_all(&self.line)
            .map_err(|e| SessionError::io(&self.dir, "write a temporary file in", e))?;
        self.entries += 1;
        Ok(())
    }

    /// Appends `line`, the bytes of a pi v3 line that holds exactly `entry` (read from a source
    /// by the loader, so within its limits), as the next line; `entry` names it in errors. The
    /// same checks as [`NewSessionFile::push`].
    pub fn push_verbatim(&mut self, entry: &Entry, line: &[u8]) -> Result<()> {
        self.check(entry, line)?;
        self.body
            .write_all(line)
            .and_then(|()| self.body.write_all(b"\n"))
            .map_err(|e| SessionError::io(&self.dir, "write a temporary file in", e))?;
        self.entries += 1;
        Ok(())
    }

    /// Refuses `line` (holding `entry`) when the loader would: too long or nested too deep.
    fn check(&self, entry: &Entry, line: &[u8]) -> Result<()> {
        let limit = DEFAULT_MAX_LINE_BYTES;
        if line.len() > limit {
            return Err(line_too_long(&self.dir, entry, line.len(), limit));
        }
        let depth = json_depth(line);
        if depth > MAX_JSON_DEPTH {
            return Err(line_too_deep(&self.dir, entry, depth));
        }
        Ok(())
    }

    /// How many entries were pushed.
    pub fn len(&self) -> usize {
        self.entries
    }

    /// Whether no entry was pushed.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Puts the file at `target`: `header`, then the entries. Fails if `target` exists, so
    /// nobody's file is overwritten.
    pub fn finish(self, target: &Path, header: &SessionHeader) -> Result<()> {
        let (header_line, mut body) = self.into_parts(target, header)?;
        fsutil::write_atomically(target, Place::CreateNew, |out| {
            out.write_all(header_line.as_bytes())?;
            out.write_all(b"\n")?;
            io::copy(&mut body, out)?;
            Ok(())
        })
        .map_err(|e| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                SessionError::InvalidRequest {
                    path: target.into(),
                    problem: "a file already exists there; choose another path (existing files \
                              are never overwritten)"
                        .into(),
                }
            } else {
                SessionError::io(target, "write", e)
            }
        })
    }

    /// Writes the file's bytes (`header`, then the entries) to `out`, for a caller that puts
    /// the file in place itself (an export to a path the user chose, with its own rules for
    /// what may be replaced).
    pub fn finish_into(self, out: &mut dyn Write, header: &SessionHeader) -> Result<()> {
        let dir = self.dir.clone();
        let (header_line, mut body) = self.into_parts(&dir, header)?;
        out.write_all(header_line.as_bytes())
            .and_then(|()| out.write_all(b"\n"))
            .and_then(|()| io::copy(&mut body, out).map(drop))
            .map_err(|e| SessionError::io(&dir, "write the session from", e))
    }

    /// The header's line and the entries, read back from the start.
    fn into_parts(self, target: &Path, header: &SessionHeader) -> Result<(String, File)> {
        let header_line = header
            .to_json_line()
            .map_err(|e| SessionError::InvalidRequest {
                path: target.into(),
                problem: format!("the header cannot be written as JSON: {e}"),
            })?;
        let mut body = self.body.into_inner().map_err(|e| {
            SessionError::io(&self.dir, "write a temporary file in", e.into_error())
        })?;
        body.rewind()
            .map_err(|e| SessionError::io(&self.dir, "read back a temporary file in", e))?;
        Ok((header_line, body))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::entry::EntryBody;
    use crate::load::{LoadOptions, load_file};
    use crate::tree::SessionTree;

    #[test]
    fn writes_what_save_session_writes_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let mut tree = SessionTree::new();
        for level in ["low", "high"] {
            tree.append(EntryBody::ThinkingLevelChange(
                crate::entry::ThinkingLevelChangeEntry {
                    thinking_level: level.into(),
                    extra: Default::default(),
                },
            ));
        }
        let header = SessionHeader::new("/tmp");
        let saved = dir.path().join("saved.jsonl");
        crate::save_session(&saved, &header, &tree).unwrap();

        let mut file = NewSessionFile::create_in(dir.path()).unwrap();
        for entry in tree.entries() {
            file.push(entry).unwrap();
        }
        assert_eq!(file.len(), 2);
        let streamed = dir.path().join("streamed.jsonl");
        file.finish(&streamed, &header).unwrap();
        assert_eq!(
            std::fs::read(&saved).unwrap(),
            std::fs::read(&streamed).unwrap()
        );
        let loaded = load_file(&streamed, &LoadOptions::default()).unwrap();
        assert!(loaded.report.is_clean());
        assert_eq!(loaded.tree.len(), 2);
        // Only the two files: the entries' temporary file had no name.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);

        // An existing file is never replaced.
        let again = NewSessionFile::create_in(dir.path()).unwrap();
        assert!(again.finish(&streamed, &header).is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }
}
