//! The turn-by-turn driver: the recorded conversation through the run loop, one model call per
//! recorded assistant message (see the module docs of [`crate::replay`] for the rules).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rampart_context::tokens::TokenCounter;
use rampart_engine_api::AgentMessage;
use rampart_engine_api::protocol::{PrepareSubagentSpawnParams, SessionRef, SubagentEndedParams};
use rampart_message::wire::SharedMessage;
use rampart_sessions::entry::SessionHeader;
use rampart_sessions::import::subagents::Subagent;
use rampart_sessions::stamps::ScriptedStamps;
use rampart_sessions::store::{SessionEntry, StoreError, now_unix_ms};
use rampart_sessions::{FsyncPolicy, Session, SessionError, SessionOptions};
use serde_json::json;

use super::setup::{ModelProfile, ReplayDir, SetupError};
use super::source::Recorded;
use super::summary::{Row, RowError, SubagentSummary, Summary, Tally};
use super::tap::TapSource;
use crate::blobs::BlobStore;
use crate::config::Config;
use crate::config::ModelsConfigError;
use crate::engine::services::EventSink;
use crate::engine::slot::{
    EngineSlot, HostResources, RequiredEngineFailed, SlotCallError, SlotState,
};
use crate::models::guard_models;
use crate::prompt::PromptAssembler;
use crate::providers::registry::{Providers, RegistryError, SIM_PROVIDER_ID};
use crate::providers::sim::SimProvider;
use crate::run::llm::ProvidersLlm;
use crate::run::{
    ModelSource, RegistryWrites, RequestRecord, RunEvents, RunSettings, Runner, TurnError,
};

/// Whose choice the replay's engine is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineChoice {
    /// The config's `contextEngine`: an engine that cannot load is quarantined and `legacy`
    /// replays instead, as in a live run (the replay's notes say so).
    Configured,
    /// `--engine ID`: an engine that cannot load stops the replay before it starts.
    Requested,
}

/// Why a replay stopped before its end (a failed call is not one of these: it is a row).
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The set-up failed (flags, config, directory).
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// A required engine failed to load.
    #[error(transparent)]
    Engine(#[from] RequiredEngineFailed),
    /// The engine named by `--engine` cannot serve (the reason names the engine and, for an
    /// unknown id, the ids available).
    #[error("--engine {}: {}", .0.engine, .0.reason)]
    EngineRefused(crate::engine::slot::Quarantine),
    /// The providers could not be built from the config.
    #[error(transparent)]
    Providers(#[from] RegistryError),
    /// `models` / `agents` settings are malformed.
    #[error(transparent)]
    Config(#[from] ModelsConfigError),
    /// The window is below the guard's minimum: every call would be blocked.
    #[error(
        "--window {window}: {}. The window guard blocks every call below that, so there is \
         nothing to replay; choose a larger --window",
        crate::prose::clause(message)
    )]
    WindowTooSmall {
        /// The window asked for.
        window: u64,
        /// The guard's block message.
        message: String,
    },
    /// The replay's session file could not be written.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The replay's registry could not be written.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Appending a recorded message failed in a way the replay cannot step over.
    #[error("replaying message {index} of `{file}`: {source}")]
    Append {
        /// The message's position on the branch, from 1.
        index: usize,
        /// The input.
        file: String,
        /// The run loop's error (boxed: it is large, and this path is rare).
        source: Box<TurnError>,
    },
    /// Writing a row or a request failed (a closed pipe, a full disk).
    #[error("cannot write the replay's output: {0}")]
    Output(#[from] std::io::Error),
    /// The simulator is missing from the providers (the config replaced it).
    #[error("the embedded simulator `sim` is not available with this config")]
    NoSimulator,
}

/// What the header of a replay says: who serves, which model, which window.
#[derive(Debug, Clone)]
pub struct Description {
    /// The engine configured.
    pub engine: String,
    /// The engine serving (the configured one, or `legacy` after a quarantine).
    pub served_by: String,
    /// `provider/model`.
    pub model: String,
    /// The window.
    pub window: u64,
    /// The tokenizer's name.
    pub tokenizer: String,
    /// The overflow wording's name.
    pub wording: String,
}

/// The result of a replay run.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// One per model call.
    pub rows: Vec<Row>,
    /// The totals.
    pub summary: Summary,
    /// Whether `--stop-on-error` stopped the replay early.
    pub stopped: bool,
    /// What the pre-compaction flushes wrote to the replay's scratch memory notes (empty with
    /// memory off, or when nothing was flushed).
    pub memory_notes: String,
    /// The replayed session as an engine knows it (id, key, file): what `rampart eval` asks
    /// the engine's recall tools about after the replay.
    pub session: SessionRef,
}

