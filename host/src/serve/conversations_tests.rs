use rampart_message::AgentMessage;
use rampart_sessions::store::SessionStore;

use super::*;
use crate::serve::identity::ClaudeCodeSource;

fn user(text: &str) -> AgentMessage {
    AgentMessage::user_text(text, 1)
}

fn answer(text: &str) -> AgentMessage {
    AgentMessage::assistant_text(text, "anthropic-messages", "up", "m", 2)
}

fn cc(id: &str) -> ClientSession {
    ClientSession::ClaudeCode {
        session: id.into(),
        source: ClaudeCodeSource::Header,
    }
}

/// Opens the conversation for `messages` and stores the unseen ones plus `reply`, as a turn
/// would; returns the key.
fn turn(
    store: &SessionStore,
    client: Option<&ClientSession>,
    messages: &[AgentMessage],
    reply: &str,
) -> String {
    let mut c = open(store, client, messages, Duration::from_secs(5)).unwrap();
    match &c.placement.attach_at {
        Some(id) => c.session.branch(id).unwrap(),
        None => c.session.reset_leaf(),
    }
    for m in c.placement.unseen(messages) {
        c.session.append_message(m.clone()).unwrap();
    }
    c.session.append_message(answer(reply)).unwrap();
    c.session.sync().unwrap();
    c.key
}

#[test]
fn same_claude_md_different_session_ids_are_two_conversations() {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::open(dir.path()).unwrap();
    let first = [user("<CLAUDE.md> task")];
    let a = turn(&store, Some(&cc("aaaa")), &first, "a1");
    let b = turn(&store, Some(&cc("bbbb")), &first, "b1");
    assert_ne!(a, b);
    assert_eq!(a, "serve:claude-code:aaaa");
    // Each continues its own.
    let a2 = turn(
        &store,
        Some(&cc("aaaa")),
        &[first[0].clone(), answer("a1"), user("more")],
        "a2",
    );
    assert_eq!(a2, a);
}

#[test]
fn an_unrelated_history_under_an_id_is_a_spawned_child() {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::open(dir.path()).unwrap();
    let root = turn(&store, Some(&cc("s1")), &[user("main task")], "ok");
    let child = turn(
        &store,
        Some(&cc("s1")),
        &[user("subagent: search the repo")],
        "found",
    );
    assert_eq!(child, "serve:claude-code:s1:child:1");
    let entry = store.get(&child).unwrap().unwrap();
    assert_eq!(entry.extra[SPAWNED_BY], root.as_str());
    // The child continues as itself; the root as itself.
    let again = turn(
        &store,
        Some(&cc("s1")),
        &[
            user("subagent: search the repo"),
            answer("found"),
            user("go on"),
        ],
        "done",
    );
    assert_eq!(again, child);
    let main = turn(
        &store,
        Some(&cc("s1")),
        &[user("main task"), answer("ok"), user("next")],
        "k",
    );
    assert_eq!(main, root);
}

#[test]
fn anonymous_clients_with_the_same_start_stay_apart_once_they_diverge() {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::open(dir.path()).unwrap();
    let a = turn(&store, None, &[user("hello")], "answer for A");
    // B starts the same; A's stored branch is not a prefix of B's request: a new conversation.
    let b = turn(&store, None, &[user("hello")], "answer for B");
    assert_ne!(a, b);
    let a2 = turn(
        &store,
        None,
        &[user("hello"), answer("answer for A"), user("a?")],
        "x",
    );
    let b2 = turn(
        &store,
        None,
        &[user("hello"), answer("answer for B"), user("b?")],
        "y",
    );
    assert_eq!((a2, b2), (a, b));
}

