//! End to end, through the `rampart` binary: long-term memory stays where it belongs and says
//! what it does.
//!
//! - The memory flush never writes through a symbolic link: not when today's note is a link
//!   to a file outside the workspace, not when `memory/` itself is a link; the refusal is one
//!   line in the log and the flush event, and the turn goes on.
//! - `rampart memory index` run several times at once (real processes) stores each passage
//!   once, plain or `--force`; and a plain `index` repairs an index that holds passages more
//!   than once.
//! - `memory get` refusals say what is wrong with the path, a missing file is an error, the
//!   tools' refusals are not `disabled`; `memory search` keeps its notes off stdout; `memory
//!   status` before any index creates nothing and says "not indexed yet".
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::loopback::{Loopback, openai_text_stream, openai_tool_call_stream};
use common::{text, write_config};
use serde_json::Value;

/// `rampart --config <dir>/plugins.toml --sessions-dir <dir>/data/sessions <args>`.
fn command(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rampart"));
    cmd.arg("--config")
        .arg(dir.join("plugins.toml"))
        .arg("--sessions-dir")
        .arg(dir.join("data").join("sessions"))
        .args(args)
        .env_remove("RAMPART_CONFIG")
        // `auto` would pick an OpenAI key from the environment; these tests are keyword-only.
        .env_remove("OPENAI_API_KEY")
        .env("RUST_LOG", "warn")
        .current_dir(dir);
    cmd
}

fn rampart(dir: &Path, args: &[&str]) -> Output {
    command(dir, args).output().unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The default workspace, `data/workspace`, with a MEMORY.md.
fn workspace(dir: &Path) -> PathBuf {
    let ws = dir.join("data").join("workspace");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(
        ws.join("MEMORY.md"),
        "# Memory\n\n- The release train leaves on Thursdays.\n",
    )
    .unwrap();
    ws
}

fn today_note() -> String {
    chrono::Local::now()
        .format("memory/%Y-%m-%d.md")
        .to_string()
}

/// A config whose model is `local/m` behind `url`, and whose memory flush is due before any
/// request (a soft threshold larger than the window).
fn flush_always_config(dir: &Path, url: &str) {
    write_config(
        dir,
        &format!(
            r#"
[agents.defaults.model]
primary = "local/m"

[agents.defaults.compaction.memoryFlush]
softThresholdTokens = 10000000

[models.providers.local]
api = "openai-completions"
baseUrl = "{url}"
maxRetries = 0
timeoutSeconds = 10

[[models.providers.local.models]]
id = "m"
contextWindow = 200000
"#
        ),
    );
}

/// Runs one turn whose flush asks to append to today's note, and returns the run's output,
/// what the model was told about its write, and the flush event's `error`.
fn run_with_a_flush_write(dir: &Path) -> (Output, String, String) {
    let up = Loopback::start();
    up.push(openai_tool_call_stream(
        "call_w",
        "write",
        &serde_json::json!({"path": today_note(), "content": "- leaked fact"}).to_string(),
    ));
    up.push(openai_text_stream("NO_REPLY", 10, 1));
    up.push(openai_text_stream("The turn went on.", 10, 4));
    flush_always_config(dir, &up.url());
    let events = dir.join("events.jsonl");
    let out = rampart(
        dir,
        &["--events", events.to_str().unwrap(), "run", "Hello there."],
    );
    let requests = up.requests();
    assert_eq!(requests.len(), 3, "{}", text(&out));
    let second: Value = serde_json::from_str(&requests[1].raw_body).unwrap();
    let told = second["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    let flush = std::fs::read_to_string(&events)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["kind"] == "memory_flush")
        .expect("a memory_flush event");
    assert_eq!(flush["data"]["bytes"], 0, "{flush}");
    (
        out,
        common::text_of(&told),
        flush["data"]["error"].as_str().unwrap_or("").to_owned(),
    )
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Today's note is a link to a file outside the workspace: the flush's write is refused, the
/// outside file keeps its bytes, the turn answers.
#[cfg(unix)]
#[test]
fn the_flush_never_appends_through_a_note_that_is_a_link() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("diary.md"), "private\n").unwrap();
    std::fs::create_dir_all(ws.join("memory")).unwrap();
    std::os::unix::fs::symlink(outside.join("diary.md"), ws.join(today_note())).unwrap();

    let (out, told, error) = run_with_a_flush_write(dir.path());
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(stdout(&out).trim(), "The turn went on.");
    assert_eq!(
        std::fs::read_to_string(outside.join("diary.md")).unwrap(),
        "private\n"
    );
    let refusal = format!("{} is a symbolic link", today_note());
    assert!(told.contains(&refusal), "{told}");
    assert!(error.contains(&refusal), "{error}");
    // One line in the log says so.
    assert_eq!(
        stderr(&out)
            .lines()
            .filter(|l| l.contains("memory flush failed") && l.contains(&refusal))
            .count(),
        1,
        "{}",
        stderr(&out)
    );
}

/// `memory/` is a link to a directory outside: nothing is created there.
#[cfg(unix)]
#[test]
fn the_flush_never_creates_a_note_through_a_linked_memory_directory() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("other.md"), "other\n").unwrap();
    std::os::unix::fs::symlink(&outside, ws.join("memory")).unwrap();

    let (out, told, error) = run_with_a_flush_write(dir.path());
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(stdout(&out).trim(), "The turn went on.");
    assert_eq!(listing(&outside), ["other.md"], "nothing created outside");
    assert!(
        told.contains("goes through a symbolic link (memory)"),
        "{told}"
    );
    assert!(
        error.contains("goes through a symbolic link (memory)"),
        "{error}"
    );
}

