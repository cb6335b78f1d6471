//! The cache-TTL gate: prune only once the provider's prompt cache has expired.
//!
//! Why: rewriting old tool results changes the prompt prefix, and a provider with prompt
//! caching then bills the whole prompt as a cache write again. While the cache is warm that
//! costs more than the tokens pruning saves; once it has expired the next request rewrites the
//! cache anyway, so that is the moment to make the prompt smaller. The gate is about cost, not
//! about any one provider: it applies to every provider with a prompt cache, and a caller whose
//! provider has none can prune without it.
//!
//! OpenClaw records each cache write as a session `custom` entry
//! `{"type":"custom","customType":"openclaw.cache-ttl","data":{"timestamp":…,"provider":…,"modelId":…}}`
//! and restores the last touch from the last such entry on load. After a call that pruned
//! something, the caller records a new touch at `now` ([`CacheTouch::new`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use rampart_message::AgentMessage;
use rampart_message::SharedMessage;

/// The `customType` of the session entries that record a cache touch.
pub const CACHE_TTL_CUSTOM_TYPE: &str = "openclaw.cache-ttl";

/// The last time the provider's prompt cache was written for this session: the `data` of an
/// `openclaw.cache-ttl` custom entry. Serialises to exactly that object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CacheTouch {
    /// When, in Unix milliseconds.
    pub timestamp: u64,
    /// The provider whose cache was written, when known; informational (the gate ignores it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The model whose cache was written, when known; informational.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_id: Option<String>,
}

impl CacheTouch {
    /// A touch at `timestamp` (Unix ms), with no provider or model recorded.
    pub fn new(timestamp: u64) -> Self {
        Self {
            timestamp,
            provider: None,
            model_id: None,
        }
    }

    /// Reads the `data` object of a cache-TTL entry. `None` unless `timestamp` is a positive,
    /// finite number (OpenClaw skips such entries and looks further back); a fractional
    /// timestamp is truncated. A `provider` or `modelId` that is not a string is left out.
    pub fn from_data(data: &Value) -> Option<Self> {
        let timestamp = data
            .get("timestamp")?
            .as_f64()
            .filter(|t| t.is_finite() && *t >= 1.0)?;
        let text = |key: &str| data.get(key).and_then(Value::as_str).map(str::to_owned);
        Some(Self {
            // Saturating: a timestamp beyond u64 is not a real one, but it must not wrap.
            timestamp: timestamp as u64,
            provider: text("provider"),
            model_id: text("modelId"),
        })
    }

    /// Reads a custom record given as its type and data, as a typed session entry holds them
    /// (`customType` and `data` of a `custom` entry). `None` for other types or unusable data.
    pub fn from_custom(custom_type: &str, data: Option<&Value>) -> Option<Self> {
        if custom_type != CACHE_TTL_CUSTOM_TYPE {
            return None;
        }
        Self::from_data(data?)
    }
}

/// The last cache touch recorded in raw session entries (pi JSONL lines parsed as JSON), in
/// file order: the last `{"type":"custom","customType":"openclaw.cache-ttl","data":{…}}` with
/// a usable timestamp. Entries of other types, and the header, are skipped.
pub fn last_cache_touch<'a, I>(entries: I) -> Option<CacheTouch>
where
    I: IntoIterator<Item = &'a Value>,
    I::IntoIter: DoubleEndedIterator,
{
    entries.into_iter().rev().find_map(|entry| {
        if entry.get("type").and_then(Value::as_str) != Some("custom") {
            return None;
        }
        CacheTouch::from_custom(
            entry.get("customType").and_then(Value::as_str)?,
            entry.get("data"),
        )
    })
}

/// The last cache touch recorded in a message list, for callers that only see messages: a
/// `custom` message ([`AgentMessage::Custom`]) with `customType` `openclaw.cache-ttl` whose
/// `details` hold the touch data.
///
/// Why `details`: it is the part of a custom message that never reaches the model, which is
/// where a record meant for the runtime belongs; the content is what the model sees and is
/// not read. OpenClaw itself writes a `custom` entry, which is not a message; a host that has
/// the session entries should use [`last_cache_touch`].
pub fn last_cache_touch_in_messages(messages: &[SharedMessage]) -> Option<CacheTouch> {
    messages.iter().rev().find_map(|m| match m.as_ref() {
        AgentMessage::Custom(c) => CacheTouch::from_custom(&c.custom_type, c.details.as_ref()),
        _ => None,
    })
}

