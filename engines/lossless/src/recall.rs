//! Recall over the store: search, describe, expand. Plain functions of one conversation,
//! ready to be exposed as model tools once the engine API carries engine tools.
//!
//! Why scoped to one conversation: an id from elsewhere answers "not found in this scope",
//! so a tool can never read another session's history by guessing ids (§6.4, §8.20). The one
//! widening is the conversation's own lineage: a session started over (`/new`) reaches the
//! sessions it replaced, whose summaries it may carry ([`Scope`], §8.17: every row remains
//! searchable).

use std::collections::HashMap;

use rampart_engine_api::EngineError;
use rusqlite::params;

use crate::render::{SummaryRow, find_summary};
use crate::store::{Store, db};

/// The conversations a recall reaches: the calling one and those it replaced by `/new`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    ids: Vec<i64>,
    /// `ids` as the JSON array SQLite's `json_each` reads.
    json: String,
}

impl Scope {
    /// The scope of `conversation` in `store` ([`Store::lineage`]).
    pub fn of(store: &Store, conversation: i64) -> Result<Self, EngineError> {
        Ok(Self::from_ids(store.lineage(conversation)?))
    }

    /// A scope of exactly these conversations.
    pub fn from_ids(ids: Vec<i64>) -> Self {
        let json = serde_json::to_string(&ids).unwrap_or_else(|_| "[]".into());
        Self { ids, json }
    }

    /// Whether rows of `conversation` are in reach.
    pub fn contains(&self, conversation: i64) -> bool {
        self.ids.contains(&conversation)
    }

    /// The bound parameter for `conversation_id IN (SELECT value FROM json_each(?))`.
    pub fn sql(&self) -> &str {
        &self.json
    }
}

/// How [`search`] matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// SQLite FTS5 terms (ANDed), ranked newest first.
    FullText,
    /// A case-insensitive substring.
    Substring,
    /// A regular expression (Rust `regex` syntax, case-insensitive unless the pattern says
    /// `(?-i)`), over the newest [`REGEX_SCAN_ROWS`] messages and every summary. Why this
    /// crate: it matches in time linear in the text, so no pattern a model writes can hang the
    /// engine (lossless-claw refuses nested quantifiers to avoid exactly that, §4.1).
    Regex,
}

/// Messages a regular-expression search reads at most, newest first (lossless-claw's bound).
pub const REGEX_SCAN_ROWS: usize = 10_000;

/// The longest regular expression a search takes, in characters.
pub const MAX_REGEX_CHARS: usize = 500;

/// When what a search finds was said: `since` inclusive, `before` exclusive, Unix ms. A
/// summary is in range when the time it covers overlaps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeRange {
    /// The earliest instant, inclusive.
    pub since: u64,
    /// The first instant past the range.
    pub before: u64,
}

impl TimeRange {
    /// Every time.
    pub const ALL: Self = Self {
        since: 0,
        before: i64::MAX as u64,
    };
}

/// A message or summary folded into a [`Hit`]: its text is the hit's but for some values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alike {
    /// `msg#<id>` or `sum_…`.
    pub id: String,
    /// Its values that differ from the hit's, in text order (see [`shape`]).
    pub values: Vec<String>,
}

/// One search hit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// `msg#<id>` or `sum_…`.
    pub id: String,
    /// Role of a message, kind of a summary.
    pub label: String,
    /// About [`SNIPPET_CHARS`] characters around where the search terms occur together.
    pub snippet: String,
    /// Byte offset in the item's text where the snippet starts: `lcm_describe` reads on from
    /// there, so a long tool output is read where the match is, not from its start.
    pub offset: usize,
    /// Older matches whose text is this hit's but for numbers and ids (a notice, heartbeat or
    /// status line sent again and again), newest first, at most [`MAX_ALIKE`]. Why fold them:
    /// a search for a notice that came 150 times would otherwise fill its hits with the newest
    /// copies, and the one the model needs (the restart of Tuesday morning) would never show;
    /// folded, the hit lists every copy's id and what differs in it, in a few tokens each.
    pub alike: Vec<Alike>,
    /// Matches alike this hit beyond the [`MAX_ALIKE`] listed.
    pub alike_not_listed: usize,
}

