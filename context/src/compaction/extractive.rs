//! The embedded summariser: deterministic, extractive, no model.
//!
//! Why it exists: with no compaction model configured, or when every model attempt failed, a
//! session still has to be compacted, and the worst outcome is a summary that pretends (a
//! bare "Summary unavailable", pain point 3) or one that silently drops what the user asked
//! for. This summariser quotes instead of writing: it fills the five required headings with
//! sentences and values picked from the transcript by fixed rules, says at the top that no
//! model was involved, and gives the same output for the same input.
//!
//! - **Pending user asks**: the latest user message, then earlier ones no assistant text
//!   answered, newest first;
//! - **Decisions**: assistant sentences with decision cues ("decided", "we'll", "instead of", …);
//! - **Constraints/Rules**: user sentences with rule cues ("must", "never", "always", "don't", …);
//! - **Open TODOs**: sentences with TODO cues ("TODO", "next step", "still need", …);
//! - **Exact identifiers**: every identifier of the input ([`IdentifierSet`]), deduplicated;
//! - **Tool activity**: tool-call counts, failures and the files read or modified.
//!
//! Merge requests (and a `previous_summary`) are merged section by section: items are
//! deduplicated and kept in order, newest asks first. Each section has a share of a character
//! budget (`max_tokens · 4`, at most [`DEFAULT_MAX_CHARS`]); when a section has more than fits,
//! the newest items win and a line says how many were left out.

use std::collections::{BTreeMap, HashSet};
use std::sync::LazyLock;

use regex::Regex;

use super::file_ops::{FileOps, collect_tool_failures, truncate_with_dots};
use super::identifiers::IdentifierSet;
use super::instructions::REQUIRED_SUMMARY_SECTIONS;
use super::suffix::{PRESERVED_TURNS_HEADING, SPLIT_TURN_HEADING, SUMMARY_TRUNCATED_MARKER};
use super::summarizer::{SummarizeError, Summarizer, SummaryKind, SummaryRequest};
use super::transcript::message_text;
use crate::hygiene::calls::call_ref;
use rampart_message::SharedMessage;
use rampart_message::{AgentMessage, ContentBlock};

/// The label of the extractive summariser in events and logs.
pub const EXTRACTIVE_LABEL: &str = "extractive";

/// The first line of every extractive summary.
pub const EXTRACTIVE_NOTICE: &str = "[Extractive summary made without a model: the lines below are quoted from the transcript by fixed rules (asks, decisions, constraints, TODOs, identifiers), not written or checked by a model.]";

/// The largest extractive summary, in characters. Why 12,000: the final summary is capped at
/// 16,000 characters with its suffix; this leaves the suffix room.
pub const DEFAULT_MAX_CHARS: usize = 12_000;

/// The heading of the extra section with tool counts, failures and files.
pub const TOOL_ACTIVITY_HEADING: &str = "## Tool activity";

/// Characters of one quoted sentence at most.
const MAX_ITEM_CHARS: usize = 220;
/// Characters of one quoted ask at most.
const MAX_ASK_CHARS: usize = 320;
/// Characters a section costs besides its items: its heading and an "omitted" line.
const SECTION_OVERHEAD_CHARS: usize = 80;
/// Preamble lines kept at most.
const MAX_PREAMBLE_LINES: usize = 8;
/// Marks the latest ask in the pending asks.
const LATEST_MARK: &str = "(latest) ";
/// Failures listed in the tool-activity section at most.
const MAX_ACTIVITY_FAILURES: usize = 5;
/// Files listed per list in the tool-activity section at most.
const MAX_ACTIVITY_FILES: usize = 15;

const DECISIONS: &str = REQUIRED_SUMMARY_SECTIONS[0];
const TODOS: &str = REQUIRED_SUMMARY_SECTIONS[1];
const CONSTRAINTS: &str = REQUIRED_SUMMARY_SECTIONS[2];
const ASKS: &str = REQUIRED_SUMMARY_SECTIONS[3];
const IDENTIFIERS: &str = REQUIRED_SUMMARY_SECTIONS[4];

/// Each section's share of the budget, in percent (the rest is the preamble's).
const SHARES: [(&str, usize); 6] = [
    (DECISIONS, 18),
    (TODOS, 11),
    (CONSTRAINTS, 15),
    (ASKS, 15),
    (IDENTIFIERS, 27),
    (TOOL_ACTIVITY_HEADING, 9),
];

