//! `rampart run "PROMPT"` and `rampart compact SESSION`: one real turn, and one compaction on
//! demand, in a persisted session.
//!
//! They live beside the replay because they set the host up the same way (providers, the
//! engine slot with blobs and `llm.complete`, a runner with the registry), only against the
//! configured model instead of the simulator and in the user's sessions directory.
//!
//! Both run inside the session's lane ([`rampart_sessions::lanes`]): two commands on one
//! session in one process never interleave, and a compaction never runs beside a turn of its
//! own session.
//!
//! Exit codes: 0 on success; 1 when the turn or the compaction did not happen (the message on
//! stderr says why and what to do).

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use rampart_engine_api::AgentMessage;
use rampart_message::ContentBlock;
use rampart_sessions::entry::SessionHeader;
use rampart_sessions::lanes::Lanes;
use rampart_sessions::store::{SessionEntry, SessionStore, StoreError, normalize_key, now_unix_ms};
use rampart_sessions::{Session, SessionOptions};

use crate::blobs::BlobStore;
use crate::config::Config;
use crate::providers::registry::Providers;
use crate::run::llm::ProvidersLlm;
use crate::run::{RunEvents, RunSettings, Runner, TurnError};
use crate::services::EventSink;
use crate::slot::{EngineSlot, HostResources};

/// The session `rampart run` uses when `--session` is not given (OpenClaw's main session key).
pub const DEFAULT_SESSION_KEY: &str = "main";

/// A session found by key, id or path: its registry key (when it has one) and its file.
#[derive(Debug, Clone)]
pub struct FoundSession {
    /// The registry key, when the session is registered.
    pub key: Option<String>,
    /// The session file.
    pub file: PathBuf,
}

/// Finds a session by registry key, by session id, or as a path to a session file.
pub fn find_session(store: &SessionStore, id: &str) -> Result<Option<FoundSession>, StoreError> {
    let key = normalize_key(id);
    if let Some(entry) = store.get(&key)? {
        return Ok(Some(FoundSession {
            key: Some(key),
            file: store.session_file_path(&entry),
        }));
    }
    if let Some((key, entry)) = store.list()?.into_iter().find(|(_, e)| e.session_id == id) {
        return Ok(Some(FoundSession {
            key: Some(key),
            file: store.session_file_path(&entry),
        }));
    }
    let path = std::path::Path::new(id);
    if path.is_file() {
        return Ok(Some(FoundSession {
            key: None,
            file: path.to_path_buf(),
        }));
    }
    Ok(None)
}

/// Opens the session `key`, creating and registering it when the registry does not know it.
fn open_or_create(store: &SessionStore, key: &str) -> anyhow::Result<(String, Session)> {
    if let Some(found) = find_session(store, key)? {
        let session = Session::open(&found.file, SessionOptions::default())
            .with_context(|| format!("cannot open session `{key}`"))?;
        return Ok((found.key.unwrap_or_else(|| normalize_key(key)), session));
    }
    let key = normalize_key(key);
    let cwd = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_else(|_| ".".to_string());
    let header = SessionHeader::new(cwd);
    let file = store.dir().join(format!("{}.jsonl", header.id));
    let session = Session::create(&file, header, SessionOptions::default())?;
    let mut entry = SessionEntry::new(session.header().id.clone(), now_unix_ms());
    entry.session_file = file.file_name().map(|n| n.to_string_lossy().into_owned());
    store.upsert(&key, entry)?;
    Ok((key, session))
}

/// The host pieces one command needs.
struct Host {
    providers: Arc<Providers>,
    slot: EngineSlot,
}

fn host(config: &Config, store: &SessionStore, events: &EventSink) -> anyhow::Result<Host> {
    let providers = Arc::new(Providers::from_config(config)?);
    let resources = HostResources {
        blobs: Some(BlobStore::in_sessions_dir(store.dir())),
        llm: Some(Arc::new(ProvidersLlm::new(Arc::clone(&providers)))),
        ..Default::default()
    };
    let slot = EngineSlot::resolve_full(config, events, &resources)?;
    Ok(Host { providers, slot })
}

