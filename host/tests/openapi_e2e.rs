//! `rampart serve`'s OpenAI answers against OpenAI's own OpenAPI description, checked by
//! schemathesis: every answer, error and stream event of `createChatCompletion`,
//! `createResponse` and `listModels` must conform, streamed and not, with the checks `all`
//! (less the deviations README.md lists under "OpenAI's specification", configured in
//! `tests/openapi/schemathesis.toml`).
//!
//! The description is OpenAI's, cut down to those three operations by `tests/openapi/trim.py`
//! (the source commit is in its `info.x-rampart-source`; MIT licence beside it). schemathesis
//! comes from PyPI, pinned, installed by `.ci/schemathesis`; without it the test prints
//! `SKIPPED: …` and passes, and `RAMPART_REQUIRE_SCHEMATHESIS=1` (set by `.ci/run`) makes that a
//! failure. The upstream is a loopback model that answers every request: with a tool call when
//! the request offers tools, else with text.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common;
use common::loopback::{Loopback, Recorded, Reply, openai_text_stream, openai_tool_call_stream};
use common::serve::ServeProcess;

/// Test cases per operation and phase; with the fixed seed the run is the same every time.
const EXAMPLES: &str = "40";
const SEED: &str = "20261127";

/// The schemathesis executable: `$RAMPART_SCHEMATHESIS`, else the virtualenv `.ci/schemathesis`
/// makes beside the build. `None` (with the reason printed) when there is none.
fn schemathesis() -> Option<PathBuf> {
    let exe = std::env::var_os("RAMPART_SCHEMATHESIS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_TARGET_TMPDIR"))
                .parent()
                .unwrap()
                .join("schemathesis-venv/bin/schemathesis")
        });
    let ok = Command::new(&exe)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        return Some(exe);
    }
    let why = format!(
        "SKIPPED: schemathesis is not installed at {} (run .ci/schemathesis, or set \
         RAMPART_SCHEMATHESIS)",
        exe.display()
    );
    if std::env::var("RAMPART_REQUIRE_SCHEMATHESIS").is_ok_and(|v| v == "1") {
        panic!("{why}");
    }
    eprintln!("{why}");
    None
}

/// The loopback model: a tool call (to the first tool offered) when the request offers tools
/// and its last message is not a tool result, else text.
fn answer(request: &Recorded) -> Reply {
    let body = &request.body;
    let last_is_result = body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .is_some_and(|m| m["role"] == "tool");
    let tool = body["tools"]
        .as_array()
        .and_then(|t| t.first())
        .and_then(|t| t["function"]["name"].as_str());
    match tool {
        Some(name) if !last_is_result => {
            openai_tool_call_stream("call_spec", name, r#"{"path":"a.txt"}"#)
        }
        _ => openai_text_stream("An answer from the loopback model.", 12, 7),
    }
}

fn config(url: &str) -> String {
    format!(
        r#"
[agents.defaults.model]
primary = "up/gpt-up"

[agents.defaults.compaction]
model = "sim/default"

[models.providers.up]
api = "openai-completions"
baseUrl = "{url}"
maxRetries = 0
timeoutSeconds = 20

[[models.providers.up.models]]
id = "gpt-up"
contextWindow = 128000
"#
    )
}

#[test]
fn openai_operations_conform_to_openais_specification() {
    let Some(schemathesis) = schemathesis() else {
        return;
    };
    let up = Loopback::scripted(answer);
    let serve = ServeProcess::start(&config(&up.url()));
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/openapi");
    let report = Path::new(env!("CARGO_TARGET_TMPDIR")).join("schemathesis-serve.xml");
    // schemathesis keeps a cache in its working directory: a scratch one, not the checkout.
    let scratch = tempfile::tempdir().unwrap();
    let out = Command::new(&schemathesis)
        .current_dir(scratch.path())
        .arg("--config-file")
        .arg(dir.join("schemathesis.toml"))
        .arg("run")
        .arg(dir.join("openai-subset.json"))
        .args(["--url", &format!("{}/v1", serve.base)])
        .args([
            "--checks",
            "all",
            "--seed",
            SEED,
            "--max-examples",
            EXAMPLES,
        ])
        // serve checks the fields it reads and refuses them with a 400 naming the field; the
        // fields it does not read are not its to judge (the upstream does), so a malformed one
        // is not refused here (README.md, "OpenAI's specification").
        .args(["--exclude-checks", "negative_data_rejection"])
        // The examples phase stops inside hypothesis on this Python (an AST recursion error
        // while it describes a strategy, before any request): coverage and fuzzing only.
        .args(["--phases", "coverage,fuzzing"])
        .args(["--workers", "1", "--generation-database", "none"])
        .args(["--continue-on-failure", "--no-color"])
        .args(["--report", "junit", "--report-junit-path"])
        .arg(&report)
        .env("SCHEMATHESIS_HOOKS", "")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "schemathesis found answers that break OpenAI's specification (report: {}):\n{text}",
        report.display()
    );
    // The run reached the server: every operation was tested, and the model was asked.
    assert!(text.contains("Tested: 3"), "{text}");
    assert!(up.request_count() > 0, "{text}");
    eprintln!("schemathesis: {}", text.lines().last().unwrap_or(""));
}

/// What the specification allows and serve used to refuse or get wrong, without schemathesis:
/// a Responses request naming no model is answered by the configured primary, a chat request
/// with an empty model too; `GET /v1/models` says when each model became available; a POST to
/// `/v1/models` is 405 with an Allow header, not a complaint about its content type.
#[test]
fn a_request_without_a_model_goes_to_the_primary_and_models_are_listed_whole() {
    let up = Loopback::scripted(answer);
    let serve = ServeProcess::start(&config(&up.url()));
    let client = reqwest::blocking::Client::new();
    let post = |path: &str, body: serde_json::Value| {
        let r = client
            .post(format!("{}{path}", serve.base))
            .json(&body)
            .send()
            .unwrap();
        (r.status().as_u16(), r.json::<serde_json::Value>().unwrap())
    };
    let (status, body) = post("/v1/responses", serde_json::json!({"input": "hi"}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["model"], "up/gpt-up");
    let (status, body) = post(
        "/v1/chat/completions",
        serde_json::json!({"model": "", "messages": [{"role": "user", "content": "hi"}]}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["model"], "up/gpt-up");
    assert_eq!(up.request_count(), 2);

    let models: serde_json::Value = client
        .get(format!("{}/v1/models", serve.base))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert!(
        models["data"][0]["created"].as_u64().unwrap() > 1_700_000_000,
        "{models}"
    );

    let refused = client
        .post(format!("{}/v1/models", serve.base))
        .send()
        .unwrap();
    assert_eq!(refused.status().as_u16(), 405);
    assert!(refused.headers().contains_key("allow"));
}