static DECISION_CUE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(decided|decide to|decision|we will|we'll|i will|i'll|let's|let us|going with|go with|chose|chosen|opted|settled on|agreed|instead of|switch(ed)? to|the plan is|the fix is|approach)\b").ok()
});
static CONSTRAINT_CUE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(must|mustn't|never|always|don't|do not|should not|shouldn't|only|required|requires|make sure|ensure|avoid|no longer|not allowed|forbidden)\b").ok()
});
static TODO_CUE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(todo|fixme|next step|next steps|still need|still needs|needs to|need to|remaining|follow[- ]up|not yet|pending|later)\b").ok()
});

fn cue(re: &LazyLock<Option<Regex>>, text: &str) -> bool {
    re.as_ref().is_some_and(|r| r.is_match(text))
}

/// The extractive summariser. `Default` uses [`DEFAULT_MAX_CHARS`].
#[derive(Debug, Clone)]
pub struct ExtractiveSummarizer {
    max_chars: usize,
}

impl Default for ExtractiveSummarizer {
    fn default() -> Self {
        Self {
            max_chars: DEFAULT_MAX_CHARS,
        }
    }
}

impl ExtractiveSummarizer {
    /// A summariser whose summaries stay within `max_chars` characters (at least 1,000).
    pub fn with_max_chars(max_chars: usize) -> Self {
        Self {
            max_chars: max_chars.max(1_000),
        }
    }

    /// Summarises `messages` (or, for [`SummaryKind::Merge`], merges the summaries they
    /// carry) on top of `previous_summary`, within `budget_chars` (capped by the
    /// summariser's own maximum).
    pub fn summarize_messages(
        &self,
        kind: SummaryKind,
        messages: &[SharedMessage],
        previous_summary: Option<&str>,
        budget_chars: usize,
    ) -> String {
        let budget = budget_chars.clamp(1_000, self.max_chars);
        let mut parts = Vec::new();
        if let Some(previous) = previous_summary.filter(|p| !p.trim().is_empty()) {
            parts.push(Sections::parse(previous));
        }
        if kind == SummaryKind::Merge {
            parts.extend(messages.iter().map(|m| Sections::parse(&message_text(m))));
        } else {
            parts.push(extract(messages));
        }
        let mut merged = Sections::merge(parts);
        merged
            .preamble
            .retain(|l| !l.starts_with("[Extractive summary"));
        merged.preamble.insert(0, EXTRACTIVE_NOTICE.to_owned());
        merged.render(budget)
    }
}

impl Summarizer for ExtractiveSummarizer {
    fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, SummarizeError> {
        if request.control.is_cancelled() {
            return Err(SummarizeError::Cancelled);
        }
        let budget = usize::try_from(request.max_tokens.saturating_mul(4)).unwrap_or(usize::MAX);
        Ok(self.summarize_messages(
            request.kind,
            request.messages,
            request.previous_summary,
            budget,
        ))
    }

    fn context_window(&self) -> u64 {
        u64::MAX
    }

    fn label(&self) -> &str {
        EXTRACTIVE_LABEL
    }
}

/// A summary as headed sections of items, in order of first appearance.
#[derive(Debug, Clone, Default)]
struct Sections {
    preamble: Vec<String>,
    sections: Vec<(String, Vec<String>)>,
}

impl Sections {
    fn items(&mut self, heading: &str) -> &mut Vec<String> {
        let at = match self.sections.iter().position(|(h, _)| h == heading) {
            Some(at) => at,
            None => {
                self.sections.push((heading.to_owned(), Vec::new()));
                self.sections.len() - 1
            }
        };
        &mut self.sections[at].1
    }

