//! Issue 28's crash tests: `rampart serve` on PostgreSQL while the database restarts under
//! load, and three replicas on one database with one of them `kill -9`ed every few seconds.
//! Afterwards every turn a client had answered is stored exactly once, in its own
//! conversation, each conversation one history.
//!
//! The database restart runs on a PostgreSQL of the test's own (`common::private_postgres`):
//! the machine's shared server is never restarted. The replicas run on a database of their
//! own on the shared server. Without PostgreSQL each test prints `SKIPPED`, unless
//! `RAMPART_REQUIRE_POSTGRES=1`.
//!
//! The default sizes keep each test well under a minute; scale them up with
//! `RAMPART_CRASH_CONVERSATIONS`, `RAMPART_CRASH_TURNS` (the run is 100 × 30) and
//! `RAMPART_CRASH_KILL_EVERY_MS` (default 1500), `RAMPART_CRASH_MIN_KILLS` (default 4: kills
//! also come at evenly spaced points of the load, so a fast machine still sees them), and
//! `RAMPART_CRASH_SEED` for the choice of replica to kill (printed).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use common::loopback::{Loopback, openai_text_stream};
use common::private_postgres::PrivatePostgres;
use common::serve::{ServeProcess, upstream_config};
use rampart_message::{AgentMessage, ContentBlock};
use rampart_sessions::SessionOptions;
use rampart_sessions::store::shared::SharedStore;
use rampart_store_postgres::testing::TestDatabase;
use rampart_store_postgres::{PgStore, PgStoreOptions};
use serde_json::{Value, json};

