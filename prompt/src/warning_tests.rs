use std::path::PathBuf;

use super::*;
use crate::budget::{BootstrapLimits, SourceFile};

fn set_with(sizes: &[(&str, usize)], limits: BootstrapLimits) -> BootstrapSet {
    let sources: Vec<SourceFile> = sizes
        .iter()
        .map(|(name, n)| SourceFile {
            name: name.to_string(),
            path: PathBuf::from(format!("/ws/{name}")),
            content: Some("x".repeat(*n)),
        })
        .collect();
    BootstrapSet::from_sources("/ws", &sources, limits)
}

#[test]
fn nothing_cut_means_no_warning() {
    let set = set_with(&[("AGENTS.md", 100)], BootstrapLimits::default());
    assert!(truncation_lines(&set).is_empty());
    assert!(
        WarningLog::new()
            .lines_for(&set, TruncationWarningMode::Always)
            .is_empty()
    );
}

#[test]
fn the_lines_name_each_cut_file_with_sizes_share_and_cause() {
    let set = set_with(&[("AGENTS.md", 1000)], BootstrapLimits::new(200, 0));
    let lines = truncation_lines(&set);
    assert_eq!(
        lines[0],
        "AGENTS.md: 1000 raw -> 285 injected (~82% removed; max/file)."
    );
    assert!(
        lines
            .last()
            .unwrap()
            .contains("agents.defaults.bootstrapMaxChars")
    );
}

#[test]
fn at_most_three_files_are_named_and_the_rest_counted() {
    let set = set_with(
        &[
            ("AGENTS.md", 500),
            ("SOUL.md", 500),
            ("TOOLS.md", 500),
            ("USER.md", 500),
            ("MEMORY.md", 500),
        ],
        BootstrapLimits::new(100, 0),
    );
    let lines = truncation_lines(&set);
    assert_eq!(lines.len(), 5);
    assert_eq!(lines[3], "+2 more truncated file(s).");
}

#[test]
fn always_is_the_default_and_repeats_every_turn() {
    assert_eq!(
        TruncationWarningMode::default(),
        TruncationWarningMode::Always
    );
    let set = set_with(&[("AGENTS.md", 1000)], BootstrapLimits::new(200, 0));
    let mut log = WarningLog::new();
    assert!(
        !log.lines_for(&set, TruncationWarningMode::default())
            .is_empty()
    );
    assert!(
        !log.lines_for(&set, TruncationWarningMode::default())
            .is_empty()
    );
}

#[test]
fn once_shows_a_truncation_once_and_a_new_one_again() {
    let set = set_with(&[("AGENTS.md", 1000)], BootstrapLimits::new(200, 0));
    let mut log = WarningLog::new();
    assert!(!log.lines_for(&set, TruncationWarningMode::Once).is_empty());
    assert!(log.lines_for(&set, TruncationWarningMode::Once).is_empty());
    let bigger = set_with(&[("AGENTS.md", 2000)], BootstrapLimits::new(200, 0));
    assert!(
        !log.lines_for(&bigger, TruncationWarningMode::Once)
            .is_empty()
    );
    assert!(log.lines_for(&set, TruncationWarningMode::Off).is_empty());
}

#[test]
fn once_remembers_the_last_32_signatures() {
    let mut log = WarningLog::new();
    let first = set_with(&[("AGENTS.md", 1000)], BootstrapLimits::new(200, 0));
    assert!(
        !log.lines_for(&first, TruncationWarningMode::Once)
            .is_empty()
    );
    for n in 0..REMEMBERED_SIGNATURES {
        let other = set_with(&[("AGENTS.md", 3000 + n)], BootstrapLimits::new(200, 0));
        assert!(
            !log.lines_for(&other, TruncationWarningMode::Once)
                .is_empty()
        );
    }
    assert_eq!(log.seen().count(), REMEMBERED_SIGNATURES);
    // The first was forgotten, so it shows again.
    assert!(
        !log.lines_for(&first, TruncationWarningMode::Once)
            .is_empty()
    );
    let restored = WarningLog::from_seen(log.seen().map(str::to_string));
    assert_eq!(restored, log);
}

#[test]
fn the_block_follows_the_message_after_a_blank_line() {
    let out =
        append_truncation_warning("hello", &["AGENTS.md: 200 raw -> 0 injected".into()], None);
    assert!(out.starts_with("hello\n\n[Bootstrap truncation warning]\n"));
    assert!(out.ends_with("\n- AGENTS.md: 200 raw -> 0 injected"));
    assert_eq!(
        append_truncation_warning("hello", &[" ".into()], None),
        "hello"
    );
    assert!(append_truncation_warning("", &["x".into()], None).starts_with(WARNING_HEADER));
}
