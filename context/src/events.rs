//! The events of the defence, typed: what the run loop and the engines report, in one set of
//! structs that the emitters build and the readers (the replay's rows and summary, the HTML
//! report, `rampart compact`, tests) read, instead of JSON written in one place and read back
//! by string key in another.
//!
//! On the wire an event is the engine API's envelope, `EngineEvent { kind, data }`: `kind` is
//! the snake_case name of the variant and `data` its struct in camelCase, so `--events FILE`
//! lines keep their shape. A kind this version does not know (a third-party engine's own) stays
//! a raw envelope and is never an error.
//!
//! Each event names its subject where it has one: the turn and attempt of the run loop, the
//! tool call and tool of a capped result.

use rampart_engine_api::host::EngineEvent;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The field of an event's `data` that holds a wall-clock duration in milliseconds
/// ([`CompactionEnd::duration_ms`], [`CompactionPrepared::duration_ms`]; a third-party engine's
/// own kinds should use the same name). It is a measurement of the machine, not a decision of
/// the defence: a replay's events file leaves it out unless asked (`rampart replay --timings`),
/// so the file is the same on every run.
pub const DURATION_FIELD: &str = "durationMs";

/// One decision of the defence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "data", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    /// Layer 1: a model's window is below the warning threshold; the turn goes on.
    GuardWarn(GuardWarn),
    /// Layer 1: a model's window is below the minimum; it was skipped without a request.
    GuardBlock(GuardBlock),
    /// An oversized tool result was capped when it entered the session.
    IngestCap(IngestCap),
    /// The hygiene choke point changed the request.
    Hygiene(Hygiene),
    /// The engine's `assemble` failed; the hygiene output was sent instead.
    AssembleFailed(AssembleFailed),
    /// Layer 2: the in-memory tool-loop guard shortened this request.
    ToolLoopTruncation(ToolLoopTruncation),
    /// The pre-prompt precheck's decision.
    PrecheckRoute(PrecheckRoute),
    /// Layer 4: context pruning shortened the request.
    Prune(Prune),
    /// A compaction began.
    CompactionStart(CompactionStart),
    /// A compaction ended (compacted or not).
    CompactionEnd(CompactionEnd),
    /// An engine prepared a compaction ahead of need (`maintain`), to swap in later.
    CompactionPrepared(CompactionPrepared),
    /// Before a compaction, durable facts were written to long-term memory.
    MemoryFlush(MemoryFlush),
    /// Layer 2: tool results were truncated in the session.
    TruncationPass(TruncationPass),
    /// A request went to the model.
    Request(Request),
    /// The model answered.
    Response(Response),
    /// The model (or the precheck, or the tool-loop guard) said the prompt does not fit.
    Overflow(Overflow),
    /// The attempt is retried after a recovery step.
    Retry(Retry),
    /// The turn stopped without an answer.
    GiveUp(GiveUp),
}

impl Event {
    /// The wire envelope of this event, for the session `session_id`.
    pub fn envelope(&self, session_id: Option<String>) -> EngineEvent {
        let (kind, data) = match serde_json::to_value(self) {
            Ok(Value::Object(mut map)) => (
                map.remove("kind")
                    .and_then(|k| k.as_str().map(str::to_string))
                    .unwrap_or_default(),
                map.remove("data").unwrap_or(Value::Null),
            ),
            // Serialising these structs cannot fail; were it to, the event says so.
            _ => ("unserialisable".to_string(), Value::Null),
        };
        EngineEvent {
            kind,
            session_id,
            data,
        }
    }

    /// The event an envelope holds; `None` for a kind this version does not know or data
    /// that does not fit it.
    pub fn from_envelope(kind: &str, data: &Value) -> Option<Self> {
        serde_json::from_value(serde_json::json!({ "kind": kind, "data": data })).ok()
    }

    /// The wire name of this event's kind.
    pub fn kind(&self) -> String {
        self.envelope(None).kind
    }