/// The most folded matches a hit lists.
pub const MAX_ALIKE: usize = 200;

/// Rows a search reads at most to fold older copies into its hits, once it has its `limit` of
/// hits (the newest rows that match are read first, as always).
pub const ALIKE_SCAN_ROWS: usize = 2_000;

/// The longest text (in tokens, as the store counts them) that is folded: a notice or status
/// line, not a tool output, which is never the same twice in anything but its numbers by
/// chance, and comparing which would cost a read of every large output a search matches.
const ALIKE_MAX_TOKENS: i64 = 2_000;

/// Where a text's values are, for folding: the text with each value replaced by a marker, and
/// the values in order. A value is a run of ASCII letters, digits and `-_.:` holding a digit,
/// less the punctuation it ends with (a timestamp, a count, an id, a version, a UUID); other
/// words stay as they are, so two texts of the same shape say the same thing about other
/// values. Why not a fuzzy measure: a fold must never hide a message that says something else.
pub fn shape(text: &str) -> (String, Vec<&str>) {
    let bytes = text.as_bytes();
    let is_value_byte = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':');
    let mut out = String::with_capacity(text.len());
    let mut values = Vec::new();
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        if !is_value_byte(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && is_value_byte(bytes[i]) {
            i += 1;
        }
        let mut end = i;
        while end > start && matches!(bytes[end - 1], b'-' | b'_' | b'.' | b':') {
            end -= 1;
        }
        // Every boundary here is at an ASCII byte, so a char boundary.
        if bytes[start..end].iter().any(u8::is_ascii_digit) {
            out.push_str(&text[copied..start]);
            out.push('\u{1}');
            values.push(&text[start..end]);
            copied = end;
        }
    }
    out.push_str(&text[copied..]);
    (out, values)
}

/// The most hits a search returns.
pub const MAX_LIMIT: usize = 200;

/// Characters of text a hit shows.
pub const SNIPPET_CHARS: usize = 240;

/// How far apart (in bytes) terms may be to count as occurring together.
const CLUSTER_BYTES: usize = 160;

/// The snippet of `text` for `terms` (lowercase) and where it starts: the window around the
/// place where the most distinct terms occur within [`CLUSTER_BYTES`] of each other (the
/// earliest such place), or the start of the text when no term occurs.
pub fn snippet(text: &str, terms: &[String]) -> (String, usize) {
    let lower = text.to_ascii_lowercase();
    let mut occurrences: Vec<(usize, usize)> = Vec::new();
    for (t, term) in terms.iter().enumerate() {
        if term.is_empty() {
            continue;
        }
        occurrences.extend(
            lower
                .match_indices(term.as_str())
                .take(1_000)
                .map(|(i, _)| (i, t)),
        );
    }
    occurrences.sort_unstable();
    let mut best = (0usize, 0usize);
    for (k, &(at, _)) in occurrences.iter().enumerate() {
        let mut seen = vec![false; terms.len()];
        for &(other, t) in &occurrences[k..] {
            if other > at + CLUSTER_BYTES {
                break;
            }
            seen[t] = true;
        }
        let distinct = seen.iter().filter(|s| **s).count();
        if distinct > best.0 {
            best = (distinct, at);
        }
    }
    // Start a little before the match, on a character boundary.
    let mut start = best.1.saturating_sub(SNIPPET_CHARS / 4);
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    (text[start..].chars().take(SNIPPET_CHARS).collect(), start)
}

/// The lowercase terms of `pattern` as [`search`] matches them in `mode`.
fn terms(pattern: &str, mode: Mode) -> Vec<String> {
    match mode {
        Mode::FullText => pattern
            .split_whitespace()
            .map(|t| t.to_ascii_lowercase())
            .collect(),
        Mode::Substring => vec![pattern.to_ascii_lowercase()],
        Mode::Regex => Vec::new(),
    }
}

