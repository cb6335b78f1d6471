//! Which messages must travel together.
//!
//! A provider rejects a request whose tool result has no matching tool call before it (or a
//! call without its result). So an engine that drops or selects messages must treat an
//! assistant message and the tool results answering it as one unit. [`tool_units`] gives those
//! units; the host repairs whatever an engine still returns broken before every request, but an
//! engine that keeps units whole loses nothing to that repair.

use std::borrow::Borrow;
use std::ops::Range;

use crate::message::AgentMessage;

/// Splits `messages` into units that must not be separated: an assistant message with tool
/// calls together with the tool results directly after it that answer those calls; every other
/// message is a unit of its own. The ranges cover `messages` in order, without gaps.
/// Works on owned messages and on shared ones (`Arc<AgentMessage>`).
pub fn tool_units<M: Borrow<AgentMessage>>(messages: &[M]) -> Vec<Range<usize>> {
    let mut units = Vec::with_capacity(messages.len());
    let mut i = 0;
    while i < messages.len() {
        let start = i;
        i += 1;
        let opener = messages[start].borrow();
        // No allocation per message: this runs over the whole history every turn.
        if opener.tool_calls().next().is_some() {
            while i < messages.len() {
                match messages[i].borrow().tool_call_id() {
                    Some(id) if opener.tool_calls().any(|c| c.id == id) => i += 1,
                    _ => break,
                }
            }
        }
        units.push(start..i);
    }
    units
}
