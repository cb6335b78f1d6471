//! Content a client sent that `rampart serve` cannot forward upstream, made visible instead of
//! dropped silently: each kind is counted in `GET /metrics`
//! (`rampart_serve_content_not_forwarded_total{kind=...}`) and logged at warn level once per
//! conversation, so an operator learns the model never saw it (issue 25: Claude Code's
//! `role: "system"` messages when the upstream is not Anthropic's wire, Codex's `namespace` and
//! `web_search` tools).

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;

/// How many (conversation, kind) pairs are remembered as already warned about; past that the
/// memory starts over, so a long-running server stays bounded (a conversation may then be
/// warned about once more).
const WARNED_CAPACITY: usize = 10_000;

/// One kind of content that is not forwarded upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NotForwarded {
    /// A message the conversation model has no place for, kept whole (an opaque message:
    /// Anthropic `role: "system"` inside `messages`, e.g. Claude Code's agent-type list), that
    /// the upstream's wire has no form for: counted by the provider that left it out.
    SystemMessage,
    /// An Anthropic server tool (`web_search`, `code_execution`, ...) or a tool without
    /// `input_schema`.
    ServerTool,
    /// A tool that is not a function tool (Responses `namespace`, `web_search`, `custom`, or a
    /// chat-completions tool without a function), for an upstream that is not Responses.
    NonFunctionTool,
    /// A Responses input item Rampart does not model (`reasoning`, a built-in or custom tool
    /// call or its output): kept in the session, but an upstream of another wire has no form
    /// for it.
    ResponsesItem,
    /// A chat client's message carrying fields pi's messages have no place for (a user's
    /// `name`, an assistant's `refusal`, a vendor's own field): kept in the session and written
    /// back for a chat-completions upstream, but an Anthropic or Responses upstream's messages
    /// have no place for them. Counted per message, per request.
    ChatMessageField,
}

impl NotForwarded {
    /// The `kind` label in `/metrics` and in the warning.
    pub fn label(self) -> &'static str {
        match self {
            Self::SystemMessage => "system_message",
            Self::ServerTool => "server_tool",
            Self::NonFunctionTool => "non_function_tool",
            Self::ResponsesItem => "responses_item",
            Self::ChatMessageField => "chat_message_field",
        }
    }
}

/// The counts and the once-per-conversation memory of one server.
#[derive(Debug, Default)]
pub struct NotForwardedLog {
    counts: Mutex<BTreeMap<NotForwarded, u64>>,
    warned: Mutex<HashSet<(String, NotForwarded)>>,
}

impl NotForwardedLog {
    /// Counts `items` of a request in `conversation` and returns the kinds to warn about now:
    /// those not yet warned about for this conversation.
    pub fn record(&self, conversation: &str, items: &[NotForwarded]) -> Vec<(NotForwarded, u64)> {
        let mut per_kind: BTreeMap<NotForwarded, u64> = BTreeMap::new();
        for item in items {
            *per_kind.entry(*item).or_default() += 1;
        }
        {
            let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
            for (kind, n) in &per_kind {
                *counts.entry(*kind).or_default() += n;
            }
        }
        let mut warned = self.warned.lock().unwrap_or_else(|p| p.into_inner());
        per_kind
            .into_iter()
            .filter(|(kind, _)| {
                if warned.len() >= WARNED_CAPACITY {
                    warned.clear();
                }
                warned.insert((conversation.to_owned(), *kind))
            })
            .collect()
    }

    /// The Prometheus text of the counter.
    pub fn render(&self) -> String {
        let name = "rampart_serve_content_not_forwarded_total";
        let mut out = format!(
            "# HELP {name} Messages and tools a client sent that were not forwarded upstream, by kind.\n\
             # TYPE {name} counter\n"
        );
        for (kind, n) in self.counts.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            out.push_str(&format!("{name}{{kind=\"{}\"}} {n}\n", kind.label()));
        }
        out.push_str(&render_fields(
            &crate::providers::client_fields::not_forwarded_counts(),
        ));
        out
    }
}

/// The Prometheus text of the client fields not forwarded, by field (a known field's name, else
/// `other`: the labels stay bounded whatever clients send) and by client and upstream wire.
pub fn render_fields(counts: &crate::providers::client_fields::NotForwardedCounts) -> String {
    let name = "rampart_serve_fields_not_forwarded_total";
    let mut out = format!(
        "# HELP {name} Client request fields with no form in the upstream's wire, not forwarded, by field.\n\
         # TYPE {name} counter\n"
    );
    for ((from, to, field), n) in counts {
        out.push_str(&format!(
            "{name}{{field=\"{field}\",client_wire=\"{}\",upstream_wire=\"{}\"}} {n}\n",
            from.label(),
            to.label()
        ));
    }
    out
}

#[cfg(test)]
#[path = "not_forwarded_tests.rs"]
mod tests;
