//! Reading a transcript without holding it: each pass (the UTF-8 scan, detection, the
//! importer) opens the source again and reads it through a small buffer. An import then holds
//! one line at a time (or the one JSON document being converted), never the raw file beside
//! what it was parsed into: that pair was most of an import's peak memory.
//!
//! Lines that are not UTF-8 cost only themselves (issue 12, defect 9): a first pass finds them,
//! and every later pass reads the source with them blanked (their newline kept, so line
//! numbers hold). Whether the whole file is text is decided exactly as before, over every
//! line: a file whose lines are mostly not UTF-8 is binary, and detection says so.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Cursor, Read};
use std::path::{Path, PathBuf};

use super::ImportError;

/// The UTF-8 byte-order mark, which detection and the importers skip.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// A line buffer grown past this by one long line is released after it, so one huge line
/// does not keep its buffer for the rest of the file.
const KEEP_LINE_BUFFER: usize = 4 << 20;

/// A line of the source that is not UTF-8 text, left out of the import.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidLine {
    /// 1-based line.
    pub line: usize,
    /// 1-based byte column of the first invalid byte.
    pub column: usize,
}

impl InvalidLine {
    /// The warning an import carries for it, naming `file` and the line.
    pub fn warning(&self, file: &str) -> String {
        format!(
            "{file}:{}: not UTF-8 text (invalid byte at column {}); this line was left out, \
             the others were read",
            self.line, self.column
        )
    }
}

/// Where a transcript is read from.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Source<'a> {
    /// A file, opened again for each pass.
    File(&'a Path),
    /// Bytes already in memory (`import_bytes`, `detect`).
    Bytes(&'a [u8]),
}

impl<'a> Source<'a> {
    /// The raw bytes from the start.
    fn open(&self) -> io::Result<Box<dyn BufRead + 'a>> {
        Ok(match *self {
            Self::File(path) => Box::new(BufReader::with_capacity(64 << 10, File::open(path)?)),
            Self::Bytes(bytes) => Box::new(bytes),
        })
    }
}

/// A source whose non-UTF-8 lines are known, read with those lines blanked.
pub(crate) struct Prepared<'a> {
    source: Source<'a>,
    /// The path errors name (the file, or the name given for bytes).
    path: PathBuf,
    /// The lines left out, in file order.
    pub(crate) invalid: Vec<InvalidLine>,
}

/// What the UTF-8 pass found about a source that is not text at all.
struct Binary {
    /// Offset of the first invalid byte, counted after a byte-order mark.
    index: u64,
    /// Length of the invalid sequence; `None` when the file ends inside it.
    error_len: Option<usize>,
}

impl<'a> Prepared<'a> {
    /// Reads `source` once to find its lines that are not UTF-8 (see the module docs). `name`
    /// is what errors call it.
    pub(crate) fn new(source: Source<'a>, name: &str) -> Result<Self, ImportError> {
        let path = match source {
            Source::File(path) => path.to_path_buf(),
            Source::Bytes(_) => PathBuf::from(name),
        };
        let io_error = |source| ImportError::Io {
            path: path.clone(),
            source,
        };
        let mut reader = source.open().map_err(io_error)?;
        let mut line = Vec::new();
        let mut number = 0usize;
        let mut offset = 0u64;
        let mut text_lines = 0usize;
        let mut invalid = Vec::new();
        let mut first_bad: Option<Binary> = None;
        let mut bom = false;
        loop {
            release_if_large(&mut line);
            line.clear();
            let read = reader.read_until(b'\n', &mut line).map_err(io_error)?;
            if read == 0 {
                break;
            }
            if number == 0 {
                bom = line.starts_with(BOM);
            }
            number += 1;
            let body = line.strip_suffix(b"\n").unwrap_or(&line);
            if !body.iter().all(u8::is_ascii_whitespace) {
                text_lines += 1;
            }
            if let Err(error) = std::str::from_utf8(body) {
                invalid.push(InvalidLine {
                    line: number,
                    column: error.valid_up_to() + 1,
                });
                if first_bad.is_none() {
                    // What the whole text's check reports there: the bytes after the invalid
                    // one decide the sequence's length, and a newline ends it as invalid, not
                    // incomplete, so the line is checked with its newline.
                    let at = error.valid_up_to();
                    let error_len = std::str::from_utf8(&line[at..])
                        .err()
                        .and_then(|e| e.error_len());
                    let skipped = if bom { BOM.len() as u64 } else { 0 };
                    first_bad = Some(Binary {
                        index: offset + at as u64 - skipped,
                        error_len,
                    });
                }
            }
            offset += read as u64;
        }
        if invalid.len() * 2 > text_lines
            && let Some(bad) = first_bad
        {
            // Mostly not text: binary data, which no importer reads.
            let error = match bad.error_len {
                Some(len) => format!(
                    "invalid utf-8 sequence of {len} bytes from index {}",
                    bad.index
                ),
                None => format!("incomplete utf-8 byte sequence from index {}", bad.index),
            };
            return Err(ImportError::UnknownFormat {
                file: name.to_owned(),
                reason: format!("not UTF-8 text ({error}); binary data?"),
            });
        }
        Ok(Self {
            source,
            path,
            invalid,
        })
    }

