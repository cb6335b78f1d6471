//! `GET /ui/conversations/<session>/compactions/<n>`: what one compaction did, read from the
//! conversation itself.
//!
//! The compaction event names the `compaction` entry the host appended
//! ([`rampart_context::events::CompactionEnd::entry_id`]); the entry holds the summary and the
//! first entry kept verbatim, and the branch above it holds what the summary replaced. So the
//! page shows the session's own record, from whichever store serves it, and the event never
//! carries the conversation's text. Messages that were in the context before the compaction
//! and are not after it are listed with their role and a short preview; a summary the
//! compaction replaced (an earlier compaction's) is said to be replaced. Everything taken from
//! the conversation is escaped: a summary or a message is a client's text.

use std::fmt::Write as _;

use rampart_context::compaction::transcript::message_text;
use rampart_message::{AgentMessage, Content, ContentBlock};
use rampart_sessions::{EntryBody, SessionTree};

use crate::html::{escape, path_segment, preview};
use crate::replay::table::thousands;

/// Removed messages listed on the page (a compaction of a long history lists its newest).
pub const MAX_LISTED: usize = 200;

/// Characters of each removed message's preview.
pub const PREVIEW_CHARS: usize = 160;

/// One message a compaction removed from the context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemovedMessage {
    /// Its entry in the session.
    pub entry_id: String,
    /// Its role (`user`, `assistant`, `toolResult (read)`, `custom`, ...).
    pub role: String,
    /// Its text on one line, cut at [`PREVIEW_CHARS`].
    pub preview: String,
}

/// What one compaction entry says and replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionRecord {
    /// The summary it wrote.
    pub summary: String,
    /// The first entry kept verbatim after the summary.
    pub first_kept_entry_id: String,
    /// The context's tokens before, as the entry records them.
    pub tokens_before: u64,
    /// The messages it removed, oldest first (the newest [`MAX_LISTED`]).
    pub removed: Vec<RemovedMessage>,
    /// How many it removed in all.
    pub removed_total: usize,
    /// Whether it also replaced an earlier compaction's summary.
    pub replaced_summary: bool,
    /// Whether the first kept entry is on the compaction's branch (when not, the session was
    /// edited by hand and everything above the compaction is counted as removed).
    pub kept_found: bool,
}

/// Why a compaction could not be read from its session.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// The session holds no entry with that id.
    #[error("the session holds no entry `{0}`; it may have been rewritten since")]
    NoEntry(String),
    /// The entry is not a compaction.
    #[error("entry `{0}` of the session is not a compaction")]
    NotACompaction(String),
}

impl CompactionRecord {
    /// The compaction `entry_id` of `tree`, with what it removed from its branch.
    pub fn from_tree(tree: &SessionTree, entry_id: &str) -> Result<Self, RecordError> {
        let index = tree
            .index_of(entry_id)
            .ok_or_else(|| RecordError::NoEntry(entry_id.to_string()))?;
        let entries = tree.entries();
        let EntryBody::Compaction(compaction) = &entries[index].body else {
            return Err(RecordError::NotACompaction(entry_id.to_string()));
        };
        let path = tree.path_to(index);
        let above = &path[..path.len().saturating_sub(1)];
        // The context before it: from the previous compaction's first kept entry (or the
        // root) to the compaction.
        let previous = above
            .iter()
            .rposition(|&i| matches!(entries[i].body, EntryBody::Compaction(_)));
        let start = match previous {
            Some(p) => {
                let EntryBody::Compaction(prev) = &entries[above[p]].body else {
                    unreachable!("rposition found a compaction")
                };
                above[..p]
                    .iter()
                    .position(|&i| entries[i].id == prev.first_kept_entry_id)
                    .unwrap_or(p + 1)
            }
            None => 0,
        };
        let kept = above[start..]
            .iter()
            .position(|&i| entries[i].id == compaction.first_kept_entry_id)
            .map(|k| start + k);
        let gone = &above[start..kept.unwrap_or(above.len())];
        let removed: Vec<RemovedMessage> = gone
            .iter()
            .filter_map(|&i| removed_message(&entries[i].id, &entries[i].body))
            .collect();
        let removed_total = removed.len();
        let removed = removed
            .into_iter()
            .skip(removed_total.saturating_sub(MAX_LISTED))
            .collect();
        Ok(Self {
            summary: compaction.summary.clone(),
            first_kept_entry_id: compaction.first_kept_entry_id.clone(),
            tokens_before: compaction.tokens_before,
            removed,
            removed_total,
            replaced_summary: previous.is_some(),
            kept_found: kept.is_some(),
        })
    }
}

