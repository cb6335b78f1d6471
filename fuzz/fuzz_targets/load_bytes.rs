//! the session loader: in memory and from a file, contexts, save and reload.
//! The checks live in `rampart_sessions::fuzz::load_bytes`, shared with the stable mutation fuzzer
//! (`sessions/tests/fuzz_mutation.rs`); a broken invariant panics, which libFuzzer reports.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rampart_sessions::fuzz::load_bytes(data));