    /// An I/O error of this source as an import error.
    pub(crate) fn io_error(&self, source: io::Error) -> ImportError {
        ImportError::Io {
            path: self.path.clone(),
            source,
        }
    }

    /// The text from the start, invalid lines blanked and a byte-order mark skipped.
    pub(crate) fn reader(&self) -> Result<Box<dyn BufRead + 'a>, ImportError> {
        let raw = self.source.open().map_err(|e| self.io_error(e))?;
        let mut text: Box<dyn BufRead + 'a> = if self.invalid.is_empty() {
            raw
        } else {
            Box::new(BufReader::with_capacity(
                64 << 10,
                Blanked {
                    inner: raw,
                    invalid: self.invalid.iter().map(|l| l.line).collect(),
                    next: 0,
                    line: 1,
                },
            ))
        };
        let mut head = [0u8; 3];
        let mut filled = 0;
        while filled < head.len() {
            match text.read(&mut head[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.io_error(e)),
            }
        }
        if head[..filled] == *BOM {
            return Ok(text);
        }
        Ok(Box::new(Cursor::new(head[..filled].to_vec()).chain(text)))
    }

    /// The text's lines, one at a time.
    pub(crate) fn lines(&self) -> Result<Lines<'a>, ImportError> {
        Ok(Lines {
            reader: self.reader()?,
            buf: Vec::new(),
            number: 0,
            path: self.path.clone(),
        })
    }
}

/// Frees a line buffer that one long line grew (see [`KEEP_LINE_BUFFER`]).
fn release_if_large(buf: &mut Vec<u8>) {
    if buf.capacity() > KEEP_LINE_BUFFER {
        *buf = Vec::new();
    }
}

/// The lines of a text, numbered from 1 and without their ending, as `str::lines` gives them
/// (`\n` or `\r\n`; the last line may have none).
pub(crate) struct Lines<'a> {
    reader: Box<dyn BufRead + 'a>,
    buf: Vec<u8>,
    number: usize,
    path: PathBuf,
}

impl Lines<'_> {
    /// The next line and its 1-based number, or `None` at the end.
    pub(crate) fn next_line(&mut self) -> Result<Option<(usize, &str)>, ImportError> {
        release_if_large(&mut self.buf);
        self.buf.clear();
        let read = self
            .reader
            .read_until(b'\n', &mut self.buf)
            .map_err(|source| ImportError::Io {
                path: self.path.clone(),
                source,
            })?;
        if read == 0 {
            return Ok(None);
        }
        self.number += 1;
        let mut line = self.buf.as_slice();
        if let Some(rest) = line.strip_suffix(b"\n") {
            line = rest.strip_suffix(b"\r").unwrap_or(rest);
        }
        match std::str::from_utf8(line) {
            Ok(text) => Ok(Some((self.number, text))),
            // The first pass found every line that is not text and those are blanked, so the
            // file changed while it was being read.
            Err(_) => Err(ImportError::Io {
                path: self.path.clone(),
                source: io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "line {} is no longer UTF-8 text; the file changed while it was read, \
                         import it again once it is complete",
                        self.number
                    ),
                ),
            }),
        }
    }
}

