//! `rampart serve`: managed context for any agent, as an OpenAI- and Anthropic-compatible
//! proxy.
//!
//! - [`identity`]: which conversation a request belongs to, from its headers and body.

pub mod identity;
