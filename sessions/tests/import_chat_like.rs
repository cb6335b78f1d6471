//! Chat-completions-shaped sources on small hand-written inputs: OpenAI
//! message arrays and LiteLLM logs, OpenHands events (multi-call responses,
//! observations), SWE-agent trajectories without `history`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rampart_message::{AgentMessage, Content, ContentBlock, StopReason};
use rampart_sessions::import::{Imported, ImportedKind, SourceFormat, import_bytes};
use serde_json::{Value, json};

fn import(doc: &Value) -> Imported {
    let mut all = import_bytes(doc.to_string().as_bytes(), "input.json").unwrap();
    assert_eq!(all.len(), 1);
    all.remove(0)
}

fn messages(imported: &Imported) -> Vec<&AgentMessage> {
    imported
        .items
        .iter()
        .filter_map(|i| match &i.kind {
            ImportedKind::Message(m) => Some(m),
            _ => None,
        })
        .collect()
}

#[test]
fn openai_messages_map_to_pi() {
    let doc = json!([
        {"role": "system", "content": "You are terse."},
        {"role": "developer", "content": [{"type": "text", "text": "Prefer Rust."}]},
        {"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ"}},
            {"type": "image_url", "image_url": {"url": "https://example.invalid/cat.png"}}
        ], "name": "alice"},
        {"role": "assistant", "content": null, "reasoning_content": "look first",
         "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "view", "arguments": "{\"path\": \"/a\"}"}},
            {"id": "call_2", "type": "function", "function": {"name": "view", "arguments": "{not json"}}
         ]},
        {"role": "tool", "tool_call_id": "call_1", "content": "A"},
        {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "B"}]},
        {"role": "assistant", "content": "", "function_call": {"name": "legacy", "arguments": "{}"}},
        {"role": "function", "name": "legacy", "content": "ok"},
        {"role": "critic", "content": "meh"}
    ]);
    let imported = import(&doc);
    assert_eq!(imported.format, SourceFormat::OpenAiChat);
    let ImportedKind::SystemPrompt { text, tools } = &imported.items[0].kind else {
        panic!("{:?}", imported.items[0].kind)
    };
    assert_eq!((text.as_str(), tools), ("You are terse.", &None));
    let ImportedKind::SystemPrompt { text, .. } = &imported.items[1].kind else {
        panic!()
    };
    assert_eq!(text, "Prefer Rust.");
    assert_eq!(imported.items[1].extra["role"], "developer");

    let msgs = messages(&imported);
    let AgentMessage::User(user) = msgs[0] else {
        panic!()
    };
    let Content::Blocks(blocks) = &user.content else {
        panic!()
    };
    assert!(matches!(&blocks[1], ContentBlock::Image(i) if i.mime_type == "image/jpeg"));
    assert!(matches!(&blocks[2], ContentBlock::Other(_)));
    assert_eq!(imported.items[2].extra["name"], "alice");

    let AgentMessage::Assistant(a) = msgs[1] else {
        panic!()
    };
    assert_eq!(a.api, "openai-completions");
    assert_eq!(a.stop_reason, StopReason::ToolUse);
    let types: Vec<&str> = a.content.iter().map(ContentBlock::block_type).collect();
    assert_eq!(types, ["thinking", "toolCall", "toolCall"]);
    let calls: Vec<_> = msgs[1].tool_calls().collect();
    assert_eq!(calls[0].arguments, json!({"path": "/a"}));
    assert_eq!(
        calls[1].arguments,
        json!("{not json"),
        "unparsable arguments kept"
    );

    let AgentMessage::ToolResult(r) = msgs[2] else {
        panic!()
    };
    assert_eq!(
        (r.tool_call_id.as_str(), r.tool_name.as_str()),
        ("call_1", "view")
    );

    // Legacy function_call / function pair up through a generated id.
    let legacy = msgs[4].tool_calls().next().unwrap();
    assert_eq!(msgs[5].tool_call_id(), Some(legacy.id.as_str()));

    let last = imported.items.last().unwrap();
    assert!(
        matches!(&last.kind, ImportedKind::Custom { custom_type, .. } if custom_type == "openai-chat.message")
    );
    for needle in ["remote URL", "not valid JSON", "\"critic\"", "no times"] {
        assert!(
            imported.warnings.iter().any(|w| w.contains(needle)),
            "no warning about {needle}: {:?}",
            imported.warnings
        );
    }
}

