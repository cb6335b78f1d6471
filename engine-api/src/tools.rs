//! Engine tools (API 1.2): tools an engine offers the model, answered by the engine.
//!
//! Why: an engine that keeps what it compacted out of the window (the lossless engine's summary
//! DAG, say) is only as good as the model's way back to it. The engine declares tools (a name,
//! a description, a JSON schema for the arguments) in answer to `tools.list`; the host adds them
//! to the model's request beside the client's own and, when the model calls one, asks the engine
//! with `tools.call` and hands the text back to the model as the tool's result. The client never
//! sees these calls (`rampart serve` hides them like the memory tools).
//!
//! Additive: an engine that offers tools announces [`Feature::EngineTools`](crate::protocol::Feature)
//! in its info; a host that predates 1.2 never calls these methods, and a 1.2 host never calls
//! them on an engine that did not announce the feature. Every struct reads with serde defaults
//! and ignores unknown fields, like the rest of the protocol.

use serde::{Deserialize, Serialize};

use crate::protocol::SessionRef;

/// The longest tool name a host offers (the providers' common limit: OpenAI and Anthropic both
/// refuse longer names, and a name must match `^[a-zA-Z0-9_-]{1,64}$`).
pub const MAX_TOOL_NAME_BYTES: usize = 64;

/// One tool an engine offers the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct EngineTool {
    /// The name the model calls it by: ASCII letters, digits, `_` and `-`, at most
    /// [`MAX_TOOL_NAME_BYTES`]. A tool the client also declares by this name is not offered
    /// (the client's wins).
    pub name: String,
    /// What it does and when to use it, for the model.
    pub description: String,
    /// A JSON schema of the arguments (an object schema).
    pub parameters: serde_json::Value,
}

impl EngineTool {
    /// Why the tool cannot be offered to a model, or `None` when it can: a name outside the
    /// providers' alphabet or length, or parameters that are not an object schema. Hosts check
    /// this once per listing and leave such a tool out with a warning naming it.
    pub fn problem(&self) -> Option<String> {
        let name_ok = !self.name.is_empty()
            && self.name.len() <= MAX_TOOL_NAME_BYTES
            && self
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !name_ok {
            return Some(format!(
                "tool name `{}` must be 1 to {MAX_TOOL_NAME_BYTES} ASCII letters, digits, `_` or `-`",
                self.name.escape_debug()
            ));
        }
        if !self.parameters.is_object() {
            return Some(format!(
                "tool `{}`: `parameters` must be a JSON schema object",
                self.name
            ));
        }
        None
    }
}

/// Parameters of `tools.list`: which session the tools are for (an engine may offer different
/// tools, or none, per session).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct ToolsListParams {
    /// The session.
    #[serde(flatten)]
    pub session: SessionRef,
}

/// What `tools.list` answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct ToolsListResult {
    /// The tools, in the order the model should see them.
    pub tools: Vec<EngineTool>,
}

/// Parameters of `tools.call`: one call the model made of one of the engine's tools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct ToolCallParams {
    /// The session the call was made in.
    #[serde(flatten)]
    pub session: SessionRef,
    /// The tool's name.
    pub name: String,
    /// The model's arguments, as it wrote them (not checked against the schema: the engine
    /// answers bad arguments with what is wrong, so the model can call again).
    pub arguments: serde_json::Value,
    /// The model's id of the call.
    pub call_id: String,
}

/// What `tools.call` answers: the text the model reads as the tool's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct ToolCallResult {
    /// The result's text.
    pub content: String,
    /// True when the call failed in a way the model should see as an error (bad arguments,
    /// an unknown id); the model reads `content` either way.
    pub is_error: bool,
}

impl ToolCallResult {
    /// A successful answer.
    pub fn text(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: false,
        }
    }

    /// An answer that tells the model its call failed, and why.
    pub fn error(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: true,
        }
    }
}
