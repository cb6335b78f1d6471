//! Matching the full history a client re-sends against a conversation's stored tree.
//!
//! A client sends its whole conversation on every request. The request continues the stored
//! branch whose messages are a prefix of the ones it carries: the tree is walked from its roots,
//! each message entry compared with the request's message at the same position by content
//! ([`same_message`]), never by a hash of the first messages. Entries that are not messages
//! (compactions, model changes, cache touches), and messages no model is sent (an answer that
//! was aborted or failed, a shell run excluded from the context), are passed through: a client
//! never re-sends them.
//!
//! The deepest entry reached decides ([`BranchMatch`]):
//! - nothing stored yet: [`MatchKind::Empty`], every message is new;
//! - the entry ends a stored branch (no message below it): [`MatchKind::Extends`], only the
//!   messages after it are appended;
//! - messages are stored below it that the request does not carry (an edit, or a regenerate):
//!   [`MatchKind::Diverges`], the unseen messages start a new branch at that entry, the old
//!   branch stays as it was;
//! - not even the first message matches: [`MatchKind::Unrelated`], the request belongs to
//!   another conversation (a subagent under the same client id, or another client).
//!
//! Among equally deep entries the one on the active branch wins, then the latest.

use std::collections::HashSet;
use std::sync::Arc;

use rampart_message::opaque::as_opaque;
use rampart_message::{AgentMessage, Content, ContentBlock};
use rampart_sessions::SessionTree;

use crate::providers::responses::opaque::opaque_item;
use serde_json::Value;
use std::borrow::Cow;

/// How the request's history relates to the stored tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchKind {
    /// The tree holds no message yet.
    Empty,
    /// A stored branch is a prefix of the request: append what follows it.
    Extends,
    /// The request shares a prefix with a stored branch and then differs (or stops earlier):
    /// a new branch from the last common entry.
    Diverges,
    /// Not even the first message is shared.
    Unrelated,
}

/// Where the request's unseen messages go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchMatch {
    /// What the request is to the tree.
    pub kind: MatchKind,
    /// The entry the unseen messages attach under; `None` for a new root (empty or unrelated).
    pub attach_at: Option<String>,
    /// How many of the request's messages the tree already holds on that branch.
    pub matched: usize,
}

impl BranchMatch {
    /// The messages of `incoming` that are not stored yet.
    pub fn unseen<'a, T>(&self, incoming: &'a [T]) -> &'a [T] {
        &incoming[self.matched.min(incoming.len())..]
    }
}

#[derive(Debug, Clone, Copy)]
enum State {
    /// The path from the root to this entry matches the first `n` messages of the request.
    Alive(usize),
    /// The path holds a message the request does not carry at that position.
    Dead,
}

/// Where `incoming` (the request's messages, system prompt excluded) continues `tree`.
pub fn match_history<M: std::borrow::Borrow<AgentMessage>>(
    tree: &SessionTree,
    incoming: &[M],
) -> BranchMatch {
    match_history_known(tree, incoming, &[])
}

/// [`match_history`], where `known[n]` is the id of the entry the request's message `n` is
/// already known to be (the message is byte for byte one an earlier request sent, which was
/// matched to or stored as that entry: [`sent_entries`]): such a pair is not compared again.
/// The result is [`match_history`]'s: a known pair is one [`same_message`] accepts, and the
/// rest of the walk is the same. Why: comparing every message of a 200k-token history with
/// the tree was a tenth of a continuing request, though all but the newest were compared,
/// byte for byte the same, by the request before.
pub fn match_history_known<M: std::borrow::Borrow<AgentMessage>>(
    tree: &SessionTree,
    incoming: &[M],
    known: &[Arc<str>],
) -> BranchMatch {
    let entries = tree.entries();
    let skip = server_answered(tree);
    let mut states: Vec<Option<State>> = vec![None; entries.len()];
    let mut any_message = false;
    let walk = Walk {
        tree,
        incoming,
        known,
        skip: &skip,
    };
    for (index, entry) in entries.iter().enumerate() {
        walk.state_of(index, &mut states);
        any_message |= counted(entry, index, &skip).is_some();
    }
    if !any_message {
        return BranchMatch {
            kind: MatchKind::Empty,
            attach_at: None,
            matched: 0,
        };
    }
    let message_below = messages_below(tree, &skip);
    // Which entries are on the active branch (a flag per entry: hashing every entry of the
    // path into a set was a pass of SipHash over the whole history per request).
    let mut active = vec![false; entries.len()];
    if let Some(leaf) = tree.leaf_index() {
        for at in tree.path_to(leaf) {
            active[at] = true;
        }
    }
    let mut best: Option<(usize, bool, usize)> = None;
    for (index, state) in states.iter().enumerate() {
        let Some(State::Alive(n)) = state else {
            continue;
        };
        if *n == 0 {
            continue;
        }
        let rank = (*n, active[index], index);
        if best.is_none_or(|b| rank > b) {
            best = Some(rank);
        }
    }
    match best {
        None => BranchMatch {
            kind: MatchKind::Unrelated,
            attach_at: None,
            matched: 0,
        },
        Some((n, _, index)) => BranchMatch {
            kind: if message_below[index] {
                MatchKind::Diverges
            } else {
                MatchKind::Extends
            },
            attach_at: Some(entries[index].id.clone()),
            matched: n,
        },
    }
}

