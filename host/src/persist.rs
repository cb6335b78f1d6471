//! Putting messages into a session the way a turn does, and shrinking a session's tool results.
//!
//! `ingest_and_append` is the one road into a session file: the engine's `ingest` sees the
//! message first and may replace it (the legacy engine caps an oversized tool result there,
//! keeping the original in the blob store), then the result is appended.
//!
//! `truncate_tool_results_in_session` is the in-session truncation of reference §4.2: the
//! oversized and aggregate plans, applied through the session's branch-and-reappend rewrite, so
//! the originals stay in the file on the abandoned branch.

use std::sync::Arc;

use rampart_context::guards::persistence::{PersistenceGuard, PersistenceOptions};
use rampart_context::guards::tool_result::plan_session_truncation_capped;
use rampart_engine_api::protocol::{IngestParams, ModelRef, SessionRef, TranscriptRewriteResult};
use rampart_engine_api::{AgentMessage, SharedMessage};
use rampart_sessions::entry::EntryBody;
use rampart_sessions::{Session, SessionError};

use crate::blobs::BlobStore;
use crate::engine::slot::{EngineSlot, SlotCallError};

/// Why a message could not be persisted.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    /// The engine failed in a way the slot could not absorb (a required engine).
    #[error(transparent)]
    Engine(#[from] SlotCallError),
    /// The session file could not be written.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The original of a capped result could not be kept, so nothing was written.
    #[error(transparent)]
    Blob(crate::blobs::BlobError),
}

/// What happened to one message on its way in.
#[derive(Debug, Clone)]
pub struct Persisted {
    /// The entry id it was stored under.
    pub entry_id: String,
    /// True when the engine replaced it (for example capped it).
    pub replaced: bool,
}

/// Runs `message` through the engine's `ingest`, then appends what comes out.
pub fn ingest_and_append(
    slot: &EngineSlot,
    session: &mut Session,
    message: SharedMessage,
    model: Option<ModelRef>,
) -> Result<Persisted, PersistError> {
    let result = slot.ingest(IngestParams {
        session: session_ref(session),
        message: Some(message.clone()),
        is_heartbeat: false,
        model,
    })?;
    let replaced = result.replacement.is_some();
    let stored = result.replacement.unwrap_or(message);
    let entry_id = session.append_shared(stored)?;
    Ok(Persisted { entry_id, replaced })
}

/// The persistence guard in front of a session (reference §4.3): pending tool calls get a
/// synthetic error result when the transcript moves on without their results, and a tool result
/// too large for the window is capped, with its original in the blob store. Calls of aborted or
/// errored turns get no synthetic result.
#[derive(Debug)]
pub struct SessionWriter {
    guard: PersistenceGuard,
    blobs: Option<BlobStore>,
    caps: Vec<CapRecord>,
}

/// A tool result the host's persistence guard capped on its way into the session, for the run
/// loop's `ingest_cap` event (an engine that caps reports its own).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CapRecord {
    /// The tool call whose result was capped.
    pub tool_call_id: String,
    /// The tool whose result was capped.
    pub tool_name: String,
    /// Characters of the original text.
    pub original_chars: usize,
    /// The blob holding the original, when the host stored it.
    pub blob: Option<String>,
}

impl SessionWriter {
    /// A writer for a model with `context_window` tokens. Without a blob store nothing is
    /// capped here: the original could not be kept, and losing it is never the fallback.
    pub fn new(
        context_window: u64,
        tool_result_max_chars: usize,
        blobs: Option<BlobStore>,
    ) -> Self {
        let opts = PersistenceOptions {
            context_window: if blobs.is_some() { context_window } else { 0 },
            tool_result_max_chars: if blobs.is_some() {
                tool_result_max_chars
            } else {
                usize::MAX
            },
            ..PersistenceOptions::default()
        };
        Self {
            guard: PersistenceGuard::new(opts),
            blobs,
            caps: Vec::new(),
        }
    }

    /// Runs `message` through the engine's `ingest` and the guard, then appends what comes out
    /// (possibly synthetic results first). Returns the entry ids written, in order.
    pub fn append(
        &mut self,
        slot: &EngineSlot,
        session: &mut Session,
        message: SharedMessage,
        model: Option<ModelRef>,
    ) -> Result<Vec<String>, PersistError> {
        let messages = self.persisted(slot, session, &session_ref(session), message, model)?;
        let mut ids = Vec::with_capacity(messages.len());
        for m in messages {
            ids.push(session.append_shared(m)?);
        }
        Ok(ids)
    }

    /// [`SessionWriter::append`] for several messages, written to the session in one append
    /// (one write under one lock): a proxied client's first request can carry a whole
    /// conversation, hundreds of messages. Nothing is written when any of them fails.
    pub fn append_many(
        &mut self,
        slot: &EngineSlot,
        session: &mut Session,
        messages: Vec<SharedMessage>,
        model: Option<ModelRef>,
    ) -> Result<Vec<String>, PersistError> {
        let mut bodies = Vec::with_capacity(messages.len());
        // One reference for the batch: made per message, writing its path as text was 1.4 % of
        // the instructions of a first request.
        let reference = session_ref(session);
        for message in messages {
            for m in self.persisted(slot, session, &reference, message, model.clone())? {
                bodies.push(EntryBody::from_shared(m));
            }
        }
        Ok(session.append_all(bodies)?)
    }

