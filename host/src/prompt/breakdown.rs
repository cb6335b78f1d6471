//! What is in the window: a request's tokens, part by part, for `rampart context show`.
//!
//! # The accounting
//!
//! The total is the request's count as the run loop makes it and the precheck decides on
//! ([`crate::run::request_tokens`]: the system prompt as the wire carries it, every message,
//! the tool schemas), with the counter of the model (`tokenizer`; exact BPE for the models
//! that have one). The parts are counted with the same counter:
//!
//! - each part of the system prompt, when the prompt is Rampart's own (its breakdown), else
//!   the system prompt as one part;
//! - the tool schemas;
//! - each message once, into the compaction summary, the history by role (user, assistant,
//!   tool results, other messages), or retrieved memory (results of `memory_search` and
//!   `memory_get`).
//!
//! Messages are counted one by one in the total too, so their parts add up exactly. Text is
//! not: a tokenizer may merge characters across the seam of two parts, and the cache marker
//! (which reaches no model) leaves a newline behind. The difference between the total and the
//! sum of the parts is therefore a part of its own, **framing**, so that the parts add up to
//! the total by construction. A system prompt's part is counted as what it adds to the text
//! before it, so the seams are charged once, to the part that completes them, and framing is
//! what the wire adds around the parts (the newline the marker leaves): a few tokens, never
//! negative.
//!
//! The largest tool results are listed beside the parts, not among them: they are already in
//! "tool results" or "retrieved memory".

use rampart_context::tokens::TokenCounter;
use rampart_message::AgentMessage;
use rampart_prompt::{BuiltPrompt, PartKind};
use serde::Serialize;

use crate::run::Preview;

/// How many of the largest tool results are listed.
pub const LARGEST_TOOL_RESULTS: usize = 5;

/// The tools whose results are memory retrieved for the model.
pub const MEMORY_TOOLS: [&str; 2] = ["memory_search", "memory_get"];

/// Which kind of part a row is, in the order the request lays them out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Group {
    /// A part of the system prompt.
    System,
    /// The tool schemas.
    Tools,
    /// The compaction summary (and a branch summary).
    Summary,
    /// The conversation, by role.
    History,
    /// Tool results of the memory tools.
    Memory,
    /// What the parts do not account for (see the module docs).
    Framing,
}

impl Group {
    /// The group's name, as the JSON writes it.
    pub fn name(self) -> &'static str {
        match self {
            Self::System => "system",
            Self::Tools => "tools",
            Self::Summary => "summary",
            Self::History => "history",
            Self::Memory => "memory",
            Self::Framing => "framing",
        }
    }
}

/// One part of the request.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    /// Its kind.
    pub group: Group,
    /// What it is: `section:tooling`, `file:AGENTS.md`, `tool schemas`, `user`, …
    pub label: String,
    /// Its tokens (framing may be negative).
    pub tokens: i64,
    /// Its share of the window, in percent.
    pub window_percent: f64,
    /// Its share of the prompt budget, in percent.
    pub budget_percent: f64,
}

/// One tool result among the largest.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultView {
    /// The tool.
    pub tool: String,
    /// The call it answers.
    pub tool_call_id: String,
    /// Its tokens.
    pub tokens: u64,
    /// Its share of the window, in percent.
    pub window_percent: f64,
    /// Its share of the prompt budget, in percent.
    pub budget_percent: f64,
}

/// A request's tokens by part (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Breakdown {
    /// The model, `provider/model`.
    pub model: String,
    /// How the request is counted (`o200k_base`, `estimate`, …).
    pub tokenizer: String,
    /// Whether that is a real BPE count.
    pub exact: bool,
    /// The model's window.
    pub window: u64,
    /// The prompt budget the precheck holds the request to: the window less the reserve, over
    /// the precheck's safety factor (in the units of `request_tokens`).
    pub budget: u64,
    /// The reserve the precheck keeps free.
    pub reserve: u64,
    /// What the precheck would decide for this request (`fits`, `compact_only`, …).
    pub route: String,
    /// The request's tokens: the sum of `parts`.
    pub request_tokens: u64,
    /// The parts, in the order the request lays them out; they add up to `request_tokens`.
    pub parts: Vec<Part>,
    /// The largest tool results, largest first (already counted in `parts`).
    pub largest_tool_results: Vec<ToolResultView>,
}

impl Breakdown {
    /// The sum of the parts (equal to `request_tokens`).
    pub fn parts_total(&self) -> i64 {
        self.parts.iter().map(|p| p.tokens).sum()
    }
}

