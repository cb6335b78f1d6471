//! Importers: other agents' transcripts turned into pi messages.
//!
//! Users arrive with history written by other tools (Claude Code, Codex CLI,
//! OpenHands, SWE-agent, raw chat-completions logs). These importers read such
//! a file, recognise its format **by content** (file names lie: `.jsonl`,
//! `.json` and `.traj` are all just JSON), and return an [`Imported`]: pi
//! [`AgentMessage`]s plus the few non-message facts pi sessions record (model
//! and thinking-level changes, summaries, compactions, system prompts), in file
//! order, with a parent index per item so a source tree survives. The session
//! store turns that into pi v3 entries; this module never writes files.
//!
//! # Ground rules
//!
//! * **Nothing is lost.** A source record that has no pi equivalent becomes an
//!   [`ImportedKind::Custom`] item holding the raw JSON; source fields a pi
//!   message has no place for go to [`ImportedItem::extra`]; anything converted
//!   inexactly is named in [`Imported::warnings`] with its line (JSONL) or
//!   position (JSON). A line that is not even JSON is kept as an
//!   `import.unparsed-line` custom item.
//! * **Tool calls pair with results.** Every `toolResult` answers a `toolCall`
//!   earlier in the same import, or a warning says which one does not (and
//!   which calls never got a result), so transcript repair knows what to fix.
//! * **Timestamps.** Item timestamps are normalised to RFC 3339 UTC with
//!   milliseconds (`2025-07-14T23:04:11.646Z`), the form pi writes. Message
//!   timestamps are Unix milliseconds; where a source has none, the last known
//!   time is reused (0 if the file has no times at all, with a warning).
//!
//! # Tree and sessions
//!
//! [`ImportedItem::parent`] is an index into [`Imported::items`], ready to
//! become pi's `parentId`. Linear sources chain each item to the previous
//! one; Claude Code keeps its real forks (rewinds), which can include a second
//! root when the user replaced the very first prompt. The source's own ids
//! and links stay in `source_id` / `source_parent_id` for provenance. A file
//! can hold several sessions (OpenHands evaluation output, one per line):
//! [`import_file_all`] returns each, [`import_file`] insists on one.
//!
//! # Memory
//!
//! The source is never read whole (see `source`): JSONL is read a line at a
//! time, and the line importers hand on each item once no later line can
//! change it (a Claude Code response split over lines stays until its last
//! line; Codex keeps the response waiting for its `token_count`). A JSON
//! document is parsed whole from the file, since its importer needs it, and
//! converted element by element, each freed once converted. [`open_into`]
//! writes what it is handed, so an import holds a window of the conversation,
//! not the file.
//!
//! # pi files
//!
//! pi v1/v2/v3 sessions are **detected but not imported**: [`import_file`]
//! returns [`ImportError::NativePiSession`] with the version, because the
//! session loader reads them natively (including the v1 → v3 migration) and a
//! second converter here could only drift from it.
//!
//! # Per-format decisions
//!
//! Each importer module documents its mapping: [`claude_code`] (merging of
//! split assistant lines, tree normalisation), [`codex`], [`openai_chat`],
//! [`swe_agent`], [`openhands`]. Detection rules are in [`detect`](mod@detect).

pub mod api_request;
mod builder;
pub mod claude_code;
pub mod codex;
pub mod detect;
mod open;
pub mod openai_chat;
pub mod openhands;
mod source;
pub mod subagents;
pub mod swe_agent;
mod timestamp;

use std::fmt;
use std::path::{Path, PathBuf};

use rampart_message::AgentMessage;
use serde_json::{Map, Value};

pub use detect::{InvalidLine, detect, detect_named};
pub use open::{
    OpenError, Opened, SYSTEM_PROMPT_CUSTOM_TYPE, SessionSink, SessionStart, open, open_into,
};
use source::{Prepared, Source};

