//! Searching: keyword-only rules, CJK, hybrid ranking on a small corpus, the relaxation
//! rules, MMR and temporal decay, as a user of the results would notice them.

use rampart_memory::{MemorySettings, SearchMode, SearchOutcome, SearchParams, SyncReason};

use crate::common::{Agent, local_model};

fn search(index: &rampart_memory::MemoryIndex, query: &str) -> SearchOutcome {
    index.search(query, &SearchParams::default()).unwrap()
}

fn paths(outcome: &SearchOutcome) -> Vec<&str> {
    outcome.results.iter().map(|r| r.path.as_str()).collect()
}

#[test]
fn the_first_search_of_an_empty_index_syncs_it() {
    let agent = Agent::new();
    agent.write(
        "MEMORY.md",
        "The deploy key lives in the vault under infra/deploy.\n",
    );
    let index = agent.open_keyword();
    let outcome = search(&index, "deploy key");
    assert_eq!(paths(&outcome), vec!["MEMORY.md"]);
    assert_eq!(outcome.mode, SearchMode::FtsOnly);
    assert!(index.status().last_sync.is_some());
}

#[test]
fn a_blank_query_finds_nothing() {
    let agent = Agent::new();
    agent.write("MEMORY.md", "anything\n");
    let index = agent.open_keyword();
    index.sync(SyncReason::Manual).unwrap();
    assert!(search(&index, "   ").results.is_empty());
    assert!(search(&index, "?!").results.is_empty());
}

#[test]
fn chinese_queries_find_chinese_notes_without_spaces() {
    let agent = Agent::new();
    agent.write(
        "memory/2026-03-01.md",
        "今天金银价格上涨了很多，明天再看。\n",
    );
    agent.write("memory/2026-03-02.md", "周末去爬山，天气很好。\n");
    let index = agent.open_keyword();
    index.sync(SyncReason::Manual).unwrap();
    // A word inside a sentence (unicode61 alone would see the whole sentence as one token).
    assert_eq!(
        paths(&search(&index, "金银价格")),
        vec!["memory/2026-03-01.md"]
    );
    assert_eq!(
        paths(&search(&index, "价格上涨")),
        vec!["memory/2026-03-01.md"]
    );
    // No note has the whole phrase: the keywords (character pairs) are searched one by one.
    assert_eq!(
        paths(&search(&index, "黄金价格走势")),
        vec!["memory/2026-03-01.md"]
    );
    assert_eq!(paths(&search(&index, "爬山")), vec!["memory/2026-03-02.md"]);
}

#[test]
fn keyword_only_falls_back_to_single_keywords_and_relaxes_the_threshold() {
    let agent = Agent::new();
    agent.write(
        "memory/deploys.md",
        "We deploy with blue green on Fridays.\n",
    );
    agent.write("memory/food.md", "Lunch: ramen on Tuesdays.\n");
    let index = agent.open_keyword();
    index.sync(SyncReason::Manual).unwrap();
    // "rollback" is nowhere, so the AND query finds nothing; "deploy" alone does.
    let outcome = search(&index, "what is our deploy rollback plan");
    assert_eq!(paths(&outcome), vec!["memory/deploys.md"]);
    // Nothing reaches 0.99, so the threshold drops to 0 rather than answering nothing.
    let strict = index
        .search(
            "ramen",
            &SearchParams {
                max_results: None,
                min_score: Some(0.99),
            },
        )
        .unwrap();
    assert_eq!(paths(&strict), vec!["memory/food.md"]);
    assert!(strict.results[0].score < 0.99);
}

