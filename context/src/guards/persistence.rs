//! The persistence guard (reference §4.3): what the host actually writes when it appends
//! messages to a session.
//!
//! Why: a session file outlives the process. A tool call whose result never arrived (the tool
//! crashed, the user interrupted, the process died) leaves a transcript every provider rejects,
//! and a 5 MB tool result written once is carried by every later turn. This guard closes both
//! holes at the one place every message passes: pending calls get a synthetic error result
//! before the conversation moves on, and tool results are capped before they are written.
//!
//! It is a pure state machine: the host feeds it each message and persists what it returns, in
//! order. Storing the original of a capped result (as a blob) is the host's part; the guard
//! names the blob in the notice when the host passes its reference.

use super::tool_result::{
    CapReport, DEFAULT_MAX_LIVE_TOOL_RESULT_CHARS, cap_at_ingest, ingest_cap_chars,
    tool_result_text_len,
};
use std::sync::Arc;

use rampart_message::{AgentMessage, SharedMessage, StopReason};

/// The text of a synthetic result. It says what happened and that Rampart inserted it, so
/// neither the model nor a person takes it for the tool's output.
pub const SYNTHETIC_RESULT_TEXT: &str = "[rampart] missing tool result: this call never got a \
     result in the session history, so this error result was inserted to keep the transcript \
     valid.";

/// The tool name used when neither the result nor its call names the tool.
pub const UNKNOWN_TOOL_NAME: &str = "unknown";

/// How the guard behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PersistenceOptions {
    /// Insert synthetic error results for calls left without one (the default). When off,
    /// pending calls are forgotten instead, and transcript repair must fix the file later.
    pub allow_synthetic_tool_results: bool,
    /// The per-result cap in characters (`toolResultMaxChars`).
    pub tool_result_max_chars: usize,
    /// The model's window in tokens, which lowers the cap to 30 % of it; 0 when unknown.
    pub context_window: u64,
}

impl Default for PersistenceOptions {
    fn default() -> Self {
        Self {
            allow_synthetic_tool_results: true,
            tool_result_max_chars: DEFAULT_MAX_LIVE_TOOL_RESULT_CHARS,
            context_window: 0,
        }
    }
}

/// What to persist for one appended message.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Persisted {
    /// The messages to append, in order.
    pub messages: Vec<AgentMessage>,
    /// Set when a tool result was capped: what the host records next to the stored original.
    pub cap: Option<CapReport>,
}

/// What [`PersistenceGuard::on_shared_with_ref`] persists: [`Persisted`], each message shared
/// (the one given, when unchanged).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SharedPersisted {
    /// The messages to append, in order.
    pub messages: Vec<SharedMessage>,
    /// The cap applied, when the message was a capped tool result.
    pub cap: Option<CapReport>,
}

/// The persistence state machine for one session.
#[derive(Debug, Clone, Default)]
pub struct PersistenceGuard {
    opts: PersistenceOptions,
    /// Calls without a result yet: id, tool name, and the call's timestamp (used for the
    /// synthetic result, which must sort between the call and what follows).
    pending: Vec<(String, String, u64)>,
}

impl PersistenceGuard {
    /// A guard with no pending calls.
    pub fn new(opts: PersistenceOptions) -> Self {
        Self {
            opts,
            pending: Vec::new(),
        }
    }

    /// Ids of the calls still waiting for a result, in call order.
    pub fn pending_ids(&self) -> impl Iterator<Item = &str> {
        self.pending.iter().map(|(id, _, _)| id.as_str())
    }

    /// The cap, in characters, applied to tool results.
    pub fn cap_chars(&self) -> usize {
        ingest_cap_chars(self.opts.context_window, self.opts.tool_result_max_chars)
    }

    /// True when `msg` would be capped: the host then stores the original first and passes its
    /// reference to [`Self::on_message_with_ref`].
    pub fn would_cap(&self, msg: &AgentMessage) -> bool {
        matches!(msg, AgentMessage::ToolResult(_)) && tool_result_text_len(msg) > self.cap_chars()
    }

    /// What to persist for `msg`, in order. See [`Self::on_message_with_ref`].
    pub fn on_message(&mut self, msg: AgentMessage) -> Vec<AgentMessage> {
        self.on_message_with_ref(msg, None).messages
    }

