//! A Responses answer read into the host's assistant message: streamed (`response.*` server
//! events) or one JSON `Response` object.
//!
//! The output items decide the message, in their order: a `message` item's `output_text` (and
//! `refusal`) parts are text, a `function_call` is a tool call, and every other item
//! (`reasoning`, built-in and custom tool calls) is kept verbatim as an opaque block
//! ([`super::opaque`]). Each modelled item's own fields (its `id`, a call's `status`, a part's
//! `annotations`) are kept as its template ([`super::template`]). A stream is read to its
//! `response.completed` (or `.incomplete`); one that ends before is cut and retried, a
//! `response.failed` or `error` event is classified like the HTTP error it stands for.

use std::collections::BTreeMap;
use std::time::Duration;

use rampart_message::{
    AssistantMessage, ContentBlock, Extra, StopReason, TextContent, ToolCall, Usage,
};
use reqwest::blocking::Response;
use serde_json::{Value, json};

use super::API;
use super::opaque::opaque_block;
use super::template::TEMPLATE_KEY;
use crate::http::{self, Failure, SseReader, content_type, parse_event_json, read_json};
use crate::openai::parse_arguments;
use crate::{DeltaSink, StreamDelta};

/// Reads a 2xx answer: a stream normally, a whole JSON object from a server that ignored
/// `stream: true`.
pub fn read(
    response: Response,
    idle: Duration,
    deltas: Option<&DeltaSink>,
) -> Result<Answer, Failure> {
    if content_type(&response) == "application/json" {
        let value = read_json(response)?;
        check_error(&value)?;
        return Answer::from_response(&value);
    }
    read_stream(SseReader::with_idle_timeout(response, idle), deltas)
}

/// Reads the events of a streamed answer.
pub fn read_stream(
    events: impl Iterator<Item = Result<http::SseEvent, Failure>>,
    deltas: Option<&DeltaSink>,
) -> Result<Answer, Failure> {
    if let Some(sink) = deltas
        && !sink.send(StreamDelta::Attempt)
    {
        return Err(Failure::Cancelled);
    }
    let mut stream = StreamState::default();
    for event in events {
        let event = event?;
        let data = event.data.trim();
        if data.is_empty() || data == "[DONE]" {
            continue;
        }
        let value = parse_event_json(data)?;
        for delta in stream.apply(&value)? {
            if let Some(sink) = deltas
                && !sink.send(delta)
            {
                return Err(Failure::Cancelled);
            }
        }
        if let Some(answer) = stream.done.take() {
            return Ok(answer);
        }
    }
    Err(Failure::Dropped(
        "the stream ended before `response.completed`".to_owned(),
    ))
}

/// An error object (a whole answer's `error`, a `response.failed`'s, an `error` event) as the
/// HTTP error its code stands for.
fn check_error(value: &Value) -> Result<(), Failure> {
    let Some(error) = value.get("error").filter(|e| !e.is_null()) else {
        return Ok(());
    };
    Err(api_failure(error, value))
}

fn api_failure(error: &Value, whole: &Value) -> Failure {
    let status = ["code", "type"]
        .iter()
        .filter_map(|k| error.get(*k).and_then(Value::as_str))
        .find_map(http::status_for_error_type)
        .unwrap_or(500);
    Failure::Api {
        status,
        body: json!({"error": error, "event": whole.get("type")}).to_string(),
        retry_after: None,
    }
}

/// The streamed answer as its events arrive.
#[derive(Debug, Default)]
struct StreamState {
    /// Items by output index: the final item once `output_item.done` gave it, else the item
    /// as `output_item.added` began it, with the text and arguments streamed so far.
    items: BTreeMap<u64, Partial>,
    /// The answer, once a terminal event arrived.
    done: Option<Answer>,
}

#[derive(Debug, Default)]
struct Partial {
    item: Value,
    text: String,
    arguments: String,
    finished: bool,
}

