//! `rampart-message`: the message model every Rampart crate shares, and nothing else.
//!
//! Why a crate of its own: sessions, the host, the defence library and engines all speak in
//! pi's `AgentMessage`. Keeping the model apart from the engine API lets `rampart-sessions`
//! read and write session files without depending on the engine ABI, and keeps the published
//! engine API small. It holds data types and their (lossless) serde forms; behaviour such as
//! counting, hygiene or compaction lives in `rampart-context`.
//!
//! - [`model`]: the pi-compatible message types (session format v3), re-exported at the root;
//! - [`wire`]: [`MessageList`] and [`SharedMessage`], and how a list crosses the engine ABI as a
//!   delta against the previous one;
//! - [`opaque`]: a client's item pi has no type for, kept verbatim with the wire it came from;
//! - [`tool_result_form`]: how an Anthropic client wrote a tool result (string content, no
//!   `is_error`), kept so that the same wire gets it back as it was sent.
#![warn(missing_docs)]

pub mod model;
pub mod opaque;
pub mod tool_result_form;
pub mod wire;

pub use model::*;

/// The `extra` key of a tool result the host capped, naming the blob that keeps its full
/// original (`sha256:<hex>`). Why a field and not only the notice in the text: an engine that
/// keeps every message (the lossless engine) reads the original back through the host's
/// `blobs.get` service, and a fact crosses a boundary typed, never as text to parse back.
pub const ORIGINAL_BLOB_KEY: &str = "rampartOriginal";
pub use wire::{MessageList, SharedMessage};
