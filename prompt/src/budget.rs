//! The character budget of the bootstrap files: a cap per file and a cap on their total, with
//! the total shared **fairly** instead of in load order.
//!
//! # The rule (quotable)
//!
//! Each file is first cut to the per-file cap (`bootstrapMaxChars`, 20,000): when longer, it
//! keeps its first 70 % and last 20 % around a two-line marker naming the file, exactly as
//! OpenClaw does. What each file then needs is the length of that text (a missing file needs
//! the length of its `[MISSING] Expected at: <path>` line). The total (`bootstrapTotalMaxChars`,
//! 150,000) is then shared by **water-filling**: every file that needs no more than an equal
//! share of what is left gets all it needs; the rest is split again among the files still
//! waiting, until every file is satisfied or the budget is spent, the last units going one
//! each to the earliest files in load order. A small file is therefore never cut because
//! earlier files are large, and MEMORY.md, loaded last, gets the same share as AGENTS.md when
//! both are large (OpenClaw spends the total in load order, so MEMORY.md starved: issue
//! 19453). A file whose share would be under 64 chars while it needs more is left out, with a
//! warning, and its share goes back to the others (the latest such file in load order first).
//! A file cut by its share keeps its head and tail around the marker when that fits in the
//! share with at least 64 chars of cap; otherwise its first share − 1 chars and "…". When the
//! total is not reached, the result is exactly OpenClaw's.
//!
//! Lengths are UTF-16 units, as in OpenClaw (see [`crate::text`]).

use std::path::PathBuf;

use crate::error::ReadProblem;
use crate::text::{clamp_with_ellipsis, head, tail, units};

/// OpenClaw's default per-file cap (`agents.defaults.bootstrapMaxChars`).
pub const DEFAULT_MAX_CHARS_PER_FILE: usize = 20_000;
/// OpenClaw's default total cap (`agents.defaults.bootstrapTotalMaxChars`).
pub const DEFAULT_MAX_CHARS_TOTAL: usize = 150_000;
/// The smallest share worth injecting a cut file into: less is more misleading than useful.
pub const MIN_FILE_BUDGET: usize = 64;

/// The two caps of the bootstrap budget, in UTF-16 units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BootstrapLimits {
    per_file: usize,
    total: usize,
}

impl Default for BootstrapLimits {
    fn default() -> Self {
        Self::new(0, 0)
    }
}

impl BootstrapLimits {
    /// The caps from configuration. Zero means "not set": the per-file cap defaults to 20,000
    /// and the total to the larger of 150,000 and the per-file cap (as in OpenClaw, where an
    /// invalid or non-positive value means the default).
    pub fn new(per_file: usize, total: usize) -> Self {
        let per_file = if per_file == 0 {
            DEFAULT_MAX_CHARS_PER_FILE
        } else {
            per_file
        };
        let total = if total == 0 {
            per_file.max(DEFAULT_MAX_CHARS_TOTAL)
        } else {
            total
        };
        Self { per_file, total }
    }

    /// The cap on one file.
    pub fn per_file(&self) -> usize {
        self.per_file
    }

    /// The cap on all files together.
    pub fn total(&self) -> usize {
        self.total
    }
}

/// A bootstrap file before the budget: its name, where it is (or was expected), and its
/// contents, `None` when it is missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// The file name as the prompt and the messages call it (`AGENTS.md`).
    pub name: String,
    /// Its absolute path: the heading of its part of Project Context.
    pub path: PathBuf,
    /// The contents, or `None` for a missing file.
    pub content: Option<String>,
}

/// A file as it is injected into the prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextFile {
    /// The file name (`AGENTS.md`).
    pub name: String,
    /// The path shown as its heading.
    pub path: String,
    /// What the prompt carries: the file within its budget, or the missing-file line.
    pub content: String,
}

/// What the budget did to one file, for the truncation warning and the breakdown view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStat {
    /// The file name.
    pub name: String,
    /// Its path.
    pub path: PathBuf,
    /// Whether it was missing (then the chars below are 0).
    pub missing: bool,
    /// Its length with trailing whitespace removed.
    pub raw_chars: usize,
    /// The length of what was injected (marker lines included).
    pub injected_chars: usize,
    /// How much of the file's own text was injected (marker lines excluded).
    pub kept_chars: usize,
    /// Whether the per-file cap cut it.
    pub cut_by_file_cap: bool,
    /// Whether the total cap cut it (or left it out).
    pub cut_by_total: bool,
}

impl FileStat {
    /// Whether the model sees less than the whole file.
    pub fn truncated(&self) -> bool {
        self.cut_by_file_cap || self.cut_by_total
    }
}

