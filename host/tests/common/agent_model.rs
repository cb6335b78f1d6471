//! A scripted model on loopback for real coding agents (Claude Code, the Codex CLI, pi).
//!
//! It speaks the three wires those agents use, streamed: Anthropic messages (`/v1/messages`,
//! Claude Code and `rampart serve`'s Anthropic upstream), OpenAI Responses (`/v1/responses`,
//! Codex) and OpenAI chat completions (`/v1/chat/completions`, pi and `rampart serve`'s OpenAI
//! upstream). Every request is recorded ([`AgentModel::requests`]).
//!
//! The script is a function of the request alone, so one model serves any number of agents and
//! conversations, and a run straight to the model and one through `rampart serve` get the same
//! answers for the same requests:
//! - a request without tools, or with `max_tokens` at most 1, is a side request (a title, a
//!   quota probe, a topic call, a compaction summary): it gets a short text, which quotes the
//!   secret number when the request holds it (a summary that keeps the fact);
//! - a conversation whose last user text names a file `…/secret.txt` gets a call of the agent's
//!   own file-read or shell tool (as declared in the request's tools) on that path; when that
//!   text says `N times`, the call is repeated until N results followed it (a conversation that
//!   grows by one big tool output per request);
//! - then, the last item being a tool result, it gets `The secret number is N.`, with N read
//!   from those results (`the secret number is N` in the file the test wrote): a number only
//!   the tool could have shown the model;
//! - any other user text gets the number quoted from an earlier answer in the history (`As I
//!   said, the secret number is N.`), or `I know of no number.`: a second turn that lost its
//!   history says so.
//!
//! [`AgentModel::delegating`] adds one step for sub-agent tests: a user text asking to
//! `delegate` is answered with a call of the agent's sub-agent tool (Claude Code's `Agent` or
//! `Task`), whose prompt asks the sub-agent to read the file.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Value, json};

use super::loopback::{
    Loopback, Recorded, Reply, anthropic_stream, anthropic_text_stream, openai_stream,
};

/// The wire of a request, from its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// `POST /v1/messages` (any query, e.g. Claude Code's `?beta=true`).
    Anthropic,
    /// `POST /v1/responses`.
    Responses,
    /// `POST /v1/chat/completions`.
    Chat,
}

impl Wire {
    /// The wire `path` belongs to, if any.
    pub fn of(path: &str) -> Option<Self> {
        let path = path.split('?').next().unwrap_or(path);
        if path.ends_with("/messages") {
            Some(Self::Anthropic)
        } else if path.ends_with("/responses") {
            Some(Self::Responses)
        } else if path.ends_with("/chat/completions") {
            Some(Self::Chat)
        } else {
            None
        }
    }
}

/// One item of a conversation, as the script reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// Text from the user.
    User(String),
    /// Text from the assistant.
    Assistant(String),
    /// The assistant called a tool.
    Call(String),
    /// A tool's result.
    Result(String),
}

/// The scripted model's running server.
pub struct AgentModel {
    server: Loopback,
}

impl AgentModel {
    /// Starts the model on a free port of 127.0.0.1.
    pub fn start() -> Self {
        Self {
            server: Loopback::scripted(|request| answer(request, false)),
        }
    }

    /// The model, also answering `delegate` requests with a sub-agent call.
    pub fn delegating() -> Self {
        Self {
            server: Loopback::scripted(|request| answer(request, true)),
        }
    }

    /// `http://127.0.0.1:PORT/v1`: a `baseUrl` for rampart's providers, Codex and pi.
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// `http://127.0.0.1:PORT`: Claude Code's `ANTHROPIC_BASE_URL`.
    pub fn origin(&self) -> String {
        format!("http://{}", self.server.addr())
    }

    /// The port, for a bridge into a network namespace.
    pub fn port(&self) -> u16 {
        self.server.addr().port()
    }

    /// Every request received, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.server.requests()
    }

    /// The requests of conversations: those on a model wire that declare tools (side requests
    /// and anything else left out), in order.
    pub fn turns(&self) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| Wire::of(&r.path).is_some() && !tool_names(&r.body).is_empty())
            .collect()
    }
}

/// The secret file's content for `number`: what the model looks for in a tool result.
pub fn secret_text(number: u64) -> String {
    format!("the secret number is {number}\n")
}

