//! The recall tools the lossless engine offers the model (engine API 1.2): `lcm_grep`,
//! `lcm_describe` and `lcm_expand`, answered from [`crate::recall`].
//!
//! The names are lossless-claw's, so an agent prompt written for it reads the same; the
//! behaviour follows the pain points of lossless-context.md §6: a regular expression in
//! full-text mode is refused with what to do instead (not silently matched as words), `limit`
//! is bounded, every id is scoped to the calling conversation ("not found in this scope"), and
//! expansion is direct and bounded by a token cap (no sub-agent, so nothing to hang on).
//!
//! Answers are compact JSON objects, so a model (or a test) reads fields by name. A call the
//! model got wrong is answered as a tool error saying what is wrong, never as an engine
//! failure: the host must not quarantine an engine because a model misspelt an argument.

use rampart_engine_api::tools::{EngineTool, ToolCallResult};
use rampart_engine_api::{EngineError, ErrorKind};
use rusqlite::params;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::recall::{self, Description, Mode};
use crate::store::{Store, db};

/// Searches raw messages and summaries.
pub const GREP: &str = "lcm_grep";
/// Describes a summary, a stored file or a raw message.
pub const DESCRIBE: &str = "lcm_describe";
/// Expands a summary down to its sources.
pub const EXPAND: &str = "lcm_expand";

/// Bytes of a file's or message's text `lcm_describe` returns at most (lossless-claw's 32 KiB).
pub const DESCRIBE_MAX_BYTES: usize = 32_768;
/// `lcm_expand`'s token cap when the model gives none, and the most it may ask for.
pub const EXPAND_DEFAULT_TOKENS: u64 = 4_000;
/// The most tokens one `lcm_expand` returns.
pub const EXPAND_MAX_TOKENS: u64 = 16_000;
/// `lcm_expand`'s depth when the model gives none, and the deepest it may ask for.
pub const EXPAND_DEFAULT_DEPTH: u32 = 3;
/// The deepest walk one `lcm_expand` makes.
pub const EXPAND_MAX_DEPTH: u32 = 8;
/// Hits `lcm_grep` returns when the model gives no limit.
pub const GREP_DEFAULT_LIMIT: usize = 20;

