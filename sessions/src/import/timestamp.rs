//! Timestamp parsing for importers.
//!
//! Sources write times in several shapes (RFC 3339 with `Z`, ISO without a
//! zone as OpenHands does, Unix seconds as floats in LiteLLM logs). pi wants
//! RFC 3339 UTC strings on entries and Unix milliseconds inside messages, so
//! everything is parsed into one [`DateTime<Utc>`] and printed one way.

use chrono::{DateTime, NaiveDateTime, SecondsFormat, Utc};

/// Parse an ISO-8601 / RFC 3339 time. A time without a zone is taken as UTC
/// (OpenHands writes `2025-01-20T20:29:13.519638`, which is UTC).
pub(crate) fn parse_iso(s: &str) -> Option<DateTime<Utc>> {
    let s = s.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc));
    }
    for fmt in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f"] {
        if let Ok(t) = NaiveDateTime::parse_from_str(s, fmt) {
            return Some(t.and_utc());
        }
    }
    None
}

/// A time from Unix seconds (possibly fractional), as LiteLLM logs write it.
pub(crate) fn from_unix_seconds(secs: f64) -> Option<DateTime<Utc>> {
    if !secs.is_finite() || secs < 0.0 {
        return None;
    }
    // Whole milliseconds; times beyond i64 milliseconds are not real times.
    let millis = (secs * 1000.0).round();
    if millis > i64::MAX as f64 {
        return None;
    }
    DateTime::from_timestamp_millis(millis as i64)
}

/// The pi spelling: RFC 3339, UTC, milliseconds, `Z`.
pub(crate) fn to_iso(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Unix milliseconds, clamped at 0 for pre-1970 times (pi's field is unsigned).
pub(crate) fn to_millis(t: DateTime<Utc>) -> u64 {
    u64::try_from(t.timestamp_millis()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_shapes_sources_write() {
        let z = parse_iso("2025-07-14T23:04:11.646Z").map(to_iso);
        assert_eq!(z.as_deref(), Some("2025-07-14T23:04:11.646Z"));
        let naive = parse_iso("2025-01-20T20:29:13.519638").map(to_iso);
        assert_eq!(naive.as_deref(), Some("2025-01-20T20:29:13.519Z"));
        let offset = parse_iso("2025-01-20T22:29:13+02:00").map(to_iso);
        assert_eq!(offset.as_deref(), Some("2025-01-20T20:29:13.000Z"));
        assert!(parse_iso("yesterday").is_none());
        let unix = from_unix_seconds(1_757_015_046.707_548).map(to_iso);
        assert_eq!(unix.as_deref(), Some("2025-09-04T19:44:06.708Z"));
        assert!(from_unix_seconds(f64::NAN).is_none());
    }
}
