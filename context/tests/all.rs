//! The integration tests of this crate, as one test binary (one link instead of one per
//! file).

mod guards_persistence;
mod guards_precheck;
mod guards_props;
mod guards_tool_loop;
mod guards_tool_result;
mod hygiene_run;
mod tokens_counter;
mod tokens_estimate;
mod tokens_exact;