/// The breakdown of `preview`'s request. `built` is Rampart's prompt with the engine's
/// addition in place; when its text is the request's system prompt its parts are listed,
/// else the system prompt is one part.
pub fn breakdown(preview: &Preview, built: Option<&BuiltPrompt>) -> Breakdown {
    let counter = TokenCounter::new(preview.count_mode);
    let request = &preview.request;
    let percent = |tokens: i64, of: u64| -> f64 {
        if of == 0 {
            return 0.0;
        }
        (tokens as f64 * 10_000.0 / of as f64).round() / 100.0
    };
    let mut counted: Vec<(Group, String, i64)> = Vec::new();

    match (&request.system, built) {
        (Some(system), Some(built)) if built.text == *system => {
            // Each part is what it adds to the text before it (the count of the prompt up to
            // its end, less the count up to its start), so a tokenizer merging characters
            // across a seam charges the part that completes the merge instead of counting
            // the seam twice: the parts then add up to the prompt's own count and framing is
            // only what the wire adds (the newline the marker leaves), never negative.
            let mut so_far = String::with_capacity(built.text.len());
            let mut before = 0i64;
            for (kind, text) in built.iter_parts() {
                // The marker reaches no model; what it leaves behind is framing.
                if *kind == PartKind::CacheBoundary {
                    continue;
                }
                so_far.push_str(text);
                let upto = counter.count_text(&so_far) as i64;
                counted.push((Group::System, kind.label(), upto - before));
                before = upto;
            }
        }
        (Some(system), _) => {
            let text = crate::providers::text::wire_system(system).text();
            counted.push((
                Group::System,
                "system prompt".to_string(),
                counter.count_text(&text) as i64,
            ));
        }
        (None, _) => {}
    }
    counted.push((
        Group::Tools,
        "tool schemas".to_string(),
        preview.tool_tokens as i64,
    ));

    let mut summary = 0u64;
    let mut branch_summary = 0u64;
    let (mut user, mut assistant, mut tool_results, mut other, mut memory) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut results: Vec<(usize, &rampart_message::ToolResultMessage, u64)> = Vec::new();
    for (i, message) in request.messages.iter().enumerate() {
        let tokens = counter.count_shared(message);
        match &**message {
            AgentMessage::CompactionSummary(_) => summary += tokens,
            AgentMessage::BranchSummary(_) => branch_summary += tokens,
            AgentMessage::User(_) => user += tokens,
            AgentMessage::Assistant(_) => assistant += tokens,
            AgentMessage::ToolResult(result) => {
                if is_memory_tool(&result.tool_name) {
                    memory += tokens;
                } else {
                    tool_results += tokens;
                }
                results.push((i, result, tokens));
            }
            _ => other += tokens,
        }
    }
    counted.push((
        Group::Summary,
        "compaction summary".to_string(),
        summary as i64,
    ));
    if branch_summary > 0 {
        counted.push((
            Group::Summary,
            "branch summary".to_string(),
            branch_summary as i64,
        ));
    }
    counted.push((Group::History, "user".to_string(), user as i64));
    counted.push((Group::History, "assistant".to_string(), assistant as i64));
    counted.push((
        Group::History,
        "tool results".to_string(),
        tool_results as i64,
    ));
    if other > 0 {
        counted.push((
            Group::History,
            "other messages (shell runs, custom)".to_string(),
            other as i64,
        ));
    }
    counted.push((Group::Memory, "retrieved memory".to_string(), memory as i64));

    let total = preview.tokens;
    let sum: i64 = counted.iter().map(|(_, _, t)| t).sum();
    counted.push((Group::Framing, "framing".to_string(), total as i64 - sum));

    let parts = counted
        .into_iter()
        .map(|(group, label, tokens)| Part {
            group,
            label,
            tokens,
            window_percent: percent(tokens, preview.window),
            budget_percent: percent(tokens, preview.budget),
        })
        .collect();

    // Largest first; of equal ones, the earlier.
    results.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
    let largest_tool_results = results
        .into_iter()
        .take(LARGEST_TOOL_RESULTS)
        .map(|(_, result, tokens)| ToolResultView {
            tool: result.tool_name.clone(),
            tool_call_id: result.tool_call_id.clone(),
            tokens,
            window_percent: percent(tokens as i64, preview.window),
            budget_percent: percent(tokens as i64, preview.budget),
        })
        .collect();

    Breakdown {
        model: preview.model.to_string(),
        tokenizer: preview.count_mode.name().to_string(),
        exact: counter.is_exact(),
        window: preview.window,
        budget: preview.budget,
        reserve: preview.reserve,
        route: preview.route.clone(),
        request_tokens: total,
        parts,
        largest_tool_results,
    }
}

/// Whether `tool` is one of [`MEMORY_TOOLS`] (compared without regard to ASCII case, as the
/// prompt finds tools).
pub fn is_memory_tool(tool: &str) -> bool {
    MEMORY_TOOLS
        .iter()
        .any(|m| m.eq_ignore_ascii_case(tool.trim()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "breakdown_tests.rs"]
mod tests;
