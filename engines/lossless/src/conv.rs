//! One conversation in memory: its context items (what the model sees before the budget),
//! kept in step with the database, and how new messages from the session are persisted.
//!
//! Why a cache: a turn must cost a walk over the items near the end, not a rescan of a
//! million stored tokens. The items are loaded once per process and updated in place by
//! ingest and by the DAG passes, each of which also writes them through.

use rampart_engine_api::message::{Content, ContentBlock};
use rampart_engine_api::tokens::estimate_message_tokens;
use rampart_engine_api::{AgentMessage, EngineError, SharedMessage};
use std::collections::HashMap;

use rusqlite::params;

use crate::store::{Store, db};
use crate::text::{hash_hex, hash64, text_tokens};

/// What a context item refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ItemRef {
    /// A raw message: its position in the session branch and its row id.
    Message {
        /// Position in the session's branch (0-based), which is also its index in the
        /// messages the host passes to `assemble`.
        seq: u64,
        /// Row id in `messages`.
        id: i64,
    },
    /// A summary node.
    Summary {
        /// `sum_…` id.
        id: String,
        /// 0 for a leaf.
        depth: u32,
        /// True when it belongs to the conversation this one replaced (`/new`): rendered with
        /// `session="previous"`, so the model does not take it for what was said in this one.
        carried: bool,
    },
    /// A raw message of the conversation this one replaced (`/new` with
    /// `newSessionRetainDepth = -1`): not in this session's branch, so it is sent as stored.
    Carried {
        /// Row id in `messages`.
        id: i64,
    },
}

/// The role class of an item, which the fresh tail and the tool-unit rules need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A user message.
    User,
    /// An assistant message that calls tools (opens a unit).
    AssistantCalls,
    /// A tool result (belongs to the unit before it).
    ToolResult,
    /// Anything else, summaries included.
    Other,
}

/// One context item with its cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// What it is.
    pub what: ItemRef,
    /// Estimated tokens of it in a request (rendered, for a summary; a tool result cut to what
    /// the host leaves of one, [`Conv::set_tool_result_max_chars`]). Every budget decision
    /// (threshold, tail, assembly, chunks) counts this.
    pub tokens: u64,
    /// Estimated tokens of the item whole: `tokens` before the host's cut.
    pub whole: u64,
    /// Role class.
    pub role: Role,
}

impl Item {
    /// An item costing `whole` tokens, counted in a request as the host's cut of tool results
    /// (`cap`, in tokens) leaves it.
    pub fn new(what: ItemRef, whole: u64, role: Role, cap: Option<u64>) -> Self {
        Self {
            tokens: sent_tokens(whole, role, cap),
            what,
            whole,
            role,
        }
    }

    /// True for a summary item.
    pub fn is_summary(&self) -> bool {
        matches!(self.what, ItemRef::Summary { .. })
    }
}

/// What an item of `whole` tokens costs in a request whose tool results the host cuts to
/// `cap` tokens.
fn sent_tokens(whole: u64, role: Role, cap: Option<u64>) -> u64 {
    match cap {
        Some(cap) if role == Role::ToolResult => whole.min(cap),
        _ => whole,
    }
}

/// One conversation's state.
#[derive(Debug, Clone)]
pub struct Conv {
    /// Row id in `conversations`.
    pub id: i64,
    /// The agent whose database holds it.
    pub agent: String,
    /// Context items in order.
    pub items: Vec<Item>,
    /// How many messages of the session are stored (the next seq).
    pub stored: u64,
    /// Identity hash of the newest stored message, the anchor checked on every turn.
    pub last_hash: Option<u64>,
    /// User messages sent with their large `<file>` blocks replaced by references
    /// ([`crate::files`]), by position in the branch; every other message is sent as the
    /// session has it.
    pub replaced: HashMap<u64, SharedMessage>,
    /// The tokens the host leaves of one tool result in a request (from the last call's
    /// `tool_result_max_chars`); `None` when it sends them whole.
    pub tool_result_cap: Option<u64>,
}

/// The sizes above which content is stored aside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    /// A tool output (`largeToolOutputTokens`).
    pub tool_output: u64,
    /// A `<file>` block in a user message (`largeFileThresholdTokens`).
    pub file: u64,
    /// What a session started over begins with (`newSessionRetainDepth`, see [`carry_over`]).
    pub retain_depth: i64,
}

