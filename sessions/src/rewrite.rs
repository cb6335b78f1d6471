//! Transcript rewrites (`session.rewrite`): replace messages by branching, never in place.
//!
//! Truncation passes and engines shrink a session by replacing messages (a 5 MB tool result
//! by a capped one). The file only grows, so a rewrite is a new branch:
//!
//! 1. Replacements are matched only against `message` entries on the **active branch**.
//! 2. The new branch starts at the parent of the first matched entry (a new root if it has
//!    none).
//! 3. Every branch entry from the first match on is re-appended with a fresh id, the matched
//!    messages substituted. References to re-appended entries are remapped through the old →
//!    new id map: a compaction's `firstKeptEntryId`, a branch summary's `fromId`, a label's
//!    `targetId`. (A branch summary's `parentId` is the entry before it on the branch, so the
//!    linear re-append already points it at the remapped parent.) Entry-level fields this
//!    crate does not know are carried over unchanged.
//! 4. The leaf moves to the last re-appended entry. The old entries stay in the file as an
//!    abandoned branch; nothing is deleted.
//!
//! The result counts rewritten messages and `bytesFreed`, the sum over replaced messages of
//! how many fewer bytes of JSON the new message takes (never negative).
#![warn(missing_docs)]

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use rampart_message::AgentMessage;
use rampart_message::SharedMessage;
use rampart_message::TranscriptRewriteResult;

use crate::entry::{Entry, EntryBody, MessageEntry};
use crate::stamps::Stamps;
use crate::tree::SessionTree;

/// Why a rewrite changed nothing: no replacements were given.
pub const REASON_NO_REPLACEMENTS: &str = "no replacements requested";
/// Why a rewrite changed nothing: the active branch is empty.
pub const REASON_EMPTY_SESSION: &str = "empty session";
/// Why a rewrite changed nothing: no replacement named a message entry on the active branch.
pub const REASON_NO_MATCH: &str = "no matching message entries";

/// The entries a rewrite will append, in order, with the result to report once they are
/// written.
#[derive(Debug, Clone, PartialEq)]
pub struct RewritePlan {
    /// The new branch, first entry attached to the parent of the first matched entry.
    pub entries: Vec<Entry>,
    /// The result to report once the entries are written.
    pub result: TranscriptRewriteResult,
}

