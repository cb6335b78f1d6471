//! What the summariser is told: the system prompt, the task, the required structure, the
//! identifier policy and the operator's focus, assembled into one prompt per request.
//!
//! The structure is OpenClaw's safeguard structure (five required headings, audited by
//! [`super::quality`]) rather than pi's six-section template: two competing templates in one
//! prompt produce summaries that follow neither, and the audit needs the five.

use super::settings::IdentifierPolicy;

/// The system prompt of every summarisation request (pi's `SUMMARIZATION_SYSTEM_PROMPT`).
pub const SUMMARIZATION_SYSTEM_PROMPT: &str = "You are a context summarization assistant. Your task is to read a conversation between a user and an AI coding assistant, then produce a structured summary following the exact format specified.\n\nDo NOT continue the conversation. Do NOT respond to any questions in the conversation. ONLY output the structured summary.";

/// The identifier instruction of the `strict` policy (`IDENTIFIER_PRESERVATION_INSTRUCTIONS`).
pub const IDENTIFIER_PRESERVATION_INSTRUCTIONS: &str = "Preserve all opaque identifiers exactly as written (no shortening or reconstruction), including UUIDs, hashes, IDs, tokens, API keys, hostnames, IPs, ports, URLs, and file names.";

/// The task of a merge request (`MERGE_SUMMARIES_INSTRUCTIONS`).
pub const MERGE_SUMMARIES_INSTRUCTIONS: &str = "Merge these partial summaries into a single cohesive summary.\n\nMUST PRESERVE:\n- Active tasks and their current status (in-progress, blocked, pending)\n- Batch operation progress (e.g., '5/17 items completed')\n- The last thing the user requested and what was being done about it\n- Decisions made and their rationale\n- TODOs, open questions, and constraints\n- Any commitments or follow-ups promised\n\nPRIORITIZE recent context over older history. The agent needs to know\nwhat it was doing, not just what was discussed.";

/// The task of a split turn's prefix (`TURN_PREFIX_INSTRUCTIONS`).
pub const TURN_PREFIX_INSTRUCTIONS: &str = "This summary covers the prefix of a split turn. Focus on the original request, early progress, and any details needed to understand the retained suffix.";

/// The headings every summary must have, as exact lines, in this order.
pub const REQUIRED_SUMMARY_SECTIONS: [&str; 5] = [
    "## Decisions",
    "## Open TODOs",
    "## Constraints/Rules",
    "## Pending user asks",
    "## Exact identifiers",
];

/// The identifier line of the structure instructions under the `strict` policy.
pub const STRICT_EXACT_IDENTIFIERS_INSTRUCTION: &str = "For ## Exact identifiers, preserve literal values exactly as seen (IDs, URLs, file paths, ports, hashes, dates, times).";

/// The identifier line under the `off` policy.
pub const POLICY_OFF_EXACT_IDENTIFIERS_INSTRUCTION: &str = "For ## Exact identifiers, include identifiers only when needed for continuity; do not enforce literal-preservation rules.";

/// The task of a first summary (ours).
pub const SUMMARIZE_TASK: &str = "The conversation above is being compacted: it will be replaced by your summary. Write a structured checkpoint that another model can use to continue the work without the original messages.";

/// The task when an earlier summary exists (ours).
pub const UPDATE_TASK: &str = "The conversation above is newer than the summary in <previous-summary>. Update that summary: keep everything in it that still holds, add what the new messages decided, changed, asked or left open, and drop only what the new messages made obsolete.";

/// The opening line of the structure instructions.
const STRUCTURE_HEADER: &str =
    "Produce a compact, factual summary with these exact section headings:";
/// The closing line of the structure instructions.
const UNRESOLVED_ASKS_LINE: &str = "Do not omit unresolved asks from the user.";

