//! The `memory_search` and `memory_get` tools as a model sees them (`prompt-and-memory.md`
//! §2.5, §2.6): their JSON schemas, and their results with OpenClaw's field names.
//!
//! A tool never fails: errors come back inside the result (`error`, and for a search
//! `unavailable`, `warning`, `action`), so the model can tell the user what happened and carry
//! on. `disabled` means memory is off (or cannot search at all), never that one path was
//! refused.

use std::time::Instant;

use serde_json::{Map, Value, json};

use crate::error::{ErrorKind, MemoryError};
use crate::index::MemoryIndex;
use crate::search::{SearchParams, SearchResult};

/// The search tool's name.
pub const MEMORY_SEARCH: &str = "memory_search";
/// The read tool's name.
pub const MEMORY_GET: &str = "memory_get";

const QUOTA_WARNING: &str =
    "Memory search is unavailable because the embedding provider quota is exhausted.";
const QUOTA_ACTION: &str = "Top up or switch embedding provider, then retry memory_search.";
const GENERIC_WARNING: &str = "Memory search is unavailable due to an embedding/provider error.";
const GENERIC_ACTION: &str = "Check embedding provider configuration and retry memory_search.";

/// Who is calling: decides whether citations are shown in `auto` mode.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolContext {
    /// The conversation's session key (`agent:main:telegram:group:42`); none counts as a
    /// direct chat.
    pub session_key: Option<String>,
}

/// The JSON schema of `memory_search`'s parameters.
pub fn memory_search_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "What to look for in long-term memory: words, names, dates or a question."
            },
            "maxResults": {
                "type": "number",
                "description": "Most results to return (default 6)."
            },
            "minScore": {
                "type": "number",
                "description": "Lowest relevance score to return, 0 to 1 (default 0.35)."
            },
            "corpus": {
                "type": "string",
                "enum": ["memory", "wiki", "all"],
                "description": "Which notes to search (default memory)."
            }
        },
        "required": ["query"],
        "additionalProperties": false
    })
}

/// The JSON schema of `memory_get`'s parameters.
pub fn memory_get_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": "A memory file as memory_search names it: MEMORY.md, memory.md, DREAMS.md or memory/<file>.md."
            },
            "from": {
                "type": "integer",
                "description": "First line to read, counting from 1 (default: the start)."
            },
            "lines": {
                "type": "integer",
                "description": "How many lines to read (default: to the end)."
            },
            "corpus": {
                "type": "string",
                "enum": ["memory", "wiki", "all"],
                "description": "Where the path lives (default memory)."
            }
        },
        "required": ["path"],
        "additionalProperties": false
    })
}

/// Both tools as `{name, description, parameters}`, to offer to a model.
pub fn tool_definitions() -> Vec<Value> {
    vec![
        json!({
            "name": MEMORY_SEARCH,
            "description": "Search long-term memory (MEMORY.md, memory/*.md and, when enabled, past conversations) before answering about earlier work, decisions, dates, people, preferences or to-dos. Returns matching snippets with their file and line numbers.",
            "parameters": memory_search_schema(),
        }),
        json!({
            "name": MEMORY_GET,
            "description": "Read a memory file, whole or a range of lines, after memory_search pointed at it. A file that does not exist yet reads as empty text.",
            "parameters": memory_get_schema(),
        }),
    ]
}

/// Runs the named tool with default context; an unknown name gives `{"error": …}`.
pub fn call_tool(index: &MemoryIndex, name: &str, args: &Value) -> Value {
    call_tool_with(index, &ToolContext::default(), name, args)
}

/// Runs the named tool for a caller.
pub fn call_tool_with(
    index: &MemoryIndex,
    context: &ToolContext,
    name: &str,
    args: &Value,
) -> Value {
    match name {
        MEMORY_SEARCH => memory_search(index, context, args),
        MEMORY_GET => memory_get(index, args),
        other => json!({
            "error": format!("unknown memory tool {other:?}; the memory tools are {MEMORY_SEARCH} and {MEMORY_GET}")
        }),
    }
}

/// A citation: `path#L<start>`, or `path#L<start>-L<end>` for a range.
pub fn citation(path: &str, start_line: usize, end_line: usize) -> String {
    if end_line > start_line {
        format!("{path}#L{start_line}-L{end_line}")
    } else {
        format!("{path}#L{start_line}")
    }
}

/// A snippet with its citation: the trimmed text, a blank line and `Source: <citation>`.
pub fn with_citation(snippet: &str, citation: &str) -> String {
    format!("{}\n\nSource: {citation}", snippet.trim())
}

