//! Codex CLI rollout JSONL (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`).
//!
//! Each line is `{"timestamp", "type", "payload"}` with `type` one of
//! `session_meta`, `turn_context`, `response_item`, `event_msg`,
//! `compacted`. Older rollouts (before the envelope) wrote a bare meta object
//! first and bare response items after it; both layouts are read.
//!
//! # Mapping
//!
//! * `response_item` is the conversation (OpenAI Responses API items):
//!   * `message` role `user` → pi `user` (`input_text` → text, `input_image`
//!     data URLs → images); role `assistant` → text blocks (`output_text`, the
//!     item `id` as `textSignature`, as pi's Responses provider does); roles
//!     `developer` / `system` → [`ImportedKind::SystemPrompt`].
//!   * Consecutive model-side items — `reasoning`, assistant `message`,
//!     `function_call`, `custom_tool_call`, `local_shell_call`,
//!     `web_search_call` — form **one** pi assistant message (one model
//!     response), closed by the next user message, tool output or system
//!     message. `api` is `openai-responses`, the provider
//!     `session_meta.model_provider` (else `openai`), the model the current
//!     `turn_context.model`.
//!   * `reasoning` → thinking: the summary texts joined, and the whole item
//!     (with `encrypted_content`) as JSON in `thinkingSignature`, which is how
//!     pi stores Responses reasoning for replay.
//!   * `function_call` → `toolCall` (`call_id`, `name`, `arguments` parsed
//!     from its JSON string; the item's own `id` kept as `itemId`); `custom_tool_call` (freeform tools such as
//!     `apply_patch`) → `toolCall` with `arguments` `{"input": <text>}` and
//!     `extra.customTool = true`; `local_shell_call` → `toolCall` named
//!     `local_shell` with the `action` as arguments. Other model-side items
//!     (`web_search_call`…) are kept verbatim as blocks, with a warning.
//!   * `function_call_output` / `custom_tool_call_output` → `toolResult`: the
//!     output text exactly as the model saw it (for shell calls that is
//!     Codex's JSON `{"output":…,"metadata":{"exit_code":…}}`); `isError`
//!     when the payload says `success: false` or the exit code is non-zero.
//! * `turn_context` → a model-change item when the model changes, a
//!   thinking-level item when `effort` changes, and a `codex.turn-context`
//!   custom item with the whole context (cwd, sandbox, approval policy).
//! * `session_meta` → the import's id, cwd and start, plus a
//!   `codex.session-meta` custom item (instructions, git, CLI version).
//! * `event_msg`: `token_count` becomes the usage of the assistant message
//!   it follows (`last_token_usage`; cached input split out; the raw event is
//!   kept in that item's `extra.codexTokenCount`). `user_message`,
//!   `agent_message` and `agent_reasoning` events repeat response items and
//!   are skipped when their text matches one (a warning counts them);
//!   everything else becomes a `codex.event` custom item.
//! * `compacted` → [`ImportedKind::Compaction`] with its `message`.

use std::collections::HashSet;

use rampart_message::{
    AgentMessage, AssistantMessage, Content, ContentBlock, Extra, StopReason, TextContent,
    ThinkingContent, ToolCall, ToolResultMessage, UserMessage,
};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::builder::{
    Builder, Stamp, get_obj, get_str, get_u64, image_from_data_url, plain_text, text_content,
    usage, without,
};
use super::openai_chat::parse_arguments;
use super::{Imported, ImportedItem, ImportedKind, SourceFormat};

/// A Codex rollout import: [`CodexImport::remember_texts`] over every line first (events are
/// skipped when they repeat a response item, which may come later), then one line at a time.
pub(crate) struct CodexImport {
    b: Builder,
    session_id: Option<String>,
    cwd: Option<String>,
    started_at: Option<String>,
    provider: String,
    model: String,
    effort: Option<String>,
    /// The assistant message receiving model-side items, if one is open.
    open: Option<usize>,
    /// The last assistant message, for `token_count`.
    last_assistant: Option<usize>,
    /// Assistant messages that already got a `token_count`.
    with_usage: HashSet<usize>,
    /// Digests of the texts of user/assistant messages and reasoning summaries, to skip the
    /// `event_msg`s that repeat them. Digests rather than the texts: the set spans the whole
    /// file while the import itself holds only a few lines.
    seen_texts: HashSet<TextDigest>,
    skipped_events: usize,
    /// Whether a bare (pre-envelope) meta line was seen.
    legacy: bool,
}