/// One conversation read from another tool's transcript, ready to become a pi
/// session.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    /// Which importer produced this, so callers can label the new session and
    /// know which quirks (documented per module) apply.
    pub format: SourceFormat,
    /// The source's own session id (Claude Code `sessionId`, Codex session
    /// uuid, OpenHands `instance_id`…), kept so a re-import can be recognised
    /// and the new session can point back at its origin.
    pub source_session_id: Option<String>,
    /// The working directory the source session ran in, when recorded; pi
    /// session headers carry a `cwd` and tools resolve paths against it.
    pub cwd: Option<String>,
    /// When the source session started (RFC 3339, UTC), for the pi header's
    /// `timestamp`; `None` when the source records no time.
    pub started_at: Option<String>,
    /// Everything converted, in source order. Item `i`'s
    /// [`parent`](ImportedItem::parent) is always `< i`.
    pub items: Vec<ImportedItem>,
    /// What could not be converted exactly, each naming its line or position,
    /// so users can judge an import before trusting it.
    pub warnings: Vec<String>,
}

/// One converted record (or part of one) with its provenance.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportedItem {
    /// What the record became.
    pub kind: ImportedKind,
    /// The source's id for the record (Claude Code `uuid`, OpenHands event
    /// id…), for provenance and re-import matching. Several items share it
    /// when one record was split (a Claude Code line holding several tool
    /// results); an item merged from several records carries the first
    /// record's id and lists the others in `extra["mergedIds"]`.
    pub source_id: Option<String>,
    /// The source's own parent link as written (Claude Code `parentUuid`,
    /// OpenHands `cause`), kept verbatim for provenance. Use
    /// [`parent`](Self::parent) to build the tree: raw links in some formats
    /// do not describe the conversation (see [`claude_code`]).
    pub source_parent_id: Option<String>,
    /// Index into [`Imported::items`] of the item this one follows in the
    /// conversation; `None` only for a root (normally just the first item).
    /// Linear sources chain every item to the previous one; tree sources keep
    /// their real forks. This is what pi's `parentId` should be built from.
    pub parent: Option<usize>,
    /// When the record was written (RFC 3339, UTC, milliseconds), if known;
    /// becomes the pi entry's `timestamp`.
    pub timestamp: Option<String>,
    /// `true` for records of a sub-agent's side conversation (Claude Code
    /// `isSidechain`), which must not be replayed into the main context.
    pub sidechain: bool,
    /// 1-based line of the source file for JSONL sources, so warnings and
    /// bug reports can point at the record; `None` for JSON documents.
    pub source_line: Option<usize>,
    /// Source fields with no place in the pi model (Claude Code `gitBranch`,
    /// OpenHands `extras`, raw provider usage…), kept verbatim so nothing is
    /// lost; the caller may store or drop them knowingly.
    pub extra: Map<String, Value>,
}

/// What an imported record became.
// Nearly every item is a message, so boxing it would add an allocation per
// item to shrink the rare small variants.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum ImportedKind {
    /// A pi message (user, assistant, toolResult…): what the model saw or said.
    Message(AgentMessage),
    /// The model changed from here on (pi `model_change` entry). Importers
    /// insert one before the first assistant message of each new model so
    /// the session knows which model produced what.
    ModelChange {
        /// Provider name as pi spells it (`anthropic`, `openai`…); a
        /// best-effort guess when the source only names the model.
        provider: String,
        /// The model id exactly as the source wrote it.
        model_id: String,
    },
    /// The reasoning effort changed (pi `thinking_level_change`), e.g. Codex
    /// `effort`; kept as the source's word.
    ThinkingLevel(String),
    /// The system prompt (and tool schemas, when recorded) the source agent
    /// used. pi sessions do not store system prompts, but dropping one would
    /// lose what the model was told; the caller decides what to do with it.
    SystemPrompt {
        /// The prompt text (text parts joined with blank lines).
        text: String,
        /// Tool schemas sent with the prompt, verbatim, when the source has
        /// them (OpenHands `system` action, LiteLLM logs).
        tools: Option<Value>,
    },
    /// A short summary of a conversation branch that does **not** replace
    /// any context (Claude Code `summary` lines are such titles).
    Summary {
        /// The summary text.
        text: String,
        /// The source id of the last record of the summarised branch
        /// (Claude Code `leafUuid`), if given.
        leaf_id: Option<String>,
    },
    /// From here on the model saw this summary instead of the earlier
    /// history (Codex `compacted`, Claude Code `isCompactSummary`); maps to a
    /// pi `compaction` entry.
    Compaction {
        /// The summary text the model was given.
        summary: String,
    },
    /// A record with no pi equivalent, kept whole so nothing is lost (pi
    /// `custom` entry: stored, never sent to the model).
    Custom {
        /// Namespaced kind, e.g. `claude-code.attachment`, `codex.event`,
        /// `openhands.observation`, so readers can pick out what they know.
        custom_type: String,
        /// The raw record (or the part that was not converted).
        data: Value,
    },
}

