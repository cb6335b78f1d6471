//! The session tree in memory: entries in file order, an id index, resolved parent links and
//! the leaf (where the next entry attaches).
//!
//! Entries are kept once, in a `Vec` in file order, and everything else refers to them by
//! index: the id map, the parent links (resolved once, so walking a 30,000-entry branch is
//! pointer chasing, not string hashing) and the leaf. Nothing here touches the disk; `Session`
//! pairs a tree with its file.
//!
//! pi's rules, which this follows:
//! * after a load the leaf is the **last entry in the file** (not the deepest one);
//! * when two entries share an id, lookups find the **later** one (pi keeps a `Map` filled in
//!   file order), and the load report lists the duplicate;
//! * a parent id that names no entry ends the walk towards the root there.
#![warn(missing_docs)]

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use rampart_message::AgentMessage;
use rampart_message::SharedMessage;

use crate::entry::{BranchSummaryEntry, Entry, EntryBody, Extra};

/// The tree of one session's entries plus its current leaf.
#[derive(Debug, Clone, Default)]
pub struct SessionTree {
    /// Entries in file order: the order they were appended, which is also the order they
    /// are saved in.
    entries: Vec<Entry>,
    /// 1-based file line of each entry (0 for entries not yet written), so reports can point
    /// at the line.
    lines: Vec<u64>,
    /// Id to index; for duplicated ids, the later entry (pi's semantics).
    by_id: HashMap<String, usize>,
    /// Resolved `parent_id` of each entry; `None` for roots and for parents that do not exist.
    parents: Vec<Option<usize>>,
    /// Entries whose parent id named nothing when they were added; re-resolved when entries
    /// arrive later (an out-of-order file), so such links heal instead of staying broken.
    unresolved: usize,
    /// Where the next entry attaches; `None` means "start a new root".
    leaf: Option<usize>,
    /// The model-facing message each entry that is not a `message` entry stands for (a
    /// compaction's summary, a branch summary, a custom message), made the first time a
    /// context needs it and kept. Entries never change once in the tree, so the message stays
    /// right, and every later context hands out the same allocation: engines then see it as
    /// unchanged (the ABI compares messages by pointer) and a turn costs no copy of it.
    /// Empty cells cost 16 bytes per entry; nothing is built for entries no context reaches.
    synthesized: Vec<OnceLock<SharedMessage>>,
    /// For each entry, the nearest entries on its way to the root (itself included) that the
    /// context builder looks for: computed the first time a walk needs them and kept, so a
    /// turn finds the model, the thinking level and the last compaction in O(1) instead of
    /// walking the whole branch (which made a 100k-message replay quadratic). Reset when a
    /// parent link changes (dangling links healed, lines bridged), which only a load does.
    nearest: Vec<OnceLock<Nearest>>,
    /// Which tree this is, as far as its links go: new for every tree, every clone, and
    /// whenever a parent link changes. A [`crate::fold::BranchFold`] resumes only on the tree
    /// (and links) it last saw.
    stamp: Stamp,
}

/// A tree's identity for [`SessionTree::stamp`]: a process-wide counter, taken afresh by
/// `default`, by `clone` (a clone can grow apart from its original) and when links change.
#[derive(Debug)]
pub(crate) struct Stamp(u64);

impl Stamp {
    fn fresh() -> Self {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

impl Default for Stamp {
    fn default() -> Self {
        Self::fresh()
    }
}

impl Clone for Stamp {
    fn clone(&self) -> Self {
        Self::fresh()
    }
}

/// The nearest entries of interest on an entry's way to the root, itself included (see
/// [`SessionTree::nearest`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Nearest {
    /// The last `thinking_level_change`.
    pub(crate) thinking_level: Option<usize>,
    /// The last `model_change` or assistant message.
    pub(crate) model: Option<usize>,
    /// The last `compaction`.
    pub(crate) compaction: Option<usize>,
}

/// A line the loader could not use, as far as the tree is concerned: where it was, and what its
/// first bytes still showed of the entry it held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostLine {
    /// 1-based file line.
    pub line: u64,
    /// The entry id it held, when it could be read.
    pub id: Option<String>,
    /// Its entry's parent (`Some(None)`: a root), when it could be read.
    pub parent_id: Option<Option<String>>,
}

