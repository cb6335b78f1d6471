//! Where the databases go: a replay's scratch directory always, else the user's choice, else
//! the host's place beside the sessions.
use std::path::PathBuf;

use rampart_engine_api::host::StateDir;

use super::{Config, state_dir_in_effect};

fn given(path: &str, scratch: bool) -> Option<StateDir> {
    Some(StateDir {
        path: path.into(),
        scratch,
    })
}

#[test]
fn a_scratch_directory_wins_so_a_replay_never_writes_into_real_state() {
    let mine = Some(PathBuf::from("/var/lib/mine"));
    assert_eq!(
        state_dir_in_effect(mine.clone(), given("/tmp/replay/engines/lossless", true)),
        Some(PathBuf::from("/tmp/replay/engines/lossless"))
    );
    assert_eq!(
        state_dir_in_effect(mine.clone(), given("/srv/sessions/engines/lossless", false)),
        mine,
        "the user's configured place wins over the host's suggestion"
    );
    assert_eq!(
        state_dir_in_effect(None, given("/srv/sessions/engines/lossless", false)),
        Some(PathBuf::from("/srv/sessions/engines/lossless"))
    );
    assert_eq!(
        state_dir_in_effect(None, None),
        None,
        "an older host: the default"
    );
}

/// A sweep target outside (0, 1] is refused with its key, not clamped.
#[test]
fn a_sweep_target_out_of_range_is_refused_with_its_key() {
    for bad in [0.0, -0.5, 1.5] {
        let err = Config::from_json(&serde_json::json!({"sweepTarget": bad})).unwrap_err();
        assert!(err.message.contains("sweepTarget"), "{}", err.message);
    }
    let ok = Config::from_json(&serde_json::json!({"sweepTarget": 0.3})).unwrap();
    assert_eq!(ok.sweep_target_tokens(10_000), 3_000);
    // Never above the threshold, whatever the two settings say.
    let high = Config::from_json(&serde_json::json!({"sweepTarget": 1.0, "contextThreshold": 0.5}))
        .unwrap();
    assert_eq!(high.sweep_target_tokens(10_000), 5_000);
}
