//! The Runner's answer, and errors, written in the client's own wire: a JSON response, or the
//! event sequence of a stream.
//!
//! A stream is written as the upstream's pieces arrive ([`StreamEncoder`]), when the upstream
//! streams; otherwise (a server that answers streamed requests with whole JSON) it is made
//! from the whole answer at the end ([`openai_sse`], [`anthropic_sse`]).

use std::collections::BTreeMap;

use rampart_message::{AssistantMessage, ContentBlock, StopReason, Usage};
use serde_json::{Value, json};

use super::inbound::Wire;
use crate::providers::StreamDelta;
use crate::providers::anthropic::assistant_blocks;
use crate::providers::openai::wire::to_openai_message;
use crate::providers::responses::opaque::opaque_item;

/// The answer's identity in the client's wire.
#[derive(Debug, Clone)]
pub struct AnswerMeta<'a> {
    /// `chatcmpl-…` or `msg_…`.
    pub id: &'a str,
    /// The model the client named.
    pub model: &'a str,
    /// Unix seconds.
    pub created: u64,
    /// What a Responses answer repeats of its request; `None` for the other wires (and a
    /// Responses answer then states OpenAI's defaults).
    pub echo: Option<&'a ResponsesEcho>,
}

/// What a Responses answer repeats of its request. OpenAI's `Response` object requires
/// `instructions`, `tools`, `tool_choice`, `temperature`, `top_p`, `metadata` and
/// `parallel_tool_calls`, in every shell of a stream too, and clients generated from its
/// specification fail on an object without them. Each is the value the client sent, or
/// OpenAI's documented default when it sent none (or `null`).
#[derive(Debug, Clone, PartialEq)]
pub struct ResponsesEcho {
    fields: [(&'static str, Value); 7],
}

impl Default for ResponsesEcho {
    fn default() -> Self {
        Self {
            fields: [
                ("instructions", Value::Null),
                ("tools", json!([])),
                ("tool_choice", json!("auto")),
                ("temperature", json!(1.0)),
                ("top_p", json!(1.0)),
                ("metadata", json!({})),
                ("parallel_tool_calls", json!(true)),
            ],
        }
    }
}

impl ResponsesEcho {
    /// The echo of a Responses request body, as the client sent it (before it is read as a
    /// chat request). A field of the wrong type is refused naming it: echoed, it would make
    /// the answer itself break OpenAI's schema.
    pub fn of_request(body: &Value) -> Result<Self, String> {
        let mut echo = Self::default();
        for (key, value) in &mut echo.fields {
            let Some(sent) = body.get(*key).filter(|v| !v.is_null()) else {
                continue;
            };
            let fits = match *key {
                "instructions" => {
                    sent.is_string()
                        || sent
                            .as_array()
                            .is_some_and(|a| a.iter().all(Value::is_object))
                }
                "tools" => sent.is_array(),
                "tool_choice" => sent.is_string() || sent.is_object(),
                "temperature" => sent.as_f64().is_some_and(|t| (0.0..=2.0).contains(&t)),
                "top_p" => sent.as_f64().is_some_and(|p| (0.0..=1.0).contains(&p)),
                "metadata" => sent
                    .as_object()
                    .is_some_and(|m| m.values().all(Value::is_string)),
                _ => sent.is_boolean(),
            };
            if !fits {
                let want = match *key {
                    "instructions" => "a string or an array of input items (objects)",
                    "tools" => "an array of tools",
                    "tool_choice" => "\"none\", \"auto\", \"required\" or a tool choice object",
                    "temperature" => "a number from 0 to 2",
                    "top_p" => "a number from 0 to 1",
                    "metadata" => "an object whose values are strings",
                    _ => "true or false",
                };
                return Err(format!("`{key}` must be {want}; found {sent}"));
            }
            *value = sent.clone();
        }
        Ok(echo)
    }

    /// Writes the echoed fields into a Response object.
    fn write(&self, response: &mut Value) {
        for (key, value) in &self.fields {
            response[*key] = value.clone();
        }
    }
}

fn openai_finish(reason: &StopReason) -> &'static str {
    match reason {
        StopReason::Length => "length",
        StopReason::ToolUse => "tool_calls",
        _ => "stop",
    }
}

fn anthropic_stop(reason: &StopReason) -> &'static str {
    match reason {
        StopReason::Length => "max_tokens",
        StopReason::ToolUse => "tool_use",
        _ => "end_turn",
    }
}

