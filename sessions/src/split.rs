//! Cutting a byte range of a session file into lines, a chunk at a time.
//!
//! The loader never holds the whole file: it reads fixed-size chunks, finds newlines with
//! `memchr`, hands out each complete line as a borrowed slice, and keeps only the unfinished
//! remainder. So memory is the parsed tree plus one chunk (plus the longest line), not the
//! file size on top of the tree.
//!
//! Two cases need care:
//! * a line longer than the configured limit is not buffered; it is skipped to its newline and
//!   reported as [`Piece::Oversize`] (the quarantine copies it from the file by range);
//! * bytes after the last newline are a [`Piece::Tail`]: a torn append, or one still being
//!   written by another process. The caller decides which.

use std::fs::File;
use std::io;

/// Positional reads, so the splitter and the quarantine can read any range of the source
/// without sharing a cursor.
pub(crate) trait ReadAt: Sync {
    /// Reads into `buf` from `offset`; returns how many bytes were read (0 at the end).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
}

impl ReadAt for File {
    #[cfg(unix)]
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        std::os::unix::fs::FileExt::read_at(self, buf, offset)
    }

    #[cfg(windows)]
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        std::os::windows::fs::FileExt::seek_read(self, buf, offset)
    }
}

impl ReadAt for &[u8] {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(self.len());
        let n = buf.len().min(self.len() - start);
        buf[..n].copy_from_slice(&self[start..start + n]);
        Ok(n)
    }
}

/// Reads exactly `buf.len()` bytes at `offset`, retrying short reads.
pub(crate) fn read_exact_at(source: &dyn ReadAt, buf: &mut [u8], offset: u64) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match source.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the file ended before the expected range (was it truncated?)",
                ));
            }
            Ok(n) => done += n,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

/// One piece of the input.
#[derive(Debug)]
pub(crate) enum Piece<'b> {
    /// A complete line (its newline excluded) starting at `offset`.
    Line { offset: u64, bytes: &'b [u8] },
    /// A line longer than the limit, `length` bytes at `offset`; `terminated` says whether it
    /// ended in a newline (otherwise it is also the tail).
    Oversize {
        offset: u64,
        length: u64,
        terminated: bool,
    },
    /// Bytes after the last newline.
    Tail { offset: u64, bytes: &'b [u8] },
}

/// Splits `[start, end)` of a source into [`Piece`]s.
pub(crate) struct Splitter<'s> {
    source: &'s dyn ReadAt,
    end: u64,
    chunk: usize,
    max_line: usize,
    /// Read buffer; only `buf[..filled]` holds data. Kept zero-initialised at its full size
    /// so refills do not clear it again (it only grows for a line longer than a chunk).
    buf: Vec<u8>,
    filled: usize,
    /// First byte of `buf` not yet handed out.
    consumed: usize,
    /// How far past `consumed` has been searched for a newline already, so a long line is not
    /// rescanned from its start after every read.
    scanned: usize,
    /// File offset of `buf[0]`.
    buf_offset: u64,
    /// Next file offset to read.
    read_pos: u64,
}

/// Default read size: big enough that syscalls do not matter, small enough to be noise next
/// to the tree.
pub(crate) const CHUNK: usize = 1 << 20;

impl<'s> Splitter<'s> {
    pub(crate) fn new(source: &'s dyn ReadAt, start: u64, end: u64, max_line: usize) -> Self {
        Self::with_chunk(source, start, end, max_line, CHUNK)
    }

    /// A splitter reading `chunk` bytes at a time (small for the header, which is one line).
    pub(crate) fn with_chunk(
        source: &'s dyn ReadAt,
        start: u64,
        end: u64,
        max_line: usize,
        chunk: usize,
    ) -> Self {
        let span = usize::try_from(end.saturating_sub(start)).unwrap_or(usize::MAX);
        Self {
            source,
            end,
            chunk: chunk.min(span).max(1),
            max_line: max_line.max(1),
            buf: Vec::new(),
            filled: 0,
            consumed: 0,
            scanned: 0,
            buf_offset: start,
            read_pos: start,
        }
    }