/// Whether a counted message entry hangs below each entry (anywhere in its subtree).
fn messages_below(tree: &SessionTree, skip: &HashSet<usize>) -> Vec<bool> {
    let entries = tree.entries();
    let mut below = vec![false; entries.len()];
    for index in (0..entries.len()).rev() {
        if let Some(parent) = tree.parent_index(index) {
            let here = below[index] || counted(&entries[index], index, skip).is_some();
            below[parent] |= here;
        }
    }
    below
}

/// One walk of a tree against a request's messages.
struct Walk<'a, M> {
    tree: &'a SessionTree,
    incoming: &'a [M],
    known: &'a [Arc<str>],
    skip: &'a HashSet<usize>,
}

impl<M: std::borrow::Borrow<AgentMessage>> Walk<'_, M> {
    fn state_of(&self, index: usize, states: &mut [Option<State>]) -> State {
        if let Some(state) = states[index] {
            return state;
        }
        // A session file is appended to, so a parent comes before its children and its state
        // is already known: one step per entry, O(entries) for the whole tree. Walking each
        // entry's path from the root instead was O(entries × depth), a fifth of a request's
        // time on a 200k-token conversation.
        let from_parent = match self.tree.parent_index(index) {
            None => Some(State::Alive(0)),
            Some(parent) if parent < index => states[parent],
            Some(_) => None,
        };
        if let Some(parent_state) = from_parent {
            let state = self.step(index, parent_state);
            states[index] = Some(state);
            return state;
        }
        // A hand-edited file whose parent comes later: walk the path (iteratively, so a long
        // branch cannot overflow the stack).
        let path = self.tree.path_to(index);
        let mut state = State::Alive(0);
        for &at in &path {
            if let Some(known) = states[at] {
                state = known;
                continue;
            }
            state = self.step(at, state);
            states[at] = Some(state);
        }
        state
    }

    /// The state of entry `at` below an entry in `parent` state.
    fn step(&self, at: usize, parent: State) -> State {
        let entry = &self.tree.entries()[at];
        match (parent, counted(entry, at, self.skip)) {
            (State::Dead, _) => State::Dead,
            (alive, None) => alive,
            (State::Alive(n), Some(_)) if self.known.get(n).is_some_and(|id| **id == *entry.id) => {
                State::Alive(n + 1)
            }
            (State::Alive(n), Some(stored)) => match self.incoming.get(n) {
                Some(sent) if same_message(stored, sent.borrow()) => State::Alive(n + 1),
                _ => State::Dead,
            },
        }
    }
}

/// Where a request's messages were found in a tree, noted after its unseen messages were
/// stored: what the request that re-sends them starts from ([`sent_entries`],
/// [`match_history_noted`]).
///
/// While the tree is one chain (every entry on the path to the leaf, in the order they were
/// appended, the leaf last, no entry the server answered itself), the note is only where the
/// chain ended: message `n` is the chain's `n`th message entry, so no id is kept. Why: a list of
/// every entry's id, copied into each request's note and freed with the last one, was a pass
/// over the whole history per request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SentNote {
    /// How many messages the request carried.
    count: usize,
    /// Where they are.
    at: Noted,
}

