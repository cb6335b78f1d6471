//! `legacy`: the built-in context engine, owned by the host.
//!
//! It behaves as OpenClaw's legacy engine (reference §2.2): `assemble` passes the host's
//! messages through with `estimatedTokens: 0` ("the caller counts"), pruned in memory when
//! `contextPruning` is on (layer 4), and `compact` summarises the older history in safeguard
//! mode (layer 3) with the host's compaction model, or with the embedded extractive summariser
//! when the host has none.
//!
//! Layer 2 of the defence lives in `ingest`: a tool result larger than
//! `min(window · 0.3 · 4, contextLimits.toolResultMaxChars)` (at least 2,000 characters kept) is
//! capped before it reaches the session. Unlike OpenClaw, the full original is kept: it goes to
//! the host's blob store first, and the capped message names the blob. When the host has no blob
//! store, nothing is capped at ingest (the session keeps the full result and the in-memory
//! guards shorten what the model sees): losing the user's data is never the fallback.
//!
//! The crate is an rlib linked into the host; `rampart-legacy-engine` wraps it as a cdylib so the
//! same engine can also be loaded through the ABI (a library may export only one engine header,
//! which is why the export lives in that separate crate).

use std::sync::Arc;

use rampart_context::compaction::CompactionSettings;
use rampart_context::events::{Event, IngestCap, Prune};
use rampart_context::guards::tool_result::{DEFAULT_MAX_LIVE_TOOL_RESULT_CHARS, cap_at_ingest};
use rampart_context::pruning::{self, CacheTouch, EffectiveSettings, PruneMemo, PruneOptions};
use rampart_engine_api::host::BlobPutRequest;
use rampart_engine_api::protocol::{
    AssembleParams, AssembleResult, CompactParams, CompactResult, EngineInfo, IngestParams,
    IngestResult, MaintainParams, ProtocolInfo, TranscriptRewriteResult,
};
use rampart_engine_api::{
    AgentMessage, CallContext, ContextEngine, EngineError, EngineFactory, EngineInit, ErrorKind,
    Host, LogLevel,
};

mod compact;

/// The id no plugin may take.
pub const LEGACY_ID: &str = "legacy";

/// OpenClaw's default window when nothing says otherwise (`DEFAULT_CONTEXT_TOKENS`).
pub const DEFAULT_CONTEXT_TOKENS: u64 = 200_000;

/// OpenClaw's legacy engine.
#[derive(Debug)]
pub struct LegacyEngine {
    host: Option<Host>,
    tool_result_max_chars: usize,
    context_tokens: Option<u64>,
    /// Layer 4: `contextPruning` when its mode is `cache-ttl`, else `None`.
    pruning: Option<EffectiveSettings>,
    /// Per-message char counts and pruned copies, kept across turns so a turn costs
    /// O(messages).
    prune_memo: PruneMemo,
    /// Layer 3: `compaction`.
    compactor: compact::Compactor,
}

impl LegacyEngine {
    /// Builds the engine from its config: the host's `agents.defaults` table with
    /// `plugins.engines.legacy.config` laid over it, under OpenClaw's key names
    /// (`contextLimits.toolResultMaxChars`, `contextTokens`). `host` gives it the blob store.
    pub fn new(config: serde_json::Value, host: Option<Host>) -> Result<Self, EngineError> {
        let positive = |pointer: &str| -> Result<Option<u64>, EngineError> {
            match config.pointer(pointer) {
                None | Some(serde_json::Value::Null) => Ok(None),
                Some(v) => match v.as_u64() {
                    Some(n) if n > 0 => Ok(Some(n)),
                    _ => Err(EngineError::new(
                        ErrorKind::InvalidParams,
                        format!(
                            "`{}` must be a positive integer, found {v}",
                            pointer.trim_start_matches('/').replace('/', ".")
                        ),
                    )),
                },
            }
        };
        let tool_result_max_chars = positive("/contextLimits/toolResultMaxChars")?
            .map_or(DEFAULT_MAX_LIVE_TOOL_RESULT_CHARS, |n| n as usize);
        let pruning = match config.get("contextPruning") {
            None => None,
            Some(raw) => pruning::effective(raw)
                .map_err(|e| EngineError::new(ErrorKind::InvalidParams, e.to_string()))?,
        };
        let compaction = match config.get("compaction") {
            None => CompactionSettings::default(),
            Some(raw) => CompactionSettings::from_value(raw)
                .map_err(|e| EngineError::new(ErrorKind::InvalidParams, e.to_string()))?,
        };
        Ok(Self {
            host,
            tool_result_max_chars,
            context_tokens: positive("/contextTokens")?,
            pruning,
            prune_memo: PruneMemo::new(),
            compactor: compact::Compactor::new(compaction),
        })
    }

    /// The engine with every setting at its default.
    pub fn with_defaults(host: Option<Host>) -> Self {
        Self {
            host,
            tool_result_max_chars: DEFAULT_MAX_LIVE_TOOL_RESULT_CHARS,
            context_tokens: None,
            pruning: None,
            prune_memo: PruneMemo::new(),
            compactor: compact::Compactor::new(CompactionSettings::default()),
        }
    }

    /// The per-result cap in characters before the window share applies.
    pub fn tool_result_max_chars(&self) -> usize {
        self.tool_result_max_chars
    }
}

impl EngineFactory for LegacyEngine {
    fn create(init: EngineInit, host: Host) -> Result<Self, EngineError> {
        Self::new(init.config, Some(host))
    }
}