/// The entry as a removed message, when it is one the model saw.
fn removed_message(id: &str, body: &EntryBody) -> Option<RemovedMessage> {
    let (role, text) = match body {
        EntryBody::Message(m) => {
            let message: &AgentMessage = &m.message;
            let role = match message {
                AgentMessage::ToolResult(r) => format!("toolResult ({})", r.tool_name),
                other => other.role().to_string(),
            };
            let mut text = message_text(message);
            if let AgentMessage::Assistant(a) = message {
                let calls: Vec<&str> = a
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::ToolCall(c) => Some(c.name.as_str()),
                        _ => None,
                    })
                    .collect();
                if !calls.is_empty() {
                    if !text.is_empty() {
                        text.push(' ');
                    }
                    text.push_str(&format!("[tool calls: {}]", calls.join(", ")));
                }
            }
            (role, text)
        }
        EntryBody::CustomMessage(c) => (
            format!("custom ({})", c.custom_type),
            content_text(&c.content),
        ),
        EntryBody::BranchSummary(b) => ("branchSummary".to_string(), b.summary.clone()),
        _ => return None,
    };
    Some(RemovedMessage {
        entry_id: id.to_string(),
        role,
        preview: preview(&text, PREVIEW_CHARS),
    })
}

fn content_text(content: &Content) -> String {
    match content {
        Content::Text(t) => t.clone(),
        Content::Blocks(blocks) => blocks
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join(" "),
    }
}

/// What the page says about the compaction besides its record: the live page's figures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionFacts {
    /// The session id.
    pub session_id: String,
    /// Its number in the conversation's list (1-based).
    pub number: usize,
    /// What set it off.
    pub reason: String,
    /// The call it happened before (1-based).
    pub before_call: u64,
    /// Prompt tokens before, as the engine measured them.
    pub tokens_before: Option<u64>,
    /// And after.
    pub tokens_after: Option<u64>,
}

/// The page: the facts, then the record (or why it could not be read).
pub fn render(facts: &CompactionFacts, record: Result<&CompactionRecord, &str>) -> String {
    let id = escape(&facts.session_id);
    let mut html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>Compaction {n} of {id}</title>\n<style>{CSS}</style>\n</head>\n<body>\n\
         <p><a href=\"../../../../ui#s-{anchor}\">&larr; back to the live page</a></p>\n\
         <h1>Compaction {n} of <code>{id}</code></h1>\n",
        n = facts.number,
        anchor = escape(&path_segment(&facts.session_id)),
    );
    let opt = |t: Option<u64>| t.map_or("-".to_string(), thousands);
    let _ = writeln!(
        html,
        "<table class=\"facts\"><tr><th>reason</th><td>{}</td></tr>\
         <tr><th>before call</th><td class=\"n\">{}</td></tr>\
         <tr><th>tokens before</th><td class=\"n\" id=\"tokens-before\">{}</td></tr>\
         <tr><th>tokens after</th><td class=\"n\" id=\"tokens-after\">{}</td></tr></table>",
        escape(&facts.reason),
        facts.before_call,
        opt(facts.tokens_before),
        opt(facts.tokens_after),
    );
    match record {
        Err(why) => {
            let _ = writeln!(
                html,
                "<p class=\"err\">The compaction's record could not be read from the \
                 conversation: {}</p>",
                escape(why)
            );
        }
        Ok(r) => {
            let _ = writeln!(
                html,
                "<h2>Summary it wrote ({} characters)</h2>\n<pre id=\"summary\">{}</pre>",
                thousands(r.summary.chars().count() as u64),
                escape(&r.summary)
            );
            let _ = writeln!(
                html,
                "<h2>What it removed</h2>\n<p id=\"removed\">{} message(s) removed from the \
                 context{}; kept from entry <code>{}</code> on{}.</p>",
                thousands(r.removed_total as u64),
                if r.replaced_summary {
                    ", and the earlier compaction's summary replaced"
                } else {
                    ""
                },
                escape(&r.first_kept_entry_id),
                if r.kept_found {
                    ""
                } else {
                    " (not on this branch: everything above the compaction is counted)"
                },
            );
            if r.removed.len() < r.removed_total {
                let _ = writeln!(
                    html,
                    "<p>The newest {} are listed.</p>",
                    thousands(r.removed.len() as u64)
                );
            }
            if !r.removed.is_empty() {
                html.push_str(
                    "<table class=\"removed\"><tr><th>entry</th><th>role</th>\
                     <th>preview</th></tr>\n",
                );
                for m in &r.removed {
                    let _ = writeln!(
                        html,
                        "<tr><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
                        escape(&m.entry_id),
                        escape(&m.role),
                        escape(&m.preview)
                    );
                }
                html.push_str("</table>\n");
            }
        }
    }
    html.push_str("</body>\n</html>\n");
    html
}

const CSS: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}\
h1{font-size:20px}h2{font-size:16px;margin-top:20px}\
table{border-collapse:collapse;margin:12px 0}td,th{padding:3px 10px;border-bottom:1px solid #ddd;\
text-align:left;vertical-align:top}td.n{text-align:right;font-variant-numeric:tabular-nums}\
pre{white-space:pre-wrap;background:#fafafa;border:1px solid #ddd;padding:8px}.err{color:#b00}";

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "compaction_page_tests.rs"]
mod tests;
