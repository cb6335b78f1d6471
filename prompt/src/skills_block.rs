//! The `<available_skills>` block of the Skills section, within its budget.
//!
//! Over budget, the block first drops the descriptions (a compact list still tells the model
//! every skill exists), then lists the longest prefix that fits, found by bisection; a note
//! first in the block says what was left out, so the cut is never silent.

use std::path::Path;

use crate::skills::{Skill, SkillCatalog};
use crate::text::{escape_xml, units};

/// Room kept for the note in front of a compact block.
const NOTE_ALLOWANCE: usize = 150;

/// The rendered catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillsBlock {
    /// The block: an optional note, the intro, and the `<available_skills>` list.
    pub text: String,
    /// How many skills are listed.
    pub listed: usize,
    /// How many the model could have chosen from.
    pub total: usize,
    /// Whether descriptions were left out to fit.
    pub compact: bool,
}

impl SkillsBlock {
    /// Whether some skills are not listed.
    pub fn truncated(&self) -> bool {
        self.listed < self.total
    }
}

impl SkillCatalog {
    /// The catalog as the prompt shows it, or `None` when no skill is visible to the model.
    pub fn render(&self) -> Option<SkillsBlock> {
        let visible: Vec<&Skill> = self.visible().collect();
        if visible.is_empty() {
            return None;
        }
        let limits = self.limits();
        let home = self.home_dir();
        let total = visible.len();
        let mut chosen: &[&Skill] = &visible[..total.min(limits.in_prompt)];
        let mut compact = false;
        let fits_full = |s: &[&Skill]| units(&format_block(s, false, home)) <= limits.prompt_chars;
        let compact_budget = limits.prompt_chars.saturating_sub(NOTE_ALLOWANCE);
        let fits_compact = |s: &[&Skill]| units(&format_block(s, true, home)) <= compact_budget;
        if !fits_full(chosen) {
            compact = true;
            if !fits_compact(chosen) {
                let (mut lo, mut hi) = (0, chosen.len());
                while lo < hi {
                    let mid = lo + (hi - lo).div_ceil(2);
                    if fits_compact(&chosen[..mid]) {
                        lo = mid;
                    } else {
                        hi = mid - 1;
                    }
                }
                chosen = &chosen[..lo];
            }
        }
        let listed = chosen.len();
        let note = if listed < total {
            let how = if compact {
                " (compact format, descriptions omitted)"
            } else {
                ""
            };
            format!(
                "⚠️ Skills truncated: included {listed} of {total}{how}. Shorten skill \
                 descriptions or remove skills you do not use to list them all."
            )
        } else if compact {
            "⚠️ Skills listed in compact format (descriptions omitted) to fit the prompt budget."
                .to_string()
        } else {
            String::new()
        };
        let block = format_block(chosen, compact, home);
        let text = if note.is_empty() {
            block
        } else {
            format!("{note}\n{block}")
        };
        Some(SkillsBlock {
            text,
            listed,
            total,
            compact,
        })
    }
}

fn format_block(skills: &[&Skill], compact: bool, home: Option<&Path>) -> String {
    let matches_on = if compact { "name" } else { "description" };
    let mut lines = vec![
        "Each skill below is a file of instructions for one kind of task, read only when needed."
            .to_string(),
        format!(
            "Use the read tool on a skill's <location> when the task matches its {matches_on}."
        ),
        "Relative paths in a skill file start from the directory that holds its SKILL.md."
            .to_string(),
        String::new(),
        "<available_skills>".to_string(),
    ];
    for skill in skills {
        lines.push("  <skill>".to_string());
        lines.push(format!("    <name>{}</name>", escape_xml(&skill.name)));
        if !compact {
            lines.push(format!(
                "    <description>{}</description>",
                escape_xml(&skill.description)
            ));
        }
        lines.push(format!(
            "    <location>{}</location>",
            escape_xml(&display_location(&skill.location, home))
        ));
        lines.push("  </skill>".to_string());
    }
    lines.push("</available_skills>".to_string());
    lines.join("\n")
}

/// `location` with the home directory written as "~/".
fn display_location(location: &Path, home: Option<&Path>) -> String {
    if let Some(rest) = home.and_then(|h| location.strip_prefix(h).ok())
        && !rest.as_os_str().is_empty()
    {
        return format!("~/{}", rest.display());
    }
    location.display().to_string()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "skills_block_tests.rs"]
mod tests;
