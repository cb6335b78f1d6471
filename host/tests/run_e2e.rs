//! The run loop against real HTTP servers on 127.0.0.1 and against the simulator: the window
//! guard blocks before any request and fails over, the hygiene choke point repairs what the
//! server receives, and an overflow the engine cannot compact ends in an actionable error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::Path;

use common::loopback::{Loopback, openai_overflow_error, openai_text_stream};
use rampart_engine_api::AgentMessage;
use rampart_host::config::{self, Config};
use rampart_host::engine::services::EventSink;
use rampart_host::engine::slot::EngineSlot;
use rampart_host::providers::registry::Providers;
use rampart_host::run::{RunEvents, RunSettings, Runner, TurnError};
use rampart_message::ContentBlock;
use rampart_sessions::entry::SessionHeader;
use rampart_sessions::{Session, SessionOptions};
use serde_json::json;

/// A config whose provider `local` is the loopback server, with an 8k and a 64k model.
fn local_config(url: &str, fallbacks: &str) -> Config {
    let text = format!(
        r#"
[agents.defaults.model]
primary = "local/small"
fallbacks = [{fallbacks}]

[models.providers.local]
api = "openai-completions"
baseUrl = "{url}"
maxRetries = 0

[[models.providers.local.models]]
id = "small"
contextWindow = 8000

[[models.providers.local.models]]
id = "large"
contextWindow = 64000
maxTokens = 4096
"#
    );
    config::parse(&text, Path::new("plugins.toml")).unwrap()
}

struct World {
    _dir: tempfile::TempDir,
    session: Session,
}

fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let session =
        Session::create(&path, SessionHeader::new("/tmp"), SessionOptions::default()).unwrap();
    World { _dir: dir, session }
}

fn text_of(message: &AgentMessage) -> String {
    match message {
        AgentMessage::Assistant(a) => a
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text(t) => Some(t.text.clone()),
                _ => None,
            })
            .collect(),
        other => panic!("not an assistant message: {other:?}"),
    }
}

fn kinds(events: &RunEvents) -> Vec<String> {
    events.drain().into_iter().map(|e| e.kind).collect()
}

#[test]
fn an_8k_model_is_blocked_before_any_request_and_the_64k_fallback_gets_the_turn() {
    let server = Loopback::start();
    server.push(openai_text_stream("hello from large", 12, 4));
    let config = local_config(&server.url(), r#""local/large""#);
    let slot = EngineSlot::resolve(&config, &EventSink::tracing_only()).unwrap();
    let providers = Providers::from_config(&config).unwrap();
    let settings = RunSettings::from_config(&config).unwrap();
    let events = RunEvents::recording(EventSink::tracing_only(), None);
    let mut runner = Runner::new(&config, &slot, &providers, settings, events);
    let mut w = world();

    let report = runner
        .run_turn(&mut w.session, Some(AgentMessage::user_text("hi", 1)))
        .unwrap();

    assert_eq!(report.model.to_string(), "local/large");
    assert_eq!(report.window, 64_000);
    assert_eq!(text_of(&report.reply), "hello from large");
    assert_eq!(report.prompt_tokens, 12);
    // Exactly one request, and it went to the fallback model.
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].body["model"], "large");
    // The model's own output cap (`maxTokens`) goes with its requests.
    assert_eq!(requests[0].body["max_tokens"], 4096);
    let kinds = kinds(runner.events());
    assert!(kinds.contains(&"guard_block".to_string()), "{kinds:?}");
    assert!(kinds.contains(&"response".to_string()), "{kinds:?}");
    // The session holds the user message and the answer.
    let context = w.session.context();
    assert_eq!(context.messages.len(), 2);
    assert_eq!(text_of(&context.messages[1]), "hello from large");
}

