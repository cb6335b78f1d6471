use rampart_message::AgentMessage;
use serde_json::json;

use super::*;
use crate::providers::StreamDelta;

fn tool_answer() -> AssistantMessage {
    let m: AgentMessage = serde_json::from_value(json!({
        "role": "assistant",
        "content": [{"type": "text", "text": "Reading."},
                    {"type": "toolCall", "id": "toolu_1", "name": "Read", "arguments": {"path": "a"}}],
        "api": "anthropic-messages", "provider": "up", "model": "m",
        "usage": {"input": 10, "output": 3, "cacheRead": 5, "cacheWrite": 0, "totalTokens": 18,
                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
        "stopReason": "toolUse", "timestamp": 5
    }))
    .unwrap();
    match m {
        AgentMessage::Assistant(a) => a,
        _ => unreachable!(),
    }
}

const META: AnswerMeta<'static> = AnswerMeta {
    id: "x1",
    model: "client-model",
    created: 1,
    echo: None,
};

#[test]
fn openai_json_carries_tool_calls_finish_reason_and_usage() {
    let v = openai_response(&tool_answer(), &META);
    assert_eq!(v["model"], "client-model");
    assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
    let m = &v["choices"][0]["message"];
    assert_eq!(m["content"], "Reading.");
    assert_eq!(
        m["tool_calls"][0]["function"]["arguments"],
        r#"{"path":"a"}"#
    );
    assert_eq!(v["usage"]["prompt_tokens"], 15);
    assert_eq!(v["usage"]["prompt_tokens_details"]["cached_tokens"], 5);
}

#[test]
fn openai_stream_is_chunks_then_usage_then_done() {
    let frames = openai_sse(&tool_answer(), &META, true);
    assert_eq!(frames.last().unwrap(), "data: [DONE]\n\n");
    let chunks: Vec<Value> = frames[..frames.len() - 1]
        .iter()
        .map(|f| serde_json::from_str(f.trim_start_matches("data: ").trim()).unwrap())
        .collect();
    assert_eq!(chunks[0]["choices"][0]["delta"]["content"], "Reading.");
    assert_eq!(
        chunks[1]["choices"][0]["delta"]["tool_calls"][0]["id"],
        "toolu_1"
    );
    assert_eq!(chunks[2]["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(chunks[3]["choices"], json!([]));
    assert_eq!(chunks[3]["usage"]["completion_tokens"], 3);
    assert_eq!(
        openai_sse(&tool_answer(), &META, false).len(),
        frames.len() - 1
    );
}

#[test]
fn anthropic_json_and_stream() {
    let v = anthropic_response(&tool_answer(), &META);
    assert_eq!(v["stop_reason"], "tool_use");
    assert_eq!(v["content"][1]["input"], json!({"path": "a"}));
    assert_eq!(v["usage"]["cache_read_input_tokens"], 5);
    let frames = anthropic_sse(&tool_answer(), &META);
    let names: Vec<&str> = frames
        .iter()
        .map(|f| f.lines().next().unwrap().trim_start_matches("event: "))
        .collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    // The tool call's input arrives whole in one `input_json_delta`.
    let data: Value = serde_json::from_str(
        frames[5]
            .lines()
            .find_map(|l| l.strip_prefix("data: "))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(data["delta"]["type"], "input_json_delta");
    let input: Value =
        serde_json::from_str(data["delta"]["partial_json"].as_str().unwrap()).unwrap();
    assert_eq!(input, json!({"path": "a"}));
}

#[test]
fn errors_in_each_wire() {
    let o = error_body(Wire::OpenAi, ErrorKind::RateLimit, "slow down");
    assert_eq!(o["error"]["type"], "rate_limit_error");
    assert_eq!(o["error"]["message"], "slow down");
    let a = error_body(Wire::Anthropic, ErrorKind::Overloaded, "busy");
    assert_eq!(
        a,
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}})
    );
}

