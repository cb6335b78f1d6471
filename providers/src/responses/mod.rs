//! OpenAI Responses (`POST {baseUrl}/responses`), streamed: the Codex CLI's wire.
//!
//! Why a provider of its own: chat completions has no form for reasoning items (whose
//! `encrypted_content` the model needs back), built-in tools, namespaces or custom tools, so
//! a Codex client behind a chat upstream loses them. Behind this one they go through:
//! - the request is written from the engine's messages (`instructions` from the system prompt,
//!   or a Responses client's own `instructions` and developer messages while the prompt is
//!   theirs unchanged; `input` items from the messages: [`items`]); items Rampart does not
//!   model are written back verbatim at their position ([`opaque`]), and those it models in
//!   the form they came in ([`template`]);
//! - a Responses client's own tools go as it declared them (the raw JSON, namespaces and
//!   `web_search` included), and its unmanaged top-level fields (`include`, `reasoning`,
//!   `store`, `prompt_cache_key`, …) unchanged ([`super::ClientFields::merge`]);
//! - the answer (streamed `response.*` events, or one JSON object) becomes the host's assistant
//!   message ([`answer`]): text, function calls, and the other output items as opaque blocks.

pub mod answer;
pub mod items;
pub mod opaque;
pub mod template;

use std::sync::Arc;

use rampart_message::SharedMessage;
use serde_json::{Map, Value, json};

use super::client_fields::{FieldsWire, warn_not_forwarded};
use super::http::{AuthStyle, HttpClient};
use super::splice::{self, WireMemo};
use super::{ModelRequest, ModelResponse, Provider, ProviderError, ProviderSettings};

/// Where requests go when the config names no `baseUrl`: OpenAI's, as for chat completions.
pub const DEFAULT_BASE_URL: &str = super::openai::DEFAULT_BASE_URL;

/// The `api` value written into answers, as pi names this wire format.
pub const API: &str = "openai-responses";

/// A provider speaking OpenAI Responses.
#[derive(Debug)]
pub struct ResponsesProvider {
    settings: ProviderSettings,
    http: HttpClient,
    url: String,
    /// Each message's input items, serialised once ([`super::splice`]).
    wire_memo: WireMemo,
}

impl ResponsesProvider {
    /// Builds the provider from its settings; the key is read on each request, as the other
    /// providers do.
    pub fn new(settings: ProviderSettings) -> Result<Self, ProviderError> {
        let http = HttpClient::new(&settings, AuthStyle::Bearer)?;
        let base = settings.base_url.as_deref().unwrap_or(DEFAULT_BASE_URL);
        let url = format!("{}/responses", base.trim_end_matches('/'));
        Ok(Self {
            settings,
            http,
            url,
            wire_memo: WireMemo::default(),
        })
    }
}

impl Provider for ResponsesProvider {
    fn id(&self) -> &str {
        &self.settings.id
    }

    fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        super::report_unsent(request, API);
        let body = request_bytes(request, &self.wire_memo);
        let idle = self.http.stream_idle_timeout();
        let url = request
            .forwarded
            .upstream_url(&self.url, FieldsWire::Responses);
        let deltas = request.forwarded.deltas.as_ref();
        let headers: Vec<_> = request
            .forwarded
            .passthrough(FieldsWire::Responses)
            .collect();
        let (answer, retries) = self.http.post(&url, request, &headers, body, |response| {
            answer::read(response, idle, deltas)
        })?;
        Ok(ModelResponse {
            message: answer.into_message(&self.settings.id, &request.model),
            retries,
        })
    }
}

/// The JSON body of a streamed Responses request. Public so that tests and tools can show
/// exactly what would be sent: [`request_bytes`] writes the same body.
pub fn request_body(request: &ModelRequest) -> Value {
    let mut body = body_shell(request);
    if let Some(input) = body.get_mut("input").and_then(Value::as_array_mut) {
        input.extend(
            client_system(request)
                .into_iter()
                .flat_map(|f| f.blocks.clone()),
        );
        for message in sent_messages(request) {
            input.extend(items::message_items(message));
        }
    }
    body
}

/// [`request_body`] as the bytes sent, each message's items taken from `memo` when an earlier
/// request serialised them. A message may stand for several items (or none): its piece is
/// its items' JSON joined by commas, and empty pieces are left out.
pub fn request_bytes(request: &ModelRequest, memo: &WireMemo) -> Vec<u8> {
    let body = body_shell(request);
    let opening = client_system(request).map(|form| joined(&form.blocks));
    let pieces: Vec<Arc<[u8]>> = memo.batch(|batch| {
        opening
            .into_iter()
            .chain(sent_messages(request).map(|m| {
                batch.get_or_insert_with(m, |message| joined(&items::message_items(message)))
            }))
            .filter(|piece| !piece.is_empty())
            .collect()
    });
    match body.as_object() {
        Some(shell) => splice::write_spliced(shell, "input", &pieces),
        None => splice::json_bytes(&body),
    }
}