    /// What to persist for `msg`, in order:
    ///
    /// - a tool result: its blank tool name filled from its call (or `unknown`), capped, and its
    ///   call no longer pending; the notice of a capped result names `full_output_ref`;
    /// - anything else: first a synthetic error result for each pending call, then `msg`. An
    ///   assistant message's tool calls become pending, unless it stopped on `aborted` or
    ///   `error` (such calls never ran, and repair drops them).
    pub fn on_message_with_ref(
        &mut self,
        msg: AgentMessage,
        full_output_ref: Option<&str>,
    ) -> Persisted {
        let out = self.on_shared_with_ref(Arc::new(msg), full_output_ref);
        Persisted {
            // Nothing else holds them: each is moved out of its allocation, not copied.
            messages: out.messages.into_iter().map(Arc::unwrap_or_clone).collect(),
            cap: out.cap,
        }
    }

    /// [`Self::on_message_with_ref`] for a shared message: one the guard leaves as it is comes
    /// back as the same allocation, one it changes (a capped result, a result without a tool
    /// name) as a new one, and the synthetic results before it as new ones.
    ///
    /// Why: a proxied client's first request passes its whole conversation through here, and
    /// its messages are shared with the server's memo of the request; taking each by value
    /// copied every one, so the memo and the stored session held the conversation twice.
    pub fn on_shared_with_ref(
        &mut self,
        mut msg: SharedMessage,
        full_output_ref: Option<&str>,
    ) -> SharedPersisted {
        let AgentMessage::ToolResult(tr) = &*msg else {
            let mut messages: Vec<SharedMessage> = self.flush().into_iter().map(Arc::new).collect();
            self.note_calls(&msg);
            messages.push(msg);
            return SharedPersisted {
                messages,
                cap: None,
            };
        };
        let pending_name = self
            .pending
            .iter()
            .position(|(id, _, _)| *id == tr.tool_call_id)
            .map(|at| self.pending.remove(at).1);
        if tr.tool_name.trim().is_empty() {
            let name = pending_name
                .filter(|n| !n.trim().is_empty())
                .unwrap_or_else(|| UNKNOWN_TOOL_NAME.to_owned());
            if let AgentMessage::ToolResult(tr) = Arc::make_mut(&mut msg) {
                tr.tool_name = name;
            }
        }
        match cap_at_ingest(
            &msg,
            self.opts.context_window,
            self.opts.tool_result_max_chars,
            full_output_ref,
        ) {
            Some((capped, report)) => SharedPersisted {
                messages: vec![Arc::new(capped)],
                cap: Some(report),
            },
            None => SharedPersisted {
                messages: vec![msg],
                cap: None,
            },
        }
    }

    /// Remembers the calls of a finished assistant message until their results arrive.
    fn note_calls(&mut self, msg: &AgentMessage) {
        if let AgentMessage::Assistant(a) = msg
            && !matches!(a.stop_reason, StopReason::Aborted | StopReason::Error)
        {
            for call in msg.tool_calls() {
                if !self.pending.iter().any(|(id, _, _)| *id == call.id) {
                    self.pending
                        .push((call.id.clone(), call.name.clone(), a.timestamp));
                }
            }
        }
    }

    /// Synthetic error results for every pending call (none when synthetic results are off),
    /// and no call pending afterwards. The host calls it when the session is closed or the
    /// turn ends, so a crash between call and result cannot leave the file unpaired.
    pub fn flush(&mut self) -> Vec<AgentMessage> {
        let pending = std::mem::take(&mut self.pending);
        if !self.opts.allow_synthetic_tool_results {
            return Vec::new();
        }
        pending
            .into_iter()
            .map(|(id, name, timestamp)| {
                let name = if name.trim().is_empty() {
                    UNKNOWN_TOOL_NAME.to_owned()
                } else {
                    name
                };
                synthetic_result(id, name, timestamp)
            })
            .collect()
    }
}

fn synthetic_result(id: String, name: String, timestamp: u64) -> AgentMessage {
    AgentMessage::tool_result(id, name, SYNTHETIC_RESULT_TEXT, true, timestamp)
}