/// Plans a rewrite of `tree`'s active branch, its new entries stamped by `stamps`. `Err`
/// carries the "nothing changed" result with its reason.
///
/// Replacements are shared messages (what engines return), and the planned entries keep
/// them, and the unchanged messages they re-append, as the same allocations: a rewrite copies
/// no message, and engines see the untouched ones as unchanged.
pub fn plan_rewrite(
    tree: &SessionTree,
    replacements: &[(String, SharedMessage)],
    stamps: &Stamps,
) -> Result<RewritePlan, TranscriptRewriteResult> {
    let unchanged = |reason: &str| TranscriptRewriteResult {
        changed: false,
        bytes_freed: 0,
        rewritten_entries: 0,
        reason: Some(reason.to_owned()),
    };
    if replacements.is_empty() {
        return Err(unchanged(REASON_NO_REPLACEMENTS));
    }
    let Some(leaf) = tree.leaf_index() else {
        return Err(unchanged(REASON_EMPTY_SESSION));
    };
    let path = tree.path_to(leaf);
    if path.is_empty() {
        return Err(unchanged(REASON_EMPTY_SESSION));
    }
    // Later replacements for the same id win, like assignments would.
    let wanted: HashMap<&str, &SharedMessage> = replacements
        .iter()
        .map(|(id, message)| (id.as_str(), message))
        .collect();
    let entries = tree.entries();
    let is_match = |index: usize| {
        matches!(entries[index].body, EntryBody::Message(_))
            && wanted.contains_key(entries[index].id.as_str())
    };
    let Some(first) = path.iter().position(|&index| is_match(index)) else {
        return Err(unchanged(REASON_NO_MATCH));
    };

    let mut planned_ids: HashSet<String> = HashSet::new();
    let mut remap: HashMap<&str, String> = HashMap::new();
    let mut parent = tree
        .parent_index(path[first])
        .map(|index| entries[index].id.clone());
    let mut out = Vec::with_capacity(path.len() - first);
    let mut bytes_freed = 0u64;
    let mut rewritten = 0u64;
    for &index in &path[first..] {
        let old = &entries[index];
        let body = match &old.body {
            EntryBody::Message(m) => match wanted.get(old.id.as_str()) {
                Some(&replacement) => {
                    bytes_freed += json_len(&m.message).saturating_sub(json_len(replacement));
                    rewritten += 1;
                    EntryBody::Message(MessageEntry {
                        message: Arc::clone(replacement),
                        extra: m.extra.clone(),
                        as_read: None,
                    })
                }
                None => old.body.clone(),
            },
            EntryBody::Compaction(c) => {
                let mut c = c.clone();
                if let Some(new) = remap.get(c.first_kept_entry_id.as_str()) {
                    c.first_kept_entry_id.clone_from(new);
                }
                EntryBody::Compaction(c)
            }
            EntryBody::BranchSummary(b) => {
                let mut b = b.clone();
                if let Some(new) = remap.get(b.from_id.as_str()) {
                    b.from_id.clone_from(new);
                }
                EntryBody::BranchSummary(b)
            }
            EntryBody::Label(l) => {
                let mut l = l.clone();
                if let Some(new) = remap.get(l.target_id.as_str()) {
                    l.target_id.clone_from(new);
                }
                EntryBody::Label(l)
            }
            other => other.clone(),
        };
        let id = stamps
            .entry_id(|candidate| tree.contains_id(candidate) || planned_ids.contains(candidate));
        planned_ids.insert(id.clone());
        remap.insert(old.id.as_str(), id.clone());
        out.push(Entry::stamped(
            id.clone(),
            parent.replace(id),
            body,
            stamps.timestamp(),
        ));
    }
    Ok(RewritePlan {
        entries: out,
        result: TranscriptRewriteResult {
            changed: rewritten > 0,
            bytes_freed,
            rewritten_entries: rewritten,
            reason: None,
        },
    })
}

/// Applies a rewrite to a tree in memory (for tests and tools without a file; `Session`
/// writes the planned entries first).
pub fn rewrite_in_memory(
    tree: &mut SessionTree,
    replacements: &[(String, AgentMessage)],
) -> TranscriptRewriteResult {
    match plan_rewrite(tree, &share(replacements), &Stamps::Live) {
        Ok(plan) => {
            for entry in plan.entries {
                tree.attach(entry);
            }
            plan.result
        }
        Err(unchanged) => unchanged,
    }
}

/// Owned replacements as shared ones (one copy each, which the entries then keep).
pub(crate) fn share(replacements: &[(String, AgentMessage)]) -> Vec<(String, SharedMessage)> {
    replacements
        .iter()
        .map(|(id, message)| (id.clone(), Arc::new(message.clone())))
        .collect()
}