/// The wall clock in Unix ms, for hosts that do not send their own.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The text of a tool result, as it will be stored in the blob.
fn tool_result_text(message: &AgentMessage) -> Option<String> {
    match message {
        AgentMessage::ToolResult(m) => Some(m.content.joined_text()),
        _ => None,
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

    fn ingest(&self, cx: &CallContext<'_>, p: IngestParams) -> Result<IngestResult, EngineError> {
        let Some(message) = p.message else {
            return Ok(IngestResult::default());
        };
        let window = p
            .model
            .as_ref()
            .and_then(|m| m.context_window)
            .or(self.context_tokens)
            .unwrap_or(DEFAULT_CONTEXT_TOKENS);
        // Cheap test first: most messages are not oversized tool results.
        if cap_at_ingest(&message, window, self.tool_result_max_chars, None).is_none() {
            return Ok(IngestResult::default());
        }
        let Some(host) = &self.host else {
            return Ok(IngestResult::default());
        };
        let Some(original) = tool_result_text(&message) else {
            return Ok(IngestResult::default());
        };
        let stored = host.put_blob(&BlobPutRequest {
            session_id: Some(p.session.session_id.clone()),
            media_type: "text/plain".into(),
            content: original,
        });
        let reference = match stored {
            Ok(r) => r.reference,
            Err(e) => {
                // Keeping the whole result beats losing it; say why it was not capped.
                cx.host().log(
                    LogLevel::Warn,
                    "rampart::legacy",
                    &format!(
                        "tool result not capped at ingest: the original could not be kept ({e})"
                    ),
                    &serde_json::Value::Null,
                );
                return Ok(IngestResult::default());
            }
        };
        let Some((mut capped, report)) = cap_at_ingest(
            &message,
            window,
            self.tool_result_max_chars,
            Some(&reference),
        ) else {
            return Ok(IngestResult::default());
        };
        // The capped result names its original in a field of its own, not only in its notice:
        // an engine that keeps every message reads it back with `blobs.get`.
        if let rampart_engine_api::AgentMessage::ToolResult(r) = &mut capped {
            r.extra.insert(
                rampart_engine_api::message::ORIGINAL_BLOB_KEY.to_owned(),
                serde_json::Value::String(reference.clone()),
            );
        }
        cx.host().log(
            LogLevel::Info,
            "rampart::legacy",
            "tool result capped at ingest",
            &serde_json::json!({
                "capChars": report.cap_chars,
                "originalChars": report.original_chars,
                "omittedChars": report.omitted_chars,
                "blob": reference,
            }),
        );
        let _ = host.emit_event(
            &Event::IngestCap(IngestCap {
                tool_call_id: message.tool_call_id().map(str::to_string),
                tool_name: match &*message {
                    rampart_engine_api::AgentMessage::ToolResult(r) => Some(r.tool_name.clone()),
                    _ => None,
                },
                original_chars: report.original_chars as u64,
                cap_chars: Some(report.cap_chars as u64),
                omitted_chars: Some(report.omitted_chars as u64),
                blob: Some(reference.clone()),
            })
            .envelope(Some(p.session.session_id.clone())),
        );
        Ok(IngestResult {
            ingested: false,
            replacement: Some(Arc::new(capped)),
        })
    }

    /// Passes the host's messages through, pruned in memory when `contextPruning` is on and
    /// the provider's prompt cache has expired (layer 4). The session is never changed.
    fn assemble(
        &self,
        cx: &CallContext<'_>,
        p: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        let pass = |messages| AssembleResult {
            messages,
            estimated_tokens: 0,
            system_prompt_addition: None,
        };
        let Some(settings) = &self.pruning else {
            return Ok(pass(p.messages));
        };
        let now = p.now_ms.unwrap_or_else(now_ms);
        let touch = p.cache_touched_at.map(CacheTouch::new);
        if !pruning::gate(now, touch.as_ref(), settings.ttl_ms) {
            return Ok(pass(p.messages));
        }
        let window = p
            .model
            .as_ref()
            .and_then(|m| m.context_window)
            .or(p.token_budget)
            .or(self.context_tokens)
            .unwrap_or(DEFAULT_CONTEXT_TOKENS);
        let (messages, report) = pruning::prune_context_messages_with(
            &p.messages,
            window,
            settings,
            PruneOptions::default(),
            Some(&self.prune_memo),
        );
        if report.changed() {
            let _ = cx.host().emit_event(
                &Event::Prune(Prune {
                    soft_trimmed: report.soft_trimmed as u64,
                    hard_cleared: report.hard_cleared as u64,
                    chars_before: report.chars_before,
                    chars_after: report.chars_after,
                    pruned_chars: report.chars_before.saturating_sub(report.chars_after),
                    ratio_before: report.ratio_before,
                    ratio_after: report.ratio_after,
                })
                .envelope(Some(p.session.session_id.clone())),
            );
        }
        Ok(pass(messages))
    }

    /// Layer 3: summarises the older history with the host's compaction model (or the
    /// embedded extractive summariser when there is none). See [`compact`].
    fn compact(
        &self,
        cx: &CallContext<'_>,
        p: CompactParams,
    ) -> Result<CompactResult, EngineError> {
        Ok(self.compactor.compact(cx, p))
    }

    /// Prepares the next compaction ahead of need when the host asks (`prepareAt`), so that
    /// the compaction the budget triggers swaps a ready summary in. Nothing else to maintain:
    /// the session is never rewritten here.
    fn maintain(
        &self,
        cx: &CallContext<'_>,
        p: MaintainParams,
    ) -> Result<TranscriptRewriteResult, EngineError> {
        if let Some(request) = p.prepare_compaction {
            self.compactor.prepare(cx, request);
        }
        Ok(TranscriptRewriteResult::default())
    }
}
