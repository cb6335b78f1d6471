//! The `rampart sessions …` commands: list, show, import, export, doctor, migrate, blob; and how a
//! command finds a session by key, id or path. Each works on a sessions directory (here) or on
//! a PostgreSQL store ([`super::sessions_database`]); [`super::sessions_store`] decides which.

use std::cell::RefCell;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::Subcommand;
use rampart_engine_api::AgentMessage;
use rampart_message::SharedMessage;
use rampart_message::{Content, ContentBlock};
use rampart_sessions::store::{SessionStore, StoreError, default_sessions_dir, normalize_key};
use rampart_sessions::{
    BranchReader, LeafSelector, LoadOptions, LoadReport, ModelRef, NewSessionFile, SessionError,
    load_file,
};
use serde::ser::{Error as _, SerializeSeq};
use serde::{Serialize, Serializer};

use super::markdown::to_markdown;
use super::sessions_import::import_into;
use crate::blobs::BlobStore;
use crate::output_file::{Inputs, OutputFile};
use crate::providers::openai::wire::to_openai_messages;
use crate::providers::text::as_user_text;
use crate::terminal::escape;

/// Output formats of `sessions export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// The whole session tree as a pi JSONL v3 file.
    Pi,
    /// The active branch as an OpenAI chat-completions `messages` array.
    Openai,
    /// The active branch as Markdown.
    Markdown,
}

/// `rampart sessions [--store URL] …`: the store flags every sessions command takes, and the
/// command.
#[derive(Debug, clap::Args)]
pub struct SessionsArgs {
    /// Work on this PostgreSQL store (postgres://USER@HOST:PORT/DATABASE, no password) instead
    /// of a sessions directory. Default: `serve.store.url` of the configuration when neither
    /// this nor --sessions-dir is given, so the commands see what `rampart serve` serves.
    #[arg(long, global = true, value_name = "URL")]
    pub store: Option<String>,
    /// The environment variable holding the database's password (never in the URL); default:
    /// `serve.store.passwordEnv`.
    #[arg(long, global = true, value_name = "VAR")]
    pub password_env: Option<String>,
    /// What to do.
    #[command(subcommand)]
    pub command: SessionsCommand,
}

