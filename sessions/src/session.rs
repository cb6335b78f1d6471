//! A session file opened for writing: the tree in memory, appends on disk, under the lock.
//!
//! # Appends
//!
//! Each entry is one line written with **one** `write` of `json + "\n"` to a file opened with
//! `O_APPEND`, so concurrent appenders never interleave inside a line and a crash leaves at
//! most one torn last line (which the next load quarantines). Durability follows
//! [`FsyncPolicy`].
//!
//! # Catching up before an append
//!
//! Other processes may append to the same session (a second gateway, a CLI, an engine in a
//! child process). Every append therefore runs under the session's write lock and first reads
//! whatever the file gained since this process last looked, from the byte offset it had
//! reached:
//!
//! * the new entries join the tree, so new ids are checked against them and `parentId`
//!   links can point at them;
//! * if this process's leaf was the last entry it knew of (it was following the
//!   conversation), the leaf moves to the file's new last entry, so the next entry continues
//!   the shared history instead of forking it; if it had branched on purpose, the leaf stays;
//! * an unterminated last line seen under the lock cannot be an append in progress, so it is
//!   quarantined as torn, and the next write starts with a newline to end it;
//! * if the file was replaced (another inode at the path) or truncated, nothing is written:
//!   the caller gets [`SessionError::Conflict`] and must open the session again.
#![warn(missing_docs)]

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rampart_message::SharedMessage;
use rampart_message::TranscriptRewriteResult;
use rampart_message::{AgentMessage, Content};
use serde_json::Value;

use crate::context::{LeafSelector, SessionContext, build_session_context};
use crate::entry::{
    BranchSummaryEntry, CompactionEntry, CustomEntry, CustomMessageEntry, Entry, EntryBody, Extra,
    LabelEntry, ModelChangeEntry, SessionHeader, SessionInfoEntry, ThinkingLevelChangeEntry,
};
use crate::error::{Result, SessionError};
use crate::fsutil::{self, Place};
use crate::load::{self, Cursor, LoadOptions, LoadReport, TailPolicy};
use crate::medium::{FileMedium, MediumGuard, MediumReader, SessionMedium, write_header};
use crate::migrate;
use crate::rewrite::plan_rewrite;
use crate::stamps::Stamps;
use crate::tree::SessionTree;

/// When appended entries are forced to stable storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FsyncPolicy {
    /// After every append: no acknowledged entry is lost even on power failure, at the cost
    /// of one disk flush per entry.
    Always,
    /// When the caller says a turn is complete ([`Session::sync`]). A crash of this process
    /// loses nothing (the data is in the OS); a power cut can lose the current turn only.
    #[default]
    PerTurn,
    /// Never explicitly; the OS writes back when it likes. For tests and scratch sessions.
    Never,
}

/// Knobs of an open session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionOptions {
    /// Durability of appends.
    pub fsync: FsyncPolicy,
    /// How long an append waits for another process's write lock before failing with an
    /// error that names that process.
    pub lock_timeout: Duration,
    /// How lines are read (line limit, corrupt-line sidecars).
    pub load: LoadOptions,
    /// How new entries get their ids and times: random and the wall clock, or scripted for
    /// a replay that must write the same session every time (see `stamps`).
    pub stamps: Stamps,
}

impl Default for SessionOptions {
    fn default() -> Self {
        Self {
            fsync: FsyncPolicy::default(),
            lock_timeout: Duration::from_secs(10),
            load: LoadOptions::default(),
            stamps: Stamps::Live,
        }
    }
}

/// What an append or refresh learned about other writers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CatchUp {
    /// Entries other processes appended since this process last read the file.
    pub new_entries: usize,
    /// Whether the leaf moved to the file's new last entry because of them.
    pub leaf_followed: bool,
}

/// An open session file (see the module docs).
#[derive(Debug)]
pub struct Session {
    path: PathBuf,
    header: SessionHeader,
    tree: SessionTree,
    options: SessionOptions,
    /// Where the lines are: read for catching up, appended to for entries, locked.
    medium: Box<dyn SessionMedium>,
    cursor: Cursor,
    /// The write lock while [`Session::hold`] keeps it across appends (a whole turn).
    held: Option<Box<dyn MediumGuard>>,
    /// Written since the last fsync.
    unsynced: bool,
    /// Everything noticed since open (the load plus every catch-up).
    report: LoadReport,
    /// The last context built, extended while the branch only grows ([`Session::context`]).
    context_cache: crate::context::ContextCache,
}

