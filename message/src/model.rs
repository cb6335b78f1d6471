//! The message model: Rust types for pi's `AgentMessage`, as found under the
//! `message` field of `"type":"message"` entries in pi / OpenClaw session files
//! (JSONL v1–v3).
//!
//! Engines read whole sessions through these types and hand them back to the
//! host, which writes them to the same files pi and OpenClaw read. So the one
//! hard rule is **lossless round trip**: parsing a message and serialising it
//! again must give the same JSON value. That is why
//!
//! * every struct keeps fields it does not know in a flattened `extra` map,
//! * roles and content-block types we do not know are kept as raw JSON
//!   ([`AgentMessage::Other`], [`ContentBlock::Other`]),
//! * [`Content`] keeps pi's "string or array of blocks" distinction,
//! * fields pi may write as `null` (`details`, `exitCode`) keep the difference
//!   between absent and `null`,
//! * cost figures are written back the way JavaScript writes numbers.
//!
//! One deliberate normalisation: an explicit `null` on an optional string or
//! boolean field that pi types as `T | undefined` (for example `errorMessage`)
//! reads as `None` and is written back as absent. `JSON.stringify` never
//! produces such a `null`, none occurs in the reference sessions, and pi treats
//! both the same.
//!
//! Messages with a known role are parsed strictly: a missing required field is
//! an error rather than a silent fallback to [`AgentMessage::Other`], so model
//! bugs surface instead of turning into opaque data.

use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};

/// Fields a message or block carries that this model does not name.
///
/// Kept so that fields added by newer pi versions, OpenClaw or extensions
/// survive a round trip through an engine.
pub type Extra = Map<String, Value>;

// ---------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------

/// One message of an agent conversation, tagged in JSON by its `"role"`.
///
/// This is what a `message` session entry holds and what engines assemble
/// into model context. The variants mirror pi's `AgentMessage` union (the
/// LLM roles from `pi-ai` plus the coding-agent roles); anything else is kept
/// verbatim in [`AgentMessage::Other`] so sessions written by newer or
/// extended agents still load and save unchanged.
#[derive(Debug, Clone, PartialEq)]
// The variants differ in size (`Other` holds a JSON map, larger with serde_json's
// `preserve_order`); boxing one would change this 1.x type's public shape.
#[allow(clippy::large_enum_variant)]
pub enum AgentMessage {
    /// `"role":"user"`: input from the human (or a channel on their behalf).
    User(UserMessage),
    /// `"role":"assistant"`: one model response, with usage and stop reason.
    Assistant(AssistantMessage),
    /// `"role":"toolResult"`: the output of one tool call, sent back to the model.
    ToolResult(ToolResultMessage),
    /// `"role":"custom"`: a message injected by an extension (pi ≥ v3 name of
    /// the old `hookMessage`); shown to the model as a user message.
    Custom(CustomMessage),
    /// `"role":"bashExecution"`: a shell command the user ran with `!`,
    /// shown to the model as a user message.
    BashExecution(BashExecutionMessage),
    /// `"role":"compactionSummary"`: the summary that stands in for history
    /// removed by compaction.
    CompactionSummary(CompactionSummaryMessage),
    /// `"role":"branchSummary"`: the summary of a branch the conversation
    /// came back from.
    BranchSummary(BranchSummaryMessage),
    /// A role this model does not know, kept as the raw JSON object
    /// (including its `"role"` key) so it round-trips untouched.
    Other(Map<String, Value>),
}