/// An entry whose parent was on a lost line, now linked around that line: to the lost entry's
/// own parent when the line still showed it, else to the entry just before the line. Why:
/// without the bridge the walk from the leaf stopped at the hole, and one bad line cut the
/// active branch down to the entries after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bridge {
    /// The entry that was relinked.
    pub entry_id: String,
    /// Its file line.
    pub line: u64,
    /// The parent id it names, which no readable line holds.
    pub lost_parent_id: String,
    /// The lost line that (most likely) held that parent.
    pub lost_line: u64,
    /// The entry it now follows.
    pub now_under: String,
}

/// An id that appears on more than one entry; lookups find the last one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateId {
    /// The repeated id.
    pub id: String,
    /// The file line of the earlier entry, now shadowed.
    pub shadowed_line: u64,
    /// The file line of the entry that lookups find.
    pub line: u64,
}

impl SessionTree {
    /// An empty tree (a session with only its header).
    pub fn new() -> Self {
        Self::default()
    }

    /// A tree of `entries` in the given (file) order, leaf at the last entry, plus the ids
    /// that were repeated.
    pub fn from_entries(entries: impl IntoIterator<Item = Entry>) -> (Self, Vec<DuplicateId>) {
        let mut tree = Self::new();
        let mut duplicates = Vec::new();
        for entry in entries {
            if let Some(duplicate) = tree.push(entry, 0) {
                duplicates.push(duplicate);
            }
        }
        tree.finish_bulk_load();
        (tree, duplicates)
    }

    /// Adds `entry` at the end of the file order (without moving the leaf) and returns the
    /// duplicate it created, if its id was already taken. `line` is its file line (0 if
    /// unknown).
    pub(crate) fn push(&mut self, entry: Entry, line: u64) -> Option<DuplicateId> {
        let index = self.entries.len();
        let parent = match &entry.parent_id {
            Some(parent_id) => {
                let found = self.by_id.get(parent_id).copied();
                if found.is_none() {
                    self.unresolved += 1;
                }
                found
            }
            None => None,
        };
        let duplicate = self
            .by_id
            .insert(entry.id.clone(), index)
            .map(|shadowed| DuplicateId {
                id: entry.id.clone(),
                shadowed_line: self.lines[shadowed],
                line,
            });
        self.entries.push(entry);
        self.lines.push(line);
        self.parents.push(parent);
        self.synthesized.push(OnceLock::new());
        self.nearest.push(OnceLock::new());
        duplicate
    }

    /// The nearest thinking-level change, model source and compaction on the way from
    /// `index` to the root (see the `nearest` field). Each entry's figure is computed once:
    /// the walk stops at the first ancestor that already has one. `Nearest::default()` for an
    /// index out of range.
    pub(crate) fn nearest(&self, index: usize) -> Nearest {
        let Some(cell) = self.nearest.get(index) else {
            return Nearest::default();
        };
        if let Some(known) = cell.get() {
            return *known;
        }
        let mut chain = Vec::new();
        let mut base = Nearest::default();
        let mut current = Some(index);
        while let Some(at) = current {
            if let Some(known) = self.nearest[at].get() {
                base = *known;
                break;
            }
            chain.push(at);
            if chain.len() > self.entries.len() {
                // A cycle (only a hand-edited file has one): the walk stops, as in `path_to`.
                break;
            }
            current = self.parents[at];
        }
        for &at in chain.iter().rev() {
            let mut own = base;
            match &self.entries[at].body {
                EntryBody::ThinkingLevelChange(_) => own.thinking_level = Some(at),
                EntryBody::ModelChange(_) => own.model = Some(at),
                EntryBody::Message(m) if matches!(&*m.message, AgentMessage::Assistant(_)) => {
                    own.model = Some(at);
                }
                EntryBody::Compaction(_) => own.compaction = Some(at),
                _ => {}
            }
            // In a cycle an entry is met twice; the first figure stays.
            let _ = self.nearest[at].set(own);
            base = own;
        }
        base
    }

    /// Forgets every entry's [`Nearest`]: a parent link changed.
    fn forget_nearest(&mut self) {
        self.stamp = Stamp::fresh();
        for cell in &mut self.nearest {
            *cell = OnceLock::new();
        }
    }