/// Where a note's messages are in the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Noted {
    /// The tree was one chain of `entries` entries, the last one `last`: message `n` is the
    /// chain's `n`th message entry.
    Chain { entries: usize, last: Arc<str> },
    /// The ids of the entries the messages are, in order (any other tree).
    Ids(Arc<[Arc<str>]>),
}

impl Default for Noted {
    fn default() -> Self {
        Self::Ids(Arc::from([]))
    }
}

impl SentNote {
    /// How many messages the note holds.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether the note holds no message.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The noted chain's length in entries, when it is one and `tree` still begins with it.
    fn chain_in(&self, tree: &SessionTree) -> Option<usize> {
        let Noted::Chain { entries, last } = &self.at else {
            return None;
        };
        tree.entries()
            .get(entries.checked_sub(1)?)
            .is_some_and(|e| *e.id == **last)
            .then_some(*entries)
    }

    /// The ids of the entries the first `count` noted messages are in `tree` (none when the
    /// noted chain is no longer there).
    fn known_ids(&self, tree: &SessionTree, count: usize) -> Cow<'_, [Arc<str>]> {
        let count = count.min(self.count);
        if let Noted::Ids(ids) = &self.at {
            return Cow::Borrowed(&ids[..count.min(ids.len())]);
        }
        let Some(noted) = self.chain_in(tree) else {
            return Cow::Borrowed(&[]);
        };
        Cow::Owned(
            tree.entries()[..noted]
                .iter()
                .filter(|e| carried(e).is_some())
                .take(count)
                .map(|e| Arc::from(e.id.as_str()))
                .collect(),
        )
    }

    /// The entries appended to `tree` since the note, when the tree is still one chain that
    /// continues the noted one (each new entry below the one before it, the leaf last, none
    /// answered by the server itself): then the noted entries' states are what the note says
    /// and the new ones are all there is to look at.
    fn appended_since(&self, tree: &SessionTree) -> Option<std::ops::Range<usize>> {
        let noted = self.chain_in(tree)?;
        let entries = tree.entries();
        let len = entries.len();
        if tree.leaf_index() != Some(len - 1) {
            return None;
        }
        let chained = (noted..len)
            .all(|i| tree.parent_index(i) == Some(i - 1) && !server_tool_result(&entries[i]));
        chained.then_some(noted..len)
    }
}

/// [`match_history_known`] for a request that re-sends the first `count` messages of the one
/// noted in `note` (byte for byte, as the inbound memo found them). When it re-sends them all
/// and the tree has stayed one chain since, the walk starts where the noted messages end and
/// steps only through the entries appended since (the answer to that request, and whatever
/// came after): the result is the whole walk's, since a chain has no other branch a deeper
/// match could hide on. Why: walking, flagging and scanning every entry of a 200k-token
/// conversation was done per request, though all but the last turn's entries were known.
pub fn match_history_noted<M: std::borrow::Borrow<AgentMessage>>(
    tree: &SessionTree,
    incoming: &[M],
    note: &SentNote,
    count: usize,
) -> BranchMatch {
    if count == note.len()
        && count > 0
        && count <= incoming.len()
        && let Some(new) = note.appended_since(tree)
    {
        let entries = tree.entries();
        // The noted chain's last entry is alive at `count` messages; along a chain a state
        // only grows or dies, so the last entry alive is the deepest, and the latest of those
        // equally deep.
        let mut best = (new.start - 1, count);
        for at in new {
            let Some(stored) = carried(&entries[at]) else {
                best.0 = at;
                continue;
            };
            match incoming.get(best.1) {
                Some(sent) if same_message(stored, sent.borrow()) => best = (at, best.1 + 1),
                // A message the request does not carry: everything below it is dead.
                _ => break,
            }
        }
        let (at, matched) = best;
        return BranchMatch {
            kind: if at + 1 == entries.len() {
                MatchKind::Extends
            } else {
                MatchKind::Diverges
            },
            attach_at: Some(entries[at].id.clone()),
            matched,
        };
    }
    match_history_known(tree, incoming, &note.known_ids(tree, count))
}

