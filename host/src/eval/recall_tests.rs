//! The probe: its words come from around a fact and never from the fact; it finds planted
//! facts through tools that can reach them, and only those.
use super::*;
use std::cell::RefCell;

fn user(text: &str) -> AgentMessage {
    AgentMessage::user_text(text, 1)
}

#[test]
fn probe_words_surround_the_fact_and_never_contain_it() {
    let messages = [
        user("nothing here"),
        user(
            "The staging build cache lives at /var/cache/quartz-17/obj since the migration \
             of November.",
        ),
    ];
    let probe = probe_words("/var/cache/quartz-17/obj", &messages).unwrap();
    assert_eq!(
        probe, "lives since migration",
        "the nearest words, in text order"
    );
    for word in probe.split(' ') {
        assert!(!"/var/cache/quartz-17/obj".contains(word), "{word}");
    }
    // Words of the fact ("cache", "quartz") are not probe words even when they also occur
    // outside it.
    let messages = [user(
        "cache cache quartz: see /var/cache/quartz-17/obj for the kernel",
    )];
    let probe = probe_words("/var/cache/quartz-17/obj", &messages).unwrap();
    assert!(
        !probe.contains("cache") && !probe.contains("quartz"),
        "{probe}"
    );
    assert!(probe.contains("kernel"), "{probe}");
    // No context, no probe; a fact only the assistant said is not probed.
    assert_eq!(probe_words("48213", &[user("48213")]), None);
    let said = rampart_engine_test::build::assistant_text("the port is 48213 on the gateway");
    assert_eq!(probe_words("48213", &[said]), None);
}

#[test]
fn probe_words_are_the_distinctive_ones_not_the_markup_every_entry_shares() {
    // A contributors list: every entry has the same markup, so the nearest words ("href",
    // "title", "width") say nothing about where one link is; the neighbours' names do.
    let entries: Vec<String> = ["ada", "grace", "linus", "margaret", "dennis", "barbara"]
        .iter()
        .map(|name| {
            format!(
                r#"<a href="https://example.org/{name}"><img width="48" height="48" title="{name}"/></a>"#
            )
        })
        .collect();
    let messages = [user("unrelated"), user(&entries.join("\n"))];
    let probe = probe_words("https://example.org/linus", &messages).unwrap();
    let markup = probe
        .split(' ')
        .filter(|w| ["href", "title", "width", "height", "example"].contains(w))
        .count();
    assert!(markup <= 1, "the shared markup fills the probe: {probe}");
    assert!(
        probe.contains("grace") && probe.contains("margaret"),
        "{probe}"
    );

    // Letters inside a hash are no word; a name with digits is one.
    let messages = [user(
        "commit 3cdfb9aa0e by caelum0x: fixed the ledger at /srv/ledger/42 (3cdfb9aa0e)",
    )];
    let probe = probe_words("/srv/ledger/42", &messages).unwrap();
    assert!(!probe.contains("cdfb"), "{probe}");
    assert!(probe.contains("caelum0x"), "{probe}");
}

/// A fake recall: `lcm_grep` finds the stored messages holding every word of the pattern,
/// `lcm_describe` reads one. It records every query, so the test can check none carries the
/// fact.
struct Corpus {
    messages: Vec<String>,
    queries: RefCell<Vec<String>>,
}

impl RecallTools for Corpus {
    fn offers(&self, name: &str) -> bool {
        matches!(name, "lcm_grep" | "lcm_describe")
    }

    fn call(&self, name: &str, arguments: Value) -> Option<String> {
        match name {
            "lcm_grep" => {
                let pattern = arguments["pattern"].as_str().unwrap().to_owned();
                self.queries.borrow_mut().push(pattern.clone());
                let hits: Vec<Value> = self
                    .messages
                    .iter()
                    .enumerate()
                    .filter(|(_, m)| {
                        pattern
                            .split(' ')
                            .all(|w| m.to_lowercase().contains(w))
                    })
                    .map(|(i, m)| json!({"id": format!("msg#{i}"), "snippet": &m[..m.len().min(10)]}))
                    .collect();
                Some(json!({"hits": hits}).to_string())
            }
            "lcm_describe" => {
                let id = arguments["id"].as_str().unwrap();
                let i: usize = id[4..].parse().unwrap();
                Some(json!({"content": self.messages[i]}).to_string())
            }
            _ => None,
        }
    }
}

