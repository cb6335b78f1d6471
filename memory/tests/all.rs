//! Integration tests of the memory index: what a host and a model see.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

mod concurrent_sync;
mod embedders;
mod search_behaviour;
mod sync_behaviour;
mod tools_behaviour;
mod watcher;
