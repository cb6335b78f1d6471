//! Recognising a provider's "the prompt does not fit" error (reference §10).
//!
//! PLACEHOLDER signatures: the implementation lands with the overflow-recognition work.

/// True when `message` says the prompt exceeded the model's context window.
pub fn is_context_overflow_error(message: &str) -> bool {
    let _ = message;
    false
}

/// The stricter check the run loop uses: excludes rate limits, TPM, billing, reasoning and
/// "window too small" errors before matching, then applies the broad hint.
pub fn is_likely_context_overflow_error(message: &str) -> bool {
    let _ = message;
    false
}

/// The prompt size a provider reported in its overflow text, when it did.
pub fn observed_overflow_tokens(message: &str) -> Option<u64> {
    let _ = message;
    None
}
