//! End to end: long-term memory through the `rampart` binary. `rampart memory` over the
//! built-in `memory-core` (keyword-only, a damaged index rebuilt from the markdown), a third
//! party's memory engine across the ABI (in a child process, as libraries run by default),
//! the quarantine of a failing one, and `rampart run` answering the model's memory tools.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::loopback::{Loopback, openai_text_stream, openai_tool_call_stream};
use common::{fixture, text, write_config};
use serde_json::Value;

fn rampart(dir: &Path, args: &[&str]) -> Output {
    let config = dir.join("plugins.toml");
    let sessions = dir.join("data").join("sessions");
    let mut all = vec![
        "--config".to_owned(),
        config.display().to_string(),
        "--sessions-dir".to_owned(),
        sessions.display().to_string(),
    ];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    Command::new(env!("CARGO_BIN_EXE_rampart"))
        .args(&all)
        .env_remove("RAMPART_CONFIG")
        // `auto` would pick an OpenAI key from the environment; these tests are keyword-only.
        .env_remove("OPENAI_API_KEY")
        .env("RUST_LOG", "warn")
        .current_dir(dir)
        .output()
        .unwrap()
}

/// A workspace (the default place: `data/workspace`) with a MEMORY.md and a dated note.
fn workspace(dir: &Path) -> PathBuf {
    let ws = dir.join("data").join("workspace");
    std::fs::create_dir_all(ws.join("memory")).unwrap();
    std::fs::write(
        ws.join("MEMORY.md"),
        "# Memory\n\n- The job queue runs on SQLite, chosen over Postgres for its single writer.\n\
         - Ines reviews every migration herself.\n",
    )
    .unwrap();
    std::fs::write(
        ws.join("memory").join("2026-11-20.md"),
        "# 2026-11-20\n\n- Deployed v2.3 to staging.\n- Migration 0042_add_index took four minutes.\n",
    )
    .unwrap();
    ws
}

#[test]
fn memory_core_indexes_searches_reads_and_reports_keyword_only() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), "");
    let ws = workspace(dir.path());
    let out = rampart(dir.path(), &["memory", "index"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("indexed 2 file(s)"), "{}", text(&out));

    let out = rampart(
        dir.path(),
        &["memory", "search", "migration staging", "--json"],
    );
    assert!(out.status.success(), "{}", text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["results"][0]["path"], "memory/2026-11-20.md", "{v}");
    assert_eq!(v["mode"], "fts-only");

    let out = rampart(
        dir.path(),
        &["memory", "get", "MEMORY.md", "--from", "3", "--lines", "1"],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "- The job queue runs on SQLite, chosen over Postgres for its single writer."
    );
    let out = rampart(dir.path(), &["memory", "get", "notes.md"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("not a memory file"), "{}", text(&out));

    // No embedding provider: keyword-only, and the status says why (pain point 17725).
    let out = rampart(dir.path(), &["memory", "status"]);
    assert!(out.status.success(), "{}", text(&out));
    let status = text(&out);
    assert!(status.contains("search: keyword-only"), "{status}");
    assert!(status.contains("files: 2"), "{status}");
    assert!(status.contains("no embedding provider"), "{status}");
    // The workspace is only read.
    assert!(!ws.join("memory").join("2026-11-25.md").exists());
}

#[test]
fn a_damaged_index_is_moved_aside_and_rebuilt_from_the_markdown() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), "");
    let ws = workspace(dir.path());
    let before = std::fs::read(ws.join("MEMORY.md")).unwrap();
    let db_dir = dir.path().join("data").join("memory");
    std::fs::create_dir_all(&db_dir).unwrap();
    std::fs::write(
        db_dir.join("main.sqlite"),
        b"this is not a database, it is garbage",
    )
    .unwrap();

    let out = rampart(
        dir.path(),
        &["memory", "search", "Ines migration", "--json"],
    );
    assert!(out.status.success(), "{}", text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["results"][0]["path"], "MEMORY.md", "{v}");
    let moved: Vec<String> = std::fs::read_dir(&db_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("corrupt"))
        .collect();
    assert_eq!(
        moved.len(),
        1,
        "the damaged file is kept beside the new one"
    );
    assert_eq!(
        std::fs::read(db_dir.join(&moved[0])).unwrap(),
        b"this is not a database, it is garbage"
    );
    assert_eq!(std::fs::read(ws.join("MEMORY.md")).unwrap(), before);
}