impl StreamState {
    /// Applies one event; returns the pieces a streaming client sees.
    fn apply(&mut self, event: &Value) -> Result<Vec<StreamDelta>, Failure> {
        let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
        let index = event.get("output_index").and_then(Value::as_u64);
        let mut out = Vec::new();
        match kind {
            "response.output_item.added" => {
                let (Some(index), Some(item)) = (index, event.get("item")) else {
                    return Ok(out);
                };
                if modelled(item)
                    && let Some(id) = item.get("id").and_then(Value::as_str)
                {
                    out.push(StreamDelta::ItemId {
                        index,
                        id: id.to_owned(),
                    });
                }
                if item.get("type").and_then(Value::as_str) == Some("function_call") {
                    out.push(StreamDelta::ToolCallStart {
                        index,
                        id: str_of(item, "call_id").to_owned(),
                        name: str_of(item, "name").to_owned(),
                    });
                }
                // Arguments or text the added item already holds are not streamed yet: the
                // deltas follow, or `output_item.done` brings the rest ([`unstreamed_rest`]).
                self.items.insert(
                    index,
                    Partial {
                        item: item.clone(),
                        ..Partial::default()
                    },
                );
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                let text = str_of(event, "delta");
                if let Some(index) = index
                    && !text.is_empty()
                {
                    self.items.entry(index).or_default().text.push_str(text);
                    out.push(StreamDelta::Text {
                        block: index,
                        text: text.to_owned(),
                    });
                }
            }
            "response.function_call_arguments.delta" => {
                let fragment = str_of(event, "delta");
                if let Some(index) = index
                    && !fragment.is_empty()
                {
                    self.items
                        .entry(index)
                        .or_default()
                        .arguments
                        .push_str(fragment);
                    out.push(StreamDelta::ToolCallArguments {
                        index,
                        fragment: fragment.to_owned(),
                    });
                }
            }
            "response.output_item.done" => {
                let (Some(index), Some(item)) = (index, event.get("item")) else {
                    return Ok(out);
                };
                if !modelled(item) {
                    out.push(StreamDelta::Item {
                        index,
                        item: item.clone(),
                    });
                }
                let partial = self.items.entry(index).or_default();
                out.extend(unstreamed_rest(index, partial, item));
                partial.item = item.clone();
                partial.finished = true;
            }
            "response.completed" | "response.incomplete" => {
                let response = event.get("response").cloned().unwrap_or(Value::Null);
                self.done = Some(self.finish(&response));
            }
            "response.failed" => {
                let error = event
                    .pointer("/response/error")
                    .filter(|e| !e.is_null())
                    .cloned()
                    .unwrap_or_else(|| json!({"message": "the response failed"}));
                return Err(api_failure(&error, event));
            }
            "error" => {
                let error = event.get("error").cloned().unwrap_or_else(|| event.clone());
                return Err(api_failure(&error, event));
            }
            _ => {}
        }
        Ok(out)
    }

    /// The answer from the streamed items; the terminal event's own `output` fills in items
    /// the stream did not finish (it holds them all, as a whole answer would).
    fn finish(&mut self, response: &Value) -> Answer {
        let listed = response.get("output").and_then(Value::as_array);
        let items: Vec<Value> = if self.items.values().all(|p| p.finished) && !self.items.is_empty()
        {
            self.items.values().map(|p| p.item.clone()).collect()
        } else if let Some(listed) = listed.filter(|l| !l.is_empty()) {
            listed.clone()
        } else {
            // Neither: the pieces as streamed, each item completed with its text or arguments.
            self.items
                .values()
                .map(|p| {
                    let mut item = p.item.clone();
                    if !p.finished {
                        match item.get("type").and_then(Value::as_str) {
                            Some("message") => {
                                item["content"] = json!([{"type": "output_text", "text": p.text}]);
                            }
                            Some("function_call") => item["arguments"] = json!(p.arguments),
                            _ => {}
                        }
                    }
                    item
                })
                .collect()
        };
        Answer::from_parts(items, response)
    }
}

/// What the finished `item` holds that its deltas did not stream (a server that sends the
/// text or the arguments only whole, in `output_item.done`): the rest, as the deltas a
/// streaming client still needs, so it ends with the item the answer keeps.
fn unstreamed_rest(index: u64, partial: &Partial, item: &Value) -> Vec<StreamDelta> {
    let rest = |whole: &str, streamed: &str| -> Option<String> {
        whole
            .strip_prefix(streamed)
            .filter(|rest| !rest.is_empty())
            .map(str::to_owned)
    };
    match item.get("type").and_then(Value::as_str) {
        Some("function_call") => {
            let mut out = Vec::new();
            if partial.item.is_null() {
                out.push(StreamDelta::ToolCallStart {
                    index,
                    id: str_of(item, "call_id").to_owned(),
                    name: str_of(item, "name").to_owned(),
                });
            }
            if let Some(fragment) = rest(str_of(item, "arguments"), &partial.arguments) {
                out.push(StreamDelta::ToolCallArguments { index, fragment });
            }
            out
        }
        Some("message") => {
            let whole: String = item
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|p| p.get("text").or_else(|| p.get("refusal")))
                .filter_map(Value::as_str)
                .collect();
            rest(&whole, &partial.text)
                .map(|text| StreamDelta::Text { block: index, text })
                .into_iter()
                .collect()
        }
        _ => Vec::new(),
    }
}

