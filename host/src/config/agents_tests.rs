use std::path::Path;

use rampart_context::compaction::settings::CompactionSettings;
use rampart_context::pruning::PruningSettings;

use crate::config::Config;

fn cfg(text: &str) -> Config {
    crate::config::parse(text, Path::new("plugins.toml")).unwrap()
}

const EVERY_KEY: &str = r#"
[agents.defaults]
contextTokens = 90000
[agents.defaults.model]
primary = "sim/default"
[agents.defaults.contextLimits]
toolResultMaxChars = 12000
[agents.defaults.compaction]
mode = "default"
reserveTokens = 12000
keepRecentTokens = 8000
reserveTokensFloor = 0
maxHistoryShare = 0.4
customInstructions = "keep file paths"
recentTurnsPreserve = 2
identifierPolicy = "custom"
identifierInstructions = "keep ticket ids"
model = "openai/gpt-4o-mini"
timeoutSeconds = 90
parts = 3
maxConcurrency = 2
extractiveFallback = false
qualityGuard = { enabled = true, maxRetries = 2 }
circuitBreaker = { failures = 5, backoffSeconds = 60, maxBackoffSeconds = 600 }
retry = { attempts = 2, minDelayMs = 100, maxDelayMs = 1000, jitter = 0.2 }
[agents.defaults.contextPruning]
mode = "cache-ttl"
ttl = "10m"
keepLastAssistants = 2
softTrimRatio = 0.4
hardClearRatio = 0.6
"#;

/// The engine is built from the host's typed settings, serialised: they must read back as
/// the same settings, or the engine would run with other values than the host checked.
#[test]
fn the_engines_settings_are_the_hosts_read_back() {
    let config = cfg(EVERY_KEY);
    let defaults = &config.agent_defaults;
    let json = defaults.engine_config();
    assert_eq!(
        CompactionSettings::from_value(&json["compaction"]).unwrap(),
        defaults.compaction
    );
    assert_eq!(
        PruningSettings::from_json(&json["contextPruning"]).unwrap(),
        defaults.context_pruning
    );
    assert_eq!(json["contextTokens"], 90_000);
    assert_eq!(json["contextLimits"]["toolResultMaxChars"], 12_000);
    assert!(defaults.pruning.is_some());
    // The legacy engine accepts them as they are.
    let engine =
        rampart_legacy::LegacyEngine::new(crate::engine::slot::legacy_config(&config), None);
    assert!(engine.is_ok(), "{:?}", engine.err());
}

/// A caller's change to the typed settings is what the engine sees (a replay drops the
/// agent's `contextTokens` cap), not what the file said.
#[test]
fn the_engine_sees_changed_settings() {
    let mut config = cfg(EVERY_KEY);
    config.agent_defaults.context_tokens = None;
    let json = crate::engine::slot::legacy_config(&config);
    assert!(json.get("contextTokens").is_none(), "{json}");
}

#[test]
fn workspace_and_prompt_keys() {
    let c = cfg(r#"
[agents.defaults]
workspace = "ws"
userTimezone = "Europe/Berlin"
systemPromptOverride = "  You are terse.  "
bootstrapMaxChars = 500
bootstrapTotalMaxChars = 900
bootstrapPromptTruncationWarning = "once"
"#);
    let d = &c.agent_defaults;
    assert_eq!(
        d.workspace_dir(
            Some(Path::new("/etc/rampart/plugins.toml")),
            Path::new("/data/sessions")
        ),
        Path::new("/etc/rampart/ws")
    );
    assert_eq!(d.user_timezone.as_deref(), Some("Europe/Berlin"));
    assert_eq!(d.system_prompt_override.as_deref(), Some("You are terse."));
    assert_eq!(d.bootstrap_limits.per_file(), 500);
    assert_eq!(d.bootstrap_limits.total(), 900);
    assert_eq!(
        d.bootstrap_truncation_warning,
        rampart_prompt::TruncationWarningMode::Once
    );
    // No workspace: beside the sessions directory, in the same data directory.
    let none = cfg("");
    assert_eq!(
        none.agent_defaults
            .workspace_dir(None, Path::new("/data/sessions")),
        Path::new("/data/workspace")
    );
    assert_eq!(
        none.agent_defaults.bootstrap_truncation_warning,
        rampart_prompt::TruncationWarningMode::Always
    );
    let e = crate::config::parse(
        "[agents.defaults]\nbootstrapPromptTruncationWarning = \"loud\"\n",
        Path::new("plugins.toml"),
    )
    .unwrap_err();
    assert!(e.to_string().contains("\"always\""), "{e}");
}
