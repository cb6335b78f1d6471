//! Tool-call id sanitising: rewrites ids that a provider's id grammar rejects.
//!
//! Why: transcripts move between providers (an OpenAI `call_…` id replayed to Gemini, an
//! imported Claude Code session sent to Mistral), and some providers refuse ids outside their
//! grammar with a 400 that no retry fixes. Google and Anthropic routes get [`ToolIdMode::Strict`]
//! (letters and digits only); Mistral needs [`ToolIdMode::Strict9`] (exactly nine letters and
//! digits).
//!
//! The rewrite is request-only like every hygiene pass: the session keeps the original ids. One
//! mapping covers the whole list, so a call and its result always get the same new id, and the
//! mapping is injective (two different ids never collapse into one), so pairing stays exactly as
//! it was. Ids already valid are kept, which makes the pass idempotent.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::builder::ListBuilder;
use super::report::PassReport;
use rampart_message::MessageList;
use rampart_message::{AgentMessage, ContentBlock};

/// The id grammar a provider accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ToolIdMode {
    /// `[A-Za-z0-9]+`: other characters are removed.
    Strict,
    /// Exactly nine characters of `[A-Za-z0-9]` (Mistral). Other ids are replaced by a
    /// nine-character digest of the original.
    Strict9,
}

/// The id given to a call whose id has no usable character left after filtering.
pub const SANITIZED_TOOL_ID: &str = "sanitizedtoolid";
/// The id given to a call or result that has no id at all.
pub const DEFAULT_TOOL_ID: &str = "defaulttoolid";

/// What [`sanitize_tool_call_ids`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ToolIdReport {
    /// Distinct ids that were rewritten.
    pub ids_rewritten: usize,
    /// Messages (assistant calls and tool results) that carry a rewritten id.
    pub messages_changed: usize,
}

impl PassReport for ToolIdReport {
    fn changed(&self) -> bool {
        self.ids_rewritten > 0
    }

    fn absorb(&mut self, other: Self) {
        self.ids_rewritten += other.ids_rewritten;
        self.messages_changed += other.messages_changed;
    }
}

fn is_valid(id: &str, mode: ToolIdMode) -> bool {
    let alnum = !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric());
    match mode {
        ToolIdMode::Strict => alnum,
        ToolIdMode::Strict9 => alnum && id.len() == 9,
    }
}

const ALPHANUMERIC: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Nine alphanumeric characters derived from `original` and `salt`: deterministic, so the same
/// transcript always gets the same ids (the provider's prompt cache keeps working).
fn digest9(original: &str, salt: u32) -> String {
    let mut hasher = Sha256::new();
    hasher.update(original.as_bytes());
    hasher.update(salt.to_le_bytes());
    hasher
        .finalize()
        .iter()
        .take(9)
        .map(|b| ALPHANUMERIC[usize::from(*b) % ALPHANUMERIC.len()] as char)
        .collect()
}

/// The first candidate for `original` under `mode`, before collision handling.
fn candidate(original: &str, mode: ToolIdMode) -> String {
    if original.is_empty() {
        return match mode {
            ToolIdMode::Strict => DEFAULT_TOOL_ID.to_string(),
            ToolIdMode::Strict9 => digest9(DEFAULT_TOOL_ID, 0),
        };
    }
    match mode {
        ToolIdMode::Strict => {
            let kept: String = original
                .chars()
                .filter(char::is_ascii_alphanumeric)
                .collect();
            if kept.is_empty() {
                SANITIZED_TOOL_ID.to_string()
            } else {
                kept
            }
        }
        ToolIdMode::Strict9 => digest9(original, 0),
    }
}

/// Builds the old → new mapping for every id in `list` that `mode` rejects. Valid ids are
/// reserved first, so a rewritten id can never take the name of one that stays.
fn plan(list: &MessageList, mode: ToolIdMode) -> HashMap<String, String> {
    let mut all: Vec<&str> = Vec::new();
    for message in list.iter() {
        match message.as_ref() {
            AgentMessage::Assistant(a) => {
                for block in &a.content {
                    if let ContentBlock::ToolCall(c) = block {
                        all.push(&c.id);
                    }
                }
            }
            AgentMessage::ToolResult(r) => all.push(&r.tool_call_id),
            _ => {}
        }
    }
    let mut taken: HashSet<String> = all
        .iter()
        .filter(|id| is_valid(id, mode))
        .map(|id| id.to_string())
        .collect();
    let mut mapping = HashMap::new();
    for id in all {
        if is_valid(id, mode) || mapping.contains_key(id) {
            continue;
        }
        let mut new = candidate(id, mode);
        let mut salt = 0u32;
        while taken.contains(&new) {
            salt += 1;
            new = match mode {
                ToolIdMode::Strict => format!("{}{}", candidate(id, mode), salt + 1),
                ToolIdMode::Strict9 => digest9(id, salt),
            };
        }
        taken.insert(new.clone());
        mapping.insert(id.to_string(), new);
    }
    mapping
}