/// The result `memory_search` gives when it cannot search: the quota pair when the provider
/// is out of quota or rate limited, the generic pair otherwise.
pub fn search_failure(error: &MemoryError) -> Value {
    let quota = error.is_quota()
        || (error.kind() == ErrorKind::Embedding
            && crate::embed::text_mentions_quota(&error.to_string()));
    let (warning, action) = if quota {
        (QUOTA_WARNING, QUOTA_ACTION)
    } else {
        (GENERIC_WARNING, GENERIC_ACTION)
    };
    json!({
        "results": [],
        "disabled": true,
        "unavailable": true,
        "error": error.to_string(),
        "warning": warning,
        "action": action,
    })
}

/// A number argument: a JSON number or a numeric string.
fn number(args: &Value, key: &str) -> Option<f64> {
    match args.get(key)? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
    .filter(|n| n.is_finite())
}

fn whole(args: &Value, key: &str) -> Option<usize> {
    number(args, key).map(|n| if n <= 0.0 { 0 } else { n.floor() as usize })
}

/// `memory_search`.
pub fn memory_search(index: &MemoryIndex, context: &ToolContext, args: &Value) -> Value {
    let started = Instant::now();
    let mode = index.settings().citations;
    if !index.settings().enabled {
        return json!({"results": [], "disabled": true, "error": MemoryError::Disabled.to_string()});
    }
    let Some(query) = args.get("query").and_then(Value::as_str) else {
        return json!({"results": [], "error": "query required"});
    };
    let corpus = args
        .get("corpus")
        .and_then(Value::as_str)
        .unwrap_or("memory");
    let params = SearchParams {
        max_results: whole(args, "maxResults").map(|n| n.max(1)),
        min_score: number(args, "minScore"),
    };
    let outcome = if corpus == "wiki" {
        // No wiki supplements here: a wiki-only search finds nothing.
        None
    } else {
        match index.search(query, &params) {
            Ok(outcome) => Some(outcome),
            Err(e) => {
                tracing::warn!(kind = %e.kind(), error = %e, "memory_search failed");
                return search_failure(&e);
            }
        }
    };
    let cite = mode.applies_to(context.session_key.as_deref());
    let results: Vec<Value> = outcome
        .as_ref()
        .map(|o| o.results.iter().map(|r| result_json(r, cite)).collect())
        .unwrap_or_default();
    let mut out = Map::new();
    out.insert("results".into(), Value::Array(results));
    out.insert(
        "provider".into(),
        json!(index.embedder().map(|e| e.provider().to_string())),
    );
    out.insert(
        "model".into(),
        json!(index.embedder().map(|e| e.model().to_string())),
    );
    out.insert(
        "fallback".into(),
        index
            .fallback()
            .map_or(Value::Null, |f| json!({"from": f.from, "reason": f.reason})),
    );
    out.insert("citations".into(), json!(mode.as_str()));
    out.insert(
        "mode".into(),
        json!(outcome.as_ref().map_or("fts-only", |o| o.mode.as_str())),
    );
    if let Some(o) = &outcome {
        out.insert(
            "debug".into(),
            json!({
                "candidates": o.candidates,
                "keywordHits": o.keyword_hits,
                "vectorHits": o.vector_hits,
                "tookMs": started.elapsed().as_millis() as u64,
            }),
        );
    }
    Value::Object(out)
}

fn result_json(r: &SearchResult, cite: bool) -> Value {
    let mut item = json!({
        "path": r.path,
        "startLine": r.start_line,
        "endLine": r.end_line,
        "score": r.score,
        "snippet": r.snippet,
        "source": r.source.as_str(),
        "corpus": "memory",
    });
    if cite {
        let c = citation(&r.path, r.start_line, r.end_line);
        item["snippet"] = json!(with_citation(&r.snippet, &c));
        item["citation"] = json!(c);
    }
    item
}

/// `memory_get`.
pub fn memory_get(index: &MemoryIndex, args: &Value) -> Value {
    let path = args.get("path").and_then(Value::as_str).unwrap_or("");
    if !index.settings().enabled {
        return json!({"path": path, "text": "", "disabled": true, "error": "memory search disabled"});
    }
    if args.get("corpus").and_then(Value::as_str) == Some("wiki") {
        return json!({"path": path, "text": ""});
    }
    let from = whole(args, "from");
    let lines = whole(args, "lines");
    match index.read_file(path, from, lines) {
        Ok(read) if read.exists => json!({"path": read.path, "text": read.text}),
        // Empty text, as OpenClaw answers (the model often asks for today's note before it
        // exists), and said so for whoever needs to tell it from an empty file.
        Ok(read) => json!({"path": read.path, "text": read.text, "missing": true}),
        Err(e) if e.kind() == ErrorKind::Disabled => {
            json!({"path": path, "text": "", "disabled": true, "error": "memory search disabled"})
        }
        // A refused path or a failed read: memory is on, so not `disabled`; the error says
        // what is wrong with the path.
        Err(e) => json!({"path": path, "text": "", "error": e.to_string()}),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "tools_tests.rs"]
mod tests;
