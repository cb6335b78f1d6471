//! Layer 3 through the run loop: an overflow compacts the session (with the embedded
//! summariser, or a model on a loopback server), the compaction entry lands in the file, the
//! retry fits; and a summariser that hangs leaves the session byte-identical.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::Harness;
use common::loopback::{Loopback, Reply, openai_text_stream};
use rampart_engine_api::AgentMessage;
use rampart_host::config::{self, Config};
use rampart_host::run::{RecordedEvent, RegistryWrites};
use rampart_sessions::entry::{EntryBody, SessionHeader};
use rampart_sessions::{Session, SessionOptions};

struct World {
    _dir: tempfile::TempDir,
    session: Session,
}

/// A session of `turns` question/answer pairs about a project, with identifiers planted in
/// the oldest turns (about 450 tokens a pair).
fn long_session(turns: usize) -> World {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let mut session =
        Session::create(&path, SessionHeader::new("/tmp"), SessionOptions::default()).unwrap();
    for i in 0..turns {
        let ask = if i == 0 {
            "Deploy build 9f86d081884c7d659a2feaa0c55ad015 to db.internal.example:5432 and \
             never touch /etc/rampart/keys.toml; ticket 123e4567-e89b-12d3-a456-426614174000."
                .to_string()
        } else {
            format!("Step {i}: please continue with the migration plan. ")
        };
        session
            .append_message(AgentMessage::user_text(
                format!("{ask} {}", "Context for this step. ".repeat(30)),
                i as u64,
            ))
            .unwrap();
        session
            .append_message(AgentMessage::assistant_text(
                format!("Done with step {i}. {}", "Details of the work. ".repeat(50)),
                "sim",
                "sim",
                "mid",
                i as u64,
            ))
            .unwrap();
    }
    World { _dir: dir, session }
}

fn of_kind<'a>(events: &'a [RecordedEvent], kind: &str) -> Vec<&'a RecordedEvent> {
    events.iter().filter(|e| e.kind == kind).collect()
}