/// `buildCompactionSummarizationInstructions`: the identifier text the policy selects
/// (`strict`: the standard text; `off`: none; `custom`: the custom text, or the standard text
/// when it is blank), then `Additional focus:` and the custom instructions. `None` when both
/// are empty.
pub fn build_summarization_instructions(
    custom_instructions: Option<&str>,
    policy: IdentifierPolicy,
    identifier_instructions: Option<&str>,
) -> Option<String> {
    let custom = custom_instructions.map(str::trim).filter(|c| !c.is_empty());
    let identifiers = match policy {
        IdentifierPolicy::Off => None,
        IdentifierPolicy::Strict => Some(IDENTIFIER_PRESERVATION_INSTRUCTIONS),
        IdentifierPolicy::Custom => Some(
            identifier_instructions
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .unwrap_or(IDENTIFIER_PRESERVATION_INSTRUCTIONS),
        ),
    };
    match (identifiers, custom) {
        (None, None) => None,
        (Some(ids), None) => Some(ids.to_owned()),
        (None, Some(c)) => Some(format!("Additional focus:\n{c}")),
        (Some(ids), Some(c)) => Some(format!("{ids}\n\nAdditional focus:\n{c}")),
    }
}

/// The structure instructions: the five headings in order, the identifier line of the policy,
/// and the reminder about unresolved asks.
pub fn build_structure_instructions(
    policy: IdentifierPolicy,
    identifier_instructions: Option<&str>,
) -> String {
    let custom;
    let identifier_line = match policy {
        IdentifierPolicy::Strict => STRICT_EXACT_IDENTIFIERS_INSTRUCTION,
        IdentifierPolicy::Off => POLICY_OFF_EXACT_IDENTIFIERS_INSTRUCTION,
        IdentifierPolicy::Custom => match identifier_instructions.map(str::trim) {
            Some(text) if !text.is_empty() => {
                custom =
                    format!("For ## Exact identifiers, apply this operator-defined policy: {text}");
                &custom
            }
            _ => STRICT_EXACT_IDENTIFIERS_INSTRUCTION,
        },
    };
    let mut lines = vec![STRUCTURE_HEADER];
    lines.extend(REQUIRED_SUMMARY_SECTIONS);
    lines.push(identifier_line);
    lines.push(UNRESOLVED_ASKS_LINE);
    lines.join("\n")
}

/// Everything after the task in a request: structure, identifier policy and focus, and (on a
/// quality retry) the audit's feedback. Built once per attempt and shared by its requests.
pub fn build_request_instructions(
    policy: IdentifierPolicy,
    identifier_instructions: Option<&str>,
    custom_instructions: Option<&str>,
    quality_feedback: Option<&str>,
) -> String {
    let mut text = build_structure_instructions(policy, identifier_instructions);
    if let Some(extra) =
        build_summarization_instructions(custom_instructions, policy, identifier_instructions)
    {
        text.push_str("\n\n");
        text.push_str(&extra);
    }
    if let Some(feedback) = quality_feedback {
        text.push_str("\n\n");
        text.push_str(feedback);
    }
    text
}

/// What a quality retry adds: what to fix, and why the last summary failed.
pub fn quality_feedback(policy: IdentifierPolicy, reasons: &[String]) -> String {
    let fix = if policy == IdentifierPolicy::Strict {
        "Fix all issues and include every required section with exact identifiers preserved."
    } else {
        "Fix all issues and include every required section while following the configured identifier policy."
    };
    format!(
        "{fix}\n\nPrevious summary failed quality checks ({}).",
        reasons.join(", ")
    )
}