/// Where the messages of a request are in `tree` once its unseen ones are stored (`messages`
/// of them): [`match_history_noted`]'s note for the request that re-sends them. `None` when
/// the path to the leaf does not hold one entry per message, so nothing is claimed.
///
/// `before` is what was noted for the request this one continued. When the tree has stayed
/// one chain since, the note follows from it and the entries appended since (no walk of the
/// history); otherwise the path is walked, and an id equal to the one in the same place in
/// `before` is shared, not copied (copying every id of a long history was 3.5 % of a
/// continuing 200k-token request).
pub fn sent_entries(tree: &SessionTree, messages: usize, before: &SentNote) -> Option<SentNote> {
    let entries = tree.entries();
    let leaf = tree.leaf_index()?;
    let chain = || Noted::Chain {
        entries: entries.len(),
        last: Arc::from(entries[entries.len() - 1].id.as_str()),
    };
    if let Some(new) = before.appended_since(tree) {
        let count = before.count + entries[new].iter().filter(|e| carried(e).is_some()).count();
        return (count == messages).then(|| SentNote { count, at: chain() });
    }
    let skip = server_answered(tree);
    let path = tree.path_to(leaf);
    let counted_on_path = path
        .iter()
        .copied()
        .filter(|&at| counted(&entries[at], at, &skip).is_some());
    if counted_on_path.clone().count() != messages {
        return None;
    }
    let one_chain = skip.is_empty() && path.iter().copied().eq(0..entries.len());
    if one_chain {
        return Some(SentNote {
            count: messages,
            at: chain(),
        });
    }
    let before_ids: &[Arc<str>] = match &before.at {
        Noted::Ids(ids) => ids,
        Noted::Chain { .. } => &[],
    };
    let ids: Vec<Arc<str>> = counted_on_path
        .enumerate()
        .map(|(n, at)| match before_ids.get(n) {
            Some(id) if **id == *entries[at].id => Arc::clone(id),
            _ => Arc::from(entries[at].id.as_str()),
        })
        .collect();
    Some(SentNote {
        count: messages,
        at: Noted::Ids(Arc::from(ids)),
    })
}

/// The field a tool result carries when the server itself answered it (a memory tool the
/// client never saw): such results, and the calls they answer, are not part of the client's
/// view, so matching skips them.
pub const SERVER_TOOL_MARK: &str = "rampartServerTool";

/// The message of an entry that a client's history must carry: one a model is sent (what the
/// server answered itself aside, [`counted`]).
fn carried(entry: &rampart_sessions::Entry) -> Option<&AgentMessage> {
    entry
        .body
        .message()
        .filter(|m| crate::providers::sent_to_model(m))
}

/// [`carried`], unless `skip` holds the entry (the server answered it: [`server_answered`]).
fn counted<'e>(
    entry: &'e rampart_sessions::Entry,
    index: usize,
    skip: &HashSet<usize>,
) -> Option<&'e AgentMessage> {
    if skip.contains(&index) {
        return None;
    }
    carried(entry)
}

/// Whether `entry` is a tool result the server answered itself ([`SERVER_TOOL_MARK`]).
fn server_tool_result(entry: &rampart_sessions::Entry) -> bool {
    matches!(entry.body.message(), Some(AgentMessage::ToolResult(r))
        if r.extra.get(SERVER_TOOL_MARK).and_then(serde_json::Value::as_bool) == Some(true))
}

/// The entries the server answered itself ([`SERVER_TOOL_MARK`]): its tool results, and the
/// assistant messages whose every tool call one of them answers. One pass over the entries.
fn server_answered(tree: &SessionTree) -> HashSet<usize> {
    let mut answered_calls: HashSet<&str> = HashSet::new();
    let mut skip = HashSet::new();
    for (index, entry) in tree.entries().iter().enumerate() {
        if let Some(AgentMessage::ToolResult(r)) = entry.body.message()
            && server_tool_result(entry)
        {
            answered_calls.insert(r.tool_call_id.as_str());
            skip.insert(index);
        }
    }
    if answered_calls.is_empty() {
        return skip;
    }
    for (index, entry) in tree.entries().iter().enumerate() {
        if let Some(AgentMessage::Assistant(a)) = entry.body.message() {
            let mut calls = a.content.iter().filter_map(|b| match b {
                rampart_message::ContentBlock::ToolCall(c) => Some(c.id.as_str()),
                _ => None,
            });
            let first = calls.next();
            if first.is_some_and(|id| answered_calls.contains(id))
                && calls.all(|id| answered_calls.contains(id))
            {
                skip.insert(index);
            }
        }
    }
    skip
}