impl Session {
    /// Creates a new session file at `path` holding only `header`; fails if the path exists
    /// (an existing session is never overwritten).
    pub fn create(path: &Path, header: SessionHeader, options: SessionOptions) -> Result<Self> {
        let line = header
            .to_json_line()
            .map_err(|e| SessionError::InvalidRequest {
                path: path.into(),
                problem: format!("the session header cannot be written as JSON: {e}"),
            })?;
        fsutil::write_atomically(path, Place::CreateNew, |out| {
            out.write_all(line.as_bytes())?;
            out.write_all(b"\n")
        })
        .map_err(|e| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                SessionError::InvalidRequest {
                    path: path.into(),
                    problem: "a file already exists there; open it instead, or choose another path"
                        .into(),
                }
            } else {
                SessionError::io(path, "create", e)
            }
        })?;
        Self::open(path, options)
    }

    /// Opens an existing session for reading and appending.
    ///
    /// A v1/v2 file is migrated first: the v3 result replaces it atomically and the original
    /// is kept beside it (see `migrate`). An incomplete last line is looked at again under the
    /// write lock and quarantined if it is torn. Needs write access; for read-only access use
    /// [`load::load_file`].
    pub fn open(path: &Path, options: SessionOptions) -> Result<Self> {
        let medium = FileMedium::open(path)?;
        let mut loaded = load_file_medium(&medium, &options.load)?;
        if let Some(from_version) = loaded.report.migration.as_ref().map(|m| m.from_version) {
            // Migrate under the lock, from a fresh read, so two processes opening the same
            // old file do not both migrate it.
            let guard = medium.lock(options.lock_timeout)?;
            let fresh = load_file_medium(&FileMedium::open(path)?, &options.load)?;
            let migration = match fresh.report.migration {
                Some(migration) => {
                    let kept = migrate::persist(
                        path,
                        from_version,
                        &fresh.header,
                        fresh.tree.entries().iter(),
                    )
                    .map_err(|e| SessionError::io(path, "write the migrated (v3) session", e))?;
                    tracing::info!(
                        file = %path.display(),
                        from_version,
                        original_kept_at = %kept.display(),
                        entries = fresh.tree.len(),
                        "migrated the session to format v3; the original is kept beside it"
                    );
                    Some(migrate::MigrationReport {
                        written_to: Some(path.to_owned()),
                        original_kept_at: Some(kept),
                        ..migration
                    })
                }
                None => None,
            };
            drop(guard);
            let new_medium = FileMedium::open(path)?;
            let reloaded = load_file_medium(&new_medium, &options.load)?;
            let mut report = reloaded.report.clone();
            report.migration = migration;
            // Lines quarantined from the original are not in the new file; keep them in the
            // report so the caller still hears about them.
            report.corrupt_lines = loaded.report.corrupt_lines;
            loaded = load::Loaded { report, ..reloaded };
            return Self::finish_open(options, Box::new(new_medium), loaded);
        }
        Self::finish_open(options, Box::new(medium), loaded)
    }

    /// Opens a session kept on another [`SessionMedium`] than a file of this machine (a shared
    /// store). The log must already be v3: migrations are done on files, by [`Session::open`].
    pub fn open_on(medium: Box<dyn SessionMedium>, options: SessionOptions) -> Result<Self> {
        let path = medium.path().to_owned();
        let len = medium
            .len()
            .map_err(|e| SessionError::io(&path, "read the size of", e))?;
        let mut loaded = load::load_source(
            &MediumReader(medium.as_ref()),
            &path,
            len,
            &options.load,
            TailPolicy::MaybeInFlight,
        )?;
        if loaded.report.migration.is_some() {
            return Err(SessionError::InvalidRequest {
                path,
                problem: "the session is in an old format (v1/v2); open it as a file first so it is migrated to v3".into(),
            });
        }
        load::record_corrupt(
            &path,
            &MediumReader(medium.as_ref()),
            &mut loaded.report,
            0,
            &options.load,
        );
        Self::finish_open(options, medium, loaded)
    }

    /// Creates a new session holding only `header` on an empty [`SessionMedium`]; fails if it
    /// holds anything (an existing session is never overwritten).
    pub fn create_on(
        medium: Box<dyn SessionMedium>,
        header: SessionHeader,
        options: SessionOptions,
    ) -> Result<Self> {
        let line = header
            .to_json_line()
            .map_err(|e| SessionError::InvalidRequest {
                path: medium.path().to_owned(),
                problem: format!("the session header cannot be written as JSON: {e}"),
            })?;
        write_header(medium.as_ref(), &line)?;
        Self::open_on(medium, options)
    }

    fn finish_open(
        options: SessionOptions,
        medium: Box<dyn SessionMedium>,
        loaded: load::Loaded,
    ) -> Result<Self> {
        let pending = loaded.report.pending_tail.is_some();
        let mut session = Self {
            path: medium.path().to_owned(),
            header: loaded.header,
            tree: loaded.tree,
            options,
            medium,
            cursor: loaded.cursor,
            held: None,
            unsynced: false,
            report: loaded.report,
            context_cache: Default::default(),
        };
        if pending {
            // Decide now whether the tail is torn, so the open reports it.
            session.refresh()?;
        }
        Ok(session)
    }

    /// The session file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The header.
    pub fn header(&self) -> &SessionHeader {
        &self.header
    }

    /// The entry tree (read-only; change it through the methods here so the file follows).
    pub fn tree(&self) -> &SessionTree {
        &self.tree
    }

    /// All entries in file order.
    pub fn entries(&self) -> &[Entry] {
        self.tree.entries()
    }

    /// What the load and later catch-ups noticed (corrupt lines, migration, …).
    pub fn report(&self) -> &LoadReport {
        &self.report
    }

    /// The options in force.
    pub fn options(&self) -> &SessionOptions {
        &self.options
    }

    /// The leaf's id (`None` after [`Session::reset_leaf`]).
    pub fn leaf_id(&self) -> Option<&str> {
        self.tree.leaf_id()
    }

    /// The model context of the current branch. Its messages share the tree's allocations,
    /// so this is cheap enough to call every turn (see `context`).
    pub fn context(&self) -> SessionContext {
        self.context_cache.current(&self.tree)
    }

    /// The model context for another leaf.
    pub fn context_at(&self, leaf: LeafSelector<'_>) -> SessionContext {
        build_session_context(&self.tree, leaf)
    }

    /// Moves the leaf to entry `id`; the next append starts a branch there. In memory only:
    /// the file records branches through the `parentId` of what is appended next.
    pub fn branch(&mut self, id: &str) -> Result<()> {
        if self.tree.branch(id) {
            Ok(())
        } else {
            Err(SessionError::UnknownEntry {
                path: self.path.clone(),
                id: id.to_owned(),
            })
        }
    }

    /// Clears the leaf: the context is empty and the next append is a new root.
    pub fn reset_leaf(&mut self) {
        self.tree.reset_leaf();
    }

    /// Appends an entry with this body at the leaf; returns the new entry's id.
    pub fn append(&mut self, body: EntryBody) -> Result<String> {
        let mut ids = self.append_all(vec![body])?;
        ids.pop().ok_or_else(|| SessionError::InvalidRequest {
            path: self.path.clone(),
            problem: "the append produced no entry".into(),
        })
    }

    /// Appends several entries in order, as one write under one lock; returns their ids.
    pub fn append_all(&mut self, bodies: Vec<EntryBody>) -> Result<Vec<String>> {
        if bodies.is_empty() {
            return Ok(Vec::new());
        }
        let (_guard, _) = self.lock()?;
        let mut planned: Vec<Entry> = Vec::with_capacity(bodies.len());
        // The ids planned so far, so a batch of hundreds checks each new id in O(1).
        let mut planned_ids: std::collections::HashSet<String> = std::collections::HashSet::new();
        for body in bodies {
            let id = self.options.stamps.entry_id(|candidate| {
                self.tree.contains_id(candidate) || planned_ids.contains(candidate)
            });
            planned_ids.insert(id.clone());
            let parent = match planned.last() {
                Some(previous) => Some(previous.id.clone()),
                None => self.tree.leaf_id().map(str::to_owned),
            };
            planned.push(Entry::stamped(
                id,
                parent,
                body,
                self.options.stamps.timestamp(),
            ));
        }
        self.write_locked(planned)
    }

    /// Appends a `message` entry.
    pub fn append_message(&mut self, message: AgentMessage) -> Result<String> {
        self.append(EntryBody::from_message(message))
    }

    /// Appends a `message` entry for a message that is already shared, keeping that
    /// allocation: a host that has already put the message in an engine's list appends it
    /// here without a copy, and the next context hands back the same `Arc`, so engines see
    /// nothing new.
    pub fn append_shared(&mut self, message: SharedMessage) -> Result<String> {
        self.append(EntryBody::from_shared(message))
    }

    /// Appends a `compaction` entry: context before `first_kept_entry_id` is replaced by
    /// `summary` from now on.
    pub fn append_compaction(
        &mut self,
        summary: impl Into<String>,
        first_kept_entry_id: impl Into<String>,
        tokens_before: u64,
        details: Option<Value>,
        from_hook: Option<bool>,
    ) -> Result<String> {
        self.append(EntryBody::Compaction(CompactionEntry {
            summary: summary.into(),
            first_kept_entry_id: first_kept_entry_id.into(),
            tokens_before,
            details,
            from_hook,
            extra: Extra::new(),
        }))
    }

    /// Appends a `model_change` entry.
    pub fn append_model_change(
        &mut self,
        provider: impl Into<String>,
        model_id: impl Into<String>,
    ) -> Result<String> {
        self.append(EntryBody::ModelChange(ModelChangeEntry {
            provider: provider.into(),
            model_id: model_id.into(),
            extra: Extra::new(),
        }))
    }

    /// Appends a `thinking_level_change` entry.
    pub fn append_thinking_level_change(&mut self, level: impl Into<String>) -> Result<String> {
        self.append(EntryBody::ThinkingLevelChange(ThinkingLevelChangeEntry {
            thinking_level: level.into(),
            extra: Extra::new(),
        }))
    }

    /// Appends a `custom` entry (extension state, never sent to the model).
    pub fn append_custom(
        &mut self,
        custom_type: impl Into<String>,
        data: Option<Value>,
    ) -> Result<String> {
        self.append(EntryBody::Custom(CustomEntry {
            custom_type: custom_type.into(),
            data,
            extra: Extra::new(),
        }))
    }

    /// Appends a `custom_message` entry (an extension's message the model sees).
    pub fn append_custom_message(
        &mut self,
        custom_type: impl Into<String>,
        content: Content,
        display: bool,
        details: Option<Value>,
    ) -> Result<String> {
        self.append(EntryBody::CustomMessage(CustomMessageEntry {
            custom_type: custom_type.into(),
            content,
            display,
            details,
            extra: Extra::new(),
        }))
    }

    /// Appends a `label` on entry `target_id` (`None` clears it). The target must exist.
    pub fn append_label(&mut self, target_id: &str, label: Option<String>) -> Result<String> {
        if !self.tree.contains_id(target_id) {
            return Err(SessionError::UnknownEntry {
                path: self.path.clone(),
                id: target_id.to_owned(),
            });
        }
        self.append(EntryBody::Label(LabelEntry {
            target_id: target_id.to_owned(),
            label,
            extra: Extra::new(),
        }))
    }

    /// Appends a `session_info` entry (a display name).
    pub fn append_session_info(&mut self, name: Option<String>) -> Result<String> {
        self.append(EntryBody::SessionInfo(SessionInfoEntry {
            name,
            extra: Extra::new(),
        }))
    }

    /// pi's `branchWithSummary`: moves the leaf to `from` (a new root for `None`) and appends
    /// a `branch_summary` there.
    pub fn branch_with_summary(
        &mut self,
        from: Option<&str>,
        summary: impl Into<String>,
        details: Option<Value>,
        from_hook: Option<bool>,
    ) -> Result<String> {
        match from {
            Some(id) => self.branch(id)?,
            None => self.reset_leaf(),
        }
        self.append(EntryBody::BranchSummary(BranchSummaryEntry {
            from_id: from.unwrap_or("root").to_owned(),
            summary: summary.into(),
            details,
            from_hook,
            extra: Extra::new(),
        }))
    }

    /// Replaces messages on the active branch by appending a new branch (see `rewrite`). The
    /// original entries stay in the file.
    pub fn rewrite(
        &mut self,
        replacements: &[(String, AgentMessage)],
    ) -> Result<TranscriptRewriteResult> {
        self.rewrite_shared(&crate::rewrite::share(replacements))
    }

    /// [`Session::rewrite`] with shared replacements (what engines return): the new entries
    /// keep those allocations, and the unchanged messages they re-append stay the same
    /// allocations too, so a rewrite copies no message.
    pub fn rewrite_shared(
        &mut self,
        replacements: &[(String, SharedMessage)],
    ) -> Result<TranscriptRewriteResult> {
        let (_guard, _) = self.lock()?;
        let plan = match plan_rewrite(&self.tree, replacements, &self.options.stamps) {
            Ok(plan) => plan,
            Err(unchanged) => return Ok(unchanged),
        };
        let count = plan.entries.len();
        self.write_locked(plan.entries)?;
        tracing::info!(
            file = %self.path.display(),
            rewritten = plan.result.rewritten_entries,
            reappended = count,
            bytes_freed = plan.result.bytes_freed,
            "rewrote the active branch as a new branch; the old entries stay in the file"
        );
        Ok(plan.result)
    }

    /// Forces appended entries to stable storage (the end of a turn under
    /// [`FsyncPolicy::PerTurn`]). Cheap when nothing was written since the last sync, and a
    /// no-op under [`FsyncPolicy::Never`]: the caller that chose it (a replay's scratch
    /// session) has said it needs no flush, and the run loop syncs after every answer.
    pub fn sync(&mut self) -> Result<()> {
        if self.unsynced && self.options.fsync != FsyncPolicy::Never {
            self.medium
                .sync()
                .map_err(|e| SessionError::io(&self.path, "sync", e))?;
            self.unsynced = false;
        }
        Ok(())
    }

    /// Reads entries other processes appended since this process last looked (under the
    /// lock, so a torn last line is recognised as such).
    pub fn refresh(&mut self) -> Result<CatchUp> {
        let (_guard, caught_up) = self.lock()?;
        Ok(caught_up)
    }

    /// Writes the whole session (header and every entry in file order) to a **new** file at
    /// `target`, atomically; fails if `target` exists.
    pub fn save_as(&self, target: &Path) -> Result<()> {
        save_session(target, &self.header, &self.tree)
    }

    /// Takes the write lock and keeps it, across every append, until [`Session::release`] or
    /// the session is dropped; catches up with other writers first, so what is read next is
    /// the file as it stands. Waits up to `timeout` for another holder; the error names its
    /// pid.
    ///
    /// Why: a turn reads the context, waits for a model, then appends the answer. With the
    /// lock taken per append, a second writer could append its own prompt in between, and the
    /// transcript would read `user, user, assistant, assistant`. Holding it for the turn makes
    /// the second writer wait for the whole turn instead.
    pub fn hold(&mut self, timeout: Duration) -> Result<CatchUp> {
        if self.held.is_none() {
            self.held = Some(self.medium.lock(timeout)?);
        }
        let caught_up = self.catch_up_locked();
        if caught_up.is_err() {
            self.held = None;
        }
        caught_up
    }

    /// Lets go of a lock taken by [`Session::hold`]; nothing when it is not held.
    pub fn release(&mut self) {
        self.held = None;
    }

    /// Whether [`Session::hold`] keeps the write lock now.
    pub fn is_held(&self) -> bool {
        self.held.is_some()
    }

    /// Takes the write lock (unless [`Session::hold`] keeps it) and catches up with other
    /// writers. The guard is `None` when the lock is held for longer than this call.
    fn lock(&mut self) -> Result<(Option<Box<dyn MediumGuard>>, CatchUp)> {
        let guard = match self.held {
            Some(_) => None,
            None => Some(self.medium.lock(self.options.lock_timeout)?),
        };
        let caught_up = self.catch_up_locked()?;
        Ok((guard, caught_up))
    }

    /// The catch-up described in the module docs. Caller holds the lock.
    fn catch_up_locked(&mut self) -> Result<CatchUp> {
        if let Err(problem) = self.medium.check_current() {
            return Err(SessionError::Conflict {
                path: self.path.clone(),
                problem,
            });
        }
        let len = self
            .medium
            .len()
            .map_err(|e| SessionError::io(&self.path, "read the size of", e))?;
        if len < self.cursor.offset {
            return Err(SessionError::Conflict {
                path: self.path.clone(),
                problem: format!(
                    "it is {len} bytes long, shorter than the {} bytes already read: it was truncated",
                    self.cursor.offset
                ),
            });
        }
        if len == self.cursor.offset {
            return Ok(CatchUp::default());
        }
        let before = self.tree.len();
        let was_following = self.tree.leaf_index() == before.checked_sub(1);
        load::catch_up(
            &MediumReader(self.medium.as_ref()),
            &self.path,
            len,
            &mut self.cursor,
            &self.options.load,
            &mut self.tree,
            &mut self.report,
        )
        .map_err(|e| SessionError::io(&self.path, "read", e))?;
        let new_entries = self.tree.len() - before;
        let leaf_followed = was_following && new_entries > 0;
        if leaf_followed {
            self.tree.set_leaf_index(self.tree.len().checked_sub(1));
        }
        if new_entries > 0 {
            tracing::debug!(
                file = %self.path.display(),
                new_entries,
                leaf_followed,
                "caught up with entries appended by another process"
            );
        }
        Ok(CatchUp {
            new_entries,
            leaf_followed,
        })
    }

    /// Writes `entries` (already linked to the leaf and to each other) in one write, then adds
    /// them to the tree. Caller holds the lock and has caught up.
    fn write_locked(&mut self, entries: Vec<Entry>) -> Result<Vec<String>> {
        let mut buf = Vec::new();
        // End an unterminated last line first, so the new entry starts a line of its own.
        let ended_tail = self.cursor.mid_line;
        if ended_tail {
            buf.push(b'\n');
        }
        for entry in &entries {
            let start = buf.len();
            crate::compact_json::write(&mut buf, entry).map_err(|e| {
                SessionError::InvalidRequest {
                    path: self.path.clone(),
                    problem: format!(
                        "entry of type `{}` cannot be written as JSON: {e}",
                        entry.entry_type()
                    ),
                }
            })?;
            // Never write a line the loader would refuse: it would be lost on the next load.
            let limit = self.options.load.max_line_bytes;
            if buf.len() - start > limit {
                return Err(line_too_long(&self.path, entry, buf.len() - start, limit));
            }
            // Read from the entry, not from its line: the same figure without scanning the
            // strings (`json_nesting`).
            let depth = crate::json_nesting::depth(entry);
            if depth > MAX_JSON_DEPTH {
                return Err(line_too_deep(&self.path, entry, depth));
            }
            buf.push(b'\n');
        }
        // One append of whole lines, placed at the end as a unit (see `SessionMedium`).
        if let Err(error) = self.medium.append(&buf) {
            return Err(SessionError::io(&self.path, "append to", error));
        }
        self.unsynced = true;
        if self.options.fsync == FsyncPolicy::Always {
            self.sync()?;
        }
        let first_line = self.cursor.next_line + u64::from(ended_tail);
        self.cursor.offset += buf.len() as u64;
        self.cursor.mid_line = false;
        self.cursor.next_line = first_line + entries.len() as u64;
        self.report.bytes = self.cursor.offset;
        self.report.lines = self.cursor.next_line - 1;
        let mut ids = Vec::with_capacity(entries.len());
        for (line, entry) in (first_line..).zip(entries) {
            ids.push(entry.id.clone());
            self.tree.attach(entry);
            let index = self.tree.len() - 1;
            self.tree.set_line(index, line);
        }
        self.report.entries = self.tree.len();
        Ok(ids)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Under `PerTurn` a caller that forgot the last `sync` still gets one.
        if self.options.fsync != FsyncPolicy::Never
            && self.unsynced
            && let Err(error) = self.medium.sync()
        {
            tracing::warn!(file = %self.path.display(), %error, "could not sync the session file on close");
        }
    }
}

