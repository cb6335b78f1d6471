use super::*;
use crate::http::SseEvent;
use crate::responses::opaque::opaque_item;
use rampart_message::AgentMessage;

fn events(values: &[Value]) -> Vec<Result<SseEvent, Failure>> {
    values
        .iter()
        .map(|v| {
            Ok(SseEvent {
                event: v.get("type").and_then(Value::as_str).map(str::to_owned),
                data: v.to_string(),
            })
        })
        .collect()
}

fn reasoning() -> Value {
    json!({"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "plan"}],
           "encrypted_content": "gAAAAB-secret"})
}

/// A stream as OpenAI sends it: a reasoning item, a message, a function call, then
/// `response.completed` with the usage.
fn stream() -> Vec<Value> {
    let call = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "shell",
                      "arguments": "{\"command\":[\"ls\"]}", "status": "completed"});
    vec![
        json!({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}}),
        json!({"type": "response.output_item.added", "output_index": 0,
               "item": {"type": "reasoning", "id": "rs_1", "summary": []}}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": reasoning()}),
        json!({"type": "response.output_item.added", "output_index": 1,
               "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": []}}),
        json!({"type": "response.output_text.delta", "output_index": 1, "content_index": 0, "delta": "Listing"}),
        json!({"type": "response.output_text.delta", "output_index": 1, "content_index": 0, "delta": " files."}),
        json!({"type": "response.output_item.done", "output_index": 1,
               "item": {"type": "message", "id": "msg_1", "role": "assistant",
                        "content": [{"type": "output_text", "text": "Listing files.", "annotations": []}]}}),
        json!({"type": "response.output_item.added", "output_index": 2,
               "item": {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "shell", "arguments": ""}}),
        json!({"type": "response.function_call_arguments.delta", "output_index": 2, "delta": "{\"command\":"}),
        json!({"type": "response.function_call_arguments.delta", "output_index": 2, "delta": "[\"ls\"]}"}),
        json!({"type": "response.output_item.done", "output_index": 2, "item": call}),
        json!({"type": "response.completed", "response": {"id": "resp_1", "status": "completed", "model": "gpt-5",
               "output": [], "usage": {"input_tokens": 100, "output_tokens": 20,
                                       "input_tokens_details": {"cached_tokens": 60}}}}),
    ]
}