    /// This tree's identity (see the `stamp` field): equal stamps mean the same tree, whose
    /// entries and links below any length it had then are unchanged.
    pub(crate) fn stamp(&self) -> u64 {
        self.stamp.0
    }

    /// The entries on the way from `leaf` to the root that were added after the tree had
    /// `since` entries, root side first, when that way then reaches `old_leaf` (the leaf it had
    /// when it had `since` entries): what a branch that only grew gained. `None` when the
    /// branch went elsewhere (then only a full walk can tell). Costs the entries returned.
    pub(crate) fn grown_from(
        &self,
        leaf: Option<usize>,
        since: usize,
        old_leaf: Option<usize>,
    ) -> Option<Vec<usize>> {
        let mut added = Vec::new();
        let mut current = leaf.filter(|&index| index < self.entries.len());
        while let Some(at) = current.filter(|&at| at >= since) {
            if added.len() >= self.entries.len() - since {
                return None; // A cycle among the new entries.
            }
            added.push(at);
            current = self.parents[at];
        }
        (current == old_leaf).then(|| {
            added.reverse();
            added
        })
    }

    /// The indices from `index` up to (not including) `stop`, or to the root when `stop` is not
    /// on the way, nearest first. Bounded like `path_to` against cycles.
    pub(crate) fn walk_up_until(&self, index: usize, stop: Option<usize>) -> Vec<usize> {
        let mut out = Vec::new();
        let mut current = (index < self.entries.len()).then_some(index);
        while let Some(at) = current {
            if Some(at) == stop || out.len() >= self.entries.len() {
                break;
            }
            out.push(at);
            current = self.parents[at];
        }
        out
    }

    /// The message synthesised for the entry at `index`, made by `make` the first time and the
    /// same `Arc` every time after (see the `synthesized` field). `None` if `index` is out of
    /// range.
    pub(crate) fn synthesized_message(
        &self,
        index: usize,
        make: impl FnOnce() -> AgentMessage,
    ) -> Option<SharedMessage> {
        self.synthesized
            .get(index)
            .map(|cell| Arc::clone(cell.get_or_init(|| Arc::new(make()))))
    }

    /// Re-resolves dangling parent links and puts the leaf on the last entry, as pi does after
    /// reading a file. Called once after a batch of `push`es.
    pub(crate) fn finish_bulk_load(&mut self) {
        self.resolve_dangling();
        self.leaf = self.entries.len().checked_sub(1);
    }

    /// Resolves parent links that named nothing when their entry was added. Cheap when there
    /// are none, which is the normal case.
    pub(crate) fn resolve_dangling(&mut self) {
        if self.unresolved == 0 {
            return;
        }
        self.forget_nearest();
        let mut still = 0;
        for (index, entry) in self.entries.iter().enumerate() {
            if self.parents[index].is_some() {
                continue;
            }
            if let Some(parent_id) = &entry.parent_id {
                match self.by_id.get(parent_id) {
                    Some(&parent) if parent != index => self.parents[index] = Some(parent),
                    _ => still += 1,
                }
            }
        }
        self.unresolved = still;
    }

    /// Whether some entry's parent id names no entry.
    pub(crate) fn has_dangling(&self) -> bool {
        self.unresolved > 0
    }

    /// Links entries whose parent is missing around the `lost` lines (see [`Bridge`]); returns
    /// the links made. Entries whose parent is missing for another reason stay roots, as in
    /// pi. Cheap when nothing dangles.
    pub(crate) fn bridge_lost_lines(&mut self, lost: &[LostLine]) -> Vec<Bridge> {
        if self.unresolved == 0 || lost.is_empty() {
            return Vec::new();
        }
        self.forget_nearest();
        bridge_links(self, lost)
    }

    /// Rewrites the `parentId` of every entry to the parent it is linked to in this tree (after
    /// [`SessionTree::bridge_lost_lines`]); returns how many changed. For writing a **new**
    /// file (an import) whose links must stand on their own; a session's own file is never
    /// rewritten this way.
    pub fn write_links_into_entries(&mut self) -> usize {
        let mut changed = 0;
        for index in 0..self.entries.len() {
            if let Some(parent) = self.parents[index] {
                let id = self.entries[parent].id.clone();
                if self.entries[index].parent_id.as_deref() != Some(id.as_str()) {
                    self.entries[index].parent_id = Some(id);
                    changed += 1;
                }
            }
        }
        changed
    }

