use serde_json::{Value, json};

use super::*;
use crate::serve::inbound::{ClientRequest, Wire, decode};

/// What a request means, its messages as the request stores them ([`stamped`] with its time:
/// the kept ones carry the time of the request that first sent them).
fn shown(r: &ClientRequest) -> Value {
    let at_now = |m: &AgentMessage| stamped(&std::sync::Arc::new(m.clone()), r.now_ms);
    json!({
        "model": r.model,
        "system": r.system,
        "messages": r.messages.iter().map(|m| stamped(m, r.now_ms)).collect::<Vec<_>>(),
        "breakpoints": r.breakpoints.iter().map(at_now).collect::<Vec<_>>(),
        "tools": format!("{:?}", r.tools),
        "stream": r.stream,
        "max_tokens": r.max_tokens,
        "not_forwarded": format!("{:?}", r.not_forwarded),
        "fields": format!("{:?}", r.fields),
    })
}

/// Decodes `body` as the server does: from a kept request when one matches, whole otherwise;
/// then keeps it. Returns the request and whether it continued a kept one.
fn decode_as_server(memo: &InboundMemo, body: &[u8], now_ms: u64) -> (ClientRequest, bool) {
    decode_in(Wire::OpenAi, memo, body, now_ms)
}

fn decode_in(wire: Wire, memo: &InboundMemo, body: &[u8], now_ms: u64) -> (ClientRequest, bool) {
    let body = &Bytes::copy_from_slice(body);
    let (slices, continuation) = memo.index(wire, body);
    let slices = slices.expect("the body is indexed");
    let continued = continuation.and_then(|c| {
        let rest: Value = serde_json::from_slice(&c.rest).ok()?;
        decode_continuing(wire, &rest, c.prior, now_ms)
    });
    let (request, continued) = match continued {
        Some(r) => (r, true),
        None => {
            let whole: Value = serde_json::from_slice(body).unwrap();
            (decode(wire, &whole, now_ms).unwrap(), false)
        }
    };
    memo.keep(body, &slices, &request, None);
    (request, continued)
}

/// A body of `head`'s fields and `messages`, the elements joined by `separator`.
fn body_of(head: Value, messages: &[Value], separator: &str) -> Vec<u8> {
    let head = serde_json::to_string(&head).unwrap();
    let list: Vec<String> = messages
        .iter()
        .map(|m| serde_json::to_string(m).unwrap())
        .collect();
    format!(
        "{}, \"messages\" : [ {} ] }}",
        &head[..head.len() - 1],
        list.join(separator)
    )
    .into_bytes()
}

fn body(model: &str, messages: &[Value]) -> Vec<u8> {
    // Written with odd spacing, as some clients do: the memo compares bytes, not values.
    let head = json!({"model": model, "stream": false, "temperature": 0.2,
        "tools": [{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}]});
    body_of(head, messages, " ,\n ")
}

fn call(id: &str, path: &str) -> Value {
    json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
        "function": {"name": "read", "arguments": format!("{{\"path\": \"{path}\"}}")}}]})
}

fn result(id: &str, text: &str) -> Value {
    json!({"role": "tool", "tool_call_id": id, "content": text})
}

