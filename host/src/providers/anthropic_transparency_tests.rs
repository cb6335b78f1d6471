//! What a client's Anthropic conversation becomes on the way back out, when nothing changed
//! it: the same `messages` (opaque messages at their place, tool results in the client's form),
//! and what another wire does with what it has no form for.

use std::sync::{Arc, Mutex};

use rampart_sessions::import::api_request::from_anthropic_messages;

use rampart_message::{AgentMessage, Content, ContentBlock};
use serde_json::{Value, json};

use crate::providers::anthropic::*;
use crate::providers::client_fields::FieldsWire;
use crate::providers::{Forwarded, ModelRequest, UnsentSink};

/// A Claude Code-like conversation: a prompt, its system message (the agent types), a tool
/// call, its result as a string without `is_error`, a failed result in blocks, the next prompt.
fn client_messages() -> Vec<Value> {
    vec![
        json!({"role": "user", "content": [{"type": "text", "text": "read a and b"}]}),
        json!({"role": "system", "content": [
            {"type": "text", "text": "Available agent types: general-purpose, Explore"}
        ], "unknownField": {"kept": [1, 2.5, null]}}),
        json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "a"}},
            {"type": "tool_use", "id": "toolu_2", "name": "Read", "input": {"path": "b"}}
        ]}),
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "body of a"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true,
             "content": [{"type": "text", "text": "no such file"}]}
        ]}),
        json!({"role": "assistant", "content": [{"type": "text", "text": "a is read; b is missing"}]}),
        json!({"role": "user", "content": [{"type": "text", "text": "thanks"}]}),
    ]
}

fn request_of(messages: &[Value], forwarded: Forwarded) -> ModelRequest {
    let imported = from_anthropic_messages(None, messages, "2026-01-01T00:00:00.000Z");
    ModelRequest {
        model: "m".into(),
        messages: imported.messages.into_iter().map(Arc::new).collect(),
        forwarded,
        ..Default::default()
    }
}

/// Both ways a body is written: as a value, and spliced from memoised bytes.
fn bodies(request: &ModelRequest) -> [Value; 2] {
    let memo = BlockMemo::default();
    // Twice through the memo, so the second body is written from remembered bytes.
    let _ = request_bytes(request, &memo);
    let spliced: Value = serde_json::from_slice(&request_bytes(request, &memo)).unwrap();
    [request_body(request), spliced]
}

#[test]
fn a_clients_conversation_goes_back_out_as_it_came() {
    let sent = client_messages();
    for body in bodies(&request_of(&sent, Forwarded::default())) {
        assert_eq!(body["messages"], Value::Array(sent.clone()), "{body:#}");
    }
}

#[test]
fn an_opaque_message_is_never_marked_for_the_cache() {
    // The system message last: Rampart's breakpoint goes on the newest message it wrote.
    let mut sent = client_messages();
    let system = sent.remove(1);
    sent.push(system.clone());
    let forwarded = Forwarded {
        prompt_cache: true,
        ..Default::default()
    };
    for body in bodies(&request_of(&sent, forwarded)) {
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages.last().unwrap(), &system, "{body:#}");
        let before = &messages[messages.len() - 2];
        assert_eq!(before["content"][0]["cache_control"]["type"], "ephemeral");
        // No system prompt here: that one breakpoint alone.
        assert_eq!(
            body.to_string().matches("cache_control").count(),
            1,
            "{body}"
        );
    }
}

#[test]
fn breakpoints_inside_an_opaque_message_leave_less_room_for_the_clients_others() {
    let ephemeral = json!({"type": "ephemeral"});
    let mut sent: Vec<Value> = (0..6)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            json!({"role": role, "content": [
                {"type": "text", "text": format!("m{i}"), "cache_control": ephemeral}
            ]})
        })
        .collect();
    sent.insert(
        1,
        json!({"role": "system", "content": [
            {"type": "text", "text": "agents", "cache_control": ephemeral}
        ]}),
    );
    let marks: Vec<AgentMessage> = from_anthropic_messages(None, &sent, "2026-01-01T00:00:00Z")
        .messages
        .into_iter()
        .filter(|m| !matches!(m, AgentMessage::Other(_)))
        .collect();
    let forwarded = Forwarded {
        prompt_cache: true,
        client_breakpoints: crate::providers::ClientBreakpoints {
            system: false,
            marks: Some(Arc::new(move |m: &AgentMessage| {
                marks
                    .iter()
                    .any(|sent| crate::serve::history::same_message(m, sent))
            })),
        },
        ..Default::default()
    };
    for body in bodies(&request_of(&sent, forwarded)) {
        // The opaque message's own and the newest two others: with the system prompt's
        // room kept, four at most.
        assert_eq!(
            body.to_string().matches("cache_control").count(),
            3,
            "{body}"
        );
        assert_eq!(body["messages"][1], sent[1]);
    }
}

#[test]
fn a_result_an_engine_rewrote_is_written_in_the_form_it_now_has() {
    let imported = from_anthropic_messages(None, &client_messages(), "2026-01-01T00:00:00Z");
    let mut messages: Vec<AgentMessage> = imported.messages;
    // The string result now holds two blocks; the failed one stays failed.
    for m in &mut messages {
        if let AgentMessage::ToolResult(r) = m
            && r.tool_call_id == "toolu_1"
        {
            r.content = Content::Blocks(vec![
                ContentBlock::text("head of a"),
                ContentBlock::text("[capped]"),
            ]);
        }
    }
    let request = ModelRequest {
        model: "m".into(),
        messages: messages.into_iter().map(Arc::new).collect(),
        ..Default::default()
    };
    for body in bodies(&request) {
        let results = &body["messages"][3]["content"];
        assert_eq!(
            results[0],
            json!({"type": "tool_result", "tool_use_id": "toolu_1", "content": [
                {"type": "text", "text": "head of a"}, {"type": "text", "text": "[capped]"}
            ]}),
            "{body:#}"
        );
        assert_eq!(results[1]["is_error"], true);
    }
}