    /// All entries in file order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The entries in file order with their file lines (0 for entries never written), giving
    /// up the tree: for writing a session out entry by entry, each entry's memory is freed as
    /// it is written instead of the whole tree staying until the end.
    pub fn into_entries(self) -> impl Iterator<Item = (Entry, u64)> {
        let Self { entries, lines, .. } = self;
        entries.into_iter().zip(lines)
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the session has no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry with this id (the later one if the id is duplicated).
    pub fn get(&self, id: &str) -> Option<&Entry> {
        self.by_id.get(id).map(|&index| &self.entries[index])
    }

    /// The file-order index of the entry with this id.
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.by_id.get(id).copied()
    }

    /// Whether an entry with this id exists; new ids are checked against this.
    pub fn contains_id(&self, id: &str) -> bool {
        self.by_id.contains_key(id)
    }

    /// The 1-based file line of the entry at `index` (0 if it was never written).
    pub fn line_of(&self, index: usize) -> u64 {
        self.lines.get(index).copied().unwrap_or(0)
    }

    pub(crate) fn set_line(&mut self, index: usize, line: u64) {
        if let Some(slot) = self.lines.get_mut(index) {
            *slot = line;
        }
    }

    /// The resolved parent of the entry at `index`.
    pub fn parent_index(&self, index: usize) -> Option<usize> {
        self.parents.get(index).copied().flatten()
    }

    /// The index of the leaf; `None` after [`SessionTree::reset_leaf`] or in an empty session.
    pub fn leaf_index(&self) -> Option<usize> {
        self.leaf
    }

    /// The leaf entry, where the next entry attaches.
    pub fn leaf(&self) -> Option<&Entry> {
        self.leaf.map(|index| &self.entries[index])
    }

    /// The leaf's id.
    pub fn leaf_id(&self) -> Option<&str> {
        self.leaf().map(|entry| entry.id.as_str())
    }

    /// Moves the leaf to the entry with this id, so the next entry starts a branch there.
    /// Returns `false` (and changes nothing) if there is no such entry.
    pub fn branch(&mut self, id: &str) -> bool {
        match self.by_id.get(id) {
            Some(&index) => {
                self.leaf = Some(index);
                true
            }
            None => false,
        }
    }

    /// Clears the leaf: the next entry becomes a new root and the current context is empty.
    pub fn reset_leaf(&mut self) {
        self.leaf = None;
    }

    pub(crate) fn set_leaf_index(&mut self, leaf: Option<usize>) {
        self.leaf = leaf.filter(|&index| index < self.entries.len());
    }

    /// The indices from the root down to `index` (inclusive). The walk stops at a parent id
    /// that names nothing, and at a cycle (which only a hand-edited file can contain).
    pub fn path_to(&self, index: usize) -> Vec<usize> {
        let mut path = Vec::new();
        if index >= self.entries.len() {
            return path;
        }
        let mut current = Some(index);
        while let Some(at) = current {
            path.push(at);
            if path.len() > self.entries.len() {
                tracing::warn!(
                    entry = %self.entries[index].id,
                    "parent links form a cycle; the branch is cut where the cycle starts"
                );
                path.pop();
                break;
            }
            current = self.parents[at];
        }
        path.reverse();
        path
    }

    /// The entries from the root to the current leaf (the active branch), empty when the leaf
    /// is reset.
    pub fn active_branch(&self) -> Vec<&Entry> {
        match self.leaf {
            Some(leaf) => self
                .path_to(leaf)
                .into_iter()
                .map(|index| &self.entries[index])
                .collect(),
            None => Vec::new(),
        }
    }

    /// The children of the entry with this id, in file order (a linear scan: used for
    /// navigation UIs, not on hot paths).
    pub fn children(&self, id: &str) -> Vec<&Entry> {
        let Some(&index) = self.by_id.get(id) else {
            return Vec::new();
        };
        self.parents
            .iter()
            .enumerate()
            .filter(|(_, parent)| **parent == Some(index))
            .map(|(child, _)| &self.entries[child])
            .collect()
    }

    /// A fresh entry id that no entry of this tree uses.
    pub fn new_entry_id(&self) -> String {
        crate::ids::new_entry_id(|candidate| self.by_id.contains_key(candidate))
    }

