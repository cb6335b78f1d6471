//! `rampart context show [--session KEY] [--model M] [--json] [--html FILE]`: what is in my
//! window?
//!
//! The session is read, never written: its file is copied into memory and the run loop's own
//! preparation runs on the copy ([`crate::run::Runner::preview`]: layer 1, the history with
//! its last compaction, hygiene, the engine's `assemble`, the system prompt with the engine's
//! addition, the guards), without calling the model. A session that does not exist yet shows
//! what its first turn would send: the prompt alone.
//!
//! Printed: the request body as the provider would receive it (the provider's own body
//! function; the simulator's in a readable form), then the breakdown
//! ([`crate::prompt::breakdown`]): each part's tokens, its share of the window and of the
//! prompt budget, adding up exactly to the request's count; then the largest tool results.
//! `--json` prints the same as one JSON document, `--html FILE` writes a page with the window
//! as a bar ([`crate::prompt::page`]).
//!
//! Exit codes: 0 when shown; 1 when it cannot be (an unknown model, a session that cannot be
//! read, no usable model; the message says what to do).

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use rampart_context::hygiene::Provider as Family;
use rampart_engine_api::AgentMessage;
use rampart_message::ContentBlock;
use rampart_sessions::entry::SessionHeader;
use rampart_sessions::medium::{MemoryMedium, SessionMedium};
use rampart_sessions::store::{SessionStore, normalize_key};
use rampart_sessions::{Session, SessionOptions};
use serde_json::{Value, json};

use super::run::DEFAULT_SESSION_KEY;
use super::session_host::{hint, host};
use super::sessions::find_session;
use crate::config::{Config, ModelName};
use crate::engine::services::EventSink;
use crate::output_file::{Inputs, OutputFile};
use crate::prompt::breakdown::{Breakdown, breakdown};
use crate::prompt::page::signed_thousands;
use crate::prompt::{PromptAssembler, PromptRequest};
use crate::providers::ModelRequest;
use crate::providers::text::{as_user_text, content_text, wire_system};
use crate::replay::table::thousands;
use crate::run::{RunEvents, RunSettings, Runner};
use crate::terminal::escape;

/// `rampart context …`.
#[derive(Debug, Subcommand)]
pub enum ContextCommand {
    /// Print what the next request of a session would send, and what each part of it costs
    /// against the window and the budget.
    Show(ShowArgs),
}

/// `rampart context show`'s flags.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The session (registry key, session id or file); one that does not exist yet shows the
    /// prompt alone.
    #[arg(long, value_name = "KEY", default_value = DEFAULT_SESSION_KEY)]
    pub session: String,
    /// The model to show the request for (`provider/model`) instead of the configured one.
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// Print one JSON document: the session, the request body and the breakdown.
    #[arg(long)]
    pub json: bool,
    /// Also write a self-contained HTML page with the window as a bar to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

/// What `context show --html` must not replace, and whether an existing page may be replaced
/// (see [`crate::output_file`]).
#[derive(Debug, Clone, Copy)]
pub struct OutputRules<'a> {
    /// What the command reads.
    pub inputs: &'a Inputs,
    /// `--overwrite`.
    pub overwrite: bool,
}

/// Runs `rampart context …`.
pub fn run(
    command: ContextCommand,
    config: &Config,
    store: &SessionStore,
    events: EventSink,
    rules: OutputRules<'_>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<i32> {
    match command {
        ContextCommand::Show(args) => show(config, store, events, &args, rules, out, err),
    }
}

/// The session a view is of, opened read-only.
struct Viewed {
    key: String,
    /// `None` for a session that does not exist yet.
    file: Option<PathBuf>,
    session: Session,
}

