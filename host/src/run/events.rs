//! The run loop's decisions as events: every layer that acts says so, with its figures.
//!
//! Why events and not only logs: a replay's report, a test and a user's `--events FILE` all need
//! the same facts in a machine-readable form (which layer did what, at which turn and attempt,
//! how many tokens), and `tracing` alone loses the structure once formatted.

use rampart_engine_api::host::EngineEvent;
use serde_json::Value;

use crate::engine::services::EventSink;
pub use crate::engine::services::RecordedEvent;

/// The source name host events carry, beside engine ids.
pub const HOST_SOURCE: &str = "host";

/// Every kind of decision the run loop reports, in snake_case on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// Layer 1: a model's window is below the warning threshold; the turn goes on.
    GuardWarn,
    /// Layer 1: a model's window is below the minimum; it was skipped without a request.
    GuardBlock,
    /// An oversized tool result was capped when it entered the session.
    IngestCap,
    /// The hygiene choke point changed the request.
    Hygiene,
    /// The engine's `assemble` failed; the hygiene output was sent instead.
    AssembleFailed,
    /// Layer 2: the in-memory tool-loop guard truncated results of this request.
    ToolLoopTruncation,
    /// The pre-prompt precheck's decision.
    PrecheckRoute,
    /// Layer 4: context pruning shortened the request.
    Prune,
    /// A compaction began.
    CompactionStart,
    /// A compaction ended (compacted or not).
    CompactionEnd,
    /// Layer 2: tool results were truncated in the session.
    TruncationPass,
    /// A request went to the model.
    Request,
    /// The model answered.
    Response,
    /// The model (or the precheck, or the tool-loop guard) said the prompt does not fit.
    Overflow,
    /// The attempt is retried after a recovery step.
    Retry,
    /// The turn stopped without an answer.
    GiveUp,
}

impl EventKind {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::GuardWarn => "guard_warn",
            Self::GuardBlock => "guard_block",
            Self::IngestCap => "ingest_cap",
            Self::Hygiene => "hygiene",
            Self::AssembleFailed => "assemble_failed",
            Self::ToolLoopTruncation => "tool_loop_truncation",
            Self::PrecheckRoute => "precheck_route",
            Self::Prune => "prune",
            Self::CompactionStart => "compaction_start",
            Self::CompactionEnd => "compaction_end",
            Self::TruncationPass => "truncation_pass",
            Self::Request => "request",
            Self::Response => "response",
            Self::Overflow => "overflow",
            Self::Retry => "retry",
            Self::GiveUp => "give_up",
        }
    }
}

/// Publishes run-loop events to the sink (tracing and `--events FILE`) and keeps a copy for
/// whoever drives the loop (the replay's per-turn row and report).
#[derive(Debug, Clone)]
pub struct RunEvents {
    sink: EventSink,
    session_id: Option<String>,
}

impl RunEvents {
    /// Events of one session, published to `sink`.
    /// Starts the sink's recording, so engine events (a prune, an engine's own compaction
    /// events) are read back together with the host's. Pass the sink the engine slot was
    /// resolved with (or a clone of it): engines publish to that one.
    pub fn new(sink: EventSink, session_id: Option<String>) -> Self {
        sink.start_recording();
        Self { sink, session_id }
    }

    /// The sink events go to; engines' services publish there too.
    pub fn sink(&self) -> &EventSink {
        &self.sink
    }

    /// Records a host decision.
    pub fn emit(&self, kind: EventKind, data: Value) {
        let event = EngineEvent {
            kind: kind.as_str().to_string(),
            session_id: self.session_id.clone(),
            data,
        };
        self.sink.emit(HOST_SOURCE, &event);
    }

    /// Takes the events recorded since the last call, the engines' included.
    pub fn drain(&self) -> Vec<RecordedEvent> {
        self.sink.drain()
    }
}
