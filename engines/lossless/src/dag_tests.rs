//! The reference cases of §8 about the tail, chunks and condensation, on items alone.
use super::*;
use crate::assemble::select;

fn msg(seq: u64, tokens: u64, role: Role) -> Item {
    Item::new(
        ItemRef::Message {
            seq,
            id: seq as i64,
        },
        tokens,
        role,
        None,
    )
}

fn sum(id: &str, depth: u32, tokens: u64) -> Item {
    Item::new(
        ItemRef::Summary {
            id: id.into(),
            depth,
            carried: false,
        },
        tokens,
        Role::Other,
        None,
    )
}

/// §8.1: `u1 a1 u2 a2(call) t2 a3(call) t3 a4` with a tail of 3 keeps `u2…a4`.
#[test]
fn the_tail_extends_to_the_newest_user_message() {
    use Role::*;
    let roles = [
        User,
        Other,
        User,
        AssistantCalls,
        ToolResult,
        AssistantCalls,
        ToolResult,
        Other,
    ];
    let items: Vec<Item> = roles
        .iter()
        .enumerate()
        .map(|(i, r)| msg(i as u64, 10, *r))
        .collect();
    let tail = tail_start(&items, 3, None);
    assert_eq!(tail, 2);
    assert_eq!(leaf_chunk(&items, tail, 20_000), Some(0..2));
}

/// §8.2: a 1,000-token cap over 400-token messages keeps 2; a 5,000-token user message alone.
#[test]
fn the_tail_token_cap_keeps_the_newest_user_message() {
    let mut items: Vec<Item> = (0..10).map(|i| msg(i, 400, Role::Other)).collect();
    items[9].role = Role::User;
    assert_eq!(items.len() - tail_start(&items, 64, Some(1_000)), 2);
    items[9].tokens = 5_000;
    assert_eq!(items.len() - tail_start(&items, 64, Some(1_000)), 1);
}

/// §8.4: five 6,000-token messages give a first leaf of 3; one 30,000-token message is a chunk.
#[test]
fn a_leaf_chunk_stops_before_passing_the_cap() {
    let items: Vec<Item> = (0..5).map(|i| msg(i, 6_000, Role::Other)).collect();
    assert_eq!(leaf_chunk(&items, 5, 20_000), Some(0..3));
    let huge = vec![msg(0, 30_000, Role::Other), msg(1, 10, Role::Other)];
    assert_eq!(leaf_chunk(&huge, 2, 20_000), Some(0..1));
}

/// A chunk never ends between a tool call and its result (§6.13).
#[test]
fn a_leaf_chunk_keeps_a_tool_call_with_its_result() {
    let items = vec![
        msg(0, 15_000, Role::AssistantCalls),
        msg(1, 10_000, Role::ToolResult),
        msg(2, 10, Role::User),
    ];
    assert_eq!(leaf_chunk(&items, 3, 20_000), Some(0..2));
}

/// §8.5: in `[S0, m1, m2, S0', m3, …]` the first leaf covers `m1 m2`.
#[test]
fn chunks_never_cross_summaries() {
    let items = vec![
        sum("a", 0, 100),
        msg(1, 10, Role::Other),
        msg(2, 10, Role::Other),
        sum("b", 0, 100),
        msg(3, 10, Role::Other),
        msg(4, 10, Role::User),
    ];
    assert_eq!(leaf_chunk(&items, 5, 20_000), Some(1..3));
}

/// §8.7 and §8.9: fanout and token gates; runs start at the first summary of their depth.
#[test]
fn condensation_needs_its_fanout_and_never_mixes_depths() {
    let fanout = |d: u32| if d == 0 { 8 } else { 4 };
    let mut items = vec![sum("d1", 1, 2_000)];
    items.extend((0..8).map(|i| sum(&format!("l{i}"), 0, 300)));
    items.push(msg(0, 10, Role::User));
    let tail = items.len() - 1;
    assert_eq!(
        condense_candidate(&items, tail, 20_000, 2_000, fanout, Some(1)),
        Some(1..9)
    );
    let three: Vec<Item> = (0..3).map(|i| sum(&format!("l{i}"), 0, 1_000)).collect();
    assert_eq!(
        condense_candidate(&three, 3, 20_000, 2_000, fanout, Some(1)),
        None
    );
    assert_eq!(
        condense_candidate(&three, 3, 20_000, 2_000, |_| 2, None),
        Some(0..3)
    );
    let lone = vec![sum("x", 0, 5_000)];
    assert_eq!(
        condense_candidate(&lone, 1, 20_000, 2_000, |_| 2, None),
        None
    );
}

