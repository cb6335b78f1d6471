//! `rampart serve`: managed context for any agent, as an OpenAI- and Anthropic-compatible
//! proxy.
//!
//! - [`identity`]: which conversation a request belongs to, from its headers and body;
//! - [`history`]: where the history a client re-sends continues the stored tree;
//! - [`inbound`]: a client request decoded once into types;
//! - [`outbound`]: the answer and errors in the client's wire, JSON or stream.

pub mod history;
pub mod identity;
pub mod inbound;
pub mod outbound;