/// `rampart context show`.
pub fn show(
    config: &Config,
    store: &SessionStore,
    events: EventSink,
    args: &ShowArgs,
    rules: OutputRules<'_>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<i32> {
    let mut settings = RunSettings::from_config(config)?;
    if let Some(model) = &args.model {
        match known_model(config, model) {
            Ok(name) => settings.candidates = vec![name],
            Err(why) => {
                writeln!(err, "error: --model {model}: {why}")?;
                return Ok(1);
            }
        }
    }
    let viewed = match open_read_only(store, &args.session) {
        Ok(v) => v,
        Err(e) => {
            writeln!(err, "error: {e:#}")?;
            writeln!(
                err,
                "`rampart sessions list` shows the sessions; `rampart sessions doctor` checks \
                 their files"
            )?;
            return Ok(1);
        }
    };
    let key = viewed.key.clone();
    // Opened before anything runs: a path that cannot be written fails now. Never the session
    // shown, wherever it lives.
    let mut inputs = rules.inputs.clone();
    if let Some(file) = &viewed.file {
        inputs.file("the session", file);
    }
    let html_file = match &args.html {
        Some(path) => Some(OutputFile::create(
            "--html",
            path,
            &inputs,
            rules.overwrite,
        )?),
        None => None,
    };

    let host = host(config, store, &events)?;
    // `rampart run` offers the memory tools when memory is on, then the context engine's own
    // tools (engine API 1.2); shown as it would send them (assuming the memory engine loads:
    // a failing one would be quarantined at run time).
    if config.memory_engine != crate::config::MEMORY_OFF {
        settings.forwarded.tools = crate::memory::tools::tool_specs();
    }
    let mut engine_session = crate::run::session_ref(&viewed.session);
    engine_session.session_key = Some(key.clone());
    settings.forwarded.tools.extend(
        crate::run::host_tools::HostTools::none()
            .with_engine(&host.slot, engine_session)
            .without_client_tools(&settings.forwarded.tools)
            .specs(),
    );
    let assembler = PromptAssembler::new(config, store.dir());
    let built = assembler.build_for_run(&key, &settings);
    settings.system_prompt = Some(built.text.clone());
    let tools: Vec<String> = settings
        .forwarded
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    let model = settings.candidates.first().cloned();

    let run_events = RunEvents::new(events.clone(), Some(viewed.session.header().id.clone()));
    let mut runner = Runner::new(
        config,
        &host.slot,
        host.providers.as_ref(),
        settings,
        run_events,
    );
    let preview = runner.preview(&viewed.session);
    drop(runner);
    host.slot.shutdown();
    let preview = match preview {
        Ok(p) => p,
        Err(e) => {
            writeln!(err, "error: {e}")?;
            if let Some(h) = hint(&e, config) {
                writeln!(err, "{h}")?;
            }
            return Ok(1);
        }
    };
    // The engine's addition, placed by the builder too, so its parts follow the text.
    let built = match &preview.addition {
        Some(addition) => assembler.build(&PromptRequest {
            session_key: &key,
            model: model.as_ref(),
            tools: &tools,
            engine_addition: Some(addition),
        }),
        None => built,
    };
    let view = breakdown(&preview, Some(&built));
    debug_assert_eq!(view.parts_total(), view.request_tokens as i64);

    let mut notes = Vec::new();
    if viewed.file.is_none() {
        notes.push(format!(
            "session `{key}` does not exist yet: this is what its first turn would send before \
             the user's message (`rampart sessions list` shows the sessions there are)"
        ));
    }
    for warning in assembler.bootstrap(&key).warnings() {
        notes.push(warning.to_string());
    }
    if !assembler.workspace().is_dir() {
        notes.push(format!(
            "the agent workspace {} does not exist: every workspace file is missing \
             (agents.defaults.workspace in plugins.toml names it)",
            assembler.workspace().display()
        ));
    }
    if let Some(overflow) = &preview.loop_overflow {
        notes.push(format!(
            "the tool-loop guard would not send this as it is: {overflow}"
        ));
    }
    if !view.exact {
        notes.push(format!(
            "counts are estimates (tokenizer {}): set `tokenizer` of the model to o200k_base or \
             cl100k_base for exact counts where the model uses one",
            view.tokenizer
        ));
    }
    let (body_kind, body) = request_body(preview.family, &preview.request);

    if let Some(file) = html_file {
        file.write_whole(crate::prompt::page::render(&key, &view).as_bytes())?;
    }
    if args.json {
        let document = json!({
            "session": {
                "key": key,
                "exists": viewed.file.is_some(),
                "file": viewed.file.as_ref().map(|f| f.display().to_string()),
                "id": viewed.session.header().id,
            },
            "workspace": assembler.workspace().display().to_string(),
            "requestBody": {"form": body_kind, "body": body},
            "breakdown": view,
            "notes": notes,
        });
        serde_json::to_writer_pretty(&mut *out, &document)?;
        writeln!(out)?;
    } else {
        write_text(
            out,
            &key,
            &viewed,
            &view,
            body_kind,
            &body,
            &preview.request,
        )?;
        for note in &notes {
            writeln!(out, "note: {note}")?;
        }
        if let Some(path) = &args.html {
            writeln!(out, "page: {}", path.display())?;
        }
    }
    Ok(0)
}

