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
