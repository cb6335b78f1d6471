use rampart_message::AgentMessage;
use rampart_sessions::entry::{CompactionEntry, CustomEntry, Extra};
use serde_json::json;

use super::*;

fn flush_marker(cycle: u64) -> EntryBody {
    EntryBody::Custom(CustomEntry {
        custom_type: FLUSH_ENTRY.to_owned(),
        data: Some(json!({ "cycle": cycle })),
        extra: Extra::new(),
    })
}

fn compaction(first_kept: &str) -> EntryBody {
    EntryBody::Compaction(CompactionEntry {
        summary: "s".into(),
        first_kept_entry_id: first_kept.into(),
        tokens_before: 1,
        details: None,
        from_hook: None,
        extra: Extra::new(),
    })
}

/// The flush gate's view of the branch, kept turn by turn, reads each entry of a growing
/// session once (a walk from the root per model call made a long replay quadratic), and
/// always equals a walk from the root.
#[test]
fn the_flush_state_of_a_growing_session_reads_each_entry_once() {
    let mut tree = SessionTree::new();
    let mut kept = BranchFold::new();
    let turns = 3_000u64;
    for turn in 0..turns {
        let first = tree
            .append(EntryBody::from_message(AgentMessage::user_text("hi", 1)))
            .id
            .clone();
        match turn % 100 {
            10 => {
                tree.append(flush_marker(turn / 100));
            }
            50 => {
                tree.append(compaction(&first));
            }
            _ => {
                tree.append(EntryBody::from_message(AgentMessage::assistant_text(
                    "ok", "api", "p", "m", 2,
                )));
            }
        }
        let state = flush_state(&tree, &mut kept);
        assert_eq!(state, flush_state(&tree, &mut BranchFold::new()));
    }
    assert_eq!(
        flush_state(&tree, &mut kept),
        FlushState {
            compactions: 30,
            flushed_in_cycle: Some(29),
        }
    );
    // Two entries a turn, each read once; a walk per turn would have read about 9 million.
    assert_eq!(kept.folded(), 2 * turns);
}