fn compaction_entries(session: &Session) -> Vec<(String, String)> {
    session
        .entries()
        .iter()
        .filter_map(|e| match &e.body {
            EntryBody::Compaction(c) => Some((c.summary.clone(), c.first_kept_entry_id.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn an_overflow_compacts_with_the_embedded_summariser_and_the_retry_fits() {
    let config = config::parse(
        "[agents.defaults.model]\nprimary = \"sim/mid\"\n\
         [[models.providers.sim.models]]\nid = \"mid\"\ncontextWindow = 32000\n",
        Path::new("plugins.toml"),
    )
    .unwrap();
    let h = Harness::new(config);
    // About 36,000 tokens of conversation: over the window before anything is sent.
    let mut w = long_session(80);
    let store = rampart_sessions::store::SessionStore::open(w._dir.path()).unwrap();
    store
        .upsert(
            "k",
            rampart_sessions::store::SessionEntry::new(w.session.header().id.clone(), 1),
        )
        .unwrap();
    let mut runner = h
        .runner()
        .with_registry(&store, "k", RegistryWrites::PerTurn);
    let writes_before = store.writes();
    let before = std::fs::read_to_string(w.session.path()).unwrap();

    let report = runner
        .run_turn(
            &mut w.session,
            Some(AgentMessage::user_text("What is left?", 99)),
        )
        .unwrap();

    let events = runner.events().drain();
    assert_eq!(of_kind(&events, "compaction_start").len(), 1, "{events:#?}");
    let end = of_kind(&events, "compaction_end")[0];
    assert_eq!(end.data["compacted"], true, "{:#}", end.data);
    assert_eq!(end.data["fallbackLevel"], 0);
    assert!(end.data["summaryChars"].as_u64().unwrap() > 0);
    assert!(end.data["tokensBefore"].as_u64().unwrap() > end.data["tokensAfter"].as_u64().unwrap());
    assert!(end.data["durationMs"].is_u64());
    assert_eq!(report.compactions, 1);
    assert!(report.prompt_tokens < 32_000, "{report:?}");
    // The entry is in the file, after everything that was there.
    let entries = compaction_entries(&w.session);
    assert_eq!(entries.len(), 1);
    let (summary, first_kept) = &entries[0];
    assert!(w.session.entries().iter().any(|e| &e.id == first_kept));
    // The event names that entry, so a reader (serve's /ui) finds it without the summary in
    // the event.
    assert_eq!(end.data["firstKeptEntryId"], first_kept.as_str());
    let named = end.data["entryId"].as_str().unwrap();
    assert!(
        w.session
            .entries()
            .iter()
            .any(|e| e.id == named && matches!(e.body, rampart_sessions::EntryBody::Compaction(_))),
        "{named}"
    );
    // The embedded summariser says what it is and keeps the planted identifiers.
    assert!(summary.to_lowercase().contains("extractive"), "{summary}");
    for id in [
        "9f86d081884c7d659a2feaa0c55ad015",
        "db.internal.example:5432",
        "/etc/rampart/keys.toml",
        "123e4567-e89b-12d3-a456-426614174000",
    ] {
        assert!(summary.contains(id), "{id} missing from:\n{summary}");
    }
    for heading in [
        "## Decisions",
        "## Open TODOs",
        "## Constraints/Rules",
        "## Pending user asks",
        "## Exact identifiers",
    ] {
        assert!(summary.contains(heading), "{heading} missing");
    }
    let after = std::fs::read_to_string(w.session.path()).unwrap();
    assert!(after.starts_with(&before), "the file only grows");
    // The turn's registry changes (the compaction, then the answer's usage) are written in
    // one rewrite of sessions.json when the turn ends.
    assert_eq!(store.writes(), writes_before, "nothing written mid-turn");
    runner.finish_turn(&mut w.session).unwrap();
    assert_eq!(store.writes(), writes_before + 1);
    // The registry counts the compaction, keeps a checkpoint naming the entry, and its token
    // figure is the real usage of the answer that followed, not the pre-compaction size.
    let entry = store.get("k").unwrap().unwrap();
    assert_eq!(entry.compaction_count, 1);
    assert_eq!(entry.compaction_checkpoints.len(), 1);
    assert_eq!(
        entry.compaction_checkpoints[0]
            .first_kept_entry_id
            .as_deref(),
        Some(first_kept.as_str())
    );
    assert!(entry.total_tokens.unwrap() < 32_000);
    // The request that went out starts with the summary.
    let sent = &report.requests.last().unwrap().messages;
    assert!(matches!(&*sent[0], AgentMessage::CompactionSummary(_)));
}

fn with_summariser(url: &str, timeout_seconds: u64) -> Config {
    config::parse(
        &format!(
            "[agents.defaults.model]\nprimary = \"sim/mid\"\n\
             [agents.defaults.compaction]\nmodel = \"summ/writer\"\ntimeoutSeconds = {timeout_seconds}\n\
             [[models.providers.sim.models]]\nid = \"mid\"\ncontextWindow = 32000\n\
             [models.providers.summ]\napi = \"openai-completions\"\nbaseUrl = \"{url}\"\nmaxRetries = 0\n\
             [[models.providers.summ.models]]\nid = \"writer\"\ncontextWindow = 128000\n"
        ),
        Path::new("plugins.toml"),
    )
    .unwrap()
}

#[test]
fn the_configured_compaction_model_writes_the_summary() {
    let server = Loopback::start();
    let text = "## Decisions\n- migrate\n## Open TODOs\n- finish\n## Constraints/Rules\n- never touch keys\n\
                ## Pending user asks\n- what is left\n## Exact identifiers\n- db.internal.example:5432\n";
    for _ in 0..8 {
        server.push(openai_text_stream(text, 5_000, 80));
    }
    let config = with_summariser(&server.url(), 60);
    let h = Harness::new(config);
    let mut runner = h.runner();
    let mut w = long_session(80);

    runner
        .run_turn(
            &mut w.session,
            Some(AgentMessage::user_text("What is left?", 99)),
        )
        .unwrap();

    let requests = server.requests();
    assert!(!requests.is_empty());
    for r in &requests {
        assert_eq!(r.body["model"], "writer");
        let body = r.body.to_string();
        assert!(body.contains("<conversation>"), "{body}");
    }
    let (summary, _) = compaction_entries(&w.session).pop().unwrap();
    assert!(summary.contains("never touch keys"), "{summary}");
    assert!(
        !summary.to_lowercase().contains("extractive summary"),
        "{summary}"
    );
}

#[test]
fn a_summariser_that_hangs_times_out_and_leaves_the_session_byte_identical() {
    let server = Loopback::start();
    for _ in 0..8 {
        server.push(Reply::hang(Duration::from_secs(20)));
    }
    let config = with_summariser(&server.url(), 1);
    let h = Harness::new(config);
    let mut runner = h.runner();
    let mut w = long_session(80);
    let path = w.session.path().to_path_buf();
    let before = std::fs::read(&path).unwrap();

    let err = runner
        .run_turn(
            &mut w.session,
            Some(AgentMessage::user_text("What is left?", 99)),
        )
        .unwrap_err();

    // The user's message was appended before the attempt; nothing of the compaction was.
    let after = std::fs::read(&path).unwrap();
    assert!(after.starts_with(&before));
    let added = String::from_utf8(after[before.len()..].to_vec()).unwrap();
    assert_eq!(added.lines().count(), 1, "{added}");
    assert!(added.contains("What is left?"));
    assert!(compaction_entries(&w.session).is_empty());
    assert_eq!(err.kind(), "context_overflow", "{err}");
    let events = runner.events().drain();
    let end = of_kind(&events, "compaction_end")[0];
    assert_eq!(end.data["compacted"], false);
    assert!(
        end.data["error"]
            .as_str()
            .unwrap_or_default()
            .contains("timed out"),
        "{:#}",
        end.data
    );
}

#[test]
fn a_model_timeout_on_a_big_prompt_compacts_and_retries() {
    let server = Loopback::start();
    server.push(Reply::hang(Duration::from_secs(5)));
    server.push(openai_text_stream("answered after compaction", 9_000, 5));
    let config = config::parse(
        &format!(
            "[agents.defaults.model]\nprimary = \"local/big\"\n\
             [agents.defaults.compaction]\nmodel = \"sim/default\"\n\
             [models.providers.local]\napi = \"openai-completions\"\nbaseUrl = \"{}\"\n\
             maxRetries = 0\ntimeoutSeconds = 1\n\
             [[models.providers.local.models]]\nid = \"big\"\ncontextWindow = 200000\n",
            server.url()
        ),
        Path::new("plugins.toml"),
    )
    .unwrap();
    let h = Harness::new(config);
    let mut runner = h.runner();
    // About 140,000 tokens: more than 65% of the window, yet within the precheck's budget.
    let mut w = long_session(310);

    let report = runner
        .run_turn(
            &mut w.session,
            Some(AgentMessage::user_text("What is left?", 999)),
        )
        .unwrap();

    assert_eq!(report.compactions, 1, "{report:?}");
    assert_eq!(report.attempts, 2);
    assert_eq!(server.request_count(), 2);
    let events = runner.events().drain();
    let end = of_kind(&events, "compaction_end")[0];
    assert_eq!(end.data["reason"], "timeout");
    assert_eq!(compaction_entries(&w.session).len(), 1);
    // The retry was smaller than the request that timed out.
    let sizes: Vec<usize> = server
        .requests()
        .iter()
        .map(|r| r.body["messages"].as_array().unwrap().len())
        .collect();
    assert!(sizes[1] < sizes[0], "{sizes:?}");
}