    /// The next piece, or `None` at `end`.
    pub(crate) fn next_piece(&mut self) -> io::Result<Option<Piece<'_>>> {
        loop {
            let pending = &self.buf[self.consumed..self.filled];
            if let Some(at) = memchr::memchr(b'\n', &pending[self.scanned..]) {
                let start = self.consumed;
                let stop = start + self.scanned + at;
                self.consumed = stop + 1;
                self.scanned = 0;
                if stop - start > self.max_line {
                    // It fit in the buffer by chance; the limit applies all the same.
                    return Ok(Some(Piece::Oversize {
                        offset: self.buf_offset + start as u64,
                        length: (stop - start) as u64,
                        terminated: true,
                    }));
                }
                return Ok(Some(Piece::Line {
                    offset: self.buf_offset + start as u64,
                    bytes: &self.buf[start..stop],
                }));
            }
            self.scanned = pending.len();
            if pending.len() > self.max_line {
                return self.skip_oversize().map(Some);
            }
            if self.read_pos >= self.end {
                if pending.is_empty() {
                    return Ok(None);
                }
                let start = self.consumed;
                self.consumed = self.filled;
                self.scanned = 0;
                return Ok(Some(Piece::Tail {
                    offset: self.buf_offset + start as u64,
                    bytes: &self.buf[start..self.filled],
                }));
            }
            self.fill()?;
        }
    }

    /// Drops handed-out bytes and reads the next chunk after the remainder.
    fn fill(&mut self) -> io::Result<()> {
        if self.consumed > 0 {
            self.buf.copy_within(self.consumed..self.filled, 0);
            self.filled -= self.consumed;
            self.buf_offset += self.consumed as u64;
            self.consumed = 0;
        }
        let want = usize::try_from(self.end - self.read_pos)
            .unwrap_or(usize::MAX)
            .min(self.chunk);
        if self.buf.len() < self.filled + want {
            self.buf.resize(self.filled + want, 0);
        }
        let target = &mut self.buf[self.filled..self.filled + want];
        let n = loop {
            match self.source.read_at(target, self.read_pos) {
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                other => break other?,
            }
        };
        self.filled += n;
        if n == 0 {
            // The file is shorter than when its length was taken: stop where it ends now.
            self.end = self.read_pos;
        }
        self.read_pos += n as u64;
        Ok(())
    }

    /// Skips the over-long line that starts at `consumed`, without buffering it.
    fn skip_oversize(&mut self) -> io::Result<Piece<'static>> {
        let offset = self.buf_offset + self.consumed as u64;
        let mut length = (self.filled - self.consumed) as u64;
        self.filled = 0;
        self.consumed = 0;
        self.scanned = 0;
        loop {
            self.buf_offset = self.read_pos;
            if self.read_pos >= self.end {
                return Ok(Piece::Oversize {
                    offset,
                    length,
                    terminated: false,
                });
            }
            self.fill()?;
            if let Some(at) = memchr::memchr(b'\n', &self.buf[..self.filled]) {
                length += at as u64;
                self.consumed = at + 1;
                return Ok(Piece::Oversize {
                    offset,
                    length,
                    terminated: true,
                });
            }
            length += self.filled as u64;
            self.filled = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[derive(Debug, PartialEq)]
    enum P {
        L(u64, Vec<u8>),
        O(u64, u64, bool),
        T(u64, Vec<u8>),
    }

    fn split(data: &[u8], chunk: usize, max_line: usize) -> Vec<P> {
        let mut s = Splitter::new(&data, 0, data.len() as u64, max_line);
        s.chunk = chunk;
        let mut out = Vec::new();
        while let Some(piece) = s.next_piece().unwrap() {
            out.push(match piece {
                Piece::Line { offset, bytes } => P::L(offset, bytes.to_vec()),
                Piece::Oversize {
                    offset,
                    length,
                    terminated,
                } => P::O(offset, length, terminated),
                Piece::Tail { offset, bytes } => P::T(offset, bytes.to_vec()),
            });
        }
        out
    }

    #[test]
    fn lines_tails_and_oversize_at_every_chunk_size() {
        let data = b"ab\n\ncdefghij\nxy\ntail";
        for chunk in 1..=data.len() + 1 {
            assert_eq!(
                split(data, chunk, 100),
                vec![
                    P::L(0, b"ab".to_vec()),
                    P::L(3, b"".to_vec()),
                    P::L(4, b"cdefghij".to_vec()),
                    P::L(13, b"xy".to_vec()),
                    P::T(16, b"tail".to_vec()),
                ],
                "chunk {chunk}"
            );
            assert_eq!(
                split(data, chunk, 5),
                vec![
                    P::L(0, b"ab".to_vec()),
                    P::L(3, b"".to_vec()),
                    P::O(4, 8, true),
                    P::L(13, b"xy".to_vec()),
                    P::T(16, b"tail".to_vec()),
                ],
                "chunk {chunk}"
            );
            assert_eq!(split(b"0123456789", chunk, 3), vec![P::O(0, 10, false)]);
        }
    }

    #[test]
    fn sub_ranges() {
        let data = b"skip\nab\ncd";
        let source: &[u8] = data;
        let mut s = Splitter::new(&source, 5, 8, 100);
        let Some(Piece::Line { offset, bytes }) = s.next_piece().unwrap() else {
            panic!()
        };
        assert_eq!((offset, bytes), (5, b"ab".as_slice()));
        assert!(s.next_piece().unwrap().is_none());
    }
}
