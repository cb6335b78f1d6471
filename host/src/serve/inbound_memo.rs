//! The messages of recent chat-completions requests, decoded, kept with the bytes they were
//! decoded from, so that a request re-sending them parses and converts only what is new.
//!
//! Why: a client re-sends its whole conversation on every request. On a 200k-token coding
//! conversation, parsing the 800 KB body into a `Value` and converting every message was
//! two fifths of what `rampart serve` spent on a request, though all but the newest turn were
//! byte for byte the last request's. A request's `messages` array is indexed by its bytes
//! ([`super::raw_messages`]); when its first `n` elements are exactly the bytes of a kept
//! request's messages (compared with `memcmp`, whole, never trusted to a hash), those `n`
//! are taken decoded and only the body with the remaining elements is parsed
//! ([`super::inbound::decode_continuing`]). The result is the same request the whole body
//! decodes to: the kept messages are stamped with this request's time, and anything the
//! continuation cannot decode alone (a tool result first, a system message, a call without
//! an id) sends the body down the whole path.
//!
//! Only the chat-completions wire is kept: its converter reads each message alone, but for a
//! tool result's call, which the request checks require right before it.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use rampart_message::AgentMessage;

use super::raw_messages::MessageSlices;

/// How many decoded requests are kept. Each holds its messages twice (bytes and decoded), so
/// a 200k-token conversation costs about 3 MB here; a few cover the conversations being
/// continued at any one moment (a client continues one conversation at a time).
pub const CAPACITY: usize = 8;

/// The decoded messages of a request, with the bytes they came from.
#[derive(Debug)]
pub struct Decoded {
    /// The model the request named (the converter records it on assistant messages).
    pub model: String,
    /// The bytes of the `messages` elements, from the first one's start to the last one's end:
    /// a slice of the request's body, not a copy.
    raw: Bytes,
    /// How many elements those are.
    count: usize,
    /// The messages they decoded to, shared with the request that decoded them (a request
    /// only reads them, and is done by the time its client sends the next one).
    messages: Arc<Vec<AgentMessage>>,
    /// The system prompt the request's system messages made.
    pub system: Option<String>,
}

/// A request's continuation of a kept one: what was decoded before, and the body with only
/// the elements after it.
#[derive(Debug)]
pub struct Continuation {
    /// The kept request, taken out of the memo (it is kept again, extended, once decoded).
    pub prior: Decoded,
    /// The body with its `messages` array holding only the new elements.
    pub rest: Vec<u8>,
}

/// The kept requests, newest last.
#[derive(Debug, Default)]
pub struct InboundMemo {
    kept: Mutex<VecDeque<Decoded>>,
}

impl InboundMemo {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Decoded>> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The kept request whose messages are the most leading elements of `body`'s `messages`
    /// (at least one element must be new), taken out, and the body without those elements.
    pub fn continuation(&self, body: &[u8], slices: &MessageSlices) -> Option<Continuation> {
        let first = slices.elements.first()?.start;
        let mut kept = self.lock();
        let (at, prior_count) = kept
            .iter()
            .enumerate()
            .filter(|(_, d)| d.count < slices.elements.len())
            .filter(|(_, d)| {
                let end = slices.elements[d.count - 1].end;
                body[first..end] == d.raw[..]
            })
            .map(|(i, d)| (i, d.count))
            .max_by_key(|(_, count)| *count)?;
        let prior = kept.remove(at)?;
        drop(kept);
        let new_from = slices.elements[prior_count].start;
        let mut rest = Vec::with_capacity(body.len() - (new_from - first));
        rest.extend_from_slice(&body[..first]);
        rest.extend_from_slice(&body[new_from..]);
        Some(Continuation { prior, rest })
    }

    /// Keeps what `body`'s messages decoded to, for the request that continues it. Requests
    /// holding messages the converter stamps other than by the request's time are not kept.
    pub fn keep(
        &self,
        body: &Bytes,
        slices: &MessageSlices,
        model: &str,
        messages: &Arc<Vec<AgentMessage>>,
        system: Option<&str>,
    ) {
        let (Some(first), Some(last)) = (slices.elements.first(), slices.elements.last()) else {
            return;
        };
        if !messages.iter().all(restampable) {
            return;
        }
        let raw: Range<usize> = first.start..last.end;
        let decoded = Decoded {
            model: model.to_owned(),
            raw: body.slice(raw),
            count: slices.elements.len(),
            messages: Arc::clone(messages),
            system: system.map(str::to_owned),
        };
        let mut kept = self.lock();
        while kept.len() >= CAPACITY {
            kept.pop_front();
        }
        kept.push_back(decoded);
    }
}

impl Decoded {
    /// The messages, stamped `now_ms` as the converter stamps a request's messages (copied
    /// only if the request that decoded them still holds them).
    pub fn messages_at(mut self, now_ms: u64) -> Arc<Vec<AgentMessage>> {
        for message in Arc::make_mut(&mut self.messages) {
            restamp(message, now_ms);
        }
        self.messages
    }
}

fn restampable(message: &AgentMessage) -> bool {
    matches!(
        message,
        AgentMessage::User(_) | AgentMessage::Assistant(_) | AgentMessage::ToolResult(_)
    )
}

fn restamp(message: &mut AgentMessage, now_ms: u64) {
    match message {
        AgentMessage::User(m) => m.timestamp = now_ms,
        AgentMessage::Assistant(m) => m.timestamp = now_ms,
        AgentMessage::ToolResult(m) => m.timestamp = now_ms,
        _ => {}
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "inbound_memo_tests.rs"]
mod tests;
