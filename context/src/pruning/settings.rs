//! `agents.defaults.contextPruning`: the configuration as written, its defaults, and the
//! settings pruning runs with.
//!
//! Two types, because they answer different questions:
//! - [`PruningSettings`] is what the user wrote (every key optional, OpenClaw's key names), so a
//!   host can read, merge and write it back without inventing values;
//! - [`EffectiveSettings`] is what [`crate::pruning::prune_context_messages`] needs: every value
//!   present, clamped and compiled. [`PruningSettings::effective`] is OpenClaw's
//!   `computeEffectiveSettings`.
//!
//! One deliberate difference from OpenClaw: it ignores values of the wrong type and durations
//! it cannot parse and carries on with the default. We refuse them with a
//! [`PruningConfigError`] that names the key and says what is allowed, because a typo that
//! silently turns pruning into something else is found only when a session overflows.

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::duration::{DURATION_HELP, parse_duration_ms};
use super::tools::ToolFilter;

/// Where these settings live in the configuration; every error names keys under it.
pub const CONFIG_PATH: &str = "agents.defaults.contextPruning";

/// Default `ttl`: 5 minutes, Anthropic's default prompt-cache lifetime.
pub const DEFAULT_TTL_MS: u64 = 5 * 60 * 1000;
/// Default `keepLastAssistants`: the last three replies (and what follows them) stay intact.
pub const DEFAULT_KEEP_LAST_ASSISTANTS: usize = 3;
/// Default `softTrimRatio`: start trimming at 30 % of the window.
pub const DEFAULT_SOFT_TRIM_RATIO: f64 = 0.3;
/// Default `hardClearRatio`: clear old results while the context is at 50 % of the window or more.
pub const DEFAULT_HARD_CLEAR_RATIO: f64 = 0.5;
/// Default `minPrunableToolChars`: clearing below this much prunable output is not worth a
/// cache rewrite.
pub const DEFAULT_MIN_PRUNABLE_TOOL_CHARS: u64 = 50_000;
/// Default `softTrim.maxChars`: results up to this long are never trimmed.
pub const DEFAULT_SOFT_TRIM_MAX_CHARS: u64 = 4_000;
/// Default `softTrim.headChars`: characters a trimmed result keeps from its start.
pub const DEFAULT_SOFT_TRIM_HEAD_CHARS: u64 = 1_500;
/// Default `softTrim.tailChars`: characters a trimmed result keeps from its end.
pub const DEFAULT_SOFT_TRIM_TAIL_CHARS: u64 = 1_500;
/// Default `hardClear.placeholder`: what a cleared tool result says instead of its output.
pub const DEFAULT_HARD_CLEAR_PLACEHOLDER: &str = "[Old tool result content cleared]";

/// `mode`: whether pruning runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PruningMode {
    /// `"off"`: never prune.
    #[serde(rename = "off")]
    Off,
    /// `"cache-ttl"`: prune once the provider's prompt cache has expired (see
    /// [`crate::pruning::gate`]), when rewriting the prompt costs nothing extra.
    #[serde(rename = "cache-ttl")]
    CacheTtl,
}

impl PruningMode {
    const ALLOWED: &'static str = "\"off\" or \"cache-ttl\"";
}

/// `tools`: which tools' results may be pruned (see [`ToolFilter`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolPatterns {
    /// `tools.allow`: only these tools (globs with `*`); absent or empty allows every tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow: Option<Vec<String>>,
    /// `tools.deny`: never these tools, even when allowed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deny: Option<Vec<String>>,
}

/// `softTrim`: how an oversized old tool result is cut down to its head and tail.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SoftTrimSettings {
    /// `softTrim.maxChars`: results longer than this are trimmed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_chars: Option<i64>,
    /// `softTrim.headChars`: characters kept from the start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub head_chars: Option<i64>,
    /// `softTrim.tailChars`: characters kept from the end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tail_chars: Option<i64>,
}

/// `hardClear`: replacing whole old tool results with a placeholder.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HardClearSettings {
    /// `hardClear.enabled`: whether results may be cleared at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// `hardClear.placeholder`: the text a cleared result shows; blank means the default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placeholder: Option<String>,
}