/// `model` as a name the configuration can serve: a provider it has and, when the provider
/// lists its models, one of them.
fn known_model(config: &Config, model: &str) -> Result<ModelName, String> {
    let name: ModelName = model.parse().map_err(|e| format!("{e}"))?;
    let Some(provider) = config.models.provider(&name.provider) else {
        return Err(format!(
            "no provider `{}` is configured (known: {}); add [models.providers.{}] to \
             plugins.toml, or pick a known one",
            name.provider,
            config.models.ids().join(", "),
            name.provider
        ));
    };
    if !provider.models.is_empty() && !provider.models.iter().any(|m| m.id == name.model) {
        let known: Vec<String> = provider
            .models
            .iter()
            .map(|m| format!("{}/{}", provider.id, m.id))
            .collect();
        return Err(format!(
            "provider `{}` has no model `{}` (it lists {}); add it under \
             [[models.providers.{}.models]], or pick one of those",
            provider.id,
            name.model,
            known.join(", "),
            provider.id
        ));
    }
    Ok(name)
}

/// Session `id` copied into memory (nothing of it is written, not even a migration), or a new
/// empty one when there is no such session.
fn open_read_only(store: &SessionStore, id: &str) -> anyhow::Result<Viewed> {
    let found = find_session(store, id).with_context(|| {
        format!(
            "cannot read the session registry in {}",
            store.dir().display()
        )
    })?;
    let Some(found) = found else {
        let cwd = std::env::current_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_else(|_| ".".to_string());
        let medium = MemoryMedium::new(format!("(new session {id})"));
        let session = Session::create_on(
            Box::new(medium),
            SessionHeader::new(cwd),
            SessionOptions::default(),
        )
        .context("cannot make an empty session in memory")?;
        return Ok(Viewed {
            key: normalize_key(id),
            file: None,
            session,
        });
    };
    let bytes = std::fs::read(&found.file)
        .with_context(|| format!("cannot read session `{id}` ({})", found.file.display()))?;
    let medium = MemoryMedium::new(found.file.clone());
    medium
        .append(&bytes)
        .with_context(|| format!("cannot copy session `{id}` into memory"))?;
    let session = Session::open_on(Box::new(medium), SessionOptions::default())
        .with_context(|| format!("cannot read session `{id}` ({})", found.file.display()))?;
    Ok(Viewed {
        key: found.key.unwrap_or_else(|| normalize_key(id)),
        file: Some(found.file),
        session,
    })
}

/// The body the provider's adapter sends for `request` (its own function), and what form it
/// is in; the simulator, which has no wire, gets a readable JSON form (its system prompt as
/// it counts it, the messages as pi messages).
fn request_body(family: Family, request: &ModelRequest) -> (&'static str, Value) {
    match family {
        Family::Anthropic => (
            "anthropic-messages",
            crate::providers::anthropic::request_body(request),
        ),
        Family::OpenAiCompletions => (
            "openai-completions",
            crate::providers::openai::request_body(request),
        ),
        Family::Gemini | Family::Other => {
            let sent = crate::providers::wire_messages(&request.messages);
            (
                "readable",
                json!({
                    "model": request.model,
                    "system": request.system.as_deref().map(|s| wire_system(s).text().into_owned()),
                    "messages": sent.iter().map(|m| &**m).collect::<Vec<&AgentMessage>>(),
                    "tools": request.forwarded.tools.iter().map(|t| &t.name).collect::<Vec<_>>(),
                }),
            )
        }
    }
}

