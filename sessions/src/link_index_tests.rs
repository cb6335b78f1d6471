use rampart_message::AgentMessage;

use super::*;

fn entry(id: &str, parent: Option<&str>) -> Entry {
    Entry::new(
        id.into(),
        parent.map(str::to_owned),
        EntryBody::from_message(AgentMessage::user_text("x", 1)),
    )
}

#[test]
fn ids_are_found_and_the_later_of_two_wins() {
    let mut index = LinkIndex::default();
    assert!(index.push(entry("a", None), 2, (10, 5)).is_none());
    assert!(index.push(entry("b", Some("a")), 3, (16, 5)).is_none());
    let duplicate = index.push(entry("a", Some("b")), 4, (22, 5)).unwrap();
    assert_eq!((duplicate.shadowed_line, duplicate.line), (2, 4));
    assert_eq!(index.index_of("a"), Some(2));
    assert_eq!(index.id(1), "b");
    assert_eq!(index.parent(1), Some(0));
    assert_eq!(index.path_to(2), vec![0, 1, 2]);
    assert_eq!(index.span(1), (16, 5));
}

/// Two ids with one hash: the second goes to the fallback map, and both stay findable (and a
/// repeat of either is still a duplicate).
#[test]
fn ids_whose_hashes_collide_are_both_found() {
    let mut index = LinkIndex::default();
    index.push(entry("a", None), 2, (0, 1));
    // Pretend `b` hashes like `a`.
    let a_at = index.by_hash.remove(&hash("a")).unwrap();
    index.by_hash.insert(hash("b"), a_at);
    assert!(index.push(entry("b", Some("a")), 3, (0, 1)).is_none());
    assert_eq!(index.index_of("b"), Some(1));
    assert_eq!(index.collided.len(), 1);
    let duplicate = index.push(entry("b", None), 4, (0, 1)).unwrap();
    assert_eq!((duplicate.shadowed_line, duplicate.line), (3, 4));
    assert_eq!(index.index_of("b"), Some(2));
}

#[test]
fn a_parent_that_comes_later_is_linked_once_every_line_is_in() {
    let mut index = LinkIndex::default();
    index.push(entry("child", Some("parent")), 2, (0, 1));
    index.push(entry("parent", None), 3, (0, 1));
    index.push(entry("self", Some("self")), 4, (0, 1));
    assert!(index.has_dangling());
    index.finish_bulk_load();
    assert_eq!(index.parent(0), Some(1));
    // Its own id names itself, not a parent: it stays dangling, as in the tree.
    assert_eq!(index.parent(2), None);
    assert!(index.has_dangling());
    assert!(LinkGraph::dangling(&index).is_empty());
}
