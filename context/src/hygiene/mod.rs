//! Transcript hygiene: the passes the host runs on whatever an engine returned, right before
//! every provider request (the normalisation choke point of the design).
//!
//! Why one choke point: engines drop, select and summarise messages, and any of that can break
//! what providers insist on (every tool call answered right after it, no orphan results,
//! alternating turns, well-formed tool names). Repairing once, in one place, means no engine
//! has to get it right and no compaction path has to repeat it. The passes are library
//! functions, so an engine can also run them itself, for example before it estimates tokens.
//!
//! Every pass has the same shape, `fn(&MessageList, …) -> (MessageList, Report)`:
//!
//! - it never edits a message: a changed message is a new `Arc`, the session's copy stays as it
//!   was (the request loses things, the transcript never does);
//! - a pass that changes nothing returns its input list itself
//!   ([`MessageList::same_list`] holds), and inside a changed list every unchanged message is
//!   the input's `Arc`. The ABI sends lists as deltas by pointer identity, and a turn must cost
//!   O(messages), not O(bytes): a pass over a clean transcript reads each message once and
//!   allocates nothing;
//! - its report says what it changed, so the host can emit it as an event.
//!
//! [`run`] chains them as [`HygienePolicy`] selects, per provider family.

pub(crate) mod builder;
pub(crate) mod calls;
mod history;
pub mod pairing;
mod report;
mod resume;
mod sanitize;
#[cfg(test)]
pub(crate) mod test_support;
mod tool_ids;
mod turns;

use serde::{Deserialize, Serialize};

pub use self::history::{
    ImagePruneReport, LimitReport, PRESERVE_RECENT_COMPLETED_TURNS, PRUNED_IMAGE_TEXT,
    StaleUsageReport, limit_history_turns, prune_processed_history_images,
    strip_stale_usage_before_latest_compaction, strip_stale_usage_before_latest_compaction_with,
};
pub use self::pairing::{
    ErroredAssistantPolicy, PairingReport, SYNTHETIC_RESULT_TEXT, repair_tool_use_result_pairing,
};
pub use self::report::PassReport;
pub use self::sanitize::{
    DetailsReport, MAX_TOOL_NAME_LEN, SanitizeOptions, SanitizeReport, ToolAllowlist,
    is_valid_tool_name, sanitize_tool_call_inputs, strip_tool_result_details,
};
pub use self::tool_ids::{
    DEFAULT_TOOL_ID, SANITIZED_TOOL_ID, ToolIdMode, ToolIdReport, sanitize_tool_call_ids,
};
pub use self::turns::{
    AnthropicTurnsReport, BOOTSTRAP_USER_TEXT, GeminiTurnsReport, OMITTED_CALLS_TEXT,
    TurnOrderingReport, sanitize_google_turn_ordering, validate_anthropic_turns,
    validate_gemini_turns,
};
use crate::message_memo::MessageMemo;
use rampart_message::{MessageList, SharedMessage};

/// The provider family a request goes to; it decides which validations [`run`] applies.
///
/// Why families, not providers: the rules follow the wire API (Anthropic messages, Gemini,
/// OpenAI chat completions), and many providers share one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Provider {
    /// Anthropic's messages API: signed thinking kept intact, Anthropic turn validation.
    Anthropic,
    /// Google Gemini: user-first ordering, Gemini turn validation.
    Gemini,
    /// OpenAI chat completions (and compatible servers): user-first ordering and both
    /// validations, since servers behind that API enforce either rule.
    OpenAiCompletions,
    /// Everything else (OpenAI responses, the simulator, …): the common passes only, no
    /// provider-specific turn validation.
    #[default]
    Other,
}

impl Provider {
    /// The family of a pi `api` value as recorded on assistant messages
    /// (`anthropic-messages`, `google-generative-ai`, `openai-completions`, …).
    pub fn from_api(api: &str) -> Self {
        match api {
            "anthropic-messages" => Self::Anthropic,
            a if a.starts_with("google-") => Self::Gemini,
            "openai-completions" => Self::OpenAiCompletions,
            _ => Self::Other,
        }
    }
}