/// A conversation growing turn by turn decodes, from the kept part plus the new messages,
/// to exactly what its whole body decodes to; the kept messages are the very allocations the
/// request before decoded (shared, never copied: one parsed copy), with that request's time,
/// and only the new ones carry this request's.
#[test]
fn a_continuing_request_decodes_as_its_whole_body_does() {
    let memo = InboundMemo::default();
    let mut messages = vec![
        json!({"role": "system", "content": "You are terse."}),
        json!({"role": "user", "content": [{"type": "text", "text": "read \"a\\b\" ✓",
            "cache_control": {"type": "ephemeral"}}]}),
    ];
    let mut continued_count = 0;
    let mut before: Option<std::sync::Arc<Vec<rampart_message::SharedMessage>>> = None;
    for turn in 0..6u64 {
        let now = 1_000 + turn;
        let bytes = body("gpt-x", &messages);
        let (got, continued) = decode_as_server(&memo, &bytes, now);
        let whole: Value = serde_json::from_slice(&bytes).unwrap();
        let expected = decode(Wire::OpenAi, &whole, now).unwrap();
        assert_eq!(shown(&got), shown(&expected), "turn {turn}");
        let kept = before.as_ref().filter(|_| continued).map_or(0, |b| b.len());
        for (i, m) in got.messages.iter().enumerate() {
            if i < kept {
                let prior = &before.as_ref().unwrap()[i];
                assert!(
                    std::sync::Arc::ptr_eq(m, prior),
                    "turn {turn}: message {i} copied"
                );
                assert!(
                    m.timestamp() < Some(now),
                    "turn {turn}: message {i} restamped"
                );
            } else {
                assert_eq!(m.timestamp(), Some(now), "turn {turn}: new message {i}");
            }
        }
        before = Some(std::sync::Arc::clone(&got.messages));
        continued_count += usize::from(continued);
        // The next request: the answer, a tool round, a new user line.
        let id = format!("c{turn}");
        messages.push(call(&id, &format!("src/{turn}.rs")));
        messages.push(result(&id, &format!("fn f{turn}() {{}}\n\t\"quoted\"")));
        messages.push(json!({"role": "assistant", "content": format!("done {turn}")}));
        // A client's breakpoint on the newest line (as Claude Code and pi place them): the
        // continuation keeps the kept messages' breakpoints and adds the new ones'.
        messages.push(json!({"role": "user", "content": [{"type": "text",
            "text": format!("next {turn}"), "cache_control": {"type": "ephemeral"}}]}));
    }
    assert_eq!(
        continued_count, 5,
        "every request after the first continued a kept one"
    );
}

/// What cannot be decoded apart from the kept messages goes down the whole path, and decodes
/// as the whole body does: a tool result first (its call is kept), a new system message, a
/// call without an id, another model, an edited earlier message.
#[test]
fn what_cannot_be_decoded_apart_is_decoded_whole() {
    let start = vec![
        json!({"role": "system", "content": "sys"}),
        json!({"role": "user", "content": "go"}),
        call("c1", "a.rs"),
    ];
    let cases: Vec<(&str, &str, Vec<Value>)> = vec![
        ("a tool result first", "m", vec![result("c1", "x")]),
        (
            "a new system message",
            "m",
            vec![
                result("c1", "x"),
                json!({"role": "system", "content": "more"}),
                json!({"role": "user", "content": "u"}),
            ],
        ),
    ];
    for (what, model, more) in cases {
        let memo = InboundMemo::default();
        decode_as_server(&memo, &body("m", &start), 1);
        let messages = [start.clone(), more].concat();
        let bytes = body(model, &messages);
        let (got, continued) = decode_as_server(&memo, &bytes, 2);
        let whole: Value = serde_json::from_slice(&bytes).unwrap();
        assert!(!continued, "{what}");
        assert_eq!(
            shown(&got),
            shown(&decode(Wire::OpenAi, &whole, 2).unwrap()),
            "{what}"
        );
    }
    // A new system message, a call without an id, after a plain user line.
    for (what, more) in [
        (
            "a system message",
            vec![
                result("c1", "x"),
                json!({"role": "user", "content": "u"}),
                json!({"role": "system", "content": "late"}),
            ],
        ),
        (
            "a call without an id",
            vec![
                result("c1", "x"),
                json!({"role": "user", "content": "u"}),
                json!({"role": "assistant", "content": null, "tool_calls": [{"type": "function",
                    "function": {"name": "read", "arguments": "{}"}}]}),
            ],
        ),
    ] {
        let memo = InboundMemo::default();
        let first = [start.clone(), vec![result("c1", "x")]].concat();
        decode_as_server(&memo, &body("m", &first), 1);
        let messages = [start.clone(), more].concat();
        let bytes = body("m", &messages);
        let c = memo
            .index(Wire::OpenAi, &bytes)
            .1
            .expect("the kept part matches");
        let rest: Value = serde_json::from_slice(&c.rest).unwrap();
        assert!(
            decode_continuing(Wire::OpenAi, &rest, c.prior, 2).is_none(),
            "{what}"
        );
    }
    // Another model: the converter records the model on assistant messages.
    let memo = InboundMemo::default();
    let plain = [json!({"role": "user", "content": "go"})];
    decode_as_server(&memo, &body("m", &plain), 1);
    let more = [
        plain[0].clone(),
        json!({"role": "assistant", "content": "ok"}),
        json!({"role": "user", "content": "u"}),
    ];
    let bytes = body("other", &more);
    let (got, continued) = decode_as_server(&memo, &bytes, 2);
    assert!(!continued, "another model");
    let whole: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        shown(&got),
        shown(&decode(Wire::OpenAi, &whole, 2).unwrap())
    );
    // An edit of an earlier message: nothing kept matches it.
    let memo = InboundMemo::default();
    decode_as_server(&memo, &body("m", &start), 1);
    let mut edited = start.clone();
    edited[1] = json!({"role": "user", "content": "go!"});
    edited.push(result("c1", "x"));
    let bytes = body("m", &edited);
    assert!(memo.index(Wire::OpenAi, &bytes).1.is_none());
}

