//! Where the engine's `systemPromptAddition` joins the system prompt, and what the request is
//! counted as.

use std::sync::Arc;

use rampart_context::tokens::{CountMode, Encoding};
use rampart_prompt::{CACHE_BOUNDARY, split_at_cache_boundary};

use super::*;

/// Right after the marker: the cached prefix is the same with or without an addition.
#[test]
fn the_engines_addition_goes_right_after_the_cache_marker() {
    let system = format!("Stable rules.{CACHE_BOUNDARY}## Runtime\nRuntime: thinking=off");
    let joined = with_addition(Some(&system), Some("Recalled: 3 facts.")).unwrap();
    let (stable, dynamic) = split_at_cache_boundary(&joined).unwrap();
    assert_eq!(stable, "Stable rules.");
    assert_eq!(
        dynamic,
        "Recalled: 3 facts.\n\n## Runtime\nRuntime: thinking=off"
    );
}

/// A prompt without the marker (a client's, a recorded one) gets it first, as it always did.
#[test]
fn without_a_marker_the_addition_goes_first() {
    assert_eq!(
        with_addition(Some("Client prompt."), Some("Added \r\n")).unwrap(),
        "Added\n\nClient prompt."
    );
    assert_eq!(with_addition(None, Some(" Added \r\n")).unwrap(), "Added");
    assert_eq!(with_addition(Some("S"), Some("  \n")).unwrap(), "S");
    assert_eq!(with_addition(None, None), None);
}

/// The request is counted as sent: the marker is not, the tool schemas are.
#[test]
fn the_request_is_counted_as_the_wire_sends_it() {
    let counter = TokenCounter::new(CountMode::Exact(Encoding::O200kBase));
    let messages: MessageList = vec![Arc::new(AgentMessage::user_text("hello", 0))].into();
    let marked = format!("Stable.{CACHE_BOUNDARY}Runtime.");
    let sent = crate::providers::text::wire_system(&marked)
        .text()
        .into_owned();
    let expected = counter.count_text(&sent) + counter.count_total(&messages) + 7;
    assert_eq!(
        request_tokens(&counter, Some(&marked), &messages, 7),
        expected
    );
    assert_eq!(
        request_tokens(&counter, Some(&marked), &messages, 0),
        request_tokens(&counter, Some("Stable.\nRuntime."), &messages, 0)
    );
}
