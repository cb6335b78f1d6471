//! The engine end to end through the JSON dispatch: persistence, sweeps, the DAG's
//! invariants (§8.6, §8.8), a stable prefix, rebuild from the session, and recall.
use std::sync::Arc;

use rampart_engine_api::protocol::{AfterTurnParams, AssembleParams, CompactParams, method};
use rampart_engine_api::{AgentMessage, MessageList, SharedMessage};
use rampart_engine_test::{FakeHost, Harness, build};

use super::*;
use crate::recall::{Description, Mode, Scope, describe, expand, search};

fn engine(dir: &std::path::Path, extra: serde_json::Value) -> LosslessEngine {
    let mut config = serde_json::json!({
        "stateDir": dir, "summarizer": "extractive", "freshTailCount": 4,
        "leafChunkTokens": 600, "leafMinFanout": 3, "condensedTargetTokens": 100
    });
    if let (Some(c), Some(e)) = (config.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    LosslessEngine::new(Config::from_json(&config).unwrap(), None)
}

fn temp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("lossless-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn history(turns: usize) -> Vec<SharedMessage> {
    let mut out = Vec::new();
    for i in 0..turns {
        out.push(Arc::new(AgentMessage::user_text(
            format!("question {i} about TOPIC_{i}: {}", "detail ".repeat(40)),
            1_700_000_000_000 + i as u64 * 60_000,
        )));
        out.push(Arc::new(build::assistant_text(&format!(
            "answer {i}: {}",
            "because ".repeat(40)
        ))));
    }
    out
}

fn assemble(
    h: &Harness<LosslessEngine>,
    messages: &[SharedMessage],
    budget: u64,
) -> AssembleResult {
    assemble_in(h, "s1", None, messages, budget)
}

/// `assemble` of session `session` (started over from `previous`, when given).
fn assemble_in(
    h: &Harness<LosslessEngine>,
    session: &str,
    previous: Option<&str>,
    messages: &[SharedMessage],
    budget: u64,
) -> AssembleResult {
    let mut p = AssembleParams {
        messages: MessageList::from(messages.to_vec()),
        token_budget: Some(budget),
        ..Default::default()
    };
    p.session.session_id = session.into();
    p.session.previous_session_id = previous.map(str::to_string);
    h.call(method::ASSEMBLE, &p).unwrap()
}

fn after_turn(h: &Harness<LosslessEngine>, budget: u64) {
    let mut p = AfterTurnParams {
        token_budget: Some(budget),
        ..Default::default()
    };
    p.session.session_id = "s1".into();
    let _: serde_json::Value = h.call(method::AFTER_TURN, &p).unwrap();
}

/// What session `s1`'s conversation would cost unbudgeted.
fn stored_tokens(h: &Harness<LosslessEngine>) -> u64 {
    h.engine()
        .with_conv("s1", None, |_, c, _| Ok(c.stored_tokens()))
        .unwrap()
}

/// Summaries in the agent's database.
fn summary_count(h: &Harness<LosslessEngine>) -> i64 {
    h.engine()
        .with_conv("s1", None, |store, _, _| {
            Ok(store
                .conn()
                .query_row("SELECT count(*) FROM summaries", [], |r| r.get::<_, i64>(0))
                .unwrap())
        })
        .unwrap()
}

fn is_summary(m: &AgentMessage) -> bool {
    matches!(m, AgentMessage::User(_)) && serde_json::to_string(m).unwrap().contains("<summary id=")
}

/// Below the threshold nothing is summarised; past it, a sweep replaces the old messages
/// with summaries, the tail stays verbatim, and the store still holds every message.
#[test]
fn a_sweep_past_the_threshold_summarises_outside_the_tail_and_keeps_every_message() {
    let dir = temp("sweep");
    let host = FakeHost::new();
    // lossless-claw's sweep: the fresh tail is never summarised outside overflow recovery.
    let h = Harness::new(engine(&dir, serde_json::json!({"sweepTarget": 1.0})), &host);
    let msgs = history(20);
    let first = assemble(&h, &msgs, 100_000);
    assert_eq!(first.messages.len(), 40, "under budget every message goes");
    after_turn(&h, 100_000);
    assert!(
        !assemble(&h, &msgs, 100_000)
            .messages
            .iter()
            .any(|m| is_summary(m))
    );

    after_turn(&h, 2_000);
    let out = assemble(&h, &msgs, 2_000);
    assert!(
        out.messages.iter().any(|m| is_summary(m)),
        "no summary after the sweep"
    );
    let tail: Vec<_> = out.messages.iter().rev().take(4).collect();
    for (kept, original) in tail.iter().zip(msgs.iter().rev()) {
        assert_eq!(
            kept, &original,
            "the fresh tail is the host's messages, unchanged"
        );
    }
    h.engine()
        .with_conv("s1", None, |store, conv, _| {
            let n: i64 = store
                .conn()
                .query_row(
                    "SELECT count(*) FROM messages WHERE conversation_id = ?1",
                    [conv.id],
                    |r| r.get(0),
                )
                .unwrap();
            assert_eq!(n, 40);
            // §8.6: ordinals run 0..n-1 with no gaps.
            let (count, max): (i64, i64) = store
                .conn()
                .query_row(
                    "SELECT count(*), max(ordinal) FROM context_items WHERE conversation_id = ?1",
                    [conv.id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .unwrap();
            assert_eq!(count - 1, max);
            assert_eq!(count as usize, conv.items.len());
            let hits = search(
                store,
                &Scope::of(store, conv.id).unwrap(),
                "TOPIC_0",
                Mode::Substring,
                10,
            )
            .unwrap();
            assert_eq!(hits.len(), 1, "summarised messages are still found");
            Ok(())
        })
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// §8.6: a leaf links its messages in order, spans their times, counts their tokens.
#[test]
fn a_leaf_records_its_sources_time_range_and_tokens() {
    let dir = temp("leaf");
    let host = FakeHost::new();
    let h = Harness::new(engine(&dir, serde_json::json!({"sweepTarget": 1.0})), &host);
    let msgs = history(10);
    assemble(&h, &msgs, 100_000);
    after_turn(&h, 1_000);
    h.engine()
        .with_conv("s1", None, |store, conv, _| {
            let ItemRef::Summary { .. } = &conv.items[0].what else {
                panic!("the first item is not a summary: {:?}", conv.items[0])
            };
            // The oldest leaf (it may sit under a condensed node by now).
            let id: String = store
                .conn()
                .query_row(
                    "SELECT summary_id FROM summaries WHERE conversation_id = ?1 AND depth = 0 \
                     ORDER BY rowid LIMIT 1",
                    [conv.id],
                    |r| r.get(0),
                )
                .unwrap();
            let id = &id;
            let Some(Description::Summary {
                row, message_ids, ..
            }) = describe(store, &Scope::of(store, conv.id).unwrap(), id, 1_000).unwrap()
            else {
                panic!("no description")
            };
            let (min, max, tokens, first_seq): (i64, i64, i64, i64) = store
                .conn()
                .query_row(
                    &format!(
                        "SELECT min(created_at), max(created_at), sum(token_count), min(seq) \
                         FROM messages WHERE message_id IN ({})",
                        message_ids
                            .iter()
                            .map(|i| i.to_string())
                            .collect::<Vec<_>>()
                            .join(",")
                    ),
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
                )
                .unwrap();
            assert_eq!(first_seq, 0);
            assert!(message_ids.windows(2).all(|w| w[0] < w[1]));
            assert_eq!((row.earliest_at, row.latest_at), (min as u64, max as u64));
            assert_eq!(row.source_message_token_count, tokens as u64);
            assert_eq!(row.descendant_count, 0);
            assert_eq!(
                describe(store, &Scope::from_ids(vec![conv.id + 1]), id, 10).unwrap(),
                None,
                "other scope"
            );
            Ok(())
        })
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// §8.8: a condensed node counts its descendants and links its sources in order; expand
/// walks back down to the raw messages.
#[test]
fn condensed_nodes_carry_their_descendants() {
    let dir = temp("condensed");
    let host = FakeHost::new();
    let h = Harness::new(
        engine(&dir, serde_json::json!({"leafChunkTokens": 2_000})),
        &host,
    );
    let msgs = history(30);
    assemble(&h, &msgs, 100_000);
    after_turn(&h, 1_000);
    h.engine()
        .with_conv("s1", None, |store, conv, _| {
            let (id, leaves): (String, i64) = store
                .conn()
                .query_row(
                    "SELECT s.summary_id, (SELECT count(*) FROM summary_sources x WHERE x.summary_id = s.summary_id) \
                     FROM summaries s WHERE s.kind = 'condensed' AND s.conversation_id = ?1 LIMIT 1",
                    [conv.id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .expect("a condensed node");
            let row = render::summary(store, &id).unwrap();
            assert_eq!(row.depth, 1);
            assert_eq!(row.descendant_count, leaves as u64);
            let sources: Vec<SummaryRow> =
                row.sources.iter().map(|s| render::summary(store, s).unwrap()).collect();
            assert_eq!(
                row.descendant_token_count,
                sources.iter().map(|s| s.token_count).sum::<u64>()
            );
            assert_eq!(
                row.source_message_token_count,
                sources.iter().map(|s| s.source_message_token_count).sum::<u64>()
            );
            assert_eq!(row.earliest_at, sources.iter().map(|s| s.earliest_at).min().unwrap());
            assert_eq!(row.latest_at, sources.iter().map(|s| s.latest_at).max().unwrap());
            let e = expand(store, &Scope::of(store, conv.id).unwrap(), &id, 3, true, 1_000_000).unwrap().unwrap();
            assert!(e.nodes.iter().any(|n| n.id.starts_with("msg#")));
            assert!(!e.truncated);
            Ok(())
        })
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

use crate::render::SummaryRow;

/// Between sweeps the context is append-only: the next turn's request starts with the same
/// messages as this one's (the cached prefix survives).
#[test]
fn the_prefix_is_stable_between_sweeps() {
    let dir = temp("prefix");
    let host = FakeHost::new();
    let h = Harness::new(engine(&dir, serde_json::json!({})), &host);
    let mut msgs = history(20);
    assemble(&h, &msgs, 4_000);
    after_turn(&h, 4_000);
    let before = assemble(&h, &msgs, 100_000);
    msgs.push(Arc::new(build::user("one more question")));
    let after = assemble(&h, &msgs, 100_000);
    assert_eq!(after.messages.len(), before.messages.len() + 1);
    for (a, b) in before.messages.iter().zip(after.messages.iter()) {
        assert_eq!(
            serde_json::to_string(a).unwrap(),
            serde_json::to_string(b).unwrap()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A lost database is rebuilt from the messages the host passes: nothing is missing.
#[test]
fn a_lost_database_is_rebuilt_from_the_session() {
    let dir = temp("rebuild");
    let host = FakeHost::new();
    let msgs = history(6);
    {
        let h = Harness::new(engine(&dir, serde_json::json!({})), &host);
        assemble(&h, &msgs, 100_000);
    }
    std::fs::remove_dir_all(&dir).unwrap();
    let h = Harness::new(engine(&dir, serde_json::json!({})), &host);
    let out = assemble(&h, &msgs, 100_000);
    assert_eq!(out.messages.len(), 12);
    // A branch that no longer matches the store is rebuilt too.
    let other = history(3);
    let out = assemble(&h, &other, 100_000);
    assert_eq!(out.messages.len(), 6);
    assert_eq!(out.messages.to_vec(), other);
    let _ = std::fs::remove_dir_all(&dir);
}

/// §8.19: overflow recovery forces a sweep and reports "compacted" only when tokens fell.
#[test]
fn compact_reports_truthfully() {
    let dir = temp("compact");
    let host = FakeHost::new();
    let h = Harness::new(engine(&dir, serde_json::json!({})), &host);
    let msgs = history(2);
    let mut p = CompactParams {
        messages: MessageList::from(msgs.clone()),
        force: true,
        token_budget: Some(100_000),
        ..Default::default()
    };
    p.session.session_id = "s1".into();
    let r = h.compact(&p).unwrap();
    assert!(!r.compacted, "everything is in the fresh tail: {r:?}");
    let msgs = history(20);
    p.messages = MessageList::from(msgs);
    let r = h.compact(&p).unwrap();
    assert!(r.compacted, "{r:?}");
    let outcome = r.result.unwrap();
    assert!(outcome.tokens_after.unwrap() < outcome.tokens_before);
    assert_eq!(
        outcome.first_kept_entry_id, None,
        "the session is not rewritten"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// §8.18 (tool outputs): a large tool output is stored aside and described by id, cut.
#[test]
fn a_large_tool_output_is_stored_aside() {
    let dir = temp("large");
    let host = FakeHost::new();
    let h = Harness::new(
        engine(&dir, serde_json::json!({"largeToolOutputTokens": 100})),
        &host,
    );
    let msgs: Vec<SharedMessage> = vec![
        Arc::new(build::user("read it")),
        Arc::new(build::assistant_calls(&[(
            "c1",
            "read",
            serde_json::json!({"path": "a"}),
        )])),
        Arc::new(build::tool_result("c1", "read", "line\n".repeat(2_000))),
    ];
    assemble(&h, &msgs, 100_000);
    h.engine()
        .with_conv("s1", None, |store, conv, _| {
            let id: String = store
                .conn()
                .query_row(
                    "SELECT large_file_id FROM messages WHERE seq = 2 AND conversation_id = ?1",
                    [conv.id],
                    |r| r.get(0),
                )
                .unwrap();
            assert!(id.starts_with("file_") && id.len() == 21, "{id}");
            let Some(Description::File {
                content,
                truncated,
                byte_size,
                ..
            }) = describe(store, &Scope::of(store, conv.id).unwrap(), &id, 1_024).unwrap()
            else {
                panic!("no file")
            };
            assert!(truncated);
            assert_eq!(content.len(), 1_024);
            assert_eq!(byte_size, 10_000);
            Ok(())
        })
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// §8.20: a full-text pattern with regex syntax is refused; the limit is bounded.
#[test]
fn search_refuses_regex_in_full_text_mode() {
    let dir = temp("search");
    let host = FakeHost::new();
    let h = Harness::new(engine(&dir, serde_json::json!({})), &host);
    assemble(&h, &history(3), 100_000);
    h.engine()
        .with_conv("s1", None, |store, conv, _| {
            let e = search(
                store,
                &Scope::of(store, conv.id).unwrap(),
                "a|b",
                Mode::FullText,
                10,
            )
            .unwrap_err();
            assert!(e.message.contains("substring mode"), "{e}");
            assert!(
                search(
                    store,
                    &Scope::of(store, conv.id).unwrap(),
                    "question",
                    Mode::FullText,
                    0
                )
                .is_err()
            );
            assert!(
                search(
                    store,
                    &Scope::of(store, conv.id).unwrap(),
                    "question",
                    Mode::FullText,
                    201
                )
                .is_err()
            );
            let hits = search(
                store,
                &Scope::of(store, conv.id).unwrap(),
                "question",
                Mode::FullText,
                200,
            )
            .unwrap();
            // The three questions differ only in their numbers: one hit, two folded into it.
            let found: usize = hits.iter().map(|h| 1 + h.alike.len()).sum();
            assert_eq!(found, 3, "{hits:#?}");
            Ok(())
        })
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// §8.3: a stored count at the threshold does nothing; one token more sweeps.
#[test]
fn the_threshold_is_strict() {
    let dir = temp("threshold");
    let host = FakeHost::new();
    let h = Harness::new(
        engine(&dir, serde_json::json!({"contextThreshold": 0.5})),
        &host,
    );
    let msgs = history(10);
    assemble(&h, &msgs, 100_000);
    let stored = stored_tokens(&h);
    after_turn(&h, stored * 2);
    assert_eq!(summary_count(&h), 0);
    after_turn(&h, stored * 2 - 2);
    assert!(summary_count(&h) > 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A tool loop: one user message, then `steps` calls each answered by a result of about
/// `result_words` words.
fn tool_loop(steps: usize, result_words: usize) -> Vec<SharedMessage> {
    let mut out: Vec<SharedMessage> = vec![Arc::new(AgentMessage::user_text(
        "fix the build".to_string(),
        1_700_000_000_000,
    ))];
    for i in 0..steps {
        let id = format!("call_{i}");
        out.push(Arc::new(build::assistant_calls(&[(
            &id,
            "read",
            serde_json::json!({"path": format!("src/file_{i}.rs")}),
        )])));
        out.push(Arc::new(build::tool_result(
            &id,
            "read",
            format!("contents of file {i}: {}", "line ".repeat(result_words)),
        )));
    }
    out
}

fn after_turn_seeing(h: &Harness<LosslessEngine>, budget: u64, prompt_tokens: u64) {
    let mut p = AfterTurnParams {
        token_budget: Some(budget),
        runtime_context: serde_json::json!({"promptTokens": prompt_tokens}),
        ..Default::default()
    };
    p.session.session_id = "s1".into();
    let _: serde_json::Value = h.call(method::AFTER_TURN, &p).unwrap();
}

/// A long tool loop in one user turn keeps the whole turn in the fresh tail. Past the
/// threshold, the sweep summarises the older part of that turn down to `sweepTarget` once;
/// the next turns only append, so the request's prefix (the provider's prompt cache) holds
/// until the next crossing, instead of the assembler dropping an item from the front of
/// every request.
#[test]
fn a_long_tool_loop_is_swept_down_to_the_target_once_and_the_prefix_then_holds() {
    let dir = temp("loop");
    let host = FakeHost::new();
    let budget = 4_000;
    let h = Harness::new(
        engine(
            &dir,
            serde_json::json!({"freshTailCount": 64, "leafChunkTokens": 2_000}),
        ),
        &host,
    );
    // Grow the loop a step at a time, as a replay does, until the threshold is crossed.
    let all = tool_loop(120, 60);
    let mut upto = 3;
    let mut swept_at = None;
    while upto <= all.len() {
        let out = assemble(&h, &all[..upto], budget);
        let before = stored_tokens(&h);
        after_turn(&h, budget);
        if stored_tokens(&h) < before {
            swept_at = Some((upto, out.estimated_tokens));
            break;
        }
        upto += 2;
    }
    let (upto, _) = swept_at.expect("the loop never crossed the threshold");
    let config = h.engine().config().clone();
    assert!(
        stored_tokens(&h) <= config.sweep_target_tokens(budget) + 200,
        "the sweep left {} tokens, over the target {}",
        stored_tokens(&h),
        config.sweep_target_tokens(budget)
    );
    // The next turns append: every request starts with the previous request's messages.
    let mut previous = assemble(&h, &all[..upto], budget).messages;
    let mut appended = 0;
    let mut next = upto + 2;
    while next <= all.len() {
        let out = assemble(&h, &all[..next], budget);
        after_turn(&h, budget);
        if out.messages.len() < previous.len() || out.messages[..previous.len()] != previous[..] {
            break;
        }
        appended += 1;
        previous = out.messages;
        next += 2;
    }
    assert!(
        appended >= 3,
        "the prefix changed after {appended} appended turns: the sweep left no room"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// With `sweepTarget = 1` (lossless-claw's behaviour) the fresh tail is never summarised by
/// a routine sweep, however far over the threshold it keeps the context.
#[test]
fn with_sweep_target_one_the_tail_stays_verbatim() {
    let dir = temp("target1");
    let host = FakeHost::new();
    let h = Harness::new(
        engine(
            &dir,
            serde_json::json!({"freshTailCount": 64, "sweepTarget": 1.0}),
        ),
        &host,
    );
    let all = tool_loop(20, 60);
    assemble(&h, &all, 2_000);
    after_turn(&h, 2_000);
    let out = assemble(&h, &all, 2_000);
    assert!(!out.messages.iter().any(|m| is_summary(m)));
    let _ = std::fs::remove_dir_all(&dir);
}

/// lossless-claw's trigger counts what the host saw the request hold (system prompt and
/// tool schemas too), not only the engine's own messages.
#[test]
fn the_hosts_prompt_count_can_trigger_the_sweep() {
    let dir = temp("observed");
    let host = FakeHost::new();
    let h = Harness::new(engine(&dir, serde_json::json!({})), &host);
    let msgs = history(10);
    assemble(&h, &msgs, 100_000);
    let stored = stored_tokens(&h);
    // A budget whose threshold the messages alone stay under.
    let budget = stored * 2;
    after_turn_seeing(&h, budget, stored);
    assert_eq!(summary_count(&h), 0);
    after_turn_seeing(&h, budget, budget);
    assert!(
        summary_count(&h) > 0,
        "a request at the budget did not sweep"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// §8.18: a 30k-token `<file name="x.csv">` block in a user message is stored aside (a
/// `large_files` row with its name) and the model is sent a `[LCM File: file_… | x.csv | …]`
/// reference with an outline, also after the engine restarts; `lcm_describe` reads the file
/// back at most 32 KiB at a time; the session's own message is untouched.
#[test]
fn a_large_file_in_a_user_message_is_stored_aside_and_sent_as_a_reference() {
    let dir = temp("file");
    let host = FakeHost::new();
    let mut body = String::from("id,name,score\n");
    for i in 0..10_000 {
        body.push_str(&format!("{i},name-{i},{}.5\n", i % 97));
    }
    let message: SharedMessage = Arc::new(AgentMessage::user_text(
        format!("<file name=\"x.csv\">\n{body}</file>\nSum the scores."),
        1_700_000_000_000,
    ));
    let answer: SharedMessage = Arc::new(build::assistant_text("The sum is 48,500."));
    let msgs = vec![message.clone(), answer];
    let original = serde_json::to_string(&*message).unwrap();
    for round in 0..2 {
        // The second round is a new engine over the same database: the replacement holds.
        let h = Harness::new(engine(&dir, serde_json::json!({})), &host);
        let out = assemble(&h, &msgs, 100_000);
        let sent = crate::conv::flat_text(&out.messages[0]);
        assert!(
            sent.starts_with("[LCM File: file_"),
            "round {round}: {sent}"
        );
        assert!(sent.contains(" | x.csv | text/csv | "), "{sent}");
        assert!(!sent.contains("5000,name-5000"), "the bytes stay out");
        assert!(out.estimated_tokens < 2_000, "{}", out.estimated_tokens);
        assert_eq!(serde_json::to_string(&*msgs[0]).unwrap(), original);
        let id = sent["[LCM File: ".len()..]
            .split(' ')
            .next()
            .unwrap()
            .to_string();
        h.engine()
            .with_conv("s1", None, |store, conv, _| {
                let name: String = store
                    .conn()
                    .query_row(
                        "SELECT file_name FROM large_files WHERE file_id = ?1",
                        [&id],
                        |r| r.get(0),
                    )
                    .unwrap();
                assert_eq!(name, "x.csv");
                let answer = crate::tools::call(
                    store,
                    conv.id,
                    "lcm_describe",
                    &serde_json::json!({"id": id}),
                )
                .unwrap();
                let value: serde_json::Value = serde_json::from_str(&answer.content).unwrap();
                assert_eq!(value["name"], "x.csv");
                assert_eq!(value["truncated"], true);
                let content = value["content"].as_str().unwrap();
                assert!(content.len() <= 32_768 && content.starts_with("id,name,score"));
                Ok(())
            })
            .unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Session `old`'s conversation with the context of §8.17: `[d3, d2, d1, d0, m…]` (summaries
/// written straight into the store, the messages through `assemble`).
fn previous_context(h: &Harness<LosslessEngine>, old: &[SharedMessage]) {
    assemble_in(h, "old", None, old, 1_000_000);
    h.engine()
        .with_conv("old", None, |store, conv, _| {
            let conn = store.conn();
            for depth in 0..4 {
                let id = format!("sum_d{depth}");
                conn.execute(
                    "INSERT INTO summaries (summary_id, conversation_id, kind, depth, content, \
                     token_count, earliest_at, latest_at, descendant_count, \
                     descendant_token_count, source_message_token_count, level, model, \
                     created_at) VALUES (?1, ?2, ?3, ?4, ?5, 10, 0, 0, 0, 0, 0, 'normal', '', 0)",
                    rusqlite::params![
                        id,
                        conv.id,
                        if depth == 0 { "leaf" } else { "condensed" },
                        depth,
                        format!("depth {depth} recollection of MARKER_{depth}")
                    ],
                )
                .unwrap();
                conn.execute(
                    "INSERT INTO summaries_fts (summary_id, content) VALUES (?1, ?2)",
                    rusqlite::params![id, format!("depth {depth} recollection of MARKER_{depth}")],
                )
                .unwrap();
            }
            // Two steps: the primary key is checked row by row.
            for shift in ["-ordinal - 1", "-ordinal + 3"] {
                conn.execute(
                    &format!(
                        "UPDATE context_items SET ordinal = {shift} WHERE conversation_id = ?1"
                    ),
                    [conv.id],
                )
                .unwrap();
            }
            for (ordinal, depth) in [3, 2, 1, 0].into_iter().enumerate() {
                conn.execute(
                    "INSERT INTO context_items (conversation_id, ordinal, summary_id) \
                     VALUES (?1, ?2, ?3)",
                    rusqlite::params![conv.id, ordinal as i64, format!("sum_d{depth}")],
                )
                .unwrap();
            }
            Ok(())
        })
        .unwrap();
}

/// The first request of session `new`, started over from `old` (`previousSessionId`).
fn first_request_after_new(h: &Harness<LosslessEngine>, messages: &[SharedMessage]) -> Vec<String> {
    assemble_in(h, "new", Some("old"), messages, 1_000_000)
        .messages
        .iter()
        .map(|m| {
            let text = crate::conv::flat_text(m);
            match text.find("id=\"sum_d") {
                Some(at) => {
                    assert!(
                        text.contains("session=\"previous\""),
                        "a carried summary says where it comes from: {text}"
                    );
                    text[at + 4..at + 10].to_string()
                }
                None => text.chars().take(12).collect(),
            }
        })
        .collect()
}

#[test]
fn a_session_started_over_keeps_the_deep_summaries_and_can_search_everything() {
    // §8.17: [d3, d2, d1, d0, m1…mN] with newSessionRetainDepth 2 becomes [d3, d2].
    let dir = temp("new-2");
    let host = FakeHost::new();
    let h = Harness::new(engine(&dir, serde_json::json!({})), &host);
    let old = history(3);
    previous_context(&h, &old);
    let fresh = vec![Arc::new(AgentMessage::user_text(
        "starting over",
        1_800_000_000_000,
    ))];
    assert_eq!(
        first_request_after_new(&h, &fresh),
        ["sum_d3", "sum_d2", "starting ove"]
    );
    // Every row stays searchable from the new session: the old messages and the summaries it
    // did not carry.
    let new_conv = h
        .engine()
        .with_conv("new", None, |_, c, _| Ok(c.id))
        .unwrap();
    let answer = |pattern: &str| {
        h.engine()
            .with_conv("new", None, |store, _, _| {
                tools::call(
                    store,
                    new_conv,
                    tools::GREP,
                    &serde_json::json!({"pattern": pattern}),
                )
            })
            .unwrap()
    };
    let text = |r: ToolCallResult| serde_json::to_string(&r).unwrap();
    assert!(text(answer("TOPIC_1")).contains("msg#"), "an old message");
    assert!(
        text(answer("MARKER_0")).contains("sum_d0"),
        "an uncarried summary"
    );
    let d0 = h
        .engine()
        .with_conv("new", None, |store, _, _| {
            tools::call(
                store,
                new_conv,
                tools::DESCRIBE,
                &serde_json::json!({"id": "sum_d0"}),
            )
        })
        .unwrap();
    assert!(text(d0).contains("MARKER_0"));
    // A session that did not start over from `old` reaches none of it.
    let r = assemble_in(&h, "unrelated", None, &fresh, 1_000_000);
    assert_eq!(r.messages.len(), 1);
    let other = h
        .engine()
        .with_conv("unrelated", None, |store, c, _| {
            tools::call(
                store,
                c.id,
                tools::GREP,
                &serde_json::json!({"pattern": "MARKER_0"}),
            )
        })
        .unwrap();
    assert!(!text(other).contains("sum_d0"));

    // The store disagrees with the session (a branch switch): the conversation is rebuilt
    // from the session, and what it carried over comes back with it.
    let switched = vec![Arc::new(AgentMessage::user_text(
        "another start",
        1_800_000_000_001,
    ))];
    assert_eq!(
        first_request_after_new(&h, &switched),
        ["sum_d3", "sum_d2", "another star"]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn retain_depth_zero_keeps_every_summary_and_minus_one_keeps_the_whole_context() {
    let fresh = vec![Arc::new(AgentMessage::user_text(
        "starting over",
        1_800_000_000_000,
    ))];
    let old = history(2);

    let dir = temp("new-0");
    let host = FakeHost::new();
    let h = Harness::new(
        engine(&dir, serde_json::json!({"newSessionRetainDepth": 0})),
        &host,
    );
    previous_context(&h, &old);
    assert_eq!(
        first_request_after_new(&h, &fresh),
        ["sum_d3", "sum_d2", "sum_d1", "sum_d0", "starting ove"]
    );
    let _ = std::fs::remove_dir_all(&dir);

    let dir = temp("new-all");
    let h = Harness::new(
        engine(&dir, serde_json::json!({"newSessionRetainDepth": -1})),
        &host,
    );
    previous_context(&h, &old);
    let sent = first_request_after_new(&h, &fresh);
    assert_eq!(sent.len(), 4 + old.len() + 1, "{sent:?}");
    assert_eq!(&sent[..4], ["sum_d3", "sum_d2", "sum_d1", "sum_d0"]);
    assert!(sent[4].starts_with("question 0"), "{sent:?}");
    assert_eq!(sent.last().unwrap(), "starting ove");
    let _ = std::fs::remove_dir_all(&dir);

    // Below -1 is refused, naming the key.
    let e = Config::from_json(&serde_json::json!({"newSessionRetainDepth": -2})).unwrap_err();
    assert!(e.message.contains("newSessionRetainDepth"), "{}", e.message);
}

/// The host cuts a long tool result in the request it sends (its tool-loop guard) and says how
/// far (`tool_result_max_chars`); the engine counts such a result as the model is sent it.
/// Counted whole, four results of 5,000 tokens put the context far over the threshold of an
/// 8,000-token budget and a sweep summarises them; cut to 1,000 tokens each they fit, and
/// nothing is summarised while the requests are half full.
#[test]
fn tool_results_count_as_the_host_cuts_them() {
    for (cap, swept) in [(None, true), (Some(4_000u64), false)] {
        let dir = temp(&format!("cut-{swept}"));
        let host = FakeHost::new();
        let h = Harness::new(engine(&dir, serde_json::json!({})), &host);
        // "line " × 4,000: 20,000 characters, 5,000 estimated tokens a result.
        let msgs = tool_loop(4, 4_000);
        let mut p = AssembleParams {
            messages: MessageList::from(msgs.clone()),
            token_budget: Some(8_000),
            tool_result_max_chars: cap,
            ..Default::default()
        };
        p.session.session_id = "s1".into();
        let first: AssembleResult = h.call(method::ASSEMBLE, &p).unwrap();
        assert_eq!(first.messages.len(), msgs.len());
        if swept {
            assert!(
                first.estimated_tokens > 20_000,
                "{}",
                first.estimated_tokens
            );
        } else {
            assert!(first.estimated_tokens < 4_500, "{}", first.estimated_tokens);
        }
        let mut a = AfterTurnParams {
            messages: MessageList::from(msgs.clone()),
            token_budget: Some(8_000),
            tool_result_max_chars: cap,
            ..Default::default()
        };
        a.session.session_id = "s1".into();
        let _: serde_json::Value = h.call(method::AFTER_TURN, &a).unwrap();
        assert_eq!(summary_count(&h) > 0, swept, "cap {cap:?}");
        let second: AssembleResult = h.call(method::ASSEMBLE, &p).unwrap();
        assert_eq!(
            second.messages.iter().any(|m| is_summary(m)),
            swept,
            "cap {cap:?}"
        );
        // The store keeps every result whole either way.
        h.engine()
            .with_conv("s1", None, |store, conv, _| {
                let whole: i64 = store
                    .conn()
                    .query_row(
                        "SELECT sum(length(content)) FROM messages WHERE conversation_id = ?1 \
                         AND role = 'toolResult'",
                        [conv.id],
                        |r| r.get(0),
                    )
                    .unwrap();
                assert!(whole >= 80_000, "{whole}");
                Ok(())
            })
            .unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A notice sent again and again with new numbers is one hit listing every copy and what
/// differs in it, so older copies are found within the limit; a copy that says something else
/// in words is its own hit, and a search for one copy's value finds that copy alone.
#[test]
fn copies_that_differ_only_in_values_fold_into_one_hit() {
    let dir = temp("fold");
    let host = FakeHost::new();
    let h = Harness::new(engine(&dir, serde_json::json!({})), &host);
    let notice = |ts: u64, status: &str| {
        format!(
            "GatewayRestart:\n{{\"kind\": \"restart\", \"status\": \"{status}\", \"ts\": {ts}, \
             \"session\": \"agent:main:main\"}}"
        )
    };
    let mut msgs: Vec<SharedMessage> = Vec::new();
    for i in 0..30u64 {
        let status = if i == 3 { "failed" } else { "ok" };
        msgs.push(Arc::new(AgentMessage::user_text(
            notice(1_770_825_000_000 + i * 1_000, status),
            1_700_000_000_000 + i * 60_000,
        )));
        msgs.push(Arc::new(build::assistant_text(&format!("noted {i}"))));
    }
    assemble(&h, &msgs, 1_000_000);
    h.engine()
        .with_conv("s1", None, |store, conv, _| {
            let scope = Scope::of(store, conv.id).unwrap();
            let hits = search(store, &scope, "GatewayRestart session", Mode::FullText, 5).unwrap();
            // The newest copy, with the 28 older ones alike it, and the one that failed.
            assert_eq!(hits.len(), 2, "{hits:#?}");
            assert!(
                hits[0].snippet.contains("1770825029000"),
                "{}",
                hits[0].snippet
            );
            assert_eq!(hits[0].alike.len(), 28);
            assert_eq!(hits[0].alike[0].values, vec!["1770825028000".to_string()]);
            let oldest = hits[0].alike.last().unwrap();
            assert_eq!(oldest.values, vec!["1770825000000".to_string()]);
            assert!(hits[1].snippet.contains("failed") && hits[1].alike.is_empty());
            // One copy's value: that copy, not the others (they do not match).
            let one = search(store, &scope, "1770825007000", Mode::Substring, 5).unwrap();
            assert_eq!(one.len(), 1);
            assert!(one[0].alike.is_empty());
            Ok(())
        })
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
