//! Compact JSON: the one writer of every session line and upstream wire form.
//!
//! Why: writing JSON is most of what a new conversation costs `rampart serve`: its session
//! lines are about a quarter of a 200k-token first request and its wire forms a fifth more
//! (BENCHMARKS.md, "Where the rest goes"). On serve's own 200k body sonic-rs writes in 0.75 ms
//! what serde_json writes in 1.23 ms, and writes the same bytes: both format floats with zmij
//! (the shortest text that reads back to the same `f64`), escape the same characters the same
//! way (`\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, every other control character as a lowercase
//! `\u00xx`, nothing else), and write a map in its own order. Byte equality matters: a session
//! line or a wire form written before this writer and after it must not differ, or a client's
//! unchanged history would stop matching what the conversation cache and the splice hold.
//! `compact_json_tests.rs` holds the two writers equal over generated values and the edge
//! cases, so a drift in either crate fails a test before it changes a byte on disk or on the
//! wire.
//!
//! Only writing moved. Every parse stays serde_json's: it refuses a body nested past 128
//! levels with an error, where sonic-rs's own `Value` overflows the stack on one
//! (cloudwego/sonic-rs#239), and serve parses what any client sends.

use serde::Serialize;

/// Appends `value` to `out` as compact JSON, the bytes `serde_json::to_writer` writes.
///
/// Fails only when `value`'s own `Serialize` does (a map with keys that are not strings, a
/// custom impl's error); `out` may then hold part of the value, as with serde_json.
pub fn write<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> Result<(), serde_json::Error> {
    sonic_rs::to_writer(out, value).map_err(<serde_json::Error as serde::ser::Error>::custom)
}

/// `value` as compact JSON bytes, the bytes `serde_json::to_vec` writes.
pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = Vec::with_capacity(128);
    write(&mut out, value)?;
    Ok(out)
}

/// `value` as a compact JSON string, the text `serde_json::to_string` writes.
pub fn to_string<T: Serialize + ?Sized>(value: &T) -> Result<String, serde_json::Error> {
    let bytes = to_vec(value)?;
    // The writer only writes `&str`s and ASCII around them, so this cannot fail; a failure is
    // still an error, never a panic or an unchecked string.
    String::from_utf8(bytes).map_err(<serde_json::Error as serde::ser::Error>::custom)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "compact_json_tests.rs"]
mod tests;