/// A reader that leaves out the bytes of the given lines, keeping their newlines.
struct Blanked<'a> {
    inner: Box<dyn BufRead + 'a>,
    /// 1-based numbers of the lines to blank, ascending.
    invalid: Vec<usize>,
    /// Index into `invalid` of the next line to blank.
    next: usize,
    /// The 1-based number of the line the next byte belongs to.
    line: usize,
}

impl Read for Blanked<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        loop {
            let available = self.inner.fill_buf()?;
            if available.is_empty() {
                return Ok(0);
            }
            if self.invalid.get(self.next) == Some(&self.line) {
                // Skip the line's bytes; its newline is copied below like any other.
                match memchr::memchr(b'\n', available) {
                    Some(at) => {
                        self.inner.consume(at);
                        self.next += 1;
                    }
                    None => {
                        let all = available.len();
                        self.inner.consume(all);
                    }
                }
                continue;
            }
            // Up to the end of the current line, so the next call sees the next line's number.
            let limit = available.len().min(out.len());
            let n = match memchr::memchr(b'\n', &available[..limit]) {
                Some(at) => {
                    self.line += 1;
                    at + 1
                }
                None => limit,
            };
            out[..n].copy_from_slice(&available[..n]);
            self.inner.consume(n);
            return Ok(n);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn text(bytes: &[u8]) -> (Vec<u8>, Vec<InvalidLine>) {
        let prepared = Prepared::new(Source::Bytes(bytes), "<test>").unwrap();
        let mut out = Vec::new();
        prepared.reader().unwrap().read_to_end(&mut out).unwrap();
        (out, prepared.invalid)
    }

    #[test]
    fn invalid_lines_are_blanked_keeping_their_newlines() {
        let (out, invalid) = text(b"a\nb\xffc\nd\n\xfe\ne");
        assert_eq!(out, b"a\n\nd\n\ne");
        assert_eq!(
            invalid,
            [
                InvalidLine { line: 2, column: 2 },
                InvalidLine { line: 4, column: 1 }
            ]
        );
        let (out, invalid) = text(b"ok\nlast \xff");
        assert_eq!(out, b"ok\n");
        assert_eq!(invalid, [InvalidLine { line: 2, column: 6 }]);
    }

    #[test]
    fn a_byte_order_mark_is_skipped_and_short_texts_survive() {
        assert_eq!(text(b"\xEF\xBB\xBF{}\n").0, b"{}\n");
        assert_eq!(text(b"{}").0, b"{}");
        assert_eq!(text(b"").0, b"");
        assert_eq!(text(b"\xEF\xBB\xBF").0, b"");
        assert_eq!(text(b"\xEF\xBB\xBF\xEF\xBB\xBF[]").0, b"\xEF\xBB\xBF[]");
    }

    #[test]
    fn binary_errors_read_as_the_whole_texts_check_would() {
        for bytes in [
            b"\xff\xfe{\x00}".as_slice(),
            b"\xEF\xBB\xBF\xe2\x82\n\xff\n",
            b"ab\xe2\x82",
            b"\xe2\n\xff\xff\n",
        ] {
            let stripped = bytes.strip_prefix(BOM).unwrap_or(bytes);
            let expected = std::str::from_utf8(stripped).unwrap_err().to_string();
            let Err(ImportError::UnknownFormat { reason, .. }) =
                Prepared::new(Source::Bytes(bytes), "<test>")
            else {
                panic!("{bytes:?} was taken for text");
            };
            assert_eq!(reason, format!("not UTF-8 text ({expected}); binary data?"));
        }
    }

    #[test]
    fn lines_match_str_lines() {
        let sample = "one\r\ntwo\n\nthree\r\nfour\r";
        let prepared = Prepared::new(Source::Bytes(sample.as_bytes()), "<test>").unwrap();
        let mut lines = prepared.lines().unwrap();
        let mut got = Vec::new();
        while let Some((number, line)) = lines.next_line().unwrap() {
            got.push((number, line.to_owned()));
        }
        let expected: Vec<(usize, String)> = sample
            .lines()
            .enumerate()
            .map(|(i, l)| (i + 1, l.to_owned()))
            .collect();
        assert_eq!(got, expected);
    }
}