/// Whether a stored message is the one a client re-sent: compared by what a chat API carries
/// (role, text, images and other blocks, tool calls with their ids and arguments, tool results
/// with their call id, opaque messages by their wire and item, breakpoints aside), not by what
/// only the store keeps (timestamps, usage, model, stop reason, thinking, which OpenAI clients
/// drop).
///
/// A stored tool result also matches the full result it was capped from: its notice names the
/// blob that keeps the original (`sha256:` of the original text), or it is a shortened head of
/// it.
pub fn same_message(stored: &AgentMessage, sent: &AgentMessage) -> bool {
    match (stored, sent) {
        (AgentMessage::User(a), AgentMessage::User(b)) => {
            canonical_content(&a.content) == canonical_content(&b.content)
        }
        (AgentMessage::Assistant(a), AgentMessage::Assistant(b)) => {
            // A Responses upstream's reasoning items are what only the store keeps for a client
            // of another wire, and a Responses client may send them back with fields of its
            // own: like thinking, they do not decide the match. Its other opaque items (tool
            // calls) do.
            let modelled = |block: &&ContentBlock| {
                opaque_item(block).is_none_or(|item| item["type"] != "reasoning")
            };
            canonical(a.content.iter().filter(modelled))
                == canonical(b.content.iter().filter(modelled))
        }
        (AgentMessage::ToolResult(a), AgentMessage::ToolResult(b)) => {
            if a.tool_call_id != b.tool_call_id {
                return false;
            }
            let stored = canonical_content(&a.content);
            let sent = canonical_content(&b.content);
            stored == sent || is_cap_of(&a.content.joined_text(), &b.content.joined_text())
        }
        (AgentMessage::Other(_), AgentMessage::Other(_)) => {
            match (as_opaque(stored), as_opaque(sent)) {
                (Some(a), Some(b)) => a.wire == b.wire && same_item(a.item, b.item),
                _ => false,
            }
        }
        _ => false,
    }
}

/// Whether two opaque messages' items are equal once their `cache_control` breakpoints (on
/// the item and on its content blocks) are set aside: a client moves them from turn to turn,
/// and the message stays the same. Compared in place, without copying either item.
fn same_item(a: &serde_json::Map<String, Value>, b: &serde_json::Map<String, Value>) -> bool {
    const MARK: &str = "cache_control";
    let len = |m: &serde_json::Map<String, Value>| m.len() - usize::from(m.contains_key(MARK));
    let same_content = |x: &Value, y: &Value| match (x.as_array(), y.as_array()) {
        (Some(xs), Some(ys)) => {
            xs.len() == ys.len()
                && xs
                    .iter()
                    .zip(ys)
                    .all(|(x, y)| match (x.as_object(), y.as_object()) {
                        (Some(x), Some(y)) => same_without_breakpoint(x, y),
                        _ => x == y,
                    })
        }
        _ => x == y,
    };
    len(a) == len(b)
        && a.iter()
            .filter(|(k, _)| k.as_str() != MARK)
            .all(|(k, v)| match b.get(k) {
                Some(w) if k == "content" => same_content(v, w),
                Some(w) => v == w,
                None => false,
            })
}

/// [`canonical`] of a user or tool-result content: a string is its text.
fn canonical_content(content: &Content) -> Canonical<'_> {
    match content {
        Content::Text(t) => Canonical {
            text: Cow::Borrowed(t.trim()),
            parts: Vec::new(),
        },
        Content::Blocks(blocks) => canonical(blocks.iter()),
    }
}

/// What a client carries of some blocks: the text (pieces joined with newlines, trimmed), the
/// tool calls, and the other non-thinking blocks as JSON without `cache_control`.
/// Everything is borrowed (the text too when it is one piece, as most are): every request
/// compares its whole history, and copying each message's text, then each tool call's
/// arguments, was most of that.
#[derive(Debug, PartialEq)]
struct Canonical<'a> {
    text: Cow<'a, str>,
    parts: Vec<Part<'a>>,
}

