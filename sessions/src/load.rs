//! Reading a session file: header, entries, tree, and a report of everything unusual.
//!
//! A load never fails because of one bad line. Only a file that is not a session at all fails
//! (empty, binary, no header line, a format from the future); every other problem is a line
//! in the [`LoadReport`], a `tracing::warn!` naming the file and line, and, for unusable
//! lines, a copy in a corrupt-line sidecar (see `quarantine` for why the session file itself
//! is left untouched).
//!
//! The file is read in chunks and parsed line by line (on one thread per core for big files,
//! see `scan`), so peak memory is the tree plus one chunk per thread, never the raw bytes and
//! the tree together. Measured on the 119 MB `gen_session.py --preset 100mb` file: peak RSS
//! about 1.5× the file size.
//!
//! A writer that only copies a session entry by entry (an import) needs no tree: `load_links`
//! judges every line exactly as a load does but keeps only ids, links and where each entry's
//! line is, a stretch of the file at a time, and `entry_at` reads each entry again when it is
//! copied. The same 119 MB file imports in about 0.25× its size that way.
//!
//! # The last line
//!
//! Bytes after the final newline are either a torn append (a crash mid-write) or an append
//! another process is making right now. A load cannot tell which, so a plain load reports
//! them as [`LoadReport::pending_tail`] and leaves them unconsumed. `Session` looks again while
//! holding the write lock, when no cooperating writer can be mid-write: then an incomplete
//! tail is torn, and it is quarantined like any other corrupt line. A tail that is a complete
//! entry (only the newline is missing) is accepted either way.
#![warn(missing_docs)]

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use crate::entry::{CURRENT_VERSION, Entry, EntryBody, Extra, OtherEntry, SessionHeader};
use crate::error::{Result, SessionError};
use crate::migrate::{self, MigrationReport, V1Line};
use crate::parse::{LineOutcome, ParentField, RawEntry, json_kind};
use crate::quarantine::{self, CorruptLine};
use crate::scan::{self, Item};
use crate::split::{Piece, ReadAt, Splitter};
use crate::tree::{DuplicateId, SessionTree};

/// Knobs of a load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadOptions {
    /// Lines longer than this are not parsed: they are reported and copied to the corrupt-line
    /// sidecar. A guard against a runaway line (a 100 MB base64 blob, a binary file with no
    /// newlines) costing that much memory again as a parsed value.
    pub max_line_bytes: usize,
    /// Whether unusable lines are copied to a `<file>.corrupt-<timestamp>` sidecar. Off for
    /// loads that must not write anything (read-only media, dry runs); the report lists the
    /// lines either way.
    pub record_corrupt_lines: bool,
}

/// The default line limit: far above any real entry (the largest tool outputs seen are
/// hundreds of KB), far below what would hurt.
pub const DEFAULT_MAX_LINE_BYTES: usize = 64 << 20;

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            record_corrupt_lines: true,
        }
    }
}

/// A known entry type kept verbatim because its fields did not fit the typed model. It
/// round-trips unchanged but plays no part in context building.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerbatimEntry {
    /// 1-based file line.
    pub line: u64,
    /// The entry's id.
    pub id: String,
    /// The entry's type.
    pub entry_type: String,
    /// What did not fit.
    pub reason: String,
}

/// Bytes after the last newline that a lock-free load left alone (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingTail {
    /// Offset of the first byte after the last newline.
    pub offset: u64,
    /// How many bytes follow it.
    pub length: u64,
}

/// Everything a load (or a later catch-up) noticed, for logs and for the user.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// The file that was read.
    pub path: PathBuf,
    /// The format version the file declared (1 when it declared none).
    pub format_version: u64,
    /// Bytes accounted for (parsed, skipped as blank, or quarantined).
    pub bytes: u64,
    /// Physical lines read, header included.
    pub lines: u64,
    /// Entries now in the tree.
    pub entries: usize,
    /// Blank lines skipped (pi skips them too; they hold no data).
    pub blank_lines: u64,
    /// Lines that could not be used; each is still in the session file and copied to a sidecar.
    pub corrupt_lines: Vec<CorruptLine>,
    /// Known entry types kept verbatim.
    pub kept_verbatim: Vec<VerbatimEntry>,
    /// Ids used by more than one entry.
    pub duplicate_ids: Vec<DuplicateId>,
    /// An incomplete last line a lock-free load left for a later look under the lock.
    pub pending_tail: Option<PendingTail>,
    /// Why the corrupt-line sidecar could not be written, if it could not.
    pub sidecar_error: Option<String>,
    /// What the v1/v2 → v3 migration did, if the file needed one.
    pub migration: Option<MigrationReport>,
    /// Entries whose parent was on a corrupt line, linked around it in memory (the file is
    /// not changed).
    pub bridged: Vec<crate::tree::Bridge>,
}

