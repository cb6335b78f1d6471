//! The hygiene choke point (`hygiene::run`) through the public API: reference-style cases, and
//! property tests over arbitrary transcripts.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;
use std::sync::Arc;

use proptest::prelude::*;
use rampart_context::hygiene::{
    self, HygienePolicy, HygieneReport, Provider, SYNTHETIC_RESULT_TEXT, ToolAllowlist,
};
use rampart_message::{AgentMessage, ContentBlock, StopReason};
use rampart_message::{MessageList, SharedMessage};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------
// Builders
// ---------------------------------------------------------------------------

fn user(text: &str, ts: u64) -> AgentMessage {
    AgentMessage::user_text(text, ts)
}

fn assistant(blocks: Vec<Value>, stop: &str, ts: u64) -> AgentMessage {
    serde_json::from_value(json!({
        "role": "assistant",
        "content": blocks,
        "api": "x", "provider": "x", "model": "x",
        "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
        "stopReason": stop, "timestamp": ts
    }))
    .unwrap()
}

fn with_calls(ids: &[&str], stop: &str, ts: u64) -> AgentMessage {
    let blocks = ids
        .iter()
        .map(|id| json!({"type": "toolCall", "id": id, "name": "read", "arguments": {"p": id}}))
        .collect();
    assistant(blocks, stop, ts)
}

fn text_answer(ts: u64) -> AgentMessage {
    assistant(vec![json!({"type": "text", "text": "ok"})], "stop", ts)
}

fn result(id: &str, name: &str, ts: u64) -> AgentMessage {
    AgentMessage::tool_result(id, name, format!("out {id}"), false, ts)
}

fn custom(ts: u64) -> AgentMessage {
    serde_json::from_value(json!({
        "role": "custom", "customType": "note", "content": "n", "display": true, "timestamp": ts
    }))
    .unwrap()
}

fn list(messages: Vec<AgentMessage>) -> MessageList {
    messages.into_iter().map(Arc::new).collect()
}

fn roles(list: &MessageList) -> Vec<&str> {
    list.iter().map(|m| m.role()).collect()
}

fn is_synthetic(message: &AgentMessage) -> bool {
    matches!(message, AgentMessage::ToolResult(r) if r.is_error
        && r.content.blocks().iter().any(|b| matches!(b, ContentBlock::Text(t) if t.text == SYNTHETIC_RESULT_TEXT)))
}

fn distinct_call_ids(message: &AgentMessage) -> Vec<&str> {
    let mut ids: Vec<&str> = Vec::new();
    for call in message.tool_calls() {
        if !call.id.is_empty() && !ids.contains(&call.id.as_str()) {
            ids.push(&call.id);
        }
    }
    ids
}

fn errored(message: &AgentMessage) -> bool {
    matches!(message, AgentMessage::Assistant(a)
        if matches!(a.stop_reason, StopReason::Error | StopReason::Aborted))
}

// ---------------------------------------------------------------------------
// Cases
// ---------------------------------------------------------------------------

#[test]
fn run_repairs_then_limits_then_repairs_again() {
    // Limiting to one user turn cuts the assistant whose result sits after the last user.
    let input = list(vec![
        user("first", 1),
        with_calls(&["a"], "toolUse", 2),
        user("second", 3),
        result("a", "read", 4),
        text_answer(5),
    ]);
    let policy = HygienePolicy {
        history_limit: Some(1),
        ..HygienePolicy::default()
    };
    let (out, report) = hygiene::run(&input, &policy);
    assert_eq!(roles(&out), ["user", "assistant"]);
    assert_eq!(report.pairing.moved, 1);
    assert_eq!(report.limit.dropped, 3);
    assert!(report.changed());
    assert!(Arc::ptr_eq(&out[0], &input[2]));
    assert!(Arc::ptr_eq(&out[1], &input[4]));
}

#[test]
fn a_clean_transcript_passes_untouched_for_every_provider() {
    let input = list(vec![
        user("u", 1),
        with_calls(&["a", "b"], "toolUse", 2),
        result("a", "read", 3),
        result("b", "read", 4),
        text_answer(5),
        user("v", 6),
        text_answer(7),
    ]);
    for provider in [
        Provider::Anthropic,
        Provider::Gemini,
        Provider::OpenAiCompletions,
        Provider::Other,
    ] {
        let (out, report) = hygiene::run(&input, &HygienePolicy::for_provider(provider));
        assert!(MessageList::same_list(&out, &input), "{provider:?}");
        assert_eq!(
            report,
            HygieneReport {
                rounds: 1,
                ..HygieneReport::default()
            }
        );
    }
}

