//! Anthropic messages (`POST {baseUrl}/messages`), streamed.
//!
//! The conversion from pi messages lives here because Anthropic's shape differs from OpenAI's
//! in ways that matter: tool results are blocks inside a *user* turn, roles must alternate, and
//! thinking is only accepted back with the signature Anthropic gave it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rampart_engine_api::AgentMessage;
use rampart_message::opaque::as_opaque;
use rampart_message::tool_result_form::AnthropicToolResultForm;
use rampart_message::wire::SharedMessage;
use rampart_message::{
    AssistantMessage, Content, ContentBlock, Extra, StopReason, TextContent, ThinkingContent,
    ToolCall, Usage,
};
use reqwest::blocking::Response;
use serde_json::{Map, Value, json};

use super::client_fields::{FieldsWire, warn_not_forwarded};
use super::http::{
    self, AuthStyle, Failure, HttpClient, SseReader, content_type, parse_event_json, read_json,
};
use super::text::{as_user_text, other_block_text, wire_system};
use super::{
    DeltaSink, ModelRequest, ModelResponse, Provider, ProviderError, ProviderSettings, StreamDelta,
};

/// Where requests go when the config names no `baseUrl`.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com/v1";

/// The `api` value written into answers, as pi names this wire format.
pub const API: &str = "anthropic-messages";

/// The API version this reader understands; Anthropic requires the header.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// `max_tokens` when the request sets none: Anthropic requires the field, and this is enough
/// for a turn without starving the context window.
pub const DEFAULT_MAX_TOKENS: u64 = 4096;

/// A provider speaking the Anthropic messages API.
#[derive(Debug)]
pub struct AnthropicProvider {
    settings: ProviderSettings,
    http: HttpClient,
    url: String,
    /// Each message's blocks, serialised once ([`super::splice`]).
    wire_memo: BlockMemo,
}

impl AnthropicProvider {
    /// Builds the provider from its settings. The API key is not read here but on each request,
    /// so a configured provider without a key only fails when it is actually used.
    pub fn new(settings: ProviderSettings) -> Result<Self, ProviderError> {
        let http = HttpClient::new(&settings, AuthStyle::Header("x-api-key"))?;
        let base = settings.base_url.as_deref().unwrap_or(DEFAULT_BASE_URL);
        let url = format!("{}/messages", base.trim_end_matches('/'));
        Ok(Self {
            settings,
            http,
            url,
            wire_memo: BlockMemo::default(),
        })
    }
}

impl Provider for AnthropicProvider {
    fn id(&self) -> &str {
        &self.settings.id
    }

    fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        super::report_unsent(request, API);
        let body = request_bytes(request, &self.wire_memo);
        let mut headers = vec![
            ("anthropic-version", ANTHROPIC_VERSION),
            ("content-type", "application/json"),
        ];
        headers.extend(request.forwarded.passthrough(FieldsWire::Anthropic));
        let idle = self.http.stream_idle_timeout();
        let url = request
            .forwarded
            .upstream_url(&self.url, FieldsWire::Anthropic);
        let deltas = request.forwarded.deltas.as_ref();
        let (answer, retries) = self.http.post(&url, request, &headers, body, |response| {
            read(response, idle, deltas)
        })?;
        Ok(ModelResponse {
            message: answer.into_message(&self.settings.id, &request.model),
            retries,
        })
    }
}

/// The JSON body of a streamed messages request. Public so that tests and tools can show
/// exactly what would be sent.
pub fn request_body(request: &ModelRequest) -> Value {
    let (mut messages, marked) = to_anthropic_messages_marked(
        &request.messages,
        client_marks(request),
        system_breakpoints(request),
    );
    let plan = CachePlan::of(request, marked);
    if plan.last_message {
        mark_last_message(&mut messages);
    }
    let mut body = body_shell(
        request,
        messages.into_iter().map(Turn::into_value).collect(),
    );
    if plan.system {
        mark_system(&mut body);
    }
    body
}