static SECRET: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)secret number is (\d+)").unwrap());
static REPEATS: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\b(\d+) times\b").unwrap());
static SECRET_PATH: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"(/[^\s"'`]*secret\.txt)"#).unwrap());

/// The reply of the script to `request` (see the module's documentation).
pub fn answer(request: &Recorded, delegating: bool) -> Reply {
    let Some(wire) = Wire::of(&request.path) else {
        return Reply::json(
            404,
            json!({"error": {"message": format!("loopback model: no {}", request.path)}}),
        );
    };
    if request.method != "POST" {
        return Reply::json(405, json!({"error": {"message": "POST only"}}));
    }
    let body = &request.body;
    let tools = tool_names(body);
    let max_tokens = ["max_tokens", "max_output_tokens", "max_completion_tokens"]
        .iter()
        .find_map(|k| body[*k].as_u64());
    let tokens = (request.raw_body.len() / 4) as u64;
    if tools.is_empty() || max_tokens.is_some_and(|m| m <= 1) {
        let text = match SECRET.captures(&request.raw_body) {
            Some(c) => format!("Summary: the secret number is {}.", &c[1]),
            None => "Loopback side answer.".to_owned(),
        };
        return say(wire, body, &text, tokens);
    }
    let items = conversation(wire, body);
    let calls = items.iter().filter(|i| matches!(i, Item::Call(_))).count();
    let id = format!("call_loop_{}", calls + 1);
    let asked = items.iter().rposition(|i| matches!(i, Item::User(_)));
    let prompt = match asked.map(|p| &items[p]) {
        Some(Item::User(text)) => text.as_str(),
        _ => "",
    };
    match items.last() {
        Some(Item::Result(_)) => {
            let results: Vec<&str> = items[asked.map_or(0, |p| p + 1)..]
                .iter()
                .filter_map(|i| match i {
                    Item::Result(r) => Some(r.as_str()),
                    _ => None,
                })
                .collect();
            let repeats: usize = REPEATS
                .captures(prompt)
                .map_or(1, |c| c[1].parse().unwrap_or(1));
            if results.len() < repeats
                && let Some(c) = SECRET_PATH.captures(prompt)
                && let Some((name, arguments)) = read_call(&tools, &c[1])
            {
                return call(wire, body, &id, &name, &arguments, tokens);
            }
            let text = match results.iter().find_map(|r| SECRET.captures(r)) {
                Some(c) => format!("The secret number is {}.", &c[1]),
                None => "The tool did not show me the number.".to_owned(),
            };
            say(wire, body, &text, tokens)
        }
        Some(Item::User(text)) => {
            let path = SECRET_PATH.captures(text).map(|c| c[1].to_owned());
            if let Some(path) = &path
                && delegating
                && text.contains("delegate")
                && let Some((name, arguments)) = delegate_call(&tools, path)
            {
                return call(wire, body, &id, &name, &arguments, tokens);
            }
            if let Some(path) = path
                && let Some((name, arguments)) = read_call(&tools, &path)
            {
                return call(wire, body, &id, &name, &arguments, tokens);
            }
            let earlier = items.iter().rev().find_map(|i| match i {
                Item::Assistant(t) => SECRET.captures(t).map(|c| c[1].to_owned()),
                _ => None,
            });
            let text = match earlier {
                Some(n) => format!("As I said, the secret number is {n}."),
                None => "I know of no number.".to_owned(),
            };
            say(wire, body, &text, tokens)
        }
        _ => say(wire, body, "Nothing to answer.", tokens),
    }
}

/// The names of the function tools a request declares (namespaced ones included).
pub fn tool_names(body: &Value) -> Vec<String> {
    fn collect(tools: &Value, out: &mut Vec<String>) {
        for tool in tools.as_array().into_iter().flatten() {
            if let Some(inner) = tool.get("tools") {
                collect(inner, out);
            } else if let Some(name) = tool["name"]
                .as_str()
                .or_else(|| tool["function"]["name"].as_str())
            {
                out.push(name.to_owned());
            }
        }
    }
    let mut out = Vec::new();
    collect(&body["tools"], &mut out);
    out
}

