//! `prune_context_messages`: OpenClaw's pruner (reference §9, steps 1–6), over shared lists.
//!
//! The pass has the hygiene passes' shape: it never edits a message (a pruned result is a new
//! `Arc`, the session keeps the original), every message it does not change is the input's
//! `Arc`, a call that changes nothing returns the input list itself, and a report says what it
//! did. Nothing here depends on the provider: OpenClaw enabled the extension only for
//! Anthropic-family models (issue #95840), but the arithmetic is the same for every model, so
//! whether to call it is the caller's decision alone.

use serde::{Deserialize, Serialize};

use super::estimate::CHARS_PER_TOKEN;
pub use super::facts::PruneAction;
use super::facts::{Direct, Facts, Replacement};
use super::memo::PruneMemo;
use super::settings::EffectiveSettings;
use rampart_message::AgentMessage;
use rampart_message::{MessageList, SharedMessage};

/// Options of a pruning call that do not come from configuration.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PruneOptions {
    /// Leave thinking and redacted-thinking blocks of every assistant message but the latest
    /// out of the size estimate. Set it when the request drops them before sending (the
    /// transcript policy of providers that do not replay reasoning), so that pruning does not
    /// prune for text the provider will never see. Messages are not changed by it.
    pub drop_thinking_for_estimate: bool,
}

/// Why pruning stopped before looking at any tool result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SkipReason {
    /// The context window was 0 tokens: there is no ratio to compute.
    NoWindow,
    /// Fewer assistant messages than `keepLastAssistants`: the whole history is recent.
    TooFewAssistants,
    /// No user message: everything is bootstrap, which is never pruned.
    NoUserMessage,
    /// The context is below `softTrimRatio` of the window.
    BelowSoftTrimRatio,
}

/// One tool result pruning changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrunedMessage {
    /// Its index in the list (the same in input and output: pruning never moves messages).
    pub index: usize,
    /// The call it answers.
    pub tool_call_id: String,
    /// The tool that produced it.
    pub tool_name: String,
    /// What was done to it.
    pub action: PruneAction,
    /// Its estimate characters before pruning.
    pub chars_before: u64,
    /// Its estimate characters after pruning.
    pub chars_after: u64,
    /// `chars_before − chars_after`. Negative when a tiny `softTrim.maxChars` or a long
    /// placeholder made the result longer than it was (the reference allows both).
    pub chars_removed: i64,
}

/// What a pruning call found and changed; serialisable, for events and the replay report.
///
/// Sizes are estimate characters ([`super::estimate_message_chars`]); ratios are sizes over
/// the window in characters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PruningReport {
    /// Set when pruning stopped before looking at tool results.
    pub skipped: Option<SkipReason>,
    /// The window in characters: tokens × 4.
    pub char_window: u64,
    /// The whole context before pruning.
    pub chars_before: u64,
    /// The whole context after pruning.
    pub chars_after: u64,
    /// `chars_before / char_window`.
    pub ratio_before: f64,
    /// `chars_after / char_window`.
    pub ratio_after: f64,
    /// Prunable tool output after soft trimming: what `minPrunableToolChars` was compared with.
    pub prunable_tool_chars: u64,
    /// Results whose final form came from the soft trim (trimmed or images removed).
    pub soft_trimmed: usize,
    /// Results replaced by the placeholder.
    pub hard_cleared: usize,
    /// Every changed result, oldest first.
    pub messages: Vec<PrunedMessage>,
}

impl PruningReport {
    /// Whether anything changed; `false` exactly when the input list came back.
    pub fn changed(&self) -> bool {
        !self.messages.is_empty()
    }
}

/// Prunes old tool results from `list` for a model with a window of `context_window` tokens,
/// without a memo and with default [`PruneOptions`].
///
/// Fine for one-off calls and tests; on every turn of a session use
/// [`prune_context_messages_with`] and a [`PruneMemo`], which makes repeated calls O(messages).
pub fn prune_context_messages(
    list: &MessageList,
    context_window: u64,
    settings: &EffectiveSettings,
) -> (MessageList, PruningReport) {
    prune_context_messages_with(
        list,
        context_window,
        settings,
        PruneOptions::default(),
        None,
    )
}

