use std::path::Path;
use std::sync::Arc;

use super::*;
use crate::config::{Config, ConfigError};
use crate::providers::ModelRequest;
use crate::providers::registry::{Providers, RegistryError, build_provider};

fn cfg(text: &str) -> Config {
    crate::config::parse(text, Path::new("plugins.toml")).unwrap()
}

/// The checked settings of provider `id`, as the loaded configuration holds them.
fn provider_settings(config: &Config, id: &str) -> Result<ProviderSettings, String> {
    config
        .models
        .provider(id)
        .cloned()
        .ok_or_else(|| format!("no provider {id}"))
}

/// The error loading `text` gives; `_id` names the provider the test is about.
fn settings_err(text: &str, _id: &str) -> ModelsConfigError {
    match crate::config::parse(text, Path::new("plugins.toml")) {
        Err(ConfigError::Settings(e)) => e,
        other => panic!("expected a settings error, got {other:?}"),
    }
}

#[test]
fn the_simulator_exists_without_any_config() {
    let s = provider_settings(&Config::default(), "sim").unwrap();
    assert_eq!(s.api, ApiKind::Sim);
    assert_eq!(s.id, "sim");
    assert_eq!(s.models.len(), 1);
    let m = &s.models[0];
    assert_eq!(m.id, "default");
    assert_eq!(m.context_window, Some(200_000));
    assert_eq!(m.tokenizer.map(|t| t.name()), Some("estimate"));
    assert_eq!(s.timeout, Duration::from_secs(120));
    assert_eq!(s.max_retries, 3);
    assert_eq!(s.retry_base, Duration::from_millis(500));
    assert_eq!((s.base_url, s.api_key_env), (None, None));

    let providers = Providers::from_config(&Config::default()).unwrap();
    let p = providers.get(&"sim/default".parse().unwrap()).unwrap();
    assert_eq!(p.id(), "sim");
    let sim = providers.sim("sim").unwrap();
    assert_eq!(sim.window("default"), Some(200_000));
    assert!(providers.sim("openai").is_none());
}

#[test]
fn user_sim_models_keep_the_default_model() {
    let c = cfg(concat!(
        "[models.providers.sim]\noverflowWording = \"openai\"\n",
        "[[models.providers.sim.models]]\nid = \"small\"\ncontextWindow = 8000\n",
        "tokenizer = \"o200k_base\"\n",
    ));
    let s = provider_settings(&c, "SIM").unwrap();
    let ids: Vec<_> = s.models.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["small", "default"]);
    assert_eq!(s.overflow_wording.map(|w| w.name()), Some("openai"));
    assert_eq!(s.models[0].tokenizer.map(|t| t.name()), Some("o200k_base"));
    // A user's own `default` wins.
    let c = cfg("[[models.providers.sim.models]]\nid = \"default\"\ncontextWindow = 9000\n");
    let s = provider_settings(&c, "sim").unwrap();
    assert_eq!(s.models.len(), 1);
    assert_eq!(s.models[0].context_window, Some(9000));
    // The simulator's counting default is written into the settings, so that everyone
    // reading them (the run loop's precheck) counts as the simulator does.
    assert_eq!(s.models[0].tokenizer.map(|t| t.name()), Some("estimate"));
}

