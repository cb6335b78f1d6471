//! The exact request bodies an OpenAI-compatible server receives: a normal turn, the turn after
//! a compaction, and the turn after an in-session truncation pass. A change to any of them
//! changes what real models see, so it must show up in review as a snapshot diff.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::Path;

use common::Harness;
use common::loopback::{Loopback, openai_text_stream};
use rampart_engine_api::AgentMessage;
use rampart_host::config::{self, Config};
use rampart_sessions::Session;
use serde_json::{Value, json};

fn config_for(url: &str) -> Config {
    config::parse(
        &format!(
            "[agents.defaults.model]\nprimary = \"local/m\"\n\
             [agents.defaults.compaction]\nmodel = \"sim/default\"\nreserveTokensFloor = 20000\ntargetShare = 1.0\n\
             [models.providers.local]\napi = \"openai-completions\"\nbaseUrl = \"{url}\"\nmaxRetries = 0\n\
             [[models.providers.local.models]]\nid = \"m\"\ncontextWindow = 32000\n"
        ),
        Path::new("plugins.toml"),
    )
    .unwrap()
}

/// Runs one turn with `prompt` over `session` against a fresh loopback server and returns the
/// body the server received.
fn body_of_turn(session: &mut Session, prompt: &str) -> Value {
    let server = Loopback::start();
    server.push(openai_text_stream("ok", 100, 2));
    let h = Harness::new(config_for(&server.url()));
    let mut runner = h.runner();
    runner
        .run_turn(
            session,
            Some(AgentMessage::user_text(prompt, 1_763_000_000_000)),
        )
        .unwrap();
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    requests[0].body.clone()
}

fn call(id: &str, path: &str) -> AgentMessage {
    serde_json::from_value(json!({
        "role": "assistant",
        "content": [{"type": "toolCall", "id": id, "name": "read", "arguments": {"path": path}}],
        "api": "openai-completions", "provider": "local", "model": "m",
        "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
        "stopReason": "toolUse", "timestamp": 1_763_000_000_000u64
    }))
    .unwrap()
}

#[test]
fn a_normal_turn() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = common::new_session(dir.path());
    session
        .append_message(AgentMessage::user_text(
            "Read the config.",
            1_763_000_000_000,
        ))
        .unwrap();
    session
        .append_message(call("call_1", "plugins.toml"))
        .unwrap();
    session
        .append_message(AgentMessage::tool_result(
            "call_1",
            "read",
            "[plugins.slots]\ncontextEngine = \"legacy\"\n",
            false,
            1_763_000_000_000,
        ))
        .unwrap();
    session
        .append_message(AgentMessage::assistant_text(
            "It selects the legacy engine.",
            "openai-completions",
            "local",
            "m",
            1_763_000_000_000,
        ))
        .unwrap();
    insta::assert_json_snapshot!(body_of_turn(&mut session, "Thanks. And the window?"));
}

#[test]
fn the_turn_after_a_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = common::new_session(dir.path());
    for i in 0..80u64 {
        session
            .append_message(AgentMessage::user_text(
                format!(
                    "Step {i}: continue the migration. {}",
                    "Context. ".repeat(60)
                ),
                1_763_000_000_000 + i * 60_000,
            ))
            .unwrap();
        session
            .append_message(AgentMessage::assistant_text(
                format!("Step {i} done. {}", "Detail. ".repeat(90)),
                "openai-completions",
                "local",
                "m",
                1_763_000_000_000 + i * 60_000 + 1_000,
            ))
            .unwrap();
    }
    let body = body_of_turn(&mut session, "What is left?");
    assert!(
        body.to_string()
            .contains("compacted into the following summary")
    );
    insta::assert_json_snapshot!(body);
}

#[test]
fn the_turn_after_a_truncation_pass() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = common::new_session(dir.path());
    session
        .append_message(AgentMessage::user_text("Read the logs.", 1_763_000_000_000))
        .unwrap();
    for i in 0..5 {
        let id = format!("call_{i}");
        session
            .append_message(call(&id, &format!("log{i}")))
            .unwrap();
        session
            .append_message(AgentMessage::tool_result(
                &id,
                "read",
                format!("line {i}\n").repeat(1_250),
                false,
                1_763_000_000_000,
            ))
            .unwrap();
    }
    let body = body_of_turn(&mut session, "Summarise them.");
    assert!(body.to_string().contains("more characters truncated"));
    insta::assert_json_snapshot!(body);
}

/// Issue 13, item 4: a Claude Code tool result made only of `tool_reference` blocks (what a
/// tool search loaded), and a block of a kind nobody knows, reach both wire formats as text
/// that says what they were, never as an empty result.
#[test]
fn blocks_no_wire_format_has_are_sent_as_text_saying_what_they_were() {
    use rampart_host::providers::anthropic::to_anthropic_messages;
    use rampart_host::providers::openai::wire::to_openai_messages;

    let result: AgentMessage = serde_json::from_value(json!({
        "role": "toolResult", "toolCallId": "toolu_01", "toolName": "ToolSearch",
        "content": [
            {"type": "tool_reference", "tool_name": "WebSearch"},
            {"type": "tool_reference", "tool_name": "WebFetch"},
            {"type": "hologram", "frames": [1, 2, 3]}
        ],
        "isError": false, "timestamp": 1_763_000_000_000u64
    }))
    .unwrap();
    let messages: Vec<std::sync::Arc<AgentMessage>> = vec![
        std::sync::Arc::new(AgentMessage::user_text("Find the docs.", 1_763_000_000_000)),
        std::sync::Arc::new(call("toolu_01", "docs")),
        std::sync::Arc::new(result),
    ];
    let openai = to_openai_messages(messages.iter().map(|m| &**m));
    let anthropic = to_anthropic_messages(&messages);
    let tool = &openai[2]["content"];
    assert!(
        tool.as_str()
            .unwrap()
            .contains("[tool reference: WebSearch]"),
        "{tool}"
    );
    let sent = &anthropic[2]["content"][0]["content"];
    assert_eq!(sent.as_array().unwrap().len(), 3, "{sent}");
    insta::assert_json_snapshot!(json!({"openai": openai, "anthropic": anthropic}));
}