/// OpenClaw's `pruneContextMessages`, in memory only.
///
/// 1. The window in characters is `context_window × 4`; message sizes are estimate characters
///    (CJK weighted 4, images 8,000, other roles 256; see [`super::estimate_message_chars`]).
/// 2. Cutoff: the `keep_last_assistants`-th assistant message from the end; it and everything
///    after it are protected. Too few assistants: nothing happens. 0: nothing is protected.
/// 3. Nothing before the first user message is touched (bootstrap reads stay).
/// 4. Below `soft_trim_ratio` of the window, nothing happens.
/// 5. Soft trim: each tool result in `[first user, cutoff)` whose tool `tools` allows is
///    trimmed to head and tail with a notice when longer than `soft_trim.max_chars`; images in
///    those results become a marker (see [`super::PRUNED_IMAGE_MARKER`]).
/// 6. Hard clear: if the context is still at `hard_clear_ratio` or more, clearing is enabled
///    and those results hold at least `min_prunable_tool_chars`, they are replaced by the
///    placeholder, oldest first, until the context drops below `hard_clear_ratio`.
///
/// Returns the input list itself when nothing changes; otherwise a list of the same length
/// and order in which only changed tool results are new `Arc`s. With `memo`, each message is
/// measured once for as long as it lives, and a result pruned the same way again is the same
/// `Arc` as last time.
///
/// The TTL gate is not applied here: check [`super::gate`] first, as OpenClaw's extension does.
pub fn prune_context_messages_with(
    list: &MessageList,
    context_window: u64,
    settings: &EffectiveSettings,
    options: PruneOptions,
    memo: Option<&PruneMemo>,
) -> (MessageList, PruningReport) {
    match memo {
        Some(memo) => {
            let mut state = memo.lock();
            state.prepare(&settings.soft_trim, &settings.hard_clear.placeholder);
            prune(list, context_window, settings, options, &mut *state)
        }
        None => prune(list, context_window, settings, options, &mut Direct),
    }
}

/// A prunable tool result: where it is, its size now, and what replaces it so far.
struct Candidate {
    index: usize,
    chars: u64,
    replacement: Option<Replacement>,
}

fn ratio(chars: u64, window: u64) -> f64 {
    chars as f64 / window as f64
}

/// The index of the `keep`-th assistant message from the end; the list's length when `keep`
/// is 0 (nothing protected); `None` when there are fewer assistants than that.
fn cutoff_index(list: &[SharedMessage], keep: usize) -> Option<usize> {
    if keep == 0 {
        return Some(list.len());
    }
    list.iter()
        .enumerate()
        .rev()
        .filter(|(_, m)| matches!(m.as_ref(), AgentMessage::Assistant(_)))
        .nth(keep - 1)
        .map(|(i, _)| i)
}

fn prune<F: Facts>(
    list: &MessageList,
    context_window: u64,
    settings: &EffectiveSettings,
    options: PruneOptions,
    facts: &mut F,
) -> (MessageList, PruningReport) {
    let mut report = PruningReport::default();
    if context_window == 0 {
        report.skipped = Some(SkipReason::NoWindow);
        return (list.clone(), report);
    }
    let window = context_window.saturating_mul(CHARS_PER_TOKEN);
    report.char_window = window;

    let measures = facts.measure_all(list);
    let latest_assistant = if options.drop_thinking_for_estimate {
        list.iter()
            .rposition(|m| matches!(m.as_ref(), AgentMessage::Assistant(_)))
    } else {
        None
    };
    let mut total = measures
        .iter()
        .enumerate()
        .map(|(i, m)| {
            // `thinking` is 0 for every message but assistants with thinking.
            if options.drop_thinking_for_estimate && Some(i) != latest_assistant {
                m.chars.saturating_sub(m.thinking)
            } else {
                m.chars
            }
        })
        .fold(0u64, u64::saturating_add);
    report.chars_before = total;
    report.chars_after = total;
    report.ratio_before = ratio(total, window);
    report.ratio_after = report.ratio_before;

    let Some(cutoff) = cutoff_index(list, settings.keep_last_assistants) else {
        report.skipped = Some(SkipReason::TooFewAssistants);
        return (list.clone(), report);
    };
    let Some(first_user) = list
        .iter()
        .position(|m| matches!(m.as_ref(), AgentMessage::User(_)))
    else {
        report.skipped = Some(SkipReason::NoUserMessage);
        return (list.clone(), report);
    };
    if report.ratio_before < settings.soft_trim_ratio {
        report.skipped = Some(SkipReason::BelowSoftTrimRatio);
        return (list.clone(), report);
    }

    // Step 5: soft trim every prunable result in range.
    let mut candidates = Vec::new();
    for index in first_user..cutoff {
        let message = &list[index];
        let AgentMessage::ToolResult(result) = message.as_ref() else {
            continue;
        };
        if !settings.tools.is_prunable(&result.tool_name) {
            continue;
        }
        let before = measures[index].chars;
        let replacement = facts.soft_trimmed(message, result, &settings.soft_trim);
        let chars = replacement.as_ref().map_or(before, |r| r.chars);
        total = total.saturating_sub(before).saturating_add(chars);
        candidates.push(Candidate {
            index,
            chars,
            replacement,
        });
    }
    report.prunable_tool_chars = candidates.iter().map(|c| c.chars).sum();

    // Step 6: clear, oldest first, while the context is at the hard-clear ratio or above.
    let mut current = ratio(total, window);
    if current >= settings.hard_clear_ratio
        && settings.hard_clear.enabled
        && report.prunable_tool_chars >= settings.min_prunable_tool_chars
    {
        for candidate in &mut candidates {
            if current < settings.hard_clear_ratio {
                break;
            }
            let message = &list[candidate.index];
            let AgentMessage::ToolResult(result) = message.as_ref() else {
                continue;
            };
            let cleared = facts.cleared(message, result, &settings.hard_clear.placeholder);
            // `None`: the original already is the placeholder, so it goes out unchanged.
            let after = cleared
                .as_ref()
                .map_or(measures[candidate.index].chars, |r| r.chars);
            total = total.saturating_sub(candidate.chars).saturating_add(after);
            candidate.chars = after;
            candidate.replacement = cleared;
            current = ratio(total, window);
        }
    }
    report.chars_after = total;
    report.ratio_after = current;

    if candidates.iter().all(|c| c.replacement.is_none()) {
        return (list.clone(), report);
    }
    let mut out = list.to_vec();
    for candidate in candidates {
        let Some(replacement) = candidate.replacement else {
            continue;
        };
        let AgentMessage::ToolResult(result) = list[candidate.index].as_ref() else {
            continue;
        };
        let before = measures[candidate.index].chars;
        match replacement.action {
            PruneAction::HardCleared => report.hard_cleared += 1,
            PruneAction::SoftTrimmed | PruneAction::ImagesRemoved => report.soft_trimmed += 1,
        }
        report.messages.push(PrunedMessage {
            index: candidate.index,
            tool_call_id: result.tool_call_id.clone(),
            tool_name: result.tool_name.clone(),
            action: replacement.action,
            chars_before: before,
            chars_after: replacement.chars,
            chars_removed: signed(before) - signed(replacement.chars),
        });
        out[candidate.index] = replacement.message;
    }
    (out.into(), report)
}

