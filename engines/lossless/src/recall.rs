//! Recall over the store: search, describe, expand. Plain functions of one conversation,
//! ready to be exposed as model tools once the engine API carries engine tools.
//!
//! Why scoped to one conversation: an id from elsewhere answers "not found in this scope",
//! so a tool can never read another session's history by guessing ids (§6.4, §8.20). The one
//! widening is the conversation's own lineage: a session started over (`/new`) reaches the
//! sessions it replaced, whose summaries it may carry ([`Scope`], §8.17: every row remains
//! searchable).

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
    let mut hits = Vec::new();
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
            let found = params![query, scope.sql(), limit as i64, since, before];
            collect_hits(
                conn,
                "SELECT m.message_id, m.role, m.content FROM messages_fts f \
                 JOIN messages m ON m.message_id = f.rowid \
                 WHERE messages_fts MATCH ?1 AND m.conversation_id IN (SELECT value FROM json_each(?2)) \
                 AND m.created_at >= ?4 AND m.created_at < ?5 \
                 ORDER BY m.seq DESC LIMIT ?3",
                found,
                Source::Messages,
                limit,
                by_terms,
                &mut hits,
            )?;
            collect_hits(
                conn,
                "SELECT s.summary_id, s.kind, s.content FROM summaries_fts f \
                 JOIN summaries s ON s.summary_id = f.summary_id \
                 WHERE summaries_fts MATCH ?1 AND s.conversation_id IN (SELECT value FROM json_each(?2)) \
                 AND s.latest_at >= ?4 AND s.earliest_at < ?5 \
                 ORDER BY s.latest_at DESC LIMIT ?3",
                found,
                Source::Summaries,
                limit,
                by_terms,
                &mut hits,
            )?;
        }
        Mode::Regex => {
            // The newest messages in range, then the summaries in range, until the limit.
            let regex = compile(pattern)?;
            let by_regex = |text: &str| regex_snippet(text, &regex);
            collect_hits(
                conn,
                "SELECT message_id, role, content FROM messages WHERE conversation_id IN \
                 (SELECT value FROM json_each(?1)) AND created_at >= ?2 AND created_at < ?3 \
                 ORDER BY seq DESC LIMIT ?4",
                params![scope.sql(), since, before, REGEX_SCAN_ROWS as i64],
                Source::Messages,
                limit,
                by_regex,
                &mut hits,
            )?;
            collect_hits(
                conn,
                "SELECT summary_id, kind, content FROM summaries WHERE conversation_id IN \
                 (SELECT value FROM json_each(?1)) AND latest_at >= ?2 AND earliest_at < ?3 \
                 ORDER BY latest_at DESC",
                params![scope.sql(), since, before],
                Source::Summaries,
                limit,
                by_regex,
                &mut hits,
            )?;
        }
        Mode::Substring => {
            collect_hits(
                conn,
                "SELECT message_id, role, content FROM messages WHERE conversation_id IN \
                 (SELECT value FROM json_each(?1)) \
                 AND instr(lower(content), lower(?2)) > 0 \
                 AND created_at >= ?4 AND created_at < ?5 ORDER BY seq DESC LIMIT ?3",
                params![scope.sql(), pattern, limit as i64, since, before],
                Source::Messages,
                limit,
                by_terms,
                &mut hits,
            )?;
        }
    }
    hits.truncate(limit);
    Ok(hits)
}

/// Which table a query's rows come from (a message's id is shown as `msg#N`).
#[derive(Clone, Copy)]
enum Source {
    Messages,
    Summaries,
}

/// Reads the rows of `sql` (id, role or kind, text) and adds a hit for each row `place` finds a
/// snippet in, until `hits` holds `limit`.
fn collect_hits(
    conn: &rusqlite::Connection,
    sql: &str,
    params: impl rusqlite::Params,
    source: Source,
    limit: usize,
    place: impl Fn(&str) -> Option<(String, usize)>,
    hits: &mut Vec<Hit>,
) -> Result<(), EngineError> {
    let what = match source {
        Source::Messages => "search messages",
        Source::Summaries => "search summaries",
    };
    let mut stmt = conn
        .prepare_cached(sql)
        .map_err(|e| db("prepare a search", e))?;
    let mut rows = stmt.query(params).map_err(|e| db(what, e))?;
    while hits.len() < limit
        && let Some(row) = rows.next().map_err(|e| db(what, e))?
    {
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
        hits.push(Hit {
            id,
            label: row.get(1).map_err(|e| db("read a hit", e))?,
            snippet,
            offset,
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