/// [`request_body`] as the bytes sent, each message's blocks taken from `memo` when an earlier
/// request serialised them ([`super::splice`]); a message that carries a breakpoint is
/// serialised afresh.
pub fn request_bytes(request: &ModelRequest, memo: &BlockMemo) -> Vec<u8> {
    let sent: Vec<&SharedMessage> = request.messages.iter().filter(|m| is_sent(m)).collect();
    let chosen = chosen_marks(&sent, client_marks(request), system_breakpoints(request));
    let marked = chosen.iter().filter(|f| **f).count();
    let wires: Vec<Arc<MessageBlocks>> = memo.batch(|batch| {
        sent.iter()
            .zip(&chosen)
            .map(|(message, mark)| {
                if *mark {
                    Arc::new(MessageBlocks::of(message, true))
                } else {
                    batch.get_or_insert_with(message, |m| Arc::new(MessageBlocks::of(m, false)))
                }
            })
            .collect()
    });
    let mut turns: Vec<Turn<Vec<&SerialisedBlock>, &[u8]>> = Vec::new();
    for wire in &wires {
        if let Some(whole) = &wire.whole {
            turns.push(Turn::Whole(whole));
            continue;
        }
        if wire.blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some(Turn::Side(last, existing)) if *last == wire.role => {
                existing.extend(wire.blocks.iter());
            }
            _ => turns.push(Turn::Side(wire.role, wire.blocks.iter().collect())),
        }
    }
    let plan = CachePlan::of(request, marked);
    if plan.last_message && marked > 0 {
        // A block may already carry the client's breakpoint where Rampart puts its own: the
        // rare case is written the long way.
        return super::splice::json_bytes(&request_body(request));
    }
    let newest = turns.iter().rposition(|t| matches!(t, Turn::Side(..)));
    let pieces: Vec<Arc<[u8]>> = turns
        .into_iter()
        .enumerate()
        .map(|(i, turn)| {
            let (role, mut blocks) = match turn {
                Turn::Side(role, blocks) => (role, blocks),
                Turn::Whole(item) => return Arc::from(item),
            };
            if role == "user" {
                // Anthropic wants a turn's tool results before anything else in it.
                blocks.sort_by_key(|(tool_result, _)| !*tool_result);
            }
            let mut out =
                Vec::with_capacity(blocks.iter().map(|(_, b)| b.len() + 1).sum::<usize>() + 32);
            out.extend_from_slice(b"{\"role\":\"");
            out.extend_from_slice(role.as_bytes());
            out.extend_from_slice(b"\",\"content\":[");
            let last = blocks.len().saturating_sub(1);
            for (j, (_, block)) in blocks.iter().enumerate() {
                if j > 0 {
                    out.push(b',');
                }
                if plan.last_message && Some(i) == newest && j == last {
                    // The newest block gets Rampart's breakpoint: the object with one more key
                    // (no block written here carries one yet).
                    out.extend_from_slice(&block[..block.len() - 1]);
                    out.extend_from_slice(b",\"cache_control\":{\"type\":\"ephemeral\"}}");
                } else {
                    out.extend_from_slice(block);
                }
            }
            out.extend_from_slice(b"]}");
            Arc::from(out)
        })
        .collect();
    let mut body = body_shell(request, Vec::new());
    if plan.system {
        mark_system(&mut body);
    }
    match body.as_object() {
        Some(shell) => super::splice::write_spliced(shell, "messages", &pieces),
        None => super::splice::json_bytes(&body),
    }
}

/// Each shared message's Anthropic blocks, serialised once ([`super::splice`]).
pub type BlockMemo = rampart_context::message_memo::MessageMemo<Arc<MessageBlocks>>;

/// One message's side and its blocks as serialised JSON, each with whether it is a tool result
/// (a user turn puts those first); or, for an opaque message, its item serialised whole.
#[derive(Debug)]
pub struct MessageBlocks {
    role: &'static str,
    blocks: Vec<SerialisedBlock>,
    whole: Option<Box<[u8]>>,
}

/// A block as JSON bytes, and whether it is a tool result.
type SerialisedBlock = (bool, Box<[u8]>);

impl MessageBlocks {
    fn of(message: &AgentMessage, mark: bool) -> Self {
        if let Some(opaque) = as_opaque(message) {
            // Written as the client sent it: never marked, never merged.
            return Self {
                role: "",
                blocks: Vec::new(),
                whole: Some(super::splice::json_bytes(opaque.item).into()),
            };
        }
        let (role, mut blocks) = convert(message);
        if mark && let Some(last) = blocks.last_mut().and_then(Value::as_object_mut) {
            last.insert("cache_control".to_owned(), json!({"type": "ephemeral"}));
        }
        let blocks = blocks
            .iter()
            .map(|b| {
                let bytes = super::splice::json_bytes(b);
                (b["type"] == "tool_result", bytes.into_boxed_slice())
            })
            .collect();
        Self {
            role,
            blocks,
            whole: None,
        }
    }
}

