//! A session's structure in a few dozen bytes per entry: ids, parent links, where each entry's
//! line is, and what kind of entry it is; never its content.
//!
//! Why: reading a branch for printing (`sessions show`) needs the links of every entry but the
//! content of the branch's entries only, one at a time. A loaded [`crate::SessionTree`] keeps
//! every entry whole (a million tiny entries took 3.3 GB), and even one of stripped entries
//! costs some 600 bytes an entry in struct size, id strings and side tables. Here ids live in
//! one string, are found by a 64-bit hash (with a fallback map for the rare ids whose hashes
//! collide), and each entry is a fixed 40-byte node.
//!
//! The links follow the loader's rules exactly ([`crate::load::read_links`] judges the lines,
//! and this index links them as [`crate::SessionTree`] does): the later of two entries with one
//! id wins lookups, a parent id that names nothing yet is resolved again once every line is
//! in, and entries whose parent was on a lost line are linked around it
//! ([`crate::tree::bridge_links`]).

use std::collections::{BTreeMap, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};

use rampart_message::AgentMessage;

use crate::entry::{Entry, EntryBody};
use crate::load::LinkSink;
use crate::tree::{Bridge, DuplicateId, LinkGraph, LostLine, bridge_links};

/// No parent (a root, or a parent id that names nothing).
const NONE: usize = usize::MAX;

/// What an entry contributes to a branch's context (see `crate::context`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A `message` entry other than an assistant's.
    Message,
    /// A `message` entry holding an assistant message (a model source too).
    Assistant,
    /// A `custom_message` entry.
    CustomMessage,
    /// A `branch_summary` entry with a non-empty summary.
    BranchSummary,
    /// A `compaction` entry.
    Compaction,
    /// A `thinking_level_change` entry.
    ThinkingLevel,
    /// A `model_change` entry.
    ModelChange,
    /// Anything that adds no message and sets nothing.
    Other,
}

impl Kind {
    fn of(body: &EntryBody) -> Self {
        match body {
            EntryBody::Message(m) if matches!(&*m.message, AgentMessage::Assistant(_)) => {
                Self::Assistant
            }
            EntryBody::Message(_) => Self::Message,
            EntryBody::CustomMessage(_) => Self::CustomMessage,
            EntryBody::BranchSummary(s) if !s.summary.is_empty() => Self::BranchSummary,
            EntryBody::Compaction(_) => Self::Compaction,
            EntryBody::ThinkingLevelChange(_) => Self::ThinkingLevel,
            EntryBody::ModelChange(_) => Self::ModelChange,
            _ => Self::Other,
        }
    }

    /// Whether the entry adds a message to the context.
    pub(crate) fn has_message(self) -> bool {
        matches!(
            self,
            Self::Message | Self::Assistant | Self::CustomMessage | Self::BranchSummary
        )
    }
}

#[derive(Debug, Clone, Copy)]
struct Node {
    /// Where the entry's line starts in the file.
    offset: u64,
    /// Its length, without the newline.
    length: u64,
    /// Its 1-based file line.
    line: u64,
    /// The resolved parent, or [`NONE`].
    parent: usize,
    kind: Kind,
}

/// Every entry's id, links, line and kind (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct LinkIndex {
    nodes: Vec<Node>,
    /// All ids, one after the other.
    ids: String,
    /// Where each entry's id ends in `ids`.
    id_ends: Vec<usize>,
    /// The hash of an id to the (later) entry that has it.
    by_hash: HashMap<u64, usize>,
    /// Ids whose hash an entry with another id already had.
    collided: HashMap<Box<str>, usize>,
    /// Entries whose parent id named no entry when they came, with that id.
    unresolved: BTreeMap<usize, Box<str>>,
}

fn hash(id: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    id.hash(&mut hasher);
    hasher.finish()
}

impl LinkIndex {
    /// The number of entries.
    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    /// The entry with this id (the later one for a duplicated id).
    pub(crate) fn index_of(&self, id: &str) -> Option<usize> {
        match self.by_hash.get(&hash(id)) {
            Some(&index) if self.id(index) == id => Some(index),
            _ => self.collided.get(id).copied(),
        }
    }

    /// The id of the entry at `index`.
    pub(crate) fn id(&self, index: usize) -> &str {
        let start = index.checked_sub(1).map_or(0, |i| self.id_ends[i]);
        &self.ids[start..self.id_ends[index]]
    }

    /// The resolved parent of the entry at `index`.
    pub(crate) fn parent(&self, index: usize) -> Option<usize> {
        self.nodes
            .get(index)
            .map(|n| n.parent)
            .filter(|&p| p != NONE)
    }

    /// What the entry at `index` contributes.
    pub(crate) fn kind(&self, index: usize) -> Kind {
        self.nodes[index].kind
    }

