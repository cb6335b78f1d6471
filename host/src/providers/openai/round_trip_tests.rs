//! A chat client's body, read by serve's decoder and written again by this provider for a chat
//! upstream with nothing to manage: what the client sent is what the upstream gets.

use std::sync::Arc;

use serde_json::{Value, json};

use super::request_body;
use crate::providers::{Forwarded, ModelRequest};
use crate::serve::inbound::{Wire, decode};

/// The upstream body for `client`, passed through serve's decoder with nothing managed.
fn through(client: &Value) -> Value {
    let request = decode(Wire::OpenAi, client, 0).unwrap();
    request_body(&ModelRequest {
        model: request.model.clone(),
        system: request.system.clone(),
        messages: request.messages.iter().cloned().map(Arc::new).collect(),
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
