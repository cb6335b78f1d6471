//! End to end: `rampart serve` processes keeping their conversations in PostgreSQL
//! (`--store postgres://…` or `[serve.store]`), each test on a database of its own that is
//! dropped afterwards. Without a reachable server each test says SKIPPED and passes, unless
//! RAMPART_REQUIRE_POSTGRES=1.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::{Duration, Instant};

use common::loopback::{Loopback, openai_text_stream};
use common::serve::{ServeProcess, upstream_config};
use rampart_message::AgentMessage;
use rampart_sessions::SessionOptions;
use rampart_sessions::store::shared::SharedStore;
use rampart_store_postgres::testing::TestDatabase;
use serde_json::{Value, json};

/// A `rampart serve --store URL` process (the shared launcher), with this file's helpers;
/// killed when dropped.
struct Serve(ServeProcess);

impl std::ops::Deref for Serve {
    type Target = ServeProcess;

    fn deref(&self) -> &ServeProcess {
        &self.0
    }
}

impl Serve {
    /// `rampart serve --store URL` with `config`, once it listens.
    fn start(config: &str, url: &str) -> Self {
        Self(ServeProcess::start_on_store(config, url))
    }

    fn client() -> reqwest::blocking::Client {
        reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap()
    }

    /// One chat turn with `messages`; the answer's text.
    fn chat(&self, messages: &[Value]) -> String {
        self.0.chat(messages)["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    fn healthz(&self) -> (u16, Value) {
        let response = Self::client()
            .get(format!("{}/healthz", self.base))
            .send()
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().unwrap())
    }
}

