//! `rampart serve`: managed context for any agent, as an OpenAI- and Anthropic-compatible
//! proxy.
//!
//! - [`identity`]: which conversation a request belongs to, from its headers and body;
//! - [`history`]: where the history a client re-sends continues the stored tree.

pub mod history;
pub mod identity;