impl LoadReport {
    /// Whether the load found nothing worth telling anyone about.
    pub fn is_clean(&self) -> bool {
        self.corrupt_lines.is_empty()
            && self.kept_verbatim.is_empty()
            && self.duplicate_ids.is_empty()
            && self.pending_tail.is_none()
            && self.sidecar_error.is_none()
            && self.bridged.is_empty()
    }

    /// `message` entries that play no part in the context: kept in the file, but without a
    /// role or with content of the wrong kind (everything else is read leniently).
    pub fn messages_left_out(&self) -> impl Iterator<Item = &VerbatimEntry> {
        self.kept_verbatim
            .iter()
            .filter(|v| v.entry_type == "message")
    }

    /// One line saying how many messages play no part in the context, at which lines and why
    /// (the first reason); `None` when every message does. The same words in `sessions show`,
    /// `sessions import` and a replay's summary, so a loss is never silent.
    pub fn messages_left_out_line(&self) -> Option<String> {
        let left: Vec<&VerbatimEntry> = self.messages_left_out().collect();
        let first = left.first()?;
        let lines: Vec<String> = left.iter().take(10).map(|v| v.line.to_string()).collect();
        Some(format!(
            "{}: {} message{} play{} no part in the context (line{} {}{}): {}",
            self.path.display(),
            left.len(),
            if left.len() == 1 { "" } else { "s" },
            if left.len() == 1 { "s" } else { "" },
            if left.len() == 1 { "" } else { "s" },
            lines.join(", "),
            if left.len() > 10 { ", …" } else { "" },
            first.reason
        ))
    }
}

/// A loaded session: header, tree (leaf on the last entry) and report.
#[derive(Debug)]
pub struct Loaded {
    /// The header (already upgraded to v3 if the file was migrated in memory).
    pub header: SessionHeader,
    /// The entries.
    pub tree: SessionTree,
    /// What the load noticed.
    pub report: LoadReport,
    /// Where reading stopped, for catching up with later appends.
    pub(crate) cursor: Cursor,
}

/// How far a session file has been read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Cursor {
    /// Bytes consumed.
    pub offset: u64,
    /// The 1-based number of the line that starts at `offset`.
    pub next_line: u64,
    /// An unterminated last line was consumed: the next byte should be its newline.
    pub mid_line: bool,
    /// Non-blank lines seen so far, the header being 0 (what v1's `firstKeptEntryIndex` counts).
    pub ordinal: u64,
}

/// Whether unterminated last bytes may be an append in progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TailPolicy {
    /// Lock-free read: leave an incomplete tail for later.
    MaybeInFlight,
    /// Under the write lock (or from memory): an incomplete tail is torn.
    Torn,
}

/// Loads the session at `path`, migrating v1/v2 content to v3 **in memory** (the file is not
/// changed; `Session::open` persists migrations).
pub fn load_file(path: &Path, options: &LoadOptions) -> Result<Loaded> {
    let file = File::open(path).map_err(|e| SessionError::io(path, "open", e))?;
    let len = file
        .metadata()
        .map_err(|e| SessionError::io(path, "read the size of", e))?
        .len();
    let mut loaded = load_source(&file, path, len, options, TailPolicy::MaybeInFlight)?;
    record_corrupt(path, &file, &mut loaded.report, 0, options);
    Ok(loaded)
}

/// Parses a whole session held in memory (no sidecar is written; reports name the file
/// `<memory>`). For tests, imports and tools that already hold the bytes.
pub fn parse_bytes(bytes: &[u8], options: &LoadOptions) -> Result<Loaded> {
    load_source(
        &bytes,
        Path::new("<memory>"),
        bytes.len() as u64,
        options,
        TailPolicy::Torn,
    )
}

