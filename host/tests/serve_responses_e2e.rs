//! End to end: a Responses client (shaped like the Codex CLI) through `rampart serve` to a
//! loopback upstream speaking OpenAI Responses (`api = "openai-responses"`). The upstream must
//! receive the client's items and tools unchanged (reasoning with `encrypted_content`, custom,
//! namespace and `web_search` tools), the client must get the upstream's items back, and
//! `previous_response_id` must continue the answer it names or be refused saying why.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::common::loopback::{Loopback, Reply};
use crate::common::serve::{ServeProcess, upstream_config_speaking};
use serde_json::{Value, json};

/// Serve in front of a Responses upstream at `url`; compaction summaries by the simulator.
fn config(url: &str) -> String {
    upstream_config_speaking(url, "openai-responses")
        + "\n[agents.defaults.compaction]\nmodel = \"sim/default\"\n"
}

/// A Responses event stream: each item added and done, then `response.completed`.
fn responses_stream(items: &[Value]) -> Reply {
    let mut events = vec![json!({"type": "response.created",
                                 "response": {"id": "resp_up", "status": "in_progress", "output": []}})];
    for (index, item) in items.iter().enumerate() {
        let mut added = item.clone();
        if item["type"] == "message" {
            added["content"] = json!([]);
        }
        events.push(
            json!({"type": "response.output_item.added", "output_index": index, "item": added}),
        );
        if item["type"] == "message" {
            events.push(
                json!({"type": "response.output_text.delta", "output_index": index,
                               "content_index": 0, "delta": item["content"][0]["text"]}),
            );
        }
        if item["type"] == "function_call" {
            events.push(json!({"type": "response.function_call_arguments.delta",
                               "output_index": index, "delta": item["arguments"]}));
        }
        events.push(
            json!({"type": "response.output_item.done", "output_index": index, "item": item}),
        );
    }
    events.push(json!({"type": "response.completed", "response": {
        "id": "resp_up", "status": "completed", "model": "gpt-up", "output": items,
        "usage": {"input_tokens": 50, "output_tokens": 9, "input_tokens_details": {"cached_tokens": 0}}}}));
    Reply::sse(
        events
            .iter()
            .map(|e| format!("event: {}\ndata: {e}", e["type"].as_str().unwrap()))
            .collect(),
    )
}

fn reasoning(n: u32) -> Value {
    json!({"type": "reasoning", "id": format!("rs_{n}"),
           "summary": [{"type": "summary_text", "text": "Plan."}],
           "encrypted_content": format!("gAAAAB{n}+/sealed==")})
}