/// The (role, text) of every message entry of `key`'s session in the database, in log order,
/// and whether the log is one chain (every entry continues the one before it).
fn stored(db: &TestDatabase, key: &str) -> (Vec<(String, String)>, bool) {
    let store = db.store().unwrap();
    let entry = store.get(key).unwrap().unwrap();
    let session = store.open(key, &entry, SessionOptions::default()).unwrap();
    let linear = session
        .entries()
        .windows(2)
        .all(|p| p[1].parent_id.as_deref() == Some(p[0].id.as_str()));
    let messages = session
        .entries()
        .iter()
        .filter_map(|e| e.body.message())
        .map(|m| match m {
            AgentMessage::User(u) => ("user".to_owned(), u.content.joined_text()),
            AgentMessage::Assistant(a) => (
                "assistant".to_owned(),
                a.content
                    .iter()
                    .filter_map(|b| match b {
                        rampart_message::ContentBlock::Text(t) => Some(t.text.as_str()),
                        _ => None,
                    })
                    .collect::<String>(),
            ),
            other => (other.role().to_owned(), String::new()),
        })
        .collect();
    (messages, linear)
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

/// The only conversation `serve` registered.
fn the_conversation(db: &TestDatabase) -> String {
    let keys: Vec<String> = db
        .store()
        .unwrap()
        .family("serve:", None)
        .unwrap()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(keys.len(), 1, "{keys:?}");
    keys[0].clone()
}

/// Two turns of one conversation through a server on PostgreSQL: both answered, and the
/// session holds each message exactly once, in one chain; `/healthz` reports the store.
#[test]
fn serve_on_postgres_stores_two_turns_exactly_once() {
    let Some(db) = TestDatabase::create("serve on postgres") else {
        return;
    };
    let up = Loopback::start();
    up.push(openai_text_stream("First answer.", 20, 3));
    up.push(openai_text_stream("Second answer.", 30, 3));
    let serve = Serve::start(&upstream_config(&up.url()), db.url());

    let mut messages = vec![json!({"role": "user", "content": "Hello there"})];
    assert_eq!(serve.chat(&messages), "First answer.");
    messages.push(json!({"role": "assistant", "content": "First answer."}));
    messages.push(json!({"role": "user", "content": "And again"}));
    assert_eq!(serve.chat(&messages), "Second answer.");

    let key = the_conversation(&db);
    let (messages, linear) = stored(&db, &key);
    assert_eq!(
        messages,
        pairs(&[
            ("user", "Hello there"),
            ("assistant", "First answer."),
            ("user", "And again"),
            ("assistant", "Second answer."),
        ])
    );
    assert!(linear, "the stored history forked");

    // `/metrics` reads the store from an async handler: the store's calls work there too.
    let metrics = Serve::client()
        .get(format!("{}/metrics", serve.base))
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(
        metrics.contains("rampart_serve_conversations 1"),
        "{metrics}"
    );

    let (status, health) = serve.healthz();
    assert_eq!(status, 200, "{health}");
    assert_eq!(health["store"]["backend"], "postgres", "{health}");
    assert_eq!(health["store"]["reachable"], true, "{health}");
    assert_eq!(
        health["store"]["store"],
        format!("postgres://postgres@127.0.0.1:5432/{}", db.name())
    );
}

/// Two replicas on one database, the turns of one conversation alternating between them: the
/// second replica continues what the first stored, and the third turn, back on the first,
/// continues the second's (the first had the conversation open and catches up under the lock).
#[test]
fn two_replicas_on_one_database_continue_each_others_turns() {
    let Some(db) = TestDatabase::create("replicas on postgres") else {
        return;
    };
    let up = Loopback::start();
    for n in 1..=3 {
        up.push(openai_text_stream(&format!("Answer {n}."), 20, 3));
    }
    let config = upstream_config(&up.url());
    let (a, b) = (
        Serve::start(&config, db.url()),
        Serve::start(&config, db.url()),
    );

    let mut messages = vec![json!({"role": "user", "content": "Start"})];
    for (n, replica) in [&a, &b, &a].into_iter().enumerate() {
        let answer = replica.chat(&messages);
        assert_eq!(answer, format!("Answer {}.", n + 1));
        messages.push(json!({"role": "assistant", "content": answer}));
        messages.push(json!({"role": "user", "content": format!("Next {}", n + 1)}));
    }
    // The model saw the whole history on every turn, whichever replica asked.
    let sent = up.requests();
    assert_eq!(sent[2].body["messages"].as_array().unwrap().len(), 5);

    let key = the_conversation(&db);
    let (stored, linear) = stored(&db, &key);
    assert_eq!(
        stored,
        pairs(&[
            ("user", "Start"),
            ("assistant", "Answer 1."),
            ("user", "Next 1"),
            ("assistant", "Answer 2."),
            ("user", "Next 2"),
            ("assistant", "Answer 3."),
        ])
    );
    assert!(linear, "the stored history forked");
}

/// While the database refuses connections, `/healthz` says 503 with `Retry-After`; once it
/// takes them again, the server reports healthy by itself.
#[test]
fn healthz_follows_the_database() {
    let Some(db) = TestDatabase::create("healthz on postgres") else {
        return;
    };
    let up = Loopback::start();
    let serve = Serve::start(&upstream_config(&up.url()), db.url());
    assert_eq!(serve.healthz().0, 200);

    // Through the server's maintenance database, which still takes connections.
    let name = db.name();
    db.execute_as_admin(&format!(
        "ALTER DATABASE {name} ALLOW_CONNECTIONS false; \
             SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"
    ))
    .unwrap();
    let response = Serve::client()
        .get(format!("{}/healthz", serve.base))
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 503);
    assert_eq!(
        response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("1")
    );
    let body: Value = response.json().unwrap();
    assert_eq!(body["store"]["reachable"], false, "{body}");
    assert!(body["store"]["error"].as_str().is_some(), "{body}");

    db.execute_as_admin(&format!("ALTER DATABASE {name} ALLOW_CONNECTIONS true"))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, body) = serve.healthz();
        if status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "still unhealthy: {body}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// While the database refuses connections, a turn is answered 503 with `Retry-After`, in the
