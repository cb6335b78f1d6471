//! What a replay found: one [`Row`] per model call, and the [`Summary`] over all of them.
//!
//! Both are built from the run loop's events (`crate::run::events`), the same facts
//! `--events FILE` writes, so the table, the JSON, the report and the events file never
//! disagree.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::run::RecordedEvent;
use crate::run::events::{Event, HOST_SOURCE};

/// One model call of the replay (the run loop's "turn"): its size and what each layer did.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    /// The call number, from 1 (the `turn` of `--requests-out`).
    pub turn: u64,
    /// The recorded user turn the call belongs to, from 1 (0: before the first user message).
    pub user_turn: u64,
    /// Prompt tokens of the answered request; `None` when the call failed.
    pub prompt_tokens: Option<u64>,
    /// The window the call was made against.
    pub window: u64,
    /// `prompt_tokens` as a percentage of the window.
    pub pct_window: Option<f64>,
    /// Tokens of the whole recorded history up to this call: what sending everything would
    /// have cost.
    pub full_history_tokens: u64,
    /// Requests sent to the model for this call (retries after a recovery included).
    pub requests: u32,
    /// Short tags for what the layers did, in the order of the table's LAYERS column.
    pub tags: Vec<String>,
    /// Compactions that compacted.
    pub compactions: u32,
    /// Tool-result truncations of every kind (ingest caps, tool-loop guard, session passes).
    pub truncations: u32,
    /// Prunes that changed the request.
    pub prunes: u32,
    /// Characters pruning removed from the request.
    pub pruned_chars: u64,
    /// Overflows seen: a request the provider refused, or the tool-loop guard's (which
    /// stands in for one).
    pub overflows: u32,
    /// Compactions the prompt budget triggered (the precheck), where no request was refused.
    pub budget_triggers: u32,
    /// The prompt budget of the call, in tokens (see `PrecheckRoute::budget_tokens`).
    pub budget_tokens: Option<u64>,
    /// Tokens the call's compactions read (see [`Summary::compaction_input_tokens`]).
    pub compaction_input_tokens: u64,
    /// Tokens the call's compactions wrote: their summaries.
    pub compaction_output_tokens: u64,
    /// Requests of the call whose prefix differs from the request before it beyond the newest
    /// messages: the provider's prompt cache cannot serve them.
    pub cache_breaks: u32,
    /// Milliseconds the call's requests waited on compactions: the compaction time on the
    /// critical path (a prepared summary swapped in costs only the swap).
    pub compaction_ms: u64,
    /// The call's compactions that swapped in a summary prepared ahead of need.
    pub compactions_prepared: u32,
    /// The failure, when the call got no answer.
    pub error: Option<RowError>,
    /// The subagent (Claude Code's agent id) this call belongs to; `None` for the session
    /// itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subagent: Option<String>,
}

/// What a replay's tokens cost at a `--prices` table (see `super::prices`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Cost {
    /// The prompts sent to the chat model.
    pub chat_input_usd: f64,
    /// What compactions read and wrote.
    pub compaction_usd: f64,
    /// Both.
    pub total_usd: f64,
}

/// A replay's accounting per 100 calls.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Per100Calls {
    /// Input tokens sent to the chat model.
    pub input_tokens: f64,
    /// Input tokens of compaction calls.
    pub compaction_input_tokens: f64,
    /// Output tokens of compaction calls.
    pub compaction_output_tokens: f64,
    /// Prompt-cache breaks.
    pub cache_breaks: f64,
    /// Compactions.
    pub compactions: f64,
    /// Truncations of every kind.
    pub truncations: f64,
    /// Prunes.
    pub prunes: f64,
}

/// One subagent's replay, as the parent's summary lists it.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SubagentSummary {
    /// Claude Code's agent id.
    pub agent_id: String,
    /// The task the parent gave it (its `.meta.json` description).
    pub label: Option<String>,
    /// The parent's tool call that spawned it.
    pub parent_tool_call_id: Option<String>,
    /// The parent's call (row) it was replayed at.
    pub at_parent_call: u64,
    /// Its model calls.
    pub calls: u64,
    /// Its largest prompt, in tokens.
    pub peak_prompt_tokens: u64,
    /// Its compactions.
    pub compactions: u64,
    /// Why it could not be replayed, when it could not.
    pub error: Option<String>,
}

