//! keep-last, the README's example engine, as a WebAssembly component: `assemble` keeps the
//! newest whole units (an assistant's tool calls with their results) of at most `keep`
//! messages (`[plugins.engines.keep-last.config] keep = 50`); every other method answers
//! `unsupported` and the host does its default. The same behaviour as
//! `examples/engines/python/keep_last.py`, through the world `engine-api/wit/engine.wit`
//! instead of frames on a pipe.

use std::sync::atomic::{AtomicUsize, Ordering};

use serde::Deserialize;
use serde_json::value::RawValue;

wit_bindgen::generate!({
    path: "../../../engine-api/wit",
    world: "context-engine",
});

use exports::rampart::engine::engine::Guest;
use rampart::engine::types::EngineError;

/// Error kinds (docs/engine-protocol.md, section 6).
const UNSUPPORTED: u32 = 1;
const INVALID_PARAMS: u32 = 2;

/// `config.keep`, set by `hello`.
static KEEP: AtomicUsize = AtomicUsize::new(50);

#[derive(Deserialize)]
struct Hello {
    #[serde(default)]
    config: Config,
}

#[derive(Deserialize, Default)]
struct Config {
    keep: Option<usize>,
}

#[derive(Deserialize)]
struct AssembleParams<'a> {
    #[serde(default, borrow)]
    messages: Vec<&'a RawValue>,
}

/// The fields of a message that decide its unit.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Head {
    #[serde(default)]
    role: String,
    #[serde(default)]
    content: Option<serde_json::Value>,
    #[serde(default)]
    tool_call_id: Option<String>,
}

fn error(kind: u32, message: String) -> EngineError {
    EngineError {
        kind,
        message,
        details: None,
    }
}

/// Where each unit starts: a tool call is never separated from the results answering it.
fn unit_starts(heads: &[Head]) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut i = 0;
    while i < heads.len() {
        starts.push(i);
        let calls: Vec<&str> = match (&heads[i].role[..], &heads[i].content) {
            ("assistant", Some(serde_json::Value::Array(blocks))) => blocks
                .iter()
                .filter(|b| b.get("type").and_then(|t| t.as_str()) == Some("toolCall"))
                .filter_map(|b| b.get("id").and_then(|id| id.as_str()))
                .collect(),
            _ => Vec::new(),
        };
        i += 1;
        while !calls.is_empty()
            && i < heads.len()
            && heads[i]
                .tool_call_id
                .as_deref()
                .is_some_and(|id| calls.contains(&id))
        {
            i += 1;
        }
    }
    starts
}

fn assemble(payload: &str) -> Result<String, EngineError> {
    let params: AssembleParams<'_> = serde_json::from_str(payload)
        .map_err(|e| error(INVALID_PARAMS, format!("assemble: {e}")))?;
    let heads = params
        .messages
        .iter()
        .map(|m| serde_json::from_str::<Head>(m.get()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| error(INVALID_PARAMS, format!("assemble: a message: {e}")))?;
    let keep = KEEP.load(Ordering::Relaxed);
    let total = heads.len();
    let mut start = total;
    for s in unit_starts(&heads).into_iter().rev() {
        if total - s > keep {
            break;
        }
        start = s;
    }
    let mut out = String::from("{\"messages\":[");
    for (n, m) in params.messages[start..].iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        out.push_str(m.get());
    }
    out.push_str("]}");
    Ok(out)
}

struct KeepLast;

impl Guest for KeepLast {
    fn hello(hello: String) -> Result<String, String> {
        let hello: Hello =
            serde_json::from_str(&hello).map_err(|e| format!("keep-last: the hello: {e}"))?;
        KEEP.store(hello.config.keep.unwrap_or(50), Ordering::Relaxed);
        Ok(serde_json::json!({
            "id": "keep-last",
            "name": "Keep last N",
            "version": "0.1.0",
            "protocol": {"protocol": "rampart-engine", "version": "1.1.0", "features": []},
        })
        .to_string())
    }

    fn call(method: String, payload: String) -> Result<String, EngineError> {
        match method.as_str() {
            "assemble" => assemble(&payload),
            "dispose" => Ok("{}".into()),
            other => Err(error(
                UNSUPPORTED,
                format!("keep-last does not implement `{other}`"),
            )),
        }
    }
}

export!(KeepLast);