/// A message from the user (`"role":"user"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserMessage {
    /// What the user said: plain text or text/image blocks, as pi allows both.
    pub content: Content,
    /// When the message was created, in Unix milliseconds (pi's convention).
    pub timestamp: u64,
    /// Fields this model does not name, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A model response (`"role":"assistant"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantMessage {
    /// Text, thinking and tool-call blocks in the order the model produced them.
    pub content: Vec<ContentBlock>,
    /// The wire API used (for example `anthropic-messages`,
    /// `openai-completions`); needed to replay thinking signatures correctly.
    pub api: String,
    /// The provider that served the response (for example `anthropic`, `ollama`).
    pub provider: String,
    /// The model id that produced the response; engines use it to pick a
    /// context window and tokenizer.
    pub model: String,
    /// Token counts and cost reported for this response; the basis of
    /// context-size accounting.
    pub usage: Usage,
    /// Why generation stopped; `error` and `aborted` responses are usually
    /// dropped or repaired by transcript hygiene.
    pub stop_reason: StopReason,
    /// When the response finished, in Unix milliseconds.
    pub timestamp: u64,
    /// The provider's error text when `stop_reason` is `error`; OpenClaw
    /// matches it to recognise context-overflow errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// Fields this model does not name, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The result of one tool call (`"role":"toolResult"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultMessage {
    /// The [`ToolCall::id`] this answers; pairing calls with results is what
    /// transcript repair relies on.
    pub tool_call_id: String,
    /// The name of the tool that ran, kept because some providers need it.
    pub tool_name: String,
    /// What the model sees: text and/or image blocks (or, leniently, a string).
    pub content: Content,
    /// Tool-specific structured data for UIs, never sent to the model.
    /// `Some(Value::Null)` keeps an explicit `null` apart from an absent field.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub details: Option<Value>,
    /// Whether the tool failed; the model is told so.
    pub is_error: bool,
    /// When the result was produced, in Unix milliseconds.
    pub timestamp: u64,
    /// Fields this model does not name, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A message injected by an extension (`"role":"custom"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CustomMessage {
    /// The extension-defined kind, so the extension can find its own messages.
    pub custom_type: String,
    /// What the model sees (as a user message): text or blocks.
    pub content: Content,
    /// Whether UIs should show the message; it reaches the model either way.
    pub display: bool,
    /// Extension-specific data, never sent to the model.
    /// `Some(Value::Null)` keeps an explicit `null` apart from an absent field.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub details: Option<Value>,
    /// When the message was created, in Unix milliseconds.
    pub timestamp: u64,
    /// Fields this model does not name, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A shell command the user ran directly (`"role":"bashExecution"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BashExecutionMessage {
    /// The command line as typed.
    pub command: String,
    /// Combined output as captured (possibly truncated, see `truncated`).
    pub output: String,
    /// The exit code. Three states, because pi wrote all of them over time:
    /// `None` = field absent (current pi when there is no code),
    /// `Some(None)` = explicit `null` (older pi), `Some(Some(code))` = a code.
    #[serde(default, with = "nullable", skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<Option<i64>>,
    /// Whether the user cancelled the command before it finished.
    pub cancelled: bool,
    /// Whether `output` was cut short; the full text is at `full_output_path`.
    pub truncated: bool,
    /// Where the untruncated output was saved, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_output_path: Option<String>,
    /// When the command ran, in Unix milliseconds.
    pub timestamp: u64,
    /// `true` for `!!` commands, which must not reach the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude_from_context: Option<bool>,
    /// Fields this model does not name, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The summary standing in for compacted history (`"role":"compactionSummary"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionSummaryMessage {
    /// The summary text (without pi's `<summary>` wrapper).
    pub summary: String,
    /// Context size before compaction, in tokens; lets engines judge how much
    /// the compaction saved.
    pub tokens_before: u64,
    /// When the compaction happened, in Unix milliseconds.
    pub timestamp: u64,
    /// Fields this model does not name, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The summary of an abandoned branch (`"role":"branchSummary"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BranchSummaryMessage {
    /// The summary text (without pi's `<summary>` wrapper).
    pub summary: String,
    /// The id of the session entry the summarised branch started from.
    pub from_id: String,
    /// When the summary was made, in Unix milliseconds.
    pub timestamp: u64,
    /// Fields this model does not name, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: Extra,
}

// ---------------------------------------------------------------------------
// Content
// ---------------------------------------------------------------------------

/// Message content that pi allows to be either a bare string or an array of
/// blocks. Kept as written, because turning one into the other would change
/// the file on a round trip.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    /// A JSON string: plain text.
    Text(String),
    /// A JSON array of content blocks.
    Blocks(Vec<ContentBlock>),
}

