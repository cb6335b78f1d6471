//! The [`ContextEngine`] trait every engine implements, and what each call receives.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::error::EngineError;
use crate::host::{Host, LogLevel};
use crate::protocol::{
    AfterTurnParams, AfterTurnResult, AssembleParams, AssembleResult, BootstrapParams,
    BootstrapResult, CompactParams, CompactResult, EngineInfo, IngestBatchParams,
    IngestBatchResult, IngestParams, IngestResult, MaintainParams, PrepareSubagentSpawnParams,
    PrepareSubagentSpawnResult, ProtocolInfo, SubagentEndedParams, TranscriptRewriteResult,
};

/// Something that says whether the current call has been cancelled. The host sets it when a
/// deadline passes or the user aborts; long-running engine work should poll it and stop early.
pub trait CancelFlag: Send + Sync {
    /// True once the call should stop.
    fn is_cancelled(&self) -> bool;
}

impl CancelFlag for AtomicBool {
    fn is_cancelled(&self) -> bool {
        self.load(Ordering::Relaxed)
    }
}

/// A flag that is never raised, for calls that cannot be cancelled (tests, tools).
#[derive(Debug, Default, Clone, Copy)]
pub struct NeverCancelled;

impl CancelFlag for NeverCancelled {
    fn is_cancelled(&self) -> bool {
        false
    }
}

/// What one engine call receives besides its parameters: the host's services, the cancellation
/// flag and the deadline. Borrowed, so an engine cannot keep it beyond the call.
pub struct CallContext<'a> {
    host: &'a Host,
    cancel: &'a dyn CancelFlag,
    deadline_unix_ms: Option<u64>,
}

impl<'a> CallContext<'a> {
    /// Builds a context. Hosts and the SDK do this; engine authors only need it in tests.
    pub fn new(host: &'a Host, cancel: &'a dyn CancelFlag, deadline_unix_ms: Option<u64>) -> Self {
        Self {
            host,
            cancel,
            deadline_unix_ms,
        }
    }

    /// The host's services: logging, events, `llm.complete`, session access, the clock.
    pub fn host(&self) -> &Host {
        self.host
    }

    /// True once the host wants this call to stop (deadline passed or user abort).
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// The wall-clock deadline of this call in Unix milliseconds, when there is one.
    pub fn deadline_unix_ms(&self) -> Option<u64> {
        self.deadline_unix_ms
    }

    /// Time left before the deadline; `None` when there is no deadline.
    pub fn remaining(&self) -> Option<Duration> {
        let deadline = self.deadline_unix_ms?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .ok()?
            .as_millis() as u64;
        Some(Duration::from_millis(deadline.saturating_sub(now)))
    }

    /// Fails with `Cancelled` when the call was cancelled: `cx.check_cancelled()?` between steps.
    pub fn check_cancelled(&self) -> Result<(), EngineError> {
        if self.is_cancelled() {
            Err(EngineError::new(
                crate::ErrorKind::Cancelled,
                "the host cancelled this call",
            ))
        } else {
            Ok(())
        }
    }
}

/// What the host hands an engine at construction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct EngineInit {
    /// The id the configuration selected this engine under; `info().id` must equal it.
    pub engine_id: String,
    /// The `plugins.engines.<id>.config` table, as JSON (an empty object when absent).
    pub config: serde_json::Value,
    /// The host's side of the handshake.
    pub host_protocol: ProtocolInfo,
    /// The most verbose level the host will record, so engines skip work for filtered logs.
    pub max_log_level: Option<LogLevel>,
}

/// How an engine is constructed. Separate from [`ContextEngine`] so the trait stays
/// object-safe.
pub trait EngineFactory: ContextEngine + Sized {
    /// Builds the engine from its configuration. `host` stays valid for the engine's lifetime.
    fn create(init: EngineInit, host: Host) -> Result<Self, EngineError>;
}