/// The snippet of `text` around the first match of `regex` and where it starts (as
/// [`snippet`] places one: a quarter of the window before the match).
fn regex_snippet(text: &str, regex: &regex::Regex) -> Option<(String, usize)> {
    let at = regex.find(text)?.start();
    let mut start = at.saturating_sub(SNIPPET_CHARS / 4);
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    Some((text[start..].chars().take(SNIPPET_CHARS).collect(), start))
}

/// `pattern` compiled for [`Mode::Regex`], or what is wrong with it in words.
fn compile(pattern: &str) -> Result<regex::Regex, EngineError> {
    if pattern.chars().count() > MAX_REGEX_CHARS {
        return Err(EngineError::invalid_params(
            "search",
            format!("the regular expression is longer than {MAX_REGEX_CHARS} characters"),
        ));
    }
    regex::RegexBuilder::new(pattern)
        .case_insensitive(true)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| {
            EngineError::invalid_params(
                "search",
                format!("`{pattern}` is not a regular expression this search reads: {e}"),
            )
        })
}

/// Finds messages and summaries of `conversation` matching `pattern`. A full-text pattern with
/// regular-expression syntax is refused with a message saying to use substring mode, because
/// FTS would silently match something else (§6.14).
pub fn search(
    store: &Store,
    scope: &Scope,
    pattern: &str,
    mode: Mode,
    limit: usize,
) -> Result<Vec<Hit>, EngineError> {
    search_in(store, scope, pattern, mode, limit, TimeRange::ALL)
}

/// [`search`] of what was said within `range` (messages by when they were stored, summaries
/// by the time they cover).
pub fn search_in(
    store: &Store,
    scope: &Scope,
    pattern: &str,
    mode: Mode,
    limit: usize,
    range: TimeRange,
) -> Result<Vec<Hit>, EngineError> {
    if pattern.trim().is_empty() {
        return Err(EngineError::invalid_params(
            "search",
            "the pattern is empty",
        ));
    }
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(EngineError::invalid_params(
            "search",
            format!("limit must be between 1 and {MAX_LIMIT}, found {limit}"),
        ));
    }
    if range.since >= range.before {
        return Err(EngineError::invalid_params(
            "search",
            "`since` must be earlier than `before`",
        ));
    }
    let (since, before) = (range.since as i64, range.before as i64);
    let mut found = Collected::new(limit);
    // Rows read per query: enough to fold older copies into the hits (see [`Hit::alike`]).
    let rows = ALIKE_SCAN_ROWS.max(limit) as i64;
    let terms = terms(pattern, mode);
    let conn = store.conn();
    let by_terms = |text: &str| Some(snippet(text, &terms));
    match mode {
        Mode::FullText => {
            if pattern.contains(['|', '[', ']', '^', '$', '\\']) || pattern.contains(".*") {
                return Err(EngineError::invalid_params(
                    "search",
                    format!(
                        "`{pattern}` looks like a regular expression; full-text mode takes plain \
                         terms: use regex mode for a pattern, substring mode for exact text, or \
                         plain words"
                    ),
                ));
            }
            let query = pattern
                .split_whitespace()
                .map(|t| format!("\"{}\"", t.replace('"', "\"\"")))
                .collect::<Vec<_>>()
                .join(" ");
            let query_params = params![query, scope.sql(), rows, since, before];
            collect_hits(
                conn,
                "SELECT m.message_id, m.role, m.content, m.token_count FROM messages_fts f \
                 JOIN messages m ON m.message_id = f.rowid \
                 WHERE messages_fts MATCH ?1 AND m.conversation_id IN (SELECT value FROM json_each(?2)) \
                 AND m.created_at >= ?4 AND m.created_at < ?5 \
                 ORDER BY m.seq DESC LIMIT ?3",
                query_params,
                Source::Messages,
                by_terms,
                &mut found,
            )?;
            collect_hits(
                conn,
                "SELECT s.summary_id, s.kind, s.content, s.token_count FROM summaries_fts f \
                 JOIN summaries s ON s.summary_id = f.summary_id \
                 WHERE summaries_fts MATCH ?1 AND s.conversation_id IN (SELECT value FROM json_each(?2)) \
                 AND s.latest_at >= ?4 AND s.earliest_at < ?5 \
                 ORDER BY s.latest_at DESC LIMIT ?3",
                query_params,
                Source::Summaries,
                by_terms,
                &mut found,
            )?;
        }
        Mode::Regex => {
            // The newest messages in range, then the summaries in range, until the limit.
            let regex = compile(pattern)?;
            let by_regex = |text: &str| regex_snippet(text, &regex);
            collect_hits(
                conn,
                "SELECT message_id, role, content, token_count FROM messages WHERE conversation_id IN \
                 (SELECT value FROM json_each(?1)) AND created_at >= ?2 AND created_at < ?3 \
                 ORDER BY seq DESC LIMIT ?4",
                params![scope.sql(), since, before, REGEX_SCAN_ROWS as i64],
                Source::Messages,
                by_regex,
                &mut found,
            )?;
            collect_hits(
                conn,
                "SELECT summary_id, kind, content, token_count FROM summaries WHERE conversation_id IN \
                 (SELECT value FROM json_each(?1)) AND latest_at >= ?2 AND earliest_at < ?3 \
                 ORDER BY latest_at DESC",
                params![scope.sql(), since, before],
                Source::Summaries,
                by_regex,
                &mut found,
            )?;
        }
        Mode::Substring => {
            collect_hits(
                conn,
                "SELECT message_id, role, content, token_count FROM messages WHERE conversation_id IN \
                 (SELECT value FROM json_each(?1)) \
                 AND instr(lower(content), lower(?2)) > 0 \
                 AND created_at >= ?4 AND created_at < ?5 ORDER BY seq DESC LIMIT ?3",
                params![scope.sql(), pattern, rows, since, before],
                Source::Messages,
                by_terms,
                &mut found,
            )?;
        }
    }
    Ok(found.hits)
}