impl Conv {
    /// Takes the host's cut of tool results for this call (`tool_result_max_chars` of
    /// `assemble` or `after_turn`, in characters): every tool result is then counted as what
    /// the model is sent of it. Why: a result the host cuts to 16,000 characters counted as
    /// its whole 40,000 made the context look full turns early, so sweeps (each a break of the
    /// provider's prompt cache) ran while requests were at half the budget, and the assembler
    /// dropped items a request had room for.
    pub fn set_tool_result_max_chars(&mut self, chars: Option<u64>) {
        self.set_tool_result_cap(
            chars.map(|c| c.div_ceil(rampart_engine_api::tokens::CHARS_PER_TOKEN)),
        );
    }

    /// [`Conv::set_tool_result_max_chars`] in tokens: every item counted anew when it changed.
    pub fn set_tool_result_cap(&mut self, cap: Option<u64>) {
        if cap == self.tool_result_cap {
            return;
        }
        self.tool_result_cap = cap;
        for item in &mut self.items {
            item.tokens = sent_tokens(item.whole, item.role, cap);
        }
    }

    /// Sum of the items' tokens: what the context would cost unbudgeted.
    pub fn stored_tokens(&self) -> u64 {
        self.items.iter().map(|i| i.tokens).sum()
    }
}

/// The class of a message for the tail and unit rules.
pub fn role_of(message: &AgentMessage) -> Role {
    match message {
        AgentMessage::User(_) => Role::User,
        AgentMessage::ToolResult(_) => Role::ToolResult,
        m if m.tool_calls().next().is_some() => Role::AssistantCalls,
        _ => Role::Other,
    }
}

/// The identity of a message: a hash of its JSON, so the same message always matches.
pub fn identity(message: &AgentMessage) -> Result<(u64, String), EngineError> {
    let json = serde_json::to_string(message).map_err(|e| db("encode a message", e))?;
    Ok((hash64(&[json.as_bytes()]), json))
}