/// `agents.defaults.contextPruning` as written: every key optional, nothing clamped yet.
///
/// Read it with [`PruningSettings::from_json`] (or serde, which uses the same reader and so
/// gives the same errors); turn it into what pruning runs with with
/// [`PruningSettings::effective`].
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PruningSettings {
    /// `mode`: absent means off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<PruningMode>,
    /// `ttl`: how long after the last cache write pruning waits, as a duration string
    /// (`"5m"`, `"1h"`; a bare number is minutes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl: Option<String>,
    /// `keepLastAssistants`: how many of the last assistant replies are protected, with
    /// everything after the oldest of them. Fractions are floored when read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep_last_assistants: Option<i64>,
    /// `softTrimRatio`: context size, as a share of the window, from which results are trimmed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub soft_trim_ratio: Option<f64>,
    /// `hardClearRatio`: share of the window from which results are cleared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hard_clear_ratio: Option<f64>,
    /// `minPrunableToolChars`: the least prunable tool output for clearing to start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_prunable_tool_chars: Option<i64>,
    /// `tools`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<ToolPatterns>,
    /// `softTrim`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub soft_trim: Option<SoftTrimSettings>,
    /// `hardClear`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hard_clear: Option<HardClearSettings>,
}

/// `softTrim` as pruning uses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SoftTrim {
    /// Results whose text is longer than this many characters are trimmed.
    pub max_chars: u64,
    /// Characters kept from the start of a trimmed result.
    pub head_chars: u64,
    /// Characters kept from the end of a trimmed result.
    pub tail_chars: u64,
}

/// `hardClear` as pruning uses it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HardClear {
    /// Whether results may be cleared.
    pub enabled: bool,
    /// What a cleared result says; never empty when built by [`PruningSettings::effective`].
    pub placeholder: String,
}

/// The settings pruning runs with: every value present and in range.
///
/// Fields are public so engines and tests can build settings directly (OpenClaw's tests use
/// out-of-range ratios such as 10 to switch a step off); [`PruningSettings::effective`] is the
/// way from user configuration, and clamps. `Default` is the reference defaults.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EffectiveSettings {
    /// How long after the last cache write pruning may run, in milliseconds; 0 disables the
    /// TTL gate's permission (see [`crate::pruning::gate`]).
    pub ttl_ms: u64,
    /// Assistant replies protected from the end; 0 makes every message eligible.
    pub keep_last_assistants: usize,
    /// Context share of the window below which nothing is pruned.
    pub soft_trim_ratio: f64,
    /// Context share of the window from which results are cleared, and below which clearing
    /// stops.
    pub hard_clear_ratio: f64,
    /// Prunable tool output (after trimming) needed before anything is cleared.
    pub min_prunable_tool_chars: u64,
    /// Which tools' results may be pruned.
    pub tools: ToolFilter,
    /// Trimming of oversized results.
    pub soft_trim: SoftTrim,
    /// Clearing of whole results.
    pub hard_clear: HardClear,
}

impl Default for EffectiveSettings {
    fn default() -> Self {
        Self {
            ttl_ms: DEFAULT_TTL_MS,
            keep_last_assistants: DEFAULT_KEEP_LAST_ASSISTANTS,
            soft_trim_ratio: DEFAULT_SOFT_TRIM_RATIO,
            hard_clear_ratio: DEFAULT_HARD_CLEAR_RATIO,
            min_prunable_tool_chars: DEFAULT_MIN_PRUNABLE_TOOL_CHARS,
            tools: ToolFilter::all(),
            soft_trim: SoftTrim {
                max_chars: DEFAULT_SOFT_TRIM_MAX_CHARS,
                head_chars: DEFAULT_SOFT_TRIM_HEAD_CHARS,
                tail_chars: DEFAULT_SOFT_TRIM_TAIL_CHARS,
            },
            hard_clear: HardClear {
                enabled: true,
                placeholder: DEFAULT_HARD_CLEAR_PLACEHOLDER.to_owned(),
            },
        }
    }
}