    /// Reads a summary: the known `## ` headings (the five required ones and tool activity)
    /// open sections, other non-blank lines are items (bullets without their marker);
    /// placeholders, chunk labels and notices are skipped.
    ///
    /// What a compaction appended after the body is not read back as sections: the turns it
    /// preserved verbatim quote older messages (whose own `## ` lines, from a quoted Markdown
    /// file, used to come back as sections of their own and take a share of every later
    /// summary), and its file lists travel in the entry's details. Those turns were
    /// summarised by the body they follow; a split turn's prefix summary is read as one.
    fn parse(text: &str) -> Self {
        let mut out = Self::default();
        let mut current: Option<String> = None;
        let mut skipping = false;
        let mut in_file_list = false;
        let truncated = SUMMARY_TRUNCATED_MARKER.trim();
        for line in text.lines() {
            let line = line.trim();
            if line.starts_with("<read-files>") || line.starts_with("<modified-files>") {
                in_file_list = true;
                continue;
            }
            if line.starts_with("</read-files>") || line.starts_with("</modified-files>") {
                in_file_list = false;
                continue;
            }
            if in_file_list
                || line.is_empty()
                || is_placeholder(line)
                || line.starts_with("[Chunk ")
                || line == EXTRACTIVE_NOTICE
                || line == truncated
            {
                continue;
            }
            if line == PRESERVED_TURNS_HEADING {
                skipping = true;
                continue;
            }
            if line == SPLIT_TURN_HEADING {
                skipping = false;
                current = None;
                continue;
            }
            if let Some(rest) = line.strip_prefix("## ") {
                let heading = format!("## {}", rest.trim());
                if is_known_heading(&heading) {
                    skipping = false;
                    out.items(&heading);
                    current = Some(heading);
                    continue;
                }
            }
            if skipping {
                continue;
            }
            let item = line
                .strip_prefix("- ")
                .or_else(|| line.strip_prefix("* "))
                .unwrap_or(line)
                .trim()
                .to_owned();
            // "(12 more omitted …)" counted what an earlier summary left out; read back, it
            // would be an item of its own, and a wrong count.
            if item.is_empty() || is_placeholder(&item) || is_omission_note(&item) {
                continue;
            }
            match &current {
                Some(heading) => out.items(heading).push(item),
                None => out.preamble.push(item),
            }
        }
        out
    }

    /// Merges summaries given oldest first: items deduplicated in order, except pending asks,
    /// which list the newest summary's first.
    fn merge(parts: Vec<Sections>) -> Self {
        let mut out = Self::default();
        for heading in REQUIRED_SUMMARY_SECTIONS {
            out.items(heading);
        }
        let mut seen: HashSet<(String, String)> = HashSet::new();
        for part in &parts {
            for line in &part.preamble {
                if seen.insert((String::new(), line.clone())) {
                    out.preamble.push(line.clone());
                }
            }
            for (heading, items) in &part.sections {
                if heading == ASKS {
                    continue;
                }
                for item in items {
                    if seen.insert((heading.clone(), item.clone())) {
                        out.items(heading).push(item.clone());
                    }
                }
            }
        }
        // Only the newest summary's latest ask stays marked as the latest.
        for part in parts.iter().rev() {
            for (_, items) in part.sections.iter().filter(|(h, _)| h == ASKS) {
                for item in items {
                    let item = match item.strip_prefix(LATEST_MARK) {
                        Some(rest) if !out.items(ASKS).is_empty() => rest.to_owned(),
                        _ => item.clone(),
                    };
                    if seen.insert((ASKS.to_owned(), item.clone())) {
                        out.items(ASKS).push(item);
                    }
                }
            }
        }
        out
    }