#[test]
fn codex_threads_are_root_and_child() {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::open(dir.path()).unwrap();
    let codex = |thread: &str| ClientSession::Codex {
        session: "sess-1".into(),
        thread: Some(thread.into()),
    };
    let root = turn(&store, Some(&codex("t-root")), &[user("fix the bug")], "ok");
    let sub = turn(
        &store,
        Some(&codex("t-sub")),
        &[user("fix the bug")],
        "sub ok",
    );
    assert_eq!(root, "serve:codex:sess-1");
    assert_eq!(sub, "serve:codex:sess-1:thread:t-sub");
    assert_eq!(
        store.get(&sub).unwrap().unwrap().extra[SPAWNED_BY],
        root.as_str()
    );
    let root_again = turn(
        &store,
        Some(&codex("t-root")),
        &[user("fix the bug"), answer("ok"), user("and?")],
        "done",
    );
    assert_eq!(root_again, root);
}

#[test]
fn an_edit_under_an_id_branches_the_same_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::open(dir.path()).unwrap();
    let id = ClientSession::Explicit("e".into());
    let k = turn(&store, Some(&id), &[user("u1")], "a1");
    turn(
        &store,
        Some(&id),
        &[user("u1"), answer("a1"), user("u2")],
        "a2",
    );
    let c = open(
        &store,
        Some(&id),
        &[user("u1"), answer("a1"), user("u2 edited")],
        Duration::from_secs(5),
    )
    .unwrap();
    assert_eq!(c.key, k);
    assert_eq!(c.placement.kind, MatchKind::Diverges);
    assert_eq!(c.placement.matched, 2);
}

#[test]
fn a_cached_session_catches_up_with_another_writer() {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::open(dir.path()).unwrap();
    let cache = SessionCache::new(4, u64::MAX);
    let id = ClientSession::Explicit("c".into());
    let first = [user("u1")];
    let chosen = choose(&store, &cache, Some(&id), &first).unwrap();
    let mut c = open_chosen(&store, &cache, chosen, &first, Duration::from_secs(5)).unwrap();
    c.session.append_message(user("u1")).unwrap();
    c.session.append_message(answer("a1")).unwrap();
    c.session.sync().unwrap();
    cache.put(&c.key, c.session, c.memos);
    // Another process appends a turn to the file behind the cache's back.
    let mut other = Session::open(
        &store
            .session_file_path(
                "serve:rampart:c",
                &store.get("serve:rampart:c").unwrap().unwrap(),
            )
            .unwrap(),
        SessionOptions::default(),
    )
    .unwrap();
    other.append_message(user("u2")).unwrap();
    other.append_message(answer("a2")).unwrap();
    other.sync().unwrap();
    drop(other);
    // The next request carries that turn too: the cached session, once held, knows it.
    let next = [
        user("u1"),
        answer("a1"),
        user("u2"),
        answer("a2"),
        user("u3"),
    ];
    let chosen = choose(&store, &cache, Some(&id), &next).unwrap();
    let c = open_chosen(&store, &cache, chosen, &next, Duration::from_secs(5)).unwrap();
    assert_eq!(c.placement.kind, MatchKind::Extends);
    assert_eq!(c.placement.matched, 4);
}

/// Keys handed out in order get the next number, however many are taken, in a few probes.
#[test]
fn a_free_key_follows_the_taken_run_in_logarithmic_probes() {
    for taken_count in [0u64, 1, 2, 3, 7, 8, 1000, 4097] {
        let probes = std::cell::Cell::new(0);
        let taken = |k: &str| {
            probes.set(probes.get() + 1);
            let n: u64 = k.strip_prefix("p:").unwrap().parse().unwrap();
            (1..=taken_count).contains(&n)
        };
        assert_eq!(free_key("p:", &taken), format!("p:{}", taken_count + 1));
        assert!(probes.get() <= 30, "{taken_count}: {} probes", probes.get());
    }
}

