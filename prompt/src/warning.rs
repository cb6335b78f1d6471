//! The truncation warning: when a bootstrap file was cut, the **user** turn says so, so the
//! model knows Project Context is partial and reads the file itself (a silent cut was issues
//! 71782, 68233 and 78211). It goes in the user turn, not the system prompt, so the cached
//! prefix is the same whether or not it is shown.

use std::collections::VecDeque;

use crate::bootstrap::BootstrapSet;

/// When the warning is shown (`bootstrapPromptTruncationWarning`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TruncationWarningMode {
    /// Never.
    Off,
    /// Once per distinct truncation (the same caps and the same files cut the same way are
    /// not shown again; the last [`REMEMBERED_SIGNATURES`] are remembered).
    Once,
    /// Every turn whose set has a cut file. The default: users asked for it (issue 78211),
    /// and a model that saw the warning once, many turns ago, may no longer have it in view.
    #[default]
    Always,
}

/// How many truncation signatures [`TruncationWarningMode::Once`] remembers.
pub const REMEMBERED_SIGNATURES: usize = 32;
/// How many cut files the warning names; the rest are counted.
pub const MAX_LISTED_FILES: usize = 3;

/// The first line of the warning block, which hosts and tests look for.
pub const WARNING_HEADER: &str = "[Bootstrap truncation warning]";

/// The warning's lines for `set` (each becomes `- <line>` in the block), or none when no file
/// was cut.
pub fn truncation_lines(set: &BootstrapSet) -> Vec<String> {
    let cut: Vec<_> = set.stats().iter().filter(|s| s.truncated()).collect();
    if cut.is_empty() {
        return Vec::new();
    }
    let mut lines = Vec::with_capacity(MAX_LISTED_FILES + 2);
    for stat in cut.iter().take(MAX_LISTED_FILES) {
        let removed = stat.raw_chars.saturating_sub(stat.kept_chars);
        // JavaScript's Math.round (half up), as the percentages in OpenClaw's warning.
        let percent = if stat.raw_chars == 0 {
            0
        } else {
            (removed as f64 * 100.0 / stat.raw_chars as f64 + 0.5).floor() as usize
        };
        let mut causes = Vec::new();
        if stat.cut_by_file_cap {
            causes.push("max/file");
        }
        if stat.cut_by_total {
            causes.push("max/total");
        }
        lines.push(format!(
            "{}: {} raw -> {} injected (~{percent}% removed; {}).",
            stat.name,
            stat.raw_chars,
            stat.injected_chars,
            causes.join(", ")
        ));
    }
    if cut.len() > MAX_LISTED_FILES {
        lines.push(format!(
            "+{} more truncated file(s).",
            cut.len() - MAX_LISTED_FILES
        ));
    }
    lines.push(
        "If this is not intended, raise agents.defaults.bootstrapMaxChars and/or \
         agents.defaults.bootstrapTotalMaxChars in plugins.toml."
            .to_string(),
    );
    lines
}

/// What identifies one truncation for [`TruncationWarningMode::Once`]: the caps and, for each
/// cut file, its path, sizes and causes. `None` when nothing was cut.
pub fn truncation_signature(set: &BootstrapSet) -> Option<String> {
    let mut files: Vec<String> = set
        .stats()
        .iter()
        .filter(|s| s.truncated())
        .map(|s| {
            format!(
                "{}|{}|{}|{}{}",
                s.path.display(),
                s.raw_chars,
                s.injected_chars,
                if s.cut_by_file_cap { "f" } else { "" },
                if s.cut_by_total { "t" } else { "" }
            )
        })
        .collect();
    if files.is_empty() {
        return None;
    }
    files.sort();
    let limits = set.limits();
    Some(format!(
        "{}/{}:{}",
        limits.per_file(),
        limits.total(),
        files.join(";")
    ))
}

/// What a session has already been warned about, for [`TruncationWarningMode::Once`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WarningLog {
    seen: VecDeque<String>,
}

impl WarningLog {
    /// A log that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// A log restored from signatures a host persisted (oldest first; only the newest
    /// [`REMEMBERED_SIGNATURES`] are kept).
    pub fn from_seen(seen: impl IntoIterator<Item = String>) -> Self {
        let mut log = Self::new();
        for signature in seen {
            log.remember(signature);
        }
        log
    }

    /// The remembered signatures, oldest first.
    pub fn seen(&self) -> impl Iterator<Item = &str> {
        self.seen.iter().map(String::as_str)
    }

    fn remember(&mut self, signature: String) {
        if signature.trim().is_empty() || self.seen.contains(&signature) {
            return;
        }
        self.seen.push_back(signature);
        while self.seen.len() > REMEMBERED_SIGNATURES {
            self.seen.pop_front();
        }
    }

    /// The warning lines to show this turn for `set` under `mode` (none when nothing was cut,
    /// the mode is off, or it is once and this truncation was already shown), remembering it.
    pub fn lines_for(&mut self, set: &BootstrapSet, mode: TruncationWarningMode) -> Vec<String> {
        let Some(signature) = truncation_signature(set) else {
            return Vec::new();
        };
        let show = match mode {
            TruncationWarningMode::Off => return Vec::new(),
            TruncationWarningMode::Always => true,
            TruncationWarningMode::Once => !self.seen.contains(&signature),
        };
        self.remember(signature);
        if show {
            truncation_lines(set)
        } else {
            Vec::new()
        }
    }
}

/// `prompt` (the user's message) with the warning block after a blank line: the header, two
/// lines saying Project Context is partial, then `- <line>` per line. Unchanged when `lines`
/// are all blank, or when `prompt` is exactly `preserve_exact` (the heartbeat prompt, which
/// the host recognises by its exact text).
pub fn append_truncation_warning(
    prompt: &str,
    lines: &[String],
    preserve_exact: Option<&str>,
) -> String {
    let lines: Vec<&str> = lines
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty())
        .collect();
    if lines.is_empty() || preserve_exact.is_some_and(|p| !p.is_empty() && p == prompt) {
        return prompt.to_string();
    }
    let mut block = vec![
        WARNING_HEADER.to_string(),
        "Some workspace files were cut before they were put into the system prompt.".to_string(),
        "Project Context is incomplete: read the files themselves when something seems missing."
            .to_string(),
    ];
    block.extend(lines.iter().map(|l| format!("- {l}")));
    let block = block.join("\n");
    if prompt.is_empty() {
        block
    } else {
        format!("{prompt}\n\n{block}")
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "warning_tests.rs"]
mod tests;