fn signed(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::pruning::estimate::estimate_message_chars;
    use crate::pruning::settings::HardClear;
    use crate::pruning::settings::SoftTrim;
    use crate::pruning::test_support::*;
    use crate::pruning::tools::ToolFilter;
    use crate::pruning::trim::PRUNED_IMAGE_MARKER;
    use rampart_message::{Content, ContentBlock};
    use std::sync::Arc;

    /// OpenClaw's test window: 1000 tokens, so 4000 characters.
    const WINDOW: u64 = 1_000;

    fn prune_aggressive(
        messages: Vec<AgentMessage>,
        tweak: impl FnOnce(&mut EffectiveSettings),
    ) -> (MessageList, MessageList, PruningReport) {
        let input = list(messages);
        let mut settings = aggressive();
        tweak(&mut settings);
        let (out, report) = prune_context_messages(&input, WINDOW, &settings);
        (input, out, report)
    }

    fn four_triplets() -> Vec<AgentMessage> {
        let mut messages = Vec::new();
        for (i, c) in ["x", "y", "z", "w"].iter().enumerate() {
            let n = i + 1;
            messages.push(user(&format!("u{n}")));
            messages.push(answer(&format!("a{n}")));
            messages.push(tool(&format!("t{n}"), "exec", &c.repeat(20_000)));
        }
        messages
    }

    // ----- The reference cases (§13, group 10) -----

    #[test]
    fn keeps_tool_results_after_the_last_n_assistants() {
        let (input, out, report) =
            prune_aggressive(four_triplets(), |s| s.keep_last_assistants = 3);
        assert_eq!(tool_text(&out, "t1"), "[cleared]");
        assert_eq!(tool_text(&out, "t2"), "y".repeat(20_000));
        assert_eq!(tool_text(&out, "t3"), "z".repeat(20_000));
        assert_eq!(tool_text(&out, "t4"), "w".repeat(20_000));
        // Only t1 is a new allocation.
        for i in (0..input.len()).filter(|&i| i != 2) {
            assert!(Arc::ptr_eq(&input[i], &out[i]), "message {i} was copied");
        }
        assert_eq!(report.hard_cleared, 1);
        assert_eq!(report.soft_trimmed, 0);
        assert_eq!(report.messages.len(), 1);
        let pruned = &report.messages[0];
        assert_eq!((pruned.index, pruned.tool_name.as_str()), (2, "exec"));
        assert_eq!(pruned.tool_call_id, "t1");
        assert_eq!(pruned.action, PruneAction::HardCleared);
        assert_eq!(pruned.chars_before, 20_000);
        assert_eq!(pruned.chars_after, 9);
        assert_eq!(pruned.chars_removed, 19_991);
    }

    #[test]
    fn never_touches_tool_results_before_the_first_user_message() {
        let (input, out, _) = prune_aggressive(
            vec![
                answer("bootstrap tool calls"),
                tool("t0", "read", &"x".repeat(20_000)),
                answer("greeting"),
                user("u1"),
                tool("t1", "exec", &"y".repeat(20_000)),
            ],
            |_| {},
        );
        assert_eq!(tool_text(&out, "t0"), "x".repeat(20_000));
        assert!(Arc::ptr_eq(&input[1], &out[1]));
        assert_eq!(tool_text(&out, "t1"), "[cleared]");
    }

    #[test]
    fn soft_trims_across_block_boundaries() {
        let (_, out, report) = prune_aggressive(
            vec![
                user("u1"),
                tool_blocks("t1", "exec", vec![text_block("AAAAA"), text_block("BBBBB")]),
            ],
            |s| {
                s.hard_clear_ratio = 10.0;
                s.soft_trim = SoftTrim {
                    max_chars: 5,
                    head_chars: 7,
                    tail_chars: 3,
                };
            },
        );
        let text = tool_text(&out, "t1");
        assert!(text.contains("AAAAA\nB"), "{text}");
        assert!(text.contains("BBB"), "{text}");
        assert!(text.contains("[Tool result trimmed:"), "{text}");
        assert_eq!(find_tool(&out, "t1").content.blocks().len(), 1);
        assert_eq!(report.soft_trimmed, 1);
        assert_eq!(report.messages[0].action, PruneAction::SoftTrimmed);
        // A trim this tight makes the result longer: the reference allows it, the report says so.
        assert!(report.messages[0].chars_removed < 0);
    }

    // ----- The rest of OpenClaw's pruner tests -----

    #[test]
    fn hard_clear_removes_eligible_results_before_the_cutoff() {
        let (_, out, _) = prune_aggressive(
            vec![
                user("u1"),
                answer("a1"),
                tool("t1", "exec", &"x".repeat(20_000)),
                tool("t2", "exec", &"y".repeat(20_000)),
                user("u2"),
                answer("a2"),
                tool("t3", "exec", &"z".repeat(20_000)),
            ],
            |s| {
                s.keep_last_assistants = 1;
                s.soft_trim = EffectiveSettings::default().soft_trim;
                s.soft_trim_ratio = 10.0;
            },
        );
        assert_eq!(tool_text(&out, "t1"), "[cleared]");
        assert_eq!(tool_text(&out, "t2"), "[cleared]");
        assert_eq!(tool_text(&out, "t3"), "z".repeat(20_000));
    }

    #[test]
    fn cjk_text_counts_four_when_deciding_to_prune() {
        let settings = EffectiveSettings {
            hard_clear_ratio: 1.0,
            soft_trim_ratio: 1.0,
            ..aggressive()
        };
        // 50 Extension B characters count 200 (JavaScript's length would say 100): with the
        // result, 207 characters in a 160-character window.
        let input = list(vec![user(&"𠀀".repeat(50)), tool("t1", "exec", "keep me")]);
        let (out, report) = prune_context_messages(&input, 40, &settings);
        assert_eq!(tool_text(&out, "t1"), "[cleared]");
        assert_eq!(report.chars_before, 207);
        // The same number of Latin characters stays below the window.
        let input = list(vec![user(&"x".repeat(100)), tool("t1", "exec", "keep me")]);
        let (out, report) = prune_context_messages(&input, 40, &settings);
        assert!(MessageList::same_list(&out, &input));
        assert_eq!(report.skipped, Some(SkipReason::BelowSoftTrimRatio));
    }

    #[test]
    fn deny_wins_and_a_non_empty_allow_excludes_the_rest() {
        let (input, out, report) = prune_aggressive(
            vec![
                user("u1"),
                tool("t1", "Exec", &"x".repeat(20_000)),
                tool("t2", "Browser", &"y".repeat(20_000)),
            ],
            |s| s.tools = ToolFilter::new(["ex*"], ["exec"]).unwrap(),
        );
        assert!(MessageList::same_list(&out, &input));
        assert!(!report.changed());
        assert_eq!(report.prunable_tool_chars, 0);
    }

    #[test]
    fn replaces_image_blocks_during_soft_trim() {
        let (_, out, report) = prune_aggressive(
            vec![
                user("u1"),
                tool_blocks("t1", "exec", vec![image(), text_block("visible tool text")]),
            ],
            |s| {
                s.hard_clear.enabled = false;
                s.hard_clear_ratio = 10.0;
                s.soft_trim = SoftTrim {
                    max_chars: 200,
                    head_chars: 100,
                    tail_chars: 100,
                };
            },
        );
        let result = find_tool(&out, "t1");
        assert!(
            !result
                .content
                .blocks()
                .iter()
                .any(|b| matches!(b, ContentBlock::Image(_)))
        );
        let text = tool_text(&out, "t1");
        assert!(text.contains(PRUNED_IMAGE_MARKER), "{text}");
        assert!(text.contains("visible tool text"), "{text}");
        assert_eq!(report.messages[0].action, PruneAction::ImagesRemoved);
        assert_eq!(report.messages[0].chars_before, 8_000 + 17);
    }

    #[test]
    fn image_only_results_are_flattened_without_trimming() {
        let input = list(vec![
            user("summarize this"),
            tool_blocks("t1", "read", vec![image()]),
            answer("done"),
        ]);
        let settings = EffectiveSettings {
            keep_last_assistants: 1,
            soft_trim_ratio: 0.0,
            hard_clear_ratio: 10.0,
            hard_clear: HardClear {
                enabled: false,
                ..EffectiveSettings::default().hard_clear
            },
            soft_trim: SoftTrim {
                max_chars: 5_000,
                head_chars: 2_000,
                tail_chars: 2_000,
            },
            ..EffectiveSettings::default()
        };
        let (out, _) = prune_context_messages(&input, 1, &settings);
        assert_eq!(
            find_tool(&out, "t1").content,
            Content::text_block(PRUNED_IMAGE_MARKER)
        );
    }

    #[test]
    fn hard_clears_image_results_once_the_ratio_requires_it() {
        let input = list(vec![
            user("summarize this"),
            tool_blocks("t1", "read", vec![text_block("small text"), image()]),
            answer("done"),
        ]);
        let settings = EffectiveSettings {
            keep_last_assistants: 1,
            soft_trim_ratio: 0.0,
            hard_clear_ratio: 0.0,
            min_prunable_tool_chars: 1,
            soft_trim: SoftTrim {
                max_chars: 5_000,
                head_chars: 2_000,
                tail_chars: 2_000,
            },
            hard_clear: HardClear {
                enabled: true,
                placeholder: "[hard cleared test placeholder]".to_owned(),
            },
            ..EffectiveSettings::default()
        };
        let (out, report) = prune_context_messages(&input, 8, &settings);
        assert_eq!(
            find_tool(&out, "t1").content,
            Content::text_block("[hard cleared test placeholder]")
        );
        // Flattened first, then cleared: reported once, as cleared, against the original size.
        assert_eq!(report.messages.len(), 1);
        assert_eq!(report.messages[0].action, PruneAction::HardCleared);
        assert_eq!(report.messages[0].chars_before, 10 + 8_000);
    }

    #[test]
    fn trims_oversized_results_keeping_head_and_tail() {
        let (input, out, report) = prune_aggressive(
            vec![user("u1"), tool("t1", "exec", &"abcdefghij".repeat(1_000))],
            |s| {
                s.hard_clear_ratio = 10.0;
                s.soft_trim = SoftTrim {
                    max_chars: 10,
                    head_chars: 6,
                    tail_chars: 6,
                };
            },
        );
        let text = tool_text(&out, "t1");
        assert_eq!(
            text,
            "abcdef\n...\nefghij\n\n[Tool result trimmed: kept first 6 chars and last 6 chars of 10000 chars.]"
        );
        // Everything but the content is the original's.
        let (AgentMessage::ToolResult(before), AgentMessage::ToolResult(after)) =
            (input[1].as_ref(), out[1].as_ref())
        else {
            panic!("not tool results");
        };
        assert_eq!(after.details, before.details);
        assert_eq!(
            (
                &after.tool_call_id,
                &after.tool_name,
                after.is_error,
                after.timestamp
            ),
            (
                &before.tool_call_id,
                &before.tool_name,
                before.is_error,
                before.timestamp
            )
        );
        assert_eq!(report.chars_before, 2 + 10_000);
        assert_eq!(report.chars_after, 2 + text.len() as u64);
        assert_eq!(report.char_window, 4_000);
        assert!(report.ratio_after < report.ratio_before);
    }

    fn oversized_thinking(
        block: serde_json::Value,
        drop_thinking: bool,
    ) -> (MessageList, MessageList) {
        let input = list(vec![
            user("hello"),
            tool("t1", "read", &"X".repeat(2_000)),
            assistant(vec![block, json!({"type": "text", "text": "done"})]),
        ]);
        let (out, _) = prune_context_messages_with(
            &input,
            5_000,
            &tool_trim_settings(),
            PruneOptions {
                drop_thinking_for_estimate: drop_thinking,
            },
            None,
        );
        (input, out)
    }

    fn tool_trim_settings() -> EffectiveSettings {
        EffectiveSettings {
            keep_last_assistants: 1,
            soft_trim_ratio: 0.5,
            soft_trim: SoftTrim {
                max_chars: 200,
                head_chars: 100,
                tail_chars: 50,
            },
            hard_clear: HardClear {
                enabled: false,
                ..EffectiveSettings::default().hard_clear
            },
            ..EffectiveSettings::default()
        }
    }

    #[test]
    fn thinking_signatures_and_redacted_data_count() {
        let (_, out) = oversized_thinking(
            json!({"type": "thinking", "thinking": "[redacted]", "thinkingSignature": "S".repeat(40_000), "redacted": true}),
            false,
        );
        assert!(tool_text(&out, "t1").contains("[Tool result trimmed:"));
        let (_, out) = oversized_thinking(
            json!({"type": "redacted_thinking", "data": "D".repeat(40_000), "thinkingSignature": "sig"}),
            false,
        );
        assert!(tool_text(&out, "t1").contains("[Tool result trimmed:"));
        // The latest assistant keeps its thinking even when thinking is dropped.
        let (_, out) = oversized_thinking(
            json!({"type": "thinking", "thinking": "x", "thinkingSignature": "S".repeat(40_000)}),
            true,
        );
        assert!(tool_text(&out, "t1").contains("[Tool result trimmed:"));
    }

    #[test]
    fn dropped_thinking_of_older_replies_does_not_count() {
        let messages = || {
            list(vec![
                user("first"),
                assistant(vec![
                    json!({"type": "thinking", "thinking": "internal", "thinkingSignature": "S".repeat(40_000)}),
                    json!({"type": "text", "text": "older reply"}),
                ]),
                tool("t1", "read", &"X".repeat(2_000)),
                user("latest"),
                answer("latest reply"),
            ])
        };
        let input = messages();
        let drop = PruneOptions {
            drop_thinking_for_estimate: true,
        };
        let (out, report) =
            prune_context_messages_with(&input, 5_000, &tool_trim_settings(), drop, None);
        assert!(MessageList::same_list(&out, &input));
        assert_eq!(report.skipped, Some(SkipReason::BelowSoftTrimRatio));
        // Counted, the signature makes the same history big enough to trim.
        let (out, _) = prune_context_messages(&input, 5_000, &tool_trim_settings());
        assert!(tool_text(&out, "t1").contains("[Tool result trimmed:"));
    }

    // ----- Thresholds, identity, skips, memo -----

    #[test]
    fn clears_oldest_first_and_stops_below_the_ratio() {
        let input = list(vec![
            user("u"),
            tool("t1", "exec", &"a".repeat(3_000)),
            tool("t2", "exec", &"b".repeat(3_000)),
            tool("t3", "exec", &"c".repeat(3_000)),
        ]);
        let settings = EffectiveSettings {
            hard_clear_ratio: 0.5,
            soft_trim: EffectiveSettings::default().soft_trim,
            ..aggressive()
        };
        // 9,001 characters in a 12,000-character window: 0.75. Clearing t1 gives about 0.5
        // (still not below), t2 about 0.25: stop.
        let (out, report) = prune_context_messages(&input, 3_000, &settings);
        assert_eq!(tool_text(&out, "t1"), "[cleared]");
        assert_eq!(tool_text(&out, "t2"), "[cleared]");
        assert!(Arc::ptr_eq(&input[3], &out[3]));
        assert_eq!(report.hard_cleared, 2);
        assert!(report.ratio_after < 0.5);
        assert_eq!(report.chars_after, 1 + 9 + 9 + 3_000);
    }

    #[test]
    fn min_prunable_tool_chars_holds_clearing_back() {
        let input = list(vec![user("u"), tool("t1", "exec", &"a".repeat(3_000))]);
        let settings = EffectiveSettings {
            min_prunable_tool_chars: 3_001,
            soft_trim: EffectiveSettings::default().soft_trim,
            ..aggressive()
        };
        let (out, report) = prune_context_messages(&input, 100, &settings);
        assert!(MessageList::same_list(&out, &input));
        assert_eq!(report.prunable_tool_chars, 3_000);
        assert_eq!(report.skipped, None);
        let settings = EffectiveSettings {
            min_prunable_tool_chars: 3_000,
            ..settings
        };
        let (out, _) = prune_context_messages(&input, 100, &settings);
        assert_eq!(tool_text(&out, "t1"), "[cleared]");
    }

    #[test]
    fn skips_say_why() {
        let settings = aggressive();
        let input = list(vec![user("u"), tool("t1", "exec", &"a".repeat(3_000))]);
        let (out, report) = prune_context_messages(&input, 0, &settings);
        assert!(MessageList::same_list(&out, &input));
        assert_eq!(report.skipped, Some(SkipReason::NoWindow));

        let keep = EffectiveSettings {
            keep_last_assistants: 1,
            ..settings.clone()
        };
        let (out, report) = prune_context_messages(&input, 10, &keep);
        assert!(MessageList::same_list(&out, &input));
        assert_eq!(report.skipped, Some(SkipReason::TooFewAssistants));
        assert_eq!(report.chars_before, 3_001);

        let no_user = list(vec![answer("a"), tool("t1", "exec", &"a".repeat(3_000))]);
        let (out, report) = prune_context_messages(&no_user, 10, &settings);
        assert!(MessageList::same_list(&out, &no_user));
        assert_eq!(report.skipped, Some(SkipReason::NoUserMessage));

        let (out, report) = prune_context_messages(&list(vec![]), 10, &settings);
        assert!(out.is_empty());
        assert_eq!(report.skipped, Some(SkipReason::NoUserMessage));
    }

    #[test]
    fn the_default_settings_leave_a_small_context_alone() {
        let input = list(four_triplets());
        let (out, report) = prune_context_messages(&input, 200_000, &EffectiveSettings::default());
        assert!(MessageList::same_list(&out, &input));
        assert_eq!(report.skipped, Some(SkipReason::BelowSoftTrimRatio));
        // In a 32k window the same history (80k characters, ratio 0.6) is trimmed but not
        // cleared: t1 is the only result before the third assistant from the end, and trimming
        // it brings the ratio under 0.5.
        let (out, report) = prune_context_messages(&input, 32_000, &EffectiveSettings::default());
        assert_eq!(report.soft_trimmed, 1);
        assert_eq!(report.hard_cleared, 0);
        assert!(tool_text(&out, "t1").ends_with(
            "[Tool result trimmed: kept first 1500 chars and last 1500 chars of 20000 chars.]"
        ));
    }

    #[test]
    fn an_already_cleared_result_keeps_its_arc() {
        let input = list(vec![
            user("u"),
            tool("t1", "exec", "[cleared]"),
            tool("t2", "exec", &"a".repeat(100)),
        ]);
        let (out, report) = prune_context_messages(&input, 1, &aggressive());
        assert!(Arc::ptr_eq(&input[1], &out[1]));
        assert_eq!(tool_text(&out, "t2"), "[cleared]");
        assert_eq!(report.hard_cleared, 1);
        assert_eq!(report.messages[0].tool_call_id, "t2");
    }

    #[test]
    fn the_memo_gives_the_same_result_and_the_same_arcs() {
        let memo = PruneMemo::new();
        let input = list(four_triplets());
        let settings = EffectiveSettings {
            keep_last_assistants: 1,
            ..aggressive()
        };
        let (direct, direct_report) = prune_context_messages(&input, WINDOW, &settings);
        let opts = PruneOptions::default();
        let (first, first_report) =
            prune_context_messages_with(&input, WINDOW, &settings, opts, Some(&memo));
        assert_eq!(first, direct);
        assert_eq!(first_report, direct_report);
        assert_eq!(memo.stats().misses, input.len() as u64);

        // The next turn: the history grew by two messages.
        let mut grown = input.to_vec();
        grown.push(Arc::new(user("u5")));
        grown.push(Arc::new(answer("a5")));
        let grown: MessageList = grown.into();
        let (second, _) = prune_context_messages_with(&grown, WINDOW, &settings, opts, Some(&memo));
        let stats = memo.stats();
        assert_eq!(
            stats.misses,
            input.len() as u64 + 2,
            "only new messages are measured"
        );
        assert_eq!(stats.hits, input.len() as u64);
        for i in [2, 5, 8] {
            assert!(Arc::ptr_eq(&first[i], &second[i]), "result {i} was rebuilt");
        }
        // Now t4 (index 11) is before the cutoff too.
        assert_eq!(tool_text(&second, "t4"), "[cleared]");

        // Other settings drop the derived versions but not the counts.
        let other = EffectiveSettings {
            hard_clear: HardClear {
                enabled: true,
                placeholder: "[gone]".to_owned(),
            },
            ..settings
        };
        let (third, _) = prune_context_messages_with(&grown, WINDOW, &other, opts, Some(&memo));
        assert_eq!(tool_text(&third, "t1"), "[gone]");
        assert_eq!(memo.stats().misses, input.len() as u64 + 2);
    }

    // ----- Properties -----

    #[derive(Debug, Clone)]
    enum Spec {
        User(String),
        Assistant(String, bool),
        Tool(usize, Vec<Option<String>>),
        Custom(String),
    }

    const TOOLS: [&str; 4] = ["exec", "read", "Browser", "mcp/search"];

    fn text(min_repeat: usize) -> impl Strategy<Value = String> {
        (
            prop::sample::select(vec!["abc ", "上下文", "x😀y", "é\n", "0123456789"]),
            min_repeat..120usize,
        )
            .prop_map(|(piece, n)| piece.repeat(n))
    }

    fn spec(min_tool_repeat: usize) -> impl Strategy<Value = Spec> {
        prop_oneof![
            2 => text(0).prop_map(Spec::User),
            2 => (text(0), any::<bool>()).prop_map(|(t, think)| Spec::Assistant(t, think)),
            4 => (
                0..TOOLS.len(),
                prop::collection::vec(prop::option::weighted(0.8, text(min_tool_repeat)), 1..4)
            )
                .prop_map(|(tool, blocks)| Spec::Tool(tool, blocks)),
            1 => text(0).prop_map(Spec::Custom),
        ]
    }

    fn build(specs: &[Spec]) -> MessageList {
        specs
            .iter()
            .enumerate()
            .map(|(i, s)| match s {
                Spec::User(t) => user(t),
                Spec::Assistant(t, think) => {
                    let mut blocks = vec![json!({"type": "text", "text": t})];
                    if *think {
                        blocks.push(json!({"type": "thinking", "thinking": t, "thinkingSignature": "sig"}));
                    }
                    blocks.push(json!({"type": "toolCall", "id": format!("c{i}"), "name": "exec", "arguments": {"cmd": t}}));
                    assistant(blocks)
                }
                Spec::Tool(tool, blocks) => tool_blocks(
                    &format!("c{i}"),
                    TOOLS[*tool],
                    blocks
                        .iter()
                        .map(|b| b.as_deref().map_or_else(image, text_block))
                        .collect(),
                ),
                Spec::Custom(t) => serde_json::from_value(json!({
                    "role": "custom", "customType": "note", "content": t, "display": true, "timestamp": 1
                }))
                .unwrap(),
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(Arc::new)
            .collect()
    }

    /// Settings with room for the notice: `max_chars` at least `head + tail + 200`.
    fn settings() -> impl Strategy<Value = EffectiveSettings> {
        (
            (
                0usize..4,
                0.0..1.0f64,
                0.0..1.2f64,
                prop_oneof![Just(0u64), 0u64..5_000],
            ),
            (
                0u64..300,
                0u64..300,
                200u64..2_000,
                prop::bool::weighted(0.8),
            ),
            prop::sample::select(vec!["[cleared]", DEFAULT_PLACEHOLDER, "清除"]),
            (
                prop::sample::subsequence(vec!["exec", "read", "*"], 0..2),
                prop::sample::subsequence(vec!["read", "b*", "mcp/*"], 0..2),
            ),
        )
            .prop_map(
                |(
                    (keep, soft, hard, min),
                    (head, tail, room, enabled),
                    placeholder,
                    (allow, deny),
                )| {
                    EffectiveSettings {
                        ttl_ms: 0,
                        keep_last_assistants: keep,
                        soft_trim_ratio: soft,
                        hard_clear_ratio: hard,
                        min_prunable_tool_chars: min,
                        tools: ToolFilter::new(allow, deny).unwrap(),
                        soft_trim: SoftTrim {
                            max_chars: head + tail + room,
                            head_chars: head,
                            tail_chars: tail,
                        },
                        hard_clear: HardClear {
                            enabled,
                            placeholder: placeholder.to_owned(),
                        },
                    }
                },
            )
    }

    const DEFAULT_PLACEHOLDER: &str = crate::pruning::settings::DEFAULT_HARD_CLEAR_PLACEHOLDER;

    fn check_shape(
        input: &MessageList,
        out: &MessageList,
        report: &PruningReport,
    ) -> Result<(), TestCaseError> {
        prop_assert_eq!(out.len(), input.len());
        prop_assert_eq!(MessageList::same_list(input, out), !report.changed());
        let first_user = input
            .iter()
            .position(|m| matches!(m.as_ref(), AgentMessage::User(_)))
            .unwrap_or(input.len());
        let changed: Vec<usize> = report.messages.iter().map(|m| m.index).collect();
        for (i, (a, b)) in input.iter().zip(out.iter()).enumerate() {
            prop_assert_eq!(a.role(), b.role());
            if !changed.contains(&i) {
                prop_assert!(Arc::ptr_eq(a, b), "message {} was copied", i);
                continue;
            }
            prop_assert!(
                i >= first_user,
                "message {} before the first user changed",
                i
            );
            let (AgentMessage::ToolResult(x), AgentMessage::ToolResult(y)) =
                (a.as_ref(), b.as_ref())
            else {
                return Err(TestCaseError::fail(format!(
                    "message {i} is not a tool result"
                )));
            };
            prop_assert_eq!(&x.tool_call_id, &y.tool_call_id);
            prop_assert_eq!(&x.tool_name, &y.tool_name);
            prop_assert_eq!(&x.details, &y.details);
            prop_assert_eq!((x.is_error, x.timestamp), (y.is_error, y.timestamp));
        }
        for m in &report.messages {
            prop_assert_eq!(m.chars_before, estimate_message_chars(&input[m.index]));
            prop_assert_eq!(m.chars_after, estimate_message_chars(&out[m.index]));
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Whatever the settings: same length and order, only tool results after the first user
        /// message change (and only their content), everything else is the input's `Arc`, the
        /// report is honest, and the memo changes nothing.
        #[test]
        fn pruning_only_rewrites_tool_result_content(
            specs in prop::collection::vec(spec(0), 0..24),
            settings in settings(),
            tiny_trim in any::<bool>(),
            context_window in 0u64..3_000,
            drop_thinking in any::<bool>(),
        ) {
            let mut settings = settings;
            if tiny_trim {
                // No room for the notice: results may grow, the shape must still hold.
                settings.soft_trim.max_chars = settings.soft_trim.head_chars / 2;
            }
            let input = build(&specs);
            let options = PruneOptions { drop_thinking_for_estimate: drop_thinking };
            let (out, report) = prune_context_messages_with(&input, context_window, &settings, options, None);
            check_shape(&input, &out, &report)?;
            let memo = PruneMemo::new();
            for _ in 0..2 {
                let (again, again_report) =
                    prune_context_messages_with(&input, context_window, &settings, options, Some(&memo));
                prop_assert_eq!(&again, &out);
                prop_assert_eq!(&again_report, &report);
            }
        }

        /// With room for the notice and results longer than the placeholder, no message grows,
        /// so the context never grows either.
        #[test]
        fn pruning_never_grows_a_message(
            specs in prop::collection::vec(spec(20), 0..24),
            settings in settings(),
            context_window in 1u64..3_000,
        ) {
            let input = build(&specs);
            let (out, report) = prune_context_messages(&input, context_window, &settings);
            check_shape(&input, &out, &report)?;
            for (a, b) in input.iter().zip(out.iter()) {
                prop_assert!(estimate_message_chars(b) <= estimate_message_chars(a));
            }
            prop_assert!(report.chars_after <= report.chars_before);
            prop_assert!(report.messages.iter().all(|m| m.chars_removed >= 0));
        }
    }
}
