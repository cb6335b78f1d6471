//! Tests of the orchestrator with scripted summarisers.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use super::stages::time_range;
use super::*;
use crate::compaction::extractive::EXTRACTIVE_NOTICE;
use crate::compaction::instructions::TURN_PREFIX_INSTRUCTIONS;
use crate::compaction::prepare::{ContextEntry, prepare};
use crate::compaction::quality::has_required_sections;
use crate::compaction::settings::RetrySettings;
use crate::compaction::suffix::SUMMARY_TRUNCATED_MARKER;
use crate::compaction::summarizer::{SummarizeError, SummaryRequest};
use crate::compaction::test_support::*;

/// What a scripted summariser saw of one request.
#[derive(Debug, Clone)]
struct Seen {
    kind: SummaryKind,
    request_tokens: u64,
    max_tokens: u64,
    prompt: String,
}

type Script = dyn Fn(&SummaryRequest<'_>, usize) -> Result<String, SummarizeError> + Sync;

/// A summariser driven by a closure (given the request and the 0-based call number), which
/// records every request and how many were in flight at once.
struct Scripted {
    window: u64,
    script: Box<Script>,
    seen: Mutex<Vec<Seen>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    /// Part calls wait (up to 10 s) until this many calls have been in flight at once, so
    /// overlap is observed without timing assertions.
    rendezvous: usize,
    counter: TokenCounter,
}

impl Scripted {
    fn new(
        window: u64,
        script: impl Fn(&SummaryRequest<'_>, usize) -> Result<String, SummarizeError> + Sync + 'static,
    ) -> Self {
        Self {
            window,
            script: Box::new(script),
            seen: Mutex::new(Vec::new()),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            rendezvous: 0,
            counter: TokenCounter::estimate(),
        }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    fn kinds(&self) -> Vec<SummaryKind> {
        self.seen().into_iter().map(|s| s.kind).collect()
    }
}

impl Summarizer for Scripted {
    fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, SummarizeError> {
        let n = {
            let mut seen = self.seen.lock().unwrap();
            seen.push(Seen {
                kind: request.kind,
                request_tokens: self.counter.count_text(request.system)
                    + self.counter.count_text(request.prompt),
                max_tokens: request.max_tokens,
                prompt: request.prompt.to_owned(),
            });
            seen.len() - 1
        };
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        if self.rendezvous > 0 && matches!(request.kind, SummaryKind::Part { .. }) {
            let until = Instant::now() + Duration::from_secs(10);
            while self.max_in_flight.load(Ordering::SeqCst) < self.rendezvous
                && Instant::now() < until
            {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let out = (self.script)(request, n);
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        out
    }

    fn context_window(&self) -> u64 {
        self.window
    }

    fn label(&self) -> &str {
        "scripted"
    }
}

fn structured(tag: &str) -> String {
    format!(
        "## Decisions\n- {tag}\n\n## Open TODOs\n- none\n\n## Constraints/Rules\n- none\n\n## Pending user asks\n- none\n\n## Exact identifiers\n- none"
    )
}

fn ok_summary(req: &SummaryRequest<'_>, _: usize) -> Result<String, SummarizeError> {
    Ok(structured(&format!("{:?}", req.kind)))
}

fn fast_settings() -> CompactionSettings {
    CompactionSettings {
        keep_recent_tokens: Some(1_000),
        retry: RetrySettings {
            attempts: 3,
            min_delay_ms: 0,
            max_delay_ms: 0,
            jitter: 0.0,
        },
        ..CompactionSettings::default()
    }
}

/// `turns` user/assistant/tool turns of about `chars` characters per message, ending with a
/// user message that stays (with `keep` 1,000 tokens).
fn history(turns: usize, chars: usize) -> Vec<ContextEntry> {
    let mut messages = Vec::new();
    for t in 0..turns {
        let mut u = user(&format!(
            "Turn {t}: please look at /srv/app/file{t}.rs. {}",
            "u".repeat(chars)
        ));
        if let AgentMessage::User(m) = &mut u {
            m.timestamp = 1_772_355_600_000 + t as u64 * 60_000;
        }
        messages.push(u);
        messages.push(assistant_with_calls(
            &format!("Reading it. {}", "w".repeat(chars / 2)),
            &[(&format!("call_{t}"), "read")],
        ));
        messages.push(tool_result(
            &format!("call_{t}"),
            "read",
            &"r".repeat(chars / 2),
        ));
    }
    messages.push(user(&"final question ".repeat(300)));
    entries(messages)
}

fn prep_for(ctx: &[ContextEntry], settings: &CompactionSettings) -> Preparation {
    prepare(ctx, settings, &TokenCounter::estimate()).unwrap()
}

fn run(
    prep: &Preparation,
    settings: &CompactionSettings,
    s: &dyn Summarizer,
) -> Result<CompactionSummary, CompactionError> {
    compact(
        prep,
        settings,
        s,
        &TokenCounter::estimate(),
        &Control::new(),
    )
}

#[test]
fn a_history_that_fits_takes_one_call() {
    let settings = fast_settings();
    let prep = prep_for(&history(4, 400), &settings);
    let s = Scripted::new(200_000, ok_summary);
    let out = run(&prep, &settings, &s).unwrap();
    assert_eq!(s.kinds(), vec![SummaryKind::Chunk { index: 0, of: 1 }]);
    assert_eq!(out.calls, 1);
    assert_eq!(out.parts, 1);
    assert_eq!(out.fallback_level, 0);
    assert!(has_required_sections(&out.summary));
    assert_eq!(out.first_kept_entry_id, prep.first_kept_entry_id);
    assert_eq!(out.summary_chars, out.summary.chars().count());
    assert!(out.tokens_after_estimate < out.tokens_before);
    // The suffix: preserved turns and file lists.
    assert!(out.summary.contains("## Recent turns preserved verbatim"));
    assert!(out.summary.contains("<read-files>\n/tmp/a.txt\n"));
    assert_eq!(out.details.read_files, ["/tmp/a.txt"]);
    // The request carried the structure instructions and the conversation.
    let prompt = &s.seen()[0].prompt;
    assert!(prompt.starts_with("<conversation>\n[User]: Turn 0"));
    assert!(prompt.contains("## Pending user asks\n## Exact identifiers"));
}

/// 40 messages of about 1,000 tokens; with a 60k window a chunk takes ~16.5k, so four parts of
/// ~10k each take one call each, plus the merge.
fn parts_setup(parts: usize, max_concurrency: usize) -> (CompactionSettings, Preparation) {
    let settings = CompactionSettings {
        parts,
        max_concurrency,
        ..fast_settings()
    };
    let prep = prep_for(&history(14, 2700), &settings);
    (settings, prep)
}

#[test]
fn parts_run_concurrently_up_to_the_limit() {
    for (parts, limit) in [(4, 8), (4, 2), (3, 3)] {
        let (settings, prep) = parts_setup(parts, limit);
        let mut s = Scripted::new(40_000, ok_summary);
        s.rendezvous = parts.min(limit);
        let out = run(&prep, &settings, &s).unwrap();
        let kinds = s.kinds();
        let part_calls = kinds
            .iter()
            .filter(|k| matches!(k, SummaryKind::Part { .. }))
            .count();
        assert_eq!(part_calls, parts, "{kinds:?}");
        assert_eq!(kinds.last(), Some(&SummaryKind::Merge));
        assert_eq!(out.calls, parts + 1);
        assert_eq!(out.parts, parts);
        assert_eq!(
            s.max_in_flight.load(Ordering::SeqCst),
            parts.min(limit),
            "parts {parts}, limit {limit}"
        );
        // The merge saw every part, labelled oldest to newest.
        let merge = s
            .seen()
            .into_iter()
            .find(|r| r.kind == SummaryKind::Merge)
            .unwrap();
        assert!(
            merge
                .prompt
                .contains("[Chunk 1 — oldest messages [2026-03-01 09:00")
        );
        assert!(
            merge
                .prompt
                .contains(&format!("[Chunk {parts} — most recent messages"))
        );
    }
}

#[test]
fn a_failing_call_is_retried_without_waiting() {
    let settings = fast_settings();
    let prep = prep_for(&history(4, 400), &settings);
    let s = Scripted::new(200_000, |req, n| {
        if n < 2 {
            Err(SummarizeError::Failed("flaky".into()))
        } else {
            ok_summary(req, n)
        }
    });
    let out = run(&prep, &settings, &s).unwrap();
    assert_eq!(out.calls, 3);
    assert_eq!(out.fallback_level, 0);
}

#[test]
fn fallback_level_one_leaves_out_oversized_messages() {
    let settings = fast_settings();
    let mut ctx = history(3, 400);
    // A pasted 200k-character log (50k tokens) in the middle: oversized for a 60k window.
    ctx.insert(
        4,
        ContextEntry {
            entry_id: "big".into(),
            message: Arc::new(user(&"L".repeat(200_000))),
        },
    );
    let prep = prep_for(&ctx, &settings);
    let s = Scripted::new(60_000, |req, n| {
        let has_big = req
            .messages
            .iter()
            .any(|m| crate::tokens::estimate_message_tokens(m) > 40_000);
        if has_big {
            Err(SummarizeError::Failed(
                "provider rejected the content".into(),
            ))
        } else {
            ok_summary(req, n)
        }
    });
    let out = run(&prep, &settings, &s).unwrap();
    assert_eq!(out.fallback_level, 1);
    assert!(
        out.summary
            .contains("[Large user (~50K tokens) omitted from summary]")
    );
    assert!(has_required_sections(&out.summary));
}

#[test]
fn fallback_level_two_is_an_honest_extractive_summary() {
    let settings = fast_settings();
    let prep = prep_for(&history(4, 400), &settings);
    let s = Scripted::new(200_000, |_, _| Err(SummarizeError::Failed("boom".into())));
    let out = run(&prep, &settings, &s).unwrap();
    assert_eq!(out.fallback_level, 2);
    assert_eq!(
        out.calls, 3,
        "three attempts, no oversized messages for level 1"
    );
    assert!(
        out.summary
            .starts_with("[Model summary failed (scripted: boom); statistics-only fallback")
    );
    assert!(out.summary.contains(&format!(
        "Context contained {} messages (0 oversized).",
        prep.messages_to_summarize.len()
    )));
    assert!(out.summary.contains(EXTRACTIVE_NOTICE));
    assert!(has_required_sections(&out.summary));
    assert!(out.summary.contains("/srv/app/file0.rs"));
    assert!(!out.summary.contains("Summary unavailable"));
}

#[test]
fn an_unavailable_model_goes_straight_to_the_extractive_fallback() {
    let settings = fast_settings();
    let prep = prep_for(&history(4, 400), &settings);
    let s = Scripted::new(200_000, |_, _| {
        Err(SummarizeError::Unavailable("no key".into()))
    });
    let out = run(&prep, &settings, &s).unwrap();
    assert_eq!(out.calls, 1);
    assert_eq!(out.fallback_level, 2);
    assert!(out.summary.contains("model unavailable: no key"));
}

#[test]
fn without_the_extractive_fallback_a_failure_is_an_error() {
    let settings = CompactionSettings {
        extractive_fallback: false,
        ..fast_settings()
    };
    let prep = prep_for(&history(4, 400), &settings);
    let s = Scripted::new(200_000, |_, _| Err(SummarizeError::Failed("boom".into())));
    let err = run(&prep, &settings, &s).unwrap_err();
    assert!(
        matches!(err, CompactionError::SummarizationFailed { .. }),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("All summarization attempts failed")
    );
}

#[test]
fn a_later_chunk_failing_keeps_the_partial_model_summary() {
    let settings = CompactionSettings {
        parts: 1,
        ..fast_settings()
    };
    let prep = prep_for(&history(14, 2700), &settings);
    let s = Scripted::new(40_000, |req, n| match req.kind {
        SummaryKind::Chunk { index: 0, .. } => Ok(structured("FIRST-CHUNK-DECISION")),
        _ => {
            let _ = n;
            Err(SummarizeError::Failed("later chunk broke".into()))
        }
    });
    let out = run(&prep, &settings, &s).unwrap();
    assert_eq!(out.fallback_level, 2);
    assert!(out.summary.contains("FIRST-CHUNK-DECISION"));
    assert!(
        out.summary.contains(
            "[Partial summary: chunks 1-1 of 2 were summarized. Chunks 2-2 could not be processed.]"
        ),
        "{}",
        out.summary
    );
    // The unprocessed chunk's identifiers were extracted, not lost (turn 8 is before the
    // preserved turns, so only the body can hold it).
    let body = out
        .summary
        .split("## Recent turns preserved verbatim")
        .next()
        .unwrap();
    assert!(body.contains("/srv/app/file8.rs"));
}

#[test]
fn the_summary_is_capped_at_16k_with_the_suffix_intact() {
    let settings = fast_settings();
    let mut ctx = history(4, 400);
    ctx.insert(
        3,
        ContextEntry {
            entry_id: "fail".into(),
            message: Arc::new(tool_error(
                "call_x",
                "exec",
                "exit status 1",
                Some(json!({"exitCode": 1})),
            )),
        },
    );
    let prep = prep_for(&ctx, &settings);
    let s = Scripted::new(200_000, |_, _| {
        Ok(format!("{}\n{}", structured("long"), "z".repeat(30_000)))
    });
    let out = run(&prep, &settings, &s).unwrap();
    assert!(out.summary_chars <= 16_000, "{}", out.summary_chars);
    assert!(out.summary.starts_with("## Decisions"));
    assert!(out.summary.contains(SUMMARY_TRUNCATED_MARKER));
    let suffix_at = out.summary.find(SUMMARY_TRUNCATED_MARKER).unwrap();
    let suffix = &out.summary[suffix_at..];
    assert!(suffix.contains("## Recent turns preserved verbatim"));
    assert!(suffix.contains("## Tool Failures\n- exec (exitCode=1): exit status 1"));
    assert!(suffix.ends_with("</read-files>"));
    // The answer budget followed the room the cap leaves.
    assert!(s.seen()[0].max_tokens <= 4_000);
}

#[test]
fn a_window_smaller_than_the_input_still_compacts_and_no_request_exceeds_it() {
    let settings = CompactionSettings {
        parts: 3,
        ..fast_settings()
    };
    let mut ctx = history(10, 2000);
    ctx.insert(
        5,
        ContextEntry {
            entry_id: "paste".into(),
            message: Arc::new(user(&"P".repeat(60_000))),
        },
    );
    let prep = prep_for(&ctx, &settings);
    let window = 4_000;
    let counter = TokenCounter::estimate();
    let s = Scripted::new(window, move |req, n| {
        let size = counter.count_text(req.system) + counter.count_text(req.prompt) + req.max_tokens;
        if size > window {
            return Err(SummarizeError::Overflow {
                observed_tokens: Some(size),
            });
        }
        ok_summary(req, n)
    });
    let out = run(&prep, &settings, &s).unwrap();
    assert_eq!(out.fallback_level, 0);
    let seen = s.seen();
    assert!(seen.len() > 10, "{} calls", seen.len());
    for r in &seen {
        assert!(
            r.request_tokens + r.max_tokens <= window,
            "a {:?} request of {} + {} tokens exceeded the {window}-token window",
            r.kind,
            r.request_tokens,
            r.max_tokens
        );
    }
    assert!(
        seen.iter()
            .any(|r| r.prompt.contains(SHORTENED_FOR_WINDOW_NOTE))
    );
}

#[test]
fn an_overflow_answer_shrinks_the_request_instead_of_giving_up() {
    let settings = fast_settings();
    let prep = prep_for(&history(6, 2000), &settings);
    // The model claims 100k but really takes 6k: every larger request overflows.
    let counter = TokenCounter::estimate();
    let s = Scripted::new(100_000, move |req, n| {
        let size = counter.count_text(req.prompt);
        if size > 6_000 {
            Err(SummarizeError::Overflow {
                observed_tokens: Some(size),
            })
        } else {
            ok_summary(req, n)
        }
    });
    let out = run(&prep, &settings, &s).unwrap();
    assert_eq!(out.fallback_level, 0);
    let seen = s.seen();
    assert!(seen.len() >= 3);
    assert!(seen[0].request_tokens > 6_000);
}

fn hanging(req: &SummaryRequest<'_>, _: usize) -> Result<String, SummarizeError> {
    // Like a real client: wait for the answer, but give up when the call is cancelled or its
    // deadline passes.
    let until = Instant::now() + Duration::from_secs(30);
    while Instant::now() < until {
        if req.control.is_cancelled() {
            return Err(SummarizeError::Cancelled);
        }
        if req.control.remaining() == Some(Duration::ZERO) {
            return Err(SummarizeError::Timeout);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Err(SummarizeError::Failed("hung for 30 s".into()))
}

#[test]
fn a_hanging_summarizer_hits_the_deadline() {
    let settings = fast_settings();
    for (parts, turns) in [(1, 4), (4, 14)] {
        let settings = CompactionSettings {
            parts,
            ..settings.clone()
        };
        let prep = prep_for(&history(turns, 2700), &settings);
        let s = Scripted::new(40_000, hanging);
        let control = Control::new().with_timeout(Duration::from_millis(150));
        let err = compact(&prep, &settings, &s, &TokenCounter::estimate(), &control).unwrap_err();
        assert!(matches!(err, CompactionError::Timeout { .. }), "{err:?}");
        assert!(err.to_string().starts_with("Compaction timed out"));
    }
}

#[test]
fn cancelling_stops_the_compaction() {
    let settings = fast_settings();
    let prep = prep_for(
        &history(14, 2700),
        &CompactionSettings {
            parts: 4,
            ..settings.clone()
        },
    );
    let flag = Arc::new(AtomicBool::new(false));
    let raise = flag.clone();
    let s = Scripted::new(60_000, move |req, n| {
        if n == 0 {
            raise.store(true, Ordering::SeqCst);
        }
        hanging(req, n)
    });
    let control = Control::with_cancel_flag(flag);
    let err = compact(
        &prep,
        &CompactionSettings {
            parts: 4,
            ..settings
        },
        &s,
        &TokenCounter::estimate(),
        &control,
    )
    .unwrap_err();
    assert_eq!(err, CompactionError::Cancelled);
    // The caller's flag was theirs to raise; a cancelled compaction never falls back.
    let already = Control::with_cancel_flag(Arc::new(AtomicBool::new(true)));
    let s = Scripted::new(60_000, ok_summary);
    let err = compact(
        &prep,
        &fast_settings(),
        &s,
        &TokenCounter::estimate(),
        &already,
    )
    .unwrap_err();
    assert_eq!(err, CompactionError::Cancelled);
    assert!(s.seen().is_empty());
}

#[test]
fn a_summarizer_timeout_ends_everything_without_fallback() {
    let settings = fast_settings();
    let prep = prep_for(&history(4, 400), &settings);
    let s = Scripted::new(200_000, |_, _| Err(SummarizeError::Timeout));
    let err = run(&prep, &settings, &s).unwrap_err();
    assert!(matches!(err, CompactionError::Timeout { .. }));
    assert_eq!(s.seen().len(), 1);
}

#[test]
fn the_quality_guard_regenerates_with_feedback() {
    let settings = CompactionSettings {
        quality_guard: crate::compaction::settings::QualityGuardSettings {
            enabled: true,
            max_retries: 1,
        },
        ..fast_settings()
    };
    let prep = prep_for(&history(4, 400), &settings);
    let s =
        Scripted::new(200_000, |req, n| {
            if n == 0 {
                Ok("a summary without any headings".into())
            } else {
                assert!(req.prompt.contains(
                    "Previous summary failed quality checks (missing_section:## Decisions"
                ));
                Ok(format!(
                    "{}\n- /srv/app/file1.rs /srv/app/file2.rs /srv/app/file3.rs",
                    structured("fixed")
                ))
            }
        });
    let out = run(&prep, &settings, &s).unwrap();
    assert_eq!(out.quality_attempts, 2);
    assert!(out.quality.as_ref().unwrap().ok, "{:?}", out.quality);
    assert!(out.summary.contains("fixed"));
}

#[test]
fn a_split_turn_gets_its_prefix_summarised_alongside() {
    let settings = CompactionSettings {
        keep_recent_tokens: Some(1_500),
        ..fast_settings()
    };
    let ctx = entries(vec![
        user("old question"),
        assistant(&"x".repeat(4000)),
        user("do the big task"),
        assistant_with_calls("step one", &[("c1", "read")]),
        tool_result("c1", "read", &"r".repeat(4000)),
        assistant(&"y".repeat(4000)),
    ]);
    let prep = prep_for(&ctx, &settings);
    assert!(prep.is_split_turn);
    let s = Scripted::new(200_000, |req, n| match req.kind {
        SummaryKind::TurnPrefix => {
            assert!(req.prompt.contains(TURN_PREFIX_INSTRUCTIONS));
            Ok("PREFIX: the user asked for the big task".into())
        }
        _ => ok_summary(req, n),
    });
    let out = run(&prep, &settings, &s).unwrap();
    assert!(s.kinds().contains(&SummaryKind::TurnPrefix));
    assert!(
        out.summary
            .contains("\n\n---\n\n**Turn Context (split turn):**\n\nPREFIX: the user asked")
    );
}

#[test]
fn no_real_conversation_writes_a_boundary_without_calls() {
    let settings = CompactionSettings {
        keep_recent_tokens: Some(100),
        ..fast_settings()
    };
    let ctx = entries(vec![
        user("HEARTBEAT_OK"),
        assistant("HEARTBEAT_OK"),
        user(&"real question ".repeat(600)),
    ]);
    let prep = prep_for(&ctx, &settings);
    let s = Scripted::new(200_000, ok_summary);
    let out = run(&prep, &settings, &s).unwrap();
    assert_eq!(out.calls, 0);
    assert!(s.seen().is_empty());
    assert!(has_required_sections(&out.summary));
    assert!(out.summary.contains("No prior history."));
}

#[test]
fn history_beyond_its_share_is_summarised_separately_first() {
    // Keep 12k tokens verbatim with a 20k window: the kept part exceeds 20k · 0.5 · 1.2 = 12k
    // only when it is larger; make it so.
    let settings = CompactionSettings {
        keep_recent_tokens: Some(14_000),
        ..fast_settings()
    };
    let prep = prep_for(&history(20, 2700), &settings);
    let s = Scripted::new(20_000, ok_summary);
    let out = run(&prep, &settings, &s).unwrap();
    let share = out.history_share.as_ref().expect("history was set aside");
    assert!(share.dropped_chunks > 0);
    let kinds = s.kinds();
    let dropped_at = kinds.iter().position(|k| *k == SummaryKind::DroppedHistory);
    let dropped_at = dropped_at.or_else(|| {
        kinds
            .iter()
            .position(|k| matches!(k, SummaryKind::Part { .. }))
    });
    assert_eq!(dropped_at, Some(0), "{kinds:?}");
    // The dropped history's summary became the previous summary of the main one.
    assert!(
        s.seen()
            .iter()
            .any(|r| r.prompt.contains("<previous-summary>"))
    );
    assert_eq!(out.fallback_level, 0);
}

#[test]
fn the_extractive_summarizer_end_to_end_keeps_planted_identifiers() {
    let settings = fast_settings();
    let mut ctx = history(6, 400);
    ctx.insert(
        3,
        ContextEntry {
            entry_id: "ids".into(),
            message: Arc::new(user(
                "Use build 123e4567-e89b-12d3-a456-426614174000 from https://ci.example.com/runs/9 \
                 on db.prod.example:6432 and compare with deadbeefcafebabe1234.",
            )),
        },
    );
    let prep = prep_for(&ctx, &settings);
    let out = run(&prep, &settings, &ExtractiveSummarizer::default()).unwrap();
    assert_eq!(out.summarizer, "extractive");
    assert_eq!(out.fallback_level, 0);
    assert_eq!(out.calls, 1);
    for id in [
        "123e4567-e89b-12d3-a456-426614174000",
        "https://ci.example.com/runs/9",
        "db.prod.example:6432",
        "deadbeefcafebabe1234",
        "/srv/app/file0.rs",
    ] {
        assert!(out.summary.contains(id), "{id} missing");
    }
    assert!(out.summary.starts_with(EXTRACTIVE_NOTICE));
}

#[test]
fn a_preparation_with_nothing_to_summarise_is_refused() {
    let settings = fast_settings();
    let mut prep = prep_for(&history(4, 400), &settings);
    prep.messages_to_summarize.clear();
    prep.turn_prefix_messages.clear();
    let s = Scripted::new(200_000, ok_summary);
    let err = run(&prep, &settings, &s).unwrap_err();
    assert!(matches!(err, CompactionError::NothingToCompact { .. }));
}

#[test]
fn time_ranges_label_parts() {
    let msgs = shared(vec![user("a"), assistant("b")]);
    let r = time_range(&msgs);
    assert_eq!(r, " [2026-03-01 09:00 — 2026-03-01 09:01 UTC]");
    assert_eq!(time_range(&[]), "");
}

#[test]
fn default_mode_skips_the_safeguard_extras() {
    let settings = CompactionSettings {
        mode: crate::compaction::settings::CompactionMode::Default,
        quality_guard: crate::compaction::settings::QualityGuardSettings {
            enabled: true,
            max_retries: 3,
        },
        ..fast_settings()
    };
    let prep = prep_for(&history(4, 400), &settings);
    let s = Scripted::new(200_000, |_, _| Ok("no headings at all".into()));
    let out = run(&prep, &settings, &s).unwrap();
    assert_eq!(out.calls, 1, "no quality retries in default mode");
    assert!(!out.summary.contains("## Recent turns preserved verbatim"));
    assert!(out.summary.contains("<read-files>"));
}

#[test]
fn the_result_serialises_for_events() {
    let settings = fast_settings();
    let prep = prep_for(&history(4, 400), &settings);
    let out = run(&prep, &settings, &Scripted::new(200_000, ok_summary)).unwrap();
    let json = serde_json::to_value(&out).unwrap();
    assert_eq!(json["firstKeptEntryId"], json!(prep.first_kept_entry_id));
    assert_eq!(json["fallbackLevel"], json!(0));
    assert_eq!(json["details"]["readFiles"], json!(["/tmp/a.txt"]));
    let back: CompactionSummary = serde_json::from_value(json).unwrap();
    assert_eq!(back, out);
}

/// Under a small summary cap the extractive body is asked for no more than the cap leaves
/// beside the suffix, so the cap never cuts the end of the body, where the newest
/// identifiers are. It used to: the quoted turns were kept and the identifiers cut.
#[test]
fn a_small_summary_cap_keeps_the_newest_identifiers_and_shortens_the_quoted_turns() {
    let settings = fast_settings();
    let mut prep = prep_for(&history(40, 1_200), &settings);
    prep.summary_token_cap = Some(1_500);
    let out = run(&prep, &settings, &ExtractiveSummarizer::default()).unwrap();
    let tokens = TokenCounter::estimate().count_text(&out.summary);
    assert!(tokens <= 1_500, "{tokens} tokens");
    assert!(
        !out.summary.contains(SUMMARY_TRUNCATED_MARKER.trim()),
        "the body was cut:\n{}",
        out.summary
    );
    // The newest file the summarised history names is in the identifiers.
    let last = prep
        .messages_to_summarize
        .iter()
        .rev()
        .find_map(|m| {
            let text = crate::compaction::transcript::message_text(m);
            text.split_whitespace()
                .find(|w| w.starts_with("/srv/app/file"))
                .map(|w| w.trim_end_matches('.').to_string())
        })
        .unwrap();
    let ids = out.summary.split("## Exact identifiers").nth(1).unwrap();
    assert!(ids.contains(&last), "{last} missing:\n{}", out.summary);
}
