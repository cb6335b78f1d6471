use rampart_context::guards::window::WindowSource;

use super::*;

fn cfg(text: &str) -> Config {
    crate::config::parse(text, std::path::Path::new("plugins.toml")).unwrap()
}

fn name(text: &str) -> ModelName {
    text.parse().unwrap()
}

fn none(_: &ModelName) -> WindowNumbers {
    WindowNumbers::default()
}

#[test]
fn window_sources_follow_the_reference_order() {
    let c = cfg(
        "[[models.providers.openai.models]]\nid = \"m\"\ncontextTokens = 12000\ncontextWindow = 1050000\n",
    );
    let w = resolve_window(&c, &name("openai/m"), WindowNumbers::default());
    assert_eq!((w.tokens, w.source), (12_000, WindowSource::ModelsConfig));
    // Provider aliases match.
    let c = cfg(
        "[models.providers.\"z.ai\"]\napi = \"sim\"\n[[models.providers.\"z.ai\".models]]\nid = \"g\"\ncontextWindow = 64000\n",
    );
    assert_eq!(
        resolve_window(&c, &name("z-ai/g"), WindowNumbers::default()).tokens,
        64_000
    );
    // The agent cap only lowers.
    let c = cfg("[agents.defaults]\ncontextTokens = 20000\n");
    let reported = WindowNumbers {
        context_window: Some(200_000.0),
        context_tokens: None,
    };
    let w = resolve_window(&c, &name("p/m"), reported);
    assert_eq!(
        (w.tokens, w.source),
        (20_000, WindowSource::AgentContextTokens)
    );
    let c = cfg("[agents.defaults]\ncontextTokens = 128000\n");
    let reported = WindowNumbers {
        context_window: Some(64_000.0),
        context_tokens: None,
    };
    let w = resolve_window(&c, &name("p/m"), reported);
    assert_eq!((w.tokens, w.source), (64_000, WindowSource::Model));
    let w = resolve_window(&Config::default(), &name("p/m"), WindowNumbers::default());
    assert_eq!((w.tokens, w.source), (200_000, WindowSource::Default));
}

/// A configured window is one source, the models config, read once. The guard used to read
/// the same number a second time through the provider registry and report it as what the
/// model itself says.
#[test]
fn a_configured_window_is_the_models_config_source_only() {
    let c = cfg("[[models.providers.sim.models]]\nid = \"m\"\ncontextWindow = 24000\n");
    let chosen = guard_models(&c, &[name("sim/m")], none).unwrap();
    assert_eq!(chosen.window.source, WindowSource::ModelsConfig);
    assert_eq!(chosen.window.tokens, 24_000);
}

#[test]
fn a_blocked_model_fails_over_to_the_next() {
    let c = cfg(concat!(
        "[agents.defaults.model]\nprimary = \"sim/small\"\nfallbacks = [\"sim/large\"]\n",
        "[[models.providers.sim.models]]\nid = \"small\"\ncontextWindow = 8000\n",
        "[[models.providers.sim.models]]\nid = \"large\"\ncontextWindow = 64000\n",
    ));
    let candidates = c.agent_defaults.candidates(&name("sim/default"));
    let chosen = guard_models(&c, &candidates, none).unwrap();
    assert_eq!(chosen.name, name("sim/large"));
    assert_eq!(chosen.skipped.len(), 1);
    assert!(
        chosen.skipped[0].contains("ctx=8000"),
        "{:?}",
        chosen.skipped
    );
    // Without the fallback the turn stops with the reference's message.
    let err = guard_models(&c, &candidates[..1], none).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Model context window too small (8000 tokens). Minimum is 16000."
    );
}

#[test]
fn a_small_window_warns_but_runs() {
    let c = cfg("[[models.providers.sim.models]]\nid = \"m\"\ncontextWindow = 24000\n");
    let chosen = guard_models(&c, &[name("sim/m")], none).unwrap();
    assert!(chosen.warned);
}

fn parse_err(text: &str) -> String {
    crate::config::parse(text, std::path::Path::new("plugins.toml"))
        .unwrap_err()
        .to_string()
}

/// Settings are checked when the file is loaded, so every command (and `config check`)
/// refuses them, with the line of the key.
#[test]
fn malformed_settings_are_refused_at_load_with_their_line() {
    let e = parse_err("# models\n[agents.defaults]\ncontextTokens = \"lots\"\n");
    assert!(e.starts_with("plugins.toml:3:17: "), "{e}");
    assert!(
        e.contains("agents.defaults.contextTokens") && e.contains("positive number"),
        "{e}"
    );
    // A missing key points at its table entry.
    let e = parse_err("\n\n[[models.providers.sim.models]]\ncontextWindow = 5\n");
    assert!(e.starts_with("plugins.toml:3:"), "{e}");
    assert!(e.contains("models.providers.sim.models[0].id"), "{e}");
    // Unknown keys under agents are refused, with what is allowed.
    let e = parse_err("[agents.defaults]\ncontextToken = 5\n");
    assert!(
        e.contains("agents.defaults.contextToken") && e.contains("contextTokens"),
        "{e}"
    );
    // A model name without its provider is refused where it is written.
    let e = parse_err("[agents.defaults.model]\nprimary = \"gpt-4o\"\n");
    assert!(e.starts_with("plugins.toml:2:"), "{e}");
    assert!(e.contains("provider/model"), "{e}");
    // Pruning settings are checked at load too, by the engine's own parser.
    let e = parse_err("[agents.defaults.contextPruning]\nmode = \"cache-ttl\"\nttl = \"-5m\"\n");
    assert!(e.contains("contextPruning.ttl"), "{e}");
}
