//! The library behind the `rampart` binary: configuration, the engine loader, the
//! `contextEngine` slot with its failure policy, and the services engines call back.

pub mod blobs;
pub mod commands;
pub mod config;
pub mod engine_handle;
pub mod loader;
pub mod models;
pub mod persist;
pub mod providers;
pub mod replay;
pub mod run;
pub mod services;
pub mod slot;