/// A client's item pi has no type for (Claude Code's `system` message, kept whole) stays where
/// it was under every provider's policy, the very same message: hygiene has nothing to repair
/// around it.
#[test]
fn an_opaque_message_stays_in_place_for_every_provider() {
    let item = json!({"role": "system", "content": "Available agent types: Explore"});
    let opaque = rampart_message::opaque::opaque_message(
        rampart_message::opaque::ANTHROPIC_MESSAGES,
        item.as_object().cloned().unwrap(),
        2,
    );
    let input = list(vec![
        user("u", 1),
        opaque,
        with_calls(&["a"], "toolUse", 3),
        result("a", "read", 4),
        text_answer(5),
        user("v", 6),
    ]);
    for provider in [
        Provider::Anthropic,
        Provider::Gemini,
        Provider::OpenAiCompletions,
        Provider::Other,
    ] {
        let (out, _) = hygiene::run(&input, &HygienePolicy::for_provider(provider));
        let at = out
            .iter()
            .position(|m| m.role() == rampart_message::opaque::OPAQUE_ROLE)
            .unwrap_or_else(|| panic!("{provider:?} dropped it: {:?}", roles(&out)));
        assert_eq!(at, 1, "{provider:?}: {:?}", roles(&out));
        assert!(Arc::ptr_eq(&out[1], &input[1]), "{provider:?}");
    }
}

#[test]
fn an_allowlist_removes_calls_and_their_results() {
    let input = list(vec![
        user("u", 1),
        assistant(
            vec![
                json!({"type": "toolCall", "id": "a", "name": "read", "arguments": {}}),
                json!({"type": "toolCall", "id": "b", "name": "write", "arguments": {}}),
            ],
            "toolUse",
            2,
        ),
        result("a", "read", 3),
        result("b", "write", 4),
        text_answer(5),
    ]);
    let policy = HygienePolicy {
        allowed_tool_names: Some(ToolAllowlist::new(["read"])),
        ..HygienePolicy::default()
    };
    let (out, report) = hygiene::run(&input, &policy);
    assert_eq!(
        roles(&out),
        ["user", "assistant", "toolResult", "assistant"]
    );
    assert_eq!(report.sanitize.dropped_call_ids, ["b"]);
    assert_eq!(report.pairing.dropped_orphans, 1);
}

#[test]
fn anthropic_policy_settles_in_one_run() {
    // An errored turn's result is preserved by the first repair, dropped by the second; the
    // Anthropic validation then strips the now unanswered call, drops the turn it left empty,
    // and merges the users on either side of it.
    let input = list(vec![
        user("u", 1),
        with_calls(&["a"], "error", 2),
        result("a", "read", 3),
        user("again", 4),
        result("zzz", "read", 5),
        user("and again", 6),
        text_answer(7),
    ]);
    let policy = HygienePolicy::for_provider(Provider::Anthropic);
    let (out, report) = hygiene::run(&input, &policy);
    assert_eq!(roles(&out), ["user", "assistant"]);
    assert_eq!(report.anthropic.merged_users, 2);
    assert_eq!(report.anthropic.dropped_empty_turns, 1);
    assert_eq!(report.pairing_after_limit.dropped_errored_results, 1);
    let (again, report) = hygiene::run(&out, &policy);
    assert!(MessageList::same_list(&again, &out));
    assert!(!report.changed());
}

#[test]
fn the_report_is_an_event_payload() {
    let input = list(vec![with_calls(&["a"], "toolUse", 1)]);
    let (_, report) = hygiene::run(&input, &HygienePolicy::for_provider(Provider::Gemini));
    let value = serde_json::to_value(&report).unwrap();
    assert_eq!(value["pairing"]["added"], json!(["a"]));
    assert_eq!(value["turnOrdering"]["bootstrapAdded"], json!(true));
    let back: HygieneReport = serde_json::from_value(value).unwrap();
    assert_eq!(back, report);
}

// ---------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------

const POOL: [&str; 5] = ["a", "b", "c", "d", "e"];