/// The newest requests are kept, up to the capacity; the oldest go first.
#[test]
fn only_the_newest_requests_are_kept() {
    let memo = InboundMemo::default();
    let first = |i: usize| vec![json!({"role": "user", "content": format!("conversation {i}")})];
    for i in 0..=CAPACITY {
        decode_as_server(&memo, &body("m", &first(i)), 1);
    }
    let continues = |i: usize| {
        let mut messages = first(i);
        messages.push(json!({"role": "assistant", "content": "ok"}));
        let bytes = body("m", &messages);
        memo.index(Wire::OpenAi, &bytes).1.is_some()
    };
    assert!(!continues(0), "the oldest was let go");
    assert!(continues(CAPACITY));
}

fn anthropic_body(messages: &[Value]) -> Vec<u8> {
    let head = json!({"model": "claude-x", "max_tokens": 1024,
        "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
        "tools": [{"name": "read", "input_schema": {"type": "object"}}]});
    body_of(head, messages, ",")
}

/// An Anthropic conversation (tool_use and tool_result blocks, breakpoints moving) decodes,
/// from the kept part plus the new messages, to what its whole body decodes to; a new message
/// of tool results first, or one with an `id`, goes down the whole path; and bytes kept from
/// a chat request are never taken for an Anthropic one.
#[test]
fn an_anthropic_conversation_decodes_as_its_whole_body_does() {
    let memo = InboundMemo::default();
    let mut messages = vec![json!({"role": "user", "content": [{"type": "text",
        "text": "fix the \"bug\"\n", "cache_control": {"type": "ephemeral"}}]})];
    let mut continued_count = 0;
    for turn in 0..5u64 {
        let now = 2_000 + turn;
        let bytes = anthropic_body(&messages);
        let (got, continued) = decode_in(Wire::Anthropic, &memo, &bytes, now);
        let whole: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            shown(&got),
            shown(&decode(Wire::Anthropic, &whole, now).unwrap()),
            "turn {turn}"
        );
        continued_count += usize::from(continued);
        let id = format!("toolu_{turn}");
        messages.push(json!({"role": "assistant", "content": [
            {"type": "text", "text": "reading"},
            {"type": "tool_use", "id": id, "name": "read", "input": {"path": format!("{turn}.rs")}}]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": "fn x() {}\n"},
            {"type": "text", "text": format!("now {turn}")}]}));
    }
    assert_eq!(continued_count, 4);

    // Tool results first: their tool_use is in the kept part.
    let start = &messages[..messages.len() - 1];
    let memo = InboundMemo::default();
    decode_in(Wire::Anthropic, &memo, &anthropic_body(start), 1);
    let c = memo
        .index(Wire::Anthropic, &anthropic_body(&messages))
        .1
        .expect("the kept part matches");
    let rest: Value = serde_json::from_slice(&c.rest).unwrap();
    assert!(decode_continuing(Wire::Anthropic, &rest, c.prior, 2).is_none());
    // A message with an id may be half of a response split across messages.
    let memo = InboundMemo::default();
    decode_in(Wire::Anthropic, &memo, &anthropic_body(&messages), 1);
    let with_id = [
        messages.clone(),
        vec![json!({"role": "assistant", "id": "msg_1", "content": "ok"})],
    ]
    .concat();
    let c = memo
        .index(Wire::Anthropic, &anthropic_body(&with_id))
        .1
        .expect("the kept part matches");
    let rest: Value = serde_json::from_slice(&c.rest).unwrap();
    assert!(decode_continuing(Wire::Anthropic, &rest, c.prior, 2).is_none());
    // Kept from a chat request, never taken for an Anthropic one.
    let memo = InboundMemo::default();
    let chat = [json!({"role": "user", "content": "same bytes"})];
    decode_as_server(&memo, &body("claude-x", &chat), 1);
    let more = [
        chat[0].clone(),
        json!({"role": "assistant", "content": "ok"}),
    ];
    assert!(
        memo.index(Wire::Anthropic, &body("claude-x", &more))
            .1
            .is_none()
    );
    assert!(
        memo.index(Wire::OpenAi, &body("claude-x", &more))
            .1
            .is_some()
    );
}

