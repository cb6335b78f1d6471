//! The messages of recent requests (chat completions, Anthropic, Responses), decoded, kept with
//! the bytes they were decoded from, so that a request re-sending them parses and converts only
//! what is new.
//!
//! Why: a client re-sends its whole conversation on every request. On a 200k-token coding
//! conversation, parsing the 800 KB body into a `Value` and converting every message was
//! two fifths of what `rampart serve` spent on a request, though all but the newest turn were
//! byte for byte the last request's. A request's `messages` array is indexed by its bytes
//! ([`super::raw_messages`]); when its first `n` elements are exactly the bytes of a kept
//! request's messages (compared with `memcmp`, whole, never trusted to a hash), those `n`
//! are taken decoded and only the body with the remaining elements is parsed
//! ([`decode_continuing`]). The result is the same request the whole body
//! decodes to, but for the time the kept messages carry: they keep the time of the request
//! that first sent them, since they are the very messages the session stored then (shared,
//! not copied: one parsed copy of a conversation between this memo and the cached tree), and
//! one that a request stores as new is stamped with that request's time then ([`stamped`]).
//! Anything the continuation cannot decode alone (a tool result first, a system message, a
//! call without an id) sends the body down the whole path.
//!
//! The chat-completions and Anthropic converters read each message nearly alone
//! ([`decode_continuing`] says what sends a request down the whole path). A Responses body's
//! `input` items are first rewritten as chat messages with state across items (a call, or the
//! model's text after its reasoning, joins the assistant message before it), so its new items
//! are converted apart only after a kept conversation that ends with a message of the client's
//! (a user message or a tool output: nothing joins those), with the same `instructions`, and
//! without a `previous_response_id` ([`responses_rest_as_chat`]); what the conversion made of
//! the kept items that is not a message (the system form, the items with no chat form) is kept
//! with them ([`ResponsesKept`]).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use rampart_message::{AgentMessage, SharedMessage};

use serde_json::Value;

use super::inbound::{ClientRequest, ResponsesAsChat, Wire, decode, responses_as_chat_after};
use super::not_forwarded::NotForwarded;
use super::raw_messages::MessageSlices;
use crate::providers::SystemForm;

/// How many decoded requests are kept. Each holds its messages' bytes, and the decoded
/// messages the session holds too, so a 200k-token conversation costs about 1 MB here; a few
/// cover the conversations being continued at any one moment (a client continues one
/// conversation at a time).
pub const CAPACITY: usize = 8;

/// The most body bytes kept at once (each kept request holds its whole body, and its decoded
/// messages, about as much again, which the conversation's session shares while it is kept
/// open). A client may send bodies of up to `serve`'s body limit (256 MB by default): without
/// a budget, eight of them would stay in memory after their requests ended. A body larger than this is not kept at all; its request decodes as
/// before. Eight 200k-token conversations (800 KB each) fit several times over.
pub const MAX_KEPT_BYTES: usize = 16 << 20;

/// The decoded messages of a request, with the bytes they came from.
#[derive(Debug)]
pub struct Decoded {
    /// The number it is kept under ([`super::inbound::Seen::kept_as`]).
    pub generation: u64,
    /// The wire the request came in (its converter made the messages).
    pub wire: Wire,
    /// The model the request named (the converter records it on assistant messages).
    pub model: String,
    /// The bytes of the `messages` elements, from the first one's start to the last one's end:
    /// a slice of the request's body, not a copy.
    raw: Bytes,
    /// How many elements those are.
    count: usize,
    /// The length of the body `raw` is a slice of (all of which it keeps).
    body_len: usize,
    /// The messages they decoded to, shared with the request that decoded them (a request
    /// only reads them, and is done by the time its client sends the next one) and each with
    /// the session that stored it.
    messages: Arc<Vec<SharedMessage>>,
    /// The system prompt the request's system messages made.
    pub system: Option<String>,
    /// Its messages that carry a client's breakpoint ([`ClientRequest::breakpoints`]): a
    /// request continuing it adds its new messages' (the kept ones are not looked at again).
    breakpoints: Vec<AgentMessage>,
    /// What a Responses request's conversion made besides its messages; `None` for the other
    /// wires.
    responses: Option<ResponsesKept>,
}

