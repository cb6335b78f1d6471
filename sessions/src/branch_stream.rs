//! A branch's messages read from the session file one at a time, for printing a session
//! without loading it (`rampart sessions show`).
//!
//! Why: a load holds every entry whole, so showing a session of a million tiny entries (a
//! 151 MB file) took 3.3 GB. A [`BranchReader`] reads the file twice instead: once for its
//! structure ([`crate::load::read_links`]: every line judged as a load judges it, the same
//! report, the same links, but only ids, links, kinds and line positions kept, a few dozen
//! bytes an entry), then the chosen branch's entries again, one at a time, as the caller
//! consumes them. Peak memory is the structure plus one entry.
//!
//! The messages are the ones [`crate::build_session_context`] gives for the same leaf (pi's
//! rules: the last compaction on the branch applied, `custom_message` and non-empty
//! `branch_summary` entries as messages, the thinking level and model from the branch), in the
//! same order. Only v3 files stream: a v1/v2 file needs its migration, which needs every entry
//! at once, so [`BranchReader::open`] gives `None` for one and the caller loads it.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rampart_message::{AgentMessage, SharedMessage};

use crate::context::{
    DEFAULT_THINKING_LEVEL, LeafSelector, ModelRef, branch_summary, compaction_summary,
    custom_message,
};
use crate::entry::{Entry, EntryBody, SessionHeader};
use crate::error::{Result, SessionError};
use crate::link_index::{Kind, LinkIndex};
use crate::load::{LoadOptions, LoadReport, entry_at, read_links};

/// A v3 session file whose structure has been read (see the module docs).
#[derive(Debug)]
pub struct BranchReader {
    path: PathBuf,
    file: File,
    header: SessionHeader,
    report: LoadReport,
    links: LinkIndex,
}

/// One branch of a [`BranchReader`]'s session: what its context holds, before any message is
/// read.
#[derive(Debug)]
pub struct Branch<'r> {
    reader: &'r BranchReader,
    leaf_id: Option<String>,
    thinking_level: String,
    model: Option<ModelRef>,
    compaction_id: Option<String>,
    /// The entries whose messages make the context, in order; a compaction entry stands for
    /// its summary.
    steps: Vec<usize>,
}

impl BranchReader {
    /// Reads the structure of the session at `path` (as [`crate::load_file`] would, with the
    /// same report and the same corrupt-line sidecar as `options` says); `None` for a v1/v2
    /// file, which only a load can migrate.
    pub fn open(path: &Path, options: &LoadOptions) -> Result<Option<Self>> {
        let mut links = LinkIndex::default();
        let Some((header, report)) = read_links(path, options, &mut links)? else {
            return Ok(None);
        };
        let file = File::open(path).map_err(|e| SessionError::io(path, "open", e))?;
        Ok(Some(Self {
            path: path.to_path_buf(),
            file,
            header,
            report,
            links,
        }))
    }

    /// The session header.
    pub fn header(&self) -> &SessionHeader {
        &self.header
    }

    /// What reading the file noticed, as a load reports it.
    pub fn report(&self) -> &LoadReport {
        &self.report
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.links.len()
    }

    /// Whether the session has no entries.
    pub fn is_empty(&self) -> bool {
        self.links.len() == 0
    }

    /// Whether an entry has this id.
    pub fn contains_id(&self, id: &str) -> bool {
        self.links.index_of(id).is_some()
    }