/// Kept bodies stay within the byte budget: one larger than it is not kept, and keeping one
/// lets the oldest go until the rest fit.
#[test]
fn kept_bodies_stay_within_the_budget() {
    let memo = InboundMemo::default();
    let text = |i: usize, len: usize| {
        vec![json!({"role": "user", "content": format!("{i} {}", "x".repeat(len))})]
    };
    let continues = |i: usize, len: usize| {
        let mut messages = text(i, len);
        messages.push(json!({"role": "assistant", "content": "ok"}));
        memo.index(Wire::OpenAi, &body("m", &messages)).1.is_some()
    };
    decode_as_server(&memo, &body("m", &text(0, MAX_KEPT_BYTES)), 1);
    assert!(
        !continues(0, MAX_KEPT_BYTES),
        "larger than the budget: not kept"
    );
    let half = MAX_KEPT_BYTES / 2 - 1024;
    for i in 1..=3 {
        decode_as_server(&memo, &body("m", &text(i, half)), 1);
    }
    assert!(!continues(1, half), "the oldest went to make room");
    assert!(continues(3, half));
}

/// A message stored as new is stamped with the storing request's time: one the request
/// decoded itself already carries it and is stored as the same allocation; one taken from the
/// memo (stored in another conversation, or on a new branch) is copied with the new time, and
/// the memo's copy keeps its own.
#[test]
fn a_kept_message_stored_again_takes_the_storing_requests_time() {
    let fresh = std::sync::Arc::new(AgentMessage::user_text("new", 2_000));
    assert!(std::sync::Arc::ptr_eq(&stamped(&fresh, 2_000), &fresh));
    let kept = std::sync::Arc::new(AgentMessage::user_text("old", 1_000));
    let stored = stamped(&kept, 2_000);
    assert!(!std::sync::Arc::ptr_eq(&stored, &kept));
    assert_eq!(stored.timestamp(), Some(2_000));
    assert_eq!(kept.timestamp(), Some(1_000));
    let mut back = AgentMessage::clone(&stored);
    if let AgentMessage::User(u) = &mut back {
        u.timestamp = 1_000;
    }
    assert_eq!(back, *kept, "only the time differs");
}

/// Decodes a Responses `body` as the server does: its new items converted after a kept
/// request's when one matches and they convert apart, the whole body otherwise; then keeps it.
/// Returns the request, with the conversion's system form and its items with no chat form
/// joined in as the server joins them, and whether it continued a kept one.
fn decode_responses(memo: &InboundMemo, body: &[u8], now_ms: u64) -> (ClientRequest, bool) {
    use crate::serve::inbound::responses_as_chat;
    let body = &Bytes::copy_from_slice(body);
    let (slices, continuation) = memo.index(Wire::Responses, body);
    let slices = slices.expect("the input is indexed");
    let continued = continuation.and_then(|c| {
        let rest: Value = serde_json::from_slice(&c.rest).ok()?;
        let converted = responses_rest_as_chat(&rest, &c.prior)?;
        let request = decode_continuing(Wire::Responses, &converted.chat, c.prior, now_ms)?;
        Some((rest, converted, request))
    });
    let (raw, converted, mut request, continued) = match continued {
        Some((rest, converted, request)) => (rest, converted, request, true),
        None => {
            let whole: Value = serde_json::from_slice(body).unwrap();
            let converted = responses_as_chat(&whole).unwrap();
            let request = decode(Wire::Responses, &converted.chat, now_ms).unwrap();
            (whole, converted, request, false)
        }
    };
    let kept = ResponsesKept::of(&raw, &converted);
    request.system_form = converted.system_form.clone();
    request
        .not_forwarded
        .extend(converted.not_forwarded.iter().copied());
    request.not_forwarded.sort();
    memo.keep(body, &slices, &request, kept);
    (request, continued)
}

