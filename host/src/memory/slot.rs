//! The `memory` slot (`plugins.slots.memory`): which memory engine serves, and what happens
//! when it fails.
//!
//! Policy, as for the context engine: an engine that cannot be loaded, is not a memory engine,
//! or errors in a call is quarantined for the rest of the process with exactly one log line.
//! Unlike the context slot there is nothing to fall back to, so a quarantined slot means no
//! long-term memory: searches answer `disabled` with the reason (the model reads it and the
//! turn goes on), syncs and status report it. A memory failure never fails a turn.

use std::sync::{Arc, Mutex};

use rampart_engine_api::memory::{
    MemoryGetParams, MemoryGetResult, MemorySearchParams, MemorySearchResult, MemoryStatus,
    MemorySyncParams, MemorySyncResult,
};
use rampart_engine_api::method::{Call, MemoryStatusParams};
use rampart_engine_api::protocol::EngineKind;

use crate::engine::handle::EngineHandle;

/// The memory slot of a running host.
pub struct MemorySlot {
    configured: String,
    handle: Option<Arc<EngineHandle>>,
    quarantine: Mutex<Option<String>>,
}

impl std::fmt::Debug for MemorySlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemorySlot")
            .field("configured", &self.configured)
            .field("on", &self.is_on())
            .finish()
    }
}

/// What the model is told when memory is off.
pub const MEMORY_OFF_TEXT: &str = "memory search disabled";

impl MemorySlot {
    /// No memory (`plugins.slots.memory = "none"`).
    pub fn off() -> Self {
        Self {
            configured: crate::config::MEMORY_OFF.to_owned(),
            handle: None,
            quarantine: Mutex::new(None),
        }
    }

    /// The slot for engine `id`, given how loading it went. A library that is not a memory
    /// engine, or that failed to load, quarantines the slot (one line) and leaves memory off.
    pub fn with_engine(id: &str, loaded: Result<EngineHandle, String>) -> Self {
        let slot = Self {
            configured: id.to_owned(),
            handle: None,
            quarantine: Mutex::new(None),
        };
        match loaded {
            Ok(handle) if handle.info().kind() == EngineKind::Memory => {
                tracing::info!(engine = %id, origin = %handle.origin(), "memory engine loaded");
                Self {
                    handle: Some(Arc::new(handle)),
                    ..slot
                }
            }
            Ok(handle) => {
                let _ = handle.shutdown();
                slot.quarantine_now(
                    "load",
                    "it is a context engine, not a memory engine (it does not announce the \
                     `memoryEngine` feature); put it in plugins.slots.contextEngine, or name a \
                     memory engine here"
                        .to_owned(),
                );
                slot
            }
            Err(reason) => {
                slot.quarantine_now("load", reason);
                slot
            }
        }
    }

    /// The configured id (`memory-core`, a library's id, or `none`).
    pub fn configured_id(&self) -> &str {
        &self.configured
    }

    /// Whether memory serves now (configured, loaded, not quarantined).
    pub fn is_on(&self) -> bool {
        self.handle.is_some() && self.quarantined().is_none()
    }

    /// The quarantine line, when the engine failed.
    pub fn quarantined(&self) -> Option<String> {
        self.quarantine.lock().ok().and_then(|q| q.clone())
    }

    fn quarantine_now(&self, operation: &str, reason: String) {
        let line = format!(
            "memory engine \"{}\" failed during {operation}: {reason}; quarantined for this \
             process, continuing without long-term memory",
            self.configured
        );
        if let Ok(mut q) = self.quarantine.lock()
            && q.is_none()
        {
            tracing::error!(engine = %self.configured, operation, reason = %reason, "{line}");
            *q = Some(line);
        }
    }

    /// Why memory is unavailable, in words for a person or a model.
    fn why_off(&self) -> String {
        self.quarantined()
            .unwrap_or_else(|| MEMORY_OFF_TEXT.to_owned())
    }

    fn call<C: Call>(&self, params: C) -> Result<C::Output, String> {
        let Some(handle) = self
            .handle
            .as_ref()
            .filter(|_| self.quarantined().is_none())
        else {
            return Err(self.why_off());
        };
        handle.call(params).map_err(|e| {
            let method = C::METHOD.name();
            self.quarantine_now(method, e.to_string());
            self.why_off()
        })
    }

    /// `memory.search`; a failure is a `disabled` answer with the reason, never an error.
    pub fn search(&self, params: MemorySearchParams) -> MemorySearchResult {
        self.call(params)
            .unwrap_or_else(|error| MemorySearchResult {
                disabled: true,
                warning: Some("Memory search is unavailable.".to_owned()),
                action: Some(
                    "Answer without long-term memory, and tell the user if it matters.".to_owned(),
                ),
                error: Some(error),
                ..MemorySearchResult::default()
            })
    }

    /// `memory.get`; a failure is a `disabled` answer with the reason.
    pub fn get(&self, params: MemoryGetParams) -> MemoryGetResult {
        let path = params.path.clone();
        self.call(params).unwrap_or_else(|error| MemoryGetResult {
            path,
            disabled: true,
            error: Some(error),
            ..MemoryGetResult::default()
        })
    }

    /// `memory.sync`.
    pub fn sync(&self, params: MemorySyncParams) -> Result<MemorySyncResult, String> {
        self.call(params)
    }

    /// `memory.status`.
    pub fn status(&self) -> Result<MemoryStatus, String> {
        self.call(MemoryStatusParams {})
    }

    /// Retires the engine.
    pub fn shutdown(&self) {
        if let Some(handle) = &self.handle {
            let _ = handle.shutdown();
        }
    }
}
