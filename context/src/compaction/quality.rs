//! The quality audit of a summary (OpenClaw's `compaction-safeguard-quality`), and the
//! structured fallback summary used when there is nothing real to summarise.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::identifiers::summary_includes_identifier;
use super::instructions::REQUIRED_SUMMARY_SECTIONS;
use super::settings::IdentifierPolicy;
use super::split::DEFAULT_SUMMARY_FALLBACK;
use super::transcript::message_text;
use rampart_message::AgentMessage;
use rampart_message::SharedMessage;

/// Keyword tokens of the latest ask that are compared at most.
pub const MAX_ASK_OVERLAP_TOKENS: usize = 12;
/// From this many ask tokens on, two must appear in the summary (else one).
pub const MIN_ASK_OVERLAP_TOKENS_FOR_DOUBLE_MATCH: usize = 3;

/// Common words that say nothing about what was asked; left out of the overlap check.
const STOPWORDS: &[&str] = &[
    "a", "about", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as", "at",
    "be", "because", "been", "before", "being", "but", "by", "can", "could", "did", "do", "does",
    "doing", "done", "for", "from", "get", "had", "has", "have", "having", "he", "her", "here",
    "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "just", "let", "me", "more",
    "most", "my", "no", "not", "now", "of", "on", "once", "only", "or", "other", "our", "out",
    "over", "please", "same", "she", "should", "so", "some", "such", "than", "that", "the",
    "their", "them", "then", "there", "these", "they", "this", "those", "to", "too", "up", "us",
    "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "why", "will",
    "with", "would", "you", "your",
];

/// The verdict of [`audit_summary_quality`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct QualityAudit {
    /// No reasons.
    pub ok: bool,
    /// `missing_section:<heading>`, `missing_identifiers:<first 3>` (strict policy only),
    /// `latest_user_ask_not_reflected`.
    pub reasons: Vec<String>,
}

/// Audits `summary`: every required heading present as its own line, every identifier present
/// (strict policy only), and the latest user ask reflected (keyword overlap).
pub fn audit_summary_quality(
    summary: &str,
    identifiers: &[String],
    latest_ask: Option<&str>,
    policy: IdentifierPolicy,
) -> QualityAudit {
    let lines: HashSet<&str> = summary
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let mut reasons: Vec<String> = REQUIRED_SUMMARY_SECTIONS
        .iter()
        .filter(|h| !lines.contains(**h))
        .map(|h| format!("missing_section:{h}"))
        .collect();
    if policy == IdentifierPolicy::Strict {
        let missing: Vec<&str> = identifiers
            .iter()
            .filter(|id| !summary_includes_identifier(summary, id))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            let first: Vec<&str> = missing.into_iter().take(3).collect();
            reasons.push(format!("missing_identifiers:{}", first.join(",")));
        }
    }
    if !has_ask_overlap(summary, latest_ask) {
        reasons.push("latest_user_ask_not_reflected".to_owned());
    }
    QualityAudit {
        ok: reasons.is_empty(),
        reasons,
    }
}

/// Whether `summary` shares enough keywords with `ask`: of the ask's first 12 distinct
/// keywords (stopwords and one-letter tokens left out, unless nothing else remains), two must
/// appear when there are 3 or more, else one. No ask always passes.
pub fn has_ask_overlap(summary: &str, ask: Option<&str>) -> bool {
    let Some(ask) = ask else {
        return true;
    };
    let mut seen = HashSet::new();
    let ask_tokens: Vec<String> = tokenize(ask)
        .into_iter()
        .filter(|t| seen.insert(t.clone()))
        .take(MAX_ASK_OVERLAP_TOKENS)
        .collect();
    if ask_tokens.is_empty() {
        return true;
    }
    let meaningful: Vec<&String> = ask_tokens
        .iter()
        .filter(|t| t.chars().count() > 1 && !STOPWORDS.contains(&t.as_str()))
        .collect();
    let check: Vec<&String> = if meaningful.is_empty() {
        ask_tokens.iter().collect()
    } else {
        meaningful
    };
    let summary_tokens: HashSet<String> = tokenize(summary).into_iter().collect();
    let overlap = check
        .iter()
        .filter(|t| summary_tokens.contains(**t))
        .count();
    let required = if check.len() >= MIN_ASK_OVERLAP_TOKENS_FOR_DOUBLE_MATCH {
        2
    } else {
        1
    };
    overlap >= required
}