/// Loads a session file from the handle the medium opened (so the content and the handle are
/// the same file even if the path is replaced meanwhile).
fn load_file_medium(medium: &FileMedium, options: &LoadOptions) -> Result<load::Loaded> {
    let path = medium.path();
    let file = medium.file();
    let len = file
        .metadata()
        .map_err(|e| SessionError::io(path, "read the size of", e))?
        .len();
    let mut loaded = load::load_source(file, path, len, options, TailPolicy::MaybeInFlight)?;
    load::record_corrupt(path, file, &mut loaded.report, 0, options);
    Ok(loaded)
}

/// Writes `header` and every entry of `tree` (file order) to a new file at `target`,
/// atomically; fails if `target` exists, so nobody's file is overwritten.
pub fn save_session(target: &Path, header: &SessionHeader, tree: &SessionTree) -> Result<()> {
    let header_line = header
        .to_json_line()
        .map_err(|e| SessionError::InvalidRequest {
            path: target.into(),
            problem: format!("the header cannot be written as JSON: {e}"),
        })?;
    // A line the loader would refuse is never written: the whole save fails before the file
    // appears (the temp file is dropped).
    let limit = crate::load::DEFAULT_MAX_LINE_BYTES;
    let mut too_long: Option<(usize, usize)> = None;
    let mut too_deep: Option<(usize, usize)> = None;
    fsutil::write_atomically(target, Place::CreateNew, |out| {
        out.write_all(header_line.as_bytes())?;
        out.write_all(b"\n")?;
        let mut line = Vec::new();
        for (index, entry) in tree.entries().iter().enumerate() {
            line.clear();
            crate::compact_json::write(&mut line, entry)?;
            if line.len() > limit {
                too_long = Some((index, line.len()));
                return Err(io::Error::other("line over the loader's limit"));
            }
            let depth = crate::json_nesting::depth(entry);
            if depth > MAX_JSON_DEPTH {
                too_deep = Some((index, depth));
                return Err(io::Error::other("line nested deeper than the loader reads"));
            }
            line.push(b'\n');
            out.write_all(&line)?;
        }
        Ok(())
    })
    .map_err(|e| {
        if let Some((index, length)) = too_long {
            line_too_long(target, &tree.entries()[index], length, limit)
        } else if let Some((index, depth)) = too_deep {
            line_too_deep(target, &tree.entries()[index], depth)
        } else if e.kind() == io::ErrorKind::AlreadyExists {
            SessionError::InvalidRequest {
                path: target.into(),
                problem: "a file already exists there; choose another path (existing files are never overwritten)".into(),
            }
        } else {
            SessionError::io(target, "write", e)
        }
    })
}

