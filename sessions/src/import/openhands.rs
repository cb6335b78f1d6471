//! OpenHands event streams: a JSON array of events (a recorded trajectory),
//! an evaluation-output object with `history`, or evaluation-output JSONL
//! with one such object per line.
//!
//! **One session per instance**: [`super::import_file_all`] returns one
//! [`Imported`] per JSONL line (per benchmark instance), each with
//! `source_session_id` = `instance_id` and the instance's other fields
//! (`instruction`, `metadata`, `test_result`, `metrics`…) in a leading
//! `openhands.instance` custom item. [`super::import_file`] refuses such a
//! file when it holds more than one instance.
//!
//! # Mapping
//!
//! * An action with `tool_call_metadata` was produced by a model response
//!   whose raw chat-completions form is in `model_response`: that response
//!   becomes one pi assistant message (text, all its `tool_calls`, usage,
//!   model, finish reason) through the chat conversion of
//!   [`super::openai_chat`]. Further actions from the same response (same
//!   `model_response.id`) add nothing new; every action event is kept in the
//!   message's `extra.openhandsActions`. Without `model_response` the call is
//!   rebuilt from `function_name` and the action `args`, with a warning.
//! * An observation with `tool_call_metadata` → pi `toolResult` for
//!   `tool_call_id` / `function_name`: text = `content` plus the
//!   `metadata.prefix/suffix` OpenHands adds for the model (e.g. "[The command
//!   completed with exit code 0.]"); `isError` for `error` observations and
//!   `success: false`; `extras` becomes `details`.
//! * `system` action → [`ImportedKind::SystemPrompt`] with its `tools`;
//!   `message` action → pi `user` (source `user`, with `image_urls` as
//!   images) or assistant text (source `agent`); an `error` observation
//!   without a tool call → pi `user` text (OpenHands shows it to the model
//!   as a user message).
//! * Everything else (state changes, `recall` and its workspace-context
//!   observation, `null` observations, actions without a tool call) becomes
//!   an `openhands.action` / `openhands.observation` custom item holding the
//!   event.
//! * The event `id` is the item's `source_id`, `cause` its
//!   `source_parent_id`; the stream is linear.

use std::collections::HashMap;

use rampart_message::{
    AgentMessage, Content, ContentBlock, Extra, StopReason, ToolCall, ToolResultMessage,
    UserMessage,
};
use serde_json::{Map, Value};

use super::builder::{
    Builder, Stamp, chat_usage, get_obj, get_str, image_from_data_url, plain_text, text_content,
    without,
};
use super::openai_chat::{ChatConverter, ModelInfo, finish_reason};
use super::{Imported, ImportedItem, ImportedKind, Origin, SourceFormat};

/// Import a JSON document: an event array or one instance object.
pub(crate) fn import_document(doc: Value, _origin: &Origin<'_>) -> Imported {
    match doc {
        Value::Array(events) => Events::default().run(events, Map::new(), None),
        Value::Object(mut instance) => {
            let history = match instance.remove("history") {
                Some(Value::Array(events)) => events,
                _ => Vec::new(),
            };
            Events::default().run(history, instance, None)
        }
        // Detection only passes arrays and objects.
        other => Events::default().run(vec![other], Map::new(), None),
    }
}

/// Eval-output JSONL, one session per instance line, read one line at a time. A session is
/// handed on once the next instance starts; the last one at the end, with the lines after it.
#[derive(Default)]
pub(crate) struct LinesImport {
    /// The last instance read: lines that are not instances may still join it at the end.
    last: Option<Imported>,
    /// Lines that are not instances, kept until there is a session to put them in (the next
    /// instance, or the last one for trailing lines).
    stray: Vec<(usize, String, String)>,
}

