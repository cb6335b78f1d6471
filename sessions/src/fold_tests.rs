use rampart_message::AgentMessage;

use super::*;
use crate::entry::EntryBody;

fn say(tree: &mut SessionTree, text: &str) -> String {
    tree.append(EntryBody::from_message(AgentMessage::user_text(text, 1)))
        .id
        .clone()
}

/// The ids of the active branch, as a fold sees them.
fn ids(fold: &mut BranchFold<Vec<String>>, tree: &SessionTree) -> Vec<String> {
    fold.update(tree, |ids, entry| ids.push(entry.id.clone()))
        .clone()
}

fn walked(tree: &SessionTree) -> Vec<String> {
    tree.active_branch().iter().map(|e| e.id.clone()).collect()
}

#[test]
fn a_growing_branch_folds_each_entry_once() {
    let mut tree = SessionTree::new();
    let mut fold = BranchFold::new();
    for turn in 0..2_000 {
        say(&mut tree, &format!("turn {turn}"));
        assert_eq!(ids(&mut fold, &tree), walked(&tree));
    }
    // A walk from the root per turn would have folded 2,000 · 2,001 / 2 entries.
    assert_eq!(fold.folded(), 2_000);
}

#[test]
fn a_branch_switch_folds_the_new_branch_from_the_root() {
    let mut tree = SessionTree::new();
    let mut fold = BranchFold::new();
    let first = say(&mut tree, "a");
    say(&mut tree, "b");
    say(&mut tree, "c");
    assert_eq!(ids(&mut fold, &tree), walked(&tree));
    assert!(tree.branch(&first));
    say(&mut tree, "d");
    assert_eq!(ids(&mut fold, &tree).len(), 2);
    assert_eq!(ids(&mut fold, &tree), walked(&tree));
    tree.reset_leaf();
    assert_eq!(ids(&mut fold, &tree), Vec::<String>::new());
    say(&mut tree, "a new root");
    assert_eq!(ids(&mut fold, &tree), walked(&tree));
}

#[test]
fn a_clone_that_grew_apart_is_not_taken_for_its_original() {
    let mut tree = SessionTree::new();
    say(&mut tree, "a");
    let mut other = tree.clone();
    let mut fold = BranchFold::new();
    say(&mut tree, "b");
    assert_eq!(ids(&mut fold, &tree), walked(&tree));
    say(&mut other, "c");
    say(&mut other, "d");
    assert_eq!(ids(&mut fold, &other), walked(&other));
    assert_eq!(ids(&mut fold, &tree), walked(&tree));
}

fn compact(tree: &mut SessionTree, first_kept: &str) {
    tree.append(EntryBody::Compaction(crate::entry::CompactionEntry {
        summary: "earlier turns".into(),
        first_kept_entry_id: first_kept.into(),
        tokens_before: 1_000,
        details: None,
        from_hook: None,
        extra: Default::default(),
    }));
}

#[test]
fn a_mark_is_continued_by_appends_only() {
    let mut tree = SessionTree::new();
    let first = say(&mut tree, "a");
    let kept = say(&mut tree, "b");
    let mark = BranchMark::of(&tree);
    assert!(
        mark.still_continued_by(&tree),
        "an unchanged branch continues"
    );
    say(&mut tree, "c");
    say(&mut tree, "d");
    assert!(
        mark.still_continued_by(&tree),
        "appends continue the marked branch"
    );

    // A compaction changes what the context starts with: no longer the marked stretch.
    compact(&mut tree, &kept);
    assert!(!mark.still_continued_by(&tree));
    let after = BranchMark::of(&tree);
    say(&mut tree, "e");
    assert!(after.still_continued_by(&tree));

    // A branch switch to an earlier entry, even one that then grows, is not the marked branch.
    assert!(tree.branch(&first));
    say(&mut tree, "f");
    assert!(!after.still_continued_by(&tree));

    // Nor is a clone of the tree that grew apart.
    let mark = BranchMark::of(&tree);
    let mut other = tree.clone();
    say(&mut other, "g");
    assert!(!mark.still_continued_by(&other));
}
