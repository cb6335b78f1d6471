use super::*;

#[test]
fn subagent_keys_bare_or_under_an_agent_are_minimal() {
    assert_eq!(mode_for_session("subagent:abc", false), PromptMode::Minimal);
    assert_eq!(
        mode_for_session("agent:main:subagent:abc", false),
        PromptMode::Minimal
    );
    assert_eq!(
        mode_for_session("Agent:Work:SubAgent:x", false),
        PromptMode::Minimal
    );
}

#[test]
fn cron_keys_under_an_agent_are_minimal() {
    assert_eq!(
        mode_for_session("agent:main:cron:nightly", false),
        PromptMode::Minimal
    );
    assert_eq!(
        SessionKind::of("agent:main:cron:nightly"),
        SessionKind::Cron
    );
    // OpenClaw's rule: `cron:` counts only after `agent:<id>:`.
    assert_eq!(mode_for_session("cron:nightly", false), PromptMode::Full);
}

#[test]
fn other_keys_are_full_unless_a_tool_allow_list_is_set() {
    assert_eq!(mode_for_session("agent:main:main", false), PromptMode::Full);
    assert_eq!(
        mode_for_session("agent:main:telegram:group:1", false),
        PromptMode::Full
    );
    assert_eq!(mode_for_session("serve:abc", false), PromptMode::Full);
    assert_eq!(
        mode_for_session("agent:main:main", true),
        PromptMode::Minimal
    );
    // A key that merely mentions a subagent further on is not one.
    assert_eq!(
        SessionKind::of("agent:main:telegram:subagent:x"),
        SessionKind::Main
    );
}