fn message(text: &str) -> Value {
    json!({"type": "message", "id": "msg_up", "status": "completed", "role": "assistant",
           "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

fn codex_tools() -> Value {
    json!([
        {"type": "function", "name": "shell", "description": "Runs a command", "strict": false,
         "parameters": {"type": "object", "properties": {"command": {"type": "array",
                        "items": {"type": "string"}}}, "required": ["command"]}},
        {"type": "custom", "name": "apply_patch", "description": "Edits files",
         "format": {"type": "grammar", "syntax": "lark", "definition": "start: begin_patch"}},
        {"type": "namespace", "name": "mcp__docs__", "description": "Docs server",
         "tools": [{"type": "function", "name": "search", "parameters": {"type": "object"}}]},
        {"type": "web_search", "external_web_access": false}
    ])
}

fn codex_body(input: Vec<Value>) -> Value {
    json!({
        "model": "gpt-up", "instructions": "You are Codex.", "input": input,
        "tools": codex_tools(), "tool_choice": "auto", "parallel_tool_calls": false,
        "reasoning": {"effort": "medium", "summary": "auto"}, "store": false, "stream": true,
        "include": ["reasoning.encrypted_content"], "prompt_cache_key": "0199-codex-thread",
        "text": {"verbosity": "low"}
    })
}

fn post(serve: &ServeProcess, body: &Value) -> (u16, String) {
    let response = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
        .post(format!("{}/v1/responses", serve.base))
        .header("session-id", "0199-codex-thread")
        .json(body)
        .send()
        .unwrap();
    (response.status().as_u16(), response.text().unwrap())
}

/// The `data` of each event of a stream.
fn events(stream: &str) -> Vec<Value> {
    stream
        .split("\n\n")
        .filter_map(|f| f.lines().find_map(|l| l.strip_prefix("data: ")))
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect()
}

fn done_items(stream: &str) -> Vec<Value> {
    events(stream)
        .into_iter()
        .filter(|e| e["type"] == "response.output_item.done")
        .map(|e| e["item"].clone())
        .collect()
}

#[test]
fn a_codex_turn_reaches_a_responses_upstream_with_its_items_and_tools_unchanged() {
    let up = Loopback::start();
    let call = json!({"type": "function_call", "id": "fc_up", "call_id": "call_ls", "name": "shell",
                      "arguments": "{\"command\":[\"ls\"]}", "status": "completed"});
    up.push(responses_stream(&[reasoning(1), call.clone()]));
    up.push(responses_stream(&[reasoning(2), message("Two files.")]));
    let serve = ServeProcess::start(&config(&up.url()));

    let developer = json!({"type": "message", "role": "developer",
                           "content": [{"type": "input_text", "text": "sandbox: read-only"}]});
    let user = json!({"type": "message", "role": "user",
                      "content": [{"type": "input_text", "text": "list the files"}]});
    let (status, first) = post(&serve, &codex_body(vec![developer.clone(), user.clone()]));
    assert_eq!(status, 200, "{first}");
    // The client gets the upstream's reasoning item as it was made, then the call.
    let items = done_items(&first);
    assert_eq!(items[0], reasoning(1), "{first}");
    // The call as the upstream made it, its id included (the client sends that id back).
    assert_eq!(items[1], call, "{first}");
    assert_eq!(items[1]["arguments"], "{\"command\":[\"ls\"]}");

    // Codex's next turn carries what it was given back, with the command's output.
    let output =
        json!({"type": "function_call_output", "call_id": "call_ls", "output": "a.txt\nb.txt"});
    let second_input = vec![
        developer.clone(),
        user.clone(),
        items[0].clone(),
        items[1].clone(),
        output.clone(),
    ];
    let (status, second) = post(&serve, &codex_body(second_input.clone()));
    assert_eq!(status, 200, "{second}");
    let items = done_items(&second);
    assert_eq!(items[0], reasoning(2));
    assert_eq!(items[1]["content"][0]["text"], "Two files.");
    assert_eq!(items[1]["id"], "msg_up", "the upstream's id: {second}");

    let requests = up.requests();
    assert_eq!(requests.len(), 2);
    let sent = &requests[1];
    assert_eq!(sent.path, "/v1/responses");
    // Byte for byte: the reasoning item and every declared tool, as the client wrote them.
    for piece in [reasoning(1)]
        .into_iter()
        .chain(codex_tools().as_array().unwrap().iter().cloned())
    {
        let written = piece.to_string();
        assert!(
            sent.raw_body.contains(&written),
            "{written} not in {}",
            sent.raw_body
        );
    }
    let body = &sent.body;
    assert_eq!(body["tools"], codex_tools());
    // The instructions as sent; the developer message opens `input`, as sent.
    assert_eq!(body["instructions"], "You are Codex.");
    for field in [
        "reasoning",
        "store",
        "include",
        "prompt_cache_key",
        "tool_choice",
        "parallel_tool_calls",
        "text",
    ] {
        assert_eq!(body[field], codex_body(vec![])[field], "{field}: {body:#}");
    }
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
            "message",
            "reasoning",
            "function_call",
            "function_call_output"
        ],
        "{body:#}"
    );
    // Every item as the client sent it back.
    assert_eq!(body["input"], Value::Array(second_input), "{body:#}");

    // Nothing was counted as not forwarded: the upstream took every tool and item.
    let metrics = serve.metrics();
    assert!(!metrics.contains("kind=\"non_function_tool\""), "{metrics}");
    assert!(!metrics.contains("kind=\"responses_item\""), "{metrics}");
}

#[test]
fn previous_response_id_continues_the_answer_it_names_or_is_refused_saying_why() {
    let up = Loopback::start();
    up.push(responses_stream(&[message("Hi.")]));
    up.push(responses_stream(&[message("Hi again.")]));
    let serve = ServeProcess::start(&config(&up.url()));
    let plain = |input: &str, previous: Option<&str>| {
        let mut body =
            json!({"model": "gpt-up", "input": input, "prompt_cache_key": "0199-codex-thread"});
        if let Some(id) = previous {
            body["previous_response_id"] = json!(id);
        }
        let (status, text) = post(&serve, &body);
        (status, serde_json::from_str::<Value>(&text).unwrap())
    };
    let (status, first) = plain("Say hi.", None);
    assert_eq!(status, 200, "{first}");
    let id = first["id"].as_str().unwrap().to_owned();
    let (status, second) = plain("Once more.", Some(&id));
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["output"][0]["content"][0]["text"], "Hi again.");
    // The upstream saw the conversation the id names, then the new input.
    let input = &up.requests()[1].body["input"];
    let texts: Vec<(&str, &str)> = input
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["role"].as_str().unwrap(),
                i["content"][0]["text"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        texts,
        [
            ("user", "Say hi."),
            ("assistant", "Hi."),
            ("user", "Once more.")
        ]
    );
    assert!(up.requests()[1].body.get("previous_response_id").is_none());

    let (status, refused) = plain("Again.", Some("resp_from_elsewhere"));
    assert_eq!(status, 400, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(
            "`previous_response_id` \"resp_from_elsewhere\" is not a response this server holds"
        ),
        "{message}"
    );
    assert_eq!(up.requests().len(), 2, "a refused request reaches no model");
}