/// One entry of Anthropic's `messages`: a side's turn (the blocks of one or more messages on
/// that side), or an opaque message's item, which stands alone as its client wrote it.
enum Turn<B, W> {
    Side(&'static str, B),
    Whole(W),
}

impl Turn<Vec<Value>, Value> {
    fn into_value(self) -> Value {
        match self {
            Self::Side(role, blocks) => json!({"role": role, "content": blocks}),
            Self::Whole(item) => item,
        }
    }
}

/// Whether this wire sends `message`: what every wire sends, and an opaque message of this
/// wire ([`super::sent_on`]).
fn is_sent(message: &AgentMessage) -> bool {
    super::sent_on(message, API)
}

/// Which messages the client marked, when the prompt cache is on.
fn client_marks(request: &ModelRequest) -> Option<&(dyn Fn(&AgentMessage) -> bool + Send + Sync)> {
    request
        .forwarded
        .client_breakpoints
        .marks
        .as_deref()
        .filter(|_| request.forwarded.prompt_cache)
}

/// The client's system blocks, when the request's system prompt is still their text
/// ([`super::ClientSystem`]).
fn client_system_blocks(request: &ModelRequest) -> Option<&[Value]> {
    request
        .forwarded
        .client_system
        .as_ref()
        .and_then(|c| c.form_for(FieldsWire::Anthropic, request.system.as_deref()))
        .map(|form| form.blocks.as_slice())
}

/// The breakpoints the system prompt takes: the client's own when its blocks are sent as they
/// are, else the one Rampart may put there (kept free whether or not it does).
fn system_breakpoints(request: &ModelRequest) -> usize {
    match (
        client_system_blocks(request),
        &request.forwarded.client_system,
    ) {
        (Some(_), Some(client)) => client.breakpoints().max(1),
        _ => 1,
    }
}

/// Where Rampart puts `cache_control` breakpoints besides the client's own messages.
struct CachePlan {
    system: bool,
    last_message: bool,
}

impl CachePlan {
    /// With `marked` of the client's message breakpoints placed.
    fn of(request: &ModelRequest, marked: usize) -> Self {
        let client = &request.forwarded.client_breakpoints;
        if !request.forwarded.prompt_cache {
            return Self {
                system: false,
                last_message: false,
            };
        }
        if client.any() && (marked > 0 || client.system) {
            // The client's own breakpoints, where the managed prompt still has what they
            // marked; the system prompt's too. None of the client's message breakpoints left in
            // the managed prompt (it marked a message the engine reshaped, or none): the newest
            // message gets Rampart's, so the next step still reads the history from the cache.
            // Two breakpoints at most here, within Anthropic's four.
            Self {
                // The client's blocks sent as they are carry its breakpoints already.
                system: client.system && client_system_blocks(request).is_none(),
                last_message: marked == 0 && system_breakpoints(request) < MAX_BREAKPOINTS,
            }
        } else {
            // Rampart's two, for a client that set none (Anthropic allows four): the system
            // prompt (stable across a conversation's turns) and the last block of the last
            // message (so the next turn reads the whole prefix from the cache).
            Self {
                system: true,
                last_message: true,
            }
        }
    }
}

/// The body without Rampart's breakpoints, with `messages` as given.
fn body_shell(request: &ModelRequest, messages: Vec<Value>) -> Value {
    let mut body = json!({
        "model": request.model,
        "max_tokens": request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        "messages": messages,
        "stream": true,
    });
    if let Some(blocks) = client_system_blocks(request) {
        body["system"] = Value::Array(blocks.to_vec());
    } else if let Some(system) = &request.system {
        body["system"] = system_value(system);
    }
    if !request.forwarded.tools.is_empty() {
        body["tools"] = request
            .forwarded
            .tools
            .iter()
            .map(|t| {
                let mut tool = json!({"name": t.name, "input_schema": t.parameters});
                if let Some(d) = &t.description {
                    tool["description"] = json!(d);
                }
                tool
            })
            .collect();
    }
    if let (Some(fields), Some(obj)) = (&request.forwarded.client_fields, body.as_object_mut()) {
        let dropped = fields.merge(FieldsWire::Anthropic, obj);
        warn_not_forwarded(fields.wire, FieldsWire::Anthropic, &dropped);
    }
    body
}

/// A `cache_control` breakpoint on the last block of the last message, so the next request
/// reads the whole prefix up to it from the cache. An opaque message is never written into: the
/// newest turn Rampart wrote gets it.
fn mark_last_message(turns: &mut [Turn<Vec<Value>, Value>]) {
    let newest = turns.iter_mut().rev().find_map(|t| match t {
        Turn::Side(_, blocks) => Some(blocks),
        Turn::Whole(_) => None,
    });
    if let Some(block) = newest
        .and_then(|blocks| blocks.last_mut())
        .and_then(Value::as_object_mut)
    {
        block.insert("cache_control".to_owned(), json!({"type": "ephemeral"}));
    }
}

/// The system prompt as Anthropic takes it ([`wire_system`]): one string, or, when Rampart's
/// builder marked where the stable prefix ends, two text blocks (the prefix, then the part
/// that changes from turn to turn), so that a breakpoint on the first caches the prefix alone.
fn system_value(system: &str) -> Value {
    let blocks = wire_system(system).blocks();
    match blocks.as_slice() {
        [one] => json!(one),
        _ => Value::Array(
            blocks
                .iter()
                .map(|text| json!({"type": "text", "text": text}))
                .collect(),
        ),
    }
}

/// A `cache_control` breakpoint on the system prompt: on its first block, the stable prefix,
/// when it is in blocks (the suffix after it changes per turn and would miss the cache).
fn mark_system(body: &mut Value) {
    let ephemeral = json!({"type": "ephemeral"});
    match body.get_mut("system") {
        Some(Value::String(system)) => {
            let system = std::mem::take(system);
            body["system"] = json!([{"type": "text", "text": system, "cache_control": ephemeral}]);
        }
        Some(Value::Array(blocks)) => {
            if let Some(first) = blocks.first_mut().and_then(Value::as_object_mut) {
                first.insert("cache_control".to_owned(), ephemeral);
            }
        }
        _ => {}
    }
}

/// Breakpoints Anthropic accepts in one request.
const MAX_BREAKPOINTS: usize = 4;

// ---------------------------------------------------------------------------
// pi messages → Anthropic messages
// ---------------------------------------------------------------------------

/// The conversation as Anthropic `messages`: strictly alternating user and assistant turns.
/// Consecutive messages that land on the same side (several tool results, a tool result and
/// the next user prompt) are merged into one turn, and messages with nothing Anthropic accepts
/// are left out rather than sent empty, which Anthropic rejects.
pub fn to_anthropic_messages(messages: &[SharedMessage]) -> Vec<Value> {
    to_anthropic_messages_marked(messages, None, 1)
        .0
        .into_iter()
        .map(Turn::into_value)
        .collect()
}

/// [`to_anthropic_messages`] as turns, with a `cache_control` breakpoint on the last block of
/// each message `marked` recognises (the newest ones, within what Anthropic accepts beside
/// the `system` breakpoints the system prompt takes), and how many were placed.
fn to_anthropic_messages_marked(
    messages: &[SharedMessage],
    marked: Option<&(dyn Fn(&AgentMessage) -> bool + Send + Sync)>,
    system: usize,
) -> (Vec<Turn<Vec<Value>, Value>>, usize) {
    let sent: Vec<&SharedMessage> = messages.iter().filter(|m| is_sent(m)).collect();
    let chosen = chosen_marks(&sent, marked, system);
    let placed = chosen.iter().filter(|f| **f).count();
    let mut turns: Vec<Turn<Vec<Value>, Value>> = Vec::new();
    for (message, mark) in sent.into_iter().zip(chosen) {
        if let Some(opaque) = as_opaque(message) {
            turns.push(Turn::Whole(Value::Object(opaque.item.clone())));
            continue;
        }
        let (role, mut blocks) = convert(message);
        if blocks.is_empty() {
            continue;
        }
        if mark && let Some(last) = blocks.last_mut().and_then(Value::as_object_mut) {
            last.insert("cache_control".to_owned(), json!({"type": "ephemeral"}));
        }
        match turns.last_mut() {
            Some(Turn::Side(last, existing)) if *last == role => existing.extend(blocks),
            _ => turns.push(Turn::Side(role, blocks)),
        }
    }
    for turn in &mut turns {
        if let Turn::Side("user", blocks) = turn {
            // Anthropic wants a turn's tool results before anything else in it.
            blocks.sort_by_key(|b| b["type"] != "tool_result");
        }
    }
    (turns, placed)
}

/// Which of `sent` get a client's breakpoint: those `marked` recognises, the newest first,
/// within what Anthropic accepts beside the `system` breakpoints of the system prompt.
fn chosen_marks(
    sent: &[&SharedMessage],
    marked: Option<&(dyn Fn(&AgentMessage) -> bool + Send + Sync)>,
    system: usize,
) -> Vec<bool> {
    // An opaque message is written as it came and never marked here; the breakpoints its item
    // carries take their room.
    let mut chosen: Vec<bool> = sent
        .iter()
        .map(|m| as_opaque(m).is_none() && marked.is_some_and(|f| f(m)))
        .collect();
    let in_opaque: usize = sent
        .iter()
        .filter_map(|m| as_opaque(m))
        .map(|o| breakpoints_in(o.item))
        .sum();
    // The newest win: a client moves its last breakpoint forward turn after turn.
    let mut room = MAX_BREAKPOINTS
        .saturating_sub(system)
        .saturating_sub(in_opaque);
    for flag in chosen.iter_mut().rev() {
        if *flag {
            if room == 0 {
                *flag = false;
            } else {
                room -= 1;
            }
        }
    }
    chosen
}

/// The `cache_control` breakpoints an opaque message's item carries: on the message, and on
/// its content blocks.
fn breakpoints_in(item: &Map<String, Value>) -> usize {
    let blocks = item
        .get("content")
        .and_then(Value::as_array)
        .map_or(0, |blocks| {
            blocks
                .iter()
                .filter(|b| b.get("cache_control").is_some())
                .count()
        });
    usize::from(item.contains_key("cache_control")) + blocks
}

/// One pi message as a side and its Anthropic content blocks.
fn convert(message: &AgentMessage) -> (&'static str, Vec<Value>) {
    match message {
        AgentMessage::User(m) => ("user", content_blocks(&m.content)),
        AgentMessage::Assistant(m) => ("assistant", assistant_blocks(m)),
        AgentMessage::ToolResult(m) => ("user", vec![tool_result_block(m)]),
        // Roles Anthropic lacks are shown as user text, worded as for every provider.
        other => {
            let text = as_user_text(other).unwrap_or_default();
            ("user", text_block(&text).into_iter().collect())
        }
    }
}

/// A tool result as a `tool_result` block, in the form its client wrote it
/// ([`AnthropicToolResultForm`]) while the result still fits that form: its content as a
/// string while it is one text block, no `is_error` while it is false.
fn tool_result_block(m: &rampart_message::ToolResultMessage) -> Value {
    let form = AnthropicToolResultForm::read(&m.extra);
    let mut result = Map::new();
    result.insert("type".to_owned(), json!("tool_result"));
    result.insert("tool_use_id".to_owned(), json!(m.tool_call_id));
    if m.is_error || !form.is_error_omitted {
        result.insert("is_error".to_owned(), json!(m.is_error));
    }
    let one_text = match &m.content {
        Content::Text(text) => Some(text),
        Content::Blocks(blocks) => match blocks.as_slice() {
            [ContentBlock::Text(t)] => Some(&t.text),
            _ => None,
        },
    };
    match one_text.filter(|_| form.content_string) {
        Some(text) => {
            result.insert("content".to_owned(), json!(text));
        }
        None => {
            let content = content_blocks(&m.content);
            if !content.is_empty() {
                result.insert("content".to_owned(), Value::Array(content));
            }
        }
    }
    Value::Object(result)
}

/// A text block, or nothing for blank text: Anthropic rejects text blocks that are empty or
/// whitespace only ("text content blocks must contain non-whitespace text").
fn text_block(text: &str) -> Option<Value> {
    (!text.trim().is_empty()).then(|| json!({"type": "text", "text": text}))
}

/// User-side content: text and images; other block kinds have no Anthropic form.
fn content_blocks(content: &Content) -> Vec<Value> {
    match content {
        Content::Text(text) => text_block(text).into_iter().collect(),
        Content::Blocks(blocks) => blocks
            .iter()
            .filter_map(|block| match block {
                ContentBlock::Text(t) => text_block(&t.text),
                ContentBlock::Image(i) => Some(json!({
                    "type": "image",
                    "source": {"type": "base64", "media_type": i.mime_type, "data": i.data},
                })),
                ContentBlock::Other(block) => text_block(&other_block_text(block)),
                _ => None,
            })
            .collect(),
    }
}

/// An answer's content as Anthropic blocks: what a request carries back, and what
/// `rampart serve` answers an Anthropic client with.
pub fn assistant_blocks(message: &AssistantMessage) -> Vec<Value> {
    message
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(t) => text_block(&t.text),
            ContentBlock::Thinking(t) => thinking_block(t),
            ContentBlock::ToolCall(c) => Some(json!({
                "type": "tool_use",
                "id": c.id,
                "name": c.name,
                "input": tool_input(&c.arguments),
            })),
            _ => None,
        })
        .collect()
}

