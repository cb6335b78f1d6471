//! The host's integration tests, as one test binary: linking each file separately cost a link
//! of the whole host per file. `tracing_bridge_e2e` stays a binary of its own because it
//! installs a process-global subscriber.

mod common;

mod agents_e2e;
mod architecture;
mod c_abi_engines_e2e;
mod compaction_e2e;
mod concurrency_e2e;
mod config_e2e;
mod context_show_e2e;
mod damaged_library_e2e;
mod engine_tools_e2e;
mod engines_e2e;
mod engines_safety_e2e;
mod eval_e2e;
mod executable_engines_e2e;
mod install_e2e;
mod isolation_e2e;
mod layer2_e2e;
mod lossless_e2e;
mod memory_e2e;
mod memory_safety_e2e;
mod newcomer_e2e;
mod old_api;
mod openapi_e2e;
mod outputs_e2e;
mod overflow_loop_e2e;
mod privacy_e2e;
mod providers_e2e;
mod readme_config;
mod replay_as_provider_e2e;
mod replay_e2e;
mod replay_reproducible_e2e;
mod request_snapshots;
mod required_engine_e2e;
mod run_cli_e2e;
mod run_e2e;
mod scaling_e2e;
mod scratch_e2e;
mod seed003_e2e;
mod serve_e2e;
mod serve_postgres_crash_e2e;
mod serve_postgres_e2e;
mod serve_responses_e2e;
mod serve_security_e2e;
mod sessions_e2e;
mod sessions_postgres_e2e;
mod sim_e2e;
mod soak_e2e;
mod store_safety;
mod ui_browser_e2e;
mod ui_live_e2e;
#[cfg(feature = "wasm")]
mod wasm_engines_e2e;