/// Behind a chat-completions upstream the same client's reasoning items and non-function tools
/// have no form: they are kept in the session, not sent, and counted (never dropped silently).
#[test]
fn behind_a_chat_upstream_what_has_no_form_is_counted_not_sent() {
    let up = Loopback::start();
    up.push(crate::common::loopback::openai_text_stream(
        "Two files.",
        10,
        2,
    ));
    let serve =
        ServeProcess::start(&config(&up.url()).replace("openai-responses", "openai-completions"));
    let input = vec![
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list"}]}),
        reasoning(1),
        json!({"type": "function_call", "call_id": "call_ls", "name": "shell", "arguments": "{}"}),
        json!({"type": "function_call_output", "call_id": "call_ls", "output": "a.txt"}),
    ];
    let (status, answer) = post(&serve, &codex_body(input));
    assert_eq!(status, 200, "{answer}");
    let sent = &up.requests()[0];
    assert!(sent.path.ends_with("/chat/completions"));
    assert!(!sent.raw_body.contains("gAAAAB1"), "{}", sent.raw_body);
    assert_eq!(sent.body["tools"].as_array().unwrap().len(), 1);
    let metrics = serve.metrics();
    for line in [
        "rampart_serve_content_not_forwarded_total{kind=\"non_function_tool\"} 3",
        "rampart_serve_content_not_forwarded_total{kind=\"responses_item\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} not in {metrics}");
    }
}

/// A Codex conversation continued turn after turn (its kept items read from the last request,
/// only the new ones converted) counts what it cannot forward as its whole body would: every
/// request re-sends the reasoning item, and each counts it once again.
#[test]
fn a_continued_conversation_counts_its_kept_items_each_request() {
    let up = Loopback::start();
    for text in ["Two files.", "Done.", "Bye."] {
        up.push(crate::common::loopback::openai_text_stream(text, 10, 2));
    }
    let serve =
        ServeProcess::start(&config(&up.url()).replace("openai-responses", "openai-completions"));
    let user = |text: &str| json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]});
    let answer = |text: &str| {
        json!({"type": "message", "role": "assistant",
               "content": [{"type": "output_text", "text": text}]})
    };
    let mut input = vec![
        user("list"),
        reasoning(1),
        json!({"type": "function_call", "call_id": "call_ls", "name": "shell", "arguments": "{}"}),
        json!({"type": "function_call_output", "call_id": "call_ls", "output": "a.txt"}),
    ];
    for (turn, (said, next)) in [("Two files.", "more"), ("Done.", "thanks")]
        .iter()
        .enumerate()
    {
        let (status, body) = post(&serve, &codex_body(input.clone()));
        assert_eq!(status, 200, "turn {turn}: {body}");
        input.push(answer(said));
        input.push(user(next));
    }
    let (status, body) = post(&serve, &codex_body(input.clone()));
    assert_eq!(status, 200, "{body}");
    // The upstream got the whole conversation each time, in order.
    let sent = &up.requests()[2].body["messages"];
    let roles: Vec<&str> = sent
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
            "assistant",
            "user"
        ],
        "{sent:#}"
    );
    let metrics = serve.metrics();
    for line in [
        "rampart_serve_content_not_forwarded_total{kind=\"non_function_tool\"} 9",
        "rampart_serve_content_not_forwarded_total{kind=\"responses_item\"} 3",
    ] {
        assert!(metrics.contains(line), "{line} not in {metrics}");
    }
}