/// The text blocks of an answer.
fn reply_text(message: &AgentMessage) -> String {
    match message {
        AgentMessage::Assistant(a) => a
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// What to tell a user whose turn or compaction failed, beyond the error itself.
fn hint(e: &TurnError, config: &Config) -> Option<String> {
    let file = config
        .source_file
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "no config file (built-in defaults)".to_string());
    match e.kind() {
        "provider" | "config" => Some(format!("config: {file}")),
        _ => None,
    }
}

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
        let host = host(config, store, &events)?;
        let settings = RunSettings::from_config(config)?;
        let run_events = RunEvents::new(events.clone(), Some(session.header().id.clone()));
        let mut runner = Runner::new(
            config,
            &host.slot,
            host.providers.as_ref(),
            settings,
            run_events,
        )
        .with_blobs(BlobStore::in_sessions_dir(store.dir()))
        .with_registry(store, key.clone());
        let user = AgentMessage::user_text(prompt, now_unix_ms());
        let result = runner.run_turn(&mut session, Some(user));
        let _ = runner.finish_turn(&mut session);
        let _ = session.sync();
        host.slot.shutdown();
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

/// `rampart compact SESSION [--instructions TEXT]`: compacts now, through the session's lane.
pub fn compact(
    config: &Config,
    store: &SessionStore,
    events: EventSink,
    id: &str,
    instructions: Option<&str>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<i32> {
    let Some(found) = find_session(store, id)? else {
        let keys: Vec<String> = store.list()?.into_iter().map(|(k, _)| k).collect();
        writeln!(
            err,
            "error: no session `{id}` in {} (keys: {}); give a key, a session id or a session \
             file path",
            store.path().display(),
            if keys.is_empty() {
                "none".to_string()
            } else {
                keys.join(", ")
            }
        )?;
        return Ok(1);
    };
    let lane_key = found
        .key
        .clone()
        .unwrap_or_else(|| found.file.display().to_string());
    let lanes = Lanes::new(1);
    lanes.run(&lane_key, || {
        let mut session = Session::open(&found.file, SessionOptions::default())
            .with_context(|| format!("cannot open session `{id}`"))?;
        let host = host(config, store, &events)?;
        let settings = RunSettings::from_config(config)?;
        let run_events = RunEvents::new(events.clone(), Some(session.header().id.clone()));
        let mut runner = Runner::new(
            config,
            &host.slot,
            host.providers.as_ref(),
            settings,
            run_events,
        );
        runner = runner.with_blobs(BlobStore::in_sessions_dir(store.dir()));
        if let Some(key) = &found.key {
            runner = runner.with_registry(store, key.clone());
        }
        let result = runner.compact_now(&mut session, instructions.map(str::to_string));
        let end = runner
            .events()
            .drain()
            .into_iter()
            .rfind(|e| e.kind == "compaction_end");
        let engine = host.slot.active().id().to_string();
        host.slot.shutdown();
        match result {
            Ok(true) => {
                let data = end.map(|e| e.data).unwrap_or_default();
                let figure = |k: &str| data.get(k).and_then(|v| v.as_u64());
                writeln!(
                    out,
                    "compacted session `{id}` with engine {engine}: {} → {} tokens{}",
                    figure("tokensBefore").map_or("?".to_string(), |n| n.to_string()),
                    figure("tokensAfter").map_or("?".to_string(), |n| n.to_string()),
                    figure("summaryChars")
                        .map(|c| format!(", summary of {c} characters"))
                        .unwrap_or_default()
                )?;
                Ok(0)
            }
            Ok(false) => {
                let why = end
                    .and_then(|e| {
                        e.data
                            .get("why")
                            .and_then(|w| w.as_str())
                            .map(str::to_string)
                    })
                    .unwrap_or_else(|| "the engine gave no reason".to_string());
                writeln!(
                    err,
                    "nothing compacted in session `{id}`: engine {engine} says: {why}"
                )?;
                Ok(1)
            }
            Err(TurnError::CompactionFailed { reason }) => {
                writeln!(
                    err,
                    "error: engine {engine} could not compact session `{id}`: {reason}; the \
                     session is unchanged"
                )?;
                Ok(1)
            }
            Err(e) => {
                writeln!(err, "error: {e}")?;
                if let Some(h) = hint(&e, config) {
                    writeln!(err, "{h}")?;
                }
                Ok(1)
            }
        }
    })
}
