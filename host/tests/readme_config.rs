//! The configuration shown in the README's "Models" section is a working configuration: the
//! host parses it, builds its providers and resolves its windows.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use rampart_host::config;
use rampart_host::providers::registry::Providers;
use rampart_host::run::RunSettings;

fn models_example() -> String {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let section = readme
        .split("\n## Models\n")
        .nth(1)
        .expect("a Models section");
    let block = section.split("```toml\n").nth(1).expect("a toml block");
    block.split("```").next().unwrap().to_string()
}

#[test]
fn the_readme_models_example_is_a_valid_config() {
    let text = models_example();
    let config = config::parse(&text, Path::new("README.md")).unwrap();
    let providers = Providers::from_config(&config).unwrap();
    let settings = RunSettings::from_config(&config).unwrap();
    let names: Vec<String> = settings.candidates.iter().map(|n| n.to_string()).collect();
    assert_eq!(names, ["local/qwen", "openai/gpt-4o"]);
    assert_eq!(
        providers.settings("local").unwrap().base_url.as_deref(),
        Some("http://127.0.0.1:8080/v1")
    );
    let window = rampart_host::models::resolve_window(
        &config,
        &"local/qwen".parse().unwrap(),
        Default::default(),
    );
    assert_eq!(window.tokens, 32_768);
}

#[test]
fn the_readme_main_job_replays_its_example_and_leaves_it_untouched() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let line = readme
        .lines()
        .find(|l| l.starts_with("cargo build --release") && l.contains("rampart replay"))
        .expect("the main-job line");
    let args: Vec<&str> = line
        .split("target/release/rampart ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .collect();
    let input = format!("{root}/{}", args[1]);
    let before = std::fs::read(&input).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rampart"))
        .args(&args)
        .current_dir(root)
        .env_remove("RAMPART_CONFIG")
        .env("TMPDIR", std::env::temp_dir())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("summary"), "{stdout}");
    assert!(stdout.contains("no errors"), "{stdout}");
    assert_eq!(std::fs::read(&input).unwrap(), before);
}

/// The defaults the README states are the ones the code defines (each is defined once, in the
/// code; this keeps the prose from drifting from it).
#[test]
fn the_readme_states_the_defaults_the_code_defines() {
    use rampart_context::guards::window::{
        CONTEXT_WINDOW_HARD_MIN_TOKENS, CONTEXT_WINDOW_WARN_BELOW_TOKENS, DEFAULT_CONTEXT_TOKENS,
    };
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let readme = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    let thousands = |n: u64| {
        let s = n.to_string();
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        out
    };
    let statements = [
        format!(
            "then {}; an `agents.defaults.contextTokens` cap",
            thousands(DEFAULT_CONTEXT_TOKENS)
        ),
        format!(
            "Below {} tokens it warns; below {} it blocks",
            thousands(CONTEXT_WINDOW_WARN_BELOW_TOKENS),
            thousands(CONTEXT_WINDOW_HARD_MIN_TOKENS)
        ),
        format!("Minimum is {CONTEXT_WINDOW_HARD_MIN_TOKENS}."),
        format!(
            "(`timeoutSeconds`, default {})",
            rampart_context::compaction::settings::DEFAULT_TIMEOUT_SECONDS
        ),
        format!(
            "(`ttl`, default {} minutes)",
            rampart_context::pruning::DEFAULT_TTL_MS / 60_000
        ),
        format!("with a {}-token window", thousands(DEFAULT_CONTEXT_TOKENS)),
    ];
    for statement in statements {
        assert!(
            readme.contains(&statement),
            "README.md should say `{statement}`, as the code defines it"
        );
    }
}

/// The reference block of the README's "Configuration" section parses, and the system
/// prompt's keys in it mean what the comments say.
#[test]
fn the_readme_configuration_block_is_a_valid_config_with_the_prompt_keys() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let section = readme
        .split("\n## Configuration\n")
        .nth(1)
        .expect("a Configuration section");
    let block = section.split("```toml\n").nth(1).expect("a toml block");
    let text = block.split("```").next().unwrap();
    let config = config::parse(text, Path::new("/etc/rampart/plugins.toml")).unwrap();
    let defaults = &config.agent_defaults;
    assert_eq!(defaults.user_timezone.as_deref(), Some("Europe/Berlin"));
    assert_eq!(defaults.bootstrap_limits.per_file(), 20_000);
    assert_eq!(defaults.bootstrap_limits.total(), 150_000);
    assert_eq!(
        defaults.bootstrap_truncation_warning,
        rampart_prompt::TruncationWarningMode::Always
    );
    assert!(defaults.system_prompt_override.is_none());
    assert!(
        defaults
            .workspace_dir(config.source_file.as_deref(), Path::new("/data/sessions"))
            .ends_with("agent")
    );

    // The [serve] block's systemPrompt is the default it states.
    let serve = readme
        .split("\n### Configuration: `[serve]`\n")
        .nth(1)
        .and_then(|s| s.split("```toml\n").nth(1))
        .and_then(|b| b.split("```").next())
        .expect("the [serve] block");
    let config = config::parse(serve, Path::new("README.md")).unwrap();
    assert_eq!(
        config.serve.system_prompt,
        rampart_host::config::serve::SystemPromptSource::Client
    );
    // And its minAnswerTokens the default the code keeps.
    assert_eq!(
        config.serve.min_answer_tokens,
        rampart_host::config::serve::DEFAULT_MIN_ANSWER_TOKENS
    );
}