/// A transcript format this module recognises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SourceFormat {
    /// pi session JSONL v1 (header without `version`, entries without ids).
    PiV1,
    /// pi session JSONL v2 (header `"version":2`).
    PiV2,
    /// pi session JSONL v3 (header `"version":3`, id/parentId tree).
    PiV3,
    /// Claude Code project JSONL (`~/.claude/projects/<proj>/<uuid>.jsonl`,
    /// including sidechain and sub-agent files).
    ClaudeCode,
    /// Codex CLI rollout JSONL (`session_meta` / `response_item` lines).
    CodexRollout,
    /// OpenAI chat-completions messages: a bare array or an object with
    /// `messages` (LiteLLM request logs).
    OpenAiChat,
    /// SWE-agent / EnIGMA `.traj` JSON.
    SweAgentTraj,
    /// OpenHands event stream: a JSON array of events, or evaluation output
    /// JSONL with one instance (and its `history`) per line.
    OpenHandsEvents,
}

impl SourceFormat {
    /// Every format, in the order error messages list them.
    pub const ALL: [SourceFormat; 8] = [
        SourceFormat::PiV1,
        SourceFormat::PiV2,
        SourceFormat::PiV3,
        SourceFormat::ClaudeCode,
        SourceFormat::CodexRollout,
        SourceFormat::OpenAiChat,
        SourceFormat::SweAgentTraj,
        SourceFormat::OpenHandsEvents,
    ];

    /// A human name, used in messages and UIs.
    pub fn name(self) -> &'static str {
        match self {
            Self::PiV1 => "pi session JSONL v1",
            Self::PiV2 => "pi session JSONL v2",
            Self::PiV3 => "pi session JSONL v3",
            Self::ClaudeCode => "Claude Code project JSONL",
            Self::CodexRollout => "Codex CLI rollout JSONL",
            Self::OpenAiChat => "OpenAI chat-completions messages JSON (array or {\"messages\"})",
            Self::SweAgentTraj => "SWE-agent .traj JSON",
            Self::OpenHandsEvents => "OpenHands event stream (JSON array or eval-output JSONL)",
        }
    }

    /// The pi session version for pi formats, `None` for foreign ones.
    pub fn pi_version(self) -> Option<u8> {
        match self {
            Self::PiV1 => Some(1),
            Self::PiV2 => Some(2),
            Self::PiV3 => Some(3),
            _ => None,
        }
    }

    /// All format names joined, for "unknown format" errors.
    pub fn supported_list() -> String {
        let names: Vec<&str> = Self::ALL.iter().map(|f| f.name()).collect();
        names.join("; ")
    }
}