/// The long-term memory of a replay: `memory-core` over a scratch workspace that only this
/// replay writes, so the flushes before its compactions can be shown (and, in `rampart eval`,
/// searched) without touching the user's own memory files. Keyword-only unless a local model
/// is configured: a replay sends nothing over the network.
pub struct ReplayMemory {
    /// Declared (so dropped) before `dir`: its index and locks are open files in `dir`, which
    /// Windows will not delete while they are open ("sharing violation").
    slot: crate::memory::MemorySlot,
    /// `rampart-replay-memory-<pid>-…`, removed at the end, on a signal, or by the next
    /// start's sweep (see [`crate::scratch`]).
    dir: crate::scratch::ScratchDir,
}

impl ReplayMemory {
    fn open(config: &Config, events: &EventSink, resources: &HostResources) -> Option<Self> {
        if config.memory_engine == crate::config::MEMORY_OFF {
            return None;
        }
        let dir = match crate::scratch::ScratchDir::create("replay-memory") {
            Ok(dir) => dir,
            Err(e) => {
                tracing::warn!(error = %e, "no scratch memory for the replay; flushes are not shown");
                return None;
            }
        };
        let mut search = config.agent_defaults.memory_search.clone();
        if search.provider != crate::config::memory::EmbeddingChoice::Local {
            search.provider = crate::config::memory::EmbeddingChoice::None;
        }
        let places = crate::memory::core::MemoryPlaces {
            workspace: dir.path().join("workspace"),
            db_path: dir.path().join("memory").join("main.sqlite"),
            sessions_dir: dir.path().join("sessions"),
        };
        let slot = crate::memory::builtin(
            config,
            &search,
            &places,
            events,
            resources,
            crate::memory::Watch::No,
        );
        Some(Self { slot, dir })
    }

    fn workspace(&self) -> std::path::PathBuf {
        self.dir.path().join("workspace")
    }

    /// Every note under `memory/`, in name order.
    fn notes(&self) -> String {
        let mut files: Vec<_> = std::fs::read_dir(self.workspace().join("memory"))
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        files.sort();
        files
            .iter()
            .filter_map(|f| std::fs::read_to_string(f).ok())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Called once per model call with its row and every request the model received for it.
pub type RowSink<'s> = dyn FnMut(&Row, &[RequestRecord]) -> std::io::Result<()> + 's;

/// The host set up for one replay: engine slot, providers and the replay's directory.
pub struct Replayer<'a> {
    config: &'a Config,
    profile: &'a ModelProfile,
    window: u64,
    place: &'a ReplayDir,
    events: EventSink,
    providers: Arc<Providers>,
    sim: Arc<SimProvider>,
    slot: EngineSlot,
    /// Whether requests carry their wire body ([`Replayer::recording_wire`]).
    record_wire: bool,
    /// Builds the system prompt instead of the recorded one ([`Replayer::rebuilding_prompt`]).
    prompt: Option<&'a PromptAssembler>,
    /// Scratch long-term memory for the flushes before compactions.
    memory: Option<ReplayMemory>,
}

impl std::fmt::Debug for Replayer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replayer")
            .field("window", &self.window)
            .field("slot", &self.slot)
            .finish_non_exhaustive()
    }
}

impl<'a> Replayer<'a> {
    /// The engine slot the replay runs on: after a replay, the engine still holds what it
    /// kept of the session, and `rampart eval` asks its tools about it.
    pub fn engine_slot(&self) -> &EngineSlot {
        &self.slot
    }

