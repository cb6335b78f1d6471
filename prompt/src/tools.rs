//! The tool list of the Tooling section: names and one-line summaries, never schemas (those
//! travel in the API request, and printing them twice would cost window for nothing).

use crate::text::sanitize_for_prompt;

/// A tool the model may call in this run, as the Tooling section shows it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolInfo {
    /// The name the model must call it by, in the caller's spelling (shown as given).
    pub name: String,
    /// A one-line summary. `None` uses the built-in summary of a core tool, or shows the bare
    /// name for any other tool.
    pub summary: Option<String>,
}

impl ToolInfo {
    /// A tool with no summary of its own.
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            summary: None,
        }
    }

    /// A tool with its own summary.
    pub fn with_summary(name: impl Into<String>, summary: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            summary: Some(summary.into()),
        }
    }
}

/// The core tools, in the order the Tooling section lists them (OpenClaw's order), with
/// built-in summaries used when the caller gives none.
pub const CORE_TOOLS: &[(&str, &str)] = &[
    ("read", "Read file contents"),
    ("write", "Create a file or replace its contents"),
    ("edit", "Change part of a file by exact replacement"),
    ("apply_patch", "Apply a patch that may touch several files"),
    ("grep", "Search file contents for a pattern"),
    ("find", "Find files by glob pattern"),
    ("ls", "List a directory"),
    (
        "exec",
        "Run a shell command (long ones can run in the background)",
    ),
    (
        "process",
        "Check on, feed or stop background commands started by exec",
    ),
    ("web_search", "Search the web"),
    ("web_fetch", "Fetch a URL and read it as text"),
    ("browser", "Drive a web browser"),
    ("canvas", "Show or update a canvas for the user"),
    (
        "nodes",
        "Use paired devices (camera, screen, location, commands)",
    ),
    ("cron", "Schedule reminders and recurring jobs"),
    ("message", "Send messages and channel actions"),
    (
        "gateway",
        "Inspect, reconfigure or restart the running host",
    ),
    ("agents_list", "List the agents you may hand work to"),
    ("sessions_list", "List sessions"),
    ("sessions_history", "Read another session's messages"),
    ("sessions_send", "Send a message into another session"),
    ("subagents", "List, steer or stop the subagents you spawned"),
    (
        "session_status",
        "Show this session's status, including the current date and time",
    ),
    ("image", "Look at an image"),
    ("image_generate", "Generate an image"),
];

/// What the Tooling section says when the request offers no tools at all. OpenClaw prints a
/// fixed list of file and shell tools there, because its runs always have them; a Rampart run
/// (`rampart run` with memory off) may have none, and a model told of tools it cannot call
/// calls them anyway.
pub const NO_TOOLS_LINE: &str = "- (none: this run offers no tools; answer from the conversation)";

/// The built-in summary of core tool `name` (compared case-insensitively).
pub fn core_summary(name: &str) -> Option<&'static str> {
    CORE_TOOLS
        .iter()
        .find(|(core, _)| core.eq_ignore_ascii_case(name))
        .map(|(_, summary)| *summary)
}

/// The tools de-duplicated without regard to case (the first spelling wins, with the first
/// summary given for any spelling), core tools first in [`CORE_TOOLS`] order, then the rest
/// sorted by name.
pub fn ordered_tools(tools: &[ToolInfo]) -> Vec<ToolInfo> {
    let mut unique: Vec<ToolInfo> = Vec::with_capacity(tools.len());
    for tool in tools {
        // A name or summary is one line: a newline in it could start a heading of its own.
        let name = sanitize_for_prompt(&tool.name);
        let name = name.trim();
        if name.is_empty() {
            continue;
        }
        let summary = tool.summary.as_deref().map(sanitize_for_prompt);
        let summary = summary.as_deref().map(str::trim).filter(|s| !s.is_empty());
        match unique
            .iter_mut()
            .find(|t| t.name.eq_ignore_ascii_case(name))
        {
            Some(seen) => {
                if seen.summary.is_none() {
                    seen.summary = summary.map(str::to_string);
                }
            }
            None => unique.push(ToolInfo {
                name: name.to_string(),
                summary: summary.map(str::to_string),
            }),
        }
    }
    let rank = |t: &ToolInfo| {
        CORE_TOOLS
            .iter()
            .position(|(core, _)| core.eq_ignore_ascii_case(&t.name))
    };
    unique.sort_by(|a, b| match (rank(a), rank(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a
            .name
            .to_ascii_lowercase()
            .cmp(&b.name.to_ascii_lowercase())
            .then_with(|| a.name.cmp(&b.name)),
    });
    unique
}

/// The tool lines of the Tooling section: `- <Name>: <summary>`, or `- <Name>` for a tool with
/// no summary; for no tools, [`NO_TOOLS_LINE`].
pub fn tool_lines(tools: &[ToolInfo]) -> Vec<String> {
    let ordered = ordered_tools(tools);
    if ordered.is_empty() {
        return vec![NO_TOOLS_LINE.to_owned()];
    }
    ordered
        .iter()
        .map(|t| line(&t.name, t.summary.as_deref().or(core_summary(&t.name))))
        .collect()
}

fn line(name: &str, summary: Option<&str>) -> String {
    match summary {
        Some(summary) => format!("- {name}: {summary}"),
        None => format!("- {name}"),
    }
}

/// The caller's spelling of tool `name` if the run has it (compared case-insensitively).
pub fn find_tool<'a>(tools: &'a [ToolInfo], name: &str) -> Option<&'a str> {
    tools
        .iter()
        .map(|t| t.name.trim())
        .find(|t| t.eq_ignore_ascii_case(name))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "tools_tests.rs"]
mod tests;