/// Which passes [`run`] applies, and with what parameters.
///
/// Start from [`HygienePolicy::for_provider`] (the reference transcript-policy defaults) and
/// override fields as configuration says. `Default` is the policy of [`Provider::Other`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HygienePolicy {
    /// User turns of history to keep (see [`limit_history_turns`]); `None` keeps everything.
    pub history_limit: Option<i64>,
    /// Tools the transcript may call; calls to others are removed. `None` allows all.
    pub allowed_tool_names: Option<ToolAllowlist>,
    /// Keep turns with signed thinking byte-identical or drop them
    /// ([`SanitizeOptions::preserve_signed_thinking`]).
    pub preserve_signed_thinking: bool,
    /// Put a user message in front of an assistant-first transcript.
    pub fix_assistant_first: bool,
    /// Apply [`validate_anthropic_turns`].
    pub validate_anthropic: bool,
    /// Apply [`validate_gemini_turns`].
    pub validate_gemini: bool,
    /// Rewrite tool-call ids to this grammar ([`sanitize_tool_call_ids`]); `None` keeps them.
    pub tool_call_id_mode: Option<ToolIdMode>,
    /// Apply [`prune_processed_history_images`].
    pub prune_images: bool,
    /// Apply [`strip_stale_usage_before_latest_compaction`].
    pub strip_stale_usage: bool,
    /// Apply [`strip_tool_result_details`]. Off by default: serialisers drop `details` anyway,
    /// and stripping copies every result that has them on every turn.
    pub strip_details: bool,
}

impl Default for HygienePolicy {
    fn default() -> Self {
        Self::for_provider(Provider::Other)
    }
}

impl HygienePolicy {
    /// The defaults for `provider`: pairing repair, input sanitising, image pruning and stale
    /// usage for everyone, plus the provider family's own rules.
    pub fn for_provider(provider: Provider) -> Self {
        let (anthropic, gemini, first) = match provider {
            // Anthropic, too, wants the user first: a conversation that opens with the
            // assistant is refused.
            Provider::Anthropic => (true, false, true),
            Provider::Gemini => (false, true, true),
            Provider::OpenAiCompletions => (true, true, true),
            Provider::Other => (false, false, false),
        };
        Self {
            history_limit: None,
            allowed_tool_names: None,
            preserve_signed_thinking: provider == Provider::Anthropic,
            fix_assistant_first: first,
            validate_anthropic: anthropic,
            validate_gemini: gemini,
            // Google and Anthropic reject ids outside their grammars, and ids
            // from other providers (`call_…|…`, `functions.x:0`) reach them in replayed or
            // imported transcripts.
            tool_call_id_mode: match provider {
                Provider::Anthropic => Some(ToolIdMode::Anthropic),
                Provider::Gemini => Some(ToolIdMode::Strict),
                _ => None,
            },
            prune_images: true,
            strip_stale_usage: true,
            strip_details: false,
        }
    }
}

/// Everything [`run`] changed, pass by pass; serialisable so the host can emit it as an event.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct HygieneReport {
    /// [`sanitize_tool_call_inputs`].
    pub sanitize: SanitizeReport,
    /// The first pairing repair (errored turns' results preserved).
    pub pairing: PairingReport,
    /// [`limit_history_turns`].
    pub limit: LimitReport,
    /// The pairing repairs after limiting (errored turns' results dropped).
    pub pairing_after_limit: PairingReport,
    /// [`sanitize_google_turn_ordering`].
    pub turn_ordering: TurnOrderingReport,
    /// [`validate_anthropic_turns`].
    pub anthropic: AnthropicTurnsReport,
    /// [`validate_gemini_turns`].
    pub gemini: GeminiTurnsReport,
    /// [`sanitize_tool_call_ids`].
    pub tool_ids: ToolIdReport,
    /// [`prune_processed_history_images`].
    pub images: ImagePruneReport,
    /// [`strip_stale_usage_before_latest_compaction`].
    pub stale_usage: StaleUsageReport,
    /// [`strip_tool_result_details`].
    pub details: DetailsReport,
    /// Rounds of the repair/validation loop it took to reach a stable transcript (1 when the
    /// first round changed nothing).
    pub rounds: usize,
}

