//! The overflow loop's counts (reference §13 group 12), with a scripted model and an engine
//! library whose `compact` always (or never) compacts, so each branch is reached exactly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use common::{config_for, fixture};
use rampart_context::hygiene;
use rampart_context::tokens::CountMode;
use rampart_engine_api::AgentMessage;
use rampart_host::config::{self, Config};
use rampart_host::engine::services::EventSink;
use rampart_host::engine::slot::EngineSlot;
use rampart_host::providers::{ModelRequest, ModelResponse, Provider, ProviderError};
use rampart_host::run::{ModelSource, ResolvedProvider, RunEvents, RunSettings, Runner, TurnError};
use rampart_sessions::entry::SessionHeader;
use rampart_sessions::{Session, SessionOptions};

/// A model that answers from a script: `Err(text)` is an overflow with that text.
struct Scripted {
    script: Mutex<VecDeque<Result<&'static str, &'static str>>>,
    calls: Mutex<u32>,
}

impl Provider for Scripted {
    fn id(&self) -> &str {
        "scripted"
    }

    fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        *self.calls.lock().unwrap() += 1;
        let next = self
            .script
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(Err("prompt is too long: 250000 tokens > 200000 maximum"));
        match next {
            Ok(text) => Ok(ModelResponse {
                message: match AgentMessage::assistant_text(
                    text,
                    "sim",
                    "scripted",
                    &request.model,
                    1,
                ) {
                    AgentMessage::Assistant(a) => a,
                    _ => unreachable!(),
                },
                retries: 0,
            }),
            Err(text) => Err(ProviderError::ContextOverflow {
                provider: "scripted".into(),
                message: text.into(),
                observed_tokens: None,
            }),
        }
    }
}

struct Source(Arc<Scripted>);

impl ModelSource for Source {
    fn resolve(&self, _: &rampart_host::config::ModelName) -> Result<ResolvedProvider, TurnError> {
        Ok(ResolvedProvider {
            provider: self.0.clone(),
            family: hygiene::Provider::Other,
            count_mode: CountMode::Estimate,
        })
    }
}

struct Outcome {
    result: Result<rampart_host::run::TurnReport, TurnError>,
    calls: u32,
    compactions: usize,
    truncations: usize,
}

fn run(
    compacts: bool,
    script: Vec<Result<&'static str, &'static str>>,
    oversized_tool_result: bool,
) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    let path = config_for(
        dir.path(),
        "fx-compacts",
        &fixture("fx-compacts"),
        &format!("config = {{ compacts = {compacts} }}"),
    );
    let config: Config = config::load(&config::ConfigSource::Explicit(path)).unwrap();
    let sink = EventSink::tracing_only();
    let slot = EngineSlot::resolve(&config, &sink).unwrap();
    assert_eq!(slot.active().id(), "fx-compacts");
    let model = Arc::new(Scripted {
        script: Mutex::new(script.into()),
        calls: Mutex::new(0),
    });
    let source = Source(model.clone());
    let settings = RunSettings::from_config(&config).unwrap();
    let mut runner = Runner::new(
        &config,
        &slot,
        &source,
        settings,
        RunEvents::recording(sink, None),
    );
    let mut session = Session::create(
        &dir.path().join("s.jsonl"),
        SessionHeader::new("/tmp"),
        SessionOptions::default(),
    )
    .unwrap();
    session
        .append_message(AgentMessage::user_text("read the log", 1))
        .unwrap();
    if oversized_tool_result {
        let call = common::tool_call("c1", "read", "log", 2);
        session.append_message(call).unwrap();
        session
            .append_message(AgentMessage::tool_result(
                "c1",
                "read",
                "log line\n".repeat(120_000),
                false,
                3,
            ))
            .unwrap();
    }
    let result = runner.run_turn(&mut session, Some(AgentMessage::user_text("go", 4)));
    let events = runner.events().drain();
    let count = |kind: &str, key: &str| {
        events
            .iter()
            .filter(|e| e.kind == kind && e.data[key] == true)
            .count()
    };
    Outcome {
        result,
        calls: *model.calls.lock().unwrap(),
        compactions: count("compaction_end", "compacted"),
        truncations: count("truncation_pass", "changed"),
    }
}

#[test]
fn a_persistent_overflow_compacts_three_times_over_four_attempts_then_gives_up() {
    let o = run(true, vec![], false);
    assert_eq!(o.compactions, 3);
    assert_eq!(o.calls, 4);
    let err = o.result.unwrap_err();
    assert_eq!(err.kind(), "context_overflow");
    assert!(err.to_string().contains("Try /reset (or /new)"), "{err}");
}

#[test]
fn success_after_the_second_compaction_takes_three_attempts() {
    let overflow = "prompt is too long: 250000 tokens > 200000 maximum";
    let o = run(true, vec![Err(overflow), Err(overflow), Ok("fine")], false);
    let report = o.result.unwrap();
    assert_eq!(o.compactions, 2);
    assert_eq!(report.compactions, 2);
    assert_eq!(o.calls, 3);
    assert_eq!(report.attempts, 3);
}

#[test]
fn a_compaction_failure_error_never_compacts() {
    let o = run(
        true,
        vec![Err(
            "auto-compaction failed: Context overflow: summarization request too large",
        )],
        false,
    );
    assert_eq!(o.compactions, 0);
    assert_eq!(o.calls, 1);
    assert_eq!(o.result.unwrap_err().kind(), "compaction_failure");
}

#[test]
fn a_failed_compaction_with_an_oversized_tool_result_truncates_then_succeeds() {
    let overflow = "prompt is too long: 250000 tokens > 200000 maximum";
    let o = run(false, vec![Err(overflow), Ok("fine")], true);
    let report = o.result.unwrap();
    assert_eq!(o.compactions, 0);
    assert_eq!(o.truncations, 1);
    assert_eq!(o.calls, 2);
    assert_eq!(report.attempts, 2);
}