/// A SHA-256 digest of a trimmed text, standing for the text in [`CodexImport::seen_texts`].
type TextDigest = [u8; 32];

/// The digest `text` is remembered and looked up by (trimmed, as the texts are compared).
fn digest(text: &str) -> TextDigest {
    Sha256::digest(text.trim().as_bytes()).into()
}

impl super::LineImport for CodexImport {
    const FORMAT: SourceFormat = SourceFormat::CodexRollout;

    fn line(&mut self, line: usize, raw: &str) {
        match serde_json::from_str::<Value>(raw) {
            Ok(Value::Object(obj)) => self.read_line(line, &obj),
            Ok(other) => self.unparsed(line, &other.to_string(), "not a JSON object"),
            Err(e) => self.unparsed(line, &format!("{e}: {raw}"), "invalid JSON"),
        }
    }

    fn settled_start(&self) -> Option<&str> {
        // The first session meta may still replace the start taken from the first line.
        self.session_id.as_ref().and(self.started_at.as_deref())
    }

    fn ready(&mut self) -> std::vec::Drain<'_, ImportedItem> {
        // The open response takes more items, and the last response its `token_count`.
        let waiting_usage = self
            .last_assistant
            .filter(|index| !self.with_usage.contains(index));
        let keep = [self.open, waiting_usage].into_iter().flatten().min();
        self.b.ready(keep)
    }

    fn finish(self) -> Imported {
        self.finish_import()
    }
}

impl CodexImport {
    /// An import with nothing read yet.
    pub(crate) fn new() -> Self {
        Self {
            b: Builder::new(),
            session_id: None,
            cwd: None,
            started_at: None,
            provider: "openai".to_owned(),
            model: "unknown".to_owned(),
            effort: None,
            open: None,
            last_assistant: None,
            with_usage: HashSet::new(),
            seen_texts: HashSet::new(),
            skipped_events: 0,
            legacy: false,
        }
    }