/// A block a client carries besides text, borrowed from its message.
#[derive(Debug)]
enum Part<'a> {
    ToolCall {
        id: &'a str,
        name: &'a str,
        arguments: &'a Value,
    },
    Image {
        mime_type: &'a str,
        data: &'a str,
    },
    /// Compared without `cache_control`.
    Other(&'a serde_json::Map<String, Value>),
}

impl PartialEq for Part<'_> {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (
                Part::ToolCall {
                    id,
                    name,
                    arguments,
                },
                Part::ToolCall {
                    id: id2,
                    name: name2,
                    arguments: arguments2,
                },
            ) => id == id2 && name == name2 && arguments == arguments2,
            (
                Part::Image { mime_type, data },
                Part::Image {
                    mime_type: mime_type2,
                    data: data2,
                },
            ) => mime_type == mime_type2 && data == data2,
            (Part::Other(a), Part::Other(b)) => same_without_breakpoint(a, b),
            _ => false,
        }
    }
}

/// Whether two JSON objects are equal once their `cache_control` fields are set aside.
fn same_without_breakpoint(
    a: &serde_json::Map<String, Value>,
    b: &serde_json::Map<String, Value>,
) -> bool {
    const MARK: &str = "cache_control";
    let len = |m: &serde_json::Map<String, Value>| m.len() - usize::from(m.contains_key(MARK));
    len(a) == len(b)
        && a.iter()
            .filter(|(k, _)| k.as_str() != MARK)
            .all(|(k, v)| b.get(k) == Some(v))
}

/// [`canonical`]'s text alone, without building its other parts.
fn canonical_text<'a>(blocks: impl Iterator<Item = &'a ContentBlock>) -> Cow<'a, str> {
    let texts: Vec<&str> = blocks
        .filter_map(|block| match block {
            ContentBlock::Text(t) if !t.text.trim().is_empty() => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
    joined_trimmed(&texts)
}

fn joined_trimmed<'a>(texts: &[&'a str]) -> Cow<'a, str> {
    match texts {
        [] => Cow::Borrowed(""),
        [one] => Cow::Borrowed(one.trim()),
        many => Cow::Owned(many.join("\n").trim().to_owned()),
    }
}

fn canonical<'a>(blocks: impl Iterator<Item = &'a ContentBlock>) -> Canonical<'a> {
    let mut texts: Vec<&str> = Vec::new();
    let mut parts = Vec::new();
    for block in blocks {
        match block {
            ContentBlock::Text(t) => {
                if !t.text.trim().is_empty() {
                    texts.push(&t.text);
                }
            }
            ContentBlock::Thinking(_) => {}
            ContentBlock::ToolCall(c) => parts.push(Part::ToolCall {
                id: &c.id,
                name: &c.name,
                arguments: &c.arguments,
            }),
            ContentBlock::Image(i) => parts.push(Part::Image {
                mime_type: &i.mime_type,
                data: &i.data,
            }),
            ContentBlock::Other(map) => parts.push(Part::Other(map)),
        }
    }
    Canonical {
        text: joined_trimmed(&texts),
        parts,
    }
}

