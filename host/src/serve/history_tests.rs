use rampart_message::AgentMessage;
use rampart_sessions::{EntryBody, SessionTree};
use serde_json::json;

use super::*;

fn user(text: &str) -> AgentMessage {
    AgentMessage::user_text(text, 1)
}

fn answer(text: &str) -> AgentMessage {
    AgentMessage::assistant_text(text, "anthropic-messages", "up", "m", 2)
}

fn call(id: &str, args: serde_json::Value) -> AgentMessage {
    serde_json::from_value(json!({
        "role": "assistant",
        "content": [{"type": "thinking", "thinking": "hmm", "thinkingSignature": "sig"},
                    {"type": "toolCall", "id": id, "name": "read", "arguments": args}],
        "api": "anthropic-messages", "provider": "up", "model": "m",
        "usage": {"input": 10, "output": 3, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 13,
                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
        "stopReason": "toolUse", "timestamp": 5
    }))
    .unwrap()
}

fn result(id: &str, text: &str) -> AgentMessage {
    AgentMessage::tool_result(id, "read", text, false, 6)
}

/// A tree holding `messages` as one branch; returns it with the entry ids.
fn tree_of(messages: &[AgentMessage]) -> (SessionTree, Vec<String>) {
    let mut tree = SessionTree::new();
    let ids = messages
        .iter()
        .map(|m| tree.append(EntryBody::from_message(m.clone())).id.clone())
        .collect();
    (tree, ids)
}

#[test]
fn an_empty_tree_takes_every_message() {
    let tree = SessionTree::new();
    let incoming = [user("hi")];
    let m = match_history(&tree, &incoming);
    assert_eq!(m.kind, MatchKind::Empty);
    assert_eq!(m.attach_at, None);
    assert_eq!(m.unseen(&incoming).len(), 1);
}

#[test]
fn a_longer_history_extends_the_branch_and_only_the_rest_is_unseen() {
    let (tree, ids) = tree_of(&[user("u1"), answer("a1")]);
    let incoming = [user("u1"), answer("a1"), user("u2")];
    let m = match_history(&tree, &incoming);
    assert_eq!(m.kind, MatchKind::Extends);
    assert_eq!(m.attach_at.as_deref(), Some(ids[1].as_str()));
    assert_eq!(m.matched, 2);
    assert_eq!(m.unseen(&incoming), &[user("u2")]);
}

#[test]
fn entries_that_are_not_messages_are_passed_through() {
    let (mut tree, _) = tree_of(&[user("u1"), answer("a1")]);
    let touch = tree
        .append(EntryBody::Custom(
            serde_json::from_value(
                json!({"customType": "openclaw.cache-ttl", "data": {"timestamp": 3}}),
            )
            .unwrap(),
        ))
        .id
        .clone();
    let m = match_history(&tree, &[user("u1"), answer("a1"), user("u2")]);
    assert_eq!(m.kind, MatchKind::Extends);
    assert_eq!(m.attach_at.as_deref(), Some(touch.as_str()));
}

#[test]
fn an_edit_branches_from_the_last_common_entry() {
    let (tree, ids) = tree_of(&[user("u1"), answer("a1"), user("u2"), answer("a2")]);
    let incoming = [user("u1"), answer("a1"), user("u2 edited")];
    let m = match_history(&tree, &incoming);
    assert_eq!(m.kind, MatchKind::Diverges);
    assert_eq!(m.attach_at.as_deref(), Some(ids[1].as_str()));
    assert_eq!(m.unseen(&incoming), &[user("u2 edited")]);
}

#[test]
fn a_regenerate_branches_at_the_prompt() {
    let (tree, ids) = tree_of(&[user("u1"), answer("a1")]);
    let m = match_history(&tree, &[user("u1")]);
    assert_eq!(m.kind, MatchKind::Diverges);
    assert_eq!(m.attach_at.as_deref(), Some(ids[0].as_str()));
    assert_eq!(m.matched, 1);
}

#[test]
fn a_different_first_message_is_unrelated() {
    let (tree, _) = tree_of(&[user("u1"), answer("a1")]);
    let m = match_history(&tree, &[user("another task")]);
    assert_eq!(m.kind, MatchKind::Unrelated);
    assert_eq!(m.attach_at, None);
}

#[test]
fn equal_first_messages_do_not_make_a_continuation() {
    // The CLAUDE.md case: the same first message, then a different answer. The request is a
    // branch at the first message, never a continuation of the stored answer.
    let (tree, ids) = tree_of(&[user("CLAUDE.md + task"), answer("a1"), user("u2")]);
    let incoming = [user("CLAUDE.md + task"), answer("another a1"), user("u2")];
    let m = match_history(&tree, &incoming);
    assert_eq!(m.kind, MatchKind::Diverges);
    assert_eq!(m.attach_at.as_deref(), Some(ids[0].as_str()));
    assert_eq!(m.matched, 1);
}

#[test]
fn both_branches_stay_reachable_after_an_edit() {
    let (mut tree, ids) = tree_of(&[user("u1"), answer("a1"), user("u2"), answer("a2")]);
    tree.branch(&ids[1]);
    let edited = tree.append(EntryBody::from_message(user("u2'"))).id.clone();
    let new_answer = tree
        .append(EntryBody::from_message(answer("a2'")))
        .id
        .clone();
    // The old branch, continued.
    let old = match_history(
        &tree,
        &[
            user("u1"),
            answer("a1"),
            user("u2"),
            answer("a2"),
            user("u3"),
        ],
    );
    assert_eq!(old.kind, MatchKind::Extends);
    assert_eq!(old.attach_at.as_deref(), Some(ids[3].as_str()));
    // The new one.
    let new = match_history(
        &tree,
        &[
            user("u1"),
            answer("a1"),
            user("u2'"),
            answer("a2'"),
            user("u3"),
        ],
    );
    assert_eq!(new.kind, MatchKind::Extends);
    assert_eq!(new.attach_at.as_deref(), Some(new_answer.as_str()));
    assert_ne!(edited, ids[2]);
}

#[test]
fn ties_go_to_the_active_branch() {
    let (mut tree, ids) = tree_of(&[user("u1"), answer("a1")]);
    tree.branch(&ids[0]);
    let twin = tree
        .append(EntryBody::from_message(answer("a1")))
        .id
        .clone();
    tree.branch(&ids[1]);
    let m = match_history(&tree, &[user("u1"), answer("a1"), user("u2")]);
    assert_eq!(m.attach_at.as_deref(), Some(ids[1].as_str()));
    tree.branch(&twin);
    let m = match_history(&tree, &[user("u1"), answer("a1"), user("u2")]);
    assert_eq!(m.attach_at.as_deref(), Some(twin.as_str()));
}

#[test]
fn tool_calls_and_results_compare_by_id_arguments_and_content() {
    let stored = [
        user("read a"),
        call("toolu_1", json!({"path": "a"})),
        result("toolu_1", "body"),
    ];
    let (tree, ids) = tree_of(&stored);
    // The client's copy of the call carries no thinking text, usage or timestamps.
    let resent_call: AgentMessage = serde_json::from_value(json!({
        "role": "assistant",
        "content": [{"type": "toolCall", "id": "toolu_1", "name": "read", "arguments": {"path": "a"}}],
        "api": "anthropic-messages", "provider": "client", "model": "",
        "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
        "stopReason": "stop", "timestamp": 0
    }))
    .unwrap();
    let incoming = [
        user("read a"),
        resent_call,
        result("toolu_1", "body"),
        user("next"),
    ];
    let m = match_history(&tree, &incoming);
    assert_eq!(m.kind, MatchKind::Extends);
    assert_eq!(m.attach_at.as_deref(), Some(ids[2].as_str()));
    // Other arguments, another id or another result: not the same message.
    assert!(!same_message(
        &stored[1],
        &call("toolu_1", json!({"path": "b"}))
    ));
    assert!(!same_message(
        &stored[1],
        &call("toolu_2", json!({"path": "a"}))
    ));
    assert!(!same_message(&stored[2], &result("toolu_1", "other")));
    assert!(!same_message(&stored[2], &result("toolu_9", "body")));
}

#[test]
fn an_answer_matches_its_resent_text_however_the_blocks_were_split() {
    let stored: AgentMessage = serde_json::from_value(json!({
        "role": "assistant",
        "content": [{"type": "text", "text": "part one"}, {"type": "text", "text": "part two"}],
        "api": "openai-completions", "provider": "up", "model": "m",
        "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
        "stopReason": "stop", "timestamp": 9
    }))
    .unwrap();
    assert!(same_message(&stored, &answer("part one\npart two")));
    assert!(!same_message(&stored, &answer("part one")));
    // Roles differ: never the same.
    assert!(!same_message(&user("x"), &answer("x")));
}

#[test]
fn a_capped_result_matches_the_full_original() {
    use sha2::Digest;
    let original = "line\n".repeat(5000);
    let hex: String = sha2::Sha256::digest(original.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let capped =
        format!("line\nline\n\n[... 24990 characters omitted; full output: blob sha256:{hex} ...]");
    assert!(same_message(
        &result("c1", &capped),
        &result("c1", &original)
    ));
    // A head that is kept as it was matches too; an unrelated short text does not.
    let head = format!("{}\n[... truncated ...]", "0123456789abcdefghij");
    assert!(same_message(
        &result("c1", &head),
        &result("c1", &format!("0123456789abcdefghij{}", "x".repeat(100)))
    ));
    assert!(!same_message(
        &result("c1", "short"),
        &result("c1", &original)
    ));
}

#[test]
fn an_aborted_answer_is_passed_through_so_a_retry_continues_after_it() {
    let mut aborted = answer("half an ans");
    if let AgentMessage::Assistant(a) = &mut aborted {
        a.stop_reason = rampart_message::StopReason::Aborted;
    }
    let (tree, ids) = tree_of(&[user("u1"), aborted]);
    // The client re-sends its prompt: it never saw a whole answer.
    let m = match_history(&tree, &[user("u1")]);
    assert_eq!(m.kind, MatchKind::Extends);
    assert_eq!(m.attach_at.as_deref(), Some(ids[1].as_str()));
    assert_eq!(m.matched, 1);
}

/// An answer from a Responses upstream keeps its reasoning item; a chat client re-sends the
/// answer without it, a Responses client with fields of its own: both continue the branch.
/// A different opaque tool call is a different answer.
#[test]
fn reasoning_items_do_not_decide_a_match_but_opaque_calls_do() {
    use crate::providers::responses::opaque::opaque_block;
    let with = |blocks: Vec<rampart_message::ContentBlock>| {
        let AgentMessage::Assistant(mut a) = answer("Done.") else {
            unreachable!()
        };
        a.content.splice(0..0, blocks);
        AgentMessage::Assistant(a)
    };
    let stored = with(vec![opaque_block(
        json!({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"}),
    )]);
    assert!(same_message(&stored, &answer("Done.")));
    assert!(same_message(
        &stored,
        &with(vec![opaque_block(
            json!({"type": "reasoning", "id": "rs_1",
                                       "encrypted_content": "gAAA", "content": null})
        )])
    ));
    let patch = |input: &str| {
        opaque_block(
            json!({"type": "custom_tool_call", "call_id": "c", "name": "apply_patch",
                            "input": input}),
        )
    };
    assert!(same_message(
        &with(vec![patch("a")]),
        &with(vec![patch("a")])
    ));
    assert!(!same_message(
        &with(vec![patch("a")]),
        &with(vec![patch("b")])
    ));
}

fn opaque(text: &str, mark: bool, timestamp: u64) -> AgentMessage {
    let mut block = json!({"type": "text", "text": text});
    if mark {
        block["cache_control"] = json!({"type": "ephemeral"});
    }
    let item = json!({"role": "system", "content": [block]});
    rampart_message::opaque::opaque_message(
        rampart_message::opaque::ANTHROPIC_MESSAGES,
        item.as_object().cloned().unwrap(),
        timestamp,
    )
}

/// A client re-sends its opaque messages (Claude Code's system message) every turn: the stored
/// one is matched, whatever breakpoint the client moved onto it and whenever it was read; a
/// changed one is an edit.
#[test]
fn an_opaque_message_matches_its_resent_item_breakpoints_aside() {
    let (tree, ids) = tree_of(&[user("u1"), opaque("agents: a", false, 1), answer("a1")]);
    let incoming = [
        user("u1"),
        opaque("agents: a", true, 99),
        answer("a1"),
        user("u2"),
    ];
    let m = match_history(&tree, &incoming);
    assert_eq!(m.kind, MatchKind::Extends);
    assert_eq!(m.attach_at.as_deref(), Some(ids[2].as_str()));

    let changed = [user("u1"), opaque("agents: b", false, 1), answer("a1")];
    let m = match_history(&tree, &changed);
    assert_eq!(m.kind, MatchKind::Diverges);
    assert_eq!(m.attach_at.as_deref(), Some(ids[0].as_str()));
}

/// The branch-end filter never rules out a tree a request extends: for random trees (branches,
/// aborted answers, capped results, non-message entries, text split across blocks) and
/// requests made from their paths with and without changes, whenever [`match_history`] says
/// `Extends` or `Empty`, [`BranchEnds::may_extend`] says true. And it does rule out most of
/// the rest (else it would filter nothing).
#[test]
fn branch_ends_never_rule_out_a_tree_the_request_extends() {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let original = "0123456789abcdefghij\n".repeat(300);
    let capped = "0123456789abcdefghij\n[... truncated ...]";
    let mut aborted = answer("half");
    if let AgentMessage::Assistant(a) = &mut aborted {
        a.stop_reason = rampart_message::StopReason::Aborted;
    }
    let split: AgentMessage = serde_json::from_value(json!({
        "role": "assistant",
        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        "api": "anthropic-messages", "provider": "up", "model": "m",
        "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
        "stopReason": "stop", "timestamp": 9
    }))
    .unwrap();
    let pool = [
        user("u1"),
        user("u2"),
        user(" u1 "),
        answer("a1"),
        answer("a\nb"),
        split,
        aborted,
        call("c1", json!({"path": "x"})),
        result("c1", &original),
        result("c1", capped),
        result("c2", "other"),
    ];
    let (mut ruled_out, mut extends) = (0, 0);
    for _ in 0..3000 {
        let mut tree = SessionTree::new();
        for _ in 0..1 + next(7) {
            if !tree.is_empty() && next(3) == 0 {
                let at = tree.entries()[next(tree.len() as u64) as usize].id.clone();
                tree.branch(&at);
            }
            if next(8) == 0 {
                tree.append(EntryBody::Custom(
                    serde_json::from_value(json!({"customType": "x", "data": {}})).unwrap(),
                ));
            } else {
                tree.append(EntryBody::from_message(
                    pool[next(pool.len() as u64) as usize].clone(),
                ));
            }
        }
        let ends = BranchEnds::of(&tree);
        for _ in 0..6 {
            // A path's messages, perhaps with one swapped, perhaps with more after.
            let mut request: Vec<AgentMessage> = if tree.is_empty() {
                Vec::new()
            } else {
                let leaf = next(tree.len() as u64) as usize;
                // A client re-sends the whole result the store keeps capped.
                tree.path_to(leaf)
                    .into_iter()
                    .filter_map(|i| tree.entries()[i].body.message().cloned())
                    .map(|m| match &m {
                        AgentMessage::ToolResult(r) if r.content.joined_text() == capped => {
                            result("c1", &original)
                        }
                        _ => m,
                    })
                    .collect()
            };
            if !request.is_empty() && next(3) == 0 {
                let at = next(request.len() as u64) as usize;
                request[at] = pool[next(pool.len() as u64) as usize].clone();
            }
            for _ in 0..next(3) {
                request.push(pool[next(pool.len() as u64) as usize].clone());
            }
            if request.is_empty() {
                continue;
            }
            let kind = match_history(&tree, &request).kind;
            let may = ends.may_extend(&request_chain(&request));
            if matches!(kind, MatchKind::Extends | MatchKind::Empty) {
                extends += 1;
                assert!(
                    may,
                    "ruled out a tree the request extends: {tree:?} {request:?}"
                );
            } else if !may {
                ruled_out += 1;
            }
        }
    }
    assert!(extends > 1000, "{extends}");
    assert!(ruled_out > 1000, "{ruled_out}");
}

#[test]
fn branch_ends_pass_over_a_conversation_that_went_elsewhere() {
    let (tree, _) = tree_of(&[user("rules"), answer("ok 1"), user("q1"), answer("a1")]);
    let ends = BranchEnds::of(&tree);
    // The same opening, another conversation: ruled out without matching.
    let other = [user("rules"), answer("ok 2"), user("q2")];
    assert!(!ends.may_extend(&request_chain(&other)));
    // Its own next turn is kept.
    let next = [
        user("rules"),
        answer("ok 1"),
        user("q1"),
        answer("a1"),
        user("q3"),
    ];
    assert!(ends.may_extend(&request_chain(&next)));
    // A tree with no message rules nothing out.
    assert!(BranchEnds::of(&SessionTree::new()).may_extend(&request_chain(&other)));
}

/// A user message's other blocks (a document, an image) match when only their breakpoint
/// moved, and not when their content or kind differs.
#[test]
fn other_blocks_match_with_their_breakpoint_aside() {
    use rampart_message::{Content, ContentBlock, ImageContent};
    let with = |blocks: Vec<ContentBlock>| {
        let mut m = user("");
        if let AgentMessage::User(u) = &mut m {
            u.content = Content::Blocks(blocks);
        }
        m
    };
    let doc = |data: &str, mark: bool| {
        let mut block = json!({"type": "document", "source": {"type": "text", "data": data}});
        if mark {
            block["cache_control"] = json!({"type": "ephemeral"});
        }
        ContentBlock::Other(block.as_object().cloned().unwrap())
    };
    let image = |data: &str| {
        ContentBlock::Image(ImageContent {
            data: data.into(),
            mime_type: "image/png".into(),
            extra: Default::default(),
        })
    };
    assert!(same_message(
        &with(vec![doc("spec", false), image("AAAA")]),
        &with(vec![doc("spec", true), image("AAAA")])
    ));
    assert!(!same_message(
        &with(vec![doc("spec", false)]),
        &with(vec![doc("other", true)])
    ));
    assert!(!same_message(
        &with(vec![image("AAAA")]),
        &with(vec![image("BBBB")])
    ));
    assert!(!same_message(
        &with(vec![doc("spec", false)]),
        &with(vec![image("spec")])
    ));
}

/// The entries a request's messages were stored as are found again on the path to the leaf,
/// and handed to the next request's match: the known pairs are taken without comparison (a
/// known entry matches whatever its message, which is why only byte-identical messages may
/// be given as known), the rest are compared, and with nothing known the result is the plain
/// match.
#[test]
fn known_entries_are_taken_and_the_rest_compared() {
    fn noted_ids(note: &SentNote) -> &[std::sync::Arc<str>] {
        match &note.at {
            Noted::Ids(ids) => ids,
            Noted::Chain { .. } => &[],
        }
    }
    let sent = [user("u1"), call("c1", json!({"p": 1})), result("c1", "r1")];
    for branched in [false, true] {
        let mut tree = SessionTree::new();
        let mut ids = Vec::new();
        for (n, m) in sent.iter().enumerate() {
            ids.push(tree.append(EntryBody::from_message(m.clone())).id.clone());
            if branched && n == 0 {
                // An answer abandoned for another: the tree is no longer one chain.
                tree.append(EntryBody::from_message(answer("abandoned")));
                tree.branch(&ids[0]);
            }
        }
        // A non-message entry on the path is passed over.
        tree.append(model_change());
        let known = sent_entries(&tree, sent.len(), &SentNote::default()).unwrap();
        // A chain's note keeps no ids: they are its message entries, read when needed.
        assert_eq!(matches!(known.at, Noted::Ids(_)), branched);
        let known_ids = known.known_ids(&tree, sent.len());
        assert_eq!(
            known_ids
                .iter()
                .map(|id| id.to_string())
                .collect::<Vec<_>>(),
            ids,
            "branched: {branched}"
        );
        if branched {
            // Noted again for the next request, an id equal to the one noted in its place is
            // that same allocation; one that differs is never taken from what was noted before.
            let again = sent_entries(&tree, sent.len(), &known).unwrap();
            assert!(
                noted_ids(&again)
                    .iter()
                    .zip(noted_ids(&known))
                    .all(|(a, b)| std::sync::Arc::ptr_eq(a, b))
            );
            let stale = SentNote {
                count: 3,
                at: Noted::Ids(vec![std::sync::Arc::<str>::from("not-an-entry"); 3].into()),
            };
            assert_eq!(sent_entries(&tree, sent.len(), &stale).unwrap(), known);
        }
        assert_eq!(
            sent_entries(&tree, sent.len() + 1, &SentNote::default()),
            None,
            "counts must agree"
        );

        let next = [sent.to_vec(), vec![answer("a1"), user("u2")]].concat();
        let plain = match_history(&tree, &next);
        assert_eq!(match_history_known(&tree, &next, &known_ids), plain);
        assert_eq!(match_history_noted(&tree, &next, &known, 3), plain);
        assert_eq!(plain.matched, 3);
        // Known pairs are not compared: a changed message given as known still matches...
        let mut changed = next.clone();
        changed[0] = user("edited");
        assert_eq!(match_history_known(&tree, &changed, &known_ids).matched, 3);
        // ...and one not known is compared: an edit after the known ones diverges there.
        changed[2] = result("c1", "other");
        let m = match_history_known(&tree, &changed, &known_ids[..2]);
        assert_eq!((m.kind, m.matched), (MatchKind::Diverges, 2));
        let m = match_history_noted(&tree, &changed, &known, 2);
        assert_eq!((m.kind, m.matched), (MatchKind::Diverges, 2));
    }
}

fn model_change() -> EntryBody {
    EntryBody::ModelChange(rampart_sessions::entry::ModelChangeEntry {
        provider: "up".into(),
        model_id: "m".into(),
        extra: Default::default(),
    })
}

fn server_result(id: &str) -> AgentMessage {
    let mut m = result(id, "remembered");
    if let AgentMessage::ToolResult(r) = &mut m {
        r.extra.insert(SERVER_TOOL_MARK.into(), json!(true));
    }
    m
}

/// What happened to a tree between one request's note and the next request.
#[derive(Debug, Clone, Copy)]
enum After {
    /// The turn's answer was appended (the usual case), then a non-message entry.
    Answered,
    /// The answer, then a regenerated one beside it (a fork below the last noted entry).
    Forked,
    /// A fork from an early entry: another branch, the leaf on it.
    BranchedEarly,
    /// The answer, and a result the server answered itself.
    ServerTool,
    /// Nothing.
    Untouched,
}

/// A request placed from its note is placed where the whole walk places it, whatever happened
/// to the tree since the note and whatever the request carries; and the walk starts at the
/// note only when the tree stayed one chain, so that shortcut cannot hide another branch.
#[test]
fn a_noted_request_is_placed_as_the_whole_walk_places_it() {
    let sent = [
        user("u1"),
        call("c1", json!({"p": 1})),
        result("c1", "r1"),
        user("u2"),
    ];
    let afters = [
        After::Answered,
        After::Forked,
        After::BranchedEarly,
        After::ServerTool,
        After::Untouched,
    ];
    let mut resumed = 0;
    for after in afters {
        let (mut tree, _) = tree_of(&sent);
        tree.append(model_change());
        let note = sent_entries(&tree, sent.len(), &SentNote::default()).unwrap();
        assert!(
            matches!(note.at, Noted::Chain { .. }),
            "{after:?}: a chain is noted as one"
        );
        match after {
            After::Answered => {
                tree.append(EntryBody::from_message(answer("a2")));
                tree.append(model_change());
            }
            After::Forked => {
                let at = tree.leaf_id().unwrap().to_owned();
                tree.append(EntryBody::from_message(answer("a2")));
                tree.branch(&at);
                tree.append(EntryBody::from_message(answer("a2 again")));
            }
            After::BranchedEarly => {
                let first = tree.entries()[0].id.clone();
                tree.branch(&first);
                tree.append(EntryBody::from_message(answer("other")));
            }
            After::ServerTool => {
                tree.append(EntryBody::from_message(call("m1", json!({}))));
                tree.append(EntryBody::from_message(server_result("m1")));
                tree.append(EntryBody::from_message(answer("a2")));
            }
            After::Untouched => {}
        }
        let chained = note.appended_since(&tree).is_some();
        assert_eq!(
            chained,
            matches!(after, After::Answered | After::Untouched),
            "{after:?}"
        );
        resumed += usize::from(chained);
        let requests = [
            sent.to_vec(),
            [sent.to_vec(), vec![answer("a2")]].concat(),
            [sent.to_vec(), vec![answer("a2"), user("u3")]].concat(),
            [sent.to_vec(), vec![answer("a2 again"), user("u3")]].concat(),
            [sent.to_vec(), vec![answer("changed"), user("u3")]].concat(),
            [sent.to_vec(), vec![user("u3")]].concat(),
            [sent[..2].to_vec(), vec![result("c1", "other")]].concat(),
        ];
        for request in &requests {
            let whole = match_history(&tree, request);
            for count in 0..=sent.len() {
                if count > request.len() || request[..count] != sent[..count] {
                    continue;
                }
                assert_eq!(
                    match_history_noted(&tree, request, &note, count),
                    whole,
                    "{after:?}, {count} known, request of {}",
                    request.len()
                );
            }
        }
        // The note for the next request says what a whole walk of the path says.
        let leaf_path = tree
            .path_to(tree.leaf_index().unwrap())
            .into_iter()
            .filter(|&at| tree.entries()[at].body.message().is_some())
            .count();
        let walked = sent_entries(&tree, leaf_path, &SentNote::default());
        assert_eq!(sent_entries(&tree, leaf_path, &note), walked, "{after:?}");
    }
    assert_eq!(resumed, 2);
}

/// Turn after turn on one chain, each note comes from the one before without a walk, says
/// what a walk says (holding no ids), and places the next request as a walk does.
#[test]
fn notes_follow_a_growing_chain() {
    let mut tree = SessionTree::new();
    let mut sent: Vec<AgentMessage> = Vec::new();
    let mut note = SentNote::default();
    for turn in 0..20 {
        let request = [sent.clone(), vec![user(&format!("u{turn}"))]].concat();
        let placed = match_history_noted(&tree, &request, &note, note.len());
        assert_eq!(placed, match_history(&tree, &request), "turn {turn}");
        for m in placed.unseen(&request) {
            tree.append(EntryBody::from_message(m.clone()));
        }
        let next = sent_entries(&tree, request.len(), &note).unwrap();
        assert_eq!(
            next,
            sent_entries(&tree, request.len(), &SentNote::default()).unwrap()
        );
        assert!(matches!(next.at, Noted::Chain { .. }), "turn {turn}");
        note = next;
        tree.append(EntryBody::from_message(answer(&format!("a{turn}"))));
        if turn % 3 == 0 {
            tree.append(model_change());
        }
        sent = [request, vec![answer(&format!("a{turn}"))]].concat();
    }
}