/// Thinking goes back only with its signature: Anthropic rejects unsigned thinking (and
/// thinking from another provider has no Anthropic signature). pi marks redacted thinking with
/// `redacted: true` and keeps the opaque data in the signature field.
fn thinking_block(thinking: &ThinkingContent) -> Option<Value> {
    let signature = thinking
        .thinking_signature
        .as_deref()
        .filter(|s| !s.is_empty())?;
    if thinking.extra.get("redacted") == Some(&Value::Bool(true)) {
        return Some(json!({"type": "redacted_thinking", "data": signature}));
    }
    Some(json!({"type": "thinking", "thinking": thinking.thinking, "signature": signature}))
}

/// The piece of a streamed event a streaming client sees: text, and tool calls as they start
/// and grow (thinking is not passed on).
fn event_delta(kind: &str, event: &Value) -> Option<StreamDelta> {
    let index = event.get("index").and_then(Value::as_u64)?;
    match kind {
        "content_block_start" => {
            let block = event.get("content_block")?;
            (block.get("type")? == "tool_use").then(|| StreamDelta::ToolCallStart {
                index,
                id: block["id"].as_str().unwrap_or_default().to_owned(),
                name: block["name"].as_str().unwrap_or_default().to_owned(),
            })
        }
        "content_block_delta" => {
            let delta = event.get("delta")?;
            match delta.get("type")?.as_str()? {
                "text_delta" => Some(StreamDelta::Text {
                    block: index,
                    text: delta.get("text")?.as_str()?.to_owned(),
                }),
                "input_json_delta" => Some(StreamDelta::ToolCallArguments {
                    index,
                    fragment: delta.get("partial_json")?.as_str()?.to_owned(),
                }),
                _ => None,
            }
        }
        _ => None,
    }
}