/// A context engine: OpenClaw's ContextEngine interface, method for method.
///
/// `ingest`, `assemble` and `compact` are required; the others default to "unsupported", which
/// tells the host to use its own default (for example per-message `ingest` instead of
/// `ingest_batch`). Methods take `&self` because the host may call from several threads; keep
/// mutable state behind a lock.
pub trait ContextEngine: Send + Sync + 'static {
    /// Who the engine is. Must be cheap and must not fail.
    fn info(&self) -> EngineInfo;

    /// One-time set-up for a session whose file already existed.
    fn bootstrap(
        &self,
        _cx: &CallContext<'_>,
        _params: BootstrapParams,
    ) -> Result<BootstrapResult, EngineError> {
        Err(EngineError::unsupported(crate::protocol::method::BOOTSTRAP))
    }

    /// A message arrived. Return `replacement` to persist something else instead.
    fn ingest(
        &self,
        cx: &CallContext<'_>,
        params: IngestParams,
    ) -> Result<IngestResult, EngineError>;

    /// Several messages arrived. Unsupported by default: the host then calls `ingest` for each.
    fn ingest_batch(
        &self,
        _cx: &CallContext<'_>,
        _params: IngestBatchParams,
    ) -> Result<IngestBatchResult, EngineError> {
        Err(EngineError::unsupported(
            crate::protocol::method::INGEST_BATCH,
        ))
    }

    /// Builds the messages of the next request.
    fn assemble(
        &self,
        cx: &CallContext<'_>,
        params: AssembleParams,
    ) -> Result<AssembleResult, EngineError>;

    /// Reduces the session.
    fn compact(
        &self,
        cx: &CallContext<'_>,
        params: CompactParams,
    ) -> Result<CompactResult, EngineError>;

    /// Housekeeping after a turn, a bootstrap or a compaction.
    fn maintain(
        &self,
        _cx: &CallContext<'_>,
        _params: MaintainParams,
    ) -> Result<TranscriptRewriteResult, EngineError> {
        Err(EngineError::unsupported(crate::protocol::method::MAINTAIN))
    }

    /// The turn finished. Unsupported by default: the host then uses `ingest_batch`/`ingest`.
    fn after_turn(
        &self,
        _cx: &CallContext<'_>,
        _params: AfterTurnParams,
    ) -> Result<AfterTurnResult, EngineError> {
        Err(EngineError::unsupported(
            crate::protocol::method::AFTER_TURN,
        ))
    }

    /// A child agent is about to be spawned.
    fn prepare_subagent_spawn(
        &self,
        _cx: &CallContext<'_>,
        _params: PrepareSubagentSpawnParams,
    ) -> Result<PrepareSubagentSpawnResult, EngineError> {
        Err(EngineError::unsupported(
            crate::protocol::method::PREPARE_SUBAGENT_SPAWN,
        ))
    }

    /// A child agent ended.
    fn on_subagent_ended(
        &self,
        _cx: &CallContext<'_>,
        _params: SubagentEndedParams,
    ) -> Result<(), EngineError> {
        Err(EngineError::unsupported(
            crate::protocol::method::ON_SUBAGENT_ENDED,
        ))
    }

    /// The engine is being retired. Release what you hold; the library itself stays loaded.
    fn dispose(&self) -> Result<(), EngineError> {
        Ok(())
    }

    /// A memory engine: find passages. Unsupported by default (a context engine).
    fn memory_search(
        &self,
        _cx: &CallContext<'_>,
        _params: crate::memory::MemorySearchParams,
    ) -> Result<crate::memory::MemorySearchResult, EngineError> {
        Err(EngineError::unsupported(
            crate::protocol::method::MEMORY_SEARCH,
        ))
    }

    /// A memory engine: read lines of a memory file. Unsupported by default.
    fn memory_get(
        &self,
        _cx: &CallContext<'_>,
        _params: crate::memory::MemoryGetParams,
    ) -> Result<crate::memory::MemoryGetResult, EngineError> {
        Err(EngineError::unsupported(
            crate::protocol::method::MEMORY_GET,
        ))
    }

    /// A memory engine: bring the index up to date. Unsupported by default.
    fn memory_sync(
        &self,
        _cx: &CallContext<'_>,
        _params: crate::memory::MemorySyncParams,
    ) -> Result<crate::memory::MemorySyncResult, EngineError> {
        Err(EngineError::unsupported(
            crate::protocol::method::MEMORY_SYNC,
        ))
    }

    /// A memory engine: what it holds. Unsupported by default.
    fn memory_status(
        &self,
        _cx: &CallContext<'_>,
    ) -> Result<crate::memory::MemoryStatus, EngineError> {
        Err(EngineError::unsupported(
            crate::protocol::method::MEMORY_STATUS,
        ))
    }

    /// Engine tools (1.2): the tools offered to the model in this session. An engine that
    /// overrides this announces [`crate::protocol::Feature::EngineTools`]. Unsupported by
    /// default (the host then offers none).
    fn tools_list(
        &self,
        _cx: &CallContext<'_>,
        _params: crate::tools::ToolsListParams,
    ) -> Result<crate::tools::ToolsListResult, EngineError> {
        Err(EngineError::unsupported(
            crate::protocol::method::TOOLS_LIST,
        ))
    }

    /// Engine tools (1.2): answer one call of a tool [`Self::tools_list`] offered.
    /// Unsupported by default.
    fn tools_call(
        &self,
        _cx: &CallContext<'_>,
        _params: crate::tools::ToolCallParams,
    ) -> Result<crate::tools::ToolCallResult, EngineError> {
        Err(EngineError::unsupported(
            crate::protocol::method::TOOLS_CALL,
        ))
    }
}
