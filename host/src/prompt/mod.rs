//! The system prompt in the host: everything between the configuration and `rampart_prompt`.
//!
//! A [`PromptAssembler`] is built once per process from the typed configuration. It holds what
//! lives as long as the process: the per-session snapshots of the workspace files
//! ([`BootstrapCache`], so a session's prompt prefix stays byte-identical and cacheable), the
//! skills catalog (discovered once), the time zone and what the runtime line says of the
//! machine. For each turn it builds the prompt of a session key, a model and a tool list;
//! `rampart run`, `rampart serve` (opt-in, `serve.systemPrompt`), `rampart replay
//! --rebuild-prompt` and `rampart context show` all build it here.
//!
//! - [`breakdown`]: what is in the window, part by part, for `rampart context show`;
//! - [`page`]: the same as one self-contained HTML page.

pub mod breakdown;
pub mod page;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rampart_prompt::bootstrap::{HEARTBEAT_MD, LOAD_ORDER, WORKER_FILES};
use rampart_prompt::{
    BootstrapCache, BootstrapLimits, BootstrapRequest, BootstrapSet, BuiltPrompt, CitationsMode,
    DEFAULT_HEARTBEAT_PROMPT, MemorySection, PromptInputs, RuntimeInfo, SessionKind, SkillCatalog,
    SkillsRequest, SourceFile, ToolInfo, TruncationWarningMode, append_truncation_warning,
    build_system_prompt, discover_skills, find_git_root, mode_for_session,
};

use crate::config::serve::SystemPromptSource;
use crate::config::{Config, ModelName};

/// The heading the client's own system prompt goes under when `serve.systemPrompt` is
/// `"merge"`: after Rampart's prompt, so the model reads it as the client's instructions for
/// this conversation.
pub const CLIENT_INSTRUCTIONS_HEADING: &str = "## Client Instructions";

/// The time zone named when neither `agents.defaults.userTimezone` nor the host's `TZ` gives
/// one.
pub const DEFAULT_TIME_ZONE: &str = "UTC";

/// What a turn's prompt is built for.
#[derive(Debug, Clone, Copy)]
pub struct PromptRequest<'a> {
    /// The session key: it picks the mode (a subagent or cron key gets the minimal prompt and
    /// fewer files) and the bootstrap snapshot.
    pub session_key: &'a str,
    /// The model the turn asks for, named in the runtime line.
    pub model: Option<&'a ModelName>,
    /// The names of the tools the request offers, listed in the Tooling section.
    pub tools: &'a [String],
    /// The context engine's `systemPromptAddition`, placed right after the cache marker.
    pub engine_addition: Option<&'a str>,
}

/// The system prompt's sources for one process (see the module docs).
#[derive(Debug)]
pub struct PromptAssembler {
    workspace: PathBuf,
    limits: BootstrapLimits,
    warning_mode: TruncationWarningMode,
    bootstrap: BootstrapCache,
    skills: Arc<SkillCatalog>,
    time_zone: String,
    runtime: RuntimeInfo,
    system_prompt_override: Option<String>,
    memory: bool,
    default_model: Option<ModelName>,
}

impl PromptAssembler {
    /// The assembler of `config`: the workspace is `agents.defaults.workspace` (read against
    /// `config.source_file`), else `workspace` beside `sessions_dir`. The skills are
    /// discovered now, once. A workspace that does not exist is not an error: every file is
    /// then missing, and the prompt says so where each was expected.
    pub fn new(config: &Config, sessions_dir: &Path) -> Self {
        let defaults = &config.agent_defaults;
        let config_file = config.source_file.as_deref();
        let workspace = defaults.workspace_dir(config_file, sessions_dir);
        // Shown as an absolute path, as the bootstrap loader shows it.
        let workspace = std::path::absolute(&workspace).unwrap_or(workspace);
        let home = directories::BaseDirs::new().map(|b| b.home_dir().to_path_buf());
        let skills = discover_skills(&SkillsRequest {
            home_dir: home,
            ..SkillsRequest::new(&workspace)
        });
        for issue in skills.issues() {
            tracing::warn!(workspace = %workspace.display(), issue = %issue, "a skill was skipped");
        }
        let repo_root = defaults
            .repo_root_dir(config_file)
            .or_else(|| find_git_root(&workspace));
        let time_zone = time_zone(
            defaults.user_timezone.as_deref(),
            std::env::var("TZ").ok().as_deref(),
        );
        tracing::debug!(
            workspace = %workspace.display(),
            skills = skills.skills().len(),
            time_zone = %time_zone,
            "prompt assembler ready"
        );
        Self {
            workspace,
            limits: defaults.bootstrap_limits,
            warning_mode: defaults.bootstrap_truncation_warning,
            bootstrap: BootstrapCache::new(),
            skills: Arc::new(skills),
            time_zone,
            runtime: machine_runtime(repo_root),
            system_prompt_override: defaults.system_prompt_override.clone(),
            memory: config.memory_engine != crate::config::MEMORY_OFF,
            default_model: defaults.primary.clone(),
        }
    }

