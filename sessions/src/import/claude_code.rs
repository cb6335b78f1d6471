//! Claude Code project JSONL (`~/.claude/projects/<project>/<session>.jsonl`,
//! old-style `agent-<id>.jsonl` sidechains, new-style
//! `<session>/subagents/agent-<id>.jsonl` with `.meta.json` sidecars).
//!
//! # Mapping
//!
//! * `user` lines: text and image blocks become a pi `user` message (string
//!   content stays a string); each `tool_result` block becomes its own
//!   `toolResult` message (`toolCallId` = `tool_use_id`, `toolName` looked up
//!   from the matching `tool_use`, `isError` = `is_error`; a string content or an absent
//!   `is_error` recorded as its [`AnthropicToolResultForm`]). The line's
//!   structured `toolUseResult` becomes the result's `details` (UI data, never
//!   sent to the model — exactly its role in Claude Code). A user line with
//!   `isCompactSummary` becomes an [`ImportedKind::Compaction`].
//! * `assistant` lines: `text` → text, `thinking` → thinking (signature kept),
//!   `redacted_thinking` → thinking with `redacted: true` and the data as
//!   signature, `tool_use` → `toolCall` (`arguments` = `input`); `model`,
//!   `usage` (`input_tokens`, `output_tokens`, `cache_read_input_tokens`,
//!   `cache_creation_input_tokens`) and `stop_reason` map to pi fields, with
//!   `api` `anthropic-messages` and provider `anthropic`. A model-change item
//!   precedes the first message of each model (`<synthetic>` excluded).
//! * **Split responses are merged.** Claude Code writes one API response as
//!   several lines sharing `message.id` (one content block each), and since
//!   2.x runs each tool as soon as its `tool_use` streams in, so results and
//!   hook attachments interleave with the later blocks. Those lines become one
//!   pi assistant message at the position of the first line, so it holds all
//!   tool calls before any result, one usage (the last line's, which is the
//!   final count rather than a duplicate per line), and one stop reason —
//!   the shape every provider needs on replay. The other lines' uuids are
//!   listed in `extra["mergedIds"]`.
//! * `summary` lines → [`ImportedKind::Summary`] (`leafUuid` as `leaf_id`);
//!   they are branch titles, not compactions.
//! * Every other line (`system`, `attachment`, `progress`,
//!   `queue-operation`, `file-history-snapshot`, `permission-mode`,
//!   `last-prompt`, unknown types) becomes a `claude-code.<type>` custom item
//!   holding the raw line. Attachments Claude Code showed the model as system
//!   reminders are therefore not replayed; a warning counts them by type.
//!
//! # Tree
//!
//! `parentUuid` is kept raw in `source_parent_id`, but it is not a faithful
//! conversation tree: parallel tool results each point at the line of their
//! own `tool_use`, so the raw tree forks at every parallel call and the
//! leaf's ancestry skips results. [`ImportedItem::parent`] is therefore
//! normalised: each item follows the previous item of its chain (main or
//! sidechain), except that a user prompt whose `parentUuid` names an earlier
//! record than the last one is a real fork (a rewind/edit) and hangs where the
//! source says — under that record, or as a new root when the prompt replaces
//! the very first one (`parentUuid: null` in the middle of a file). A
//! `parentUuid` naming no record of the file (a sub-agent's link into its
//! parent session) is followed by linking to the previous item.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use rampart_message::tool_result_form::AnthropicToolResultForm;
use rampart_message::{
    AgentMessage, AssistantMessage, Content, ContentBlock, Extra, ImageContent, StopReason,
    ThinkingContent, ToolCall, ToolResultMessage, UserMessage,
};
use serde_json::{Map, Value};

use super::builder::{Builder, Stamp, get_obj, get_str, get_u64, plain_text, usage, without};
use super::{Imported, ImportedItem, ImportedKind, Origin, SourceFormat};

/// Line fields consumed by the mapping (everything else goes to `extra`).
const CONSUMED: &[&str] = &[
    "type",
    "message",
    "uuid",
    "parentUuid",
    "timestamp",
    "isSidechain",
];

impl super::LineImport for ClaudeImport {
    const FORMAT: SourceFormat = SourceFormat::ClaudeCode;

