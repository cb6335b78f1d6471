use super::*;

#[test]
fn every_item_is_counted_and_each_kind_warned_once_per_conversation() {
    let log = NotForwardedLog::default();
    let items = [
        NotForwarded::SystemMessage,
        NotForwarded::SystemMessage,
        NotForwarded::NonFunctionTool,
    ];
    assert_eq!(
        log.record("a", &items),
        vec![
            (NotForwarded::SystemMessage, 2),
            (NotForwarded::NonFunctionTool, 1)
        ]
    );
    // The same conversation again: counted, not warned about again.
    assert!(log.record("a", &items).is_empty());
    // Another conversation is warned about on its own.
    assert_eq!(
        log.record("b", &[NotForwarded::SystemMessage]),
        vec![(NotForwarded::SystemMessage, 1)]
    );
    let text = log.render();
    assert!(text.contains("rampart_serve_content_not_forwarded_total{kind=\"system_message\"} 5"));
    assert!(
        text.contains("rampart_serve_content_not_forwarded_total{kind=\"non_function_tool\"} 2")
    );
    assert!(!text.contains("server_tool\""));
}

/// A client chooses its field names: the counter names only the fields a wire defines and
/// counts every other one as `other`, so its labels stay bounded whatever clients send.
#[test]
fn fields_not_forwarded_are_counted_by_known_name_or_as_other() {
    use crate::providers::client_fields::{FieldsWire, NotForwardedCounts, counted_name};
    assert_eq!(counted_name("thinking"), "thinking");
    assert_eq!(counted_name("reasoning.summary"), "reasoning.summary");
    assert_eq!(counted_name("x\"} 9\nevil_metric 1"), "other");
    let mut counts = NotForwardedCounts::new();
    counts.insert((FieldsWire::Anthropic, FieldsWire::Chat, "thinking"), 2);
    counts.insert((FieldsWire::Anthropic, FieldsWire::Chat, "other"), 1_000);
    let text = render_fields(&counts);
    assert!(text.contains(
        "rampart_serve_fields_not_forwarded_total{field=\"thinking\",client_wire=\"anthropic\",upstream_wire=\"chat\"} 2"
    ));
    assert!(text.contains(
        "rampart_serve_fields_not_forwarded_total{field=\"other\",client_wire=\"anthropic\",upstream_wire=\"chat\"} 1000"
    ));
    assert_eq!(text.lines().count(), 4, "{text}");
}