/// A failed call, as the row shows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RowError {
    /// `TurnError::kind` (`context_overflow`, `window_too_small`, …).
    pub kind: String,
    /// The message a user would have seen.
    pub message: String,
}

/// Wall-clock split of a replay, in milliseconds.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Timings {
    /// Reading and parsing the input transcript.
    pub load_ms: f64,
    /// The run loop: engine calls, host pipeline, simulator and session appends.
    pub run_ms: f64,
    /// Writing rows, `--requests-out` and the report.
    pub output_ms: f64,
    /// Everything, start to end.
    pub total_ms: f64,
}

/// The replay's closing figures.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// The input file.
    pub input: String,
    /// Its detected format.
    pub format: String,
    /// The engine configured (`plugins.slots.contextEngine` or `--engine`).
    pub engine: String,
    /// The engine that served (differs when the configured one was quarantined).
    pub served_by: String,
    /// `provider/model` of the simulated model.
    pub model: String,
    /// The window, in tokens.
    pub window: u64,
    /// The tokenizer prompts were counted with.
    pub tokenizer: String,
    /// Whose overflow error text the simulator used.
    pub overflow_wording: String,
    /// Messages on the replayed branch.
    pub recorded_messages: usize,
    /// Recorded user turns.
    pub user_turns: u64,
    /// Model calls made (one per recorded assistant message).
    pub calls: u64,
    /// Claude Code subagents replayed, each at the parent's call that spawned it, in order.
    /// Their calls are rows of their own (tagged with the agent id), not in `calls`.
    pub subagents: Vec<SubagentSummary>,
    /// Calls that got an answer.
    pub answered: u64,
    /// Requests the model received (refused ones included).
    pub requests: u64,
    /// The largest prompt sent, in tokens.
    pub peak_prompt_tokens: u64,
    /// The mean prompt over answered calls, in tokens.
    pub mean_prompt_tokens: f64,
    /// Compactions that compacted.
    pub compactions: u64,
    /// Compactions that were tried and did not compact (or failed).
    pub compactions_not_done: u64,
    /// All tool-result truncations: the three kinds below together.
    pub truncations: u64,
    /// Tool results capped on their way into the session.
    pub ingest_caps: u64,
    /// Requests whose tool results the in-memory tool-loop guard shortened.
    pub tool_loop_truncations: u64,
    /// In-session truncation passes that changed the session.
    pub truncation_passes: u64,
    /// Prunes that changed a request.
    pub prunes: u64,
    /// Characters pruning removed, summed over requests.
    pub pruned_chars: u64,
    /// Overflows seen: requests the provider refused, and the tool-loop guard's.
    pub overflows: u64,
    /// Compactions the prompt budget triggered before any request was refused.
    pub budget_triggers: u64,
    /// The prompt budget of the last call, in tokens: the line a budget compaction crosses.
    pub budget_tokens: u64,
    /// Calls that hit an overflow or a precheck truncation and still got an answer.
    pub recoveries: u64,
    /// Calls that got no answer.
    pub errors: u64,
    /// Failed calls by `TurnError::kind`.
    pub errors_by_kind: BTreeMap<String, u64>,
    /// Window-guard warnings (the window is below the warning threshold).
    pub guard_warnings: u64,
    /// Prompt tokens sent, summed over answered calls.
    pub tokens_sent: u64,
    /// What sending the whole recorded history would have cost, summed over answered calls.
    pub tokens_if_everything: u64,
    /// `tokens_if_everything - tokens_sent`.
    pub tokens_saved: u64,
    /// Tokens compactions read: for each, the history that left the context. A summarising
    /// model is billed for them (the embedded summariser is counted as one would be).
    pub compaction_input_tokens: u64,
    /// Tokens compactions wrote (their summaries).
    pub compaction_output_tokens: u64,
    /// `tokens_saved` less what the compactions spent (`compaction_input_tokens +
    /// compaction_output_tokens`): the saving that is left. Negative when compacting cost more
    /// than it saved.
    pub net_tokens_saved: i64,
    /// Requests whose prefix differs from the previous request's beyond the newest messages
    /// (a compaction, a truncation, a prune or a hygiene change rewrote the history): each
    /// makes the provider's prompt cache start over.
    pub cache_breaks: u64,
    /// Compaction time on the critical path: what requests waited on compactions, in ms.
    pub compaction_ms_on_path: u64,
    /// The most one call waited on compactions, in ms.
    pub compaction_ms_max_per_call: u64,
    /// Compactions that swapped in a summary prepared ahead of need (`prepareAt`).
    pub compactions_prepared: u64,
    /// What those waited, in ms, in all (the target is 0).
    pub compaction_ms_prepared: u64,
    /// Summaries prepared ahead of need (used or not).
    pub preparations: u64,
    /// Time spent preparing them, off the request path, in ms.
    pub preparation_ms: u64,
    /// Pre-compaction memory flushes (durable facts written to the replay's scratch memory).
    pub memory_flushes: u64,
    /// Bytes they appended to its notes.
    pub memory_flush_bytes: u64,
    /// The same figures per 100 calls, so replays of different lengths compare.
    pub per_100_calls: Per100Calls,
    /// What the tokens cost, with `--prices`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
    /// Where the timing went.
    pub timings: Timings,
    /// The process's peak resident memory, when the platform reports it.
    pub peak_rss_bytes: Option<u64>,
    /// The directory the replay's session was kept in, when it was.
    pub session_dir: Option<String>,
    /// Notes for the reader: what the import could not carry over exactly, and a configured
    /// engine that was quarantined.
    pub notes: Vec<String>,
}

