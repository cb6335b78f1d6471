//! The top-level fields of a proxied client's request that the engine does not manage
//! (`temperature`, `thinking`, `reasoning`, `metadata`, `tool_choice`, …), kept as the client
//! sent them and written into the upstream body by each provider: verbatim when the upstream
//! speaks the client's wire, mapped where the other wire has a form for them, and otherwise
//! named as not forwarded (a warning, once per field and client wire in a process), so that
//! nothing is dropped silently. The host's own requests (compaction summaries) carry none.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

use serde_json::{Map, Value, json};

/// The wire a request body is written in: the client's, or the upstream provider's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FieldsWire {
    /// Anthropic messages.
    Anthropic,
    /// OpenAI chat completions.
    Chat,
    /// OpenAI Responses.
    Responses,
}

impl FieldsWire {
    /// Its name in metrics labels.
    pub fn label(self) -> &'static str {
        match self {
            FieldsWire::Anthropic => "anthropic",
            FieldsWire::Chat => "chat",
            FieldsWire::Responses => "responses",
        }
    }

    /// The API family: Anthropic, or OpenAI (chat and Responses), which decides whether a
    /// client's headers are meant for an upstream.
    pub fn family(self) -> FieldsWire {
        match self {
            FieldsWire::Anthropic => FieldsWire::Anthropic,
            FieldsWire::Chat | FieldsWire::Responses => FieldsWire::Chat,
        }
    }
}

/// The keys the engine manages, written by the providers themselves and never copied from a
/// client: the model, the conversation, the tools, streaming (serve always streams upstream)
/// and the answer's token bound (the engine may have to fit it).
pub const MANAGED: &[&str] = &[
    "model",
    "messages",
    "system",
    "tools",
    "stream",
    "stream_options",
    "max_tokens",
    "max_completion_tokens",
    "max_output_tokens",
    "input",
    "instructions",
];

/// A client's unmanaged top-level fields, with the wire they are written in.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientFields {
    /// The client's wire.
    pub wire: FieldsWire,
    /// Every top-level key of the client's body but [`MANAGED`], as sent.
    pub fields: Map<String, Value>,
    /// The client bounded its answer with `max_completion_tokens` (chat): a chat upstream gets
    /// the bound under that name too.
    pub max_completion_tokens: bool,
    /// The client's `tools` exactly as declared. A Responses client's (functions, `custom`,
    /// `namespace`, `web_search`, …): a Responses upstream gets them unchanged. A chat
    /// client's: a chat upstream gets each function tool the engine forwards unchanged as it
    /// came, with the fields [`super::ToolSpec`] does not name (`strict`). Empty for
    /// Anthropic, whose tools travel as [`super::ToolSpec`]s only.
    pub tools: Vec<Value>,
}