/// Rewrites tool-call ids (in assistant calls and in tool results alike) that `mode` rejects.
///
/// Returns the input list itself when every id is already valid.
pub fn sanitize_tool_call_ids(list: &MessageList, mode: ToolIdMode) -> (MessageList, ToolIdReport) {
    let mapping = plan(list, mode);
    if mapping.is_empty() {
        return (list.clone(), ToolIdReport::default());
    }
    let mut report = ToolIdReport {
        ids_rewritten: mapping.len(),
        messages_changed: 0,
    };
    let mut out = ListBuilder::new(list);
    for (index, message) in list.iter().enumerate() {
        match message.as_ref() {
            AgentMessage::Assistant(a)
                if a.content.iter().any(
                    |b| matches!(b, ContentBlock::ToolCall(c) if mapping.contains_key(&c.id)),
                ) =>
            {
                let mut new = a.clone();
                for block in &mut new.content {
                    if let ContentBlock::ToolCall(c) = block
                        && let Some(id) = mapping.get(&c.id)
                    {
                        c.id = id.clone();
                    }
                }
                report.messages_changed += 1;
                out.push(Arc::new(AgentMessage::Assistant(new)));
            }
            AgentMessage::ToolResult(r) if mapping.contains_key(&r.tool_call_id) => {
                let mut new = r.clone();
                if let Some(id) = mapping.get(&r.tool_call_id) {
                    new.tool_call_id = id.clone();
                }
                report.messages_changed += 1;
                out.push(Arc::new(AgentMessage::ToolResult(new)));
            }
            _ => out.keep(index),
        }
    }
    (out.finish(), report)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::hygiene::test_support::*;

    fn call_ids(list: &MessageList) -> Vec<String> {
        list.iter()
            .flat_map(|m| match m.as_ref() {
                AgentMessage::Assistant(a) => a
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::ToolCall(c) => Some(c.id.clone()),
                        _ => None,
                    })
                    .collect(),
                _ => Vec::new(),
            })
            .collect()
    }

    #[test]
    fn strict_keeps_letters_and_digits_and_renames_results_alike() {
        let input = list(vec![
            user("go"),
            calls(&[("call_ab-12", "read"), ("toolu_01|x", "read")], "toolUse"),
            result("call_ab-12", "read"),
            result("toolu_01|x", "read"),
        ]);
        let (out, report) = sanitize_tool_call_ids(&input, ToolIdMode::Strict);
        assert_eq!(call_ids(&out), ["callab12", "toolu01x"]);
        assert_eq!(result_ids(&out), ["callab12", "toolu01x"]);
        assert_eq!(report.ids_rewritten, 2);
        assert_eq!(report.messages_changed, 3);
        // The user message is shared, not copied.
        assert!(Arc::ptr_eq(&out[0], &input[0]));
    }

    #[test]
    fn strict_uses_the_fallback_names_and_never_merges_two_ids() {
        let input = list(vec![
            calls(
                &[("___", "a"), ("", "b"), ("a-1", "c"), ("a_1", "d")],
                "toolUse",
            ),
            result("___", "a"),
            result("", "b"),
            result("a-1", "c"),
            result("a_1", "d"),
        ]);
        let (out, _) = sanitize_tool_call_ids(&input, ToolIdMode::Strict);
        let ids = call_ids(&out);
        assert_eq!(ids[0], SANITIZED_TOOL_ID);
        assert_eq!(ids[1], DEFAULT_TOOL_ID);
        assert_eq!(ids[2], "a1");
        assert_eq!(ids[3], "a12");
        assert_eq!(
            result_ids(&out),
            ids.iter().map(String::as_str).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_renamed_id_never_takes_the_name_of_a_valid_one() {
        let input = list(vec![
            calls(&[("a_b", "x"), ("ab", "y")], "toolUse"),
            result("a_b", "x"),
            result("ab", "y"),
        ]);
        let (out, _) = sanitize_tool_call_ids(&input, ToolIdMode::Strict);
        let ids = call_ids(&out);
        assert_eq!(ids[1], "ab");
        assert_ne!(ids[0], "ab");
        assert!(is_valid(&ids[0], ToolIdMode::Strict));
    }

    #[test]
    fn strict9_gives_nine_alphanumerics_and_keeps_valid_ones() {
        let input = list(vec![
            calls(
                &[("call_0123456789", "x"), ("abcDEF123", "y"), ("s", "z")],
                "toolUse",
            ),
            result("call_0123456789", "x"),
            result("abcDEF123", "y"),
            result("s", "z"),
        ]);
        let (out, report) = sanitize_tool_call_ids(&input, ToolIdMode::Strict9);
        let ids = call_ids(&out);
        assert!(
            ids.iter().all(|id| is_valid(id, ToolIdMode::Strict9)),
            "{ids:?}"
        );
        assert_eq!(ids[1], "abcDEF123");
        assert_eq!(report.ids_rewritten, 2);
        assert_eq!(
            result_ids(&out),
            ids.iter().map(String::as_str).collect::<Vec<_>>()
        );
        // Deterministic: the same transcript gets the same ids every turn.
        let (again, _) = sanitize_tool_call_ids(&input, ToolIdMode::Strict9);
        assert_eq!(call_ids(&again), ids);
    }

    #[test]
    fn valid_ids_return_the_same_list_and_a_second_run_changes_nothing() {
        let input = list(vec![
            calls(&[("call_1", "x")], "toolUse"),
            result("call_1", "x"),
        ]);
        for mode in [ToolIdMode::Strict, ToolIdMode::Strict9] {
            let (once, report) = sanitize_tool_call_ids(&input, mode);
            assert!(report.changed());
            let (twice, again) = sanitize_tool_call_ids(&once, mode);
            assert!(!again.changed());
            assert!(MessageList::same_list(&once, &twice));
        }
    }
}