/// One block of message content, tagged in JSON by its `"type"`.
#[derive(Debug, Clone, PartialEq)]
pub enum ContentBlock {
    /// `"type":"text"`: visible text.
    Text(TextContent),
    /// `"type":"thinking"`: model reasoning, which some providers require to
    /// be sent back verbatim (with its signature).
    Thinking(ThinkingContent),
    /// `"type":"toolCall"`: a tool invocation requested by the model.
    ToolCall(ToolCall),
    /// `"type":"image"`: an inline image.
    Image(ImageContent),
    /// A block type this model does not know, kept as the raw JSON object
    /// (including its `"type"` key) so it round-trips untouched.
    Other(Map<String, Value>),
}

/// A text block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextContent {
    /// The text itself.
    pub text: String,
    /// Provider-specific id of the text item (for example an OpenAI Responses
    /// message id), needed to replay the block to the same provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_signature: Option<String>,
    /// Fields this model does not name, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A thinking (reasoning) block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThinkingContent {
    /// The reasoning text.
    pub thinking: String,
    /// Provider signature or reasoning-item id; Anthropic and OpenAI reject
    /// replayed thinking without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_signature: Option<String>,
    /// Fields this model does not name (for example `redacted` in newer pi),
    /// kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A tool call requested by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// The call id that the matching [`ToolResultMessage::tool_call_id`] refers to.
    pub id: String,
    /// The name of the tool to run.
    pub name: String,
    /// The arguments as parsed JSON (normally an object); kept untyped
    /// because every tool defines its own schema.
    pub arguments: Value,
    /// Google's opaque thought signature, needed to replay the call to Gemini.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought_signature: Option<String>,
    /// Fields this model does not name (for example streaming leftovers
    /// such as `partialJson`), kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: Extra,
}

/// An inline image block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageContent {
    /// The image bytes, base64-encoded, as pi stores them.
    pub data: String,
    /// The image's MIME type (for example `image/png`), needed by providers.
    pub mime_type: String,
    /// Fields this model does not name, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: Extra,
}

// ---------------------------------------------------------------------------
// Usage and stop reason
// ---------------------------------------------------------------------------

/// Token usage reported for one assistant response; engines use it to know
/// how big the context was without re-tokenising.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Uncached input (prompt) tokens.
    pub input: u64,
    /// Output (completion) tokens.
    pub output: u64,
    /// Input tokens served from the provider's prompt cache.
    pub cache_read: u64,
    /// Input tokens written to the provider's prompt cache.
    pub cache_write: u64,
    /// Total as reported by pi. Optional because older pi versions (v1
    /// sessions) did not write it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
    /// What the response cost, in US dollars.
    pub cost: Cost,
    /// Fields this model does not name, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Cost of one response in US dollars, split like [`Usage`].
///
/// Values are serialised the way JavaScript writes numbers (an integral value
/// as `0`, not `0.0`), so files written by pi round-trip exactly.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cost {
    /// Cost of uncached input tokens.
    #[serde(serialize_with = "js_number")]
    pub input: f64,
    /// Cost of output tokens.
    #[serde(serialize_with = "js_number")]
    pub output: f64,
    /// Cost of cache-read tokens.
    #[serde(serialize_with = "js_number")]
    pub cache_read: f64,
    /// Cost of cache-write tokens.
    #[serde(serialize_with = "js_number")]
    pub cache_write: f64,
    /// Total cost.
    #[serde(serialize_with = "js_number")]
    pub total: f64,
    /// Fields this model does not name, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Why the model stopped generating.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum StopReason {
    /// `stop`: the model finished its turn.
    Stop,
    /// `length`: the output-token limit was hit.
    Length,
    /// `toolUse`: the model wants tool results before continuing.
    ToolUse,
    /// `error`: the request failed; see `error_message`.
    Error,
    /// `aborted`: the user or the runtime cancelled the request.
    Aborted,
    /// A value this model does not know, kept verbatim so it round-trips.
    Other(String),
}