/// The whole-file load behind [`load_file`] and [`parse_bytes`].
pub(crate) fn load_source(
    source: &dyn ReadAt,
    path: &Path,
    len: u64,
    options: &LoadOptions,
    tail: TailPolicy,
) -> Result<Loaded> {
    let read_error = |e| SessionError::io(path, "read", e);
    let (mut header, mut cursor, mut report) = start_load(source, path, len, options)?;
    let version = header.format_version();

    let mut tree = SessionTree::new();
    let max_line = options.max_line_bytes;
    let items = scan::scan(source, cursor.offset, len, max_line).map_err(read_error)?;
    if version == CURRENT_VERSION {
        ingest(
            items,
            &mut cursor,
            path,
            tail,
            max_line,
            &mut report,
            &mut |at, raw, report| accept_v3(&mut tree, path, at.line, raw, report),
        );
        tree.finish_bulk_load();
    } else {
        let mut migration = MigrationReport {
            from_version: version,
            ..MigrationReport::default()
        };
        let mut entries = if version == 1 {
            let mut lines = Vec::new();
            ingest(
                items,
                &mut cursor,
                path,
                tail,
                max_line,
                &mut report,
                &mut |at, raw, report| {
                    let Place { line, ordinal, .. } = at;
                    let timestamp = raw
                        .timestamp
                        .clone()
                        .ok_or_else(|| "the entry has no string `timestamp`".to_owned())?;
                    // A v1 compaction only fits the model once migration converts its index.
                    let pending_conversion = matches!(&raw.body,
                        crate::entry::EntryBody::Other(o)
                            if o.entry_type == "compaction"
                                && o.fields.contains_key("firstKeptEntryIndex"));
                    if !pending_conversion {
                        note_verbatim(path, line, "(v1: no id yet)", &raw, report);
                    }
                    lines.push(V1Line {
                        line,
                        ordinal,
                        raw,
                        timestamp,
                    });
                    Ok(())
                },
            );
            migrate::v1_to_v2(lines, &mut migration)
        } else {
            let mut entries = Vec::new();
            ingest(
                items,
                &mut cursor,
                path,
                tail,
                max_line,
                &mut report,
                &mut |at, raw, report| {
                    note_verbatim(path, at.line, raw.id.as_deref().unwrap_or(""), &raw, report);
                    entries.push((at.line, placed_entry(raw)?));
                    Ok(())
                },
            );
            entries
        };
        migrate::v2_to_v3(&mut entries, &mut migration);
        migrate::upgrade_header(&mut header);
        for (line, entry) in entries {
            if let Some(duplicate) = tree.push(entry, line) {
                warn_duplicate(path, &duplicate);
                report.duplicate_ids.push(duplicate);
            }
        }
        tree.finish_bulk_load();
        for note in &migration.notes {
            tracing::warn!(file = %path.display(), note = %note, "session migration note");
        }
        report.migration = Some(migration);
    }
    bridge_lost_lines(source, path, &mut tree, &mut report);
    report.bytes = cursor.offset;
    report.entries = tree.len();
    Ok(Loaded {
        header,
        tree,
        report,
        cursor,
    })
}

/// Reads the header and checks its version: the start every load shares.
fn start_load(
    source: &dyn ReadAt,
    path: &Path,
    len: u64,
    options: &LoadOptions,
) -> Result<(SessionHeader, Cursor, LoadReport)> {
    if len == 0 {
        return Err(SessionError::EmptyFile { path: path.into() });
    }
    // The header is one line: read it in small pieces, not a whole chunk the parser reads again.
    let mut splitter = Splitter::with_chunk(source, 0, len, options.max_line_bytes, 64 << 10);
    let mut cursor = Cursor {
        next_line: 1,
        ..Cursor::default()
    };
    let mut report = LoadReport {
        path: path.into(),
        ..LoadReport::default()
    };
    let header = read_header(&mut splitter, &mut cursor, path, options)?;
    let version = header.format_version();
    report.format_version = version;
    if version > CURRENT_VERSION {
        return Err(SessionError::UnsupportedVersion {
            path: path.into(),
            version,
        });
    }
    if version == 0 {
        return Err(SessionError::NotASession {
            path: path.into(),
            line: 1,
            problem: "it declares format version 0, which no pi release wrote".into(),
        });
    }
    Ok((header, cursor, report))
}

/// How much of the file [`load_links`] parses before placing it: only one stretch's parsed
/// lines are held at a time.
const LINKS_STRETCH: u64 = 1 << 20;

/// A v3 session's structure, without its entries' content (see [`load_links`]).
#[derive(Debug)]
pub(crate) struct Links {
    /// The header.
    pub(crate) header: SessionHeader,
    /// Every entry with its id and links, linked around unreadable lines as a full load links
    /// it; bodies and timestamps are left out (empty).
    pub(crate) tree: SessionTree,
    /// Where each entry's line is (offset, length without the newline), in tree order.
    pub(crate) spans: Vec<(u64, u64)>,
    /// What the load noticed, as [`load_file`] reports it.
    pub(crate) report: LoadReport,
}

/// Reads a v3 session at `path` for its structure: every line is parsed and judged as
/// [`load_file`] judges it (same report, same links, same logs), but only ids, links and where
/// each entry's line is are kept. A writer that copies the session entry by entry (an import)
/// reads each entry again with [`entry_at`], so the session is never in memory whole: parsed
/// lines are placed a stretch at a time, and their content dropped. `None` for a v1/v2 file,
/// whose migration needs every entry at once.
pub(crate) fn load_links(path: &Path, options: &LoadOptions) -> Result<Option<Links>> {
    let mut stripped = StrippedTree::default();
    let Some((header, report)) = read_links(path, options, &mut stripped)? else {
        return Ok(None);
    };
    Ok(Some(Links {
        header,
        tree: stripped.tree,
        spans: stripped.spans,
        report,
    }))
}