    /// Writes the summary within `budget` characters: the preamble, the five headings in
    /// order (with `None.` / `None captured.` when empty), then any other sections.
    fn render(&self, budget: usize) -> String {
        let mut out = String::new();
        let preamble_budget = budget * (100 - SHARES.iter().map(|(_, s)| s).sum::<usize>()) / 100;
        let mut used = 0;
        for line in self.preamble.iter().take(MAX_PREAMBLE_LINES) {
            let len = line.chars().count() + 1;
            if used + len > preamble_budget.max(EXTRACTIVE_NOTICE.len() + 1) {
                break;
            }
            out.push_str(line);
            out.push('\n');
            used += len;
        }
        let mut order: Vec<&str> = REQUIRED_SUMMARY_SECTIONS.to_vec();
        order.extend(
            self.sections
                .iter()
                .map(|(h, _)| h.as_str())
                .filter(|h| !REQUIRED_SUMMARY_SECTIONS.contains(h)),
        );
        // Headings and "omitted" lines come out of the budget before the items share it.
        let items_budget = budget.saturating_sub(used + SECTION_OVERHEAD_CHARS * order.len());
        let sections: Vec<(&str, Vec<String>)> = order
            .iter()
            .map(|&heading| {
                let items = self
                    .sections
                    .iter()
                    .find(|(h, _)| h == heading)
                    .map_or_else(Vec::new, |(_, items)| items.clone());
                // An identifier inside a longer one ("/docs/a.md" in "/repo/docs/a.md") says
                // nothing the longer one does not, and takes room another could use.
                let items = if heading == IDENTIFIERS {
                    without_contained(items)
                } else {
                    items
                };
                (heading, items)
            })
            .filter(|(h, items)| !items.is_empty() || REQUIRED_SUMMARY_SECTIONS.contains(h))
            .collect();
        let budgets = share_budget(&sections, items_budget);
        for ((heading, items), section_budget) in sections.iter().zip(budgets) {
            out.push('\n');
            out.push_str(heading);
            out.push('\n');
            if items.is_empty() {
                out.push_str(if *heading == IDENTIFIERS {
                    "None captured.\n"
                } else {
                    "None.\n"
                });
                continue;
            }
            // Pending asks are stored newest first, everything else oldest first: either way
            // the newest items are the ones kept when the share is exceeded.
            let newest_first = *heading == ASKS;
            let kept = fit_items(items, section_budget, newest_first);
            for item in &kept {
                out.push_str("- ");
                out.push_str(item);
                out.push('\n');
            }
            if kept.len() < items.len() {
                out.push_str(&format!(
                    "- ({} more omitted to fit the summary budget)\n",
                    items.len() - kept.len()
                ));
            }
        }
        out.trim_end().to_owned()
    }
}

/// Whether `item` is the line that says how many items did not fit.
fn is_omission_note(item: &str) -> bool {
    item.starts_with('(') && item.ends_with(" more omitted to fit the summary budget)")
}

/// Whether `heading` is one this summariser writes (and so reads back as a section).
fn is_known_heading(heading: &str) -> bool {
    REQUIRED_SUMMARY_SECTIONS.contains(&heading) || heading == TOOL_ACTIVITY_HEADING
}

/// The share of the budget that falls to a section not in [`SHARES`].
const OTHER_SECTION_SHARE: usize = 5;

/// Characters for each section's items: its share of `budget` ([`SHARES`]); what a section
/// does not need goes to those that need more than their share, in proportion to their
/// shares. Why: with fixed shares a summary with few decisions still left identifiers out
/// while a fifth of its budget went unused.
fn share_budget(sections: &[(&str, Vec<String>)], budget: usize) -> Vec<usize> {
    let shares: Vec<usize> = sections
        .iter()
        .map(|(heading, _)| {
            SHARES
                .iter()
                .find(|(h, _)| h == heading)
                .map_or(OTHER_SECTION_SHARE, |(_, s)| *s)
        })
        .collect();
    let needs: Vec<usize> = sections
        .iter()
        .map(|(_, items)| items.iter().map(|i| i.chars().count() + 3).sum())
        .collect();
    let mut given: Vec<usize> = shares.iter().map(|s| budget * s / 100).collect();
    // A few rounds settle it: each hands back what its items do not use.
    for _ in 0..4 {
        let spare: usize = given
            .iter()
            .zip(&needs)
            .map(|(g, n)| g.saturating_sub(*n))
            .sum();
        let hungry: usize = given
            .iter()
            .zip(&needs)
            .zip(&shares)
            .filter(|((g, n), _)| n > g)
            .map(|(_, s)| *s)
            .sum();
        if spare == 0 || hungry == 0 {
            break;
        }
        for i in 0..given.len() {
            if needs[i] > given[i] {
                given[i] += spare * shares[i] / hungry;
            } else {
                given[i] = needs[i];
            }
        }
    }
    given
}

/// How many of the newest identifiers are checked against each other by [`without_contained`].
/// The pairwise check is quadratic, and a summary's whole budget ([`DEFAULT_MAX_CHARS`]) holds
/// a few hundred identifiers at most, so older ones could never be listed anyway; a first
/// compaction of a long imported session can name tens of thousands.
const CONTAINED_CHECK_NEWEST: usize = 1_000;