/// A request is placed when its conversation is chosen and that placement is used under the
/// lock, unless the tree changed in between: an answer appended by another writer after the
/// choice is seen, so the request continues it instead of branching beside it.
#[test]
fn a_placement_is_made_again_when_the_tree_changed_after_the_choice() {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::open(dir.path()).unwrap();
    let cache = SessionCache::new(8, u64::MAX);
    let client = cc("race");
    let first = [user("task")];
    turn(&store, Some(&client), &first, "one");
    let next = [first[0].clone(), answer("one"), user("more")];
    let chosen = choose(&store, &cache, Some(&client), &next).unwrap();
    let placed = chosen
        .placed
        .clone()
        .expect("a stored conversation is placed");
    assert_eq!(placed.placement.kind, MatchKind::Extends);
    assert_eq!(placed.placement.matched, 2);
    // Unchanged tree: the choice's placement is the one used.
    let c = open_chosen(
        &store,
        &cache,
        chosen.clone(),
        &next,
        Duration::from_secs(5),
    )
    .unwrap();
    assert_eq!(c.placement, placed.placement);
    cache.put(&c.key, c.session, TurnMemos::default());
    // Another writer stores the user line and an answer after the choice.
    let chosen = choose(&store, &cache, Some(&client), &next).unwrap();
    turn(&store, Some(&client), &next, "two");
    let later = [next.to_vec(), vec![answer("two"), user("again")]].concat();
    let c = open_chosen(&store, &cache, chosen, &later, Duration::from_secs(5)).unwrap();
    assert_eq!(c.placement.kind, MatchKind::Extends);
    assert_eq!(
        c.placement.matched, 4,
        "placed on the tree as it is under the lock"
    );
}

/// Where a request's messages were stored is noted under the number the inbound memo kept
/// them as; the request re-sending the first `n` of them byte for byte has only those taken
/// as known: a later message that differs from the stored one still makes a branch there.
#[test]
fn only_the_messages_a_request_shares_with_the_noted_one_are_taken_as_known() {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::open(dir.path()).unwrap();
    let cache = SessionCache::new(8, u64::MAX);
    let client = cc("known");
    let sent = [user("task"), answer("one"), user("more")];
    let chosen = choose(&store, &cache, Some(&client), &sent).unwrap();
    let mut c = open_chosen(&store, &cache, chosen, &sent, Duration::from_secs(5)).unwrap();
    c.session.reset_leaf();
    for m in c.placement.unseen(&sent) {
        c.session.append_message(m.clone()).unwrap();
    }
    let ids =
        crate::serve::history::sent_entries(c.session.tree(), sent.len(), &SentNote::default())
            .unwrap();
    c.session.sync().unwrap();
    cache.note_sent(&c.key, 7, ids);
    cache.put(&c.key, c.session, TurnMemos::default());

    // The next request shares only its first message with the noted one, then edits.
    let edited = [user("task"), answer("one, edited"), user("more")];
    let plain = choose(&store, &cache, Some(&client), &edited).unwrap();
    let known = choose_continuing(&store, &cache, Some(&client), &edited, Some((7, 1))).unwrap();
    assert_eq!(known, plain);
    let placement = known.placed.unwrap().placement;
    assert_eq!(
        (placement.kind, placement.matched),
        (MatchKind::Diverges, 1)
    );
    // Another number: nothing is known, the same placement.
    let other = choose_continuing(&store, &cache, Some(&client), &edited, Some((8, 3))).unwrap();
    assert_eq!(other, plain);
}

/// Notes of sessions that are not in the cache (a turn failed and its session was dropped)
/// are let go once the notes outnumber the cache: they cannot grow with every conversation.
#[test]
fn notes_of_sessions_not_kept_are_let_go() {
    let cache = SessionCache::new(2, u64::MAX);
    for i in 0..50 {
        cache.note_sent(&format!("gone:{i}"), i, SentNote::default());
    }
    assert!(cache.lock_sent().len() <= 2, "{}", cache.lock_sent().len());
}