/// Where [`read_links`] keeps what it needs of each entry it places: a tree of stripped entries
/// (an import), or the compact index `sessions show` streams from
/// ([`crate::link_index::LinkIndex`]).
pub(crate) trait LinkSink {
    /// Adds `entry` (on file `line`, its bytes at `span`: offset and length without the
    /// newline) at the end of the file order; returns the duplicate it made, if its id was
    /// taken.
    fn push(&mut self, entry: Entry, line: u64, span: (u64, u64)) -> Option<DuplicateId>;
    /// Re-resolves parent links that named nothing when their entry came (an out-of-order
    /// file), once every line is in.
    fn finish_bulk_load(&mut self);
    /// Whether some entry's parent id still names nothing.
    fn has_dangling(&self) -> bool;
    /// Links entries whose parent was on a lost line around it ([`crate::tree::Bridge`]).
    fn bridge_lost_lines(&mut self, lost: &[crate::tree::LostLine]) -> Vec<crate::tree::Bridge>;
    /// The number of entries placed.
    fn len(&self) -> usize;
}

impl LinkSink for SessionTree {
    fn push(&mut self, entry: Entry, line: u64, _: (u64, u64)) -> Option<DuplicateId> {
        SessionTree::push(self, entry, line)
    }

    fn finish_bulk_load(&mut self) {
        SessionTree::finish_bulk_load(self);
    }

    fn has_dangling(&self) -> bool {
        SessionTree::has_dangling(self)
    }

    fn bridge_lost_lines(&mut self, lost: &[crate::tree::LostLine]) -> Vec<crate::tree::Bridge> {
        SessionTree::bridge_lost_lines(self, lost)
    }

    fn len(&self) -> usize {
        SessionTree::len(self)
    }
}

/// [`load_links`]' sink: entries without their content, and where each one's line is.
#[derive(Default)]
struct StrippedTree {
    tree: SessionTree,
    spans: Vec<(u64, u64)>,
}

impl LinkSink for StrippedTree {
    fn push(&mut self, mut entry: Entry, line: u64, span: (u64, u64)) -> Option<DuplicateId> {
        // The content is read again when the entry is copied.
        entry.body = EntryBody::Other(OtherEntry {
            entry_type: String::new(),
            fields: Extra::new(),
        });
        entry.timestamp = String::new();
        self.spans.push(span);
        self.tree.push(entry, line)
    }

    fn finish_bulk_load(&mut self) {
        self.tree.finish_bulk_load();
    }

    fn has_dangling(&self) -> bool {
        self.tree.has_dangling()
    }

    fn bridge_lost_lines(&mut self, lost: &[crate::tree::LostLine]) -> Vec<crate::tree::Bridge> {
        self.tree.bridge_lost_lines(lost)
    }

    fn len(&self) -> usize {
        self.tree.len()
    }
}

/// [`load_links`] into any [`LinkSink`]: the header and the load report of the v3 session at
/// `path`, its entries handed to `sink` a stretch of the file at a time; `None` for a v1/v2
/// file.
pub(crate) fn read_links(
    path: &Path,
    options: &LoadOptions,
    sink: &mut impl LinkSink,
) -> Result<Option<(SessionHeader, LoadReport)>> {
    let file = File::open(path).map_err(|e| SessionError::io(path, "open", e))?;
    let len = file
        .metadata()
        .map_err(|e| SessionError::io(path, "read the size of", e))?
        .len();
    let source: &dyn ReadAt = &file;
    let (header, mut cursor, mut report) = start_load(source, path, len, options)?;
    if header.format_version() != CURRENT_VERSION {
        return Ok(None);
    }
    let max_line = options.max_line_bytes;
    let mut from = cursor.offset;
    while from < len && report.pending_tail.is_none() {
        // Stretches end at a line start, so only the last one can end in a tail.
        let to = match scan::next_line_start(source, from.saturating_add(LINKS_STRETCH), len) {
            Ok(Some(start)) => start,
            Ok(None) => len,
            Err(e) => return Err(SessionError::io(path, "read", e)),
        };
        let items = scan::scan(source, from, to, max_line)
            .map_err(|e| SessionError::io(path, "read", e))?;
        ingest(
            items,
            &mut cursor,
            path,
            TailPolicy::MaybeInFlight,
            max_line,
            &mut report,
            &mut |at, raw, report| {
                note_verbatim(path, at.line, raw.id.as_deref().unwrap_or(""), &raw, report);
                let entry = placed_entry(raw)?;
                if let Some(duplicate) = sink.push(entry, at.line, (at.offset, at.length)) {
                    warn_duplicate(path, &duplicate);
                    report.duplicate_ids.push(duplicate);
                }
                Ok(())
            },
        );
        from = to;
    }
    sink.finish_bulk_load();
    bridge_lost_lines(source, path, sink, &mut report);
    report.bytes = cursor.offset;
    report.entries = sink.len();
    record_corrupt(path, source, &mut report, 0, options);
    Ok(Some((header, report)))
}