/// The error for an entry whose line would be longer than the loader accepts.
pub(crate) fn line_too_long(
    path: &Path,
    entry: &Entry,
    length: usize,
    limit: usize,
) -> SessionError {
    SessionError::InvalidRequest {
        path: path.into(),
        problem: format!(
            "entry {} (`{}`) would be a line of {length} bytes, over the {limit}-byte limit the \
             loader reads; nothing was written. Move its large content to the blob store first \
             (rampart does this for message text)",
            entry.id,
            entry.entry_type()
        ),
    }
}

/// The deepest nesting of arrays and objects a line may have: serde_json, which the loader
/// reads lines with, refuses a 128th level. A deeper line would be written fine and then lost
/// (quarantined as corrupt) on the next load; found by the fuzzer on an import that wrapped a
/// 127-level source value in an entry.
pub(crate) const MAX_JSON_DEPTH: usize = 127;

/// How deeply the JSON text `line` nests arrays and objects (brackets inside strings do not
/// count). A string is skipped with `memchr` to its closing quote (one is escaped when an odd
/// number of backslashes precede it): read byte by byte, this was a tenth of storing a new
/// 200k-token conversation, whose lines are mostly long strings.
pub(crate) fn json_depth(line: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut at = 0;
    while at < line.len() {
        match line[at] {
            b'"' => {
                let open = at;
                at += 1;
                loop {
                    let Some(quote) = memchr::memchr(b'"', &line[at..]) else {
                        // An unterminated string: nothing after it nests.
                        return deepest;
                    };
                    at += quote;
                    let backslashes = line[open + 1..at]
                        .iter()
                        .rev()
                        .take_while(|&&b| b == b'\\')
                        .count();
                    at += 1;
                    if backslashes % 2 == 0 {
                        break;
                    }
                }
                continue;
            }
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        at += 1;
    }
    deepest
}

/// The error for an entry whose line would nest deeper than the loader reads.
pub(crate) fn line_too_deep(path: &Path, entry: &Entry, depth: usize) -> SessionError {
    SessionError::InvalidRequest {
        path: path.into(),
        problem: format!(
            "entry {} (`{}`) would be a line nesting arrays and objects {depth} levels deep, \
             deeper than the {MAX_JSON_DEPTH} levels the loader reads; nothing was written. \
             Flatten the value (for example, keep it as a JSON string)",
            entry.id,
            entry.entry_type()
        ),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "session_depth_tests.rs"]
mod depth_tests;
