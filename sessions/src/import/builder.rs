//! What every importer shares: collecting items and warnings, tool-name
//! lookup for results, timestamps with a fallback, model-change tracking, the
//! final tool-call/result pairing check, and small JSON helpers.
//!
//! Kept in one place so all formats follow the same rules (see the module
//! docs of `import`): nothing dropped silently, results paired with calls,
//! one timestamp spelling.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use rampart_message::{
    AgentMessage, Content, ContentBlock, Cost, Extra, ImageContent, TextContent, Usage,
};
use serde_json::{Map, Value};

use super::timestamp::{parse_iso, to_iso, to_millis};
use super::{Imported, ImportedItem, ImportedKind, SourceFormat};

impl ImportedItem {
    /// An item with no provenance yet; importers fill in what they know.
    pub(crate) fn new(kind: ImportedKind) -> Self {
        Self {
            kind,
            source_id: None,
            source_parent_id: None,
            parent: None,
            timestamp: None,
            sidechain: false,
            source_line: None,
            extra: Map::new(),
        }
    }

    /// A custom item holding `data` under `custom_type`.
    pub(crate) fn custom(custom_type: impl Into<String>, data: Value) -> Self {
        Self::new(ImportedKind::Custom {
            custom_type: custom_type.into(),
            data,
        })
    }

    /// The message, if this item is one.
    pub(crate) fn message_mut(&mut self) -> Option<&mut AgentMessage> {
        match &mut self.kind {
            ImportedKind::Message(m) => Some(m),
            _ => None,
        }
    }
}

/// A record's time, both ways pi needs it.
#[derive(Debug, Clone)]
pub(crate) struct Stamp {
    /// RFC 3339 for the entry, `None` when the record had no usable time.
    pub(crate) iso: Option<String>,
    /// Unix milliseconds for the message: the record's time, else the last
    /// known time, else 0.
    pub(crate) ms: u64,
}

/// Collects the items and warnings of one import.
///
/// Items are addressed by their index in the whole import. An importer that streams hands
/// out the items no later record can change ([`Builder::ready`]); only the ones after them
/// stay here, so indices below `base` are gone (and their pairing already checked).
#[derive(Default)]
pub(crate) struct Builder {
    items: Vec<ImportedItem>,
    /// Index in the whole import of `items[0]`.
    base: usize,
    warnings: Vec<String>,
    /// Tool-call id → tool name, for results that only carry the id.
    tool_names: HashMap<String, String>,
    /// The last time seen, used for records without one.
    last_ms: u64,
    /// Whether any record had a time; if none did, the import says so.
    saw_time: bool,
    /// Provider and model of the last model change emitted.
    model: Option<(String, String)>,
    /// The last warning as first written and how often it came in a row,
    /// so a repeated problem (one per block of a line) is reported once.
    repeat: Option<(String, usize)>,
    /// The tool-call/result pairing of the items handed out so far.
    pairing: Pairing,
}

/// The pairing check, item by item in import order (see [`Builder::finish`]).
#[derive(Default)]
struct Pairing {
    /// Call id → the order it was first seen in, and whether a result answered it.
    calls: HashMap<String, (usize, bool)>,
    /// Results without an earlier call, as warnings.
    warnings: Vec<String>,
}

impl Pairing {
    /// Notes the calls and the result of the item at `index`, which no later record changes.
    fn note(&mut self, item: &ImportedItem, index: usize) {
        let ImportedKind::Message(message) = &item.kind else {
            return;
        };
        for call in message.tool_calls() {
            if !self.calls.contains_key(call.id.as_str()) {
                let order = self.calls.len();
                self.calls.insert(call.id.clone(), (order, false));
            }
        }
        if let Some(id) = message.tool_call_id() {
            match self.calls.get_mut(id) {
                Some((_, answered)) => *answered = true,
                None => self.warnings.push(format!(
                    "{}: tool result for call `{id}` has no earlier tool call in this import; \
                     it is kept, but providers will reject it until it is paired or removed",
                    location(item, index)
                )),
            }
        }
    }