/// The entry on the line at `span` (from [`Links::spans`]) of `source`, parsed as a load
/// parses it; `Err` with the reason when the line no longer holds an entry (the file changed).
/// `buf` is the line buffer, kept between calls.
pub(crate) fn entry_at(
    source: &dyn ReadAt,
    span: (u64, u64),
    buf: &mut Vec<u8>,
) -> io::Result<std::result::Result<Entry, String>> {
    const KEEP_LINE_BUFFER: usize = 4 << 20;
    let (offset, length) = span;
    let length = usize::try_from(length).map_err(io::Error::other)?;
    if buf.capacity() > KEEP_LINE_BUFFER && length < KEEP_LINE_BUFFER {
        *buf = Vec::new();
    }
    buf.clear();
    buf.resize(length, 0);
    crate::split::read_exact_at(source, buf, offset)?;
    Ok(match crate::parse::parse_line(buf) {
        LineOutcome::Entry(raw) => placed_entry(raw),
        LineOutcome::Corrupt(reason) => Err(reason),
    })
}

/// Reads new lines of a v3 session from `cursor` to `end` into `tree` (the catch-up before an
/// append, under the write lock), and records any corrupt lines.
pub(crate) fn catch_up(
    source: &dyn ReadAt,
    path: &Path,
    end: u64,
    cursor: &mut Cursor,
    options: &LoadOptions,
    tree: &mut SessionTree,
    report: &mut LoadReport,
) -> io::Result<()> {
    let first_new_corrupt = report.corrupt_lines.len();
    report.pending_tail = None;
    let items = scan::scan(source, cursor.offset, end, options.max_line_bytes)?;
    ingest(
        items,
        cursor,
        path,
        TailPolicy::Torn,
        options.max_line_bytes,
        report,
        &mut |at, raw, report| accept_v3(tree, path, at.line, raw, report),
    );
    tree.resolve_dangling();
    bridge_lost_lines(source, path, tree, report);
    report.bytes = cursor.offset;
    report.entries = tree.len();
    record_corrupt(path, source, report, first_new_corrupt, options);
    Ok(())
}

/// How much of a corrupt line is read to find its entry's id and parent: pi writes them first.
const LOST_LINE_PREFIX: usize = 4096;

/// Links entries whose parent was on a corrupt line around it (see [`crate::tree::Bridge`]),
/// reading the first bytes of each corrupt line for the ids it held, and reports each link.
fn bridge_lost_lines(
    source: &dyn ReadAt,
    path: &Path,
    tree: &mut impl LinkSink,
    report: &mut LoadReport,
) {
    if report.corrupt_lines.is_empty() || !tree.has_dangling() {
        return;
    }
    let lost: Vec<crate::tree::LostLine> = report
        .corrupt_lines
        .iter()
        .map(|c| {
            let mut prefix = vec![0; usize::try_from(c.length).unwrap_or(0).min(LOST_LINE_PREFIX)];
            let read = source.read_at(&mut prefix, c.offset).unwrap_or(0);
            prefix.truncate(read);
            let (id, parent_id) = crate::parse::ids_in_prefix(&prefix);
            crate::tree::LostLine {
                line: c.line,
                id,
                parent_id,
            }
        })
        .collect();
    for bridge in tree.bridge_lost_lines(&lost) {
        tracing::warn!(
            file = %path.display(),
            line = bridge.line,
            entry = %bridge.entry_id,
            lost_line = bridge.lost_line,
            now_under = %bridge.now_under,
            "an entry's parent was on a line that could not be read; it is linked around that line"
        );
        report.bridged.push(bridge);
    }
}

/// Copies `report.corrupt_lines[from..]` to a sidecar, if recording is on; a failure is
/// reported, not fatal (the lines are still in the session file).
pub(crate) fn record_corrupt(
    path: &Path,
    source: &dyn ReadAt,
    report: &mut LoadReport,
    from: usize,
    options: &LoadOptions,
) {
    if !options.record_corrupt_lines || report.corrupt_lines.len() <= from {
        return;
    }
    if let Err(error) = quarantine::record(path, source, &mut report.corrupt_lines[from..]) {
        tracing::warn!(
            file = %path.display(),
            %error,
            "could not write the corrupt-line sidecar; the lines stay in the session file unchanged"
        );
        report.sidecar_error = Some(format!(
            "could not write the corrupt-line sidecar next to {}: {error}; the corrupt lines are still in the session file, unchanged",
            path.display()
        ));
    }
}

/// Finds and parses the header: the first non-blank line.
fn read_header(
    splitter: &mut Splitter<'_>,
    cursor: &mut Cursor,
    path: &Path,
    options: &LoadOptions,
) -> Result<SessionHeader> {
    let not_a_session = |line, problem: String| SessionError::NotASession {
        path: path.into(),
        line,
        problem,
    };
    loop {
        let line = cursor.next_line;
        let piece = splitter
            .next_piece()
            .map_err(|e| SessionError::io(path, "read", e))?;
        let (bytes, offset, terminated) = match piece {
            None => {
                return Err(not_a_session(
                    line.saturating_sub(1).max(1),
                    "the file holds only blank lines".into(),
                ));
            }
            Some(Piece::Oversize { length, .. }) => {
                return Err(not_a_session(
                    line,
                    format!(
                        "the line is {length} bytes long with no usable header (the limit for one line is {} bytes)",
                        options.max_line_bytes
                    ),
                ));
            }
            Some(Piece::Line { offset, bytes }) => (bytes, offset, true),
            Some(Piece::Tail { offset, bytes }) => (bytes, offset, false),
        };
        cursor.next_line += u64::from(terminated);
        cursor.offset = offset + bytes.len() as u64 + u64::from(terminated);
        cursor.mid_line = !terminated;
        if is_blank(bytes) {
            continue;
        }
        return parse_header(bytes).map_err(|problem| not_a_session(line, problem));
    }
}

