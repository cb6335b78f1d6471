//! keep-last, the README's example engine, as a WebAssembly component: `assemble` keeps the
//! newest whole units (an assistant's tool calls with their results) of at most `keep`
//! messages (`[plugins.engines.keep-last.config] keep = 50`); every other method answers
//! `unsupported` and the host does its default. The same behaviour as
//! `examples/engines/python/keep_last_deltas.py`, through the world `engine-api/wit/engine.wit`
//! instead of frames on a pipe; message lists arrive as deltas (`messageRefs`, protocol 4.1),
//! so a turn costs the new messages, not the history.

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

/// Any method's parameters: only the message list matters here.
#[derive(Deserialize)]
struct Params<'a> {
    #[serde(default, borrow)]
    messages: Option<&'a RawValue>,
}

/// A message list as the host sends it to an engine that announced `messageRefs`
/// (docs/engine-protocol.md, section 4.1): a delta against the list kept from the last call.
#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(default, rename = "gen")]
    generation: Option<u64>,
    #[serde(default)]
    base: Option<u64>,
    #[serde(default)]
    keep: usize,
    #[serde(default, borrow)]
    items: Vec<&'a RawValue>,
}

/// The fields of a message that decide its unit.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Head {
    #[serde(default)]
    role: String,
    #[serde(default)]
    content: Option<serde_json::Value>,
}

/// The list of the last call, kept under the number the host gave it, each message as the
/// JSON it came as.
struct Kept {
    generation: u64,
    messages: Vec<String>,
}

thread_local! {
    static KEPT: std::cell::RefCell<Option<Kept>> = const { std::cell::RefCell::new(None) };
}

/// Marker of a stale base: the host then sends the list again in full.
const STALE: &str = "unknown base message list";

fn error(kind: u32, message: String) -> EngineError {
    EngineError {
        kind,
        message,
        details: None,
    }
}

/// A call's message list: a plain array (its messages), or a delta, whose list is the kept one.
enum Resolved {
    Plain(Vec<String>),
    Delta,
}

/// Reads the call's message list: a plain array, or a delta applied to the kept list, which it
/// then replaces (extended in place when the history only grew: no message is copied twice).
fn resolve(method: &str, payload: &str) -> Result<Resolved, EngineError> {
    let bad = |e: String| error(INVALID_PARAMS, format!("{method}: {e}"));
    let params: Params<'_> = serde_json::from_str(payload).map_err(|e| bad(e.to_string()))?;
    let Some(raw) = params.messages else {
        return Ok(Resolved::Plain(Vec::new()));
    };
    if raw.get().starts_with('[') {
        let list: Vec<&RawValue> =
            serde_json::from_str(raw.get()).map_err(|e| bad(e.to_string()))?;
        return Ok(Resolved::Plain(
            list.iter().map(|m| m.get().to_owned()).collect(),
        ));
    }
    let delta: Delta<'_> = serde_json::from_str(raw.get()).map_err(|e| bad(e.to_string()))?;
    KEPT.with(|kept| {
        let mut kept = kept.borrow_mut();
        let mut base = match (delta.base, kept.take()) {
            (None, _) => Vec::new(),
            (Some(b), Some(k)) if k.generation == b => k.messages,
            (Some(b), other) => {
                *kept = other;
                return Err(bad(format!("{STALE} {b}")));
            }
        };
        if delta.keep > base.len() {
            return Err(bad(format!(
                "{STALE}: keeps {} of {}",
                delta.keep,
                base.len()
            )));
        }
        let runs = delta.items.iter().any(|i| i.get().starts_with('['));
        let mut out = if runs {
            base[..delta.keep].to_vec()
        } else {
            base.truncate(delta.keep);
            std::mem::take(&mut base)
        };
        for item in &delta.items {
            if item.get().starts_with('[') {
                let (start, len): (usize, usize) =
                    serde_json::from_str(item.get()).map_err(|e| bad(e.to_string()))?;
                let run = base
                    .get(start..start.saturating_add(len))
                    .ok_or_else(|| bad(format!("{STALE}: run {start}+{len}")))?;
                out.extend_from_slice(run);
            } else {
                out.push(item.get().to_owned());
            }
        }
        *kept = Some(Kept {
            generation: delta.generation.unwrap_or(0),
            messages: out,
        });
        Ok(Resolved::Delta)
    })
}

fn has_calls(message: &str) -> bool {
    let head: Head = serde_json::from_str(message).unwrap_or_default();
    head.role == "assistant"
        && matches!(&head.content, Some(serde_json::Value::Array(blocks))
            if blocks.iter().any(|b| b.get("type").and_then(|t| t.as_str()) == Some("toolCall")))
}

/// A message's role alone: its content (a tool's whole output) is skipped, not built.
#[derive(Deserialize)]
struct RoleOnly<'a> {
    #[serde(default, borrow)]
    role: &'a str,
}

fn is_result(message: &str) -> bool {
    serde_json::from_str::<RoleOnly<'_>>(message).is_ok_and(|h| h.role == "toolResult")
}

/// The start of the newest whole units of at most `keep` messages, walking back from the end
/// only as far as that: a tool call stays with the results after it.
fn first_kept(messages: &[String], keep: usize) -> usize {
    let (mut start, mut i) = (messages.len(), messages.len());
    while i > 0 {
        let mut j = i - 1;
        if is_result(&messages[j]) {
            let mut k = j;
            while k > 0 && is_result(&messages[k - 1]) {
                k -= 1;
            }
            if k > 0 && has_calls(&messages[k - 1]) {
                j = k - 1;
            }
        }
        if messages.len() - j > keep {
            break;
        }
        start = j;
        i = j;
    }
    start
}

fn assemble(messages: &[String], as_delta: bool) -> String {
    let start = first_kept(messages, KEEP.load(Ordering::Relaxed));
    if as_delta {
        // A run of the call's own list: nothing to copy however long the history is.
        let n = messages.len() - start;
        return if n == 0 {
            "{\"messages\":{\"keep\":0,\"items\":[]}}".to_owned()
        } else {
            format!("{{\"messages\":{{\"keep\":0,\"items\":[[{start},{n}]]}}}}")
        };
    }
    let mut out = String::from("{\"messages\":[");
    for (n, m) in messages[start..].iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        out.push_str(m);
    }
    out.push_str("]}");
    out
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
            // Message lists as deltas: a turn sends only the new messages.
            "protocol": {"protocol": "rampart-engine", "version": "1.1.0",
                         "features": [{"name": "messageRefs"}]},
        })
        .to_string())
    }

    fn call(method: String, payload: String) -> Result<String, EngineError> {
        if method == "dispose" {
            return Ok("{}".into());
        }
        // Every call's list is read, answered or not: the next delta is relative to it.
        let resolved = resolve(&method, &payload)?;
        match (method.as_str(), resolved) {
            ("assemble", Resolved::Plain(messages)) => Ok(assemble(&messages, false)),
            ("assemble", Resolved::Delta) => Ok(KEPT.with(|kept| {
                let kept = kept.borrow();
                let messages = kept.as_ref().map_or(&[][..], |k| &k.messages[..]);
                assemble(messages, true)
            })),
            (other, _) => Err(error(
                UNSUPPORTED,
                format!("keep-last does not implement `{other}`"),
            )),
        }
    }
}

export!(KeepLast);