    /// The calls no result answered, in the order they were first seen.
    fn unanswered(&self) -> Vec<&str> {
        let mut open: Vec<(usize, &str)> = self
            .calls
            .iter()
            .filter(|(_, (_, answered))| !answered)
            .map(|(id, (order, _))| (*order, id.as_str()))
            .collect();
        open.sort_unstable();
        open.into_iter().map(|(_, id)| id).collect()
    }
}

impl Builder {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Record something that could not be converted exactly. The same
    /// warning repeated back to back is kept once with a count.
    pub(crate) fn warn(&mut self, message: impl Into<String>) {
        let message = message.into();
        if let Some((last, count)) = &mut self.repeat
            && *last == message
        {
            *count += 1;
            if let Some(slot) = self.warnings.last_mut() {
                *slot = format!("{message} (×{count})");
            }
            return;
        }
        self.warnings.push(message.clone());
        self.repeat = Some((message, 1));
    }

    /// Index of the last item, the default parent of the next one.
    pub(crate) fn last(&self) -> Option<usize> {
        (self.base + self.items.len()).checked_sub(1)
    }

    /// Add an item whose `parent` the caller has set; returns its index.
    pub(crate) fn push(&mut self, item: ImportedItem) -> usize {
        self.items.push(item);
        self.base + self.items.len() - 1
    }

    /// Add an item following the previous one (linear sources).
    pub(crate) fn push_linear(&mut self, mut item: ImportedItem) -> usize {
        item.parent = self.last();
        self.push(item)
    }

    /// The item at `index`, to extend a message built over several records. `None` once it
    /// was handed out: an importer keeps what it may still change out of [`Builder::ready`].
    pub(crate) fn item_mut(&mut self, index: usize) -> Option<&mut ImportedItem> {
        let at = index.checked_sub(self.base);
        debug_assert!(
            at.is_some(),
            "item {index} was changed after it was handed out"
        );
        self.items.get_mut(at?)
    }

    /// The item at `index` (`None` once it was handed out).
    pub(crate) fn item(&self, index: usize) -> Option<&ImportedItem> {
        self.items.get(index.checked_sub(self.base)?)
    }

    /// Hands out, in order, the items before `keep_from` (the first item the importer may
    /// still change, `None` for none) and before the last item (the next record's default
    /// parent, whose chain later records ask about). Their pairing is checked now: they are
    /// final.
    pub(crate) fn ready(&mut self, keep_from: Option<usize>) -> std::vec::Drain<'_, ImportedItem> {
        let last = self.last().unwrap_or(0);
        let stop = keep_from.map_or(last, |keep| keep.min(last));
        let count = stop.saturating_sub(self.base).min(self.items.len());
        for (offset, item) in self.items[..count].iter().enumerate() {
            self.pairing.note(item, self.base + offset);
        }
        self.base += count;
        self.items.drain(..count)
    }

    /// Remember which tool a call id belongs to.
    pub(crate) fn remember_tool(&mut self, id: &str, name: &str) {
        self.tool_names.insert(id.to_owned(), name.to_owned());
    }

    /// The tool name for a call id, if its call was seen.
    pub(crate) fn tool_name(&self, id: &str) -> Option<&str> {
        self.tool_names.get(id).map(String::as_str)
    }

    /// Turn a source time string into a [`Stamp`]; `at` names the record for
    /// the warning when the string does not parse.
    pub(crate) fn stamp_str(&mut self, raw: Option<&str>, at: &str) -> Stamp {
        match raw {
            None => self.stamp(None),
            Some(s) => {
                let parsed = parse_iso(s);
                if parsed.is_none() {
                    self.warn(format!(
                        "{at}: timestamp {s:?} is not ISO-8601; the previous time is used"
                    ));
                }
                self.stamp(parsed)
            }
        }
    }

    /// Turn a parsed time (or none) into a [`Stamp`], falling back to the last
    /// known time.
    pub(crate) fn stamp(&mut self, time: Option<DateTime<Utc>>) -> Stamp {
        match time {
            Some(t) => {
                self.saw_time = true;
                self.last_ms = to_millis(t);
                Stamp {
                    iso: Some(to_iso(t)),
                    ms: self.last_ms,
                }
            }
            None => Stamp {
                iso: None,
                ms: self.last_ms,
            },
        }
    }

    /// A model-change item if `provider`/`model` differ from the last one.
    pub(crate) fn model_change(&mut self, provider: &str, model: &str) -> Option<ImportedItem> {
        let same = self
            .model
            .as_ref()
            .is_some_and(|(p, m)| p == provider && m == model);
        if same {
            return None;
        }
        self.model = Some((provider.to_owned(), model.to_owned()));
        Some(ImportedItem::new(ImportedKind::ModelChange {
            provider: provider.to_owned(),
            model_id: model.to_owned(),
        }))
    }

    /// Forget the current model, so the next assistant message states its
    /// model again (after a fork to another branch).
    pub(crate) fn reset_model(&mut self) {
        self.model = None;
    }

    /// Finish: check that tool results pair with calls, then assemble (with the items not
    /// handed out yet).
    pub(crate) fn finish(
        mut self,
        format: SourceFormat,
        source_session_id: Option<String>,
        cwd: Option<String>,
        started_at: Option<String>,
    ) -> Imported {
        self.check_pairing();
        if !self.saw_time && self.base + self.items.len() > 0 {
            self.warn(
                "the source records no times; messages carry timestamp 0 and entries none"
                    .to_owned(),
            );
        }
        Imported {
            format,
            source_session_id,
            cwd,
            started_at,
            items: self.items,
            warnings: self.warnings,
        }
    }

    /// Warn about results without an earlier call and calls never answered:
    /// providers reject both, so transcript repair must know.
    fn check_pairing(&mut self) {
        for (offset, item) in self.items.iter().enumerate() {
            self.pairing.note(item, self.base + offset);
        }
        let mut pairing = std::mem::take(&mut self.pairing);
        let mut warnings = std::mem::take(&mut pairing.warnings);
        let unanswered = pairing.unanswered();
        if !unanswered.is_empty() {
            let shown: Vec<String> = unanswered
                .iter()
                .take(5)
                .map(|id| format!("`{id}`"))
                .collect();
            let more = unanswered.len().saturating_sub(shown.len());
            let tail = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            warnings.push(format!(
                "{} tool call(s) never got a result ({}{tail}); a replay needs a result for each \
                 (transcript repair can add synthetic ones)",
                unanswered.len(),
                shown.join(", ")
            ));
        }
        self.warnings.extend(warnings);
    }
}