impl ClientFields {
    /// The unmanaged fields of `body`, sent in `wire`.
    pub fn capture(wire: FieldsWire, body: &Map<String, Value>) -> Self {
        Self {
            wire,
            fields: body
                .iter()
                .filter(|(k, _)| !MANAGED.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            max_completion_tokens: wire == FieldsWire::Chat
                && body.contains_key("max_completion_tokens")
                && !body.contains_key("max_tokens"),
            tools: match (wire, body.get("tools")) {
                (FieldsWire::Chat, Some(Value::Array(tools))) => tools.clone(),
                _ => Vec::new(),
            },
        }
    }

    /// Writes the fields into `body`, an upstream request in `upstream`'s wire, without
    /// replacing a key the provider wrote; returns the fields (dotted for a part of one) that
    /// have no form in `upstream`'s wire and were not sent.
    pub fn merge(&self, upstream: FieldsWire, body: &mut Map<String, Value>) -> Vec<String> {
        let mut out = Map::new();
        let mut dropped = Vec::new();
        for (key, value) in &self.fields {
            if self.wire == upstream {
                out.insert(key.clone(), value.clone());
                continue;
            }
            map_field(self.wire, upstream, key, value, &mut out, &mut dropped);
        }
        for (key, value) in out {
            body.entry(key).or_insert(value);
        }
        dropped
    }
}

impl ClientFields {
    /// The `strict` flag the client declared on the function tool `spec` stands for, when it
    /// declared one and the engine forwards that tool unchanged: a chat tool's
    /// `function.strict`, a Responses tool's `strict`. Both wires mean the same by it (the
    /// arguments must follow the schema exactly), so a provider of the other OpenAI wire sends
    /// it too rather than its own default.
    pub fn declared_strict(&self, spec: &super::ToolSpec) -> Option<bool> {
        self.tools.iter().find_map(|raw| {
            let (declared, strict) = match self.wire {
                FieldsWire::Chat => (
                    spec.matches_chat_tool(raw),
                    raw.get("function").and_then(|f| f.get("strict")),
                ),
                FieldsWire::Responses => (spec.matches_responses_tool(raw), raw.get("strict")),
                FieldsWire::Anthropic => (false, None),
            };
            (declared && raw.get("type").and_then(Value::as_str) == Some("function"))
                .then(|| strict.and_then(Value::as_bool))
                .flatten()
        })
    }
}

/// Keys with the same name and meaning in both wires.
fn same_in_both(from: FieldsWire, to: FieldsWire, key: &str) -> bool {
    use FieldsWire::*;
    match (from, to) {
        (Responses, Chat) | (Chat, Responses) => matches!(
            key,
            "parallel_tool_calls"
                | "temperature"
                | "top_p"
                | "store"
                | "metadata"
                | "user"
                | "prompt_cache_key"
                | "safety_identifier"
                | "service_tier"
                | "top_logprobs"
        ),
        _ => matches!(key, "temperature" | "top_p"),
    }
}

/// One field of `from`'s wire, written in `to`'s where it has a form there.
fn map_field(
    from: FieldsWire,
    to: FieldsWire,
    key: &str,
    value: &Value,
    out: &mut Map<String, Value>,
    dropped: &mut Vec<String>,
) {
    use FieldsWire::*;
    if same_in_both(from, to, key) {
        out.insert(key.to_owned(), value.clone());
        return;
    }
    let mapped: Option<(&str, Value)> = match (from, to, key) {
        (Responses, Chat, "reasoning") => {
            for sub in value.as_object().into_iter().flat_map(Map::keys) {
                if sub != "effort" {
                    dropped.push(format!("reasoning.{sub}"));
                }
            }
            match value.get("effort") {
                Some(effort) => Some(("reasoning_effort", effort.clone())),
                None => return,
            }
        }
        (Responses, Chat, "text") => {
            for sub in value.as_object().into_iter().flat_map(Map::keys) {
                match (sub.as_str(), value.get(sub)) {
                    ("format", Some(format)) => match responses_format_as_chat(format) {
                        Some(f) => {
                            out.insert("response_format".into(), f);
                        }
                        None => dropped.push("text.format".into()),
                    },
                    ("verbosity", Some(v)) => {
                        out.insert("verbosity".into(), v.clone());
                    }
                    _ => dropped.push(format!("text.{sub}")),
                }
            }
            return;
        }
        (Responses, Chat, "tool_choice") => tool_choice_responses_to_chat(value),
        (Chat, Responses, "reasoning_effort") => Some(("reasoning", json!({"effort": value}))),
        (Chat, Responses, "verbosity") => Some(("text", json!({"verbosity": value}))),
        (Chat, Responses, "tool_choice") => tool_choice_chat_to_responses(value),
        (Anthropic, Responses, "tool_choice") => tool_choice_anthropic_to_chat(value)
            .and_then(|(_, chat)| tool_choice_chat_to_responses(&chat)),
        (Anthropic, Responses, "metadata") => {
            for sub in value.as_object().into_iter().flat_map(Map::keys) {
                if sub != "user_id" {
                    dropped.push(format!("metadata.{sub}"));
                }
            }
            match value.get("user_id") {
                Some(id) => Some(("user", id.clone())),
                None => return,
            }
        }
        (Chat | Responses, Anthropic, "tool_choice") => tool_choice_openai_to_anthropic(value),
        (Anthropic, Chat, "tool_choice") => {
            if value.get("disable_parallel_tool_use") == Some(&Value::Bool(true)) {
                out.insert("parallel_tool_calls".into(), json!(false));
            }
            tool_choice_anthropic_to_chat(value)
        }
        (Chat, Anthropic, "stop") => match value {
            Value::String(s) => Some(("stop_sequences", json!([s]))),
            Value::Array(_) => Some(("stop_sequences", value.clone())),
            _ => None,
        },
        (Anthropic, Chat, "stop_sequences") => Some(("stop", value.clone())),
        (Chat | Responses, Anthropic, "user") => {
            Some(("metadata", json!({"user_id": value.clone()})))
        }
        (Anthropic, Chat, "metadata") => {
            for sub in value.as_object().into_iter().flat_map(Map::keys) {
                if sub != "user_id" {
                    dropped.push(format!("metadata.{sub}"));
                }
            }
            match value.get("user_id") {
                Some(id) => Some(("user", id.clone())),
                None => return,
            }
        }
        _ => None,
    };
    match mapped {
        Some((name, v)) => {
            out.insert(name.to_owned(), v);
        }
        None => dropped.push(key.to_owned()),
    }
}

/// A Responses `text.format` as a chat `response_format`: the JSON schema's name, schema,
/// description and strictness move under `json_schema`.
fn responses_format_as_chat(format: &Value) -> Option<Value> {
    match format.get("type").and_then(Value::as_str)? {
        "json_schema" => {
            let mut schema = format.as_object()?.clone();
            schema.remove("type");
            Some(json!({"type": "json_schema", "json_schema": schema}))
        }
        kind @ ("text" | "json_object") => Some(json!({"type": kind})),
        _ => None,
    }
}

fn tool_choice_responses_to_chat(value: &Value) -> Option<(&'static str, Value)> {
    match value {
        Value::String(_) => Some(("tool_choice", value.clone())),
        v if v.get("type").and_then(Value::as_str) == Some("function") => {
            let name = v.get("name")?;
            Some((
                "tool_choice",
                json!({"type": "function", "function": {"name": name}}),
            ))
        }
        _ => None,
    }
}

/// A chat `tool_choice` in Responses form: a named function loses its `function` wrapper.
fn tool_choice_chat_to_responses(value: &Value) -> Option<(&'static str, Value)> {
    match value {
        Value::String(_) => Some(("tool_choice", value.clone())),
        v if v.get("type").and_then(Value::as_str) == Some("function") => {
            let name = v.get("function").and_then(|f| f.get("name"))?;
            Some(("tool_choice", json!({"type": "function", "name": name})))
        }
        _ => None,
    }
}

fn tool_choice_openai_to_anthropic(value: &Value) -> Option<(&'static str, Value)> {
    let choice = match value {
        Value::String(s) => match s.as_str() {
            "auto" => json!({"type": "auto"}),
            "required" => json!({"type": "any"}),
            "none" => json!({"type": "none"}),
            _ => return None,
        },
        v if v.get("type").and_then(Value::as_str) == Some("function") => {
            // Chat nests the name under `function`; Responses does not.
            let name = v
                .get("function")
                .and_then(|f| f.get("name"))
                .or_else(|| v.get("name"))?;
            json!({"type": "tool", "name": name})
        }
        _ => return None,
    };
    Some(("tool_choice", choice))
}

fn tool_choice_anthropic_to_chat(value: &Value) -> Option<(&'static str, Value)> {
    let choice = match value.get("type").and_then(Value::as_str)? {
        "auto" => json!("auto"),
        "any" => json!("required"),
        "none" => json!("none"),
        "tool" => json!({"type": "function", "function": {"name": value.get("name")?}}),
        _ => return None,
    };
    Some(("tool_choice", choice))
}

/// Field names the not-forwarded counter and its warning keep by name: the fields the three
/// wires define. Any other name is `other`: a client chooses its field names, and naming each
/// would let it grow the counter's labels and the set of warned names without bound.
const KNOWN_FIELDS: &[&str] = &[
    "audio",
    "background",
    "container",
    "context_management",
    "conversation",
    "frequency_penalty",
    "include",
    "inference_geo",
    "logit_bias",
    "logprobs",
    "max_tool_calls",
    "mcp_servers",
    "metadata",
    "modalities",
    "n",
    "output_config",
    "parallel_tool_calls",
    "prediction",
    "presence_penalty",
    "previous_response_id",
    "prompt",
    "prompt_cache_key",
    "prompt_cache_retention",
    "reasoning",
    "reasoning.effort",
    "reasoning.generate_summary",
    "reasoning.summary",
    "reasoning_effort",
    "response_format",
    "safety_identifier",
    "seed",
    "service_tier",
    "stop",
    "stop_sequences",
    "store",
    "temperature",
    "text",
    "text.format",
    "text.verbosity",
    "thinking",
    "tool_choice",
    "top_k",
    "top_logprobs",
    "top_p",
    "truncation",
    "user",
    "verbosity",
    "web_search_options",
];

/// How a dropped field is named in the counter: itself when known, else `other`.
pub fn counted_name(field: &str) -> &'static str {
    KNOWN_FIELDS
        .iter()
        .find(|k| **k == field)
        .copied()
        .unwrap_or("other")
}

