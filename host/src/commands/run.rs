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

/// The session `rampart run` uses when `--session` is not given (OpenClaw's main session key).
pub const DEFAULT_SESSION_KEY: &str = "main";

/// Model calls one `rampart run` makes at most while the model keeps calling memory tools:
/// enough to search, read and answer a few times over, and a bound on a model that loops.
pub const MAX_TOOL_STEPS: usize = 8;

/// `rampart run "PROMPT" [--session KEY]`: one user turn against the configured model.
pub fn run_prompt(
    config: &Config,
    store: &SessionStore,
    events: EventSink,
    prompt: &str,
    session_key: Option<&str>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<i32> {
    let key = session_key.unwrap_or(DEFAULT_SESSION_KEY);
    let lanes = Lanes::new(1);
    lanes.run(key, || {
        let (key, mut session) = open_or_create(store, key)?;
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
        if host.memory.is_on() {
            // The model is offered the memory tools (and the prompt says how to use them);
            // `rampart run` answers them itself.
            settings.forwarded.tools = crate::memory::tools::tool_specs();
        }
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
        let user = AgentMessage::user_text(user_text, now_unix_ms());
        let result = tool_loop(&mut runner, &mut session, user, &host.memory, &key);
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

/// The turn, and as long as the model calls only memory tools (at most [`MAX_TOOL_STEPS`]
/// model calls), their answers appended as tool results and the model called again. A call of
/// any other tool ends the loop: `rampart run` executes no other tools, and the turn's end
/// records those calls as unanswered.
fn tool_loop(
    runner: &mut crate::run::Runner<'_>,
    session: &mut rampart_sessions::Session,
    user: AgentMessage,
    memory: &crate::memory::MemorySlot,
    key: &str,
) -> Result<crate::run::TurnReport, crate::run::TurnError> {
    let mut report = runner.run_turn(session, Some(user))?;
    for _ in 1..MAX_TOOL_STEPS {
        let calls = crate::memory::flush::tool_calls(&report.reply);
        if calls.is_empty()
            || !memory.is_on()
            || !calls
                .iter()
                .all(|c| crate::memory::tools::is_memory_tool(&c.name))
        {
            break;
        }
        for call in calls {
            let text =
                crate::memory::tools::call_tool(memory, &call.name, &call.arguments, Some(key))
                    .unwrap_or_default();
            tracing::info!(tool = %call.name, call = %call.id, bytes = text.len(), "memory tool answered");
            let result =
                AgentMessage::tool_result(&call.id, &call.name, text, false, now_unix_ms());
            runner.append(session, result)?;
        }
        report = runner.run_turn(session, None)?;
    }
    Ok(report)
}
