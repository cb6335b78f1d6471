//! The guards that keep a context inside the model's window, as pure library functions.
//!
//! Why here: the built-in `legacy` engine, third-party engines and the host all need the same
//! caps, estimates and error texts; one implementation means a budget means the same thing on
//! both sides of the ABI. Nothing here does I/O: the host stores blobs and rewrites sessions.
//!
//! One module per layer of the reference's defence:
//! - [`window`]: refuse models whose window is too small, warn on small ones (layer 1);
//! - [`tool_result`]: cap tool results at ingest, plan the truncation of a session's tool
//!   results (layer 2);
//! - [`tool_loop`]: shrink oversized results in the in-memory context inside the tool loop and
//!   stop it when the context is too big (layer 2);
//! - [`persistence`]: what the host writes when appending: synthetic results for calls left
//!   without one, and capped results;
//! - [`precheck`](mod@precheck): estimate the request before sending it and choose between
//!   truncating tool results and compacting.
#![warn(missing_docs)]

pub mod persistence;
pub mod precheck;
pub mod tool_args;
pub mod tool_loop;
pub mod tool_result;
pub mod window;

pub use persistence::{Persisted, PersistenceGuard, PersistenceOptions, SharedPersisted};
pub use precheck::{
    PRECHECK_OVERFLOW_MESSAGE, PrecheckInput, PrecheckOutcome, Route, estimate_pre_prompt_tokens,
    precheck,
};
pub use tool_loop::{
    ContextOverflow, TOOL_LOOP_OVERFLOW_MESSAGE, ToolLoopMemo, ToolLoopReport, guard_tool_loop,
    guard_tool_loop_with,
};
pub use tool_result::{
    CapReport, ReductionPotential, SessionTruncationPlan, TruncateOptions, Truncated,
    TruncatedMessage, calculate_max_tool_result_chars, cap_at_ingest,
    estimate_tool_result_reduction_potential, format_truncation_notice, is_oversized_tool_result,
    plan_session_truncation, session_likely_has_oversized_tool_results, tool_result_text_len,
    truncate_tool_result_message, truncate_tool_result_text,
};
pub use window::{
    ContextWindowInfo, GuardVerdict, WindowSource, WindowSources, resolve_context_window,
};
