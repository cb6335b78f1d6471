//! Claude Code mapping details on small hand-written sessions: merging of
//! split responses, tool results and their details, forks, compaction,
//! blocks without a pi equivalent, partial lines and sub-agent sidecars.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rampart_message::{AgentMessage, Content, ContentBlock, StopReason};
use rampart_sessions::import::{Imported, ImportedKind, import_bytes, import_file};
use serde_json::{Value, json};

/// A Claude Code line with the usual envelope.
fn line(kind: &str, uuid: &str, parent: Option<&str>, second: u32, message: Value) -> String {
    json!({
        "parentUuid": parent, "isSidechain": false, "userType": "external",
        "cwd": "/w", "sessionId": "s-1", "version": "2.1.0", "gitBranch": "main",
        "type": kind, "message": message, "uuid": uuid,
        "timestamp": format!("2025-08-01T10:00:{second:02}.000Z")
    })
    .to_string()
}

fn response(id: &str, model: &str, content: Value, stop: Option<&str>, output: u64) -> Value {
    json!({
        "id": id, "type": "message", "role": "assistant", "model": model,
        "content": content, "stop_reason": stop, "stop_sequence": null,
        "usage": {"input_tokens": 10, "output_tokens": output,
                  "cache_read_input_tokens": 100, "cache_creation_input_tokens": 5}
    })
}

fn import(lines: &[String]) -> Imported {
    let text = lines.join("\n") + "\n";
    import_bytes(text.as_bytes(), "session.jsonl")
        .unwrap()
        .remove(0)
}

fn message(imported: &Imported, index: usize) -> &AgentMessage {
    match &imported.items[index].kind {
        ImportedKind::Message(m) => m,
        other => panic!("item {index} is {other:?}"),
    }
}

fn session() -> Vec<String> {
    let mut tool_result = json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "file x"}
    ]});
    let mut r1: Value =
        serde_json::from_str(&line("user", "r1", Some("a2"), 3, tool_result.take())).unwrap();
    r1["toolUseResult"] = json!({"file": {"path": "x", "numLines": 1}});
    vec![
        line(
            "user",
            "u1",
            None,
            0,
            json!({"role": "user", "content": "hello"}),
        ),
        line(
            "assistant",
            "a1",
            Some("u1"),
            1,
            response(
                "msg_1",
                "claude-sonnet-4-5",
                json!([{"type": "thinking", "thinking": "plan", "signature": "sig1"}]),
                None,
                1,
            ),
        ),
        line(
            "assistant",
            "a2",
            Some("a1"),
            2,
            response(
                "msg_1",
                "claude-sonnet-4-5",
                json!([{"type": "tool_use", "id": "t1", "name": "Read", "input": {"path": "x"}}]),
                None,
                20,
            ),
        ),
        r1.to_string(),
        json!({"parentUuid": "r1", "isSidechain": false, "type": "attachment", "uuid": "h1",
               "timestamp": "2025-08-01T10:00:04.000Z", "sessionId": "s-1",
               "attachment": {"type": "hook_success", "hookName": "PostToolUse", "content": ""}})
        .to_string(),
        line(
            "assistant",
            "a3",
            Some("h1"),
            5,
            response(
                "msg_1",
                "claude-sonnet-4-5",
                json!([{"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "ls"}}]),
                Some("tool_use"),
                30,
            ),
        ),
        line(
            "user",
            "r2",
            Some("a3"),
            6,
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t2", "is_error": true,
                 "content": [{"type": "text", "text": "boom"}]}
            ]}),
        ),
        line(
            "assistant",
            "a4",
            Some("r2"),
            7,
            response(
                "msg_2",
                "claude-opus-4-1",
                json!([
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "text", "text": "done"},
                    {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {"query": "q"}}
                ]),
                Some("end_turn"),
                3,
            ),
        ),
        json!({"type": "summary", "summary": "Reading x", "leafUuid": "a4"}).to_string(),
        line(
            "user",
            "u2",
            Some("a4"),
            9,
            json!({"role": "user", "content": [
                {"type": "text", "text": "look"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0"}}
            ]}),
        ),
        line(
            "assistant",
            "a5",
            Some("u2"),
            10,
            response(
                "msg_3",
                "claude-opus-4-1",
                json!([{"type": "text", "text": "a picture"}]),
                Some("end_turn"),
                2,
            ),
        ),
    ]
}