/// `tool_use.input` must be an object. Arguments kept as a raw string (they did not parse when
/// the call arrived) are wrapped rather than dropped, so the model still sees what it sent.
fn tool_input(arguments: &Value) -> Value {
    match arguments {
        Value::Object(_) => arguments.clone(),
        Value::Null => json!({}),
        other => json!({"input": other}),
    }
}

// ---------------------------------------------------------------------------
// The answer
// ---------------------------------------------------------------------------

/// Reads a 2xx answer: a stream normally, a whole JSON message from proxies that ignore
/// `stream: true`.
fn read(response: Response, idle: Duration, deltas: Option<&DeltaSink>) -> Result<Answer, Failure> {
    if content_type(&response) == "application/json" {
        let value = read_json(response)?;
        check_error(&value)?;
        return Answer::from_json(&value);
    }
    if let Some(sink) = deltas
        && !sink.send(StreamDelta::Attempt)
    {
        return Err(Failure::Cancelled);
    }
    let mut answer = Answer::default();
    for event in SseReader::with_idle_timeout(response, idle) {
        let event = event?;
        if event.data.trim().is_empty() {
            continue;
        }
        let value = parse_event_json(&event.data)?;
        check_error(&value)?;
        let kind = event
            .event
            .as_deref()
            .or_else(|| value.get("type").and_then(Value::as_str))
            .unwrap_or_default();
        if kind == "message_stop" {
            return Ok(answer);
        }
        answer.apply(kind, &value)?;
        if let Some(sink) = deltas
            && let Some(delta) = event_delta(kind, &value)
            && !sink.send(delta)
        {
            return Err(Failure::Cancelled);
        }
    }
    Err(Failure::Dropped(
        "the stream ended before message_stop".to_owned(),
    ))
}

/// An `error` event or body is classified like the HTTP error its type stands for
/// (`overloaded_error` → 529, retried; a "prompt is too long" text → overflow).
fn check_error(value: &Value) -> Result<(), Failure> {
    let is_error = value.get("type").and_then(Value::as_str) == Some("error");
    let Some(error) = value.get("error").filter(|_| is_error) else {
        return Ok(());
    };
    let status = error
        .get("type")
        .and_then(Value::as_str)
        .and_then(http::status_for_error_type)
        .unwrap_or(500);
    Err(Failure::Api {
        status,
        body: value.to_string(),
        retry_after: None,
    })
}

/// A content block being assembled from stream events.
#[derive(Debug)]
enum PartialBlock {
    Text(String),
    Thinking {
        text: String,
        signature: String,
    },
    RedactedThinking(String),
    ToolUse {
        id: String,
        name: String,
        json: String,
        input: Value,
    },
}