/// Something about the budget a person should know; never silent (issues 71782, 68233).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BootstrapWarning {
    /// A file was cut.
    #[error(
        "workspace bootstrap file {name} is {chars} chars (limit {limit}); truncating in \
         injected context"
    )]
    Truncated {
        /// The file name.
        name: String,
        /// Its length.
        chars: usize,
        /// The cap it was cut to.
        limit: usize,
    },
    /// A file was left out because its share of the total was too small.
    #[error(
        "bootstrap budget left for {name} is {share} chars (<64); skipping it. \
         Raise agents.defaults.bootstrapTotalMaxChars to include it"
    )]
    Skipped {
        /// The file name.
        name: String,
        /// The share it would have had.
        share: usize,
    },
    /// A file that exists was treated as missing.
    #[error(transparent)]
    Unreadable(ReadProblem),
}

/// The result of the budget: the injected files in load order, what happened to each file,
/// and the warnings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Budgeted {
    /// The injected files, in load order.
    pub files: Vec<ContextFile>,
    /// One entry per source file that was not empty, in load order.
    pub stats: Vec<FileStat>,
    /// The warnings, in load order.
    pub warnings: Vec<BootstrapWarning>,
}

/// One file between the per-file cut and the total's share.
struct Prepared<'a> {
    source: &'a SourceFile,
    /// The file's text with trailing whitespace removed; empty for a missing file.
    raw: String,
    /// The text after the per-file cap (or the missing-file line).
    capped: String,
    /// How much of `raw` `capped` keeps.
    capped_kept: usize,
    cut_by_file_cap: bool,
    need: usize,
}

/// Applies the per-file cap and the fairly shared total to `sources` (in load order).
pub fn apply_budget(sources: &[SourceFile], limits: BootstrapLimits) -> Budgeted {
    let mut prepared = Vec::with_capacity(sources.len());
    for source in sources {
        match &source.content {
            None => {
                let capped = format!("[MISSING] Expected at: {}", source.path.display());
                let need = units(&capped);
                prepared.push(Prepared {
                    source,
                    raw: String::new(),
                    capped,
                    capped_kept: 0,
                    cut_by_file_cap: false,
                    need,
                });
            }
            Some(content) => {
                let raw = content.trim_end();
                if raw.is_empty() {
                    // Nothing to inject, and nothing the model would miss.
                    continue;
                }
                let raw_units = units(raw);
                let (capped, capped_kept, cut) = if raw_units > limits.per_file {
                    let (text, kept) = head_and_tail(raw, &source.name, limits.per_file);
                    (text, kept, true)
                } else {
                    (raw.to_string(), raw_units, false)
                };
                let need = units(&capped);
                prepared.push(Prepared {
                    source,
                    raw: raw.to_string(),
                    capped,
                    capped_kept,
                    cut_by_file_cap: cut,
                    need,
                });
            }
        }
    }

    // Share the total; leave out the latest file whose share is too small to be worth it,
    // and share again without it.
    let mut active: Vec<usize> = (0..prepared.len()).collect();
    let mut skipped: Vec<(usize, usize)> = Vec::new();
    let shares = loop {
        let needs: Vec<usize> = active.iter().map(|&i| prepared[i].need).collect();
        let shares = water_fill(&needs, limits.total);
        let starved = (0..active.len()).rev().find(|&k| {
            let p = &prepared[active[k]];
            p.source.content.is_some() && shares[k] < p.need && shares[k] < MIN_FILE_BUDGET
        });
        match starved {
            Some(k) => {
                skipped.push((active[k], shares[k]));
                active.remove(k);
            }
            None => break shares,
        }
    };

    let mut out = Budgeted::default();
    for (i, p) in prepared.iter().enumerate() {
        let share = active
            .iter()
            .position(|&a| a == i)
            .map(|k| shares[k])
            .unwrap_or(0);
        let was_skipped = skipped
            .iter()
            .find(|(s, _)| *s == i)
            .map(|(_, share)| *share);
        let name = p.source.name.clone();
        let path_text = p.source.path.display().to_string();

        if p.source.content.is_none() {
            // A missing file's line is cut like any text; with no share at all it is dropped.
            let content = clamp_with_ellipsis(&p.capped, share);
            if !content.is_empty() {
                out.files.push(ContextFile {
                    name: name.clone(),
                    path: path_text,
                    content,
                });
            }
            out.stats.push(FileStat {
                name,
                path: p.source.path.clone(),
                missing: true,
                raw_chars: 0,
                injected_chars: 0,
                kept_chars: 0,
                cut_by_file_cap: false,
                cut_by_total: false,
            });
            continue;
        }

        let raw_chars = units(&p.raw);
        if let Some(share) = was_skipped {
            out.warnings.push(BootstrapWarning::Skipped {
                name: name.clone(),
                share,
            });
            out.stats.push(FileStat {
                name,
                path: p.source.path.clone(),
                missing: false,
                raw_chars,
                injected_chars: 0,
                kept_chars: 0,
                cut_by_file_cap: p.cut_by_file_cap,
                cut_by_total: true,
            });
            continue;
        }

        let (content, kept, cut_by_total) = if share >= p.need {
            (p.capped.clone(), p.capped_kept, false)
        } else {
            let (text, kept) = fit(&p.raw, &p.source.name, limits.per_file, share);
            (text, kept, true)
        };
        if p.cut_by_file_cap || cut_by_total {
            let limit = if cut_by_total {
                limits.per_file.min(share)
            } else {
                limits.per_file
            };
            out.warnings.push(BootstrapWarning::Truncated {
                name: name.clone(),
                chars: raw_chars,
                limit,
            });
        }
        let injected_chars = units(&content);
        out.files.push(ContextFile {
            name: name.clone(),
            path: path_text,
            content,
        });
        out.stats.push(FileStat {
            name,
            path: p.source.path.clone(),
            missing: false,
            raw_chars,
            injected_chars,
            kept_chars: kept,
            cut_by_file_cap: p.cut_by_file_cap,
            cut_by_total,
        });
    }
    out
}

