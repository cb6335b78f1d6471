//! `rampart run "PROMPT" [--session KEY]`: one real turn against the configured model, in a
//! persisted session, inside the session's lane ([`rampart_sessions::lanes`]) so that two
//! commands on one session in one process never interleave. The system prompt is built from
//! the agent workspace ([`crate::prompt::PromptAssembler`]); a workspace file cut to its
//! budget is said at the end of the user's message.
//!
//! Exit codes: 0 on success; 1 when the turn did not happen (the message on stderr says why and
//! what to do).

use std::io::Write;

use rampart_engine_api::AgentMessage;
use rampart_sessions::lanes::Lanes;
use rampart_sessions::store::{SessionStore, now_unix_ms};

use super::session_host::{hint, host_with_memory, open_or_create, reply_text};
use crate::config::Config;
use crate::engine::services::EventSink;
use crate::prompt::PromptAssembler;
use crate::run::RunSettings;
use crate::run::host_tools::{HostTools, answer_host_tool_calls};

/// The session `rampart run` uses when `--session` is not given (OpenClaw's main session key).
pub const DEFAULT_SESSION_KEY: &str = "main";

/// Which session a `rampart run` turn goes to.
#[derive(Debug, Clone, Copy, Default)]
pub struct SessionChoice<'a> {
    /// The registry key (`--session`; [`DEFAULT_SESSION_KEY`] when `None`).
    pub key: Option<&'a str>,
    /// `--new`: start the session over first (a new, empty session under the key).
    pub start_over: bool,
}

/// `rampart run "PROMPT" [--session KEY] [--new]`: one user turn against the configured model.
pub fn run_prompt(
    config: &Config,
    store: &SessionStore,
    events: EventSink,
    prompt: &str,
    session: SessionChoice<'_>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<i32> {
    let SessionChoice {
        key: session_key,
        start_over,
    } = session;
    let key = session_key.unwrap_or(DEFAULT_SESSION_KEY);
    let lanes = Lanes::new(1);
    lanes.run(key, || {
        let (key, mut session) = if start_over {
            let (key, session, previous) = super::session_host::start_over(store, key)?;
            if let Some(previous) = previous {
                writeln!(
                    err,
                    "started session `{key}` over: the new session {} replaces {previous}, \
                     whose file stays in {}",
                    session.header().id,
                    store.dir().display()
                )?;
            }
            (key, session)
        } else {
            open_or_create(store, key)?
        };
        let host = host_with_memory(config, store, &events, true)?;
        // The lock is held from reading the context to appending the answer (released when
        // `session` drops), so another writer's turn never lands inside this one.
        if let Err(e) = session.hold(config.session.write_lock_timeout) {
            host.slot.shutdown();
            writeln!(err, "error: session `{key}`: {e}")?;
            writeln!(
                err,
                "nothing was written; the wait is `session.writeLockTimeoutMs` in the config"
            )?;
            return Ok(1);
        }
        // The system prompt, built from the workspace for this session and model; a cut
        // workspace file is said in the user's message, which is what the warning is about.
        let mut settings = RunSettings::from_config(config)?;
        // The model is offered the memory tools (and the prompt says how to use them) and the
        // context engine's own tools (engine API 1.2); `rampart run` answers them itself.
        let mut engine_session = crate::run::session_ref(&session);
        engine_session.session_key = Some(key.clone());
        let host_tools = HostTools::none()
            .with_memory(&host.memory)
            .with_engine(&host.slot, engine_session);
        settings.forwarded.tools = host_tools.specs();
        let assembler = PromptAssembler::new(config, store.dir());
        settings.system_prompt = Some(assembler.build_for_run(&key, &settings).text);
        // The built prompt's prefix is the same turn after turn: a provider with prompt-cache
        // breakpoints (Anthropic) gets one on it and on the last message, as `serve` does.
        settings.forwarded.prompt_cache = true;
        let user_text = assembler.user_text(&key, prompt);
        let workspace = config
            .agent_defaults
            .workspace_dir(config.source_file.as_deref(), store.dir());
        let mut runner = host
            .runner_with(config, store, &events, &session, Some(&key), settings)?
            .with_memory_flush(&host.memory, workspace);
        // A prompt kept by a failed run is continued, not sent twice: when the branch ends in
        // an unanswered user message with this very text, the turn starts from it.
        let user = if kept_prompt(&session, &user_text) {
            writeln!(
                err,
                "continuing the prompt kept in session `{key}` by an earlier run (it is not \
                 added again)"
            )?;
            None
        } else {
            Some(AgentMessage::user_text(user_text, now_unix_ms()))
        };
        // `rampart run` answers the model's calls of the host's tools itself.
        let first = runner.run_turn(&mut session, user);
        let result = answer_host_tool_calls(
            &mut runner,
            &mut session,
            &host_tools,
            Some(&key),
            first,
            || {},
            None,
        );
        let finished = runner.finish_turn(&mut session);
        // A turn is acknowledged only once it is on disk: a failed sync (a full disk) is an
        // error with the OS's reason, never silence.
        let synced = session.sync();
        host.slot.shutdown();
        host.memory.shutdown();
        let persisted = match (finished, synced) {
            (Err(e), _) => Err(format!("the turn could not be completed: {e}")),
            (_, Err(e)) => Err(format!("the session could not be synced to disk: {e}")),
            _ => Ok(()),
        };
        if let (Ok(_), Err(why)) = (&result, &persisted) {
            writeln!(err, "error: session `{key}`: {why}")?;
            return Ok(1);
        }
        if let Err(why) = &persisted {
            writeln!(err, "error: session `{key}`: {why}")?;
        }
        match result {
            Ok(report) => {
                let text = reply_text(&report.reply);
                if text.is_empty() {
                    writeln!(out, "(the answer holds no text)")?;
                } else {
                    writeln!(out, "{text}")?;
                }
                writeln!(
                    err,
                    "session {key}: {} answered; {} prompt tokens of {}, {} attempt(s)",
                    report.model, report.prompt_tokens, report.window, report.attempts
                )?;
                Ok(0)
            }
            Err(e) => {
                writeln!(err, "error: {e}")?;
                if let Some(h) = hint(&e, config) {
                    writeln!(err, "{h}")?;
                }
                if e.kind() != "window_too_small" {
                    writeln!(
                        err,
                        "the prompt is kept in session `{key}`; run again once the problem is \
                         fixed"
                    )?;
                }
                Ok(1)
            }
        }
    })
}

/// Whether the active branch ends in a user message holding exactly `text` with no answer
/// after it: what a failed `rampart run` of the same prompt leaves behind ("the prompt is kept
/// in session …; run again"). Running again continues that message instead of appending a
/// second copy. A different prompt is appended as usual after the unanswered one, which stays.
fn kept_prompt(session: &rampart_sessions::Session, text: &str) -> bool {
    let context = session.context();
    match context.messages.last().map(|m| &**m) {
        Some(AgentMessage::User(user)) => user.content.joined_text() == text,
        _ => false,
    }
}
