//! The `sessions show` preview: the same line as the full conversion gave, without the copy.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::providers::openai::wire::to_openai_message;

/// The preview as it was built before: the whole message converted to its OpenAI form, then
/// cut. Kept here as the oracle for the listing users already see.
fn converted_preview(message: &AgentMessage) -> String {
    let value = to_openai_message(message);
    // A user message's blocks were one string then; they are text parts now, read back alike.
    let mut text = match value.get("content") {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(serde_json::Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    };
    if let Some(calls) = value.get("tool_calls").and_then(|c| c.as_array()) {
        let names: Vec<&str> = calls
            .iter()
            .filter_map(|c| c["function"]["name"].as_str())
            .collect();
        text = format!("{text} [calls: {}]", names.join(", "));
    }
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut short: String = line.chars().take(PREVIEW_CHARS).collect();
    if line.chars().count() > PREVIEW_CHARS {
        short.push('…');
    }
    short
}

fn assistant(texts: &[&str], calls: &[&str]) -> AgentMessage {
    let mut content: Vec<serde_json::Value> = texts
        .iter()
        .map(|t| json!({"type": "text", "text": t}))
        .collect();
    for (i, name) in calls.iter().enumerate() {
        content.push(
            json!({"type": "toolCall", "id": format!("c{i}"), "name": name, "arguments": {}}),
        );
    }
    serde_json::from_value(json!({
        "role": "assistant", "content": content,
        "api": "x", "provider": "x", "model": "m",
        "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
        "stopReason": "toolUse", "timestamp": 0
    }))
    .unwrap()
}

#[test]
fn previews_are_the_line_users_saw_before() {
    let long = "word ".repeat(10_000);
    let exactly = "x".repeat(PREVIEW_CHARS);
    let messages = [
        AgentMessage::user_text("  hello\n\n  world  ", 0),
        AgentMessage::user_text(&exactly, 0),
        AgentMessage::user_text(format!("{exactly} more"), 0),
        AgentMessage::user_text(format!("{} y", "x".repeat(PREVIEW_CHARS - 1)), 0),
        AgentMessage::tool_result("c1", "read", &long, false, 0),
        AgentMessage::tool_result("c1", "read", "", false, 0),
        assistant(&[], &["read", "exec"]),
        assistant(&["first", "second\tpart"], &["grep"]),
        assistant(&[&long], &["write"]),
        serde_json::from_value(
            json!({"role": "bashExecution", "command": "ls -la", "output": long,
            "exitCode": 2, "cancelled": false, "truncated": false, "timestamp": 0}),
        )
        .unwrap(),
    ];
    for m in &messages {
        assert_eq!(preview(m), converted_preview(m), "{m:?}");
    }
    assert!(preview(&messages[4]).ends_with('…'));
    assert_eq!(preview(&messages[6]), "[calls: read, exec]");
}

proptest! {
    #[test]
    fn any_text_previews_as_before(text in "[ a-zé\\n\\t漢]{0,300}", calls in prop::collection::vec("[a-z]{1,8}", 0..3)) {
        let names: Vec<&str> = calls.iter().map(String::as_str).collect();
        for m in [
            AgentMessage::user_text(&text, 0),
            AgentMessage::tool_result("c", "t", &text, false, 0),
            assistant(&[&text, &text], &names),
        ] {
            prop_assert_eq!(preview(&m), converted_preview(&m));
        }
    }
}

/// `sessions blob` on a terminal shows a tool output's escape sequences escaped; piped, or to
/// `--out`, it gives the bytes exactly (refusing to replace a file without `--overwrite`).
#[test]
fn a_blob_is_escaped_on_a_terminal_and_exact_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let blobs = BlobStore::in_sessions_dir(dir.path());
    let bytes = b"line one\n\x1b]0;owned\x07\x1b[31mred\ttab\n";
    let reference = blobs.put(bytes).unwrap();
    let inputs = Inputs::new();

    let mut shown = Vec::new();
    print_blob(&blobs, &reference, &inputs, None, false, true, &mut shown).unwrap();
    let shown = String::from_utf8(shown).unwrap();
    assert!(
        !shown.contains('\x1b') && !shown.contains('\x07'),
        "{shown:?}"
    );
    assert!(shown.contains("\\x1b[31mred\ttab\n"), "{shown:?}");

    let mut piped = Vec::new();
    print_blob(&blobs, &reference, &inputs, None, false, false, &mut piped).unwrap();
    assert_eq!(piped, bytes);

    let file = dir.path().join("out.txt");
    print_blob(
        &blobs,
        &reference,
        &inputs,
        Some(&file),
        false,
        true,
        &mut Vec::new(),
    )
    .unwrap();
    assert_eq!(std::fs::read(&file).unwrap(), bytes);
    let again = print_blob(
        &blobs,
        &reference,
        &inputs,
        Some(&file),
        false,
        true,
        &mut Vec::new(),
    );
    assert!(
        again.is_err(),
        "an existing --out file is not replaced without --overwrite"
    );
}
