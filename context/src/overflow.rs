//! Recognising a provider's "the prompt does not fit" error (reference §10 and §7.4).
//!
//! Why this lives in the engine API: the run loop compacts when a provider says the prompt is
//! too large, and an engine that calls a model itself (compaction through `llm.complete`, or its
//! own client) must draw the same line. Two parties that disagree on what an overflow is would
//! either compact on a rate limit (destroying history for nothing) or give up on an overflow
//! that compaction would have fixed.
//!
//! Providers word the error in dozens of ways, so recognition is a list of phrases and patterns
//! that follows OpenClaw's `isContextOverflowError` and `isLikelyContextOverflowError` exactly:
//!
//! - [`is_context_overflow_error`]: the phrases and patterns that name an overflow outright,
//!   after excluding tokens-per-minute limits and "reasoning cannot be disabled" errors.
//! - [`is_likely_context_overflow_error`]: what the run loop uses. It first excludes billing,
//!   rate-limit and "context window too small" errors, then accepts the strict check, then
//!   excludes rate-limit hints and finally accepts a broad hint.
//! - [`observed_overflow_tokens`]: the prompt size some providers state in the text.
//! - [`is_compaction_failure_error`]: an overflow that happened while compacting, which more
//!   compaction cannot fix.
//!
//! Every regex is compiled once, on first use. A pattern that failed to compile would match
//! nothing rather than panic; the tests compile every one of them, so that cannot ship.

use std::sync::LazyLock;

use regex::{Regex, RegexBuilder, RegexSet, RegexSetBuilder};

/// What a person is told when the prompt still does not fit after every recovery (OpenClaw's
/// wording, so that users and docs recognise it). Why a constant: the run loop, the CLI and the
/// tests must show the same text.
pub const CONTEXT_OVERFLOW_USER_MESSAGE: &str = "Context overflow: prompt too large for the model. Try /reset (or /new) to start a fresh session, or use a larger-context model.";

// ---------------------------------------------------------------------------
// Phrases and patterns (exactly as the reference lists them)
// ---------------------------------------------------------------------------

/// Lower-case phrases any one of which marks an overflow on its own.
const OVERFLOW_PHRASES: &[&str] = &[
    "request_too_large",
    "request exceeds the maximum size",
    "context length exceeded",
    "maximum context length",
    "prompt is too long",
    "prompt too long",
    "exceeds model context window",
    "model token limit",
    "context overflow:",
    "exceed context limit",
    "exceeds the model's maximum context",
    "context_window_exceeded",
];

/// Overflow phrases of Chinese-speaking proxies, matched on the text as received (case does not
/// apply to them).
const CHINESE_OVERFLOW_PHRASES: &[&str] = &[
    "上下文过长",
    "上下文超出",
    "上下文长度超",
    "超出最大上下文",
    "请压缩上下文",
];

/// Tokens-per-minute limits (Groq answers them with HTTP 413, which looks like "too large").
/// The text is also excluded when it says "tokens per minute".
const TPM_PATTERN: &str = r"\btpm\b";

/// The first half of the gate before the provider patterns: the text must name something that
/// can overflow.
const PROVIDER_GATE_SUBJECT: &str = r"\b(context|window|prompt|token|tokens|input|request|model)\b";

/// The second half of the gate: the text must say it was exceeded.
const PROVIDER_GATE_EXCESS: &str =
    r"\b(too (large|long|many)|exceed(s|ed|ing)?|overflow|limit|maximum|max)\b";

/// Provider wordings the phrases miss, tried once the gate passed. Case-insensitive.
pub const PROVIDER_OVERFLOW_PATTERNS: &[&str] = &[
    r"input token count exceeds the maximum number of input tokens",
    r"input is too long for this model",
    r"input exceeds the maximum number of tokens",
    r"ollama error:\s*context length exceeded(, too many tokens)?",
    r"total tokens?.*exceeds? (the )?(model('s)? )?(max|maximum|limit)",
    r"(request|prompt) \(\d[\d,]*\s*tokens?\) exceeds (the )?available context size",
    r"input (is )?too long for (the )?model",
];