/// A pruning setting that cannot be used, and why.
///
/// `key` is the full configuration path (`agents.defaults.contextPruning.softTrim.maxChars`),
/// so a host can point at the line; the message says what was found and what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {problem}")]
pub struct PruningConfigError {
    /// The full path of the offending key.
    pub key: String,
    /// What is wrong and what would be accepted.
    pub problem: String,
}

impl PruningConfigError {
    fn new(key: &str, problem: impl Into<String>) -> Self {
        Self {
            key: if key.is_empty() {
                CONFIG_PATH.to_owned()
            } else {
                format!("{CONFIG_PATH}.{key}")
            },
            problem: problem.into(),
        }
    }
}

/// Reads `agents.defaults.contextPruning` and computes the settings pruning runs with:
/// `Ok(None)` when pruning is off (`mode` absent or `"off"`, or no configuration at all),
/// an error for anything that is not a valid setting.
///
/// This is [`PruningSettings::from_json`] followed by [`PruningSettings::effective`]; the whole
/// object is checked even when pruning is off, so a typo shows up before someone turns it on.
pub fn effective(raw: &Value) -> Result<Option<EffectiveSettings>, PruningConfigError> {
    PruningSettings::from_json(raw)?.effective()
}

const TOP_KEYS: &[&str] = &[
    "mode",
    "ttl",
    "keepLastAssistants",
    "softTrimRatio",
    "hardClearRatio",
    "minPrunableToolChars",
    "tools",
    "softTrim",
    "hardClear",
];
const TOOLS_KEYS: &[&str] = &["allow", "deny"];
const SOFT_TRIM_KEYS: &[&str] = &["maxChars", "headChars", "tailChars"];
const HARD_CLEAR_KEYS: &[&str] = &["enabled", "placeholder"];

impl PruningSettings {
    /// Reads the configuration object. `null` reads as "nothing configured", and so does a key
    /// set to `null`; unknown keys and values of the wrong type are errors.
    pub fn from_json(raw: &Value) -> Result<Self, PruningConfigError> {
        let Some(map) = object(raw, "")? else {
            return Ok(Self::default());
        };
        check_keys(map, "", TOP_KEYS)?;
        Ok(Self {
            mode: mode(map.get("mode"))?,
            ttl: ttl(map.get("ttl"))?,
            keep_last_assistants: integer(map.get("keepLastAssistants"), "keepLastAssistants")?,
            soft_trim_ratio: ratio(map.get("softTrimRatio"), "softTrimRatio")?,
            hard_clear_ratio: ratio(map.get("hardClearRatio"), "hardClearRatio")?,
            min_prunable_tool_chars: integer(
                map.get("minPrunableToolChars"),
                "minPrunableToolChars",
            )?,
            tools: tools(map.get("tools"))?,
            soft_trim: soft_trim(map.get("softTrim"))?,
            hard_clear: hard_clear(map.get("hardClear"))?,
        })
    }

