//! `lossless`: a context engine that keeps every message, written as an outsider would,
//! against `rampart-engine-api` (plus SQLite and serde).
//!
//! Every message of a session is stored in SQLite with its parts (one database per agent,
//! under the `stateDir` config key). When the stored context passes `contextThreshold` of the
//! budget, a sweep replaces the oldest raw messages outside the fresh tail with leaf
//! summaries, and runs of leaves with condensed summaries: a DAG whose nodes link to their
//! sources, down to the raw messages, so nothing is lost and recall can expand any node
//! ([`recall`]). `assemble` sends the summaries and the newest messages within the budget.
//!
//! The session file stays the record: the store is brought in line with the messages the
//! host passes to `assemble` and `compact`, and a store that disagrees with them (lost,
//! damaged, another branch) is rebuilt from them, never the other way round.
//!
//! Modules: [`config`] (settings), [`store`] (schema and migrations), [`conv`] (items and
//! ingest), [`dag`] (tail, passes, sweeps), [`summarize`] (model, fallback, guards),
//! [`render`] (how a summary is shown), [`assemble`] (budget), [`recall`] (search, describe,
//! expand), [`tools`] (the same as the model's `lcm_*` tools), [`text`] (helpers).

pub mod assemble;
pub mod config;
pub mod conv;
pub mod dag;
pub mod files;
pub mod recall;
pub mod render;
pub mod store;
pub mod summarize;
pub mod text;
pub mod tools;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use rampart_engine_api::protocol::{
    AfterTurnParams, AfterTurnResult, AssembleParams, AssembleResult, CompactParams, CompactResult,
    CompactionOutcome, EngineInfo, Feature, IngestParams, IngestResult, ProtocolInfo, SessionRef,
};
use rampart_engine_api::tools::{ToolCallParams, ToolCallResult, ToolsListParams, ToolsListResult};
use rampart_engine_api::{
    CallContext, ContextEngine, EngineError, EngineFactory, EngineInit, Host, LogLevel,
    SharedMessage,
};

use crate::config::Config;
use crate::conv::{Conv, ItemRef};
use crate::dag::{Sweep, SweepOutcome, tail_start};
use crate::store::{Opened, Store, db};
use crate::summarize::Guards;

/// The engine's id in `plugins.toml`.
pub const LOSSLESS_ID: &str = "lossless";

/// How many forced sweeps an overflow recovery runs at most.
pub const MAX_OVERFLOW_ROUNDS: usize = 10;

/// Mutable state behind one lock: calls of one engine are serialised, which is what keeps a
/// session's mutations in order (lossless-claw's per-session queue).
#[derive(Debug, Default)]
pub struct State {
    stores: HashMap<String, Store>,
    convs: HashMap<String, Conv>,
    rendered: HashMap<String, SharedMessage>,
    guards: Guards,
}

/// The lossless engine.
#[derive(Debug)]
pub struct LosslessEngine {
    config: Config,
    host: Option<Host>,
    state: Mutex<State>,
}

/// The agent a session belongs to: the second field of an `agent:<id>:…` key, else `main`.
pub fn agent_of(session_key: Option<&str>) -> String {
    session_key
        .and_then(|k| k.strip_prefix("agent:"))
        .and_then(|rest| rest.split(':').next())
        .filter(|a| {
            !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c))
        })
        .unwrap_or("main")
        .to_string()
}

impl LosslessEngine {
    /// An engine with `config`, calling back into `host` when given.
    pub fn new(config: Config, host: Option<Host>) -> Self {
        Self {
            config,
            host,
            state: Mutex::new(State::default()),
        }
    }

    /// The settings in effect.
    pub fn config(&self) -> &Config {
        &self.config
    }

