use rampart_message::ToolCall;
use serde_json::json;

use super::*;

/// Each template, filled with the values it nulled, is the item again, byte for byte (keys in
/// their places).
#[test]
fn a_filled_template_is_the_item_it_came_from() {
    let message = json!({"type": "message", "id": "msg_1", "role": "user", "content": [
        {"type": "input_text", "text": "first"}, {"type": "input_text", "text": "second", "x": 1}
    ]});
    let template = message_template(&message).unwrap();
    assert_eq!(template["content"][0]["text"], Value::Null);
    let filled = fill_message(&template, "user", &["first", "second"]).unwrap();
    assert_eq!(filled.to_string(), message.to_string());

    let call = json!({"type": "function_call", "status": "completed", "id": "fc_1",
                      "name": "shell", "arguments": "{\"cmd\":\"ls\"}", "call_id": "call_1"});
    let template = call_template(&call).unwrap();
    assert_eq!(template["arguments"], Value::Null);
    let tool_call = ToolCall {
        id: "call_1".into(),
        name: "shell".into(),
        arguments: json!({"cmd": "ls"}),
        thought_signature: None,
        extra: Default::default(),
    };
    let filled = fill_call(&template, &tool_call, "{\"cmd\":\"ls\"}".into()).unwrap();
    assert_eq!(filled.to_string(), call.to_string());

    let output = json!({"type": "function_call_output", "id": "fco_1", "call_id": "call_1",
                        "output": "a\nb"});
    let template = output_template(&output).unwrap();
    let filled = fill_output(&template, "call_1", "a\nb".into()).unwrap();
    assert_eq!(filled.to_string(), output.to_string());
    // A changed output keeps the item's own fields.
    let capped = fill_output(&template, "call_1", "a…".into()).unwrap();
    assert_eq!(
        capped,
        json!({"type": "function_call_output", "id": "fco_1", "call_id": "call_1", "output": "a…"})
    );
}

/// Shapes the filler could not rebuild exactly get no template, and a template is used only
/// for what it was made for.
#[test]
fn only_shapes_the_filler_rebuilds_get_a_template() {
    let image = json!({"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "look"}, {"type": "input_image", "image_url": "data:,"}
    ]});
    assert_eq!(message_template(&image), None);
    assert_eq!(
        message_template(&json!({"type": "message", "role": "user", "content": "text"})),
        None
    );
    assert_eq!(
        output_template(
            &json!({"type": "function_call_output", "call_id": "c", "output": [
                {"type": "input_text", "text": "x"}
            ]})
        ),
        None
    );
    assert_eq!(call_template(&json!({"type": "custom_tool_call"})), None);
    let template = message_template(&json!({"type": "message", "role": "assistant", "content": [
        {"type": "output_text", "text": "a"}
    ]}))
    .unwrap();
    assert_eq!(
        fill_message(&template, "user", &["a"]),
        None,
        "another role"
    );
    assert_eq!(
        fill_message(&template, "assistant", &["a", "b"]),
        None,
        "another count"
    );
}

#[test]
fn forget_removes_every_template() {
    let mut text = rampart_message::TextContent {
        text: "t".into(),
        text_signature: None,
        extra: Extra::new(),
    };
    text.extra
        .insert(TEMPLATE_KEY.into(), json!({"type": "message"}));
    let mut user = rampart_message::UserMessage {
        content: rampart_message::Content::Blocks(vec![
            ContentBlock::Text(text),
            ContentBlock::text("plain"),
        ]),
        timestamp: 0,
        extra: Extra::new(),
    };
    user.extra
        .insert(TEMPLATE_KEY.into(), json!({"type": "function_call_output"}));
    let mut message = AgentMessage::User(user);
    assert_eq!(forget(&mut message), 2);
    let AgentMessage::User(user) = &message else {
        unreachable!()
    };
    assert!(user.extra.is_empty());
    assert_eq!(block_template(&user.content.blocks()[0]), None);
}
