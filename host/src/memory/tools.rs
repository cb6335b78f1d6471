//! The `memory_search` and `memory_get` tools: their schemas, as the model is offered them,
//! and their calls, answered by the memory slot. The loop that answers them inside a turn is
//! [`crate::run::host_tools`], shared with the engine's own tools. The names and fields are OpenClaw's, so an
//! agent prompt written for OpenClaw reads the answers the same.

use rampart_engine_api::memory::{MemoryGetParams, MemorySearchParams};
use serde_json::{Value, json};

use super::slot::MemorySlot;
use crate::providers::ToolSpec;

pub use rampart_memory::tools::{MEMORY_GET, MEMORY_SEARCH};

/// Whether `name` is one of the memory tools.
pub fn is_memory_tool(name: &str) -> bool {
    name == MEMORY_SEARCH || name == MEMORY_GET
}

/// Both tools, as a model is offered them.
pub fn tool_specs() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: MEMORY_SEARCH.to_owned(),
            description: Some(
                "Search long-term memory (MEMORY.md, memory/*.md and, when enabled, past \
                 sessions) for notes about earlier work, decisions, dates, people, preferences \
                 and open tasks. Returns passages with their file and lines; read more of a \
                 file with memory_get."
                    .to_owned(),
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to look for."},
                    "maxResults": {"type": "integer", "minimum": 1,
                                   "description": "At most this many passages (default 6)."},
                    "minScore": {"type": "number", "minimum": 0, "maximum": 1,
                                 "description": "Drop passages scoring below this (default 0.35)."}
                },
                "required": ["query"]
            }),
        },
        ToolSpec {
            name: MEMORY_GET.to_owned(),
            description: Some(
                "Read lines of a memory file (MEMORY.md, memory.md or a file under memory/), \
                 usually after memory_search named it. Without from and lines, the whole file."
                    .to_owned(),
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The file, as memory_search names it."},
                    "from": {"type": "integer", "minimum": 1, "description": "First line, 1-based."},
                    "lines": {"type": "integer", "minimum": 1, "description": "How many lines."}
                },
                "required": ["path"]
            }),
        },
    ]
}

/// Answers a call of tool `name` with `arguments`, as the JSON text of the tool result;
/// `None` when `name` is not a memory tool. Bad arguments are answered with what is wrong, so
/// the model can call again.
pub fn call_tool(
    slot: &MemorySlot,
    name: &str,
    arguments: &Value,
    session_key: Option<&str>,
) -> Option<String> {
    let answer = match name {
        MEMORY_SEARCH => match serde_json::from_value::<MemorySearchParams>(arguments.clone()) {
            Ok(mut params) => {
                params.session_key = session_key.map(str::to_owned);
                serde_json::to_value(slot.search(params))
            }
            Err(e) => Ok(bad_arguments(name, &e, "`query` (a string)")),
        },
        MEMORY_GET => match serde_json::from_value::<MemoryGetParams>(arguments.clone()) {
            // Memory is on: a missing path is an error of the call, not `disabled`.
            Ok(params) if params.path.trim().is_empty() => Ok(json!({
                "path": "", "text": "",
                "error": rampart_memory::PathRefusal::Empty.describe("")
            })),
            Ok(params) => serde_json::to_value(slot.get(params)),
            Err(e) => Ok(bad_arguments(name, &e, "`path` (a string)")),
        },
        _ => return None,
    };
    Some(
        answer
            .map(|v| v.to_string())
            .unwrap_or_else(|e| json!({"error": e.to_string()}).to_string()),
    )
}

fn bad_arguments(tool: &str, e: &serde_json::Error, needs: &str) -> Value {
    json!({
        "error": format!("{tool}: the arguments could not be read ({e}); it needs {needs}"),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "tools_tests.rs"]
mod tests;