impl Row {
    /// Folds one event into the row (and the counters only the summary keeps into `tally`).
    /// Kinds this version does not know (a third-party engine's own) are passed over.
    pub fn absorb(&mut self, event: &RecordedEvent, tally: &mut Tally) {
        let host = event.source == HOST_SOURCE;
        let Some(typed) = event.event() else {
            return;
        };
        match typed {
            // Each cap is reported once: by the engine that capped it (`legacy`), or by the
            // host when its persistence guard did.
            Event::IngestCap(_) => {
                self.truncations += 1;
                tally.ingest_caps += 1;
                self.tag("cap");
            }
            Event::Hygiene(_) if host => self.tag("hyg"),
            Event::AssembleFailed(_) if host => self.tag("asm-fail"),
            Event::ToolLoopTruncation(_) if host => {
                self.truncations += 1;
                tally.tool_loop_truncations += 1;
                self.tag("loop-trunc");
            }
            Event::TruncationPass(pass) if host && pass.changed => {
                self.truncations += 1;
                tally.truncation_passes += 1;
                self.tag("trunc");
            }
            Event::Prune(prune) => {
                self.prunes += 1;
                self.pruned_chars += prune.pruned_chars;
                self.tag("prune");
            }
            // Spent when prepared, whether or not the summary is used.
            Event::CompactionPrepared(prep) if prep.ready => {
                self.compaction_input_tokens += prep.input_tokens;
                self.compaction_output_tokens += prep.output_tokens;
                tally.preparations += 1;
                tally.preparation_ms += prep.duration_ms;
                self.tag("prep");
            }
            Event::MemoryFlush(flush) if host => {
                tally.memory_flushes += 1;
                tally.memory_flush_bytes += flush.bytes;
                self.tag("flush");
            }
            Event::CompactionEnd(end) if host => {
                self.compaction_ms += end.duration_ms;
                if end.compacted && end.prepared {
                    // Its spend was counted when it was prepared.
                    self.compactions += 1;
                    self.compactions_prepared += 1;
                    self.tag("compact");
                } else if end.compacted {
                    self.compactions += 1;
                    let (read, written) = compaction_spend(&end);
                    self.compaction_input_tokens += read;
                    self.compaction_output_tokens += written;
                    self.tag("compact");
                } else {
                    tally.compactions_not_done += 1;
                    self.tag("compact-no");
                }
            }
            Event::PrecheckRoute(p) if host && p.budget_tokens > 0 => {
                self.budget_tokens = Some(p.budget_tokens);
            }
            Event::Overflow(o) if host => {
                if o.trigger.as_deref() == Some("budget") {
                    self.budget_triggers += 1;
                    self.tag("budget");
                } else {
                    self.overflows += 1;
                    self.tag("overflow");
                }
            }
            Event::Retry(_) if host => {
                tally.retried = true;
                // After a budget-triggered compaction nothing was refused: the one request is
                // sent after it, not again.
                if self.overflows > 0 || !self.tags.iter().any(|t| t == "budget") {
                    self.tag("retry");
                }
            }
            Event::GuardBlock(_) if host => self.tag("block"),
            Event::GuardWarn(_) if host => tally.guard_warnings += 1,
            _ => {}
        }
    }

