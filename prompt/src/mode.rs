//! How much of the prompt a run gets, decided from its session key.

/// Which sections the builder writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PromptMode {
    /// Every section: the main agent's sessions.
    #[default]
    Full,
    /// The sections a worker needs (tooling, safety, skills, workspace, project context,
    /// runtime) and none of the conversational ones (memory recall, silent replies,
    /// heartbeats, execution bias): subagents and scheduled (cron) runs.
    Minimal,
    /// The identity line only. Never chosen from a session key; a host asks for it.
    None,
}

/// What kind of session a key names, as far as the prompt and the bootstrap files care.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SessionKind {
    /// A conversation with the user (or anything that is not one of the two below).
    Main,
    /// A subagent spawned by another session: `subagent:…`, or `agent:<id>:subagent:…`.
    Subagent,
    /// A scheduled run: `agent:<id>:cron:…`.
    Cron,
}

impl SessionKind {
    /// The kind of the session `key` names. Keys are compared without regard to ASCII case,
    /// as OpenClaw lower-cases them. A bare `cron:…` key is **not** a cron key (OpenClaw looks
    /// for `cron:` only after `agent:<id>:`), while a bare `subagent:…` key is a subagent's.
    pub fn of(key: &str) -> Self {
        let key = key.trim().to_ascii_lowercase();
        if key.starts_with("subagent:") {
            return Self::Subagent;
        }
        let Some(rest) = agent_key_rest(&key) else {
            return Self::Main;
        };
        if rest.starts_with("subagent:") {
            Self::Subagent
        } else if rest.starts_with("cron:") {
            Self::Cron
        } else {
            Self::Main
        }
    }

    /// Whether this session gets the reduced prompt and the reduced set of bootstrap files.
    pub fn is_worker(self) -> bool {
        matches!(self, Self::Subagent | Self::Cron)
    }
}

/// What follows `agent:<id>:` in `key`, if it has that shape with a non-empty id and rest.
fn agent_key_rest(key: &str) -> Option<&str> {
    let rest = key.strip_prefix("agent:")?;
    let (id, rest) = rest.split_once(':')?;
    (!id.is_empty() && !rest.is_empty()).then_some(rest)
}

/// The prompt mode of a run of session `key`: [`PromptMode::Minimal`] for subagent and cron
/// sessions, and for any run restricted to an explicit tool allow-list (`tools_allow_set`;
/// such a run also gets no skills, which is the caller's part: pass none); else
/// [`PromptMode::Full`]. [`PromptMode::None`] is never chosen here.
pub fn mode_for_session(key: &str, tools_allow_set: bool) -> PromptMode {
    if tools_allow_set || SessionKind::of(key).is_worker() {
        PromptMode::Minimal
    } else {
        PromptMode::Full
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "mode_tests.rs"]
mod tests;