/// The three tools, as the model is offered them.
pub fn specs() -> Vec<EngineTool> {
    vec![
        EngineTool {
            name: GREP.into(),
            description: "Search this conversation's full history, including what was \
                compacted into summaries (<summary id=\"sum_…\"> blocks): raw messages (ids \
                `msg#N`) and summaries (ids `sum_…`), newest first, each with a snippet where the words occur and its offset; \
                since/before narrow it to a time. Older matches that differ from a hit only \
                in numbers and ids (a notice or status sent again and again) are folded into \
                it: its `alike` lists each one's id and the values that differ. \
                Use it when a summary mentions something whose exact details (paths, numbers, \
                ids, error text) you need. Then read a hit with lcm_describe or lcm_expand."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Words to find (full_text: every word must occur), the exact text (substring), or a regular expression (regex)."},
                    "mode": {"type": "string", "enum": ["full_text", "substring", "regex"], "description": "full_text (default): words, ranked; substring: exact, case-insensitive text, use it for symbols like | [ ] ^ $ \\; regex: a regular expression (case-insensitive, at most 500 characters), over the newest 10,000 messages and every summary."},
                    "since": {"type": "string", "description": "Only what was said at or after this time (ISO 8601: 2026-02-11, 2026-02-11T16:00, 2026-02-11T16:00:00+08:00; UTC when no offset is given)."},
                    "before": {"type": "string", "description": "Only what was said before this time (ISO 8601, as since)."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": recall::MAX_LIMIT, "description": "At most this many hits (default 20)."}
                },
                "required": ["pattern"]
            }),
        },
        EngineTool {
            name: DESCRIBE.into(),
            description: "Read one item of this conversation's history in full: a summary \
                (`sum_…`: its text, time range, sources and the messages it stands for), a \
                stored large output (`file_…`) or a raw message (`msg#N`). Long text comes in pages \
                of 32 KiB: pass a hit's offset, or the answer's nextOffset, to read on."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "`sum_…`, `file_…` or `msg#N`, as lcm_grep or a summary names it."},
                    "offset": {"type": "integer", "minimum": 0, "description": "For a message or file: the byte to read from (a hit's offset, or the last answer's nextOffset). Default 0."}
                },
                "required": ["id"]
            }),
        },
        EngineTool {
            name: EXPAND.into(),
            description: "Expand a summary (`sum_…`) into what it was made from: the \
                summaries below it, and with includeMessages the original messages, depth \
                first, oldest first, until tokenCap. Use it to recover detail a summary \
                dropped."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "The summary to expand."},
                    "maxDepth": {"type": "integer", "minimum": 1, "maximum": EXPAND_MAX_DEPTH, "description": "Levels to walk down (default 3)."},
                    "includeMessages": {"type": "boolean", "description": "Also return the raw messages under leaf summaries (default false)."},
                    "tokenCap": {"type": "integer", "minimum": 1, "maximum": EXPAND_MAX_TOKENS, "description": "Stop before this many tokens (default 4000)."}
                },
                "required": ["id"]
            }),
        },
    ]
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct GrepArgs {
    pattern: String,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    since: Option<String>,
    #[serde(default)]
    before: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct DescribeArgs {
    id: String,
    #[serde(default)]
    offset: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ExpandArgs {
    id: String,
    #[serde(default)]
    max_depth: Option<u32>,
    #[serde(default)]
    include_messages: Option<bool>,
    #[serde(default)]
    token_cap: Option<u64>,
}

/// Answers one call of tool `name` with `arguments` in `conversation`. A storage failure is an
/// `Err` (the engine failed); everything the model can fix is an error answer.
pub fn call(
    store: &Store,
    conversation: i64,
    name: &str,
    arguments: &Value,
) -> Result<ToolCallResult, EngineError> {
    let scope = &recall::Scope::of(store, conversation)?;
    let answer = match name {
        GREP => grep(store, scope, arguments),
        DESCRIBE => describe(store, scope, arguments),
        EXPAND => expand(store, scope, arguments),
        other => return call_unknown(other),
    };
    match answer {
        Ok(value) => Ok(ToolCallResult::text(value.to_string())),
        // What the model asked for is wrong: said to it, so it can call again.
        Err(e) if e.kind == ErrorKind::InvalidParams => {
            Ok(ToolCallResult::error(format!("{name}: {}", e.message)))
        }
        Err(e) => Err(e),
    }
}

/// The answer to a call of a tool this engine does not have: what it has instead.
pub fn call_unknown(name: &str) -> Result<ToolCallResult, EngineError> {
    Ok(ToolCallResult::error(format!(
        "`{name}` is not a tool of the lossless engine (it has {GREP}, {DESCRIBE} and {EXPAND})"
    )))
}

fn args<T: for<'de> Deserialize<'de>>(tool: &str, arguments: &Value) -> Result<T, EngineError> {
    // A model that sends no arguments at all means an empty object.
    let arguments = if arguments.is_null() {
        json!({})
    } else {
        arguments.clone()
    };
    serde_json::from_value(arguments)
        .map_err(|e| EngineError::invalid_params(tool, format!("the arguments do not fit: {e}")))
}

fn not_found(id: &str) -> Value {
    json!({"error": format!("`{id}` was not found in this scope (this conversation's history)")})
}

fn grep(store: &Store, scope: &recall::Scope, arguments: &Value) -> Result<Value, EngineError> {
    let a: GrepArgs = args(GREP, arguments)?;
    let mode = match a.mode.as_deref() {
        None | Some("full_text") => Mode::FullText,
        Some("substring") => Mode::Substring,
        Some("regex") => Mode::Regex,
        Some(other) => {
            return Err(EngineError::invalid_params(
                GREP,
                format!("mode `{other}` is not one of full_text, substring, regex"),
            ));
        }
    };
    let limit = a.limit.unwrap_or(GREP_DEFAULT_LIMIT);
    let instant = |field: &str, text: &Option<String>| -> Result<Option<u64>, EngineError> {
        text.as_deref()
            .map(|t| {
                crate::text::parse_instant(t).ok_or_else(|| {
                    EngineError::invalid_params(
                        GREP,
                        format!(
                            "`{field}` is `{t}`, not an ISO 8601 date or time (2026-02-11, \
                             2026-02-11T16:00, 2026-02-11T16:00:00+08:00)"
                        ),
                    )
                })
            })
            .transpose()
    };
    let range = recall::TimeRange {
        since: instant("since", &a.since)?.unwrap_or(recall::TimeRange::ALL.since),
        before: instant("before", &a.before)?.unwrap_or(recall::TimeRange::ALL.before),
    };
    let hits = recall::search_in(store, scope, &a.pattern, mode, limit, range)?;
    Ok(json!({
        "hits": hits.iter().map(hit_json).collect::<Vec<_>>(),
        "count": hits.len(),
    }))
}

/// A hit as `lcm_grep` answers it; `alike` (and `alikeNotListed`) only when it folded others.
fn hit_json(h: &recall::Hit) -> Value {
    let mut hit = json!({"id": h.id, "kind": h.label, "snippet": h.snippet, "offset": h.offset});
    if !h.alike.is_empty() {
        hit["alike"] = h
            .alike
            .iter()
            .map(|a| json!({"id": a.id, "values": a.values}))
            .collect();
    }
    if h.alike_not_listed > 0 {
        hit["alikeNotListed"] = h.alike_not_listed.into();
    }
    hit
}

fn describe(store: &Store, scope: &recall::Scope, arguments: &Value) -> Result<Value, EngineError> {
    let a: DescribeArgs = args(DESCRIBE, arguments)?;
    let id = a.id.trim();
    if let Some(n) = id.strip_prefix("msg#") {
        let Ok(message_id) = n.parse::<i64>() else {
            return Err(EngineError::invalid_params(
                DESCRIBE,
                format!("`{id}`: a message id is `msg#` and a number"),
            ));
        };
        return Ok(match message(store, scope, message_id)? {
            Some((role, content)) => {
                let page = page(&content, a.offset.unwrap_or(0), DESCRIBE_MAX_BYTES);
                json!({"id": id, "type": "message", "role": role, "content": page.text,
                       "bytes": content.len(), "offset": page.start,
                       "nextOffset": page.next, "truncated": page.next.is_some()})
            }
            None => not_found(id),
        });
    }
    if !(id.starts_with("sum_") || id.starts_with("file_")) {
        return Err(EngineError::invalid_params(
            DESCRIBE,
            format!("`{id}` is not an id this engine gives (`sum_…`, `file_…` or `msg#N`)"),
        ));
    }
    Ok(match recall::describe(store, scope, id, usize::MAX)? {
        None => not_found(id),
        Some(Description::File {
            id,
            tool_name,
            file,
            byte_size,
            content,
            truncated: _,
        }) => {
            let page = page(&content, a.offset.unwrap_or(0), DESCRIBE_MAX_BYTES);
            let mut out = json!({"id": id, "type": "file", "bytes": byte_size,
                       "content": page.text, "offset": page.start, "nextOffset": page.next,
                       "truncated": page.next.is_some()});
            match file {
                Some((name, mime)) => {
                    out["name"] = json!(name);
                    out["mime"] = json!(mime);
                }
                None => out["tool"] = json!(tool_name),
            }
            out
        }
        Some(Description::Summary {
            row,
            consumers,
            message_ids,
        }) => json!({
            "id": row.id, "type": "summary", "kind": row.kind, "depth": row.depth,
            "content": row.content, "tokens": row.token_count,
            "earliestAt": row.earliest_at, "latestAt": row.latest_at,
            "sources": row.sources, "consumers": consumers,
            "messages": message_ids.iter().map(|m| format!("msg#{m}")).collect::<Vec<_>>(),
            "sourceMessageTokens": row.source_message_token_count,
        }),
    })
}

fn expand(store: &Store, scope: &recall::Scope, arguments: &Value) -> Result<Value, EngineError> {
    let a: ExpandArgs = args(EXPAND, arguments)?;
    let depth = a.max_depth.unwrap_or(EXPAND_DEFAULT_DEPTH);
    if !(1..=EXPAND_MAX_DEPTH).contains(&depth) {
        return Err(EngineError::invalid_params(
            EXPAND,
            format!("maxDepth must be between 1 and {EXPAND_MAX_DEPTH}, found {depth}"),
        ));
    }
    let cap = a.token_cap.unwrap_or(EXPAND_DEFAULT_TOKENS);
    if !(1..=EXPAND_MAX_TOKENS).contains(&cap) {
        return Err(EngineError::invalid_params(
            EXPAND,
            format!("tokenCap must be between 1 and {EXPAND_MAX_TOKENS}, found {cap}"),
        ));
    }
    let id = a.id.trim();
    if !id.starts_with("sum_") {
        return Err(EngineError::invalid_params(
            EXPAND,
            format!(
                "`{id}` is not a summary id (`sum_…`); read messages and files with {DESCRIBE}"
            ),
        ));
    }
    Ok(
        match recall::expand(
            store,
            scope,
            id,
            depth,
            a.include_messages.unwrap_or(false),
            cap,
        )? {
            None => not_found(id),
            Some(x) => json!({
                "id": id,
                "nodes": x.nodes.iter().map(|n| json!({"id": n.id, "level": n.level, "tokens": n.tokens, "text": n.text})).collect::<Vec<_>>(),
                "truncated": x.truncated,
            }),
        },
    )
}

/// A raw message in `scope`: its role and text; `None` when it is another's or none.
fn message(
    store: &Store,
    scope: &recall::Scope,
    message_id: i64,
) -> Result<Option<(String, String)>, EngineError> {
    use rusqlite::OptionalExtension;
    store
        .conn()
        .query_row(
            "SELECT role, content FROM messages WHERE message_id = ?1 AND conversation_id IN \
             (SELECT value FROM json_each(?2))",
            params![message_id, scope.sql()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(|e| db("read a message", e))
}

/// A page of a long text: what one `lcm_describe` returns.
struct Page {
    text: String,
    /// Where it starts (the asked offset, moved back to a character boundary).
    start: usize,
    /// Where the next page starts, when there is more.
    next: Option<usize>,
}

/// At most `max` bytes of `text` from `offset` (an offset past the end reads nothing).
fn page(text: &str, offset: usize, max: usize) -> Page {
    let mut start = offset.min(text.len());
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = start.saturating_add(max).min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Page {
        text: text[start..end].to_owned(),
        start,
        next: (end < text.len()).then_some(end),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "tools_tests.rs"]
mod tests;