/// The conversation a request carries, in order (system and developer text left out).
pub fn conversation(wire: Wire, body: &Value) -> Vec<Item> {
    let mut items = Vec::new();
    match wire {
        Wire::Anthropic => {
            for m in body["messages"].as_array().into_iter().flatten() {
                let role = m["role"].as_str().unwrap_or_default();
                for block in blocks(&m["content"]) {
                    match (role, block["type"].as_str().unwrap_or_default()) {
                        ("user", "text") => items.push(Item::User(text_of(&block))),
                        ("user", "tool_result") => {
                            items.push(Item::Result(text_of(&block["content"])))
                        }
                        ("assistant", "text") => items.push(Item::Assistant(text_of(&block))),
                        ("assistant", "tool_use") => items.push(Item::Call(
                            block["name"].as_str().unwrap_or_default().into(),
                        )),
                        _ => {}
                    }
                }
            }
        }
        Wire::Chat => {
            for m in body["messages"].as_array().into_iter().flatten() {
                match m["role"].as_str().unwrap_or_default() {
                    "user" => items.push(Item::User(text_of(&m["content"]))),
                    "tool" => items.push(Item::Result(text_of(&m["content"]))),
                    "assistant" => {
                        let text = text_of(&m["content"]);
                        if !text.is_empty() {
                            items.push(Item::Assistant(text));
                        }
                        for c in m["tool_calls"].as_array().into_iter().flatten() {
                            let name = c["function"]["name"].as_str().unwrap_or_default();
                            items.push(Item::Call(name.into()));
                        }
                    }
                    _ => {}
                }
            }
        }
        Wire::Responses => {
            let input = match &body["input"] {
                Value::String(s) => vec![json!({"type": "message", "role": "user", "content": s})],
                Value::Array(a) => a.clone(),
                _ => Vec::new(),
            };
            for item in input {
                match (
                    item["type"].as_str().unwrap_or("message"),
                    item["role"].as_str().unwrap_or_default(),
                ) {
                    ("message", "user") => items.push(Item::User(text_of(&item["content"]))),
                    ("message", "assistant") => {
                        items.push(Item::Assistant(text_of(&item["content"])))
                    }
                    ("function_call" | "custom_tool_call", _) => {
                        items.push(Item::Call(item["name"].as_str().unwrap_or_default().into()))
                    }
                    ("function_call_output" | "custom_tool_call_output", _) => {
                        items.push(Item::Result(text_of(&item["output"])))
                    }
                    _ => {}
                }
            }
        }
    }
    items
}

/// A content value as a list of blocks (a string is one text block).
fn blocks(content: &Value) -> Vec<Value> {
    match content {
        Value::String(s) => vec![json!({"type": "text", "text": s})],
        Value::Array(a) => a.clone(),
        _ => Vec::new(),
    }
}

/// All the text in a content value: a string, or the `text` of its blocks and parts, joined.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(text_of).collect::<Vec<_>>().join("\n"),
        Value::Object(o) => o
            .get("text")
            .or_else(|| o.get("content"))
            .or_else(|| o.get("output"))
            .map(text_of)
            .unwrap_or_default(),
        _ => String::new(),
    }
}

/// The call that reads `path` with the first of the agent's read or shell tools it declares.
fn read_call(tools: &[String], path: &str) -> Option<(String, Value)> {
    let has = |n: &str| tools.iter().any(|t| t == n);
    let cat = format!("cat {path}");
    let (name, arguments) = if has("Read") {
        ("Read", json!({"file_path": path}))
    } else if has("read") {
        ("read", json!({"path": path}))
    } else if has("exec_command") {
        ("exec_command", json!({"cmd": cat}))
    } else if has("shell_command") {
        ("shell_command", json!({"command": cat}))
    } else if has("shell") {
        ("shell", json!({"command": ["cat", path]}))
    } else if has("Bash") {
        ("Bash", json!({"command": cat}))
    } else if has("bash") {
        ("bash", json!({"command": cat}))
    } else {
        return None;
    };
    Some((name.to_owned(), arguments))
}

/// The call that hands the reading of `path` to a sub-agent, with the agent's sub-agent tool.
fn delegate_call(tools: &[String], path: &str) -> Option<(String, Value)> {
    let name = ["Agent", "Task"]
        .into_iter()
        .find(|n| tools.iter().any(|t| t == n))?;
    Some((
        name.to_owned(),
        json!({
            "description": "Read the secret file",
            "prompt": format!("Read {path} and say the number in it."),
            "subagent_type": "general-purpose",
        }),
    ))
}

