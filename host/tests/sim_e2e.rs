//! The simulator through the public API, as the run loop and a replay use it: configured from
//! a `plugins.toml` text, reached by `provider/model` name, and failing like a real provider
//! when a growing conversation no longer fits.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use rampart_context::overflow::{is_likely_context_overflow_error, observed_overflow_tokens};
use rampart_host::config;
use rampart_host::providers::registry::Providers;
use rampart_host::providers::{ModelRequest, ProviderError, ProviderErrorKind};
use rampart_message::wire::SharedMessage;
use rampart_message::{AgentMessage, ContentBlock, StopReason};

const CONFIG: &str = r#"
[agents.defaults.model]
primary = "sim/small"

[[models.providers.sim.models]]
id = "small"
contextWindow = 2000

[models.providers.gem]
api = "sim"
overflowWording = "gemini"

[[models.providers.gem.models]]
id = "flash"
contextWindow = 1000
"#;

fn providers() -> Providers {
    let config = config::parse(CONFIG, Path::new("plugins.toml")).unwrap();
    Providers::from_config(&config).unwrap()
}

fn request(model: &str, messages: &[SharedMessage]) -> ModelRequest {
    ModelRequest {
        model: model.to_string(),
        system: Some("You are a test.".to_string()),
        messages: messages.to_vec().into(),
        max_tokens: None,
        deadline: None,
        ..Default::default()
    }
}

fn text(message: &rampart_message::AssistantMessage) -> String {
    message
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect()
}

/// Appends turns of ~100 tokens until the provider refuses; returns the error and how many
/// answers came before it.
fn grow_until_overflow(providers: &Providers, name: &str) -> (ProviderError, usize) {
    let name: rampart_host::config::ModelName = name.parse().unwrap();
    let model = name.model.as_str();
    let provider = providers.get(&name).unwrap();
    let mut history: Vec<SharedMessage> = Vec::new();
    for turn in 0..1000 {
        history.push(Arc::new(AgentMessage::user_text("x".repeat(400), turn)));
        match provider.complete(&request(model, &history)) {
            Ok(answer) => history.push(Arc::new(AgentMessage::Assistant(answer.message))),
            Err(e) => return (e, turn as usize),
        }
    }
    panic!("no overflow after 1000 turns");
}

#[test]
fn a_growing_conversation_overflows_with_a_recognisable_anthropic_error() {
    let providers = providers();
    let (err, answered) = grow_until_overflow(&providers, "sim/small");
    assert!(answered > 5, "{answered}");
    assert_eq!(err.kind(), ProviderErrorKind::ContextOverflow);
    let ProviderError::ContextOverflow {
        provider,
        message,
        observed_tokens,
    } = err
    else {
        unreachable!()
    };
    assert_eq!(provider, "sim");
    assert!(is_likely_context_overflow_error(&message), "{message}");
    let sim = providers.sim("sim").unwrap();
    let counted = sim.last_prompt_tokens().unwrap();
    assert!(counted > 2000);
    assert_eq!(observed_tokens, Some(counted));
    assert_eq!(observed_overflow_tokens(&message), Some(counted));
    assert_eq!(
        message,
        format!("prompt is too long: {counted} tokens > 2000 maximum")
    );
    let log = sim.log();
    assert_eq!(log.requests, answered as u64 + 1);
    assert_eq!(log.overflows, 1);
}

#[test]
fn a_second_simulator_speaks_its_own_wording() {
    let providers = providers();
    let (err, _) = grow_until_overflow(&providers, "gem/flash");
    let ProviderError::ContextOverflow {
        provider,
        message,
        observed_tokens,
    } = err
    else {
        unreachable!()
    };
    assert_eq!(provider, "gem");
    assert!(message.contains("INVALID_ARGUMENT"), "{message}");
    assert!(is_likely_context_overflow_error(&message), "{message}");
    // Gemini states the size, but not where OpenClaw looks for it.
    assert_eq!(observed_tokens, None);
    // The main simulator saw none of it.
    assert_eq!(providers.sim("sim").unwrap().requests_seen(), 0);
}

#[test]
fn a_replay_gets_its_recorded_turns_back_with_fresh_usage() {
    let providers = providers();
    let sim = providers.sim("sim").unwrap();
    for (i, stop) in [(1, StopReason::ToolUse), (2, StopReason::Stop)] {
        let AgentMessage::Assistant(mut recorded) = AgentMessage::assistant_text(
            format!("recorded turn {i}"),
            "anthropic-messages",
            "anthropic",
            "claude",
            i,
        ) else {
            unreachable!()
        };
        recorded.stop_reason = stop;
        sim.push_reply(recorded);
    }
    let provider = providers.get(&"sim/small".parse().unwrap()).unwrap();
    let history = vec![Arc::new(AgentMessage::user_text("hello", 1))];
    let first = provider.complete(&request("small", &history)).unwrap();
    let second = provider.complete(&request("small", &history)).unwrap();
    let third = provider.complete(&request("small", &history)).unwrap();
    assert_eq!(text(&first.message), "recorded turn 1");
    assert_eq!(first.message.stop_reason, StopReason::ToolUse);
    assert_eq!(text(&second.message), "recorded turn 2");
    assert!(text(&third.message).starts_with("(sim) reply to turn with"));
    for answer in [&first, &second, &third] {
        let m = &answer.message;
        assert_eq!((m.api.as_str(), m.provider.as_str()), ("sim", "sim"));
        assert_eq!(m.model, "small");
        assert_eq!(m.usage.input, sim.last_prompt_tokens().unwrap());
        assert_eq!(m.usage.total_tokens, Some(m.usage.input + m.usage.output));
    }
    assert_eq!(sim.log().scripted, 2);
}

#[test]
fn a_misspelt_model_or_key_is_caught() {
    let providers = providers();
    let err = providers
        .get(&"sim/smal".parse().unwrap())
        .unwrap()
        .complete(&request("smal", &[]))
        .unwrap_err();
    assert_eq!(err.kind(), ProviderErrorKind::BadRequest);
    let shown = err.to_string();
    assert!(
        shown.contains("smal`") && shown.contains("small, default"),
        "{shown}"
    );
    // The built-in model is always there.
    assert!(
        providers
            .get(&"sim/default".parse().unwrap())
            .unwrap()
            .complete(&request("default", &[]))
            .is_ok()
    );

    // A misspelt key stops the configuration from loading at all.
    let err = config::parse(
        "[models.providers.sim]\noverflowWordng = \"openai\"\n",
        Path::new("/etc/rampart/plugins.toml"),
    )
    .unwrap_err();
    let shown = err.to_string();
    assert!(
        shown.contains("/etc/rampart/plugins.toml")
            && shown.contains("models.providers.sim.overflowWordng")
            && shown.contains("overflowWording"),
        "{shown}"
    );
}
