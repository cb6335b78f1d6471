use std::path::PathBuf;
use std::sync::Arc;

use super::*;
use crate::bootstrap::BootstrapSet;
use crate::budget::{BootstrapLimits, SourceFile};
use crate::sections::DEFAULT_HEARTBEAT_PROMPT;
use crate::tools::ToolInfo;

fn set(files: &[(&str, &str)]) -> Arc<BootstrapSet> {
    let sources: Vec<SourceFile> = files
        .iter()
        .map(|(name, text)| SourceFile {
            name: name.to_string(),
            path: PathBuf::from(format!("/ws/{name}")),
            content: Some(text.to_string()),
        })
        .collect();
    Arc::new(BootstrapSet::from_sources(
        "/ws",
        &sources,
        BootstrapLimits::default(),
    ))
}

fn labels(built: &BuiltPrompt) -> Vec<String> {
    built.parts.iter().map(|p| p.kind.label()).collect()
}

#[test]
fn full_mode_writes_the_sections_in_order_with_runtime_last() {
    let built = build_system_prompt(&PromptInputs {
        tools: vec![ToolInfo::named("read"), ToolInfo::named("memory_search")],
        bootstrap: set(&[("AGENTS.md", "Rules."), ("HEARTBEAT.md", "Check mail.")]),
        time_zone: Some("UTC".into()),
        extra_system_prompt: Some("Group notes".into()),
        heartbeat_prompt: Some("Ping".into()),
        workspace_dir: "/ws".into(),
        ..PromptInputs::default()
    });
    assert_eq!(
        labels(&built),
        [
            "section:identity",
            "section:tooling",
            "section:tool-call-style",
            "section:execution-bias",
            "section:safety",
            "section:cli-reference",
            "section:memory-recall",
            "section:time-lookup",
            "section:workspace",
            "section:current-date-time",
            "section:workspace-files",
            "section:project-context",
            "file:AGENTS.md",
            "section:silent-replies",
            "cache-boundary",
            "section:dynamic-project-context",
            "file:HEARTBEAT.md",
            "section:extra-context",
            "section:heartbeats",
            "section:runtime",
        ]
    );
    assert!(built.text.ends_with(
        "Runtime: thinking=off\nReasoning: off (the user sees your reasoning only when it is on or stream)."
    ));
    // Blank lines only around the marker, whose own newlines make them.
    assert!(
        built
            .text
            .contains("\n\n<!-- RAMPART_CACHE_BOUNDARY -->\n\n# Dynamic Project Context\n")
    );
    assert_eq!(built.text.matches("\n\n").count(), 2);
}

#[test]
fn none_mode_is_the_identity_line_alone() {
    let built = build_system_prompt(&PromptInputs {
        mode: PromptMode::None,
        bootstrap: set(&[("AGENTS.md", "Rules.")]),
        ..PromptInputs::default()
    });
    assert_eq!(labels(&built), ["section:identity"]);
    assert!(!built.text.contains('\n'));
}

#[test]
fn project_context_lists_files_in_prompt_order_with_the_persona_line() {
    let built = build_system_prompt(&PromptInputs {
        bootstrap: set(&[
            ("TOOLS.md", "t"),
            ("SOUL.md", "Be warm."),
            ("AGENTS.md", "a"),
        ]),
        ..PromptInputs::default()
    });
    let context = built
        .find(&PartKind::Section(Section::ProjectContext))
        .unwrap();
    assert!(context.starts_with("# Project Context\n"));
    assert!(context.contains("SOUL.md sets your persona"));
    let soul = built
        .find(&PartKind::ContextFile {
            name: "SOUL.md".into(),
        })
        .unwrap();
    assert_eq!(soul, "## /ws/SOUL.md\nBe warm.\n");
    let order: Vec<String> = labels(&built)
        .into_iter()
        .filter(|l| l.starts_with("file:"))
        .collect();
    assert_eq!(order, ["file:AGENTS.md", "file:SOUL.md", "file:TOOLS.md"]);
}

