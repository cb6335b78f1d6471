//! Where the databases go: a replay's scratch directory always, else the user's choice, else
//! the host's place beside the sessions.
use std::path::PathBuf;

use rampart_engine_api::host::StateDir;

use super::state_dir_in_effect;

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