impl HygieneReport {
    /// Whether any pass changed anything; `false` exactly when [`run`] returned its input.
    pub fn changed(&self) -> bool {
        self.sanitize.changed()
            || self.pairing.changed()
            || self.limit.changed()
            || self.pairing_after_limit.changed()
            || self.turn_ordering.changed()
            || self.anthropic.changed()
            || self.gemini.changed()
            || self.tool_ids.changed()
            || self.images.changed()
            || self.stale_usage.changed()
            || self.details.changed()
    }
}

/// The most rounds of the repair/validation loop. Each round that changes something removes
/// messages or calls, or answers calls, so two or three rounds settle any transcript; the bound
/// only guards against a bug looping forever.
const MAX_ROUNDS: usize = 8;

/// Runs `f` on `list`, adds its report to `into`, and returns the new list.
fn step<R: PassReport>(
    list: MessageList,
    into: &mut R,
    f: impl FnOnce(&MessageList) -> (MessageList, R),
) -> MessageList {
    let (out, report) = f(&list);
    into.absorb(report);
    out
}

/// The choke point: makes `input` a transcript the provider accepts, as `policy` says.
///
/// Order:
/// 1. [`sanitize_tool_call_inputs`], then [`repair_tool_use_result_pairing`] preserving the
///    results of errored turns;
/// 2. until nothing changes: [`limit_history_turns`], the pairing repair again (now dropping
///    errored turns' results, which providers would see as orphans), then as the policy says
///    [`sanitize_google_turn_ordering`], [`validate_anthropic_turns`], [`validate_gemini_turns`];
/// 3. [`sanitize_tool_call_ids`], [`prune_processed_history_images`], [`strip_stale_usage_before_latest_compaction`],
///    [`strip_tool_result_details`] as the policy says.
///
/// Why the loop: the validations run after the limit and the second repair, on the transcript's
/// final shape, and a change by one pass can give another something to do (removing an
/// unanswered call orphans its result; dropping it can make two user messages adjacent; a
/// bootstrap message can push the user count over the limit). Repeating until stable makes the
/// result a fixed point: running it through `run` again returns it unchanged. A clean transcript
/// takes one round.
///
/// Returns `input` itself when nothing changes, and shares every unchanged message with it.
pub fn run(input: &MessageList, policy: &HygienePolicy) -> (MessageList, HygieneReport) {
    run_with(input, policy, &HygieneMemo::default())
}