fn str_of<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

/// Whether an output item has a form in pi's messages (text, a function call).
fn modelled(item: &Value) -> bool {
    matches!(
        item.get("type").and_then(Value::as_str),
        Some("message" | "function_call")
    )
}

/// A whole answer: its output items, status, usage and model.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    items: Vec<Value>,
    status: Option<String>,
    incomplete_reason: Option<String>,
    usage: Option<Value>,
    model: Option<String>,
}

impl Answer {
    /// A non-streamed `Response` object.
    pub fn from_response(value: &Value) -> Result<Self, Failure> {
        let items = value
            .get("output")
            .and_then(Value::as_array)
            .ok_or_else(|| Failure::Invalid(format!("the answer has no `output`: {value}")))?;
        Ok(Self::from_parts(items.clone(), value))
    }

    fn from_parts(items: Vec<Value>, response: &Value) -> Self {
        Self {
            items,
            status: response
                .get("status")
                .and_then(Value::as_str)
                .map(str::to_owned),
            incomplete_reason: response
                .pointer("/incomplete_details/reason")
                .and_then(Value::as_str)
                .map(str::to_owned),
            usage: response.get("usage").filter(|u| u.is_object()).cloned(),
            model: response
                .get("model")
                .and_then(Value::as_str)
                .map(str::to_owned),
        }
    }

    /// The answer as a pi assistant message of `provider`.
    pub fn into_message(self, provider: &str, requested_model: &str) -> AssistantMessage {
        let mut content = Vec::new();
        let mut has_calls = false;
        for item in self.items {
            match item.get("type").and_then(Value::as_str) {
                Some("message") => {
                    // The item as the model wrote it goes on its first text, when each of its
                    // parts became one ([`super::template`]): the client sends it back so.
                    let mut template = super::template::message_template(&item).filter(|_| {
                        item["content"].as_array().is_some_and(|parts| {
                            parts.iter().all(|p| !str_of(p, "text").is_empty())
                        })
                    });
                    for part in item
                        .get("content")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        let text = match part.get("type").and_then(Value::as_str) {
                            Some("output_text") => str_of(part, "text"),
                            Some("refusal") => str_of(part, "refusal"),
                            _ => "",
                        };
                        if !text.is_empty() {
                            let mut block = TextContent {
                                text: text.to_owned(),
                                text_signature: None,
                                extra: Extra::new(),
                            };
                            if let Some(t) = template.take() {
                                block.extra.insert(TEMPLATE_KEY.to_owned(), t);
                            }
                            content.push(ContentBlock::Text(block));
                        }
                    }
                }
                Some("function_call") => {
                    has_calls = true;
                    let mut extra = Extra::new();
                    if let Some(t) = super::template::call_template(&item) {
                        extra.insert(TEMPLATE_KEY.to_owned(), t);
                    }
                    content.push(ContentBlock::ToolCall(ToolCall {
                        id: str_of(&item, "call_id").to_owned(),
                        name: str_of(&item, "name").to_owned(),
                        arguments: parse_arguments(str_of(&item, "arguments")),
                        thought_signature: None,
                        extra,
                    }));
                }
                _ => content.push(opaque_block(item)),
            }
        }
        let (stop_reason, error_message) =
            match (self.status.as_deref(), self.incomplete_reason.as_deref()) {
                (Some("incomplete"), Some("content_filter")) => (
                    StopReason::Error,
                    Some("the provider's content filter stopped the answer".to_owned()),
                ),
                (Some("incomplete"), _) => (StopReason::Length, None),
                _ if has_calls => (StopReason::ToolUse, None),
                _ => (StopReason::Stop, None),
            };
        http::AnswerParts {
            content,
            usage: usage(self.usage.as_ref()),
            stop: (stop_reason, error_message),
            reported_model: self.model,
        }
        .into_message(API, provider, requested_model)
    }
}

/// pi's usage from Responses': cached input tokens are split out of `input_tokens`, because pi
/// counts `input` as the uncached part only.
fn usage(raw: Option<&Value>) -> Usage {
    let Some(raw) = raw else {
        return Usage::default();
    };
    let count = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
    let input = count(raw.get("input_tokens"));
    let output = count(raw.get("output_tokens"));
    let cached = count(raw.pointer("/input_tokens_details/cached_tokens")).min(input);
    Usage {
        input: input - cached,
        output,
        cache_read: cached,
        cache_write: 0,
        total_tokens: Some(input + output),
        ..Usage::default()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "answer_tests.rs"]
mod tests;