#[test]
fn the_default_heartbeat_prompt_quoted_in_a_file_is_removed() {
    let text = format!("# Heartbeat\n\n\n\nDefault prompt: {DEFAULT_HEARTBEAT_PROMPT}\n\n\n\nEnd");
    let built = build_system_prompt(&PromptInputs {
        bootstrap: set(&[("HEARTBEAT.md", &text)]),
        ..PromptInputs::default()
    });
    let file = built
        .find(&PartKind::ContextFile {
            name: "HEARTBEAT.md".into(),
        })
        .unwrap();
    assert!(!file.contains("Follow it strictly"));
    assert!(file.contains("# Heartbeat\n\nDefault prompt: \n\nEnd"));
    // With no file above the marker, the heading is the plain one.
    assert!(
        built
            .text
            .contains("\n# Project Context\n## /ws/HEARTBEAT.md\n")
    );
}

#[test]
fn the_skills_rule_names_the_read_tool_as_spelled_and_the_catalog_is_its_own_part() {
    use crate::skills::{Skill, SkillCatalog, SkillLimits, SkillSource};
    let catalog = SkillCatalog::from_skills(
        vec![Skill {
            name: "charts".into(),
            description: "Draw charts".into(),
            location: "/ws/skills/charts/SKILL.md".into(),
            source: SkillSource::Workspace,
            model_invocable: true,
        }],
        SkillLimits::default(),
        None,
    );
    let built = build_system_prompt(&PromptInputs {
        tools: vec![ToolInfo::named("Read")],
        skills: Some(Arc::new(catalog)),
        ..PromptInputs::default()
    });
    let guidance = built.find(&PartKind::Section(Section::Skills)).unwrap();
    assert!(guidance.starts_with("## Skills (mandatory)\n"));
    assert!(guidance.contains("with `Read`"));
    let block = built.find(&PartKind::SkillsCatalog).unwrap();
    assert!(block.contains("<name>charts</name>"));
    assert!(block.ends_with("</available_skills>\n"));
}

#[test]
fn an_override_replaces_everything_and_still_takes_the_addition() {
    let built = build_system_prompt(&PromptInputs {
        system_prompt_override: Some("  You are a calculator.  ".into()),
        bootstrap: set(&[("AGENTS.md", "Rules.")]),
        engine_addition: Some("Turn note".into()),
        ..PromptInputs::default()
    });
    assert_eq!(built.text, "Turn note\n\nYou are a calculator.");
    assert_eq!(labels(&built), ["engine-addition", "override"]);
    // A blank override is no override.
    let built = build_system_prompt(&PromptInputs {
        system_prompt_override: Some(" \n ".into()),
        ..PromptInputs::default()
    });
    assert!(
        built
            .text
            .starts_with("You are a personal assistant running inside Rampart")
    );
}

#[test]
fn no_time_zone_means_no_time_lines() {
    let built = build_system_prompt(&PromptInputs::default());
    assert!(!built.text.contains("## Current Date & Time"));
    assert!(!built.text.contains("date and time are not in this prompt"));
    assert!(built.text.contains("## Workspace Files (injected)"));
}

#[test]
fn bootstrap_md_adds_the_commit_reminder() {
    let built = build_system_prompt(&PromptInputs {
        bootstrap: set(&[("BOOTSTRAP.md", "Hello, new workspace.")]),
        ..PromptInputs::default()
    });
    assert!(
        built
            .text
            .contains("Reminder: after editing files in this workspace")
    );
    let plain = build_system_prompt(&PromptInputs::default());
    assert!(!plain.text.contains("Reminder:"));
}

#[test]
fn a_marker_inside_a_workspace_file_does_not_move_the_cache_boundary() {
    // The joining newline after the file would complete a bare comment into a full marker.
    let built = build_system_prompt(&PromptInputs {
        bootstrap: set(&[
            ("AGENTS.md", "Rules.\n<!-- RAMPART_CACHE_BOUNDARY -->"),
            ("USER.md", &format!("Sam{CACHE_BOUNDARY}more")),
        ]),
        extra_system_prompt: Some(format!("x{CACHE_BOUNDARY}y")),
        ..PromptInputs::default()
    });
    assert_eq!(built.text.matches("RAMPART_CACHE_BOUNDARY").count(), 1);
    let marker = built
        .parts
        .iter()
        .find(|p| p.kind == PartKind::CacheBoundary)
        .unwrap();
    assert_eq!(built.text.find(CACHE_BOUNDARY), Some(marker.range.start));
}