    /// OpenClaw's `computeEffectiveSettings`: `None` unless `mode` is `"cache-ttl"`;
    /// otherwise the defaults overlaid with what is set, ratios clamped to [0, 1], counts
    /// floored at 0, a blank placeholder ignored, `ttl` parsed (default unit minutes) and the
    /// tool globs compiled.
    ///
    /// Errors for a `ttl` that is not a duration (OpenClaw would keep the default silently).
    pub fn effective(&self) -> Result<Option<EffectiveSettings>, PruningConfigError> {
        if self.mode != Some(PruningMode::CacheTtl) {
            return Ok(None);
        }
        let mut s = EffectiveSettings::default();
        if let Some(ttl) = &self.ttl {
            s.ttl_ms = parse_duration_ms(ttl).map_err(|e| PruningConfigError::new("ttl", e))?;
        }
        if let Some(n) = self.keep_last_assistants {
            s.keep_last_assistants = usize::try_from(n.max(0)).unwrap_or(usize::MAX);
        }
        if let Some(r) = self.soft_trim_ratio {
            s.soft_trim_ratio = r.clamp(0.0, 1.0);
        }
        if let Some(r) = self.hard_clear_ratio {
            s.hard_clear_ratio = r.clamp(0.0, 1.0);
        }
        if let Some(n) = self.min_prunable_tool_chars {
            s.min_prunable_tool_chars = non_negative(n);
        }
        if let Some(tools) = &self.tools {
            let none: &[String] = &[];
            s.tools = ToolFilter::new(
                tools.allow.as_deref().unwrap_or(none),
                tools.deny.as_deref().unwrap_or(none),
            )
            .map_err(|bad| {
                PruningConfigError::new(
                    &format!("tools.{}[{}]", bad.list, bad.index),
                    format!(
                        "not a tool pattern ({}); use tool names with `*` as the only wildcard",
                        bad.reason
                    ),
                )
            })?;
        }
        if let Some(trim) = &self.soft_trim {
            if let Some(n) = trim.max_chars {
                s.soft_trim.max_chars = non_negative(n);
            }
            if let Some(n) = trim.head_chars {
                s.soft_trim.head_chars = non_negative(n);
            }
            if let Some(n) = trim.tail_chars {
                s.soft_trim.tail_chars = non_negative(n);
            }
        }
        if let Some(clear) = &self.hard_clear {
            if let Some(enabled) = clear.enabled {
                s.hard_clear.enabled = enabled;
            }
            if let Some(placeholder) = clear.placeholder.as_deref().map(str::trim)
                && !placeholder.is_empty()
            {
                s.hard_clear.placeholder = placeholder.to_owned();
            }
        }
        Ok(Some(s))
    }
}

impl<'de> Deserialize<'de> for PruningSettings {
    /// Goes through [`PruningSettings::from_json`], so serde and direct reads accept the same
    /// input and give the same messages.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Value::deserialize(deserializer)?;
        Self::from_json(&raw).map_err(de::Error::custom)
    }
}

fn non_negative(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// A short description of a JSON value for error messages.
fn describe(value: &Value) -> String {
    let text = value.to_string();
    let kind = match value {
        Value::Null => return "null".to_owned(),
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    };
    if text.chars().count() > 40 {
        kind.to_owned()
    } else {
        format!("{kind} ({text})")
    }
}

/// The object at `key`, `None` for absent or `null`, an error for anything else.
fn object<'a>(
    value: &'a Value,
    key: &str,
) -> Result<Option<&'a Map<String, Value>>, PruningConfigError> {
    match value {
        Value::Null => Ok(None),
        Value::Object(map) => Ok(Some(map)),
        other => Err(PruningConfigError::new(
            key,
            format!("expected an object, found {}", describe(other)),
        )),
    }
}

fn check_keys(
    map: &Map<String, Value>,
    parent: &str,
    allowed: &[&str],
) -> Result<(), PruningConfigError> {
    match map.keys().find(|k| !allowed.contains(&k.as_str())) {
        None => Ok(()),
        Some(unknown) => {
            let key = if parent.is_empty() {
                unknown.clone()
            } else {
                format!("{parent}.{unknown}")
            };
            Err(PruningConfigError::new(
                &key,
                format!("unknown key; allowed keys here: {}", allowed.join(", ")),
            ))
        }
    }
}

/// `None` for an absent key or `null`.
fn present(value: Option<&Value>) -> Option<&Value> {
    value.filter(|v| !v.is_null())
}

fn mode(value: Option<&Value>) -> Result<Option<PruningMode>, PruningConfigError> {
    let Some(value) = present(value) else {
        return Ok(None);
    };
    match value.as_str() {
        Some("off") => Ok(Some(PruningMode::Off)),
        Some("cache-ttl") => Ok(Some(PruningMode::CacheTtl)),
        _ => Err(PruningConfigError::new(
            "mode",
            format!(
                "{} is not a pruning mode; use {}",
                describe(value),
                PruningMode::ALLOWED
            ),
        )),
    }
}

fn ttl(value: Option<&Value>) -> Result<Option<String>, PruningConfigError> {
    let Some(value) = present(value) else {
        return Ok(None);
    };
    let text = match value {
        Value::String(s) => s.clone(),
        // A bare number means minutes, as the string "90" does.
        Value::Number(n) => n.to_string(),
        other => {
            return Err(PruningConfigError::new(
                "ttl",
                format!("expected {DURATION_HELP}, found {}", describe(other)),
            ));
        }
    };
    // Checked here too, so reading the configuration already reports a bad duration.
    parse_duration_ms(&text).map_err(|e| PruningConfigError::new("ttl", e))?;
    Ok(Some(text))
}

