//! The pre-prompt precheck (reference §5.1): estimate the request before sending it, and choose
//! how to make room when it will not fit.
//!
//! Why: sending a prompt that cannot fit costs a slow, billed round trip that ends in an
//! overflow error. Estimating first lets the attempt go straight to the cheapest remedy:
//! truncating tool results when that alone frees enough, compaction otherwise.

use std::borrow::Borrow;

use serde::{Deserialize, Serialize};

use crate::tokens::estimate_message_tokens;
use rampart_message::AgentMessage;

/// The error set when the precheck decides to compact instead of prompting. Exact, because the
/// overflow recovery and users recognise it.
pub const PRECHECK_OVERFLOW_MESSAGE: &str =
    "Context overflow: prompt too large for the model (precheck).";

/// Characters per token in the estimate (pi's chars/4).
pub const ESTIMATED_CHARS_PER_TOKEN: u64 = 4;

/// Extra tokens truncation must free beyond the overflow before it is trusted alone, because
/// truncation adds notices and the estimate is rough.
pub const TRUNCATION_ROUTE_BUFFER_TOKENS: u64 = 512;

/// The prompt always keeps at least this many tokens of the budget (or half the budget, if
/// smaller), however large the compaction reserve.
pub const MIN_PROMPT_BUDGET_TOKENS: u64 = 8_000;

/// The share of the budget the prompt keeps at least, for budgets under 16,000 tokens.
pub const MIN_PROMPT_BUDGET_RATIO: f64 = 0.5;

/// The safety factor on the chars/4 estimate, which undercounts code, JSON and CJK text.
pub const PRE_PROMPT_SAFETY_FACTOR: f64 = 1.2;

/// `ceil((tokens(history) + tokens(system) + tokens(prompt)) · 1.2)`, where system and prompt
/// are counted as user messages, with the shared estimate of [`crate::tokens`].
pub fn estimate_pre_prompt_tokens<M: Borrow<AgentMessage>>(
    history: &[M],
    system: &str,
    prompt: &str,
) -> u64 {
    let history_tokens: u64 = history
        .iter()
        .map(|m| estimate_message_tokens(m.borrow()))
        .sum();
    let as_message = |text: &str| estimate_message_tokens(&AgentMessage::user_text(text, 0));
    let raw = history_tokens + as_message(system) + as_message(prompt);
    (raw as f64 * PRE_PROMPT_SAFETY_FACTOR).ceil() as u64
}

/// What the precheck decides on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrecheckInput {
    /// The request's estimate ([`estimate_pre_prompt_tokens`]).
    pub estimated_tokens: u64,
    /// The resolved context window, in tokens; the reserve comes off it.
    pub context_window: u64,
    /// Tokens to keep free for compaction and the answer (pi's compaction reserve, at least
    /// 20,000 after OpenClaw's floor).
    pub reserve_tokens: u64,
    /// Characters truncating tool results could free
    /// ([`super::ReductionPotential::max_reducible_chars`]).
    pub tool_result_reducible_chars: u64,
}

/// The remedy the attempt takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Route {
    /// Send the prompt.
    Fits,
    /// Truncate tool results in the session and retry; fall back to compaction if that fails.
    TruncateToolResultsOnly,
    /// Compact, then retry.
    CompactOnly,
    /// Compact, then truncate tool results, then retry.
    CompactThenTruncate,
}

impl Route {
    /// The reference's spelling, for logs and events.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fits => "fits",
            Self::TruncateToolResultsOnly => "truncate_tool_results_only",
            Self::CompactOnly => "compact_only",
            Self::CompactThenTruncate => "compact_then_truncate",
        }
    }
}

/// The precheck's decision and the figures behind it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrecheckOutcome {
    /// What to do.
    pub route: Route,
    /// The estimate decided on, in tokens.
    pub estimated: u64,
    /// The reserve actually applied: the requested one, shrunk so the prompt keeps its minimum.
    pub effective_reserve: u64,
    /// What the prompt may take: `max(1, budget − effective_reserve)`.
    pub prompt_budget_before_reserve: u64,
    /// By how much the estimate exceeds that, in tokens (0 when it fits).
    pub overflow_tokens: u64,
    /// Whether the route compacts (`compact_only`, `compact_then_truncate`).
    pub should_compact: bool,
}

impl PrecheckOutcome {
    /// The error to record when the prompt is skipped for compaction
    /// ([`PRECHECK_OVERFLOW_MESSAGE`]), or `None` when the route does not compact.
    pub fn error_message(&self) -> Option<&'static str> {
        self.should_compact.then_some(PRECHECK_OVERFLOW_MESSAGE)
    }
}

