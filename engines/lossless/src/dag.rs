//! The summary DAG's lifecycle: the fresh tail, leaf passes over chunks of raw messages,
//! condensed passes over runs of same-depth summaries, and the bounded sweep that runs them.
//!
//! Why sweeps and not per-turn passes: a pass rewrites the prompt prefix, so passes run only
//! when the threshold is crossed (or on overflow), all at once, and the prefix breaks about
//! once per crossing instead of every turn (§2.2 and §6.8 of the reference).

use std::ops::Range;
use std::time::Instant;

use rampart_engine_api::{AgentMessage, EngineError, Host};
use rusqlite::params;

use crate::config::Config;
use crate::conv::{Conv, Item, ItemRef, Role};
use crate::render::{SummaryRow, render, summary};
use crate::store::{Store, db};
use crate::summarize::{Guards, Refusal, Request, summarize};
use crate::text::{hash_hex, text_tokens, utc_minute};

/// Index of the first item of the fresh tail. Walks raw messages from the newest, protecting
/// `count` of them, then keeps going until the newest user message is in, so a user turn is
/// never split from what answered it; `max_tokens` stops the walk before a message that
/// would pass it, once the newest user message and one message are in. The tail never starts
/// on a tool result whose call is outside it.
pub fn tail_start(items: &[Item], count: usize, max_tokens: Option<u64>) -> usize {
    let mut start = items.len();
    let (mut taken, mut tokens, mut seen_user) = (0usize, 0u64, false);
    for (i, item) in items.iter().enumerate().rev() {
        if item.is_summary() {
            break;
        }
        if taken >= count && seen_user {
            break;
        }
        if let Some(cap) = max_tokens
            && seen_user
            && taken >= 1
            && tokens + item.tokens > cap
        {
            break;
        }
        start = i;
        taken += 1;
        tokens += item.tokens;
        seen_user |= item.role == Role::User;
    }
    with_its_call(items, start)
}

/// The next leaf chunk: the oldest run of raw messages before `tail`, ending at the first
/// summary, or when the next message would pass `chunk_tokens`, or once it reaches them. A
/// chunk has at least one message, and never ends between a tool call and its results.
pub fn leaf_chunk(items: &[Item], tail: usize, chunk_tokens: u64) -> Option<Range<usize>> {
    let start = items[..tail].iter().position(|i| !i.is_summary())?;
    let mut end = start;
    let mut tokens = 0u64;
    while end < tail && !items[end].is_summary() {
        let next = items[end].tokens;
        let continues_unit = items[end].role == Role::ToolResult;
        if end > start
            && !continues_unit
            && (tokens >= chunk_tokens || tokens + next > chunk_tokens)
        {
            break;
        }
        tokens += next;
        end += 1;
    }
    Some(start..end)
}

/// Tokens of the summaries before the tail: what condensation tries to keep under target.
pub fn summary_prefix_tokens(items: &[Item], tail: usize) -> u64 {
    items[..tail]
        .iter()
        .filter(|i| i.is_summary())
        .map(|i| i.tokens)
        .sum()
}

fn depth(item: &Item) -> Option<u32> {
    match &item.what {
        ItemRef::Summary { depth, .. } => Some(*depth),
        ItemRef::Message { .. } | ItemRef::Carried { .. } => None,
    }
}

/// The run to condense: at the shallowest depth that has an eligible one, the run starting
/// at that depth's oldest summary before `tail` and extending over same-depth summaries up to
/// `chunk_tokens`. Eligible: at least `fanout(depth)` summaries and `min_tokens` tokens.
/// `max_depth` caps the source depth (routine passes); `None` is the pressure loop.
pub fn condense_candidate(
    items: &[Item],
    tail: usize,
    chunk_tokens: u64,
    min_tokens: u64,
    fanout: impl Fn(u32) -> usize,
    max_depth: Option<u32>,
) -> Option<Range<usize>> {
    let mut depths: Vec<u32> = items[..tail].iter().filter_map(depth).collect();
    depths.sort_unstable();
    depths.dedup();
    for d in depths {
        if max_depth.is_some_and(|m| d >= m) {
            break;
        }
        let Some(start) = items[..tail].iter().position(|i| depth(i) == Some(d)) else {
            continue;
        };
        let mut end = start;
        let mut tokens = 0u64;
        while end < tail && depth(&items[end]) == Some(d) {
            if end > start && tokens + items[end].tokens > chunk_tokens {
                break;
            }
            tokens += items[end].tokens;
            end += 1;
        }
        if end - start >= fanout(d).max(2) && tokens >= min_tokens {
            return Some(start..end);
        }
    }
    None
}

