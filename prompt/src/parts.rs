//! The breakdown of a built prompt: which part each byte belongs to.
//!
//! A host counts tokens per part for a "what is in my window?" view, so the parts **tile** the
//! text: in order, without gaps or overlaps, every byte in exactly one part, the newlines that
//! join sections included (each belongs to the part it ends).

use std::ops::Range;

use crate::mode::PromptMode;

/// A section of the prompt, in the order the builder writes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Section {
    /// The identity line.
    Identity,
    /// "## Tooling": the tool list.
    Tooling,
    /// "## Tool Call Style".
    ToolCallStyle,
    /// "## Execution Bias" (full mode).
    ExecutionBias,
    /// "## Safety".
    Safety,
    /// "## Rampart CLI Quick Reference".
    CliReference,
    /// "## Skills (mandatory)": how to use skills (the catalog is its own part).
    Skills,
    /// "## Memory Recall" (full mode).
    MemoryRecall,
    /// The line saying where the current date and time come from.
    TimeLookup,
    /// "## Workspace".
    Workspace,
    /// "## Current Date & Time": the time zone only.
    CurrentDateTime,
    /// "## Workspace Files (injected)".
    WorkspaceFiles,
    /// "# Project Context": its heading and intro (each file is its own part).
    ProjectContext,
    /// "## Silent Replies" (full mode).
    SilentReplies,
    /// "# Dynamic Project Context": the heading of the files below the marker.
    DynamicProjectContext,
    /// "## Subagent Context" or "## Group Chat Context" with the extra system prompt.
    ExtraContext,
    /// "## Heartbeats" (full mode).
    Heartbeats,
    /// "## Runtime": last.
    Runtime,
}

impl Section {
    /// A short stable name for views and logs.
    pub fn name(self) -> &'static str {
        match self {
            Self::Identity => "identity",
            Self::Tooling => "tooling",
            Self::ToolCallStyle => "tool-call-style",
            Self::ExecutionBias => "execution-bias",
            Self::Safety => "safety",
            Self::CliReference => "cli-reference",
            Self::Skills => "skills",
            Self::MemoryRecall => "memory-recall",
            Self::TimeLookup => "time-lookup",
            Self::Workspace => "workspace",
            Self::CurrentDateTime => "current-date-time",
            Self::WorkspaceFiles => "workspace-files",
            Self::ProjectContext => "project-context",
            Self::SilentReplies => "silent-replies",
            Self::DynamicProjectContext => "dynamic-project-context",
            Self::ExtraContext => "extra-context",
            Self::Heartbeats => "heartbeats",
            Self::Runtime => "runtime",
        }
    }
}

/// What a part of the prompt is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PartKind {
    /// A section written by the builder.
    Section(Section),
    /// The `<available_skills>` catalog inside the Skills section.
    SkillsCatalog,
    /// One bootstrap file inside (Dynamic) Project Context: its heading and contents.
    ContextFile {
        /// The file name (`AGENTS.md`).
        name: String,
    },
    /// The cache-boundary marker: what precedes it is the cacheable prefix.
    CacheBoundary,
    /// The context engine's `systemPromptAddition`.
    EngineAddition,
    /// The host's `systemPromptOverride`, which replaced the built prompt.
    Override,
}

impl PartKind {
    /// A label for views: `section:tooling`, `file:AGENTS.md`, `skills-catalog`,
    /// `cache-boundary`, `engine-addition`, `override`.
    pub fn label(&self) -> String {
        match self {
            Self::Section(s) => format!("section:{}", s.name()),
            Self::SkillsCatalog => "skills-catalog".to_string(),
            Self::ContextFile { name } => format!("file:{name}"),
            Self::CacheBoundary => "cache-boundary".to_string(),
            Self::EngineAddition => "engine-addition".to_string(),
            Self::Override => "override".to_string(),
        }
    }
}

/// One part of the prompt and the bytes of the text it covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptPart {
    /// What it is.
    pub kind: PartKind,
    /// Its byte range in [`BuiltPrompt::text`].
    pub range: Range<usize>,
}

/// A system prompt and its breakdown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltPrompt {
    /// The prompt.
    pub text: String,
    /// Its parts, in order, tiling `text` exactly.
    pub parts: Vec<PromptPart>,
    /// The mode it was built in.
    pub mode: PromptMode,
}

impl BuiltPrompt {
    /// The text of `part`.
    pub fn part_text(&self, part: &PromptPart) -> &str {
        &self.text[part.range.clone()]
    }

    /// Each part with its text, in order.
    pub fn iter_parts(&self) -> impl Iterator<Item = (&PartKind, &str)> {
        self.parts
            .iter()
            .map(|p| (&p.kind, &self.text[p.range.clone()]))
    }

    /// The text of the first part of kind `kind`, if any.
    pub fn find(&self, kind: &PartKind) -> Option<&str> {
        self.parts
            .iter()
            .find(|p| &p.kind == kind)
            .map(|p| self.part_text(p))
    }
}

/// A part before its position is known: its kind and its text.
pub(crate) type Piece = (PartKind, String);

/// Lines tagged with their part, joined by the prompt's rule: empty lines are dropped and the
/// rest joined with "\n" (so there are no blank lines between sections, only inside
/// multi-line lines). Each joining newline goes to the part of the line it ends.
#[derive(Debug, Default)]
pub(crate) struct Lines {
    lines: Vec<Piece>,
}

impl Lines {
    /// Adds `line` to part `kind`, unless it is empty.
    pub(crate) fn push(&mut self, kind: &PartKind, line: impl Into<String>) {
        let line = line.into();
        if !line.is_empty() {
            self.lines.push((kind.clone(), line));
        }
    }

    /// Adds each of `lines` to part `kind`.
    pub(crate) fn extend<I, S>(&mut self, kind: &PartKind, lines: I)
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        for line in lines {
            self.push(kind, line);
        }
    }

    /// The joined text as pieces, consecutive lines of one part merged.
    pub(crate) fn into_pieces(self) -> Vec<Piece> {
        let count = self.lines.len();
        let mut pieces: Vec<Piece> = Vec::new();
        for (i, (kind, mut line)) in self.lines.into_iter().enumerate() {
            if i + 1 < count {
                line.push('\n');
            }
            match pieces.last_mut() {
                Some((last, text)) if *last == kind => text.push_str(&line),
                _ => pieces.push((kind, line)),
            }
        }
        pieces
    }
}

/// The prompt from its pieces: their texts concatenated, each piece's range recorded. Empty
/// pieces are dropped and neighbours of one kind merged, so every part covers some bytes.
pub(crate) fn assemble(pieces: Vec<Piece>, mode: PromptMode) -> BuiltPrompt {
    let mut text = String::with_capacity(pieces.iter().map(|(_, t)| t.len()).sum());
    let mut parts: Vec<PromptPart> = Vec::with_capacity(pieces.len());
    for (kind, piece) in pieces {
        if piece.is_empty() {
            continue;
        }
        let start = text.len();
        text.push_str(&piece);
        match parts.last_mut() {
            Some(last) if last.kind == kind => last.range.end = text.len(),
            _ => parts.push(PromptPart {
                kind,
                range: start..text.len(),
            }),
        }
    }
    BuiltPrompt { text, parts, mode }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "parts_tests.rs"]
mod tests;