#[test]
fn results_are_capped_sorted_by_score_and_snippets_are_short() {
    let agent = Agent::new();
    for i in 0..8 {
        // More mentions of "zebra" in a shorter text rank higher.
        let text = format!(
            "{}{}\n",
            "zebra ".repeat(i + 1),
            "filler words here ".repeat(8 - i)
        );
        agent.write(&format!("memory/z{i}.md"), &text);
    }
    agent.write(
        "memory/long.md",
        &format!("zebra {}\n", "lorem ipsum dolor ".repeat(150)),
    );
    let index = agent.open_keyword();
    index.sync(SyncReason::Manual).unwrap();
    let outcome = index
        .search(
            "zebra",
            &SearchParams {
                max_results: Some(3),
                min_score: Some(0.0),
            },
        )
        .unwrap();
    assert_eq!(outcome.results.len(), 3);
    for pair in outcome.results.windows(2) {
        assert!(pair[0].score >= pair[1].score, "{:?}", outcome.results);
    }
    assert_eq!(outcome.results[0].path, "memory/z7.md");
    let all = index
        .search(
            "zebra",
            &SearchParams {
                max_results: Some(20),
                min_score: Some(0.0),
            },
        )
        .unwrap();
    assert!(all.results.iter().all(|r| r.snippet.chars().count() <= 700));
    assert!(
        all.results
            .iter()
            .any(|r| r.path == "memory/long.md" && r.snippet.chars().count() == 700)
    );
}

/// A small corpus with known answers: some queries only match through synonyms (vectors),
/// some only through exact words (keywords).
fn corpus(agent: &Agent) {
    agent.write(
        "memory/car.md",
        "# Car\nThe car needs new brakes; the garage repair is booked for May.\n",
    );
    agent.write(
        "memory/health.md",
        "# Health\nPhysician appointment on Tuesday about the knee.\n",
    );
    agent.write(
        "memory/budget.md",
        "# Budget\nThe quarterly budget spreadsheet is in the finance folder.\n",
    );
    agent.write(
        "memory/garden.md",
        "# Garden\nPlant tomatoes and basil after the last frost.\n",
    );
    agent.write(
        "memory/travel.md",
        "# Travel\nFlight to Lisbon leaves at nine; hotel near the river.\n",
    );
    agent.write(
        "MEMORY.md",
        "# About me\nI like quiet mornings and strong coffee.\n",
    );
}

const WORDS: &str = "car needs new brakes the garage repair is booked for may health physician appointment on tuesday about knee budget quarterly spreadsheet in finance folder garden plant tomatoes and basil after last frost travel flight to lisbon leaves at nine hotel near river me i like quiet mornings strong coffee automobile doctor fix vegetables";

#[test]
fn hybrid_search_ranks_a_small_corpus_as_expected() {
    let agent = Agent::new();
    corpus(&agent);
    let words: Vec<&str> = WORDS.split(' ').collect();
    let (_m, model) = local_model(
        &words,
        &[
            ("car", "automobile"),
            ("physician", "doctor"),
            ("repair", "fix"),
            ("tomatoes", "vegetables"),
        ],
        256,
    );
    let (index, _) = agent.open(MemorySettings::default(), Some(model));
    index.sync(SyncReason::Manual).unwrap();
    // Every note is returned (threshold 0); the best one must be the expected answer.
    let top = |q: &str| {
        let o = index
            .search(
                q,
                &SearchParams {
                    max_results: None,
                    min_score: Some(0.0),
                },
            )
            .unwrap();
        assert_eq!(o.mode, SearchMode::Hybrid);
        o.results
            .first()
            .map(|r| r.path.clone())
            .unwrap_or_default()
    };
    // Synonyms only: no keyword matches at all.
    assert_eq!(top("automobile fix"), "memory/car.md");
    assert_eq!(top("doctor"), "memory/health.md");
    assert_eq!(top("vegetables"), "memory/garden.md");
    // Exact words: keyword and vector agree.
    assert_eq!(top("quarterly budget spreadsheet"), "memory/budget.md");
    assert_eq!(top("flight to lisbon"), "memory/travel.md");
    assert_eq!(top("strong coffee"), "MEMORY.md");
    // Both sides count: the note found by both outranks one found by vectors alone.
    let both = index
        .search(
            "garage brakes",
            &SearchParams {
                max_results: None,
                min_score: Some(0.0),
            },
        )
        .unwrap();
    assert_eq!(both.results[0].path, "memory/car.md");
    assert!(both.keyword_hits >= 1 && both.vector_hits >= 1);
}

