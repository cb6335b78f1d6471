//! The Memory Recall section: guidance on using the memory tools, not memory itself.
//!
//! Memories reach the model as the results of `memory_search` and `memory_get` (and MEMORY.md
//! as a bootstrap file); nothing is retrieved into the system prompt, which keeps it the same
//! from turn to turn.

use crate::tools::{ToolInfo, find_tool};

/// Whether replies cite where a memory came from (`memory.citations`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CitationsMode {
    /// Always cite.
    On,
    /// Never mention memory paths or lines unless asked.
    Off,
    /// The memory tools decide per chat (direct chats only); the prompt asks for citations.
    #[default]
    Auto,
}

/// The host's settings for the Memory Recall section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MemorySection {
    /// Whether the section may appear: the memory slot is on and the context engine has not
    /// taken over recall (OpenClaw leaves it out under a non-legacy engine). The section also
    /// needs `memory_search` or `memory_get` among the tools, and full mode.
    pub include: bool,
    /// The citations setting.
    pub citations: CitationsMode,
}

impl Default for MemorySection {
    /// Included (it still needs the tools), citations on auto: OpenClaw's defaults.
    fn default() -> Self {
        Self {
            include: true,
            citations: CitationsMode::Auto,
        }
    }
}

/// The lines of the Memory Recall section for these tools, or none when neither memory tool
/// is present. The tool names are written in the caller's spelling.
pub fn memory_recall_lines(tools: &[ToolInfo], citations: CitationsMode) -> Vec<String> {
    let search = find_tool(tools, "memory_search");
    let get = find_tool(tools, "memory_get");
    let guidance = match (search, get) {
        (Some(search), Some(get)) => format!(
            "Before answering anything about earlier work, decisions, dates, people, \
             preferences or open tasks, run {search} over MEMORY.md, memory/*.md and past \
             sessions, then use {get} to read only the lines you need. If you are still unsure \
             after searching, say that you checked."
        ),
        (Some(search), None) => format!(
            "Before answering anything about earlier work, decisions, dates, people, \
             preferences or open tasks, run {search} over MEMORY.md, memory/*.md and past \
             sessions and answer from the snippets it returns. If you are still unsure after \
             searching, say that you checked."
        ),
        (None, Some(get)) => format!(
            "Before answering anything about earlier work, decisions, dates, people, \
             preferences or open tasks, read the relevant lines of MEMORY.md or memory/*.md \
             with {get}. If they do not settle it, say that you checked."
        ),
        (None, None) => return Vec::new(),
    };
    let citations = match citations {
        CitationsMode::Off => {
            "Citations are disabled: do not mention file paths or line numbers in replies \
             unless the user explicitly asks."
        }
        CitationsMode::On | CitationsMode::Auto => {
            "Citations: include Source: <path#line> when it helps the user verify memory \
             snippets."
        }
    };
    vec![
        "## Memory Recall".to_string(),
        guidance,
        citations.to_string(),
    ]
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "memory_tests.rs"]
mod tests;