/// The per-provider hooks OpenClaw's provider plugins contribute (Bedrock, Bedrock-mantle,
/// DeepSeek, Mistral, Ollama, OpenAI), also gated and case-insensitive. They apply whichever
/// provider answered: the text alone decides, as in OpenClaw when every plugin is loaded.
pub const PROVIDER_HOOK_PATTERNS: &[&str] = &[
    // Bedrock
    r"ValidationException.*(input is too long|max input token|input token.*exceed)",
    r"ValidationException.*(exceeds? the (maximum|max) (number of )?(input )?tokens)",
    r"ModelStreamErrorException.*(Input is too long|too many input tokens)",
    // Bedrock-mantle
    r"context_length_exceeded|max.*tokens.*exceeded",
    // DeepSeek
    r"\bdeepseek\b.*(input.*too long|context.*exceed)",
    // Mistral
    r"\bmistral\b.*(input.*too long|token limit.*exceeded)",
    // Ollama
    r"\bollama\b.*(context length|too many tokens|context window)",
    r"\btruncating input\b.*\btoo long\b",
    // OpenAI
    r"content_filter.*(prompt|input).*(too long|exceed)",
];

/// "The window is too small" (the guard's block message and its kin) is a configuration
/// problem, not an overflow: compaction cannot make a window bigger.
const CONTEXT_WINDOW_TOO_SMALL_PATTERN: &str = r"context window.*(too small|minimum is)";

/// Rate-limit hints checked after the strict check failed and before the broad hint, which would
/// otherwise read "request reached … limit" as an overflow.
const RATE_LIMIT_HINT_PATTERN: &str = r"rate limit|too many requests|requests per (minute|hour|day)|quota|throttl|429\b|tokens per day";

/// The broad hint: wording that is not one of the phrases but still says the prompt is over the
/// limit.
const CONTEXT_OVERFLOW_HINT_PATTERN: &str = r"context.*overflow|context window.*(too (large|long)|exceed|over|limit|max(imum)?|requested|sent|tokens)|prompt.*(too (large|long)|exceed|over|limit|max(imum)?)|(request|input).*(context|window|length|token).*(too (large|long)|exceed|over|limit|max(imum)?)";

/// Where providers state the prompt size, tried in order; the first group is the count, with
/// thousands separators.
pub const OBSERVED_TOKEN_PATTERNS: &[&str] = &[
    r"prompt is too long:\s*([\d,]+)\s+tokens\s*>\s*[\d,]+\s+maximum",
    r"requested\s+([\d,]+)\s+tokens",
    r"resulted in\s+([\d,]+)\s+tokens",
];

/// The reference does not spell out OpenClaw's rate-limit classifier (`isRateLimitErrorMessage`)
/// that step 1 of the likely check excludes. These are its phrases, matched on the lower-cased
/// text, with one deliberate difference: OpenClaw matches a bare `429` anywhere, which also
/// hits token counts such as "142900 tokens" and would hide a real overflow; here 429 must
/// stand alone.
const RATE_LIMIT_PATTERN: &str = r"rate[_ ]limit|too many requests|\b429\b|\btpm\b";

/// The plain phrases of the rate-limit classifier (see [`RATE_LIMIT_PATTERN`]).
const RATE_LIMIT_PHRASES: &[&str] = &[
    "model_cooldown",
    "exceeded your current quota",
    "resource has been exhausted",
    "quota exceeded",
    "resource_exhausted",
    "usage limit",
    "tokens per minute",
    "tokens per day",
];

/// HTTP 402 markers of OpenClaw's billing classifier (`isBillingErrorMessage`), which the
/// reference names but does not spell out: a payment problem is not an overflow even when it
/// says "token limit exceeded".
const BILLING_402_PATTERN: &str = r#"["']?(status|code)["']?\s*[:=]\s*402\b|\bhttp\s*402\b|\berror(\s+code)?\s*[:=]?\s*402\b|\b(got|returned|received)\s+(a\s+)?402\b|^\s*402\s+payment"#;

/// Billing phrases, matched on the lower-cased text.
const BILLING_PHRASES: &[&str] = &[
    "payment required",
    "insufficient credits",
    "credit balance",
    "plans & billing",
    "insufficient balance",
    "insufficient usd or diem balance",
];

/// Billing wordings that need a pattern.
const BILLING_EXTRA_PATTERN: &str = r"insufficient[_ ]quota|requires?\s+more\s+credits";