#[test]
fn a_streamed_answer_keeps_reasoning_text_and_calls_in_order() {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = {
        let seen = seen.clone();
        DeltaSink::new(move |d| {
            seen.lock().unwrap().push(d);
            true
        })
    };
    let answer = read_stream(events(&stream()).into_iter(), Some(&sink)).unwrap();
    let message = answer.into_message("openai", "gpt-5");
    assert_eq!(message.api, "openai-responses");
    assert_eq!(message.content.len(), 3, "{:?}", message.content);
    assert_eq!(opaque_item(&message.content[0]), Some(&reasoning()));
    assert!(matches!(&message.content[1], ContentBlock::Text(t) if t.text == "Listing files."));
    assert!(matches!(&message.content[2], ContentBlock::ToolCall(c)
        if c.id == "call_1" && c.name == "shell" && c.arguments == json!({"command": ["ls"]})));
    assert_eq!(message.stop_reason, StopReason::ToolUse);
    assert_eq!(
        (
            message.usage.input,
            message.usage.cache_read,
            message.usage.output
        ),
        (40, 60, 20)
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0], StreamDelta::Attempt);
    // The upstream's ids of the items it models, for a client of the same wire.
    for (index, id) in [(1, "msg_1"), (2, "fc_1")] {
        assert!(
            seen.contains(&StreamDelta::ItemId {
                index,
                id: id.into()
            }),
            "{seen:?}"
        );
    }
    assert_eq!(
        seen[1],
        StreamDelta::Item {
            index: 0,
            item: reasoning()
        }
    );
    assert!(seen.contains(&StreamDelta::ToolCallStart {
        index: 2,
        id: "call_1".into(),
        name: "shell".into()
    }));
    let text: String = seen
        .iter()
        .filter_map(|d| match d {
            StreamDelta::Text { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Listing files.");
}

#[test]
fn a_stream_cut_before_completed_is_dropped_and_retried() {
    let mut cut = stream();
    cut.pop();
    let failure = read_stream(events(&cut).into_iter(), None).unwrap_err();
    assert!(matches!(failure, Failure::Dropped(_)), "{failure:?}");
}

#[test]
fn failed_responses_and_error_events_carry_the_status_their_code_means() {
    let failed = json!({"type": "response.failed", "response": {"status": "failed",
        "error": {"code": "context_length_exceeded",
                  "message": "Your input exceeds the context window of this model."}}});
    match read_stream(events(&[failed]).into_iter(), None).unwrap_err() {
        Failure::Api { status, body, .. } => {
            assert_eq!(status, 400);
            assert!(body.contains("exceeds the context window"), "{body}");
        }
        other => panic!("{other:?}"),
    }
    let limited = json!({"type": "error", "code": "rate_limit_exceeded", "message": "slow down"});
    assert!(matches!(
        read_stream(events(&[limited]).into_iter(), None),
        Err(Failure::Api { status: 429, .. })
    ));
}

#[test]
fn a_whole_answer_reads_like_a_streamed_one() {
    let value = json!({"id": "resp_2", "status": "incomplete", "model": "gpt-5",
        "incomplete_details": {"reason": "max_output_tokens"},
        "output": [
            reasoning(),
            {"type": "web_search_call", "id": "ws_1", "status": "completed",
             "action": {"type": "search", "query": "rust"}},
            {"type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": "Part"}]}
        ],
        "usage": {"input_tokens": 5, "output_tokens": 7}});
    let message = Answer::from_response(&value).unwrap().into_message("p", "");
    assert_eq!(message.model, "gpt-5");
    assert_eq!(message.stop_reason, StopReason::Length);
    assert_eq!(opaque_item(&message.content[0]), Some(&reasoning()));
    assert_eq!(
        opaque_item(&message.content[1]).unwrap()["type"],
        "web_search_call"
    );
    assert!(matches!(&message.content[2], ContentBlock::Text(t) if t.text == "Part"));
    assert!(check_error(&json!({"error": {"code": "invalid_api_key", "message": "no"}})).is_err());
    assert!(Answer::from_response(&json!({"id": "x"})).is_err());
}

/// A server that sends a call's arguments or a message's text only whole (in the item's added
/// or done event, without deltas) still streams them to a client: it must not see an empty
/// call the stored answer does not have.
#[test]
fn whole_items_without_deltas_still_reach_a_streaming_client() {
    let call = json!({"type": "function_call", "call_id": "call_1", "name": "shell",
                      "arguments": "{\"command\":[\"ls\"]}"});
    let text = json!({"type": "message", "role": "assistant",
                      "content": [{"type": "output_text", "text": "Done."}]});
    let stream = vec![
        json!({"type": "response.output_item.added", "output_index": 0, "item": call}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": call}),
        json!({"type": "response.output_item.done", "output_index": 1, "item": text}),
        json!({"type": "response.completed", "response": {"status": "completed", "output": []}}),
    ];
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = {
        let seen = seen.clone();
        DeltaSink::new(move |d| {
            seen.lock().unwrap().push(d);
            true
        })
    };
    read_stream(events(&stream).into_iter(), Some(&sink)).unwrap();
    let seen = seen.lock().unwrap();
    let arguments: String = seen
        .iter()
        .filter_map(|d| match d {
            StreamDelta::ToolCallArguments { fragment, .. } => Some(fragment.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(arguments, "{\"command\":[\"ls\"]}", "{seen:?}");
    assert!(seen.contains(&StreamDelta::Text {
        block: 1,
        text: "Done.".into()
    }));
}

/// The model's items as it wrote them (ids, a call's `status`, a text's `annotations`) are
/// kept with the message and written back so: Codex sends them back with those fields.
#[test]
fn the_models_items_are_written_back_as_it_wrote_them() {
    let answer = read_stream(events(&stream()).into_iter(), None).unwrap();
    let message = AgentMessage::Assistant(answer.into_message("openai", "gpt-5"));
    let written = crate::responses::items::message_items(&message);
    let done: Vec<Value> = stream()
        .iter()
        .filter(|e| e["type"] == "response.output_item.done")
        .map(|e| e["item"].clone())
        .collect();
    assert_eq!(written, done);
}
