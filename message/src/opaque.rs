//! Opaque messages: an item of a client's conversation that pi's model has no type for (an
//! Anthropic message with role `system` inside `messages`, say), kept whole instead of dropped.
//!
//! Why a message of its own and not a dropped item or a user message: Rampart is transparent by
//! rule. With nothing to manage, the upstream must receive what the client sent, so the item
//! stays in the session at its position, and a provider speaking the wire it came from writes
//! it back as the same JSON value. A provider of another wire cannot place it and leaves it out
//! (saying so); an engine, a hygiene pass or a compaction sees an ordinary message of an
//! unknown role and leaves it where it is.
//!
//! The form is an [`AgentMessage::Other`], so that it needs no new variant of this 1.x type and
//! a session holding one loads and saves unchanged in every reader (pi keeps unknown roles):
//!
//! ```json
//! {"role": "rampart.opaque", "wire": "anthropic-messages", "item": {…}, "timestamp": 0}
//! ```
//!
//! `wire` names the wire format in pi's `api` vocabulary (see [`ANTHROPIC_MESSAGES`]), `item`
//! is the client's JSON object verbatim, `timestamp` is when it was read (Unix milliseconds).
//! Build one with [`opaque_message`] and read one with [`as_opaque`]: nothing else should know
//! the keys.

use serde_json::{Map, Value};

use crate::AgentMessage;

/// The `role` of an opaque message. Dotted so that it can never be a role pi or a wire defines.
pub const OPAQUE_ROLE: &str = "rampart.opaque";

/// The wire name of Anthropic messages (pi's `api` value for it).
pub const ANTHROPIC_MESSAGES: &str = "anthropic-messages";

/// An opaque message, read: where its item came from and the item itself.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Opaque<'a> {
    /// The wire format the item was written in (pi's `api` vocabulary).
    pub wire: &'a str,
    /// The client's item, verbatim.
    pub item: &'a Map<String, Value>,
}

/// A message keeping `item`, read from a client speaking `wire`, at `timestamp_ms`.
pub fn opaque_message(wire: &str, item: Map<String, Value>, timestamp_ms: u64) -> AgentMessage {
    let mut raw = Map::new();
    raw.insert("role".to_owned(), Value::String(OPAQUE_ROLE.to_owned()));
    raw.insert("wire".to_owned(), Value::String(wire.to_owned()));
    raw.insert("item".to_owned(), Value::Object(item));
    raw.insert("timestamp".to_owned(), Value::from(timestamp_ms));
    AgentMessage::Other(raw)
}

/// `message` as an opaque message, or `None` when it is not one (or is malformed: no string
/// `wire`, or an `item` that is not an object, which no writer could place).
pub fn as_opaque(message: &AgentMessage) -> Option<Opaque<'_>> {
    let AgentMessage::Other(raw) = message else {
        return None;
    };
    if raw.get("role").and_then(Value::as_str) != Some(OPAQUE_ROLE) {
        return None;
    }
    Some(Opaque {
        wire: raw.get("wire")?.as_str()?,
        item: raw.get("item")?.as_object()?,
    })
}

#[cfg(test)]
#[path = "opaque_tests.rs"]
mod tests;