/// A message that starts like a billing error ("Billing error: …", "Payment required …");
/// it counts as billing when it also mentions an upgrade, credits, payment or a plan.
const BILLING_HEAD_PATTERN: &str = r"^(error[:\s-]+)?billing(\s+error)?([:\s-]+|$)|^(error[:\s-]+)?(credit balance|insufficient credits?|payment required|http\s*402\b)";

/// Beyond this length only a hard 402 marker counts as billing: a long text (a whole response
/// body, a transcript excerpt) mentions "credits" or "plan" by accident.
const BILLING_MAX_LENGTH: usize = 512;

/// Terms that mark an error as coming from compaction (reference §7.4). "compaction" alone
/// covers the others; they are kept to mirror the reference's list.
const COMPACTION_TERMS: &[&str] = &[
    "summarization failed",
    "auto-compaction",
    "compaction failed",
    "compaction",
];

// ---------------------------------------------------------------------------
// Compiled once
// ---------------------------------------------------------------------------

/// Compiles a constant, case-insensitive pattern. `None` only if a constant above were invalid,
/// which the tests rule out; matching then fails closed (the pattern matches nothing).
fn compile(pattern: &str) -> Option<Regex> {
    match RegexBuilder::new(pattern).case_insensitive(true).build() {
        Ok(re) => Some(re),
        Err(error) => {
            tracing::error!(pattern, %error, "overflow recognition pattern does not compile");
            None
        }
    }
}

fn compile_set(patterns: &[&str]) -> Option<RegexSet> {
    match RegexSetBuilder::new(patterns)
        .case_insensitive(true)
        .build()
    {
        Ok(set) => Some(set),
        Err(error) => {
            tracing::error!(%error, "overflow recognition pattern set does not compile");
            None
        }
    }
}

type Lazy = LazyLock<Option<Regex>>;

static TPM: Lazy = LazyLock::new(|| compile(TPM_PATTERN));
static GATE_SUBJECT: Lazy = LazyLock::new(|| compile(PROVIDER_GATE_SUBJECT));
static GATE_EXCESS: Lazy = LazyLock::new(|| compile(PROVIDER_GATE_EXCESS));
static PROVIDER_PATTERNS: LazyLock<Option<RegexSet>> = LazyLock::new(|| {
    let all: Vec<&str> = PROVIDER_OVERFLOW_PATTERNS
        .iter()
        .chain(PROVIDER_HOOK_PATTERNS)
        .copied()
        .collect();
    compile_set(&all)
});
static WINDOW_TOO_SMALL: Lazy = LazyLock::new(|| compile(CONTEXT_WINDOW_TOO_SMALL_PATTERN));
static RATE_LIMIT_HINT: Lazy = LazyLock::new(|| compile(RATE_LIMIT_HINT_PATTERN));
static OVERFLOW_HINT: Lazy = LazyLock::new(|| compile(CONTEXT_OVERFLOW_HINT_PATTERN));
static RATE_LIMIT: Lazy = LazyLock::new(|| compile(RATE_LIMIT_PATTERN));
static BILLING_402: Lazy = LazyLock::new(|| compile(BILLING_402_PATTERN));
static BILLING_EXTRA: Lazy = LazyLock::new(|| compile(BILLING_EXTRA_PATTERN));
static BILLING_HEAD: Lazy = LazyLock::new(|| compile(BILLING_HEAD_PATTERN));
static OBSERVED: LazyLock<Vec<Option<Regex>>> =
    LazyLock::new(|| OBSERVED_TOKEN_PATTERNS.iter().map(|p| compile(p)).collect());

fn is_match(re: &Lazy, text: &str) -> bool {
    re.as_ref().is_some_and(|re| re.is_match(text))
}

// ---------------------------------------------------------------------------
// Exclusions
// ---------------------------------------------------------------------------

/// A tokens-per-minute limit: a rate limit that mentions tokens, never an overflow.
fn is_tpm_limit(lower: &str) -> bool {
    is_match(&TPM, lower) || lower.contains("tokens per minute")
}

/// "Reasoning cannot be disabled" and its kin: the request's settings are wrong, not its size.
fn is_reasoning_constraint(lower: &str) -> bool {
    lower.contains("reasoning is mandatory")
        || lower.contains("reasoning is required")
        || lower.contains("requires reasoning")
        || (lower.contains("reasoning") && lower.contains("cannot be disabled"))
}