/// Loads a conversation's items from the database.
pub fn load(store: &Store, id: i64, agent: &str, sizes: Sizes) -> Result<Conv, EngineError> {
    let conn = store.conn();
    let mut stmt = conn
        .prepare(
            "SELECT c.message_id, m.seq, m.raw_json, m.token_count, c.summary_id, s.depth, \
                    COALESCE(m.conversation_id, s.conversation_id) \
             FROM context_items c \
             LEFT JOIN messages m ON m.message_id = c.message_id \
             LEFT JOIN summaries s ON s.summary_id = c.summary_id \
             WHERE c.conversation_id = ?1 ORDER BY c.ordinal",
        )
        .map_err(|e| db("prepare loading items", e))?;
    let rows = stmt
        .query_map([id], |r| {
            Ok((
                r.get::<_, Option<i64>>(0)?,
                r.get::<_, Option<i64>>(1)?,
                r.get::<_, Option<String>>(2)?,
                r.get::<_, Option<i64>>(3)?,
                r.get::<_, Option<String>>(4)?,
                r.get::<_, Option<i64>>(5)?,
                r.get::<_, Option<i64>>(6)?,
            ))
        })
        .map_err(|e| db("load items", e))?;
    let mut items = Vec::new();
    let mut replaced = HashMap::new();
    for row in rows {
        let (mid, seq, raw, tokens, sid, depth, owner) = row.map_err(|e| db("read an item", e))?;
        match (mid, sid) {
            (Some(mid), _) if owner.is_some_and(|o| o != id) => {
                let role = raw
                    .as_deref()
                    .and_then(|r| serde_json::from_str::<AgentMessage>(r).ok())
                    .as_ref()
                    .map(role_of)
                    .unwrap_or(Role::Other);
                items.push(Item::new(
                    ItemRef::Carried { id: mid },
                    tokens.unwrap_or(0) as u64,
                    role,
                    None,
                ));
            }
            (Some(mid), _) => {
                let message = raw
                    .as_deref()
                    .and_then(|r| serde_json::from_str::<AgentMessage>(r).ok());
                let role = message.as_ref().map(role_of).unwrap_or(Role::Other);
                if let Some((sent, _)) = message
                    .as_ref()
                    .and_then(|m| crate::files::referenced(m, id, sizes.file))
                {
                    replaced.insert(seq.unwrap_or(0) as u64, sent);
                }
                items.push(Item::new(
                    ItemRef::Message {
                        seq: seq.unwrap_or(0) as u64,
                        id: mid,
                    },
                    tokens.unwrap_or(0) as u64,
                    role,
                    None,
                ));
            }
            (None, Some(sid)) => {
                let depth = depth.unwrap_or(0) as u32;
                let carried = owner.is_some_and(|o| o != id);
                let tokens = crate::render::rendered_tokens(store, &sid, carried)?;
                items.push(Item::new(
                    ItemRef::Summary {
                        id: sid,
                        depth,
                        carried,
                    },
                    tokens,
                    Role::Other,
                    None,
                ));
            }
            (None, None) => {}
        }
    }
    let last: Option<(i64, String)> = conn
        .query_row(
            "SELECT seq, identity_hash FROM messages WHERE conversation_id = ?1 \
             ORDER BY seq DESC LIMIT 1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .ok();
    let stored = last.as_ref().map(|(s, _)| *s as u64 + 1).unwrap_or(0);
    // A conversation that replaced another and holds nothing yet starts with what it carries
    // over; a rebuild (which cleared it) carries over again.
    if items.is_empty()
        && stored == 0
        && let Some(previous) = store.previous_of(id)?
        && carry_over(store, id, previous, sizes.retain_depth)? > 0
    {
        return load(store, id, agent, sizes);
    }
    Ok(Conv {
        id,
        agent: agent.to_string(),
        items,
        stored,
        last_hash: last.and_then(|(_, h)| u64::from_str_radix(&h, 16).ok()),
        replaced,
        tool_result_cap: None,
    })
}

/// Starts conversation `id` with the context of `previous`, the conversation it replaced
/// (§2.7 `/new`, reference case §8.17): the summary items of depth `retain_depth` or more, in
/// their order; with `0` every summary; with `-1` every item, raw messages too (nothing is
/// dropped from the context). The rows stay where they are and stay searchable through the
/// lineage ([`Store::lineage`]); only context items are written. Returns how many.
pub fn carry_over(
    store: &Store,
    id: i64,
    previous: i64,
    retain_depth: i64,
) -> Result<usize, EngineError> {
    // One statement: all of it is written or none.
    store
        .conn()
        .execute(
            "INSERT INTO context_items (conversation_id, ordinal, message_id, summary_id) \
             SELECT ?1, ROW_NUMBER() OVER (ORDER BY c.ordinal) - 1, c.message_id, c.summary_id \
             FROM context_items c LEFT JOIN summaries s ON s.summary_id = c.summary_id \
             WHERE c.conversation_id = ?2 \
               AND (?3 < 0 OR (c.summary_id IS NOT NULL AND s.depth >= ?3)) \
             ORDER BY c.ordinal",
            params![id, previous, retain_depth],
        )
        .map_err(|e| db("carry the previous context over", e))
}

/// A stored message as the session had it (its raw JSON): how a message carried over from the
/// conversation this one replaced is sent.
pub fn stored_message(store: &Store, id: i64) -> Result<AgentMessage, EngineError> {
    let raw: String = store
        .conn()
        .query_row(
            "SELECT raw_json FROM messages WHERE message_id = ?1",
            [id],
            |r| r.get(0),
        )
        .map_err(|e| db("read a carried message", e))?;
    serde_json::from_str(&raw).map_err(|e| db("decode a carried message", e))
}

/// What [`reconcile`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reconciled {
    /// Messages appended.
    pub appended: u64,
    /// True when the store disagreed with the session and was rebuilt from it.
    pub rebuilt: bool,
}

/// Brings the store in line with the session's branch `messages`: appends what is new. When
/// the newest stored message is not where the session has it (a lost, damaged or foreign
/// database, or a branch switch), the conversation is rebuilt from the session: the session
/// is the record, never the other way round. Costs O(new messages) on a normal turn.
pub fn reconcile(
    store: &mut Store,
    conv: &mut Conv,
    messages: &[SharedMessage],
    sizes: Sizes,
    now_ms: u64,
    original: &dyn Fn(&str) -> Option<String>,
) -> Result<Reconciled, EngineError> {
    let mut out = Reconciled::default();
    let n = conv.stored as usize;
    let agrees = if n == 0 {
        true
    } else if messages.len() < n {
        false
    } else {
        Some(identity(&messages[n - 1])?.0) == conv.last_hash
    };
    if !agrees {
        store.clear_conversation(conv.id)?;
        // What the conversation carried over from the one it replaced comes back with it.
        let cap = conv.tool_result_cap;
        *conv = load(store, conv.id, &conv.agent, sizes)?;
        // The reloaded items (what was carried over) are counted whole until the cut is set.
        conv.set_tool_result_cap(cap);
        out.rebuilt = true;
    }
    let start = conv.stored as usize;
    if start >= messages.len() {
        return Ok(out);
    }
    out.appended = append(
        store,
        conv,
        messages.iter().enumerate().skip(start),
        sizes,
        now_ms,
        original,
    )?;
    Ok(out)
}