#[test]
fn hybrid_relaxes_the_threshold_for_keyword_matches_only() {
    let agent = Agent::new();
    agent.write("memory/a.md", "gamma\n");
    agent.write("memory/b.md", "delta\n");
    // "delta" has the same vector as "gamma": b.md is as close by vector as a.md, but only
    // a.md has the word.
    let (_m, model) = local_model(&["gamma", "delta"], &[("gamma", "delta")], 16);
    let (index, _) = agent.open(MemorySettings::default(), Some(model));
    index.sync(SyncReason::Manual).unwrap();
    let default = search(&index, "gamma");
    assert_eq!(paths(&default), vec!["memory/a.md", "memory/b.md"]);
    // Nothing reaches 0.95 (a.md: 0.7 + 0.3 × text < 1, b.md: 0.7), so the threshold drops to
    // min(0.95, text weight 0.3) for keyword matches: a.md stays, b.md (vector only) does not.
    let relaxed = index
        .search(
            "gamma",
            &SearchParams {
                max_results: None,
                min_score: Some(0.95),
            },
        )
        .unwrap();
    assert_eq!(paths(&relaxed), vec!["memory/a.md"]);
    // With no keyword match at all there is no relaxation.
    let none = index
        .search(
            "delta gamma",
            &SearchParams {
                max_results: None,
                min_score: Some(0.99),
            },
        )
        .unwrap();
    assert!(none.results.is_empty(), "{:?}", none.results);
}

#[test]
fn mmr_keeps_near_duplicates_from_filling_the_results() {
    let agent = Agent::new();
    agent.write("memory/a.md", "kiwi kiwi kiwi release train notes\n");
    agent.write("memory/b.md", "kiwi kiwi kiwi release train notes!\n");
    agent.write(
        "memory/c.md",
        "kiwi fruit order for the office kitchen, snacks and drinks\n",
    );
    let top_two = |mmr: bool| {
        let settings = MemorySettings {
            mmr_enabled: mmr,
            mmr_lambda: 0.3,
            ..Default::default()
        };
        let index = agent.open(settings, None).0;
        index.sync(SyncReason::Manual).unwrap();
        let outcome = index
            .search(
                "kiwi",
                &SearchParams {
                    max_results: Some(2),
                    min_score: Some(0.0),
                },
            )
            .unwrap();
        let mut p: Vec<String> = outcome.results.into_iter().map(|r| r.path).collect();
        p.sort();
        p
    };
    // Without MMR the two copies take both places; with it the different note gets one.
    assert_eq!(top_two(false), vec!["memory/a.md", "memory/b.md"]);
    assert_eq!(top_two(true), vec!["memory/a.md", "memory/c.md"]);
}

#[test]
fn temporal_decay_ranks_old_dated_notes_lower_but_never_evergreen_ones() {
    let agent = Agent::new();
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    let text = "retro action item: rotate the pager schedule\n";
    agent.write("memory/2020-01-01.md", text);
    agent.write(&format!("memory/{today}.md"), text);
    agent.write("MEMORY.md", text);
    agent.write("memory/projects.md", text);
    let run = |decay: bool| {
        let settings = MemorySettings {
            temporal_decay_enabled: decay,
            ..Default::default()
        };
        let index = agent.open(settings, None).0;
        index.sync(SyncReason::Manual).unwrap();
        index
            .search(
                "pager schedule",
                &SearchParams {
                    max_results: Some(10),
                    min_score: Some(0.0),
                },
            )
            .unwrap()
            .results
    };
    let plain = run(false);
    assert_eq!(plain.len(), 4);
    let first = plain[0].score;
    assert!(
        plain.iter().all(|r| (r.score - first).abs() < 1e-9),
        "same text, same score"
    );
    let decayed = run(true);
    let score = |path: &str| decayed.iter().find(|r| r.path == path).unwrap().score;
    assert_eq!(decayed.last().unwrap().path, "memory/2020-01-01.md");
    assert!(
        score("memory/2020-01-01.md") < first * 0.01,
        "six years is many half-lives"
    );
    assert!((score("MEMORY.md") - first).abs() < 1e-9, "evergreen");
    assert!(
        (score("memory/projects.md") - first).abs() < 1e-9,
        "undated memory/ files are evergreen"
    );
    assert!(score(&format!("memory/{today}.md")) > first * 0.95);
}