fn openai_usage(u: &Usage) -> Value {
    let prompt = u.input + u.cache_read + u.cache_write;
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": u.output,
        "total_tokens": prompt + u.output,
        "prompt_tokens_details": {"cached_tokens": u.cache_read},
    })
}

fn anthropic_usage(u: &Usage) -> Value {
    json!({
        "input_tokens": u.input,
        "output_tokens": u.output,
        "cache_read_input_tokens": u.cache_read,
        "cache_creation_input_tokens": u.cache_write,
    })
}

/// The texts of an answer's text blocks, in order (joined with newlines in every wire).
fn text_blocks(reply: &AssistantMessage) -> Vec<&str> {
    reply
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect()
}

/// The OpenAI message of an answer, as a response carries it (no `reasoning_content`, which
/// few clients read back correctly).
fn openai_message(reply: &AssistantMessage) -> Value {
    let mut message = to_openai_message(&rampart_message::AgentMessage::Assistant(reply.clone()));
    if let Some(map) = message.as_object_mut() {
        map.remove("reasoning_content");
        // Required by OpenAI's schema, null when the model did not refuse.
        map.entry("refusal").or_insert(Value::Null);
    }
    message
}

/// A whole chat-completions response.
pub fn openai_response(reply: &AssistantMessage, meta: &AnswerMeta<'_>) -> Value {
    json!({
        "id": meta.id,
        "object": "chat.completion",
        "created": meta.created,
        "model": meta.model,
        "choices": [{
            "index": 0,
            "message": openai_message(reply),
            "logprobs": null,
            "finish_reason": openai_finish(&reply.stop_reason),
        }],
        "usage": openai_usage(&reply.usage),
    })
}

/// The chunks of a streamed chat-completions response, each a whole SSE frame, ending with
/// `[DONE]`; with `include_usage`, a last chunk with empty choices carries the usage.
pub fn openai_sse(
    reply: &AssistantMessage,
    meta: &AnswerMeta<'_>,
    include_usage: bool,
) -> Vec<String> {
    let chunk = |choices: Value| {
        json!({
            "id": meta.id,
            "object": "chat.completion.chunk",
            "created": meta.created,
            "model": meta.model,
            "choices": choices,
        })
    };
    let mut frames = Vec::new();
    let text = text_blocks(reply);
    let mut first = json!({"role": "assistant", "content": ""});
    if !text.is_empty() {
        first["content"] = json!(text.join("\n"));
    }
    frames.push(chunk(
        json!([{"index": 0, "delta": first, "finish_reason": null}]),
    ));
    let calls = reply.content.iter().filter_map(|b| match b {
        ContentBlock::ToolCall(c) => Some(c),
        _ => None,
    });
    for (index, call) in calls.enumerate() {
        frames.push(chunk(json!([{
            "index": 0,
            "delta": {"tool_calls": [{
                "index": index,
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments.to_string()},
            }]},
            "finish_reason": null,
        }])));
    }
    frames.push(chunk(json!([{
        "index": 0,
        "delta": {},
        "finish_reason": openai_finish(&reply.stop_reason),
    }])));
    if include_usage {
        let mut last = chunk(json!([]));
        last["usage"] = openai_usage(&reply.usage);
        frames.push(last);
    }
    let mut out: Vec<String> = frames.iter().map(|f| format!("data: {f}\n\n")).collect();
    out.push("data: [DONE]\n\n".to_owned());
    out
}

/// A whole Anthropic messages response.
pub fn anthropic_response(reply: &AssistantMessage, meta: &AnswerMeta<'_>) -> Value {
    json!({
        "id": meta.id,
        "type": "message",
        "role": "assistant",
        "model": meta.model,
        "content": assistant_blocks(reply),
        "stop_reason": anthropic_stop(&reply.stop_reason),
        "stop_sequence": null,
        "usage": anthropic_usage(&reply.usage),
    })
}

