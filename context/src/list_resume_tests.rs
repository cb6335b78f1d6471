//! A pass resumes only from a list the new one extends, under the same setting, and clones
//! share what was kept.
use super::*;
use rampart_message::{AgentMessage, SharedMessage};

fn message(text: &str) -> SharedMessage {
    Arc::new(AgentMessage::user_text(text, 1))
}

#[test]
fn a_pass_resumes_only_from_a_list_the_new_one_extends_under_the_same_setting() {
    let memo: ListResume<u64, usize> = ListResume::default();
    let first = MessageList::from(vec![message("a"), message("b")]);
    assert_eq!(memo.resume(&first, &32_000), None, "nothing kept yet");
    memo.keep(&first, 32_000, 7);

    let mut grown: Vec<SharedMessage> = first.iter().cloned().collect();
    grown.push(message("c"));
    let grown = MessageList::from(grown);
    assert_eq!(
        memo.resume(&grown, &32_000),
        Some(Resumed { from: 2, state: 7 })
    );
    // Another setting, or a list whose first messages are other messages (equal text is not
    // the same message), runs whole.
    assert_eq!(memo.resume(&grown, &64_000), None);
    let other = MessageList::from(vec![message("a"), message("b"), message("c")]);
    assert_eq!(memo.resume(&other, &32_000), None);
    // A clone sees what the original kept; forgetting is seen by both.
    let clone = memo.clone();
    assert_eq!(clone.resume(&first, &32_000).map(|r| r.from), Some(2));
    clone.forget();
    assert_eq!(memo.resume(&grown, &32_000), None);
}

#[test]
fn a_poisoned_memo_still_answers() {
    let memo: ListResume<(), u64> = ListResume::default();
    let list = MessageList::from(vec![message("a")]);
    memo.keep(&list, (), 3);
    let clone = memo.clone();
    let _ = std::thread::spawn(move || {
        let _held = clone.last.lock().unwrap();
        panic!("a pass panicked while holding the memo");
    })
    .join();
    assert!(memo.last.is_poisoned());
    assert_eq!(memo.resume(&list, &()), Some(Resumed { from: 1, state: 3 }));
}