#[test]
fn rampart_s_own_results_keep_the_written_out_form() {
    let request = ModelRequest {
        model: "m".into(),
        messages: vec![
            Arc::new(AgentMessage::user_text("go", 0)),
            Arc::new(AgentMessage::tool_result("t1", "Read", "ok", false, 0)),
        ]
        .into(),
        ..Default::default()
    };
    let body = request_body(&request);
    assert_eq!(
        body["messages"][0]["content"][0],
        json!({"type": "tool_result", "tool_use_id": "t1", "is_error": false,
               "content": [{"type": "text", "text": "ok"}]})
    );
}

/// The reports a sink heard: the wire and the count of each.
type Heard = Arc<Mutex<Vec<(String, u64)>>>;

/// What each provider reported through the request's sink, by wire.
fn reports() -> (Heard, UnsentSink) {
    let seen: Heard = Arc::default();
    let sink = {
        let seen = Arc::clone(&seen);
        UnsentSink::new(move |wire, n| seen.lock().unwrap().push((wire.to_owned(), n)))
    };
    (seen, sink)
}

#[test]
fn an_openai_upstream_leaves_an_opaque_message_out_and_reports_it() {
    let (seen, sink) = reports();
    let request = request_of(
        &client_messages(),
        Forwarded {
            unsent: Some(sink),
            ..Default::default()
        },
    );
    let body = crate::providers::openai::request_body(&request);
    let text = body.to_string();
    assert!(!text.contains("Available agent types"), "{body:#}");
    assert!(
        !text.contains(rampart_message::opaque::OPAQUE_ROLE),
        "{body:#}"
    );
    // The user prompt, the assistant's calls, two results, the answer, the next prompt.
    assert_eq!(body["messages"].as_array().unwrap().len(), 6, "{body:#}");

    crate::providers::report_unsent(&request, crate::providers::openai::API);
    crate::providers::report_unsent(&request, API);
    assert_eq!(
        *seen.lock().unwrap(),
        vec![(crate::providers::openai::API.to_owned(), 1)],
        "the Anthropic wire sends it, so only the OpenAI one reports it"
    );
}

/// Claude Code's `system`: three blocks, two of them marked for the cache.
fn client_system() -> Vec<Value> {
    let ephemeral = json!({"type": "ephemeral"});
    vec![
        json!({"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1"}),
        json!({"type": "text", "text": "You are Claude Code.", "cache_control": ephemeral}),
        json!({"type": "text", "text": "Use the tools.", "cache_control": ephemeral}),
    ]
}

fn system_request(system_text: &str, client_marked_last: bool) -> ModelRequest {
    let mut sent = client_messages();
    let ephemeral = json!({"type": "ephemeral"});
    if client_marked_last {
        sent.last_mut().unwrap()["content"][0]["cache_control"] = ephemeral;
    }
    let imported = from_anthropic_messages(
        Some(&Value::Array(client_system())),
        &sent,
        "2026-01-01T00:00:00Z",
    );
    let marks: Vec<AgentMessage> = imported.messages.clone();
    let text = imported.system.clone().unwrap();
    ModelRequest {
        model: "m".into(),
        system: Some(system_text.replace("{client}", &text)),
        messages: imported.messages.into_iter().map(Arc::new).collect(),
        forwarded: Forwarded {
            prompt_cache: true,
            client_breakpoints: crate::providers::ClientBreakpoints {
                system: true,
                marks: client_marked_last.then(|| {
                    Arc::new(move |m: &AgentMessage| {
                        marks.iter().any(|sent| {
                            crate::serve::history::same_message(m, sent)
                                && serde_json::to_string(sent)
                                    .unwrap()
                                    .contains("cache_control")
                        })
                    }) as crate::providers::BreakpointMatcher
                }),
            },
            client_system: Some(crate::providers::ClientSystem {
                text,
                form: crate::providers::SystemForm {
                    wire: FieldsWire::Anthropic,
                    blocks: client_system(),
                    instructions: None,
                },
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[test]
fn the_clients_system_blocks_go_back_out_as_they_came() {
    let request = system_request("{client}", true);
    for body in bodies(&request) {
        assert_eq!(body["system"], Value::Array(client_system()), "{body:#}");
        let last = body["messages"].as_array().unwrap().last().unwrap();
        assert_eq!(last["content"][0]["cache_control"]["type"], "ephemeral");
        // The client's three breakpoints and no more.
        assert_eq!(
            body.to_string().matches("cache_control").count(),
            3,
            "{body}"
        );
    }
}

#[test]
fn a_system_prompt_the_engine_changed_is_written_from_its_text() {
    let request = system_request("{client}\n\nRecalled: the user likes tests.", false);
    for body in bodies(&request) {
        let system = body["system"].as_array().unwrap();
        assert_eq!(system.len(), 1, "{body:#}");
        assert!(
            system[0]["text"]
                .as_str()
                .unwrap()
                .ends_with("Recalled: the user likes tests.")
        );
        assert_eq!(system[0]["cache_control"]["type"], "ephemeral");
    }
}