/// A text answer on `wire`.
fn say(wire: Wire, body: &Value, text: &str, tokens: u64) -> Reply {
    match wire {
        Wire::Anthropic => anthropic_text_stream(text, tokens, 8),
        Wire::Chat => chat_stream(
            body,
            json!({"role": "assistant", "content": text}),
            "stop",
            tokens,
        ),
        Wire::Responses => responses_stream(
            body,
            json!({"type": "message", "id": "msg_loop", "role": "assistant", "status": "completed",
                   "content": [{"type": "output_text", "text": text, "annotations": []}]}),
            tokens,
        ),
    }
}

/// A tool call on `wire`.
fn call(wire: Wire, body: &Value, id: &str, name: &str, arguments: &Value, tokens: u64) -> Reply {
    let arguments = arguments.to_string();
    match wire {
        Wire::Anthropic => {
            let mut events = vec![
                (
                    "message_start",
                    json!({"type": "message_start", "message": {
                        "id": "msg_loop", "type": "message", "role": "assistant",
                        "model": body["model"], "content": [], "stop_reason": null,
                        "stop_sequence": null, "usage": {"input_tokens": tokens, "output_tokens": 1}}}),
                ),
                (
                    "content_block_start",
                    json!({"type": "content_block_start", "index": 0,
                           "content_block": {"type": "tool_use", "id": id.replace("call_", "toolu_"),
                                             "name": name, "input": {}}}),
                ),
            ];
            events.push((
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                       "delta": {"type": "input_json_delta", "partial_json": arguments}}),
            ));
            events.push((
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ));
            events.push((
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null},
                       "usage": {"output_tokens": 12}}),
            ));
            events.push(("message_stop", json!({"type": "message_stop"})));
            anthropic_stream(events)
        }
        Wire::Chat => chat_stream(
            body,
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"index": 0, "id": id, "type": "function",
                 "function": {"name": name, "arguments": arguments}}]}),
            "tool_calls",
            tokens,
        ),
        Wire::Responses => responses_stream(
            body,
            json!({"type": "function_call", "id": format!("fc_{id}"), "call_id": id,
                   "name": name, "arguments": arguments, "status": "completed"}),
            tokens,
        ),
    }
}

/// A chat-completions stream: `delta` in one chunk, the finish reason, then usage.
fn chat_stream(body: &Value, delta: Value, finish: &str, tokens: u64) -> Reply {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-loop", "object": "chat.completion.chunk", "model": body["model"],
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    openai_stream(vec![
        chunk(delta, Value::Null),
        chunk(json!({}), json!(finish)),
        json!({"id": "chatcmpl-loop", "object": "chat.completion.chunk", "model": body["model"],
               "choices": [],
               "usage": {"prompt_tokens": tokens, "completion_tokens": 12,
                         "total_tokens": tokens + 12}}),
    ])
}

/// A Responses stream of one output `item`: created, item added, (text delta), item done,
/// completed with usage; each event named by its type, as OpenAI sends them.
fn responses_stream(body: &Value, item: Value, tokens: u64) -> Reply {
    let response = |status: &str, output: Value| {
        json!({"id": "resp_loop", "object": "response", "status": status, "model": body["model"],
               "output": output,
               "usage": {"input_tokens": tokens, "input_tokens_details": {"cached_tokens": 0},
                         "output_tokens": 12, "output_tokens_details": {"reasoning_tokens": 0},
                         "total_tokens": tokens + 12}})
    };
    let mut events = vec![
        json!({"type": "response.created", "response": response("in_progress", json!([]))}),
        json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
    ];
    if let Some(text) = item["content"][0]["text"].as_str() {
        events.push(
            json!({"type": "response.output_text.delta", "output_index": 0,
                           "content_index": 0, "item_id": item["id"], "delta": text}),
        );
    }
    events.push(json!({"type": "response.output_item.done", "output_index": 0, "item": item}));
    events.push(
        json!({"type": "response.completed", "response": response("completed", json!([item]))}),
    );
    Reply::sse(
        events
            .into_iter()
            .map(|e| {
                format!(
                    "event: {}\ndata: {e}",
                    e["type"].as_str().unwrap_or_default()
                )
            })
            .collect(),
    )
}
