use serde_json::json;

use super::*;

fn refused(api: Api, body: Value) -> String {
    let obj = body.as_object().unwrap().clone();
    check(api, &obj).unwrap_err().0
}

fn accepted(api: Api, body: Value) {
    let obj = body.as_object().unwrap().clone();
    check(api, &obj).unwrap();
}

fn chat(messages: Value) -> Value {
    json!({"model": "m", "messages": messages})
}

#[test]
fn content_of_the_wrong_type_is_refused_naming_the_field() {
    for content in [json!(42), json!({"text": "hi"}), json!(null), json!(true)] {
        let e = refused(
            Api::OpenAiChat,
            chat(json!([{"role": "user", "content": content}])),
        );
        assert!(e.contains("`messages[0].content`"), "{e}");
        let e = refused(
            Api::Anthropic,
            json!({"model": "m", "messages": [{"role": "user", "content": content}]}),
        );
        assert!(e.contains("`messages[0].content`"), "{e}");
    }
    let e = refused(
        Api::OpenAiChat,
        chat(json!([{"role": "user", "content": [42]}])),
    );
    assert!(e.contains("`messages[0].content[0]`"), "{e}");
}

#[test]
fn an_assistant_that_only_calls_tools_may_have_null_content() {
    let calls =
        json!([{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]);
    accepted(
        Api::OpenAiChat,
        chat(json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": null, "tool_calls": calls},
            {"role": "tool", "tool_call_id": "c1", "content": "done"},
        ])),
    );
    accepted(
        Api::OpenAiChat,
        chat(
            json!([{"role": "user", "content": "go"}, {"role": "assistant", "tool_calls": calls}]),
        ),
    );
    let e = refused(
        Api::OpenAiChat,
        chat(json!([{"role": "user", "content": "go"}, {"role": "assistant", "content": null}])),
    );
    assert!(e.contains("`messages[1].content`"), "{e}");
}

#[test]
fn entries_that_are_not_messages_are_refused() {
    for api in [Api::OpenAiChat, Api::Anthropic] {
        let e = refused(
            api,
            chat(json!([{"role": "user", "content": "hi"}, "hello", 3])),
        );
        assert!(e.contains("`messages[1]`"), "{e}");
        let e = refused(api, chat(json!([{"role": "wizard", "content": "hi"}])));
        assert!(e.contains("`messages[0].role`"), "{e}");
    }
}

#[test]
fn max_tokens_must_be_a_positive_whole_number() {
    let msgs = json!([{"role": "user", "content": "hi"}]);
    for bad in [
        json!(-5),
        json!(0),
        json!(1.5),
        json!("ten"),
        json!(1_180_591_620_717_411_303_424.0_f64),
    ] {
        for key in ["max_tokens", "max_completion_tokens"] {
            let e = refused(
                Api::OpenAiChat,
                json!({"model": "m", "messages": msgs, key: bad}),
            );
            assert!(e.contains(&format!("`{key}`")), "{e}");
        }
    }
    // 2^70 written as an integer literal.
    let body: Value =
        serde_json::from_str(r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":1180591620717411303424}"#)
            .unwrap();
    let e = refused(Api::Anthropic, body);
    assert!(e.contains("`max_tokens`"), "{e}");
    accepted(
        Api::OpenAiChat,
        json!({"model": "m", "messages": msgs, "max_tokens": 4096}),
    );
    accepted(
        Api::OpenAiChat,
        json!({"model": "m", "messages": msgs, "max_tokens": null}),
    );
}

#[test]
fn stream_must_be_a_boolean() {
    let msgs = json!([{"role": "user", "content": "hi"}]);
    for bad in [json!("yes"), json!(1), json!("false")] {
        let e = refused(
            Api::OpenAiChat,
            json!({"model": "m", "messages": msgs, "stream": bad}),
        );
        assert!(e.contains("`stream`"), "{e}");
    }
    accepted(
        Api::Anthropic,
        json!({"model": "m", "messages": msgs, "stream": true}),
    );
}

#[test]
fn an_anthropic_system_must_be_text() {
    let msgs = json!([{"role": "user", "content": "hi"}]);
    for bad in [json!(42), json!({"text": "x"})] {
        let e = refused(
            Api::Anthropic,
            json!({"model": "m", "messages": msgs, "system": bad}),
        );
        assert!(e.contains("`system`"), "{e}");
    }
    let e = refused(
        Api::Anthropic,
        json!({"model": "m", "messages": msgs, "system": [{"type": "image"}]}),
    );
    assert!(e.contains("`system[0]`"), "{e}");
    accepted(
        Api::Anthropic,
        json!({"model": "m", "messages": msgs, "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}]}),
    );
}

#[test]
fn duplicate_tool_ids_are_refused() {
    let use_block = |id: &str| json!({"type": "tool_use", "id": id, "name": "f", "input": {}});
    let e = refused(
        Api::Anthropic,
        json!({"model": "m", "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [use_block("t1"), use_block("t1")]},
        ]}),
    );
    assert!(e.contains("`messages[1].content[1].id`"), "{e}");
    let result = |id: &str| json!({"type": "tool_result", "tool_use_id": id, "content": "ok"});
    let e = refused(
        Api::Anthropic,
        json!({"model": "m", "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [use_block("t1")]},
            {"role": "user", "content": [result("t1"), result("t1")]},
        ]}),
    );
    assert!(e.contains("`messages[2].content[1].tool_use_id`"), "{e}");
    let call = |id: &str| json!({"id": id, "type": "function", "function": {"name": "f", "arguments": "{}"}});
    let e = refused(
        Api::OpenAiChat,
        chat(json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": null, "tool_calls": [call("c1"), call("c1")]},
        ])),
    );
    assert!(e.contains("`messages[1].tool_calls[1].id`"), "{e}");
    let e = refused(
        Api::OpenAiChat,
        chat(json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": null, "tool_calls": [call("c1")]},
            {"role": "tool", "tool_call_id": "c1", "content": "a"},
            {"role": "tool", "tool_call_id": "c1", "content": "b"},
        ])),
    );
    assert!(e.contains("`messages[3].tool_call_id`"), "{e}");
    // The same id in two turns is another call.
    accepted(
        Api::OpenAiChat,
        chat(json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": null, "tool_calls": [call("c1")]},
            {"role": "tool", "tool_call_id": "c1", "content": "a"},
            {"role": "assistant", "content": null, "tool_calls": [call("c1")]},
            {"role": "tool", "tool_call_id": "c1", "content": "b"},
        ])),
    );
}