    /// Builds (but does not add) the next entry: a fresh id, the leaf as parent, the current
    /// time.
    pub fn next_entry(&self, body: EntryBody) -> Entry {
        Entry::new(self.new_entry_id(), self.leaf_id().map(str::to_owned), body)
    }

    /// Adds `entry` after the leaf and makes it the leaf. In-memory only: `Session` writes the
    /// entry first and calls this once the write succeeded.
    pub fn attach(&mut self, entry: Entry) -> &Entry {
        if let Some(duplicate) = self.push(entry, 0) {
            tracing::warn!(id = %duplicate.id, "an appended entry reuses an existing id");
        }
        let index = self.entries.len() - 1;
        self.leaf = Some(index);
        &self.entries[index]
    }

    /// Appends `body` at the leaf in memory (a fresh id, the leaf as parent) and returns the
    /// new entry. The file-backed equivalent is `Session::append`.
    pub fn append(&mut self, body: EntryBody) -> &Entry {
        let entry = self.next_entry(body);
        self.attach(entry)
    }

    /// pi's `branchWithSummary`: moves the leaf to `from` (or resets it for `None`) and
    /// appends a `branch_summary` there, in memory. Returns `None` if `from` does not exist.
    pub fn branch_with_summary(
        &mut self,
        from: Option<&str>,
        summary: impl Into<String>,
    ) -> Option<&Entry> {
        match from {
            Some(id) => {
                if !self.branch(id) {
                    return None;
                }
            }
            None => self.reset_leaf(),
        }
        let body = EntryBody::BranchSummary(BranchSummaryEntry {
            from_id: from.unwrap_or("root").to_owned(),
            summary: summary.into(),
            details: None,
            from_hook: None,
            extra: Extra::new(),
        });
        Some(self.append(body))
    }
}

/// What linking around lost lines needs of a set of entries: their ids, lines and parent
/// links. Implemented by [`SessionTree`] and by the compact index `sessions show` streams
/// from, so both link a damaged file the same way.
pub(crate) trait LinkGraph {
    /// The index of the entry with this id (the later one for a duplicated id).
    fn lookup(&self, id: &str) -> Option<usize>;
    /// The id of the entry at `index`.
    fn id_at(&self, index: usize) -> &str;
    /// The 1-based file line of the entry at `index` (0 if unknown).
    fn line_at(&self, index: usize) -> u64;
    /// The entries whose parent id names no entry, with that id, in file order.
    fn dangling(&self) -> Vec<(usize, String)>;
    /// Links the entry at `index` under `parent`.
    fn relink(&mut self, index: usize, parent: usize);
}

impl LinkGraph for SessionTree {
    fn lookup(&self, id: &str) -> Option<usize> {
        self.by_id.get(id).copied()
    }

    fn id_at(&self, index: usize) -> &str {
        &self.entries[index].id
    }

    fn line_at(&self, index: usize) -> u64 {
        self.lines[index]
    }

    fn dangling(&self) -> Vec<(usize, String)> {
        (0..self.entries.len())
            .filter(|&index| self.parents[index].is_none())
            .filter_map(|index| {
                let missing = self.entries[index].parent_id.as_ref()?;
                (!self.by_id.contains_key(missing)).then(|| (index, missing.clone()))
            })
            .collect()
    }

    fn relink(&mut self, index: usize, parent: usize) {
        self.parents[index] = Some(parent);
        self.unresolved = self.unresolved.saturating_sub(1);
    }
}

/// Links entries whose parent is missing around the `lost` lines (see [`Bridge`]); returns the
/// links made. Entries whose parent is missing for another reason stay roots, as in pi.
pub(crate) fn bridge_links(graph: &mut impl LinkGraph, lost: &[LostLine]) -> Vec<Bridge> {
    let mut bridges = Vec::new();
    for (index, missing) in graph.dangling() {
        let line = graph.line_at(index);
        let Some(hole) = lost
            .iter()
            .find(|l| l.id.as_deref() == Some(missing.as_str()))
            .or_else(|| {
                // The id was unreadable: the nearest such line before the entry.
                lost.iter()
                    .filter(|l| l.id.is_none() && l.line < line)
                    .max_by_key(|l| l.line)
            })
        else {
            continue;
        };
        let Some(target) = around(graph, hole, lost, index) else {
            continue;
        };
        graph.relink(index, target);
        bridges.push(Bridge {
            entry_id: graph.id_at(index).to_owned(),
            line,
            lost_parent_id: missing,
            lost_line: hole.line,
            now_under: graph.id_at(target).to_owned(),
        });
    }
    bridges
}