fn json_len(message: &AgentMessage) -> u64 {
    // Serialising a message model value cannot fail (string keys, finite numbers); count 0
    // if it ever did rather than invent a size.
    serde_json::to_vec(message).map_or(0, |bytes| bytes.len() as u64)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::context::{LeafSelector, build_session_context};
    use crate::entry::{CompactionEntry, Extra, LabelEntry};

    fn user(text: &str) -> EntryBody {
        EntryBody::from_message(AgentMessage::user_text(text, 1))
    }

    #[test]
    fn reasons() {
        let mut tree = SessionTree::new();
        let none = rewrite_in_memory(&mut tree, &[]);
        assert_eq!(none.reason.as_deref(), Some(REASON_NO_REPLACEMENTS));
        let empty = rewrite_in_memory(&mut tree, &[("x".into(), AgentMessage::user_text("", 0))]);
        assert_eq!(empty.reason.as_deref(), Some(REASON_EMPTY_SESSION));
        let id = tree.append(user("a")).id.clone();
        tree.append(EntryBody::Label(LabelEntry {
            target_id: id.clone(),
            label: Some("l".into()),
            extra: Extra::new(),
        }));
        let label_id = tree.leaf_id().unwrap().to_owned();
        let no_match = rewrite_in_memory(
            &mut tree,
            &[
                ("nope".into(), AgentMessage::user_text("", 0)),
                // Only message entries match.
                (label_id, AgentMessage::user_text("", 0)),
            ],
        );
        assert_eq!(no_match.reason.as_deref(), Some(REASON_NO_MATCH));
        assert!(!no_match.changed);
    }

    #[test]
    fn rewrite_branches_and_remaps() {
        let mut tree = SessionTree::new();
        let u1 = tree.append(user("u1")).id.clone();
        let big = tree.append(user(&"x".repeat(1000))).id.clone();
        let u3 = tree.append(user("u3")).id.clone();
        tree.append(EntryBody::Compaction(CompactionEntry {
            summary: "s".into(),
            first_kept_entry_id: big.clone(),
            tokens_before: 10,
            details: None,
            from_hook: None,
            extra: Extra::new(),
        }));
        tree.append(EntryBody::Label(LabelEntry {
            target_id: u3.clone(),
            label: Some("here".into()),
            extra: Extra::new(),
        }));
        let before = tree.len();
        let result = rewrite_in_memory(
            &mut tree,
            &[(big.clone(), AgentMessage::user_text("small", 1))],
        );
        assert!(result.changed);
        assert_eq!(result.rewritten_entries, 1);
        assert!(result.bytes_freed > 900);
        // Four entries re-appended (big, u3, compaction, label); originals remain.
        assert_eq!(tree.len(), before + 4);
        assert!(tree.get(&big).is_some());
        let branch = tree.active_branch();
        assert_eq!(branch.len(), 5);
        assert_eq!(branch[0].id, u1);
        assert_ne!(branch[1].id, big);
        assert_eq!(branch[1].parent_id.as_deref(), Some(u1.as_str()));
        let EntryBody::Compaction(c) = &branch[3].body else {
            panic!()
        };
        assert_eq!(c.first_kept_entry_id, branch[1].id);
        let EntryBody::Label(l) = &branch[4].body else {
            panic!()
        };
        assert_eq!(l.target_id, branch[2].id);
        let ctx = build_session_context(&tree, LeafSelector::Current);
        assert_eq!(ctx.messages.len(), 3);
        // The old branch is still intact.
        let old = build_session_context(&tree, LeafSelector::Id(&u3));
        assert_eq!(old.messages.len(), 3);
        // Messages the rewrite did not replace (u3) are re-appended as the same allocations;
        // ctx is [summary, small, u3], old is [u1, big, u3].
        assert!(Arc::ptr_eq(&ctx.messages[2], &old.messages[2]));
        assert!(!Arc::ptr_eq(&ctx.messages[1], &old.messages[1]));
    }

    #[test]
    fn shared_replacements_are_kept_as_given() {
        let mut tree = SessionTree::new();
        let a = tree.append(user("a")).id.clone();
        let replacement: SharedMessage = Arc::new(AgentMessage::user_text("A", 1));
        let plan = plan_rewrite(&tree, &[(a, Arc::clone(&replacement))], &Stamps::Live).unwrap();
        assert!(Arc::ptr_eq(
            plan.entries[0].body.shared_message().unwrap(),
            &replacement
        ));
    }

    #[test]
    fn rewriting_the_root_starts_a_new_root() {
        let mut tree = SessionTree::new();
        let root = tree.append(user("a")).id.clone();
        tree.append(user("b"));
        let result = rewrite_in_memory(&mut tree, &[(root, AgentMessage::user_text("A", 1))]);
        assert!(result.changed);
        assert_eq!(tree.active_branch()[0].parent_id, None);
        assert_eq!(tree.active_branch().len(), 2);
    }
}
