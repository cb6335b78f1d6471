use rampart_sessions::entry::SessionHeader;
use rampart_sessions::store::UsageSample;
use rampart_sessions::store::shared::{EntryFields, MemoryStore};

use super::*;

fn usage(context_used: u64) -> RegistryChange {
    RegistryChange::Usage(UsageSample {
        input: context_used,
        context_used,
        ..UsageSample::default()
    })
}

#[test]
fn changes_are_written_in_order_within_a_batch_and_on_stop() {
    let store = MemoryStore::new(None);
    let shared: Arc<dyn SharedStore> = Arc::new(store.clone());
    for key in ["a", "b"] {
        shared
            .create(
                &mut |_| key.to_owned(),
                SessionHeader::new("/w"),
                EntryFields::new(),
            )
            .unwrap();
    }
    let batcher = RegistryBatcher::start(Arc::clone(&shared), 5);
    batcher.add("a".into(), vec![usage(10)]);
    batcher.add("b".into(), vec![usage(20)]);
    batcher.add("a".into(), vec![usage(30)]);
    // Written by the thread within a few batch periods.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while shared.get("b").unwrap().unwrap().total_tokens != Some(20) {
        assert!(
            std::time::Instant::now() < deadline,
            "the batch was never written"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The newest change of a conversation wins, as if written one by one.
    assert_eq!(shared.get("a").unwrap().unwrap().total_tokens, Some(30));
    batcher.add("b".into(), vec![usage(40)]);
    batcher.stop();
    assert_eq!(shared.get("b").unwrap().unwrap().total_tokens, Some(40));
    // A conversation gone from the registry does not stop the others.
    batcher.add("gone".into(), vec![usage(1)]);
    batcher.add("a".into(), vec![usage(50)]);
    batcher.flush();
    assert_eq!(shared.get("a").unwrap().unwrap().total_tokens, Some(50));
}
