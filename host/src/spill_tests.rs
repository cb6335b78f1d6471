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

#[test]
fn tool_call_arguments_that_escape_to_six_times_their_size_still_make_a_line_spill() {
    // 300 KB of text and a call whose 1 MB argument is all control characters (`\u0001`
    // each in JSON): the line is about 6.3 MB though the message holds 1.3 MB, so the cheap
    // size check must not wave it through a 6.2 MB limit.
    let dir = tempfile::tempdir().unwrap();
    let blobs = BlobStore::in_sessions_dir(dir.path());
    let mut message = AgentMessage::assistant_text("a".repeat(300_000), "api", "p", "m", 1);
    if let AgentMessage::Assistant(a) = &mut message {
        a.content
            .push(ContentBlock::ToolCall(rampart_message::ToolCall {
                id: "call_1".into(),
                name: "write".into(),
                arguments: serde_json::json!({"bytes": "\u{1}".repeat(1_000_000)}),
                thought_signature: None,
                extra: Default::default(),
            }));
    }
    let limit = 6_200_000;
    assert!(json_len(&message) > limit);
    let (spilled, spill) = spill_oversized(&message, &blobs, limit).unwrap().unwrap();
    assert_eq!(spill.blobs.len(), 1);
    assert!(json_len(&spilled) <= limit);
}

proptest::proptest! {
    #[test]
    fn six_times_a_values_raw_size_is_never_below_its_json_length(
        value in proptest::arbitrary::any::<(String, i64, f64, Vec<(String, bool)>)>()
    ) {
        let (text, int, float, pairs) = value;
        let text_alone = text.clone();
        let value = serde_json::json!({
            text.clone(): [text, int, float, null, [], {}],
            "pairs": pairs
                .into_iter()
                .map(|(key, flag)| (key, serde_json::Value::Bool(flag)))
                .collect::<serde_json::Map<String, serde_json::Value>>(),
        });
        for value in [serde_json::Value::String(text_alone), value] {
            let json = serde_json::to_string(&value).unwrap();
            proptest::prop_assert!(value_raw_bytes(&value) * 6 >= json.len(), "{json}");
        }
    }
}
