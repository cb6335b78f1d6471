use super::*;

const DAY: i64 = 86_400_000;

#[test]
fn the_multiplier_halves_every_half_life() {
    assert!((decay_multiplier(30.0, 30.0) - 0.5).abs() < 1e-12);
    assert!((decay_multiplier(60.0, 30.0) - 0.25).abs() < 1e-12);
    assert_eq!(decay_multiplier(0.0, 30.0), 1.0);
    assert_eq!(decay_multiplier(-5.0, 30.0), 1.0);
    assert_eq!(decay_multiplier(30.0, 0.0), 1.0);
}

#[test]
fn dates_come_from_dated_memory_paths() {
    let ms = date_from_path("memory/2026-04-01.md").unwrap();
    assert_eq!(ms % DAY, 0);
    assert_eq!(date_from_path("memory/2026-04-01.md"), Some(ms));
    assert_eq!(date_from_path("notes/memory/2026-04-01.md"), Some(ms));
    assert_eq!(date_from_path("memory/2026-13-01.md"), None);
    assert_eq!(date_from_path("memory/ideas.md"), None);
    assert_eq!(date_from_path("other/2026-04-01.md"), None);
    assert_eq!(date_from_path("memory/x/2026-04-01.md"), None);
}

#[test]
fn evergreen_files_never_decay() {
    for path in [
        "MEMORY.md",
        "memory.md",
        "memory/people.md",
        "memory/projects/rampart.md",
    ] {
        assert!(is_evergreen(path), "{path}");
        assert_eq!(
            note_timestamp_ms(path, Source::Memory, Some(5)),
            None,
            "{path}"
        );
    }
    assert!(!is_evergreen("memory/2026-04-01.md"));
    // A transcript has no date in its path: its modification time counts.
    assert_eq!(
        note_timestamp_ms("sessions/a.jsonl", Source::Sessions, Some(5)),
        Some(5)
    );
    // An extra path outside memory/ decays by modification time.
    assert_eq!(
        note_timestamp_ms("notes/a.md", Source::Memory, Some(7)),
        Some(7)
    );
}

#[test]
fn a_dated_note_thirty_days_old_scores_half() {
    let ts = date_from_path("memory/2026-01-01.md");
    let now = ts.unwrap() + 30 * DAY;
    assert!((decayed_score(0.8, ts, now, 30.0) - 0.4).abs() < 1e-12);
    assert_eq!(decayed_score(0.8, None, now, 30.0), 0.8);
}
