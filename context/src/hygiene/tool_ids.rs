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
    /// `[A-Za-z0-9_-]{1,64}`, Anthropic's `tool_use.id` grammar: its own `toolu_…` ids and
    /// OpenAI's `call_…` pass untouched (`Strict` rewrote them, 1,555 turns of the shared
    /// samples). An id outside it becomes its valid characters (others as `_`, cut to 54)
    /// plus `_` and a nine-character digest of the whole original: made from the id alone, so
    /// it is the same on every call and the provider's prompt cache holds.
    Anthropic,
}

/// The longest id [`ToolIdMode::Anthropic`] accepts.
const ANTHROPIC_MAX_ID: usize = 64;

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
        ToolIdMode::Anthropic => {
            (1..=ANTHROPIC_MAX_ID).contains(&id.len())
                && id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        }
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
            ToolIdMode::Strict | ToolIdMode::Anthropic => DEFAULT_TOOL_ID.to_string(),
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
        ToolIdMode::Anthropic => anthropic_id(original, 0),
    }
}

/// The [`ToolIdMode::Anthropic`] rewrite of `original` (see there); `salt` only on a collision.
fn anthropic_id(original: &str, salt: u32) -> String {
    let kept: String = original
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(ANTHROPIC_MAX_ID - 10)
        .collect();
    format!("{kept}_{}", digest9(original, salt))
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
                ToolIdMode::Anthropic => anthropic_id(id, salt),
            };
        }
        taken.insert(new.clone());
        mapping.insert(id.to_string(), new);
    }
    mapping
}

/// Rewrites tool-call ids (in assistant calls and in tool results alike) that `mode` rejects.
/// Under [`ToolIdMode::Anthropic`], an id an earlier assistant turn already used is renamed in
/// its later turn and that turn's results first: Anthropic refuses a request in which two
/// `tool_use` blocks share an id, and some models (Kimi's `functions.read:0`) number their calls
/// per turn. Each pair is kept, with its own id.
///
/// Returns the input list itself when every id is already valid.
pub fn sanitize_tool_call_ids(list: &MessageList, mode: ToolIdMode) -> (MessageList, ToolIdReport) {
    if mode == ToolIdMode::Anthropic {
        let (unique, renamed) = rename_reused_ids(list);
        if renamed > 0 {
            let (out, mut report) = rewrite_invalid(&unique, mode);
            report.ids_rewritten += renamed;
            report.messages_changed = changed_messages(list, &out);
            return (out, report);
        }
    }
    rewrite_invalid(list, mode)
}

/// How many messages of `after` are not the allocation of the same position in `before`.
fn changed_messages(before: &MessageList, after: &MessageList) -> usize {
    before
        .iter()
        .zip(after.iter())
        .filter(|(a, b)| !Arc::ptr_eq(a, b))
        .count()
}

/// Renames, in each assistant turn, the call ids an earlier turn of `list` already used (and
/// the ids of the results after it, up to the next assistant turn). The new id is the old one
/// with `#` and the number of earlier turns that used it, which [`rewrite_invalid`] then turns
/// into a valid id. Returns the list and the number of calls renamed.
fn rename_reused_ids(list: &MessageList) -> (MessageList, usize) {
    let mut used: HashMap<String, usize> = HashMap::new();
    let mut renamed = 0;
    let mut out = ListBuilder::new(list);
    let mut current: HashMap<String, String> = HashMap::new();
    for (index, message) in list.iter().enumerate() {
        match message.as_ref() {
            AgentMessage::Assistant(a) => {
                current.clear();
                // Ids this turn shares with earlier turns; a repeat within the turn is the
                // pairing repair's to judge, not a reuse.
                let ids: HashSet<&str> = message.tool_calls().map(|c| c.id.as_str()).collect();
                for id in ids {
                    let seen = used.entry(id.to_string()).or_insert(0);
                    if *seen > 0 {
                        current.insert(id.to_string(), format!("{id}#{}", *seen));
                    }
                    *seen += 1;
                }
                if current.is_empty() {
                    out.keep(index);
                    continue;
                }
                let mut new = a.clone();
                for block in &mut new.content {
                    if let ContentBlock::ToolCall(c) = block
                        && let Some(id) = current.get(&c.id)
                    {
                        c.id = id.clone();
                        renamed += 1;
                    }
                }
                out.push(Arc::new(AgentMessage::Assistant(new)));
            }
            AgentMessage::ToolResult(r) if current.contains_key(&r.tool_call_id) => {
                let mut new = r.clone();
                if let Some(id) = current.get(&r.tool_call_id) {
                    new.tool_call_id = id.clone();
                }
                out.push(Arc::new(AgentMessage::ToolResult(new)));
            }
            _ => out.keep(index),
        }
    }
    (out.finish(), renamed)
}