#[test]
fn a_message_too_large_to_keep_is_refused() {
    let big = "x".repeat(MAX_MESSAGE_BYTES + 1);
    let e = refused(
        Api::OpenAiChat,
        chat(json!([{"role": "user", "content": big}])),
    );
    assert!(e.contains("`messages[0]`") && e.contains("MB"), "{e}");
}

/// The size is the message's escaped JSON: a text short in characters but six bytes each
/// when written (control characters) is refused, a long plain one under the limit is kept.
#[test]
fn a_message_is_measured_as_it_is_written() {
    let escaped = "\u{1}".repeat(MAX_MESSAGE_BYTES / 6 + 1);
    let e = refused(
        Api::OpenAiChat,
        chat(json!([{"role": "user", "content": escaped}])),
    );
    assert!(e.contains("`messages[0]`") && e.contains("MB"), "{e}");
    let plain = "x".repeat(MAX_MESSAGE_BYTES - 100);
    accepted(
        Api::OpenAiChat,
        chat(json!([{"role": "user", "content": plain}])),
    );
}

/// A message the conversation cannot hold is refused naming it, never left out with the model
/// answering a conversation the client did not send (OpenAI refuses these too).
#[test]
fn tool_results_without_their_call_and_the_function_role_are_refused() {
    let call =
        json!({"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}});
    // A tool result with no call before it.
    let e = refused(
        Api::OpenAiChat,
        chat(
            json!([{"role": "user", "content": "go"}, {"role": "tool", "tool_call_id": "c9", "content": "x"}]),
        ),
    );
    assert!(
        e.contains("`messages[1].tool_call_id` \"c9\" answers no tool call"),
        "{e}"
    );
    // A result for another call than the assistant message before it made.
    let e = refused(
        Api::OpenAiChat,
        chat(json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": null, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c2", "content": "x"},
        ])),
    );
    assert!(e.contains("`messages[2].tool_call_id` \"c2\""), "{e}");
    // A tool message without its id.
    let e = refused(
        Api::OpenAiChat,
        chat(json!([{"role": "user", "content": "go"}, {"role": "tool", "content": "x"}])),
    );
    assert!(e.contains("`messages[1].tool_call_id` is required"), "{e}");
    // The deprecated function-calling form, both halves.
    let e = refused(
        Api::OpenAiChat,
        chat(json!([{"role": "function", "name": "f", "content": null}])),
    );
    assert!(e.contains("`messages[0]` has role \"function\""), "{e}");
    let e = refused(
        Api::OpenAiChat,
        chat(json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": null, "function_call": {"name": "f", "arguments": "{}"}},
        ])),
    );
    assert!(e.contains("`messages[1].function_call`"), "{e}");
}

/// More than one choice is refused saying so, not answered with one.
#[test]
fn more_than_one_choice_is_refused() {
    let user = json!([{"role": "user", "content": "hi"}]);
    let mut body = chat(user.clone());
    body["n"] = json!(3);
    let e = refused(Api::OpenAiChat, body);
    assert!(
        e.starts_with("`n` is 3: rampart serve answers one choice"),
        "{e}"
    );
    let mut body = chat(user.clone());
    body["n"] = json!(0);
    assert!(refused(Api::OpenAiChat, body).starts_with("`n` must be"));
    let mut body = chat(user);
    body["n"] = json!(1);
    accepted(Api::OpenAiChat, body);
}