impl StopReason {
    /// The JSON spelling, as pi writes it.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Stop => "stop",
            Self::Length => "length",
            Self::ToolUse => "toolUse",
            Self::Error => "error",
            Self::Aborted => "aborted",
            Self::Other(s) => s,
        }
    }

    /// The known variant for `s`, if there is one (no allocation).
    fn known(s: &str) -> Option<Self> {
        Some(match s {
            "stop" => Self::Stop,
            "length" => Self::Length,
            "toolUse" => Self::ToolUse,
            "error" => Self::Error,
            "aborted" => Self::Aborted,
            _ => return None,
        })
    }
}

impl Serialize for StopReason {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for StopReason {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = StopReason;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a stop reason string")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<StopReason, E> {
                Ok(StopReason::known(v).unwrap_or_else(|| StopReason::Other(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<StopReason, E> {
                Ok(StopReason::known(&v).unwrap_or(StopReason::Other(v)))
            }
        }
        deserializer.deserialize_str(V)
    }
}

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

impl AgentMessage {
    /// The JSON `role` value, so callers can dispatch on unknown roles too.
    /// Returns `""` for an [`AgentMessage::Other`] built without a string role.
    pub fn role(&self) -> &str {
        match self {
            Self::User(_) => "user",
            Self::Assistant(_) => "assistant",
            Self::ToolResult(_) => "toolResult",
            Self::Custom(_) => "custom",
            Self::BashExecution(_) => "bashExecution",
            Self::CompactionSummary(_) => "compactionSummary",
            Self::BranchSummary(_) => "branchSummary",
            Self::Other(raw) => raw.get("role").and_then(Value::as_str).unwrap_or(""),
        }
    }

    /// The message time in Unix milliseconds, if it has one (every known role
    /// does; an unknown one only if it carries a numeric `timestamp`).
    pub fn timestamp(&self) -> Option<u64> {
        match self {
            Self::User(m) => Some(m.timestamp),
            Self::Assistant(m) => Some(m.timestamp),
            Self::ToolResult(m) => Some(m.timestamp),
            Self::Custom(m) => Some(m.timestamp),
            Self::BashExecution(m) => Some(m.timestamp),
            Self::CompactionSummary(m) => Some(m.timestamp),
            Self::BranchSummary(m) => Some(m.timestamp),
            Self::Other(raw) => raw.get("timestamp").and_then(Value::as_u64),
        }
    }

    /// The tool calls of an assistant message, in order; empty for every
    /// other role. Engines use it to pair calls with their results.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        let blocks: &[ContentBlock] = match self {
            Self::Assistant(m) => &m.content,
            _ => &[],
        };
        blocks.iter().filter_map(|block| match block {
            ContentBlock::ToolCall(call) => Some(call),
            _ => None,
        })
    }

    /// The call id a tool result answers; `None` for every other role.
    pub fn tool_call_id(&self) -> Option<&str> {
        match self {
            Self::ToolResult(m) => Some(&m.tool_call_id),
            _ => None,
        }
    }

    /// A user message with one text block, shaped as pi writes user input.
    pub fn user_text(text: impl Into<String>, timestamp: u64) -> Self {
        Self::User(UserMessage {
            content: Content::text_block(text),
            timestamp,
            extra: Extra::new(),
        })
    }

    /// A tool result with one text block, e.g. for synthetic results that
    /// transcript repair inserts for calls that never got an answer.
    pub fn tool_result(
        tool_call_id: impl Into<String>,
        tool_name: impl Into<String>,
        text: impl Into<String>,
        is_error: bool,
        timestamp: u64,
    ) -> Self {
        Self::ToolResult(ToolResultMessage {
            tool_call_id: tool_call_id.into(),
            tool_name: tool_name.into(),
            content: Content::text_block(text),
            details: None,
            is_error,
            timestamp,
            extra: Extra::new(),
        })
    }

    /// A finished (`stop`) assistant message with one text block and zero
    /// usage, e.g. for synthetic replies an engine or the host inserts.
    pub fn assistant_text(
        text: impl Into<String>,
        api: impl Into<String>,
        provider: impl Into<String>,
        model: impl Into<String>,
        timestamp: u64,
    ) -> Self {
        Self::Assistant(AssistantMessage {
            content: vec![ContentBlock::text(text)],
            api: api.into(),
            provider: provider.into(),
            model: model.into(),
            usage: Usage::default(),
            stop_reason: StopReason::Stop,
            timestamp,
            error_message: None,
            extra: Extra::new(),
        })
    }
}