    /// Where the entry's line is: offset and length without the newline.
    pub(crate) fn span(&self, index: usize) -> (u64, u64) {
        let node = &self.nodes[index];
        (node.offset, node.length)
    }

    /// Its 1-based file line.
    pub(crate) fn line(&self, index: usize) -> u64 {
        self.nodes[index].line
    }

    /// The indices from the root down to `index`, stopping at a cycle (which only a
    /// hand-edited file can hold) as [`crate::SessionTree::path_to`] does.
    pub(crate) fn path_to(&self, index: usize) -> Vec<usize> {
        let mut path = Vec::new();
        let mut current = (index < self.nodes.len()).then_some(index);
        while let Some(at) = current {
            path.push(at);
            if path.len() > self.nodes.len() {
                tracing::warn!(
                    entry = %self.id(index),
                    "parent links form a cycle; the branch is cut where the cycle starts"
                );
                path.pop();
                break;
            }
            current = self.parent(at);
        }
        path.reverse();
        path
    }

    /// Roughly the bytes the index holds on the heap, for the test that keeps it small.
    #[cfg(test)]
    pub(crate) fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        self.nodes.capacity() * size_of::<Node>()
            + self.ids.capacity()
            + self.id_ends.capacity() * size_of::<usize>()
            + self.by_hash.capacity() * (size_of::<(u64, usize)>() + 1)
            + self.collided.capacity() * (size_of::<(Box<str>, usize)>() + 1)
            + self.collided.keys().map(|k| k.len()).sum::<usize>()
            + self
                .unresolved
                .values()
                .map(|v| v.len() + 48)
                .sum::<usize>()
    }

    /// Makes `id` find the entry at `index`; returns the entry it found before, if any.
    fn claim(&mut self, id: &str, index: usize) -> Option<usize> {
        let h = hash(id);
        match self.by_hash.get(&h).copied() {
            None => {
                self.by_hash.insert(h, index);
                None
            }
            Some(other) if self.id(other) == id => {
                self.by_hash.insert(h, index);
                Some(other)
            }
            Some(_) => self.collided.insert(id.into(), index),
        }
    }
}

impl LinkSink for LinkIndex {
    fn push(&mut self, entry: Entry, line: u64, span: (u64, u64)) -> Option<DuplicateId> {
        let index = self.nodes.len();
        // The parent first, then the id, as the tree does: an entry naming its own id as its
        // parent finds an earlier entry with that id, or nothing.
        let parent = match &entry.parent_id {
            Some(parent_id) => match self.index_of(parent_id) {
                Some(found) => found,
                None => {
                    self.unresolved.insert(index, parent_id.as_str().into());
                    NONE
                }
            },
            None => NONE,
        };
        self.nodes.push(Node {
            offset: span.0,
            length: span.1,
            line,
            parent,
            kind: Kind::of(&entry.body),
        });
        self.ids.push_str(&entry.id);
        self.id_ends.push(self.ids.len());
        self.claim(&entry.id, index).map(|shadowed| DuplicateId {
            id: entry.id.clone(),
            shadowed_line: self.nodes[shadowed].line,
            line,
        })
    }

    fn finish_bulk_load(&mut self) {
        let pending = std::mem::take(&mut self.unresolved);
        for (index, parent_id) in pending {
            match self.index_of(&parent_id) {
                Some(parent) if parent != index => self.nodes[index].parent = parent,
                _ => {
                    self.unresolved.insert(index, parent_id);
                }
            }
        }
    }

    fn has_dangling(&self) -> bool {
        !self.unresolved.is_empty()
    }

    fn bridge_lost_lines(&mut self, lost: &[LostLine]) -> Vec<Bridge> {
        if self.unresolved.is_empty() || lost.is_empty() {
            return Vec::new();
        }
        bridge_links(self, lost)
    }

    fn len(&self) -> usize {
        self.nodes.len()
    }
}

impl LinkGraph for LinkIndex {
    fn lookup(&self, id: &str) -> Option<usize> {
        self.index_of(id)
    }

    fn id_at(&self, index: usize) -> &str {
        self.id(index)
    }

    fn line_at(&self, index: usize) -> u64 {
        self.nodes[index].line
    }

    fn dangling(&self) -> Vec<(usize, String)> {
        self.unresolved
            .iter()
            .filter(|(_, parent_id)| self.index_of(parent_id).is_none())
            .map(|(&index, parent_id)| (index, parent_id.to_string()))
            .collect()
    }

    fn relink(&mut self, index: usize, parent: usize) {
        self.nodes[index].parent = parent;
        self.unresolved.remove(&index);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "link_index_tests.rs"]
mod tests;