    /// Adds `tag`, or bumps its count when it is already there (`cap×3`).
    fn tag(&mut self, tag: &str) {
        for existing in &mut self.tags {
            let (name, count) = match existing.split_once('×') {
                Some((n, c)) => (n, c.parse::<u32>().unwrap_or(1)),
                None => (existing.as_str(), 1),
            };
            if name == tag {
                *existing = format!("{tag}×{}", count + 1);
                return;
            }
        }
        self.tags.push(tag.to_string());
    }
}

/// Counters the summary needs beyond the rows, gathered while events are folded.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// See [`Summary::ingest_caps`].
    pub ingest_caps: u64,
    /// See [`Summary::tool_loop_truncations`].
    pub tool_loop_truncations: u64,
    /// See [`Summary::truncation_passes`].
    pub truncation_passes: u64,
    /// See [`Summary::compactions_not_done`].
    pub compactions_not_done: u64,
    /// See [`Summary::guard_warnings`].
    pub guard_warnings: u64,
    /// See [`Summary::preparations`].
    pub preparations: u64,
    /// See [`Summary::preparation_ms`].
    pub preparation_ms: u64,
    /// See [`Summary::memory_flushes`].
    pub memory_flushes: u64,
    /// See [`Summary::memory_flush_bytes`].
    pub memory_flush_bytes: u64,
    /// Whether the current call was retried after a recovery step (reset per call).
    pub retried: bool,
}

impl Summary {
    /// Adds a finished row (whose events are already folded) to the totals.
    pub fn add_row(&mut self, row: &Row, retried: bool) {
        self.calls += 1;
        self.requests += u64::from(row.requests);
        self.compactions += u64::from(row.compactions);
        self.prunes += u64::from(row.prunes);
        self.pruned_chars += row.pruned_chars;
        self.overflows += u64::from(row.overflows);
        self.budget_triggers += u64::from(row.budget_triggers);
        self.compaction_input_tokens += row.compaction_input_tokens;
        self.compaction_output_tokens += row.compaction_output_tokens;
        self.cache_breaks += u64::from(row.cache_breaks);
        self.compaction_ms_on_path += row.compaction_ms;
        self.compaction_ms_max_per_call = self.compaction_ms_max_per_call.max(row.compaction_ms);
        self.compactions_prepared += u64::from(row.compactions_prepared);
        if row.compactions_prepared > 0 {
            self.compaction_ms_prepared += row.compaction_ms;
        }
        if let Some(budget) = row.budget_tokens {
            self.budget_tokens = budget;
        }
        match (&row.error, row.prompt_tokens) {
            (Some(e), _) => {
                self.errors += 1;
                *self.errors_by_kind.entry(e.kind.clone()).or_default() += 1;
            }
            (None, Some(tokens)) => {
                self.answered += 1;
                self.peak_prompt_tokens = self.peak_prompt_tokens.max(tokens);
                self.tokens_sent += tokens;
                self.tokens_if_everything += row.full_history_tokens.max(tokens);
                if retried || row.overflows > 0 {
                    self.recoveries += 1;
                }
            }
            (None, None) => {}
        }
    }