impl Content {
    /// Content made of a single text block (the shape pi writes for new
    /// messages, as opposed to a bare string).
    pub fn text_block(text: impl Into<String>) -> Self {
        Self::Blocks(vec![ContentBlock::text(text)])
    }

    /// The blocks, or an empty slice for string content; lets callers walk
    /// blocks without matching on the representation.
    pub fn blocks(&self) -> &[ContentBlock] {
        match self {
            Self::Text(_) => &[],
            Self::Blocks(blocks) => blocks,
        }
    }

    /// The text of the content: the string, or the text blocks joined with newlines (images
    /// and other blocks are not text). What a blob keeps when a result is shortened.
    pub fn joined_text(&self) -> String {
        match self {
            Self::Text(t) => t.clone(),
            Self::Blocks(blocks) => blocks
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Text(t) => Some(t.text.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

impl ContentBlock {
    /// A plain text block without signature.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text(TextContent {
            text: text.into(),
            text_signature: None,
            extra: Extra::new(),
        })
    }

    /// The JSON `type` value; `""` for an [`ContentBlock::Other`] built
    /// without a string type.
    pub fn block_type(&self) -> &str {
        match self {
            Self::Text(_) => "text",
            Self::Thinking(_) => "thinking",
            Self::ToolCall(_) => "toolCall",
            Self::Image(_) => "image",
            Self::Other(raw) => raw.get("type").and_then(Value::as_str).unwrap_or(""),
        }
    }
}

// ---------------------------------------------------------------------------
// Serde: tagged unions with an open fallback
// ---------------------------------------------------------------------------
//
// serde's derived internally tagged enums cannot keep an unknown variant's
// data, and `#[serde(untagged)]` fallbacks buffer every message twice and hide
// real errors in known variants. Instead we read the tag ourselves: pi always
// writes it as the first key, so the common path reads the tag, then streams
// the rest of the object straight into the variant's struct with no
// intermediate buffer. Only objects whose tag is not first (hand-written or
// re-ordered JSON) are buffered into a `serde_json::Map` first.

/// A JSON object union distinguished by one string key, with a raw fallback.
trait OpenTagged: Sized {
    /// Which known variant a tag names.
    type Kind: Copy;
    /// The key holding the tag.
    const TAG: &'static str;
    /// What the visitor expects, for error messages.
    const EXPECTING: &'static str;
    /// The known variant for a tag value, or `None` if unknown.
    fn kind(tag: &str) -> Option<Self::Kind>;
    /// Deserialise a known variant from the object minus its tag key.
    fn known<'de, D: Deserializer<'de>>(kind: Self::Kind, rest: D) -> Result<Self, D::Error>;
    /// Wrap an object with an unknown tag (tag key included).
    fn unknown(raw: Map<String, Value>) -> Self;
    /// The extra-fields map of a known variant, to reject a duplicate tag.
    fn extra(&self) -> Option<&Extra>;
}

/// The first key of an object: the tag, or something else (kept for buffering).
enum FirstKey {
    Tag,
    Other(String),
}

struct FirstKeySeed(&'static str);

impl<'de> DeserializeSeed<'de> for FirstKeySeed {
    type Value = FirstKey;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<FirstKey, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for FirstKeySeed {
    type Value = FirstKey;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<FirstKey, E> {
        Ok(if v == self.0 {
            FirstKey::Tag
        } else {
            FirstKey::Other(v.to_owned())
        })
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<FirstKey, E> {
        Ok(if v == self.0 {
            FirstKey::Tag
        } else {
            FirstKey::Other(v)
        })
    }
}

/// A tag value: a known kind (no allocation) or the unknown string.
enum TagValue<K> {
    Known(K),
    Unknown(String),
}

struct TagSeed<T>(PhantomData<T>);

impl<'de, T: OpenTagged> DeserializeSeed<'de> for TagSeed<T> {
    type Value = TagValue<T::Kind>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<T: OpenTagged> Visitor<'_> for TagSeed<T> {
    type Value = TagValue<T::Kind>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a string `{}`", T::TAG)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(T::kind(v).map_or_else(|| TagValue::Unknown(v.to_owned()), TagValue::Known))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(match T::kind(&v) {
            Some(kind) => TagValue::Known(kind),
            None => TagValue::Unknown(v),
        })
    }
}

struct OpenTaggedVisitor<T>(PhantomData<T>);

impl<'de, T: OpenTagged> Visitor<'de> for OpenTaggedVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(T::EXPECTING)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<T, A::Error> {
        let first_key = match map.next_key_seed(FirstKeySeed(T::TAG))? {
            Some(key) => key,
            None => return Err(de::Error::missing_field(T::TAG)),
        };
        match first_key {
            FirstKey::Tag => match map.next_value_seed(TagSeed::<T>(PhantomData))? {
                TagValue::Known(kind) => {
                    let value = T::known(kind, MapAccessDeserializer::new(map))?;
                    // A second tag key would land in `extra` and be written
                    // twice; refuse it rather than produce ambiguous JSON.
                    if value
                        .extra()
                        .is_some_and(|extra| extra.contains_key(T::TAG))
                    {
                        return Err(de::Error::duplicate_field(T::TAG));
                    }
                    Ok(value)
                }
                TagValue::Unknown(tag) => {
                    let mut raw = Map::new();
                    raw.insert(T::TAG.to_owned(), Value::String(tag));
                    while let Some((key, value)) = map.next_entry::<String, Value>()? {
                        if key == T::TAG {
                            return Err(de::Error::duplicate_field(T::TAG));
                        }
                        raw.insert(key, value);
                    }
                    Ok(T::unknown(raw))
                }
            },
            FirstKey::Other(key) => {
                // Slow path: the tag is not first, so buffer the object.
                let mut raw = Map::new();
                let value: Value = map.next_value()?;
                raw.insert(key, value);
                while let Some((key, value)) = map.next_entry::<String, Value>()? {
                    raw.insert(key, value);
                }
                let kind = match raw.get(T::TAG) {
                    Some(Value::String(tag)) => T::kind(tag),
                    Some(other) => {
                        return Err(de::Error::invalid_type(unexpected(other), &"a string"));
                    }
                    None => return Err(de::Error::missing_field(T::TAG)),
                };
                match kind {
                    Some(kind) => {
                        raw.remove(T::TAG);
                        T::known(kind, Value::Object(raw)).map_err(de::Error::custom)
                    }
                    None => Ok(T::unknown(raw)),
                }
            }
        }
    }
}