#[test]
fn split_response_lines_merge_and_results_follow() {
    let imported = import(&session());
    assert_eq!(imported.source_session_id.as_deref(), Some("s-1"));
    assert_eq!(imported.cwd.as_deref(), Some("/w"));
    assert_eq!(
        imported.started_at.as_deref(),
        Some("2025-08-01T10:00:00.000Z")
    );

    let kinds: Vec<String> = imported
        .items
        .iter()
        .map(|i| match &i.kind {
            ImportedKind::Message(m) => m.role().to_owned(),
            ImportedKind::ModelChange { model_id, .. } => format!("model:{model_id}"),
            ImportedKind::Summary { .. } => "summary".to_owned(),
            ImportedKind::Custom { custom_type, .. } => custom_type.clone(),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "user",
            "model:claude-sonnet-4-5",
            "assistant",
            "toolResult",
            "claude-code.attachment",
            "toolResult",
            "model:claude-opus-4-1",
            "assistant",
            "summary",
            "user",
            "assistant"
        ]
    );

    // Three lines, one message: both calls before either result.
    let AgentMessage::Assistant(a) = message(&imported, 2) else {
        panic!()
    };
    let types: Vec<&str> = a.content.iter().map(ContentBlock::block_type).collect();
    assert_eq!(types, ["thinking", "toolCall", "toolCall"]);
    assert_eq!(a.usage.output, 30, "the last line's usage, not a sum");
    assert_eq!(a.usage.cache_read, 100);
    assert_eq!(a.usage.cache_write, 5);
    assert_eq!(a.stop_reason, StopReason::ToolUse);
    assert_eq!(a.api, "anthropic-messages");
    assert_eq!(a.provider, "anthropic");
    let item = &imported.items[2];
    assert_eq!(item.source_id.as_deref(), Some("a1"));
    assert_eq!(item.extra["mergedIds"], json!(["a2", "a3"]));
    assert_eq!(item.extra["gitBranch"], "main");
    assert!(
        item.extra.get("sessionId").is_none(),
        "session-level values are not repeated"
    );

    let AgentMessage::ToolResult(r1) = message(&imported, 3) else {
        panic!()
    };
    assert_eq!(
        (r1.tool_call_id.as_str(), r1.tool_name.as_str()),
        ("t1", "Read")
    );
    assert_eq!(
        r1.details,
        Some(json!({"file": {"path": "x", "numLines": 1}}))
    );
    assert!(!r1.is_error);
    let AgentMessage::ToolResult(r2) = message(&imported, 5) else {
        panic!()
    };
    assert_eq!((r2.tool_name.as_str(), r2.is_error), ("Bash", true));

    let AgentMessage::Assistant(a4) = message(&imported, 7) else {
        panic!()
    };
    let ContentBlock::Thinking(redacted) = &a4.content[0] else {
        panic!()
    };
    assert_eq!(redacted.thinking_signature.as_deref(), Some("opaque"));
    assert_eq!(redacted.extra["redacted"], true);
    assert!(matches!(&a4.content[2], ContentBlock::Other(raw) if raw["type"] == "server_tool_use"));
    assert!(
        imported
            .warnings
            .iter()
            .any(|w| w.contains(":8: ") && w.contains("server_tool_use")),
        "{:?}",
        imported.warnings
    );

    let ImportedKind::Summary { text, leaf_id } = &imported.items[8].kind else {
        panic!()
    };
    assert_eq!(
        (text.as_str(), leaf_id.as_deref()),
        ("Reading x", Some("a4"))
    );

    let AgentMessage::User(u2) = message(&imported, 9) else {
        panic!()
    };
    let Content::Blocks(blocks) = &u2.content else {
        panic!()
    };
    assert!(
        matches!(&blocks[1], ContentBlock::Image(i) if i.mime_type == "image/png" && i.data == "iVBORw0")
    );

    // A linear session: each item follows the previous one.
    for (index, item) in imported.items.iter().enumerate() {
        assert_eq!(item.parent, index.checked_sub(1), "item {index}");
    }
    assert_eq!(imported.items[3].source_parent_id.as_deref(), Some("a2"));
}

#[test]
fn a_rewound_prompt_forks_where_the_source_says() {
    let mut lines = session();
    // The user went back to the first answer and asked something else.
    lines.push(line(
        "user",
        "u3",
        Some("a3"),
        20,
        json!({"role": "user", "content": "try again"}),
    ));
    // ...and later edited the very first prompt.
    lines.push(line(
        "user",
        "u4",
        None,
        30,
        json!({"role": "user", "content": "hello again"}),
    ));
    let imported = import(&lines);
    let n = imported.items.len();
    assert_eq!(
        imported.items[n - 2].parent,
        Some(2),
        "u3 hangs under the merged msg_1"
    );
    assert_eq!(imported.items[n - 1].parent, None, "u4 starts a new root");
}