/// Which table a query's rows come from (a message's id is shown as `msg#N`).
#[derive(Clone, Copy)]
enum Source {
    Messages,
    Summaries,
}

/// The hits of one search as its queries' rows are read, with the shapes that fold older
/// copies into them.
struct Collected {
    hits: Vec<Hit>,
    /// Shape of a hit's text -> the hit's index and values.
    shapes: HashMap<String, (usize, Vec<String>)>,
    limit: usize,
    /// Rows read so far, by every query of the search.
    rows: usize,
}

impl Collected {
    fn new(limit: usize) -> Self {
        Self {
            hits: Vec::new(),
            shapes: HashMap::new(),
            limit,
            rows: 0,
        }
    }

    fn full(&self) -> bool {
        self.hits.len() >= self.limit
    }

    /// Folds a match of text `shape` with `values` into the hit of the same shape; false when
    /// there is none.
    fn fold(&mut self, id: &str, shape: &str, values: &[&str]) -> bool {
        let Some((at, first)) = self.shapes.get(shape) else {
            return false;
        };
        if first.len() != values.len() {
            return false;
        }
        let hit = &mut self.hits[*at];
        if hit.alike.len() >= MAX_ALIKE {
            hit.alike_not_listed += 1;
            return true;
        }
        hit.alike.push(Alike {
            id: id.to_owned(),
            values: first
                .iter()
                .zip(values)
                .filter(|(a, b)| a != b)
                .map(|(_, b)| (*b).to_owned())
                .collect(),
        });
        true
    }
}