/// What converting a Responses request made of its body besides the chat messages of its
/// items, kept with the decoded request so that a request continuing it, whose kept items are
/// not converted again, is given the same ([`responses_rest_as_chat`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ResponsesKept {
    /// `instructions` as sent: absent, `null` or a string (a list of input items is read
    /// before the input, so such a body is always decoded whole). A continuing request must
    /// send the same.
    instructions: Option<Value>,
    /// How the client wrote its system prompt ([`ResponsesAsChat::system_form`]): the
    /// instructions and the developer messages the input opens with, which are kept items.
    system_form: Option<SystemForm>,
    /// How many kept items have no chat form ([`NotForwarded::ResponsesItem`]): each request
    /// re-sends them, and counts them again, as its whole body would.
    items_not_forwarded: usize,
}

impl ResponsesKept {
    /// What to keep of a Responses request whose body (as the client sent it) is `body` and
    /// whose conversion is `converted`; `None` when no request can continue it: it names a
    /// `previous_response_id` (its messages are those of another answer too), or its
    /// instructions are a list of items.
    pub fn of(body: &Value, converted: &ResponsesAsChat) -> Option<Self> {
        if body
            .get("previous_response_id")
            .is_some_and(|v| !v.is_null())
        {
            return None;
        }
        let instructions = match body.get("instructions") {
            None => None,
            Some(v @ (Value::Null | Value::String(_))) => Some(v.clone()),
            Some(_) => return None,
        };
        Some(Self {
            instructions,
            system_form: converted.system_form.clone(),
            items_not_forwarded: converted
                .not_forwarded
                .iter()
                .filter(|kind| **kind == NotForwarded::ResponsesItem)
                .count(),
        })
    }

    /// Whether the instructions made a system message at the head of the chat form.
    fn made_a_system_message(&self) -> bool {
        matches!(&self.instructions, Some(Value::String(text)) if !text.trim().is_empty())
    }
}

/// A request's continuation of a kept one: what was decoded before, and the body with only
/// the elements after it.
#[derive(Debug)]
pub struct Continuation {
    /// The kept request, taken out of the memo (it is kept again, extended, once decoded).
    pub prior: Decoded,
    /// The body with its `messages` array holding only the new elements.
    pub rest: Vec<u8>,
}

/// The kept requests, newest last.
#[derive(Debug, Default)]
pub struct InboundMemo {
    kept: Mutex<VecDeque<Decoded>>,
    next: std::sync::atomic::AtomicU64,
}

impl InboundMemo {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Decoded>> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Indexes `body`'s `messages` ([`raw_messages::index_known`]), recognising its leading
    /// elements by the bytes of the kept request that has the most of them (at least one
    /// element must be new): that request is taken out of the memo, and returned with the
    /// body without those elements. The kept bytes are compared, not scanned again.
    ///
    /// [`raw_messages::index_known`]: super::raw_messages::index_known
    pub fn index(&self, wire: Wire, body: &[u8]) -> (Option<MessageSlices>, Option<Continuation>) {
        let mut kept = self.lock();
        let mut chosen = None;
        let key = wire.conversation_key();
        let slices = super::raw_messages::index_known(body, key, |from_first| {
            let (at, d) = kept
                .iter()
                .enumerate()
                .filter(|(_, d)| d.wire == wire && from_first.starts_with(&d.raw))
                .max_by_key(|(_, d)| d.count)?;
            chosen = Some(at);
            Some((d.raw.len(), d.count))
        });
        let Some(slices) = slices else {
            return (None, None);
        };
        if slices.known == 0 {
            return (Some(slices), None);
        }
        let Some(prior) = chosen.and_then(|at| kept.remove(at)) else {
            return (Some(slices), None);
        };
        drop(kept);
        let new_from = slices
            .elements
            .first()
            .map_or(slices.known_end, |e| e.start);
        let mut rest = Vec::with_capacity(body.len() - (new_from - slices.start));
        rest.extend_from_slice(&body[..slices.start]);
        rest.extend_from_slice(&body[new_from..]);
        (Some(slices), Some(Continuation { prior, rest }))
    }

