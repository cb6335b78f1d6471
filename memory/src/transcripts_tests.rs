use super::*;

#[test]
fn user_and_assistant_text_become_lines_mapped_to_jsonl_lines() {
    let jsonl = [
        r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#,
        r#"{"type":"message","id":"a","parentId":null,"timestamp":"t","message":{"role":"user","content":"Where is   the\n config?","timestamp":1}}"#,
        r#"{"type":"message","id":"b","parentId":"a","timestamp":"t","message":{"role":"assistant","content":[{"type":"thinking","thinking":"hmm"},{"type":"text","text":"In"},{"type":"toolCall","id":"c","name":"read","arguments":{}},{"type":"text","text":"plugins.toml"}]}}"#,
        r#"{"type":"message","id":"c","parentId":"b","timestamp":"t","message":{"role":"toolResult","toolCallId":"c","content":[{"type":"text","text":"secret file body"}]}}"#,
        r#"{"type":"message","id":"d","parentId":"c","timestamp":"t","message":{"role":"assistant","content":[{"type":"toolCall","id":"e","name":"x","arguments":{}}]}}"#,
        "not json at all",
        r#"{"type":"message","id":"f","parentId":"d","timestamp":"t","message":{"role":"user","content":[{"type":"text","text":"thanks"}]}}"#,
        r#"{"type":"message","id":"g","#,
    ]
    .join("\n");
    let t = transcript_text(&jsonl);
    assert_eq!(
        t.text,
        "User: Where is the config?\nAssistant: In plugins.toml\nUser: thanks"
    );
    assert_eq!(t.line_map, vec![2, 3, 7]);
    assert_eq!(t.source_line(1), 2);
    assert_eq!(t.source_line(3), 7);
    assert_eq!(t.source_line(9), 9);
}

#[test]
fn an_empty_transcript_has_no_text() {
    assert_eq!(transcript_text(""), Transcript::default());
}