    /// The replay's scratch long-term memory, when memory is on.
    pub fn memory_slot(&self) -> Option<&crate::memory::MemorySlot> {
        self.memory.as_ref().map(|m| &m.slot)
    }

    /// Builds the providers and resolves the engine for `config` (already a replay config),
    /// with blobs and `llm.complete` as a turn has them. Refuses a window the guard blocks.
    pub fn new(
        config: &'a Config,
        profile: &'a ModelProfile,
        window: u64,
        place: &'a ReplayDir,
        events: EventSink,
        engine: EngineChoice,
    ) -> Result<Self, ReplayError> {
        let providers = Arc::new(Providers::from_config(config)?);
        let sim = providers
            .sim(SIM_PROVIDER_ID)
            .ok_or(ReplayError::NoSimulator)?;
        let candidates = [profile.model_name()];
        if let Err(b) = guard_models(config, &candidates, |name| {
            providers.as_ref().reported_window(name)
        }) {
            return Err(ReplayError::WindowTooSmall {
                window,
                message: b.message,
            });
        }
        let resources = HostResources {
            blobs: Some(BlobStore::in_sessions_dir(&place.dir)),
            llm: Some(Arc::new(ProvidersLlm::new(Arc::clone(&providers)))),
            count_mode: profile.tokenizer,
            // Engines keep what they derive from the replay's sessions beside them, as scratch
            // (`replay-state/`, never the `engines/` a run keeps beside real sessions):
            // a replay never writes into the state of the user's real conversations.
            state_root: Some((place.dir.join("replay-state"), true)),
        };
        let slot = match engine {
            EngineChoice::Configured => EngineSlot::resolve_full(config, &events, &resources)?,
            EngineChoice::Requested => EngineSlot::resolve_requested(config, &events, &resources)
                .map_err(ReplayError::EngineRefused)?,
        };
        let memory = ReplayMemory::open(config, &events, &resources);
        Ok(Self {
            config,
            profile,
            window,
            place,
            events,
            providers,
            sim,
            memory,
            slot,
            record_wire: false,
            prompt: None,
        })
    }

    /// Makes each request handed to the row sink carry the body its provider family's adapter
    /// would send (`RequestRecord::wire`), for `--requests-out` and for checks of the wire.
    pub fn recording_wire(mut self, yes: bool) -> Self {
        self.record_wire = yes;
        self
    }

    /// Sends the system prompt `prompt` builds for the replay's session (`--rebuild-prompt`)
    /// instead of the one the transcript recorded.
    pub fn rebuilding_prompt(mut self, prompt: Option<&'a PromptAssembler>) -> Self {
        self.prompt = prompt;
        self
    }

    /// The quarantine line when the configured engine could not serve.
    pub fn quarantine_line(&self) -> Option<String> {
        match self.slot.state() {
            SlotState::Quarantined(q) => Some(q.line()),
            SlotState::Active => None,
        }
    }

    /// Who serves, which model, which window.
    pub fn describe(&self) -> Description {
        Description {
            engine: self.slot.configured_id().to_string(),
            served_by: self.slot.active().id().to_string(),
            model: self.profile.model_name().to_string(),
            window: self.window,
            tokenizer: self.profile.tokenizer.name().to_string(),
            wording: self.sim.wording().name().to_string(),
        }
    }

    /// Replays `recorded`, handing each row to `on_row` as soon as its call is done.
    pub fn run(
        &self,
        recorded: &Recorded,
        stop_on_error: bool,
        on_row: &mut RowSink<'_>,
    ) -> Result<Outcome, ReplayError> {
        let key = self.place.free_key(&recorded.file)?;
        self.run_as(recorded, key, stop_on_error, on_row, None)
    }