/// `rampart sessions …`
#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// List the sessions in the store, newest first.
    List,
    /// Show the messages of a session's active branch (or of the branch ending at LEAF).
    Show {
        /// A registry key, a session id, or a session file.
        id: String,
        /// Show the branch that ends at this entry id instead of the current leaf.
        #[arg(long, value_name = "LEAF")]
        branch: Option<String>,
        /// Print the messages as a JSON array in pi's message format.
        #[arg(long)]
        json: bool,
    },
    /// Import a transcript (pi v1–v3, Claude Code, Codex, OpenAI messages, SWE-agent, OpenHands).
    Import {
        /// The transcript; its format is detected from its content.
        file: PathBuf,
        /// The registry key to file it under (default: the file name without extension).
        #[arg(long = "as", value_name = "KEY")]
        key: Option<String>,
    },
    /// Report session files no registry entry names (left by crashes) and entries whose file
    /// is missing; with --relink, register the orphans. Nothing is deleted.
    Doctor {
        /// Register each orphan as `recovered:<session id>`.
        #[arg(long)]
        relink: bool,
    },
    /// Copy every session and its registry entry between a sessions directory and a
    /// PostgreSQL store, either way (pi JSONL, byte for byte). Nothing in the destination is
    /// overwritten; running it again copies only what is missing.
    Migrate {
        /// Where the sessions are: a directory, or postgres://USER@HOST:PORT/DATABASE.
        #[arg(long, value_name = "DIR|URL")]
        from: String,
        /// Where they go: a directory, or postgres://USER@HOST:PORT/DATABASE.
        #[arg(long, value_name = "DIR|URL")]
        to: String,
    },
    /// Print a blob: the full original of a capped tool result or of a shortened message,
    /// named `blob sha256:…` in the shortened text. Reads the store's blobs (a directory's
    /// `blobs/`, or the database replicas share).
    Blob {
        /// The blob's reference, `sha256:` and 64 hex digits.
        reference: String,
        /// Write here instead of standard output.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Export a session.
    Export {
        /// A registry key, a session id, or a session file.
        id: String,
        /// The format.
        #[arg(long, value_enum)]
        format: ExportFormat,
        /// Write here instead of standard output (required for `pi`).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
}

/// Runs `sessions …` against the sessions directory `store` (`migrate` opens the stores its
/// arguments name).
pub fn run(
    cmd: SessionsCommand,
    store: &SessionStore,
    overwrite: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<i32> {
    match cmd {
        SessionsCommand::List => list(store, out),
        SessionsCommand::Show { id, branch, json } => {
            show(store, &id, branch.as_deref(), json, out)
        }
        SessionsCommand::Import { file, key } => import(store, &file, key.as_deref(), out, err),
        SessionsCommand::Doctor { relink } => {
            super::sessions_doctor::doctor(store, relink, out, err)
        }
        SessionsCommand::Export {
            id,
            format,
            out: target,
        } => export(store, &id, format, target.as_deref(), overwrite, out),
        SessionsCommand::Migrate { from, to } => {
            super::sessions_migrate::migrate(&from, &to, None, out, err)
        }
        SessionsCommand::Blob {
            reference,
            out: target,
        } => {
            let mut inputs = Inputs::new();
            inputs.store(store.dir());
            print_blob(
                &BlobStore::in_sessions_dir(store.dir()),
                &reference,
                &inputs,
                target.as_deref(),
                overwrite,
                std::io::IsTerminal::is_terminal(&std::io::stdout()),
                out,
            )
        }
    }
}

/// `sessions blob`: the bytes of `reference` in `blobs`, to `out` or to the file `target`
/// (an output file: never one of `inputs`, an existing one only with `overwrite`). A blob is a
/// tool's output, written by whatever the tool read: when `out` is a terminal
/// (`to_terminal`), its control characters are shown escaped rather than obeyed; piped or
/// written to a file, the bytes are exactly the blob's.
pub fn print_blob(
    blobs: &BlobStore,
    reference: &str,
    inputs: &Inputs,
    target: Option<&Path>,
    overwrite: bool,
    to_terminal: bool,
    out: &mut dyn Write,
) -> anyhow::Result<i32> {
    let bytes = blobs.get(reference)?;
    match target {
        Some(path) => {
            OutputFile::create("--out", path, inputs, overwrite)?.write_whole(&bytes)?;
            eprintln!(
                "wrote {} ({} bytes)",
                escape(&path.display().to_string()),
                bytes.len()
            );
        }
        None if to_terminal => {
            out.write_all(
                crate::terminal::escape_text(&String::from_utf8_lossy(&bytes)).as_bytes(),
            )?;
            out.flush()?;
        }
        None => {
            out.write_all(&bytes)?;
            out.flush()?;
        }
    }
    Ok(0)
}

/// A session found by key, id or path: its registry key (when it has one) and its file.
#[derive(Debug, Clone)]
pub struct FoundSession {
    /// The registry key, when the session is registered.
    pub key: Option<String>,
    /// The session file.
    pub file: PathBuf,
}

/// Finds a session by registry key, by session id, or as a path to a session file.
pub fn find_session(store: &SessionStore, id: &str) -> Result<Option<FoundSession>, StoreError> {
    let key = normalize_key(id);
    if let Some(entry) = store.get(&key)? {
        let file = store.session_file_path(&key, &entry)?;
        return Ok(Some(FoundSession {
            key: Some(key),
            file,
        }));
    }
    if let Some((key, entry)) = store.list()?.into_iter().find(|(_, e)| e.session_id == id) {
        let file = store.session_file_path(&key, &entry)?;
        return Ok(Some(FoundSession {
            key: Some(key),
            file,
        }));
    }
    let path = std::path::Path::new(id);
    if path.is_file() {
        return Ok(Some(FoundSession {
            key: None,
            file: path.to_path_buf(),
        }));
    }
    Ok(None)
}

/// Opens the registry in `dir`, or in the platform data directory.
pub fn open_store(dir: Option<&Path>) -> anyhow::Result<SessionStore> {
    let dir = match dir {
        Some(d) => d.to_path_buf(),
        None => default_sessions_dir().context(
            "no platform data directory is known here; pass --sessions-dir DIR to choose one",
        )?,
    };
    Ok(SessionStore::open(&dir)?)
}

/// [`open_store`] for a command that only reads the store: the directory is not created.
pub fn open_store_read_only(dir: Option<&Path>) -> anyhow::Result<SessionStore> {
    let dir = match dir {
        Some(d) => d.to_path_buf(),
        None => default_sessions_dir().context(
            "no platform data directory is known here; pass --sessions-dir DIR to choose one",
        )?,
    };
    Ok(SessionStore::open_read_only(&dir)?)
}

impl SessionsCommand {
    /// Whether the command writes into the store (then the store is created if missing).
    pub fn writes_the_store(&self) -> bool {
        match self {
            Self::Import { .. } => true,
            Self::Doctor { relink } => *relink,
            // Its stores are its arguments, opened by the command itself.
            Self::List
            | Self::Show { .. }
            | Self::Export { .. }
            | Self::Blob { .. }
            | Self::Migrate { .. } => false,
        }
    }
}

/// Finds a session by registry key, by session id, or as a path to a session file, with an
/// error that lists what exists.
fn resolve(store: &SessionStore, id: &str) -> anyhow::Result<PathBuf> {
    if let Some(found) = find_session(store, id)? {
        return Ok(found.file);
    }
    bail!("{}", no_such_session(store, id)?)
}

/// The keys an error names when it shows what exists: more made one line of hundreds of
/// keys, which `sessions list` shows better, as a table.
const KEYS_NAMED: usize = 5;

/// The error for a session `id` the store does not have: the store, a few of its keys (the
/// newest), and where to see the rest.
pub fn no_such_session(store: &SessionStore, id: &str) -> Result<String, StoreError> {
    let keys: Vec<String> = store.list()?.into_iter().map(|(k, _)| k).collect();
    Ok(no_such_session_in(
        &store.path().display().to_string(),
        &keys,
        id,
    ))
}

/// The error for a session `id` that `place` (a registry file or a database), holding `keys`
/// newest first, does not have.
pub fn no_such_session_in(place: &str, keys: &[String], id: &str) -> String {
    let named = match keys.len() {
        0 => "none yet; import one with `rampart sessions import FILE`".to_string(),
        n if n <= KEYS_NAMED => keys.join(", "),
        n => format!(
            "{}, and {} more: `rampart sessions list` shows them all",
            keys[..KEYS_NAMED].join(", "),
            n - KEYS_NAMED
        ),
    };
    format!(
        "no session `{id}` in {place} (keys: {named}); give a key, a session id or a session \
         file path"
    )
}

/// `sessions list`.
pub fn list(store: &SessionStore, out: &mut dyn Write) -> anyhow::Result<i32> {
    let sessions = store.list()?;
    let rows = sessions
        .into_iter()
        .map(|(key, entry)| {
            let file = store
                .session_file_path(&key, &entry)
                .map_or_else(|e| format!("(refused: {e})"), |p| p.display().to_string());
            (key, entry, file)
        })
        .collect();
    print_list(&store.path().display().to_string(), "FILE", rows, out)
}

/// Prints the `sessions list` table of `rows` (key, entry, where its session is) found in
/// `place`, whose last column is headed `last`.
pub fn print_list(
    place: &str,
    last: &str,
    sessions: Vec<(String, rampart_sessions::store::SessionEntry, String)>,
    out: &mut dyn Write,
) -> anyhow::Result<i32> {
    writeln!(out, "sessions: {}", escape(place))?;
    if sessions.is_empty() {
        writeln!(
            out,
            "no sessions yet; import one with `rampart sessions import FILE`"
        )?;
        return Ok(0);
    }
    // Keys, ids and paths come from files and clients: shown with their control characters
    // escaped, never obeyed by the terminal.
    let width = sessions
        .iter()
        .map(|(k, _, _)| escape(k).chars().count())
        .max()
        .unwrap_or(3)
        .max(3);
    writeln!(
        out,
        "{:width$}  {:36}  {:24}  {:>11}  {last}",
        "KEY", "SESSION ID", "UPDATED", "COMPACTIONS"
    )?;
    for (key, entry, file) in sessions {
        let updated = chrono_iso(entry.updated_at);
        writeln!(
            out,
            "{:width$}  {:36}  {updated:24}  {:>11}  {}",
            escape(&key),
            escape(&entry.session_id),
            entry.compaction_count,
            escape(&file)
        )?;
    }
    Ok(0)
}

fn chrono_iso(unix_ms: u64) -> String {
    let secs = (unix_ms / 1000) as i64;
    let nanos = ((unix_ms % 1000) * 1_000_000) as u32;
    chrono::DateTime::from_timestamp(secs, nanos)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
        .unwrap_or_else(|| unix_ms.to_string())
}

/// `sessions show`.
///
/// A v3 session is streamed ([`BranchReader`]): its structure is read first, then the branch's
/// entries one at a time as they are printed, so memory stays at the structure (a few dozen
/// bytes an entry) plus one entry, whatever the session's size. A v1/v2 session is loaded
/// whole, since its migration needs every entry. Both print the same thing.
pub fn show(
    store: &SessionStore,
    id: &str,
    branch: Option<&str>,
    as_json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<i32> {
    let path = resolve(store, id)?;
    show_file(&path, &path.display().to_string(), branch, as_json, out)
}

/// [`show`] of the session file at `path`, which messages call `label` (its path, or where
/// in a database the session is kept).
pub fn show_file(
    path: &Path,
    label: &str,
    branch: Option<&str>,
    as_json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<i32> {
    let not_in = |leaf: &str| {
        anyhow::anyhow!("entry `{leaf}` is not in {label}; `--branch` takes an entry id")
    };
    let selector = branch.map_or(LeafSelector::Current, LeafSelector::Id);
    let mut out = std::io::BufWriter::new(out);
    if let Some(reader) = BranchReader::open(path, &LoadOptions::default())? {
        if let Some(leaf) = branch
            && !reader.contains_id(leaf)
        {
            return Err(not_in(leaf));
        }
        let context = reader.branch(selector)?;
        let shown = Shown {
            session_id: &reader.header().id,
            label,
            entries: reader.len(),
            leaf_id: context.leaf_id(),
            messages: context.len(),
            thinking_level: context.thinking_level(),
            model: context.model(),
            report: reader.report(),
        };
        print_shown(&shown, context.messages(), as_json, &mut out)?;
    } else {
        let loaded = load_file(path, &LoadOptions::default())?;
        if let Some(leaf) = branch
            && loaded.tree.get(leaf).is_none()
        {
            return Err(not_in(leaf));
        }
        let context = rampart_sessions::build_session_context(&loaded.tree, selector);
        let shown = Shown {
            session_id: &loaded.header.id,
            label,
            entries: loaded.tree.len(),
            leaf_id: context.leaf_id.as_deref(),
            messages: context.messages.len(),
            thinking_level: &context.thinking_level,
            model: context.model.as_ref(),
            report: &loaded.report,
        };
        let messages = context.messages.iter().cloned().map(Ok);
        print_shown(&shown, messages, as_json, &mut out)?;
    }
    out.flush()?;
    Ok(0)
}

/// What `sessions show` prints about a branch, however the session was read.
struct Shown<'a> {
    session_id: &'a str,
    label: &'a str,
    entries: usize,
    leaf_id: Option<&'a str>,
    messages: usize,
    thinking_level: &'a str,
    model: Option<&'a ModelRef>,
    report: &'a LoadReport,
}

/// Prints `shown` and its `messages` (the header, the load's warnings, a line per message), or
/// the messages as a JSON array, one message at a time.
fn print_shown(
    shown: &Shown<'_>,
    messages: impl Iterator<Item = Result<SharedMessage, SessionError>>,
    as_json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    if as_json {
        let array = JsonArray {
            len: shown.messages,
            messages: RefCell::new(Some(messages)),
            error: RefCell::new(None),
        };
        let written = serde_json::to_writer_pretty(&mut *out, &array);
        if let Some(error) = array.error.into_inner() {
            return Err(error.into());
        }
        written?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(
        out,
        "session: {} ({})",
        escape(shown.session_id),
        escape(shown.label)
    )?;
    writeln!(
        out,
        "entries: {}, leaf: {}, messages on the branch: {}, thinking: {}{}",
        shown.entries,
        escape(shown.leaf_id.unwrap_or("none")),
        shown.messages,
        shown.thinking_level,
        shown
            .model
            .map(|m| escape(&format!(", model: {}/{}", m.provider, m.model_id)).into_owned())
            .unwrap_or_default()
    )?;
    let report = shown.report;
    let file = escape(&report.path.display().to_string()).into_owned();
    for c in &report.corrupt_lines {
        writeln!(
            out,
            "warning: {file}:{}: the line could not be read: {}",
            c.line,
            escape(&c.reason)
        )?;
    }
    if let Some(line) = report.messages_left_out_line() {
        writeln!(out, "warning: {}", escape(&line))?;
    }
    for b in &report.bridged {
        writeln!(
            out,
            "warning: {file}:{}: entry {} followed {}, which was on line {}; it is linked to {} \
             (in memory; the file is unchanged)",
            b.line,
            escape(&b.entry_id),
            escape(&b.lost_parent_id),
            b.lost_line,
            escape(&b.now_under)
        )?;
    }
    for (i, m) in messages.enumerate() {
        let m = m?;
        let tokens = rampart_context::tokens::estimate_message_tokens(&m);
        let text = preview(&m);
        writeln!(
            out,
            "{i:>5}  {:<17} {tokens:>7} tok  {}",
            escape(m.role()),
            escape(&text)
        )?;
    }
    Ok(())
}

/// The messages as a JSON array, serialised as they are read: the same bytes as a `Vec` of
/// them would give, without holding them all. A read error stops the array and is kept in
/// `error` for the caller (serde can only carry its text).
struct JsonArray<I> {
    len: usize,
    messages: RefCell<Option<I>>,
    error: RefCell<Option<SessionError>>,
}

impl<I: Iterator<Item = Result<SharedMessage, SessionError>>> Serialize for JsonArray<I> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.len))?;
        let messages = self.messages.borrow_mut().take();
        for message in messages.into_iter().flatten() {
            match message {
                Ok(message) => seq.serialize_element(&*message)?,
                Err(e) => {
                    let text = e.to_string();
                    *self.error.borrow_mut() = Some(e);
                    return Err(S::Error::custom(text));
                }
            }
        }
        seq.end()
    }
}

