//! Request bodies written from messages serialised once.
//!
//! Why: a client of `rampart serve` re-sends its whole history every turn, and the upstream
//! request carries it again. Built as a `serde_json::Value` and serialised, a 200k-token
//! history costs tens of thousands of small allocations and a full escape pass per request,
//! though all but the newest messages went out unchanged last time. A message never changes
//! once shared (`SharedMessage`), so its wire form is a pure function of it: [`WireMemo`]
//! keeps each message's bytes for as long as the message lives, and [`write_spliced`] writes
//! the body around them. The bytes are exactly what serialising the `Value` body writes, so
//! the upstream sees the same request either way (`splice_tests.rs` holds them equal).

use std::sync::Arc;

use rampart_context::message_memo::MessageMemo;
use serde_json::{Map, Value};

/// Each shared message's serialised wire form, for one provider's wire (see the module docs).
pub type WireMemo = MessageMemo<Arc<[u8]>>;

/// `shell` written as compact JSON (the bytes `serde_json::to_vec` writes), with the array under
/// `key` written from `pieces` (each one element, already serialised) after the elements
/// `shell` holds there.
pub fn write_spliced(shell: &Map<String, Value>, key: &str, pieces: &[Arc<[u8]>]) -> Vec<u8> {
    let size: usize = pieces.iter().map(|p| p.len() + 1).sum();
    let mut out = Vec::with_capacity(size + 4096);
    out.push(b'{');
    for (i, (name, value)) in shell.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_json(&mut out, name);
        out.push(b':');
        match value {
            Value::Array(head) if name == key => {
                out.push(b'[');
                let mut first = true;
                for element in head {
                    if !first {
                        out.push(b',');
                    }
                    first = false;
                    write_json(&mut out, element);
                }
                for piece in pieces {
                    if !first {
                        out.push(b',');
                    }
                    first = false;
                    out.extend_from_slice(piece);
                }
                out.push(b']');
            }
            other => write_json(&mut out, other),
        }
    }
    out.push(b'}');
    out
}

/// The wire form of each of `messages` that `keep` admits, from `memo` or made by `make` (and
/// remembered).
pub fn pieces<'m>(
    memo: &WireMemo,
    messages: impl IntoIterator<Item = &'m rampart_message::SharedMessage>,
    make: impl Fn(&rampart_message::AgentMessage) -> Value,
) -> Vec<Arc<[u8]>> {
    memo.batch(|batch| {
        messages
            .into_iter()
            .map(|m| {
                batch.get_or_insert_with(m, |message| {
                    let mut bytes = Vec::new();
                    write_json(&mut bytes, &make(message));
                    Arc::from(bytes)
                })
            })
            .collect()
    })
}

/// Appends `value` to `out` as compact JSON, through the one writer of wire forms and session
/// lines ([`rampart_sessions::compact_json`]: serde_json's bytes, written faster).
pub(crate) fn write_json<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    // Writing a `Value` or a string into a `Vec` cannot fail.
    if rampart_sessions::compact_json::write(out, value).is_err() {
        debug_assert!(false, "serialising JSON into memory failed");
    }
}

/// `value` as compact JSON bytes ([`write_json`]).
pub(crate) fn json_bytes<T: serde::Serialize + ?Sized>(value: &T) -> Vec<u8> {
    let mut out = Vec::new();
    write_json(&mut out, value);
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "splice_tests.rs"]
mod tests;