    /// Keeps what `body`'s messages decoded to (`request`), for the request that continues
    /// it, and says under which number. Requests holding messages the converter stamps other
    /// than by the request's time are not kept, nor Responses requests without `responses`.
    pub fn keep(
        &self,
        body: &Bytes,
        slices: &MessageSlices,
        request: &ClientRequest,
        responses: Option<ResponsesKept>,
    ) -> Option<u64> {
        let (wire, messages) = (request.wire, &request.messages);
        if slices.is_empty()
            || body.len() > MAX_KEPT_BYTES
            || !messages.iter().all(|m| restampable(m))
            || (wire == Wire::Responses && responses.is_none())
        {
            return None;
        }
        let generation = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let decoded = Decoded {
            generation,
            wire,
            model: request.model.clone(),
            raw: body.slice(slices.all()),
            body_len: body.len(),
            count: slices.len(),
            messages: Arc::clone(messages),
            system: request.system.clone(),
            breakpoints: request.breakpoints.clone(),
            responses: responses.filter(|_| wire == Wire::Responses),
        };
        let mut kept = self.lock();
        // `raw` is a slice of the body and keeps all of it: the budget counts whole bodies.
        let held = |kept: &VecDeque<Decoded>| kept.iter().map(|d| d.body_len).sum::<usize>();
        while kept.len() >= CAPACITY
            || (!kept.is_empty() && held(&kept) + body.len() > MAX_KEPT_BYTES)
        {
            kept.pop_front();
        }
        kept.push_back(decoded);
        Some(generation)
    }
}

impl Decoded {
    /// How many messages it holds.
    pub fn message_count(&self) -> usize {
        self.messages.len()
    }

    /// The messages, as the request that sent them decoded them (with its time).
    pub fn into_messages(self) -> Arc<Vec<SharedMessage>> {
        self.messages
    }
}

/// The chat form of a Responses request that continues `prior`: `rest` is its body with only
/// the items after `prior`'s. The conversion is [`responses_as_chat_after`]'s of the new items
/// (an output may answer a call among the kept messages), with what the whole body's would make
/// of the kept items beside their messages ([`ResponsesKept`]). `None` (the body is then read
/// whole) when the new items could convert otherwise after the kept ones: the kept
/// conversation ends with the model's message (a call or text among the new items would join
/// it), the instructions differ from the kept request's, the body names a
/// `previous_response_id`, or the new items do not convert.
pub fn responses_rest_as_chat(rest: &Value, prior: &Decoded) -> Option<ResponsesAsChat> {
    let kept = prior.responses.as_ref()?;
    let ends_with_the_clients = matches!(
        prior.messages.last().map(|m| &**m),
        Some(AgentMessage::User(_) | AgentMessage::ToolResult(_))
    );
    if prior.wire != Wire::Responses
        || !ends_with_the_clients
        || rest.get("instructions") != kept.instructions.as_ref()
        || rest
            .get("previous_response_id")
            .is_some_and(|v| !v.is_null())
    {
        return None;
    }
    let mut converted = responses_as_chat_after(rest, &prior.messages).ok()?;
    converted.system_form = kept.system_form.clone();
    converted.not_forwarded.extend(std::iter::repeat_n(
        NotForwarded::ResponsesItem,
        kept.items_not_forwarded,
    ));
    Some(converted)
}

/// Decodes a request that continues a kept one: `rest` is the body, sent in `wire` (a
/// Responses body in its chat form, [`responses_rest_as_chat`]), with only the messages after
/// `prior`'s, which are taken as they were decoded and kept with their time. The result is
/// what [`decode`] makes of the whole body at `now_ms` but for the time of those messages (see
/// the module docs). `None` when the new messages cannot be decoded apart from the kept ones
/// ([`decodes_apart`]), when the model differs from the kept request's, or when the rest is not
/// a valid request (the caller then decodes the whole body, so that an error names the message
/// by its place in the whole array).
pub fn decode_continuing(
    wire: Wire,
    rest: &Value,
    mut prior: Decoded,
    now_ms: u64,
) -> Option<ClientRequest> {
    let new = rest.get("messages")?.as_array()?;
    if prior.wire != wire || !decodes_apart(wire, new, prior.responses.as_ref()) {
        return None;
    }
    let mut request = decode(wire, rest, now_ms).ok()?;
    if request.model != prior.model {
        return None;
    }
    // A chat client's system messages are part of `messages` (none is new, so the kept ones
    // make the prompt), as a Responses client's opening developer messages are (with the same
    // instructions); an Anthropic client's `system` is a field of the rest.
    if matches!(wire, Wire::OpenAi | Wire::Responses) {
        request.system = prior.system.clone();
    }
    request.seen.continues = Some((prior.generation, prior.message_count()));
    let mut breakpoints = std::mem::take(&mut prior.breakpoints);
    breakpoints.append(&mut request.breakpoints);
    request.breakpoints = breakpoints;
    let mut messages = prior.into_messages();
    std::sync::Arc::make_mut(&mut messages).extend(std::sync::Arc::unwrap_or_clone(
        std::mem::take(&mut request.messages),
    ));
    request.messages = messages;
    Some(request)
}

