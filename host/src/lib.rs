//! The library behind the `rampart` binary. ARCHITECTURE.md at the repository root says where
//! each concept lives: commands, configuration, engine hosting, providers, the run loop and
//! the replay.

pub mod blobs;
pub mod chart;
pub mod commands;
pub mod config;
pub mod engine;
pub mod eval;
pub mod html;
pub mod memory;
pub mod models;
pub mod output_file;
pub mod persist;
pub mod platform;
pub mod prompt;
pub mod prose;
pub mod providers;
pub mod replay;
pub mod run;
pub mod scratch;
pub mod serve;
pub mod spill;
pub mod terminal;
