use std::sync::Arc;

use rampart_message::{AgentMessage, AssistantMessage, ContentBlock, StopReason, ToolCall};
use serde_json::json;

use super::opaque::{opaque_block, opaque_part};
use super::*;
use crate::{ClientFields, Forwarded, ToolSpec};

/// A Codex-like history: reasoning, a call to a freeform custom tool and its output, a web
/// search, a function call, its result and a final answer.
fn codex_items() -> Vec<Value> {
    vec![
        json!({"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Plan: patch"}],
               "encrypted_content": "gAAAAB\u{00e9}/+=="}),
        json!({"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_p", "name": "apply_patch",
               "input": "*** Begin Patch\n*** End Patch\n", "status": "completed"}),
        json!({"type": "custom_tool_call_output", "call_id": "call_p", "output": "Done!"}),
        json!({"type": "web_search_call", "id": "ws_1", "status": "completed",
               "action": {"type": "search", "query": "rust 2024"}}),
    ]
}

fn assistant(content: Vec<ContentBlock>) -> AgentMessage {
    AgentMessage::Assistant(AssistantMessage {
        content,
        api: API.into(),
        provider: "openai".into(),
        model: "gpt-5".into(),
        usage: Default::default(),
        stop_reason: StopReason::ToolUse,
        timestamp: 2,
        error_message: None,
        extra: Default::default(),
    })
}

fn conversation() -> Vec<SharedMessage> {
    let items = codex_items();
    let user_output = AgentMessage::User(rampart_message::UserMessage {
        content: rampart_message::Content::Blocks(vec![opaque_block(items[2].clone())]),
        timestamp: 3,
        extra: Default::default(),
    });
    vec![
        Arc::new(AgentMessage::user_text("patch it", 1)),
        Arc::new(assistant(vec![
            opaque_block(items[0].clone()),
            opaque_block(items[1].clone()),
        ])),
        Arc::new(user_output),
        Arc::new(assistant(vec![
            opaque_block(items[3].clone()),
            ContentBlock::text("Checking."),
            ContentBlock::ToolCall(ToolCall {
                id: "call_1".into(),
                name: "shell".into(),
                arguments: json!({"command": ["ls"]}),
                thought_signature: None,
                extra: Default::default(),
            }),
        ])),
        Arc::new(AgentMessage::tool_result(
            "call_1", "shell", "a.txt", false, 4,
        )),
    ]
}

