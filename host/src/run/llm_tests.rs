//! Whose key an engine's model call for a conversation goes with.
use super::*;

fn key(k: &str) -> ClientCredential {
    ClientCredential::new(k).unwrap()
}

/// Under `"client"` each conversation's call goes with the key its client presented last; a
/// request without a key forgets it; a call for an unknown session (or none) goes with the
/// provider's.
#[test]
fn each_conversation_is_answered_with_its_own_clients_key() {
    let book = EngineCredentialBook::new(EngineCredentials::Client);
    book.remember("a", Some(&key("sk-a")));
    book.remember("b", Some(&key("sk-b")));
    assert_eq!(book.for_session(Some("a")).unwrap(), Some(key("sk-a")));
    assert_eq!(book.for_session(Some("b")).unwrap(), Some(key("sk-b")));
    assert_eq!(book.for_session(Some("c")).unwrap(), None);
    assert_eq!(book.for_session(None).unwrap(), None);
    book.remember("a", None);
    assert_eq!(book.for_session(Some("a")).unwrap(), None);
}

/// `"provider"` never hands out a client's key; `"none"` refuses the call with the setting's
/// name, which the engine answers by summarising without a model.
#[test]
fn provider_and_none_never_use_a_clients_key() {
    let provider = EngineCredentialBook::new(EngineCredentials::Provider);
    provider.remember("a", Some(&key("sk-a")));
    assert_eq!(provider.for_session(Some("a")).unwrap(), None);
    let none = EngineCredentialBook::new(EngineCredentials::None);
    let e = none.for_session(Some("a")).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unsupported);
    assert!(
        e.message.contains("serve.engineCredentials"),
        "{}",
        e.message
    );
}

/// The book is bounded: past its cap it starts over rather than grow with every conversation.
#[test]
fn the_book_is_bounded() {
    let book = EngineCredentialBook::new(EngineCredentials::Client);
    for i in 0..CREDENTIAL_BOOK_CAP + 10 {
        book.remember(&format!("s{i}"), Some(&key("sk")));
    }
    assert!(book.keys.lock().unwrap().len() <= CREDENTIAL_BOOK_CAP);
}