/// Describe a JSON value for a type error.
fn unexpected(value: &Value) -> de::Unexpected<'_> {
    match value {
        Value::Null => de::Unexpected::Unit,
        Value::Bool(b) => de::Unexpected::Bool(*b),
        Value::Number(_) => de::Unexpected::Other("number"),
        Value::String(s) => de::Unexpected::Str(s),
        Value::Array(_) => de::Unexpected::Seq,
        Value::Object(_) => de::Unexpected::Map,
    }
}

/// Known message roles, for tag dispatch.
#[derive(Clone, Copy)]
enum RoleKind {
    User,
    Assistant,
    ToolResult,
    Custom,
    BashExecution,
    CompactionSummary,
    BranchSummary,
}

impl OpenTagged for AgentMessage {
    type Kind = RoleKind;
    const TAG: &'static str = "role";
    const EXPECTING: &'static str = "an agent message object with a \"role\"";

    fn kind(tag: &str) -> Option<RoleKind> {
        Some(match tag {
            "user" => RoleKind::User,
            "assistant" => RoleKind::Assistant,
            "toolResult" => RoleKind::ToolResult,
            "custom" => RoleKind::Custom,
            "bashExecution" => RoleKind::BashExecution,
            "compactionSummary" => RoleKind::CompactionSummary,
            "branchSummary" => RoleKind::BranchSummary,
            _ => return None,
        })
    }