/// The full user content of a request: the conversation in `<conversation>` tags, the previous
/// summary in `<previous-summary>` tags when there is one, the task, then the instructions.
pub fn build_prompt(
    conversation: &str,
    previous_summary: Option<&str>,
    task: &str,
    instructions: &str,
) -> String {
    let previous_len = previous_summary.map_or(0, |p| p.len() + 40);
    let mut prompt = String::with_capacity(
        conversation.len() + previous_len + task.len() + instructions.len() + 64,
    );
    prompt.push_str("<conversation>\n");
    prompt.push_str(conversation);
    prompt.push_str("\n</conversation>\n\n");
    if let Some(previous) = previous_summary {
        prompt.push_str("<previous-summary>\n");
        prompt.push_str(previous);
        prompt.push_str("\n</previous-summary>\n\n");
    }
    prompt.push_str(task);
    prompt.push_str("\n\n");
    prompt.push_str(instructions);
    prompt
}

/// The label of part `index` (0-based) of `of` in a merge request: `[Chunk 1 — oldest
/// messages …]`, `[Chunk i/n …]`, `[Chunk n — most recent messages …]`, with the part's time
/// range (`time_range` is ` [YYYY-MM-DD HH:MM — … UTC]` or empty). Why: the merge model sees
/// only text, so chronology has to be written out.
pub fn chunk_label(index: usize, of: usize, time_range: &str) -> String {
    if index == 0 {
        format!("[Chunk 1 — oldest messages{time_range}]")
    } else if index + 1 == of {
        format!("[Chunk {of} — most recent messages{time_range}]")
    } else {
        format!("[Chunk {}/{of}{time_range}]", index + 1)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn identifier_policy_selects_the_text() {
        assert_eq!(
            build_summarization_instructions(None, IdentifierPolicy::Strict, None).unwrap(),
            IDENTIFIER_PRESERVATION_INSTRUCTIONS
        );
        assert_eq!(
            build_summarization_instructions(None, IdentifierPolicy::Off, None),
            None
        );
        assert_eq!(
            build_summarization_instructions(Some(" f "), IdentifierPolicy::Off, None).unwrap(),
            "Additional focus:\nf"
        );
        assert_eq!(
            build_summarization_instructions(None, IdentifierPolicy::Custom, Some("keep ids"))
                .unwrap(),
            "keep ids"
        );
        assert_eq!(
            build_summarization_instructions(None, IdentifierPolicy::Custom, Some("  ")).unwrap(),
            IDENTIFIER_PRESERVATION_INSTRUCTIONS
        );
        assert_eq!(
            build_summarization_instructions(Some("db"), IdentifierPolicy::Strict, None).unwrap(),
            format!("{IDENTIFIER_PRESERVATION_INSTRUCTIONS}\n\nAdditional focus:\ndb")
        );
    }

    #[test]
    fn structure_lists_the_headings_in_order() {
        let text = build_structure_instructions(IdentifierPolicy::Strict, None);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], STRUCTURE_HEADER);
        assert_eq!(&lines[1..6], &REQUIRED_SUMMARY_SECTIONS);
        assert_eq!(lines[6], STRICT_EXACT_IDENTIFIERS_INSTRUCTION);
        assert_eq!(lines[7], "Do not omit unresolved asks from the user.");
        let off = build_structure_instructions(IdentifierPolicy::Off, None);
        assert!(off.contains(POLICY_OFF_EXACT_IDENTIFIERS_INSTRUCTION));
    }

    #[test]
    fn prompt_and_labels() {
        let p = build_prompt("[User]: hi", Some("old"), "TASK", "INSTR");
        assert_eq!(
            p,
            "<conversation>\n[User]: hi\n</conversation>\n\n<previous-summary>\nold\n</previous-summary>\n\nTASK\n\nINSTR"
        );
        assert_eq!(chunk_label(0, 3, ""), "[Chunk 1 — oldest messages]");
        assert_eq!(chunk_label(1, 3, " [x UTC]"), "[Chunk 2/3 [x UTC]]");
        assert_eq!(chunk_label(2, 3, ""), "[Chunk 3 — most recent messages]");
        let fb = quality_feedback(IdentifierPolicy::Strict, &["a".into(), "b".into()]);
        assert!(fb.ends_with("(a, b)."));
    }
}
