//! `rampart-memory`: an agent's long-term memory, as OpenClaw's `memory-core` keeps it.
//!
//! The memory is markdown the agent (or its user) writes in the agent's workspace:
//! `MEMORY.md`, and notes under `memory/` (often one per day, `memory/2026-04-01.md`). This
//! crate indexes it in one SQLite file per agent and searches it for the `memory_search` and
//! `memory_get` tools. The markdown is the source of truth; the index can always be deleted
//! and rebuilt. The one write to the markdown is [`write::append_memory_file`], the memory
//! flush's append to today's note.
//!
//! Using it:
//! 1. [`MemoryIndex::open`] with [`IndexOptions`] (database path, workspace, settings,
//!    optional [`Embedder`]);
//! 2. [`MemoryIndex::sync`] (or [`MemoryIndex::sync_in_background`] at session start);
//! 3. [`MemoryWatcher::start`] to re-sync when files change;
//! 4. [`tools::tool_definitions`] to offer the tools, [`tools::call_tool`] to run a call;
//!    or [`MemoryIndex::search`] and [`MemoryIndex::read_file`] directly.
//!
//! One concern per module:
//! - [`settings`]: [`MemorySettings`] with OpenClaw's defaults and clamping;
//! - [`sources`]: which files are indexed; [`transcripts`]: session files as text;
//! - [`chunking`]: markdown cut into overlapping chunks; [`cjk`]: CJK characters;
//! - [`store`]: the SQLite schema and queries; [`quarantine`]: damaged files moved aside;
//! - [`sync`]: incremental indexing; [`sync_lock`]: one syncing process at a time;
//!   [`watch`]: the file watcher;
//! - [`fts_query`], [`hybrid`], [`mmr`], [`decay`], [`vectors`], [`search`]: the search;
//! - [`embed`]: the [`Embedder`] trait, [`OpenAiEmbedder`] and [`LocalEmbedder`];
//! - [`read`]: `memory_get`'s file rules; [`write`]: the memory flush's appends, which never
//!   follow a link out of the workspace; [`tools`]: the tools' schemas and results;
//! - [`index`]: [`MemoryIndex`], which ties these together; [`status`]: what it reports;
//! - [`error`]: [`MemoryError`]; [`fixtures`]: generated models and notes for tests.

#![warn(missing_docs)]

pub mod chunking;
pub mod cjk;
pub mod decay;
pub mod embed;
pub mod error;
pub mod fixtures;
pub mod fts_query;
pub mod hybrid;
pub mod index;
pub mod mmr;
pub mod quarantine;
pub mod read;
pub mod search;
pub mod settings;
pub mod sources;
pub mod status;
pub mod store;
pub mod sync;
pub mod sync_lock;
pub mod tools;
pub mod transcripts;
pub mod vectors;
pub mod watch;
pub mod write;

pub use embed::{EmbedError, Embedder, LocalEmbedder, OpenAiConfig, OpenAiEmbedder};
pub use error::{ErrorKind, MemoryError, PathRefusal};
pub use index::{IndexOptions, MemoryIndex, OpenReport};
pub use read::ReadResult;
pub use search::{SearchMode, SearchOutcome, SearchParams, SearchResult};
pub use settings::{CitationsMode, MemorySettings, Source};
pub use status::{MemoryStatus, ProviderFallback, VectorBackend};
pub use sync::{SyncReason, SyncReport};
pub use tools::{ToolContext, call_tool, call_tool_with};
pub use watch::MemoryWatcher;