    fn line(&mut self, line: usize, raw: &str) {
        self.read_line(line, raw);
    }

    fn settled_start(&self) -> Option<&str> {
        // The first line with a time sets it for good.
        self.started_at.as_deref()
    }

    fn ready(&mut self) -> std::vec::Drain<'_, ImportedItem> {
        // A response still open may take more split lines (merged into its first item).
        let keep = self
            .chains
            .iter()
            .filter_map(|chain| chain.open.as_ref().map(|group| group.item))
            .min();
        self.b.ready(keep)
    }

    fn finish(self) -> Imported {
        self.finish_import()
    }
}

/// Where a chain (the main conversation or the sidechain) stands.
#[derive(Default)]
struct Chain {
    /// The last item placed in this chain: the default parent.
    leaf: Option<usize>,
    /// The item of the last line with a uuid, to tell a rewind from a
    /// continuation.
    last_node: Option<usize>,
    /// The assistant response still receiving split lines.
    open: Option<Group>,
}

/// An assistant message being assembled from lines sharing `message.id`.
struct Group {
    message_id: String,
    item: usize,
    /// Whether some line gave a `stop_reason` (else it is derived).
    explicit_stop: bool,
}

/// What a line says about its place and time.
struct LineMeta {
    line: usize,
    uuid: Option<String>,
    parent_uuid: Option<String>,
    /// `"parentUuid": null` written out (a root), as opposed to absent.
    null_parent: bool,
    stamp: Stamp,
    sidechain: bool,
}

impl LineMeta {
    fn item(&self, kind: ImportedKind) -> ImportedItem {
        let mut item = ImportedItem::new(kind);
        item.source_id = self.uuid.clone();
        item.source_parent_id = self.parent_uuid.clone();
        item.timestamp = self.stamp.iso.clone();
        item.sidechain = self.sidechain;
        item.source_line = Some(self.line);
        item
    }
}

/// A Claude Code JSONL import, fed one line at a time.
#[derive(Default)]
pub(crate) struct ClaudeImport {
    b: Builder,
    /// `[main, sidechain]`.
    chains: [Chain; 2],
    /// Source uuid → the item that represents it.
    by_uuid: HashMap<String, usize>,
    session_id: Option<String>,
    cwd: Option<String>,
    started_at: Option<String>,
    /// Attachment lines by `attachment.type`, for the closing warning.
    attachments: BTreeMap<String, usize>,
}

impl ClaudeImport {
    /// An import of the file at `origin` (whose sub-agent sidecar, if any, comes first).
    pub(crate) fn new(origin: &Origin<'_>) -> Self {
        let mut cc = Self::default();
        cc.sidecar(origin);
        cc
    }

    fn b(&mut self) -> &mut Builder {
        &mut self.b
    }