impl fmt::Display for SourceFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why an import failed. Every message names the file and says what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// The file could not be read at all.
    #[error("cannot read {}: {source}; check that the path exists and is readable", path.display())]
    Io {
        /// The file that failed.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The content matches no supported format (or is empty / binary).
    #[error(
        "{file}: not a transcript format Rampart can import ({reason}); supported formats: {}",
        SourceFormat::supported_list()
    )]
    UnknownFormat {
        /// The file (or `<input>` for bytes).
        file: String,
        /// What was seen instead, to help the user tell what the file is.
        reason: String,
    },
    /// The file is a pi session; it needs no import.
    #[error(
        "{file} is a pi session (JSONL v{version}); open it with the pi session loader instead of importing it"
    )]
    NativePiSession {
        /// The file.
        file: String,
        /// Its pi session version (1, 2 or 3).
        version: u8,
    },
    /// The file looks like a JSON document but does not parse.
    #[error(
        "{file}:{line}:{column}: invalid JSON ({source}); the file may be truncated or hand-edited, re-export it from the tool that wrote it"
    )]
    InvalidJson {
        /// The file.
        file: String,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// The parser's message.
        #[source]
        source: serde_json::Error,
    },
    /// The file holds several sessions (OpenHands eval output) and the
    /// caller asked for one.
    #[error(
        "{file} holds {count} sessions; use import_file_all to import each of them as its own session"
    )]
    MultipleSessions {
        /// The file.
        file: String,
        /// How many sessions it holds.
        count: usize,
    },
}

/// Import a file that holds exactly one session.
///
/// Detects the format by content. pi files give
/// [`ImportError::NativePiSession`]; a multi-session file (OpenHands eval
/// output) gives [`ImportError::MultipleSessions`] — use [`import_file_all`].
pub fn import_file(path: &Path) -> Result<Imported, ImportError> {
    let mut all = import_file_all(path)?;
    let count = all.len();
    match all.pop() {
        Some(one) if count == 1 => Ok(one),
        _ => Err(ImportError::MultipleSessions {
            file: path.display().to_string(),
            count,
        }),
    }
}

/// Import every session a file holds (one for all formats except OpenHands
/// eval-output JSONL, which has one per line).
///
/// For a Claude Code sub-agent file `agent-<id>.jsonl`, a sibling
/// `agent-<id>.meta.json` sidecar is read and kept as the first item
/// (`claude-code.subagent-meta`).
pub fn import_file_all(path: &Path) -> Result<Vec<Imported>, ImportError> {
    let name = path.display().to_string();
    collect(Source::File(path), &name, Some(path))
}

/// Import every session in an in-memory transcript; `name` is used in errors
/// and warnings in place of a path. No sidecar files are read.
pub fn import_bytes(bytes: &[u8], name: &str) -> Result<Vec<Imported>, ImportError> {
    collect(Source::Bytes(bytes), name, None)
}

/// Where the bytes came from, for sidecar lookup.
pub(crate) struct Origin<'a> {
    /// The path, when importing a file.
    pub(crate) path: Option<&'a Path>,
}

/// Imports every session of `source` into memory.
fn collect(
    source: Source<'_>,
    name: &str,
    path: Option<&Path>,
) -> Result<Vec<Imported>, ImportError> {
    let prepared = Prepared::new(source, name)?;
    let (format, input) = detect::sniff(&prepared, name)?;
    if let Some(version) = format.pi_version() {
        return Err(ImportError::NativePiSession {
            file: name.to_owned(),
            version,
        });
    }
    let mut sink = Collect::default();
    match import_sniffed(&prepared, format, input, name, &Origin { path }, &mut sink) {
        Ok(()) => Ok(sink.sessions),
        Err(Failure::Import(error)) => Err(error),
        Err(Failure::Sink(never)) => match never {},
    }
}

