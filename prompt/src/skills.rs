//! Skills: directories holding a SKILL.md of instructions for one kind of task.
//!
//! The prompt carries a **catalog** (name, description, where the file is), never the skills
//! themselves: the model reads the one SKILL.md that fits the task when it needs it, so a
//! hundred installed skills cost a few lines each instead of their whole text.
//!
//! Skills are found in `<workspace>/.agents/skills/*/SKILL.md` and `<workspace>/skills/*/SKILL.md`,
//! plus any directories the host adds (user-wide ones); by name, a later source wins:
//! the host's directories (in the order given) < `<workspace>/.agents/skills` <
//! `<workspace>/skills`.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::error::SkillIssue;
use crate::frontmatter::parse_front_matter;

/// The limits on discovery and on the catalog in the prompt (OpenClaw's defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SkillLimits {
    /// Directory entries looked at per skills directory.
    pub candidates_per_root: usize,
    /// Skills loaded per skills directory.
    pub skills_per_source: usize,
    /// Skills listed in the prompt.
    pub in_prompt: usize,
    /// UTF-16 units the catalog may take in the prompt.
    pub prompt_chars: usize,
    /// The largest SKILL.md read, in bytes.
    pub file_bytes: u64,
}

impl Default for SkillLimits {
    fn default() -> Self {
        Self {
            candidates_per_root: 300,
            skills_per_source: 200,
            in_prompt: 150,
            prompt_chars: 30_000,
            file_bytes: 256_000,
        }
    }
}

/// Where a skill was found.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SkillSource {
    /// A directory the host added (index into [`SkillsRequest::extra_dirs`]).
    Extra(usize),
    /// `<workspace>/.agents/skills`.
    WorkspaceAgents,
    /// `<workspace>/skills`.
    Workspace,
}

/// One skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// Its name: `name:` in the front matter, else its directory's name.
    pub name: String,
    /// When to use it: `description:` in the front matter.
    pub description: String,
    /// The absolute path of its SKILL.md.
    pub location: PathBuf,
    /// Where it was found.
    pub source: SkillSource,
    /// Whether the model may choose it (`disable-model-invocation: true` hides it from the
    /// catalog; the user can still invoke it).
    pub model_invocable: bool,
}

/// Where to look for skills.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SkillsRequest {
    /// The agent workspace.
    pub workspace_dir: PathBuf,
    /// More skills directories, lowest precedence first (e.g. `~/.agents/skills`).
    pub extra_dirs: Vec<PathBuf>,
    /// The user's home directory, shown as "~/" in locations (shorter, and the same on every
    /// machine of the user's).
    pub home_dir: Option<PathBuf>,
    /// The limits.
    pub limits: SkillLimits,
}

impl SkillsRequest {
    /// The workspace's skills only, with the default limits.
    pub fn new(workspace_dir: impl Into<PathBuf>) -> Self {
        Self {
            workspace_dir: workspace_dir.into(),
            ..Self::default()
        }
    }
}

/// The skills found, by name, with what was skipped and why.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkillCatalog {
    skills: Vec<Skill>,
    issues: Vec<SkillIssue>,
    limits: SkillLimits,
    home_dir: Option<PathBuf>,
}

impl SkillCatalog {
    /// A catalog of skills the host already has (a snapshot, a test), sorted by name.
    pub fn from_skills(
        mut skills: Vec<Skill>,
        limits: SkillLimits,
        home_dir: Option<PathBuf>,
    ) -> Self {
        skills.sort_by(|a, b| a.name.cmp(&b.name));
        Self {
            skills,
            issues: Vec::new(),
            limits,
            home_dir,
        }
    }

    /// Every skill, by name, hidden ones included.
    pub fn skills(&self) -> &[Skill] {
        &self.skills
    }

    /// The skills the model may choose, by name.
    pub fn visible(&self) -> impl Iterator<Item = &Skill> {
        self.skills.iter().filter(|s| s.model_invocable)
    }

    /// What was skipped during discovery, and why.
    pub fn issues(&self) -> &[SkillIssue] {
        &self.issues
    }

    /// The limits the catalog was found and is rendered with.
    pub fn limits(&self) -> SkillLimits {
        self.limits
    }