fn fx_memory_config(dir: &Path, extra: &str) {
    write_config(
        dir,
        &format!(
            r#"
[plugins.slots]
memory = "fx-memory"

[plugins.engines.fx-memory]
path = "{}"
{extra}

[plugins.engines.fx-memory.config]
notes = ["The deploy key lives in the vault under ops/deploy.", "Lunch is at noon.", "The vault is rotated monthly."]
"#,
            fixture("fx-memory").display()
        ),
    );
}

#[test]
fn a_third_party_memory_engine_serves_through_the_abi_in_a_child_and_in_process() {
    for isolation in ["", "isolation = \"inprocess\""] {
        let dir = tempfile::tempdir().unwrap();
        fx_memory_config(dir.path(), isolation);
        let out = rampart(dir.path(), &["memory", "search", "vault", "--json"]);
        assert!(out.status.success(), "{isolation}: {}", text(&out));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let paths: Vec<&str> = v["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["snippet"].as_str().unwrap())
            .collect();
        assert_eq!(paths.len(), 2, "{v}");
        assert!(paths.iter().all(|s| s.contains("vault")));
        let out = rampart(dir.path(), &["memory", "status"]);
        assert!(text(&out).contains("notes (fixture)"), "{}", text(&out));
    }
}

#[test]
fn a_failing_memory_engine_is_quarantined_with_one_line_and_memory_is_off() {
    let dir = tempfile::tempdir().unwrap();
    write_config(
        dir.path(),
        &format!(
            "[plugins.slots]\nmemory = \"fx-memory\"\n[plugins.engines.fx-memory]\npath = \"{}\"\n\
             [plugins.engines.fx-memory.config]\nfailSearch = true\n",
            fixture("fx-memory").display()
        ),
    );
    let out = rampart(dir.path(), &["memory", "search", "anything", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["disabled"], true, "{v}");
    assert!(v["error"].as_str().unwrap().contains("quarantined"), "{v}");
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        log.matches("memory engine \"fx-memory\" failed during memory.search")
            .count(),
        1,
        "{log}"
    );
}

#[test]
fn a_context_engine_in_the_memory_slot_is_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    write_config(
        dir.path(),
        &format!(
            "[plugins.slots]\nmemory = \"fx-minimal\"\n[plugins.engines.fx-minimal]\npath = \"{}\"\n",
            fixture("fx-minimal").display()
        ),
    );
    let out = rampart(dir.path(), &["memory", "status"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains("is a context engine, not a memory engine"),
        "{}",
        text(&out)
    );
}

fn run_config(dir: &Path, url: &str, memory: &str) {
    run_config_with(
        dir,
        url,
        &format!("[plugins.slots]\nmemory = \"{memory}\"\n"),
    );
}

/// A config whose model is `local/m` behind `url`, with `plugins` (TOML tables) before it.
fn run_config_with(dir: &Path, url: &str, plugins: &str) {
    write_config(
        dir,
        &format!(
            r#"
{plugins}
[agents.defaults.model]
primary = "local/m"

[models.providers.local]
api = "openai-completions"
baseUrl = "{url}"
maxRetries = 0
timeoutSeconds = 10

[[models.providers.local.models]]
id = "m"
contextWindow = 64000
"#
        ),
    );
}

/// The model is offered the memory tools, calls `memory_search`, gets the passage from
/// MEMORY.md as the tool result, and answers; the session holds the call and its result.
#[test]
fn rampart_run_answers_the_models_memory_tool_calls_itself() {
    let dir = tempfile::tempdir().unwrap();
    workspace(dir.path());
    let up = Loopback::start();
    up.push(openai_tool_call_stream(
        "call_mem",
        "memory_search",
        r#"{"query":"job queue database"}"#,
    ));
    up.push(openai_text_stream("The queue runs on SQLite.", 40, 6));
    run_config(dir.path(), &up.url(), "memory-core");
    let out = rampart(
        dir.path(),
        &["run", "Which database does the job queue use?"],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "The queue runs on SQLite."
    );
    let requests = up.requests();
    assert_eq!(requests.len(), 2);
    let first: Value = serde_json::from_str(&requests[0].raw_body).unwrap();
    let tools: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["memory_search", "memory_get"]);
    let second: Value = serde_json::from_str(&requests[1].raw_body).unwrap();
    let last = second["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "tool");
    assert_eq!(last["tool_call_id"], "call_mem");
    let result: Value = serde_json::from_str(last["content"].as_str().unwrap()).unwrap();
    assert_eq!(result["results"][0]["path"], "MEMORY.md", "{result}");
    assert!(
        result["results"][0]["snippet"]
            .as_str()
            .unwrap()
            .contains("SQLite")
    );
}

#[test]
fn with_memory_off_run_offers_no_memory_tools() {
    let dir = tempfile::tempdir().unwrap();
    workspace(dir.path());
    let up = Loopback::start();
    up.push(openai_text_stream("Hello.", 10, 2));
    run_config(dir.path(), &up.url(), "none");
    let out = rampart(dir.path(), &["run", "Hi"]);
    assert!(out.status.success(), "{}", text(&out));
    let first: Value = serde_json::from_str(&up.requests()[0].raw_body).unwrap();
    assert!(first.get("tools").is_none(), "{first}");
}

/// The flush with a real model: the run's next request (about 49k tokens of a 200k window,
/// whose compaction trigger is 150k) is past the flush threshold (a large
/// `softThresholdTokens` puts it at 30k, without a compaction), so before the turn a silent
/// request offers `write` and `read`, whose writes reach only today's note; then the turn goes
/// on, and the next run in the same compaction cycle does not flush again.
#[test]
fn the_flush_asks_the_model_to_append_to_todays_note_once_per_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let note = chrono::Local::now()
        .format("memory/%Y-%m-%d.md")
        .to_string();
    let up = Loopback::start();
    up.push(openai_tool_call_stream(
        "call_w1",
        "write",
        &serde_json::json!({"path": note, "content": "- Deploys are blue-green since November."})
            .to_string(),
    ));
    up.push(openai_tool_call_stream(
        "call_w2",
        "write",
        r#"{"path":"MEMORY.md","content":"- overwrite attempt"}"#,
    ));
    up.push(openai_text_stream("NO_REPLY", 10, 1));
    up.push(openai_text_stream("Done with the turn.", 10, 4));
    up.push(openai_text_stream("Second turn.", 10, 3));
    write_config(
        dir.path(),
        &format!(
            r#"
[agents.defaults.model]
primary = "local/m"

[agents.defaults.compaction.memoryFlush]
softThresholdTokens = 120000

[models.providers.local]
api = "openai-completions"
baseUrl = "{}"
maxRetries = 0
timeoutSeconds = 10

[[models.providers.local.models]]
id = "m"
contextWindow = 200000
"#,
            up.url()
        ),
    );
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "../../shared/data/sessions/openclaw-linux2010/main__62329ad3-2943-45f0-90ce-a7ca33ba3bec.jsonl",
    );
    let out = rampart(
        dir.path(),
        &[
            "sessions",
            "import",
            source.to_str().unwrap(),
            "--as",
            "main",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let memory_before = std::fs::read(ws.join("MEMORY.md")).unwrap();

    let out = rampart(dir.path(), &["run", "Carry on."]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "Done with the turn."
    );
    let requests = up.requests();
    assert_eq!(requests.len(), 4, "three flush calls, then the turn");
    let first: Value = serde_json::from_str(&requests[0].raw_body).unwrap();
    let tools: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["write", "read"]);
    let asked = first["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(
        common::text_of(&asked).contains("Pre-compaction memory flush"),
        "{asked}"
    );
    // The refused write was told why.
    let third: Value = serde_json::from_str(&requests[2].raw_body).unwrap();
    let refusal = third["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(
        common::text_of(&refusal).contains("restricted to"),
        "{refusal}"
    );
    // The turn itself: no flush prompt, no flush tools.
    let turn: Value = serde_json::from_str(&requests[3].raw_body).unwrap();
    assert!(!requests[3].raw_body.contains("Pre-compaction memory flush"));
    assert!(
        turn["tools"]
            .as_array()
            .is_none_or(|t| t.iter().all(|t| t["function"]["name"] != "write")),
        "{turn}"
    );
    let written = std::fs::read_to_string(ws.join(&note)).unwrap();
    assert_eq!(written, "- Deploys are blue-green since November.\n");
    assert_eq!(std::fs::read(ws.join("MEMORY.md")).unwrap(), memory_before);
    // The note is searchable right away.
    let out = rampart(
        dir.path(),
        &["memory", "search", "blue-green deploys", "--json"],
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["results"][0]["path"], note.as_str(), "{v}");

    // The same cycle: no second flush.
    let out = rampart(dir.path(), &["run", "And again."]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(up.requests().len(), 5, "only the turn");
}

/// The replay of a long session with the simulator: one flush before each compaction cycle,
/// the first one before the first compaction (pain point 47143), written by the embedded
/// summariser into the replay's scratch memory, never into the user's workspace.
#[test]
fn replay_flushes_once_per_cycle_and_before_the_first_compaction() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), "");
    let ws = workspace(dir.path());
    let events = dir.path().join("events.jsonl");
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/sessions/openclaw-main-3479d118.jsonl");
    let out = rampart(
        dir.path(),
        &[
            "--events",
            events.to_str().unwrap(),
            "replay",
            source.to_str().unwrap(),
            "--window",
            "32000",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("flush(es) before compactions"),
        "{}",
        text(&out)
    );
    let mut flushed_cycles = Vec::new();
    let mut compactions = 0u64;
    let mut first_flush_before_first_compaction = None;
    for line in std::fs::read_to_string(&events).unwrap().lines() {
        let e: Value = serde_json::from_str(line).unwrap();
        match e["kind"].as_str().unwrap() {
            "memory_flush" => {
                assert_eq!(e["data"]["by"], "extractive", "{e}");
                assert!(e["data"]["bytes"].as_u64().unwrap() > 0, "{e}");
                flushed_cycles.push(e["data"]["cycle"].as_u64().unwrap());
                first_flush_before_first_compaction.get_or_insert(compactions == 0);
            }
            "compaction_end" if e["data"]["compacted"] == true => compactions += 1,
            _ => {}
        }
    }
    assert!(compactions >= 2, "{compactions}");
    assert_eq!(first_flush_before_first_compaction, Some(true));
    let mut unique = flushed_cycles.clone();
    unique.dedup();
    assert_eq!(unique, flushed_cycles, "at most one flush per cycle");
    assert_eq!(flushed_cycles[0], 0);
    // The user's own memory is untouched.
    assert!(std::fs::read_dir(ws.join("memory")).unwrap().count() == 1);
}

