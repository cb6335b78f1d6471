//! format detection and every importer, through import::import_bytes.
//! The checks live in `rampart_sessions::fuzz::import_bytes`, shared with the stable mutation fuzzer
//! (`sessions/tests/fuzz_mutation.rs`); a broken invariant panics, which libFuzzer reports.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rampart_sessions::fuzz::import_bytes(data));
