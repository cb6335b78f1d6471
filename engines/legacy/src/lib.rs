//! `legacy`: the built-in context engine, owned by the host.
//!
//! At this stage it behaves as OpenClaw's legacy engine (reference §2.2): `ingest` stores
//! nothing (the session store persists messages), `assemble` passes the host's messages through
//! unchanged with `estimatedTokens: 0` ("the caller counts"), and `compact` reports that no
//! compaction runtime is present yet instead of pretending it compacted. The four layers of the
//! defence arrive in later work and live here.
//!
//! The crate is an rlib linked into the host; `rampart-legacy-engine` wraps it as a cdylib so the
//! same engine can also be loaded through the ABI (a library may export only one engine header,
//! which is why the export lives in that separate crate).

use rampart_engine_api::protocol::{
    AssembleParams, AssembleResult, CompactParams, CompactResult, EngineInfo, IngestParams,
    IngestResult, ProtocolInfo,
};
use rampart_engine_api::{
    CallContext, ContextEngine, EngineError, EngineFactory, EngineInit, Host,
};

/// The id no plugin may take.
pub const LEGACY_ID: &str = "legacy";

/// OpenClaw's legacy engine.
#[derive(Debug, Default)]
pub struct LegacyEngine {
    _config: serde_json::Value,
}

impl LegacyEngine {
    /// Builds the engine with its `plugins.engines.legacy.config` table.
    pub fn new(config: serde_json::Value) -> Self {
        Self { _config: config }
    }
}

impl EngineFactory for LegacyEngine {
    fn create(init: EngineInit, _host: Host) -> Result<Self, EngineError> {
        Ok(Self::new(init.config))
    }
}

impl ContextEngine for LegacyEngine {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            id: LEGACY_ID.to_string(),
            name: "Legacy Context Engine".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            owns_compaction: false,
            protocol: ProtocolInfo::default(),
        }
    }

    fn ingest(&self, _cx: &CallContext<'_>, _p: IngestParams) -> Result<IngestResult, EngineError> {
        Ok(IngestResult {
            ingested: false,
            replacement: None,
        })
    }

    fn assemble(
        &self,
        _cx: &CallContext<'_>,
        p: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        Ok(AssembleResult {
            messages: p.messages,
            estimated_tokens: 0,
            system_prompt_addition: None,
        })
    }

    fn compact(
        &self,
        _cx: &CallContext<'_>,
        _p: CompactParams,
    ) -> Result<CompactResult, EngineError> {
        Ok(CompactResult {
            ok: false,
            compacted: false,
            reason: Some("no compaction runtime in this build of the legacy engine".to_string()),
            result: None,
        })
    }
}
