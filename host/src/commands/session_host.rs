//! What `run` and `compact` share: the session they work on, and the host set up the way a
//! turn needs it (providers, the engine slot with blobs and `llm.complete`).

use std::sync::Arc;

use anyhow::Context;
use rampart_engine_api::AgentMessage;
use rampart_message::ContentBlock;
use rampart_sessions::entry::SessionHeader;
use rampart_sessions::store::{SessionEntry, SessionStore, normalize_key, now_unix_ms};
use rampart_sessions::{Session, SessionOptions};

use super::sessions::find_session;
use crate::blobs::BlobStore;
use crate::config::Config;
use crate::engine::services::EventSink;
use crate::engine::slot::{EngineSlot, HostResources};
use crate::providers::registry::Providers;
use crate::run::llm::ProvidersLlm;
use crate::run::{RegistryWrites, RunEvents, RunSettings, Runner, TurnError};

/// Opens the session `key`, creating and registering it when the registry does not know it.
///
/// Creation is create-if-absent under the registry lock: of several processes that start on a
/// new key at once, exactly one creates the file and registers it, and the others open that
/// file. Why under the lock: creating first and registering after let each process make its
/// own file, and the registry kept only the last, orphaning the others' turns.
pub(super) fn open_or_create(store: &SessionStore, key: &str) -> anyhow::Result<(String, Session)> {
    if let Some(found) = find_session(store, key)? {
        let session = Session::open(&found.file, SessionOptions::default())
            .with_context(|| format!("cannot open session `{key}`"))?;
        return Ok((found.key.unwrap_or_else(|| normalize_key(key)), session));
    }
    let key = normalize_key(key);
    let cwd = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_else(|_| ".".to_string());
    let created = store.update(|map| -> anyhow::Result<Option<Session>> {
        if map.contains_key(&key) {
            // Another process registered it since we looked: open theirs below.
            return Ok(None);
        }
        let header = SessionHeader::new(cwd);
        let file = store.dir().join(format!("{}.jsonl", header.id));
        let session = Session::create(&file, header, SessionOptions::default())?;
        let mut entry = SessionEntry::new(session.header().id.clone(), now_unix_ms());
        entry.session_file = file.file_name().map(|n| n.to_string_lossy().into_owned());
        map.insert(key.clone(), entry);
        Ok(Some(session))
    })??;
    if let Some(session) = created {
        return Ok((key, session));
    }
    let entry = store
        .get(&key)?
        .with_context(|| format!("session `{key}` was registered and then removed meanwhile"))?;
    let file = store.session_file_path(&key, &entry)?;
    let session = Session::open(&file, SessionOptions::default())
        .with_context(|| format!("cannot open session `{key}`"))?;
    Ok((key, session))
}

/// Starts the session `key` over (`rampart run --new`, OpenClaw's `/new`): a new, empty session
/// file is registered under `key`, naming the session it replaces in its header
/// (`previousSessionId`), so an engine can carry its own state over. The old file is left where
/// it is, whole: starting over never deletes a transcript. Returns the key, the new session and
/// the replaced session's id (`None` when `key` was not registered: then this is a first start).
pub(super) fn start_over(
    store: &SessionStore,
    key: &str,
) -> anyhow::Result<(String, Session, Option<String>)> {
    let key = normalize_key(key);
    let cwd = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_else(|_| ".".to_string());
    // Under the registry lock, so a concurrent turn on `key` lands in one session or the
    // other, never in a file the registry no longer names.
    let (session, previous) =
        store.update(|map| -> anyhow::Result<(Session, Option<String>)> {
            let previous = map.get(&key).map(|e| e.session_id.clone());
            let mut header = SessionHeader::new(cwd);
            header.previous_session_id.clone_from(&previous);
            let file = store.dir().join(format!("{}.jsonl", header.id));
            let session = Session::create(&file, header, SessionOptions::default())?;
            let mut entry = SessionEntry::new(session.header().id.clone(), now_unix_ms());
            entry.session_file = file.file_name().map(|n| n.to_string_lossy().into_owned());
            map.insert(key.clone(), entry);
            Ok((session, previous))
        })??;
    tracing::info!(
        session_key = %key,
        session_id = %session.header().id,
        previous_session_id = previous.as_deref().unwrap_or(""),
        "started the session over"
    );
    Ok((key, session, previous))
}

/// The host pieces one command needs.
pub(super) struct Host {
    pub(super) providers: Arc<Providers>,
    pub(super) slot: EngineSlot,
    /// Long-term memory (`plugins.slots.memory`); off for commands that do not use it.
    pub(super) memory: crate::memory::MemorySlot,
}

impl Host {
    /// A runner on `session` with this host's engine and providers, the blob store of the
    /// sessions directory, and the registry entry `key` kept up to date when there is one.
    pub(super) fn runner<'a>(
        &'a self,
        config: &'a Config,
        store: &'a SessionStore,
        events: &EventSink,
        session: &Session,
        key: Option<&str>,
    ) -> anyhow::Result<Runner<'a>> {
        let settings = RunSettings::from_config(config)?;
        self.runner_with(config, store, events, session, key, settings)
    }

    /// [`Host::runner`] with `settings` instead of the config's.
    pub(super) fn runner_with<'a>(
        &'a self,
        config: &'a Config,
        store: &'a SessionStore,
        events: &EventSink,
        session: &Session,
        key: Option<&str>,
        settings: RunSettings,
    ) -> anyhow::Result<Runner<'a>> {
        // Recording: `rampart compact` reads the compaction's figures back; a one-shot command
        // holds a turn's events at most.
        let run_events = RunEvents::recording(events.clone(), Some(session.header().id.clone()));
        let mut runner = Runner::new(
            config,
            &self.slot,
            self.providers.as_ref(),
            settings,
            run_events,
        )
        .with_blobs(BlobStore::in_sessions_dir(store.dir()));
        if let Some(key) = key {
            runner = runner.with_registry(store, key.to_string(), RegistryWrites::PerTurn);
        }
        Ok(runner)
    }
}

/// Sets up the host for a command on `store`, without long-term memory.
pub(super) fn host(
    config: &Config,
    store: &SessionStore,
    events: &EventSink,
) -> anyhow::Result<Host> {
    host_with_memory(config, store, events, false)
}

/// [`host`], with the memory slot resolved when `memory` is true.
pub(super) fn host_with_memory(
    config: &Config,
    store: &SessionStore,
    events: &EventSink,
    memory: bool,
) -> anyhow::Result<Host> {
    let providers = Arc::new(Providers::from_config(config)?);
    let resources = HostResources {
        blobs: Some(BlobStore::in_sessions_dir(store.dir())),
        llm: Some(Arc::new(ProvidersLlm::new(Arc::clone(&providers)))),
        // An engine's derived state follows the sessions it is derived from.
        state_root: Some((store.dir().join("engines"), false)),
        ..Default::default()
    };
    let slot = EngineSlot::resolve_full(config, events, &resources)?;
    let memory = if memory {
        crate::memory::resolve(
            config,
            store.dir(),
            events,
            &resources,
            crate::memory::Watch::No,
        )
    } else {
        crate::memory::MemorySlot::off()
    };
    Ok(Host {
        providers,
        slot,
        memory,
    })
}

/// The text blocks of an answer.
pub(super) fn reply_text(message: &AgentMessage) -> String {
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
pub(super) fn hint(e: &TurnError, config: &Config) -> Option<String> {
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