/// Items as one piece of `input`: their JSON joined by commas (empty for none).
fn joined(items: &[Value]) -> Arc<[u8]> {
    let mut bytes = Vec::new();
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            bytes.push(b',');
        }
        splice::write_json(&mut bytes, item);
    }
    Arc::from(bytes)
}

/// How a Responses client wrote the request's system prompt, while it is still the text read
/// from it ([`super::ClientSystem`]).
fn client_system(request: &ModelRequest) -> Option<&super::SystemForm> {
    request
        .forwarded
        .client_system
        .as_ref()
        .and_then(|c| c.form_for(FieldsWire::Responses, request.system.as_deref()))
}

/// The messages this wire sends: an opaque message of another wire (an Anthropic client's
/// `system` message) has no form here ([`super::sent_on`]).
fn sent_messages(request: &ModelRequest) -> impl Iterator<Item = &SharedMessage> {
    request.messages.iter().filter(|m| super::sent_on(m, API))
}

/// The body with everything but the conversation's items (`input` is empty).
fn body_shell(request: &ModelRequest) -> Value {
    let mut body = json!({"model": request.model});
    match (client_system(request), &request.system) {
        // The client's own form of a prompt nothing changed: its developer messages open
        // `input` ([`request_body`]), its `instructions` go as sent.
        (Some(form), _) => {
            if let Some(instructions) = &form.instructions {
                body["instructions"] = instructions.clone();
            }
        }
        // The builder's cache marker reaches no model: Responses has no breakpoints.
        (None, Some(system)) => {
            body["instructions"] = json!(super::text::wire_system(system).text());
        }
        (None, None) => {}
    }
    body["input"] = json!([]);
    body["stream"] = json!(true);
    if let Some(max) = request.max_tokens {
        body["max_output_tokens"] = json!(max);
    }
    let fields = request.forwarded.client_fields.as_ref();
    let tools = tools(request);
    if !tools.is_empty() {
        body["tools"] = Value::Array(tools);
    }
    let Some(obj) = body.as_object_mut() else {
        return body;
    };
    if let Some(fields) = fields {
        let dropped = fields.merge(FieldsWire::Responses, obj);
        warn_not_forwarded(fields.wire, FieldsWire::Responses, &dropped);
    }
    if fields.is_none_or(|f| f.wire != FieldsWire::Responses) {
        // Rampart keeps the conversation, not OpenAI: nothing is stored there unless a client
        // asked, and reasoning comes back encrypted so its items can be sent again.
        obj.entry("store").or_insert(json!(false));
        obj.entry("include")
            .or_insert(json!(["reasoning.encrypted_content"]));
    }
    body
}

/// The request's tools: a Responses client's declared tools as it sent them (every kind), then
/// the host's own tools (memory, engine) and, for any other client, its function tools, as
/// Responses function tools.
fn tools(request: &ModelRequest) -> Vec<Value> {
    let raw = request
        .forwarded
        .client_fields
        .as_ref()
        .filter(|f| f.wire == FieldsWire::Responses)
        .map(|f| f.tools.as_slice())
        .unwrap_or_default();
    let declared: std::collections::HashSet<&str> = raw
        .iter()
        .filter(|t| t.get("type").and_then(Value::as_str) == Some("function"))
        .filter_map(|t| t.get("name").and_then(Value::as_str))
        .collect();
    let mut out: Vec<Value> = raw.to_vec();
    for spec in &request.forwarded.tools {
        if declared.contains(spec.name.as_str()) {
            continue;
        }
        let mut tool = Map::new();
        tool.insert("type".into(), json!("function"));
        tool.insert("name".into(), json!(spec.name));
        if let Some(d) = &spec.description {
            tool.insert("description".into(), json!(d));
        }
        tool.insert("parameters".into(), spec.parameters.clone());
        // Responses enforces schemas strictly unless told not to; the schemas here were written
        // for chat completions or Anthropic, which do not, unless a chat client declared the
        // tool `strict` itself.
        let strict = request
            .forwarded
            .client_fields
            .as_ref()
            .and_then(|f| f.declared_strict(spec))
            .unwrap_or(false);
        tool.insert("strict".into(), json!(strict));
        out.push(Value::Object(tool));
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "request_tests.rs"]
mod tests;