/// A workspace of `notes` generated daily notes and a MEMORY.md with one known line.
fn many_notes(dir: &Path, notes: usize) -> PathBuf {
    let ws = workspace(dir);
    let words = rampart_memory::fixtures::vocabulary(600);
    let generated = rampart_memory::fixtures::generate_notes(notes * 4_000, &words, 11);
    for (path, body) in generated.iter().take(notes) {
        let file = ws.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, body).unwrap();
    }
    ws
}

/// `rampart memory status --json`'s passage count.
fn passages(dir: &Path) -> u64 {
    let out = rampart(dir, &["memory", "status", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["chunks"].as_u64().unwrap()
}

/// Starts `args` in `n` processes at once and waits for all of them.
fn at_once(dir: &Path, n: usize, args: &[&str]) {
    let children: Vec<_> = (0..n)
        .map(|_| {
            command(dir, args)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", text(&out));
    }
}

/// The hits of a search for the known line: once each, and MEMORY.md among them once.
fn assert_hits_once(dir: &Path) {
    let out = rampart(
        dir,
        &["memory", "search", "release train Thursdays", "--json"],
    );
    assert!(out.status.success(), "{}", text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let hits: Vec<String> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| format!("{}#{}-{}", r["path"], r["startLine"], r["endLine"]))
        .collect();
    let mut unique = hits.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), hits.len(), "a hit came back twice: {hits:?}");
    assert_eq!(
        hits.iter()
            .filter(|h| h.starts_with("\"MEMORY.md\""))
            .count(),
        1,
        "{hits:?}"
    );
}

/// Three `rampart memory index` processes started together on an empty index store what one
/// stores; so do three `--force` runs.
#[test]
fn concurrent_memory_index_runs_store_each_passage_once() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), "");
    many_notes(dir.path(), 300);

    // One run's count, in an index of its own.
    let reference = tempfile::tempdir().unwrap();
    write_config(reference.path(), "");
    many_notes(reference.path(), 300);
    let out = rampart(reference.path(), &["memory", "index"]);
    assert!(out.status.success(), "{}", text(&out));
    let one_run = passages(reference.path());
    assert!(one_run > 300, "{one_run}");

    at_once(dir.path(), 3, &["memory", "index"]);
    assert_eq!(passages(dir.path()), one_run);
    assert_hits_once(dir.path());

    at_once(dir.path(), 3, &["memory", "index", "--force"]);
    assert_eq!(passages(dir.path()), one_run);
    assert_hits_once(dir.path());
}