#[test]
fn compaction_sidechains_and_broken_lines() {
    let mut summary: Value = serde_json::from_str(&line(
        "user",
        "c2",
        Some("c1"),
        41,
        json!({"role": "user", "content": "This session is being continued. Summary: fixed x."}),
    ))
    .unwrap();
    summary["isCompactSummary"] = json!(true);
    let lines = vec![
        line("user", "u1", None, 0, json!({"role": "user", "content": "hello"})),
        json!({"parentUuid": null, "logicalParentUuid": "u1", "isSidechain": false, "type": "system",
               "subtype": "compact_boundary", "content": "Conversation compacted", "uuid": "c1",
               "timestamp": "2025-08-01T10:00:40.000Z", "sessionId": "s-1"})
        .to_string(),
        summary.to_string(),
        line(
            "user",
            "x1",
            Some("c2"),
            42,
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_gone", "content": "?"}]}),
        ),
        r#"{"type":"assistant","uuid":"trunc"#.to_owned(),
    ];
    let imported = import(&lines);
    assert!(
        matches!(&imported.items[1].kind, ImportedKind::Custom { custom_type, .. } if custom_type == "claude-code.system")
    );
    assert_eq!(
        imported.items[1].parent,
        Some(0),
        "compaction boundary continues the chain"
    );
    assert!(
        matches!(&imported.items[2].kind, ImportedKind::Compaction { summary } if summary.contains("fixed x"))
    );
    assert!(
        imported.warnings.iter().any(|w| w.contains("toolu_gone")),
        "orphan result is reported: {:?}",
        imported.warnings
    );
    let last = imported.items.last().unwrap();
    assert!(
        matches!(&last.kind, ImportedKind::Custom { custom_type, data } if custom_type == "import.unparsed-line" && data["line"] == 5)
    );
    assert!(imported.warnings.iter().any(|w| w.contains(":5: ")));
}

#[test]
fn subagent_files_read_their_sidecar() {
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agent-abc123.jsonl");
    let mut first: Value = serde_json::from_str(&line(
        "user",
        "s1",
        None,
        0,
        json!({"role": "user", "content": "Research X"}),
    ))
    .unwrap();
    first["isSidechain"] = json!(true);
    first["agentId"] = json!("abc123");
    std::fs::write(&agent, first.to_string() + "\n").unwrap();
    std::fs::write(
        dir.path().join("agent-abc123.meta.json"),
        r#"{"agentType":"general-purpose","description":"Research X"}"#,
    )
    .unwrap();
    let imported = import_file(&agent).unwrap();
    assert_eq!(imported.items.len(), 2);
    assert!(
        matches!(&imported.items[0].kind, ImportedKind::Custom { custom_type, data }
        if custom_type == "claude-code.subagent-meta" && data["agentType"] == "general-purpose")
    );
    assert!(imported.items.iter().all(|i| i.sidechain));
    assert_eq!(imported.items[1].parent, Some(0));
    assert_eq!(imported.items[1].extra["agentId"], "abc123");
}

/// Issue 12, defect 9: a byte that is not UTF-8 in one line costs that line only; the warning
/// names the file and the line.
#[test]
fn an_invalid_byte_costs_only_its_line() {
    let lines = session();
    let whole = import(&lines);
    let mut bytes = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if i == 1 {
            // Inside a JSON string of the second line.
            let at = l.find("plan").unwrap();
            bytes.extend_from_slice(&l.as_bytes()[..at]);
            bytes.push(0xfe);
            bytes.extend_from_slice(&l.as_bytes()[at..]);
        } else {
            bytes.extend_from_slice(l.as_bytes());
        }
        bytes.push(b'\n');
    }
    let cut = import_bytes(&bytes, "session.jsonl").unwrap().remove(0);
    assert!(
        cut.warnings
            .iter()
            .any(|w| w.starts_with("session.jsonl:2: not UTF-8")),
        "{:?}",
        cut.warnings
    );
    assert!(
        cut.items.len() + 1 >= whole.items.len(),
        "only the bad line is lost: {} of {} items",
        cut.items.len(),
        whole.items.len()
    );
    // Binary data is still refused as a whole.
    let err = import_bytes(&[0xff, 0xfe, 0x00, 0x01, b'\n', 0xff], "blob.bin").unwrap_err();
    assert!(err.to_string().contains("not UTF-8"), "{err}");
}