/// `items` without those another of the newest [`CONTAINED_CHECK_NEWEST`] contains, in their
/// order (older items are kept as they are; the budget leaves them out).
fn without_contained(items: Vec<String>) -> Vec<String> {
    let from = items.len().saturating_sub(CONTAINED_CHECK_NEWEST);
    let newest = &items[from..];
    let contained: HashSet<usize> = (0..newest.len())
        .filter(|&i| {
            let item = &newest[i];
            newest
                .iter()
                .any(|other| other.len() > item.len() && other.contains(item.as_str()))
        })
        .map(|i| from + i)
        .collect();
    items
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !contained.contains(i))
        .map(|(_, item)| item)
        .collect()
}

/// The items that fit `budget` characters (as `- item\n` lines), preferring the newest, in
/// their original order.
fn fit_items(items: &[String], budget: usize, newest_first: bool) -> Vec<String> {
    let mut used = 0;
    let mut kept: Vec<&String> = Vec::new();
    let by_age: Box<dyn Iterator<Item = &String>> = if newest_first {
        Box::new(items.iter())
    } else {
        Box::new(items.iter().rev())
    };
    for item in by_age {
        let len = item.chars().count() + 3;
        if used + len > budget && !kept.is_empty() {
            break;
        }
        used += len;
        kept.push(item);
    }
    if !newest_first {
        kept.reverse();
    }
    kept.into_iter().cloned().collect()
}

fn is_placeholder(line: &str) -> bool {
    matches!(
        line,
        "None." | "None" | "None captured." | "No prior history." | "(none)" | "- None." | "N/A"
    )
}

/// The five headings (and tool activity) extracted from a transcript.
fn extract(messages: &[SharedMessage]) -> Sections {
    let mut out = Sections::default();
    let mut identifiers = IdentifierSet::new();
    let mut decisions = Vec::new();
    let mut constraints = Vec::new();
    let mut todos = Vec::new();
    // (ask, answered by assistant text before the next user message)
    let mut asks: Vec<(String, bool)> = Vec::new();
    let mut calls: BTreeMap<String, usize> = BTreeMap::new();
    let mut files = FileOps::new();
    let mut earlier: Vec<Sections> = Vec::new();
    let (mut users, mut assistants, mut results) = (0usize, 0usize, 0usize);

    for message in messages {
        match message.as_ref() {
            AgentMessage::User(_) | AgentMessage::Custom(_) => {
                users += 1;
                let text = message_text(message);
                identifiers.scan(&text);
                for sentence in sentences(&text) {
                    if cue(&CONSTRAINT_CUE, sentence) {
                        constraints.push(truncate_with_dots(sentence, MAX_ITEM_CHARS));
                    }
                    if cue(&TODO_CUE, sentence) {
                        todos.push(truncate_with_dots(sentence, MAX_ITEM_CHARS));
                    }
                }
                if matches!(message.as_ref(), AgentMessage::User(_)) && !text.is_empty() {
                    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
                    asks.push((truncate_with_dots(&one_line, MAX_ASK_CHARS), false));
                }
            }
            AgentMessage::Assistant(a) => {
                assistants += 1;
                let text = message_text(message);
                identifiers.scan(&text);
                if !text.is_empty()
                    && let Some(last) = asks.last_mut()
                {
                    last.1 = true;
                }
                for sentence in sentences(&text) {
                    if cue(&DECISION_CUE, sentence) {
                        decisions.push(truncate_with_dots(sentence, MAX_ITEM_CHARS));
                    }
                    if cue(&TODO_CUE, sentence) {
                        todos.push(truncate_with_dots(sentence, MAX_ITEM_CHARS));
                    }
                }
                for block in &a.content {
                    if let Some(call) = call_ref(block) {
                        *calls.entry(call.name.to_owned()).or_default() += 1;
                    }
                    if let ContentBlock::ToolCall(c) = block {
                        identifiers.scan(&c.arguments.to_string());
                    }
                }
                files.add_message(message);
            }
            AgentMessage::ToolResult(_) => {
                results += 1;
                identifiers.scan(&message_text(message));
            }
            AgentMessage::BashExecution(_) => {
                users += 1;
                identifiers.scan(&message_text(message));
            }
            AgentMessage::CompactionSummary(s) => earlier.push(Sections::parse(&s.summary)),
            AgentMessage::BranchSummary(s) => earlier.push(Sections::parse(&s.summary)),
            AgentMessage::Other(_) => {}
        }
    }

    out.preamble.push(format!(
        "Covers {} messages: {users} from the user, {assistants} from the assistant, {results} tool results.",
        messages.len()
    ));
    out.items(DECISIONS).extend(dedupe(decisions));
    out.items(TODOS).extend(dedupe(todos));
    out.items(CONSTRAINTS).extend(dedupe(constraints));
    let last = asks.len().saturating_sub(1);
    let pending: Vec<String> = asks
        .iter()
        .enumerate()
        .rev()
        .filter(|(i, (_, answered))| *i == last || !answered)
        .map(|(i, (ask, _))| {
            if i == last {
                format!("{LATEST_MARK}{ask}")
            } else {
                ask.clone()
            }
        })
        .collect();
    out.items(ASKS).extend(dedupe(pending));
    out.items(IDENTIFIERS)
        .extend(identifiers.values().iter().cloned());
    let activity = tool_activity(messages, &calls, &files);
    if !activity.is_empty() {
        out.items(TOOL_ACTIVITY_HEADING).extend(activity);
    }
    if earlier.is_empty() {
        return out;
    }
    earlier.push(out);
    Sections::merge(earlier)
}