/// Water-filling: shares of `budget` for `needs`, in order. Every need that fits an equal
/// share of what is left is met in full; the rest split what remains, the odd units going to
/// the earliest. The shares never sum to more than `budget`, and a share never exceeds its
/// need.
pub fn water_fill(needs: &[usize], budget: usize) -> Vec<usize> {
    let mut shares = vec![0; needs.len()];
    let mut open: Vec<usize> = (0..needs.len()).collect();
    let mut left = budget;
    while !open.is_empty() {
        let equal = left / open.len();
        let (met, waiting): (Vec<usize>, Vec<usize>) =
            open.iter().partition(|&&i| needs[i] <= equal);
        if met.is_empty() {
            let odd = left - equal * open.len();
            for (k, &i) in open.iter().enumerate() {
                shares[i] = equal + usize::from(k < odd);
            }
            break;
        }
        for i in met {
            shares[i] = needs[i];
            left -= needs[i];
        }
        open = waiting;
    }
    shares
}

/// OpenClaw's cut of a text longer than `cap`: the first floor(0.7·cap) and last
/// floor(0.2·cap) units around two marker lines naming the file, with the lengths kept. The
/// result is about 100 units longer than `cap` (only the total is a hard cap). Returns the
/// text and how many of the file's own units it keeps.
pub fn head_and_tail(raw: &str, name: &str, cap: usize) -> (String, usize) {
    // The same float arithmetic as JavaScript, so the cut lands on the same unit.
    let head_target = (cap as f64 * 0.7).floor() as usize;
    let tail_target = (cap as f64 * 0.2).floor() as usize;
    let start = head(raw, head_target);
    // A tail of zero units is empty (JavaScript's `slice(-0)` would return the whole text).
    let end = tail(&raw[start.len()..], tail_target);
    let (h, t) = (units(start), units(end));
    let total = units(raw);
    let text = format!(
        "{start}\n\n[...truncated, read {name} for full content...]\n\
         …(truncated {name}: kept {h}+{t} chars of {total})…\n\n{end}"
    );
    (text, h + t)
}

/// A file cut to fit `share` units: the head-and-tail form with the largest cap (at least
/// [`MIN_FILE_BUDGET`], at most the per-file cap) whose result, marker included, fits in the
/// share; else the first `share - 1` units and "…".
fn fit(raw: &str, name: &str, per_file: usize, share: usize) -> (String, usize) {
    let fits = |cap: usize| {
        let (text, kept) = head_and_tail(raw, name, cap);
        (units(&text) <= share).then_some((text, kept))
    };
    // A cap at or over the file's length would keep it whole; the share decides the rest.
    let top = per_file.min(units(raw).saturating_sub(1));
    if top >= MIN_FILE_BUDGET
        && let Some(mut best) = fits(MIN_FILE_BUDGET)
    {
        // The length grows with the cap, so the largest cap that fits is found by bisection.
        let (mut lo, mut hi) = (MIN_FILE_BUDGET, top);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            match fits(mid) {
                Some(found) => {
                    best = found;
                    lo = mid;
                }
                None => hi = mid - 1,
            }
        }
        return best;
    }
    let text = clamp_with_ellipsis(raw, share);
    let kept = units(text.strip_suffix('…').unwrap_or(&text));
    (text, kept)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "budget_tests.rs"]
mod tests;
