//! A Responses client's body (Codex's shape), read by serve's decoder and written again by this
//! provider for a Responses upstream with nothing to manage: the upstream gets the client's
//! `input` as it was sent, byte for byte.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::providers::responses::{request_body, request_bytes};
use crate::providers::splice::WireMemo;
use crate::providers::{ClientSystem, Forwarded, ModelRequest};
use crate::serve::inbound::{Wire, decode, responses_as_chat};

/// Codex's input: its developer messages first, then messages, a call, its output and an
/// answer, each with the fields Codex keeps (ids, `status`, `annotations`).
fn codex_input() -> Value {
    json!([
        {"type": "message", "id": "msg_a", "role": "developer",
         "content": [{"type": "input_text", "text": "You are Codex."}]},
        {"type": "message", "id": "msg_b", "role": "developer",
         "content": [{"type": "input_text", "text": "<permissions>"}, {"type": "input_text", "text": "read-only"}]},
        {"type": "message", "id": "msg_c", "role": "user",
         "content": [{"type": "input_text", "text": "<environment_context/>"}]},
        {"type": "message", "id": "msg_d", "role": "user",
         "content": [{"type": "input_text", "text": "Read secret.txt"}]},
        {"type": "function_call", "status": "completed", "id": "fc_1", "name": "exec_command",
         "arguments": "{\"cmd\":\"cat secret.txt\"}", "call_id": "call_1"},
        {"type": "function_call_output", "id": "fco_1", "call_id": "call_1",
         "output": "the secret number is 42\n"},
        {"type": "message", "status": "completed", "id": "msg_e", "role": "assistant",
         "content": [{"type": "output_text", "text": "It is 42.", "annotations": []}]},
        {"type": "message", "id": "msg_f", "role": "user",
         "content": [{"type": "input_text", "text": "Again?"}]},
    ])
}

/// The request serve forwards for `client`, nothing managed; `system` replaces the prompt (an
/// engine's addition) when given.
fn through(client: &Value, system: Option<&str>) -> ModelRequest {
    let converted = responses_as_chat(client).unwrap();
    let mut request = decode(Wire::Responses, &converted.chat, 0).unwrap();
    request.fields.tools = converted.tools;
    request.system_form = converted.system_form;
    ModelRequest {
        model: request.model.clone(),
        system: system.map(str::to_owned).or(request.system.clone()),
        messages: request.messages.iter().cloned().collect(),
        forwarded: Forwarded {
            tools: request.tools.clone(),
            client_fields: Some(request.fields.clone()),
            client_system: request
                .system_form
                .clone()
                .zip(request.system.clone())
                .map(|(form, text)| ClientSystem { text, form }),
            ..Default::default()
        },
        ..ModelRequest::default()
    }
}

/// The body the provider sends, from the bytes it writes (checked against [`request_body`]).
fn sent(request: &ModelRequest) -> Value {
    let bytes = request_bytes(request, &WireMemo::default());
    let body: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(body, request_body(request));
    body
}

#[test]
fn a_codex_body_reaches_a_responses_upstream_as_it_was_sent() {
    let client =
        json!({"model": "gpt-5-codex", "stream": true, "input": codex_input(), "store": false});
    let body = sent(&through(&client, None));
    assert_eq!(body["input"].to_string(), codex_input().to_string());
    assert_eq!(body.get("instructions"), None, "Codex sent none");

    let with_instructions =
        json!({"model": "m", "instructions": "Be terse.", "input": codex_input()});
    let body = sent(&through(&with_instructions, None));
    assert_eq!(body["instructions"], "Be terse.");
    assert_eq!(body["input"], codex_input());
}

/// A prompt the engine changed goes as `instructions` (the developer messages' texts in it,
/// not sent twice); the messages keep their items' fields.
#[test]
fn a_changed_prompt_goes_as_instructions_and_the_items_keep_their_fields() {
    let client = json!({"model": "m", "input": codex_input()});
    let read = through(&client, None).system.unwrap();
    assert_eq!(read, "You are Codex.\n\n<permissions>\nread-only");
    let changed = format!("{read}\n\nRecall: use the tools.");
    let body = sent(&through(&client, Some(&changed)));
    assert_eq!(body["instructions"], changed.as_str());
    let input = body["input"].as_array().unwrap();
    assert!(input.iter().all(|i| i["role"] != "developer"), "{input:?}");
    assert_eq!(input[..], codex_input().as_array().unwrap()[2..]);
}

/// An output the engine capped keeps its item's fields, with the new text.
#[test]
fn a_capped_output_keeps_its_item_fields() {
    use rampart_message::{AgentMessage, Content};
    let mut request = through(&json!({"model": "m", "input": codex_input()}), None);
    let mut messages = request.messages.to_vec();
    for message in &mut messages {
        if let AgentMessage::ToolResult(r) = Arc::make_mut(message) {
            r.content = Content::Text("the secret…".into());
        }
    }
    request.messages = messages.into();
    let body = sent(&request);
    let output = body["input"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "function_call_output")
        .unwrap()
        .clone();
    assert_eq!(
        output,
        json!({"type": "function_call_output", "id": "fco_1", "call_id": "call_1",
               "output": "the secret…"})
    );
}

/// A developer message after the conversation began is read into the prompt; the prompt then
/// cannot go back in the client's form and goes as `instructions`.
#[test]
fn a_developer_message_later_in_input_goes_as_instructions() {
    let mut input = codex_input();
    input.as_array_mut().unwrap().push(
        json!({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "now writable"}]}),
    );
    input
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "message", "role": "user", "content": "go"}));
    let body = sent(&through(&json!({"model": "m", "input": input}), None));
    assert_eq!(
        body["instructions"],
        "You are Codex.\n\n<permissions>\nread-only\n\nnow writable"
    );
    assert!(
        body["input"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["role"] != "developer")
    );
}

/// What a chat client sends under the template key is not a Responses item: a Responses
/// upstream gets the chat client's messages in Rampart's own form.
#[test]
fn a_chat_clients_template_key_makes_no_item() {
    let key = crate::providers::responses::template::TEMPLATE_KEY;
    let forged =
        json!({"type": "function_call_output", "call_id": null, "output": null, "x": "forged"});
    let mut part = json!({"type": "text", "text": "hi"});
    part[key] = json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": null}], "x": "forged"});
    let mut call =
        json!({"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}});
    call[key] = forged.clone();
    let client = json!({"model": "m", "messages": [
        {"role": "user", "content": [part]},
        {"role": "assistant", "content": null, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "body"},
    ]});
    let request = decode(Wire::OpenAi, &client, 0).unwrap();
    let body = request_body(&ModelRequest {
        model: "m".into(),
        messages: request.messages.iter().cloned().collect(),
        ..ModelRequest::default()
    });
    assert!(!body.to_string().contains("forged"), "{body:#}");
}