    /// The branch ending at `leaf`, as [`crate::build_session_context`] picks it from a
    /// freshly loaded tree (whose current leaf is the last entry). Reads only the entries that
    /// set the thinking level and the model, and the compaction applied.
    pub fn branch(&self, leaf: LeafSelector<'_>) -> Result<Branch<'_>> {
        let last = self.links.len().checked_sub(1);
        let leaf = match leaf {
            LeafSelector::Current | LeafSelector::Last => last,
            LeafSelector::Null => None,
            LeafSelector::Id(id) => self.links.index_of(id).or(last),
        };
        let mut branch = Branch {
            reader: self,
            leaf_id: None,
            thinking_level: DEFAULT_THINKING_LEVEL.to_owned(),
            model: None,
            compaction_id: None,
            steps: Vec::new(),
        };
        let Some(leaf) = leaf else {
            return Ok(branch);
        };
        branch.leaf_id = Some(self.links.id(leaf).to_owned());
        let path = self.links.path_to(leaf);
        let last_of = |wanted: &dyn Fn(Kind) -> bool| {
            path.iter()
                .rev()
                .copied()
                .find(|&i| wanted(self.links.kind(i)))
        };
        if let Some(at) = last_of(&|k| k == Kind::ThinkingLevel)
            && let EntryBody::ThinkingLevelChange(change) = self.entry(at)?.body
        {
            branch.thinking_level = change.thinking_level;
        }
        if let Some(at) = last_of(&|k| matches!(k, Kind::ModelChange | Kind::Assistant)) {
            branch.model = match self.entry(at)?.body {
                EntryBody::ModelChange(change) => Some(ModelRef {
                    provider: change.provider,
                    model_id: change.model_id,
                }),
                EntryBody::Message(m) => match &*m.message {
                    AgentMessage::Assistant(a) => Some(ModelRef {
                        provider: a.provider.clone(),
                        model_id: a.model.clone(),
                    }),
                    _ => None,
                },
                _ => None,
            };
        }
        let with_message = |i: &usize| self.links.kind(*i).has_message();
        match last_of(&|k| k == Kind::Compaction) {
            None => branch.steps = path.into_iter().filter(with_message).collect(),
            Some(at) => {
                drop(path);
                let entry = self.entry(at)?;
                let EntryBody::Compaction(compaction) = &entry.body else {
                    return Err(self.changed(at));
                };
                branch.steps.push(at);
                // Kept entries: from `firstKeptEntryId` up to the compaction, when that id is on
                // the way (see `crate::context`).
                let mut kept = Vec::new();
                let mut current = self.links.parent(at);
                let mut found = false;
                while let Some(index) = current {
                    if kept.len() >= self.links.len() {
                        break;
                    }
                    kept.push(index);
                    if self.links.id(index) == compaction.first_kept_entry_id {
                        found = true;
                        break;
                    }
                    current = self.links.parent(index);
                }
                if found {
                    branch
                        .steps
                        .extend(kept.iter().rev().filter(|i| with_message(i)));
                }
                let mut after = Vec::new();
                let mut current = Some(leaf);
                while let Some(index) = current {
                    if index == at || after.len() >= self.links.len() {
                        break;
                    }
                    after.push(index);
                    current = self.links.parent(index);
                }
                branch
                    .steps
                    .extend(after.iter().rev().filter(|i| with_message(i)));
                branch.compaction_id = Some(entry.id);
            }
        }
        Ok(branch)
    }

    /// The entry at `index`, read again from its line.
    fn entry(&self, index: usize) -> Result<Entry> {
        let mut buf = Vec::new();
        self.entry_with(index, &mut buf)
    }

    /// [`BranchReader::entry`] with a line buffer kept between calls.
    fn entry_with(&self, index: usize, buf: &mut Vec<u8>) -> Result<Entry> {
        match entry_at(&self.file, self.links.span(index), buf) {
            Ok(Ok(entry)) if entry.id == self.links.id(index) => Ok(entry),
            Ok(_) => Err(self.changed(index)),
            Err(e) => Err(SessionError::io(&self.path, "read", e)),
        }
    }

    /// The file no longer holds, at the entry's line, what the first read found there.
    fn changed(&self, index: usize) -> SessionError {
        SessionError::Conflict {
            path: self.path.clone(),
            problem: format!(
                "line {} no longer holds the entry read there a moment ago (the file was \
                 rewritten while it was read); read it again",
                self.links.line(index)
            ),
        }
    }
}

impl Branch<'_> {
    /// The id of the leaf (`None` for an empty session).
    pub fn leaf_id(&self) -> Option<&str> {
        self.leaf_id.as_deref()
    }

    /// The branch's thinking level (`off` when never set).
    pub fn thinking_level(&self) -> &str {
        &self.thinking_level
    }

    /// The branch's model, if it ever named one.
    pub fn model(&self) -> Option<&ModelRef> {
        self.model.as_ref()
    }

    /// The id of the compaction applied, if any.
    pub fn compaction_id(&self) -> Option<&str> {
        self.compaction_id.as_deref()
    }

    /// How many messages the context holds.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// Whether the context holds no message.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// The context's messages, oldest first, each read from its line when the iterator gets
    /// to it.
    pub fn messages(&self) -> impl Iterator<Item = Result<SharedMessage>> + '_ {
        let mut buf = Vec::new();
        self.steps.iter().map(move |&index| {
            let entry = self.reader.entry_with(index, &mut buf)?;
            let message = match &entry.body {
                EntryBody::Message(m) => return Ok(Arc::clone(&m.message)),
                EntryBody::Compaction(c) => compaction_summary(&entry, c),
                EntryBody::CustomMessage(c) => custom_message(&entry, c),
                EntryBody::BranchSummary(s) if !s.summary.is_empty() => branch_summary(&entry, s),
                _ => return Err(self.reader.changed(index)),
            };
            Ok(Arc::new(message))
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "branch_stream_tests.rs"]
mod tests;