    /// The first pass: notes the texts of messages and reasoning summaries in `raw`.
    pub(crate) fn remember_texts(&mut self, raw: &str) {
        let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(raw) else {
            return;
        };
        let payload = get_obj(&obj, "payload").unwrap_or(&obj);
        match get_str(payload, "type") {
            Some("message") => {
                self.seen_texts
                    .insert(digest(&plain_text(payload.get("content"))));
            }
            Some("reasoning") => {
                for part in payload
                    .get("summary")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if let Some(text) = part.get("text").and_then(Value::as_str) {
                        self.seen_texts.insert(digest(text));
                    }
                }
            }
            _ => {}
        }
    }

    fn unparsed(&mut self, line: usize, text: &str, error: &str) {
        self.b.warn(format!(
            "line {line}: {error}; kept as an import.unparsed-line custom item"
        ));
        let mut item = ImportedItem::custom(
            "import.unparsed-line",
            serde_json::json!({ "line": line, "text": text, "error": error }),
        );
        item.source_line = Some(line);
        self.b.push_linear(item);
    }

    /// An item for `line`, stamped.
    fn item(&self, kind: ImportedKind, line: usize, stamp: &Stamp) -> ImportedItem {
        let mut item = ImportedItem::new(kind);
        item.source_line = Some(line);
        item.timestamp.clone_from(&stamp.iso);
        item
    }

    fn push(&mut self, kind: ImportedKind, line: usize, stamp: &Stamp) -> usize {
        let item = self.item(kind, line, stamp);
        self.b.push_linear(item)
    }

    fn read_line(&mut self, line: usize, obj: &Map<String, Value>) {
        let stamp = self
            .b
            .stamp_str(get_str(obj, "timestamp"), &format!("line {line}"));
        if self.started_at.is_none() {
            self.started_at.clone_from(&stamp.iso);
        }
        let (kind, payload) = match (get_str(obj, "type"), get_obj(obj, "payload")) {
            (Some(kind), Some(payload)) => (kind, payload),
            // Pre-envelope rollouts: a meta line, then bare items.
            (None, _) if self.b.last().is_none() && obj.contains_key("id") => {
                self.legacy = true;
                ("session_meta", obj)
            }
            (None, _) if obj.contains_key("record_type") => ("state", obj),
            (Some(_), None) if self.legacy => ("response_item", obj),
            _ => {
                self.b.warn(format!(
                    "line {line}: not a Codex rollout record; kept as a codex.unknown custom item"
                ));
                let item = self.item(
                    ImportedKind::Custom {
                        custom_type: "codex.unknown".to_owned(),
                        data: Value::Object(obj.clone()),
                    },
                    line,
                    &stamp,
                );
                self.b.push_linear(item);
                return;
            }
        };
        match kind {
            "session_meta" => self.session_meta(payload, line, &stamp),
            "turn_context" => self.turn_context(payload, line, &stamp),
            "response_item" => self.response_item(payload, line, &stamp),
            "event_msg" => self.event(payload, line, &stamp),
            "compacted" => {
                self.open = None;
                let summary = get_str(payload, "message").unwrap_or_default().to_owned();
                let index = self.push(ImportedKind::Compaction { summary }, line, &stamp);
                let rest = without(payload, &["message"]);
                if let Some(item) = self.b.item_mut(index) {
                    item.extra = rest;
                }
            }
            other => {
                let custom_type = format!("codex.{other}");
                self.push(
                    ImportedKind::Custom {
                        custom_type,
                        data: Value::Object(payload.clone()),
                    },
                    line,
                    &stamp,
                );
            }
        }
    }

    fn session_meta(&mut self, payload: &Map<String, Value>, line: usize, stamp: &Stamp) {
        // A rollout resumed from another carries that one's meta too; the
        // first meta is this session's.
        if self.session_id.is_none() {
            self.session_id = get_str(payload, "id").map(str::to_owned);
            self.cwd = get_str(payload, "cwd").map(str::to_owned);
            if let Some(started) =
                get_str(payload, "timestamp").and_then(super::timestamp::parse_iso)
            {
                self.started_at = Some(super::timestamp::to_iso(started));
            }
            if let Some(provider) = get_str(payload, "model_provider") {
                provider.clone_into(&mut self.provider);
            }
        }
        self.push(
            ImportedKind::Custom {
                custom_type: "codex.session-meta".to_owned(),
                data: Value::Object(payload.clone()),
            },
            line,
            stamp,
        );
    }

    fn turn_context(&mut self, payload: &Map<String, Value>, line: usize, stamp: &Stamp) {
        if self.cwd.is_none() {
            self.cwd = get_str(payload, "cwd").map(str::to_owned);
        }
        if let Some(model) = get_str(payload, "model") {
            model.clone_into(&mut self.model);
            let provider = self.provider.clone();
            if let Some(change) = self.b.model_change(&provider, model) {
                let mut change = change;
                change.source_line = Some(line);
                change.timestamp.clone_from(&stamp.iso);
                self.b.push_linear(change);
            }
        }
        if let Some(effort) = get_str(payload, "effort")
            && self.effort.as_deref() != Some(effort)
        {
            self.effort = Some(effort.to_owned());
            self.push(ImportedKind::ThinkingLevel(effort.to_owned()), line, stamp);
        }
        self.push(
            ImportedKind::Custom {
                custom_type: "codex.turn-context".to_owned(),
                data: Value::Object(payload.clone()),
            },
            line,
            stamp,
        );
    }

    /// The open assistant message, created if needed.
    fn assistant(&mut self, line: usize, stamp: &Stamp) -> usize {
        if let Some(index) = self.open {
            return index;
        }
        let message = AssistantMessage {
            content: Vec::new(),
            api: "openai-responses".to_owned(),
            provider: self.provider.clone(),
            model: self.model.clone(),
            usage: Default::default(),
            stop_reason: StopReason::Stop,
            timestamp: stamp.ms,
            error_message: None,
            extra: Extra::new(),
        };
        let index = self.push(
            ImportedKind::Message(AgentMessage::Assistant(message)),
            line,
            stamp,
        );
        self.open = Some(index);
        self.last_assistant = Some(index);
        index
    }

    /// Append a block to the open assistant message.
    fn add_block(&mut self, block: ContentBlock, line: usize, stamp: &Stamp) {
        let index = self.assistant(line, stamp);
        if let Some(AgentMessage::Assistant(a)) =
            self.b.item_mut(index).and_then(ImportedItem::message_mut)
        {
            if matches!(block, ContentBlock::ToolCall(_)) {
                a.stop_reason = StopReason::ToolUse;
            }
            a.content.push(block);
            a.timestamp = stamp.ms;
        }
    }

    fn response_item(&mut self, p: &Map<String, Value>, line: usize, stamp: &Stamp) {
        let at = format!("line {line}");
        match get_str(p, "type") {
            Some("message") => match get_str(p, "role") {
                Some("assistant") => {
                    for block in self.assistant_parts(p, &at) {
                        self.add_block(block, line, stamp);
                    }
                }
                Some("user") => {
                    self.open = None;
                    let content = self.user_parts(p.get("content"), &at);
                    let user = UserMessage {
                        content,
                        timestamp: stamp.ms,
                        extra: Extra::new(),
                    };
                    let index =
                        self.push(ImportedKind::Message(AgentMessage::User(user)), line, stamp);
                    self.keep_rest(index, p, &["type", "role", "content"]);
                }
                Some(role @ ("developer" | "system")) => {
                    self.open = None;
                    let text = plain_text(p.get("content"));
                    let index = self.push(
                        ImportedKind::SystemPrompt { text, tools: None },
                        line,
                        stamp,
                    );
                    let mut rest = without(p, &["type", "content"]);
                    rest.insert("role".to_owned(), Value::String(role.to_owned()));
                    if let Some(item) = self.b.item_mut(index) {
                        item.extra = rest;
                    }
                }
                other => {
                    self.open = None;
                    self.b.warn(format!(
                        "{at}: message role {other:?} has no pi equivalent; kept as a codex.response-item custom item"
                    ));
                    self.custom_item("codex.response-item", p, line, stamp);
                }
            },
            Some("reasoning") => {
                let summary: Vec<&str> = p
                    .get("summary")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|s| s.get("text").and_then(Value::as_str))
                    .collect();
                let mut thinking = summary.join("\n\n");
                if thinking.is_empty() {
                    // Raw reasoning content, when the provider returns it.
                    thinking = plain_text(p.get("content"));
                }
                let block = ContentBlock::Thinking(ThinkingContent {
                    thinking,
                    thinking_signature: Some(Value::Object(p.clone()).to_string()),
                    extra: Extra::new(),
                });
                self.add_block(block, line, stamp);
            }
            Some("function_call") => {
                let name = get_str(p, "name").unwrap_or("unknown").to_owned();
                let id = self.call_id(p, &at);
                let arguments = parse_arguments(&mut self.b, p.get("arguments"), &at);
                self.b.remember_tool(&id, &name);
                let block = ContentBlock::ToolCall(ToolCall {
                    id,
                    name,
                    arguments,
                    thought_signature: None,
                    extra: call_extra(p, &["type", "name", "arguments", "call_id"]),
                });
                self.add_block(block, line, stamp);
            }
            Some("custom_tool_call") => {
                let name = get_str(p, "name").unwrap_or("unknown").to_owned();
                let id = self.call_id(p, &at);
                self.b.remember_tool(&id, &name);
                let mut arguments = Map::new();
                arguments.insert(
                    "input".to_owned(),
                    p.get("input").cloned().unwrap_or(Value::Null),
                );
                let mut extra = call_extra(p, &["type", "name", "input", "call_id"]);
                extra.insert("customTool".to_owned(), Value::Bool(true));
                let block = ContentBlock::ToolCall(ToolCall {
                    id,
                    name,
                    arguments: Value::Object(arguments),
                    thought_signature: None,
                    extra,
                });
                self.add_block(block, line, stamp);
            }
            Some("local_shell_call") => {
                let id = self.call_id(p, &at);
                self.b.remember_tool(&id, "local_shell");
                let block = ContentBlock::ToolCall(ToolCall {
                    id,
                    name: "local_shell".to_owned(),
                    arguments: p.get("action").cloned().unwrap_or(Value::Null),
                    thought_signature: None,
                    extra: call_extra(p, &["type", "action", "call_id"]),
                });
                self.add_block(block, line, stamp);
            }
            Some(
                kind @ ("function_call_output"
                | "custom_tool_call_output"
                | "local_shell_call_output"),
            ) => {
                self.open = None;
                let id = get_str(p, "call_id").unwrap_or_default().to_owned();
                let tool_name = self.b.tool_name(&id).unwrap_or("unknown").to_owned();
                let (content, is_error) = tool_output(p.get("output"));
                let result = ToolResultMessage {
                    tool_call_id: id,
                    tool_name,
                    content,
                    details: None,
                    is_error,
                    timestamp: stamp.ms,
                    extra: Extra::new(),
                };
                let index = self.push(
                    ImportedKind::Message(AgentMessage::ToolResult(result)),
                    line,
                    stamp,
                );
                let mut rest = without(p, &["type", "call_id", "output"]);
                if kind != "function_call_output" {
                    rest.insert("type".to_owned(), Value::String(kind.to_owned()));
                }
                if let Some(item) = self.b.item_mut(index) {
                    item.extra = rest;
                }
            }
            Some(kind) if kind.ends_with("_call") => {
                // Server-side tools (web search, image generation): part of
                // the response, but with no pi block type.
                self.b.warn(format!(
                    "{at}: response item `{kind}` has no pi block type; kept verbatim in the assistant message"
                ));
                self.add_block(ContentBlock::Other(p.clone()), line, stamp);
            }
            other => {
                self.open = None;
                self.b.warn(format!(
                    "{at}: response item type {other:?} is not known; kept as a codex.response-item custom item"
                ));
                self.custom_item("codex.response-item", p, line, stamp);
            }
        }
    }

    fn call_id(&mut self, p: &Map<String, Value>, at: &str) -> String {
        match get_str(p, "call_id").or_else(|| get_str(p, "id")) {
            Some(id) => id.to_owned(),
            None => {
                self.b.warn(format!(
                    "{at}: tool call without call_id; its result cannot be paired"
                ));
                String::new()
            }
        }
    }

    fn custom_item(
        &mut self,
        custom_type: &str,
        p: &Map<String, Value>,
        line: usize,
        stamp: &Stamp,
    ) {
        self.push(
            ImportedKind::Custom {
                custom_type: custom_type.to_owned(),
                data: Value::Object(p.clone()),
            },
            line,
            stamp,
        );
    }

    /// Keep unconsumed payload fields in the item's `extra`.
    fn keep_rest(&mut self, index: usize, p: &Map<String, Value>, consumed: &[&str]) {
        let rest = without(p, consumed);
        if let Some(item) = self.b.item_mut(index) {
            item.extra = rest;
        }
    }

    fn assistant_parts(&mut self, p: &Map<String, Value>, at: &str) -> Vec<ContentBlock> {
        let id = get_str(p, "id").map(str::to_owned);
        let parts = p.get("content").and_then(Value::as_array);
        let mut out = Vec::new();
        for part in parts.into_iter().flatten() {
            let Some(part) = part.as_object() else {
                continue;
            };
            match get_str(part, "type") {
                Some("output_text" | "input_text" | "text") => {
                    out.push(ContentBlock::Text(TextContent {
                        text: get_str(part, "text").unwrap_or_default().to_owned(),
                        text_signature: id.clone(),
                        extra: without(part, &["type", "text"]),
                    }));
                }
                Some("refusal") => {
                    out.push(ContentBlock::Text(TextContent {
                        text: get_str(part, "refusal").unwrap_or_default().to_owned(),
                        text_signature: id.clone(),
                        extra: without(part, &["type", "refusal"]),
                    }));
                }
                kind => {
                    self.b.warn(format!(
                        "{at}: assistant content part {kind:?} has no pi equivalent; kept verbatim"
                    ));
                    out.push(ContentBlock::Other(part.clone()));
                }
            }
        }
        out
    }

    fn user_parts(&mut self, content: Option<&Value>, at: &str) -> Content {
        let Some(parts) = content.and_then(Value::as_array) else {
            return Content::Text(plain_text(content));
        };
        let mut out = Vec::new();
        for part in parts {
            let Some(part) = part.as_object() else {
                continue;
            };
            match get_str(part, "type") {
                Some("input_text" | "text" | "output_text") => {
                    out.push(super::builder::text_block(
                        get_str(part, "text").unwrap_or_default(),
                        without(part, &["type", "text"]),
                    ));
                }
                Some("input_image") => {
                    match get_str(part, "image_url").and_then(image_from_data_url) {
                        Some(image) => out.push(image),
                        None => {
                            self.b.warn(format!(
                                "{at}: image is not an inline data URL; part kept verbatim"
                            ));
                            out.push(ContentBlock::Other(part.clone()));
                        }
                    }
                }
                kind => {
                    self.b.warn(format!(
                        "{at}: user content part {kind:?} has no pi equivalent; kept verbatim"
                    ));
                    out.push(ContentBlock::Other(part.clone()));
                }
            }
        }
        Content::Blocks(out)
    }

    fn event(&mut self, p: &Map<String, Value>, line: usize, stamp: &Stamp) {
        let kind = get_str(p, "type").unwrap_or("unknown");
        match kind {
            "token_count" => {
                let last = get_obj(p, "info").and_then(|i| get_obj(i, "last_token_usage"));
                let target = self
                    .last_assistant
                    .filter(|index| !self.with_usage.contains(index));
                if let (Some(u), Some(index)) = (last, target) {
                    let cached = get_u64(u, "cached_input_tokens");
                    let mut pi_usage = usage(
                        get_u64(u, "input_tokens").saturating_sub(cached),
                        get_u64(u, "output_tokens"),
                        cached,
                        0,
                    );
                    if let Some(total) = u.get("total_tokens").and_then(Value::as_u64) {
                        pi_usage.total_tokens = Some(total);
                    }
                    if let Some(item) = self.b.item_mut(index) {
                        if let Some(AgentMessage::Assistant(a)) = item.message_mut() {
                            a.usage = pi_usage;
                        }
                        item.extra
                            .insert("codexTokenCount".to_owned(), Value::Object(p.clone()));
                    }
                    self.with_usage.insert(index);
                    return;
                }
            }
            "user_message"
            | "agent_message"
            | "agent_reasoning"
            | "agent_reasoning_raw_content" => {
                let text = get_str(p, "message")
                    .or_else(|| get_str(p, "text"))
                    .unwrap_or_default()
                    .trim();
                if self.seen_texts.contains(&digest(text)) {
                    self.skipped_events += 1;
                    return;
                }
            }
            _ => {}
        }
        self.custom_item("codex.event", p, line, stamp);
    }

    fn finish_import(mut self) -> Imported {
        if self.skipped_events > 0 {
            self.b.warn(format!(
                "{} event_msg line(s) (user_message / agent_message / agent_reasoning) skipped: \
                 they repeat the text of response items already imported",
                self.skipped_events
            ));
        }
        self.b.finish(
            SourceFormat::CodexRollout,
            self.session_id,
            self.cwd,
            self.started_at,
        )
    }
}