/// Reads the rows of `sql` (id, role or kind, text, token count) and adds a hit for each row
/// `place` finds a snippet in, until `found` holds its limit, folding rows alike a hit into it
/// (and reading on to [`ALIKE_SCAN_ROWS`] rows for that once the limit is reached).
fn collect_hits(
    conn: &rusqlite::Connection,
    sql: &str,
    params: impl rusqlite::Params,
    source: Source,
    place: impl Fn(&str) -> Option<(String, usize)>,
    found: &mut Collected,
) -> Result<(), EngineError> {
    let what = match source {
        Source::Messages => "search messages",
        Source::Summaries => "search summaries",
    };
    let mut stmt = conn
        .prepare_cached(sql)
        .map_err(|e| db("prepare a search", e))?;
    let mut rows = stmt.query(params).map_err(|e| db(what, e))?;
    while let Some(row) = rows.next().map_err(|e| db(what, e))? {
        if found.full() && found.rows >= ALIKE_SCAN_ROWS {
            break;
        }
        found.rows += 1;
        let foldable = row.get::<_, i64>(3).map_err(|e| db("read a hit", e))? <= ALIKE_MAX_TOKENS;
        // Past the limit only a row that may fold is worth reading.
        if found.full() && !foldable {
            continue;
        }
        let text: String = row.get(2).map_err(|e| db("read a hit", e))?;
        let Some((snippet, offset)) = place(&text) else {
            continue;
        };
        let id = match source {
            Source::Messages => format!(
                "msg#{}",
                row.get::<_, i64>(0).map_err(|e| db("read a hit", e))?
            ),
            Source::Summaries => row.get(0).map_err(|e| db("read a hit", e))?,
        };
        let shaped = foldable.then(|| shape(&text));
        if let Some((shape, values)) = &shaped
            && found.fold(&id, shape, values)
        {
            continue;
        }
        if found.full() {
            continue;
        }
        if let Some((shape, values)) = shaped {
            let values = values.into_iter().map(str::to_owned).collect();
            found.shapes.insert(shape, (found.hits.len(), values));
        }
        found.hits.push(Hit {
            id,
            label: row.get(1).map_err(|e| db("read a hit", e))?,
            snippet,
            offset,
            alike: Vec::new(),
            alike_not_listed: 0,
        });
    }
    Ok(())
}

/// What [`describe`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Description {
    /// A summary with its sources, consumers and raw message ids.
    Summary {
        /// The node.
        row: SummaryRow,
        /// Nodes that consumed this one.
        consumers: Vec<String>,
        /// Messages of a leaf, in order.
        message_ids: Vec<i64>,
    },
    /// A large tool output, or a large file of a user message, stored aside.
    File {
        /// `file_…`.
        id: String,
        /// The tool that produced it (empty for a user's file).
        tool_name: String,
        /// A user's file: its name and MIME type (`None` for a tool output).
        file: Option<(String, String)>,
        /// Its size.
        byte_size: u64,
        /// The content, cut at `max_bytes` on a char boundary.
        content: String,
        /// True when `content` was cut.
        truncated: bool,
    },
}

/// Describes a `sum_…` or `file_…` id in `scope`; `None` means "not found in this scope"
/// (unknown, or another conversation's).
pub fn describe(
    store: &Store,
    scope: &Scope,
    id: &str,
    max_bytes: usize,
) -> Result<Option<Description>, EngineError> {
    let conn = store.conn();
    if id.starts_with("file_") {
        type FileRow = (String, i64, String, Option<String>, Option<String>);
        let row: Option<FileRow> = conn
            .query_row(
                "SELECT tool_name, byte_size, content, file_name, mime_type FROM large_files \
                 WHERE file_id = ?1 AND conversation_id IN (SELECT value FROM json_each(?2))",
                params![id, scope.sql()],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
            )
            .ok();
        return Ok(row.map(|(tool_name, byte_size, content, name, mime)| {
            let mut cut = content.len().min(max_bytes);
            while !content.is_char_boundary(cut) {
                cut -= 1;
            }
            Description::File {
                id: id.to_string(),
                tool_name,
                file: name.zip(mime),
                byte_size: byte_size as u64,
                truncated: cut < content.len(),
                content: content[..cut].to_string(),
            }
        }));
    }
    let Some(row) = find_summary(store, id)?.filter(|r| scope.contains(r.conversation_id)) else {
        return Ok(None);
    };
    let consumers = column(
        store,
        "SELECT summary_id FROM summary_sources WHERE source_id = ?1",
        id,
    )?;
    let message_ids = {
        let mut stmt = conn
            .prepare_cached(
                "SELECT message_id FROM summary_messages WHERE summary_id = ?1 ORDER BY ordinal",
            )
            .map_err(|e| db("prepare describe", e))?;
        stmt.query_map([id], |r| r.get(0))
            .map_err(|e| db("describe", e))?
            .collect::<Result<Vec<i64>, _>>()
            .map_err(|e| db("describe", e))?
    };
    Ok(Some(Description::Summary {
        row,
        consumers,
        message_ids,
    }))
}