fn number(value: &Value, key: &str, what: &str) -> Result<f64, PruningConfigError> {
    value.as_f64().filter(|n| n.is_finite()).ok_or_else(|| {
        PruningConfigError::new(key, format!("expected {what}, found {}", describe(value)))
    })
}

fn integer(value: Option<&Value>, key: &str) -> Result<Option<i64>, PruningConfigError> {
    let Some(value) = present(value) else {
        return Ok(None);
    };
    if let Some(n) = value.as_i64() {
        return Ok(Some(n));
    }
    // Fractions are floored, as OpenClaw does; `as` saturates beyond i64.
    number(value, key, "a whole number (0 or more)").map(|n| Some(n.floor() as i64))
}

fn ratio(value: Option<&Value>, key: &str) -> Result<Option<f64>, PruningConfigError> {
    present(value)
        .map(|v| number(v, key, "a number between 0 and 1"))
        .transpose()
}

fn boolean(value: Option<&Value>, key: &str) -> Result<Option<bool>, PruningConfigError> {
    let Some(value) = present(value) else {
        return Ok(None);
    };
    value.as_bool().map(Some).ok_or_else(|| {
        PruningConfigError::new(
            key,
            format!("expected true or false, found {}", describe(value)),
        )
    })
}

fn string(value: Option<&Value>, key: &str) -> Result<Option<String>, PruningConfigError> {
    let Some(value) = present(value) else {
        return Ok(None);
    };
    value.as_str().map(|s| Some(s.to_owned())).ok_or_else(|| {
        PruningConfigError::new(key, format!("expected a string, found {}", describe(value)))
    })
}