/// Full, the cache closes the session used longest ago: a conversation continued a moment ago
/// stays while those left alone go, oldest first (an arbitrary choice fails this almost
/// always: it must pick the one right session twice out of four).
#[test]
fn a_full_cache_closes_the_session_used_longest_ago() {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::open(dir.path()).unwrap();
    let cache = SessionCache::new(4, u64::MAX);
    let turn_in = |name: &str, messages: &[AgentMessage]| -> String {
        let id = ClientSession::Explicit(name.into());
        let chosen = choose(&store, &cache, Some(&id), messages).unwrap();
        let mut c = open_chosen(&store, &cache, chosen, messages, Duration::from_secs(5)).unwrap();
        for m in c.placement.unseen(messages) {
            c.session.append_message(m.clone()).unwrap();
        }
        c.session.append_message(answer("ok")).unwrap();
        c.session.sync().unwrap();
        cache.put(&c.key, c.session, c.memos);
        c.key
    };
    let keys: Vec<String> = (0..4)
        .map(|i| turn_in(&format!("c{i}"), &[user("u1")]))
        .collect();
    // c0 is continued: now c1 is the one used longest ago.
    turn_in("c0", &[user("u1"), answer("ok"), user("u2")]);
    let cached = |key: &str| cache.map().contains_key(key);
    let k4 = turn_in("c4", &[user("u1")]);
    assert!(!cached(&keys[1]), "c1 was used longest ago");
    assert!(cached(&keys[0]) && cached(&keys[2]) && cached(&keys[3]) && cached(&k4));
    let k5 = turn_in("c5", &[user("u1")]);
    assert!(!cached(&keys[2]), "then c2");
    assert!(cached(&keys[0]) && cached(&keys[3]) && cached(&k4) && cached(&k5));
}

/// The cache also keeps to a budget in bytes of session log: a conversation that would take it
/// over closes the ones used longest ago, however few are open, and one larger than the whole
/// budget is not kept at all (its next request reads it from the store), without closing the
/// others for it.
#[test]
fn the_cache_keeps_to_its_budget_in_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::open(dir.path()).unwrap();
    // One turn of a conversation whose messages carry `size` bytes of text.
    let turn_in = |cache: &SessionCache, name: &str, size: usize| -> (String, u64) {
        let messages = [user(&format!("{name} {}", "x".repeat(size)))];
        let id = ClientSession::Explicit(name.into());
        let chosen = choose(&store, cache, Some(&id), &messages).unwrap();
        let mut c = open_chosen(&store, cache, chosen, &messages, Duration::from_secs(5)).unwrap();
        for m in c.placement.unseen(&messages) {
            c.session.append_message(m.clone()).unwrap();
        }
        c.session.append_message(answer("ok")).unwrap();
        c.session.sync().unwrap();
        let bytes = c.session.report().bytes;
        cache.put(&c.key, c.session, c.memos);
        (c.key, bytes)
    };
    // Sizes read off a cache with no budget: three conversations of about 10 KB.
    let probe = SessionCache::new(16, u64::MAX);
    let sizes: Vec<u64> = (0..3)
        .map(|i| turn_in(&probe, &format!("probe{i}"), 10_000).1)
        .collect();
    assert!(sizes.iter().all(|&b| b > 10_000), "{sizes:?}");
    // Room for two of them, in a cache that could count sixteen.
    let cache = SessionCache::new(16, sizes[0] + sizes[1] + sizes[2] / 2);
    let cached = |key: &str| cache.map().contains_key(key);
    let (a, _) = turn_in(&cache, "a", 10_000);
    let (b, _) = turn_in(&cache, "b", 10_000);
    assert!(cached(&a) && cached(&b));
    let (c, _) = turn_in(&cache, "c", 10_000);
    assert!(
        !cached(&a),
        "a was used longest ago and the budget holds two"
    );
    assert!(cached(&b) && cached(&c));
    // One over the whole budget is closed at once; the two open stay open.
    let (big, big_bytes) = turn_in(&cache, "big", 40_000);
    assert!(big_bytes > cache.max_bytes);
    assert!(
        !cached(&big),
        "a conversation over the whole budget is not kept"
    );
    assert!(cached(&b) && cached(&c), "nothing was closed for it");
    // Its next request still finds it, read from the store, and continues it.
    let messages = [
        user(&format!("big {}", "x".repeat(40_000))),
        answer("ok"),
        user("more"),
    ];
    let chosen = choose(
        &store,
        &cache,
        Some(&ClientSession::Explicit("big".into())),
        &messages,
    )
    .unwrap();
    let again = open_chosen(&store, &cache, chosen, &messages, Duration::from_secs(5)).unwrap();
    assert_eq!(again.key, big);
    assert_eq!(
        again.placement.unseen(&messages).len(),
        1,
        "only the new message is unseen"
    );
}