/// Unconsumed fields of a tool-call item, for the pi block's `extra`. The
/// Responses item `id` (`fc_…`) is renamed `itemId`: `id` is the block's
/// call id in pi.
fn call_extra(p: &Map<String, Value>, consumed: &[&str]) -> Map<String, Value> {
    let mut extra = without(p, consumed);
    if let Some(item_id) = extra.remove("id")
        && p.contains_key("call_id")
    {
        extra.insert("itemId".to_owned(), item_id);
    }
    extra
}

/// A tool output as pi content, and whether it reports failure.
///
/// Codex writes the output as the exact string the model saw; newer versions
/// may write `{"content": …, "success": bool}` or a list of content items.
fn tool_output(output: Option<&Value>) -> (Content, bool) {
    match output {
        Some(Value::String(s)) => (text_content(s.clone()), exit_code_failed(s)),
        Some(Value::Object(o)) => {
            let failed = o.get("success").and_then(Value::as_bool) == Some(false);
            match o.get("content") {
                Some(Value::String(s)) => (text_content(s.clone()), failed),
                Some(other) => (text_content(other.to_string()), failed),
                None => (text_content(Value::Object(o.clone()).to_string()), failed),
            }
        }
        Some(items @ Value::Array(_)) => (text_content(plain_text(Some(items))), false),
        Some(other) => (text_content(other.to_string()), false),
        None => (Content::Blocks(Vec::new()), false),
    }
}

/// Whether a shell output string is Codex's JSON with a non-zero exit code.
fn exit_code_failed(output: &str) -> bool {
    if !output.trim_start().starts_with('{') {
        return false;
    }
    serde_json::from_str::<Value>(output)
        .ok()
        .and_then(|v| v.get("metadata")?.get("exit_code")?.as_i64())
        .is_some_and(|code| code != 0)
}
