//! An upstream that answers at once, for measuring what `rampart serve` (and LiteLLM's proxy,
//! beside it) adds per request (`host/benches/serve_load.py`). It speaks just enough of OpenAI
//! chat completions, OpenAI Responses and Anthropic messages: every request gets the same short
//! answer, streamed when asked, with usage. Not a test double for behaviour (the tests have
//! their scripted loopback); a fixed, fast peer, so the proxy's own cost is what the load
//! generator sees.
//!
//! `cargo run --release -p rampart-host --example instant_upstream -- 127.0.0.1:9100`

use axum::Router;
use axum::body::Bytes;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use axum::routing::post;

const ANSWER: &str = "Done.";

fn wants_stream(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("stream").and_then(serde_json::Value::as_bool))
        .unwrap_or(false)
}

fn sse(events: &[String]) -> Response {
    ([(CONTENT_TYPE, "text/event-stream")], events.concat()).into_response()
}

async fn chat(body: Bytes) -> Response {
    if !wants_stream(&body) {
        let json = serde_json::json!({
            "id": "chatcmpl-bench", "object": "chat.completion", "created": 0, "model": "bench",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": ANSWER},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
        });
        return ([(CONTENT_TYPE, "application/json")], json.to_string()).into_response();
    }
    let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
        let c = serde_json::json!({
            "id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0,
            "model": "bench", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
        });
        format!("data: {c}\n\n")
    };
    let usage = serde_json::json!({
        "id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0, "model": "bench",
        "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
    });
    sse(&[
        chunk(
            serde_json::json!({"role": "assistant", "content": ANSWER}),
            serde_json::Value::Null,
        ),
        chunk(serde_json::json!({}), serde_json::json!("stop")),
        format!("data: {usage}\n\n"),
        "data: [DONE]\n\n".to_string(),
    ])
}

async fn messages(body: Bytes) -> Response {
    let message = serde_json::json!({
        "id": "msg_bench", "type": "message", "role": "assistant", "model": "bench",
        "content": [{"type": "text", "text": ANSWER}], "stop_reason": "end_turn",
        "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 2}
    });
    if !wants_stream(&body) {
        return ([(CONTENT_TYPE, "application/json")], message.to_string()).into_response();
    }
    let event = |name: &str, data: serde_json::Value| format!("event: {name}\ndata: {data}\n\n");
    let mut start = message.clone();
    start["content"] = serde_json::json!([]);
    start["stop_reason"] = serde_json::Value::Null;
    sse(&[
        event(
            "message_start",
            serde_json::json!({"type": "message_start", "message": start}),
        ),
        event(
            "content_block_start",
            serde_json::json!({"type": "content_block_start", "index": 0,
                               "content_block": {"type": "text", "text": ""}}),
        ),
        event(
            "content_block_delta",
            serde_json::json!({"type": "content_block_delta", "index": 0,
                               "delta": {"type": "text_delta", "text": ANSWER}}),
        ),
        event(
            "content_block_stop",
            serde_json::json!({"type": "content_block_stop", "index": 0}),
        ),
        event(
            "message_delta",
            serde_json::json!({"type": "message_delta",
                               "delta": {"stop_reason": "end_turn", "stop_sequence": null},
                               "usage": {"output_tokens": 2}}),
        ),
        event("message_stop", serde_json::json!({"type": "message_stop"})),
    ])
}

async fn responses(body: Bytes) -> Response {
    let item = serde_json::json!({
        "type": "message", "id": "msg_bench", "status": "completed", "role": "assistant",
        "content": [{"type": "output_text", "text": ANSWER, "annotations": []}]
    });
    let response = serde_json::json!({
        "id": "resp_bench", "object": "response", "created_at": 0, "status": "completed",
        "model": "bench", "output": [item],
        "usage": {"input_tokens": 10, "output_tokens": 2, "total_tokens": 12}
    });
    if !wants_stream(&body) {
        return ([(CONTENT_TYPE, "application/json")], response.to_string()).into_response();
    }
    let event = |data: serde_json::Value| {
        let name = data["type"].as_str().unwrap_or_default().to_owned();
        format!("event: {name}\ndata: {data}\n\n")
    };
    let mut created = response.clone();
    created["status"] = serde_json::json!("in_progress");
    created["output"] = serde_json::json!([]);
    let mut added = item.clone();
    added["content"] = serde_json::json!([]);
    sse(&[
        event(serde_json::json!({"type": "response.created", "response": created})),
        event(
            serde_json::json!({"type": "response.output_item.added", "output_index": 0,
                                 "item": added}),
        ),
        event(
            serde_json::json!({"type": "response.output_text.delta", "output_index": 0,
                                 "content_index": 0, "delta": ANSWER}),
        ),
        event(
            serde_json::json!({"type": "response.output_item.done", "output_index": 0,
                                 "item": item}),
        ),
        event(serde_json::json!({"type": "response.completed", "response": response})),
    ])
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9100".to_string());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/v1/responses", post(responses))
            .route("/v1/messages", post(messages));
        let listener = tokio::net::TcpListener::bind(&addr).await?;
        println!(
            "instant upstream listening on http://{}",
            listener.local_addr()?
        );
        axum::serve(listener, app).await?;
        Ok(())
    })
}
