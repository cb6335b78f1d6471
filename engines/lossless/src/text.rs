//! Small text helpers: a stable hash for ids, token estimates of plain text, UTC time
//! rendering, XML escaping, and cutting text to a token count.
//!
//! Why hand-written: the engine depends on the engine API, SQLite and serde alone, as an
//! outside author's would; none of these needs a crate.

use rampart_engine_api::tokens::estimate_string_chars;

/// FNV-1a over `parts`, as 16 hex digits. Ids built from content are deterministic, so a
/// rebuild from the session gives the same ids, unlike lossless-claw's random ones.
pub fn hash_hex(parts: &[&[u8]]) -> String {
    format!("{:016x}", hash64(parts))
}

/// FNV-1a 64 over `parts`, with a separator between them.
pub fn hash64(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in part.iter().chain(std::iter::once(&0xffu8)) {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// Estimated tokens of plain text, with the engine API's CJK-aware estimate.
pub fn text_tokens(text: &str) -> u64 {
    estimate_string_chars(text).div_ceil(4)
}

/// The longest prefix of `text` within `tokens` estimated tokens, cut at a char boundary.
pub fn cut_to_tokens(text: &str, tokens: u64) -> &str {
    if text_tokens(text) <= tokens {
        return text;
    }
    let budget = tokens * 4;
    let mut used = 0u64;
    for (i, c) in text.char_indices() {
        let w = estimate_string_chars(c.encode_utf8(&mut [0; 4]));
        if used + w > budget {
            return &text[..i];
        }
        used += w;
    }
    text
}

/// `YYYY-MM-DDTHH:MMZ` of Unix milliseconds (UTC; stable across hosts and time zones, so a
/// rendered summary is byte-identical on every turn and machine).
pub fn utc_minute(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60
    )
}

/// The instant an ISO 8601 date or time names, in Unix ms: `2026-02-11`,
/// `2026-02-11T16:00`, `2026-02-11T16:00:26`, `2026-02-11 16:00:26.071Z`,
/// `2026-02-11T16:00+08:00`; UTC when no offset is given. `None` for anything else.
pub fn parse_instant(text: &str) -> Option<u64> {
    let text = text.trim();
    let num = |s: &str| -> Option<i64> {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    // A model writes this: a character of several bytes where a digit belongs must be refused,
    // not split.
    let cut = text.len().min(10);
    if !text.is_char_boundary(cut) {
        return None;
    }
    let (date, rest) = text.split_at(cut);
    let mut parts = date.split('-');
    let (y, m, d) = (
        num(parts.next()?)?,
        num(parts.next()?)?,
        num(parts.next()?)?,
    );
    if parts.next().is_some() || !(1..=12).contains(&m) || !(1..=31).contains(&d) || y < 1970 {
        return None;
    }
    let mut ms = days_from_civil(y, m as u32, d as u32) * 86_400_000;
    if rest.is_empty() {
        return u64::try_from(ms).ok();
    }
    let rest = rest.strip_prefix(['T', 't', ' '])?;
    // The offset: `Z`, or a sign and `HH:MM` after the time.
    let (time, offset_ms) = if let Some(time) = rest.strip_suffix(['Z', 'z']) {
        (time, 0)
    } else if let Some(at) = rest.rfind(['+', '-']) {
        let (time, offset) = rest.split_at(at);
        let sign = if offset.starts_with('-') { -1 } else { 1 };
        let (h, mi) = offset[1..].split_once(':')?;
        let (h, mi) = (num(h)?, num(mi)?);
        if h > 23 || mi > 59 {
            return None;
        }
        (time, sign * (h * 3_600_000 + mi * 60_000))
    } else {
        (rest, 0)
    };
    let (time, fraction) = time.split_once('.').unwrap_or((time, ""));
    let mut fields = time.split(':');
    let h = num(fields.next()?)?;
    let mi = num(fields.next()?)?;
    let sec = fields.next().map_or(Some(0), num)?;
    if fields.next().is_some() || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let millis = if fraction.is_empty() {
        0
    } else {
        let digits: String = fraction.chars().chain("000".chars()).take(3).collect();
        num(&digits)?
    };
    ms += h * 3_600_000 + mi * 60_000 + sec * 1_000 + millis - offset_ms;
    u64::try_from(ms).ok()
}

/// Howard Hinnant's civil-to-days algorithm: days since 1970-01-01.
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Howard Hinnant's days-to-civil algorithm.
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

/// Escapes text for an XML element or attribute.
pub fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// The opaque identifiers in `text`, in order of first appearance, at most `limit`: URLs,
/// paths of two or more segments, UUIDs, hashes (seven or more hex digits with both a digit and
/// a letter) and numbers of four or more digits. These are what a model cannot rebuild once a
/// summary has dropped them (a later answer needs the exact path, port or commit), so the
/// extractive summary lists them beside each excerpt. Plain scanning, no regex crate: the
/// engine keeps to its few dependencies.
pub fn identifiers(text: &str, limit: usize) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    let is_break = |c: char| {
        c.is_whitespace()
            || matches!(
                c,
                '"' | '\''
                    | '`'
                    | '<'
                    | '>'
                    | '('
                    | ')'
                    | '['
                    | ']'
                    | '{'
                    | '}'
                    | ','
                    | ';'
                    | '|'
                    | '*'
            )
    };
    for word in text.split(is_break) {
        if out.len() >= limit {
            break;
        }
        let word = word.trim_end_matches(['.', ':', '!', '?']);
        if word.starts_with("http://") || word.starts_with("https://") {
            push_unique(&mut out, word);
            continue;
        }
        // `key=value`, `file.rs:120`: the parts are the candidates.
        for part in word.split(['=', ':']) {
            let part = part
                .trim_end_matches(['.', '!', '?'])
                .trim_start_matches(['.', '~']);
            if out.len() < limit && is_identifier(part) {
                push_unique(&mut out, part);
            }
        }
    }
    out
}

fn push_unique<'a>(out: &mut Vec<&'a str>, item: &'a str) {
    if !out.contains(&item) {
        out.push(item);
    }
}

fn is_identifier(part: &str) -> bool {
    let path_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/');
    if part.contains('/') && part.chars().all(path_char) {
        return part.split('/').filter(|s| !s.is_empty()).count() >= 2;
    }
    let hex = part.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
    if hex && part.len() == 36 && part.matches('-').count() == 4 {
        return true; // a UUID
    }
    if part.len() >= 4 && part.chars().all(|c| c.is_ascii_digit()) {
        return true;
    }
    part.len() >= 7
        && part.chars().all(|c| c.is_ascii_hexdigit())
        && part.chars().any(|c| c.is_ascii_digit())
        && part.chars().any(|c| c.is_ascii_alphabetic())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "text_tests.rs"]
mod tests;