    /// [`Replayer::run`] for the session registered as `key` or, with `subagent`, for one of
    /// its subagents (whose rows carry the agent id).
    fn run_as(
        &self,
        recorded: &Recorded,
        key: String,
        stop_on_error: bool,
        on_row: &mut RowSink<'_>,
        subagent: Option<&str>,
    ) -> Result<Outcome, ReplayError> {
        let description = self.describe();
        // Time and ids from the transcript, so the replay writes the same thing every run.
        let clock = super::clock::start(recorded);
        let mut session = self.create_session(recorded, &key, &clock)?;
        // Held for the whole replay: nobody else writes a session the replay just created, and
        // taking the lock per append (open, flock, the holder's pid written, close) was a
        // fifth of a replay's system calls.
        session.hold(self.config.session.write_lock_timeout)?;

        let mut settings = RunSettings::from_config(self.config)?;
        settings.system_prompt = match self.prompt {
            Some(prompt) => Some(prompt.build_for_run(&key, &settings).text),
            None => recorded.system_prompt.clone(),
        };
        let system_prompt = settings.system_prompt.clone();
        let tap = TapSource::new(self.providers.as_ref()).recording_wire(self.record_wire);
        let run_events =
            RunEvents::recording(self.events.clone(), Some(session.header().id.clone()));
        // A replay lives on across its calls, as an agent's host would: compactions are
        // prepared ahead of need and swapped in when the budget is reached.
        let runner = Runner::new(self.config, &self.slot, &tap, settings, run_events)
            .with_blobs(BlobStore::in_sessions_dir(&self.place.dir))
            .preparing_compactions();
        let runner = match &self.memory {
            Some(memory) => runner.with_memory_flush(&memory.slot, memory.workspace()),
            None => runner,
        };
        // The registry's counters are only worth keeping when someone will look at the session
        // afterwards, and then they are written once, at the end (or when the replay stops).
        let mut runner = if self.place.kept() {
            runner.with_registry(&self.place.store, key.clone(), RegistryWrites::Batched)
        } else {
            runner
        };
        runner.set_now(Some(clock.now_ms()));

        let mut walk = Walk {
            counter: TokenCounter::new(self.profile.tokenizer),
            full_tokens: 0,
            user_turn: 0,
            call: 0,
            run_time: Duration::ZERO,
            output_time: Duration::ZERO,
            tally: Tally::default(),
            summary: Summary {
                input: recorded.file.display().to_string(),
                format: recorded.format.clone(),
                engine: description.engine,
                served_by: description.served_by,
                model: description.model,
                window: self.window,
                tokenizer: description.tokenizer,
                overflow_wording: description.wording,
                recorded_messages: recorded.messages.len(),
                user_turns: recorded.user_turns() as u64,
                notes: recorded.warnings.iter().take(10).cloned().collect(),
                ..Summary::default()
            },
            rows: Vec::new(),
            subagent: subagent.map(str::to_owned),
            last_request: None,
        };
        // The whole history as sent without the engine: with the prompt the replay sends.
        if let Some(system) = &system_prompt {
            walk.full_tokens += walk
                .counter
                .count_text(&crate::providers::text::wire_system(system).text());
        }

        let mut pending_user: Option<SharedMessage> = None;
        let mut stopped = false;
        for (i, message) in recorded.messages.iter().enumerate() {
            let index = i + 1;
            // The run loop works at the recorded time of the message it is handling.
            if let Some(at) = message.timestamp() {
                clock.advance_to(at);
                runner.set_now(Some(clock.now_ms()));
            }
            match &**message {
                AgentMessage::User(_) => {
                    if let Some(previous) = pending_user.take() {
                        walk.append(&mut runner, &mut session, previous, index, recorded)?;
                    }
                    if walk.user_turn > 0 {
                        walk.timed(|| runner.finish_turn(&mut session))
                            .map_err(|source| append_error(index, recorded, source))?;
                    }
                    walk.user_turn += 1;
                    walk.full_tokens += walk.counter.count_shared(message);
                    pending_user = Some(Arc::clone(message));
                }
                AgentMessage::Assistant(reply) => {
                    self.sim.clear_replies();
                    self.sim.push_reply(reply.clone());
                    let user = pending_user.take();
                    let failed = walk.call(
                        &mut runner,
                        &mut session,
                        &tap,
                        user,
                        (index, message),
                        self.window,
                        on_row,
                    )?;
                    self.sim.clear_replies();
                    if failed && stop_on_error {
                        stopped = true;
                        break;
                    }
                    // The subagents this call spawned run now, as they did: the parent's
                    // next message is the tool result that carries each one's answer.
                    for child in spawned_by(recorded, message) {
                        let replayed =
                            self.replay_subagent(&key, child, walk.call, stop_on_error, on_row)?;
                        walk.rows.extend(replayed.1);
                        walk.summary.subagents.push(replayed.0);
                    }
                }
                _ => {
                    if let Some(previous) = pending_user.take() {
                        walk.append(&mut runner, &mut session, previous, index, recorded)?;
                    }
                    walk.full_tokens += walk.counter.count_shared(message);
                    walk.append(
                        &mut runner,
                        &mut session,
                        Arc::clone(message),
                        index,
                        recorded,
                    )?;
                }
            }
        }
        if !stopped {
            let end = recorded.messages.len();
            if let Some(previous) = pending_user.take() {
                walk.append(&mut runner, &mut session, previous, end, recorded)?;
            }
            walk.timed(|| runner.finish_turn(&mut session))
                .map_err(|source| append_error(end, recorded, source))?;
        }
        // Events after the last call (caps of trailing tool results) count in the totals.
        let mut trailing = Row::default();
        for event in runner.events().drain() {
            trailing.absorb(&event, &mut walk.tally);
        }
        runner.flush_registry();
        session.sync()?;
        walk.summary.close(&walk.tally);
        walk.summary.timings.run_ms = walk.run_time.as_secs_f64() * 1e3;
        walk.summary.timings.output_ms = walk.output_time.as_secs_f64() * 1e3;
        let mut session_ref = crate::run::session_ref(&session);
        session_ref.session_key = Some(key.clone());
        Ok(Outcome {
            session: session_ref,
            rows: walk.rows,
            summary: walk.summary,
            stopped,
            memory_notes: self
                .memory
                .as_ref()
                .map(ReplayMemory::notes)
                .unwrap_or_default(),
        })
    }