/// "line N" for JSONL items, "item N" otherwise.
pub(crate) fn location(item: &ImportedItem, index: usize) -> String {
    match item.source_line {
        Some(line) => format!("line {line}"),
        None => format!("item {index}"),
    }
}

// ---------------------------------------------------------------------------
// JSON helpers
// ---------------------------------------------------------------------------

/// `map[key]` as a string.
pub(crate) fn get_str<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    map.get(key).and_then(Value::as_str)
}

/// `map[key]` as an object.
pub(crate) fn get_obj<'a>(
    map: &'a Map<String, Value>,
    key: &str,
) -> Option<&'a Map<String, Value>> {
    map.get(key).and_then(Value::as_object)
}

/// `map[key]` as an unsigned integer (0 when absent or negative).
pub(crate) fn get_u64(map: &Map<String, Value>, key: &str) -> u64 {
    map.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// A copy of `map` without `keys`: the fields an importer did not consume.
pub(crate) fn without(map: &Map<String, Value>, keys: &[&str]) -> Map<String, Value> {
    map.iter()
        .filter(|(k, _)| !keys.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Plain text of a content value: a string, or the `text` of every part that
/// has one, joined by blank lines.
pub(crate) fn plain_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => {
            let texts: Vec<&str> = parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect();
            texts.join("\n\n")
        }
        _ => String::new(),
    }
}

/// A text block keeping unknown block fields (e.g. `cache_control`).
pub(crate) fn text_block(text: impl Into<String>, extra: Extra) -> ContentBlock {
    ContentBlock::Text(TextContent {
        text: text.into(),
        text_signature: None,
        extra,
    })
}

/// An image block from a `data:<mime>;base64,<data>` URL; `None` for other
/// URLs (remote images cannot be inlined without fetching them).
pub(crate) fn image_from_data_url(url: &str) -> Option<ContentBlock> {
    let rest = url.strip_prefix("data:")?;
    let (meta, data) = rest.split_once(',')?;
    let mime = meta.strip_suffix(";base64")?;
    Some(ContentBlock::Image(ImageContent {
        data: data.to_owned(),
        mime_type: mime.to_owned(),
        extra: Extra::new(),
    }))
}

/// Tool-output content as pi stores it: a single text block for a string.
pub(crate) fn text_content(text: impl Into<String>) -> Content {
    Content::Blocks(vec![ContentBlock::text(text)])
}

/// pi usage from token counts; cost is unknown to importers and left 0, as
/// pi itself writes for models without a price.
pub(crate) fn usage(input: u64, output: u64, cache_read: u64, cache_write: u64) -> Usage {
    Usage {
        input,
        output,
        cache_read,
        cache_write,
        // Saturating: a transcript's counts are data, and one near u64::MAX panicked the
        // import (found by the fuzzer).
        total_tokens: Some(
            input
                .saturating_add(output)
                .saturating_add(cache_read)
                .saturating_add(cache_write),
        ),
        cost: Cost::default(),
        extra: Extra::new(),
    }
}

/// Usage from a chat-completions `usage` object (OpenAI / LiteLLM shape).
///
/// `prompt_tokens` includes cached tokens there, so cache reads and writes
/// are subtracted to get pi's "uncached input".
pub(crate) fn chat_usage(u: &Map<String, Value>) -> Usage {
    let prompt = get_u64(u, "prompt_tokens");
    let completion = get_u64(u, "completion_tokens");
    let cached_detail = get_obj(u, "prompt_tokens_details")
        .map(|d| get_u64(d, "cached_tokens"))
        .unwrap_or(0);
    let cache_read = get_u64(u, "cache_read_input_tokens").max(cached_detail);
    let cache_write = get_u64(u, "cache_creation_input_tokens");
    let input = prompt.saturating_sub(cache_read.saturating_add(cache_write));
    let mut out = usage(input, completion, cache_read, cache_write);
    if let Some(total) = u.get("total_tokens").and_then(Value::as_u64) {
        out.total_tokens = Some(total);
    }
    out
}

/// Best-effort provider for a model name, for model-change entries: known
/// families by name, else the `provider/` prefix, else `unknown`.
pub(crate) fn guess_provider(model: &str) -> String {
    let bare = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    let family = if bare.starts_with("claude") {
        Some("anthropic")
    } else if bare.starts_with("gpt")
        || bare.starts_with("o1")
        || bare.starts_with("o3")
        || bare.starts_with("o4")
        || bare.contains("codex")
    {
        Some("openai")
    } else if bare.starts_with("gemini") {
        Some("google")
    } else {
        None
    };
    match (family, model.split_once('/')) {
        (Some(f), _) => f.to_owned(),
        (None, Some((prefix, _))) if !prefix.is_empty() => prefix.to_owned(),
        _ => "unknown".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guesses_providers() {
        assert_eq!(guess_provider("claude-3-5-sonnet-20241022"), "anthropic");
        assert_eq!(guess_provider("litellm_proxy/claude-sonnet-4"), "anthropic");
        assert_eq!(guess_provider("gpt-5-codex"), "openai");
        assert_eq!(
            guess_provider("openrouter/meta-llama/llama-4"),
            "openrouter"
        );
        assert_eq!(guess_provider("llama3"), "unknown");
    }

    #[test]
    fn data_urls_become_images() {
        let img = image_from_data_url("data:image/png;base64,AAAA");
        assert!(
            matches!(img, Some(ContentBlock::Image(ref i)) if i.mime_type == "image/png" && i.data == "AAAA")
        );
        assert!(image_from_data_url("https://example.invalid/x.png").is_none());
    }

    #[test]
    fn chat_usage_subtracts_cached_tokens() {
        let u = serde_json::json!({
            "prompt_tokens": 3439, "completion_tokens": 104, "total_tokens": 3543,
            "prompt_tokens_details": {"cached_tokens": 0},
            "cache_creation_input_tokens": 3435, "cache_read_input_tokens": 0
        });
        let usage = chat_usage(u.as_object().unwrap_or(&Map::new()));
        assert_eq!(
            (usage.input, usage.output, usage.cache_write),
            (4, 104, 3435)
        );
        assert_eq!(usage.total_tokens, Some(3543));
    }
}
