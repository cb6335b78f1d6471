use std::sync::Arc;

use rampart_message::{AgentMessage, SharedMessage};
use serde_json::json;

use super::*;
use crate::openai::{request_body, request_bytes};
use crate::{Forwarded, ModelRequest, ToolSpec};

fn conversation() -> Vec<SharedMessage> {
    let assistant_with_call: AgentMessage = serde_json::from_value(json!({
        "role": "assistant",
        "content": [{"type": "toolCall", "id": "call_1", "name": "read",
                      "arguments": {"path": "src/\"quoted\".rs"}}],
        "api": "openai-completions", "provider": "up", "model": "m",
        "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
        "stopReason": "toolUse", "timestamp": 2
    }))
    .expect("an assistant message");
    let failed: AgentMessage = serde_json::from_value(json!({
        "role": "assistant", "content": [{"type": "text", "text": "half"}],
        "api": "openai-completions", "provider": "up", "model": "m",
        "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
        "stopReason": "error", "errorMessage": "boom", "timestamp": 3
    }))
    .expect("a failed assistant message");
    [
        AgentMessage::user_text("fix the test in é/\u{1F600}.rs\n\t\"now\"", 1),
        assistant_with_call,
        AgentMessage::tool_result(
            "call_1",
            "read",
            "fn main() {\n    println!(\"\\\\\");\n}",
            false,
            2,
        ),
        failed,
        AgentMessage::assistant_text("done", "openai-completions", "up", "m", 4),
        AgentMessage::user_text("and now?", 5),
    ]
    .into_iter()
    .map(Arc::new)
    .collect()
}

fn request(messages: Vec<SharedMessage>) -> ModelRequest {
    ModelRequest {
        model: "gpt-x".into(),
        system: Some("You are terse.".into()),
        messages: messages.into(),
        max_tokens: Some(512),
        forwarded: Forwarded {
            tools: vec![ToolSpec {
                name: "read".into(),
                description: Some("Reads a file".into()),
                parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            }],
            ..Default::default()
        },
        ..Default::default()
    }
}

#[test]
fn the_spliced_body_is_byte_for_byte_the_serialised_one() {
    let memo = WireMemo::default();
    let messages = conversation();
    let first = request(messages.clone());
    let expected = serde_json::to_vec(&request_body(&first)).expect("serialised");
    assert_eq!(
        String::from_utf8(request_bytes(&first, &memo)).expect("utf-8"),
        String::from_utf8(expected).expect("utf-8")
    );
    // The next request continues the conversation: the old messages come from the memo and
    // the body is still exactly the serialised one.
    let mut longer = messages;
    longer.push(Arc::new(AgentMessage::user_text("one more", 6)));
    let next = request(longer);
    let before = memo.stats();
    let spliced = request_bytes(&next, &memo);
    let after = memo.stats();
    assert_eq!(
        spliced,
        serde_json::to_vec(&request_body(&next)).expect("serialised")
    );
    assert_eq!(
        after.misses - before.misses,
        1,
        "only the new message is serialised"
    );
    assert!(after.hits - before.hits >= 4, "the rest come from the memo");
}

#[test]
fn a_body_without_system_prompt_or_messages_splices_as_it_serialises() {
    let memo = WireMemo::default();
    let bare = ModelRequest {
        model: "m".into(),
        ..Default::default()
    };
    assert_eq!(
        request_bytes(&bare, &memo),
        serde_json::to_vec(&request_body(&bare)).expect("serialised")
    );
}

#[test]
fn pieces_go_after_the_shells_own_elements() {
    let shell = json!({"a": 1, "list": [{"x": "y"}], "z": [1]});
    let pieces: Vec<Arc<[u8]>> = vec![Arc::from(&b"2"[..]), Arc::from(&b"\"three\""[..])];
    let written = write_spliced(shell.as_object().expect("an object"), "list", &pieces);
    assert_eq!(
        std::str::from_utf8(&written).expect("utf-8"),
        r#"{"a":1,"list":[{"x":"y"},2,"three"],"z":[1]}"#
    );
}

mod anthropic {
    use std::sync::Arc;

    use rampart_message::AgentMessage;
    use serde_json::json;

    use super::{conversation, request};
    use crate::ClientBreakpoints;
    use crate::anthropic::{BlockMemo, request_body, request_bytes};

    fn same(request: &crate::ModelRequest, memo: &BlockMemo) {
        let expected = serde_json::to_vec(&request_body(request)).expect("serialised");
        assert_eq!(
            String::from_utf8(request_bytes(request, memo)).expect("utf-8"),
            String::from_utf8(expected).expect("utf-8")
        );
    }

    fn with_cache(mut r: crate::ModelRequest, prompt_cache: bool) -> crate::ModelRequest {
        r.forwarded.prompt_cache = prompt_cache;
        r
    }

    #[test]
    fn rampart_s_own_breakpoints_splice_as_they_serialise() {
        let memo = BlockMemo::default();
        let mut messages = conversation();
        // A tool result and the next prompt land in one user turn, tool result first.
        messages.insert(3, Arc::new(AgentMessage::user_text("meanwhile, this", 3)));
        for cache in [true, false] {
            same(&with_cache(request(messages.clone()), cache), &memo);
        }
        messages.push(Arc::new(AgentMessage::user_text("one more", 9)));
        let before = memo.stats();
        same(&with_cache(request(messages), true), &memo);
        let after = memo.stats();
        assert_eq!(
            after.misses - before.misses,
            1,
            "only the new message is serialised"
        );
    }

    #[test]
    fn a_client_s_breakpoints_splice_as_they_serialise() {
        let memo = BlockMemo::default();
        let messages = conversation();
        let marked_text = "fix the test in é/\u{1F600}.rs\n\t\"now\"";
        for (system, marks) in [(true, true), (false, true), (true, false)] {
            let mut r = with_cache(request(messages.clone()), true);
            r.forwarded.client_breakpoints = ClientBreakpoints {
                system,
                marks: marks.then(|| {
                    Arc::new(move |m: &AgentMessage| {
                        serde_json::to_value(m).is_ok_and(|v| {
                            v.to_string().contains("src/\\\"quoted")
                                || v["content"][0]["text"] == json!(marked_text)
                        })
                    }) as crate::BreakpointMatcher
                }),
            };
            same(&r, &memo);
        }
    }
}
