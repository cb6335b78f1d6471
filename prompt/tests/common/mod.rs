//! The sample workspace (`tests/fixtures/workspace`) and the inputs of a typical turn in it,
//! shared by the golden test and the bench.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rampart_prompt::*;

/// The sample workspace.
pub fn workspace_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/workspace")
}

/// The tools of a main-agent turn: the core file and shell tools, memory, sessions, and one
/// plugin tool with its own summary.
pub fn tools() -> Vec<ToolInfo> {
    let mut tools: Vec<ToolInfo> = [
        "read",
        "write",
        "edit",
        "exec",
        "process",
        "web_fetch",
        "sessions_list",
        "session_status",
        "memory_search",
        "memory_get",
    ]
    .iter()
    .map(|n| ToolInfo::named(*n))
    .collect();
    tools.push(ToolInfo::with_summary(
        "ci_status",
        "Latest CI runs of a branch",
    ));
    tools
}

/// The runtime of the sample turn.
pub fn runtime() -> RuntimeInfo {
    RuntimeInfo {
        agent_id: Some("main".into()),
        host: Some("harbor-dev".into()),
        repo_root: Some("/srv/harbor".into()),
        os: Some("Linux 6.8".into()),
        arch: Some("x86_64".into()),
        model: Some("anthropic/claude-sonnet-4-5".into()),
        default_model: Some("anthropic/claude-sonnet-4-5".into()),
        shell: Some("bash".into()),
        channel: Some("telegram".into()),
        capabilities: vec!["inlineButtons".into(), "reactions".into()],
        thinking: Some("low".into()),
        ..RuntimeInfo::default()
    }
}

/// The bootstrap request of session `key` in the sample workspace.
pub fn bootstrap_request(key: &str) -> BootstrapRequest {
    BootstrapRequest::new(workspace_dir(), key)
}

/// The skills of the sample workspace.
pub fn skills() -> Arc<SkillCatalog> {
    Arc::new(discover_skills(&SkillsRequest::new(workspace_dir())))
}

/// The inputs of a turn of session `key`, with the engine's addition.
pub fn inputs(key: &str, bootstrap: Arc<BootstrapSet>, skills: Arc<SkillCatalog>) -> PromptInputs {
    let mode = mode_for_session(key, false);
    let extra = (mode == PromptMode::Minimal).then(|| {
        "You are a subagent. Task: summarise yesterday's CI failures on main.".to_string()
    });
    PromptInputs {
        mode,
        tools: tools(),
        skills: Some(skills),
        memory: MemorySection {
            include: true,
            citations: CitationsMode::Auto,
        },
        workspace_dir: workspace_dir(),
        bootstrap,
        time_zone: Some("Europe/Berlin".into()),
        runtime: runtime(),
        reasoning: ReasoningLevel::Off,
        extra_system_prompt: extra,
        heartbeat_prompt: (mode == PromptMode::Full).then(|| DEFAULT_HEARTBEAT_PROMPT.to_string()),
        system_prompt_override: None,
        engine_addition: Some("Window: 41% used; last compaction 3 turns ago.".into()),
    }
}

/// `text` with the sample workspace's absolute path written as `<workspace>`, so snapshots
/// do not depend on where the repository is checked out.
pub fn redact(text: &str) -> String {
    text.replace(&workspace_dir().display().to_string(), "<workspace>")
}
