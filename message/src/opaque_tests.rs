#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;

use super::*;

fn item() -> Map<String, Value> {
    json!({"role": "system", "content": [{"type": "text", "text": "agents: a, b"}], "x": [1, 2.5]})
        .as_object()
        .cloned()
        .unwrap()
}

#[test]
fn an_opaque_message_reads_back_its_wire_and_item() {
    let message = opaque_message(ANTHROPIC_MESSAGES, item(), 42);
    let read = as_opaque(&message).expect("an opaque message");
    assert_eq!(read.wire, ANTHROPIC_MESSAGES);
    assert_eq!(read.item, &item());
    assert_eq!(message.role(), OPAQUE_ROLE);
    assert_eq!(message.timestamp(), Some(42));
}

#[test]
fn an_opaque_message_round_trips_through_its_json_unchanged() {
    let message = opaque_message(ANTHROPIC_MESSAGES, item(), 7);
    let text = serde_json::to_string(&message).unwrap();
    let back: AgentMessage = serde_json::from_str(&text).unwrap();
    assert_eq!(back, message);
    assert_eq!(as_opaque(&back).unwrap().item, &item());
}

#[test]
fn other_messages_and_malformed_ones_are_not_opaque() {
    assert!(as_opaque(&AgentMessage::user_text("hi", 1)).is_none());
    let unknown: AgentMessage =
        serde_json::from_value(json!({"role": "x", "wire": "w", "item": {}})).unwrap();
    assert!(as_opaque(&unknown).is_none());
    let no_item: AgentMessage =
        serde_json::from_value(json!({"role": OPAQUE_ROLE, "wire": "w", "item": "text"})).unwrap();
    assert!(as_opaque(&no_item).is_none());
}