    /// Replays the subagent `child` of the session registered as `parent_key`, between the
    /// engine's `prepare_subagent_spawn` and `on_subagent_ended` (`completed`, or `released`
    /// when its replay could not start), as a host would around a real spawn. Returns its
    /// summary line and rows. A child that cannot be read is a note, not a failed replay.
    fn replay_subagent(
        &self,
        parent_key: &str,
        child: &Subagent,
        at_parent_call: u64,
        stop_on_error: bool,
        on_row: &mut RowSink<'_>,
    ) -> Result<(SubagentSummary, Vec<Row>), ReplayError> {
        let mut summary = SubagentSummary {
            agent_id: child.agent_id.clone(),
            label: child.description.clone(),
            parent_tool_call_id: child.parent_tool_call_id.clone(),
            at_parent_call,
            ..SubagentSummary::default()
        };
        let child_key = self.place.free_key(&child.path)?;
        let prepared = self.slot.call(PrepareSubagentSpawnParams {
            parent_session_key: parent_key.to_owned(),
            child_session_key: child_key.clone(),
            ttl_ms: None,
        });
        let rollback_token = match prepared {
            Ok(result) => result.and_then(|r| r.rollback_token),
            Err(SlotCallError::Required(failed)) => return Err(failed.into()),
            Err(e) => {
                tracing::warn!(error = %e, child = %child.agent_id, "prepare_subagent_spawn failed");
                None
            }
        };
        let (reason, rows) = match super::source::load(&child.path, None) {
            Ok(recorded) => {
                let outcome = self.run_as(
                    &recorded,
                    child_key.clone(),
                    stop_on_error,
                    on_row,
                    Some(&child.agent_id),
                )?;
                summary.calls = outcome.summary.calls;
                summary.peak_prompt_tokens = outcome.summary.peak_prompt_tokens;
                summary.compactions = outcome.summary.compactions;
                ("completed", outcome.rows)
            }
            Err(e) => {
                summary.error = Some(e.to_string());
                ("released", Vec::new())
            }
        };
        let ended = self.slot.call(SubagentEndedParams {
            child_session_key: child_key,
            reason: reason.to_owned(),
            rollback_token,
        });
        match ended {
            Ok(_) => {}
            Err(SlotCallError::Required(failed)) => return Err(failed.into()),
            Err(e) => {
                tracing::warn!(error = %e, child = %child.agent_id, "on_subagent_ended failed")
            }
        }
        Ok((summary, rows))
    }

