//! §8.16: how a summary is shown to the model.
use super::*;

fn condensed() -> SummaryRow {
    SummaryRow {
        id: "sum_00000000000000d1".into(),
        conversation_id: 1,
        kind: "condensed".into(),
        depth: 1,
        content: "Kept <b>a & b</b> \"quoted\"".into(),
        token_count: 10,
        earliest_at: 1_709_214_300_000,
        latest_at: 1_709_217_900_000,
        descendant_count: 8,
        descendant_token_count: 16_000,
        source_message_token_count: 40_000,
        level: "extractive".into(),
        model: String::new(),
        sources: vec!["sum_a".into(), "sum_b".into(), "sum_c".into()],
    }
}

/// A condensed item becomes a user message whose `<summary>` carries its id, kind, depth,
/// descendant count, `trust="untrusted"` and time range; `<parents>` lists the sources in edge
/// order; the content is XML-escaped; the same row renders to the same bytes every time.
#[test]
fn a_condensed_summary_renders_as_an_untrusted_user_message() {
    let row = condensed();
    let message = render(&row, false);
    assert!(matches!(message, AgentMessage::User(_)));
    assert_eq!(
        render_text(&row, false),
        "<summary id=\"sum_00000000000000d1\" kind=\"condensed\" depth=\"1\" \
         descendant_count=\"8\" trust=\"untrusted\" earliest_at=\"2024-02-29T13:45Z\" \
         latest_at=\"2024-02-29T14:45Z\">\n<parents><summary_ref id=\"sum_a\"/><summary_ref \
         id=\"sum_b\"/><summary_ref id=\"sum_c\"/></parents>\n<content>Kept &lt;b&gt;a &amp; \
         b&lt;/b&gt; &quot;quoted&quot;</content>\n</summary>"
    );
    assert_eq!(
        serde_json::to_string(&render(&row, false)).unwrap(),
        serde_json::to_string(&message).unwrap(),
        "stable bytes: the cached prefix holds"
    );
    let mut leaf = row;
    leaf.sources.clear();
    assert!(!render_text(&leaf, false).contains("<parents>"));
}
