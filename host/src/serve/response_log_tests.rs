use serde_json::json;

use super::*;

fn stored(conversation: &str, text: &str) -> StoredResponse {
    StoredResponse {
        conversation: conversation.into(),
        messages: Arc::new(vec![Arc::new(rampart_message::AgentMessage::user_text(
            text, 0,
        ))]),
    }
}

#[test]
fn a_remembered_answer_resolves_in_its_own_conversation_only() {
    let log = ResponseLog::default();
    log.remember("resp_1", stored("thread-a", "hello"));
    let found = log.resolve(&json!("resp_1"), Some("thread-a")).unwrap();
    assert_eq!(found.messages.len(), 1);
    assert!(log.resolve(&json!("resp_1"), None).is_ok());
    let e = log.resolve(&json!("resp_1"), Some("thread-b")).unwrap_err();
    assert!(
        matches!(&e, PreviousResponseError::OtherConversation { theirs, .. } if theirs == "thread-a")
    );
    assert!(e.to_string().contains("another conversation"), "{e}");
}

#[test]
fn unknown_and_malformed_ids_are_refused_saying_why() {
    let log = ResponseLog::default();
    let e = log.resolve(&json!("resp_gone"), None).unwrap_err();
    assert_eq!(e, PreviousResponseError::Unknown("resp_gone".into()));
    assert!(
        e.to_string()
            .contains("`previous_response_id` \"resp_gone\""),
        "{e}"
    );
    assert!(
        e.to_string().contains("whole conversation in `input`"),
        "{e}"
    );
    assert_eq!(
        log.resolve(&json!(7), None).unwrap_err(),
        PreviousResponseError::NotAString
    );
}

#[test]
fn the_log_forgets_the_oldest_past_its_capacity() {
    let log = ResponseLog::default();
    for i in 0..=CAPACITY {
        log.remember(&format!("resp_{i}"), stored("c", "x"));
    }
    assert!(log.resolve(&json!("resp_0"), None).is_err());
    assert!(log.resolve(&json!("resp_1"), None).is_ok());
    assert!(
        log.resolve(&json!(format!("resp_{CAPACITY}")), None)
            .is_ok()
    );
}

#[test]
fn long_histories_are_bounded_by_their_messages_and_the_newest_is_kept() {
    let log = ResponseLog::default();
    let long = |n: usize| StoredResponse {
        conversation: "c".into(),
        messages: Arc::new(
            (0..n)
                .map(|_| Arc::new(rampart_message::AgentMessage::user_text("x", 0)))
                .collect(),
        ),
    };
    log.remember("resp_a", long(MAX_MESSAGES / 2));
    log.remember("resp_b", long(MAX_MESSAGES / 2));
    assert!(log.resolve(&json!("resp_a"), None).is_ok());
    log.remember("resp_c", long(10));
    assert!(
        log.resolve(&json!("resp_a"), None).is_err(),
        "the oldest goes first"
    );
    assert!(log.resolve(&json!("resp_b"), None).is_ok());
    log.remember("resp_huge", long(MAX_MESSAGES + 1));
    assert!(
        log.resolve(&json!("resp_huge"), None).is_ok(),
        "the newest stays"
    );
    assert!(log.resolve(&json!("resp_c"), None).is_err());
}