    /// Takes the counters that only the tally kept, and the derived figures.
    pub fn close(&mut self, tally: &Tally) {
        self.ingest_caps = tally.ingest_caps;
        self.tool_loop_truncations = tally.tool_loop_truncations;
        self.truncation_passes = tally.truncation_passes;
        self.truncations =
            tally.ingest_caps + tally.tool_loop_truncations + tally.truncation_passes;
        self.compactions_not_done = tally.compactions_not_done;
        self.guard_warnings = tally.guard_warnings;
        self.preparations = tally.preparations;
        self.preparation_ms = tally.preparation_ms;
        self.memory_flushes = tally.memory_flushes;
        self.memory_flush_bytes = tally.memory_flush_bytes;
        self.mean_prompt_tokens = if self.answered == 0 {
            0.0
        } else {
            self.tokens_sent as f64 / self.answered as f64
        };
        self.tokens_saved = self.tokens_if_everything.saturating_sub(self.tokens_sent);
        let spent = self.compaction_input_tokens + self.compaction_output_tokens;
        self.net_tokens_saved = i64::try_from(self.tokens_saved)
            .unwrap_or(i64::MAX)
            .saturating_sub(i64::try_from(spent).unwrap_or(i64::MAX));
        let per = |n: u64| {
            if self.calls == 0 {
                0.0
            } else {
                n as f64 * 100.0 / self.calls as f64
            }
        };
        self.per_100_calls = Per100Calls {
            input_tokens: per(self.tokens_sent),
            compaction_input_tokens: per(self.compaction_input_tokens),
            compaction_output_tokens: per(self.compaction_output_tokens),
            cache_breaks: per(self.cache_breaks),
            compactions: per(self.compactions),
            truncations: per(self.truncations),
            prunes: per(self.prunes),
        };
    }
}

/// The process's peak resident set size (`VmHWM` on Linux); `None` elsewhere. Why: the bench
/// and the summary report peak memory, and this costs one small file read at the end.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line
        .trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// What a compaction made at once (not prepared ahead) spent, in tokens read and written:
/// the history that left the context (before, less what stayed beside the summary) and the
/// summary, a quarter token per character. The embedded summariser calls no model, but a real
/// one would. (A prepared compaction's spend is its `CompactionPrepared`'s.) Used by the
/// replay's accounting and by `rampart serve`'s `/ui`.
pub fn compaction_spend(end: &crate::run::events::CompactionEnd) -> (u64, u64) {
    let summary = end.summary_chars.unwrap_or(0).div_ceil(4);
    let before = end.tokens_before.unwrap_or(0);
    let after = end.tokens_after.unwrap_or(0);
    (
        before.saturating_sub(after.saturating_sub(summary)),
        summary,
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(source: &str, event: Event) -> RecordedEvent {
        let envelope = event.envelope(None);
        RecordedEvent {
            source: source.into(),
            kind: envelope.kind,
            data: envelope.data,
        }
    }

    fn pass(changed: bool) -> Event {
        Event::TruncationPass(crate::run::events::TruncationPass {
            changed,
            rewritten: u64::from(changed),
            bytes_freed: 0,
            reason: None,
        })
    }

    /// A prepared summary is paid for when it is made; the compaction that swaps it in adds
    /// only what the request waited, and is counted as prepared.
    #[test]
    fn a_prepared_compaction_is_paid_for_once_and_its_wait_is_the_swap() {
        use crate::run::events::{CompactionEnd, CompactionPrepared};
        let mut tally = Tally::default();
        let mut first = Row::default();
        first.absorb(
            &event(
                "legacy",
                Event::CompactionPrepared(CompactionPrepared {
                    ready: true,
                    input_tokens: 9_000,
                    output_tokens: 1_000,
                    duration_ms: 40,
                    ..Default::default()
                }),
            ),
            &mut tally,
        );
        let mut second = Row::default();
        second.absorb(
            &event(
                HOST_SOURCE,
                Event::CompactionEnd(CompactionEnd {
                    reason: "budget".into(),
                    compacted: true,
                    tokens_before: Some(20_000),
                    tokens_after: Some(8_000),
                    summary_chars: Some(4_000),
                    duration_ms: 1,
                    prepared: true,
                    ..Default::default()
                }),
            ),
            &mut tally,
        );
        let mut third = Row::default();
        third.absorb(
            &event(
                HOST_SOURCE,
                Event::CompactionEnd(CompactionEnd {
                    reason: "overflow".into(),
                    compacted: true,
                    tokens_before: Some(20_000),
                    tokens_after: Some(8_000),
                    summary_chars: Some(4_000),
                    duration_ms: 300,
                    ..Default::default()
                }),
            ),
            &mut tally,
        );
        let mut s = Summary::default();
        for row in [&first, &second, &third] {
            s.add_row(row, false);
        }
        s.close(&tally);
        assert_eq!(s.compactions, 2);
        assert_eq!(s.compactions_prepared, 1);
        assert_eq!(s.preparations, 1);
        assert_eq!(s.preparation_ms, 40);
        // 9,000 + 1,000 when prepared; 20,000 - (8,000 - 1,000) + 1,000 made on the spot.
        assert_eq!(s.compaction_input_tokens, 9_000 + 13_000);
        assert_eq!(s.compaction_output_tokens, 1_000 + 1_000);
        assert_eq!(s.compaction_ms_on_path, 301);
        assert_eq!(s.compaction_ms_max_per_call, 300);
        assert_eq!(s.compaction_ms_prepared, 1);
        assert!(first.tags.contains(&"prep".to_string()));
    }

    #[test]
    fn tags_count_repeats_and_every_cap_once_whoever_reports_it() {
        use crate::run::events::{CompactionEnd, IngestCap, Prune};
        let mut row = Row::default();
        let mut tally = Tally::default();
        for e in [
            // One cap by the engine, one by the host's persistence guard.
            event("legacy", Event::IngestCap(IngestCap::default())),
            event(
                "host",
                Event::IngestCap(IngestCap {
                    tool_name: Some("read".into()),
                    ..Default::default()
                }),
            ),
            event("host", pass(false)),
            event("host", pass(true)),
            event(
                "legacy",
                Event::Prune(Prune {
                    chars_before: 900,
                    chars_after: 400,
                    pruned_chars: 500,
                    ..Default::default()
                }),
            ),
            event(
                "host",
                Event::CompactionEnd(CompactionEnd {
                    compacted: true,
                    ..Default::default()
                }),
            ),
            // A third-party engine's own kind is passed over.
            RecordedEvent {
                source: "memo".into(),
                kind: "memory_flush".into(),
                data: json!({"files": 3}),
            },
        ] {
            row.absorb(&e, &mut tally);
        }
        assert_eq!(row.tags, ["cap×2", "trunc", "prune", "compact"]);
        assert_eq!(row.truncations, 3);
        assert_eq!(row.pruned_chars, 500);
        assert_eq!(tally.ingest_caps, 2);
        assert_eq!(tally.truncation_passes, 1);
    }

    #[test]
    fn the_summary_saves_what_was_not_sent() {
        let mut s = Summary::default();
        let ok = |tokens, full| Row {
            prompt_tokens: Some(tokens),
            full_history_tokens: full,
            ..Row::default()
        };
        s.add_row(&ok(100, 100), false);
        s.add_row(&ok(300, 1000), true);
        s.add_row(
            &Row {
                error: Some(RowError {
                    kind: "context_overflow".into(),
                    message: "m".into(),
                }),
                ..Row::default()
            },
            false,
        );
        s.close(&Tally::default());
        assert_eq!(s.calls, 3);
        assert_eq!(s.answered, 2);
        assert_eq!(s.errors, 1);
        assert_eq!(s.peak_prompt_tokens, 300);
        assert_eq!(s.mean_prompt_tokens, 200.0);
        assert_eq!(s.tokens_saved, 700);
        assert_eq!(s.recoveries, 1);
        assert_eq!(s.errors_by_kind["context_overflow"], 1);
    }
}