    /// What `message` becomes in the session: the engine's `ingest`, the host's cap (the
    /// original kept in the blob store), the guard's synthetic results, lines fitted.
    fn persisted(
        &mut self,
        slot: &EngineSlot,
        session: &Session,
        reference_to_session: &SessionRef,
        message: SharedMessage,
        model: Option<ModelRef>,
    ) -> Result<Vec<SharedMessage>, PersistError> {
        let result = slot.ingest(IngestParams {
            session: reference_to_session.clone(),
            message: Some(message.clone()),
            is_heartbeat: false,
            model,
        })?;
        // An engine that caps reports it itself (`ingest_cap` from the engine); this records
        // only what the host's own guard caps, so nothing is counted twice.
        let message = result.replacement.unwrap_or(message);
        let mut reference = None;
        if self.guard.would_cap(&message)
            && let Some(blobs) = &self.blobs
        {
            let text = full_text(&message);
            let blob = blobs.put(text.as_bytes()).map_err(PersistError::Blob)?;
            if let AgentMessage::ToolResult(r) = &*message {
                self.caps.push(CapRecord {
                    tool_call_id: r.tool_call_id.clone(),
                    tool_name: r.tool_name.clone(),
                    original_chars: text.chars().count(),
                    blob: Some(blob.clone()),
                });
            }
            reference = Some(blob);
        }
        let capped_call = match (&*message, &reference) {
            (AgentMessage::ToolResult(r), Some(_)) => Some(r.tool_call_id.clone()),
            _ => None,
        };
        // A message the guard leaves as it is stays the same allocation: a first request's
        // whole conversation passes here, shared with the server's memo of the request, and
        // the session stores it without a copy.
        let out = self.guard.on_shared_with_ref(message, reference.as_deref());
        out.messages
            .into_iter()
            .map(|mut m| {
                // The capped result names its original's blob in a field of its own (a new
                // message, so this copies nothing).
                if let (AgentMessage::ToolResult(r), Some(call), Some(blob)) =
                    (&*m, &capped_call, &reference)
                    && &r.tool_call_id == call
                    && let AgentMessage::ToolResult(r) = Arc::make_mut(&mut m)
                {
                    r.extra.insert(
                        rampart_message::ORIGINAL_BLOB_KEY.to_owned(),
                        serde_json::Value::String(blob.clone()),
                    );
                }
                m
            })
            .map(|m| self.fit_line(session, m))
            .collect()
    }

    /// `message` with content too large for one session line moved to the blob store (see
    /// [`crate::spill`]); unchanged without a blob store, in which case the session refuses an
    /// oversized line with its own error.
    fn fit_line(
        &self,
        session: &Session,
        message: SharedMessage,
    ) -> Result<SharedMessage, PersistError> {
        let Some(blobs) = &self.blobs else {
            return Ok(message);
        };
        let limit = session.options().load.max_line_bytes;
        match crate::spill::spill_oversized(&message, blobs, limit).map_err(PersistError::Blob)? {
            Some((spilled, _)) => Ok(Arc::new(spilled)),
            None => Ok(message),
        }
    }

    /// The tool results capped since the last call.
    pub fn take_caps(&mut self) -> Vec<CapRecord> {
        std::mem::take(&mut self.caps)
    }

    /// Ends a turn: pending calls get their synthetic results now.
    pub fn finish_turn(&mut self, session: &mut Session) -> Result<Vec<String>, PersistError> {
        let mut ids = Vec::new();
        for m in self.guard.flush() {
            ids.push(session.append_message(m)?);
        }
        session.sync()?;
        Ok(ids)
    }
}

/// The engine API's view of `session`: its id and file, and the session it replaced when it was
/// started over (`previousSessionId`). The one place a `SessionRef` is made from a session, so
/// every engine call carries the same facts.
pub(crate) fn session_ref(session: &Session) -> SessionRef {
    SessionRef {
        session_id: session.header().id.clone(),
        session_key: None,
        session_file: Some(session.path().display().to_string()),
        previous_session_id: session.header().previous_session_id.clone(),
    }
}

fn full_text(message: &AgentMessage) -> String {
    match message {
        AgentMessage::ToolResult(m) => m.content.joined_text(),
        _ => String::new(),
    }
}

/// Truncates the tool results of the active branch that are oversized for `context_window`
/// tokens, or that together exceed the aggregate budget, by rewriting them on a new branch.
pub fn truncate_tool_results_in_session(
    session: &mut Session,
    context_window: u64,
    tool_result_max_chars: usize,
) -> Result<TranscriptRewriteResult, SessionError> {
    // The message entries of the active branch, with their ids.
    let branch: Vec<(String, &AgentMessage)> = session
        .tree()
        .active_branch()
        .into_iter()
        .filter_map(|e| match &e.body {
            EntryBody::Message(m) => Some((e.id.clone(), &*m.message)),
            _ => None,
        })
        .collect();
    if branch.is_empty() {
        return Ok(TranscriptRewriteResult {
            reason: Some("empty session".into()),
            ..Default::default()
        });
    }
    let messages: Vec<&AgentMessage> = branch.iter().map(|(_, m)| *m).collect();
    let plan = plan_session_truncation_capped(&messages, context_window, tool_result_max_chars);
    if plan.is_empty() {
        return Ok(TranscriptRewriteResult {
            reason: plan.skip_reason.map(str::to_string),
            ..Default::default()
        });
    }
    let replacements: Vec<(String, AgentMessage)> = plan
        .edits
        .iter()
        .map(|(i, m)| (branch[*i].0.clone(), m.clone()))
        .collect();
    let result = session.rewrite(&replacements)?;
    tracing::info!(
        session = %session.header().id,
        truncated = plan.edits.len(),
        bytes_freed = result.bytes_freed,
        "{}",
        plan.log_line()
    );
    Ok(result)
}
