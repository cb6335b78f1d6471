//! OpenAI Responses items Rampart does not model, kept in the session verbatim.
//!
//! A Responses conversation holds items pi's messages have no form for: `reasoning` items
//! (with their `encrypted_content`, which the model needs back to continue its reasoning),
//! built-in tool calls (`web_search_call`, `local_shell_call`, …), `custom_tool_call` items
//! and their outputs. Why one home: each is kept as one [`ContentBlock::Other`] block
//! `{"type": "openaiResponsesItem", "item": <the item as sent>}` at its position in the
//! message it belongs to (the model's items on the assistant message, the client's outputs on
//! a user message), so the session stores it, conversation matching sees it, and the
//! Responses provider writes it back as the same top-level item, unchanged. Any other wire has
//! no form for it: those providers leave it out (an assistant's) or show it as text (a user's),
//! and `rampart serve` counts it as not forwarded.

use rampart_message::ContentBlock;
use serde_json::{Map, Value};

/// The `type` of the block that holds an opaque Responses item.
pub const OPAQUE_BLOCK_TYPE: &str = "openaiResponsesItem";

/// The block that keeps `item` verbatim.
pub fn opaque_block(item: Value) -> ContentBlock {
    ContentBlock::Other(opaque_part(item))
}

/// The block's map, also the content part `rampart serve` writes into the chat form of a
/// Responses request (the importer keeps an unknown part as this very block).
pub fn opaque_part(item: Value) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("type".into(), Value::String(OPAQUE_BLOCK_TYPE.into()));
    map.insert("item".into(), item);
    map
}

/// The item a block keeps, when it is an opaque Responses item.
pub fn opaque_item(block: &ContentBlock) -> Option<&Value> {
    match block {
        ContentBlock::Other(map) => opaque_map_item(map),
        _ => None,
    }
}

/// [`opaque_item`] of a raw block map.
pub fn opaque_map_item(map: &Map<String, Value>) -> Option<&Value> {
    (map.get("type").and_then(Value::as_str) == Some(OPAQUE_BLOCK_TYPE))
        .then(|| map.get("item"))
        .flatten()
        .filter(|item| item.is_object())
}

/// Whether a Responses input item is the client's side of an exchange (an output it sends
/// back: `custom_tool_call_output`, `local_shell_call_output`, `computer_call_output`,
/// `mcp_approval_response`), kept on a user message; every other unmodelled item is the
/// model's and is kept on the assistant message.
pub fn is_client_item(kind: &str) -> bool {
    kind.ends_with("_output") || kind.ends_with("_response")
}