fn tool_activity(
    messages: &[SharedMessage],
    calls: &BTreeMap<String, usize>,
    files: &FileOps,
) -> Vec<String> {
    let mut lines = Vec::new();
    let total: usize = calls.values().sum();
    if total > 0 {
        let mut by_count: Vec<(&String, &usize)> = calls.iter().collect();
        by_count.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let list: Vec<String> = by_count.iter().map(|(n, c)| format!("{n} ×{c}")).collect();
        lines.push(format!("{total} tool calls: {}", list.join(", ")));
    }
    let failures = collect_tool_failures(messages);
    for f in failures.iter().take(MAX_ACTIVITY_FAILURES) {
        let meta = f
            .meta
            .as_ref()
            .map(|m| format!(" ({m})"))
            .unwrap_or_default();
        lines.push(format!("Failed: {}{meta}: {}", f.tool_name, f.summary));
    }
    if failures.len() > MAX_ACTIVITY_FAILURES {
        lines.push(format!(
            "...and {} more failed calls",
            failures.len() - MAX_ACTIVITY_FAILURES
        ));
    }
    let details = files.details();
    for (label, list) in [
        ("Files read", &details.read_files),
        ("Files modified", &details.modified_files),
    ] {
        if list.is_empty() {
            continue;
        }
        let shown: Vec<&str> = list
            .iter()
            .take(MAX_ACTIVITY_FILES)
            .map(String::as_str)
            .collect();
        let more = list.len().saturating_sub(MAX_ACTIVITY_FILES);
        let tail = if more > 0 {
            format!(" (+{more} more)")
        } else {
            String::new()
        };
        lines.push(format!("{label}: {}{tail}", shown.join(", ")));
    }
    lines
}

fn dedupe(items: Vec<String>) -> Vec<String> {
    let mut seen = HashSet::new();
    items
        .into_iter()
        .filter(|i| seen.insert(i.clone()))
        .collect()
}

