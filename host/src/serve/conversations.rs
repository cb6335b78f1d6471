//! Which stored conversation a request continues, opened and held for its turn.
//!
//! The client's id ([`ClientSession`]) names a family of conversations: its root
//! (`serve:<client>:<id>`) and the children spawned under it (`…:child:<n>`, and for Codex
//! `…:thread:<thread>`). A client that names none is placed by its history alone, among the
//! conversations whose first message reads the same (`serve:anon:<hash>:<n>`; the hash only
//! narrows the search, the history decides). Then:
//! - under a client id, the request continues the member whose stored branch it extends, or
//!   branches the one it diverges from (an edit, a regenerate); a history sharing nothing with
//!   any member is a subagent: a new child, registered as `spawnedBy` the root;
//! - without one, it continues a conversation only when a whole stored branch is a prefix of
//!   it; otherwise it is a new conversation, so two clients that start alike stay apart once
//!   they diverge;
//! - a Codex thread other than the root's is its own child conversation (`thread-id`).

use std::time::Duration;

use rampart_message::AgentMessage;
use rampart_sessions::entry::SessionHeader;
use rampart_sessions::store::StoreError;
use rampart_sessions::store::shared::{EntryFields, PickKey, SharedStore};
use rampart_sessions::{Session, SessionError, SessionOptions};
use serde_json::Value;

use super::history::{
    BranchEnds, BranchMatch, MatchKind, SentNote, match_history, match_history_noted, request_chain,
};
use super::identity::ClientSession;
use crate::run::TurnMemos;

/// The registry field naming the conversation a child was spawned by (as imports write it).
pub const SPAWNED_BY: &str = "spawnedBy";
/// The registry field holding the Codex thread of a root conversation.
pub const SERVE_THREAD: &str = "serveThread";

/// A conversation opened for one request, its write lock held.
#[derive(Debug)]
pub struct Conversation {
    /// Its registry key.
    pub key: String,
    /// The session, held.
    pub session: Session,
    /// Where the request's unseen messages go.
    pub placement: BranchMatch,
    /// Whether this request created it.
    pub created: bool,
    /// The conversation it was spawned by, when it is a child.
    pub spawned_by: Option<String>,
    /// What the last turn's runner derived from this conversation's messages, for this one's.
    pub memos: TurnMemos,
}

/// Why no conversation could be opened.
#[derive(Debug, thiserror::Error)]
pub enum ConversationError {
    /// The registry could not be read or written.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A session file could not be opened or created.
    #[error(transparent)]
    Session(Box<SessionError>),
    /// Another writer holds the session past the lock timeout.
    #[error("conversation `{key}` is busy in another process: {source}")]
    Busy {
        /// The conversation.
        key: String,
        /// The lock's error, naming the holder.
        source: Box<SessionError>,
    },
}

impl From<SessionError> for ConversationError {
    fn from(e: SessionError) -> Self {
        Self::Session(Box::new(e))
    }
}

/// Sessions kept open between requests, so a turn does not read its conversation again: a
/// cached session catches up with what other processes (or replicas) appended when its lock is
/// taken ([`Session::hold`]). Keyed by registry key. At most `capacity` are kept (each holds
/// its tree and a handle on its log), holding at most `max_bytes` of session log between them
/// (`serve.sessionCacheMiB`); beyond either the one used longest ago is closed, so a
/// conversation an agent is working in stays while one left an hour ago goes. Each is kept
/// with its runner's [`TurnMemos`], so a continuing request counts only its new messages.
///
/// Why a budget in bytes besides the count: a session holds its whole tree parsed, about twice
/// its log's bytes, and the provider's wire memo keeps each live message's upstream form, once
/// more (BENCHMARKS.md, "What a cached conversation holds"). A count alone let 128 cached
/// 200k-token conversations hold 300 MiB; a byte budget bounds the memory whatever the
/// conversations' sizes, and a session over the whole budget is not kept at all (its next
/// request opens it again, as after a restart).
#[derive(Debug)]
pub struct SessionCache {
    sessions: std::sync::Mutex<std::collections::HashMap<String, Cached>>,
    capacity: usize,
    /// The most session-log bytes the cached sessions may hold between them.
    max_bytes: u64,
    /// Counts uses, so each cached session knows when it was last used ([`Cached::used`]).
    clock: std::sync::atomic::AtomicU64,
    /// Where each conversation's branches ended when it was last matched, with the registry's
    /// `updatedAt` then: a family member whose ends a request cannot extend is passed over
    /// without opening its session ([`BranchEnds`]). Kept for every conversation (a few dozen
    /// bytes each), not only the open ones; a changed `updatedAt` or a turn of this server
    /// makes it stale.
    ends: std::sync::Mutex<std::collections::HashMap<String, (u64, BranchEnds)>>,
    /// For each cached conversation, the entries its last request's messages were matched to
    /// or stored as, with the number the inbound memo kept those messages under
    /// ([`super::inbound::Seen`]): a request continuing them skips comparing those.
    sent: std::sync::Mutex<std::collections::HashMap<String, SentEntries>>,
}