impl LinesImport {
    /// Reads one non-blank line; returns the session it completed, if any.
    pub(crate) fn line(&mut self, line: usize, raw: &str) -> Option<Imported> {
        match serde_json::from_str::<Value>(raw) {
            Ok(Value::Object(mut instance))
                if instance.get("history").is_some_and(Value::is_array) =>
            {
                let history = match instance.remove("history") {
                    Some(Value::Array(events)) => events,
                    _ => Vec::new(),
                };
                let mut session = Events::default().run(history, instance, Some(line));
                attach_stray(&mut session, &mut self.stray);
                self.last.replace(session)
            }
            Ok(_) => {
                self.stray.push((
                    line,
                    raw.to_owned(),
                    "not an instance with `history`".to_owned(),
                ));
                None
            }
            Err(e) => {
                self.stray.push((line, raw.to_owned(), e.to_string()));
                None
            }
        }
    }

    /// The last session, with the lines after it (none when the file held no instance).
    pub(crate) fn finish(mut self) -> Option<Imported> {
        let mut last = self.last.take()?;
        attach_stray(&mut last, &mut self.stray);
        Some(last)
    }
}

/// Keep lines that are not instances in a session, as custom items.
fn attach_stray(session: &mut Imported, stray: &mut Vec<(usize, String, String)>) {
    for (line, text, error) in stray.drain(..) {
        session.warnings.push(format!(
            "line {line}: {error}; kept as an import.unparsed-line custom item of this session"
        ));
        let mut item = ImportedItem::custom(
            "import.unparsed-line",
            serde_json::json!({ "line": line, "text": text, "error": error }),
        );
        item.source_line = Some(line);
        item.parent = session.items.len().checked_sub(1);
        session.items.push(item);
    }
}

#[derive(Default)]
struct Events {
    b: Builder,
    converter: ChatConverter,
    /// `model_response.id` → the assistant item built from it.
    responses: HashMap<String, usize>,
}

impl Events {
    /// Converts `events`, taken by value so each is freed once converted.
    fn run(
        mut self,
        events: Vec<Value>,
        instance: Map<String, Value>,
        line: Option<usize>,
    ) -> Imported {
        let session_id = get_str(&instance, "instance_id").map(str::to_owned);
        if !instance.is_empty() {
            let mut item = ImportedItem::custom("openhands.instance", Value::Object(instance));
            item.source_line = line;
            self.b.push_linear(item);
        }
        let mut started_at = None;
        for (index, event) in events.into_iter().enumerate() {
            let Some(ev) = event.as_object() else {
                self.b.warn(format!(
                    "history[{index}]: event is not a JSON object; kept as a custom item"
                ));
                self.b
                    .push_linear(ImportedItem::custom("openhands.event", event));
                continue;
            };
            let id = ev.get("id").map(id_string);
            let at = match &id {
                Some(id) => format!("event {id}"),
                None => format!("history[{index}]"),
            };
            let stamp = self.b.stamp_str(get_str(ev, "timestamp"), &at);
            if started_at.is_none() {
                started_at.clone_from(&stamp.iso);
            }
            let before = self.b.last();
            self.event(ev, &at, &stamp);
            // Provenance for what this event produced.
            let first_new = before.map_or(0, |i| i + 1);
            let cause = ev.get("cause").filter(|c| !c.is_null()).map(id_string);
            let end = self.b.last().map_or(0, |last| last + 1);
            for index in first_new..end {
                if let Some(item) = self.b.item_mut(index) {
                    item.source_id.clone_from(&id);
                    item.source_parent_id.clone_from(&cause);
                    item.timestamp.clone_from(&stamp.iso);
                    item.source_line = line;
                }
            }
        }
        self.b
            .finish(SourceFormat::OpenHandsEvents, session_id, None, started_at)
    }