    fn lock(&self) -> Result<MutexGuard<'_, State>, EngineError> {
        self.state
            .lock()
            .map_err(|_| EngineError::engine("the lossless engine's state lock was poisoned"))
    }

    fn sizes(&self) -> conv::Sizes {
        conv::Sizes {
            tool_output: self.config.large_tool_output_tokens,
            file: self.config.large_file_threshold_tokens,
            retain_depth: self.config.new_session_retain_depth,
        }
    }

    fn now(&self) -> u64 {
        self.host.as_ref().map(|h| h.now_ms()).unwrap_or(0)
    }

    /// The full original of a capped tool result, from the host's blob store; `None` when
    /// the host has none (or is older), and the capped text is kept instead.
    fn original(&self, reference: &str) -> Option<String> {
        let host = self.host.as_ref()?;
        match host.get_blob(reference) {
            Ok(found) => found.map(|b| b.content),
            Err(e) => {
                self.log(
                    LogLevel::Warn,
                    "a capped result's original could not be read; its capped text is kept",
                    serde_json::json!({"reference": reference, "error": e.to_string()}),
                );
                None
            }
        }
    }

    fn log(&self, level: LogLevel, message: &str, fields: serde_json::Value) {
        if let Some(host) = &self.host {
            host.log(level, "rampart_lossless", message, &fields);
        }
    }

    /// Runs `f` with the store and conversation of a session, loading them on first use.
    pub fn with_conv<R>(
        &self,
        session_id: &str,
        session_key: Option<&str>,
        f: impl FnOnce(&mut Store, &mut Conv, &mut State) -> Result<R, EngineError>,
    ) -> Result<R, EngineError> {
        self.with_session(
            &SessionRef {
                session_id: session_id.to_string(),
                session_key: session_key.map(str::to_string),
                ..SessionRef::default()
            },
            f,
        )
    }

    /// [`Self::with_conv`] for the session a call names: a session started over
    /// (`previousSessionId`) gets a new conversation that carries over part of the old one's
    /// context ([`conv::carry_over`]).
    pub fn with_session<R>(
        &self,
        session: &SessionRef,
        f: impl FnOnce(&mut Store, &mut Conv, &mut State) -> Result<R, EngineError>,
    ) -> Result<R, EngineError> {
        let session_id = session.session_id.as_str();
        let session_key = session.session_key.as_deref();
        let mut state = self.lock()?;
        let agent = agent_of(session_key);
        let now = self.now();
        if !state.stores.contains_key(&agent) {
            let path = self
                .config
                .resolved_state_dir()?
                .join(format!("{agent}.sqlite"));
            let (store, opened) = Store::open(&path, now)?;
            if let Opened::MovedAside(aside) = opened {
                self.log(
                    LogLevel::Warn,
                    "the lossless database could not be read; it was moved aside and is rebuilt \
                     from the sessions",
                    serde_json::json!({"path": path.display().to_string(), "movedTo": aside.display().to_string()}),
                );
            }
            state.stores.insert(agent.clone(), store);
        }
        let mut store = state
            .stores
            .remove(&agent)
            .ok_or_else(|| db("open the store", "it vanished"))?;
        let conv = match state.convs.remove(session_id) {
            Some(c) if c.agent == agent => Ok(c),
            _ => store
                .conversation(session_id, session.previous_session_id.as_deref(), now)
                .and_then(|id| conv::load(&store, id, &agent, self.sizes())),
        };
        let result = conv.and_then(|mut conv| {
            let r = f(&mut store, &mut conv, &mut state);
            state.convs.insert(session_id.to_string(), conv);
            r
        });
        state.stores.insert(agent, store);
        result
    }

    fn sweep(
        &self,
        cx: &CallContext<'_>,
        session_id: &str,
        store: &mut Store,
        conv: &mut Conv,
        state: &mut State,
        bounds: SweepBounds,
    ) -> Result<SweepOutcome, EngineError> {
        let SweepBounds {
            budget,
            pressed_tail,
            answer_room,
            prefix_target,
        } = bounds;
        let cancelled = || cx.is_cancelled();
        let outcome = Sweep {
            store,
            conv,
            config: &self.config,
            host: self.host.as_ref(),
            guards: &mut state.guards,
            session: session_id,
            now_ms: self.now(),
            cancelled: &cancelled,
            pressed_tail,
            answer_room,
            prefix_target,
        }
        .run(budget)?;
        if let Some(why) = &outcome.stopped {
            self.log(
                LogLevel::Warn,
                "a lossless sweep stopped early",
                serde_json::json!({"session": session_id, "reason": why}),
            );
        }
        Ok(outcome)
    }
}

impl EngineFactory for LosslessEngine {
    fn create(init: EngineInit, host: Host) -> Result<Self, EngineError> {
        let mut config = Config::from_json(&init.config)?;
        config.state_dir = config::state_dir_in_effect(config.state_dir.take(), host.state_dir()?);
        config.resolved_state_dir()?;
        Ok(Self::new(config, Some(host)))
    }
}