/// Parses a header line, explaining what is wrong if it is not one.
pub(crate) fn parse_header(bytes: &[u8]) -> std::result::Result<SessionHeader, String> {
    if memchr::memchr(0, bytes).is_some() {
        return Err("it holds binary data (NUL bytes), not JSON text".into());
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        format!(
            "it is not UTF-8 text (invalid byte at offset {})",
            e.valid_up_to()
        )
    })?;
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?;
    let serde_json::Value::Object(mut map) = value else {
        return Err(format!("it is a JSON {}, not an object", json_kind(&value)));
    };
    match map.remove("type") {
        Some(serde_json::Value::String(kind)) if kind == "session" => {}
        Some(serde_json::Value::String(kind)) => {
            return Err(format!(
                "its `type` is `{kind}`, not `session` (is the header line missing?)"
            ));
        }
        _ => return Err("it has no string `type` field".into()),
    }
    serde_json::from_value(serde_json::Value::Object(map))
        .map_err(|e| format!("the header does not fit the session header model: {e}"))
}

type Accept<'a> =
    dyn FnMut(Place, RawEntry, &mut LoadReport) -> std::result::Result<(), String> + 'a;

/// Feeds every parsed line to `accept` in file order, keeping line numbers and the cursor,
/// and recording what cannot be used.
fn ingest(
    items: Vec<Item>,
    cursor: &mut Cursor,
    path: &Path,
    tail: TailPolicy,
    max_line: usize,
    report: &mut LoadReport,
    accept: &mut Accept<'_>,
) {
    for item in items {
        let line = cursor.next_line;
        match item {
            Item::Line {
                offset,
                length,
                outcome,
            } => {
                let continuing = std::mem::take(&mut cursor.mid_line);
                cursor.next_line += 1;
                cursor.offset = offset + length + 1;
                report.lines = report.lines.max(line);
                let Some(outcome) = outcome else {
                    // An empty line right after a consumed tail is the newline an append
                    // added to end it, not a blank line of its own.
                    if !(continuing && length == 0) {
                        report.blank_lines += 1;
                    }
                    continue;
                };
                cursor.ordinal += 1;
                let at = Place {
                    line,
                    ordinal: cursor.ordinal,
                    offset,
                    length,
                };
                use_line(path, at, outcome, "", report, accept);
            }
            Item::Oversize {
                offset,
                length,
                terminated,
            } => {
                if !terminated && tail == TailPolicy::MaybeInFlight {
                    report.pending_tail = Some(PendingTail { offset, length });
                    break;
                }
                consume_tail_or_line(cursor, offset, length, terminated);
                report.lines = report.lines.max(line);
                cursor.ordinal += 1;
                // In the user's terms: the limit is no setting of theirs (the loader's option
                // is an API, not a key or a flag), so say what happens and what they can do.
                let reason = format!(
                    "the line is {length} bytes long, over the {max_line}-byte limit for one \
                     line, so it is left out (the rest of the session loads); no setting raises \
                     the limit: to keep this entry, shorten its content in the file (Rampart \
                     itself keeps content this large in the blob store, not in the line)"
                );
                corrupt(path, line, offset, length, reason, report);
            }
            Item::Tail {
                offset,
                length,
                outcome,
            } => {
                let Some(outcome) = outcome else {
                    // Whitespace holds no data and no cooperating writer starts a line with it.
                    consume_tail_or_line(cursor, offset, length, false);
                    continue;
                };
                if matches!(outcome, LineOutcome::Corrupt(_)) && tail == TailPolicy::MaybeInFlight {
                    tracing::warn!(
                        file = %path.display(),
                        line,
                        offset,
                        length,
                        "the last line has no newline and is incomplete; it may be an append in progress, so it is left for the next look under the write lock"
                    );
                    report.pending_tail = Some(PendingTail { offset, length });
                    break;
                }
                consume_tail_or_line(cursor, offset, length, false);
                report.lines = report.lines.max(line);
                cursor.ordinal += 1;
                let at = Place {
                    line,
                    ordinal: cursor.ordinal,
                    offset,
                    length,
                };
                use_line(
                    path,
                    at,
                    outcome,
                    "the last line is incomplete (no newline at its end): a write was cut short. ",
                    report,
                    accept,
                );
            }
        }
    }
}

fn consume_tail_or_line(cursor: &mut Cursor, offset: u64, length: u64, terminated: bool) {
    if terminated {
        cursor.next_line += 1;
        cursor.offset = offset + length + 1;
        cursor.mid_line = false;
    } else {
        cursor.offset = offset + length;
        cursor.mid_line = true;
    }
}