    /// What the event is about, for structured logs: the turn and attempt, the tool call.
    pub fn subject(&self) -> Subject<'_> {
        let mut subject = Subject::default();
        match self {
            Event::Request(r) => (subject.turn, subject.attempt) = (Some(r.turn), Some(r.attempt)),
            Event::Response(r) => (subject.turn, subject.attempt) = (Some(r.turn), Some(r.attempt)),
            Event::Overflow(o) => subject.attempt = Some(o.attempt),
            Event::Retry(r) => subject.attempt = Some(r.attempt),
            Event::CompactionStart(c) => subject.attempt = Some(c.attempt),
            Event::IngestCap(c) => {
                subject.tool_call_id = c.tool_call_id.as_deref();
                subject.tool_name = c.tool_name.as_deref();
            }
            _ => {}
        }
        subject
    }
}

/// What an event is about ([`Event::subject`]); absent parts are `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Subject<'a> {
    /// The turn of the session's run.
    pub turn: Option<u64>,
    /// The attempt of the turn.
    pub attempt: Option<u32>,
    /// The tool call.
    pub tool_call_id: Option<&'a str>,
    /// The tool.
    pub tool_name: Option<&'a str>,
}

/// [`Event::GuardWarn`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GuardWarn {
    /// `provider/model`.
    pub model: String,
    /// Its window, in tokens.
    pub window: u64,
}

/// [`Event::GuardBlock`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GuardBlock {
    /// The reference's log line for the blocked model.
    pub line: String,
}

/// [`Event::IngestCap`].
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct IngestCap {
    /// The tool call whose result was capped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// The tool that produced it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// Characters of the original result.
    pub original_chars: u64,
    /// The cap applied, in characters, when the capper reports it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cap_chars: Option<u64>,
    /// Characters of the original not in the persisted result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub omitted_chars: Option<u64>,
    /// The blob holding the original (`sha256:…`), when one was written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
}

/// [`Event::Hygiene`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hygiene {
    /// `history` (before `assemble`) or `assembled` (on what the engine returned).
    pub stage: String,
    /// The passes' report (`rampart_context::hygiene::HygieneReport`).
    pub report: Value,
}

/// [`Event::AssembleFailed`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssembleFailed {
    /// The engine whose `assemble` failed.
    pub engine: String,
    /// Why.
    pub error: String,
}

/// [`Event::ToolLoopTruncation`].
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ToolLoopTruncation {
    /// Executed tool calls' arguments shortened in the request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    /// Tool results shortened by the tool-loop guard.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report: Option<Value>,
}

/// [`Event::PrecheckRoute`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrecheckRoute {
    /// `fits`, `truncate_tool_results_only`, `compact_only` or `compact_then_truncate`.
    pub route: String,
    /// The prompt's estimate, with the safety factor, in tokens.
    pub estimated: u64,
    /// The model's window.
    pub window: u64,
    /// Tokens over the budget.
    pub overflow_tokens: u64,
    /// The prompt budget in real tokens: what the prompt may take below the window once the
    /// reserve is kept and the estimate's safety factor allowed for. Crossing it is what
    /// triggers a budget compaction. 0 from hosts that did not say.
    pub budget_tokens: u64,
}

/// [`Event::Prune`].
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Prune {
    /// Tool results soft-trimmed.
    pub soft_trimmed: u64,
    /// Tool results cleared.
    pub hard_cleared: u64,
    /// Estimate characters of the context before pruning.
    pub chars_before: u64,
    /// And after.
    pub chars_after: u64,
    /// `chars_before - chars_after`.
    pub pruned_chars: u64,
    /// The context's share of the window before pruning.
    pub ratio_before: f64,
    /// And after.
    pub ratio_after: f64,
}

/// [`Event::CompactionStart`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionStart {
    /// Why: `overflow`, `precheck`, `timeout`, `manual`.
    pub reason: String,
    /// The attempt of the turn.
    pub attempt: u32,
    /// The prompt size an overflow stated, when it did.
    pub observed_tokens: Option<u64>,
}

