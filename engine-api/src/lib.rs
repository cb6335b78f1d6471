//! `rampart-engine-api`: the one crate a Rampart context engine depends on.
//!
//! An engine author implements [`ContextEngine`] (plus [`EngineFactory`] for construction) and
//! writes `rampart_engine_api::export_engine!(MyEngine);`. The macro exports an abi_stable root
//! module whose typed surface is frozen for the whole 1.x line; everything that can grow travels
//! as named JSON calls with serde defaults (see [`protocol`]), so a 1.0 engine keeps loading in
//! every later 1.x host.
//!
//! This crate is what a third-party engine depends on, and nothing more: the 1.x semver promise
//! covers all of it, so it stays small. The defence algorithms (exact token counting, hygiene,
//! guards, pruning, compaction, overflow recognition) are in `rampart-context`, a 0.x library
//! an engine may use or ignore.
//!
//! Layout, one concern per module:
//! - [`message`]: the pi-compatible message model (the `rampart-message` crate, re-exported);
//! - [`protocol`]: the handshake and the parameters/results of every engine method;
//! - [`engine`]: the [`ContextEngine`] trait and the per-call context;
//! - [`method`]: the methods, listed once: [`method::Method`] and [`method::Call`];
//! - [`memory`]: what a memory engine answers (`plugins.slots.memory`);
//! - [`host`]: [`Host`], the services an engine may call back;
//! - [`tokens`]: the token estimate, and exact counts through the host;
//! - [`tools`]: tools an engine offers the model, answered by the engine (1.2);
//! - [`pairing`]: which messages must travel together ([`pairing::tool_units`]);
//! - [`error`]: [`EngineError`] and its exhaustive [`ErrorKind`] classification;
//! - [`ffi`]: the frozen abi_stable surface (hosts use it; engine authors never need to);
//! - [`export`]: what `export_engine!` expands to: panic guards, dispatch, tracing bridge;
//! - [`c_abi`]: engines in C and other languages (`include/rampart_engine.h`), as hosts load them.

#![allow(non_local_definitions, non_camel_case_types)]

pub mod c_abi;
pub mod engine;
pub mod error;
pub mod export;
pub mod ffi;
pub mod host;
pub mod memory;
pub mod method;
pub mod pairing;
pub mod protocol;
pub mod tokens;
pub mod tools;

/// The message model an engine reads and returns (the `rampart-message` crate).
pub use rampart_message as message;
/// How message lists cross the ABI as deltas (hosts use it; engine authors never need to).
#[doc(hidden)]
pub use rampart_message::wire;

pub use engine::{CallContext, CancelFlag, ContextEngine, EngineFactory, EngineInit};
pub use error::{EngineError, ErrorKind};
pub use host::{Host, HostApi, LogLevel};
pub use message::AgentMessage;
pub use protocol::{EngineInfo, ProtocolInfo};
pub use wire::{MessageList, SharedMessage};

/// Re-exported so `export_engine!` can name abi_stable without the engine crate depending on it.
#[doc(hidden)]
pub use abi_stable;
/// Re-exported for engine authors: configuration and open records are JSON values.
pub use serde_json;

/// The version of this crate, which is the engine API version an engine is built against.
pub const API_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The API major this crate implements. Hosts refuse libraries of any other major before running
/// their code.
pub const API_MAJOR: u32 = 1;
