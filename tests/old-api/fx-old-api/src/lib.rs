//! Fixture: an engine written and built against `rampart-engine-api` 1.0.0 as it was before the
//! split (its message model, wire form and export macro came from that crate). It keeps the last
//! `keep` messages, and its `compact` calls back into the host (`clock.now`, `events.emit`), so
//! a test sees both directions of the ABI work with today's host.

use rampart_engine_api::host::EngineEvent;
use rampart_engine_api::protocol::{
    AssembleParams, AssembleResult, CompactParams, CompactResult, EngineInfo, IngestParams,
    IngestResult, ProtocolInfo,
};
use rampart_engine_api::{
    CallContext, ContextEngine, EngineError, EngineFactory, EngineInit, Host, serde_json,
};

/// Keeps the last `keep` messages.
pub struct OldKeepLast {
    keep: usize,
}

impl EngineFactory for OldKeepLast {
    fn create(init: EngineInit, _host: Host) -> Result<Self, EngineError> {
        Ok(Self {
            keep: init.config["keep"].as_u64().unwrap_or(3) as usize,
        })
    }
}

impl ContextEngine for OldKeepLast {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            id: "fx-old-api".into(),
            name: "built against the pre-split API".into(),
            version: "0.1.0".into(),
            owns_compaction: false,
            protocol: ProtocolInfo::default(),
        }
    }

    fn ingest(&self, _: &CallContext<'_>, _: IngestParams) -> Result<IngestResult, EngineError> {
        Ok(IngestResult::default())
    }

    fn assemble(
        &self,
        _: &CallContext<'_>,
        p: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        let start = p.messages.len().saturating_sub(self.keep);
        Ok(AssembleResult {
            messages: p.messages[start..].to_vec().into(),
            ..Default::default()
        })
    }

    fn compact(&self, cx: &CallContext<'_>, p: CompactParams) -> Result<CompactResult, EngineError> {
        let now = cx.host().now_ms();
        cx.host().emit_event(&EngineEvent {
            kind: "old_api_compact".into(),
            session_id: Some(p.session.session_id.clone()),
            data: serde_json::json!({ "messages": p.messages.len(), "clock": now }),
        })?;
        Ok(CompactResult {
            ok: true,
            compacted: false,
            reason: Some(format!("saw {} messages at {now}", p.messages.len())),
            result: None,
        })
    }
}

rampart_engine_api::export_engine!(OldKeepLast);