#[test]
fn planted_facts_are_recovered_only_when_the_tools_reach_them() {
    let stored = "The staging build cache lives at /var/cache/quartz-17/obj since the migration.";
    let messages = [
        user(stored),
        user("the gateway port is 48213 on the edge router"),
    ];
    let corpus = Corpus {
        // Only the first message is in the store: the second must not be found.
        messages: vec![
            stored.to_owned(),
            "unrelated words about routers".to_owned(),
        ],
        queries: RefCell::new(Vec::new()),
    };
    let facts: Vec<(String, Option<String>)> = ["/var/cache/quartz-17/obj", "48213"]
        .iter()
        .map(|f| (f.to_string(), probe_words(f, &messages)))
        .collect();
    assert_eq!(recoverable(&facts, &corpus), [true, false]);
    for q in corpus.queries.borrow().iter() {
        assert!(!q.contains("quartz") && !q.contains("48213"), "{q}");
    }
    // Without tools nothing is recovered, whatever the store holds.
    struct NoTools;
    impl RecallTools for NoTools {
        fn offers(&self, _: &str) -> bool {
            false
        }
        fn call(&self, _: &str, _: Value) -> Option<String> {
            None
        }
    }
    assert_eq!(recoverable(&facts, &NoTools), [false, false]);
}

#[test]
fn the_budget_bounds_the_calls_for_one_fact() {
    struct Endless(RefCell<usize>);
    impl RecallTools for Endless {
        fn offers(&self, name: &str) -> bool {
            matches!(name, "lcm_grep" | "lcm_describe")
        }
        fn call(&self, name: &str, _: Value) -> Option<String> {
            *self.0.borrow_mut() += 1;
            Some(if name == "lcm_grep" {
                let hits: Vec<Value> = (0..50).map(|i| json!({"id": format!("msg#{i}")})).collect();
                json!({"hits": hits}).to_string()
            } else {
                "nothing".into()
            })
        }
    }
    let tools = Endless(RefCell::new(0));
    let facts = [("48213".to_owned(), Some("gateway edge router".to_owned()))];
    assert_eq!(recoverable(&facts, &tools), [false]);
    assert_eq!(*tools.0.borrow(), MAX_CALLS_PER_FACT);
}

#[test]
fn two_cjk_characters_make_a_probe_word_as_four_latin_letters_do() {
    // A greeting in Chinese is all the context a message id has here; "four letters" would
    // leave only `message`, which every such line shares.
    let messages = [
        user("[Wed 2026-02-11 15:03 GMT+8] 你好\n[message_id: d509cb51-ffa3]"),
        user("[Wed 2026-02-11 15:09 GMT+8] ok\n[message_id: 0b2a41c7-19de]"),
    ];
    let probe = probe_words("d509cb51-ffa3", &messages).unwrap();
    assert!(probe.split(' ').any(|w| w == "你好"), "{probe}");
    // One ideograph is no more a word than three letters are.
    let messages = [user("好 [message_id: d509cb51-ffa3] gateway")];
    let probe = probe_words("d509cb51-ffa3", &messages).unwrap();
    assert!(!probe.contains('好'), "{probe}");
}

#[test]
fn the_search_asks_for_the_tools_own_default_number_of_hits() {
    // A model reading `lcm_grep`'s schema leaves `limit` out unless it has a reason; the probe
    // does the same, so the engine's default (not a number the probe picked) decides how many
    // hits it reads.
    struct Recording(RefCell<Vec<Value>>);
    impl RecallTools for Recording {
        fn offers(&self, name: &str) -> bool {
            name == "lcm_grep"
        }
        fn call(&self, _: &str, arguments: Value) -> Option<String> {
            self.0.borrow_mut().push(arguments);
            Some(json!({"hits": []}).to_string())
        }
    }
    let tools = Recording(RefCell::new(Vec::new()));
    let facts = [("48213".to_owned(), Some("gateway edge router".to_owned()))];
    assert_eq!(recoverable(&facts, &tools), [false]);
    let calls = tools.0.borrow();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["pattern"], "gateway edge router");
    assert!(calls[0].get("limit").is_none(), "{}", calls[0]);
}