    fn event(&mut self, ev: &Map<String, Value>, at: &str, stamp: &Stamp) {
        let tcm = get_obj(ev, "tool_call_metadata");
        if let Some(action) = get_str(ev, "action") {
            match (action, tcm) {
                (_, Some(tcm)) => self.tool_action(ev, tcm, at, stamp),
                ("system", None) => {
                    let args = get_obj(ev, "args").cloned().unwrap_or_default();
                    let text = get_str(&args, "content").unwrap_or_default().to_owned();
                    let tools = args.get("tools").cloned();
                    let mut extra = without(ev, &["id", "timestamp", "cause", "args"]);
                    extra.insert(
                        "args".to_owned(),
                        Value::Object(without(&args, &["content", "tools"])),
                    );
                    self.push(ImportedKind::SystemPrompt { text, tools }, extra);
                }
                ("message", None) => self.message(ev, at, stamp),
                _ => self.custom("openhands.action", ev),
            }
        } else if let Some(observation) = get_str(ev, "observation") {
            match (observation, tcm) {
                (_, Some(tcm)) => self.tool_observation(ev, tcm, observation, stamp),
                ("error", None) => {
                    let text = get_str(ev, "content").unwrap_or_default().to_owned();
                    let user = AgentMessage::user_text(text, stamp.ms);
                    let extra = without(ev, &["id", "timestamp", "cause", "content"]);
                    self.push(ImportedKind::Message(user), extra);
                }
                _ => self.custom("openhands.observation", ev),
            }
        } else {
            self.b.warn(format!(
                "{at}: neither an action nor an observation; kept as an openhands.event custom item"
            ));
            self.custom("openhands.event", ev);
        }
    }

    fn push(&mut self, kind: ImportedKind, extra: Map<String, Value>) -> usize {
        let mut item = ImportedItem::new(kind);
        item.extra = extra;
        self.b.push_linear(item)
    }

    fn custom(&mut self, custom_type: &str, ev: &Map<String, Value>) {
        self.b
            .push_linear(ImportedItem::custom(custom_type, Value::Object(ev.clone())));
    }

    /// A `message` action without a tool call.
    fn message(&mut self, ev: &Map<String, Value>, at: &str, stamp: &Stamp) {
        let args = get_obj(ev, "args").cloned().unwrap_or_default();
        let text = get_str(&args, "content")
            .or_else(|| get_str(ev, "message"))
            .unwrap_or_default()
            .to_owned();
        let mut extra = without(ev, &["id", "timestamp", "cause", "args"]);
        extra.insert(
            "args".to_owned(),
            Value::Object(without(&args, &["content", "image_urls"])),
        );
        if get_str(ev, "source") == Some("user") {
            let images: Vec<&str> = args
                .get("image_urls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let content = if images.is_empty() {
                Content::Text(text)
            } else {
                let mut blocks = vec![ContentBlock::text(text)];
                for url in images {
                    match image_from_data_url(url) {
                        Some(image) => blocks.push(image),
                        None => {
                            self.b.warn(format!(
                                "{at}: image {url:?} is not inline data; kept as its URL in extra.imageUrls"
                            ));
                            let urls = extra
                                .entry("imageUrls")
                                .or_insert_with(|| Value::Array(Vec::new()));
                            if let Value::Array(urls) = urls {
                                urls.push(Value::String(url.to_owned()));
                            }
                        }
                    }
                }
                Content::Blocks(blocks)
            };
            let user = AgentMessage::User(UserMessage {
                content,
                timestamp: stamp.ms,
                extra: Extra::new(),
            });
            self.push(ImportedKind::Message(user), extra);
        } else {
            let model = self.current_model();
            let assistant = AgentMessage::assistant_text(
                text,
                model.api.clone(),
                model.provider.clone(),
                model.model.clone(),
                stamp.ms,
            );
            self.push(ImportedKind::Message(assistant), extra);
        }
    }