/// How many characters of a message `sessions show` prints.
const PREVIEW_CHARS: usize = 100;

/// The start of a message on one line (whitespace collapsed), at most [`PREVIEW_CHARS`]
/// characters and `…` when there is more; an assistant's tool calls are named after its text.
///
/// Built from the message's own text, word by word, and stopped once the line is full: it used
/// to convert the whole message to its OpenAI form first, which copied every tool result in
/// full and took half of `sessions show`'s time on a 1M-token session.
fn preview(message: &AgentMessage) -> String {
    let mut line = PreviewLine::default();
    match message {
        AgentMessage::User(m) => line.content(&m.content),
        AgentMessage::ToolResult(m) => line.content(&m.content),
        AgentMessage::Assistant(m) => {
            for block in &m.content {
                if let ContentBlock::Text(t) = block {
                    line.push(&t.text);
                }
            }
            let calls: Vec<&str> = m
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::ToolCall(c) => Some(c.name.as_str()),
                    _ => None,
                })
                .collect();
            if !calls.is_empty() {
                line.push(&format!("[calls: {}]", calls.join(", ")));
            }
        }
        other => {
            if let Some(text) = as_user_text(other) {
                line.push(&text);
            }
        }
    }
    line.finish()
}

/// A preview line being filled (see [`preview`]).
#[derive(Default)]
struct PreviewLine {
    text: String,
    chars: usize,
    full: bool,
}