    /// The agent workspace the files are read from.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The session's bootstrap files: its snapshot, read on first use. A workspace that
    /// cannot be opened gives every file as missing (not cached, so a workspace created later
    /// is read on the next turn).
    pub fn bootstrap(&self, session_key: &str) -> Arc<BootstrapSet> {
        let request = BootstrapRequest {
            limits: self.limits,
            // Rampart sends no heartbeats, so HEARTBEAT.md is read only on heartbeat runs, as
            // OpenClaw does for an agent with heartbeats off: there are none.
            heartbeat_file: false,
            ..BootstrapRequest::new(&self.workspace, session_key)
        };
        match self.bootstrap.get_or_load(&request) {
            Ok(set) => set,
            Err(e) => {
                let missing = self.workspace.try_exists().ok() == Some(false);
                if missing {
                    tracing::debug!(workspace = %self.workspace.display(), "no agent workspace: every bootstrap file is missing");
                } else {
                    tracing::warn!(workspace = %self.workspace.display(), error = %e, "the agent workspace cannot be read: every bootstrap file is treated as missing");
                }
                Arc::new(all_missing(&self.workspace, session_key, self.limits))
            }
        }
    }

    /// The system prompt of one turn.
    pub fn build(&self, request: &PromptRequest<'_>) -> BuiltPrompt {
        let key = request.session_key;
        let tools: Vec<ToolInfo> = request.tools.iter().map(ToolInfo::named).collect();
        let mut runtime = self.runtime.clone();
        runtime.model = request.model.map(ToString::to_string);
        runtime.default_model = self
            .default_model
            .as_ref()
            .or(request.model)
            .map(ToString::to_string);
        build_system_prompt(&PromptInputs {
            mode: mode_for_session(key, false),
            tools,
            skills: Some(Arc::clone(&self.skills)),
            memory: MemorySection {
                include: self.memory,
                citations: CitationsMode::Auto,
            },
            workspace_dir: self.workspace.clone(),
            bootstrap: self.bootstrap(key),
            time_zone: Some(self.time_zone.clone()),
            runtime,
            system_prompt_override: self.system_prompt_override.clone(),
            engine_addition: request.engine_addition.map(str::to_string),
            ..PromptInputs::default()
        })
    }

    /// The prompt of a turn run with `settings` in session `session_key`: for the model the
    /// run asks for first, and the tools its requests carry.
    pub fn build_for_run(
        &self,
        session_key: &str,
        settings: &crate::run::RunSettings,
    ) -> BuiltPrompt {
        let tools: Vec<String> = settings
            .forwarded
            .tools
            .iter()
            .map(|t| t.name.clone())
            .collect();
        self.build(&PromptRequest {
            session_key,
            model: settings.candidates.first(),
            tools: &tools,
            engine_addition: None,
        })
    }

    /// The user's message of this turn with the truncation warning appended when a workspace
    /// file was cut, per `agents.defaults.bootstrapPromptTruncationWarning` (every turn by
    /// default). It goes in the user turn, not the system prompt, so the cached prefix is the
    /// same with or without it. Build the turn's prompt first: the warning is about its files.
    pub fn user_text(&self, session_key: &str, prompt: &str) -> String {
        let lines = self.bootstrap.warning_lines(session_key, self.warning_mode);
        if !lines.is_empty() {
            tracing::info!(
                session = session_key,
                "workspace files were cut to their budget; the user's message says so"
            );
        }
        append_truncation_warning(prompt, &lines, Some(DEFAULT_HEARTBEAT_PROMPT))
    }

    /// The system prompt `rampart serve` sends for a client's request, per
    /// `serve.systemPrompt`: the client's (`client`), Rampart's built prompt in its place
    /// (`rampart`), or Rampart's with the client's after it under
    /// [`CLIENT_INSTRUCTIONS_HEADING`] (`merge`).
    pub fn for_client(
        &self,
        source: SystemPromptSource,
        session_key: &str,
        settings: &crate::run::RunSettings,
        client: Option<&str>,
    ) -> Option<String> {
        let built = match source {
            SystemPromptSource::Client => return client.map(str::to_string),
            SystemPromptSource::Rampart => self.build_for_run(session_key, settings).text,
            SystemPromptSource::Merge => {
                merge_client_prompt(&self.build_for_run(session_key, settings).text, client)
            }
        };
        // A cut file is never silent; but a proxied client's messages are left as it sent
        // them (they are what its next request is matched against), so the warning is logged,
        // once per conversation and distinct cut.
        if self.warning_mode != TruncationWarningMode::Off {
            let lines = self
                .bootstrap
                .warning_lines(session_key, TruncationWarningMode::Once);
            if !lines.is_empty() {
                tracing::warn!(session = session_key, cut = %lines.join(" "), "workspace files were cut to their budget in the built system prompt");
            }
        }
        Some(built)
    }
}