    /// The replay's session, registered as `key`: named and stamped from the transcript
    /// (`clock`), so two replays of it write the same session.
    fn create_session(
        &self,
        recorded: &Recorded,
        key: &str,
        clock: &Arc<ScriptedStamps>,
    ) -> Result<Session, ReplayError> {
        let mut header = SessionHeader::new(recorded.cwd.clone());
        header.timestamp = clock.timestamp();
        let mut attempt = 0;
        header.id = super::clock::session_id(recorded, key, attempt);
        while self.place.dir.join(format!("{}.jsonl", header.id)).exists() {
            attempt += 1;
            header.id = super::clock::session_id(recorded, key, attempt);
        }
        header.extra.insert(
            "replayOf".into(),
            json!({
                "file": recorded.file.display().to_string(),
                "format": recorded.format,
                "window": self.window,
                "model": self.profile.model_name(),
                "engine": self.slot.configured_id(),
            }),
        );
        let file = self.place.dir.join(format!("{}.jsonl", header.id));
        let options = SessionOptions {
            // A replay's session is a reproducible by-product: an fsync per turn would
            // dominate the replay's time and protect nothing that cannot be made again.
            fsync: FsyncPolicy::Never,
            stamps: super::clock::stamps(clock),
            ..SessionOptions::default()
        };
        let session = Session::create(&file, header, options)?;
        let mut entry = SessionEntry::new(session.header().id.clone(), now_unix_ms());
        entry.session_file = file.file_name().map(|n| n.to_string_lossy().into_owned());
        self.place.store.upsert(key, entry)?;
        Ok(session)
    }
}

fn append_error(index: usize, recorded: &Recorded, source: TurnError) -> ReplayError {
    ReplayError::Append {
        index,
        file: recorded.file.display().to_string(),
        source: Box::new(source),
    }
}

/// The driver's running state.
struct Walk {
    counter: TokenCounter,
    /// Tokens of the recorded history so far (what sending everything would cost).
    full_tokens: u64,
    user_turn: u64,
    call: u64,
    run_time: Duration,
    output_time: Duration,
    tally: Tally,
    summary: Summary,
    rows: Vec<Row>,
    /// The subagent being replayed, when it is one: its rows say so.
    subagent: Option<String>,
    /// The system prompt and messages of the last request, to tell a cache break.
    last_request: Option<(Option<String>, rampart_message::MessageList)>,
}

/// Whether `earlier` (system, messages) is not a prefix of `later`: the provider's prompt
/// cache, which matches the longest identical prefix, starts over.
fn breaks_cache(
    earlier: (&Option<String>, &[SharedMessage]),
    later: (&Option<String>, &[SharedMessage]),
) -> bool {
    let (system, messages) = earlier;
    system != later.0
        || messages.len() > later.1.len()
        || !messages
            .iter()
            .zip(later.1)
            .all(|(a, b)| Arc::ptr_eq(a, b) || a == b)
}

impl Walk {
    fn timed<R>(&mut self, work: impl FnOnce() -> R) -> R {
        let started = Instant::now();
        let result = work();
        self.run_time += started.elapsed();
        result
    }

    /// Appends a recorded non-assistant message as it was recorded, through the engine and
    /// the persistence guard. A blocked guard is stepped over (the message goes straight
    /// into the session, so the history stays as recorded); anything else stops the replay.
    fn append(
        &mut self,
        runner: &mut Runner<'_>,
        session: &mut Session,
        message: SharedMessage,
        index: usize,
        recorded: &Recorded,
    ) -> Result<(), ReplayError> {
        let result = self.timed(|| runner.append(session, (*message).clone()));
        match result {
            Ok(_) => Ok(()),
            Err(TurnError::Blocked { .. }) => {
                session.append_shared(message)?;
                Ok(())
            }
            Err(source) => Err(append_error(index, recorded, source)),
        }
    }