impl PreviewLine {
    /// Adds what a content holds as text (an image as `[image TYPE]`).
    fn content(&mut self, content: &Content) {
        match content {
            Content::Text(t) => self.push(t),
            Content::Blocks(blocks) => {
                for block in blocks {
                    match block {
                        ContentBlock::Text(t) => self.push(&t.text),
                        ContentBlock::Image(i) => self.push(&format!("[image {}]", i.mime_type)),
                        _ => {}
                    }
                }
            }
        }
    }

    /// Adds the words of `piece`, one space between words, until the line is full.
    fn push(&mut self, piece: &str) {
        for word in piece.split_whitespace() {
            if self.full {
                return;
            }
            if !self.text.is_empty() {
                if self.chars == PREVIEW_CHARS {
                    self.full = true;
                    return;
                }
                self.text.push(' ');
                self.chars += 1;
            }
            for c in word.chars() {
                if self.chars == PREVIEW_CHARS {
                    self.full = true;
                    return;
                }
                self.text.push(c);
                self.chars += 1;
            }
        }
    }

    fn finish(mut self) -> String {
        if self.full {
            self.text.push('…');
        }
        self.text
    }
}

/// `sessions import`.
pub fn import(
    store: &SessionStore,
    file: &Path,
    key: Option<&str>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<i32> {
    let outcomes = match import_into(store, file, key) {
        Ok(o) => o,
        // Errors go to stderr, so a script reading stdout never takes one for a result.
        Err(e) => {
            writeln!(err, "error: {e}")?;
            return Ok(1);
        }
    };
    for o in outcomes {
        print_imported(&o, &o.file.display().to_string(), out, err)?;
    }
    Ok(0)
}

/// The lines of one imported session: what it became on `out` (`into`: its file, or where in a
/// database it is), its warnings on `err`.
pub fn print_imported(
    o: &super::sessions_import::ImportOutcome,
    into: &str,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<()> {
    {
        // The file stays last on the line, after the arrow, for scripts that read it.
        let spawned = match &o.spawned_by {
            Some((parent, Some(call))) => format!(" (spawned by `{parent}` at tool call {call})"),
            Some((parent, None)) => format!(" (spawned by `{parent}`)"),
            None => String::new(),
        };
        writeln!(
            out,
            "imported {} ({}) as `{}`{}: {} entries → {}",
            escape(&o.source.display().to_string()),
            o.format,
            escape(&o.key),
            escape(&spawned),
            o.entries,
            escape(into)
        )?;
        // Diagnostics go to stderr, each naming the file (and line): stdout holds the result.
        for w in o.warnings.iter().take(20) {
            writeln!(err, "warning: {}", escape(w))?;
        }
        if o.warnings.len() > 20 {
            writeln!(err, "warning: … and {} more", o.warnings.len() - 20)?;
        }
    }
    Ok(())
}

/// `sessions export`. The file `--out` names is an output file ([`crate::output_file`]):
/// never the session exported or a file of the store, an existing one only with `overwrite`.
pub fn export(
    store: &SessionStore,
    id: &str,
    format: ExportFormat,
    target: Option<&Path>,
    overwrite: bool,
    out: &mut dyn Write,
) -> anyhow::Result<i32> {
    let path = resolve(store, id)?;
    let mut inputs = Inputs::new();
    inputs
        .file("the session exported", &path)
        .store(store.dir());
    export_file(&path, &inputs, format, target, overwrite, out)
}

/// [`export`] of the session file at `path`; `inputs` are the files `--out` must not be.
pub fn export_file(
    path: &Path,
    inputs: &Inputs,
    format: ExportFormat,
    target: Option<&Path>,
    overwrite: bool,
    out: &mut dyn Write,
) -> anyhow::Result<i32> {
    let file = match target {
        Some(t) => Some(OutputFile::create("--out", t, inputs, overwrite)?),
        None => None,
    };
    if format == ExportFormat::Pi {
        let Some(mut file) = file else {
            bail!("--format pi writes a file: give it with --out FILE");
        };
        for warning in export_pi(path, &mut file)? {
            eprintln!("warning: {}", escape(&warning));
        }
        let written = file.path().display().to_string();
        file.commit()?;
        writeln!(out, "wrote {}", escape(&written))?;
        return Ok(0);
    }
    let loaded = load_file(path, &LoadOptions::default())?;
    let context = rampart_sessions::build_session_context(&loaded.tree, LeafSelector::Current);
    let messages = context.messages.iter().map(|m| &**m);
    let text = match format {
        ExportFormat::Openai => serde_json::to_string_pretty(&to_openai_messages(messages))?,
        _ => to_markdown(&format!("Session {}", loaded.header.id), messages),
    };
    match file {
        Some(file) => {
            let written = file.path().display().to_string();
            file.write_whole(text.as_bytes())?;
            writeln!(out, "wrote {}", escape(&written))?;
        }
        None => writeln!(out, "{text}")?,
    }
    Ok(0)
}

/// Writes the session file at `path` to `target` as pi v3, through the same reading as an
/// import: each line that holds its entry as it stands is copied byte for byte (key order,
/// number spelling, escapes), so exporting an unchanged session gives back its lines. Returns
/// what could not be carried over (lines the loader could not read).
fn export_pi(path: &Path, target: &mut OutputFile) -> anyhow::Result<Vec<String>> {
    let dir = match target.path().parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut sink = ExportPi {
        file: Some(NewSessionFile::create_in(&dir)?),
        target,
        warnings: Vec::new(),
    };
    rampart_sessions::import::open_into(path, &mut sink)?;
    Ok(sink.warnings)
}

/// The sink of [`export_pi`]: one session, written to its target when it ends.
struct ExportPi<'a> {
    file: Option<NewSessionFile>,
    target: &'a mut OutputFile,
    warnings: Vec<String>,
}

impl rampart_sessions::import::SessionSink for ExportPi<'_> {
    type Error = anyhow::Error;

    fn begin(&mut self, _: &rampart_sessions::import::SessionStart) -> anyhow::Result<()> {
        Ok(())
    }

    fn verbatim_entry(
        &mut self,
        entry: rampart_sessions::entry::Entry,
        _: Option<u64>,
        line: &[u8],
    ) -> anyhow::Result<()> {
        if let Some(file) = &mut self.file {
            file.push_verbatim(&entry, line)?;
        }
        Ok(())
    }

    fn entry(
        &mut self,
        entry: rampart_sessions::entry::Entry,
        _: Option<u64>,
    ) -> anyhow::Result<()> {
        if let Some(file) = &mut self.file {
            file.push(&entry)?;
        }
        Ok(())
    }

    fn end(
        &mut self,
        header: rampart_sessions::entry::SessionHeader,
        warnings: Vec<String>,
    ) -> anyhow::Result<()> {
        if let Some(file) = self.file.take() {
            file.finish_into(&mut *self.target, &header)?;
        }
        self.warnings.extend(warnings);
        Ok(())
    }
}

#[cfg(test)]
#[path = "sessions_tests.rs"]
mod tests;
