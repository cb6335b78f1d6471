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
//!   delta against the previous one.
#![warn(missing_docs)]

pub mod model;
pub mod wire;

pub use model::*;
pub use wire::{MessageList, SharedMessage};
