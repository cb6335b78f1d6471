//! Entry and session ids, shaped the way pi makes them.
//!
//! Entry ids are 8 lower-case hex characters: short enough to read in a transcript, and pi's
//! tools expect that shape. 32 random bits collide once a session has tens of thousands of
//! entries often enough to matter, so every new id is checked against the ids already in the
//! session; after [`MAX_SHORT_ID_TRIES`] collisions (a practically full id space, or a broken
//! random source) a full uuid-shaped id is used instead, which pi also accepts.
#![warn(missing_docs)]

use rand::Rng;

/// How many 8-hex candidates are tried before falling back to a full uuid-shaped id; the
/// same bound pi uses.
pub const MAX_SHORT_ID_TRIES: usize = 100;

/// A new entry id that `taken` does not report as used.
///
/// `taken` is asked about every candidate, so it should be a set lookup.
pub fn new_entry_id(taken: impl Fn(&str) -> bool) -> String {
    let mut rng = rand::rng();
    for _ in 0..MAX_SHORT_ID_TRIES {
        let candidate = format!("{:08x}", rng.random::<u32>());
        if !taken(&candidate) {
            return candidate;
        }
    }
    // 122 random bits: a collision here is not a practical concern, but keep checking so the
    // "ids are unique" invariant never rests on luck alone.
    loop {
        let candidate = new_uuid();
        if !taken(&candidate) {
            tracing::warn!(
                tries = MAX_SHORT_ID_TRIES,
                id = %candidate,
                "every short entry id candidate collided; using a full uuid-shaped id"
            );
            return candidate;
        }
    }
}

/// A random (version 4) uuid in its usual 8-4-4-4-12 text form, for session ids and the
/// entry-id fallback. Written here to avoid a dependency for 10 lines.
pub fn new_uuid() -> String {
    let mut bytes: [u8; 16] = rand::rng().random();
    bytes[6] = (bytes[6] & 0x0f) | 0x40; // version 4
    bytes[8] = (bytes[8] & 0x3f) | 0x80; // RFC 4122 variant
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// The current time as pi writes entry timestamps (JavaScript's `toISOString`:
/// `2026-03-01T09:00:00.000Z`).
pub fn now_iso() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// An entry timestamp (ISO 8601) as Unix milliseconds, the unit messages use. `None` when the
/// text is not a date, so the caller decides the fallback instead of getting a silent zero.
pub fn iso_to_millis(iso: &str) -> Option<u64> {
    let parsed = chrono::DateTime::parse_from_rfc3339(iso).ok()?;
    u64::try_from(parsed.timestamp_millis()).ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use std::collections::HashSet;

    #[test]
    fn short_ids_are_eight_hex_chars() {
        let id = new_entry_id(|_| false);
        assert_eq!(id.len(), 8);
        assert!(
            id.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
    }

    #[test]
    fn falls_back_to_uuid_after_collisions() {
        // Every 8-character candidate "collides".
        let id = new_entry_id(|candidate| candidate.len() == 8);
        assert_eq!(id.len(), 36);
        assert_eq!(id.as_bytes()[14], b'4');
    }

    #[test]
    fn uuids_are_distinct() {
        let ids: HashSet<String> = (0..1000).map(|_| new_uuid()).collect();
        assert_eq!(ids.len(), 1000);
    }

    #[test]
    fn iso_round_trip() {
        assert_eq!(iso_to_millis("1970-01-01T00:00:01.500Z"), Some(1500));
        assert_eq!(iso_to_millis("not a date"), None);
        assert!(iso_to_millis(&now_iso()).is_some());
    }
}