    fn known<'de, D: Deserializer<'de>>(kind: RoleKind, rest: D) -> Result<Self, D::Error> {
        Ok(match kind {
            RoleKind::User => Self::User(UserMessage::deserialize(rest)?),
            RoleKind::Assistant => Self::Assistant(AssistantMessage::deserialize(rest)?),
            RoleKind::ToolResult => Self::ToolResult(ToolResultMessage::deserialize(rest)?),
            RoleKind::Custom => Self::Custom(CustomMessage::deserialize(rest)?),
            RoleKind::BashExecution => {
                Self::BashExecution(BashExecutionMessage::deserialize(rest)?)
            }
            RoleKind::CompactionSummary => {
                Self::CompactionSummary(CompactionSummaryMessage::deserialize(rest)?)
            }
            RoleKind::BranchSummary => {
                Self::BranchSummary(BranchSummaryMessage::deserialize(rest)?)
            }
        })
    }

    fn unknown(raw: Map<String, Value>) -> Self {
        Self::Other(raw)
    }

    fn extra(&self) -> Option<&Extra> {
        match self {
            Self::User(m) => Some(&m.extra),
            Self::Assistant(m) => Some(&m.extra),
            Self::ToolResult(m) => Some(&m.extra),
            Self::Custom(m) => Some(&m.extra),
            Self::BashExecution(m) => Some(&m.extra),
            Self::CompactionSummary(m) => Some(&m.extra),
            Self::BranchSummary(m) => Some(&m.extra),
            Self::Other(_) => None,
        }
    }
}

impl<'de> Deserialize<'de> for AgentMessage {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(OpenTaggedVisitor::<Self>(PhantomData))
    }
}