#[test]
fn with_no_fallback_the_turn_stops_with_the_block_message_and_the_server_sees_nothing() {
    let server = Loopback::start();
    server.push(openai_text_stream("never sent", 1, 1));
    let config = local_config(&server.url(), "");
    let slot = EngineSlot::resolve(&config, &EventSink::tracing_only()).unwrap();
    let providers = Providers::from_config(&config).unwrap();
    let settings = RunSettings::from_config(&config).unwrap();
    let events = RunEvents::recording(EventSink::tracing_only(), None);
    let mut runner = Runner::new(&config, &slot, &providers, settings, events);
    let mut w = world();

    let err = runner
        .run_turn(&mut w.session, Some(AgentMessage::user_text("hi", 1)))
        .unwrap_err();

    assert!(matches!(err, TurnError::Blocked { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "Model context window too small (8000 tokens). Minimum is 16000."
    );
    assert_eq!(server.request_count(), 0);
    let kinds = kinds(runner.events());
    assert_eq!(kinds, ["guard_block", "give_up"]);
    // Nothing was appended: the turn never started.
    assert!(w.session.context().messages.is_empty());
}

#[test]
fn the_server_receives_a_repaired_transcript_whatever_the_session_holds() {
    let server = Loopback::start();
    server.push(openai_text_stream("ok", 30, 2));
    let config = local_config(&server.url(), r#""local/large""#);
    let slot = EngineSlot::resolve(&config, &EventSink::tracing_only()).unwrap();
    let providers = Providers::from_config(&config).unwrap();
    let settings = RunSettings::from_config(&config).unwrap();
    let events = RunEvents::recording(EventSink::tracing_only(), None);
    let mut runner = Runner::new(&config, &slot, &providers, settings, events);
    let mut w = world();
    // A call whose result never came, and a result whose call is gone: written straight into
    // the file, as a crash or another tool would leave them.
    let call = common::tool_call("call_1", "read", "a", 2);
    w.session
        .append_message(AgentMessage::user_text("read a", 1))
        .unwrap();
    w.session.append_message(call).unwrap();
    w.session
        .append_message(AgentMessage::tool_result(
            "call_zzz", "read", "orphan", false, 3,
        ))
        .unwrap();

    runner
        .run_turn(&mut w.session, Some(AgentMessage::user_text("go on", 4)))
        .unwrap();

    let body = &server.requests()[0].body;
    let messages = body["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    // The call got a synthetic result right after it; the orphan is gone.
    assert_eq!(roles, ["user", "assistant", "tool", "user"], "{body:#}");
    assert_eq!(messages[2]["tool_call_id"], "call_1");
    assert!(!body.to_string().contains("call_zzz"));
    assert!(kinds(runner.events()).contains(&"hygiene".to_string()));
    // The session itself is untouched by the repair: the orphan is still on disk.
    let on_disk = std::fs::read_to_string(w.session.path()).unwrap();
    assert!(on_disk.contains("call_zzz"));
}

#[test]
fn an_overflow_nothing_can_shrink_ends_in_the_actionable_error_without_retrying() {
    let server = Loopback::start();
    server.push(openai_overflow_error(64_000, 70_000));
    let config = local_config(&server.url(), r#""local/large""#);
    let slot = EngineSlot::resolve(&config, &EventSink::tracing_only()).unwrap();
    let providers = Providers::from_config(&config).unwrap();
    let settings = RunSettings::from_config(&config).unwrap();
    let events = RunEvents::recording(EventSink::tracing_only(), None);
    let mut runner = Runner::new(&config, &slot, &providers, settings, events);
    let mut w = world();

    let err = runner
        .run_turn(&mut w.session, Some(AgentMessage::user_text("hi", 1)))
        .unwrap_err();

    assert_eq!(err.kind(), "context_overflow", "{err:?}");
    assert!(
        err.to_string()
            .starts_with("Context overflow: prompt too large for the model."),
        "{err}"
    );
    assert_eq!(server.request_count(), 1);
    let kinds = kinds(runner.events());
    assert!(kinds.contains(&"overflow".to_string()), "{kinds:?}");
    assert_eq!(kinds.last().map(String::as_str), Some("give_up"));
}

#[test]
fn with_no_config_the_simulator_answers_offline() {
    let config = Config::default();
    let slot = EngineSlot::resolve(&config, &EventSink::tracing_only()).unwrap();
    let providers = Providers::from_config(&config).unwrap();
    let settings = RunSettings::from_config(&config).unwrap();
    let events = RunEvents::recording(EventSink::tracing_only(), None);
    let mut runner = Runner::new(&config, &slot, &providers, settings, events);
    let mut w = world();

    let report = runner
        .run_turn(&mut w.session, Some(AgentMessage::user_text("hi there", 1)))
        .unwrap();
    assert_eq!(report.model.to_string(), "sim/default");
    assert_eq!(report.window, 200_000);
    assert!(report.prompt_tokens > 0);
    assert_eq!(w.session.context().messages.len(), 2);
}

/// A runner on a 32k simulated model and a session holding `reads` tool results of 10,000
/// characters each, written straight into the file (as an import would).
fn session_with_reads(reads: usize) -> (Config, World) {
    let config = config::parse(
        "[agents.defaults.model]\nprimary = \"sim/mid\"\n\
         [agents.defaults.compaction]\nreserveTokensFloor = 20000\n\
         [[models.providers.sim.models]]\nid = \"mid\"\ncontextWindow = 32000\n",
        Path::new("plugins.toml"),
    )
    .unwrap();
    let mut w = world();
    w.session
        .append_message(AgentMessage::user_text("read the logs", 1))
        .unwrap();
    for i in 0..reads {
        let call: AgentMessage = serde_json::from_value(json!({
            "role": "assistant",
            "content": [{"type": "toolCall", "id": format!("c{i}"), "name": "read", "arguments": {"path": format!("log{i}")}}],
            "api": "sim", "provider": "sim", "model": "mid",
            "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                      "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
            "stopReason": "toolUse", "timestamp": 2
        }))
        .unwrap();
        w.session.append_message(call).unwrap();
        let body = format!("line {i}\n").repeat(1_250);
        w.session
            .append_message(AgentMessage::tool_result(
                format!("c{i}"),
                "read",
                body,
                false,
                3,
            ))
            .unwrap();
    }
    (config, w)
}

/// Runs one turn; returns the events and the report.
fn turn_over(
    config: &Config,
    w: &mut World,
) -> (
    Vec<rampart_host::run::RecordedEvent>,
    rampart_host::run::TurnReport,
    u64,
) {
    let slot = EngineSlot::resolve(config, &EventSink::tracing_only()).unwrap();
    let providers = Providers::from_config(config).unwrap();
    let settings = RunSettings::from_config(config).unwrap();
    let events = RunEvents::recording(EventSink::tracing_only(), None);
    let mut runner = Runner::new(config, &slot, &providers, settings, events);
    let report = runner
        .run_turn(
            &mut w.session,
            Some(AgentMessage::user_text("summarise", 4)),
        )
        .unwrap();
    let seen = providers.sim("sim").unwrap().requests_seen();
    (runner.events().drain(), report, seen)
}

fn routes(events: &[rampart_host::run::RecordedEvent]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.kind == "precheck_route")
        .map(|e| e.data["route"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_precheck_truncates_tool_results_in_the_session_before_anything_is_sent() {
    // Five reads: about 12,500 tokens, under the tool-loop limit but over what the precheck
    // leaves the prompt after OpenClaw's flat 20,000-token reserve, pinned here.
    let (config, mut w) = session_with_reads(5);
    let before = std::fs::read_to_string(w.session.path()).unwrap();

    let (events, report, seen) = turn_over(&config, &mut w);

    let routes = routes(&events);
    assert_ne!(routes[0], "fits", "{events:#?}");
    assert_eq!(
        routes.last().map(String::as_str),
        Some("fits"),
        "{routes:?}"
    );
    let pass = events.iter().find(|e| e.kind == "truncation_pass").unwrap();
    assert_eq!(pass.data["changed"], true);
    assert_eq!(report.truncation_passes, 1);
    // One request, after the truncation, and it fit.
    assert_eq!(seen, 1);
    assert!(report.prompt_tokens < 32_000, "{report:?}");
    // The rewrite appended a branch: everything the file held before is still there.
    let after = std::fs::read_to_string(w.session.path()).unwrap();
    assert!(after.starts_with(&before));
}

#[test]
fn the_tool_loop_guard_overflow_recovers_through_compaction() {
    // Eight reads: the tool-loop guard's estimate exceeds its safe threshold.
    let (config, mut w) = session_with_reads(8);

    let (events, report, seen) = turn_over(&config, &mut w);

    let overflow = events.iter().find(|e| e.kind == "overflow").unwrap();
    assert_eq!(
        overflow.data["message"],
        "Context overflow: estimated context size exceeds safe threshold during tool loop."
    );
    let order: Vec<&str> = events
        .iter()
        .map(|e| e.kind.as_str())
        .filter(|k| {
            [
                "overflow",
                "compaction_end",
                "truncation_pass",
                "retry",
                "request",
            ]
            .contains(k)
        })
        .collect();
    assert_eq!(order, ["overflow", "compaction_end", "retry", "request"]);
    assert_eq!(report.compactions, 1);
    assert_eq!(report.attempts, 2);
    assert_eq!(seen, 1);
}

#[test]
fn when_compaction_fails_the_recovery_truncates_tool_results_in_the_session() {
    // The compaction model cannot be reached and no extractive fallback is allowed, so
    // compaction fails; the one truncation pass must rescue the turn.
    let (_, mut w) = session_with_reads(8);
    let config = config::parse(
        &format!(
            "[agents.defaults.model]\nprimary = \"sim/mid\"\n\
             [agents.defaults.compaction]\nmodel = \"gone/m\"\nextractiveFallback = false\n\
             retry = {{ attempts = 1, minDelayMs = 0, maxDelayMs = 0, jitter = 0 }}\n\
             [[models.providers.sim.models]]\nid = \"mid\"\ncontextWindow = 32000\n\
             [models.providers.gone]\napi = \"openai-completions\"\nbaseUrl = \"{}\"\nmaxRetries = 0\n\
             [[models.providers.gone.models]]\nid = \"m\"\ncontextWindow = 128000\n",
            common::loopback::refused_url()
        ),
        Path::new("plugins.toml"),
    )
    .unwrap();
    let sink = EventSink::tracing_only();
    let providers = std::sync::Arc::new(Providers::from_config(&config).unwrap());
    let resources = rampart_host::engine::slot::HostResources {
        blobs: None,
        llm: Some(std::sync::Arc::new(
            rampart_host::run::llm::ProvidersLlm::new(providers.clone()),
        )),
        ..Default::default()
    };
    let slot = EngineSlot::resolve_full(&config, &sink, &resources).unwrap();
    let settings = RunSettings::from_config(&config).unwrap();
    let mut runner = Runner::new(
        &config,
        &slot,
        &*providers,
        settings,
        RunEvents::recording(sink, None),
    );

    let report = runner
        .run_turn(
            &mut w.session,
            Some(AgentMessage::user_text("summarise", 4)),
        )
        .unwrap();

    let events = runner.events().drain();
    let order: Vec<&str> = events
        .iter()
        .map(|e| e.kind.as_str())
        .filter(|k| {
            [
                "overflow",
                "compaction_end",
                "truncation_pass",
                "retry",
                "request",
            ]
            .contains(k)
        })
        .collect();
    assert_eq!(
        order,
        [
            "overflow",
            "compaction_end",
            "truncation_pass",
            "retry",
            "request"
        ],
        "{events:#?}"
    );
    let end = events.iter().find(|e| e.kind == "compaction_end").unwrap();
    assert_eq!(end.data["compacted"], false);
    assert_eq!(report.truncation_passes, 1);
    assert_eq!(report.compactions, 0);
}

#[test]
fn cache_ttl_pruning_waits_for_the_cache_to_expire_then_prunes_in_memory_only() {
    let config = config::parse(
        "[agents.defaults.model]\nprimary = \"sim/mid\"\n\
         [agents.defaults.contextPruning]\nmode = \"cache-ttl\"\nttl = \"5m\"\n\
         [[models.providers.sim.models]]\nid = \"mid\"\ncontextWindow = 200000\n",
        Path::new("plugins.toml"),
    )
    .unwrap();
    // One sink for the engines and the run loop, so the engine's `prune` is read back too.
    let sink = EventSink::tracing_only();
    let slot = EngineSlot::resolve(&config, &sink).unwrap();
    let providers = Providers::from_config(&config).unwrap();
    let settings = RunSettings::from_config(&config).unwrap();
    let events = RunEvents::recording(sink, None);
    let mut runner = Runner::new(&config, &slot, &providers, settings, events);
    let mut w = world();
    // Eight old reads of 42,000 characters: over the soft-trim ratio of a 200k window, within
    // what the guards let through.
    w.session
        .append_message(AgentMessage::user_text("read everything", 1))
        .unwrap();
    for i in 0..8 {
        let call: AgentMessage = serde_json::from_value(json!({
            "role": "assistant",
            "content": [{"type": "toolCall", "id": format!("c{i}"), "name": "read", "arguments": {"path": format!("f{i}")}}],
            "api": "sim", "provider": "sim", "model": "mid",
            "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                      "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
            "stopReason": "toolUse", "timestamp": 2
        }))
        .unwrap();
        w.session.append_message(call).unwrap();
        w.session
            .append_message(AgentMessage::tool_result(
                format!("c{i}"),
                "read",
                format!("row {i}\n").repeat(6_000),
                false,
                3,
            ))
            .unwrap();
    }
    let t0 = 1_800_000_000_000u64;
    let pruned = |events: &[rampart_host::run::RecordedEvent]| {
        events
            .iter()
            .any(|e| e.kind == "prune" && e.source == "legacy")
    };

    // No cache touch yet: nothing is pruned, and the answer records one.
    runner.set_now(Some(t0));
    let first = runner
        .run_turn(&mut w.session, Some(AgentMessage::user_text("one", 4)))
        .unwrap();
    let ev = runner.events().drain();
    assert!(!pruned(&ev));
    assert!(!ev.iter().any(|e| e.kind == "overflow"), "{ev:#?}");
    // Within the TTL the cache is warm: still nothing.
    runner.set_now(Some(t0 + 60_000));
    for n in 0..3 {
        runner
            .run_turn(
                &mut w.session,
                Some(AgentMessage::user_text(format!("turn {n}"), 5)),
            )
            .unwrap();
    }
    assert!(!pruned(&runner.events().drain()));
    let on_disk = std::fs::read_to_string(w.session.path()).unwrap();

    // Past the TTL the old results are pruned for the request only.
    runner.set_now(Some(t0 + 60_000 + 6 * 60_000));
    let later = runner
        .run_turn(&mut w.session, Some(AgentMessage::user_text("two", 6)))
        .unwrap();
    let late_events = runner.events().drain();
    assert!(pruned(&late_events), "{late_events:#?}");
    assert!(
        later.prompt_tokens < first.prompt_tokens,
        "{} vs {}",
        later.prompt_tokens,
        first.prompt_tokens
    );
    // The session only grew: the pruned results are whole on disk.
    let after = std::fs::read_to_string(w.session.path()).unwrap();
    assert!(after.starts_with(&on_disk));
    assert!(after.contains(&"row 0\n".repeat(6_000).replace('\n', "\\n")));
}

/// Issue 12, defect 7: a `required` engine that fails a call stops the turn with its line;
/// the host does not go on with the fallback, and nothing reaches the model.
#[test]
fn a_required_engine_that_fails_stops_the_turn_before_any_request() {
    let text = format!(
        r#"
[plugins.slots]
contextEngine = "fx-panic-assemble"
[plugins.engines.fx-panic-assemble]
path = "{}"
required = true
"#,
        crate::common::fixture("fx-panic-assemble").display()
    );
    let config = config::parse(&text, Path::new("plugins.toml")).unwrap();
    let slot = EngineSlot::resolve(&config, &EventSink::tracing_only()).unwrap();
    let providers = Providers::from_config(&config).unwrap();
    let sim = providers.sim("sim").unwrap();
    let settings = RunSettings::from_config(&config).unwrap();
    let events = RunEvents::recording(EventSink::tracing_only(), None);
    let mut runner = Runner::new(&config, &slot, &providers, settings, events);
    let mut w = world();

    let err = runner
        .run_turn(&mut w.session, Some(AgentMessage::user_text("hi", 1)))
        .unwrap_err();

    assert_eq!(err.kind(), "required_engine", "{err}");
    assert!(err.to_string().contains("fx-panic-assemble"), "{err}");
    assert_eq!(sim.requests_seen(), 0, "nothing was sent to the model");
}
