//! What the model sees: the messages of the active branch, with the last compaction applied
//! (pi's `buildSessionContext`).
//!
//! The rules, in pi's order:
//! 1. Pick the leaf: an explicit `null` leaf gives no messages; an unknown id (or none) means
//!    the last entry in the file.
//! 2. Walk parent links from the leaf to the root. A parent id that names nothing ends the walk.
//! 3. On that path, the last `thinking_level_change` gives the thinking level (default `off`);
//!    the last `model_change` or assistant message gives the model.
//! 4. Only the **last** compaction on the path counts. If there is one, the context is its
//!    summary (as a `compactionSummary` message), then the path entries from its
//!    `firstKeptEntryId` up to the compaction, then everything after it. Earlier compactions
//!    are ordinary (message-less) entries.
//! 5. Only `message`, `custom_message` (as a `custom` message) and `branch_summary` (as a
//!    `branchSummary` message, when its summary is not empty) produce messages.
//!
//! Every message is shared, never copied: a `message` entry's message is the `Arc` the tree
//! stores, and a synthesised one (summary, custom message) is made once per entry and kept by
//! the tree. Building a context therefore costs O(entries on the branch), not O(bytes of
//! history), and building it again for an unchanged tree returns the very same allocations,
//! which is what lets the engine ABI send only what changed between turns (see
//! `rampart_message::wire`).
#![warn(missing_docs)]

use std::sync::Arc;

use rampart_message::{
    AgentMessage, BranchSummaryMessage, CompactionSummaryMessage, CustomMessage, Extra,
};
use rampart_message::{MessageList, SharedMessage};

use crate::entry::{BranchSummaryEntry, CompactionEntry, CustomMessageEntry, Entry, EntryBody};
use crate::ids::iso_to_millis;
use crate::tree::SessionTree;

/// The thinking level when the branch never set one (pi's default).
pub const DEFAULT_THINKING_LEVEL: &str = "off";

/// Which leaf to build the context for, mirroring the three cases of pi's `leafId` argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeafSelector<'a> {
    /// The tree's current leaf (what a running session uses).
    Current,
    /// pi's `undefined`: the last entry in the file.
    Last,
    /// pi's `null`: nothing selected, so no messages.
    Null,
    /// A specific entry; an id that does not exist falls back to the last entry, as in pi.
    Id(&'a str),
}

/// The model a branch last used: from the last `model_change` or assistant message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelRef {
    /// The provider (`anthropic`, `ollama`, …).
    pub provider: String,
    /// The model id at that provider.
    pub model_id: String,
}

/// The model-facing view of one branch.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionContext {
    /// The messages, oldest first, shared with the tree: a stored message is the entry's own
    /// `Arc`, a synthesised one the `Arc` the tree keeps for its entry. So the context does not
    /// hold the history twice, and contexts built from an unchanged tree are pointer-equal
    /// message by message.
    pub messages: Vec<SharedMessage>,
    /// For each message, the index in the tree's entries of the entry it came from (the
    /// compaction entry for the summary). Indices, not ids, so building a context allocates no
    /// strings; `tree.entries()[i].id` is the entry id a compaction's `firstKeptEntryId`
    /// names.
    pub entry_indices: Vec<usize>,
    /// The branch's thinking level (`off` when never set).
    pub thinking_level: String,
    /// The branch's model, if it ever named one.
    pub model: Option<ModelRef>,
    /// The id of the compaction that was applied, if any; engines use it to know where the
    /// summary came from.
    pub compaction_id: Option<String>,
    /// The id of the leaf the context was built for (`None` for an empty context).
    pub leaf_id: Option<String>,
}

impl SessionContext {
    /// The messages as the list engines receive, keeping the context. Copies one handle per
    /// message (a reference count), never a message; prefer [`SessionContext::into_list`]
    /// when the context is not needed afterwards.
    pub fn message_list(&self) -> MessageList {
        self.messages.clone().into()
    }

    /// The messages as the list engines receive, without copying anything: the `Vec` becomes
    /// the list.
    pub fn into_list(self) -> MessageList {
        self.messages.into()
    }