/// Where the importers hand what they read: per session a `begin`, its items in order (an
/// item's `parent` always came before it), and an `end` with the rest of the session. Items are
/// handed over as soon as nothing later in the source can change them, so a sink that writes
/// them out holds a window of the conversation, not all of it.
pub(crate) trait ItemSink {
    /// Why the sink could not take something.
    type Error;
    /// A session of `format` starts; `more_may_follow` when the source can hold several
    /// (OpenHands evaluation output).
    fn begin(&mut self, format: SourceFormat, more_may_follow: bool) -> Result<(), Self::Error>;
    /// The next item. `start` is the session's start time as its header will have it (`None`:
    /// the source records none), the time for items that have none of their own.
    fn item(&mut self, item: ImportedItem, start: Option<&str>) -> Result<(), Self::Error>;
    /// The session is complete: everything but the items, which all went through `item`.
    fn end(&mut self, imported: Imported) -> Result<(), Self::Error>;
}

/// Why streaming an import stopped: the source, or the sink.
pub(crate) enum Failure<E> {
    /// The source could not be read or recognised.
    Import(ImportError),
    /// The sink refused.
    Sink(E),
}

impl<E> From<ImportError> for Failure<E> {
    fn from(error: ImportError) -> Self {
        Self::Import(error)
    }
}

/// The sink of [`import_file_all`]: every session in memory.
#[derive(Default)]
struct Collect {
    sessions: Vec<Imported>,
    items: Vec<ImportedItem>,
}

impl ItemSink for Collect {
    type Error = std::convert::Infallible;

    fn begin(&mut self, _: SourceFormat, _: bool) -> Result<(), Self::Error> {
        self.items.clear();
        Ok(())
    }

    fn item(&mut self, item: ImportedItem, _: Option<&str>) -> Result<(), Self::Error> {
        self.items.push(item);
        Ok(())
    }

    fn end(&mut self, mut imported: Imported) -> Result<(), Self::Error> {
        imported.items = std::mem::take(&mut self.items);
        self.sessions.push(imported);
        Ok(())
    }
}

/// A JSONL importer fed one line at a time.
pub(crate) trait LineImport {
    /// The format it reads.
    const FORMAT: SourceFormat;
    /// Reads one non-blank line.
    fn line(&mut self, line: usize, raw: &str);
    /// The session's start time once no later line can change it.
    fn settled_start(&self) -> Option<&str>;
    /// The items no later line can change, in order; each is handed out once.
    fn ready(&mut self) -> std::vec::Drain<'_, ImportedItem>;
    /// The session, with the items not handed out yet.
    fn finish(self) -> Imported;
}

/// Runs the importer for `format` over the detected source, into `sink`.
pub(crate) fn import_sniffed<S: ItemSink>(
    prepared: &Prepared<'_>,
    format: SourceFormat,
    input: detect::Input,
    name: &str,
    origin: &Origin<'_>,
    sink: &mut S,
) -> Result<(), Failure<S::Error>> {
    match (format, input) {
        (SourceFormat::ClaudeCode, detect::Input::Lines) => {
            stream_lines(prepared, name, claude_code::ClaudeImport::new(origin), sink)
        }
        (SourceFormat::CodexRollout, detect::Input::Lines) => {
            // Codex skips events that repeat a response item written later in the file, so
            // it reads the file once for those texts first.
            let mut codex = codex::CodexImport::new();
            let mut lines = prepared.lines()?;
            while let Some((_, raw)) = lines.next_line()? {
                if !raw.trim().is_empty() {
                    codex.remember_texts(raw);
                }
            }
            stream_lines(prepared, name, codex, sink)
        }
        (SourceFormat::OpenAiChat, detect::Input::Document(doc)) => whole(
            prepared,
            name,
            openai_chat::import(doc, origin),
            false,
            sink,
        ),
        (SourceFormat::SweAgentTraj, detect::Input::Document(doc)) => {
            whole(prepared, name, swe_agent::import(doc, origin), false, sink)
        }
        (SourceFormat::OpenHandsEvents, detect::Input::Document(doc)) => whole(
            prepared,
            name,
            openhands::import_document(doc, origin),
            false,
            sink,
        ),
        (SourceFormat::OpenHandsEvents, detect::Input::Lines) => {
            // One session per instance line, each handed on once the next one starts.
            let mut instances = openhands::LinesImport::default();
            let mut lines = prepared.lines()?;
            while let Some((number, raw)) = lines.next_line()? {
                if raw.trim().is_empty() {
                    continue;
                }
                if let Some(done) = instances.line(number, raw) {
                    whole(prepared, name, done, true, sink)?;
                }
            }
            match instances.finish() {
                Some(done) => whole(prepared, name, done, true, sink),
                None => Ok(()),
            }
        }
        (format, _) => {
            // `sniff` pairs every format with the input shape its importer
            // takes; reaching this is a bug in detection, reported as such.
            Err(Failure::Import(ImportError::UnknownFormat {
                file: name.to_owned(),
                reason: format!("internal error: {format} detected with an unexpected layout"),
            }))
        }
    }
}

