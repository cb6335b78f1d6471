//! Retention, without a model: facts mined from a transcript, and whether the last request of
//! its replay could still see them.
//!
//! A fact is a token a later answer may need verbatim: a path, a URL, a UUID, a hash (seven or
//! more hex digits with a digit and a letter among them), or a number of four or more digits
//! (ports, line numbers, sizes). They are mined from what the user and the tools said (not
//! from the assistant, which only repeats them). A fact is retained when the final request
//! holds it, in any message or the system prompt, or when a blob the request names (a capped
//! tool result's original) holds it: the agent can read it back. Decisions stated in prose are
//! not mined: telling them apart without a model is guesswork.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use regex::Regex;

use rampart_engine_api::AgentMessage;

use crate::blobs::BlobStore;
use crate::providers::text::{as_user_text, content_text};

/// How many facts a transcript may contribute (the most recent win): a long session mentions
/// thousands of numbers, and the last ones are the ones an answer at the end needs.
pub const MAX_FACTS: usize = 500;

fn patterns() -> &'static [Regex] {
    static PATTERNS: OnceLock<Vec<Regex>> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        [
            r"https?://[^\s\x22'<>)\]]+",
            r"(?:~|\.{1,2})?/[A-Za-z0-9_.\-]+(?:/[A-Za-z0-9_.\-]+)+",
            r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",
            r"\b(?:[0-9a-f]*[0-9][0-9a-f]*[a-f][0-9a-f]*|[0-9a-f]*[a-f][0-9a-f]*[0-9][0-9a-f]*)\b",
            r"\b[0-9]{4,}\b",
        ]
        .iter()
        .filter_map(|p| Regex::new(p).ok())
        .collect()
    })
}

/// The facts of `messages` (see the module docs), most recent last, at most [`MAX_FACTS`].
pub fn mine<'a>(messages: impl IntoIterator<Item = &'a AgentMessage>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    let mut facts = Vec::new();
    for message in messages {
        let text = match message {
            AgentMessage::User(m) => content_text(&m.content),
            AgentMessage::ToolResult(m) => content_text(&m.content),
            AgentMessage::Assistant(_) => continue,
            other => as_user_text(other).unwrap_or_default(),
        };
        // Each pattern blanks what it matched, so the next one does not mine the parts of a
        // fact again (the path inside a URL, the groups of a UUID).
        let mut rest = text;
        for pattern in patterns() {
            let mut ranges = Vec::new();
            for found in pattern.find_iter(&rest) {
                ranges.push(found.range());
                let fact = found.as_str().trim_end_matches(['.', ',', ':', ';']);
                let short_hash = fact.len() < 7
                    && fact.chars().all(|c| c.is_ascii_hexdigit())
                    && fact.chars().any(|c| c.is_ascii_alphabetic());
                if short_hash {
                    continue;
                }
                if seen.insert(fact.to_string()) {
                    facts.push(fact.to_string());
                }
            }
            for range in ranges {
                rest.replace_range(range.clone(), &" ".repeat(range.len()));
            }
        }
    }
    let skip = facts.len().saturating_sub(MAX_FACTS);
    facts.split_off(skip)
}

/// The share of `facts` that `request` (the final request's text: system prompt and messages
/// as JSON) holds, or that a blob it names holds. `None` when there are no facts.
pub fn retained(facts: &[String], request: &str, blobs: Option<&BlobStore>) -> Option<f64> {
    retained_of(facts, &kept(facts, request, blobs))
}

/// [`retained`] from `kept` (see [`kept`]), so a caller that needs it for several figures reads
/// the request and its blobs once.
pub fn retained_of(facts: &[String], kept: &[bool]) -> Option<f64> {
    share(facts, kept.iter().filter(|k| **k).count())
}

/// The share of `facts` that `request` lost (see [`retained`]) and `notes` (the memory notes
/// the flushes wrote) hold: what a `memory_search` can bring back after compaction. `None`
/// when there are no facts.
pub fn recovered(
    facts: &[String],
    request: &str,
    blobs: Option<&BlobStore>,
    notes: &str,
) -> Option<f64> {
    recovered_of(facts, &kept(facts, request, blobs), notes)
}

/// [`recovered`] from `kept` (see [`retained_of`]).
pub fn recovered_of(facts: &[String], kept: &[bool], notes: &str) -> Option<f64> {
    let found = facts
        .iter()
        .zip(kept)
        .filter(|(fact, kept)| !**kept && notes.contains(fact.as_str()))
        .count();
    share(facts, found)
}

fn share(facts: &[String], count: usize) -> Option<f64> {
    (!facts.is_empty()).then(|| count as f64 / facts.len() as f64)
}

/// Whether each fact is in `request` or in a blob it names (each blob read once).
pub fn kept(facts: &[String], request: &str, blobs: Option<&BlobStore>) -> Vec<bool> {
    if facts.is_empty() {
        return Vec::new();
    }
    let named: Vec<String> = blobs
        .map(|store| {
            blob_refs(request)
                .filter_map(|r| store.get(&r).ok())
                .map(|blob| String::from_utf8_lossy(&blob).into_owned())
                .collect()
        })
        .unwrap_or_default();
    facts
        .iter()
        .map(|fact| {
            request.contains(fact.as_str()) || named.iter().any(|blob| blob.contains(fact.as_str()))
        })
        .collect()
}