fn patterns(value: Option<&Value>, key: &str) -> Result<Option<Vec<String>>, PruningConfigError> {
    let Some(value) = present(value) else {
        return Ok(None);
    };
    let Value::Array(items) = value else {
        return Err(PruningConfigError::new(
            key,
            format!(
                "expected a list of tool names or globs (such as [\"exec\", \"browser_*\"]), found {}",
                describe(value)
            ),
        ));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            item.as_str().map(str::to_owned).ok_or_else(|| {
                PruningConfigError::new(
                    &format!("{key}[{i}]"),
                    format!("expected a tool name or glob, found {}", describe(item)),
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

fn tools(value: Option<&Value>) -> Result<Option<ToolPatterns>, PruningConfigError> {
    let Some(map) = object(value.unwrap_or(&Value::Null), "tools")? else {
        return Ok(None);
    };
    check_keys(map, "tools", TOOLS_KEYS)?;
    Ok(Some(ToolPatterns {
        allow: patterns(map.get("allow"), "tools.allow")?,
        deny: patterns(map.get("deny"), "tools.deny")?,
    }))
}

fn soft_trim(value: Option<&Value>) -> Result<Option<SoftTrimSettings>, PruningConfigError> {
    let Some(map) = object(value.unwrap_or(&Value::Null), "softTrim")? else {
        return Ok(None);
    };
    check_keys(map, "softTrim", SOFT_TRIM_KEYS)?;
    Ok(Some(SoftTrimSettings {
        max_chars: integer(map.get("maxChars"), "softTrim.maxChars")?,
        head_chars: integer(map.get("headChars"), "softTrim.headChars")?,
        tail_chars: integer(map.get("tailChars"), "softTrim.tailChars")?,
    }))
}

fn hard_clear(value: Option<&Value>) -> Result<Option<HardClearSettings>, PruningConfigError> {
    let Some(map) = object(value.unwrap_or(&Value::Null), "hardClear")? else {
        return Ok(None);
    };
    check_keys(map, "hardClear", HARD_CLEAR_KEYS)?;
    Ok(Some(HardClearSettings {
        enabled: boolean(map.get("enabled"), "hardClear.enabled")?,
        placeholder: string(map.get("placeholder"), "hardClear.placeholder")?,
    }))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(raw: Value) -> PruningConfigError {
        effective(&raw).unwrap_err()
    }

    #[test]
    fn off_and_missing_mode_disable_pruning() {
        // The reference case: `{mode: "off"}` and `{}` are both null.
        assert_eq!(effective(&json!({"mode": "off"})), Ok(None));
        assert_eq!(effective(&json!({})), Ok(None));
        assert_eq!(effective(&Value::Null), Ok(None));
        assert_eq!(effective(&json!({"mode": null})), Ok(None));
        // Other keys do not turn it on.
        assert_eq!(
            effective(&json!({"ttl": "1h", "softTrimRatio": 0.1})),
            Ok(None)
        );
    }

    #[test]
    fn cache_ttl_gives_the_reference_defaults() {
        let s = effective(&json!({"mode": "cache-ttl"})).unwrap().unwrap();
        assert_eq!(s, EffectiveSettings::default());
        assert_eq!(s.ttl_ms, 300_000);
        assert_eq!(s.keep_last_assistants, 3);
        assert_eq!(s.soft_trim_ratio, 0.3);
        assert_eq!(s.hard_clear_ratio, 0.5);
        assert_eq!(s.min_prunable_tool_chars, 50_000);
        assert_eq!(s.tools, ToolFilter::all());
        assert_eq!(
            s.soft_trim,
            SoftTrim {
                max_chars: 4_000,
                head_chars: 1_500,
                tail_chars: 1_500
            }
        );
        assert!(s.hard_clear.enabled);
        assert_eq!(
            s.hard_clear.placeholder,
            "[Old tool result content cleared]"
        );
    }

    #[test]
    fn values_are_overlaid_clamped_and_floored() {
        let s = effective(&json!({
            "mode": "cache-ttl",
            "ttl": "1h",
            "keepLastAssistants": 2.9,
            "softTrimRatio": -0.5,
            "hardClearRatio": 7,
            "minPrunableToolChars": -10,
            "tools": {"allow": ["exec", "read_*"], "deny": ["read_secret"]},
            "softTrim": {"maxChars": 100.5, "tailChars": -1},
            "hardClear": {"enabled": false, "placeholder": "  [gone]  "}
        }))
        .unwrap()
        .unwrap();
        assert_eq!(s.ttl_ms, 3_600_000);
        assert_eq!(s.keep_last_assistants, 2);
        assert_eq!(s.soft_trim_ratio, 0.0);
        assert_eq!(s.hard_clear_ratio, 1.0);
        assert_eq!(s.min_prunable_tool_chars, 0);
        assert_eq!(
            s.tools,
            ToolFilter::new(["exec", "read_*"], ["read_secret"]).unwrap()
        );
        // Partial objects keep the other defaults.
        assert_eq!(
            s.soft_trim,
            SoftTrim {
                max_chars: 100,
                head_chars: 1_500,
                tail_chars: 0
            }
        );
        assert!(!s.hard_clear.enabled);
        assert_eq!(s.hard_clear.placeholder, "[gone]");
        assert_eq!(
            effective(&json!({"mode": "cache-ttl", "keepLastAssistants": -3}))
                .unwrap()
                .unwrap()
                .keep_last_assistants,
            0
        );
    }

    #[test]
    fn ttl_forms() {
        let ttl = |v: Value| {
            effective(&json!({"mode": "cache-ttl", "ttl": v}))
                .unwrap()
                .unwrap()
                .ttl_ms
        };
        assert_eq!(ttl(json!("5m")), 300_000);
        assert_eq!(ttl(json!("1h")), 3_600_000);
        assert_eq!(ttl(json!("30s")), 30_000);
        assert_eq!(ttl(json!("90")), 5_400_000);
        assert_eq!(ttl(json!("500ms")), 500);
        assert_eq!(ttl(json!(90)), 5_400_000);
        assert_eq!(ttl(json!("0")), 0);
    }

    #[test]
    fn blank_placeholder_is_ignored() {
        for blank in ["", "   "] {
            let s = effective(&json!({"mode": "cache-ttl", "hardClear": {"placeholder": blank}}))
                .unwrap()
                .unwrap();
            assert_eq!(s.hard_clear.placeholder, DEFAULT_HARD_CLEAR_PLACEHOLDER);
        }
    }

    #[test]
    fn errors_name_the_key_and_what_is_allowed() {
        let e = err(json!({"mode": "cache_ttl"}));
        assert_eq!(e.key, "agents.defaults.contextPruning.mode");
        assert!(e.problem.contains("\"off\" or \"cache-ttl\""), "{e}");
        assert!(
            e.to_string()
                .starts_with("agents.defaults.contextPruning.mode: ")
        );

        let e = err(json!({"mode": "cache-ttl", "ttl": "5 minutes"}));
        assert_eq!(e.key, "agents.defaults.contextPruning.ttl");
        assert!(e.problem.contains("\"5m\""), "{e}");

        // Checked even while pruning is off.
        let e = err(json!({"mode": "off", "ttl": "soon"}));
        assert_eq!(e.key, "agents.defaults.contextPruning.ttl");

        let e = err(json!({"softTrimRaito": 0.2}));
        assert_eq!(e.key, "agents.defaults.contextPruning.softTrimRaito");
        assert!(e.problem.contains("unknown key"), "{e}");
        assert!(e.problem.contains("softTrimRatio"), "{e}");

        let e = err(json!({"softTrim": {"maxChar": 10}}));
        assert_eq!(e.key, "agents.defaults.contextPruning.softTrim.maxChar");
        assert!(e.problem.contains("maxChars, headChars, tailChars"), "{e}");

        let e = err(json!({"hardClearRatio": "half"}));
        assert_eq!(e.key, "agents.defaults.contextPruning.hardClearRatio");
        assert!(e.problem.contains("between 0 and 1"), "{e}");

        let e = err(json!({"keepLastAssistants": "3"}));
        assert_eq!(e.key, "agents.defaults.contextPruning.keepLastAssistants");

        let e = err(json!({"hardClear": {"enabled": "yes"}}));
        assert_eq!(e.key, "agents.defaults.contextPruning.hardClear.enabled");
        assert!(e.problem.contains("true or false"), "{e}");

        let e = err(json!({"hardClear": {"placeholder": 5}}));
        assert_eq!(
            e.key,
            "agents.defaults.contextPruning.hardClear.placeholder"
        );

        let e = err(json!({"tools": {"allow": "exec"}}));
        assert_eq!(e.key, "agents.defaults.contextPruning.tools.allow");
        assert!(e.problem.contains("list"), "{e}");

        let e = err(json!({"tools": {"deny": ["exec", 3]}}));
        assert_eq!(e.key, "agents.defaults.contextPruning.tools.deny[1]");

        let e = err(json!({"tools": {"only": []}}));
        assert_eq!(e.key, "agents.defaults.contextPruning.tools.only");

        let e = err(json!({"softTrim": 4000}));
        assert_eq!(e.key, "agents.defaults.contextPruning.softTrim");
        assert!(e.problem.contains("an object"), "{e}");

        let e = err(json!("cache-ttl"));
        assert_eq!(e.key, "agents.defaults.contextPruning");
    }

    #[test]
    fn serde_reads_through_the_same_checks_and_writes_back() {
        let raw = json!({
            "mode": "cache-ttl",
            "ttl": "1h",
            "keepLastAssistants": 2,
            "tools": {"deny": ["exec"]},
            "softTrim": {"maxChars": 100},
            "hardClear": {"placeholder": "[x]"}
        });
        let parsed: PruningSettings = serde_json::from_value(raw.clone()).unwrap();
        assert_eq!(parsed, PruningSettings::from_json(&raw).unwrap());
        assert_eq!(parsed.mode, Some(PruningMode::CacheTtl));
        assert_eq!(serde_json::to_value(&parsed).unwrap(), raw);

        let e = serde_json::from_value::<PruningSettings>(json!({"mode": "on"})).unwrap_err();
        assert!(
            e.to_string()
                .contains("agents.defaults.contextPruning.mode"),
            "{e}"
        );
    }
}