/// Where an entry (at `child`) whose parent was on `hole` goes: the lost entry's own parent
/// (following further lost lines), else the last entry before the hole; always an entry
/// earlier than `child`, so no cycle can form. `None` when the lost entry was a root.
fn around(
    graph: &impl LinkGraph,
    hole: &LostLine,
    lost: &[LostLine],
    child: usize,
) -> Option<usize> {
    let mut hole = hole;
    for _ in 0..lost.len() {
        match &hole.parent_id {
            Some(None) => return None,
            Some(Some(parent)) => {
                if let Some(found) = graph.lookup(parent) {
                    return (found < child).then_some(found);
                }
                match lost
                    .iter()
                    .find(|l| l.id.as_deref() == Some(parent.as_str()))
                {
                    Some(next) if next.line < hole.line => hole = next,
                    _ => break,
                }
            }
            None => break,
        }
    }
    (0..child).rev().find(|&j| {
        let line = graph.line_at(j);
        line != 0 && line < hole.line
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::entry::{OtherEntry, ThinkingLevelChangeEntry};

    fn other(id: &str, parent: Option<&str>) -> Entry {
        Entry {
            id: id.into(),
            parent_id: parent.map(str::to_owned),
            timestamp: "t".into(),
            body: EntryBody::Other(OtherEntry {
                entry_type: "x".into(),
                fields: Extra::new(),
            }),
        }
    }

    #[test]
    fn leaf_is_last_entry_and_paths_walk_to_root() {
        let (tree, dups) = SessionTree::from_entries([
            other("a", None),
            other("b", Some("a")),
            other("c", Some("a")),
        ]);
        assert!(dups.is_empty());
        assert_eq!(tree.leaf_id(), Some("c"));
        let ids: Vec<_> = tree.active_branch().iter().map(|e| e.id.clone()).collect();
        assert_eq!(ids, ["a", "c"]);
        assert_eq!(tree.children("a").len(), 2);
    }

    #[test]
    fn forward_references_resolve_and_missing_parents_stop_the_walk() {
        let (tree, _) = SessionTree::from_entries([
            other("b", Some("a")),
            other("a", None),
            other("c", Some("zzz")),
            other("d", Some("b")),
        ]);
        assert_eq!(tree.path_to(3).len(), 3);
        assert_eq!(tree.path_to(2).len(), 1);
    }

    #[test]
    fn duplicates_resolve_to_the_later_entry() {
        let (tree, dups) =
            SessionTree::from_entries([other("a", None), other("a", None), other("b", Some("a"))]);
        assert_eq!(dups.len(), 1);
        assert_eq!(tree.index_of("a"), Some(1));
        assert_eq!(tree.path_to(2), vec![1, 2]);
    }

    #[test]
    fn cycles_terminate() {
        let (tree, _) = SessionTree::from_entries([other("a", Some("b")), other("b", Some("a"))]);
        assert_eq!(tree.path_to(1).len(), 2);
    }

    #[test]
    fn append_branch_and_reset() {
        let mut tree = SessionTree::new();
        let level = |l: &str| {
            EntryBody::ThinkingLevelChange(ThinkingLevelChangeEntry {
                thinking_level: l.into(),
                extra: Extra::new(),
            })
        };
        let a = tree.append(level("a")).id.clone();
        let b = tree.append(level("b")).id.clone();
        assert_eq!(tree.get(&b).unwrap().parent_id.as_deref(), Some(a.as_str()));
        assert!(tree.branch(&a));
        let c = tree.append(level("c")).id.clone();
        assert_eq!(tree.get(&c).unwrap().parent_id.as_deref(), Some(a.as_str()));
        assert!(!tree.branch("nope"));
        tree.reset_leaf();
        assert!(tree.active_branch().is_empty());
        let d = tree.append(level("d")).id.clone();
        assert_eq!(tree.get(&d).unwrap().parent_id, None);
        let summary = tree.branch_with_summary(Some(&b), "s").unwrap();
        assert_eq!(summary.parent_id.as_deref(), Some(b.as_str()));
    }
}