fn frames_data(frames: &[String]) -> Vec<Value> {
    frames
        .iter()
        .filter_map(|f| f.lines().find_map(|l| l.strip_prefix("data: ")))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

#[test]
fn the_openai_stream_encoder_passes_pieces_on_and_ends_with_the_stored_answer() {
    let mut e = StreamEncoder::new(Wire::OpenAi, &META, true);
    let mut frames = e.begin();
    frames.extend(e.delta(&StreamDelta::Attempt));
    frames.extend(e.delta(&StreamDelta::Text {
        block: 0,
        text: "Read".into(),
    }));
    frames.extend(e.delta(&StreamDelta::Text {
        block: 0,
        text: "ing.".into(),
    }));
    frames.extend(e.delta(&StreamDelta::ToolCallStart {
        index: 1,
        id: "toolu_1".into(),
        name: "Read".into(),
    }));
    frames.extend(e.delta(&StreamDelta::ToolCallArguments {
        index: 1,
        fragment: "{\"path\":".into(),
    }));
    frames.extend(e.delta(&StreamDelta::ToolCallArguments {
        index: 1,
        fragment: "\"a\"}".into(),
    }));
    frames.extend(e.finish(&tool_answer()));
    assert_eq!(frames.last().unwrap(), "data: [DONE]\n\n");
    let data = frames_data(&frames);
    let text: String = data
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "Reading.");
    let args: String = data
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str())
        .collect();
    assert_eq!(args, r#"{"path":"a"}"#);
    assert_eq!(data[3]["choices"][0]["delta"]["tool_calls"][0]["index"], 0);
    assert_eq!(
        data[3]["choices"][0]["delta"]["tool_calls"][0]["id"],
        "toolu_1"
    );
    assert_eq!(
        data[data.len() - 2]["choices"][0]["finish_reason"],
        "tool_calls"
    );
    assert_eq!(data[data.len() - 1]["usage"]["completion_tokens"], 3);
}

#[test]
fn the_anthropic_stream_encoder_keeps_blocks_apart() {
    let mut e = StreamEncoder::new(Wire::Anthropic, &META, false);
    let mut frames = e.begin();
    frames.extend(e.delta(&StreamDelta::Text {
        block: 0,
        text: "one".into(),
    }));
    frames.extend(e.delta(&StreamDelta::Text {
        block: 1,
        text: "two".into(),
    }));
    frames.extend(e.delta(&StreamDelta::ToolCallStart {
        index: 2,
        id: "toolu_1".into(),
        name: "Read".into(),
    }));
    frames.extend(e.delta(&StreamDelta::ToolCallArguments {
        index: 2,
        fragment: "{}".into(),
    }));
    frames.extend(e.finish(&tool_answer()));
    let names: Vec<&str> = frames
        .iter()
        .map(|f| f.lines().next().unwrap().trim_start_matches("event: "))
        .collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    let data = frames_data(&frames);
    assert_eq!(data[7]["content_block"]["id"], "toolu_1");
    assert_eq!(data[8]["index"], 2);
    assert_eq!(data[10]["delta"]["stop_reason"], "tool_use");
}

#[test]
fn a_retry_after_content_was_sent_ends_the_stream_with_an_error() {
    let mut e = StreamEncoder::new(Wire::Anthropic, &META, false);
    e.begin();
    assert_eq!(
        e.delta(&StreamDelta::Text {
            block: 0,
            text: "par".into()
        })
        .len(),
        2
    );
    let broke = e.delta(&StreamDelta::Attempt);
    assert_eq!(broke.len(), 1);
    assert!(broke[0].starts_with("event: error\n"), "{broke:?}");
    // Nothing after it: neither the retried text nor the end.
    assert!(
        e.delta(&StreamDelta::Text {
            block: 0,
            text: "partial".into()
        })
        .is_empty()
    );
    assert!(e.finish(&tool_answer()).is_empty());
    let mut o = StreamEncoder::new(Wire::OpenAi, &META, false);
    o.begin();
    let failed = o.fail(ErrorKind::Upstream, "gone");
    assert!(failed[0].contains("\"api_error\""), "{failed:?}");
    assert_eq!(failed[1], "data: [DONE]\n\n");
}

