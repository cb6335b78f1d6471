//! import::open on a file (read-only), then save and reload of each session.
//! The checks live in `rampart_sessions::fuzz::open_bytes`, shared with the stable mutation fuzzer
//! (`sessions/tests/fuzz_mutation.rs`); a broken invariant panics, which libFuzzer reports.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rampart_sessions::fuzz::open_bytes(data));
