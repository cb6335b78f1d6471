//! The model providers (crate `rampart-providers`: the simulator, chat completions, Responses,
//! Anthropic), re-exported under their old path, and what the host adds: the registry that
//! builds them from the configuration. The tests here cross serve's decoder and a provider's
//! writer: what a client sent is what the upstream gets.

pub use rampart_providers::*;

pub mod registry;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "round_trip_tests.rs"]
mod round_trip_tests;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "anthropic_transparency_tests.rs"]
mod anthropic_transparency_tests;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "responses_transparency_tests.rs"]
mod responses_transparency_tests;
