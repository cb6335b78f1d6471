//! Engine tools (engine API 1.2) end to end, with the lossless engine's cdylib as a third
//! party ships it (in a child process, the default) and a scripted loopback model: `rampart
//! run` offers the engine's recall tools and answers the model's calls of them; `rampart
//! serve` adds them upstream, answers them in the server and hides them from the client; a
//! client turns them off with `x-rampart-engine-tools: off`, and a client tool of the same name
//! stays the client's. Engines without tools (legacy) offer none.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Output};

use crate::common::loopback::{Loopback, openai_text_stream, openai_tool_call_stream};
use crate::common::serve::{ServeProcess, upstream_config};
use crate::common::{fixture, last_message, text, write_config};
use serde_json::{Value, json};

/// The `[plugins]` tables selecting the lossless cdylib, with its state under `state` when
/// given (else where the host's `state.dir` puts it).
fn lossless_plugins(state: Option<&Path>) -> String {
    let state = state
        .map(|s| format!("stateDir = \"{}\"\n", s.display()))
        .unwrap_or_default();
    format!(
        "[plugins]\ncallTimeoutMs = 20000\nloadTimeoutMs = 20000\n[plugins.slots]\n\
         contextEngine = \"lossless\"\nmemory = \"none\"\n[plugins.engines.lossless]\n\
         path = \"{}\"\n[plugins.engines.lossless.config]\n{state}\
         summarizer = \"extractive\"\n",
        fixture("rampart-lossless").display(),
    )
}

