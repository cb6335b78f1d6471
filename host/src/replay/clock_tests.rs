#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use rampart_engine_api::AgentMessage;

use super::*;

fn recorded(times: &[u64]) -> Recorded {
    Recorded {
        file: PathBuf::from("t.jsonl"),
        format: "pi-v3".into(),
        cwd: "/w".into(),
        system_prompt: Some("be brief".into()),
        messages: times
            .iter()
            .map(|t| Arc::new(AgentMessage::user_text(format!("at {t}"), *t)))
            .collect(),
        sessions_in_file: 1,
        index: 1,
        warnings: Vec::new(),
        subagents: Vec::new(),
    }
}

#[test]
fn the_clock_starts_at_the_first_recorded_time() {
    assert_eq!(start(&recorded(&[0, 1_000, 2_000])).now_ms(), 1_000);
    assert_eq!(start(&recorded(&[0, 0])).now_ms(), 0);
}

#[test]
fn the_session_id_is_the_same_for_the_same_history_and_key_only() {
    let r = recorded(&[1_000, 2_000]);
    let id = session_id(&r, "replay-t", 0);
    assert_eq!(id, session_id(&recorded(&[1_000, 2_000]), "replay-t", 0));
    assert_eq!(id.len(), 36);
    assert_eq!(&id[14..15], "4", "uuid v4 shape: {id}");
    assert_ne!(id, session_id(&r, "replay-t-2", 0));
    assert_ne!(id, session_id(&r, "replay-t", 1));
    assert_ne!(id, session_id(&recorded(&[1_000, 2_001]), "replay-t", 0));
}
