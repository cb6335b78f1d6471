//! How an Anthropic client wrote a `tool_result` block, where pi's model cannot say it: pi keeps
//! a result's content as blocks and `isError` as a boolean, while Anthropic lets a client send
//! the content as one string and leave `is_error` out.
//!
//! Why it is kept: Rampart is transparent by rule, so an Anthropic upstream must receive the
//! result as the client wrote it (issue 25). The importer records the form in the result's
//! `extra` under [`ANTHROPIC_FORM_KEY`] (only when it differs from what a writer would do
//! anyway), and the Anthropic writer follows it while the result still fits it: a string
//! only while the content is one text block, no `is_error` only while it is false. A result an
//! engine rewrote into another shape is written the ordinary way, and so is one without the
//! key (Rampart's own, or from another wire).

use serde_json::{Map, Value};

use crate::Extra;

/// The `extra` key of a tool result holding its [`AnthropicToolResultForm`].
pub const ANTHROPIC_FORM_KEY: &str = "rampartAnthropicForm";

/// What an Anthropic `tool_result` block left to its defaults or wrote in its short form.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AnthropicToolResultForm {
    /// `content` was a string, not a list of blocks.
    pub content_string: bool,
    /// `is_error` was absent (Anthropic reads that as false).
    pub is_error_omitted: bool,
}

impl AnthropicToolResultForm {
    /// The form of a client's `tool_result` block.
    pub fn of_block(block: &Map<String, Value>) -> Self {
        Self {
            content_string: block.get("content").is_some_and(Value::is_string),
            is_error_omitted: !block.contains_key("is_error"),
        }
    }

    /// The form recorded in a tool result's `extra`; the default (lists, `is_error` written)
    /// when none is, or when the record is not one this version reads.
    pub fn read(extra: &Extra) -> Self {
        let Some(form) = extra.get(ANTHROPIC_FORM_KEY).and_then(Value::as_object) else {
            return Self::default();
        };
        let flag = |key: &str| form.get(key).and_then(Value::as_bool) == Some(true);
        Self {
            content_string: flag("contentString"),
            is_error_omitted: flag("isErrorOmitted"),
        }
    }

    /// Records the form in `extra`; nothing for the default form, so results that need no
    /// record carry none.
    pub fn record(self, extra: &mut Extra) {
        if self == Self::default() {
            return;
        }
        let mut form = Map::new();
        if self.content_string {
            form.insert("contentString".to_owned(), Value::Bool(true));
        }
        if self.is_error_omitted {
            form.insert("isErrorOmitted".to_owned(), Value::Bool(true));
        }
        extra.insert(ANTHROPIC_FORM_KEY.to_owned(), Value::Object(form));
    }
}

#[cfg(test)]
#[path = "tool_result_form_tests.rs"]
mod tests;
