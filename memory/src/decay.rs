//! Temporal decay: older notes score lower (`openclaw-behaviour.md` §11).
//!
//! A score is multiplied by `exp(−ln2 / half_life × age_in_days)`, so it halves every
//! half-life. A note's date is the one in its path (`memory/2026-04-01.md`, midnight UTC),
//! else the file's modification time; evergreen memory (`MEMORY.md`, `memory.md` and undated
//! files under `memory/`) never decays, since it holds what the agent should always know.

use chrono::NaiveDate;

use crate::settings::Source;

const MS_PER_DAY: f64 = 86_400_000.0;

/// The multiplier for a note `age_days` old: 1 at age 0 (and for future dates), 0.5 at one
/// half-life. A half-life that is not positive means no decay.
pub fn decay_multiplier(age_days: f64, half_life_days: f64) -> f64 {
    if !(half_life_days.is_finite() && half_life_days > 0.0) {
        return 1.0;
    }
    let lambda = std::f64::consts::LN_2 / half_life_days;
    (-lambda * age_days.max(0.0)).exp()
}

/// The date in a dated memory path (`memory/YYYY-MM-DD.md`, also `…/memory/YYYY-MM-DD.md`),
/// as Unix milliseconds at midnight UTC.
pub fn date_from_path(path: &str) -> Option<i64> {
    let path = path.replace('\\', "/");
    let name = path.strip_suffix(".md")?;
    let (dir, date) = name.rsplit_once('/')?;
    if !(dir == "memory" || dir.ends_with("/memory")) || date.len() != 10 {
        return None;
    }
    let day = NaiveDate::parse_from_str(date, "%Y-%m-%d").ok()?;
    Some(day.and_hms_opt(0, 0, 0)?.and_utc().timestamp_millis())
}

/// Whether a memory path never decays: `MEMORY.md`, `memory.md`, and files under `memory/`
/// whose name is not a date.
pub fn is_evergreen(path: &str) -> bool {
    let path = path.replace('\\', "/");
    path == "MEMORY.md"
        || path == "memory.md"
        || (path.starts_with("memory/") && date_from_path(&path).is_none())
}

/// When a note was written, for decay: the date in its path, else (unless it is evergreen
/// memory) its modification time, else `None` (no decay).
pub fn note_timestamp_ms(path: &str, source: Source, mtime_ms: Option<i64>) -> Option<i64> {
    if let Some(date) = date_from_path(path) {
        return Some(date);
    }
    if source == Source::Memory && is_evergreen(path) {
        return None;
    }
    mtime_ms
}

/// `score` decayed for a note with this timestamp, seen at `now_ms`.
pub fn decayed_score(score: f64, timestamp_ms: Option<i64>, now_ms: i64, half_life: f64) -> f64 {
    match timestamp_ms {
        None => score,
        Some(ts) => {
            let age_days = (now_ms - ts).max(0) as f64 / MS_PER_DAY;
            score * decay_multiplier(age_days, half_life)
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "decay_tests.rs"]
mod tests;