    /// The home directory shown as "~/".
    pub fn home_dir(&self) -> Option<&Path> {
        self.home_dir.as_deref()
    }
}

/// Finds the skills `request` names. A directory that does not exist has no skills; a skill
/// that cannot be used is skipped with a [`SkillIssue`]. Never fails.
pub fn discover_skills(request: &SkillsRequest) -> SkillCatalog {
    let mut roots: Vec<(PathBuf, SkillSource)> = request
        .extra_dirs
        .iter()
        .enumerate()
        .map(|(i, d)| (d.clone(), SkillSource::Extra(i)))
        .collect();
    roots.push((
        request.workspace_dir.join(".agents").join("skills"),
        SkillSource::WorkspaceAgents,
    ));
    roots.push((request.workspace_dir.join("skills"), SkillSource::Workspace));

    let mut issues = Vec::new();
    let mut by_name: BTreeMap<String, Skill> = BTreeMap::new();
    for (root, source) in roots {
        for skill in skills_in(&root, source, &request.limits, &mut issues) {
            // A later source replaces an earlier skill of the same name.
            by_name.insert(skill.name.clone(), skill);
        }
    }
    SkillCatalog {
        skills: by_name.into_values().collect(),
        issues,
        limits: request.limits,
        home_dir: request.home_dir.clone(),
    }
}

fn skills_in(
    root: &Path,
    source: SkillSource,
    limits: &SkillLimits,
    issues: &mut Vec<SkillIssue>,
) -> Vec<Skill> {
    let Ok(real_root) = fs::canonicalize(root) else {
        return Vec::new();
    };
    let Ok(entries) = fs::read_dir(&real_root) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.') && n != "node_modules")
        .collect();
    names.sort();
    if names.len() > limits.candidates_per_root {
        issues.push(SkillIssue::TooManyCandidates {
            root: root.to_path_buf(),
            limit: limits.candidates_per_root,
        });
        names.truncate(limits.candidates_per_root);
    }

    let mut skills = Vec::new();
    for name in names {
        let dir = root.join(&name);
        let Ok(real_dir) = fs::canonicalize(&dir) else {
            continue;
        };
        if !real_dir.is_dir() {
            continue;
        }
        if !real_dir.starts_with(&real_root) {
            issues.push(SkillIssue::EscapingLink {
                path: dir,
                root: root.to_path_buf(),
            });
            continue;
        }
        let Ok(file) = fs::canonicalize(real_dir.join("SKILL.md")) else {
            // Not a skill directory.
            continue;
        };
        let shown = dir.join("SKILL.md");
        if !file.starts_with(&real_root) {
            issues.push(SkillIssue::EscapingLink {
                path: shown,
                root: root.to_path_buf(),
            });
            continue;
        }
        let Ok(meta) = fs::metadata(&file) else {
            continue;
        };
        if meta.len() > limits.file_bytes {
            issues.push(SkillIssue::TooLarge {
                path: shown,
                bytes: meta.len(),
                limit: limits.file_bytes,
            });
            continue;
        }
        let text = match fs::read(&file) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) => {
                issues.push(SkillIssue::Unreadable {
                    path: shown,
                    message: e.to_string(),
                });
                continue;
            }
        };
        let fm = parse_front_matter(&text);
        let Some(description) = fm
            .get("description")
            .map(str::trim)
            .filter(|d| !d.is_empty())
        else {
            issues.push(SkillIssue::NoDescription { path: shown });
            continue;
        };
        let skill_name = fm
            .get("name")
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .unwrap_or(&name)
            .to_string();
        skills.push(Skill {
            name: skill_name,
            description: description.to_string(),
            location: std::path::absolute(&shown).unwrap_or(shown),
            source: source.clone(),
            model_invocable: !fm.flag("disable-model-invocation"),
        });
    }
    if skills.len() > limits.skills_per_source {
        issues.push(SkillIssue::TooManySkills {
            root: root.to_path_buf(),
            limit: limits.skills_per_source,
        });
        skills.truncate(limits.skills_per_source);
    }
    skills
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "skills_tests.rs"]
mod tests;