/// Where a line is, for [`use_line`].
#[derive(Clone, Copy)]
struct Place {
    line: u64,
    ordinal: u64,
    offset: u64,
    length: u64,
}

/// Hands a parsed line to `accept`, or records why it cannot be used.
fn use_line(
    path: &Path,
    at: Place,
    outcome: LineOutcome,
    corrupt_prefix: &str,
    report: &mut LoadReport,
    accept: &mut Accept<'_>,
) {
    let reason = match outcome {
        LineOutcome::Entry(raw) => match accept(at, raw, report) {
            Ok(()) => return,
            Err(reason) => reason,
        },
        LineOutcome::Corrupt(reason) => reason,
    };
    corrupt(
        path,
        at.line,
        at.offset,
        at.length,
        format!("{corrupt_prefix}{reason}"),
        report,
    );
}

fn corrupt(
    path: &Path,
    line: u64,
    offset: u64,
    length: u64,
    reason: String,
    report: &mut LoadReport,
) {
    tracing::warn!(
        file = %path.display(),
        line,
        offset,
        length,
        reason = %reason,
        "skipping an unusable session line; it stays in the file and is copied to a corrupt-line sidecar"
    );
    report.corrupt_lines.push(CorruptLine {
        line,
        offset,
        length,
        reason,
        sidecar: None,
    });
}

/// The v3 rules for a line: it must be placeable in the tree.
fn accept_v3(
    tree: &mut SessionTree,
    path: &Path,
    line: u64,
    raw: RawEntry,
    report: &mut LoadReport,
) -> std::result::Result<(), String> {
    note_verbatim(path, line, raw.id.as_deref().unwrap_or(""), &raw, report);
    let entry = placed_entry(raw)?;
    if let Some(duplicate) = tree.push(entry, line) {
        warn_duplicate(path, &duplicate);
        report.duplicate_ids.push(duplicate);
    }
    Ok(())
}

/// An entry with the base fields a tree node needs (v2 and v3).
fn placed_entry(raw: RawEntry) -> std::result::Result<Entry, String> {
    let id = raw
        .id
        .ok_or("the entry has no string `id`, so it cannot be placed in the tree")?;
    let parent_id = match raw.parent {
        ParentField::Absent => {
            return Err(
                "the entry has no `parentId` (a v3 entry needs one; `null` for a root)".into(),
            );
        }
        ParentField::Null => None,
        ParentField::Id(parent) => Some(parent),
    };
    let timestamp = raw.timestamp.ok_or("the entry has no string `timestamp`")?;
    Ok(Entry {
        id,
        parent_id,
        timestamp,
        body: raw.body,
    })
}

fn note_verbatim(path: &Path, line: u64, id: &str, raw: &RawEntry, report: &mut LoadReport) {
    if let Some(reason) = &raw.kept_verbatim {
        let entry_type = raw.body.entry_type().to_owned();
        tracing::warn!(
            file = %path.display(),
            line,
            id,
            entry_type = %entry_type,
            reason = %reason,
            "a session entry is kept verbatim and plays no part in context"
        );
        report.kept_verbatim.push(VerbatimEntry {
            line,
            id: id.to_owned(),
            entry_type,
            reason: reason.clone(),
        });
    }
}

fn warn_duplicate(path: &Path, duplicate: &DuplicateId) {
    tracing::warn!(
        file = %path.display(),
        id = %duplicate.id,
        line = duplicate.line,
        shadowed_line = duplicate.shadowed_line,
        "an entry id is used twice; lookups find the later entry, as in pi"
    );
}

