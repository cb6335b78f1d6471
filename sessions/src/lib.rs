//! `rampart-sessions`: where an agent's history lives.
//!
//! Sessions are files in pi's JSONL format v3: a header line, then entries with 8-hex ids and
//! `parentId` links forming a tree whose leaf is the last entry. The file only grows: compaction
//! appends a `compaction` entry, a rewrite appends a new branch, and nothing a user had is lost.
//!
//! The core, one concern per module:
//! - [`entry`]: the header and entry model (lossless: unknown fields and types survive);
//! - [`load`]: reading a file into a tree, with a report of every unusual line;
//! - [`branch_stream`]: a branch's messages read from the file one at a time (printing a
//!   session without loading it);
//! - [`tree`]: the in-memory tree (id index, parent links, leaf, branching);
//! - [`context`]: the model-facing messages of a branch (pi's `buildSessionContext`);
//! - [`fold`]: per-turn figures of the active branch, kept up to date as it grows;
//! - [`session`]: a session opened for appending, with catch-up, fsync policy and rewrites;
//! - [`medium`]: where its lines are kept (a file, memory, a shared store);
//! - [`blobs`]: the full originals of shortened content, by content hash (a directory, a
//!   shared store);
//! - [`store`]: the registry, and [`store::shared`], what server replicas share;
//! - [`lock`]: the cross-process write lock;
//! - [`migrate`]: v1/v2 → v3;
//! - [`rewrite`]: replacing messages by branching;
//! - [`quarantine`]: corrupt lines copied to a sidecar;
//! - [`NewSessionFile`]: a new session file written entry by entry (imports);
//! - [`ids`], [`error`];
//! - [`fuzz`]: fuzz targets over the loader and the importers (for tests and `fuzz/`).
//!
//! Decisions worth knowing before changing anything (each module explains its own):
//! - **Corrupt lines are copied out, never cut out.** A torn or malformed line is skipped in
//!   memory, reported, and copied to `<file>.corrupt-<timestamp>`; the session file is not
//!   rewritten (see [`quarantine`] for why that is the safer choice).
//! - **Appends catch up first.** Under the write lock, a writer reads what other processes
//!   appended since it last looked before it writes, so ids stay unique and `parentId`s valid
//!   (see [`session`]).
//! - **Migrations write a new file.** v1/v2 files are rewritten as v3 through a temporary file
//!   and an atomic rename; the original is kept as `<file>.v<N>.bak` (see [`migrate`]).
//! - **Loads are parallel and streaming.** The file is read in chunks and parsed on one thread
//!   per core; the raw bytes are never held next to the parsed tree (see [`load`]).

pub mod blobs;
pub mod branch_stream;
pub mod compact_json;
pub mod context;
pub mod entry;
pub mod error;
pub mod fold;
mod fsutil;
pub mod fuzz;
mod holder;
pub mod ids;
pub mod import;
pub(crate) mod json_nesting;
pub mod lanes;
mod lenient;
mod link_index;
pub mod load;
pub mod lock;
pub mod medium;
pub mod migrate;
mod parse;
pub mod quarantine;
pub mod rewrite;
mod scan;
pub mod session;
mod split;
pub mod stamps;
pub mod store;
pub mod tree;
mod writer;

pub use branch_stream::{Branch, BranchReader};
pub use context::{LeafSelector, ModelRef, SessionContext, build_session_context};
pub use entry::{Entry, EntryBody, SessionHeader};
pub use error::{ErrorKind, SessionError};
pub use fsutil::create_private_dir_all;
pub use load::{LoadOptions, LoadReport, Loaded, load_file, parse_bytes};
pub use medium::{FileMedium, MemoryMedium, SessionMedium};
pub use session::{FsyncPolicy, Session, SessionOptions, save_session};
pub use tree::{Bridge, LostLine, SessionTree};
pub use writer::NewSessionFile;
