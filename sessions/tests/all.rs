//! The integration tests of this crate, as one test binary (one link instead of one per
//! file). `core_processes` stays a binary of its own: it runs itself
//! again as the child writer processes, by test name.

mod core_bad_input;
mod core_lenient;
mod core_migrate;
mod core_real_files;
mod core_session;
mod fuzz_mutation;
mod import_chat_like;
mod import_claude_code;
mod import_codex;
mod import_corpus;
mod import_detect;
mod lanes_behaviour;
mod store_registry;