fn is_blank(bytes: &[u8]) -> bool {
    bytes.iter().all(u8::is_ascii_whitespace)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::entry::EntryBody;

    const HEADER: &str = r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#;

    fn msg(id: &str, parent: Option<&str>) -> String {
        let parent = parent.map_or("null".to_owned(), |p| format!("\"{p}\""));
        format!(
            r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"user","content":"{id}","timestamp":1}}}}"#
        )
    }

    fn load(text: &[u8]) -> Loaded {
        parse_bytes(text, &LoadOptions::default()).unwrap()
    }

    #[test]
    fn loads_a_v3_session() {
        let text = format!("{HEADER}\n{}\n{}\n", msg("a", None), msg("b", Some("a")));
        let loaded = load(text.as_bytes());
        assert!(loaded.report.is_clean(), "{:?}", loaded.report);
        assert_eq!(loaded.tree.len(), 2);
        assert_eq!(loaded.tree.leaf_id(), Some("b"));
        assert_eq!(loaded.cursor.offset, text.len() as u64);
        assert_eq!(loaded.cursor.next_line, 4);
    }

    #[test]
    fn corrupt_lines_are_reported_with_their_line_numbers() {
        let text = format!(
            "{HEADER}\n{}\n{{oops\n\n[1]\n{}\n{}",
            msg("a", None),
            msg("b", Some("a")),
            &msg("c", Some("b"))[..20]
        );
        let loaded = load(text.as_bytes());
        let lines: Vec<u64> = loaded.report.corrupt_lines.iter().map(|c| c.line).collect();
        assert_eq!(lines, [3, 5, 7]);
        assert!(loaded.report.corrupt_lines[2].reason.contains("incomplete"));
        assert_eq!(loaded.report.blank_lines, 1);
        assert_eq!(loaded.tree.len(), 2);
        assert_eq!(loaded.tree.leaf_id(), Some("b"));
    }

    #[test]
    fn an_unterminated_complete_entry_is_accepted() {
        let text = format!("{HEADER}\n{}", msg("a", None));
        let loaded = load(text.as_bytes());
        assert_eq!(loaded.tree.len(), 1);
        assert!(loaded.cursor.mid_line);
    }

    #[test]
    fn header_problems_are_errors() {
        let opts = LoadOptions::default();
        assert!(matches!(
            parse_bytes(b"", &opts),
            Err(SessionError::EmptyFile { .. })
        ));
        for (bytes, needle) in [
            (b"\x00\x01\x02".as_slice(), "binary"),
            (b"\xff\xfe{".as_slice(), "UTF-8"),
            (b"\n\n  \n".as_slice(), "blank"),
            (
                b"{\"type\":\"message\"}\n".as_slice(),
                "header line missing",
            ),
            (b"{\"type\":\"session\"}\n".as_slice(), "missing field"),
        ] {
            let err = parse_bytes(bytes, &opts).unwrap_err();
            assert_eq!(err.kind(), crate::error::ErrorKind::NotASession, "{err}");
            assert!(err.to_string().contains(needle), "{err}");
        }
        let future = br#"{"type":"session","version":4,"id":"s","timestamp":"t","cwd":"/"}"#;
        assert!(matches!(
            parse_bytes(future, &opts),
            Err(SessionError::UnsupportedVersion { version: 4, .. })
        ));
    }

    #[test]
    fn oversize_lines_are_skipped_not_buffered() {
        let big = format!(r#"{{"type":"custom","customType":"{}"}}"#, "x".repeat(5000));
        let text = format!("{HEADER}\n{big}\n{}\n", msg("a", None));
        let opts = LoadOptions {
            max_line_bytes: 1000,
            record_corrupt_lines: false,
        };
        let loaded = parse_bytes(text.as_bytes(), &opts).unwrap();
        assert_eq!(loaded.tree.len(), 1);
        assert_eq!(loaded.report.corrupt_lines[0].line, 2);
        let reason = &loaded.report.corrupt_lines[0].reason;
        // Worded for the user: what happened and what to do, no internal API.
        assert!(reason.contains("1000-byte limit"), "{reason}");
        assert!(reason.contains("left out"), "{reason}");
        assert!(reason.contains("shorten its content"), "{reason}");
        assert!(
            !reason.contains("LoadOptions") && !reason.contains("max_line_bytes"),
            "{reason}"
        );
    }

    #[test]
    fn entries_without_base_fields_are_corrupt_in_v3() {
        let text = format!(
            "{HEADER}\n{}\n{}\n",
            r#"{"type":"message","parentId":null,"timestamp":"t","message":{"role":"user","content":"x","timestamp":1}}"#,
            r#"{"type":"label","id":"x","timestamp":"t","targetId":"a"}"#
        );
        let loaded = load(text.as_bytes());
        assert_eq!(loaded.report.corrupt_lines.len(), 2);
        assert!(loaded.report.corrupt_lines[0].reason.contains("`id`"));
        assert!(loaded.report.corrupt_lines[1].reason.contains("parentId"));
    }

    #[test]
    fn v1_sessions_migrate_in_memory() {
        let text = concat!(
            r#"{"type":"session","id":"s","timestamp":"t","cwd":"/"}"#,
            "\n",
            r#"{"type":"message","timestamp":"2025-01-01T00:00:00.000Z","message":{"role":"user","content":"a","timestamp":1}}"#,
            "\n",
            r#"{"type":"message","timestamp":"2025-01-01T00:00:00.000Z","message":{"role":"assistant","content":[],"api":"x","provider":"p","model":"m","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":2}}"#,
            "\n",
            r#"{"type":"compaction","timestamp":"2025-01-01T00:00:00.000Z","summary":"s","firstKeptEntryIndex":2,"tokensBefore":9}"#,
            "\n",
        );
        let loaded = load(text.as_bytes());
        assert_eq!(loaded.header.version, Some(3));
        let migration = loaded.report.migration.as_ref().unwrap();
        assert_eq!(migration.from_version, 1);
        assert_eq!(migration.entries_given_ids, 3);
        let entries = loaded.tree.entries();
        let EntryBody::Compaction(c) = &entries[2].body else {
            panic!()
        };
        assert_eq!(c.first_kept_entry_id, entries[1].id);
    }
}