/// Whether `new`, the messages after a kept request's, decode alone as they do after it. The
/// converters carry little from one message to the next, and what they carry rules these out:
/// - chat completions: a tool result first (its call is kept; the request checks want it right
///   after its assistant message), a system message (the prompt joins them all), a legacy
///   `function_call` or a tool call without an id (the converter numbers those per request);
/// - Anthropic messages: a `tool_result` answering a call not made among the new messages
///   before it (its name comes from the kept `tool_use`), a message of another role (kept
///   whole in its place among the others), a message with an `id` (the importer merges a
///   response split across messages by its id);
/// - Responses: judged as the chat messages its new items became, after the system message
///   its instructions make, which is the kept request's (`responses`: the instructions are the
///   same, [`responses_rest_as_chat`]); never without what was kept of its conversion.
fn decodes_apart(wire: Wire, new: &[Value], responses: Option<&ResponsesKept>) -> bool {
    fn role(m: &Value) -> &str {
        m.get("role").and_then(Value::as_str).unwrap_or("")
    }
    let Some(first) = new.first() else {
        return false;
    };
    match wire {
        Wire::OpenAi => {
            !matches!(role(first), "tool" | "function")
                && new.iter().all(|m| {
                    let calls_have_ids =
                        m.get("tool_calls")
                            .and_then(Value::as_array)
                            .is_none_or(|calls| {
                                calls
                                    .iter()
                                    .all(|c| c.get("id").is_some_and(Value::is_string))
                            });
                    matches!(role(m), "user" | "assistant" | "tool")
                        && m.get("function_call").is_none()
                        && calls_have_ids
                })
        }
        Wire::Anthropic => {
            // A `tool_result` takes its tool's name from the `tool_use` it answers: one that
            // answers a kept call (or none before it among the new messages) would be named
            // otherwise without the kept messages.
            fn blocks(m: &Value) -> &[Value] {
                m.get("content")
                    .and_then(Value::as_array)
                    .map_or(&[][..], Vec::as_slice)
            }
            let mut calls: Vec<&str> = Vec::new();
            let mut answers_a_kept_call = false;
            for block in new.iter().flat_map(blocks) {
                match block.get("type").and_then(Value::as_str) {
                    Some("tool_use") => calls.extend(block.get("id").and_then(Value::as_str)),
                    Some("tool_result") => {
                        let answered = block.get("tool_use_id").and_then(Value::as_str);
                        answers_a_kept_call |= !answered.is_some_and(|id| calls.contains(&id));
                    }
                    _ => {}
                }
            }
            !answers_a_kept_call
                && new
                    .iter()
                    .all(|m| matches!(role(m), "user" | "assistant") && m.get("id").is_none())
        }
        Wire::Responses => responses.is_some_and(|kept| {
            let head = usize::from(kept.made_a_system_message());
            new.len() > head && decodes_apart(Wire::OpenAi, &new[head..], None)
        }),
    }
}

fn restampable(message: &AgentMessage) -> bool {
    matches!(
        message,
        AgentMessage::User(_) | AgentMessage::Assistant(_) | AgentMessage::ToolResult(_)
    )
}

/// `message` as a request decoded at `now_ms` stores it: the same allocation when it carries
/// that time (every message the request decoded itself), else a copy stamped with it (a
/// message taken from the memo that this request stores as new: in another conversation, or
/// on a new branch).
pub fn stamped(message: &SharedMessage, now_ms: u64) -> SharedMessage {
    if !restampable(message) || message.timestamp() == Some(now_ms) {
        return Arc::clone(message);
    }
    let mut copy = AgentMessage::clone(message);
    match &mut copy {
        AgentMessage::User(m) => m.timestamp = now_ms,
        AgentMessage::Assistant(m) => m.timestamp = now_ms,
        AgentMessage::ToolResult(m) => m.timestamp = now_ms,
        _ => {}
    }
    Arc::new(copy)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "inbound_memo_tests.rs"]
mod tests;
