//! A fold over the active branch that a caller keeps between turns and that resumes where it
//! ended: a branch that only grew since costs the new entries, not the walk from the root.
//!
//! Why: some per-turn decisions depend on the whole branch (how many compactions it holds,
//! whether a memory flush already ran in this compaction cycle). Walking the branch from the
//! root for them on every model call made a long session quadratic: a replay of 30,000 tiny
//! lines walked 10⁸ entries for one such count. Entries never change once in the tree and a
//! new entry only ever attaches below an existing one, so what a fold computed over the old
//! branch still holds, and the new entries can be folded on top.
//!
//! The fold resumes only on the tree it last saw (the tree's stamp, which changes with every
//! clone, every load and every relinking) and only when the old leaf is still on the way from
//! the new leaf to the root. Anything else (another session, a branch switch, a reload) is a
//! full walk, so the result is always what a walk from the root would give.
#![warn(missing_docs)]

use crate::entry::Entry;
use crate::tree::SessionTree;

/// The state of a fold over the active branch, kept by the caller between calls (see the
/// module docs). `S` starts as `S::default()` at the root.
#[derive(Debug, Clone, Default)]
pub struct BranchFold<S> {
    /// The tree's stamp, its length and its leaf when `state` was last brought up to date.
    seen: Option<(u64, usize, Option<usize>)>,
    state: S,
    /// Entries folded since this fold was made, for tests that keep the fold linear.
    folded: u64,
}

impl<S: Default> BranchFold<S> {
    /// A fold that has seen nothing yet.
    pub fn new() -> Self {
        Self {
            seen: None,
            state: S::default(),
            folded: 0,
        }
    }

    /// Brings the state up to the active branch of `tree` with `step` (called once per entry,
    /// root side first) and returns it. `step` must depend on nothing but the state and the
    /// entry, so that a resumed fold and a fresh one agree.
    pub fn update(&mut self, tree: &SessionTree, mut step: impl FnMut(&mut S, &Entry)) -> &S {
        let leaf = tree.leaf_index();
        let grown = match self.seen {
            Some((stamp, len, old_leaf)) if stamp == tree.stamp() && len <= tree.len() => {
                tree.grown_from(leaf, len, old_leaf)
            }
            _ => None,
        };
        let indices = match grown {
            Some(added) => added,
            None => {
                self.state = S::default();
                leaf.map(|leaf| tree.path_to(leaf)).unwrap_or_default()
            }
        };
        let entries = tree.entries();
        for index in indices {
            step(&mut self.state, &entries[index]);
            self.folded += 1;
        }
        self.seen = Some((tree.stamp(), tree.len(), leaf));
        &self.state
    }

    /// Entries folded so far, over every call: a session that only grows costs each entry
    /// once.
    pub fn folded(&self) -> u64 {
        self.folded
    }
}

/// Where the active branch of a tree stood, to ask later whether it only grew since and
/// gained no compaction ([`BranchMark::still_continued_by`]): then the context it gives is the
/// marked one with the new messages after it.
///
/// Why: a caller that did something for one stretch of context (asked an engine to prepare a
/// compaction of it, say) need not do it again on every turn while that stretch only grows;
/// telling so costs the entries added since, where comparing the contexts costs the branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BranchMark {
    stamp: u64,
    len: usize,
    leaf: Option<usize>,
    compaction: Option<usize>,
}

impl BranchMark {
    /// The active branch of `tree` as it stands.
    pub fn of(tree: &SessionTree) -> Self {
        let leaf = tree.leaf_index();
        Self {
            stamp: tree.stamp(),
            len: tree.len(),
            leaf,
            compaction: leaf.and_then(|at| tree.nearest(at).compaction),
        }
    }

    /// Whether the active branch of `tree` is the marked one grown by appends (the same tree,
    /// the marked leaf still on the way to the root) with no compaction added. A branch
    /// switch, a reload, another tree or a new compaction all answer `false`. Costs the
    /// entries added since the mark.
    pub fn still_continued_by(&self, tree: &SessionTree) -> bool {
        self.added_since(tree).is_some()
    }

    /// The entries the active branch of `tree` gained since the mark, root side first, when
    /// [`BranchMark::still_continued_by`] holds; `None` otherwise.
    pub fn added_since(&self, tree: &SessionTree) -> Option<Vec<usize>> {
        if self.stamp != tree.stamp() || self.len > tree.len() {
            return None;
        }
        let leaf = tree.leaf_index();
        let added = tree.grown_from(leaf, self.len, self.leaf)?;
        (leaf.and_then(|at| tree.nearest(at).compaction) == self.compaction).then_some(added)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "fold_tests.rs"]
mod tests;