/// client's own error format, and nothing reaches the model; once the database is back, the
/// client's retry of the same turn is answered and stored once, after the turn before it.
#[test]
fn a_turn_while_the_database_is_down_gets_503_and_its_retry_is_stored_once() {
    let Some(db) = TestDatabase::create("a turn while postgres is down") else {
        return;
    };
    let up = Loopback::start();
    up.push(openai_text_stream("First answer.", 10, 3));
    let serve = Serve::start(&upstream_config(&up.url()), db.url());
    let first = json!({"role": "user", "content": "First question."});
    let answer = serve.chat(std::slice::from_ref(&first));
    let history = vec![
        first,
        json!({"role": "assistant", "content": answer}),
        json!({"role": "user", "content": "Second question."}),
    ];

    let name = db.name();
    db.execute_as_admin(&format!(
        "ALTER DATABASE {name} ALLOW_CONNECTIONS false; \
             SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"
    ))
    .unwrap();
    let response = Serve::client()
        .post(format!("{}/v1/chat/completions", serve.base))
        .json(&json!({"model": "gpt-up", "messages": history}))
        .send()
        .unwrap();
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body: Value = response.json().unwrap();
    assert_eq!(status, 503, "{body}");
    assert_eq!(retry_after.as_deref(), Some("1"), "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("unreachable")),
        "{body}"
    );
    assert_eq!(
        up.request_count(),
        1,
        "the model was asked while the store was down"
    );

    db.execute_as_admin(&format!("ALTER DATABASE {name} ALLOW_CONNECTIONS true"))
        .unwrap();
    up.push(openai_text_stream("Second answer.", 20, 3));
    let deadline = Instant::now() + Duration::from_secs(20);
    let answer = loop {
        let response = Serve::client()
            .post(format!("{}/v1/chat/completions", serve.base))
            .json(&json!({"model": "gpt-up", "messages": history}))
            .send()
            .unwrap();
        let status = response.status().as_u16();
        let body: Value = response.json().unwrap();
        if status == 200 {
            break body["choices"][0]["message"]["content"].clone();
        }
        assert_eq!(status, 503, "{body}");
        assert!(Instant::now() < deadline, "still refused: {body}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(answer, "Second answer.");
    let key = the_conversation(&db);
    let (messages, linear) = stored(&db, &key);
    assert!(linear, "the stored history forked");
    assert_eq!(
        messages,
        pairs(&[
            ("user", "First question."),
            ("assistant", "First answer."),
            ("user", "Second question."),
            ("assistant", "Second answer."),
        ])
    );
    // The store's figures in /metrics: up again, its pools, and the failures it counted.
    let metrics = Serve::client()
        .get(format!("{}/metrics", serve.base))
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(
        metrics.contains("rampart_serve_store_up{backend=\"postgres\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("rampart_serve_store_pool_connections{pool=\"query\",state=\"max\"}"),
        "{metrics}"
    );
    assert!(metrics.contains("rampart_serve_store_latency_seconds{backend=\"postgres\"}"));
    let unavailable: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("rampart_serve_store_unavailable_total "))
        .unwrap_or_else(|| panic!("{metrics}"))
        .parse()
        .unwrap();
    assert!(unavailable >= 1.0, "{metrics}");
}

/// A password in `serve.store.url` is refused at its line, without repeating it; a
/// `passwordEnv` that names an unset variable stops the server with the variable's name.
#[test]
fn store_settings_are_checked_and_never_echo_a_password() {
    let dir = tempfile::tempdir().unwrap();
    let path = common::write_config(
        dir.path(),
        "[serve.store]\nurl = \"postgres://app:hunter2@db.internal/rampart\"\n",
    );
    let out = common::rampart(&["--config", path.to_str().unwrap(), "config", "check"]);
    let text = common::text(&out);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("serve.store.url") && text.contains(":2:"),
        "{text}"
    );
    assert!(text.contains("passwordEnv"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
    let path = common::write_config(
        dir.path(),
        "[serve.store]\nurl = \"postgres://app@db.internal/rampart\"\npoolSize = 0\n",
    );
    let out = common::rampart(&["--config", path.to_str().unwrap(), "config", "check"]);
    let text = common::text(&out);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("serve.store.poolSize") && text.contains(":3:"),
        "{text}"
    );

    let path = common::write_config(
        dir.path(),
        "[serve.store]\nurl = \"postgres://app@127.0.0.1:1/rampart\"\n\
         passwordEnv = \"RAMPART_TEST_UNSET_STORE_PASSWORD\"\n",
    );
    let out = common::rampart(&[
        "--config",
        path.to_str().unwrap(),
        "--sessions-dir",
        dir.path().join("s").to_str().unwrap(),
        "serve",
        "--listen",
        "127.0.0.1:0",
    ]);
    let text = common::text(&out);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("RAMPART_TEST_UNSET_STORE_PASSWORD"), "{text}");

    // `--store` takes a URL only.
    let out = common::rampart(&[
        "--sessions-dir",
        dir.path().join("s").to_str().unwrap(),
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--store",
        "/var/lib/sessions",
    ]);
    let text = common::text(&out);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("--sessions-dir"), "{text}");
}