/// The client fields not forwarded in this process, by client wire, upstream wire and
/// [`counted_name`]; what `rampart serve`'s `/metrics` reports as
/// `rampart_serve_fields_not_forwarded_total`.
pub type NotForwardedCounts =
    std::collections::BTreeMap<(FieldsWire, FieldsWire, &'static str), u64>;

fn dropped_counts() -> &'static Mutex<NotForwardedCounts> {
    static COUNTS: OnceLock<Mutex<NotForwardedCounts>> = OnceLock::new();
    COUNTS.get_or_init(Default::default)
}

/// A copy of the counts (see [`NotForwardedCounts`]).
pub fn not_forwarded_counts() -> NotForwardedCounts {
    dropped_counts()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
}

/// Counts `fields` (dropped going from `from`'s wire to `to`'s) and says, once per counted
/// name and client wire in this process, at warn level, that such a field has no form in the
/// upstream's wire and was not sent. Bounded: unknown names are counted and warned as `other`.
pub fn warn_not_forwarded(from: FieldsWire, to: FieldsWire, fields: &[String]) {
    static WARNED: OnceLock<Mutex<HashSet<(FieldsWire, &'static str)>>> = OnceLock::new();
    if fields.is_empty() {
        return;
    }
    {
        let mut counts = dropped_counts().lock().unwrap_or_else(|p| p.into_inner());
        for field in fields {
            *counts.entry((from, to, counted_name(field))).or_default() += 1;
        }
    }
    let mut warned = WARNED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    for field in fields {
        let name = counted_name(field);
        if warned.insert((from, name)) {
            tracing::warn!(
                field = %if name == "other" { "other (a field no wire defines; counted, not named again)" } else { name },
                client_wire = ?from, upstream_wire = ?to,
                "a client request field has no form in the upstream's wire; not forwarded"
            );
        }
    }
}

#[cfg(test)]
#[path = "client_fields_tests.rs"]
mod tests;
