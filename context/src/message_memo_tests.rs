use super::*;

fn message(i: usize) -> SharedMessage {
    Arc::new(AgentMessage::user_text(format!("m{i}"), 0))
}

#[test]
fn a_value_is_made_once_per_message_while_it_lives() {
    let memo = MessageMemo::new();
    let a = message(1);
    let mut made = 0;
    for _ in 0..3 {
        let value = memo.batch(|b| {
            b.get_or_insert_with(&a, |_| {
                made += 1;
                7
            })
        });
        assert_eq!(value, 7);
    }
    assert_eq!(made, 1);
    let stats = memo.stats();
    assert_eq!((stats.hits, stats.misses), (2, 1));
}

#[test]
fn an_equal_message_in_another_allocation_is_made_again() {
    let memo = MessageMemo::new();
    let (a, b) = (message(1), message(1));
    memo.batch(|m| m.get_or_insert_with(&a, |_| 1));
    assert_eq!(memo.batch(|m| m.get_or_insert_with(&b, |_| 2)), 2);
}

#[test]
fn dead_entries_are_swept_and_the_map_stays_bounded() {
    let memo = MessageMemo::new();
    let kept: Vec<_> = (0..10).map(message).collect();
    memo.batch(|m| {
        for k in &kept {
            m.get_or_insert_with(k, |_| 1);
        }
    });
    for round in 0..5 {
        // Messages that die right after their value is made.
        memo.batch(|m| {
            for i in 0..MIN_SWEEP {
                m.get_or_insert_with(&message(round * MIN_SWEEP + i), |_| 2);
            }
        });
    }
    assert!(memo.stats().entries <= 2 * MIN_SWEEP, "{:?}", memo.stats());
    // The live ones survived every sweep.
    let total: i32 = memo.batch(|m| kept.iter().map(|k| m.get_or_insert_with(k, |_| 100)).sum());
    assert_eq!(total, 10);
}