fn codex_tools() -> Vec<Value> {
    vec![
        json!({"type": "function", "name": "shell", "description": "Runs a command", "strict": false,
               "parameters": {"type": "object", "properties": {"command": {"type": "array"}}}}),
        json!({"type": "custom", "name": "apply_patch", "description": "Patch files",
               "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}}),
        json!({"type": "namespace", "name": "mcp__docs__", "tools": [
               {"type": "function", "name": "search", "parameters": {"type": "object"}}]}),
        json!({"type": "web_search", "external_web_access": false}),
    ]
}

fn codex_request() -> ModelRequest {
    let mut fields = ClientFields::capture(
        FieldsWire::Responses,
        json!({"model": "gpt-5", "store": false, "include": ["reasoning.encrypted_content"],
               "reasoning": {"effort": "high", "summary": "auto"}, "prompt_cache_key": "thread-1",
               "parallel_tool_calls": true})
        .as_object()
        .unwrap(),
    );
    fields.tools = codex_tools();
    ModelRequest {
        model: "gpt-5".into(),
        system: Some("You are Codex.".into()),
        messages: conversation().into(),
        max_tokens: Some(900),
        forwarded: Forwarded {
            tools: vec![ToolSpec {
                name: "shell".into(),
                description: Some("Runs a command".into()),
                parameters: json!({"type": "object"}),
            }],
            client_fields: Some(fields),
            ..Default::default()
        },
        ..ModelRequest::default()
    }
}

/// Every item Rampart does not model is written back where it stood, byte for byte, and the
/// client's tools go as declared: what makes Codex behind serve see what it sent.
#[test]
fn opaque_items_and_declared_tools_round_trip_byte_identical() {
    let request = codex_request();
    let bytes = request_bytes(&request, &WireMemo::default());
    let text = String::from_utf8(bytes.clone()).unwrap();
    for item in codex_items() {
        let written = serde_json::to_string(&item).unwrap();
        assert!(text.contains(&written), "{written} not in {text}");
    }
    for tool in codex_tools() {
        let written = serde_json::to_string(&tool).unwrap();
        assert!(text.contains(&written), "{written} not in {text}");
    }
    let body: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(body, request_body(&request), "the spliced body is the body");
    let kinds: Vec<&str> = body["input"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "message",
            "reasoning",
            "custom_tool_call",
            "custom_tool_call_output",
            "web_search_call",
            "message",
            "function_call",
            "function_call_output"
        ]
    );
    assert_eq!(body["tools"], Value::Array(codex_tools()));
    assert_eq!(body["instructions"], "You are Codex.");
    assert_eq!(body["max_output_tokens"], 900);
    assert_eq!(body["stream"], true);
    assert_eq!(body["input"][6]["arguments"], r#"{"command":["ls"]}"#);
    // The client's fields go unchanged.
    assert_eq!(
        body["reasoning"],
        json!({"effort": "high", "summary": "auto"})
    );
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(body["prompt_cache_key"], "thread-1");
    assert_eq!(body["store"], false);
    assert_eq!(body["parallel_tool_calls"], true);
}

/// The host's own tools (memory, engine) join a Responses client's declared ones; any other
/// client's function tools go as Responses function tools; the host's own requests store
/// nothing at OpenAI and ask for reasoning back encrypted.
#[test]
fn host_and_other_clients_tools_go_as_function_tools() {
    let mut request = codex_request();
    request.forwarded.tools.push(ToolSpec {
        name: "memory_search".into(),
        description: None,
        parameters: json!({"type": "object"}),
    });
    let body = request_body(&request);
    let tools = body["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 5);
    assert_eq!(
        tools[4],
        json!({"type": "function", "name": "memory_search", "parameters": {"type": "object"}, "strict": false})
    );

    let chat = ModelRequest {
        model: "gpt-5".into(),
        messages: vec![Arc::new(AgentMessage::user_text("hi", 0))].into(),
        forwarded: Forwarded {
            tools: request.forwarded.tools.clone(),
            client_fields: Some(ClientFields::capture(
                FieldsWire::Chat,
                json!({"reasoning_effort": "low", "tool_choice": {"type": "function", "function": {"name": "shell"}},
                       "logit_bias": {"1": 2}})
                .as_object()
                .unwrap(),
            )),
            ..Default::default()
        },
        ..ModelRequest::default()
    };
    let body = request_body(&chat);
    assert_eq!(body["tools"].as_array().unwrap().len(), 2);
    assert_eq!(body["tools"][0]["name"], "shell");
    assert_eq!(body["reasoning"], json!({"effort": "low"}));
    assert_eq!(
        body["tool_choice"],
        json!({"type": "function", "name": "shell"})
    );
    assert!(body.get("logit_bias").is_none());
    assert_eq!(body["store"], false);
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(
        body["input"],
        json!([{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}])
    );
}

/// The chat form of a Responses request keeps an opaque item as a content part the session
/// importer holds as the same block: the one form both directions agree on.
#[test]
fn the_opaque_part_is_the_opaque_block() {
    let item = codex_items().remove(0);
    let block: ContentBlock =
        serde_json::from_value(Value::Object(opaque_part(item.clone()))).unwrap();
    assert_eq!(block, opaque_block(item.clone()));
    assert_eq!(super::opaque::opaque_item(&block), Some(&item));
    assert_eq!(
        super::opaque::opaque_item(&ContentBlock::text("x")),
        None::<&Value>
    );
}
