//! A chat client's body, read by serve's decoder and written again by this provider for a chat
//! upstream with nothing to manage: what the client sent is what the upstream gets.

use serde_json::{Value, json};

use crate::providers::openai::request_body;
use crate::providers::{Forwarded, ModelRequest};
use crate::serve::inbound::{Wire, decode};

/// The upstream body for `client`, passed through serve's decoder with nothing managed.
fn through(client: &Value) -> Value {
    let request = decode(Wire::OpenAi, client, 0).unwrap();
    request_body(&ModelRequest {
        model: request.model.clone(),
        system: request.system.clone(),
        messages: request.messages.iter().cloned().collect(),
        max_tokens: request.max_tokens,
        forwarded: Forwarded {
            tools: request.tools.clone(),
            client_fields: Some(request.fields.clone()),
            ..Default::default()
        },
        ..ModelRequest::default()
    })
}

#[test]
fn a_user_message_given_as_text_parts_goes_upstream_as_parts() {
    let messages = json!([
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "plain"},
    ]);
    let body = through(&json!({"model": "m", "messages": messages, "stream": true}));
    assert_eq!(body["messages"], messages);
}

/// Message-level fields pi's messages have no place for (a user's `name`, an assistant's
/// `refusal`, a tool message's `name`, a field of the client's own) reach a chat upstream as
/// the client wrote them; they used to be dropped.
#[test]
fn message_fields_pi_does_not_model_go_upstream_as_sent() {
    let messages = json!([
        {"role": "user", "content": "hi", "name": "alice"},
        {"role": "assistant", "content": null, "refusal": null,
         "tool_calls": [{"id": "c1", "type": "function",
                         "function": {"name": "read", "arguments": "{\"path\":\"a\"}"}},
                        {"id": "c2", "type": "function",
                         "function": {"name": "read", "arguments": "{\"path\":\"b\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "read", "content": "body"},
        {"role": "tool", "tool_call_id": "c2", "content": "other"},
        {"role": "user", "content": "go on", "x_vendor": {"k": [1, 2]}},
    ]);
    let body = through(&json!({"model": "m", "messages": messages}));
    assert_eq!(body["messages"], messages);
}

#[test]
fn function_tools_go_upstream_as_declared_with_strict() {
    let tools = json!([
        {"type": "function", "function": {"name": "read", "description": "Read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            "strict": false}},
        {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"},
            "strict": true}},
    ]);
    let body = through(&json!({
        "model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": tools,
    }));
    assert_eq!(body["tools"], tools);
}

/// A Responses client's body as serve reads it (its chat form decoded, its tools kept as
/// declared), and the request the engine forwards with nothing managed.
fn responses_request(client: &Value) -> ModelRequest {
    let converted = crate::serve::inbound::responses_as_chat(client).unwrap();
    let mut request = decode(Wire::Responses, &converted.chat, 0).unwrap();
    request.fields.tools = converted.tools;
    ModelRequest {
        model: request.model.clone(),
        system: request.system.clone(),
        messages: request.messages.iter().cloned().collect(),
        forwarded: Forwarded {
            tools: request.tools.clone(),
            client_fields: Some(request.fields.clone()),
            ..Default::default()
        },
        ..ModelRequest::default()
    }
}

#[test]
fn a_responses_clients_strict_reaches_a_chat_upstream() {
    let request = responses_request(&json!({
        "model": "m", "input": "hi",
        "tools": [
            {"type": "function", "name": "shell", "parameters": {"type": "object"}, "strict": false},
            {"type": "function", "name": "plan", "description": "Plan", "parameters": {"type": "object"},
             "strict": true},
            {"type": "function", "name": "look", "parameters": {"type": "object"}},
        ],
    }));
    let body = request_body(&request);
    let strict: Vec<&Value> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["function"]["strict"])
        .collect();
    // Declared false, declared true, not declared (no chat default is invented).
    assert_eq!(strict, [&json!(false), &json!(true), &Value::Null]);
}

#[test]
fn a_chat_clients_strict_reaches_a_responses_upstream() {
    let client = json!({
        "model": "m", "messages": [{"role": "user", "content": "hi"}],
        "tools": [
            {"type": "function", "function": {"name": "read", "parameters": {"type": "object"},
             "strict": true}},
            {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}},
        ],
    });
    let request = decode(Wire::OpenAi, &client, 0).unwrap();
    let body = crate::providers::responses::request_body(&ModelRequest {
        model: "m".into(),
        messages: request.messages.iter().cloned().collect(),
        forwarded: Forwarded {
            tools: request.tools.clone(),
            client_fields: Some(request.fields.clone()),
            ..Default::default()
        },
        ..ModelRequest::default()
    });
    assert_eq!(body["tools"][0]["strict"], true);
    // Undeclared: Responses' own default (strict) would refuse a schema written for chat.
    assert_eq!(body["tools"][1]["strict"], false);
}