/// The answer as it accumulates, event by event.
#[derive(Debug, Default)]
struct Answer {
    blocks: BTreeMap<u64, PartialBlock>,
    stop_reason: Option<String>,
    usage: Usage,
    model: Option<String>,
}

impl Answer {
    fn apply(&mut self, kind: &str, event: &Value) -> Result<(), Failure> {
        match kind {
            "message_start" => {
                let message = event.get("message").unwrap_or(&Value::Null);
                if let Some(model) = message.get("model").and_then(Value::as_str) {
                    self.model = Some(model.to_owned());
                }
                self.add_usage(message.get("usage"));
            }
            "content_block_start" => {
                let block = event.get("content_block").unwrap_or(&Value::Null);
                if let Some(partial) = start_block(block) {
                    self.blocks.insert(index(event)?, partial);
                }
            }
            "content_block_delta" => {
                let delta = event.get("delta").unwrap_or(&Value::Null);
                if let Some(block) = self.blocks.get_mut(&index(event)?) {
                    apply_delta(block, delta);
                }
            }
            "message_delta" => {
                if let Some(reason) = event.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(reason.to_owned());
                }
                self.add_usage(event.get("usage"));
            }
            // `content_block_stop` needs nothing: blocks are finished when the message is.
            // `ping` and unknown events are ignored, as Anthropic's versioning policy asks.
            _ => {}
        }
        Ok(())
    }

    /// Usage fields are cumulative where they appear, so the latest value wins.
    fn add_usage(&mut self, usage: Option<&Value>) {
        let Some(usage) = usage else { return };
        let field = |name: &str| usage.get(name).and_then(Value::as_u64);
        if let Some(n) = field("input_tokens") {
            self.usage.input = n;
        }
        if let Some(n) = field("output_tokens") {
            self.usage.output = n;
        }
        if let Some(n) = field("cache_read_input_tokens") {
            self.usage.cache_read = n;
        }
        if let Some(n) = field("cache_creation_input_tokens") {
            self.usage.cache_write = n;
        }
    }

    /// A non-streamed answer, read into the same accumulator so both paths end alike.
    fn from_json(value: &Value) -> Result<Self, Failure> {
        let blocks = value
            .get("content")
            .and_then(Value::as_array)
            .ok_or_else(|| Failure::Invalid(format!("the answer has no content: {value}")))?;
        let mut answer = Answer::default();
        answer.apply("message_start", &json!({"message": value}))?;
        for (i, block) in blocks.iter().enumerate() {
            if let Some(partial) = start_block(block) {
                answer.blocks.insert(i as u64, partial);
            }
        }
        answer.stop_reason = value
            .get("stop_reason")
            .and_then(Value::as_str)
            .map(str::to_owned);
        Ok(answer)
    }

    fn into_message(self, provider: &str, requested_model: &str) -> AssistantMessage {
        let content: Vec<ContentBlock> = self.blocks.into_values().filter_map(finish).collect();
        let (stop_reason, error_message) = stop_reason(self.stop_reason.as_deref());
        let mut usage = self.usage;
        usage.total_tokens =
            Some(usage.input + usage.output + usage.cache_read + usage.cache_write);
        http::AnswerParts {
            content,
            usage,
            stop: (stop_reason, error_message),
            reported_model: self.model,
        }
        .into_message(API, provider, requested_model)
    }
}

fn index(event: &Value) -> Result<u64, Failure> {
    event
        .get("index")
        .and_then(Value::as_u64)
        .ok_or_else(|| Failure::Invalid(format!("a content block event has no index: {event}")))
}