/// A Responses body of `instructions` and `input`, as the Codex CLI writes one.
fn responses_body(instructions: Value, input: &[Value]) -> Vec<u8> {
    let mut body = json!({"model": "gpt-x", "instructions": instructions, "store": false,
        "stream": true, "tools": [{"type": "function", "name": "shell",
            "parameters": {"type": "object"}}, {"type": "web_search"}],
        "input": input});
    if instructions.is_null() {
        body.as_object_mut().unwrap().remove("instructions");
    }
    serde_json::to_vec(&body).unwrap()
}

/// The opening of a Codex conversation: developer and user context, then the task.
fn codex_opening() -> Vec<Value> {
    vec![
        json!({"type": "message", "role": "developer",
            "content": [{"type": "input_text", "text": "<permissions>sandboxed</permissions>"}]}),
        json!({"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "<environment_context>cwd /w</environment_context>"}]}),
        json!({"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "fix \"the\" bug ✓"}]}),
    ]
}

/// One tool round of the model's: its reasoning, a call, and the call's output.
fn codex_round(turn: u64) -> Vec<Value> {
    let id = format!("call_{turn}");
    vec![
        json!({"type": "reasoning", "id": format!("rs_{turn}"), "summary": [],
            "encrypted_content": format!("gAAA{turn}")}),
        json!({"type": "function_call", "name": "shell", "call_id": id,
            "arguments": format!("{{\"command\":[\"cat\",\"src/{turn}.rs\"]}}")}),
        json!({"type": "function_call_output", "call_id": id,
            "output": format!("fn f{turn}() {{}}\n\t\"quoted\"")}),
    ]
}

/// A Codex conversation growing turn by turn decodes, from the kept items plus the new ones,
/// to exactly what its whole body decodes to: the same messages (the kept ones the very
/// allocations decoded before), the system prompt its instructions and opening developer
/// message make, the same system form, and the same count of items with no chat form (each
/// request counts every item it sends, as a whole body would).
#[test]
fn a_continuing_responses_request_decodes_as_its_whole_body_does() {
    let memo = InboundMemo::default();
    let instructions = json!("You are Codex.");
    let mut input = codex_opening();
    let mut continued_count = 0;
    let mut before: Option<Arc<Vec<SharedMessage>>> = None;
    for turn in 0..6u64 {
        let now = 1_000 + turn;
        let bytes = responses_body(instructions.clone(), &input);
        let (got, continued) = decode_responses(&memo, &bytes, now);
        let whole: Value = serde_json::from_slice(&bytes).unwrap();
        let converted = crate::serve::inbound::responses_as_chat(&whole).unwrap();
        let mut expected = decode(Wire::Responses, &converted.chat, now).unwrap();
        expected.not_forwarded.extend(converted.not_forwarded);
        expected.not_forwarded.sort();
        assert_eq!(shown(&got), shown(&expected), "turn {turn}");
        assert_eq!(got.system_form, converted.system_form, "turn {turn}");
        assert!(got.system.as_deref().unwrap().contains("sandboxed"));
        let kept = before.as_ref().filter(|_| continued).map_or(0, |b| b.len());
        for (i, m) in got.messages.iter().enumerate().take(kept) {
            assert!(
                Arc::ptr_eq(m, &before.as_ref().unwrap()[i]),
                "turn {turn}: message {i} copied"
            );
        }
        before = Some(Arc::clone(&got.messages));
        continued_count += usize::from(continued);
        // The next request: a tool round, and on odd turns the model's text and a new line.
        input.extend(codex_round(turn));
        if turn % 2 == 1 {
            input.push(json!({"type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": format!("done {turn}")}]}));
            input.push(json!({"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": format!("next {turn}")}]}));
        }
    }
    assert_eq!(
        continued_count, 5,
        "every request after the first continued a kept one"
    );
}