/// Whether pruning may run now: `true` only when a touch is recorded, `ttl_ms` is positive,
/// and at least `ttl_ms` has passed since the touch (`now − touch ≥ ttl`).
///
/// With no touch recorded there is nothing known about the cache, and OpenClaw does not prune;
/// nor with a TTL of 0. A touch in the future (clock skew) counts as no time passed.
pub fn gate(now_ms: u64, last_touch: Option<&CacheTouch>, ttl_ms: u64) -> bool {
    match last_touch {
        Some(touch) if ttl_ms > 0 => now_ms.saturating_sub(touch.timestamp) >= ttl_ms,
        _ => false,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::pruning::test_support::*;
    use serde_json::json;

    const TTL: u64 = 5 * 60 * 1000;

    #[test]
    fn gate_follows_the_reference() {
        let touch = CacheTouch::new(1_000_000);
        // No touch, or no TTL: never.
        assert!(!gate(10_000_000, None, TTL));
        assert!(!gate(10_000_000, Some(&touch), 0));
        // Inside the TTL: not yet.
        assert!(!gate(1_000_000, Some(&touch), TTL));
        assert!(!gate(1_000_000 + TTL - 1, Some(&touch), TTL));
        // At and after expiry.
        assert!(gate(1_000_000 + TTL, Some(&touch), TTL));
        assert!(gate(1_000_000 + TTL + 1_000, Some(&touch), TTL));
        // A touch from the future is not an expired cache.
        assert!(!gate(500_000, Some(&touch), TTL));
    }

    #[test]
    fn touch_round_trips_as_entry_data() {
        let data = json!({"timestamp": 1_700_000_000_000u64, "provider": "anthropic", "modelId": "claude"});
        let touch = CacheTouch::from_data(&data).unwrap();
        assert_eq!(touch.provider.as_deref(), Some("anthropic"));
        assert_eq!(touch.model_id.as_deref(), Some("claude"));
        assert_eq!(serde_json::to_value(&touch).unwrap(), data);
        assert_eq!(
            serde_json::to_value(CacheTouch::new(5)).unwrap(),
            json!({"timestamp": 5})
        );
        assert_eq!(
            CacheTouch::from_data(&json!({"timestamp": 12.7}))
                .unwrap()
                .timestamp,
            12
        );
        for bad in [
            json!({}),
            json!({"timestamp": 0}),
            json!({"timestamp": "1"}),
            json!(null),
        ] {
            assert_eq!(CacheTouch::from_data(&bad), None, "{bad}");
        }
        assert_eq!(CacheTouch::from_custom("other", Some(&data)), None);
        assert_eq!(CacheTouch::from_custom(CACHE_TTL_CUSTOM_TYPE, None), None);
    }

    #[test]
    fn restores_the_last_usable_touch_from_entries() {
        let entries = [
            json!({"type": "session", "version": 3, "id": "s"}),
            json!({"type": "custom", "customType": "openclaw.cache-ttl", "data": {"timestamp": 100}}),
            json!({"type": "custom", "customType": "openclaw.cache-ttl", "data": {"timestamp": 200, "provider": "p"}}),
            json!({"type": "custom", "customType": "model-snapshot", "data": {"timestamp": 900}}),
            json!({"type": "custom_message", "customType": "openclaw.cache-ttl", "content": "x", "display": false, "details": {"timestamp": 950}}),
            // A broken last record: the one before it counts.
            json!({"type": "custom", "customType": "openclaw.cache-ttl", "data": {"timestamp": null}}),
            json!({"type": "message", "message": {"role": "user", "content": "hi", "timestamp": 999}}),
        ];
        let touch = last_cache_touch(&entries).unwrap();
        assert_eq!(touch.timestamp, 200);
        assert_eq!(touch.provider.as_deref(), Some("p"));
        assert_eq!(last_cache_touch(&entries[..1]), None);
        assert_eq!(last_cache_touch(&[] as &[Value]), None);
    }

    #[test]
    fn restores_from_custom_messages_details() {
        let custom = |details: Value| -> AgentMessage {
            serde_json::from_value(json!({
                "role": "custom", "customType": "openclaw.cache-ttl", "content": "",
                "display": false, "details": details, "timestamp": 1
            }))
            .unwrap()
        };
        let messages = list(vec![
            custom(json!({"timestamp": 10})),
            user("hello"),
            custom(json!({"timestamp": 20, "modelId": "m"})),
            answer("hi"),
        ]);
        let touch = last_cache_touch_in_messages(&messages).unwrap();
        assert_eq!(touch.timestamp, 20);
        assert_eq!(touch.model_id.as_deref(), Some("m"));
        assert_eq!(last_cache_touch_in_messages(&list(vec![user("x")])), None);
    }
}