/// Lower-cased runs of letters and digits.
fn tokenize(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Whether the required headings appear as lines of `summary`, in order.
pub fn has_required_sections(summary: &str) -> bool {
    let mut lines = summary.lines().map(str::trim);
    REQUIRED_SUMMARY_SECTIONS
        .iter()
        .all(|heading| lines.any(|line| line == *heading))
}

/// The minimal summary with the five headings (`buildStructuredFallbackSummary`): the previous
/// summary (or `No prior history.`) under Decisions, `None.` elsewhere and `None captured.`
/// for identifiers. A previous summary that already has the headings is returned as it is,
/// rather than nested under Decisions.
pub fn build_structured_fallback_summary(previous_summary: Option<&str>) -> String {
    let previous = previous_summary.map(str::trim).unwrap_or("");
    if !previous.is_empty() && has_required_sections(previous) {
        return previous.to_owned();
    }
    let decisions = if previous.is_empty() {
        DEFAULT_SUMMARY_FALLBACK
    } else {
        previous
    };
    format!(
        "## Decisions\n{decisions}\n\n## Open TODOs\nNone.\n\n## Constraints/Rules\nNone.\n\n\
         ## Pending user asks\nNone.\n\n## Exact identifiers\nNone captured."
    )
}

/// The text of the last user message that has any (`extractLatestUserAsk`).
pub fn extract_latest_user_ask(messages: &[SharedMessage]) -> Option<String> {
    messages.iter().rev().find_map(|m| match m.as_ref() {
        AgentMessage::User(_) => Some(message_text(m)).filter(|t| !t.is_empty()),
        _ => None,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::compaction::test_support::*;

    const GOOD: &str = "## Decisions\n- use sqlite\n\n## Open TODOs\n- migrate\n\n## Constraints/Rules\n- none\n\n## Pending user asks\n- deploy the api server\n\n## Exact identifiers\n- /srv/app.db";

    #[test]
    fn a_complete_summary_passes() {
        let audit = audit_summary_quality(
            GOOD,
            &["/srv/app.db".into()],
            Some("please deploy the API server now"),
            IdentifierPolicy::Strict,
        );
        assert!(audit.ok, "{audit:?}");
        assert!(has_required_sections(GOOD));
    }

    #[test]
    fn reasons_are_named_like_openclaw() {
        let audit = audit_summary_quality(
            "## Decisions\nnothing",
            &["/a/b".into(), "/c/d".into(), "/e/f".into(), "/g/h".into()],
            Some("rotate the signing keys tonight"),
            IdentifierPolicy::Strict,
        );
        assert!(!audit.ok);
        assert!(
            audit
                .reasons
                .contains(&"missing_section:## Open TODOs".to_owned())
        );
        assert!(
            audit
                .reasons
                .contains(&"missing_identifiers:/a/b,/c/d,/e/f".to_owned())
        );
        assert!(
            audit
                .reasons
                .contains(&"latest_user_ask_not_reflected".to_owned())
        );
        // Identifiers are not audited under other policies.
        let audit = audit_summary_quality(GOOD, &["/x/y".into()], None, IdentifierPolicy::Off);
        assert!(audit.ok);
    }

    #[test]
    fn ask_overlap_rule() {
        // Three or more keywords: two must match.
        assert!(!has_ask_overlap(
            "we rotate things",
            Some("rotate signing keys")
        ));
        assert!(has_ask_overlap(
            "rotate the keys",
            Some("rotate signing keys")
        ));
        // Fewer than three: one is enough.
        assert!(has_ask_overlap("deploy", Some("deploy it")));
        assert!(has_ask_overlap("anything", None));
        assert!(has_ask_overlap("anything", Some("   ")));
    }

    #[test]
    fn fallback_summary_has_the_headings() {
        let s = build_structured_fallback_summary(None);
        assert!(has_required_sections(&s));
        assert!(s.contains("## Decisions\nNo prior history."));
        assert!(s.ends_with("## Exact identifiers\nNone captured."));
        let s = build_structured_fallback_summary(Some("old text"));
        assert!(s.starts_with("## Decisions\nold text\n"));
        assert_eq!(build_structured_fallback_summary(Some(GOOD)), GOOD);
    }

    #[test]
    fn latest_ask_is_the_last_user_text() {
        let msgs = shared(vec![
            user("first"),
            assistant("ok"),
            user("second"),
            assistant("x"),
        ]);
        assert_eq!(extract_latest_user_ask(&msgs).as_deref(), Some("second"));
        assert_eq!(extract_latest_user_ask(&shared(vec![assistant("x")])), None);
    }
}