    fn empty() -> Self {
        Self {
            messages: Vec::new(),
            entry_indices: Vec::new(),
            thinking_level: DEFAULT_THINKING_LEVEL.to_owned(),
            model: None,
            compaction_id: None,
            leaf_id: None,
        }
    }
}

/// The context of the current branch, kept between calls and extended when the branch only
/// grew ([`crate::Session::context`]).
///
/// Why: the run loop asks for the context before every model call, and the branch only grows
/// between calls. A build walks every entry of the branch and follows each to its message; an
/// extension copies the last context's list and adds the new entries' messages (BENCHMARKS.md,
/// issue 24 item 10). A branch switch, a compaction, a reload or another tree is a full build,
/// so the context is always what [`build_session_context`] gives.
#[derive(Debug, Default)]
pub(crate) struct ContextCache {
    last: std::sync::Mutex<Option<(crate::fold::BranchMark, SessionContext)>>,
}

impl ContextCache {
    /// The context of the current branch of `tree`.
    pub(crate) fn current(&self, tree: &SessionTree) -> SessionContext {
        let mut last = match self.last.lock() {
            Ok(last) => last,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some((mark, context)) = last.as_mut()
            && let Some(added) = mark.added_since(tree)
            && let Some(leaf) = tree.leaf_index()
            && context.leaf_id.is_some()
        {
            for index in added {
                push_message(
                    &mut context.messages,
                    &mut context.entry_indices,
                    tree,
                    index,
                );
            }
            // Rule 3 again, from the tree's memo (a new entry may change either).
            let fresh = build_settings(tree, leaf);
            context.thinking_level = fresh.thinking_level;
            context.model = fresh.model;
            context.leaf_id = Some(tree.entries()[leaf].id.clone());
            *mark = crate::fold::BranchMark::of(tree);
            return context.clone();
        }
        let built = build_session_context(tree, LeafSelector::Current);
        *last = Some((crate::fold::BranchMark::of(tree), built.clone()));
        built
    }
}

/// A context with rule 3's settings (thinking level, model) of the branch ending at `leaf`,
/// and nothing else.
fn build_settings(tree: &SessionTree, leaf: usize) -> SessionContext {
    let entries = tree.entries();
    let nearest = tree.nearest(leaf);
    let mut context = SessionContext::empty();
    if let Some(EntryBody::ThinkingLevelChange(change)) =
        nearest.thinking_level.map(|at| &entries[at].body)
    {
        context.thinking_level.clone_from(&change.thinking_level);
    }
    context.model = nearest
        .model
        .and_then(|at| match &entries[at].body {
            EntryBody::ModelChange(change) => Some((&change.provider, &change.model_id)),
            EntryBody::Message(m) => match &*m.message {
                AgentMessage::Assistant(assistant) => Some((&assistant.provider, &assistant.model)),
                _ => None,
            },
            _ => None,
        })
        .map(|(provider, model_id)| ModelRef {
            provider: provider.clone(),
            model_id: model_id.clone(),
        });
    context
}

/// Builds the context of the branch ending at `leaf`.
pub fn build_session_context(tree: &SessionTree, leaf: LeafSelector<'_>) -> SessionContext {
    let last = tree.len().checked_sub(1);
    let leaf = match leaf {
        LeafSelector::Current => tree.leaf_index(),
        LeafSelector::Last => last,
        LeafSelector::Null => None,
        LeafSelector::Id(id) => tree.index_of(id).or(last),
    };
    let Some(leaf) = leaf else {
        return SessionContext::empty();
    };
    let entries = tree.entries();
    // The last thinking level, model and compaction on the path come from the tree's memo
    // (rule 3 and 4): a turn costs the entries it sends, not a walk of the whole branch.
    let nearest = tree.nearest(leaf);

    let mut context = build_settings(tree, leaf);
    context.leaf_id = Some(entries[leaf].id.clone());

    let (messages, indices) = match nearest.compaction {
        Some(at) => {
            // The entries after the compaction, from the leaf up.
            let after = tree.walk_up_until(leaf, Some(at));
            let mut messages = Vec::with_capacity(after.len() + 1);
            let mut indices = Vec::with_capacity(after.len() + 1);
            let entry = &entries[at];
            if let EntryBody::Compaction(compaction) = &entry.body {
                if let Some(summary) =
                    tree.synthesized_message(at, || compaction_summary(entry, compaction))
                {
                    messages.push(summary);
                    indices.push(at);
                }
                // Kept entries: from `firstKeptEntryId` up to the compaction. If that id is not
                // on the path before the compaction, nothing before it is kept (pi's behaviour).
                // The walk goes up from the compaction, so it costs the kept entries (and the
                // whole branch only in that rare case).
                let mut kept = Vec::new();
                let mut current = tree.parent_index(at);
                let mut found = false;
                while let Some(index) = current {
                    if kept.len() >= entries.len() {
                        break;
                    }
                    kept.push(index);
                    if entries[index].id == compaction.first_kept_entry_id {
                        found = true;
                        break;
                    }
                    current = tree.parent_index(index);
                }
                if found {
                    for &index in kept.iter().rev() {
                        push_message(&mut messages, &mut indices, tree, index);
                    }
                }
                context.compaction_id = Some(entry.id.clone());
            }
            for &index in after.iter().rev() {
                push_message(&mut messages, &mut indices, tree, index);
            }
            (messages, indices)
        }
        None => {
            let path = tree.path_to(leaf);
            let mut messages = Vec::with_capacity(path.len());
            let mut indices = Vec::with_capacity(path.len());
            for &index in &path {
                push_message(&mut messages, &mut indices, tree, index);
            }
            (messages, indices)
        }
    };
    context.messages = messages;
    context.entry_indices = indices;
    context
}

/// Adds the message the entry at `index` contributes, if any (rule 5 of the module docs).
fn push_message(
    messages: &mut Vec<SharedMessage>,
    indices: &mut Vec<usize>,
    tree: &SessionTree,
    index: usize,
) {
    let before = messages.len();
    push_entry_message(messages, tree, index);
    if messages.len() > before {
        indices.push(index);
    }
}

/// Adds the message the entry at `index` contributes, if any.
fn push_entry_message(messages: &mut Vec<SharedMessage>, tree: &SessionTree, index: usize) {
    let entry = &tree.entries()[index];
    match &entry.body {
        EntryBody::Message(m) => messages.push(Arc::clone(&m.message)),
        EntryBody::CustomMessage(custom) => {
            messages.extend(tree.synthesized_message(index, || custom_message(entry, custom)));
        }
        EntryBody::BranchSummary(summary) if !summary.summary.is_empty() => {
            messages.extend(tree.synthesized_message(index, || branch_summary(entry, summary)));
        }
        _ => {}
    }
}

/// The `compactionSummary` message a compaction entry stands for at the head of a context.
pub(crate) fn compaction_summary(entry: &Entry, compaction: &CompactionEntry) -> AgentMessage {
    AgentMessage::CompactionSummary(CompactionSummaryMessage {
        summary: compaction.summary.clone(),
        tokens_before: compaction.tokens_before,
        timestamp: entry_millis(entry),
        extra: Extra::new(),
    })
}

/// The `custom` message a `custom_message` entry stands for.
pub(crate) fn custom_message(entry: &Entry, custom: &CustomMessageEntry) -> AgentMessage {
    AgentMessage::Custom(CustomMessage {
        custom_type: custom.custom_type.clone(),
        content: custom.content.clone(),
        display: custom.display,
        details: custom.details.clone(),
        timestamp: entry_millis(entry),
        extra: Extra::new(),
    })
}

/// The `branchSummary` message a `branch_summary` entry (with a summary) stands for.
pub(crate) fn branch_summary(entry: &Entry, summary: &BranchSummaryEntry) -> AgentMessage {
    AgentMessage::BranchSummary(BranchSummaryMessage {
        summary: summary.summary.clone(),
        from_id: summary.from_id.clone(),
        timestamp: entry_millis(entry),
        extra: Extra::new(),
    })
}

/// The entry's time in Unix ms for synthesised messages. pi would produce `NaN` for an
/// unparsable timestamp; 0 is the closest a `u64` can say "unknown".
fn entry_millis(entry: &Entry) -> u64 {
    iso_to_millis(&entry.timestamp).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    //! pi's reference cases for `buildSessionContext` (behaviour reference §13 item 13), plus
    //! the settings and message-kind rules.
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::entry::{
        BranchSummaryEntry, CompactionEntry, CustomMessageEntry, MessageEntry, ModelChangeEntry,
        ThinkingLevelChangeEntry,
    };
    use rampart_message::Content;

    fn entry(id: &str, parent: Option<&str>, body: EntryBody) -> Entry {
        Entry {
            id: id.into(),
            parent_id: parent.map(str::to_owned),
            timestamp: "2026-01-01T00:00:00.000Z".into(),
            body,
        }
    }

    fn user(id: &str, parent: Option<&str>, text: &str) -> Entry {
        entry(
            id,
            parent,
            EntryBody::from_message(AgentMessage::user_text(text, 1)),
        )
    }

    fn assistant(id: &str, parent: Option<&str>, text: &str) -> Entry {
        entry(
            id,
            parent,
            EntryBody::from_message(AgentMessage::assistant_text(
                text, "api", "prov", "model-a", 2,
            )),
        )
    }

    fn compaction(id: &str, parent: &str, first_kept: &str, summary: &str) -> Entry {
        entry(
            id,
            Some(parent),
            EntryBody::Compaction(CompactionEntry {
                summary: summary.into(),
                first_kept_entry_id: first_kept.into(),
                tokens_before: 1000,
                details: None,
                from_hook: None,
                extra: Extra::new(),
            }),
        )
    }

    fn tree(entries: Vec<Entry>) -> SessionTree {
        SessionTree::from_entries(entries).0
    }

    fn summary_of(message: &AgentMessage) -> &str {
        match message {
            AgentMessage::CompactionSummary(s) => &s.summary,
            other => panic!("not a compaction summary: {other:?}"),
        }
    }

    fn text_of(message: &AgentMessage) -> String {
        serde_json::to_value(message).unwrap()["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// u1, a1, u2, a2, compaction(keep u2), u3, a3 gives 5 messages, the first a summary.
    #[test]
    fn reference_single_compaction() {
        let t = tree(vec![
            user("u1", None, "u1"),
            assistant("a1", Some("u1"), "a1"),
            user("u2", Some("a1"), "u2"),
            assistant("a2", Some("u2"), "a2"),
            compaction("c1", "a2", "u2", "First summary"),
            user("u3", Some("c1"), "u3"),
            assistant("a3", Some("u3"), "a3"),
        ]);
        let ctx = build_session_context(&t, LeafSelector::Last);
        assert_eq!(ctx.messages.len(), 5);
        assert_eq!(summary_of(&ctx.messages[0]), "First summary");
        let texts: Vec<_> = ctx.messages[1..].iter().map(|m| text_of(m)).collect();
        assert_eq!(texts, ["u2", "a2", "u3", "a3"]);
        assert_eq!(ctx.compaction_id.as_deref(), Some("c1"));
        // Each message knows its entry: the summary its compaction, the rest their own.
        let ids: Vec<_> = ctx
            .entry_indices
            .iter()
            .map(|&i| t.entries()[i].id.as_str())
            .collect();
        assert_eq!(ids, ["c1", "u2", "a2", "u3", "a3"]);
    }

    /// With two compactions only the latest counts (5 messages, "Second summary").
    #[test]
    fn reference_only_the_latest_compaction_counts() {
        let t = tree(vec![
            user("u1", None, "u1"),
            assistant("a1", Some("u1"), "a1"),
            compaction("c1", "a1", "u1", "First summary"),
            user("u2", Some("c1"), "u2"),
            assistant("b", Some("u2"), "b"),
            compaction("c2", "b", "u2", "Second summary"),
            user("u3", Some("c2"), "u3"),
            assistant("a3", Some("u3"), "a3"),
        ]);
        let ctx = build_session_context(&t, LeafSelector::Current);
        assert_eq!(ctx.messages.len(), 5);
        assert_eq!(summary_of(&ctx.messages[0]), "Second summary");
        let texts: Vec<_> = ctx.messages[1..].iter().map(|m| text_of(m)).collect();
        assert_eq!(texts, ["u2", "b", "u3", "a3"]);
    }

    /// `firstKeptEntryId` = the first entry gives the summary plus all 4 messages.
    #[test]
    fn reference_first_kept_is_the_first_entry() {
        let t = tree(vec![
            user("u1", None, "u1"),
            assistant("a1", Some("u1"), "a1"),
            user("u2", Some("a1"), "u2"),
            assistant("a2", Some("u2"), "a2"),
            compaction("c1", "a2", "u1", "Summary"),
        ]);
        let ctx = build_session_context(&t, LeafSelector::Last);
        assert_eq!(ctx.messages.len(), 5);
        assert_eq!(summary_of(&ctx.messages[0]), "Summary");
        let texts: Vec<_> = ctx.messages[1..].iter().map(|m| text_of(m)).collect();
        assert_eq!(texts, ["u1", "a1", "u2", "a2"]);
    }

    /// A broken parent chain gives only the orphan (1 message).
    #[test]
    fn reference_broken_parent_chain() {
        let t = tree(vec![
            user("u1", None, "u1"),
            assistant("a1", Some("u1"), "a1"),
            user("u2", Some("missing"), "orphan"),
        ]);
        let ctx = build_session_context(&t, LeafSelector::Last);
        assert_eq!(ctx.messages.len(), 1);
        assert_eq!(text_of(&ctx.messages[0]), "orphan");
    }

    /// An unknown leaf id uses the last entry.
    #[test]
    fn reference_unknown_leaf_uses_the_last_entry() {
        let t = tree(vec![
            user("u1", None, "u1"),
            assistant("a1", Some("u1"), "a1"),
            user("u2", Some("u1"), "other branch"),
        ]);
        let ctx = build_session_context(&t, LeafSelector::Id("nope"));
        assert_eq!(ctx.leaf_id.as_deref(), Some("u2"));
        let texts: Vec<_> = ctx.messages.iter().map(|m| text_of(m)).collect();
        assert_eq!(texts, ["u1", "other branch"]);
        let ctx = build_session_context(&t, LeafSelector::Id("a1"));
        assert_eq!(ctx.messages.len(), 2);
    }

    #[test]
    fn null_leaf_and_empty_session_give_nothing() {
        let t = tree(vec![user("u1", None, "u1")]);
        let ctx = build_session_context(&t, LeafSelector::Null);
        assert!(ctx.messages.is_empty());
        assert_eq!(ctx.thinking_level, "off");
        let empty = SessionTree::new();
        assert!(
            build_session_context(&empty, LeafSelector::Last)
                .messages
                .is_empty()
        );
    }

    #[test]
    fn settings_and_message_kinds() {
        let t = tree(vec![
            entry(
                "m",
                None,
                EntryBody::ModelChange(ModelChangeEntry {
                    provider: "p0".into(),
                    model_id: "m0".into(),
                    extra: Extra::new(),
                }),
            ),
            entry(
                "t",
                Some("m"),
                EntryBody::ThinkingLevelChange(ThinkingLevelChangeEntry {
                    thinking_level: "high".into(),
                    extra: Extra::new(),
                }),
            ),
            assistant("a", Some("t"), "hi"),
            entry(
                "cm",
                Some("a"),
                EntryBody::CustomMessage(CustomMessageEntry {
                    custom_type: "note".into(),
                    content: Content::Text("injected".into()),
                    display: false,
                    details: None,
                    extra: Extra::new(),
                }),
            ),
            entry(
                "bs",
                Some("cm"),
                EntryBody::BranchSummary(BranchSummaryEntry {
                    from_id: "a".into(),
                    summary: "went elsewhere".into(),
                    details: None,
                    from_hook: None,
                    extra: Extra::new(),
                }),
            ),
            entry(
                "bs2",
                Some("bs"),
                EntryBody::BranchSummary(BranchSummaryEntry {
                    from_id: "a".into(),
                    summary: String::new(),
                    details: None,
                    from_hook: None,
                    extra: Extra::new(),
                }),
            ),
            entry(
                "me",
                Some("bs2"),
                EntryBody::Message(MessageEntry {
                    message: Arc::new(AgentMessage::user_text("last", 3)),
                    extra: Extra::new(),
                    as_read: None,
                }),
            ),
        ]);
        let ctx = build_session_context(&t, LeafSelector::Current);
        assert_eq!(ctx.thinking_level, "high");
        assert_eq!(
            ctx.model,
            Some(ModelRef {
                provider: "prov".into(),
                model_id: "model-a".into()
            })
        );
        let roles: Vec<_> = ctx.messages.iter().map(|m| m.role().to_owned()).collect();
        assert_eq!(roles, ["assistant", "custom", "branchSummary", "user"]);
        assert_eq!(ctx.messages[1].timestamp(), Some(1_767_225_600_000));
        // A stored message is the entry's own allocation, not a copy.
        let stored = t.get("a").unwrap().body.shared_message().unwrap();
        assert!(Arc::ptr_eq(&ctx.messages[0], stored));
    }

    /// Building the context of an unchanged tree twice hands out the same allocations, the
    /// synthesised messages (compaction summary, custom message, branch summary) included:
    /// the engine ABI relies on pointer identity to send only what changed.
    #[test]
    fn contexts_of_an_unchanged_tree_share_every_message() {
        let mut t = tree(vec![
            user("u1", None, "u1"),
            assistant("a1", Some("u1"), "a1"),
            compaction("c1", "a1", "u1", "Summary"),
            entry(
                "cm",
                Some("c1"),
                EntryBody::CustomMessage(CustomMessageEntry {
                    custom_type: "note".into(),
                    content: Content::Text("injected".into()),
                    display: true,
                    details: None,
                    extra: Extra::new(),
                }),
            ),
            entry(
                "bs",
                Some("cm"),
                EntryBody::BranchSummary(BranchSummaryEntry {
                    from_id: "a1".into(),
                    summary: "went elsewhere".into(),
                    details: None,
                    from_hook: None,
                    extra: Extra::new(),
                }),
            ),
            user("u2", Some("bs"), "u2"),
        ]);
        let first = build_session_context(&t, LeafSelector::Current);
        let second = build_session_context(&t, LeafSelector::Current);
        let roles: Vec<_> = first.messages.iter().map(|m| m.role().to_owned()).collect();
        assert_eq!(
            roles,
            [
                "compactionSummary",
                "user",
                "assistant",
                "custom",
                "branchSummary",
                "user"
            ]
        );
        assert_eq!(first.messages.len(), second.messages.len());
        for (a, b) in first.messages.iter().zip(&second.messages) {
            assert!(Arc::ptr_eq(a, b), "not shared: {a:?}");
        }

        // The lists engines receive share them too, and growing the branch keeps the prefix.
        let before = first.into_list();
        t.append(EntryBody::from_message(AgentMessage::user_text("u3", 9)));
        let after = build_session_context(&t, LeafSelector::Current).message_list();
        assert_eq!(after.len(), before.len() + 1);
        for (a, b) in before.iter().zip(after.iter()) {
            assert!(Arc::ptr_eq(a, b), "not shared after an append: {a:?}");
        }

        // A message appended already shared is handed out as that same allocation.
        let shared: SharedMessage = Arc::new(AgentMessage::user_text("u4", 10));
        t.append(EntryBody::from_shared(Arc::clone(&shared)));
        let ctx = build_session_context(&t, LeafSelector::Current);
        assert!(Arc::ptr_eq(ctx.messages.last().unwrap(), &shared));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "context_cache_tests.rs"]
mod cache_tests;
