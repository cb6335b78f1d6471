//! Hosting engines: everything between `plugins.toml`'s `contextEngine` and an engine's answer.
//!
//! - [`loader`]: checks and loads a library under a deadline (header, API major, layout,
//!   constructor, handshake);
//! - [`handle`]: one engine, built in or loaded, called on its own thread with a deadline, its
//!   message lists crossing the ABI as deltas;
//! - [`slot`]: the `contextEngine` slot: the configured engine, quarantine, and `legacy` as the
//!   fallback, with the host's default for every method an engine does not support;
//! - [`services`]: what an engine can call back (logs, events, `llm.complete`, blobs, token
//!   counts, the clock);
//! - [`process`], [`pipe`], [`engine_host`]: an engine in a child process
//!   (`isolation = "process"`): the host's side, the frames on the pipe, the child's side. An
//!   executable engine (`command = [...]`) is a child that speaks the pipe itself
//!   (docs/engine-protocol.md).
//! - [`wasm`] (the `wasm` feature): an engine that is a WebAssembly component
//!   (`isolation = "wasm"`), run by wasmtime in the host with nothing granted but what the
//!   configuration says.

pub mod engine_host;
pub mod handle;
pub mod library_file;
pub mod loader;
pub mod pipe;
pub mod process;
pub mod services;
pub mod slot;
#[cfg(feature = "wasm")]
pub mod wasm;