fn column(store: &Store, sql: &str, id: &str) -> Result<Vec<String>, EngineError> {
    let mut stmt = store
        .conn()
        .prepare_cached(sql)
        .map_err(|e| db("prepare a lookup", e))?;
    let out = stmt
        .query_map([id], |r| r.get(0))
        .map_err(|e| db("look up", e))?
        .collect::<Result<Vec<String>, _>>()
        .map_err(|e| db("look up", e))?;
    Ok(out)
}

/// One node or message reached by [`expand`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expanded {
    /// `sum_…` or `msg#<id>`.
    pub id: String,
    /// Depth below the starting node.
    pub level: u32,
    /// Its tokens.
    pub tokens: u64,
    /// Its full text.
    pub text: String,
}

/// The result of [`expand`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Expansion {
    /// What was reached, depth first in source order.
    pub nodes: Vec<Expanded>,
    /// True when `token_cap` stopped the walk.
    pub truncated: bool,
}

/// Walks from `id` down its sources to `max_depth` levels, adding raw messages of leaves when
/// `include_messages`, stopping before the first item that would pass `token_cap`. `None`
/// when the id is not in this conversation.
pub fn expand(
    store: &Store,
    scope: &Scope,
    id: &str,
    max_depth: u32,
    include_messages: bool,
    token_cap: u64,
) -> Result<Option<Expansion>, EngineError> {
    let Some(root) = find_summary(store, id)?.filter(|r| scope.contains(r.conversation_id)) else {
        return Ok(None);
    };
    let mut out = Expansion::default();
    let mut used = 0u64;
    let mut stack = vec![(root, 0u32)];
    while let Some((row, level)) = stack.pop() {
        if used + row.token_count > token_cap {
            out.truncated = true;
            break;
        }
        used += row.token_count;
        out.nodes.push(Expanded {
            id: row.id.clone(),
            level,
            tokens: row.token_count,
            text: row.content.clone(),
        });
        if level >= max_depth {
            continue;
        }
        if row.sources.is_empty() && include_messages {
            let mut stmt = store
                .conn()
                .prepare_cached(
                    "SELECT m.message_id, m.token_count, m.role, m.content FROM summary_messages sm \
                     JOIN messages m ON m.message_id = sm.message_id \
                     WHERE sm.summary_id = ?1 ORDER BY sm.ordinal",
                )
                .map_err(|e| db("prepare expand", e))?;
            let rows = stmt
                .query_map([&row.id], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                    ))
                })
                .map_err(|e| db("expand", e))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| db("expand", e))?;
            for (mid, tokens, role, content) in rows {
                if used + tokens as u64 > token_cap {
                    out.truncated = true;
                    return Ok(Some(out));
                }
                used += tokens as u64;
                out.nodes.push(Expanded {
                    id: format!("msg#{mid}"),
                    level: level + 1,
                    tokens: tokens as u64,
                    text: format!("[{role}] {content}"),
                });
            }
        }
        for source in row.sources.iter().rev() {
            if let Some(child) = find_summary(store, source)? {
                stack.push((child, level + 1));
            }
        }
    }
    Ok(Some(out))
}

#[cfg(test)]
#[path = "recall_tests.rs"]
mod tests;
