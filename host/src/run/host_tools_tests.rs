//! The host's tools without an engine that offers any: the memory tools alone, and the
//! client's names taking precedence.
use super::*;

#[test]
fn no_tools_answer_nothing_and_offer_nothing() {
    let tools = HostTools::none();
    assert!(tools.is_empty());
    assert!(tools.specs().is_empty());
    assert!(!tools.answers("memory_search"));
}

#[test]
fn a_client_tool_of_a_memory_name_takes_the_pair_out() {
    let client = [ToolSpec {
        name: "memory_get".into(),
        description: None,
        parameters: serde_json::json!({"type": "object"}),
    }];
    // Without a memory slot there is nothing to take out; the rule must not invent tools.
    let tools = HostTools::none().without_client_tools(&client);
    assert!(tools.names().is_empty());
}