    /// One model call: returns whether it failed.
    #[allow(clippy::too_many_arguments)]
    fn call(
        &mut self,
        runner: &mut Runner<'_>,
        session: &mut Session,
        tap: &TapSource<'_>,
        user: Option<SharedMessage>,
        (index, reply): (usize, &SharedMessage),
        window: u64,
        on_row: &mut RowSink<'_>,
    ) -> Result<bool, ReplayError> {
        self.call += 1;
        let user_message = user.as_ref().map(|u| (**u).clone());
        let result = self.timed(|| runner.run_turn(session, user_message));
        let mut row = Row {
            turn: self.call,
            user_turn: self.user_turn,
            window,
            full_history_tokens: self.full_tokens,
            subagent: self.subagent.clone(),
            ..Row::default()
        };
        for event in runner.events().drain() {
            row.absorb(&event, &mut self.tally);
        }
        let failed = match result {
            Ok(report) => {
                row.prompt_tokens = Some(report.prompt_tokens);
                row.window = report.window;
                row.pct_window = (report.window > 0)
                    .then(|| report.prompt_tokens as f64 * 100.0 / report.window as f64);
                false
            }
            Err(e) => {
                row.error = Some(RowError {
                    kind: e.kind().to_string(),
                    message: e.to_string(),
                });
                row.tags.push(format!("error:{}", e.kind()));
                // The conversation goes on as recorded: the user message (when the failure
                // came before it was appended) and the recorded reply join the history.
                let user_in_session = !matches!(e, TurnError::Blocked { .. });
                if let Some(user) = user.filter(|_| !user_in_session) {
                    session.append_shared(user)?;
                }
                let appended = self.timed(|| runner.append(session, (**reply).clone()));
                if let Err(e) = appended {
                    match e {
                        TurnError::Blocked { .. } => {
                            session.append_shared(Arc::clone(reply))?;
                        }
                        other => {
                            return Err(ReplayError::Append {
                                index,
                                file: self.summary.input.clone(),
                                source: Box::new(other),
                            });
                        }
                    }
                }
                // Caps of the appended reply belong to this call.
                for event in runner.events().drain() {
                    row.absorb(&event, &mut self.tally);
                }
                true
            }
        };
        self.full_tokens += self.counter.count_shared(reply);
        let tapped = tap.take();
        for (i, t) in tapped.iter().enumerate() {
            let earlier = match i.checked_sub(1) {
                Some(before) => Some((&tapped[before].system, &tapped[before].messages[..])),
                None => self.last_request.as_ref().map(|(s, m)| (s, &m[..])),
            };
            if earlier.is_some_and(|earlier| breaks_cache(earlier, (&t.system, &t.messages))) {
                row.cache_breaks += 1;
            }
        }
        let requests: Vec<RequestRecord> = tapped
            .into_iter()
            .enumerate()
            .map(|(i, t)| RequestRecord {
                turn: self.call,
                attempt: i as u32 + 1,
                model: t.model,
                window: row.window,
                prompt_tokens: t.prompt_tokens,
                system: t.system,
                messages: t.messages,
                wire: t.wire,
            })
            .collect();
        row.requests = requests.len() as u32;
        self.summary.add_row(&row, self.tally.retried);
        self.tally.retried = false;
        let started = Instant::now();
        on_row(&row, &requests)?;
        self.output_time += started.elapsed();
        // The next call's cache breaks are judged against this call's last request (moved,
        // not copied: a copy per call was a pass over the whole request).
        if let Some(last) = requests.into_iter().last() {
            self.last_request = Some((last.system, last.messages));
        }
        self.rows.push(row);
        Ok(failed)
    }
}

/// The subagents of `recorded` that the assistant message `reply` spawned (its tool calls that
/// a subagent's transcript names), in the order the parent ended them.
fn spawned_by<'r>(recorded: &'r Recorded, reply: &AgentMessage) -> Vec<&'r Subagent> {
    if recorded.subagents.is_empty() {
        return Vec::new();
    }
    let calls: Vec<&str> = reply.tool_calls().map(|c| c.id.as_str()).collect();
    recorded
        .subagents
        .iter()
        .filter(|s| {
            s.parent_tool_call_id
                .as_deref()
                .is_some_and(|id| calls.contains(&id))
        })
        .collect()
}