fn start_block(block: &Value) -> Option<PartialBlock> {
    let text = |key: &str| {
        block
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    Some(match block.get("type").and_then(Value::as_str)? {
        "text" => PartialBlock::Text(text("text")),
        "thinking" => PartialBlock::Thinking {
            text: text("thinking"),
            signature: text("signature"),
        },
        "redacted_thinking" => PartialBlock::RedactedThinking(text("data")),
        "tool_use" => PartialBlock::ToolUse {
            id: text("id"),
            name: text("name"),
            json: String::new(),
            input: block.get("input").cloned().unwrap_or_else(|| json!({})),
        },
        _ => return None,
    })
}

fn apply_delta(block: &mut PartialBlock, delta: &Value) {
    let text = |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or_default();
    match (block, delta.get("type").and_then(Value::as_str)) {
        (PartialBlock::Text(buffer), Some("text_delta")) => buffer.push_str(text("text")),
        (PartialBlock::Thinking { text: buffer, .. }, Some("thinking_delta")) => {
            buffer.push_str(text("thinking"));
        }
        (PartialBlock::Thinking { signature, .. }, Some("signature_delta")) => {
            signature.push_str(text("signature"));
        }
        (PartialBlock::ToolUse { json, .. }, Some("input_json_delta")) => {
            json.push_str(text("partial_json"));
        }
        _ => {}
    }
}

/// A finished block as pi content. Tool input streamed as JSON fragments replaces the empty
/// `input` of `content_block_start`; fragments that do not parse are kept as a string so the
/// turn survives and the tool can report the bad input.
fn finish(block: PartialBlock) -> Option<ContentBlock> {
    Some(match block {
        PartialBlock::Text(text) if text.is_empty() => return None,
        PartialBlock::Text(text) => ContentBlock::Text(TextContent {
            text,
            text_signature: None,
            extra: Extra::new(),
        }),
        PartialBlock::Thinking { text, signature } => ContentBlock::Thinking(ThinkingContent {
            thinking: text,
            thinking_signature: (!signature.is_empty()).then_some(signature),
            extra: Extra::new(),
        }),
        PartialBlock::RedactedThinking(data) => {
            let mut extra = Map::new();
            extra.insert("redacted".to_owned(), Value::Bool(true));
            ContentBlock::Thinking(ThinkingContent {
                thinking: String::new(),
                thinking_signature: Some(data),
                extra,
            })
        }
        PartialBlock::ToolUse {
            id,
            name,
            json,
            input,
        } => {
            let arguments = if json.trim().is_empty() {
                input
            } else {
                serde_json::from_str(&json).unwrap_or(Value::String(json))
            };
            ContentBlock::ToolCall(ToolCall {
                id,
                name,
                arguments,
                thought_signature: None,
                extra: Extra::new(),
            })
        }
    })
}

/// pi's stop reason for Anthropic's.
fn stop_reason(reason: Option<&str>) -> (StopReason, Option<String>) {
    match reason {
        Some("max_tokens") => (StopReason::Length, None),
        Some("tool_use") => (StopReason::ToolUse, None),
        Some("refusal") => (
            StopReason::Error,
            Some("the model refused to answer".to_owned()),
        ),
        // end_turn, stop_sequence, pause_turn: the turn is over.
        _ => (StopReason::Stop, None),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::ClientBreakpoints;

    fn assistant(content: Value) -> SharedMessage {
        Arc::new(
            serde_json::from_value(json!({
                "role": "assistant", "content": content,
                "api": "x", "provider": "x", "model": "m",
                "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0,
                          "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
                "stopReason": "toolUse", "timestamp": 0
            }))
            .unwrap(),
        )
    }

    fn cached_request(messages: Vec<SharedMessage>, client: ClientBreakpoints) -> Value {
        let request = ModelRequest {
            model: "m".into(),
            system: Some("sys".into()),
            messages: messages.into(),
            forwarded: crate::Forwarded {
                prompt_cache: true,
                client_breakpoints: client,
                ..Default::default()
            },
            ..Default::default()
        };
        request_body(&request)
    }

    /// A client's own breakpoints go where it put them (the newest three beside the system
    /// prompt's, Anthropic's limit being four); a client that set none gets the system prompt
    /// and the last message marked.
    #[test]
    fn the_clients_breakpoints_are_kept_else_the_managed_prefix_is_marked() {
        let messages: Vec<SharedMessage> = (0..6)
            .map(|i| Arc::new(AgentMessage::user_text(format!("m{i}"), 0)))
            .collect();
        let marks = |body: &Value| -> Vec<usize> {
            body["messages"]
                .as_array()
                .unwrap()
                .iter()
                .enumerate()
                .filter(|(_, m)| m.to_string().contains("cache_control"))
                .map(|(i, _)| i)
                .collect()
        };
        let none = cached_request(messages.clone(), ClientBreakpoints::default());
        assert_eq!(none["system"][0]["cache_control"]["type"], "ephemeral");
        // Six user texts merge into one user turn: the last block of it.
        assert_eq!(marks(&none), vec![0]);
        let content = none["messages"][0]["content"].as_array().unwrap();
        assert!(content.last().unwrap().get("cache_control").is_some());
        assert_eq!(none.to_string().matches("cache_control").count(), 2);

        // Alternate sides so each message is its own turn; the client marked m0, m1, m2, m4.
        let turns: Vec<SharedMessage> = (0..6)
            .map(|i| {
                if i % 2 == 0 {
                    Arc::new(AgentMessage::user_text(format!("m{i}"), 0))
                } else {
                    assistant(json!([{"type": "text", "text": format!("m{i}")}]))
                }
            })
            .collect();
        let marked = ["m0", "m1", "m2", "m4"];
        let client = ClientBreakpoints {
            system: true,
            marks: Some(Arc::new(move |m: &AgentMessage| {
                let text = serde_json::to_string(m).unwrap();
                marked.iter().any(|t| text.contains(&format!("\"{t}\"")))
            })),
        };
        let body = cached_request(turns.clone(), client);
        assert_eq!(marks(&body), vec![1, 2, 4], "the newest three: {body}");
        assert_eq!(body["system"][0]["cache_control"]["type"], "ephemeral");
        // Without the system mark there is still room for only the newest three messages,
        // and the last message is not marked by Rampart.
        let client = ClientBreakpoints {
            system: false,
            marks: Some(Arc::new(|m: &AgentMessage| {
                serde_json::to_string(m).unwrap().contains("\"m0\"")
            })),
        };
        let body = cached_request(turns, client);
        assert_eq!(marks(&body), vec![0]);
        assert!(body["system"].is_string(), "{body}");
    }

    /// A client that marked its system prompt and a message the managed prompt no longer has
    /// (the engine reshaped it) still gets the newest message marked, so a tool loop's next step
    /// reads the history from the cache: two breakpoints, not the system prompt's alone.
    #[test]
    fn the_newest_message_is_marked_when_no_client_mark_is_left() {
        let turns: Vec<SharedMessage> = vec![
            Arc::new(AgentMessage::user_text("read a", 0)),
            assistant(
                json!([{"type": "toolCall", "id": "toolu_1", "name": "Read", "arguments": {}}]),
            ),
            Arc::new(AgentMessage::tool_result(
                "toolu_1", "Read", "body", false, 0,
            )),
        ];
        let client = ClientBreakpoints {
            system: true,
            marks: Some(Arc::new(|_: &AgentMessage| false)),
        };
        let body = cached_request(turns, client);
        assert_eq!(body["system"][0]["cache_control"]["type"], "ephemeral");
        let last = body["messages"].as_array().unwrap().last().unwrap();
        assert_eq!(last["content"][0]["type"], "tool_result", "{body}");
        assert_eq!(last["content"][0]["cache_control"]["type"], "ephemeral");
        assert_eq!(body.to_string().matches("cache_control").count(), 2);
    }

    /// A built prompt reaches Anthropic as two text blocks, split where the builder's marker
    /// was: the stable prefix carries the breakpoint, the per-turn suffix does not, and the
    /// marker itself is in neither.
    #[test]
    fn a_marked_system_prompt_is_two_blocks_with_the_breakpoint_on_the_first() {
        let system = format!(
            "You are a personal assistant.\n# Project Context{}## Runtime\nRuntime: thinking=off",
            rampart_prompt::CACHE_BOUNDARY
        );
        let mut request = ModelRequest {
            model: "m".into(),
            system: Some(system),
            messages: vec![Arc::new(AgentMessage::user_text("hi", 0))].into(),
            forwarded: crate::Forwarded {
                prompt_cache: true,
                ..Default::default()
            },
            ..Default::default()
        };
        let body = request_body(&request);
        let blocks = body["system"].as_array().unwrap();
        assert_eq!(blocks.len(), 2, "{body}");
        assert_eq!(
            blocks[0]["text"],
            "You are a personal assistant.\n# Project Context"
        );
        assert_eq!(blocks[0]["cache_control"]["type"], "ephemeral");
        assert_eq!(blocks[1]["text"], "## Runtime\nRuntime: thinking=off");
        assert!(blocks[1].get("cache_control").is_none(), "{body}");
        assert!(!body.to_string().contains("RAMPART_CACHE_BOUNDARY"));

        // Without prompt caching the blocks stay, unmarked.
        request.forwarded.prompt_cache = false;
        let body = request_body(&request);
        assert_eq!(body["system"].as_array().unwrap().len(), 2);
        assert!(!body.to_string().contains("cache_control"), "{body}");
    }

    #[test]
    fn unsigned_thinking_is_dropped_and_signed_thinking_kept() {
        let messages = vec![
            Arc::new(AgentMessage::user_text("hi", 0)),
            assistant(json!([
                {"type": "thinking", "thinking": "unsigned"},
                {"type": "thinking", "thinking": "signed", "thinkingSignature": "sig"},
                {"type": "text", "text": "hello"}
            ])),
        ];
        let out = to_anthropic_messages(&messages);
        assert_eq!(
            out[1]["content"],
            json!([
                {"type": "thinking", "thinking": "signed", "signature": "sig"},
                {"type": "text", "text": "hello"}
            ])
        );
    }

    #[test]
    fn summaries_become_user_text_and_merge_with_the_next_prompt() {
        let summary: SharedMessage = Arc::new(
            serde_json::from_value(json!({
                "role": "compactionSummary", "summary": "S", "tokensBefore": 10, "timestamp": 0
            }))
            .unwrap(),
        );
        let out = to_anthropic_messages(&[summary, Arc::new(AgentMessage::user_text("next", 0))]);
        assert_eq!(out.len(), 1);
        assert_eq!(
            out[0]["content"][0]["text"],
            "The conversation history before this point was compacted into the following summary:\n\n<summary>\nS\n</summary>"
        );
        assert_eq!(out[0]["content"][1]["text"], "next");
    }

    #[test]
    fn events_assemble_text_tool_use_and_usage() {
        let mut answer = Answer::default();
        let events = [
            (
                "message_start",
                json!({"message": {"model": "claude", "usage": {"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 1}}}),
            ),
            (
                "content_block_start",
                json!({"index": 0, "content_block": {"type": "text", "text": ""}}),
            ),
            (
                "content_block_delta",
                json!({"index": 0, "delta": {"type": "text_delta", "text": "Hi"}}),
            ),
            (
                "content_block_start",
                json!({"index": 1, "content_block": {"type": "tool_use", "id": "t1", "name": "read", "input": {}}}),
            ),
            (
                "content_block_delta",
                json!({"index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"a\":"}}),
            ),
            (
                "content_block_delta",
                json!({"index": 1, "delta": {"type": "input_json_delta", "partial_json": "1}"}}),
            ),
            (
                "message_delta",
                json!({"delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 7}}),
            ),
        ];
        for (kind, event) in events {
            answer.apply(kind, &event).unwrap();
        }
        let message = answer.into_message("anthropic", "claude-x");
        assert_eq!(message.stop_reason, StopReason::ToolUse);
        assert_eq!(
            (
                message.usage.input,
                message.usage.output,
                message.usage.cache_read
            ),
            (10, 7, 5)
        );
        match &message.content[1] {
            ContentBlock::ToolCall(c) => assert_eq!(c.arguments, json!({"a": 1})),
            other => panic!("expected a tool call, got {other:?}"),
        }
    }
}