#[test]
fn litellm_logs_keep_request_and_response() {
    let doc = json!({
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "hi"}
        ],
        "tools": [{"type": "function", "function": {"name": "finish", "parameters": {}}}],
        "kwargs": {"temperature": 0},
        "response": {
            "id": "chatcmpl-1", "model": "litellm_proxy/claude-sonnet-4-20250514",
            "choices": [{"finish_reason": "stop", "index": 0,
                         "message": {"role": "assistant", "content": "hello"}}],
            "usage": {"prompt_tokens": 120, "completion_tokens": 7,
                      "prompt_tokens_details": {"cached_tokens": 100}}
        },
        "cost": 0.01,
        "timestamp": 1_757_015_046.707_548
    });
    let imported = import(&doc);
    assert_eq!(
        imported.started_at.as_deref(),
        Some("2025-09-04T19:44:06.708Z")
    );
    let kinds: Vec<&ImportedKind> = imported.items.iter().map(|i| &i.kind).collect();
    assert!(
        matches!(kinds[0], ImportedKind::Custom { custom_type, data }
        if custom_type == "openai-chat.request" && data["cost"] == 0.01 && data.get("tools").is_none())
    );
    assert!(
        matches!(kinds[1], ImportedKind::SystemPrompt { tools: Some(t), .. } if t[0]["function"]["name"] == "finish")
    );
    assert!(
        matches!(kinds[3], ImportedKind::ModelChange { provider, model_id }
        if provider == "anthropic" && model_id == "litellm_proxy/claude-sonnet-4-20250514")
    );
    let ImportedKind::Message(AgentMessage::Assistant(a)) = kinds[4] else {
        panic!("{:?}", kinds[4])
    };
    assert_eq!(
        (a.usage.input, a.usage.cache_read, a.usage.output),
        (20, 100, 7)
    );
    assert_eq!(a.stop_reason, StopReason::Stop);
    assert_eq!(a.timestamp, 1_757_015_046_708);
    assert_eq!(imported.items[4].extra["response"]["id"], "chatcmpl-1");
    assert!(imported.warnings.is_empty(), "{:?}", imported.warnings);
}

fn call(id: &str, name: &str, args: &str) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
}