    /// The model of the last response, for messages that do not say.
    fn current_model(&self) -> ModelInfo {
        let last = self
            .responses
            .values()
            .max()
            .and_then(|&index| self.b.item(index))
            .and_then(|item| match &item.kind {
                ImportedKind::Message(AgentMessage::Assistant(a)) => Some(a.model.clone()),
                _ => None,
            });
        ModelInfo::chat(last.as_deref().unwrap_or("unknown"))
    }

    fn tool_action(
        &mut self,
        ev: &Map<String, Value>,
        tcm: &Map<String, Value>,
        at: &str,
        stamp: &Stamp,
    ) {
        let call_id = get_str(tcm, "tool_call_id").unwrap_or_default().to_owned();
        let function = get_str(tcm, "function_name")
            .unwrap_or("unknown")
            .to_owned();
        let response = get_obj(tcm, "model_response");
        let response_id = response.and_then(|r| get_str(r, "id")).map(str::to_owned);
        let action_record = Value::Object(without(ev, &["tool_call_metadata"]));

        // A further action of a response already imported.
        if let Some(index) = response_id
            .as_ref()
            .and_then(|id| self.responses.get(id))
            .copied()
        {
            self.ensure_call(index, &call_id, &function, ev, at);
            if let Some(item) = self.b.item_mut(index) {
                push_to_array(&mut item.extra, "openhandsActions", action_record);
            }
            return;
        }

        let message = response
            .and_then(|r| r.get("choices"))
            .and_then(Value::as_array)
            .and_then(|c| c.first())
            .and_then(|c| c.get("message"))
            .and_then(Value::as_object);
        let model = ModelInfo::chat(
            response
                .and_then(|r| get_str(r, "model"))
                .unwrap_or("unknown"),
        );
        let kind = match (response, message) {
            (Some(response), Some(message)) => {
                let (mut kind, _) =
                    self.converter
                        .convert(&mut self.b, message, at, stamp.ms, &model);
                if let ImportedKind::Message(AgentMessage::Assistant(a)) = &mut kind {
                    if let Some(u) = get_obj(response, "usage") {
                        a.usage = chat_usage(u);
                    }
                    let reason = response
                        .get("choices")
                        .and_then(Value::as_array)
                        .and_then(|c| c.first())
                        .and_then(|c| c.get("finish_reason"))
                        .and_then(Value::as_str);
                    let has_calls = a
                        .content
                        .iter()
                        .any(|b| matches!(b, ContentBlock::ToolCall(_)));
                    a.stop_reason = match reason {
                        _ if has_calls => StopReason::ToolUse,
                        Some(reason) => finish_reason(reason),
                        None => StopReason::Stop,
                    };
                }
                kind
            }
            _ => {
                self.b.warn(format!(
                    "{at}: tool call `{call_id}` has no model_response; rebuilt from the action's args \
                     (OpenHands' parsed form, not the model's raw arguments)"
                ));
                let thought = get_obj(ev, "args")
                    .and_then(|a| get_str(a, "thought"))
                    .unwrap_or_default()
                    .to_owned();
                let mut assistant = AgentMessage::assistant_text(
                    thought.clone(),
                    model.api.clone(),
                    model.provider.clone(),
                    model.model.clone(),
                    stamp.ms,
                );
                if let AgentMessage::Assistant(a) = &mut assistant {
                    if thought.is_empty() {
                        a.content.clear();
                    }
                    a.stop_reason = StopReason::ToolUse;
                }
                ImportedKind::Message(assistant)
            }
        };
        if model.model != "unknown"
            && let Some(change) = self.b.model_change(&model.provider, &model.model)
        {
            self.b.push_linear(change);
        }
        let mut extra = Map::new();
        push_to_array(&mut extra, "openhandsActions", action_record);
        let mut tcm_rest = without(tcm, &["model_response"]);
        if let Some(response) = response {
            tcm_rest.insert(
                "model_response".to_owned(),
                Value::Object(without(response, &["choices"])),
            );
        }
        extra.insert("toolCallMetadata".to_owned(), Value::Object(tcm_rest));
        let index = self.push(kind, extra);
        self.ensure_call(index, &call_id, &function, ev, at);
        if let Some(id) = response_id {
            self.responses.insert(id, index);
        }
    }

