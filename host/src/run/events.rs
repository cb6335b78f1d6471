//! The run loop's decisions as events: every layer that acts says so, with its figures.
//!
//! Why events and not only logs: a replay's report, a test and a user's `--events FILE` all need
//! the same facts in a machine-readable form (which layer did what, at which turn and attempt,
//! how many tokens), and `tracing` alone loses the structure once formatted.

pub use rampart_context::events::*;

use crate::engine::services::EventSink;
pub use crate::engine::services::RecordedEvent;

/// The source name host events carry, beside engine ids.
pub const HOST_SOURCE: &str = "host";

/// Publishes run-loop events to the sink (tracing, `--events FILE`, serve's live page), and,
/// when made by [`RunEvents::recording`], keeps a copy for whoever drives the loop and drains
/// it (the replay's per-turn row and report, `rampart compact`'s answer).
#[derive(Debug, Clone)]
pub struct RunEvents {
    sink: EventSink,
    session_id: Option<String>,
}

impl RunEvents {
    /// Events of one session, published to `sink` and kept nowhere. Why not kept: a
    /// long-lived server (`rampart serve`) never reads them back, and a copy of every event of
    /// every request was memory that only grew (about 2 KB a request; 250 MB after a few tens
    /// of thousands). Pass the sink the engine slot was resolved with (or a clone of it):
    /// engines publish to that one.
    pub fn new(sink: EventSink, session_id: Option<String>) -> Self {
        Self { sink, session_id }
    }

    /// [`RunEvents::new`], also keeping every event (the engines' included, so a prune or an
    /// engine's own compaction is read back with the host's) until [`RunEvents::drain`] takes
    /// them. For whoever drains after each turn or once at the end of a short command.
    pub fn recording(sink: EventSink, session_id: Option<String>) -> Self {
        sink.start_recording();
        Self::new(sink, session_id)
    }

    /// The sink events go to; engines' services publish there too.
    pub fn sink(&self) -> &EventSink {
        &self.sink
    }

    /// Records a host decision.
    pub fn emit(&self, event: Event) {
        self.sink
            .emit(HOST_SOURCE, &event.envelope(self.session_id.clone()));
    }

    /// Takes the events recorded since the last call, the engines' included.
    pub fn drain(&self) -> Vec<RecordedEvent> {
        self.sink.drain()
    }
}
