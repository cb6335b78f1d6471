use rampart_message::AgentMessage;
use serde_json::json;

use super::*;

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
    assert!(frames[5].contains(r#"\"path\":\"a\""#) || frames[5].contains("partial_json"));
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
