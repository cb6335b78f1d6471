//! `rampart-context` (0.x): the context defence library that the `legacy` engine and the host
//! are built from, and that any engine may use.
//!
//! Why apart from the engine API: these algorithms change as we learn, and an engine author
//! should not inherit a semver promise over some four hundred items, nor link tens of megabytes
//! of BPE vocabulary, to implement one trait. This crate is versioned 0.x and free to move.
//!
//! - [`tokens`]: the shared token counter (estimate, exact BPE with the `exact-tokens`
//!   feature, calibrated by usage), memoised per shared message;
//! - [`hygiene`] (with [`pairing`]): the transcript passes run before every request;
//! - [`guards`]: the context-window guard, tool-result caps, truncation plans, the precheck;
//! - [`pruning`]: cache-TTL context pruning of old tool results, in the request only;
//! - [`compaction`]: summarising old history (staged, budgeted, with fallbacks);
//! - [`events`]: the typed events the run loop and the engines report;
//! - [`overflow`]: recognising a provider's "prompt too long" in its own words;
//! - [`message_memo`]: a per-message figure or copy kept across turns, for whole-history passes.

pub mod compaction;
pub mod events;
pub mod guards;
pub mod hygiene;
pub mod list_resume;
pub mod message_memo;
pub mod overflow;
pub mod pruning;
pub mod tokens;

/// Tool-call pairing: a hygiene pass, also used on its own by engines that select messages.
pub use hygiene::pairing;
