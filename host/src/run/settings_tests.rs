//! `RunSettings` reads `agents.defaults` through the same parsers and defaults as the legacy
//! engine. Each test here failed before that, when the host kept its own copies.

use std::path::Path;
use std::time::Duration;

use rampart_context::compaction::settings::MAX_TIMEOUT_SECONDS;
use rampart_context::guards::tool_result::DEFAULT_MAX_LIVE_TOOL_RESULT_CHARS;

use super::*;

/// The settings a run gets from `toml`, or the error loading it gives: the settings are
/// checked once, when the file is read.
fn settings(toml: &str) -> Result<RunSettings, String> {
    let config =
        crate::config::parse(toml, Path::new("plugins.toml")).map_err(|e| e.to_string())?;
    RunSettings::from_config(&config).map_err(|e| e.to_string())
}

/// The host used to default to 400,000 characters "as the legacy engine uses", while the
/// engine used 40,000: a 100,000-character result was capped or not depending on the engine.
#[test]
fn the_default_tool_result_cap_is_the_engines() {
    assert_eq!(
        settings("").unwrap().tool_result_max_chars,
        DEFAULT_MAX_LIVE_TOOL_RESULT_CHARS
    );
    assert_eq!(DEFAULT_MAX_LIVE_TOOL_RESULT_CHARS, 40_000);
    let set = settings("[agents.defaults.contextLimits]\ntoolResultMaxChars = 9000\n").unwrap();
    assert_eq!(set.tool_result_max_chars, 9000);
}

/// The precheck used a hard-coded 20,000 and ignored `compaction.reserveTokens`; then a flat
/// 20,000 floor whatever the window (issue 14). Now the reserve follows the configuration and
/// scales with the window.
#[test]
fn the_precheck_reserve_follows_compaction_reserve_tokens() {
    let reserve =
        |text: &str, window: u64| settings(text).unwrap().compaction.reserve_for(window, None);
    assert_eq!(reserve("", 200_000), 20_000);
    assert_eq!(reserve("", 32_000), 8_000);
    let set = "[agents.defaults.compaction]\nreserveTokens = 30000\n";
    assert_eq!(reserve(set, 200_000), 30_000);
    let set = "[agents.defaults.compaction]\nreserveTokens = 6000\nreserveTokensFloor = 0\n";
    assert_eq!(reserve(set, 200_000), 6_000);
}

/// `timeoutSeconds` was parsed twice: the host took any size, the engine capped it at
/// OpenClaw's largest timer. Now one parser gives both the same value, and a bad value names
/// the file, line and key.
#[test]
fn compaction_timeout_is_parsed_once_with_the_engines_limits() {
    assert_eq!(
        settings("").unwrap().compaction_timeout,
        Duration::from_secs(180)
    );
    let set = settings("[agents.defaults.compaction]\ntimeoutSeconds = 10000000000\n").unwrap();
    assert_eq!(
        set.compaction_timeout,
        Duration::from_secs(MAX_TIMEOUT_SECONDS)
    );
    let err = settings("[agents.defaults.compaction]\ntimeoutSeconds = \"soon\"\n").unwrap_err();
    let text = err;
    assert!(text.starts_with("plugins.toml:2:"), "{text}");
    assert!(
        text.contains("agents.defaults.compaction.timeoutSeconds"),
        "{text}"
    );
    // An unknown key under compaction is refused here too, not only by the engine.
    let err = settings("[agents.defaults.compaction]\nreserveToken = 1\n").unwrap_err();
    assert!(err.contains("reserveToken"), "{err}");
}