    /// Read `agent-<id>.meta.json` next to `agent-<id>.jsonl`, if present.
    fn sidecar(&mut self, origin: &Origin<'_>) {
        let Some(path) = origin.path else { return };
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            return;
        };
        let Some(stem) = name.strip_suffix(".jsonl") else {
            return;
        };
        if !stem.starts_with("agent-") {
            return;
        }
        let meta_path: PathBuf = path.with_file_name(format!("{stem}.meta.json"));
        let Ok(bytes) = std::fs::read(&meta_path) else {
            return;
        };
        let data = match serde_json::from_slice::<Value>(&bytes) {
            Ok(v) => v,
            Err(e) => {
                self.b().warn(format!(
                    "{}: sub-agent sidecar is not JSON ({e}); kept as text",
                    meta_path.display()
                ));
                Value::String(String::from_utf8_lossy(&bytes).into_owned())
            }
        };
        let mut item = ImportedItem::custom("claude-code.subagent-meta", data);
        item.sidechain = true;
        let index = self.b().push(item);
        self.chains[1].leaf = Some(index);
    }

    fn read_line(&mut self, line: usize, raw: &str) {
        match serde_json::from_str::<Value>(raw) {
            Ok(Value::Object(obj)) => self.object_line(line, obj),
            Ok(_) => self.unparsed(line, raw, "not a JSON object"),
            Err(e) => self.unparsed(line, raw, &e.to_string()),
        }
    }

    /// A line already parsed into its object: what [`LineImport::line`] does after parsing.
    /// For a caller that holds the value (an API request's messages), which would otherwise
    /// write it as text only for it to be parsed back.
    pub(crate) fn object_line(&mut self, line: usize, obj: Map<String, Value>) {
        if self.session_id.is_none() {
            self.session_id = get_str(&obj, "sessionId").map(str::to_owned);
        }
        if self.cwd.is_none() {
            self.cwd = get_str(&obj, "cwd").map(str::to_owned);
        }
        let at = format!("line {line}");
        let stamp = self.b().stamp_str(get_str(&obj, "timestamp"), &at);
        if self.started_at.is_none() {
            self.started_at.clone_from(&stamp.iso);
        }
        let meta = LineMeta {
            line,
            uuid: get_str(&obj, "uuid").map(str::to_owned),
            parent_uuid: get_str(&obj, "parentUuid").map(str::to_owned),
            null_parent: obj.get("parentUuid").is_some_and(Value::is_null),
            stamp,
            sidechain: obj
                .get("isSidechain")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        };
        match get_str(&obj, "type") {
            Some("user") => self.user(obj, meta),
            Some("assistant") => self.assistant(obj, meta),
            Some("summary") => self.summary(obj, meta),
            Some(kind) => {
                let kind = kind.to_owned();
                self.custom(&kind, obj, meta);
            }
            None => {
                self.b().warn(format!(
                    "line {line}: no `type`; kept as a claude-code.unknown custom item"
                ));
                self.custom("unknown", obj, meta);
            }
        }
    }

    /// A line that is not a JSON object: kept as text, with a warning.
    fn unparsed(&mut self, line: usize, raw: &str, error: &str) {
        self.b().warn(format!(
            "line {line}: not a JSON object ({error}); kept as an import.unparsed-line custom item \
             (a session still being written can end in a partial line)"
        ));
        let data = serde_json::json!({ "line": line, "text": raw, "error": error });
        // It continues whichever chain the previous line was in.
        let previous = self.b.last();
        let sidechain = previous
            .and_then(|i| self.b.item(i))
            .is_some_and(|item| item.sidechain);
        let mut item = ImportedItem::custom("import.unparsed-line", data);
        item.source_line = Some(line);
        item.sidechain = sidechain;
        item.parent = previous;
        let index = self.b().push(item);
        self.chains[usize::from(sidechain)].leaf = Some(index);
    }

    /// The parent for the first item of a line (see the module docs).
    fn place(&mut self, meta: &LineMeta, prompt: bool) -> Option<usize> {
        let resolved = meta
            .parent_uuid
            .as_deref()
            .and_then(|p| self.by_uuid.get(p).copied());
        let chain = &self.chains[usize::from(meta.sidechain)];
        match chain.leaf {
            Some(leaf) => {
                // Only after a real record: leading metadata (a sidecar,
                // snapshots) does not make the first prompt a fork.
                let rewind = prompt
                    && chain.last_node.is_some()
                    && ((resolved.is_some() && resolved != chain.last_node) || meta.null_parent);
                if rewind {
                    // The user went back (to an earlier message, or to
                    // before the first one) and wrote a new prompt.
                    self.b().reset_model();
                    return resolved;
                }
                Some(leaf)
            }
            None => resolved,
        }
    }

    /// Push the items one line produced, chained, and record the line.
    fn push_line(&mut self, meta: &LineMeta, items: Vec<ImportedItem>, prompt: bool) {
        let mut parent = self.place(meta, prompt);
        for mut item in items {
            item.parent = parent;
            parent = Some(self.b().push(item));
        }
        let chain = &mut self.chains[usize::from(meta.sidechain)];
        if prompt {
            chain.open = None;
        }
        if let Some(last) = parent {
            chain.leaf = Some(last);
            if let Some(uuid) = &meta.uuid {
                chain.last_node = Some(last);
                self.by_uuid.insert(uuid.clone(), last);
            }
        }
    }

    /// Fields of a line not consumed by the mapping, minus session-level
    /// values that [`Imported`] already carries.
    fn leftovers(&self, obj: &Map<String, Value>, also: &[&str]) -> Map<String, Value> {
        let mut extra = without(obj, CONSUMED);
        for key in also {
            extra.remove(*key);
        }
        if extra.get("sessionId").and_then(Value::as_str) == self.session_id.as_deref() {
            extra.remove("sessionId");
        }
        if extra.get("cwd").and_then(Value::as_str) == self.cwd.as_deref() {
            extra.remove("cwd");
        }
        extra
    }

    fn user(&mut self, obj: Map<String, Value>, meta: LineMeta) {
        let line = meta.line;
        let Some(message) = get_obj(&obj, "message") else {
            self.b().warn(format!(
                "line {line}: user line without a `message` object; kept as a custom item"
            ));
            return self.custom("user", obj, meta);
        };
        let ms = meta.stamp.ms;
        let mut kinds: Vec<ImportedKind> = Vec::new();
        let mut pending: Vec<ContentBlock> = Vec::new();
        let mut prompt = false;
        match message.get("content") {
            Some(Value::String(text)) => {
                kinds.push(user_kind(Content::Text(text.clone()), ms));
                prompt = true;
            }
            Some(Value::Array(blocks)) => {
                for block in blocks {
                    let Some(b) = block.as_object() else {
                        self.b().warn(format!(
                            "line {line}: user content item is not an object; kept as text"
                        ));
                        pending.push(ContentBlock::text(block.to_string()));
                        continue;
                    };
                    if get_str(b, "type") == Some("tool_result") {
                        if !pending.is_empty() {
                            kinds
                                .push(user_kind(Content::Blocks(std::mem::take(&mut pending)), ms));
                            prompt = true;
                        }
                        kinds.push(self.tool_result(b, line, ms));
                    } else {
                        let converted = self.user_block(b, line);
                        pending.push(converted);
                    }
                }
                if !pending.is_empty() || kinds.is_empty() {
                    kinds.push(user_kind(Content::Blocks(pending), ms));
                    prompt = true;
                }
            }
            _ => {
                self.b().warn(format!(
                    "line {line}: user message content is neither text nor blocks; kept as a custom item"
                ));
                return self.custom("user", obj, meta);
            }
        }

        if obj.get("isCompactSummary").and_then(Value::as_bool) == Some(true) {
            kinds = kinds
                .into_iter()
                .map(|kind| match kind {
                    ImportedKind::Message(AgentMessage::User(u)) => ImportedKind::Compaction {
                        summary: content_text(&u.content),
                    },
                    other => other,
                })
                .collect();
        }

        // `toolUseResult` is the structured form of the (single) result.
        let mut consumed_result = false;
        let results = kinds
            .iter()
            .filter(|k| matches!(k, ImportedKind::Message(AgentMessage::ToolResult(_))))
            .count();
        if results == 1
            && let Some(details) = obj.get("toolUseResult")
        {
            for kind in &mut kinds {
                if let ImportedKind::Message(AgentMessage::ToolResult(r)) = kind {
                    r.details = Some(details.clone());
                    consumed_result = true;
                }
            }
        }
        let also: &[&str] = if consumed_result {
            &["toolUseResult"]
        } else {
            &[]
        };
        let mut extra = self.leftovers(&obj, also);
        let message_rest = without(message, &["role", "content"]);
        if !message_rest.is_empty() {
            extra.insert("message".to_owned(), Value::Object(message_rest));
        }
        let count = kinds.len();
        let items = kinds
            .into_iter()
            .enumerate()
            .map(|(i, kind)| {
                let mut item = meta.item(kind);
                if i + 1 == count {
                    item.extra = std::mem::take(&mut extra);
                }
                item
            })
            .collect();
        self.push_line(&meta, items, prompt);
    }

    /// A non-`tool_result` block of a user message.
    fn user_block(&mut self, b: &Map<String, Value>, line: usize) -> ContentBlock {
        match get_str(b, "type") {
            Some("text") => match get_str(b, "text") {
                Some(text) => super::builder::text_block(text, without(b, &["type", "text"])),
                None => self.other_block(b, line, "text block without text"),
            },
            Some("image") => self.image_block(b, line),
            Some(kind) => {
                let why = format!("user block type `{kind}` has no pi equivalent");
                self.other_block(b, line, &why)
            }
            None => self.other_block(b, line, "block without `type`"),
        }
    }

    /// Keep a block verbatim and say so.
    fn other_block(&mut self, b: &Map<String, Value>, line: usize, why: &str) -> ContentBlock {
        self.b()
            .warn(format!("line {line}: {why}; block kept verbatim"));
        ContentBlock::Other(b.clone())
    }

    /// An Anthropic image block (`source.type` `base64`) as a pi image.
    fn image_block(&mut self, b: &Map<String, Value>, line: usize) -> ContentBlock {
        let source = get_obj(b, "source");
        let base64 = source.filter(|s| get_str(s, "type") == Some("base64"));
        match base64.and_then(|s| Some((get_str(s, "data")?, get_str(s, "media_type")?))) {
            Some((data, mime)) => ContentBlock::Image(ImageContent {
                data: data.to_owned(),
                mime_type: mime.to_owned(),
                extra: without(b, &["type", "source"]),
            }),
            None => self.other_block(b, line, "image that is not inline base64"),
        }
    }

    fn tool_result(&mut self, b: &Map<String, Value>, line: usize, ms: u64) -> ImportedKind {
        let id = get_str(b, "tool_use_id").unwrap_or_default().to_owned();
        if id.is_empty() {
            self.b()
                .warn(format!("line {line}: tool_result without tool_use_id"));
        }
        let tool_name = self.b().tool_name(&id).unwrap_or("unknown").to_owned();
        let content = match b.get("content") {
            Some(Value::String(s)) => super::builder::text_content(s.clone()),
            Some(Value::Array(parts)) => {
                let mut blocks = Vec::with_capacity(parts.len());
                for part in parts {
                    match part.as_object() {
                        Some(p) => {
                            let block = self.user_block(p, line);
                            blocks.push(block);
                        }
                        None => blocks.push(ContentBlock::text(part.to_string())),
                    }
                }
                Content::Blocks(blocks)
            }
            None | Some(Value::Null) => Content::Blocks(Vec::new()),
            Some(other) => super::builder::text_content(other.to_string()),
        };
        let mut extra = without(b, &["type", "tool_use_id", "content", "is_error"]);
        // pi holds the content as blocks and `isError` as a boolean: how the block said them
        // is kept, so that an Anthropic upstream gets them back as they were written.
        AnthropicToolResultForm::of_block(b).record(&mut extra);
        ImportedKind::Message(AgentMessage::ToolResult(ToolResultMessage {
            tool_call_id: id,
            tool_name,
            content,
            details: None,
            is_error: b.get("is_error").and_then(Value::as_bool).unwrap_or(false),
            timestamp: ms,
            extra,
        }))
    }

    fn assistant(&mut self, obj: Map<String, Value>, meta: LineMeta) {
        let line = meta.line;
        let Some(message) = get_obj(&obj, "message") else {
            self.b().warn(format!(
                "line {line}: assistant line without a `message` object; kept as a custom item"
            ));
            return self.custom("assistant", obj, meta);
        };
        let blocks = self.assistant_blocks(message.get("content"), line);
        let message_id = get_str(message, "id").map(str::to_owned);
        let stop = get_str(message, "stop_reason").map(anthropic_stop);
        let usage = get_obj(message, "usage").map(anthropic_usage);
        let message_rest = Value::Object(without(message, &["content"]));
        let chain_index = usize::from(meta.sidechain);

        // A further line of the response being assembled: merge it.
        let open = self.chains[chain_index]
            .open
            .as_ref()
            .filter(|g| Some(&g.message_id) == message_id.as_ref())
            .map(|g| (g.item, g.explicit_stop));
        if let Some((index, explicit_stop)) = open {
            let explicit_stop = explicit_stop || stop.is_some();
            if let Some(item) = self.b().item_mut(index) {
                if let Some(AgentMessage::Assistant(a)) = item.message_mut() {
                    a.content.extend(blocks);
                    a.timestamp = meta.stamp.ms;
                    if let Some(u) = usage {
                        a.usage = u;
                    }
                    match stop {
                        Some(s) => a.stop_reason = s,
                        None if !explicit_stop => a.stop_reason = derived_stop(&a.content),
                        None => {}
                    }
                }
                item.extra.insert("message".to_owned(), message_rest);
                if let Some(uuid) = &meta.uuid {
                    let merged = item
                        .extra
                        .entry("mergedIds")
                        .or_insert_with(|| Value::Array(Vec::new()));
                    if let Value::Array(ids) = merged {
                        ids.push(Value::String(uuid.clone()));
                    }
                }
            }
            let chain = &mut self.chains[chain_index];
            if let Some(group) = &mut chain.open {
                group.explicit_stop = explicit_stop;
            }
            if let Some(uuid) = &meta.uuid {
                chain.last_node = Some(index);
                self.by_uuid.insert(uuid.clone(), index);
            }
            return;
        }

        let model = get_str(message, "model").unwrap_or("unknown").to_owned();
        let is_error = obj.get("isApiErrorMessage").and_then(Value::as_bool) == Some(true);
        let stop_reason = if is_error {
            StopReason::Error
        } else {
            stop.clone().unwrap_or_else(|| derived_stop(&blocks))
        };
        let error_message = is_error.then(|| plain_text(message.get("content")));
        let assistant = AssistantMessage {
            content: blocks,
            api: "anthropic-messages".to_owned(),
            provider: "anthropic".to_owned(),
            model: model.clone(),
            usage: usage.unwrap_or_default(),
            stop_reason,
            timestamp: meta.stamp.ms,
            error_message,
            extra: Extra::new(),
        };
        let mut items = Vec::new();
        if model != "<synthetic>"
            && let Some(mut change) = self.b().model_change("anthropic", &model)
        {
            change.timestamp.clone_from(&meta.stamp.iso);
            change.sidechain = meta.sidechain;
            change.source_line = Some(line);
            items.push(change);
        }
        let mut item = meta.item(ImportedKind::Message(AgentMessage::Assistant(assistant)));
        item.extra = self.leftovers(&obj, &[]);
        item.extra.insert("message".to_owned(), message_rest);
        items.push(item);
        self.chains[chain_index].open = None;
        self.push_line(&meta, items, false);
        if let (Some(message_id), Some(index)) = (message_id, self.b().last()) {
            self.chains[chain_index].open = Some(Group {
                message_id,
                item: index,
                explicit_stop: stop.is_some() || is_error,
            });
        }
    }

    fn assistant_blocks(&mut self, content: Option<&Value>, line: usize) -> Vec<ContentBlock> {
        let blocks = match content {
            Some(Value::String(s)) => return vec![ContentBlock::text(s.clone())],
            Some(Value::Array(blocks)) => blocks,
            None | Some(Value::Null) => return Vec::new(),
            Some(other) => {
                self.b().warn(format!(
                    "line {line}: assistant content is neither text nor blocks; kept as text"
                ));
                return vec![ContentBlock::text(other.to_string())];
            }
        };
        let mut out = Vec::with_capacity(blocks.len());
        for block in blocks {
            let Some(b) = block.as_object() else {
                out.push(ContentBlock::text(block.to_string()));
                continue;
            };
            let converted = match get_str(b, "type") {
                Some("text") => match get_str(b, "text") {
                    Some(text) => super::builder::text_block(text, without(b, &["type", "text"])),
                    None => self.other_block(b, line, "text block without text"),
                },
                Some("thinking") => ContentBlock::Thinking(ThinkingContent {
                    thinking: get_str(b, "thinking").unwrap_or_default().to_owned(),
                    thinking_signature: get_str(b, "signature").map(str::to_owned),
                    extra: without(b, &["type", "thinking", "signature"]),
                }),
                Some("redacted_thinking") => {
                    let mut extra = without(b, &["type", "data"]);
                    extra.insert("redacted".to_owned(), Value::Bool(true));
                    ContentBlock::Thinking(ThinkingContent {
                        thinking: String::new(),
                        thinking_signature: get_str(b, "data").map(str::to_owned),
                        extra,
                    })
                }
                Some("tool_use") => match (get_str(b, "id"), get_str(b, "name")) {
                    (Some(id), Some(name)) => {
                        self.b().remember_tool(id, name);
                        ContentBlock::ToolCall(ToolCall {
                            id: id.to_owned(),
                            name: name.to_owned(),
                            arguments: b
                                .get("input")
                                .cloned()
                                .unwrap_or_else(|| Value::Object(Map::new())),
                            thought_signature: None,
                            extra: without(b, &["type", "id", "name", "input"]),
                        })
                    }
                    _ => self.other_block(b, line, "tool_use without id or name"),
                },
                Some(kind) => {
                    let why = format!(
                        "assistant block type `{kind}` (server-side tool or newer block) has no pi equivalent"
                    );
                    self.other_block(b, line, &why)
                }
                None => self.other_block(b, line, "block without `type`"),
            };
            out.push(converted);
        }
        out
    }

    fn summary(&mut self, obj: Map<String, Value>, meta: LineMeta) {
        let Some(text) = get_str(&obj, "summary").map(str::to_owned) else {
            self.b().warn(format!(
                "line {}: summary line without text; kept as a custom item",
                meta.line
            ));
            return self.custom("summary", obj, meta);
        };
        let leaf_id = get_str(&obj, "leafUuid").map(str::to_owned);
        let mut item = meta.item(ImportedKind::Summary { text, leaf_id });
        item.extra = self.leftovers(&obj, &["summary", "leafUuid"]);
        self.push_line(&meta, vec![item], false);
    }

    fn custom(&mut self, kind: &str, obj: Map<String, Value>, meta: LineMeta) {
        if kind == "attachment" {
            let sub = get_obj(&obj, "attachment")
                .and_then(|a| get_str(a, "type"))
                .unwrap_or("unknown")
                .to_owned();
            *self.attachments.entry(sub).or_insert(0) += 1;
        }
        let item = meta.item(ImportedKind::Custom {
            custom_type: format!("claude-code.{kind}"),
            data: Value::Object(obj),
        });
        self.push_line(&meta, vec![item], false);
    }

    fn finish_import(mut self) -> Imported {
        if !self.attachments.is_empty() {
            let total: usize = self.attachments.values().sum();
            let kinds: Vec<String> = self
                .attachments
                .iter()
                .map(|(kind, n)| format!("{kind}×{n}"))
                .collect();
            self.b().warn(format!(
                "{total} attachment line(s) kept as claude-code.attachment custom items ({}); \
                 Claude Code showed some kinds (hook context, skill listings, file and todo \
                 reminders) to the model as system reminders, which a replay will not",
                kinds.join(", ")
            ));
        }
        self.b.finish(
            SourceFormat::ClaudeCode,
            self.session_id,
            self.cwd,
            self.started_at,
        )
    }
}