#[derive(Debug, Clone)]
enum Item {
    User,
    Custom,
    Assistant {
        calls: Vec<usize>,
        stop: &'static str,
    },
    Result {
        id: usize,
        blank_name: bool,
    },
    Summary,
}

fn item() -> impl Strategy<Value = Item> {
    prop_oneof![
        3 => Just(Item::User),
        1 => Just(Item::Custom),
        1 => Just(Item::Summary),
        5 => (
            prop::collection::vec(0..POOL.len(), 0..=3),
            prop::sample::select(vec!["stop", "toolUse", "toolUse", "error", "aborted", "length"]),
        )
            .prop_map(|(calls, stop)| Item::Assistant { calls, stop }),
        5 => (0..POOL.len(), prop::bool::weighted(0.1))
            .prop_map(|(id, blank_name)| Item::Result { id, blank_name }),
    ]
}

fn build(items: &[Item]) -> MessageList {
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let ts = i as u64 * 10;
            Arc::new(match item {
                Item::User => user("u", ts),
                Item::Custom => custom(ts),
                Item::Summary => serde_json::from_value(json!({
                    "role": "compactionSummary", "summary": "s", "tokensBefore": 1, "timestamp": ts
                }))
                .unwrap(),
                Item::Assistant { calls, stop } => {
                    let ids: Vec<&str> = calls.iter().map(|c| POOL[*c]).collect();
                    with_calls(&ids, stop, ts)
                }
                Item::Result { id, blank_name } => {
                    result(POOL[*id], if *blank_name { " " } else { "read" }, ts)
                }
            })
        })
        .collect()
}

/// A transcript that is already clean: user turns, tool rounds answered in order, answers.
fn clean_transcript() -> impl Strategy<Value = MessageList> {
    let round = (
        prop::sample::subsequence(POOL.to_vec(), 1..=3),
        prop::bool::weighted(0.15),
    );
    let turn = (prop::collection::vec(round, 0..3), prop::bool::ANY);
    prop::collection::vec(turn, 0..8).prop_map(|turns| {
        let mut out = Vec::new();
        let mut ts = 0;
        let mut tick = || {
            ts += 1;
            ts
        };
        for (rounds, custom_note) in turns {
            out.push(user("u", tick()));
            if custom_note {
                out.push(custom(tick()));
            }
            for (ids, failed) in rounds {
                if failed {
                    out.push(with_calls(&ids, "error", tick()));
                    break;
                }
                out.push(with_calls(&ids, "toolUse", tick()));
                for id in ids {
                    out.push(result(id, "read", tick()));
                }
            }
            out.push(text_answer(tick()));
        }
        list(out)
    })
}

/// Checks the pairing invariants and returns an error message naming the first violation.
fn check_pairing(out: &MessageList) -> Result<(), String> {
    let mut i = 0;
    while i < out.len() {
        let message = out[i].as_ref();
        if message.tool_call_id().is_some() {
            return Err(format!("orphan result at {i}: {out:?}"));
        }
        i += 1;
        if !matches!(message, AgentMessage::Assistant(_)) {
            continue;
        }
        let ids = distinct_call_ids(message);
        let expected: &[&str] = if errored(message) { &[] } else { &ids };
        for (k, id) in expected.iter().enumerate() {
            match out.get(i + k).and_then(|m| m.tool_call_id()) {
                Some(got) if got == *id => {}
                other => return Err(format!("call {id} answered by {other:?} at {}", i + k)),
            }
        }
        i += expected.len();
    }
    Ok(())
}

/// The non-result messages, as (role, timestamp): what the repair must keep in order.
fn others(list: &MessageList) -> Vec<(String, Option<u64>)> {
    list.iter()
        .filter(|m| m.tool_call_id().is_none())
        .map(|m| (m.role().to_owned(), m.timestamp()))
        .collect()
}

