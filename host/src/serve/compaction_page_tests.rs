use std::sync::Arc;

use rampart_message::{AgentMessage, ContentBlock, ToolCall};
use rampart_sessions::entry::CompactionEntry;
use rampart_sessions::{EntryBody, SessionTree};
use serde_json::{Map, json};

use super::*;

fn message(tree: &mut SessionTree, m: AgentMessage) -> String {
    tree.append(EntryBody::from_shared(Arc::new(m))).id.clone()
}

fn compaction(tree: &mut SessionTree, summary: &str, first_kept: &str) -> String {
    tree.append(EntryBody::Compaction(CompactionEntry {
        summary: summary.into(),
        first_kept_entry_id: first_kept.into(),
        tokens_before: 900,
        details: None,
        from_hook: None,
        extra: Map::new(),
    }))
    .id
    .clone()
}

fn assistant_calling(tool: &str) -> AgentMessage {
    let mut m = AgentMessage::assistant_text("Reading it.", "api", "p", "m", 2);
    if let AgentMessage::Assistant(a) = &mut m {
        a.content.push(ContentBlock::ToolCall(ToolCall {
            id: "c1".into(),
            name: tool.into(),
            arguments: json!({}),
            thought_signature: None,
            extra: Map::new(),
        }));
    }
    m
}

#[test]
fn a_compaction_lists_what_it_removed_since_the_previous_one() {
    let mut tree = SessionTree::new();
    message(&mut tree, AgentMessage::user_text("first question", 1));
    message(&mut tree, assistant_calling("read"));
    let result = message(
        &mut tree,
        AgentMessage::tool_result("c1", "read", "file body\n\nline two", false, 3),
    );
    let kept = message(&mut tree, AgentMessage::user_text("second question", 4));
    let first = compaction(&mut tree, "Summary one.", &kept);
    let r1 = CompactionRecord::from_tree(&tree, &first).unwrap();
    assert_eq!(r1.summary, "Summary one.");
    assert_eq!(r1.removed_total, 3);
    assert!(!r1.replaced_summary && r1.kept_found);
    let roles: Vec<&str> = r1.removed.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(roles, ["user", "assistant", "toolResult (read)"]);
    assert_eq!(r1.removed[1].preview, "Reading it. [tool calls: read]");
    assert_eq!(r1.removed[2].preview, "file body line two");
    assert_eq!(r1.removed[2].entry_id, result);

    // The second compaction removes what the first kept, and its summary.
    message(&mut tree, AgentMessage::user_text("third question", 5));
    let kept2 = message(&mut tree, AgentMessage::user_text("fourth question", 6));
    let second = compaction(&mut tree, "Summary two.", &kept2);
    let r2 = CompactionRecord::from_tree(&tree, &second).unwrap();
    let previews: Vec<&str> = r2.removed.iter().map(|m| m.preview.as_str()).collect();
    assert_eq!(previews, ["second question", "third question"]);
    assert!(r2.replaced_summary);
    assert_eq!(r2.first_kept_entry_id, kept2);
}

#[test]
fn an_entry_that_is_not_a_compaction_is_refused_by_name() {
    let mut tree = SessionTree::new();
    let user = message(&mut tree, AgentMessage::user_text("hi", 1));
    assert_eq!(
        CompactionRecord::from_tree(&tree, &user),
        Err(RecordError::NotACompaction(user.clone()))
    );
    assert_eq!(
        CompactionRecord::from_tree(&tree, "nope"),
        Err(RecordError::NoEntry("nope".into()))
    );
}

#[test]
fn a_hostile_summary_and_preview_render_as_text() {
    let mut tree = SessionTree::new();
    message(
        &mut tree,
        AgentMessage::user_text("<img src=x onerror=alert(1)>", 1),
    );
    let kept = message(&mut tree, AgentMessage::user_text("kept", 2));
    let id = compaction(&mut tree, "<script>alert('summary')</script>", &kept);
    let record = CompactionRecord::from_tree(&tree, &id).unwrap();
    let facts = CompactionFacts {
        session_id: "<b>s</b>".into(),
        number: 1,
        reason: "<i>overflow</i>".into(),
        before_call: 7,
        tokens_before: Some(40_000),
        tokens_after: Some(9_000),
    };
    let html = render(&facts, Ok(&record));
    assert!(!html.contains("<script"), "{html}");
    assert!(!html.contains("<img"), "{html}");
    assert!(!html.contains("<b>s") && !html.contains("<i>"), "{html}");
    assert!(
        html.contains(
            "<pre id=\"summary\">&lt;script&gt;alert(&#39;summary&#39;)&lt;/script&gt;</pre>"
        ),
        "{html}"
    );
    assert!(
        html.contains("&lt;img src=x onerror=alert(1)&gt;"),
        "{html}"
    );
    assert!(html.contains("<td class=\"n\" id=\"tokens-before\">40,000</td>"));
    assert!(html.contains("<td class=\"n\" id=\"tokens-after\">9,000</td>"));
    assert!(html.contains("1 message(s) removed"), "{html}");
    let failed = render(&facts, Err("no entry `<x>`"));
    assert!(failed.contains("no entry `&lt;x&gt;`"), "{failed}");
}