fn user_kind(content: Content, timestamp: u64) -> ImportedKind {
    ImportedKind::Message(AgentMessage::User(UserMessage {
        content,
        timestamp,
        extra: Extra::new(),
    }))
}

/// All text of a content value, for compaction summaries.
fn content_text(content: &Content) -> String {
    match content {
        Content::Text(s) => s.clone(),
        Content::Blocks(blocks) => {
            let texts: Vec<&str> = blocks
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Text(t) => Some(t.text.as_str()),
                    _ => None,
                })
                .collect();
            texts.join("\n\n")
        }
    }
}

/// Anthropic `stop_reason` → pi.
fn anthropic_stop(reason: &str) -> StopReason {
    match reason {
        "end_turn" | "stop_sequence" => StopReason::Stop,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" | "model_context_window_exceeded" => StopReason::Length,
        other => StopReason::Other(other.to_owned()),
    }
}

/// The stop reason implied by content when the line gives none (streamed
/// lines carry `null` until the last one).
fn derived_stop(content: &[ContentBlock]) -> StopReason {
    if content
        .iter()
        .any(|b| matches!(b, ContentBlock::ToolCall(_)))
    {
        StopReason::ToolUse
    } else {
        StopReason::Stop
    }
}

fn anthropic_usage(u: &Map<String, Value>) -> rampart_message::Usage {
    usage(
        get_u64(u, "input_tokens"),
        get_u64(u, "output_tokens"),
        get_u64(u, "cache_read_input_tokens"),
        get_u64(u, "cache_creation_input_tokens"),
    )
}