fn is_rate_limit(lower: &str) -> bool {
    is_match(&RATE_LIMIT, lower) || RATE_LIMIT_PHRASES.iter().any(|p| lower.contains(p))
}

fn is_billing(message: &str, lower: &str) -> bool {
    if message.len() > BILLING_MAX_LENGTH {
        return is_match(&BILLING_402, lower);
    }
    if is_match(&BILLING_402, lower)
        || BILLING_PHRASES.iter().any(|p| lower.contains(p))
        || is_match(&BILLING_EXTRA, lower)
    {
        return true;
    }
    is_match(&BILLING_HEAD, message)
        && ["upgrade", "credits", "payment", "plan"]
            .iter()
            .any(|w| lower.contains(w))
}

// ---------------------------------------------------------------------------
// The checks
// ---------------------------------------------------------------------------

/// The provider-specific wordings, behind the gate that keeps them from firing on texts that
/// name neither a limit nor something that has one.
fn matches_provider_overflow(message: &str) -> bool {
    is_match(&GATE_SUBJECT, message)
        && is_match(&GATE_EXCESS, message)
        && PROVIDER_PATTERNS
            .as_ref()
            .is_some_and(|set| set.is_match(message))
}

/// True when `message` names a context overflow outright: one of the known phrases or provider
/// wordings, and not a tokens-per-minute limit or a reasoning-settings error. Use
/// [`is_likely_context_overflow_error`] to decide whether to compact; this stricter check is
/// the one part of it that overrides the rate-limit hint.
pub fn is_context_overflow_error(message: &str) -> bool {
    if message.is_empty() {
        return false;
    }
    let lower = message.to_lowercase();
    if is_tpm_limit(&lower) || is_reasoning_constraint(&lower) {
        return false;
    }
    let has = |phrase: &str| lower.contains(phrase);
    OVERFLOW_PHRASES.iter().any(|p| has(p))
        || (has("invalid_argument") && has("maximum number of tokens"))
        || (has("input exceeds") && has("maximum number of tokens"))
        || (has("request size exceeds")
            && (has("context window") || has("context length") || has("maximum context length")))
        || (has("max_tokens") && has("exceed") && has("context"))
        || (has("input length") && has("exceed") && has("context"))
        || (has("413") && has("too large"))
        || CHINESE_OVERFLOW_PHRASES.iter().any(|p| message.contains(p))
        || matches_provider_overflow(message)
}

/// The check the run loop compacts on. Excludes, in order: tokens-per-minute limits, reasoning
/// errors, billing errors, "context window too small" and rate limits; then accepts
/// [`is_context_overflow_error`]; then refuses rate-limit hints (quota, throttling, 429, tokens
/// per day); then accepts wording that broadly says the context or prompt is over a limit.
pub fn is_likely_context_overflow_error(message: &str) -> bool {
    if message.is_empty() {
        return false;
    }
    let lower = message.to_lowercase();
    if is_tpm_limit(&lower)
        || is_reasoning_constraint(&lower)
        || is_billing(message, &lower)
        || is_match(&WINDOW_TOO_SMALL, message)
        || is_rate_limit(&lower)
    {
        return false;
    }
    if is_context_overflow_error(message) {
        return true;
    }
    if is_match(&RATE_LIMIT_HINT, message) {
        return false;
    }
    is_match(&OVERFLOW_HINT, message)
}

/// True when the overflow happened while compacting ("auto-compaction failed: prompt is too
/// long …"): the run loop then stops with `compaction_failure` instead of compacting again,
/// since compacting is what failed. The text must mention compaction and be a likely overflow
/// or say "context overflow".
pub fn is_compaction_failure_error(message: &str) -> bool {
    if message.is_empty() {
        return false;
    }
    let lower = message.to_lowercase();
    if !COMPACTION_TERMS.iter().any(|t| lower.contains(t)) {
        return false;
    }
    is_likely_context_overflow_error(message) || lower.contains("context overflow")
}