/// What [`run_with`] keeps from one turn to the next: the messages a pass derives from a
/// single message (today the usage-zeroed copies of replies before the last compaction), so a
/// turn that hands the same history again gets the same copies, not new ones.
///
/// Why: after a compaction every reply still in the context is stale, and copying each again
/// on every turn cost a turn O(bytes of history) and gave the token counter's memo and the
/// engine ABI's pointer-identity deltas new messages to count and send. Keep one per run loop.
///
/// It also keeps the last run, so that a history that only grew by plain messages since is
/// not read again (see `resume.rs`): the result is the same as a full run's.
#[derive(Debug, Clone, Default)]
pub struct HygieneMemo {
    zeroed_usage: MessageMemo<SharedMessage>,
    last: resume::LastSlot,
    /// Runs answered by resuming the last one ([`HygieneMemo::resumed_runs`]).
    resumed: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl HygieneMemo {
    /// An empty memo.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many runs resumed from the last one instead of running every pass, so callers and
    /// tests can see that resuming works.
    pub fn resumed_runs(&self) -> u64 {
        self.resumed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How often a derived message was reused (`hits`) or made (`misses`).
    pub fn stats(&self) -> crate::tokens::MemoStats {
        self.zeroed_usage.stats()
    }
}

/// [`run`], with what passes derive from single messages kept in `memo` across calls (the
/// result is the same as [`run`]'s; only the allocations are reused).
pub fn run_with(
    input: &MessageList,
    policy: &HygienePolicy,
    memo: &HygieneMemo,
) -> (MessageList, HygieneReport) {
    let resumed = memo
        .last
        .resume(input, policy)
        .and_then(|last| last.state.resume(last.from, input, &memo.zeroed_usage));
    let (result, kept) = match resumed {
        Some(run) => {
            memo.resumed
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            (run.result(), Some(run))
        }
        None => {
            let (output, report) = run_full(input, policy, memo);
            let kept = resume::Kept::new(policy, input, &output, &report);
            ((output, report), kept)
        }
    };
    match kept {
        Some(kept) => memo
            .last
            .keep(input, policy.clone(), std::sync::Arc::new(kept)),
        None => memo.last.forget(),
    }
    result
}

/// Every pass over `input`, as [`run`] documents.
fn run_full(
    input: &MessageList,
    policy: &HygienePolicy,
    memo: &HygieneMemo,
) -> (MessageList, HygieneReport) {
    let mut report = HygieneReport::default();
    let sanitize_opts = SanitizeOptions {
        allowed_tool_names: policy.allowed_tool_names.as_ref(),
        preserve_signed_thinking: policy.preserve_signed_thinking,
    };
    let list = step(input.clone(), &mut report.sanitize, |l| {
        sanitize_tool_call_inputs(l, &sanitize_opts)
    });
    let (mut list, pairing, kept_errored) =
        self::pairing::repair(&list, ErroredAssistantPolicy::Preserve);
    report.pairing = pairing;

    for _ in 0..MAX_ROUNDS {
        report.rounds += 1;
        let before = list.clone();
        list = step(list, &mut report.limit, |l| {
            limit_history_turns(l, policy.history_limit)
        });
        // The first repair left nothing this one would drop, unless it kept results of errored
        // turns or something changed since: skip a scan on the common, clean turn.
        let repaired_already =
            report.rounds == 1 && kept_errored == 0 && MessageList::same_list(&list, &before);
        if !repaired_already {
            list = step(list, &mut report.pairing_after_limit, |l| {
                repair_tool_use_result_pairing(l, ErroredAssistantPolicy::Drop)
            });
        }
        if policy.fix_assistant_first {
            list = step(
                list,
                &mut report.turn_ordering,
                sanitize_google_turn_ordering,
            );
        }
        if policy.validate_anthropic {
            list = step(list, &mut report.anthropic, validate_anthropic_turns);
        }
        if policy.validate_gemini {
            list = step(list, &mut report.gemini, validate_gemini_turns);
        }
        if MessageList::same_list(&list, &before) {
            break;
        }
        if report.rounds == MAX_ROUNDS {
            tracing::warn!(
                rounds = report.rounds,
                messages = list.len(),
                "transcript hygiene did not settle; sending the last round's result"
            );
        }
    }

    // After the loop: pairing is decided on the original ids, and the mapping is injective, so
    // renaming cannot unpair anything or give the loop more work.
    if let Some(mode) = policy.tool_call_id_mode {
        list = step(list, &mut report.tool_ids, |l| {
            sanitize_tool_call_ids(l, mode)
        });
    }
    if policy.prune_images {
        list = step(list, &mut report.images, prune_processed_history_images);
    }
    if policy.strip_stale_usage {
        list = step(list, &mut report.stale_usage, |l| {
            strip_stale_usage_before_latest_compaction_with(l, &memo.zeroed_usage)
        });
    }
    if policy.strip_details {
        list = step(list, &mut report.details, strip_tool_result_details);
    }
    (list, report)
}