/// What a Responses request cannot convert apart from the kept items goes down the whole path
/// and decodes as the whole body does: changed instructions, a kept conversation that ends
/// with the model's message (the next call joins it), a new developer message, a body naming a
/// `previous_response_id`, and instructions given as items.
#[test]
fn what_a_responses_request_cannot_convert_apart_is_decoded_whole() {
    let opening = codex_opening();
    let ends_with_the_model = [
        opening.clone(),
        vec![json!({"type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": "looking"}]})],
    ]
    .concat();
    let cases: Vec<(&str, Vec<u8>, Vec<u8>)> = vec![
        (
            "changed instructions",
            responses_body(json!("A"), &opening),
            responses_body(json!("B"), &[opening.clone(), codex_round(0)].concat()),
        ),
        (
            "a kept conversation ending with the model's message",
            responses_body(json!("A"), &ends_with_the_model),
            responses_body(
                json!("A"),
                &[ends_with_the_model.clone(), codex_round(0)].concat(),
            ),
        ),
        (
            "a new developer message",
            responses_body(json!("A"), &opening),
            responses_body(
                json!("A"),
                &[
                    opening.clone(),
                    vec![json!({"type": "message", "role": "developer",
                        "content": [{"type": "input_text", "text": "later"}]})],
                    codex_round(0),
                ]
                .concat(),
            ),
        ),
        (
            "instructions given as items",
            responses_body(
                json!([{"type": "message", "role": "developer", "content": "rules"}]),
                &opening,
            ),
            responses_body(
                json!([{"type": "message", "role": "developer", "content": "rules"}]),
                &[opening.clone(), codex_round(0)].concat(),
            ),
        ),
    ];
    for (what, first, second) in cases {
        let memo = InboundMemo::default();
        decode_responses(&memo, &first, 1);
        let (got, continued) = decode_responses(&memo, &second, 2);
        assert!(!continued, "{what}");
        let whole: Value = serde_json::from_slice(&second).unwrap();
        let converted = crate::serve::inbound::responses_as_chat(&whole).unwrap();
        let mut expected = decode(Wire::Responses, &converted.chat, 2).unwrap();
        expected.not_forwarded.extend(converted.not_forwarded);
        expected.not_forwarded.sort();
        assert_eq!(shown(&got), shown(&expected), "{what}");
        assert_eq!(got.system_form, converted.system_form, "{what}");
    }
    // A body naming a previous answer is not kept: its messages are that answer's too.
    let memo = InboundMemo::default();
    let mut named: Value = serde_json::from_slice(&responses_body(json!("A"), &opening)).unwrap();
    named["previous_response_id"] = json!("resp_1");
    let bytes = serde_json::to_vec(&named).unwrap();
    let converted = crate::serve::inbound::responses_as_chat(&named).unwrap();
    assert_eq!(ResponsesKept::of(&named, &converted), None);
    decode_responses(&memo, &bytes, 1);
    let next = responses_body(json!("A"), &[opening.clone(), codex_round(0)].concat());
    assert!(memo.index(Wire::Responses, &next).1.is_none());
}

/// The conversation `kinds` make, each element made by `make` from its kind, its place and the
/// place of the latest element of kind `call` before it (the call an output answers).
fn generated(kinds: &[u8], call: u8, make: fn(u8, usize, Option<usize>) -> Value) -> Vec<Value> {
    let mut last_call = None;
    kinds
        .iter()
        .enumerate()
        .map(|(i, kind)| {
            let element = make(*kind, i, last_call);
            if *kind == call {
                last_call = Some(i);
            }
            element
        })
        .collect()
}

/// Sends `messages` through one memo as a client re-sends its conversation, `cuts` more of it
/// each request (each body written by `body`), and checks that every request reads as its
/// whole body decodes ([`decode_in`]), and that a body the whole path refuses is never read
/// through the memo.
fn memo_reads_as_whole(
    wire: Wire,
    messages: &[Value],
    cuts: &[usize],
    body: impl Fn(&[Value]) -> Vec<u8>,
) -> Result<(), proptest::test_runner::TestCaseError> {
    let memo = InboundMemo::default();
    let mut end = 0;
    for (step, cut) in cuts.iter().enumerate() {
        end = (end + cut).min(messages.len());
        let bytes = body(&messages[..end]);
        let now = 1_000 + step as u64;
        let whole: Value = serde_json::from_slice(&bytes).unwrap();
        let Ok(expected) = decode(wire, &whole, now) else {
            let body = Bytes::copy_from_slice(&bytes);
            if let (_, Some(c)) = memo.index(wire, &body) {
                let rest: Value = serde_json::from_slice(&c.rest).unwrap();
                proptest::prop_assert!(
                    decode_continuing(wire, &rest, c.prior, now).is_none(),
                    "step {}: accepted through the memo",
                    step
                );
            }
            continue;
        };
        let (got, _) = decode_in(wire, &memo, &bytes, now);
        proptest::prop_assert_eq!(shown(&got), shown(&expected), "step {}", step);
    }
    Ok(())
}