#[test]
fn well_known_network_providers_get_their_endpoints() {
    let s = provider_settings(&Config::default(), "openai").unwrap();
    assert_eq!(s.api, ApiKind::OpenAiCompletions);
    assert_eq!(s.base_url.as_deref(), Some("https://api.openai.com/v1"));
    assert_eq!(s.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
    let c = cfg("[models.providers.anthropic]\ntimeoutSeconds = 30\n");
    let s = provider_settings(&c, "anthropic").unwrap();
    assert_eq!(s.api, ApiKind::AnthropicMessages);
    assert_eq!(s.base_url.as_deref(), Some("https://api.anthropic.com/v1"));
    assert_eq!(s.api_key_env.as_deref(), Some("ANTHROPIC_API_KEY"));
    assert_eq!(s.timeout, Duration::from_secs(30));
    assert_eq!(
        s.stream_idle_timeout,
        Duration::from_secs(DEFAULT_STREAM_IDLE_TIMEOUT_SECONDS)
    );
    let c = cfg("[models.providers.anthropic]\nstreamIdleTimeoutSeconds = 45\n");
    let s = provider_settings(&c, "anthropic").unwrap();
    assert_eq!(s.stream_idle_timeout, Duration::from_secs(45));
    // Overrides are kept; a trailing slash is dropped.
    let c = cfg(
        "[models.providers.openai]\nbaseUrl = \"http://127.0.0.1:9/v1/\"\napiKeyEnv = \"MY_KEY\"\n",
    );
    let s = provider_settings(&c, "openai").unwrap();
    assert_eq!(s.base_url.as_deref(), Some("http://127.0.0.1:9/v1"));
    assert_eq!(s.api_key_env.as_deref(), Some("MY_KEY"));
}

#[test]
fn api_aliases_and_custom_providers() {
    let c = cfg(concat!(
        "[models.providers.local-llama]\napi = \"openai\"\nbaseUrl = \"http://localhost:8080/v1\"\n",
        "maxRetries = 0\nretryBaseMs = 250\ntimeoutSeconds = 2.5\n",
        "[[models.providers.local-llama.models]]\nid = \"qwen\"\ncontextWindow = 32768\n",
        "name = \"Qwen\"\nreasoning = false\ninput = [\"text\"]\nmaxTokens = 4096\n",
        "cost = { input = 0, output = 0 }\n",
        "[models.providers.claude-proxy]\napi = \"anthropic\"\nbaseUrl = \"https://proxy.example/v1\"\n",
        "[models.providers.other]\napi = \"anthropic-messages\"\nbaseUrl = \"https://x.example\"\n",
        "[models.providers.fake]\napi = \"sim\"\n",
    ));
    let s = provider_settings(&c, "local_llama").unwrap();
    assert_eq!(s.id, "local-llama");
    assert_eq!(s.api, ApiKind::OpenAiCompletions);
    assert_eq!(s.api_key_env, None);
    assert_eq!(s.max_retries, 0);
    assert_eq!(s.retry_base, Duration::from_millis(250));
    assert_eq!(s.timeout, Duration::from_millis(2500));
    assert_eq!(s.models[0].provider, "local-llama");
    assert_eq!(s.models[0].context_window, Some(32768));
    assert_eq!(
        provider_settings(&c, "claude-proxy").unwrap().api,
        ApiKind::AnthropicMessages
    );
    assert_eq!(
        provider_settings(&c, "other").unwrap().api,
        ApiKind::AnthropicMessages
    );
    // A sim under another id gets no implicit `default`.
    let fake = provider_settings(&c, "fake").unwrap();
    assert_eq!(fake.api, ApiKind::Sim);
    assert!(fake.models.is_empty());
    // A network model's tokenizer is left to the run loop's default by model id.
    assert_eq!(s.models[0].tokenizer, None);

    let providers = Providers::from_config(&c).unwrap();
    assert!(providers.sim("fake").is_some());
    assert_eq!(
        providers.ids(),
        [
            "anthropic",
            "claude-proxy",
            "fake",
            "local-llama",
            "openai",
            "other",
            "sim"
        ]
    );
    let a = providers.get(&"local-llama/qwen".parse().unwrap()).unwrap();
    let b = providers
        .get(&"LOCAL-LLAMA/other".parse().unwrap())
        .unwrap();
    assert!(Arc::ptr_eq(&a, &b), "built once per id");
    assert_eq!(providers.settings("local-llama").unwrap().models.len(), 1);
}

#[test]
fn unknown_keys_name_the_full_key_and_the_allowed_ones() {
    let e = settings_err(
        "[models.providers.openai]\nbaseURL = \"http://x\"\n",
        "openai",
    );
    assert_eq!(e.key, "models.providers.openai.baseURL");
    assert!(e.problem.contains("did you mean `baseUrl`"), "{e}");
    assert!(e.problem.contains("apiKeyEnv, timeoutSeconds"), "{e}");
    // The file, with the line and column of the misspelt key.
    assert_eq!(e.file, "plugins.toml:2:11");
    let e = settings_err(
        "[[models.providers.sim.models]]\nid = \"m\"\ncontextWindows = 5\n",
        "sim",
    );
    assert_eq!(e.key, "models.providers.sim.models[0].contextWindows");
    assert!(e.problem.contains("did you mean `contextWindow`"), "{e}");
    let e = settings_err("[models.providers.sim]\noverflowWordng = \"x\"\n", "sim");
    assert!(e.problem.contains("did you mean `overflowWording`"), "{e}");
    let e = settings_err("[models.providers.sim]\nfoo = 1\n", "sim");
    assert!(!e.problem.contains("did you mean"), "{e}");
    let e = settings_err("[models.providers.openai]\napiKey = \"sk-123\"\n", "openai");
    assert_eq!(e.key, "models.providers.openai.apiKey");
    assert!(
        e.problem.contains("apiKeyEnv") && !e.to_string().contains("sk-123"),
        "{e}"
    );
}

#[test]
fn wrong_types_name_the_key_the_found_type_and_what_is_allowed() {
    let cases = [
        (
            "[models.providers.sim]\napi = 3\n",
            "models.providers.sim.api",
            "integer 3",
        ),
        (
            "[models.providers.openai]\ntimeoutSeconds = \"soon\"\n",
            "models.providers.openai.timeoutSeconds",
            "positive number",
        ),
        (
            "[models.providers.openai]\nstreamIdleTimeoutSeconds = 0\n",
            "models.providers.openai.streamIdleTimeoutSeconds",
            "positive number",
        ),
        (
            "[models.providers.openai]\nmaxRetries = -1\n",
            "models.providers.openai.maxRetries",
            "integer -1",
        ),
        (
            "[models.providers.openai]\nmaxRetries = 1.5\n",
            "models.providers.openai.maxRetries",
            "whole number",
        ),
        (
            "[models.providers.openai]\nretryBaseMs = true\n",
            "models.providers.openai.retryBaseMs",
            "boolean true",
        ),
        (
            "[models.providers.openai]\nbaseUrl = \"api.openai.com\"\n",
            "models.providers.openai.baseUrl",
            "http:// or https://",
        ),
        (
            "[models.providers.openai]\napiKeyEnv = \"sk-abc def\"\n",
            "models.providers.openai.apiKeyEnv",
            "environment variable",
        ),
        (
            "[models.providers.sim]\nmodels = \"x\"\n",
            "models.providers.sim.models",
            "array of tables",
        ),
        (
            "[models.providers.sim]\nmodels = [1]\n",
            "models.providers.sim.models[0]",
            "integer 1",
        ),
        (
            "[[models.providers.sim.models]]\ncontextWindow = 5\n",
            "models.providers.sim.models[0].id",
            "required",
        ),
        (
            "[[models.providers.sim.models]]\nid = \"m\"\ncontextWindow = 0\n",
            "models.providers.sim.models[0].contextWindow",
            "integer 0",
        ),
        (
            "[[models.providers.sim.models]]\nid = \"m\"\ntokenizer = \"gpt2\"\n",
            "models.providers.sim.models[0].tokenizer",
            "o200k_base",
        ),
        (
            "[[models.providers.sim.models]]\nid = \"m\"\nreasoning = \"yes\"\n",
            "models.providers.sim.models[0].reasoning",
            "string \"yes\"",
        ),
        (
            "[[models.providers.sim.models]]\nid = \"m\"\ninput = \"text\"\n",
            "models.providers.sim.models[0].input",
            "array of strings",
        ),
        (
            "[[models.providers.sim.models]]\nid = \"m\"\n[[models.providers.sim.models]]\nid = \"m\"\n",
            "models.providers.sim.models[1].id",
            "repeats",
        ),
        (
            "[models.providers]\nsim = 1\n",
            "models.providers.sim",
            "integer 1",
        ),
        ("[models]\nproviders = 1\n", "models.providers", "integer 1"),
    ];
    for (text, key, found) in cases {
        // The provider asked for is the one the key names.
        let id = if key.starts_with("models.providers.openai") {
            "openai"
        } else {
            "sim"
        };
        let e = settings_err(text, id);
        assert_eq!(e.key, key, "{text}");
        assert!(e.problem.contains(found), "{text}: {e}");
        assert!(e.file.starts_with("plugins.toml:"), "{text}: {e}");
    }
}

#[test]
fn sim_specific_and_network_specific_keys_are_refused_where_they_do_not_apply() {
    let e = settings_err(
        "[models.providers.sim]\nbaseUrl = \"http://x.example\"\n",
        "sim",
    );
    assert_eq!(e.key, "models.providers.sim.baseUrl");
    let e = settings_err(
        "[models.providers.openai]\noverflowWording = \"openai\"\n",
        "openai",
    );
    assert_eq!(e.key, "models.providers.openai.overflowWording");
    let e = settings_err(
        "[models.providers.sim]\noverflowWording = \"azure\"\n",
        "sim",
    );
    assert_eq!(e.key, "models.providers.sim.overflowWording");
    for name in [
        "anthropic",
        "openai",
        "gemini",
        "ollama",
        "bedrock",
        "azure",
    ] {
        assert!(e.problem.contains(name), "{e}");
    }
}

#[test]
fn other_ids_need_an_api_and_a_base_url() {
    let e = settings_err(
        "[models.providers.local]\nbaseUrl = \"http://x.example\"\n",
        "local",
    );
    assert_eq!(e.key, "models.providers.local.api");
    assert!(e.problem.contains("openai-completions"), "{e}");
    let e = settings_err("[models.providers.local]\napi = \"ollama\"\n", "local");
    assert!(e.problem.contains("\"ollama\""), "{e}");
    assert!(e.problem.contains("\"openai-responses\""), "{e}");
    let e = settings_err("[models.providers.local]\napi = \"openai\"\n", "local");
    assert_eq!(e.key, "models.providers.local.baseUrl");
    let e = Providers::from_config(&Config::default())
        .unwrap()
        .provider("groq")
        .err()
        .unwrap();
    assert!(e.to_string().contains("[models.providers.groq]"), "{e}");
    assert!(e.to_string().contains("anthropic, openai, sim"), "{e}");
    // Two spellings of one id are refused rather than one picked.
    let e = settings_err(
        "[models.providers.\"z.ai\"]\napi = \"sim\"\n[models.providers.z-ai]\napi = \"sim\"\n",
        "zai",
    );
    assert!(e.problem.contains("same provider"), "{e}");
}

#[test]
fn model_names_need_a_provider_part() {
    let name = |s: &str| s.parse::<ModelName>();
    assert_eq!(name("sim/small").unwrap(), ModelName::new("sim", "small"));
    assert_eq!(
        name("openrouter/meta-llama/llama-3").unwrap(),
        ModelName::new("openrouter", "meta-llama/llama-3")
    );
    for bad in ["small", "/small", "sim/", ""] {
        let e = name(bad).unwrap_err();
        assert!(e.to_string().contains("provider/model"), "{e}");
    }
    let providers = Providers::from_config(&Config::default()).unwrap();
    let e = providers.get(&name("groq/llama").unwrap()).err().unwrap();
    assert!(
        e.to_string().contains("groq") && e.to_string().contains("anthropic, openai, sim"),
        "{e}"
    );
}

#[test]
fn the_registry_hands_out_the_same_simulator_it_exposes() {
    let c = cfg("[[models.providers.sim.models]]\nid = \"small\"\ncontextWindow = 100\n");
    let providers = Providers::from_config(&c).unwrap();
    let sim = providers.sim("sim").unwrap();
    let AgentMessage::Assistant(reply) = AgentMessage::assistant_text("scripted", "x", "y", "z", 1)
    else {
        unreachable!()
    };
    sim.push_reply(reply);
    let p = providers.get(&"sim/small".parse().unwrap()).unwrap();
    let answer = p
        .complete(&ModelRequest {
            model: "small".into(),
            system: None,
            messages: vec![Arc::new(AgentMessage::user_text("hi", 1))].into(),
            max_tokens: None,
            deadline: None,
            ..Default::default()
        })
        .unwrap();
    assert!(matches!(
        &answer.message.content[0],
        rampart_message::ContentBlock::Text(t) if t.text == "scripted"
    ));
    assert_eq!(sim.requests_seen(), 1);
    assert_eq!(sim.pending_replies(), 0);
}

#[test]
fn build_provider_dispatches_on_the_api() {
    let s = provider_settings(&Config::default(), "openai").unwrap();
    assert_eq!(build_provider(s).unwrap().id(), "openai");
    let s = provider_settings(&Config::default(), "anthropic").unwrap();
    assert_eq!(build_provider(s).unwrap().id(), "anthropic");
    let mut s = provider_settings(&Config::default(), "sim").unwrap();
    s.models.push(s.models[0].clone());
    assert!(matches!(build_provider(s), Err(RegistryError::Config(_))));
}

use rampart_message::AgentMessage;

/// `api = "openai-responses"` (or `"responses"`) names the Responses wire; the well-known
/// `openai` id keeps its endpoint and key variable with it.
#[test]
fn the_responses_api_and_its_alias() {
    let c = cfg(concat!(
        "[models.providers.openai]\napi = \"openai-responses\"\n",
        "[models.providers.proxy]\napi = \"responses\"\nbaseUrl = \"http://127.0.0.1:9/v1\"\n",
    ));
    let openai = provider_settings(&c, "openai").unwrap();
    assert_eq!(openai.api, ApiKind::OpenAiResponses);
    assert_eq!(
        openai.base_url.as_deref(),
        Some("https://api.openai.com/v1")
    );
    assert_eq!(openai.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
    assert_eq!(
        provider_settings(&c, "proxy").unwrap().api,
        ApiKind::OpenAiResponses
    );
    let e = settings_err(
        "[models.providers.local]\napi = \"responses-v2\"\n",
        "local",
    );
    assert!(e.problem.contains("\"responses-v2\""), "{e}");
}