#[test]
fn a_responses_answer_has_a_message_item_a_call_item_and_usage() {
    let v = responses_response(&tool_answer(), &META);
    assert_eq!(v["object"], "response");
    assert_eq!(v["status"], "completed");
    assert_eq!(v["output"][0]["type"], "message");
    assert_eq!(v["output"][0]["content"][0]["text"], "Reading.");
    assert_eq!(v["output"][1]["type"], "function_call");
    assert_eq!(v["output"][1]["call_id"], "toolu_1");
    assert_eq!(v["output"][1]["arguments"], r#"{"path":"a"}"#);
    // Input counts what was read from the cache too, as OpenAI reports it.
    assert_eq!(v["usage"]["input_tokens"], 15);
    assert_eq!(v["usage"]["input_tokens_details"]["cached_tokens"], 5);
    assert_eq!(v["usage"]["output_tokens"], 3);
}

#[test]
fn the_responses_stream_encoder_numbers_its_events_and_ends_with_the_streamed_items() {
    let mut encoder = StreamEncoder::new(Wire::Responses, &META, false);
    let mut frames = encoder.begin();
    for delta in [
        StreamDelta::Attempt,
        StreamDelta::Text {
            block: 0,
            text: "Read".into(),
        },
        StreamDelta::Text {
            block: 0,
            text: "ing.".into(),
        },
        StreamDelta::ToolCallStart {
            index: 0,
            id: "toolu_1".into(),
            name: "Read".into(),
        },
        StreamDelta::ToolCallArguments {
            index: 0,
            fragment: "{\"path\":".into(),
        },
        StreamDelta::ToolCallArguments {
            index: 0,
            fragment: "\"a\"}".into(),
        },
    ] {
        frames.extend(encoder.delta(&delta));
    }
    frames.extend(encoder.finish(&tool_answer()));
    let events = frames_data(&frames);
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    for (n, e) in events.iter().enumerate() {
        assert_eq!(e["sequence_number"], n as u64);
    }
    let done = &events[8]["item"];
    assert_eq!(done["content"][0]["text"], "Reading.");
    let completed = &events[14]["response"];
    assert_eq!(completed["output"][1]["arguments"], r#"{"path":"a"}"#);
    assert_eq!(completed["output"][0]["id"], events[2]["item"]["id"]);
    assert_eq!(completed["usage"]["output_tokens"], 3);
}

#[test]
fn a_failed_responses_stream_says_so_in_its_own_event() {
    let mut encoder = StreamEncoder::new(Wire::Responses, &META, false);
    encoder.begin();
    let events = frames_data(&encoder.fail(ErrorKind::Upstream, "upstream went away"));
    assert_eq!(events[0]["type"], "response.failed");
    assert_eq!(events[0]["response"]["status"], "failed");
    assert_eq!(
        events[0]["response"]["error"]["message"],
        "upstream went away"
    );
    assert!(encoder.finish(&tool_answer()).is_empty());
}

/// The fields OpenAI's schema requires of every answer are there: `logprobs` and `refusal` in a
/// chat answer; in a Responses answer the request's echo (what the client sent, else OpenAI's
/// defaults), `cache_write_tokens`, `logprobs` on text parts and text events, and the `name` on
/// `function_call_arguments.done`.
#[test]
fn answers_carry_the_fields_openais_schema_requires() {
    let chat = openai_response(&tool_answer(), &META);
    assert_eq!(chat["choices"][0]["logprobs"], Value::Null);
    assert!(chat["choices"][0]["message"].get("refusal").is_some());

    let echo = ResponsesEcho::of_request(&json!({
        "instructions": "Be brief.", "temperature": 0.2, "metadata": {"team": "a"},
        "tools": [{"type": "function", "name": "Read"}], "tool_choice": "required",
    }))
    .unwrap();
    let meta = AnswerMeta {
        echo: Some(&echo),
        ..META
    };
    let whole = responses_response(&tool_answer(), &meta);
    assert_eq!(whole["instructions"], "Be brief.");
    assert_eq!(whole["temperature"], 0.2);
    assert_eq!(whole["top_p"], 1.0);
    assert_eq!(whole["metadata"], json!({"team": "a"}));
    assert_eq!(whole["tool_choice"], "required");
    assert_eq!(whole["tools"][0]["name"], "Read");
    assert_eq!(whole["parallel_tool_calls"], true);
    assert_eq!(
        whole["usage"]["input_tokens_details"]["cache_write_tokens"],
        0
    );
    assert_eq!(whole["output"][0]["content"][0]["logprobs"], json!([]));

    let events = frames_data(&responses_sse(&tool_answer(), &meta));
    for e in &events {
        if let Some(response) = e.get("response") {
            assert_eq!(response["instructions"], "Be brief.", "{e}");
            assert_eq!(response["metadata"], json!({"team": "a"}), "{e}");
        }
        if e["type"]
            .as_str()
            .unwrap()
            .starts_with("response.output_text.")
        {
            assert_eq!(e["logprobs"], json!([]), "{e}");
        }
        if e["type"] == "response.function_call_arguments.done" {
            assert_eq!(e["name"], "Read", "{e}");
        }
    }
}

/// An echoed field of the wrong type is refused naming it: echoed, it would make the answer
/// break OpenAI's schema.
#[test]
fn a_responses_field_of_the_wrong_type_is_refused_naming_it() {
    for (body, field) in [
        (json!({"instructions": [null]}), "`instructions`"),
        (json!({"temperature": "hot"}), "`temperature`"),
        (json!({"top_p": 3}), "`top_p`"),
        (json!({"metadata": {"n": 1}}), "`metadata`"),
        (json!({"parallel_tool_calls": {}}), "`parallel_tool_calls`"),
        (json!({"tool_choice": 7}), "`tool_choice`"),
    ] {
        let e = ResponsesEcho::of_request(&body).unwrap_err();
        assert!(e.starts_with(field), "{e}");
    }
    assert_eq!(
        ResponsesEcho::of_request(&json!({"temperature": null})).unwrap(),
        ResponsesEcho::default()
    );
}

/// An answer from a Responses upstream: its reasoning item, then text and a custom tool call.
fn answer_with_items() -> AssistantMessage {
    use crate::providers::responses::opaque::opaque_block;
    let mut answer = tool_answer();
    answer.content.insert(0, opaque_block(reasoning_item()));
    answer.content.push(opaque_block(
        json!({"type": "custom_tool_call", "call_id": "call_p",
        "name": "apply_patch", "input": "*** Begin Patch\n*** End Patch\n"}),
    ));
    answer
}

fn reasoning_item() -> Value {
    json!({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA=="})
}

/// The items a Responses upstream produced reach a Responses client unchanged, where they
/// stood, whole and streamed, so it sends them back on its next turn.
#[test]
fn a_responses_client_gets_the_upstreams_items_unchanged_in_order() {
    let whole = responses_response(&answer_with_items(), &META);
    let kinds: Vec<&str> = whole["output"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["reasoning", "message", "function_call", "custom_tool_call"]
    );
    assert_eq!(whole["output"][0], reasoning_item());

    let mut encoder = StreamEncoder::new(Wire::Responses, &META, false);
    let mut frames = encoder.begin();
    for delta in [
        StreamDelta::Attempt,
        StreamDelta::Item {
            index: 0,
            item: reasoning_item(),
        },
        StreamDelta::Text {
            block: 1,
            text: "Reading.".into(),
        },
    ] {
        frames.extend(encoder.delta(&delta));
    }
    let mut answer = answer_with_items();
    answer.content.truncate(2);
    answer.stop_reason = StopReason::Stop;
    frames.extend(encoder.finish(&answer));
    let events = frames_data(&frames);
    let done: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "response.output_item.done")
        .map(|e| &e["item"])
        .collect();
    assert_eq!(done[0], &reasoning_item());
    assert_eq!(done[1]["type"], "message");
    let completed = events.last().unwrap();
    assert_eq!(completed["response"]["output"][0], reasoning_item());

    // A chat client's stream has no place for the item: nothing is written for it.
    let mut chat = StreamEncoder::new(Wire::OpenAi, &META, false);
    assert!(
        chat.delta(&StreamDelta::Item {
            index: 0,
            item: reasoning_item()
        })
        .is_empty()
    );
}

/// A Responses client gets the items named as the Responses upstream named them (so the ids
/// it sends back are the upstream's): streamed, from each item's `ItemId`; whole, from the
/// templates the answer kept. Items without one keep ids of serve's making.
#[test]
fn a_responses_client_gets_the_upstreams_item_ids() {
    let mut encoder = StreamEncoder::new(Wire::Responses, &META, false);
    let mut frames = encoder.begin();
    for delta in [
        StreamDelta::Attempt,
        StreamDelta::ItemId {
            index: 0,
            id: "msg_up".into(),
        },
        StreamDelta::Text {
            block: 0,
            text: "Reading.".into(),
        },
        StreamDelta::ItemId {
            index: 1,
            id: "fc_up".into(),
        },
        StreamDelta::ToolCallStart {
            index: 1,
            id: "call_1".into(),
            name: "Read".into(),
        },
        StreamDelta::ToolCallArguments {
            index: 1,
            fragment: "{}".into(),
        },
    ] {
        frames.extend(encoder.delta(&delta));
    }
    frames.extend(encoder.finish(&tool_answer()));
    let events = frames_data(&frames);
    let completed = events.last().unwrap();
    let ids: Vec<&str> = completed["response"]["output"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["msg_up", "fc_up"]);
    assert!(
        events
            .iter()
            .filter(|e| e["type"] == "response.output_text.delta")
            .all(|e| e["item_id"] == "msg_up")
    );

    // The whole answer, from the templates a Responses upstream's answer keeps.
    let mut answer = tool_answer();
    let template = |item: Value| {
        let mut extra = rampart_message::Extra::new();
        extra.insert(
            crate::providers::responses::template::TEMPLATE_KEY.into(),
            item,
        );
        extra
    };
    for block in &mut answer.content {
        match block {
            ContentBlock::Text(t) => {
                t.extra = template(
                    json!({"type": "message", "id": "msg_up", "role": "assistant",
                                          "content": [{"type": "output_text", "text": null}]}),
                );
            }
            ContentBlock::ToolCall(c) => {
                c.extra = template(json!({"type": "function_call", "id": "fc_up",
                                          "call_id": null, "name": null, "arguments": null}));
            }
            _ => {}
        }
    }
    for output in [
        responses_response(&answer, &META)["output"].clone(),
        frames_data(&responses_sse(&answer, &META)).last().unwrap()["response"]["output"].clone(),
    ] {
        let ids: Vec<&str> = output
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["msg_up", "fc_up"], "{output:#}");
    }
    // Without templates: serve's own.
    let own = responses_response(&tool_answer(), &META);
    assert!(own["output"][0]["id"].as_str().unwrap().starts_with("msg_"));
    assert_ne!(own["output"][0]["id"], "msg_up");
}