    /// Make sure the assistant message at `index` holds the call `call_id`;
    /// add it from the action's args if the response did not list it.
    fn ensure_call(
        &mut self,
        index: usize,
        call_id: &str,
        function: &str,
        ev: &Map<String, Value>,
        at: &str,
    ) {
        let present = self
            .b
            .item(index)
            .and_then(|item| match &item.kind {
                ImportedKind::Message(m) => Some(m.tool_calls().any(|c| c.id == call_id)),
                _ => None,
            })
            .unwrap_or(true);
        if present {
            return;
        }
        let had_response = get_obj(ev, "tool_call_metadata")
            .and_then(|t| t.get("model_response"))
            .is_some();
        if had_response {
            self.b.warn(format!(
                "{at}: tool call `{call_id}` is not in its model_response; added from the action's args"
            ));
        }
        let arguments = get_obj(ev, "args")
            .map(|a| Value::Object(without(a, &["thought"])))
            .unwrap_or_else(|| Value::Object(Map::new()));
        self.b.remember_tool(call_id, function);
        if let Some(AgentMessage::Assistant(a)) =
            self.b.item_mut(index).and_then(ImportedItem::message_mut)
        {
            a.content.push(ContentBlock::ToolCall(ToolCall {
                id: call_id.to_owned(),
                name: function.to_owned(),
                arguments,
                thought_signature: None,
                extra: Extra::new(),
            }));
            a.stop_reason = StopReason::ToolUse;
        }
    }

    fn tool_observation(
        &mut self,
        ev: &Map<String, Value>,
        tcm: &Map<String, Value>,
        observation: &str,
        stamp: &Stamp,
    ) {
        let call_id = get_str(tcm, "tool_call_id").unwrap_or_default().to_owned();
        let name = get_str(tcm, "function_name")
            .or_else(|| self.b.tool_name(&call_id))
            .unwrap_or("unknown")
            .to_owned();
        let extras = get_obj(ev, "extras");
        let metadata = extras.and_then(|e| get_obj(e, "metadata"));
        let mut text = String::new();
        if let Some(prefix) = metadata.and_then(|m| get_str(m, "prefix")) {
            text.push_str(prefix);
        }
        text.push_str(&plain_text(ev.get("content")));
        if let Some(suffix) = metadata.and_then(|m| get_str(m, "suffix")) {
            text.push_str(suffix);
        }
        let is_error =
            observation == "error" || ev.get("success").and_then(Value::as_bool) == Some(false);
        let result = ToolResultMessage {
            tool_call_id: call_id,
            tool_name: name,
            content: text_content(text),
            details: extras.map(|e| Value::Object(e.clone())),
            is_error,
            timestamp: stamp.ms,
            extra: Extra::new(),
        };
        let mut extra = without(
            ev,
            &[
                "id",
                "timestamp",
                "cause",
                "content",
                "extras",
                "tool_call_metadata",
            ],
        );
        // The response is already in the action's item; keep it here only if
        // that action was never seen.
        let known = get_obj(tcm, "model_response")
            .and_then(|r| get_str(r, "id"))
            .is_some_and(|id| self.responses.contains_key(id));
        let kept = if known {
            without(tcm, &["model_response"])
        } else {
            tcm.clone()
        };
        extra.insert("toolCallMetadata".to_owned(), Value::Object(kept));
        self.push(
            ImportedKind::Message(AgentMessage::ToolResult(result)),
            extra,
        );
    }
}

/// An event id (number or string) as a string.
fn id_string(id: &Value) -> String {
    match id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn push_to_array(map: &mut Map<String, Value>, key: &str, value: Value) {
    let slot = map.entry(key).or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(list) = slot {
        list.push(value);
    }
}