/// The sentences of `text` worth quoting: split at line breaks and at `.`, `!`, `?` followed
/// by a space; code fences skipped; at least 8 characters.
fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        let mut start = 0;
        let bytes = trimmed.as_bytes();
        for i in 0..bytes.len() {
            if matches!(bytes[i], b'.' | b'!' | b'?')
                && bytes.get(i + 1).is_some_and(|b| *b == b' ')
            {
                out.push(trimmed[start..=i].trim());
                start = i + 1;
            }
        }
        out.push(trimmed[start..].trim());
    }
    out.retain(|s| s.chars().count() >= 8);
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::compaction::quality::has_required_sections;
    use crate::compaction::test_support::*;
    use serde_json::json;

    fn summarize(messages: Vec<AgentMessage>) -> String {
        ExtractiveSummarizer::default().summarize_messages(
            SummaryKind::Chunk { index: 0, of: 1 },
            &shared(messages),
            None,
            DEFAULT_MAX_CHARS,
        )
    }

    #[test]
    fn planted_identifiers_survive_verbatim() {
        let planted = [
            "123e4567-e89b-12d3-a456-426614174000",
            "https://api.example.com/v2/items?id=42",
            "/var/lib/rampart/sessions/abc.jsonl",
            "db.internal.example:5432",
            "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        ];
        let text = format!(
            "Deploy build {} to {} and write the log to {}.",
            planted[0], planted[1], planted[2]
        );
        let s = summarize(vec![
            user(&text),
            assistant(&format!("I'll connect to {} first.", planted[3])),
            call_with_args("c1", "exec", json!({"cmd": "sha256sum"})),
            tool_result("c1", "exec", &format!("{}  artifact.tar", planted[4])),
            user("thanks"),
        ]);
        for id in planted {
            assert!(s.contains(id), "{id} missing from:\n{s}");
        }
        assert!(s.starts_with(EXTRACTIVE_NOTICE));
        assert!(has_required_sections(&s));
    }

    #[test]
    fn fills_the_sections_from_cues() {
        let s = summarize(vec![
            user("Never push to main. Set up CI for the repo."),
            assistant("We decided to use GitHub Actions instead of Jenkins. TODO: add caching."),
            user("Also rotate the API keys"),
        ]);
        let section = |h: &str| {
            let rest = s.split(h).nth(1).unwrap();
            rest.split("\n## ").next().unwrap().to_owned()
        };
        assert!(section("## Constraints/Rules").contains("Never push to main."));
        assert!(
            section("## Decisions")
                .contains("We decided to use GitHub Actions instead of Jenkins.")
        );
        assert!(section("## Open TODOs").contains("TODO: add caching."));
        let asks = section("## Pending user asks");
        // The latest ask first; the answered one is not pending.
        assert!(
            asks.trim_start()
                .starts_with("- (latest) Also rotate the API keys")
        );
        assert!(!asks.contains("Set up CI"));
    }

    #[test]
    fn deterministic_and_merges_section_by_section() {
        let msgs = vec![user(
            "Always run the tests. Deploy to /srv/app/releases please",
        )];
        assert_eq!(summarize(msgs.clone()), summarize(msgs));
        let a = summarize(vec![user("first ask about /srv/a/one")]);
        let b = summarize(vec![user("second ask about /srv/b/two")]);
        let parts = shared(vec![
            user(&format!("[Chunk 1 — oldest messages]\n{a}")),
            user(&b),
        ]);
        let merged = ExtractiveSummarizer::default().summarize_messages(
            SummaryKind::Merge,
            &parts,
            None,
            DEFAULT_MAX_CHARS,
        );
        assert!(has_required_sections(&merged));
        assert_eq!(merged.matches(EXTRACTIVE_NOTICE).count(), 1);
        let asks = merged.split("## Pending user asks").nth(1).unwrap();
        let second = asks.find("second ask").unwrap();
        let first = asks.find("first ask").unwrap();
        assert!(second < first, "newest ask first:\n{merged}");
        let ids = merged.split("## Exact identifiers").nth(1).unwrap();
        assert!(ids.find("/srv/a/one").unwrap() < ids.find("/srv/b/two").unwrap());
    }

    #[test]
    fn stays_within_budget_and_says_what_it_left_out() {
        let msgs: Vec<AgentMessage> = (0..400)
            .map(|i| {
                user(&format!(
                    "Never touch /srv/data/shard-{i:04}/index.db without a backup."
                ))
            })
            .collect();
        let s = summarize(msgs);
        assert!(s.chars().count() <= DEFAULT_MAX_CHARS, "{}", s.len());
        assert!(s.contains("more omitted to fit the summary budget"));
        // The newest survive.
        assert!(s.contains("/srv/data/shard-0399/index.db"));
    }

    /// A previous summary's quoted turns (here a Markdown file with its own `## ` lines) are
    /// not read back as sections: they used to come back as headings of their own, each taking
    /// a share of every later summary.
    #[test]
    fn quoted_turns_and_file_lists_of_a_previous_summary_are_not_read_as_sections() {
        let previous = format!(
            "{EXTRACTIVE_NOTICE}\nCovers 4 messages.\n\n## Decisions\n- We'll ship on Friday.\n\n\
             ## Exact identifiers\n- /srv/app/one.toml\n\n{PRESERVED_TURNS_HEADING}\n\
             - Tool result (read): # Guide\n## Install\n- run make\n## Goal\n- be fast\n\n\
             <read-files>\n/srv/app/one.toml\n</read-files>"
        );
        let parsed = Sections::parse(&previous);
        let headings: Vec<&str> = parsed.sections.iter().map(|(h, _)| h.as_str()).collect();
        assert_eq!(headings, ["## Decisions", "## Exact identifiers"]);
        assert_eq!(parsed.sections[1].1, ["/srv/app/one.toml"]);
        assert!(!parsed.preamble.iter().any(|l| l == EXTRACTIVE_NOTICE));
        let with_note = previous.replace(
            "- /srv/app/one.toml",
            "- (7 more omitted to fit the summary budget)\n- /srv/app/one.toml",
        );
        assert_eq!(
            Sections::parse(&with_note).sections[1].1,
            ["/srv/app/one.toml"]
        );
        // A split turn's prefix summary after the quoted turns is read again.
        let with_prefix = format!(
            "{previous}\n\n{SPLIT_TURN_HEADING}\n## Exact identifiers\n- /srv/app/two.toml"
        );
        let parsed = Sections::parse(&with_prefix);
        assert_eq!(
            parsed.sections[1].1,
            ["/srv/app/one.toml", "/srv/app/two.toml"]
        );
    }

    #[test]
    fn an_identifier_inside_a_longer_one_is_not_listed_twice() {
        let kept = without_contained(vec![
            "/docs/a.md".to_string(),
            "/repo/docs/a.md".to_string(),
            "https://example.com/repo/docs/a.md".to_string(),
            "/repo/docs/b.md".to_string(),
        ]);
        assert_eq!(
            kept,
            ["https://example.com/repo/docs/a.md", "/repo/docs/b.md"]
        );
    }

    /// What a section does not need goes to the sections that need more, so a summary with
    /// few decisions keeps more identifiers, and the whole stays within the budget.
    #[test]
    fn unused_shares_go_to_the_sections_that_need_them() {
        let ids: Vec<String> = (0..300)
            .map(|i| format!("/srv/data/shard-{i:04}/index.db"))
            .collect();
        let sections: Vec<(&str, Vec<String>)> = vec![
            (DECISIONS, vec!["We'll use Postgres.".to_string()]),
            (TODOS, Vec::new()),
            (CONSTRAINTS, Vec::new()),
            (ASKS, vec!["(latest) migrate it".to_string()]),
            (IDENTIFIERS, ids),
            (TOOL_ACTIVITY_HEADING, Vec::new()),
        ];
        let budget = 10_000;
        let given = share_budget(&sections, budget);
        assert!(given.iter().sum::<usize>() <= budget);
        assert_eq!(given[0], "We'll use Postgres.".len() + 3);
        assert!(given[4] > budget * 9 / 10, "{given:?}");
        // Alone, the identifiers would have had their fixed share.
        let msgs: Vec<AgentMessage> = (0..300)
            .map(|i| user(&format!("Look at /srv/data/shard-{i:04}/index.db")))
            .collect();
        let s = summarize(msgs);
        let listed = s
            .split("## Exact identifiers")
            .nth(1)
            .unwrap()
            .matches("/srv/data/shard-")
            .count();
        assert!(
            listed > 300 * 27 / 100 * DEFAULT_MAX_CHARS / 10_000,
            "{listed}"
        );
        assert!(s.chars().count() <= DEFAULT_MAX_CHARS);
    }

    #[test]
    fn tool_activity_lists_calls_failures_and_files() {
        let s = summarize(vec![
            user("fix it"),
            call_with_args("c1", "read", json!({"path": "src/main.rs"})),
            tool_result("c1", "read", "fn main() {}"),
            call_with_args("c2", "exec", json!({"cmd": "cargo test"})),
            tool_error("c2", "exec", "test failed", Some(json!({"exitCode": 101}))),
        ]);
        assert!(s.contains("## Tool activity"));
        assert!(s.contains("2 tool calls: exec ×1, read ×1"));
        assert!(s.contains("Failed: exec (exitCode=101): test failed"));
        assert!(s.contains("Files read: src/main.rs"));
    }
}
