//! Reading a `message` entry as pi would use it, when its optional fields do not fit the
//! message model.
//!
//! pi is JavaScript: a `message` entry goes into the context whatever its optional fields say.
//! An assistant message whose `usage` has no `cost`, a message without a `timestamp`, a token
//! count written as a string: pi sends all of them, and we used to keep them verbatim but out
//! of the context, so a replay lost assistant turns without a word. Here such a message is
//! repaired **for reading only**: missing optional fields get pi's neutral values (zero usage
//! and cost, timestamp 0, `stop`, empty strings), numbers written as strings become numbers.
//! The entry keeps the message as the file held it ([`MessageEntry::as_read`]) and is written
//! back that way: a lenient reading never rewrites a user's data.
//!
//! Only what makes a message meaningless keeps it out: no `role`, or `content` of the wrong
//! kind (not a string or a list of blocks; an assistant's not a list). Those entries stay
//! verbatim, and the load report names their line and why.
//!
//! [`MessageEntry::as_read`]: crate::entry::MessageEntry::as_read

use serde::Deserialize;
use serde_json::{Map, Value, json};

use rampart_message::AgentMessage;

/// `value` (a `message` entry's message that the strict model refused) read leniently: the
/// message for the context and what was filled in or converted, or why it means nothing.
pub(crate) fn read(value: &Value) -> Result<(AgentMessage, Vec<String>), String> {
    let Value::Object(original) = value else {
        return Err("the message is not an object".into());
    };
    let Some(role) = original.get("role").and_then(Value::as_str) else {
        return Err("the message has no `role`".into());
    };
    let mut map = original.clone();
    let mut notes = Vec::new();
    match map.get("content") {
        Some(Value::Array(_)) => {}
        Some(Value::String(_)) if role != "assistant" => {}
        Some(other) => {
            return Err(format!(
                "its `content` is {}, not {}",
                kind(other),
                if role == "assistant" {
                    "a list of blocks"
                } else {
                    "text or a list of blocks"
                }
            ));
        }
        None if matches!(role, "user" | "assistant" | "toolResult" | "custom") => {
            return Err("the message has no `content`".into());
        }
        None => {}
    }
    numbers(&mut map, &["timestamp", "tokensBefore"], "", &mut notes);
    default(&mut map, "timestamp", json!(0), &mut notes);
    match role {
        "assistant" => {
            for key in ["api", "provider", "model"] {
                default(&mut map, key, json!(""), &mut notes);
            }
            if !map.get("stopReason").is_some_and(Value::is_string) {
                map.insert("stopReason".into(), json!("stop"));
                notes.push("`stopReason` read as `stop`".into());
            }
            let usage = map.entry("usage").or_insert_with(|| {
                notes.push("no `usage`: read as zero".into());
                json!({})
            });
            if let Value::Object(usage) = usage {
                let counts = ["input", "output", "cacheRead", "cacheWrite", "totalTokens"];
                numbers(usage, &counts, "usage.", &mut notes);
                for key in ["input", "output", "cacheRead", "cacheWrite"] {
                    default(usage, key, json!(0), &mut notes);
                }
                let cost = usage.entry("cost").or_insert_with(|| {
                    notes.push("no `usage.cost`: read as zero".into());
                    json!({})
                });
                if let Value::Object(cost) = cost {
                    let parts = ["input", "output", "cacheRead", "cacheWrite", "total"];
                    numbers(cost, &parts, "usage.cost.", &mut notes);
                    for key in parts {
                        default(cost, key, json!(0), &mut notes);
                    }
                }
            } else {
                return Err("its `usage` is not an object".into());
            }
        }
        "toolResult" => {
            for key in ["toolCallId", "toolName"] {
                default(&mut map, key, json!(""), &mut notes);
            }
            default(&mut map, "isError", json!(false), &mut notes);
        }
        _ => {}
    }
    let message = AgentMessage::deserialize(Value::Object(map))
        .map_err(|e| format!("its fields do not fit the message model even read leniently: {e}"))?;
    Ok((message, notes))
}

/// Sets `key` to `value` when it is missing or null, noting it.
fn default(map: &mut Map<String, Value>, key: &str, value: Value, notes: &mut Vec<String>) {
    if map.get(key).is_none_or(Value::is_null) {
        notes.push(format!("no `{key}`: read as {value}"));
        map.insert(key.into(), value);
    }
}

/// Turns the `keys` of `map` that hold a number written as a string into that number.
fn numbers(map: &mut Map<String, Value>, keys: &[&str], prefix: &str, notes: &mut Vec<String>) {
    for key in keys {
        let Some(Value::String(text)) = map.get(*key) else {
            continue;
        };
        let number = text
            .trim()
            .parse::<u64>()
            .map(Value::from)
            .ok()
            .or_else(|| {
                text.trim()
                    .parse::<f64>()
                    .ok()
                    .and_then(|f| serde_json::Number::from_f64(f).map(Value::Number))
            });
        if let Some(number) = number {
            notes.push(format!(
                "`{prefix}{key}` written as a string: read as {number}"
            ));
            map.insert((*key).into(), number);
        }
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}