/// Feeds `importer` the source's lines, handing items to `sink` as they become final. Items
/// wait while the session's start time may still change (they may need it as their time).
fn stream_lines<I: LineImport, S: ItemSink>(
    prepared: &Prepared<'_>,
    name: &str,
    mut importer: I,
    sink: &mut S,
) -> Result<(), Failure<S::Error>> {
    sink.begin(I::FORMAT, false).map_err(Failure::Sink)?;
    let mut held: Vec<ImportedItem> = Vec::new();
    let mut start: Option<String> = None;
    let mut lines = prepared.lines()?;
    while let Some((number, raw)) = lines.next_line()? {
        if raw.trim().is_empty() {
            continue;
        }
        importer.line(number, raw);
        if start.is_none() {
            start = importer.settled_start().map(str::to_owned);
        }
        if start.is_none() {
            held.extend(importer.ready());
            continue;
        }
        for item in held.drain(..).chain(importer.ready()) {
            sink.item(item, start.as_deref()).map_err(Failure::Sink)?;
        }
    }
    drop(lines);
    let mut imported = importer.finish();
    let rest = std::mem::take(&mut imported.items);
    for item in held.into_iter().chain(rest) {
        sink.item(item, imported.started_at.as_deref())
            .map_err(Failure::Sink)?;
    }
    locate_warnings(&mut imported, &prepared.invalid, name);
    sink.end(imported).map_err(Failure::Sink)
}

/// Hands a session read whole to `sink`.
fn whole<S: ItemSink>(
    prepared: &Prepared<'_>,
    name: &str,
    mut imported: Imported,
    more_may_follow: bool,
    sink: &mut S,
) -> Result<(), Failure<S::Error>> {
    sink.begin(imported.format, more_may_follow)
        .map_err(Failure::Sink)?;
    let items = std::mem::take(&mut imported.items);
    for item in items {
        sink.item(item, imported.started_at.as_deref())
            .map_err(Failure::Sink)?;
    }
    locate_warnings(&mut imported, &prepared.invalid, name);
    sink.end(imported).map_err(Failure::Sink)
}

/// Every warning names the file, and the line when the importer knew it (`file:line: …`), so
/// a user can go to it; the lines left out as not UTF-8 come first.
fn locate_warnings(imported: &mut Imported, invalid: &[InvalidLine], name: &str) {
    let mut warnings: Vec<String> = invalid.iter().map(|l| l.warning(name)).collect();
    warnings.extend(imported.warnings.drain(..).map(|w| located(name, &w)));
    imported.warnings = warnings;
}

/// `warning` as `file:line: …` when it starts with `line N: `, else as `file: …`.
fn located(file: &str, warning: &str) -> String {
    if let Some(rest) = warning.strip_prefix("line ")
        && let Some((number, text)) = rest.split_once(": ")
        && !number.is_empty()
        && number.bytes().all(|b| b.is_ascii_digit())
    {
        return format!("{file}:{number}: {text}");
    }
    format!("{file}: {warning}")
}