#[test]
fn openhands_events_map_to_calls_and_results() {
    let response = json!({
        "id": "resp-1", "model": "claude-3-5-sonnet-20241022",
        "choices": [{"finish_reason": "tool_calls", "index": 0, "message": {
            "role": "assistant", "content": "Two looks.",
            "tool_calls": [call("t1", "execute_bash", "{\"command\": \"ls\"}"),
                           call("t2", "execute_bash", "{\"command\": \"pwd\"}")]
        }}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 9}
    });
    let tcm = |id: &str| {
        json!({"function_name": "execute_bash", "tool_call_id": id,
                                "model_response": response.clone(), "total_calls_in_response": 2})
    };
    let doc = json!([
        {"id": 0, "timestamp": "2025-01-20T20:29:13.519638", "source": "agent", "action": "system",
         "message": "sys", "args": {"content": "You are OpenHands.", "tools": [{"type": "function"}], "agent_class": "CodeActAgent"}},
        {"id": 1, "timestamp": "2025-01-20T20:29:14.000000", "source": "user", "action": "message",
         "message": "go", "args": {"content": "go", "image_urls": ["data:image/png;base64,AAAA"], "wait_for_response": false}},
        {"id": 2, "timestamp": "2025-01-20T20:29:15.000000", "source": "environment",
         "observation": "agent_state_changed", "content": "", "extras": {"agent_state": "running"}},
        {"id": 3, "timestamp": "2025-01-20T20:29:16.000000", "source": "agent", "action": "run",
         "tool_call_metadata": tcm("t1"), "args": {"command": "ls", "thought": "Two looks."}},
        {"id": 4, "timestamp": "2025-01-20T20:29:16.100000", "source": "agent", "action": "run",
         "tool_call_metadata": tcm("t2"), "args": {"command": "pwd", "thought": ""}},
        {"id": 5, "timestamp": "2025-01-20T20:29:17.000000", "source": "agent", "observation": "run", "cause": 3,
         "tool_call_metadata": tcm("t1"), "content": "a.txt",
         "extras": {"command": "ls", "metadata": {"exit_code": 0, "prefix": "", "suffix": "\n[exit 0]"}}, "success": true},
        {"id": 6, "timestamp": "2025-01-20T20:29:17.500000", "source": "agent", "observation": "run", "cause": 4,
         "tool_call_metadata": tcm("t2"), "content": "boom",
         "extras": {"command": "pwd", "metadata": {"exit_code": 1}}, "success": false},
        {"id": 7, "timestamp": "2025-01-20T20:29:18.000000", "source": "agent", "observation": "error",
         "content": "Parameter 'command' is missing.", "extras": {"error_id": ""}}
    ]);
    let imported = import(&doc);
    assert_eq!(imported.format, SourceFormat::OpenHandsEvents);
    assert_eq!(
        imported.started_at.as_deref(),
        Some("2025-01-20T20:29:13.519Z")
    );
    let kinds: Vec<&ImportedKind> = imported.items.iter().map(|i| &i.kind).collect();
    assert!(
        matches!(kinds[0], ImportedKind::SystemPrompt { text, tools: Some(_) } if text == "You are OpenHands.")
    );
    let ImportedKind::Message(AgentMessage::User(u)) = kinds[1] else {
        panic!()
    };
    assert!(matches!(&u.content, Content::Blocks(b) if b.len() == 2));
    assert!(
        matches!(kinds[2], ImportedKind::Custom { custom_type, .. } if custom_type == "openhands.observation")
    );
    assert!(
        matches!(kinds[3], ImportedKind::ModelChange { provider, .. } if provider == "anthropic")
    );
    // Two actions of one response: one assistant message with both calls.
    let ImportedKind::Message(m) = kinds[4] else {
        panic!()
    };
    assert_eq!(
        m.tool_calls().map(|c| c.id.as_str()).collect::<Vec<_>>(),
        ["t1", "t2"]
    );
    assert_eq!(
        imported.items[4].extra["openhandsActions"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(imported.items[4].source_id.as_deref(), Some("3"));
    let ImportedKind::Message(AgentMessage::ToolResult(r1)) = kinds[5] else {
        panic!()
    };
    assert_eq!(
        r1.content,
        Content::Blocks(vec![ContentBlock::text("a.txt\n[exit 0]")])
    );
    assert!(!r1.is_error);
    assert_eq!(r1.details.as_ref().unwrap()["command"], "ls");
    assert_eq!(imported.items[5].source_parent_id.as_deref(), Some("3"));
    let ImportedKind::Message(AgentMessage::ToolResult(r2)) = kinds[6] else {
        panic!()
    };
    assert!(r2.is_error);
    let ImportedKind::Message(AgentMessage::User(err)) = kinds[7] else {
        panic!()
    };
    assert_eq!(
        err.content,
        Content::Blocks(vec![ContentBlock::text("Parameter 'command' is missing.")])
    );
    assert_eq!(kinds.len(), 8);
    assert!(imported.warnings.is_empty(), "{:?}", imported.warnings);
}

#[test]
fn openhands_eval_output_is_one_session_per_instance() {
    let instance = |id: &str| {
        json!({"instance_id": id, "instruction": "fix it", "metadata": {"agent_class": "CodeActAgent"},
               "history": [{"id": 0, "timestamp": "2025-04-30T16:32:54.707474", "source": "user",
                            "action": "message", "message": "fix it", "args": {"content": "fix it"}}],
               "test_result": {"git_patch": ""}})
        .to_string()
    };
    let text = format!("{}\n{}\nnot json\n", instance("a-1"), instance("b-2"));
    let all = import_bytes(text.as_bytes(), "output.jsonl").unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(all[0].source_session_id.as_deref(), Some("a-1"));
    assert_eq!(all[1].source_session_id.as_deref(), Some("b-2"));
    assert!(
        matches!(&all[0].items[0].kind, ImportedKind::Custom { custom_type, data }
        if custom_type == "openhands.instance" && data["instruction"] == "fix it" && data.get("history").is_none())
    );
    // The broken third line is kept (and reported) in the last session.
    assert!(all[1].warnings.iter().any(|w| w.contains(":3: ")));
    assert!(
        matches!(&all[1].items.last().unwrap().kind, ImportedKind::Custom { custom_type, .. } if custom_type == "import.unparsed-line")
    );
}

#[test]
fn swe_agent_without_history_is_rebuilt_from_the_trajectory() {
    let doc = json!({
        "environment": "swe_main",
        "trajectory": [
            {"action": "ls", "observation": "a.py", "response": "Let me look.\n```\nls\n```", "thought": "Let me look.", "state": "{}"},
            {"action": "submit", "observation": "", "response": "Done.\n```\nsubmit\n```", "thought": "Done."}
        ],
        "info": {"exit_status": "submitted"}
    });
    let imported = import(&doc);
    assert_eq!(imported.format, SourceFormat::SweAgentTraj);
    let roles: Vec<&str> = messages(&imported).iter().map(|m| m.role()).collect();
    assert_eq!(roles, ["assistant", "user", "assistant", "user"]);
    assert!(imported.warnings.iter().any(|w| w.contains("no `history`")));
    let customs: Vec<&str> = imported
        .items
        .iter()
        .filter_map(|i| match &i.kind {
            ImportedKind::Custom { custom_type, .. } => Some(custom_type.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        customs,
        ["swe-agent.config", "swe-agent.trajectory", "swe-agent.info"]
    );
}

#[test]
fn swe_agent_tool_messages_answer_their_call() {
    let doc = json!({
        "trajectory": [],
        "history": [
            {"role": "system", "content": "sys", "agent": "main", "message_type": "system_prompt"},
            {"role": "user", "content": "task", "agent": "main", "message_type": "observation"},
            {"role": "assistant", "content": "look", "thought": "look", "action": "ls", "agent": "main",
             "message_type": "action", "tool_calls": [call("call_a", "bash", "{\"command\":\"ls\"}")]},
            {"role": "tool", "content": "a.py", "agent": "main", "message_type": "observation",
             "tool_call_ids": ["call_a"]}
        ],
        "replay_config": "{\"agent\": {\"model\": {\"name\": \"gpt-4o\"}}}"
    });
    let imported = import(&doc);
    let msgs = messages(&imported);
    assert_eq!(msgs[2].tool_call_id(), Some("call_a"));
    let AgentMessage::ToolResult(r) = msgs[2] else {
        panic!()
    };
    assert_eq!(r.tool_name, "bash");
    let AgentMessage::Assistant(a) = msgs[1] else {
        panic!()
    };
    assert_eq!(
        (a.model.as_str(), a.provider.as_str()),
        ("gpt-4o", "openai")
    );
    let tool_item = imported
        .items
        .iter()
        .find(|i| matches!(&i.kind, ImportedKind::Message(AgentMessage::ToolResult(_))))
        .unwrap();
    assert_eq!(tool_item.extra["tool_call_ids"], json!(["call_a"]));
    assert_eq!(tool_item.extra["message_type"], "observation");
}
