//! The Runner's answer, and errors, written in the client's own wire: a JSON response, or the
//! event sequence of a stream.
//!
//! The stream is made from the whole answer: the run loop returns an answer once the model has
//! finished (it needs it whole to persist it and to recover from an overflow), so a streaming
//! client gets its events at the end, in one burst, not token by token as they arrive upstream.

use rampart_message::{AssistantMessage, ContentBlock, StopReason, Usage};
use serde_json::{Value, json};

use super::inbound::Wire;
use crate::providers::anthropic::assistant_blocks;
use crate::providers::openai::wire::to_openai_message;

/// The answer's identity in the client's wire.
#[derive(Debug, Clone)]
pub struct AnswerMeta<'a> {
    /// `chatcmpl-…` or `msg_…`.
    pub id: &'a str,
    /// The model the client named.
    pub model: &'a str,
    /// Unix seconds.
    pub created: u64,
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

/// The OpenAI message of an answer, as a response carries it (no `reasoning_content`, which
/// few clients read back correctly).
fn openai_message(reply: &AssistantMessage) -> Value {
    let mut message = to_openai_message(&rampart_message::AgentMessage::Assistant(reply.clone()));
    if let Some(map) = message.as_object_mut() {
        map.remove("reasoning_content");
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
    let text: Vec<&str> = reply
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
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
}

/// An error body in `wire`'s own shape.
pub fn error_body(wire: Wire, kind: ErrorKind, message: &str) -> Value {
    match wire {
        Wire::OpenAi => {
            let (kind, code) = match kind {
                ErrorKind::InvalidRequest => ("invalid_request_error", Value::Null),
                ErrorKind::Authentication => ("authentication_error", json!("invalid_api_key")),
                ErrorKind::RateLimit | ErrorKind::Overloaded => {
                    ("rate_limit_error", json!("rate_limit_exceeded"))
                }
                ErrorKind::Upstream => ("api_error", json!("upstream_error")),
                ErrorKind::Server => ("server_error", Value::Null),
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
            };
            json!({"type": "error", "error": {"type": kind, "message": message}})
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "outbound_tests.rs"]
mod tests;