/// The prompt size a provider reported in its overflow text, when it did (Anthropic's "prompt
/// is too long: N tokens > M maximum", "requested N tokens", OpenAI's "resulted in N tokens").
/// Thousands separators are ignored; a zero or unreadable count is skipped in favour of the
/// next pattern. Compaction uses the figure as the true size before compacting, since the
/// provider counted with the real tokenizer.
pub fn observed_overflow_tokens(message: &str) -> Option<u64> {
    OBSERVED.iter().flatten().find_map(|re| {
        let digits: String = re
            .captures(message)?
            .get(1)?
            .as_str()
            .chars()
            .filter(|c| *c != ',')
            .collect();
        digits.parse::<u64>().ok().filter(|n| *n > 0)
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn strict(m: &str) -> bool {
        is_context_overflow_error(m)
    }

    fn likely(m: &str) -> bool {
        is_likely_context_overflow_error(m)
    }

    #[test]
    fn every_pattern_compiles() {
        let singles = [
            TPM_PATTERN,
            PROVIDER_GATE_SUBJECT,
            PROVIDER_GATE_EXCESS,
            CONTEXT_WINDOW_TOO_SMALL_PATTERN,
            RATE_LIMIT_HINT_PATTERN,
            CONTEXT_OVERFLOW_HINT_PATTERN,
            RATE_LIMIT_PATTERN,
            BILLING_402_PATTERN,
            BILLING_EXTRA_PATTERN,
            BILLING_HEAD_PATTERN,
        ];
        for p in singles
            .iter()
            .chain(PROVIDER_OVERFLOW_PATTERNS)
            .chain(PROVIDER_HOOK_PATTERNS)
            .chain(OBSERVED_TOKEN_PATTERNS)
        {
            assert!(compile(p).is_some(), "{p}");
        }
        assert!(PROVIDER_PATTERNS.is_some());
        assert!(OBSERVED.iter().all(Option::is_some));
    }

    // Reference §13, group 11.

    #[test]
    fn reference_strict_positives() {
        for m in [
            "request_too_large",
            "Request exceeds the maximum size",
            "prompt is too long: 208423 tokens > 200000 maximum",
            "413 Request Entity Too Large",
            "Request size exceeds model context window",
            "Your request exceeded model token limit: 262144 (requested: 291351)",
            "input length and max_tokens exceed context limit (i.e 156321 + 48384 > 200000)",
            "Unhandled stop reason: model_context_window_exceeded",
            "上下文过长",
        ] {
            assert!(strict(m), "{m}");
        }
    }

    #[test]
    fn reference_strict_negatives() {
        for m in [
            "rate limit exceeded",
            "request size exceeds upload limit",
            "Let's investigate the context overflow bug",
            "400 Reasoning is mandatory for this endpoint and cannot be disabled.",
        ] {
            assert!(!strict(m), "{m}");
        }
    }

    #[test]
    fn reference_likely_positives() {
        for m in [
            "Model context window is 128k tokens, you requested 256k tokens",
            "Prompt too large for this model",
            "Context window exceeded: too many tokens per request.",
        ] {
            assert!(likely(m), "{m}");
        }
    }

    #[test]
    fn reference_likely_negatives() {
        for m in [
            "Model context window too small (minimum is 128k tokens)",
            "request reached organization TPD rate limit, current: 1506556, limit: 1500000",
            "429 Too Many Requests",
            "AWS Bedrock: Too many tokens per day. Please try again tomorrow.",
            "402 Payment Required: request token limit exceeded for this billing plan",
        ] {
            assert!(!likely(m), "{m}");
        }
    }

    // Each phrase and combination of the strict check.

    #[test]
    fn each_phrase_matches_in_any_case() {
        for p in OVERFLOW_PHRASES {
            assert!(strict(p), "{p}");
            assert!(strict(&p.to_uppercase()), "{p}");
            assert!(strict(&format!("error: {p} (details)")), "{p}");
        }
        for p in CHINESE_OVERFLOW_PHRASES {
            assert!(strict(&format!("错误：{p}")), "{p}");
        }
    }

    #[test]
    fn combinations_need_every_part() {
        let pairs = [
            (
                "INVALID_ARGUMENT: the request has more than the maximum number of tokens",
                "INVALID_ARGUMENT: the request is malformed",
            ),
            (
                "The input exceeds the maximum number of tokens",
                "The input exceeds the upload size",
            ),
            (
                "Request size exceeds the context length of this deployment",
                "Request size exceeds the upload limit",
            ),
            (
                "request size exceeds maximum context length",
                "request size exceeds 10 MB",
            ),
            (
                "max_tokens would exceed the context",
                "max_tokens must be positive in this context",
            ),
            (
                "input length would exceed the context",
                "input length must be positive",
            ),
            ("HTTP 413: payload too large", "HTTP 413"),
        ];
        for (yes, no) in pairs {
            assert!(strict(yes), "{yes}");
            assert!(!strict(no), "{no}");
        }
        // "context overflow" needs its colon: prose about overflows is not one.
        assert!(strict("Context overflow: prompt too large for the model."));
        assert!(!strict("the context overflow handling"));
    }

    #[test]
    fn the_user_message_is_itself_recognised() {
        assert!(strict(CONTEXT_OVERFLOW_USER_MESSAGE));
        assert!(likely(CONTEXT_OVERFLOW_USER_MESSAGE));
    }

    /// One sample per provider pattern and hook, in the order of the lists: each must match its
    /// own pattern and pass the whole check. Most avoid the plain phrases, so that the pattern
    /// is what recognises them.
    #[test]
    fn each_provider_pattern_and_hook_matches() {
        let patterns = [
            "Input token count exceeds the maximum number of input tokens",
            "Input is too long for this model",
            "Input exceeds the maximum number of tokens allowed",
            "ollama error:context length exceeded, too many tokens",
            "Total tokens of the request exceeds the model's maximum",
            "request (12,345 tokens) exceeds the available context size",
            "input too long for the model",
        ];
        let hooks = [
            "ValidationException: Input is too long for requested model.",
            "ValidationException: the prompt exceeds the maximum number of input tokens",
            "ModelStreamErrorException: too many input tokens",
            "error context_length_exceeded: request too long",
            "deepseek: the input is too long",
            "Mistral API: token limit was exceeded",
            "Ollama: context window is full, too many tokens",
            "truncating input because it is too long",
            "content_filter: the prompt was too long",
        ];
        assert_eq!(patterns.len(), PROVIDER_OVERFLOW_PATTERNS.len());
        assert_eq!(hooks.len(), PROVIDER_HOOK_PATTERNS.len());
        let pairs = PROVIDER_OVERFLOW_PATTERNS
            .iter()
            .zip(patterns)
            .chain(PROVIDER_HOOK_PATTERNS.iter().zip(hooks));
        for (pattern, sample) in pairs {
            assert!(
                compile(pattern).unwrap().is_match(sample),
                "{pattern} / {sample}"
            );
            assert!(matches_provider_overflow(sample), "{sample}");
            assert!(strict(sample), "{sample}");
        }
        // The other alternatives of the hooks.
        for m in [
            "ValidationException: max input tokens reached",
            "ValidationException: input token count would exceed the limit",
            "ValidationException: request exceeds the max tokens",
            "ModelStreamErrorException: Input is too long",
            "max output tokens for this request exceeded the limit",
            "DeepSeek API: context would exceed the window",
            "mistral: input way too long",
            "ollama: context length is the limit",
            "content_filter triggered: input would exceed the limit",
            "prompt (9000 tokens) exceeds available context size",
            "total token count exceeds limit",
        ] {
            assert!(matches_provider_overflow(m), "{m}");
        }
    }

    #[test]
    fn the_gate_holds_provider_patterns_back() {
        // Matches a hook but names neither a subject nor an excess.
        assert!(!strict("ollama: context switch"));
        assert!(!matches_provider_overflow("deepseek says hello"));
        // Subject but no excess word.
        assert!(!matches_provider_overflow("mistral: input is fine"));
    }

    #[test]
    fn strict_exclusions() {
        // Groq's TPM 413 says "too large" but is a rate limit.
        assert!(!strict("413 Request too large: TPM limit reached"));
        assert!(!strict(
            "Request too large for model: 413 tokens per minute exceeded"
        ));
        // The same text without TPM is an overflow.
        assert!(strict("413 Request too large"));
        // "tpm" must be a word of its own.
        assert!(strict("prompt is too long (see https://x.test/tpmx)"));
        for m in [
            "reasoning is mandatory; prompt is too long",
            "Reasoning is required for this model: prompt is too long",
            "this model requires reasoning: prompt too long",
            "prompt is too long and reasoning cannot be disabled",
        ] {
            assert!(!strict(m), "{m}");
            assert!(!likely(m), "{m}");
        }
        assert!(!strict(""));
        assert!(!likely(""));
    }

    #[test]
    fn likely_exclusions() {
        // Billing, even when it mentions a limit.
        for m in [
            "Your credit balance is too low: prompt is too long",
            "insufficient_quota: request exceeds context limit",
            "HTTP 402: input exceeds limit",
            "{\"status\": 402, \"message\": \"prompt too long\"}",
            "Billing error: upgrade your plan, request exceeds the token limit",
            "This request requires more credits: prompt too long",
        ] {
            assert!(!likely(m), "{m}");
        }
        // Window too small is a configuration problem.
        assert!(!likely(
            "Model context window too small (8000 tokens). Minimum is 16000."
        ));
        assert!(!likely("Context window too small: minimum is 1000 tokens"));
        // Rate limits before the strict check, even when it would match.
        for m in [
            "rate_limit_error: prompt is too long",
            "Too many requests: maximum context length",
            "429: prompt too long",
            "RESOURCE_EXHAUSTED: prompt is too long",
            "exceeded your current quota",
            "model_cooldown",
            "usage limit reached for request tokens",
        ] {
            assert!(!likely(m), "{m}");
        }
        // Rate-limit hints after the strict check, before the broad hint.
        for m in [
            "requests per minute: input token limit",
            "request throttled: input token limit",
            "quota: request token limit exceeded",
        ] {
            assert!(is_match(&OVERFLOW_HINT, m), "{m}");
            assert!(!strict(m), "{m}");
            assert!(!likely(m), "{m}");
        }
    }

    #[test]
    fn a_count_containing_429_is_not_a_rate_limit() {
        // OpenClaw's bare `429` would hide this overflow; ours must not.
        let m = "prompt is too long: 142900 tokens > 128000 maximum";
        assert!(likely(m));
        assert_eq!(observed_overflow_tokens(m), Some(142_900));
    }

    #[test]
    fn broad_hint_alternatives() {
        for m in [
            "context is about to overflow",
            "context window over budget",
            "context window: 9000 tokens sent",
            "prompt exceeds what the model accepts",
            "the prompt is over the size",
            "prompt maximum reached",
            "input token count is over what we accept",
            "request length too long",
        ] {
            assert!(!strict(m), "{m}");
            assert!(likely(m), "{m}");
        }
        assert!(!likely("the window is open"));
        assert!(!likely("the request failed"));
    }

    #[test]
    fn observed_tokens_from_each_wording() {
        assert_eq!(
            observed_overflow_tokens("prompt is too long: 208,423 tokens > 200,000 maximum"),
            Some(208_423)
        );
        assert_eq!(
            observed_overflow_tokens("Prompt is too long: 208423 tokens >200000 maximum"),
            Some(208_423)
        );
        assert_eq!(
            observed_overflow_tokens(
                "This model's maximum context length is 8192 tokens, however you requested 10346 tokens"
            ),
            Some(10_346)
        );
        assert_eq!(
            observed_overflow_tokens(
                "This model's maximum context length is 128000 tokens. However, your messages resulted in 130,001 tokens."
            ),
            Some(130_001)
        );
        assert_eq!(observed_overflow_tokens("Input is too long"), None);
        assert_eq!(observed_overflow_tokens(""), None);
        // A zero or a lone comma is skipped in favour of the next pattern.
        assert_eq!(
            observed_overflow_tokens("requested 0 tokens; resulted in 12 tokens"),
            Some(12)
        );
        assert_eq!(observed_overflow_tokens("requested , tokens"), None);
        // Too large for u64: unreadable, not a wrapped number.
        assert_eq!(
            observed_overflow_tokens("requested 99999999999999999999999 tokens"),
            None
        );
    }

    #[test]
    fn compaction_failures() {
        for m in [
            "auto-compaction failed: prompt is too long: 300000 tokens > 200000 maximum",
            "Summarization failed: context window exceeded",
            "compaction failed: context overflow",
            "compaction: Context overflow while summarizing",
        ] {
            assert!(is_compaction_failure_error(m), "{m}");
        }
        for m in [
            "prompt is too long: 300000 tokens > 200000 maximum",
            "compaction failed: network error",
            "compaction: 429 Too Many Requests",
            "",
        ] {
            assert!(!is_compaction_failure_error(m), "{m}");
        }
    }
}
