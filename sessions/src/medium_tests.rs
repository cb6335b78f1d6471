use std::time::Duration;

use rampart_message::AgentMessage;

use super::*;
use crate::entry::SessionHeader;
use crate::{Session, SessionOptions};

fn user(text: &str) -> AgentMessage {
    AgentMessage::user_text(text, 1)
}

fn texts(session: &Session) -> Vec<String> {
    session
        .context()
        .messages
        .iter()
        .map(|m| match m.as_ref() {
            AgentMessage::User(u) => u.content.joined_text(),
            other => other.role().to_owned(),
        })
        .collect()
}

#[test]
fn a_session_on_a_memory_medium_is_read_back_by_another_handle() {
    let medium = MemoryMedium::new("memory:one");
    let mut writer = Session::create_on(
        Box::new(medium.clone()),
        SessionHeader::new("/w"),
        SessionOptions::default(),
    )
    .unwrap();
    writer.append_message(user("first")).unwrap();
    writer.append_message(user("second")).unwrap();
    writer.sync().unwrap();

    let reader = Session::open_on(Box::new(medium.clone()), SessionOptions::default()).unwrap();
    assert_eq!(reader.header().id, writer.header().id);
    assert_eq!(texts(&reader), ["first", "second"]);
    // The bytes are pi's JSONL: a header line and one line per entry.
    let text = String::from_utf8(medium.contents()).unwrap();
    assert_eq!(text.lines().count(), 3);
    assert!(
        text.lines()
            .next()
            .unwrap()
            .contains("\"type\":\"session\"")
    );
}

#[test]
fn two_handles_catch_up_with_each_other_before_they_append() {
    let medium = MemoryMedium::new("memory:shared");
    let mut a = Session::create_on(
        Box::new(medium.clone()),
        SessionHeader::new("/w"),
        SessionOptions::default(),
    )
    .unwrap();
    let mut b = Session::open_on(Box::new(medium.clone()), SessionOptions::default()).unwrap();
    a.append_message(user("from a")).unwrap();
    // b never saw a's entry; its append catches up first, so it continues a's history
    // instead of forking the tree.
    b.append_message(user("from b")).unwrap();
    a.hold(Duration::from_secs(1)).unwrap();
    a.release();
    assert_eq!(texts(&a), ["from a", "from b"]);
    assert_eq!(texts(&b), ["from a", "from b"]);
}

#[test]
fn the_memory_lock_excludes_other_handles_until_released() {
    let medium = MemoryMedium::new("memory:locked");
    let mut a = Session::create_on(
        Box::new(medium.clone()),
        SessionHeader::new("/w"),
        SessionOptions::default(),
    )
    .unwrap();
    let mut b = Session::open_on(Box::new(medium.clone()), SessionOptions::default()).unwrap();
    a.hold(Duration::from_secs(1)).unwrap();
    let err = b.hold(Duration::from_millis(30)).unwrap_err();
    assert!(
        matches!(err, SessionError::Locked { .. }),
        "a second holder must wait and then give up: {err}"
    );
    a.release();
    b.hold(Duration::from_secs(1)).unwrap();
}

#[test]
fn a_medium_that_holds_a_session_is_never_overwritten_by_create() {
    let medium = MemoryMedium::new("memory:taken");
    Session::create_on(
        Box::new(medium.clone()),
        SessionHeader::new("/w"),
        SessionOptions::default(),
    )
    .unwrap();
    let before = medium.contents();
    let err = Session::create_on(
        Box::new(medium.clone()),
        SessionHeader::new("/w"),
        SessionOptions::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("open it instead"), "{err}");
    assert_eq!(medium.contents(), before);
}

#[test]
fn a_file_medium_refuses_to_write_once_its_path_names_another_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let mut session =
        Session::create(&path, SessionHeader::new("/w"), SessionOptions::default()).unwrap();
    std::fs::rename(&path, dir.path().join("moved.jsonl")).unwrap();
    std::fs::write(&path, b"").unwrap();
    let err = session.append_message(user("lost?")).unwrap_err();
    assert!(
        matches!(err, SessionError::Conflict { .. }),
        "a replaced file must not be written: {err}"
    );
}