/// Stores the turn's answer as soon as the turn ends (`after_turn`), when the message before
/// it is the newest stored one: the store then holds the whole conversation between turns, not
/// all but its last answer (what a session started over with `newSessionRetainDepth = -1`
/// carries, and what recall finds). Anything else waits for the next `assemble`'s
/// reconciliation with the session. Returns whether it was stored.
pub fn append_answer(
    store: &mut Store,
    conv: &mut Conv,
    before: &SharedMessage,
    answer: &SharedMessage,
    sizes: Sizes,
    now_ms: u64,
    original: &dyn Fn(&str) -> Option<String>,
) -> Result<bool, EngineError> {
    if conv.stored == 0 || Some(identity(before)?.0) != conv.last_hash {
        return Ok(false);
    }
    let seq = conv.stored as usize;
    append(
        store,
        conv,
        [(seq, answer)].into_iter(),
        sizes,
        now_ms,
        original,
    )?;
    Ok(true)
}

/// Appends `messages` (each with its position in the session's branch) to the store and the
/// context, in one transaction; returns how many.
fn append<'m>(
    store: &mut Store,
    conv: &mut Conv,
    messages: impl Iterator<Item = (usize, &'m SharedMessage)>,
    sizes: Sizes,
    now_ms: u64,
    original: &dyn Fn(&str) -> Option<String>,
) -> Result<u64, EngineError> {
    let mut appended = 0;
    let tx = store
        .conn_mut()
        .transaction()
        .map_err(|e| db("begin ingest", e))?;
    let first_ordinal = conv.items.len() as i64;
    for (ordinal, (seq, message)) in (first_ordinal..).zip(messages) {
        let (hash, json) = identity(message)?;
        // A result the host capped is stored with its full original (read back from the
        // host's blob store) as its text: what recall searches and describes. The message as
        // the session has it stays in `raw_json`, which is what assembly sends.
        let text = capped_original(message)
            .and_then(|reference| original(&reference))
            .unwrap_or_else(|| flat_text(message));
        let files = crate::files::referenced(message, conv.id, sizes.file);
        // A message sent with its files as references costs what is sent.
        let tokens = estimate_message_tokens(files.as_ref().map_or(&**message, |(sent, _)| sent));
        let created = message.timestamp().unwrap_or(now_ms) as i64;
        if let Some((_, blocks)) = &files {
            for block in blocks {
                tx.execute(
                    "INSERT OR IGNORE INTO large_files (file_id, conversation_id, tool_name, \
                     tool_call_id, byte_size, line_count, content, created_at, file_name, \
                     mime_type) VALUES (?1, ?2, '', '', ?3, ?4, ?5, ?6, ?7, ?8)",
                    params![
                        block.id,
                        conv.id,
                        block.content.len() as i64,
                        block.content.lines().count() as i64,
                        block.content,
                        created,
                        block.name,
                        block.mime
                    ],
                )
                .map_err(|e| db("store a large file", e))?;
            }
        }
        let large = match &**message {
            _ if files.is_some() => files
                .as_ref()
                .and_then(|(_, b)| b.first())
                .map(|b| b.id.clone()),
            AgentMessage::ToolResult(t) if text_tokens(&text) > sizes.tool_output => {
                let file_id = format!(
                    "file_{}",
                    hash_hex(&[
                        &conv.id.to_le_bytes(),
                        t.tool_name.as_bytes(),
                        t.tool_call_id.as_bytes(),
                        text.as_bytes()
                    ])
                );
                tx.execute(
                    "INSERT OR IGNORE INTO large_files (file_id, conversation_id, tool_name, \
                     tool_call_id, byte_size, line_count, content, created_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                    params![
                        file_id,
                        conv.id,
                        t.tool_name,
                        t.tool_call_id,
                        text.len() as i64,
                        text.lines().count() as i64,
                        text,
                        created
                    ],
                )
                .map_err(|e| db("store a large tool output", e))?;
                Some(file_id)
            }
            _ => None,
        };
        tx.execute(
            "INSERT INTO messages (conversation_id, seq, role, content, raw_json, token_count, \
             identity_hash, large_file_id, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                conv.id,
                seq as i64,
                message.role(),
                text,
                json,
                tokens as i64,
                format!("{hash:016x}"),
                large,
                created
            ],
        )
        .map_err(|e| db("store a message", e))?;
        let message_id = tx.last_insert_rowid();
        for (i, part) in parts(message).into_iter().enumerate() {
            tx.execute(
                "INSERT INTO message_parts (message_id, ordinal, part_type, text_content, \
                 tool_call_id, tool_name) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![message_id, i as i64, part.0, part.1, part.2, part.3],
            )
            .map_err(|e| db("store a message part", e))?;
        }
        tx.execute(
            "INSERT INTO messages_fts (rowid, content) VALUES (?1, ?2)",
            params![message_id, text],
        )
        .map_err(|e| db("index a message", e))?;
        tx.execute(
            "INSERT INTO context_items (conversation_id, ordinal, message_id) VALUES (?1, ?2, ?3)",
            params![conv.id, ordinal, message_id],
        )
        .map_err(|e| db("append a context item", e))?;
        conv.items.push(Item::new(
            ItemRef::Message {
                seq: seq as u64,
                id: message_id,
            },
            tokens,
            role_of(message),
            conv.tool_result_cap,
        ));
        if let Some((sent, _)) = files {
            conv.replaced.insert(seq as u64, sent);
        }
        conv.stored = seq as u64 + 1;
        conv.last_hash = Some(hash);
        appended += 1;
    }
    tx.commit().map_err(|e| db("commit ingest", e))?;
    Ok(appended)
}