/// Rampart's prompt, then the client's under [`CLIENT_INSTRUCTIONS_HEADING`]; Rampart's alone
/// when the client sent none. The client's text goes last, below the cache marker: Rampart
/// cannot know it is stable, and a conversation's own breakpoint on its last message still
/// caches it when it is. A marker inside the client's text is defused, so it cannot move the
/// cache boundary.
pub fn merge_client_prompt(built: &str, client: Option<&str>) -> String {
    match client.map(str::trim).filter(|c| !c.is_empty()) {
        Some(client) => format!(
            "{}\n\n{CLIENT_INSTRUCTIONS_HEADING}\n{}",
            built.trim_end(),
            rampart_prompt::marker::defuse_marker(client)
        ),
        None => built.to_string(),
    }
}

/// The time zone the prompt names: `configured`, else the host's `TZ` (a zone name; a
/// leading `:` is dropped, and a path to a zone file is not a name), else
/// [`DEFAULT_TIME_ZONE`].
pub fn time_zone(configured: Option<&str>, tz_env: Option<&str>) -> String {
    let from_env = tz_env
        .map(|tz| tz.trim().trim_start_matches(':'))
        .filter(|tz| !tz.is_empty() && !tz.starts_with('/'));
    configured
        .map(str::trim)
        .filter(|z| !z.is_empty())
        .or(from_env)
        .unwrap_or(DEFAULT_TIME_ZONE)
        .to_string()
}

/// The set of a session whose workspace cannot be opened: each file it would read, missing,
/// where it was expected (MEMORY.md has no entry when absent, as in a workspace without it).
fn all_missing(workspace: &Path, session_key: &str, limits: BootstrapLimits) -> BootstrapSet {
    let names: Vec<&str> = if SessionKind::of(session_key).is_worker() {
        LOAD_ORDER
            .iter()
            .copied()
            .filter(|n| WORKER_FILES.contains(n))
            .collect()
    } else {
        LOAD_ORDER
            .iter()
            .copied()
            .filter(|n| *n != HEARTBEAT_MD)
            .collect()
    };
    let sources: Vec<SourceFile> = names
        .into_iter()
        .map(|name| SourceFile {
            name: name.to_string(),
            path: workspace.join(name),
            content: None,
        })
        .collect();
    BootstrapSet::from_sources(workspace, &sources, limits)
}

/// What the runtime line says of this machine: its host name, operating system ("type
/// release"), architecture, and the repository. No Node.js version: Rampart has none.
fn machine_runtime(repo_root: Option<PathBuf>) -> RuntimeInfo {
    let (host, os) = uname();
    RuntimeInfo {
        host,
        os: os.or_else(|| Some(std::env::consts::OS.to_string())),
        arch: Some(std::env::consts::ARCH.to_string()),
        repo_root,
        ..RuntimeInfo::default()
    }
}

/// The host name and "sysname release" from `uname(2)`.
#[cfg(unix)]
fn uname() -> (Option<String>, Option<String>) {
    let mut name: libc::utsname = unsafe {
        // SAFETY: utsname is plain old data (arrays of c_char); all zeroes is a valid value.
        std::mem::zeroed()
    };
    // SAFETY: `name` is a valid, writable utsname; uname only writes into it.
    if unsafe { libc::uname(&mut name) } != 0 {
        return (None, None);
    }
    let field = |chars: &[libc::c_char]| -> Option<String> {
        let bytes: Vec<u8> = chars
            .iter()
            .take_while(|c| **c != 0)
            .map(|c| *c as u8)
            .collect();
        let text = String::from_utf8_lossy(&bytes).trim().to_string();
        (!text.is_empty()).then_some(text)
    };
    let host = field(&name.nodename);
    let os = match (field(&name.sysname), field(&name.release)) {
        (Some(system), Some(release)) => Some(format!("{system} {release}")),
        (system, _) => system,
    };
    (host, os)
}

/// The host name from the environment; the OS from the build target.
#[cfg(not(unix))]
fn uname() -> (Option<String>, Option<String>) {
    (std::env::var("COMPUTERNAME").ok(), None)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "mod_tests.rs"]
mod tests;