/// The number the inbound memo keeps a request's messages under, and where they are in a
/// conversation's tree.
type SentEntries = (u64, SentNote);

/// A session kept open, and what the runners derived from its messages.
#[derive(Debug)]
struct Cached {
    session: Session,
    memos: TurnMemos,
    /// The cache's clock when the session was last put back or read.
    used: u64,
    /// The bytes of its log, when it was kept (what it counts against the budget).
    bytes: u64,
}

impl SessionCache {
    /// A cache of at most `capacity` sessions (0: none kept) holding at most `max_bytes` of
    /// session log between them.
    pub fn new(capacity: usize, max_bytes: u64) -> Self {
        Self {
            sessions: std::sync::Mutex::new(std::collections::HashMap::new()),
            capacity,
            max_bytes,
            clock: std::sync::atomic::AtomicU64::new(0),
            ends: std::sync::Mutex::default(),
            sent: std::sync::Mutex::default(),
        }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, Cached>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The next reading of the use clock.
    fn tick(&self) -> u64 {
        self.clock
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// The session of `key` and its memos, out of the cache, or opened from the store.
    fn take(
        &self,
        store: &dyn SharedStore,
        key: &str,
    ) -> Result<(Session, TurnMemos), ConversationError> {
        if let Some(cached) = self.map().remove(key) {
            return Ok((cached.session, cached.memos));
        }
        let entry = registered(store, key)?;
        Ok((
            store.open(key, &entry, SessionOptions::default())?,
            TurnMemos::default(),
        ))
    }

    /// Puts `key`'s session back (its lock released), with what its last runner derived.
    pub fn put(&self, key: &str, session: Session, memos: TurnMemos) {
        // The turn may have changed where its branches end.
        self.lock_ends().remove(key);
        self.keep(key, session, memos);
    }

    /// Keeps `key`'s session (its lock released), closing the ones used longest ago while the
    /// cache is full or the budget would be exceeded (a scan of at most `capacity` entries per
    /// closing); a session whose log alone is over the budget is closed instead. Its branch
    /// ends are left as they are (a session only read, not written, keeps them).
    fn keep(&self, key: &str, mut session: Session, memos: TurnMemos) {
        session.release();
        let bytes = session.report().bytes;
        let mut map = self.map();
        if self.capacity == 0 || bytes > self.max_bytes {
            map.remove(key);
            drop(map);
            self.lock_sent().remove(key);
            tracing::debug!(
                conversation = key,
                bytes,
                budget = self.max_bytes,
                "session not kept open: over the cache's budget"
            );
            return;
        }
        map.remove(key);
        let mut held: u64 = map.values().map(|cached| cached.bytes).sum();
        while !map.is_empty() && (map.len() >= self.capacity || held + bytes > self.max_bytes) {
            let Some(evict) = map
                .iter()
                .min_by_key(|(_, cached)| cached.used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some(closed) = map.remove(&evict) {
                held -= closed.bytes;
            }
            self.lock_sent().remove(&evict);
        }
        map.insert(
            key.to_owned(),
            Cached {
                session,
                memos,
                used: self.tick(),
                bytes,
            },
        );
    }

    fn lock_sent(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, SentEntries>> {
        self.sent.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes that the messages the inbound memo keeps as `generation` are where `note` says
    /// in `key`'s tree ([`super::history::sent_entries`]).
    pub fn note_sent(&self, key: &str, generation: u64, note: SentNote) {
        if self.capacity == 0 {
            return;
        }
        // Notes go with the cached sessions: an eviction drops its note, and a session that
        // failed on the way is never put back, so its note is dropped here once the notes
        // outnumber the cache (the map first, then the notes: the order `keep` locks them in).
        let map = self.map();
        let mut sent = self.lock_sent();
        if sent.len() >= self.capacity {
            sent.retain(|k, _| map.contains_key(k));
        }
        drop(map);
        sent.insert(key.to_owned(), (generation, note));
    }

    /// Where the messages of the request that one continuing `continues` re-sends are in
    /// `key`'s tree (an empty note when nothing is known).
    pub fn known(&self, key: &str, continues: Option<(u64, usize)>) -> SentNote {
        let Some((generation, count)) = continues else {
            return SentNote::default();
        };
        match self.lock_sent().get(key) {
            Some((noted, note)) if *noted == generation && count <= note.len() => note.clone(),
            _ => SentNote::default(),
        }
    }

    /// How `messages` continue `key`'s session, from the cache when it is there (a cached
    /// session may lag behind another process; the turn places the request again under the
    /// lock). With `note_ends`, its [`BranchEnds`] are recorded for the next request's filter.
    fn placement<M: std::borrow::Borrow<AgentMessage>>(
        &self,
        store: &dyn SharedStore,
        key: &str,
        entry: &rampart_sessions::store::SessionEntry,
        messages: &[M],
        continues: Option<(u64, usize)>,
        note_ends: bool,
    ) -> Result<Placed, StoreError> {
        let note = self.known(key, continues);
        let count = continues.map_or(0, |(_, count)| count.min(note.len()));
        if let Some(cached) = self.map().get_mut(key) {
            cached.used = self.tick();
            if note_ends {
                self.note_ends(key, entry, cached.session.tree());
            }
            return Ok(Placed::on(cached.session.tree(), messages, &note, count));
        }
        let session = store.open(key, entry, SessionOptions::default())?;
        let placed = Placed::on(session.tree(), messages, &note, count);
        if note_ends {
            self.note_ends(key, entry, session.tree());
        }
        self.keep(key, session, TurnMemos::default());
        Ok(placed)
    }

    fn lock_ends(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, (u64, BranchEnds)>> {
        self.ends.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a request whose messages hash to `chain` may extend `key` (registered with
    /// `updated_at`): true unless its branch ends are known, current, and rule it out.
    fn may_extend(&self, key: &str, updated_at: u64, chain: &[u64]) -> bool {
        match self.lock_ends().get(key) {
            Some((noted_at, ends)) if *noted_at == updated_at => ends.may_extend(chain),
            _ => true,
        }
    }

    /// Records where `tree`'s branches end, unless that is known for this `updatedAt`.
    fn note_ends(
        &self,
        key: &str,
        entry: &rampart_sessions::store::SessionEntry,
        tree: &rampart_sessions::SessionTree,
    ) {
        let mut ends = self.lock_ends();
        if ends
            .get(key)
            .is_some_and(|(updated_at, _)| *updated_at == entry.updated_at)
        {
            return;
        }
        ends.insert(key.to_owned(), (entry.updated_at, BranchEnds::of(tree)));
    }
}

fn registered(
    store: &dyn SharedStore,
    key: &str,
) -> Result<rampart_sessions::store::SessionEntry, StoreError> {
    store.get(key)?.ok_or_else(|| StoreError::UnknownSession {
        key: key.to_owned(),
        path: store.describe().to_path_buf(),
    })
}

/// The conversation a request was placed in, before it is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chosen {
    /// Its registry key.
    pub key: String,
    /// Whether this request created it.
    pub created: bool,
    /// The conversation it was spawned by, when it is a child.
    pub spawned_by: Option<String>,
    /// Where the request went in the tree it was chosen by, when it was matched against one:
    /// reused under the lock if the tree has not changed since ([`open_chosen`]).
    pub placed: Option<Placed>,
}

/// A request's placement in a tree, with the mark of the tree it was made on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    /// Where the request's unseen messages go.
    pub placement: BranchMatch,
    mark: TreeMark,
}

/// What identifies a state of an append-only tree: how many entries it holds, the last one,
/// and its leaf (the active branch breaks ties between equally deep matches).
#[derive(Debug, Clone, PartialEq, Eq)]
struct TreeMark {
    entries: usize,
    last: Option<String>,
    leaf: Option<String>,
}

impl TreeMark {
    fn of(tree: &rampart_sessions::SessionTree) -> Self {
        Self {
            entries: tree.entries().len(),
            last: tree.entries().last().map(|e| e.id.clone()),
            leaf: tree.leaf_id().map(str::to_owned),
        }
    }
}

impl Placed {
    fn on<M: std::borrow::Borrow<AgentMessage>>(
        tree: &rampart_sessions::SessionTree,
        messages: &[M],
        note: &SentNote,
        count: usize,
    ) -> Self {
        Self {
            placement: match_history_noted(tree, messages, note, count),
            mark: TreeMark::of(tree),
        }
    }

    /// The placement, if `tree` is still the tree it was made on.
    fn still_on(self, tree: &rampart_sessions::SessionTree) -> Option<BranchMatch> {
        (self.mark == TreeMark::of(tree)).then_some(self.placement)
    }
}

/// The bucket of a request without a client id: a hash of its first message's role and text.
/// It narrows the search; the history, compared message by message, decides.
pub fn anon_bucket<M: std::borrow::Borrow<AgentMessage>>(messages: &[M]) -> String {
    use sha2::Digest;
    let first = messages.first().map(std::borrow::Borrow::borrow);
    let text = match first {
        Some(AgentMessage::User(u)) => u.content.joined_text(),
        Some(other) => serde_json::to_string(other).unwrap_or_default(),
        None => String::new(),
    };
    let role = first.map(AgentMessage::role).unwrap_or_default();
    let digest = sha2::Sha256::digest(format!("{role}\n{text}").as_bytes());
    let hex: String = digest.iter().take(12).map(|b| format!("{b:02x}")).collect();
    format!("serve:anon:{hex}")
}

/// Opens (or creates) the conversation `messages` continues, holds its write lock for up to
/// `lock_timeout`, and says where the unseen messages go.
pub fn open<M: std::borrow::Borrow<AgentMessage>>(
    store: &dyn SharedStore,
    client: Option<&ClientSession>,
    messages: &[M],
    lock_timeout: Duration,
) -> Result<Conversation, ConversationError> {
    let cache = SessionCache::new(0, 0);
    let chosen = choose(store, &cache, client, messages)?;
    open_chosen(store, &cache, chosen, messages, lock_timeout)
}

/// Opens the conversation `chosen` names, holds its write lock for up to `lock_timeout`, and
/// says where the unseen messages of `messages` go.
pub fn open_chosen<M: std::borrow::Borrow<AgentMessage>>(
    store: &dyn SharedStore,
    cache: &SessionCache,
    chosen: Chosen,
    messages: &[M],
    lock_timeout: Duration,
) -> Result<Conversation, ConversationError> {
    let Chosen {
        key,
        created,
        spawned_by,
        placed,
    } = chosen;
    let (mut session, memos) = cache.take(store, &key)?;
    if let Err(source) = session.hold(lock_timeout) {
        // The store's database gone (a restart, a lost connection) is not another writer:
        // it is answered as the store being unavailable (503 with Retry-After), not as busy.
        if source.is_unavailable() {
            return Err(ConversationError::Session(Box::new(source)));
        }
        return Err(ConversationError::Busy {
            key,
            source: Box::new(source),
        });
    }
    // Placed again under the lock when another request or process appended meanwhile (the
    // tree is not the one the request was chosen by); matching a 200k-token history twice
    // was a tenth of a continuing request.
    let placement = placed
        .and_then(|p| p.still_on(session.tree()))
        .unwrap_or_else(|| match_history(session.tree(), messages));
    Ok(Conversation {
        key,
        session,
        placement,
        created,
        spawned_by,
        memos,
    })
}

/// Which conversation `messages` continue (created when none does), by the rule of the module
/// documentation.
///
/// Requests without a client id must be placed one at a time per [`anon_bucket`] (the server
/// does it inside that bucket's lane): two alike first requests placed at once would both take
/// the same new conversation.
pub fn choose<M: std::borrow::Borrow<AgentMessage>>(
    store: &dyn SharedStore,
    cache: &SessionCache,
    client: Option<&ClientSession>,
    messages: &[M],
) -> Result<Chosen, ConversationError> {
    choose_continuing(store, cache, client, messages, None)
}

/// [`choose`] for a request whose first messages are, byte for byte, those of the earlier
/// request the inbound memo kept under a number (`continues`: that number and how many):
/// where that request's messages are known to sit in a tree, they are not compared again.
pub fn choose_continuing<M: std::borrow::Borrow<AgentMessage>>(
    store: &dyn SharedStore,
    cache: &SessionCache,
    client: Option<&ClientSession>,
    messages: &[M],
    continues: Option<(u64, usize)>,
) -> Result<Chosen, ConversationError> {
    let (key, created, spawned_by, placed) = choose_key(store, cache, client, messages, continues)?;
    Ok(Chosen {
        key,
        created,
        spawned_by,
        placed,
    })
}

fn choose_key<M: std::borrow::Borrow<AgentMessage>>(
    store: &dyn SharedStore,
    cache: &SessionCache,
    client: Option<&ClientSession>,
    messages: &[M],
    continues: Option<(u64, usize)>,
) -> Result<(String, bool, Option<String>, Option<Placed>), ConversationError> {
    let Some(client) = client else {
        let bucket = anon_bucket(messages);
        let prefix = format!("{bucket}:");
        if let Some((key, placed)) = best(store, cache, &prefix, None, messages, continues, true)? {
            return Ok((key, false, None, Some(placed)));
        }
        let key = create(store, &prefix, None, None)?;
        return Ok((key, true, None, None));
    };
    let root = client.root_key();
    if let Some(thread) = client.thread() {
        let (key, created, spawned_by) = codex_thread(store, client, &root, thread)?;
        return Ok((key, created, spawned_by, None));
    }
    let children = format!("{root}:child:");
    if let Some((key, placed)) = best(
        store,
        cache,
        &children,
        Some(&root),
        messages,
        continues,
        false,
    )? {
        return Ok((key, false, None, Some(placed)));
    }
    if store.get(&root)?.is_none() {
        let key = create_exact(store, &root, None, None)?;
        return Ok((key, true, None, None));
    }
    let key = create(store, &children, Some(&root), None)?;
    Ok((key, true, Some(root), None))
}

/// A Codex request with a `thread-id`: the root's thread (the first one seen, or the one named
/// like the session) is the root; any other is a child of its own.
fn codex_thread(
    store: &dyn SharedStore,
    client: &ClientSession,
    root: &str,
    thread: &str,
) -> Result<(String, bool, Option<String>), ConversationError> {
    match store.get(root)? {
        None => {
            let key = create_exact(store, root, None, Some(thread))?;
            Ok((key, true, None))
        }
        Some(entry) => {
            let root_thread = entry.extra.get(SERVE_THREAD).and_then(Value::as_str);
            if root_thread.is_none_or(|t| t == thread) || thread == client.id() {
                return Ok((root.to_owned(), false, None));
            }
            let child = format!("{root}:thread:{}", thread_key(thread));
            if store.get(&child)?.is_some() {
                return Ok((child, false, Some(root.to_owned())));
            }
            let key = create_exact(store, &child, Some(root), None)?;
            Ok((key, true, Some(root.to_owned())))
        }
    }
}

fn thread_key(thread: &str) -> String {
    if thread.len() <= 128
        && thread
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        thread.to_ascii_lowercase()
    } else {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(thread.as_bytes());
        digest.iter().take(16).map(|b| format!("{b:02x}")).collect()
    }
}

/// The member of a family (`exact` and the keys under `prefix`) whose stored tree `messages`
/// continues best: the most messages in common, a whole branch extended before a divergence,
/// then the most recently updated. With `extends_only`, only members with a stored branch that
/// is a prefix of `messages` (or with nothing stored) count.
fn best<M: std::borrow::Borrow<AgentMessage>>(
    store: &dyn SharedStore,
    cache: &SessionCache,
    prefix: &str,
    exact: Option<&str>,
    messages: &[M],
    continues: Option<(u64, usize)>,
    extends_only: bool,
) -> Result<Option<(String, Placed)>, ConversationError> {
    // (matched anything, messages matched, extends, updated at): the larger the better.
    type Rank = (bool, usize, bool, u64);
    let mut chosen: Option<(Rank, String, Placed)> = None;
    let members = if extends_only {
        // Most members of a large family are ruled out by their branch ends alone; only
        // the others' entries are read.
        let chain = request_chain(messages);
        store.family_kept(prefix, exact, &mut |key, updated_at| {
            cache.may_extend(key, updated_at, &chain)
        })?
    } else {
        store.family(prefix, exact)?
    };
    for (key, entry) in members {
        // Branch ends are kept only for the families they filter (anonymous ones): a client's
        // own family is small, and its conversations long.
        let placed = match cache.placement(store, &key, &entry, messages, continues, extends_only) {
            Ok(placed) => placed,
            Err(e) => {
                tracing::warn!(key = %key, error = %e, "a conversation could not be opened; it is skipped");
                continue;
            }
        };
        let m = &placed.placement;
        let usable = match m.kind {
            MatchKind::Extends | MatchKind::Empty => true,
            MatchKind::Diverges => !extends_only,
            MatchKind::Unrelated => false,
        };
        if !usable {
            continue;
        }
        let rank = (
            m.kind != MatchKind::Empty,
            m.matched,
            m.kind == MatchKind::Extends,
            entry.updated_at,
        );
        if chosen.as_ref().is_none_or(|(r, _, _)| rank > *r) {
            chosen = Some((rank, key, placed));
        }
    }
    Ok(chosen.map(|(_, key, placed)| (key, placed)))
}

/// Creates a conversation under a free key `<prefix><n>`: the one after the taken run `1..n`
/// (the first free one when the numbers were handed out in order, as they are), found in
/// O(log n) probes: a server's ten-thousandth anonymous conversation used to try the nine
/// thousand nine hundred and ninety-nine taken keys first.
fn create(
    store: &dyn SharedStore,
    prefix: &str,
    spawned_by: Option<&str>,
    thread: Option<&str>,
) -> Result<String, ConversationError> {
    create_with(
        store,
        &mut |taken| free_key(prefix, taken),
        spawned_by,
        thread,
    )
}

/// `<prefix><n>` not `taken`: 1 if free, else `n` with `n - 1` taken, by doubling then
/// bisecting.
fn free_key(prefix: &str, taken: &dyn Fn(&str) -> bool) -> String {
    let key = |n: u64| format!("{prefix}{n}");
    if !taken(&key(1)) {
        return key(1);
    }
    // `low` is taken, `high` is free.
    let (mut low, mut high) = (1u64, 2u64);
    while taken(&key(high)) {
        if high == u64::MAX {
            return key(0);
        }
        low = high;
        high = high.saturating_mul(2);
    }
    while high - low > 1 {
        let middle = low + (high - low) / 2;
        if taken(&key(middle)) {
            low = middle;
        } else {
            high = middle;
        }
    }
    key(high)
}

/// Creates the conversation `key` unless it exists (another request made it meanwhile).
fn create_exact(
    store: &dyn SharedStore,
    key: &str,
    spawned_by: Option<&str>,
    thread: Option<&str>,
) -> Result<String, ConversationError> {
    create_with(store, &mut |_| key.to_owned(), spawned_by, thread)
}

fn create_with(
    store: &dyn SharedStore,
    pick: &mut PickKey<'_>,
    spawned_by: Option<&str>,
    thread: Option<&str>,
) -> Result<String, ConversationError> {
    let cwd = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_else(|_| ".".to_string());
    let mut fields = EntryFields::new();
    if let Some(parent) = spawned_by {
        fields.insert(SPAWNED_BY.to_owned(), Value::from(parent));
    }
    if let Some(thread) = thread {
        fields.insert(SERVE_THREAD.to_owned(), Value::from(thread));
    }
    fields.insert("origin".to_owned(), Value::from("rampart serve"));
    let (key, _) = store.create(pick, SessionHeader::new(cwd), fields)?;
    Ok(key)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "conversations_tests.rs"]
mod tests;