/// One Responses input item of kind `kind` (numbered `i`, answering call `last_call`), for
/// [`responses_memo_matches_the_whole_decoding`].
fn generated_item(kind: u8, i: usize, last_call: Option<usize>) -> Value {
    let text = |t: &str| format!("{t} {i}: \"q\" \\ ✓\n");
    match kind {
        0 => json!({"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": text("ask")}]}),
        1 => json!({"type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": text("said")}]}),
        2 => json!({"type": "reasoning", "id": format!("rs_{i}"), "summary": [],
            "encrypted_content": format!("gAAA{i}")}),
        3 => json!({"type": "function_call", "name": "shell", "call_id": format!("call_{i}"),
            "arguments": format!("{{\"n\":{i}}}")}),
        4 => json!({"type": "function_call_output",
            "call_id": last_call.map_or_else(|| "call_none".to_owned(), |c| format!("call_{c}")),
            "output": text("out")}),
        5 => json!({"type": "message", "role": "developer",
            "content": [{"type": "input_text", "text": text("rule")}]}),
        6 => json!({"type": "custom_tool_call", "name": "apply_patch",
            "call_id": format!("custom_{i}"), "input": text("patch")}),
        7 => json!({"type": "custom_tool_call_output", "call_id": format!("custom_{i}"),
            "output": text("patched")}),
        _ => json!({"type": "function_call", "name": "shell", "arguments": "{}"}),
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

    /// Whatever a Codex-like client sends, turn after turn, the memo's reading of each request
    /// is the whole body's: the same messages, system prompt, system form and uncounted items,
    /// and a body the whole path refuses is never accepted through the memo.
    #[test]
    fn responses_memo_matches_the_whole_decoding(
        kinds in proptest::collection::vec(0u8..9, 1..28),
        cuts in proptest::collection::vec(1usize..5, 1..12),
        instructions_change_at in proptest::option::of(0usize..12),
    ) {
        let items = generated(&kinds, 3, generated_item);
        let memo = InboundMemo::default();
        let mut end = 0;
        for (step, cut) in cuts.iter().enumerate() {
            end = (end + cut).min(items.len());
            let instructions = if instructions_change_at.is_some_and(|at| step >= at) {
                json!("changed")
            } else {
                json!("You are Codex.")
            };
            let bytes = responses_body(instructions, &items[..end]);
            let now = 1_000 + step as u64;
            let whole: Value = serde_json::from_slice(&bytes).unwrap();
            let expected = crate::serve::inbound::responses_as_chat(&whole).and_then(|c| {
                let mut r = decode(Wire::Responses, &c.chat, now)?;
                r.not_forwarded.extend(c.not_forwarded.iter().copied());
                r.not_forwarded.sort();
                r.system_form = c.system_form;
                Ok(r)
            });
            let Ok(expected) = expected else {
                // Refused whole: the memo must not read it either.
                let body = Bytes::copy_from_slice(&bytes);
                if let (_, Some(c)) = memo.index(Wire::Responses, &body) {
                    let rest: Value = serde_json::from_slice(&c.rest).unwrap();
                    let read = responses_rest_as_chat(&rest, &c.prior).and_then(|converted| {
                        decode_continuing(Wire::Responses, &converted.chat, c.prior, now)
                    });
                    proptest::prop_assert!(read.is_none(), "step {step}: accepted through the memo");
                }
                continue;
            };
            let (got, _) = decode_responses(&memo, &bytes, now);
            proptest::prop_assert_eq!(shown(&got), shown(&expected), "step {}", step);
            proptest::prop_assert_eq!(&got.system_form, &expected.system_form, "step {}", step);
        }
    }
}