/// The blob reference of a tool result the host capped ([`rampart_engine_api::message::ORIGINAL_BLOB_KEY`]).
pub fn capped_original(message: &AgentMessage) -> Option<String> {
    match message {
        AgentMessage::ToolResult(r) => r
            .extra
            .get(rampart_engine_api::message::ORIGINAL_BLOB_KEY)
            .and_then(|v| v.as_str())
            .map(str::to_owned),
        _ => None,
    }
}

/// The flat text of a message (text blocks, tool calls as `name(args)`; thinking left out,
/// because reasoning must not leak into summaries, §6.11).
pub fn flat_text(message: &AgentMessage) -> String {
    let blocks: &[ContentBlock] = match message {
        AgentMessage::User(m) => return content_text(&m.content),
        AgentMessage::ToolResult(m) => return content_text(&m.content),
        AgentMessage::Custom(m) => return content_text(&m.content),
        AgentMessage::Assistant(m) => &m.content,
        AgentMessage::CompactionSummary(m) => return m.summary.clone(),
        AgentMessage::BranchSummary(m) => return m.summary.clone(),
        AgentMessage::BashExecution(m) => return format!("$ {}\n{}", m.command, m.output),
        other => return serde_json::to_string(other).unwrap_or_default(),
    };
    blocks_text(blocks)
}

fn content_text(content: &Content) -> String {
    match content {
        Content::Text(t) => t.clone(),
        Content::Blocks(b) => blocks_text(b),
    }
}

fn blocks_text(blocks: &[ContentBlock]) -> String {
    let mut out = String::new();
    for block in blocks {
        let piece = match block {
            ContentBlock::Text(t) => t.text.clone(),
            ContentBlock::ToolCall(c) => format!("{}({})", c.name, c.arguments),
            ContentBlock::Image(_) => "[image]".to_string(),
            ContentBlock::Thinking(_) | ContentBlock::Other(_) => continue,
        };
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&piece);
    }
    out
}

/// One row of `message_parts`: type, text, tool call id, tool name.
type PartRow = (String, Option<String>, Option<String>, Option<String>);

/// The parts of a message, one per content block, so the original shape stays queryable.
fn parts(message: &AgentMessage) -> Vec<PartRow> {
    let (blocks, call_id, tool): (Vec<&ContentBlock>, Option<String>, Option<String>) =
        match message {
            AgentMessage::User(m) => (m.content.blocks().iter().collect(), None, None),
            AgentMessage::Custom(m) => (m.content.blocks().iter().collect(), None, None),
            AgentMessage::ToolResult(m) => (
                m.content.blocks().iter().collect(),
                Some(m.tool_call_id.clone()),
                Some(m.tool_name.clone()),
            ),
            AgentMessage::Assistant(m) => (m.content.iter().collect(), None, None),
            other => {
                return vec![("text".into(), Some(flat_text(other)), None, None)];
            }
        };
    if blocks.is_empty() {
        return vec![("text".into(), Some(flat_text(message)), call_id, tool)];
    }
    blocks
        .into_iter()
        .map(|b| match b {
            ContentBlock::Text(t) => (
                "text".to_string(),
                Some(t.text.clone()),
                call_id.clone(),
                tool.clone(),
            ),
            ContentBlock::Thinking(t) => ("reasoning".into(), Some(t.thinking.clone()), None, None),
            ContentBlock::ToolCall(c) => (
                "tool".into(),
                Some(c.arguments.to_string()),
                Some(c.id.clone()),
                Some(c.name.clone()),
            ),
            ContentBlock::Image(i) => ("file".into(), Some(i.mime_type.clone()), None, None),
            ContentBlock::Other(_) => (b.block_type().to_string(), None, None, None),
        })
        .collect()
}