/// A memory engine that fails mid-run costs the turn nothing: the model's search is answered
/// `disabled` with the reason, and the turn ends with the model's answer.
#[test]
fn a_memory_engine_failing_during_a_turn_never_fails_the_turn() {
    let dir = tempfile::tempdir().unwrap();
    let up = Loopback::start();
    up.push(openai_tool_call_stream(
        "call_x",
        "memory_search",
        r#"{"query":"vault"}"#,
    ));
    up.push(openai_text_stream("I could not check memory.", 20, 5));
    run_config_with(
        dir.path(),
        &up.url(),
        &format!(
            "[plugins.slots]\nmemory = \"fx-memory\"\n[plugins.engines.fx-memory]\npath = \"{}\"\n\
             [plugins.engines.fx-memory.config]\nfailSearch = true\n",
            fixture("fx-memory").display()
        ),
    );
    let out = rampart(dir.path(), &["run", "Where is the deploy key?"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "I could not check memory."
    );
    let second: Value = serde_json::from_str(&up.requests()[1].raw_body).unwrap();
    let result = second["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    let answer: Value = serde_json::from_str(result["content"].as_str().unwrap()).unwrap();
    assert_eq!(answer["disabled"], true, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("quarantined"),
        "{answer}"
    );
}

/// `config check` resolves a memory engine library as it does a context engine, and `engines
/// list` names the memory slot.
#[test]
fn config_check_and_engines_list_know_the_memory_slot() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), "[plugins.slots]\nmemory = \"ghost\"\n");
    let out = rampart(dir.path(), &["config", "check"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("memory: ghost"), "{}", text(&out));
    assert!(
        text(&out).contains("unknown engine id `ghost`"),
        "{}",
        text(&out)
    );

    fx_memory_config(dir.path(), "");
    let out = rampart(dir.path(), &["config", "check"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = rampart(dir.path(), &["engines", "list"]);
    let listed = text(&out);
    assert!(
        listed.contains("memory slot: fx-memory") && listed.contains("fx_memory"),
        "{listed}"
    );
    // Not listed as a context engine as well.
    assert_eq!(listed.matches("fx-memory").count(), 1, "{listed}");
}

/// Issue 24, defect 11: the note of a damaged index printed Rust's debug text
/// (`Quarantined { from: … }`); it is a sentence naming the reason and where the file went.
#[test]
fn a_damaged_index_is_reported_in_words_not_debug_text() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), "");
    workspace(dir.path());
    let db_dir = dir.path().join("data").join("memory");
    std::fs::create_dir_all(&db_dir).unwrap();
    std::fs::write(db_dir.join("main.sqlite"), b"garbage, not a database").unwrap();

    let out = rampart(dir.path(), &["memory", "index"]);
    assert!(out.status.success(), "{}", text(&out));
    let t = text(&out);
    assert!(t.contains("moved aside"), "the damage is reported: {t}");
    assert!(t.contains(".corrupt-"), "and where the file went: {t}");
    for debug in ["Quarantined {", "from:", "reason:"] {
        assert!(!t.contains(debug), "no debug text ({debug}): {t}");
    }
}
