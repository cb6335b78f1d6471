//! UTC formatting of Unix-millisecond timestamps for chunk labels, without a date crate.

/// `YYYY-MM-DD HH:MM` in UTC.
pub(crate) fn format_utc_minute(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}",
        rem / 3600,
        (rem % 3600) / 60
    )
}

/// Howard Hinnant's `civil_from_days`: the proleptic Gregorian date of a day count since
/// 1970-01-01.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(format_utc_minute(0), "1970-01-01 00:00");
        // 2026-03-01T09:00:00Z
        assert_eq!(format_utc_minute(1_772_355_600_000), "2026-03-01 09:00");
        // 2024-02-29T23:59:59Z
        assert_eq!(format_utc_minute(1_709_251_199_000), "2024-02-29 23:59");
    }
}
