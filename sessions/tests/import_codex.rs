//! The hand-written Codex rollout fixture imports to exactly the expected
//! pi messages, and the older pre-envelope layout is read too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use rampart_sessions::import::{ImportedKind, SourceFormat, detect, import_bytes, import_file};
use serde_json::{Value, json};

const FIXTURE: &str =
    "tests/fixtures/codex/rollout-2025-09-14T10-02-11-0199477e-3c2a-7d31-9b0e-5a8f2c1d4e6b.jsonl";

/// One item as comparable JSON: messages as pi writes them (with the
/// reasoning item inside `thinkingSignature` parsed, so key order does not
/// matter), other kinds as a small tagged object.
fn as_json(kind: &ImportedKind) -> Value {
    match kind {
        ImportedKind::Message(m) => {
            let mut v = serde_json::to_value(m).unwrap();
            if let Some(blocks) = v.get_mut("content").and_then(Value::as_array_mut) {
                for block in blocks {
                    if let Some(Value::String(sig)) = block.get("thinkingSignature") {
                        let parsed: Value = serde_json::from_str(sig).unwrap();
                        block["thinkingSignature"] = parsed;
                    }
                }
            }
            v
        }
        ImportedKind::ModelChange { provider, model_id } => {
            json!({"modelChange": [provider, model_id]})
        }
        ImportedKind::ThinkingLevel(level) => json!({ "thinkingLevel": level }),
        ImportedKind::Compaction { summary } => json!({ "compaction": summary }),
        ImportedKind::Custom { custom_type, .. } => json!({ "custom": custom_type }),
        other => panic!("unexpected kind {other:?}"),
    }
}

fn usage(input: u64, output: u64, cache_read: u64, total: u64) -> Value {
    json!({
        "input": input, "output": output, "cacheRead": cache_read, "cacheWrite": 0,
        "totalTokens": total,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}
    })
}

fn shell_call(id: &str) -> Value {
    json!({
        "type": "toolCall", "id": id, "name": "shell",
        "arguments": {"command": ["bash", "-lc", "cargo test"], "workdir": "/home/dev/calc"}
    })
}

fn reasoning(text: &str, encrypted: &str) -> Value {
    json!({
        "type": "thinking", "thinking": text,
        "thinkingSignature": {
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": text}],
            "content": null,
            "encrypted_content": encrypted
        }
    })
}

fn assistant(content: Value, usage: Value, stop: &str, ts: u64) -> Value {
    json!({
        "role": "assistant", "content": content, "api": "openai-responses",
        "provider": "openai", "model": "gpt-5-codex", "usage": usage,
        "stopReason": stop, "timestamp": ts
    })
}

fn result(id: &str, name: &str, text: &str, is_error: bool, ts: u64) -> Value {
    json!({
        "role": "toolResult", "toolCallId": id, "toolName": name,
        "content": [{"type": "text", "text": text}], "isError": is_error, "timestamp": ts
    })
}

fn user(text: &str, ts: u64) -> Value {
    json!({"role": "user", "content": [{"type": "text", "text": text}], "timestamp": ts})
}