/// A tool result too large for the window, sent to one replica, is capped there with its
/// original stored in the database: the other replica continues the conversation (the re-sent
/// full result matches the capped one), the original reads back whole from the store and
/// through `rampart sessions blob`, and no replica wrote a blob file of its own.
#[test]
fn a_capped_tool_results_original_is_kept_in_the_database_for_every_replica() {
    use common::loopback::openai_tool_call_stream;
    use rampart_sessions::blobs::BlobRef;

    let Some(db) = TestDatabase::create("serve blobs on postgres") else {
        return;
    };
    let up = common::loopback::Loopback::start();
    up.push(openai_tool_call_stream(
        "call_big",
        "read",
        r#"{"path":"big.log"}"#,
    ));
    up.push(openai_text_stream("The log is long.", 9000, 5));
    up.push(openai_text_stream("Nothing else.", 9000, 3));
    let config =
        upstream_config(&up.url()).replace("contextWindow = 128000", "contextWindow = 32000");
    let first = Serve::start(&config, db.url());
    let second = Serve::start(&config, db.url());
    let tools = json!([{"type": "function", "function": {"name": "read", "description": "Read a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]);
    let ask = |serve: &Serve, history: &Vec<Value>| {
        let response = Serve::client()
            .post(format!("{}/v1/chat/completions", serve.base))
            .json(&json!({"model": "gpt-up", "messages": history, "tools": tools}))
            .send()
            .unwrap();
        let status = response.status().as_u16();
        let body: Value = response.json().unwrap();
        assert_eq!(status, 200, "{body}");
        body["choices"][0]["message"].clone()
    };
    let big: String = (0..12_000).map(|i| format!("log line {i}\n")).collect();
    let mut history = vec![json!({"role": "user", "content": "Read big.log"})];
    history.push(ask(&first, &history));
    history.push(json!({"role": "tool", "tool_call_id": "call_big", "content": big}));
    history.push(ask(&second, &history));
    history.push(json!({"role": "user", "content": "Anything else?"}));
    history.push(ask(&first, &history));

    // Upstream never saw the whole result, from either replica.
    for request in &up.requests()[1..] {
        let tool = request.body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["role"] == "tool")
            .unwrap();
        assert!(tool["content"].as_str().unwrap().len() < big.len() / 2);
    }
    // One conversation, the capped result stored once, naming its blob.
    let key = the_conversation(&db);
    let store = db.store().unwrap();
    let entry = store.get(&key).unwrap().unwrap();
    let session = store.open(&key, &entry, SessionOptions::default()).unwrap();
    let results: Vec<String> = session
        .entries()
        .iter()
        .filter_map(|e| match e.body.message() {
            Some(AgentMessage::ToolResult(r)) => Some(r.content.joined_text()),
            _ => None,
        })
        .collect();
    assert_eq!(
        results.len(),
        1,
        "the re-sent full result matched the capped one"
    );
    let reference = BlobRef::of(big.as_bytes());
    assert!(
        results[0].len() < big.len() && results[0].contains(&reference.to_string()),
        "the capped result names its blob: {}",
        &results[0][results[0].len().saturating_sub(300)..]
    );
    // The original, whole, from the database (what any replica reads).
    let blobs = store.blobs().expect("the database keeps blobs");
    assert_eq!(blobs.get(&reference).unwrap(), big.as_bytes());
    assert_eq!(blobs.list().unwrap(), vec![reference.clone()]);
    let out = common::rampart(&[
        "sessions",
        "--store",
        db.url(),
        "blob",
        &reference.to_string(),
    ]);
    assert!(out.status.success(), "{}", common::text(&out));
    assert!(
        out.stdout == big.as_bytes(),
        "`sessions blob` printed other bytes"
    );
    for serve in [&first, &second] {
        assert!(
            !serve.sessions.join("blobs").exists(),
            "a replica kept a blob on its own disk"
        );
    }
}
