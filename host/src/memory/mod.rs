//! Long-term memory in the host: the `memory` slot ([`slot`]), the tools the model is offered
//! ([`tools`]), the built-in `memory-core` engine over `rampart-memory` ([`core`]), and the
//! pre-compaction flush ([`flush`]).

use std::path::Path;
use std::sync::Arc;

use rampart_engine_api::Host;

use crate::config::{BUILTIN_MEMORY_ID, Config, MEMORY_OFF};
use crate::engine::handle::EngineHandle;
use crate::engine::services::EventSink;
use crate::engine::slot::{HostResources, resolve_and_load};

pub mod core;
pub mod flush;
pub mod slot;
pub mod tools;

pub use slot::MemorySlot;

/// Whether the built-in engine watches the memory files: processes that live on (`serve`)
/// do; one-shot commands do not, since a search syncs a changed index anyway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watch {
    /// Start the file watcher (when `memorySearch.sync.watch` allows).
    Files,
    /// Do not.
    No,
}

/// Resolves `plugins.slots.memory` for a host whose sessions are in `sessions_dir`: off,
/// the built-in `memory-core`, or a memory engine library (in the host or a child, as its
/// `isolation` says). A failure leaves memory off with one log line; it never stops the host.
pub fn resolve(
    config: &Config,
    sessions_dir: &Path,
    events: &EventSink,
    resources: &HostResources,
    watch: Watch,
) -> MemorySlot {
    let id = config.memory_engine.as_str();
    match id {
        MEMORY_OFF => MemorySlot::off(),
        BUILTIN_MEMORY_ID => builtin(
            config,
            &config.agent_defaults.memory_search,
            &core::MemoryPlaces::of(config, sessions_dir),
            events,
            resources,
            watch,
        ),
        _ => MemorySlot::with_engine(
            id,
            resolve_and_load(config, id, events, resources)
                .map_err(|(operation, reason)| format!("{operation}: {reason}")),
        ),
    }
}

/// The slot with the built-in `memory-core` on `search`'s settings at `places` (a replay
/// gives its scratch places and keyword-only settings).
pub fn builtin(
    config: &Config,
    search: &crate::config::memory::MemorySearchConfig,
    places: &core::MemoryPlaces,
    events: &EventSink,
    resources: &HostResources,
    watch: Watch,
) -> MemorySlot {
    let id = BUILTIN_MEMORY_ID;
    let loaded = core::MemoryCore::open(search, places).map(|engine| {
        if watch == Watch::Files && search.watch {
            engine.watch();
        }
        let host = Host::new(Arc::new(resources.services_for(id, events)));
        EngineHandle::linked(Arc::new(engine), host, config.call_timeout)
    });
    MemorySlot::with_engine(id, loaded)
}