/// One chat-completions message of kind `kind` (numbered `i`, answering call `last_call`),
/// for [`chat_memo_matches_the_whole_decoding`].
fn generated_message(kind: u8, i: usize, last_call: Option<usize>) -> Value {
    let text = |t: &str| format!("{t} {i}: \"q\" \\ ✓\n");
    match kind {
        0 => json!({"role": "user", "content": text("ask")}),
        1 => json!({"role": "assistant", "content": text("said")}),
        2 => call(&format!("call_{i}"), &format!("src/{i}.rs")),
        3 => result(
            &last_call.map_or_else(|| "call_none".to_owned(), |c| format!("call_{c}")),
            &text("out"),
        ),
        4 => json!({"role": "system", "content": text("rule")}),
        5 => json!({"role": "user", "content": [{"type": "text", "text": text("marked"),
            "cache_control": {"type": "ephemeral"}}]}),
        6 => json!({"role": "assistant", "content": null, "tool_calls": [{"type": "function",
            "function": {"name": "read", "arguments": "{}"}}]}),
        _ => json!({"role": "user", "name": "dev", "content": text("named")}),
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

    /// Whatever a chat-completions client sends, turn after turn, the memo's reading of each
    /// request is the whole body's, and a body the whole path refuses is never accepted
    /// through the memo.
    #[test]
    fn chat_memo_matches_the_whole_decoding(
        kinds in proptest::collection::vec(0u8..8, 1..28),
        cuts in proptest::collection::vec(1usize..5, 1..12),
    ) {
        memo_reads_as_whole(
            Wire::OpenAi,
            &generated(&kinds, 2, generated_message),
            &cuts,
            |messages| body("gpt-x", messages),
        )?;
    }
}

/// One Anthropic message of kind `kind` (numbered `i`, answering call `last_call`), for
/// [`anthropic_memo_matches_the_whole_decoding`].
fn generated_anthropic(kind: u8, i: usize, last_call: Option<usize>) -> Value {
    let text = |t: &str| format!("{t} {i}: \"q\" \\ ✓\n");
    match kind {
        0 => json!({"role": "user", "content": text("ask")}),
        1 => json!({"role": "assistant", "content": [{"type": "text", "text": text("said")}]}),
        2 => json!({"role": "assistant", "content": [{"type": "text", "text": text("calling")},
            {"type": "tool_use", "id": format!("toolu_{i}"), "name": "read",
             "input": {"path": format!("src/{i}.rs")}}]}),
        3 => json!({"role": "user", "content": [{"type": "tool_result",
            "tool_use_id": last_call.map_or_else(|| "toolu_none".to_owned(), |c| format!("toolu_{c}")),
            "content": text("out")}]}),
        4 => json!({"role": "system", "content": text("agents")}),
        5 => json!({"role": "user", "content": [{"type": "text", "text": text("marked"),
            "cache_control": {"type": "ephemeral"}}]}),
        _ => json!({"role": "assistant", "id": format!("msg_{}", i / 2),
            "content": [{"type": "text", "text": text("split")}]}),
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

    /// Whatever an Anthropic client sends, turn after turn, the memo's reading of each request
    /// is the whole body's, and a body the whole path refuses is never accepted through the
    /// memo.
    #[test]
    fn anthropic_memo_matches_the_whole_decoding(
        kinds in proptest::collection::vec(0u8..7, 1..28),
        cuts in proptest::collection::vec(1usize..5, 1..12),
    ) {
        memo_reads_as_whole(
            Wire::Anthropic,
            &generated(&kinds, 2, generated_anthropic),
            &cuts,
            anthropic_body,
        )?;
    }
}

/// A tool result that answers a kept call from further down the new messages (a client that
/// put a line of its own first) keeps its tool's name: found by the property test above, where
/// the continuation named it `unknown`.
#[test]
fn an_anthropic_result_answering_a_kept_call_later_keeps_its_tools_name() {
    let kinds = [0, 0, 2, 0, 0, 0, 3];
    let mut messages = Vec::new();
    for (i, kind) in kinds.iter().enumerate() {
        messages.push(generated_anthropic(*kind, i, Some(2)));
    }
    let memo = InboundMemo::default();
    // Four messages kept; then two lines of the client's and the result come at once.
    let mut last = None;
    for end in [1, 2, 3, 4, 7] {
        let bytes = anthropic_body(&messages[..end]);
        let (got, _) = decode_in(Wire::Anthropic, &memo, &bytes, 7);
        let whole: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            shown(&got),
            shown(&decode(Wire::Anthropic, &whole, 7).unwrap()),
            "{end} messages"
        );
        last = Some(got);
    }
    let last = last.unwrap();
    assert!(matches!(
        last.messages.last().map(|m| &**m),
        Some(AgentMessage::ToolResult(r)) if r.tool_name == "read"
    ));
}