fn pointers(list: &MessageList) -> HashSet<*const AgentMessage> {
    list.iter().map(Arc::as_ptr).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn run_leaves_every_call_answered_and_nothing_orphaned(
        items in prop::collection::vec(item(), 0..40)
    ) {
        let input = build(&items);
        let (out, report) = hygiene::run(&input, &HygienePolicy::default());

        check_pairing(&out).map_err(TestCaseError::fail)?;
        prop_assert_eq!(others(&out), others(&input));

        // Unchanged messages are the input's allocations; new ones are only synthetic results,
        // renamed results and assistants whose stale usage was zeroed.
        let shared = pointers(&input);
        for message in out.iter() {
            let new = !shared.contains(&Arc::as_ptr(message));
            let allowed = is_synthetic(message)
                || matches!(message.as_ref(), AgentMessage::ToolResult(_) | AgentMessage::Assistant(_));
            prop_assert!(!new || allowed, "unexpected new message {:?}", message);
        }
        prop_assert_eq!(report.changed(), !MessageList::same_list(&out, &input));

        let (again, report) = hygiene::run(&out, &HygienePolicy::default());
        prop_assert!(MessageList::same_list(&again, &out), "second run changed {:?}", report);
        prop_assert!(!report.changed());
    }

    #[test]
    fn run_is_a_fixed_point_for_every_provider_and_limit(
        items in prop::collection::vec(item(), 0..40),
        provider in prop::sample::select(vec![
            Provider::Anthropic, Provider::Gemini, Provider::OpenAiCompletions, Provider::Other,
        ]),
        limit in prop::option::of(-1i64..5),
    ) {
        let policy = HygienePolicy { history_limit: limit, ..HygienePolicy::for_provider(provider) };
        let (out, _) = hygiene::run(&build(&items), &policy);
        let (again, report) = hygiene::run(&out, &policy);
        prop_assert!(MessageList::same_list(&again, &out), "second run changed {:?}", report);
        if !policy.validate_anthropic {
            check_pairing(&out).map_err(TestCaseError::fail)?;
        }
    }

    #[test]
    fn a_clean_transcript_comes_back_as_the_same_list(input in clean_transcript()) {
        let (out, report) = hygiene::run(&input, &HygienePolicy::default());
        prop_assert!(MessageList::same_list(&out, &input), "changed: {:?}", report);
        prop_assert!(!report.changed());
    }
}

#[test]
fn shared_messages_survive_a_changed_list() {
    let input = list(vec![
        user("u", 1),
        with_calls(&["a"], "toolUse", 2),
        text_answer(3),
    ]);
    let (out, _) = hygiene::run(&input, &HygienePolicy::default());
    let synthetic: Vec<&SharedMessage> = out.iter().filter(|m| is_synthetic(m)).collect();
    assert_eq!(synthetic.len(), 1);
    assert!(Arc::ptr_eq(&out[0], &input[0]));
    assert!(Arc::ptr_eq(&out[1], &input[1]));
    assert!(Arc::ptr_eq(&out[3], &input[2]));
}

/// After a compaction every reply still in the context has stale usage, and each turn hands
/// hygiene the same history again. With a memo the zeroed copy of a reply is made once and the
/// same allocation is sent on every later turn (so the token counter's memo and the engine
/// ABI's pointer-identity deltas see it as unchanged); the result is what `run` gives.
#[test]
fn with_a_memo_stale_replies_are_copied_once_across_turns() {
    let summary: AgentMessage = serde_json::from_value(json!({
        "role": "compactionSummary", "summary": "earlier", "tokensBefore": 10, "timestamp": 1_000_000u64
    }))
    .unwrap();
    let mut history: Vec<SharedMessage> = vec![Arc::new(summary)];
    let memo = hygiene::HygieneMemo::new();
    let policy = HygienePolicy::default();
    let mut previous: Option<MessageList> = None;
    let turns = 200;
    for turn in 0..turns {
        history.push(Arc::new(user("again", 50 + turn)));
        history.push(Arc::new(text_answer(60 + turn)));
        let input = MessageList::from(history.clone());
        let (with, report) = hygiene::run_with(&input, &policy, &memo);
        let (without, _) = hygiene::run(&input, &policy);
        assert_eq!(report.stale_usage.zeroed, turn as usize + 1);
        assert_eq!(with.to_vec(), without.to_vec());
        if let Some(previous) = &previous {
            // Every message the previous turn sent is sent again as the same allocation.
            assert!(
                previous
                    .iter()
                    .zip(with.iter())
                    .all(|(a, b)| Arc::ptr_eq(a, b))
            );
        }
        previous = Some(with);
    }
    // One copy per reply, not one per reply per turn (20,100 without the memo).
    assert_eq!(memo.stats().misses, turns);
}