/// An index an older version left with every passage three times is whole again after a
/// plain `rampart memory index`.
#[test]
fn a_plain_index_repairs_an_index_holding_passages_several_times() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), "");
    many_notes(dir.path(), 40);
    let out = rampart(dir.path(), &["memory", "index"]);
    assert!(out.status.success(), "{}", text(&out));
    let once = passages(dir.path());
    {
        let db = dir.path().join("data").join("memory").join("main.sqlite");
        let conn = rusqlite::Connection::open(db).unwrap();
        conn.execute_batch(
            "DROP INDEX IF EXISTS idx_chunks_identity;
             CREATE TEMP TABLE old AS SELECT * FROM chunks;
             INSERT INTO chunks(path, source, start_line, end_line, hash, model, text, embedding, updated_at)
                 SELECT path, source, start_line, end_line, hash, model, text, embedding, updated_at FROM old;
             INSERT INTO chunks(path, source, start_line, end_line, hash, model, text, embedding, updated_at)
                 SELECT path, source, start_line, end_line, hash, model, text, embedding, updated_at FROM old;
             INSERT INTO chunks_fts(rowid, text) SELECT id, text FROM chunks WHERE id > (SELECT MAX(id) FROM old);",
        )
        .unwrap();
    }
    let out = rampart(dir.path(), &["memory", "index"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(passages(dir.path()), once);
    assert_hits_once(dir.path());
}

/// `memory get` says what is wrong with a refused path, and that a missing file is missing,
/// with exit code 1; a memory file prints as before.
#[cfg(unix)]
#[test]
fn memory_get_refusals_say_what_is_wrong_and_a_missing_file_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), "");
    let ws = workspace(dir.path());
    std::fs::create_dir_all(ws.join("memory")).unwrap();
    std::fs::write(dir.path().join("secret.md"), "secret\n").unwrap();
    std::os::unix::fs::symlink(dir.path().join("secret.md"), ws.join("memory/link.md")).unwrap();
    std::fs::write(ws.join("notes.md"), "not memory\n").unwrap();
    for (path, says) in [
        ("notes.md", "error: notes.md is not a memory file"),
        (
            "../../secret.md",
            "error: ../../secret.md is outside the agent workspace",
        ),
        ("memory/link.md", "error: memory/link.md is a symbolic link"),
        ("memory/x.txt", "error: memory/x.txt is not a markdown file"),
        (
            "memory/2099-01-01.md",
            "error: memory/2099-01-01.md does not exist",
        ),
    ] {
        let out = rampart(dir.path(), &["memory", "get", path]);
        assert_eq!(out.status.code(), Some(1), "{path}: {}", text(&out));
        assert!(stderr(&out).starts_with(says), "{path}: {}", text(&out));
        assert!(!stderr(&out).contains("path required"), "{}", text(&out));
        assert_eq!(stdout(&out), "", "{path}");
    }
    // As JSON: an error that says why, and no `disabled` (memory is on).
    let out = rampart(dir.path(), &["memory", "get", "notes.md", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .starts_with("notes.md is not a memory file"),
        "{v}"
    );
    assert_eq!(v.get("disabled"), None, "{v}");
    let out = rampart(dir.path(), &["memory", "get", "MEMORY.md"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(stdout(&out).contains("release train"));
}

/// The model's `memory_get` of a path outside memory is answered with why, not `disabled`.
#[test]
fn a_refused_memory_get_tells_the_model_why_and_is_not_disabled() {
    let dir = tempfile::tempdir().unwrap();
    workspace(dir.path());
    let up = Loopback::start();
    up.push(openai_tool_call_stream(
        "call_get",
        "memory_get",
        r#"{"path":"../../etc/passwd"}"#,
    ));
    up.push(openai_tool_call_stream(
        "call_empty",
        "memory_get",
        r#"{"path":""}"#,
    ));
    up.push(openai_text_stream("I cannot read that.", 20, 4));
    write_config(
        dir.path(),
        &format!(
            r#"
[agents.defaults.model]
primary = "local/m"

[models.providers.local]
api = "openai-completions"
baseUrl = "{}"
maxRetries = 0
timeoutSeconds = 10

[[models.providers.local.models]]
id = "m"
contextWindow = 64000
"#,
            up.url()
        ),
    );
    let out = rampart(dir.path(), &["run", "Show me /etc/passwd."]);
    assert!(out.status.success(), "{}", text(&out));
    let requests = up.requests();
    assert_eq!(requests.len(), 3);
    let result = |i: usize| -> Value {
        let body: Value = serde_json::from_str(&requests[i].raw_body).unwrap();
        let last = body["messages"].as_array().unwrap().last().unwrap().clone();
        serde_json::from_str(last["content"].as_str().unwrap()).unwrap()
    };
    let refused = result(1);
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .starts_with("../../etc/passwd is outside the agent workspace"),
        "{refused}"
    );
    assert_eq!(refused.get("disabled"), None, "{refused}");
    let empty = result(2);
    assert!(
        empty["error"]
            .as_str()
            .unwrap()
            .starts_with("no path given"),
        "{empty}"
    );
    assert_eq!(empty.get("disabled"), None, "{empty}");
}

/// Keyword-only search says so on stderr; stdout has only the results.
#[test]
fn memory_search_keeps_its_note_off_stdout() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), "");
    workspace(dir.path());
    let out = rampart(dir.path(), &["memory", "search", "release train"]);
    assert!(out.status.success(), "{}", text(&out));
    let results = stdout(&out);
    assert!(results.contains("MEMORY.md#L"), "{results}");
    for line in results.lines() {
        assert!(
            line.starts_with(|c: char| c.is_ascii_digit()) || line.starts_with("    "),
            "not a result line on stdout: {line:?}"
        );
    }
    assert!(
        stderr(&out).contains("note: no embedding provider available"),
        "{}",
        stderr(&out)
    );
}

/// `memory status` before any index: "not indexed yet", and neither the index nor the
/// sessions directory is created.
#[test]
fn memory_status_before_the_first_index_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), "");
    workspace(dir.path());
    let data = dir.path().join("data");
    let before = listing(&data);

    let out = rampart(dir.path(), &["memory", "status"]);
    assert!(out.status.success(), "{}", text(&out));
    let status = stdout(&out);
    assert!(status.contains("not indexed yet"), "{status}");
    assert!(status.contains("files: 0, passages: 0"), "{status}");
    assert!(status.contains("search: keyword-only"), "{status}");
    let out = rampart(dir.path(), &["memory", "status", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["chunks"], 0, "{v}");
    assert_eq!(listing(&data), before, "a status created something");

    // After an index, the status counts it.
    let out = rampart(dir.path(), &["memory", "index"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = rampart(dir.path(), &["memory", "status"]);
    assert!(stdout(&out).contains("files: 1"), "{}", text(&out));
    assert!(!stdout(&out).contains("not indexed yet"), "{}", text(&out));
}