/// The events of a streamed Anthropic response, each a whole SSE frame: `message_start`, per
/// block a start, one delta and a stop, `message_delta` with the stop reason, `message_stop`.
pub fn anthropic_sse(reply: &AssistantMessage, meta: &AnswerMeta<'_>) -> Vec<String> {
    let mut events: Vec<(&str, Value)> = Vec::new();
    let mut usage = anthropic_usage(&reply.usage);
    usage["output_tokens"] = json!(0);
    events.push((
        "message_start",
        json!({"type": "message_start", "message": {
            "id": meta.id, "type": "message", "role": "assistant", "model": meta.model,
            "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage,
        }}),
    ));
    for (index, block) in assistant_blocks(reply).into_iter().enumerate() {
        let kind = block["type"].as_str().unwrap_or_default().to_owned();
        let (start, deltas): (Value, Vec<Value>) = match kind.as_str() {
            "text" => (
                json!({"type": "text", "text": ""}),
                vec![json!({"type": "text_delta", "text": block["text"]})],
            ),
            "tool_use" => (
                json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                vec![
                    json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
                ],
            ),
            "thinking" => (
                json!({"type": "thinking", "thinking": ""}),
                vec![
                    json!({"type": "thinking_delta", "thinking": block["thinking"]}),
                    json!({"type": "signature_delta", "signature": block["signature"]}),
                ],
            ),
            _ => (block.clone(), Vec::new()),
        };
        events.push((
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        for delta in deltas {
            events.push((
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
        }
        events.push((
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
    }
    events.push((
        "message_delta",
        json!({"type": "message_delta",
               "delta": {"stop_reason": anthropic_stop(&reply.stop_reason), "stop_sequence": null},
               "usage": {"output_tokens": reply.usage.output}}),
    ));
    events.push(("message_stop", json!({"type": "message_stop"})));
    events
        .into_iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect()
}

fn responses_usage(u: &Usage) -> Value {
    let input = u.input + u.cache_read + u.cache_write;
    json!({
        "input_tokens": input,
        "input_tokens_details": {"cached_tokens": u.cache_read, "cache_write_tokens": u.cache_write},
        "output_tokens": u.output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input + u.output,
    })
}

/// A Responses `message` item holding `text`.
fn responses_message_item(id: &str, text: &str, status: &str) -> Value {
    json!({
        "type": "message", "id": id, "status": status, "role": "assistant",
        "content": [output_text_part(text)],
    })
}

/// An `output_text` content part; `logprobs` is required and empty (serve asks for none).
fn output_text_part(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
}

/// A Responses `function_call` item.
fn responses_call_item(
    id: &str,
    call_id: &str,
    name: &str,
    arguments: &str,
    status: &str,
) -> Value {
    json!({
        "type": "function_call", "id": id, "call_id": call_id, "name": name,
        "arguments": arguments, "status": status,
    })
}

/// The output items of a whole answer, in its order: its text as one message item (where its
/// first text stands), one `function_call` item per tool call, and each opaque item a
/// Responses upstream produced (reasoning, built-in and custom tool calls) as it was.
fn responses_items(reply: &AssistantMessage, response_id: &str) -> Vec<Value> {
    let mut items = Vec::new();
    let text = text_blocks(reply);
    let mut text_written = false;
    for block in &reply.content {
        if let Some(item) = opaque_item(block) {
            items.push(item.clone());
            continue;
        }
        if matches!(block, ContentBlock::Text(_)) && !text_written {
            text_written = true;
            let id =
                upstream_id(block).unwrap_or_else(|| format!("msg_{response_id}_{}", items.len()));
            items.push(responses_message_item(&id, &text.join("\n"), "completed"));
        }
        if let ContentBlock::ToolCall(call) = block {
            let id =
                upstream_id(block).unwrap_or_else(|| format!("fc_{response_id}_{}", items.len()));
            let arguments = call.arguments.to_string();
            items.push(responses_call_item(
                &id,
                &call.id,
                &call.name,
                &arguments,
                "completed",
            ));
        }
    }
    items
}

/// The id a Responses upstream gave the item a block came from (kept in its template,
/// [`crate::providers::responses::template`]).
fn upstream_id(block: &ContentBlock) -> Option<String> {
    crate::providers::responses::template::block_template(block)
        .and_then(|t| t.get("id"))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// A Responses object around `output`: `completed`, or `incomplete` when the answer stopped
/// at its token limit.
fn responses_object(reply: &AssistantMessage, meta: &AnswerMeta<'_>, output: Vec<Value>) -> Value {
    let cut = reply.stop_reason == StopReason::Length;
    let mut response = json!({
        "id": meta.id,
        "object": "response",
        "created_at": meta.created,
        "status": if cut { "incomplete" } else { "completed" },
        "incomplete_details": if cut { json!({"reason": "max_output_tokens"}) } else { Value::Null },
        "error": null,
        "model": meta.model,
        "output": output,
        "usage": responses_usage(&reply.usage),
    });
    match meta.echo {
        Some(echo) => echo.write(&mut response),
        None => ResponsesEcho::default().write(&mut response),
    }
    response
}

/// A whole Responses API response.
pub fn responses_response(reply: &AssistantMessage, meta: &AnswerMeta<'_>) -> Value {
    responses_object(reply, meta, responses_items(reply, meta.id))
}

/// The events of a streamed Responses answer made from the whole answer.
pub fn responses_sse(reply: &AssistantMessage, meta: &AnswerMeta<'_>) -> Vec<String> {
    let mut stream = ResponsesStream::new(meta);
    let mut out = stream.begin();
    for block in &reply.content {
        if let Some(item) = opaque_item(block) {
            out.extend(stream.item(item));
            continue;
        }
        match block {
            ContentBlock::Text(t) => {
                // Only a text that starts a message item names it.
                if stream.text_item.is_none()
                    && let Some(id) = upstream_id(block)
                {
                    stream.upstream_ids.insert(0, id);
                }
                out.extend(stream.text(0, &t.text));
            }
            ContentBlock::ToolCall(call) => {
                let index = stream.items.len() as u64;
                if let Some(id) = upstream_id(block) {
                    stream.upstream_ids.insert(index, id);
                }
                out.extend(stream.call_start(index, &call.id, &call.name));
                out.extend(stream.call_arguments(index, &call.arguments.to_string()));
            }
            _ => {}
        }
    }
    out.extend(stream.finish(reply));
    out
}

/// The Responses API stream: `response.created`, per output item `output_item.added`, its
/// deltas and `output_item.done`, then `response.completed` with the items as streamed. Every
/// event carries its `sequence_number`.
#[derive(Debug)]
struct ResponsesStream {
    id: String,
    model: String,
    created: u64,
    echo: ResponsesEcho,
    sequence: u64,
    /// Output items so far (their final form once done).
    items: Vec<ResponsesItem>,
    /// The message item text goes to, while no other item has started since.
    text_item: Option<usize>,
    /// Upstream tool-call index → output index.
    calls: BTreeMap<u64, usize>,
    /// The ids a Responses upstream gave the items it started, by its output index
    /// ([`StreamDelta::ItemId`]): the client's items take them, so the ids it sends back are
    /// the upstream's. Items without one get ids of serve's making.
    upstream_ids: BTreeMap<u64, String>,
}

#[derive(Debug)]
enum ResponsesItem {
    Text {
        id: String,
        text: String,
        done: bool,
    },
    Call {
        id: String,
        call_id: String,
        name: String,
        arguments: String,
        done: bool,
    },
    /// An item passed on whole, as the upstream finished it.
    Opaque(Value),
}

impl ResponsesStream {
    fn new(meta: &AnswerMeta<'_>) -> Self {
        Self {
            id: meta.id.to_owned(),
            model: meta.model.to_owned(),
            created: meta.created,
            echo: meta.echo.cloned().unwrap_or_default(),
            sequence: 0,
            items: Vec::new(),
            text_item: None,
            calls: BTreeMap::new(),
            upstream_ids: BTreeMap::new(),
        }
    }

    fn event(&mut self, kind: &str, mut data: Value) -> String {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        format!("event: {kind}\ndata: {data}\n\n")
    }

    fn shell(&self, status: &str) -> Value {
        let mut shell = json!({
            "id": self.id, "object": "response", "created_at": self.created, "status": status,
            "model": self.model, "output": [], "error": null, "incomplete_details": null,
        });
        self.echo.write(&mut shell);
        shell
    }

    fn begin(&mut self) -> Vec<String> {
        let created = self.shell("in_progress");
        vec![
            self.event("response.created", json!({"response": created.clone()})),
            self.event("response.in_progress", json!({"response": created})),
        ]
    }

    fn text(&mut self, block: u64, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let index = match self.text_item {
            Some(index) => index,
            None => {
                let index = self.items.len();
                let id = self
                    .upstream_ids
                    .remove(&block)
                    .unwrap_or_else(|| format!("msg_{}_{index}", self.id));
                out.push(self.event(
                    "response.output_item.added",
                    json!({"output_index": index,
                           "item": {"type": "message", "id": id, "status": "in_progress",
                                    "role": "assistant", "content": []}}),
                ));
                out.push(self.event(
                    "response.content_part.added",
                    json!({"item_id": id, "output_index": index, "content_index": 0,
                           "part": output_text_part("")}),
                ));
                self.items.push(ResponsesItem::Text {
                    id,
                    text: String::new(),
                    done: false,
                });
                self.text_item = Some(index);
                index
            }
        };
        let Some(ResponsesItem::Text {
            id, text: so_far, ..
        }) = self.items.get_mut(index)
        else {
            return out;
        };
        so_far.push_str(text);
        let id = id.clone();
        out.push(self.event(
            "response.output_text.delta",
            json!({"item_id": id, "output_index": index, "content_index": 0, "delta": text,
                   "logprobs": []}),
        ));
        out
    }

    fn call_start(&mut self, upstream: u64, call_id: &str, name: &str) -> Vec<String> {
        // Text after a tool call starts a new message item.
        let mut out = self.close_text();
        let index = self.items.len();
        let id = self
            .upstream_ids
            .remove(&upstream)
            .unwrap_or_else(|| format!("fc_{}_{index}", self.id));
        out.push(self.event(
            "response.output_item.added",
            json!({"output_index": index,
                   "item": responses_call_item(&id, call_id, name, "", "in_progress")}),
        ));
        self.items.push(ResponsesItem::Call {
            id,
            call_id: call_id.to_owned(),
            name: name.to_owned(),
            arguments: String::new(),
            done: false,
        });
        self.calls.insert(upstream, index);
        out
    }

    /// A whole item the upstream finished (reasoning, a built-in or custom tool call): added
    /// and done at once, unchanged, so the client keeps it to send back.
    fn item(&mut self, item: &Value) -> Vec<String> {
        let mut out = self.close_text();
        let index = self.items.len();
        out.push(self.event(
            "response.output_item.added",
            json!({"output_index": index, "item": item}),
        ));
        out.push(self.event(
            "response.output_item.done",
            json!({"output_index": index, "item": item}),
        ));
        self.items.push(ResponsesItem::Opaque(item.clone()));
        out
    }

    fn call_arguments(&mut self, upstream: u64, fragment: &str) -> Vec<String> {
        let Some(&index) = self.calls.get(&upstream) else {
            return Vec::new();
        };
        let Some(ResponsesItem::Call { id, arguments, .. }) = self.items.get_mut(index) else {
            return Vec::new();
        };
        arguments.push_str(fragment);
        let id = id.clone();
        vec![self.event(
            "response.function_call_arguments.delta",
            json!({"item_id": id, "output_index": index, "delta": fragment}),
        )]
    }

    fn close_text(&mut self) -> Vec<String> {
        match self.text_item.take() {
            Some(index) => self.close(index),
            None => Vec::new(),
        }
    }

    /// The `done` events of item `index`, once.
    fn close(&mut self, index: usize) -> Vec<String> {
        let (events, item): (Vec<(&str, Value)>, Value) = match self.items.get_mut(index) {
            Some(ResponsesItem::Text { id, text, done }) if !*done => {
                *done = true;
                let part = output_text_part(text);
                (
                    vec![
                        (
                            "response.output_text.done",
                            json!({"item_id": id, "output_index": index, "content_index": 0,
                                   "text": text, "logprobs": []}),
                        ),
                        (
                            "response.content_part.done",
                            json!({"item_id": id, "output_index": index, "content_index": 0, "part": part}),
                        ),
                    ],
                    responses_message_item(id, text, "completed"),
                )
            }
            Some(ResponsesItem::Call {
                id,
                call_id,
                name,
                arguments,
                done,
            }) if !*done => {
                *done = true;
                (
                    vec![(
                        "response.function_call_arguments.done",
                        json!({"item_id": id, "output_index": index, "name": name,
                               "arguments": arguments}),
                    )],
                    responses_call_item(id, call_id, name, arguments, "completed"),
                )
            }
            _ => return Vec::new(),
        };
        let mut out: Vec<String> = events.into_iter().map(|(k, d)| self.event(k, d)).collect();
        out.push(self.event(
            "response.output_item.done",
            json!({"output_index": index, "item": item}),
        ));
        out
    }

    fn final_items(&self) -> Vec<Value> {
        self.items
            .iter()
            .map(|item| match item {
                ResponsesItem::Text { id, text, .. } => {
                    responses_message_item(id, text, "completed")
                }
                ResponsesItem::Call {
                    id,
                    call_id,
                    name,
                    arguments,
                    ..
                } => responses_call_item(id, call_id, name, arguments, "completed"),
                ResponsesItem::Opaque(item) => item.clone(),
            })
            .collect()
    }

    fn finish(&mut self, reply: &AssistantMessage) -> Vec<String> {
        let mut out = Vec::new();
        for index in 0..self.items.len() {
            out.extend(self.close(index));
        }
        let echo = self.echo.clone();
        let meta = AnswerMeta {
            id: &self.id.clone(),
            model: &self.model.clone(),
            created: self.created,
            echo: Some(&echo),
        };
        let response = responses_object(reply, &meta, self.final_items());
        let kind = if reply.stop_reason == StopReason::Length {
            "response.incomplete"
        } else {
            "response.completed"
        };
        out.push(self.event(kind, json!({"response": response})));
        out
    }

    fn fail(&mut self, kind: ErrorKind, message: &str) -> Vec<String> {
        let mut response = self.shell("failed");
        response["error"] = json!({"code": responses_error_code(kind), "message": message});
        vec![self.event("response.failed", json!({"response": response}))]
    }
}

fn responses_error_code(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::InvalidRequest => "invalid_request_error",
        ErrorKind::Authentication => "invalid_api_key",
        ErrorKind::RateLimit | ErrorKind::Overloaded => "rate_limit_exceeded",
        ErrorKind::Upstream | ErrorKind::Server => "server_error",
        ErrorKind::Forbidden => "forbidden",
    }
}

/// Writes a streamed answer in the client's wire as its pieces arrive: [`StreamEncoder::begin`],
/// then [`StreamEncoder::delta`] per piece, then [`StreamEncoder::finish`] with the answer as
/// stored (its stop reason and usage) or [`StreamEncoder::fail`]. Each call returns whole SSE
/// frames.
///
/// A new attempt after content was already sent (the upstream stream broke and was retried, or
/// overflowed mid-stream and was compacted) cannot be taken back: the stream then ends with an
/// error event, and the answer the turn stores is the retried one.
#[derive(Debug)]
pub struct StreamEncoder {
    wire: Wire,
    id: String,
    model: String,
    created: u64,
    include_usage: bool,
    /// Anthropic: the block open now, by our index, and what it holds.
    open: Option<(u64, Open)>,
    /// Anthropic: the next block index; OpenAI: unused.
    next_block: u64,
    /// The upstream block of the last text piece (a new one starts a new text block).
    text_block: Option<u64>,
    /// Upstream tool-call index → ours (OpenAI tool index, or Anthropic block index).
    calls: BTreeMap<u64, u64>,
    started: bool,
    broken: bool,
    /// The Responses wire's own event sequence.
    responses: Option<ResponsesStream>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    Tool(u64),
}

impl StreamEncoder {
    /// An encoder for one answer.
    pub fn new(wire: Wire, meta: &AnswerMeta<'_>, include_usage: bool) -> Self {
        Self {
            wire,
            id: meta.id.to_owned(),
            model: meta.model.to_owned(),
            created: meta.created,
            include_usage,
            open: None,
            next_block: 0,
            text_block: None,
            calls: BTreeMap::new(),
            started: false,
            broken: false,
            responses: (wire == Wire::Responses).then(|| ResponsesStream::new(meta)),
        }
    }

    fn openai_chunk(&self, delta: Value, finish: Option<&str>) -> String {
        let chunk = json!({
            "id": self.id, "object": "chat.completion.chunk", "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        });
        format!("data: {chunk}\n\n")
    }

    fn event(name: &str, data: Value) -> String {
        format!("event: {name}\ndata: {data}\n\n")
    }

    /// The frames that open the answer.
    pub fn begin(&mut self) -> Vec<String> {
        if let Some(stream) = &mut self.responses {
            return stream.begin();
        }
        match self.wire {
            Wire::OpenAi | Wire::Responses => {
                vec![self.openai_chunk(json!({"role": "assistant", "content": ""}), None)]
            }
            Wire::Anthropic => vec![Self::event(
                "message_start",
                json!({"type": "message_start", "message": {
                    "id": self.id, "type": "message", "role": "assistant", "model": self.model,
                    "content": [], "stop_reason": null, "stop_sequence": null,
                    "usage": {"input_tokens": 0, "output_tokens": 0},
                }}),
            )],
        }
    }

    fn close_block(&mut self) -> Vec<String> {
        match self.open.take() {
            Some((index, _)) => vec![Self::event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            )],
            None => Vec::new(),
        }
    }

    fn open_block(&mut self, what: Open, block: Value) -> Vec<String> {
        let mut out = self.close_block();
        let index = self.next_block;
        self.next_block += 1;
        self.open = Some((index, what));
        out.push(Self::event(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": block}),
        ));
        out
    }

    /// The frames for one piece.
    pub fn delta(&mut self, delta: &StreamDelta) -> Vec<String> {
        if self.broken {
            return Vec::new();
        }
        match delta {
            StreamDelta::Attempt if self.started => {
                let out = self.fail(
                    ErrorKind::Upstream,
                    "the model's answer broke off and was retried after part of it was sent; \
                     send the request again to get the whole answer",
                );
                self.broken = true;
                out
            }
            StreamDelta::Attempt => Vec::new(),
            _ if self.responses.is_some() => {
                self.started = true;
                let Some(stream) = &mut self.responses else {
                    return Vec::new();
                };
                match delta {
                    StreamDelta::Text { block, text } => stream.text(*block, text),
                    StreamDelta::ToolCallStart { index, id, name } => {
                        stream.call_start(*index, id, name)
                    }
                    StreamDelta::ToolCallArguments { index, fragment } => {
                        stream.call_arguments(*index, fragment)
                    }
                    StreamDelta::Item { item, .. } => stream.item(item),
                    StreamDelta::ItemId { index, id } => {
                        stream.upstream_ids.insert(*index, id.clone());
                        Vec::new()
                    }
                    StreamDelta::Attempt => Vec::new(),
                }
            }
            // Chat completions and Anthropic have no form for a Responses item, nor use for
            // its id.
            StreamDelta::Item { .. } | StreamDelta::ItemId { .. } => Vec::new(),
            StreamDelta::Text { block, text } => {
                self.started = true;
                let new_block = self.text_block != Some(*block);
                let first_text = self.text_block.is_none();
                self.text_block = Some(*block);
                match self.wire {
                    Wire::OpenAi | Wire::Responses => {
                        // Text blocks are joined with a newline, as the whole answer is.
                        let text = if new_block && !first_text {
                            format!("\n{text}")
                        } else {
                            text.clone()
                        };
                        vec![self.openai_chunk(json!({"content": text}), None)]
                    }
                    Wire::Anthropic => {
                        let mut out = Vec::new();
                        if new_block || !matches!(self.open, Some((_, Open::Text))) {
                            out = self.open_block(Open::Text, json!({"type": "text", "text": ""}));
                        }
                        if let Some((index, _)) = self.open {
                            out.push(Self::event(
                                "content_block_delta",
                                json!({"type": "content_block_delta", "index": index,
                                       "delta": {"type": "text_delta", "text": text}}),
                            ));
                        }
                        out
                    }
                }
            }
            StreamDelta::ToolCallStart { index, id, name } => {
                self.started = true;
                match self.wire {
                    Wire::OpenAi | Wire::Responses => {
                        let ours = self.calls.len() as u64;
                        self.calls.insert(*index, ours);
                        vec![self.openai_chunk(
                            json!({"tool_calls": [{"index": ours, "id": id, "type": "function",
                                                   "function": {"name": name, "arguments": ""}}]}),
                            None,
                        )]
                    }
                    Wire::Anthropic => {
                        let out = self.open_block(
                            Open::Tool(*index),
                            json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                        );
                        if let Some((ours, _)) = self.open {
                            self.calls.insert(*index, ours);
                        }
                        out
                    }
                }
            }
            StreamDelta::ToolCallArguments { index, fragment } => {
                let Some(ours) = self.calls.get(index).copied() else {
                    return Vec::new();
                };
                match self.wire {
                    Wire::OpenAi | Wire::Responses => vec![self.openai_chunk(
                        json!({"tool_calls": [{"index": ours, "function": {"arguments": fragment}}]}),
                        None,
                    )],
                    Wire::Anthropic => vec![Self::event(
                        "content_block_delta",
                        json!({"type": "content_block_delta", "index": ours,
                               "delta": {"type": "input_json_delta", "partial_json": fragment}}),
                    )],
                }
            }
        }
    }

    /// The frames that end the answer, with `reply` as stored (its stop reason and usage).
    pub fn finish(&mut self, reply: &AssistantMessage) -> Vec<String> {
        if self.broken {
            return Vec::new();
        }
        if let Some(stream) = &mut self.responses {
            return stream.finish(reply);
        }
        match self.wire {
            Wire::OpenAi | Wire::Responses => {
                let mut out =
                    vec![self.openai_chunk(json!({}), Some(openai_finish(&reply.stop_reason)))];
                if self.include_usage {
                    let chunk = json!({
                        "id": self.id, "object": "chat.completion.chunk", "created": self.created,
                        "model": self.model, "choices": [], "usage": openai_usage(&reply.usage),
                    });
                    out.push(format!("data: {chunk}\n\n"));
                }
                out.push("data: [DONE]\n\n".to_owned());
                out
            }
            Wire::Anthropic => {
                let mut out = self.close_block();
                let mut usage = anthropic_usage(&reply.usage);
                usage["output_tokens"] = json!(reply.usage.output);
                out.push(Self::event(
                    "message_delta",
                    json!({"type": "message_delta",
                           "delta": {"stop_reason": anthropic_stop(&reply.stop_reason), "stop_sequence": null},
                           "usage": usage}),
                ));
                out.push(Self::event("message_stop", json!({"type": "message_stop"})));
                out
            }
        }
    }

    /// The frames that end the answer with an error, in the wire's in-stream error form.
    pub fn fail(&mut self, kind: ErrorKind, message: &str) -> Vec<String> {
        if self.broken {
            return Vec::new();
        }
        self.broken = true;
        if let Some(stream) = &mut self.responses {
            return stream.fail(kind, message);
        }
        let body = error_body(self.wire, kind, message);
        match self.wire {
            Wire::OpenAi | Wire::Responses => {
                vec![format!("data: {body}\n\n"), "data: [DONE]\n\n".to_owned()]
            }
            Wire::Anthropic => vec![Self::event("error", body)],
        }
    }
}

/// What went wrong, in the terms both wires' error objects use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The request is wrong (bad JSON, a prompt that cannot fit).
    InvalidRequest,
    /// The key was refused.
    Authentication,
    /// Too many requests (here or upstream).
    RateLimit,
    /// The upstream failed or could not be reached.
    Upstream,
    /// Rampart itself is busy or failed (a session lock, a quarantined engine).
    Server,
    /// Overloaded: the queue is full.
    Overloaded,
    /// Refused whoever sent it: a foreign `Host` or a browser `Origin` not allowed.
    Forbidden,
}

/// An error body in `wire`'s own shape.
pub fn error_body(wire: Wire, kind: ErrorKind, message: &str) -> Value {
    match wire {
        Wire::OpenAi | Wire::Responses => {
            let (kind, code) = match kind {
                ErrorKind::InvalidRequest => ("invalid_request_error", Value::Null),
                ErrorKind::Authentication => ("authentication_error", json!("invalid_api_key")),
                ErrorKind::RateLimit | ErrorKind::Overloaded => {
                    ("rate_limit_error", json!("rate_limit_exceeded"))
                }
                ErrorKind::Upstream => ("api_error", json!("upstream_error")),
                ErrorKind::Server => ("server_error", Value::Null),
                ErrorKind::Forbidden => ("invalid_request_error", json!("forbidden")),
            };
            json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
        }
        Wire::Anthropic => {
            let kind = match kind {
                ErrorKind::InvalidRequest => "invalid_request_error",
                ErrorKind::Authentication => "authentication_error",
                ErrorKind::RateLimit => "rate_limit_error",
                ErrorKind::Upstream | ErrorKind::Server => "api_error",
                ErrorKind::Overloaded => "overloaded_error",
                ErrorKind::Forbidden => "permission_error",
            };
            json!({"type": "error", "error": {"type": kind, "message": message}})
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "outbound_tests.rs"]
mod tests;