#[test]
fn codex_fixture_round_trips_to_the_expected_messages() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE);
    assert_eq!(
        detect(&std::fs::read(&path).unwrap()).ok(),
        Some(SourceFormat::CodexRollout)
    );
    let imported = import_file(&path).unwrap();
    assert_eq!(imported.format, SourceFormat::CodexRollout);
    assert_eq!(
        imported.source_session_id.as_deref(),
        Some("0199477e-3c2a-7d31-9b0e-5a8f2c1d4e6b")
    );
    assert_eq!(imported.cwd.as_deref(), Some("/home/dev/calc"));
    assert_eq!(
        imported.started_at.as_deref(),
        Some("2025-09-14T10:02:11.470Z")
    );

    let env = "<environment_context>\n  <cwd>/home/dev/calc</cwd>\n  <approval_policy>on-request</approval_policy>\n  <sandbox_mode>workspace-write</sandbox_mode>\n  <network_access>restricted</network_access>\n  <shell>bash</shell>\n</environment_context>";
    let failed = "{\"output\":\"running 1 test\\ntest tests::adds ... FAILED\\n\\nfailures:\\n---- tests::adds stdout ----\\nassertion `left == right` failed\\n  left: -1\\n right: 5\\n\\ntest result: FAILED. 0 passed; 1 failed\\n\",\"metadata\":{\"exit_code\":101,\"duration_seconds\":1.8}}";
    let patched = "{\"output\":\"Success. Updated the following files:\\nM src/lib.rs\\n\",\"metadata\":{\"exit_code\":0,\"duration_seconds\":0.0}}";
    let passed = "{\"output\":\"running 1 test\\ntest tests::adds ... ok\\n\\ntest result: ok. 1 passed; 0 failed\\n\",\"metadata\":{\"exit_code\":0,\"duration_seconds\":1.2}}";
    let patch = "*** Begin Patch\n*** Update File: src/lib.rs\n@@\n pub fn add(a: i64, b: i64) -> i64 {\n-    a - b\n+    a + b\n }\n*** End Patch\n";
    let fixed = "Fixed: `add` subtracted instead of adding. `cargo test` passes now.";
    let expected = vec![
        json!({"custom": "codex.session-meta"}),
        user(env, 1_757_844_131_490),
        json!({"modelChange": ["openai", "gpt-5-codex"]}),
        json!({"thinkingLevel": "medium"}),
        json!({"custom": "codex.turn-context"}),
        user("The add() test fails, can you fix it?", 1_757_844_139_010),
        // token_count with `info: null` carries only rate limits.
        json!({"custom": "codex.event"}),
        assistant(
            json!([
                reasoning(
                    "**Running the test suite**",
                    "gAAAAABoxkQ2c2VjcmV0LXJlYXNvbmluZy0x"
                ),
                shell_call("call_Rk2x9Qm1")
            ]),
            usage(1048, 96, 3072, 4216),
            "toolUse",
            1_757_844_143_114,
        ),
        result("call_Rk2x9Qm1", "shell", failed, true, 1_757_844_145_402),
        assistant(
            json!([
                reasoning("**Fixing the operator in add**", "gAAAAABoxkQ8c2VjcmV0LXJlYXNvbmluZy0y"),
                {
                    "type": "toolCall", "id": "call_P7aL2c", "name": "apply_patch",
                    "arguments": {"input": patch}, "status": "completed", "customTool": true
                }
            ]),
            usage(424, 118, 4096, 4638),
            "toolUse",
            1_757_844_149_016,
        ),
        result(
            "call_P7aL2c",
            "apply_patch",
            patched,
            false,
            1_757_844_149_101,
        ),
        assistant(
            json!([shell_call("call_T3vq8n")]),
            usage(554, 36, 4096, 4686),
            "toolUse",
            1_757_844_151_550,
        ),
        result("call_T3vq8n", "shell", passed, false, 1_757_844_153_020),
        assistant(
            json!([{"type": "text", "text": fixed, "textSignature": "msg_68c6a1b3e4f08190"}]),
            usage(704, 21, 4096, 4821),
            "stop",
            1_757_844_155_460,
        ),
        json!({"compaction": "The user asked to fix the failing add() test in /home/dev/calc. The assistant ran cargo test, found add() subtracted, patched src/lib.rs to a + b, and the test now passes."}),
        json!({"thinkingLevel": "high"}),
        json!({"custom": "codex.turn-context"}),
        user(
            "Thanks. Summarise the change in one line.",
            1_757_844_302_805,
        ),
        assistant(
            json!([{
                "type": "text", "text": "src/lib.rs: add() now returns a + b instead of a - b.",
                "textSignature": "msg_68c6a24e91b48190"
            }]),
            usage(1120, 19, 0, 1139),
            "stop",
            1_757_844_304_990,
        ),
    ];
    let actual: Vec<Value> = imported.items.iter().map(|i| as_json(&i.kind)).collect();
    assert_eq!(actual.len(), expected.len(), "{actual:#?}");
    for (index, (a, e)) in actual.iter().zip(&expected).enumerate() {
        assert_eq!(a, e, "item {index}");
    }

    // Linear chain, line numbers and times kept.
    for (index, item) in imported.items.iter().enumerate() {
        assert_eq!(item.parent, index.checked_sub(1));
        assert!(item.source_line.is_some());
        assert!(item.timestamp.is_some());
    }
    // The raw token_count event is kept with the message it measured.
    assert_eq!(
        imported.items[7].extra["codexTokenCount"]["info"]["model_context_window"],
        272_000
    );
    // The only warning: the event_msg lines repeating response items.
    assert_eq!(imported.warnings.len(), 1, "{:?}", imported.warnings);
    assert!(imported.warnings[0].contains(": 4 event_msg line(s)"));
}

#[test]
fn pre_envelope_rollouts_are_read() {
    let text = concat!(
        r#"{"id":"5973b6c0-94b8-487b-a530-2aeb6098ae0e","timestamp":"2025-05-01T09:00:00.000Z","instructions":null,"git":null}"#,
        "\n",
        r#"{"record_type":"state"}"#,
        "\n",
        r#"{"type":"message","id":null,"role":"user","content":[{"type":"input_text","text":"list files"}]}"#,
        "\n",
        r#"{"type":"function_call","id":"fc_1","name":"shell","arguments":"{\"command\":[\"ls\"]}","call_id":"call_1"}"#,
        "\n",
        r#"{"type":"function_call_output","call_id":"call_1","output":{"content":"a.txt\n","success":true}}"#,
        "\n",
        r#"{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"One file: a.txt"}]}"#,
        "\n"
    );
    assert_eq!(
        detect(text.as_bytes()).ok(),
        Some(SourceFormat::CodexRollout)
    );
    let imported = import_bytes(text.as_bytes(), "legacy.jsonl")
        .unwrap()
        .remove(0);
    assert_eq!(
        imported.source_session_id.as_deref(),
        Some("5973b6c0-94b8-487b-a530-2aeb6098ae0e")
    );
    let kinds: Vec<Value> = imported.items.iter().map(|i| as_json(&i.kind)).collect();
    assert_eq!(kinds[0], json!({"custom": "codex.session-meta"}));
    assert_eq!(kinds[1], json!({"custom": "codex.state"}));
    assert_eq!(kinds[2]["role"], "user");
    assert_eq!(kinds[3]["content"][0]["name"], "shell");
    assert_eq!(
        kinds[3]["content"][0]["arguments"],
        json!({"command": ["ls"]})
    );
    assert_eq!(kinds[3]["content"][0]["itemId"], "fc_1");
    assert_eq!(kinds[4]["toolCallId"], "call_1");
    assert_eq!(kinds[4]["content"][0]["text"], "a.txt\n");
    assert_eq!(kinds[4]["isError"], false);
    assert_eq!(kinds[5]["content"][0]["text"], "One file: a.txt");
    assert_eq!(kinds.len(), 6);
}