/// What a sweep did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepOutcome {
    /// Leaf summaries written.
    pub leaves: u32,
    /// Condensed summaries written.
    pub condensed: u32,
    /// Stored context tokens before.
    pub tokens_before: u64,
    /// Stored context tokens after.
    pub tokens_after: u64,
    /// Why the sweep stopped early (refusal, pass limit, deadline), when it did.
    pub stopped: Option<String>,
}

/// `start`, moved back over tool results so that a call is never split from its results.
fn with_its_call(items: &[Item], mut start: usize) -> usize {
    while start > 0
        && start < items.len()
        && items[start].role == Role::ToolResult
        && !items[start - 1].is_summary()
    {
        start -= 1;
    }
    start
}

/// The start of the tail under overflow pressure: the newest raw messages within
/// `max_tokens` (at least one, a tool call with its results kept together), without the rule
/// that keeps the newest user turn whole. Overflow recovery uses it when the fresh tail alone
/// is over the threshold (a long tool loop inside one user turn): the older part of that turn
/// is summarised, so the request fits the window instead of failing. Once a summary sits inside
/// the turn, the ordinary tail starts after it ([`tail_start`] stops at summaries), so the
/// assembler and later sweeps agree.
///
/// With `answer_room`, the tail is empty when the newest item is larger than that room and
/// opens no unit (neither a user message nor part of a tool exchange: a final answer, or a
/// message the host added): a sweep after a turn that must bring the context down to its
/// target cannot do so while such a message stays verbatim, so the context would cross the
/// threshold again within a few turns and be swept then, a second prompt-cache break for the
/// same message. Summarised now, it stays in the store, one `lcm_describe` away.
pub fn pressed_tail_start(items: &[Item], max_tokens: u64, answer_room: Option<u64>) -> usize {
    if let (Some(room), Some(last)) = (answer_room, items.last())
        && last.role == Role::Other
        && !last.is_summary()
        && last.tokens > room
    {
        return items.len();
    }
    let mut start = items.len();
    let mut tokens = 0u64;
    for (i, item) in items.iter().enumerate().rev() {
        if item.is_summary() {
            break;
        }
        if start < items.len() && tokens + item.tokens > max_tokens {
            break;
        }
        start = i;
        tokens += item.tokens;
    }
    with_its_call(items, start)
}

/// Everything a pass needs.
pub struct Sweep<'a> {
    /// The agent's database.
    pub store: &'a mut Store,
    /// The conversation.
    pub conv: &'a mut Conv,
    /// Settings.
    pub config: &'a Config,
    /// The host (for `llm.complete`), when there is one.
    pub host: Option<&'a Host>,
    /// Spend and auth guards.
    pub guards: &'a mut Guards,
    /// The session id.
    pub session: &'a str,
    /// The host's clock.
    pub now_ms: u64,
    /// True once the host cancelled the call.
    pub cancelled: &'a dyn Fn() -> bool,
    /// Under overflow pressure: the tail is at most this many tokens
    /// ([`pressed_tail_start`]); `None` for the ordinary fresh tail.
    pub pressed_tail: Option<u64>,
    /// With `pressed_tail`: a newest message that opens no unit (a final answer) and is larger
    /// than this many tokens is not kept in the tail ([`pressed_tail_start`]); `None` keeps at
    /// least one message.
    pub answer_room: Option<u64>,
    /// The summary-prefix size condensation works down to; `None` for
    /// [`Config::summary_prefix_target`] (a sweep that must leave room, after a turn whose
    /// tail kept the context over the threshold, asks for less).
    pub prefix_target: Option<u64>,
}