/// How long the whole load of `turns` turns may take before the test fails (a turn never
/// acknowledged): generous, since a failure here is a turn lost, not a slow machine.
fn load_limit(turns: usize) -> Duration {
    Duration::from_secs(120 + turns as u64 / 10)
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What the user says at turn `t` of conversation `c`: unique, so a message found in the wrong
/// conversation or twice is seen.
fn question(c: usize, t: usize) -> String {
    format!("conversation {c} turn {t}")
}

/// The model's answer to `question`: derived from it, so an answer given to the wrong request
/// is seen.
fn answer(question: &str) -> String {
    format!("Answer to {question}.")
}

/// The text of the last user message of an upstream chat request.
fn last_user_text(body: &Value) -> String {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let last = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .cloned()
        .unwrap_or(Value::Null);
    match &last["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<String>(),
        _ => String::new(),
    }
}

/// An upstream that answers each request from its own last question.
fn upstream() -> Loopback {
    Loopback::scripted(|request| openai_text_stream(&answer(&last_user_text(&request.body)), 20, 3))
}

/// What the clients saw.
#[derive(Debug, Default)]
struct Seen {
    /// 503 answers, each with `Retry-After`.
    unavailable: AtomicUsize,
    /// Requests whose connection failed (a replica killed under them).
    dropped: AtomicUsize,
    /// Answers neither 200 nor 503, with their bodies: the test fails on any.
    unexpected: Mutex<Vec<String>>,
}

/// Runs `conversations` × `turns` turns, one client thread per conversation, each request to
/// the next replica in `targets` (round robin over the addresses there now). A turn is
/// retried, with the same history, on a 503 (which must carry `Retry-After`) or a failed
/// connection until it is answered; an answer must be the one to its own question. Returns
/// each conversation's acknowledged (question, answer) pairs.
fn drive(
    conversations: usize,
    turns: usize,
    targets: &Arc<RwLock<Vec<String>>>,
    seen: &Arc<Seen>,
    progress: &Arc<AtomicUsize>,
) -> Vec<Vec<(String, String)>> {
    let next = Arc::new(AtomicUsize::new(0));
    let deadline = Instant::now() + load_limit(conversations * turns);
    let threads: Vec<_> = (0..conversations)
        .map(|c| {
            let (targets, seen, next, progress) = (
                Arc::clone(targets),
                Arc::clone(seen),
                Arc::clone(&next),
                Arc::clone(progress),
            );
            std::thread::spawn(move || {
                let client = reqwest::blocking::Client::builder()
                    .timeout(Duration::from_secs(30))
                    .build()
                    .unwrap();
                let mut history: Vec<Value> = Vec::new();
                let mut acknowledged = Vec::new();
                for t in 0..turns {
                    let asked = question(c, t);
                    history.push(json!({"role": "user", "content": asked}));
                    let said = loop {
                        assert!(
                            Instant::now() < deadline,
                            "conversation {c} turn {t} was never answered"
                        );
                        let base = {
                            let targets = targets.read().unwrap();
                            targets[next.fetch_add(1, Ordering::Relaxed) % targets.len()].clone()
                        };
                        let response = client
                            .post(format!("{base}/v1/chat/completions"))
                            .header("x-rampart-session", format!("crash-{c}"))
                            .json(&json!({"model": "gpt-up", "messages": history}))
                            .send();
                        let response = match response {
                            Ok(r) => r,
                            Err(_) => {
                                seen.dropped.fetch_add(1, Ordering::Relaxed);
                                std::thread::sleep(Duration::from_millis(50));
                                continue;
                            }
                        };
                        let status = response.status().as_u16();
                        let retry_after = response.headers().contains_key("retry-after");
                        let Ok(body) = response.text() else {
                            seen.dropped.fetch_add(1, Ordering::Relaxed);
                            continue;
                        };
                        match status {
                            200 => {
                                let body: Value = serde_json::from_str(&body).unwrap();
                                break body["choices"][0]["message"]["content"]
                                    .as_str()
                                    .unwrap()
                                    .to_owned();
                            }
                            503 if retry_after => {
                                seen.unavailable.fetch_add(1, Ordering::Relaxed);
                                std::thread::sleep(Duration::from_millis(100));
                            }
                            _ => {
                                seen.unexpected
                                    .lock()
                                    .unwrap()
                                    .push(format!("{status} (retry-after: {retry_after}): {body}"));
                                std::thread::sleep(Duration::from_millis(100));
                            }
                        }
                    };
                    assert_eq!(said, answer(&asked), "an answer to another question");
                    history.push(json!({"role": "assistant", "content": said}));
                    acknowledged.push((asked, said));
                    progress.fetch_add(1, Ordering::Relaxed);
                }
                acknowledged
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

/// A message's role and text.
fn role_text(m: &AgentMessage) -> (String, String) {
    match m {
        AgentMessage::User(u) => ("user".to_owned(), u.content.joined_text()),
        AgentMessage::Assistant(a) => (
            "assistant".to_owned(),
            a.content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Text(t) => Some(t.text.as_str()),
                    _ => None,
                })
                .collect(),
        ),
        other => (other.role().to_owned(), String::new()),
    }
}

/// The conversation a stored question or answer belongs to.
fn conversation_of(text: &str) -> Option<usize> {
    let rest = text.split("conversation ").nth(1)?;
    rest.split(' ').next()?.parse().ok()
}

/// Checks the store at `url` against what the clients were answered: each conversation is
/// one registry entry holding only its own messages; its active branch is exactly its
/// acknowledged turns, in order; no question is stored twice anywhere in its log.
fn verify(url: &str, acknowledged: &[Vec<(String, String)>]) {
    let store = PgStore::open(&PgStoreOptions::from_url(url).unwrap()).unwrap();
    let mut owner: BTreeMap<usize, String> = BTreeMap::new();
    for (key, entry) in store.family("", None).unwrap() {
        let session = store.open(&key, &entry, SessionOptions::default()).unwrap();
        let everything: Vec<(String, String)> = session
            .entries()
            .iter()
            .filter_map(|e| e.body.message())
            .map(role_text)
            .collect();
        let mut mine = everything
            .iter()
            .filter_map(|(_, text)| conversation_of(text));
        let Some(c) = mine.next() else {
            continue;
        };
        assert!(
            mine.all(|other| other == c),
            "`{key}` holds messages of several conversations: {everything:?}"
        );
        if let Some(first) = owner.insert(c, key.clone()) {
            panic!("conversation {c} is stored twice: `{first}` and `{key}`");
        }
        let mut questions: Vec<&String> = everything
            .iter()
            .filter(|(role, _)| role == "user")
            .map(|(_, text)| text)
            .collect();
        let all = questions.len();
        questions.sort();
        questions.dedup();
        assert_eq!(all, questions.len(), "`{key}` stores a question twice");

        let branch: Vec<(String, String)> = session
            .context()
            .messages
            .iter()
            .map(|m| role_text(m))
            .collect();
        let expected: Vec<(String, String)> = acknowledged[c]
            .iter()
            .flat_map(|(q, a)| {
                [
                    ("user".to_owned(), q.clone()),
                    ("assistant".to_owned(), a.clone()),
                ]
            })
            .collect();
        assert_eq!(branch, expected, "conversation {c} (`{key}`)");
    }
    assert_eq!(
        owner.len(),
        acknowledged.len(),
        "conversations missing from the store: {owner:?}"
    );
}

/// The database crashes (`pg_ctl stop -m immediate`) while clients are mid-load and comes
/// back: meanwhile the server answers 503 with `Retry-After`, afterwards the clients' retries
/// succeed by themselves, and nothing the clients had answered is lost or stored twice.
#[test]
fn the_database_restarting_mid_load_loses_nothing_acknowledged() {
    let Some(postgres) = PrivatePostgres::start("database restart") else {
        return;
    };
    let conversations = env_usize("RAMPART_CRASH_CONVERSATIONS", 8);
    let turns = env_usize("RAMPART_CRASH_TURNS", 6).max(2);
    let up = upstream();
    let serve = ServeProcess::start_on_store(&upstream_config(&up.url()), &postgres.url());
    let targets = Arc::new(RwLock::new(vec![serve.base.clone()]));
    let seen = Arc::new(Seen::default());
    let progress = Arc::new(AtomicUsize::new(0));

    let load = {
        let (targets, seen, progress) = (
            Arc::clone(&targets),
            Arc::clone(&seen),
            Arc::clone(&progress),
        );
        std::thread::spawn(move || drive(conversations, turns, &targets, &seen, &progress))
    };
    // Mid-load: after the first turns are answered, before the last.
    let total = conversations * turns;
    while progress.load(Ordering::Relaxed) < total / 3 {
        assert!(!load.is_finished(), "the load ended early");
        std::thread::sleep(Duration::from_millis(5));
    }
    postgres.stop_immediately();
    let down_at = progress.load(Ordering::Relaxed);
    // Down until a client has been told 503: the outage is seen, not only survived.
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.unavailable.load(Ordering::Relaxed) == 0 {
        assert!(
            Instant::now() < deadline,
            "no client was answered 503 while the database was down: {:?}",
            seen.unexpected.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    postgres.start_again().unwrap();
    let acknowledged = load.join().unwrap();
    eprintln!(
        "database restart: {total} turns, down after {down_at}; {} answers 503, {} dropped \
         connections",
        seen.unavailable.load(Ordering::Relaxed),
        seen.dropped.load(Ordering::Relaxed)
    );
    assert!(
        down_at < total,
        "every turn was answered before the database went down"
    );
    let unexpected = seen.unexpected.lock().unwrap().clone();
    assert!(unexpected.is_empty(), "{unexpected:#?}");
    verify(&postgres.url(), &acknowledged);
    drop(serve);
}

/// Three replicas on one database behind a round-robin client; every
/// `RAMPART_CRASH_KILL_EVERY_MS`, and at `RAMPART_CRASH_MIN_KILLS` evenly spaced points of the
/// load, a random replica is `kill -9`ed and started again. Every
/// acknowledged turn is stored exactly once, nothing is cross-wired, each conversation is one
/// history.
#[test]
fn three_replicas_with_one_killed_every_few_seconds_lose_nothing_acknowledged() {
    let Some(db) = TestDatabase::create("replicas killed") else {
        return;
    };
    let conversations = env_usize("RAMPART_CRASH_CONVERSATIONS", 16).max(1);
    let turns = env_usize("RAMPART_CRASH_TURNS", 12).max(1);
    let min_kills = env_usize("RAMPART_CRASH_MIN_KILLS", 4);
    let total = conversations * turns;
    let every = Duration::from_millis(env_usize("RAMPART_CRASH_KILL_EVERY_MS", 1500) as u64);
    let mut seed = std::env::var("RAMPART_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    eprintln!("replicas killed: RAMPART_CRASH_SEED={seed}");
    let up = upstream();
    let config = upstream_config(&up.url());
    let mut replicas: Vec<ServeProcess> = (0..3)
        .map(|_| ServeProcess::start_on_store(&config, db.url()))
        .collect();
    let targets = Arc::new(RwLock::new(
        replicas.iter().map(|r| r.base.clone()).collect::<Vec<_>>(),
    ));
    let seen = Arc::new(Seen::default());
    let progress = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));

    let load = {
        let (targets, seen, progress, done) = (
            Arc::clone(&targets),
            Arc::clone(&seen),
            Arc::clone(&progress),
            Arc::clone(&done),
        );
        std::thread::spawn(move || {
            let acknowledged = drive(conversations, turns, &targets, &seen, &progress);
            done.store(true, Ordering::Relaxed);
            acknowledged
        })
    };
    let mut kills = 0usize;
    let mut last = Instant::now();
    while !done.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(20));
        // The next evenly spaced point of the load a kill is due at.
        let due_at = total * (kills + 1) / (min_kills + 1);
        let due = kills < min_kills && progress.load(Ordering::Relaxed) >= due_at;
        if last.elapsed() < every && !due {
            continue;
        }
        // SplitMix64 step: which replica dies.
        seed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = seed;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        let victim = ((z ^ (z >> 31)) % 3) as usize;
        replicas[victim].kill();
        kills += 1;
        let fresh = ServeProcess::start_on_store(&config, db.url());
        targets.write().unwrap()[victim] = fresh.base.clone();
        replicas[victim] = fresh;
        last = Instant::now();
    }
    let acknowledged = load.join().unwrap();
    eprintln!(
        "replicas killed: {conversations} × {turns} turns, {kills} kills, {} dropped \
         connections, {} answers 503",
        seen.dropped.load(Ordering::Relaxed),
        seen.unavailable.load(Ordering::Relaxed)
    );
    let unexpected = seen.unexpected.lock().unwrap().clone();
    assert!(unexpected.is_empty(), "{unexpected:#?}");
    drop(replicas);
    verify(db.url(), &acknowledged);
}
