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
