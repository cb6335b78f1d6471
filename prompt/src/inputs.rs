//! Everything the builder needs, typed. Nothing here parses configuration: the host reads
//! `plugins.toml` once and hands the values in.

use std::path::PathBuf;
use std::sync::Arc;

use crate::bootstrap::BootstrapSet;
use crate::memory::MemorySection;
use crate::mode::PromptMode;
use crate::runtime::{ReasoningLevel, RuntimeInfo};
use crate::skills::SkillCatalog;
use crate::tools::ToolInfo;

/// The inputs of [`crate::build_system_prompt`] for one turn.
#[derive(Debug, Clone, Default)]
pub struct PromptInputs {
    /// Which sections to write: from [`crate::mode_for_session`] for the session's key, so a
    /// subagent does not pay for the main agent's conversational guidance.
    pub mode: PromptMode,
    /// The tools the model may call this turn (after policy), so the Tooling section lists
    /// exactly what the API request offers; the skills and memory guidance name them in the
    /// caller's spelling.
    pub tools: Vec<ToolInfo>,
    /// The skills catalog (a per-session snapshot, shared), or `None` for a run that gets no
    /// skills (an explicit tool allow-list). Only skills the model may choose are listed.
    pub skills: Option<Arc<SkillCatalog>>,
    /// Whether the Memory Recall section may appear and how it asks for citations: the
    /// memory slot is the host's to know.
    pub memory: MemorySection,
    /// The agent workspace, named in the Workspace section so relative paths resolve where
    /// the files are (the container's path when the tools run sandboxed).
    pub workspace_dir: PathBuf,
    /// The session's bootstrap files (from [`crate::BootstrapCache`]), injected as Project
    /// Context; shared, since the set is a snapshot per session.
    pub bootstrap: Arc<BootstrapSet>,
    /// The user's time zone (IANA name), resolved by the host (configured, else the host's,
    /// else "UTC"). Only the zone is written, never the date or time: a clock in the prompt
    /// would change it every turn and defeat the prompt cache.
    pub time_zone: Option<String>,
    /// Where the agent runs, for the Runtime line.
    pub runtime: RuntimeInfo,
    /// Whether reasoning is shown to the user, stated in the Runtime section.
    pub reasoning: ReasoningLevel,
    /// `extraSystemPrompt`: a subagent's task brief, or a group chat's context, written under
    /// "## Subagent Context" (minimal mode) or "## Group Chat Context" (full mode), below the
    /// marker since it can change per turn.
    pub extra_system_prompt: Option<String>,
    /// The heartbeat prompt when heartbeat guidance applies to this agent (the host checks
    /// it is the default agent, heartbeats are enabled with an interval, and the run is not
    /// a cron run); `None` leaves the Heartbeats section out.
    pub heartbeat_prompt: Option<String>,
    /// `systemPromptOverride`: when set (trimmed, non-empty) it **is** the prompt, with no
    /// sections and no files; the engine's addition still applies.
    pub system_prompt_override: Option<String>,
    /// The context engine's `systemPromptAddition` for this turn, placed right after the
    /// cache marker so the cached prefix does not change with it.
    pub engine_addition: Option<String>,
}