impl ContextEngine for LosslessEngine {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            id: LOSSLESS_ID.to_string(),
            name: "Lossless (summary DAG)".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            owns_compaction: true,
            // The recall tools (engine API 1.2): announced, so a 1.2 host offers them.
            protocol: ProtocolInfo {
                features: vec![Feature::EngineTools],
                ..ProtocolInfo::default()
            },
        }
    }

    /// Messages are persisted from the session's branch at `assemble` and `compact` (the
    /// record, after the host's hygiene), so a message is stored once however it arrives.
    fn ingest(&self, _cx: &CallContext<'_>, _p: IngestParams) -> Result<IngestResult, EngineError> {
        Ok(IngestResult {
            ingested: false,
            replacement: None,
        })
    }

    fn assemble(
        &self,
        _cx: &CallContext<'_>,
        p: AssembleParams,
    ) -> Result<AssembleResult, EngineError> {
        let budget = p.token_budget.unwrap_or(self.config.default_token_budget);
        let now = self.now();
        let sizes = self.sizes();
        self.with_session(&p.session, |store, conv, state| {
            conv.set_tool_result_max_chars(p.tool_result_max_chars);
            let done =
                conv::reconcile(store, conv, &p.messages, sizes, now, &|r| self.original(r))?;
            if done.rebuilt {
                self.log(
                    LogLevel::Warn,
                    "the lossless store disagreed with the session; rebuilt from the session",
                    serde_json::json!({"session": p.session.session_id}),
                );
            }
            let tail = tail_start(
                &conv.items,
                self.config.fresh_tail_count,
                self.config.fresh_tail_max_tokens,
            );
            let (first, used) = assemble::select(&conv.items, tail, budget);
            let mut out = Vec::with_capacity(conv.items.len() - first);
            for item in &conv.items[first..] {
                match &item.what {
                    ItemRef::Message { seq, .. } => match conv
                        .replaced
                        .get(seq)
                        .or_else(|| p.messages.get(*seq as usize))
                    {
                        Some(m) => out.push(m.clone()),
                        None => {
                            return Err(db(
                                "assemble",
                                format!("message {seq} is not in the session's branch"),
                            ));
                        }
                    },
                    ItemRef::Summary { id, carried, .. } => {
                        // A carried summary renders apart (it says so), under its own key.
                        let key = if *carried {
                            format!("previous:{id}")
                        } else {
                            id.clone()
                        };
                        let message = match state.rendered.get(&key) {
                            Some(m) => m.clone(),
                            None => {
                                let row = render::summary(store, id)?;
                                let m = Arc::new(render::render(&row, *carried));
                                state.rendered.insert(key, m.clone());
                                m
                            }
                        };
                        out.push(message);
                    }
                    ItemRef::Carried { id } => {
                        let key = format!("msg#{id}");
                        let message = match state.rendered.get(&key) {
                            Some(m) => m.clone(),
                            None => {
                                let m = Arc::new(conv::stored_message(store, *id)?);
                                state.rendered.insert(key, m.clone());
                                m
                            }
                        };
                        out.push(message);
                    }
                }
            }
            Ok(AssembleResult {
                messages: out.into(),
                estimated_tokens: used,
                system_prompt_addition: None,
            })
        })
    }

    /// The recall tools, in every session: the same three whether or not anything was
    /// compacted yet, so the tool list (part of the cached prefix) never changes mid-session.
    fn tools_list(
        &self,
        _cx: &CallContext<'_>,
        _p: ToolsListParams,
    ) -> Result<ToolsListResult, EngineError> {
        Ok(ToolsListResult {
            tools: tools::specs(),
        })
    }

    fn tools_call(
        &self,
        _cx: &CallContext<'_>,
        p: ToolCallParams,
    ) -> Result<ToolCallResult, EngineError> {
        // A name that is none of the tools is answered without opening (or creating) the
        // session's conversation.
        if !tools::specs().iter().any(|t| t.name == p.name) {
            return tools::call_unknown(&p.name);
        }
        self.with_session(&p.session, |store, conv, _state| {
            tools::call(store, conv.id, &p.name, &p.arguments)
        })
    }

    fn after_turn(
        &self,
        cx: &CallContext<'_>,
        p: AfterTurnParams,
    ) -> Result<AfterTurnResult, EngineError> {
        if p.is_heartbeat {
            return Ok(AfterTurnResult {});
        }
        let budget = p.token_budget.unwrap_or(self.config.default_token_budget);
        let session = p.session.session_id.clone();
        self.with_session(&p.session, |store, conv, state| {
            conv.set_tool_result_max_chars(p.tool_result_max_chars);
            // The answer joins the store now (lossless-claw's afterTurn ingests the turn),
            // when the request ended with the newest stored message.
            if let [.., before, answer] = &p.messages[..] {
                conv::append_answer(
                    store,
                    conv,
                    before,
                    answer,
                    self.sizes(),
                    self.now(),
                    &|r| self.original(r),
                )?;
            }
            // lossless-claw's trigger: the stored count or what the host saw the request
            // hold (system prompt and tool schemas included), whichever is larger.
            let observed = p
                .runtime_context
                .get("promptTokens")
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0);
            if conv.stored_tokens().max(observed) <= self.config.threshold_tokens(budget) {
                return Ok(AfterTurnResult {});
            }
            let ordinary = SweepBounds::ordinary(budget);
            let swept = self.sweep(cx, &session, store, conv, state, ordinary)?;
            // Still over the sweep target: the fresh tail is most of the context (a long
            // tool loop in one user turn, or a tail of 64 messages in a small window).
            // Summarise its older part now, once, down to the target, rather than sweep
            // again at the next turn's crossing or let the assembler drop the oldest item
            // from the front of every request (each a prompt-cache break).
            let target = self.config.sweep_target_tokens(budget);
            if swept.stopped.is_none()
                && target < self.config.threshold_tokens(budget)
                && conv.stored_tokens() > target
            {
                let half = (target / 2).max(1);
                let pressed = SweepBounds {
                    budget,
                    pressed_tail: Some(half),
                    answer_room: Some(target),
                    prefix_target: Some(half),
                };
                let round = self.sweep(cx, &session, store, conv, state, pressed)?;
                self.log(
                    LogLevel::Debug,
                    "a sweep left the context over its target; the older part of the fresh tail \
                         was summarised down to it",
                    serde_json::json!({"session": session, "before": round.tokens_before,
                            "after": round.tokens_after, "target": target}),
                );
            }
            Ok(AfterTurnResult {})
        })
    }

    fn compact(
        &self,
        cx: &CallContext<'_>,
        p: CompactParams,
    ) -> Result<CompactResult, EngineError> {
        let budget = p
            .token_budget
            .or(p.model.as_ref().and_then(|m| m.context_window))
            .unwrap_or(self.config.default_token_budget);
        let now = self.now();
        let sizes = self.sizes();
        let session = p.session.session_id.clone();
        self.with_session(&p.session, |store, conv, state| {
            if !p.messages.is_empty() {
                conv::reconcile(store, conv, &p.messages, sizes, now, &|r| self.original(r))?;
            }
            let before = conv.stored_tokens();
            let observed = p
                .current_token_count
                .unwrap_or(if p.force { budget } else { before })
                .max(before);
            let threshold = self.config.threshold_tokens(budget);
            if !p.force && observed <= threshold {
                return Ok(CompactResult {
                    ok: true,
                    compacted: false,
                    reason: Some(format!(
                        "{observed} tokens are within the threshold of {threshold}"
                    )),
                    result: None,
                });
            }
            if p.force {
                state.guards.clear_spend(&session);
            }
            let (mut leaves, mut condensed, mut stopped) = (0, 0, None);
            // Overflow recovery may summarise inside the fresh tail once the ordinary
            // tail alone keeps the context over the threshold: then the tail is cut to
            // half the threshold ([`dag::pressed_tail_start`]).
            let mut pressed_tail = None;
            for _ in 0..MAX_OVERFLOW_ROUNDS {
                let bounds = SweepBounds {
                    budget,
                    pressed_tail,
                    answer_room: None,
                    prefix_target: None,
                };
                let round = self.sweep(cx, &session, store, conv, state, bounds)?;
                leaves += round.leaves;
                condensed += round.condensed;
                let progress = round.tokens_after < round.tokens_before;
                stopped = round.stopped;
                if conv.stored_tokens() <= threshold {
                    break;
                }
                if !progress {
                    if p.force && pressed_tail.is_none() && stopped.is_none() {
                        pressed_tail = Some((threshold / 2).max(1));
                        continue;
                    }
                    break;
                }
            }
            let after = conv.stored_tokens();
            let compacted = after < before;
            Ok(CompactResult {
                ok: compacted || stopped.is_none(),
                compacted,
                reason: if compacted {
                    None
                } else {
                    Some(stopped.unwrap_or_else(|| {
                        "nothing outside the fresh tail to summarise".to_string()
                    }))
                },
                result: compacted.then(|| CompactionOutcome {
                    summary: None,
                    first_kept_entry_id: None,
                    tokens_before: before,
                    tokens_after: Some(after),
                    details: serde_json::json!({"leaves": leaves, "condensed": condensed}),
                }),
            })
        })
    }
}

/// What bounds one sweep: the token budget, and under overflow pressure the tail's token cap
/// ([`dag::pressed_tail_start`]).
#[derive(Debug, Clone, Copy)]
struct SweepBounds {
    budget: u64,
    pressed_tail: Option<u64>,
    answer_room: Option<u64>,
    prefix_target: Option<u64>,
}

impl SweepBounds {
    /// lossless-claw's sweep: the ordinary fresh tail, the configured summary-prefix target.
    fn ordinary(budget: u64) -> Self {
        Self {
            budget,
            pressed_tail: None,
            answer_room: None,
            prefix_target: None,
        }
    }
}

rampart_engine_api::export_engine!(LosslessEngine);

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "lib_tests.rs"]
mod tests;
