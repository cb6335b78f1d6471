use super::*;
use rampart_message::{ContentBlock, TextContent, ThinkingContent, ToolResultMessage};

fn tool_result(text: String) -> AgentMessage {
    AgentMessage::ToolResult(ToolResultMessage {
        tool_call_id: "call_1".into(),
        tool_name: "read".into(),
        content: Content::Blocks(vec![ContentBlock::Text(TextContent {
            text,
            text_signature: None,
            extra: Default::default(),
        })]),
        details: None,
        is_error: false,
        timestamp: 1,
        extra: Default::default(),
    })
}

fn text_of(message: &AgentMessage) -> String {
    match message {
        AgentMessage::ToolResult(r) => match &r.content {
            Content::Blocks(b) => match &b[0] {
                ContentBlock::Text(t) => t.text.clone(),
                other => panic!("{other:?}"),
            },
            Content::Text(t) => t.clone(),
        },
        AgentMessage::User(u) => match &u.content {
            Content::Text(t) => t.clone(),
            Content::Blocks(_) => panic!("blocks"),
        },
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_message_over_the_line_limit_moves_its_text_to_a_blob() {
    let dir = tempfile::tempdir().unwrap();
    let blobs = BlobStore::in_sessions_dir(dir.path());
    let original: String = (0..40_000).map(|i| format!("line {i}\n")).collect();
    let message = tool_result(original.clone());
    let limit = 128 * 1024;
    assert!(json_len(&message) > limit);

    let (spilled, spill) = spill_oversized(&message, &blobs, limit).unwrap().unwrap();

    assert!(json_len(&spilled) <= limit, "{}", json_len(&spilled));
    assert_eq!(spill.blobs.len(), 1);
    assert_eq!(spill.line_bytes_before, json_len(&message));
    let kept = text_of(&spilled);
    assert!(kept.starts_with("line 0\n"), "the head is kept");
    assert!(
        kept.contains(&format!("blob {}", spill.blobs[0])),
        "{}",
        &kept[kept.len() - 200..]
    );
    assert_eq!(
        blobs.get(&spill.blobs[0]).unwrap(),
        original.as_bytes(),
        "the blob holds the whole original, written before the line"
    );
}

#[test]
fn messages_that_fit_are_left_alone_and_thinking_is_never_cut() {
    let dir = tempfile::tempdir().unwrap();
    let blobs = BlobStore::in_sessions_dir(dir.path());
    let small = AgentMessage::user_text("hello", 1);
    assert!(spill_oversized(&small, &blobs, 1 << 20).unwrap().is_none());

    let mut thinking = AgentMessage::assistant_text("", "a", "p", "m", 1);
    if let AgentMessage::Assistant(a) = &mut thinking {
        a.content = vec![ContentBlock::Thinking(ThinkingContent {
            thinking: "x".repeat(1 << 20),
            thinking_signature: Some("sig".into()),
            extra: Default::default(),
        })];
    }
    assert!(
        spill_oversized(&thinking, &blobs, 64 * 1024)
            .unwrap()
            .is_none(),
        "signed thinking stays as the provider sent it"
    );
    assert!(!blobs.place().exists(), "nothing was stored");
}
