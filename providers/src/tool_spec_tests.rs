//! The counted form of a tool is what every count of it agrees on (run loop, precheck,
//! `rampart context show`): its bytes must not move when how it is written changes.

use super::ToolSpec;

#[test]
fn a_tools_counted_text_is_its_three_fields_as_compact_json_in_order() {
    let tool = ToolSpec {
        name: "read_file".into(),
        description: Some("Reads a file \"as is\".".into()),
        parameters: serde_json::json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
    };
    assert_eq!(
        tool.counted_text(),
        r#"{"name":"read_file","description":"Reads a file \"as is\".","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}"#
    );
    let bare = ToolSpec {
        description: None,
        ..tool
    };
    assert!(
        bare.counted_text()
            .starts_with(r#"{"name":"read_file","description":null,"#),
        "{}",
        bare.counted_text()
    );
}
