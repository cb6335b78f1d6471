//! Turning a byte range of a session file into parsed lines, on several threads when the
//! range is large.
//!
//! Parsing JSON is nearly all of a load's time and every line parses independently, so a big
//! range is cut at newlines into one part per available core; each part is split and parsed
//! by its own thread into [`Item`]s, and the parts are joined in file order. Deciding what
//! each line *means* (line numbers, the tree, the tail rules) stays sequential, in `load`.
//! Items own their parsed entries, which move into the tree afterwards, so the parallel
//! pass costs no extra copy of the data; each thread holds one read buffer.

use std::io;
use std::num::NonZeroUsize;

use crate::parse::{LineOutcome, parse_line};
use crate::split::{Piece, ReadAt, Splitter};

/// Below this many bytes per part, a thread costs more than it saves.
const MIN_PART: u64 = 256 << 10;

/// At most this many parts, however many cores there are: past a few threads the read and
/// the sequential tree building dominate.
const MAX_PARTS: usize = 8;

/// One line (or tail, or over-long line), parsed but not yet placed.
#[derive(Debug)]
pub(crate) enum Item {
    /// A complete line; `outcome` is `None` for a blank (whitespace-only) line.
    Line {
        offset: u64,
        length: u64,
        outcome: Option<LineOutcome>,
    },
    /// A line longer than the limit, not parsed.
    Oversize {
        offset: u64,
        length: u64,
        terminated: bool,
    },
    /// Bytes after the last newline; `outcome` is `None` when they are only whitespace.
    Tail {
        offset: u64,
        length: u64,
        outcome: Option<LineOutcome>,
    },
}

/// Parses `[start, end)` of `source` into items, in file order.
pub(crate) fn scan(
    source: &dyn ReadAt,
    start: u64,
    end: u64,
    max_line: usize,
) -> io::Result<Vec<Item>> {
    let parts = partition(source, start, end)?;
    if parts.len() <= 1 {
        return scan_part(source, start, end, max_line);
    }
    std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(parts.len() - 1);
        for &(from, to) in &parts[1..] {
            let spawned = std::thread::Builder::new()
                .name("session-parse".into())
                .spawn_scoped(scope, move || scan_part(source, from, to, max_line));
            match spawned {
                Ok(handle) => handles.push(Some(handle)),
                // No thread to be had (resource limits): parse that part here instead.
                Err(_) => handles.push(None),
            }
        }
        let mut items = scan_part(source, parts[0].0, parts[0].1, max_line)?;
        for (handle, &(from, to)) in handles.into_iter().zip(&parts[1..]) {
            let part = match handle {
                Some(handle) => match handle.join() {
                    Ok(result) => result?,
                    Err(panic) => std::panic::resume_unwind(panic),
                },
                None => scan_part(source, from, to, max_line)?,
            };
            items.extend(part);
        }
        Ok(items)
    })
}

/// Splits and parses one part on the calling thread.
fn scan_part(source: &dyn ReadAt, start: u64, end: u64, max_line: usize) -> io::Result<Vec<Item>> {
    let mut splitter = Splitter::new(source, start, end, max_line);
    let mut items = Vec::new();
    while let Some(piece) = splitter.next_piece()? {
        items.push(match piece {
            Piece::Line { offset, bytes } => Item::Line {
                offset,
                length: bytes.len() as u64,
                outcome: (!is_blank(bytes)).then(|| parse_line(bytes)),
            },
            Piece::Oversize {
                offset,
                length,
                terminated,
            } => Item::Oversize {
                offset,
                length,
                terminated,
            },
            Piece::Tail { offset, bytes } => Item::Tail {
                offset,
                length: bytes.len() as u64,
                outcome: (!is_blank(bytes)).then(|| parse_line(bytes)),
            },
        });
    }
    Ok(items)
}

/// Cuts `[start, end)` into parts that each begin at a line start.
fn partition(source: &dyn ReadAt, start: u64, end: u64) -> io::Result<Vec<(u64, u64)>> {
    let span = end.saturating_sub(start);
    let cores = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
    let wanted = usize::try_from(span / MIN_PART)
        .unwrap_or(usize::MAX)
        .clamp(1, cores.min(MAX_PARTS));
    let mut bounds = vec![start];
    for k in 1..wanted as u64 {
        let guess = start + span / wanted as u64 * k;
        let from = guess.max(*bounds.last().unwrap_or(&start));
        match next_line_start(source, from, end)? {
            Some(bound) if bound < end => bounds.push(bound),
            _ => break,
        }
    }
    bounds.dedup();
    bounds.push(end);
    Ok(bounds.windows(2).map(|w| (w[0], w[1])).collect())
}

/// The offset just after the first newline at or after `from`, if there is one before `end`.
pub(crate) fn next_line_start(source: &dyn ReadAt, from: u64, end: u64) -> io::Result<Option<u64>> {
    let mut buf = vec![0u8; 64 << 10];
    let mut at = from;
    while at < end {
        let want = usize::try_from(end - at)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let n = source.read_at(&mut buf[..want], at)?;
        if n == 0 {
            return Ok(None);
        }
        if let Some(i) = memchr::memchr(b'\n', &buf[..n]) {
            return Ok(Some(at + i as u64 + 1));
        }
        at += n as u64;
    }
    Ok(None)
}

fn is_blank(bytes: &[u8]) -> bool {
    bytes.iter().all(u8::is_ascii_whitespace)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn parts_start_at_line_starts_and_cover_the_range() {
        let mut data = Vec::new();
        for n in 0..200_000 {
            data.extend_from_slice(format!("line {n}\n").as_bytes());
        }
        let source: &[u8] = &data;
        let parts = partition(&source, 0, data.len() as u64).unwrap();
        assert_eq!(parts[0].0, 0);
        assert_eq!(parts.last().unwrap().1, data.len() as u64);
        for pair in parts.windows(2) {
            assert_eq!(pair[0].1, pair[1].0);
            assert_eq!(data[pair[1].0 as usize - 1], b'\n');
        }
        let items = scan(&source, 0, data.len() as u64, 1000).unwrap();
        assert_eq!(items.len(), 200_000);
        let mut expected = 0;
        for item in items {
            let Item::Line { offset, length, .. } = item else {
                panic!()
            };
            assert_eq!(offset, expected);
            expected = offset + length + 1;
        }
    }
}