/// [`Event::CompactionEnd`].
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CompactionEnd {
    /// As in the start event.
    pub reason: String,
    /// Whether something was compacted.
    pub compacted: bool,
    /// Tokens of the history before.
    pub tokens_before: Option<u64>,
    /// And after.
    pub tokens_after: Option<u64>,
    /// How long it took.
    pub duration_ms: u64,
    /// Characters of the summary.
    pub summary_chars: Option<u64>,
    /// The engine's fallback level, when it reports one.
    pub fallback_level: Option<Value>,
    /// The parts summarised, when the engine reports them.
    pub parts: Option<Value>,
    /// Why it failed, when it did.
    pub error: Option<String>,
    /// The engine's reason when nothing was compacted.
    pub why: Option<String>,
    /// The summary was prepared ahead of need and swapped in: what it cost was reported by
    /// its [`CompactionPrepared`], and `duration_ms` is all the request waited.
    pub prepared: bool,
    /// The id of the `compaction` entry the host appended to the session, when it appended
    /// one: where a reader (`rampart serve`'s `/ui`) finds the summary and the first kept
    /// entry without the event carrying the summary's text. Absent from older hosts and when
    /// nothing was appended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry_id: Option<String>,
    /// The first entry the compaction kept verbatim (the entry's `firstKeptEntryId`), when
    /// one was appended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_kept_entry_id: Option<String>,
}

/// [`Event::CompactionPrepared`].
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CompactionPrepared {
    /// Whether the summary is ready (false: the preparation failed, or found nothing to do).
    pub ready: bool,
    /// Tokens of the history the summary replaces: what a summarising model reads.
    pub input_tokens: u64,
    /// Tokens of the summary: what it writes.
    pub output_tokens: u64,
    /// The first entry the prepared compaction keeps.
    pub first_kept_entry_id: Option<String>,
    /// How long the preparation took, off the request path.
    pub duration_ms: u64,
    /// True when it ran on a thread of its own (a real model), false when inline (the
    /// embedded summariser).
    pub background: bool,
    /// Why nothing is ready, when it is not.
    pub why: Option<String>,
}

/// [`Event::MemoryFlush`].
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MemoryFlush {
    /// The compaction cycle it ran in (compactions of the branch so far).
    pub cycle: u64,
    /// Why it ran: `tokens` (near the compaction trigger) or `transcriptSize`.
    pub reason: String,
    /// The note written to, relative to the workspace (`memory/2026-11-25.md`).
    pub note: String,
    /// Bytes appended to it (0: nothing to keep, or the write failed).
    pub bytes: u64,
    /// Who wrote it: `model`, or `extractive` (the embedded summariser, with the simulator).
    pub by: String,
    /// Model calls it made.
    pub calls: u32,
    /// What went wrong, when something did (the flush never fails a turn).
    pub error: Option<String>,
}

/// [`Event::TruncationPass`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TruncationPass {
    /// Whether the session changed.
    pub changed: bool,
    /// Entries rewritten.
    pub rewritten: u64,
    /// Bytes of message JSON no longer on the active branch.
    pub bytes_freed: u64,
    /// Why nothing changed.
    pub reason: Option<String>,
}

/// [`Event::Request`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    /// The turn of the session's run.
    pub turn: u64,
    /// The attempt of the turn.
    pub attempt: u32,
    /// `provider/model`.
    pub model: String,
    /// Its window.
    pub window: u64,
    /// The prompt's estimate.
    pub estimated_tokens: u64,
    /// Messages sent.
    pub messages: u64,
}

/// [`Event::Response`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Response {
    /// The turn.
    pub turn: u64,
    /// The attempt.
    pub attempt: u32,
    /// The prompt as the provider counted it.
    pub prompt_tokens: u64,
    /// The answer's tokens.
    pub output_tokens: u64,
    /// Transient failures retried before the answer.
    pub retries: u32,
}

/// [`Event::Overflow`].
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Overflow {
    /// The attempt.
    pub attempt: u32,
    /// The provider's text, or the guard's.
    pub message: String,
    /// What triggered it when not the provider's answer (`timeout`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trigger: Option<String>,
    /// The size the provider stated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_tokens: Option<u64>,
    /// The prompt's estimate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimated_tokens: Option<u64>,
    /// The model's window.
    pub window: u64,
}

/// [`Event::Retry`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Retry {
    /// The attempt that is retried.
    pub attempt: u32,
    /// After what: `compaction` or `truncation`.
    pub after: String,
}

/// [`Event::GiveUp`].
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GiveUp {
    /// `window_too_small`, `context_overflow`, `compaction_failure`, `provider`.
    pub kind: String,
    /// What the user reads.
    pub message: String,
    /// The last overflow text, for overflows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// The provider's error class, for provider failures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<String>,
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "events_tests.rs"]
mod tests;
