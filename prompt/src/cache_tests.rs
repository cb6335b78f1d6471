use std::fs;

use super::*;
use crate::budget::BootstrapLimits;

#[test]
fn a_session_keeps_its_snapshot_until_reset() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("AGENTS.md"), "First rules.").unwrap();
    let cache = BootstrapCache::new();
    let request = BootstrapRequest::new(dir.path(), "agent:main:main");
    let first = cache.get_or_load(&request).unwrap();
    assert_eq!(first.files()[0].content, "First rules.");

    fs::write(dir.path().join("AGENTS.md"), "Edited rules.").unwrap();
    let again = cache.get_or_load(&request).unwrap();
    assert!(
        Arc::ptr_eq(&first, &again),
        "an edit mid-session is not seen"
    );
    assert_eq!(again.files()[0].content, "First rules.");

    // Another session reads the files as they are now.
    let other = cache
        .get_or_load(&BootstrapRequest::new(dir.path(), "agent:main:other"))
        .unwrap();
    assert_eq!(other.files()[0].content, "Edited rules.");

    assert!(cache.reset("agent:main:main"));
    assert!(!cache.reset("agent:main:main"));
    let fresh = cache.get_or_load(&request).unwrap();
    assert_eq!(fresh.files()[0].content, "Edited rules.");
    assert_eq!(cache.len(), 2);
    cache.clear();
    assert!(cache.is_empty());
}

#[test]
fn a_failed_load_is_not_cached() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let cache = BootstrapCache::new();
    let request = BootstrapRequest::new(&ws, "main");
    assert!(cache.get_or_load(&request).is_err());
    assert!(cache.get("main").is_none());
    fs::create_dir(&ws).unwrap();
    assert!(cache.get_or_load(&request).is_ok());
}

#[test]
fn warnings_are_remembered_per_session() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("AGENTS.md"), "x".repeat(1000)).unwrap();
    let cache = BootstrapCache::new();
    let mut request = BootstrapRequest::new(dir.path(), "a");
    request.limits = BootstrapLimits::new(200, 0);
    cache.get_or_load(&request).unwrap();
    assert!(
        !cache
            .warning_lines("a", TruncationWarningMode::Once)
            .is_empty()
    );
    assert!(
        cache
            .warning_lines("a", TruncationWarningMode::Once)
            .is_empty()
    );
    assert!(
        !cache
            .warning_lines("a", TruncationWarningMode::Always)
            .is_empty()
    );
    assert!(
        cache
            .warning_lines("b", TruncationWarningMode::Always)
            .is_empty()
    );
    // A reset session is warned again.
    cache.reset("a");
    cache.get_or_load(&request).unwrap();
    assert!(
        !cache
            .warning_lines("a", TruncationWarningMode::Once)
            .is_empty()
    );
}