fn write_text(
    out: &mut dyn Write,
    key: &str,
    viewed: &Viewed,
    view: &Breakdown,
    body_kind: &str,
    body: &Value,
    request: &ModelRequest,
) -> std::io::Result<()> {
    let state = match &viewed.file {
        Some(file) => escape(&file.display().to_string()).into_owned(),
        None => "new: no turn yet".to_string(),
    };
    writeln!(out, "session {} ({state})", escape(key))?;
    writeln!(
        out,
        "model {} · window {} · budget {} (reserve {}) · tokenizer {}{} · precheck: {}",
        view.model,
        thousands(view.window),
        thousands(view.budget),
        thousands(view.reserve),
        view.tokenizer,
        if view.exact {
            " (exact)"
        } else {
            " (estimate)"
        },
        view.route
    )?;
    writeln!(out)?;
    writeln!(out, "── the request ({body_kind}) ──")?;
    if body_kind == "readable" {
        write_readable(out, request)?;
    } else {
        let pretty = serde_json::to_string_pretty(body).unwrap_or_else(|_| body.to_string());
        writeln!(out, "{pretty}")?;
    }
    writeln!(out)?;
    writeln!(out, "── what is in the window ──")?;
    let width = view
        .parts
        .iter()
        .map(|p| p.label.chars().count())
        .max()
        .unwrap_or(0)
        .max(24);
    writeln!(
        out,
        "{:<8} {:<width$} {:>9} {:>9} {:>9}",
        "group", "part", "tokens", "% window", "% budget"
    )?;
    for part in &view.parts {
        writeln!(
            out,
            "{:<8} {:<width$} {:>9} {:>8.2}% {:>8.2}%",
            part.group.name(),
            part.label,
            signed_thousands(part.tokens),
            part.window_percent,
            part.budget_percent
        )?;
    }
    let share = |of: u64| {
        if of == 0 {
            0.0
        } else {
            view.request_tokens as f64 * 100.0 / of as f64
        }
    };
    writeln!(
        out,
        "{:<8} {:<width$} {:>9} {:>8.2}% {:>8.2}%",
        "",
        "total (the request)",
        thousands(view.request_tokens),
        share(view.window),
        share(view.budget)
    )?;
    if !view.largest_tool_results.is_empty() {
        writeln!(out)?;
        writeln!(out, "largest tool results (counted above):")?;
        for r in &view.largest_tool_results {
            writeln!(
                out,
                "  {:<24} {:<28} {:>9} {:>8.2}% {:>8.2}%",
                r.tool,
                r.tool_call_id,
                thousands(r.tokens),
                r.window_percent,
                r.budget_percent
            )?;
        }
    }
    Ok(())
}

/// The simulator's request as a person reads it: each message under its role.
fn write_readable(out: &mut dyn Write, request: &ModelRequest) -> std::io::Result<()> {
    writeln!(out, "model: {}", request.model)?;
    if let Some(system) = &request.system {
        writeln!(out, "[system]")?;
        writeln!(out, "{}", wire_system(system).text())?;
    }
    for message in crate::providers::wire_messages(&request.messages).iter() {
        match &**message {
            AgentMessage::User(m) => {
                writeln!(out, "[user]")?;
                writeln!(out, "{}", content_text(&m.content))?;
            }
            AgentMessage::Assistant(m) => {
                writeln!(out, "[assistant]")?;
                for block in &m.content {
                    match block {
                        ContentBlock::Text(t) => writeln!(out, "{}", t.text)?,
                        ContentBlock::Thinking(t) => writeln!(out, "(thinking) {}", t.thinking)?,
                        ContentBlock::ToolCall(c) => {
                            writeln!(out, "(call {} {}) {}", c.id, c.name, c.arguments)?;
                        }
                        _ => {}
                    }
                }
            }
            AgentMessage::ToolResult(m) => {
                writeln!(out, "[tool result: {} {}]", m.tool_name, m.tool_call_id)?;
                writeln!(out, "{}", content_text(&m.content))?;
            }
            other => {
                writeln!(out, "[{}]", other.role())?;
                writeln!(out, "{}", as_user_text(other).unwrap_or_default())?;
            }
        }
    }
    Ok(())
}
