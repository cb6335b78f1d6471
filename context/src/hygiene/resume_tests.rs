//! A resumed hygiene run agrees with a full one: random transcripts grown in random steps,
//! every provider family's policy, compared message by message and report by report.

use std::sync::Arc;

use serde_json::json;

use super::super::{HygieneMemo, HygienePolicy, Provider, run, run_with};
use crate::hygiene::test_support::{answer, assistant_blocks, calls, result, user};
use rampart_message::{AgentMessage, MessageList, SharedMessage};

/// A small deterministic generator (xorshift), so a failure names its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn from(value: serde_json::Value) -> AgentMessage {
    serde_json::from_value(value).unwrap()
}

/// Any message hygiene has a rule for, or none.
fn any_message(rng: &mut Rng, pending: &mut Vec<String>, serial: &mut u32) -> AgentMessage {
    *serial += 1;
    match rng.below(13) {
        0 => user(&format!("question {serial}")),
        1 => answer(&format!("answer {serial}")),
        2 => {
            let ids: Vec<String> = (0..=rng.below(2))
                .map(|k| format!("c{serial}_{k}"))
                .collect();
            pending.extend(ids.iter().cloned());
            let pairs: Vec<(&str, &str)> = ids.iter().map(|id| (id.as_str(), "read")).collect();
            calls(&pairs, "toolUse")
        }
        3 if !pending.is_empty() => {
            let id = pending.remove(rng.below(pending.len() as u64) as usize);
            result(&id, "read")
        }
        3 | 4 => result(&format!("orphan{serial}"), "read"),
        5 => assistant_blocks(vec![], "error"),
        6 => assistant_blocks(vec![json!({"type": "text", "text": "half"})], "error"),
        7 => from(json!({"role": "user", "timestamp": 1,
            "content": [{"type": "image", "data": "aGk=", "mimeType": "image/png"}]})),
        8 => from(json!({"role": "compactionSummary", "summary": "before",
            "tokensBefore": 100, "timestamp": rng.below(4)})),
        9 => from(
            json!({"role": "custom", "customType": "note", "content": "fyi",
            "display": true, "timestamp": 1}),
        ),
        10 => assistant_blocks(
            vec![
                json!({"type": "thinking", "thinking": "hmm", "thinkingSignature": "sig"}),
                json!({"type": "text", "text": "so"}),
            ],
            "stop",
        ),
        11 => user(""),
        _ => from(
            json!({"role": "assistant", "content": [{"type": "text", "text": "late"}],
            "api": "anthropic-messages", "provider": "anthropic", "model": "m",
            "usage": {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0,
                "totalTokens": 15, "cost": {"input": 0, "output": 0, "cacheRead": 0,
                "cacheWrite": 0, "total": 0}},
            "stopReason": "stop", "timestamp": 10}),
        ),
    }
}

/// A plain message of the role that alternates with `last`.
fn plain_after(last: Option<&SharedMessage>, serial: &mut u32) -> AgentMessage {
    *serial += 1;
    match last.map(|m| m.role()) {
        Some("user") => answer(&format!("reply {serial}")),
        _ => user(&format!("prompt {serial}")),
    }
}

fn policies() -> Vec<HygienePolicy> {
    let mut all: Vec<HygienePolicy> = [
        Provider::Anthropic,
        Provider::Gemini,
        Provider::OpenAiCompletions,
        Provider::Other,
    ]
    .into_iter()
    .map(HygienePolicy::for_provider)
    .collect();
    let mut limited = HygienePolicy::for_provider(Provider::Anthropic);
    limited.history_limit = Some(2);
    all.push(limited);
    all
}

fn values(list: &MessageList) -> Vec<AgentMessage> {
    list.iter().map(|m| (**m).clone()).collect()
}

#[test]
fn a_resumed_run_gives_what_a_full_run_gives() {
    let mut resumed_runs = 0;
    for policy in policies() {
        for seed in 1..=400u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let memo = HygieneMemo::new();
            let (mut pending, mut serial) = (Vec::new(), 0u32);
            let mut history: Vec<SharedMessage> = Vec::new();
            for step in 0..12 {
                match rng.below(10) {
                    // Another conversation (or a compaction that rebuilt the list).
                    0 => history.clear(),
                    // The common turn: plain messages that alternate.
                    1..=6 => {
                        for _ in 0..=rng.below(3) {
                            let m = plain_after(history.last(), &mut serial);
                            history.push(Arc::new(m));
                        }
                    }
                    _ => {
                        for _ in 0..=rng.below(3) {
                            let m = any_message(&mut rng, &mut pending, &mut serial);
                            history.push(Arc::new(m));
                        }
                    }
                }
                let input = MessageList::from(history.clone());
                let (kept, kept_report) = run_with(&input, &policy, &memo);
                let (fresh, fresh_report) = run(&input, &policy);
                assert_eq!(
                    values(&kept),
                    values(&fresh),
                    "seed {seed}, step {step}, policy {policy:?}"
                );
                assert_eq!(
                    kept_report, fresh_report,
                    "seed {seed}, step {step}, policy {policy:?}"
                );
                assert_eq!(
                    MessageList::same_list(&kept, &input),
                    MessageList::same_list(&fresh, &input),
                    "a run that changed nothing returns its input: seed {seed}, step {step}"
                );
            }
            resumed_runs += memo.resumed_runs();
        }
    }
    // The comparisons above were made on resumed runs, not only on full ones.
    assert!(resumed_runs > 1_000, "{resumed_runs} runs resumed");
}

/// The common turn is resumed, not recomputed: a reply made after a compaction and dated
/// before it (the kept tail) has its usage zeroed by the resumed run as by the full pass, and
/// the copies are the memo's own.
#[test]
fn a_long_plain_history_resumes_turn_after_turn() {
    let policy = HygienePolicy::for_provider(Provider::Anthropic);
    let memo = HygieneMemo::new();
    let mut history: Vec<SharedMessage> = vec![
        Arc::new(from(
            json!({"role": "compactionSummary", "summary": "before",
            "tokensBefore": 100, "timestamp": 5}),
        )),
        Arc::new(user("go on")),
    ];
    let mut serial = 0;
    for _ in 0..200 {
        history.push(Arc::new(plain_after(history.last(), &mut serial)));
        let input = MessageList::from(history.clone());
        let (kept, report) = run_with(&input, &policy, &memo);
        let (fresh, fresh_report) = run(&input, &policy);
        assert_eq!(values(&kept), values(&fresh));
        assert_eq!(report, fresh_report);
        // `answer` replies are dated 2, before the summary's 5: every one is stale.
        let replies = history.iter().filter(|m| m.role() == "assistant").count();
        assert_eq!(report.stale_usage.zeroed, replies);
    }
    // Every run after the first resumed.
    assert_eq!(memo.resumed_runs(), 199);
}
