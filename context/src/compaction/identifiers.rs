//! Opaque identifiers (hashes, URLs, paths, `host:port`, long numbers): what a summary must
//! keep verbatim, because a model cannot reconstruct them once they are gone.
//!
//! [`extract_opaque_identifiers`] is OpenClaw's `extractOpaqueIdentifiers`, used by the quality
//! audit (at most 12). [`IdentifierSet`] runs the same pattern (plus whole UUIDs, which the
//! reference pattern only sees as two hex runs) over everything, for the extractive summariser.

use std::collections::HashSet;
use std::sync::LazyLock;

use regex::Regex;

/// Identifiers the audit checks at most (`MAX_EXTRACTED_IDENTIFIERS`).
pub const MAX_EXTRACTED_IDENTIFIERS: usize = 12;
/// The shortest identifier worth keeping.
pub const MIN_IDENTIFIER_CHARS: usize = 4;

/// The reference pattern, alternatives in its order: hex runs of 8+, `http(s)://…`, absolute
/// paths of two or more segments, Windows paths, `host.tld:port`, and numbers of 6+ digits.
/// JavaScript's `\w`, `\d` and `\b` are ASCII-only, hence the explicit classes.
const IDENTIFIER_PATTERN: &str = r"[A-Fa-f0-9]{8,}|https?://\S+|/[A-Za-z0-9_.-]{2,}(?:/[A-Za-z0-9_.-]+)+|[A-Za-z]:\\[A-Za-z0-9_\\.-]+|[A-Za-z0-9._-]+\.[A-Za-z0-9._/-]+:[0-9]{1,5}|(?-u:\b)[0-9]{6,}(?-u:\b)";

/// A UUID, tried before the reference pattern so it is kept whole.
const UUID_PATTERN: &str =
    r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}";

static REFERENCE: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(IDENTIFIER_PATTERN).ok());
static EXTENDED: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(&format!("{UUID_PATTERN}|{IDENTIFIER_PATTERN}")).ok());

/// OpenClaw's `extractOpaqueIdentifiers`: matches, trimmed of surrounding punctuation, pure hex
/// upper-cased, at least 4 characters, deduplicated in order, the first 12.
pub fn extract_opaque_identifiers(text: &str) -> Vec<String> {
    let Some(re) = REFERENCE.as_ref() else {
        return Vec::new();
    };
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for m in re.find_iter(text) {
        let value = normalize(sanitize(m.as_str()));
        if value.chars().count() >= MIN_IDENTIFIER_CHARS && seen.insert(value.clone()) {
            out.push(value);
            if out.len() == MAX_EXTRACTED_IDENTIFIERS {
                break;
            }
        }
    }
    out
}

/// Whether `summary` contains `identifier`; hex compares case-insensitively, as the audit
/// normalises hex to upper case.
pub fn summary_includes_identifier(summary: &str, identifier: &str) -> bool {
    if is_pure_hex(identifier) {
        summary
            .to_ascii_uppercase()
            .contains(&identifier.to_ascii_uppercase())
    } else {
        summary.contains(identifier)
    }
}

/// Whether `value` is 8 or more hex digits and nothing else.
pub fn is_pure_hex(value: &str) -> bool {
    value.len() >= 8 && value.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Trims whitespace, leading `("'`[{<` and trailing `)]"'`,;:.!?<>`.
fn sanitize(value: &str) -> &str {
    value
        .trim()
        .trim_start_matches(['(', '"', '\'', '`', '[', '{', '<'])
        .trim_end_matches([
            ')', ']', '"', '\'', '`', ',', ';', ':', '.', '!', '?', '<', '>',
        ])
}

fn normalize(value: &str) -> String {
    if is_pure_hex(value) {
        value.to_ascii_uppercase()
    } else {
        value.to_owned()
    }
}

/// Every identifier of a text, in first-seen order and original spelling, deduplicated (hex
/// case-insensitively). Why original spelling here but upper case in the audit: the summary
/// must quote the value exactly as it appeared.
#[derive(Debug, Default, Clone)]
pub struct IdentifierSet {
    keys: HashSet<String>,
    values: Vec<String>,
}

impl IdentifierSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the identifiers found in `text`.
    pub fn scan(&mut self, text: &str) {
        let Some(re) = EXTENDED.as_ref() else {
            return;
        };
        for m in re.find_iter(text) {
            self.insert(sanitize(m.as_str()));
        }
    }

    /// Adds one identifier (already isolated), unless too short or already present.
    pub fn insert(&mut self, value: &str) {
        if value.chars().count() < MIN_IDENTIFIER_CHARS {
            return;
        }
        if self.keys.insert(normalize(value)) {
            self.values.push(value.to_owned());
        }
    }

    /// The identifiers, first seen first.
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn patterns_compile() {
        assert!(REFERENCE.is_some());
        assert!(EXTENDED.is_some());
    }

    #[test]
    fn reference_case_keeps_real_identifiers_and_skips_prose() {
        // §13 group 9.
        let ids = extract_opaque_identifiers(
            "Year 2026 count 42 port 18789 ticket 123456 URL https://example.com/a, path /tmp/x.log, and tiny /a with prose on/off.",
        );
        for want in ["123456", "https://example.com/a", "/tmp/x.log"] {
            assert!(
                ids.contains(&want.to_owned()),
                "{want} missing from {ids:?}"
            );
        }
        for unwanted in ["2026", "42", "18789", "/a", "/off"] {
            assert!(!ids.contains(&unwanted.to_owned()), "{unwanted} in {ids:?}");
        }
    }

    #[test]
    fn hex_is_upper_cased_and_deduplicated() {
        assert_eq!(
            extract_opaque_identifiers("a1b2c3d4e5f6 and A1B2C3D4E5F6"),
            vec!["A1B2C3D4E5F6"]
        );
        assert!(summary_includes_identifier(
            "hash a1b2c3d4e5f6",
            "A1B2C3D4E5F6"
        ));
    }

    #[test]
    fn more_shapes_and_the_cap() {
        let ids = extract_opaque_identifiers(
            "see C:\\Users\\me\\x.txt and db.internal:5432, (deadbeefcafe) 1234567",
        );
        assert_eq!(
            ids,
            vec![
                "C:\\Users\\me\\x.txt",
                "db.internal:5432",
                "DEADBEEFCAFE",
                "1234567"
            ]
        );
        let many: String = (0..20).map(|i| format!("/srv/f{i:02} ")).collect();
        assert_eq!(
            extract_opaque_identifiers(&many).len(),
            MAX_EXTRACTED_IDENTIFIERS
        );
        // A number inside a word is not a number of its own.
        assert!(extract_opaque_identifiers("xyz1234567q").is_empty());
    }

    #[test]
    fn the_set_keeps_uuids_whole_and_original_case() {
        let mut set = IdentifierSet::new();
        set.scan("id 123e4567-e89b-12d3-a456-426614174000 hash deadBEEF1234 again DEADBEEF1234");
        assert_eq!(
            set.values(),
            ["123e4567-e89b-12d3-a456-426614174000", "deadBEEF1234"]
        );
    }
}