impl Sweep<'_> {
    /// A full sweep: leaf passes over every chunk outside the tail, then condensation while
    /// the summaries before the tail exceed their target. Bounded by `maxSweepIterations`
    /// passes and `sweepDeadlineMs`; a partial sweep leaves a consistent state, and the next
    /// one continues from it.
    pub fn run(&mut self, budget: u64) -> Result<SweepOutcome, EngineError> {
        let started = Instant::now();
        let mut out = SweepOutcome {
            tokens_before: self.conv.stored_tokens(),
            ..Default::default()
        };
        let mut passes = 0usize;
        let limit = |passes: usize, out: &mut SweepOutcome, this: &Self| -> bool {
            let why = if passes >= this.config.max_sweep_iterations {
                Some("the pass limit of this sweep (maxSweepIterations) was reached")
            } else if started.elapsed().as_millis() as u64 >= this.config.sweep_deadline_ms {
                Some("the sweep deadline (sweepDeadlineMs) passed")
            } else if (this.cancelled)() {
                Some("the host cancelled the call")
            } else {
                None
            };
            if let Some(why) = why {
                out.stopped = Some(why.to_string());
            }
            why.is_some()
        };
        loop {
            if limit(passes, &mut out, self) {
                out.tokens_after = self.conv.stored_tokens();
                return Ok(out);
            }
            let tail = self.tail();
            let Some(chunk) = leaf_chunk(&self.conv.items, tail, self.config.leaf_chunk_tokens)
            else {
                break;
            };
            if let Err(refusal) = self.leaf_pass(chunk)? {
                out.stopped = Some(refusal.to_string());
                out.tokens_after = self.conv.stored_tokens();
                return Ok(out);
            }
            passes += 1;
            out.leaves += 1;
        }
        let target = self
            .prefix_target
            .unwrap_or_else(|| self.config.summary_prefix_target(budget));
        let min_tokens = self
            .config
            .condensed_target_tokens
            .max(self.config.leaf_chunk_tokens / 10);
        let routine_cap = u32::try_from(self.config.sweep_max_depth).ok();
        for pressure in [false, true] {
            loop {
                let tail = self.tail();
                if summary_prefix_tokens(&self.conv.items, tail) <= target {
                    break;
                }
                if limit(passes, &mut out, self) {
                    out.tokens_after = self.conv.stored_tokens();
                    return Ok(out);
                }
                let config = self.config;
                let fanout = |d: u32| {
                    if pressure {
                        config.condensed_min_fanout_hard
                    } else if d == 0 {
                        config.leaf_min_fanout
                    } else {
                        config.condensed_min_fanout
                    }
                };
                let Some(run) = condense_candidate(
                    &self.conv.items,
                    tail,
                    self.config.leaf_chunk_tokens,
                    min_tokens,
                    fanout,
                    if pressure { None } else { routine_cap },
                ) else {
                    break;
                };
                if let Err(refusal) = self.condensed_pass(run)? {
                    out.stopped = Some(refusal.to_string());
                    out.tokens_after = self.conv.stored_tokens();
                    return Ok(out);
                }
                passes += 1;
                out.condensed += 1;
            }
        }
        out.tokens_after = self.conv.stored_tokens();
        Ok(out)
    }

    fn tail(&self) -> usize {
        match self.pressed_tail {
            Some(cap) => pressed_tail_start(&self.conv.items, cap, self.answer_room),
            None => tail_start(
                &self.conv.items,
                self.config.fresh_tail_count,
                self.config.fresh_tail_max_tokens,
            ),
        }
    }

    /// Up to two summaries before `start`, for continuity.
    fn previous(&self, start: usize) -> Result<Vec<String>, EngineError> {
        let mut out = Vec::new();
        for item in self.conv.items[..start].iter().rev() {
            if let ItemRef::Summary { id, .. } = &item.what {
                out.push(summary(self.store, id)?.content);
                if out.len() == 2 {
                    break;
                }
            }
        }
        out.reverse();
        Ok(out)
    }

    /// One leaf pass over `chunk`: summarise, store the leaf with its links, swap the range.
    pub fn leaf_pass(&mut self, chunk: Range<usize>) -> Result<Result<(), Refusal>, EngineError> {
        let ids: Vec<i64> = self.conv.items[chunk.clone()]
            .iter()
            .filter_map(|i| match i.what {
                ItemRef::Message { id, .. } | ItemRef::Carried { id } => Some(id),
                ItemRef::Summary { .. } => None,
            })
            .collect();
        let mut segments = Vec::with_capacity(ids.len());
        let (mut earliest, mut latest, mut source_tokens) = (u64::MAX, 0u64, 0u64);
        {
            let mut stmt = self
                .store
                .conn()
                .prepare_cached(
                    "SELECT m.role, m.content, m.token_count, m.created_at, m.large_file_id, \
                     f.tool_name, f.byte_size FROM messages m \
                     LEFT JOIN large_files f ON f.file_id = m.large_file_id \
                     WHERE m.message_id = ?1",
                )
                .map_err(|e| db("prepare reading a chunk", e))?;
            for id in &ids {
                let (role, content, tokens, created, file, tool, bytes): (
                    String,
                    String,
                    i64,
                    i64,
                    Option<String>,
                    Option<String>,
                    Option<i64>,
                ) = stmt
                    .query_row([id], |r| {
                        Ok((
                            r.get(0)?,
                            r.get(1)?,
                            r.get(2)?,
                            r.get(3)?,
                            r.get(4)?,
                            r.get(5)?,
                            r.get(6)?,
                        ))
                    })
                    .map_err(|e| db("read a chunk message", e))?;
                earliest = earliest.min(created as u64);
                latest = latest.max(created as u64);
                source_tokens += tokens as u64;
                let body = match file {
                    // A user message's stored files: summarised from what the model was sent
                    // (the references and outlines), never the bytes themselves.
                    Some(_) if role == "user" => {
                        let message: Option<AgentMessage> = self
                            .store
                            .conn()
                            .query_row(
                                "SELECT raw_json FROM messages WHERE message_id = ?1",
                                [id],
                                |r| r.get::<_, String>(0),
                            )
                            .ok()
                            .and_then(|raw| serde_json::from_str(&raw).ok());
                        message
                            .as_ref()
                            .and_then(|m| {
                                crate::files::referenced(
                                    m,
                                    self.conv.id,
                                    self.config.large_file_threshold_tokens,
                                )
                            })
                            .map(|(sent, _)| crate::conv::flat_text(&sent))
                            .unwrap_or_else(|| {
                                crate::text::cut_to_tokens(&content, 500).to_string()
                            })
                    }
                    Some(file) => format!(
                        "[Tool output {file} | tool={} | {} bytes, stored aside]\n{}",
                        tool.unwrap_or_default(),
                        bytes.unwrap_or(0),
                        crate::text::cut_to_tokens(&content, 500)
                    ),
                    None => content,
                };
                segments.push(format!("[{} {role}]\n{body}", utc_minute(created as u64)));
            }
        }
        let previous = self.previous(chunk.start)?;
        let written = match summarize(
            self.config,
            self.host,
            self.guards,
            &Request {
                depth: 0,
                segments: &segments,
                previous: &previous,
                session: self.session,
                now_ms: self.now_ms,
            },
        ) {
            Ok(w) => w,
            Err(refusal) => return Ok(Err(refusal)),
        };
        let id_list: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
        let row = SummaryRow {
            id: format!(
                "sum_{}",
                hash_hex(&[
                    &self.conv.id.to_le_bytes(),
                    b"leaf",
                    id_list.join(",").as_bytes(),
                    written.content.as_bytes()
                ])
            ),
            conversation_id: self.conv.id,
            kind: "leaf".into(),
            depth: 0,
            token_count: text_tokens(&written.content),
            content: written.content,
            earliest_at: if earliest == u64::MAX { 0 } else { earliest },
            latest_at: latest,
            descendant_count: 0,
            descendant_token_count: 0,
            source_message_token_count: source_tokens,
            level: written.level.as_str().into(),
            model: written.model,
            sources: Vec::new(),
        };
        self.replace(chunk, row, &ids)?;
        Ok(Ok(()))
    }

    /// One condensed pass over the same-depth summaries in `run`.
    pub fn condensed_pass(
        &mut self,
        run: Range<usize>,
    ) -> Result<Result<(), Refusal>, EngineError> {
        let mut rows = Vec::new();
        for item in &self.conv.items[run.clone()] {
            if let ItemRef::Summary { id, .. } = &item.what {
                rows.push(summary(self.store, id)?);
            }
        }
        let depth = rows.first().map(|r| r.depth).unwrap_or(0) + 1;
        let segments: Vec<String> = rows
            .iter()
            .map(|r| {
                format!(
                    "[{} – {}]\n{}",
                    utc_minute(r.earliest_at),
                    utc_minute(r.latest_at),
                    r.content
                )
            })
            .collect();
        let previous = if depth == 1 {
            self.previous(run.start)?
        } else {
            Vec::new()
        };
        let written = match summarize(
            self.config,
            self.host,
            self.guards,
            &Request {
                depth,
                segments: &segments,
                previous: &previous,
                session: self.session,
                now_ms: self.now_ms,
            },
        ) {
            Ok(w) => w,
            Err(refusal) => return Ok(Err(refusal)),
        };
        let sources: Vec<String> = rows.iter().map(|r| r.id.clone()).collect();
        let row = SummaryRow {
            id: format!(
                "sum_{}",
                hash_hex(&[
                    &self.conv.id.to_le_bytes(),
                    b"condensed",
                    sources.join(",").as_bytes(),
                    written.content.as_bytes()
                ])
            ),
            conversation_id: self.conv.id,
            kind: "condensed".into(),
            depth,
            token_count: text_tokens(&written.content),
            content: written.content,
            earliest_at: rows.iter().map(|r| r.earliest_at).min().unwrap_or(0),
            latest_at: rows.iter().map(|r| r.latest_at).max().unwrap_or(0),
            descendant_count: rows.iter().map(|r| r.descendant_count + 1).sum(),
            descendant_token_count: rows
                .iter()
                .map(|r| r.token_count + r.descendant_token_count)
                .sum(),
            source_message_token_count: rows.iter().map(|r| r.source_message_token_count).sum(),
            level: written.level.as_str().into(),
            model: written.model,
            sources,
        };
        self.replace(run, row, &[])?;
        Ok(Ok(()))
    }

    /// Stores `row` with its edges and replaces the items in `range` by it, renumbering the
    /// ordinals 0..n-1, in one transaction.
    fn replace(
        &mut self,
        range: Range<usize>,
        row: SummaryRow,
        message_ids: &[i64],
    ) -> Result<(), EngineError> {
        let tokens = rampart_engine_api::tokens::estimate_message_tokens(&render(&row, false));
        let mut items = self.conv.items.clone();
        items.splice(
            range,
            [Item::new(
                ItemRef::Summary {
                    id: row.id.clone(),
                    depth: row.depth,
                    carried: false,
                },
                tokens,
                Role::Other,
                None,
            )],
        );
        let conv_id = self.conv.id;
        let tx = self
            .store
            .conn_mut()
            .transaction()
            .map_err(|e| db("begin a pass", e))?;
        tx.execute(
            "INSERT INTO summaries (summary_id, conversation_id, kind, depth, content, \
             token_count, earliest_at, latest_at, descendant_count, descendant_token_count, \
             source_message_token_count, level, model, created_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
            params![
                row.id,
                conv_id,
                row.kind,
                row.depth,
                row.content,
                row.token_count as i64,
                row.earliest_at as i64,
                row.latest_at as i64,
                row.descendant_count as i64,
                row.descendant_token_count as i64,
                row.source_message_token_count as i64,
                row.level,
                row.model,
                self.now_ms as i64
            ],
        )
        .map_err(|e| db("store a summary", e))?;
        tx.execute(
            "INSERT INTO summaries_fts (summary_id, content) VALUES (?1, ?2)",
            params![row.id, row.content],
        )
        .map_err(|e| db("index a summary", e))?;
        for (i, m) in message_ids.iter().enumerate() {
            tx.execute(
                "INSERT INTO summary_messages (summary_id, message_id, ordinal) VALUES (?1, ?2, ?3)",
                params![row.id, m, i as i64],
            )
            .map_err(|e| db("link a leaf to a message", e))?;
        }
        for (i, s) in row.sources.iter().enumerate() {
            tx.execute(
                "INSERT INTO summary_sources (summary_id, source_id, ordinal) VALUES (?1, ?2, ?3)",
                params![row.id, s, i as i64],
            )
            .map_err(|e| db("link a summary to a source", e))?;
        }
        tx.execute(
            "DELETE FROM context_items WHERE conversation_id = ?1",
            [conv_id],
        )
        .map_err(|e| db("clear context items", e))?;
        {
            let mut stmt = tx
                .prepare_cached(
                    "INSERT INTO context_items (conversation_id, ordinal, message_id, summary_id) \
                     VALUES (?1, ?2, ?3, ?4)",
                )
                .map_err(|e| db("prepare writing items", e))?;
            for (ordinal, item) in items.iter().enumerate() {
                let (m, s) = match &item.what {
                    ItemRef::Message { id, .. } | ItemRef::Carried { id } => (Some(*id), None),
                    ItemRef::Summary { id, .. } => (None, Some(id.as_str())),
                };
                stmt.execute(params![conv_id, ordinal as i64, m, s])
                    .map_err(|e| db("write a context item", e))?;
            }
        }
        tx.commit().map_err(|e| db("commit a pass", e))?;
        self.conv.items = items;
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "dag_tests.rs"]
mod tests;
