//! The Runtime section: where the agent runs and on what, on one line, last in the prompt.
//!
//! It is last because it is the part most likely to change (another model, another channel),
//! and only what follows a change misses the provider's prompt cache. It never carries the
//! date or the time, which would change every turn.

use std::path::{Path, PathBuf};

use crate::text::sanitize_for_prompt;

/// What the host knows about the run, each part optional.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuntimeInfo {
    /// The agent's id (`agent=`).
    pub agent_id: Option<String>,
    /// The machine's host name (`host=`).
    pub host: Option<String>,
    /// The repository the agent works in (`repo=`): `agents.defaults.repoRoot`, else the git
    /// root of the workspace ([`find_git_root`]).
    pub repo_root: Option<PathBuf>,
    /// The operating system, "type release" (`os=`).
    pub os: Option<String>,
    /// The CPU architecture (shown with `os`, or alone as `arch=`).
    pub arch: Option<String>,
    /// The Node.js version (`node=`), kept for OpenClaw's tool runtimes; Rampart itself leaves
    /// it unset.
    pub node: Option<String>,
    /// The model of this run, "provider/id" (`model=`).
    pub model: Option<String>,
    /// The configured default model (`default_model=`), so the model can tell the user when
    /// a fallback is answering.
    pub default_model: Option<String>,
    /// The user's shell (`shell=`).
    pub shell: Option<String>,
    /// The channel the conversation arrives on (`channel=`).
    pub channel: Option<String>,
    /// What the channel can do (`capabilities=`, shown only with a channel).
    pub capabilities: Vec<String>,
    /// The thinking level (`thinking=`, "off" when unset).
    pub thinking: Option<String>,
}

/// Whether the model's reasoning is shown to the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ReasoningLevel {
    /// Hidden.
    #[default]
    Off,
    /// Shown with the answer.
    On,
    /// Streamed as it is produced.
    Stream,
}

impl ReasoningLevel {
    /// The level's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::On => "on",
            Self::Stream => "stream",
        }
    }
}

fn present(value: &Option<String>) -> Option<String> {
    value
        .as_deref()
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
}

/// The Runtime line: "Runtime: " and the parts that are set, joined with " | ", in the order
/// agent, host, repo, os (with the arch in parentheses, or arch alone), node, model,
/// default_model, shell, channel, capabilities (only with a channel: lower-cased,
/// de-duplicated, sorted, or "none"), thinking (always; "off" when unset). Paths lose their
/// control and format characters.
pub fn runtime_line(info: &RuntimeInfo) -> String {
    let mut parts = Vec::new();
    if let Some(agent) = present(&info.agent_id) {
        parts.push(format!("agent={agent}"));
    }
    if let Some(host) = present(&info.host) {
        parts.push(format!("host={host}"));
    }
    if let Some(repo) = &info.repo_root {
        let repo = sanitize_for_prompt(&repo.display().to_string());
        if !repo.trim().is_empty() {
            parts.push(format!("repo={repo}"));
        }
    }
    match (present(&info.os), present(&info.arch)) {
        (Some(os), Some(arch)) => parts.push(format!("os={os} ({arch})")),
        (Some(os), None) => parts.push(format!("os={os}")),
        (None, Some(arch)) => parts.push(format!("arch={arch}")),
        (None, None) => {}
    }
    for (key, value) in [
        ("node", &info.node),
        ("model", &info.model),
        ("default_model", &info.default_model),
        ("shell", &info.shell),
    ] {
        if let Some(value) = present(value) {
            parts.push(format!("{key}={value}"));
        }
    }
    if let Some(channel) = present(&info.channel) {
        parts.push(format!("channel={channel}"));
        let mut caps: Vec<String> = info
            .capabilities
            .iter()
            .map(|c| c.trim().to_lowercase())
            .filter(|c| !c.is_empty())
            .collect();
        caps.sort();
        caps.dedup();
        let caps = if caps.is_empty() {
            "none".to_string()
        } else {
            caps.join(",")
        };
        parts.push(format!("capabilities={caps}"));
    }
    let thinking = present(&info.thinking).unwrap_or_else(|| "off".to_string());
    parts.push(format!("thinking={thinking}"));
    format!("Runtime: {}", parts.join(" | "))
}

/// The nearest directory at or above `start` that holds a `.git` entry (a directory, or the
/// file a worktree or submodule has).
pub fn find_git_root(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .find(|dir| dir.join(".git").exists())
        .map(Path::to_path_buf)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "runtime_tests.rs"]
mod tests;