/// Whether `stored` is what the persistence guard or a truncation pass made of `original`.
fn is_cap_of(stored: &str, original: &str) -> bool {
    if stored.len() >= original.len() {
        return false;
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(original.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    if stored.contains(&format!("sha256:{hex}")) {
        return true;
    }
    // A head kept as it was (cuts fall on newlines; a notice follows).
    let head: String = stored.chars().take(256).collect();
    let head = head.lines().next().unwrap_or("");
    head.chars().count() >= 16 && original.starts_with(head)
}

/// Where a stored tree's branches end, in a form a request can be tested against without the
/// tree: for every entry with no message below it, how many messages its path holds and a hash
/// of their [`fingerprint`]s. A request can only extend the tree ([`MatchKind::Extends`]) if its
/// first `n` messages hash the same as one of these ends (or the tree holds no message).
///
/// Why: a server without client ids places a request among every conversation whose first
/// message reads the same, and an application whose every conversation starts with one system
/// prompt puts them all in one family; opening each member's session for each request made
/// the work of a request grow with every conversation the server had ever held. The test is
/// only ever a filter: a member it keeps is still matched with [`match_history`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchEnds {
    /// `(messages on the path, chain hash)` of every branch end; empty when the tree holds no
    /// message.
    ends: HashSet<(usize, u64)>,
}

impl BranchEnds {
    /// The branch ends of `tree`, in one pass over its entries.
    pub fn of(tree: &SessionTree) -> Self {
        let entries = tree.entries();
        let skip = server_answered(tree);
        // (messages on the path, chain hash) of each entry.
        let mut chains: Vec<Option<(usize, u64)>> = vec![None; entries.len()];
        for index in 0..entries.len() {
            if chains[index].is_some() {
                continue;
            }
            let extend = |from: (usize, u64)| match counted(&entries[index], index, &skip) {
                Some(message) => (from.0 + 1, chain_step(from.1, message)),
                None => from,
            };
            match tree.parent_index(index) {
                None => {
                    chains[index] = Some(extend((0, CHAIN_SEED)));
                    continue;
                }
                Some(parent) if parent < index => {
                    chains[index] = chains[parent].map(extend);
                    if chains[index].is_some() {
                        continue;
                    }
                }
                Some(_) => {}
            }
            // A hand-edited file whose parent comes later: walk the path.
            let mut at = (0usize, CHAIN_SEED);
            for step_at in tree.path_to(index) {
                if let Some(known) = chains[step_at] {
                    at = known;
                    continue;
                }
                if let Some(message) = counted(&entries[step_at], step_at, &skip) {
                    at = (at.0 + 1, chain_step(at.1, message));
                }
                chains[step_at] = Some(at);
            }
        }
        let message_below = messages_below(tree, &skip);
        let ends = chains
            .iter()
            .zip(&message_below)
            .filter_map(|(chain, below)| chain.filter(|(n, _)| *n > 0 && !below))
            .collect();
        Self { ends }
    }

    /// Whether a request whose messages hash to `chain` ([`request_chain`]) may extend the
    /// tree: false only when it certainly cannot.
    pub fn may_extend(&self, chain: &[u64]) -> bool {
        self.ends.is_empty()
            || self
                .ends
                .iter()
                .any(|(n, hash)| chain.get(*n).is_some_and(|h| h == hash))
    }
}

const CHAIN_SEED: u64 = 0x7261_6d70_6172_7400;

/// The chain hashes of a request's messages: element `n` hashes the first `n`.
pub fn request_chain<M: std::borrow::Borrow<AgentMessage>>(incoming: &[M]) -> Vec<u64> {
    let mut chain = Vec::with_capacity(incoming.len() + 1);
    let mut at = CHAIN_SEED;
    chain.push(at);
    for message in incoming {
        at = chain_step(at, message.borrow());
        chain.push(at);
    }
    chain
}

fn chain_step(previous: u64, message: &AgentMessage) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    previous.hash(&mut hasher);
    fingerprint(message, &mut hasher);
    hasher.finish()
}

/// Feeds what [`same_message`] compares, or less, to `hasher`: two messages it calls the same
/// always hash the same (the converse need not hold). The role, the canonical text of users
/// and assistants with the ids of the assistant's tool calls, a tool result's call id (its
/// text may be a cap of what the client sends), an opaque message's wire.
fn fingerprint(message: &AgentMessage, hasher: &mut impl std::hash::Hasher) {
    use std::hash::Hash;
    match message {
        AgentMessage::User(u) => {
            1u8.hash(hasher);
            match &u.content {
                Content::Text(t) => t.trim().hash(hasher),
                Content::Blocks(blocks) => canonical_text(blocks.iter()).hash(hasher),
            }
        }
        AgentMessage::Assistant(a) => {
            2u8.hash(hasher);
            canonical_text(a.content.iter()).hash(hasher);
            for block in &a.content {
                if let ContentBlock::ToolCall(call) = block {
                    call.id.hash(hasher);
                }
            }
        }
        AgentMessage::ToolResult(r) => {
            3u8.hash(hasher);
            r.tool_call_id.hash(hasher);
        }
        other => {
            4u8.hash(hasher);
            as_opaque(other).map(|o| o.wire).hash(hasher);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "history_tests.rs"]
mod tests;
