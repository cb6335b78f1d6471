//! The file watcher picks up edits and syncs after its debounce.

use std::sync::mpsc;
use std::time::Duration;

use rampart_memory::{MemorySettings, MemoryWatcher, SearchParams, SyncReason, SyncReport};

use crate::common::Agent;

/// Waits for the watcher's next successful sync that satisfies `want`. The generous limit
/// only keeps a broken watcher from hanging the run; the test asserts what was synced.
fn wait_for(rx: &mpsc::Receiver<SyncReport>, want: impl Fn(&SyncReport) -> bool) -> SyncReport {
    loop {
        let report = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the watcher never synced the change");
        if want(&report) {
            return report;
        }
    }
}

fn found(index: &rampart_memory::MemoryIndex, word: &str) -> Vec<String> {
    index
        .search(word, &SearchParams::default())
        .unwrap()
        .results
        .into_iter()
        .map(|r| r.path)
        .collect()
}

#[test]
fn edits_are_picked_up_after_the_debounce() {
    let agent = Agent::new();
    agent.write("MEMORY.md", "The office plant is a ficus.\n");
    let settings = MemorySettings {
        watch_debounce: Duration::from_millis(100),
        ..Default::default()
    };
    let (index, _) = agent.open(settings, None);
    index.sync(SyncReason::Manual).unwrap();
    let (tx, rx) = mpsc::channel();
    let watcher = MemoryWatcher::start(
        &index,
        Some(Box::new(move |result| {
            if let Ok(report) = result {
                let _ = tx.send(report.clone());
            }
        })),
    )
    .unwrap();

    // memory/ did not exist when the watcher started.
    agent.write("memory/2026-05-01.md", "Ordered a marimba for the lobby.\n");
    let report = wait_for(&rx, |r| r.files_added >= 1);
    assert_eq!(report.reason, SyncReason::Watch);
    assert_eq!(found(&index, "marimba"), vec!["memory/2026-05-01.md"]);

    agent.write("MEMORY.md", "The office plant is a monstera now.\n");
    wait_for(&rx, |r| r.files_changed >= 1);
    assert_eq!(found(&index, "monstera"), vec!["MEMORY.md"]);
    assert!(found(&index, "ficus").is_empty());

    agent.write("memory/sub/deep.md", "A nested note about the xylophone.\n");
    wait_for(&rx, |r| r.files_added >= 1);
    assert_eq!(found(&index, "xylophone"), vec!["memory/sub/deep.md"]);

    agent.remove("memory/2026-05-01.md");
    wait_for(&rx, |r| r.files_removed >= 1);
    assert!(found(&index, "marimba").is_empty());
    assert!(!index.status().dirty);
    watcher.stop();

    // Stopped: a new file is not picked up by anything but a sync.
    agent.write("memory/after.md", "The kazoo arrived.\n");
    std::thread::sleep(Duration::from_millis(400));
    assert!(found(&index, "kazoo").is_empty());
}
