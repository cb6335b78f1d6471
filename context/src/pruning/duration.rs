//! Duration strings as OpenClaw's configuration writes them (`"5m"`, `"1h"`, `"1h30m"`,
//! `"500ms"`, a bare `"90"`).
//!
//! Why our own parser: the grammar is small and fixed by the reference (`parseDurationMs`), and
//! the error has to say exactly what was wrong so the settings error can name the key.

/// The units a duration may use, longest spelling first so `ms` is not read as `m` + `s`.
const UNITS: [(&str, f64); 5] = [
    ("ms", 1.0),
    ("s", 1_000.0),
    ("m", 60_000.0),
    ("h", 3_600_000.0),
    ("d", 86_400_000.0),
];

/// Milliseconds per unit of a bare number: the pruning TTL's default unit is minutes.
const DEFAULT_UNIT_MS: f64 = 60_000.0;

/// What a duration may look like; part of every error so the user sees the fix.
pub(crate) const DURATION_HELP: &str = "a duration such as \"5m\", \"1h\", \"30s\", \"500ms\", \
     \"1h30m\" or a bare number of minutes such as \"90\"";

/// Parses `text` into milliseconds, rounded to the nearest millisecond.
///
/// Accepted, case-insensitively and with surrounding whitespace ignored:
/// - one number with an optional unit (`ms`, `s`, `m`, `h`, `d`); without a unit it is minutes;
/// - several numbers each with a unit, written together (`1h30m`, `2m500ms`).
///
/// Numbers are decimal, without sign or exponent (`1.5h` is fine, `-5m` and `.5m` are not).
pub(crate) fn parse_duration_ms(text: &str) -> Result<u64, String> {
    let text = text.trim().to_ascii_lowercase();
    if text.is_empty() {
        return Err(format!("an empty duration; use {DURATION_HELP}"));
    }
    let bytes = text.as_bytes();
    let mut total = 0f64;
    let mut at = 0usize;
    let mut tokens = 0usize;
    while at < bytes.len() {
        let start = at;
        at += digits(&bytes[at..]);
        if at == start {
            return Err(invalid(&text));
        }
        if bytes.get(at) == Some(&b'.') {
            let fraction = digits(&bytes[at + 1..]);
            if fraction == 0 {
                return Err(invalid(&text));
            }
            at += 1 + fraction;
        }
        let value: f64 = text[start..at].parse().map_err(|_| invalid(&text))?;
        tokens += 1;
        let rest = &text[at..];
        match UNITS.iter().find(|(unit, _)| rest.starts_with(unit)) {
            Some((unit, ms)) => {
                total += value * ms;
                at += unit.len();
            }
            // Only a lone number may leave its unit out.
            None if at == bytes.len() && tokens == 1 => total = value * DEFAULT_UNIT_MS,
            None => return Err(invalid(&text)),
        }
    }
    if !total.is_finite() {
        return Err(invalid(&text));
    }
    // Rounded like JavaScript's `Math.round`; `as` saturates beyond u64.
    Ok((total + 0.5).floor() as u64)
}

fn digits(bytes: &[u8]) -> usize {
    bytes.iter().take_while(|b| b.is_ascii_digit()).count()
}

fn invalid(text: &str) -> String {
    format!("{text:?} is not a duration; use {DURATION_HELP}")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn units_and_the_default_unit() {
        assert_eq!(parse_duration_ms("5m"), Ok(300_000));
        assert_eq!(parse_duration_ms("1h"), Ok(3_600_000));
        assert_eq!(parse_duration_ms("30s"), Ok(30_000));
        assert_eq!(parse_duration_ms("500ms"), Ok(500));
        assert_eq!(parse_duration_ms("2d"), Ok(172_800_000));
        // A bare number is minutes.
        assert_eq!(parse_duration_ms("90"), Ok(5_400_000));
        assert_eq!(parse_duration_ms("0"), Ok(0));
        assert_eq!(parse_duration_ms("1.5"), Ok(90_000));
    }

    #[test]
    fn composites_case_and_whitespace() {
        assert_eq!(parse_duration_ms("1h30m"), Ok(5_400_000));
        assert_eq!(parse_duration_ms("2m500ms"), Ok(120_500));
        assert_eq!(parse_duration_ms(" 1H "), Ok(3_600_000));
        assert_eq!(parse_duration_ms("1.5h"), Ok(5_400_000));
        assert_eq!(parse_duration_ms("0.0004s"), Ok(0));
    }

    #[test]
    fn malformed_durations_are_refused() {
        for bad in [
            "", "  ", "m", "5 m", "5x", "-5m", ".5m", "5.m", "1h30", "5m!", "1e3", "five",
        ] {
            let err = parse_duration_ms(bad).unwrap_err();
            assert!(err.contains("duration"), "{bad:?}: {err}");
        }
    }
}
