//! SWE-agent / EnIGMA `.traj` files: one JSON object with `history` (the
//! chat messages the agent exchanged), `trajectory` (one step per action),
//! `info` (outcome: `submission`, `exit_status`, `model_stats`) and
//! configuration (`environment`, `replay_config`).
//!
//! # Mapping
//!
//! * `history` is the conversation and goes through the chat-completions
//!   conversion of [`super::openai_chat`]: `system` → system prompt, `user`
//!   (including demonstrations, `is_demo`) → user, `assistant` → assistant
//!   (function-calling runs carry `tool_calls`; text-action runs keep the
//!   command inside the text, as the model wrote it), `tool` → toolResult
//!   (its `tool_call_ids[0]` is the call id). SWE-agent's own message fields
//!   (`agent`, `message_type`, `thought`, `action`, `is_demo`…) go to
//!   `extra`.
//! * Configuration becomes a leading `swe-agent.config` custom item; the
//!   trajectory steps a trailing `swe-agent.trajectory` item (their
//!   `action`, `observation`, `response`, `thought`, `state`,
//!   `execution_time` — full observations, which history processors may have
//!   shortened in `history`) and `info` a `swe-agent.info` item. Only the
//!   per-step `messages` (the model input at each step, a rendering of
//!   `history`) is not copied, with a warning.
//! * The model is `replay_config.agent.model.name` when present, else
//!   `unknown`. `.traj` files record no times.
//! * A file without `history` (very old runs) is rebuilt from the trajectory
//!   (`response` → assistant, `observation` → user), with a warning.

use serde_json::{Map, Value};

use rampart_message::AgentMessage;

use super::builder::{Builder, get_str};
use super::openai_chat::{ChatConverter, ModelInfo};
use super::{Imported, ImportedItem, ImportedKind, Origin, SourceFormat};

/// Import a `.traj` document.
pub(crate) fn import(doc: Value, _origin: &Origin<'_>) -> Imported {
    let mut b = Builder::new();
    let mut obj = match doc {
        Value::Object(obj) => obj,
        _ => Map::new(),
    };
    let history = obj.remove("history");
    let trajectory = obj.remove("trajectory");
    let info = obj.remove("info");
    let model_name = model_name(&obj).unwrap_or_else(|| "unknown".to_owned());
    let model = ModelInfo::chat(&model_name);
    let stamp = b.stamp(None);

    if !obj.is_empty() {
        b.push_linear(ImportedItem::custom("swe-agent.config", Value::Object(obj)));
    }

    let mut converter = ChatConverter::default();
    let mut first_assistant = true;
    match history {
        Some(Value::Array(history)) if !history.is_empty() => {
            // By value: each source message is freed once converted.
            for (index, message) in history.into_iter().enumerate() {
                let at = format!("history[{index}]");
                let Some(msg) = message.as_object() else {
                    b.warn(format!("{at}: not a JSON object; kept as a custom item"));
                    b.push_linear(ImportedItem::custom("swe-agent.message", message));
                    continue;
                };
                let msg = with_call_id(&mut b, msg, &at);
                let (kind, extra) = converter.convert(&mut b, &msg, &at, stamp.ms, &model);
                if first_assistant
                    && matches!(kind, ImportedKind::Message(AgentMessage::Assistant(_)))
                {
                    first_assistant = false;
                    if model.model != "unknown"
                        && let Some(change) = b.model_change(&model.provider, &model.model)
                    {
                        b.push_linear(change);
                    }
                }
                let mut item = ImportedItem::new(kind);
                item.extra = extra;
                b.push_linear(item);
            }
        }
        other => {
            b.warn(
                "no `history` in the file; the conversation is rebuilt from `trajectory` \
                 (response → assistant text, observation → user text), without the system prompt",
            );
            if let Some(other) = other {
                b.push_linear(ImportedItem::custom("swe-agent.history", other));
            }
            from_trajectory(&mut b, trajectory.as_ref(), stamp.ms, &model);
        }
    }

    match trajectory {
        Some(Value::Array(steps)) => {
            let mut dropped = 0usize;
            // By value: the steps move into the item instead of being copied.
            let kept: Vec<Value> = steps
                .into_iter()
                .map(|step| match step {
                    Value::Object(mut s) => {
                        if s.remove("messages").is_some() {
                            dropped += 1;
                        }
                        Value::Object(s)
                    }
                    other => other,
                })
                .collect();
            if dropped > 0 {
                b.warn(format!(
                    "trajectory[].messages ({dropped} steps) not copied: it is the model input at each step, \
                     a rendering of `history`"
                ));
            }
            b.push_linear(ImportedItem::custom(
                "swe-agent.trajectory",
                Value::Array(kept),
            ));
        }
        Some(other) => {
            b.push_linear(ImportedItem::custom("swe-agent.trajectory", other));
        }
        None => {}
    }
    if let Some(info) = info {
        b.push_linear(ImportedItem::custom("swe-agent.info", info));
    }
    b.finish(SourceFormat::SweAgentTraj, None, None, None)
}

/// `replay_config.agent.model.name` (the config may be an object or a JSON
/// string holding one).
fn model_name(obj: &Map<String, Value>) -> Option<String> {
    let config = match obj.get("replay_config")? {
        Value::String(s) => serde_json::from_str::<Value>(s).ok()?,
        other => other.clone(),
    };
    let name = config
        .get("agent")?
        .get("model")?
        .get("name")?
        .as_str()?
        .to_owned();
    Some(name)
}

/// SWE-agent `tool` messages name their call in `tool_call_ids` (a list);
/// give the chat converter the `tool_call_id` it expects.
fn with_call_id(b: &mut Builder, msg: &Map<String, Value>, at: &str) -> Map<String, Value> {
    let mut msg = msg.clone();
    if get_str(&msg, "role") == Some("tool") && !msg.contains_key("tool_call_id") {
        let ids: Vec<String> = msg
            .get("tool_call_ids")
            .and_then(Value::as_array)
            .map(|ids| {
                ids.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        if ids.len() > 1 {
            b.warn(format!(
                "{at}: one observation answers {} tool calls; it is attached to the first ({}), the others stay unanswered",
                ids.len(),
                ids[0]
            ));
        }
        if let Some(first) = ids.first() {
            msg.insert("tool_call_id".to_owned(), Value::String(first.clone()));
        }
    }
    msg
}

/// Rebuild a conversation from trajectory steps when `history` is missing.
fn from_trajectory(b: &mut Builder, trajectory: Option<&Value>, ms: u64, model: &ModelInfo) {
    let Some(Value::Array(steps)) = trajectory else {
        return;
    };
    for step in steps {
        let Some(step) = step.as_object() else {
            continue;
        };
        let response = get_str(step, "response")
            .or_else(|| get_str(step, "thought"))
            .unwrap_or_default();
        let assistant = AgentMessage::assistant_text(
            response,
            model.api.clone(),
            model.provider.clone(),
            model.model.clone(),
            ms,
        );
        b.push_linear(ImportedItem::new(ImportedKind::Message(assistant)));
        if let Some(observation) = get_str(step, "observation") {
            let user = AgentMessage::user_text(observation, ms);
            b.push_linear(ImportedItem::new(ImportedKind::Message(user)));
        }
    }
}