fn run(dir: &Path, args: &[&str]) -> Output {
    let config = dir.join("plugins.toml");
    let sessions = dir.join("sessions");
    Command::new(env!("CARGO_BIN_EXE_rampart"))
        .args(["--config", config.to_str().unwrap()])
        .args(["--sessions-dir", sessions.to_str().unwrap()])
        .args(args)
        .env_remove("RAMPART_CONFIG")
        .env_remove("OPENAI_API_KEY")
        .env("RUST_LOG", "warn")
        .current_dir(dir)
        .output()
        .unwrap()
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// A loopback model scripted for a recall: "Noted." to the fact, then an `lcm_grep` call for
/// it, then the answer that uses what the search found.
fn recalling_model() -> Loopback {
    let up = Loopback::start();
    up.push(openai_text_stream("Noted.", 40, 2));
    up.push(openai_tool_call_stream(
        "call_g1",
        "lcm_grep",
        r#"{"pattern":"quartz-17"}"#,
    ));
    up.push(openai_text_stream("It is under secret/quartz-17.", 80, 8));
    up
}

fn body(recorded: &crate::common::loopback::Recorded) -> Value {
    serde_json::from_str(&recorded.raw_body).unwrap()
}

/// The model finds an earlier run's fact with `lcm_grep`: the engine's answer is the tool
/// result of the model's next request, and the session keeps the call and its result.
#[test]
fn rampart_run_offers_the_engines_tools_and_answers_them() {
    let dir = tempfile::tempdir().unwrap();
    let up = recalling_model();
    write_config(
        dir.path(),
        &format!(
            "{}\n{}",
            lossless_plugins(Some(&dir.path().join("state"))),
            upstream_config(&up.url())
        ),
    );
    let out = run(
        dir.path(),
        &[
            "run",
            "Remember: the deploy key sits at vault path secret/quartz-17.",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let out = run(dir.path(), &["run", "Where does the deploy key sit?"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "It is under secret/quartz-17."
    );

    let requests = up.requests();
    assert_eq!(requests.len(), 3);
    for r in &requests {
        assert_eq!(
            tool_names(&body(r)),
            ["lcm_grep", "lcm_describe", "lcm_expand"],
            "every request offers the same tools (a stable prefix)"
        );
    }
    let result = last_message(&body(&requests[2]));
    assert_eq!(result["role"], "tool");
    assert_eq!(result["tool_call_id"], "call_g1");
    let answer: Value = serde_json::from_str(result["content"].as_str().unwrap()).unwrap();
    let hits = answer["hits"].as_array().unwrap();
    assert!(
        hits.iter()
            .any(|h| h["snippet"].as_str().unwrap().contains("secret/quartz-17")),
        "{answer}"
    );
    // The user's configured `stateDir` holds the database (it wins over the host's place).
    assert!(dir.path().join("state").join("main.sqlite").is_file());
}

/// With the legacy engine (no engine tools) and no memory, `rampart run` offers no tools.
#[test]
fn an_engine_without_tools_offers_none() {
    let dir = tempfile::tempdir().unwrap();
    let up = Loopback::start();
    up.push(openai_text_stream("Hello.", 10, 2));
    write_config(
        dir.path(),
        &format!(
            "[plugins.slots]\nmemory = \"none\"\n{}",
            upstream_config(&up.url())
        ),
    );
    let out = run(dir.path(), &["run", "Hi"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(body(&up.requests()[0]).get("tools").is_none());
}

fn post(serve: &ServeProcess, headers: &[(&str, &str)], request: &Value) -> (u16, Value) {
    let client = reqwest::blocking::Client::builder()
        .timeout(std::time::Duration::from_secs(60))
        .build()
        .unwrap();
    let mut builder = client
        .post(format!("{}/v1/chat/completions", serve.base))
        .json(request);
    for (k, v) in headers {
        builder = builder.header(*k, *v);
    }
    let response = builder.send().unwrap();
    let status = response.status().as_u16();
    (status, response.json().unwrap())
}

/// Serve adds the engine's tools upstream and answers them itself: the client sees only the
/// answer, and its next request (which never saw the search) continues the same conversation
/// with the search still in the model's context. `x-rampart-engine-tools: off` offers none;
/// a client's own `lcm_grep` is the client's, so the model's call of it reaches the client.
#[test]
fn serve_answers_engine_tools_hidden_from_the_client() {
    let up = recalling_model();
    up.push(openai_text_stream("You are welcome.", 90, 4));
    up.push(openai_text_stream("Plain.", 10, 1));
    up.push(openai_tool_call_stream(
        "call_c1",
        "lcm_grep",
        r#"{"pattern":"mine"}"#,
    ));
    let serve = ServeProcess::start(&format!(
        "{}\n{}",
        lossless_plugins(None),
        upstream_config(&up.url())
    ));
    let session = [("x-rampart-session", "tools")];
    let fact = json!({"role": "user", "content": "Remember: the deploy key sits at vault path secret/quartz-17."});
    let (status, _) = post(
        &serve,
        &session,
        &json!({"model": "gpt-up", "messages": [fact]}),
    );
    assert_eq!(status, 200);
    let question = json!({"role": "user", "content": "Where does the deploy key sit?"});
    let history = [
        fact.clone(),
        json!({"role": "assistant", "content": "Noted."}),
        question.clone(),
    ];
    let (status, answer) = post(
        &serve,
        &session,
        &json!({"model": "gpt-up", "messages": history}),
    );
    assert_eq!(status, 200, "{answer}");
    let message = &answer["choices"][0]["message"];
    assert_eq!(message["content"], "It is under secret/quartz-17.");
    assert!(
        message.get("tool_calls").is_none() || message["tool_calls"].is_null(),
        "the search stays in the server: {answer}"
    );
    let requests = up.requests();
    assert_eq!(
        tool_names(&body(&requests[0])),
        ["lcm_grep", "lcm_describe", "lcm_expand"]
    );
    let result = last_message(&body(&requests[2]));
    assert_eq!(result["role"], "tool");
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("secret/quartz-17"),
        "{result}"
    );

    // The next request carries only what the client saw, and continues the conversation.
    let mut next = history.to_vec();
    next.push(json!({"role": "assistant", "content": "It is under secret/quartz-17."}));
    next.push(json!({"role": "user", "content": "Thanks."}));
    let (status, _) = post(
        &serve,
        &session,
        &json!({"model": "gpt-up", "messages": next}),
    );
    assert_eq!(status, 200);
    let fourth = body(&up.requests()[3]);
    let roles: Vec<&str> = fourth["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "user",
            "assistant",
            "tool",
            "assistant",
            "user"
        ],
        "one branch, the search still in context"
    );

    // Opted out: no engine tools upstream.
    let (status, _) = post(
        &serve,
        &[
            ("x-rampart-session", "off"),
            ("x-rampart-engine-tools", "off"),
        ],
        &json!({"model": "gpt-up", "messages": [{"role": "user", "content": "hi"}]}),
    );
    assert_eq!(status, 200);
    assert!(body(&up.requests()[4]).get("tools").is_none());

    // The client's own tool of that name: offered once (the client's), and its call returned.
    let client_tool = json!({"type": "function", "function": {
        "name": "lcm_grep", "description": "the client's own",
        "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}}}});
    let (status, answer) = post(
        &serve,
        &[("x-rampart-session", "own")],
        &json!({"model": "gpt-up", "tools": [client_tool],
                "messages": [{"role": "user", "content": "search mine"}]}),
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "lcm_grep",
        "{answer}"
    );
    let sixth = body(&up.requests()[5]);
    assert_eq!(
        tool_names(&sixth),
        ["lcm_grep", "lcm_describe", "lcm_expand"],
        "the client's lcm_grep, then the engine's other two"
    );
    assert_eq!(
        sixth["tools"][0]["function"]["description"],
        "the client's own"
    );
    // The engine was asked for its tools once per conversation, not once per request: three
    // requests in `tools`, none with the opt-out, one in `own`.
    let metrics = serve.metrics();
    assert!(
        metrics.contains(
            "rampart_serve_engine_calls_total{engine=\"lossless\",operation=\"tools.list\"} 2\n"
        ),
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("tools."))
            .collect::<Vec<_>>()
            .join("\n")
    );

    // No `stateDir` configured: the database is beside the sessions (`state.dir`).
    let database = serve
        .sessions
        .join("engines")
        .join("lossless")
        .join("main.sqlite");
    assert!(database.is_file(), "{}", database.display());
}