/// Decides the route:
///
/// - `min_prompt = min(8000, max(1, floor(budget · 0.5)))`;
/// - `effective_reserve = min(reserve, max(0, budget − min_prompt))`;
/// - `prompt_budget = max(1, budget − effective_reserve)`;
/// - `overflow = max(0, est − prompt_budget)`;
/// - no overflow: [`Route::Fits`]; nothing reducible: [`Route::CompactOnly`]; reducible chars
///   `≥ max(overflow·4 + 512·4, ceil(overflow·4·1.5))`: [`Route::TruncateToolResultsOnly`];
///   else [`Route::CompactThenTruncate`].
pub fn precheck(input: &PrecheckInput) -> PrecheckOutcome {
    let budget = input.context_window;
    let half = (budget as f64 * MIN_PROMPT_BUDGET_RATIO).floor() as u64;
    let min_prompt = MIN_PROMPT_BUDGET_TOKENS.min(half.max(1));
    let effective_reserve = input.reserve_tokens.min(budget.saturating_sub(min_prompt));
    let prompt_budget = budget.saturating_sub(effective_reserve).max(1);
    let overflow = input.estimated_tokens.saturating_sub(prompt_budget);

    let route = if overflow == 0 {
        Route::Fits
    } else if input.tool_result_reducible_chars == 0 {
        Route::CompactOnly
    } else {
        let with_buffer = overflow
            .saturating_mul(ESTIMATED_CHARS_PER_TOKEN)
            .saturating_add(TRUNCATION_ROUTE_BUFFER_TOKENS * ESTIMATED_CHARS_PER_TOKEN);
        // ceil(overflow · 4 · 1.5) is exactly overflow · 6 for integers.
        let with_margin = overflow.saturating_mul(ESTIMATED_CHARS_PER_TOKEN * 3 / 2);
        if input.tool_result_reducible_chars >= with_buffer.max(with_margin) {
            Route::TruncateToolResultsOnly
        } else {
            Route::CompactThenTruncate
        }
    };
    PrecheckOutcome {
        route,
        estimated: input.estimated_tokens,
        effective_reserve,
        prompt_budget_before_reserve: prompt_budget,
        overflow_tokens: overflow,
        should_compact: matches!(route, Route::CompactOnly | Route::CompactThenTruncate),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(estimated: u64, budget: u64, reserve: u64, reducible: u64) -> PrecheckInput {
        PrecheckInput {
            estimated_tokens: estimated,
            context_window: budget,
            reserve_tokens: reserve,
            tool_result_reducible_chars: reducible,
        }
    }

    #[test]
    fn truncation_route_threshold() {
        // overflow 1000: needs max(4000 + 2048, 6000) = 6048 reducible chars.
        let base = input(2000, 2000, 1000, 0);
        let at = precheck(&PrecheckInput {
            tool_result_reducible_chars: 6048,
            ..base
        });
        assert_eq!(at.overflow_tokens, 1000);
        assert_eq!(at.route, Route::TruncateToolResultsOnly);
        assert!(!at.should_compact);
        assert_eq!(at.error_message(), None);
        let below = precheck(&PrecheckInput {
            tool_result_reducible_chars: 6047,
            ..base
        });
        assert_eq!(below.route, Route::CompactThenTruncate);
        assert!(below.should_compact);
        // Large overflow: the 1.5 margin dominates the buffer.
        let big = input(12_000, 2000, 1000, 60_000);
        assert_eq!(precheck(&big).overflow_tokens, 11_000);
        assert_eq!(precheck(&big).route, Route::CompactThenTruncate);
        let big = input(12_000, 2000, 1000, 66_000);
        assert_eq!(precheck(&big).route, Route::TruncateToolResultsOnly);
    }

    #[test]
    fn zero_budget_never_divides_by_zero() {
        let out = precheck(&input(10, 0, 20_000, 0));
        assert_eq!(out.prompt_budget_before_reserve, 1);
        assert_eq!(out.effective_reserve, 0);
        assert_eq!(out.route, Route::CompactOnly);
    }

    #[test]
    fn route_spellings() {
        assert_eq!(Route::CompactThenTruncate.as_str(), "compact_then_truncate");
        assert_eq!(
            serde_json::to_string(&Route::TruncateToolResultsOnly)
                .ok()
                .as_deref(),
            Some("\"truncate_tool_results_only\"")
        );
    }
}