/// The id rewrite proper: every id `mode` rejects, through one injective mapping.
fn rewrite_invalid(list: &MessageList, mode: ToolIdMode) -> (MessageList, ToolIdReport) {
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
    fn anthropic_keeps_native_ids_and_rewrites_others_the_same_on_every_call() {
        let long = "x".repeat(80);
        let input = list(vec![
            user("go"),
            calls(
                &[
                    ("toolu_012yAbC-9", "read"),
                    ("call_ab-12", "read"),
                    ("functions.read:0", "read"),
                    ("call_1|fc_2", "read"),
                    (long.as_str(), "read"),
                ],
                "toolUse",
            ),
            result("toolu_012yAbC-9", "read"),
            result("call_ab-12", "read"),
            result("functions.read:0", "read"),
            result("call_1|fc_2", "read"),
            result(&long, "read"),
        ]);
        let (out, report) = sanitize_tool_call_ids(&input, ToolIdMode::Anthropic);
        let ids = call_ids(&out);
        assert_eq!(
            &ids[..2],
            ["toolu_012yAbC-9", "call_ab-12"],
            "native ids pass"
        );
        assert_eq!(report.ids_rewritten, 3);
        assert!(ids[2].starts_with("functions_read_0_"), "{}", ids[2]);
        assert!(ids[3].starts_with("call_1_fc_2_"), "{}", ids[3]);
        assert!(
            ids.iter().all(|id| is_valid(id, ToolIdMode::Anthropic)),
            "{ids:?}"
        );
        assert_eq!(
            result_ids(&out),
            ids.iter().map(String::as_str).collect::<Vec<_>>()
        );
        // The same id gets the same rewrite whatever else the list holds (a later call, an
        // earlier part compacted away): the prompt cache holds.
        let later = list(vec![
            calls(&[("call_1|fc_2", "read")], "toolUse"),
            result("call_1|fc_2", "read"),
        ]);
        let (again, _) = sanitize_tool_call_ids(&later, ToolIdMode::Anthropic);
        assert_eq!(call_ids(&again), [ids[3].clone()]);
    }

    #[test]
    fn anthropic_gives_a_reused_id_its_own_name_in_each_later_turn() {
        let input = list(vec![
            user("go"),
            calls(&[("functions.read:0", "read")], "toolUse"),
            result("functions.read:0", "read"),
            calls(&[("functions.read:0", "read")], "toolUse"),
            result("functions.read:0", "read"),
            calls(&[("toolu_A", "read")], "toolUse"),
            result("toolu_A", "read"),
        ]);
        let (out, report) = sanitize_tool_call_ids(&input, ToolIdMode::Anthropic);
        let ids = call_ids(&out);
        assert_eq!(ids.len(), 3);
        assert_ne!(ids[0], ids[1], "each pair keeps an id of its own");
        assert_eq!(ids[2], "toolu_A");
        assert_eq!(
            result_ids(&out),
            ids.iter().map(String::as_str).collect::<Vec<_>>()
        );
        assert!(
            ids.iter().all(|id| is_valid(id, ToolIdMode::Anthropic)),
            "{ids:?}"
        );
        assert_eq!(report.messages_changed, 4);
        assert!(
            Arc::ptr_eq(&out[5], &input[5]),
            "untouched turns are shared"
        );
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