/// §8.14 and §8.15: the walk stops at the first item that does not fit; the tail always goes.
#[test]
fn assembly_keeps_a_contiguous_run_ending_at_the_tail() {
    let items = vec![
        sum("s1", 0, 500),
        sum("s2", 0, 2_000),
        msg(0, 1_000, Role::Other),
        msg(1, 1_000, Role::Other),
        msg(2, 10_000, Role::User),
    ];
    assert_eq!(select(&items, 4, 13_000), (2, 12_000));
    let big = vec![msg(0, 1_000, Role::Other), msg(1, 20_000, Role::User)];
    assert_eq!(select(&big, 1, 15_000), (1, 20_000));
}

/// Under overflow pressure the tail is cut to a token cap inside the newest user turn (a long
/// tool loop), a call and its results kept together, so the older part of the turn can be
/// summarised; the ordinary tail would keep the whole turn.
#[test]
fn a_pressed_tail_cuts_inside_a_long_user_turn() {
    use Role::*;
    // u0, then twelve call/result pairs of 1,000 tokens each, then a closing answer.
    let mut items = vec![msg(0, 100, User)];
    for i in 0..12u64 {
        items.push(msg(1 + 2 * i, 500, AssistantCalls));
        items.push(msg(2 + 2 * i, 500, ToolResult));
    }
    items.push(msg(25, 200, Other));
    assert_eq!(
        tail_start(&items, 4, None),
        0,
        "the whole turn is the ordinary tail"
    );
    let pressed = pressed_tail_start(&items, 2_500, None);
    // The answer (200) and two whole pairs (2,000) fit; a third pair would not.
    assert_eq!(pressed, items.len() - 5);
    assert_eq!(
        items[pressed].role, AssistantCalls,
        "a call is not split from its result"
    );
    assert!(leaf_chunk(&items, pressed, 20_000).is_some());
    // A result at the cut pulls its call in.
    let cut_at_result = pressed_tail_start(&items, 2_700, None);
    assert_eq!(items[cut_at_result].role, AssistantCalls);
    // At least one item, however small the cap; never past a summary.
    assert_eq!(pressed_tail_start(&items, 1, None), items.len() - 1);
    let with_summary = vec![sum("s", 0, 50), msg(1, 100, User), msg(2, 100, Other)];
    assert_eq!(pressed_tail_start(&with_summary, 10_000, None), 1);
}

/// After a turn, a final answer larger than the room a sweep makes is summarised with the
/// rest (kept, it would hold the context over its target until the next sweep); a smaller one,
/// or a large message that is not a final answer, stays.
#[test]
fn a_final_answer_larger_than_the_room_goes_with_the_pressed_sweep() {
    use Role::*;
    let large = vec![msg(0, 100, User), msg(1, 14_000, Other)];
    assert_eq!(pressed_tail_start(&large, 2_500, Some(5_000)), 2);
    assert_eq!(pressed_tail_start(&large, 2_500, None), 1);
    let small = vec![msg(0, 100, User), msg(1, 4_000, Other)];
    assert_eq!(pressed_tail_start(&small, 2_500, Some(5_000)), 1);
    let user = vec![msg(0, 100, Other), msg(1, 14_000, User)];
    assert_eq!(pressed_tail_start(&user, 2_500, Some(5_000)), 1);
}

/// The host's cut of tool results counts every tool result anew when it changes, items that
/// were loaded counted whole included (a rebuilt conversation's carried items), and leaves
/// other items as they are.
#[test]
fn the_cut_of_tool_results_counts_every_item_anew() {
    let mut conv = crate::conv::Conv {
        id: 1,
        agent: "a".into(),
        items: vec![
            msg(0, 300, Role::User),
            msg(1, 5_000, Role::ToolResult),
            sum("sum_a", 0, 2_000),
        ],
        stored: 2,
        last_hash: None,
        replaced: Default::default(),
        tool_result_cap: None,
    };
    assert_eq!(conv.stored_tokens(), 7_300);
    conv.set_tool_result_max_chars(Some(4_000));
    assert_eq!(conv.items[1].tokens, 1_000);
    assert_eq!(conv.stored_tokens(), 3_300);
    conv.set_tool_result_cap(None);
    assert_eq!(conv.stored_tokens(), 7_300);
}
