use super::*;
use std::os::unix::process::ExitStatusExt;

#[test]
fn a_death_is_one_phrase_naming_the_signal_or_status() {
    // A raw wait status: the signal in the low bits, an exit code in the second byte.
    assert_eq!(
        describe_status(ExitStatus::from_raw(11)),
        "killed by signal 11 (SIGSEGV: a segmentation fault)"
    );
    assert!(describe_status(ExitStatus::from_raw(6)).starts_with("killed by signal 6 (SIGABRT"));
    assert!(describe_status(ExitStatus::from_raw(9)).contains("out-of-memory"));
    assert_eq!(
        describe_status(ExitStatus::from_raw(3 << 8)),
        "exited with status 3"
    );
    assert_eq!(
        describe_status(ExitStatus::from_raw(64)),
        "killed by signal 64"
    );
}