/// Borrowed view used to serialise known roles with `"role"` written first,
/// matching pi's key order.
#[derive(Serialize)]
#[serde(tag = "role", rename_all = "camelCase")]
enum MessageRef<'a> {
    User(&'a UserMessage),
    Assistant(&'a AssistantMessage),
    ToolResult(&'a ToolResultMessage),
    Custom(&'a CustomMessage),
    BashExecution(&'a BashExecutionMessage),
    CompactionSummary(&'a CompactionSummaryMessage),
    BranchSummary(&'a BranchSummaryMessage),
}

impl Serialize for AgentMessage {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::User(m) => MessageRef::User(m).serialize(serializer),
            Self::Assistant(m) => MessageRef::Assistant(m).serialize(serializer),
            Self::ToolResult(m) => MessageRef::ToolResult(m).serialize(serializer),
            Self::Custom(m) => MessageRef::Custom(m).serialize(serializer),
            Self::BashExecution(m) => MessageRef::BashExecution(m).serialize(serializer),
            Self::CompactionSummary(m) => MessageRef::CompactionSummary(m).serialize(serializer),
            Self::BranchSummary(m) => MessageRef::BranchSummary(m).serialize(serializer),
            Self::Other(raw) => raw.serialize(serializer),
        }
    }
}

/// Known content-block types, for tag dispatch.
#[derive(Clone, Copy)]
enum BlockKind {
    Text,
    Thinking,
    ToolCall,
    Image,
}

impl OpenTagged for ContentBlock {
    type Kind = BlockKind;
    const TAG: &'static str = "type";
    const EXPECTING: &'static str = "a content block object with a \"type\"";

    fn kind(tag: &str) -> Option<BlockKind> {
        Some(match tag {
            "text" => BlockKind::Text,
            "thinking" => BlockKind::Thinking,
            "toolCall" => BlockKind::ToolCall,
            "image" => BlockKind::Image,
            _ => return None,
        })
    }

    fn known<'de, D: Deserializer<'de>>(kind: BlockKind, rest: D) -> Result<Self, D::Error> {
        Ok(match kind {
            BlockKind::Text => Self::Text(TextContent::deserialize(rest)?),
            BlockKind::Thinking => Self::Thinking(ThinkingContent::deserialize(rest)?),
            BlockKind::ToolCall => Self::ToolCall(ToolCall::deserialize(rest)?),
            BlockKind::Image => Self::Image(ImageContent::deserialize(rest)?),
        })
    }

    fn unknown(raw: Map<String, Value>) -> Self {
        Self::Other(raw)
    }

    fn extra(&self) -> Option<&Extra> {
        match self {
            Self::Text(b) => Some(&b.extra),
            Self::Thinking(b) => Some(&b.extra),
            Self::ToolCall(b) => Some(&b.extra),
            Self::Image(b) => Some(&b.extra),
            Self::Other(_) => None,
        }
    }
}

impl<'de> Deserialize<'de> for ContentBlock {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(OpenTaggedVisitor::<Self>(PhantomData))
    }
}

/// Borrowed view used to serialise known blocks with `"type"` written first.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
enum BlockRef<'a> {
    Text(&'a TextContent),
    Thinking(&'a ThinkingContent),
    ToolCall(&'a ToolCall),
    Image(&'a ImageContent),
}

impl Serialize for ContentBlock {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Text(b) => BlockRef::Text(b).serialize(serializer),
            Self::Thinking(b) => BlockRef::Thinking(b).serialize(serializer),
            Self::ToolCall(b) => BlockRef::ToolCall(b).serialize(serializer),
            Self::Image(b) => BlockRef::Image(b).serialize(serializer),
            Self::Other(raw) => raw.serialize(serializer),
        }
    }
}

impl Serialize for Content {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Text(text) => serializer.serialize_str(text),
            Self::Blocks(blocks) => blocks.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // A hand-written visitor instead of `#[serde(untagged)]`: no buffering
        // of (possibly 100 KB) tool output, and errors inside blocks stay precise.
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Content;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or an array of content blocks")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Content, E> {
                Ok(Content::Text(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Content, E> {
                Ok(Content::Text(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Content, A::Error> {
                let mut blocks = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
                while let Some(block) = seq.next_element::<ContentBlock>()? {
                    blocks.push(block);
                }
                Ok(Content::Blocks(blocks))
            }
        }
        deserializer.deserialize_any(V)
    }
}

// ---------------------------------------------------------------------------
// Field helpers
// ---------------------------------------------------------------------------

/// For `Option<Value>` fields: a present `null` becomes `Some(Value::Null)`
/// (plain `Option` would read it as `None` and drop it on the way out).
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

/// Serialise a dollar amount as JavaScript would: integral values without a
/// fractional part, so `0` stays `0` rather than becoming `0.0`.
fn js_number<S: Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
    /// Beyond 2^53 JavaScript itself switches to exponent notation, which
    /// serde_json reads back as a float; keep those as floats too.
    const MAX_SAFE: f64 = 9_007_199_254_740_992.0;
    let v = *value;
    if v.fract() == 0.0 && v.abs() < MAX_SAFE {
        // Exact: `v` is integral and within i64's lossless range.
        let int = v as i64;
        if int >= 0 {
            serializer.serialize_u64(int.unsigned_abs())
        } else {
            serializer.serialize_i64(int)
        }
    } else {
        serializer.serialize_f64(v)
    }
}

/// What a rewrite of a transcript changed: the result of `maintain` and of the session store's
/// branch-and-reappend rewrites. Lives with the message model because both the store and the
/// engine protocol speak it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct TranscriptRewriteResult {
    /// True when the session changed.
    pub changed: bool,
    /// Bytes of message JSON no longer on the active branch.
    pub bytes_freed: u64,
    /// How many entries were rewritten.
    pub rewritten_entries: u64,
    /// Why nothing changed, for logs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `Option<Option<T>>` for fields where absent, `null` and a value all occur:
/// outer `None` = absent, `Some(None)` = `null`.
mod nullable {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(super) fn serialize<T: Serialize, S: Serializer>(
        value: &Option<Option<T>>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            // Unreachable with `skip_serializing_if`, but write `null` rather
            // than fail if a caller serialises the field some other way.
            None => serializer.serialize_none(),
            Some(inner) => inner.serialize(serializer),
        }
    }

    pub(super) fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Option<T>>, D::Error> {
        Option::<T>::deserialize(deserializer).map(Some)
    }
}