/// `request` without the links to capped results' originals
/// ([`rampart_message::ORIGINAL_BLOB_KEY`]): they never reach the model, so a blob counts as
/// one the request names only when the text the model reads (the cap's notice) names it.
pub fn as_sent(mut request: crate::run::RequestRecord) -> crate::run::RequestRecord {
    let mut messages = request.messages.to_vec();
    for message in &mut messages {
        if let AgentMessage::ToolResult(r) = &**message
            && r.extra.contains_key(rampart_message::ORIGINAL_BLOB_KEY)
        {
            let mut plain = (**message).clone();
            if let AgentMessage::ToolResult(r) = &mut plain {
                r.extra.remove(rampart_message::ORIGINAL_BLOB_KEY);
            }
            *message = std::sync::Arc::new(plain);
        }
    }
    request.messages = messages.into();
    request
}

/// The `sha256:<hex>` blob references in `text`.
fn blob_refs(text: &str) -> impl Iterator<Item = String> + '_ {
    static BLOB: OnceLock<Option<Regex>> = OnceLock::new();
    BLOB.get_or_init(|| Regex::new(r"sha256:[0-9a-f]{64}").ok())
        .iter()
        .flat_map(move |re| re.find_iter(text).map(|m| m.as_str().to_string()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// A capped result's link to its original never reaches the model: a blob counts as named
    /// by the request only through the notice the model reads.
    #[test]
    fn the_link_to_an_original_does_not_count_as_the_model_seeing_it() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = BlobStore::in_sessions_dir(dir.path());
        let reference = blobs.put(b"the port is 48213").unwrap();
        let mut result = AgentMessage::tool_result("c", "exec", "[... cut]", false, 1);
        if let AgentMessage::ToolResult(r) = &mut result {
            r.extra.insert(
                rampart_message::ORIGINAL_BLOB_KEY.into(),
                serde_json::Value::String(reference.clone()),
            );
        }
        let request = |m: AgentMessage| crate::run::RequestRecord {
            turn: 1,
            attempt: 1,
            model: crate::config::ModelName::new("sim", "m"),
            window: 1_000,
            prompt_tokens: 1,
            system: None,
            messages: vec![std::sync::Arc::new(m)].into(),
            wire: None,
        };
        let facts = vec!["48213".to_string()];
        let raw = serde_json::to_string(&request(result.clone())).unwrap();
        assert!(raw.contains(&reference), "the record does carry the link");
        let sent = serde_json::to_string(&as_sent(request(result))).unwrap();
        assert_eq!(kept(&facts, &sent, Some(&blobs)), [false]);
        let named = AgentMessage::tool_result(
            "c",
            "exec",
            format!("[... cut; full output: {reference}]"),
            false,
            1,
        );
        let sent = serde_json::to_string(&as_sent(request(named))).unwrap();
        assert_eq!(kept(&facts, &sent, Some(&blobs)), [true]);
    }

    #[test]
    fn every_pattern_compiles() {
        assert_eq!(patterns().len(), 5);
    }

    #[test]
    fn planted_facts_are_mined_and_found_only_where_they_are() {
        let user = AgentMessage::user_text(
            "Deploy to https://deploy.example.org/v2 from /srv/app/config.toml on port 8443; \
             the build is 3f9a2c1d and the run 123e4567-e89b-12d3-a456-426614174000.",
            1,
        );
        let answer = AgentMessage::assistant_text("see /not/a/fact.txt", "x", "x", "m", 2);
        let tool = AgentMessage::tool_result(
            "c",
            "read",
            "error at line 20931 in /var/log/app.log",
            false,
            3,
        );
        let facts = mine([&user, &answer, &tool]);
        for planted in [
            "https://deploy.example.org/v2",
            "/srv/app/config.toml",
            "8443",
            "3f9a2c1d",
            "123e4567-e89b-12d3-a456-426614174000",
            "20931",
            "/var/log/app.log",
        ] {
            assert!(
                facts.iter().any(|f| f == planted),
                "{planted} not in {facts:?}"
            );
        }
        assert!(
            !facts.iter().any(|f| f.contains("not/a/fact")),
            "assistants do not count"
        );
        let request = "… /srv/app/config.toml … 8443 …";
        let share = retained(&facts, request, None).unwrap();
        assert!((share - 2.0 / facts.len() as f64).abs() < 1e-9, "{share}");
        assert_eq!(retained(&[], request, None), None);
    }

    #[test]
    fn a_fact_in_a_blob_the_request_names_is_retained() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::in_sessions_dir(dir.path());
        let reference = store
            .put(b"the original output: token 77881 and more")
            .unwrap();
        let facts = vec!["77881".to_string()];
        assert_eq!(
            retained(&facts, "capped; the original is in blob x", Some(&store)),
            Some(0.0)
        );
        let request = format!("capped; the original is {reference}");
        assert_eq!(retained(&facts, &request, Some(&store)), Some(1.0));
    }
}
