//! `build_system_prompt`: the sections in order, the marker, the engine's addition, and the
//! breakdown.

use crate::inputs::PromptInputs;
use crate::marker::{CACHE_BOUNDARY, insert_addition_into};
use crate::memory::memory_recall_lines;
use crate::mode::PromptMode;
use crate::parts::{BuiltPrompt, Lines, PartKind, Piece, Section, assemble};
use crate::runtime::runtime_line;
use crate::sections;
use crate::text::sanitize_for_prompt;
use crate::tools::find_tool;

/// The system prompt for one turn, with its breakdown.
///
/// The order (OpenClaw's): identity; Tooling, Tool Call Style, Execution Bias (full), Safety,
/// the CLI reference, Skills, Memory Recall (full); the time-lookup line, Workspace, Current
/// Date & Time, Workspace Files (injected), Project Context, Silent Replies (full); the cache
/// marker; Dynamic Project Context (HEARTBEAT.md), the subagent or group context, Heartbeats
/// (full); Runtime last. [`PromptMode::None`] writes the identity line only. Sections are
/// lists of lines; empty lines are dropped and the rest joined with "\n".
///
/// A non-blank `system_prompt_override` replaces all of it (trimmed; no files). Then the
/// engine's addition goes right after the marker (or first, with no marker); see
/// [`crate::insert_addition`].
pub fn build_system_prompt(inputs: &PromptInputs) -> BuiltPrompt {
    let override_text = inputs
        .system_prompt_override
        .as_deref()
        .map(str::trim)
        .filter(|o| !o.is_empty());
    let pieces = match override_text {
        Some(text) => override_pieces(text),
        None => section_pieces(inputs),
    };
    let pieces = match inputs.engine_addition.as_deref() {
        Some(addition) => insert_addition_into(pieces, addition),
        None => pieces,
    };
    assemble(pieces, inputs.mode)
}

/// An override as pieces: split at a marker it may carry, so the addition still lands below.
fn override_pieces(text: &str) -> Vec<Piece> {
    match text.find(CACHE_BOUNDARY) {
        Some(at) => vec![
            (PartKind::Override, text[..at].to_string()),
            (PartKind::CacheBoundary, CACHE_BOUNDARY.to_string()),
            (
                PartKind::Override,
                text[at + CACHE_BOUNDARY.len()..].to_string(),
            ),
        ],
        None => vec![(PartKind::Override, text.to_string())],
    }
}

fn section_pieces(inputs: &PromptInputs) -> Vec<Piece> {
    let section = |s: Section| PartKind::Section(s);
    let mut lines = Lines::default();
    lines.extend(&section(Section::Identity), sections::identity());
    if inputs.mode == PromptMode::None {
        return lines.into_pieces();
    }
    let full = inputs.mode == PromptMode::Full;
    let tools = &inputs.tools;

    lines.extend(&section(Section::Tooling), sections::tooling(tools));
    lines.extend(
        &section(Section::ToolCallStyle),
        sections::tool_call_style(),
    );
    if full {
        lines.extend(&section(Section::ExecutionBias), sections::execution_bias());
    }
    lines.extend(&section(Section::Safety), sections::safety());
    lines.extend(&section(Section::CliReference), sections::cli_reference());

    if let Some(block) = inputs.skills.as_ref().and_then(|c| c.render()) {
        let read = find_tool(tools, "read").unwrap_or("read");
        lines.extend(&section(Section::Skills), sections::skills_guidance(read));
        lines.push(&PartKind::SkillsCatalog, block.text);
    }
    if full && inputs.memory.include {
        lines.extend(
            &section(Section::MemoryRecall),
            memory_recall_lines(tools, inputs.memory.citations),
        );
    }

    let zone = inputs
        .time_zone
        .as_deref()
        .map(sanitize_for_prompt)
        .filter(|z| !z.trim().is_empty());
    if zone.is_some() {
        lines.extend(&section(Section::TimeLookup), sections::time_lookup(tools));
    }
    let dir = sanitize_for_prompt(&inputs.workspace_dir.display().to_string());
    let bootstrap = &inputs.bootstrap;
    lines.extend(
        &section(Section::Workspace),
        sections::workspace(&dir, bootstrap.has_file(crate::bootstrap::BOOTSTRAP_MD)),
    );
    if let Some(zone) = &zone {
        lines.extend(
            &section(Section::CurrentDateTime),
            sections::current_date_time(zone.trim()),
        );
    }
    lines.extend(
        &section(Section::WorkspaceFiles),
        sections::workspace_files(),
    );

    let stable = bootstrap.stable_files();
    if !stable.is_empty() {
        lines.extend(
            &section(Section::ProjectContext),
            sections::project_context(bootstrap.has_file(crate::bootstrap::SOUL_MD)),
        );
        for file in &stable {
            let kind = PartKind::ContextFile {
                name: file.name.clone(),
            };
            lines.extend(&kind, sections::context_file(&file.path, &file.content));
        }
    }
    if full {
        lines.extend(&section(Section::SilentReplies), sections::silent_replies());
    }

    lines.push(&PartKind::CacheBoundary, CACHE_BOUNDARY);

    let dynamic = bootstrap.dynamic_files();
    if !dynamic.is_empty() {
        lines.extend(
            &section(Section::DynamicProjectContext),
            sections::dynamic_project_context(!stable.is_empty()),
        );
        for file in &dynamic {
            let kind = PartKind::ContextFile {
                name: file.name.clone(),
            };
            lines.extend(&kind, sections::context_file(&file.path, &file.content));
        }
    }
    if let Some(extra) = inputs
        .extra_system_prompt
        .as_deref()
        .map(str::trim)
        .filter(|e| !e.is_empty())
    {
        lines.extend(
            &section(Section::ExtraContext),
            sections::extra_context(!full, extra),
        );
    }
    if full
        && let Some(prompt) = inputs
            .heartbeat_prompt
            .as_deref()
            .map(str::trim)
            .filter(|p| !p.is_empty())
    {
        lines.extend(&section(Section::Heartbeats), sections::heartbeats(prompt));
    }
    lines.extend(
        &section(Section::Runtime),
        sections::runtime(runtime_line(&inputs.runtime), inputs.reasoning.as_str()),
    );
    lines.into_pieces()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "builder_tests.rs"]
mod tests;
