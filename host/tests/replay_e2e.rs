//! End to end: `rampart replay` on the real v3 transcripts in ../shared/data/sessions
//! (MIT-licensed copies, see the README there; read only), checking what a user would notice:
//! the replay finishes, no request the model received is larger than the window, every tool
//! call in every request has its result right after it, the input is untouched, the JSON and
//! the report say what happened, and another engine shows another strategy.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use common::{fixture, text, write_config};
use rampart_host::replay::table::thousands;
use serde_json::Value;

/// The shared transcripts, beside the repository (as CI lays them out).
fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/sessions")
}

/// A small v3 session (44 calls) for the tests that only need one.
const SMALL: &str = "openclaw-linux2010/main__8d0416c9-a2b4-43d0-a16d-755e39f36d39.jsonl";

/// A longer one (109 calls, large tool results) for the small-window test.
const LONG: &str = "openclaw-linux2010/main__62329ad3-2943-45f0-90ce-a7ca33ba3bec.jsonl";

/// Every `*.jsonl` under the data directory whose header says pi v3.
fn v3_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                let first: Value = text
                    .lines()
                    .next()
                    .and_then(|l| serde_json::from_str(l).ok())
                    .unwrap_or(Value::Null);
                if first["type"] == "session" && first["version"] == 3 {
                    out.push(path);
                }
            }
        }
    }
    let mut files = Vec::new();
    walk(&data(), &mut files);
    files.sort();
    files
}

/// Runs `rampart` with `args` in a clean environment: no config from outside (an explicit
/// empty one unless `args` names another), temporary files under `tmp`.
fn rampart_in(tmp: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rampart"))
        .args(args)
        .env_remove("RAMPART_CONFIG")
        .env("RUST_LOG", "warn")
        .env("TMPDIR", tmp)
        // No user config dir either: those paths do not exist.
        .env("XDG_CONFIG_HOME", tmp.join("no-xdg-config"))
        .env("XDG_DATA_HOME", tmp.join("no-xdg-data"))
        .current_dir(tmp)
        .output()
        .unwrap()
}

/// An empty config in `dir`: the embedded defaults.
fn empty_config(dir: &Path) -> PathBuf {
    write_config(dir, "")
}

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("--json output does not parse ({e}):\n{}", text(out)))
}

/// Checks one `--requests-out` line: within the window, and every tool call followed by
/// exactly one result for it (and no result without its call).
///
/// One exemption, pi's wire contract (`rampart_engine_api::pairing`): an assistant turn that
/// ended in `error` or `aborted` gets no synthetic results, because provider adapters are to
/// leave such turns out of the request; its real results, when recorded, still follow it.
fn check_request(line: &str, window: u64, file: &Path) {
    let r: Value = serde_json::from_str(line).unwrap();
    for key in [
        "turn",
        "attempt",
        "model",
        "window",
        "promptTokens",
        "system",
        "messages",
    ] {
        assert!(
            r.get(key).is_some(),
            "{}: request lacks {key}",
            file.display()
        );
    }
    let tokens = r["promptTokens"].as_u64().unwrap();
    assert!(
        tokens <= window,
        "{}: turn {} attempt {} sent {tokens} tokens to a {window}-token window",
        file.display(),
        r["turn"],
        r["attempt"]
    );
    let messages = r["messages"].as_array().unwrap();
    let mut i = 0;
    while i < messages.len() {
        let m = &messages[i];
        assert_ne!(
            m["role"],
            "toolResult",
            "{}: turn {}: a tool result at {i} does not follow its call",
            file.display(),
            r["turn"]
        );
        let calls: Vec<&str> = if m["role"] == "assistant" {
            m["content"]
                .as_array()
                .map(|blocks| {
                    blocks
                        .iter()
                        .filter(|b| b["type"] == "toolCall")
                        .map(|b| b["id"].as_str().unwrap())
                        .collect()
                })
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        i += 1;
        let mut answered: HashMap<&str, usize> = HashMap::new();
        while i < messages.len() && messages[i]["role"] == "toolResult" {
            let id = messages[i]["toolCallId"].as_str().unwrap();
            *answered.entry(id).or_default() += 1;
            i += 1;
        }
        // The audit file is the wire: an errored or aborted turn is not sent (its calls never
        // ran and have no results), so it is not recorded either (issue 13, item 5).
        assert!(
            m["stopReason"] != "error" && m["stopReason"] != "aborted",
            "{}: turn {}: an {} assistant turn is in a recorded request",
            file.display(),
            r["turn"],
            m["stopReason"]
        );
        for id in &calls {
            let results = answered.get(id).copied().unwrap_or(0);
            assert_eq!(
                results,
                1,
                "{}: turn {}: tool call {id} needs exactly one result right after it",
                file.display(),
                r["turn"]
            );
        }
        for id in answered.keys() {
            assert!(
                calls.contains(id),
                "{}: turn {}: result {id} answers no call of the message before it",
                file.display(),
                r["turn"]
            );
        }
    }
}

#[test]
fn every_v3_session_replays_at_32k_within_the_window_and_stays_untouched() {
    let files = v3_files();
    assert!(
        files.len() >= 6,
        "expected the v3 sessions in {}",
        data().display()
    );
    let tmp = tempfile::tempdir().unwrap();
    let config = empty_config(tmp.path());
    for file in files {
        let before = std::fs::read(&file).unwrap();
        let requests = tmp.path().join("requests.jsonl");
        let started = Instant::now();
        let out = rampart_in(
            tmp.path(),
            &[
                "--config",
                config.to_str().unwrap(),
                // One requests file, replaced for each transcript.
                "--overwrite",
                "replay",
                file.to_str().unwrap(),
                "--window",
                "32000",
                "--json",
                "--requests-out",
                requests.to_str().unwrap(),
            ],
        );
        eprintln!(
            "replayed {} in {:.1} s",
            file.file_name().unwrap().to_string_lossy(),
            started.elapsed().as_secs_f64()
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}:\n{}",
            file.display(),
            text(&out)
        );
        let doc = json_of(&out);
        let summary = &doc["summary"];
        assert_eq!(summary["window"], 32000);
        let lines: Vec<String> = std::fs::read_to_string(&requests)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
        assert_eq!(
            lines.len() as u64,
            summary["requests"].as_u64().unwrap(),
            "{}: one line per request the model received",
            file.display()
        );
        assert!(!lines.is_empty(), "{}: no request was sent", file.display());
        for line in &lines {
            check_request(line, 32_000, &file);
        }
        assert_eq!(
            doc["rows"].as_array().unwrap().len() as u64,
            summary["calls"].as_u64().unwrap()
        );
        assert!(
            std::fs::read(&file).unwrap() == before,
            "{} changed during the replay",
            file.display()
        );
    }
    // Nothing was left behind in the temporary directory.
    let leftovers: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("rampart-replay-")
        })
        .collect();
    assert!(
        leftovers.is_empty(),
        "temporary replay directories left: {leftovers:?}"
    );
}

#[test]
fn json_has_the_summary_and_the_report_is_a_self_contained_page() {
    let tmp = tempfile::tempdir().unwrap();
    let config = empty_config(tmp.path());
    let report = tmp.path().join("out.html");
    let file = data().join(SMALL);
    let out = rampart_in(
        tmp.path(),
        &[
            "--config",
            config.to_str().unwrap(),
            "replay",
            file.to_str().unwrap(),
            "--window",
            "32000",
            "--json",
            "--report",
            report.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let doc = json_of(&out);
    assert_eq!(doc["kind"], "rampart.replay");
    let s = &doc["summary"];
    for key in [
        "peakPromptTokens",
        "meanPromptTokens",
        "compactions",
        "truncations",
        "prunedChars",
        "overflows",
        "recoveries",
        "errors",
        "tokensSaved",
        "tokensIfEverything",
        "timings",
        "calls",
    ] {
        assert!(s.get(key).is_some(), "summary lacks {key}: {s}");
    }
    assert_eq!(s["engine"], "legacy");
    assert_eq!(s["model"], "sim/replay");
    let rows = doc["rows"].as_array().unwrap();
    assert_eq!(rows.len() as u64, s["calls"].as_u64().unwrap());
    assert!(rows.iter().all(|r| r["window"] == 32000));
    let peak = s["peakPromptTokens"].as_u64().unwrap();
    assert!(peak > 0 && peak <= 32_000);
    assert_eq!(
        peak,
        rows.iter()
            .filter_map(|r| r["promptTokens"].as_u64())
            .max()
            .unwrap()
    );
    assert!(
        s["tokensSaved"].as_u64().unwrap() > 0,
        "a 32k window saves tokens: {s}"
    );

    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.contains("<svg"), "the report has a chart");
    for figure in ["peakPromptTokens", "tokensSaved", "calls", "compactions"] {
        let n = thousands(s[figure].as_u64().unwrap());
        assert!(html.contains(&n), "the report shows {figure} = {n}");
    }
    // Nothing is loaded from anywhere.
    for needle in [
        "http://", "https://", "<script", "<link", "@import", " src=",
    ] {
        assert!(!html.contains(needle), "the report contains {needle:?}");
    }
}

#[test]
fn the_table_shows_one_row_per_call_and_the_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let config = empty_config(tmp.path());
    let file = data().join(SMALL);
    let out = rampart_in(
        tmp.path(),
        &[
            "--config",
            config.to_str().unwrap(),
            "replay",
            file.to_str().unwrap(),
            "--window",
            "32000",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("engine: legacy"), "{stdout}");
    assert!(stdout.contains("window: 32,000"), "{stdout}");
    let rows = stdout
        .lines()
        .filter(|l| {
            l.split_whitespace()
                .next()
                .is_some_and(|w| w.parse::<u64>().is_ok())
        })
        .count();
    assert_eq!(
        rows, 44,
        "one row per recorded assistant message:\n{stdout}"
    );
    for label in [
        "prompt tokens  peak",
        "compactions",
        "truncations",
        "pruning",
        "overflows",
        "tokens saved",
    ] {
        assert!(
            stdout.contains(label),
            "the summary shows {label}:\n{stdout}"
        );
    }
}

#[test]
fn another_engine_shows_another_strategy_without_a_rebuild() {
    let tmp = tempfile::tempdir().unwrap();
    let window = fixture("rampart-window");
    let legacy_cfg = write_config(
        tmp.path(),
        &format!(
            "[plugins.slots]\ncontextEngine = \"legacy\"\n[plugins.engines.window]\npath = \"{}\"\n",
            window.display()
        ),
    );
    let file = data().join(SMALL);
    let replay = |cfg: &Path, extra: &[&str]| {
        let mut args = vec![
            "--config",
            cfg.to_str().unwrap(),
            "replay",
            file.to_str().unwrap(),
            "--window",
            "32000",
            "--json",
        ];
        args.extend_from_slice(extra);
        let out = rampart_in(tmp.path(), &args);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        json_of(&out)
    };
    let legacy = replay(&legacy_cfg, &[]);
    let by_flag = replay(&legacy_cfg, &["--engine", "window"]);
    assert_eq!(legacy["summary"]["servedBy"], "legacy");
    assert_eq!(by_flag["summary"]["engine"], "window");
    assert_eq!(by_flag["summary"]["servedBy"], "window");
    let tokens = |doc: &Value| -> Vec<Value> {
        doc["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["promptTokens"].clone())
            .collect()
    };
    assert_ne!(
        tokens(&legacy),
        tokens(&by_flag),
        "the window engine assembles differently from legacy"
    );
    assert_eq!(
        legacy["summary"]["calls"], by_flag["summary"]["calls"],
        "both replays went through the whole transcript"
    );

    // The same through the config's slot, with the same host binary.
    let dir = tempfile::tempdir().unwrap();
    let window_cfg = write_config(
        dir.path(),
        &format!(
            "[plugins.slots]\ncontextEngine = \"window\"\n[plugins.engines.window]\npath = \"{}\"\n",
            window.display()
        ),
    );
    let by_config = replay(&window_cfg, &[]);
    assert_eq!(by_config["summary"]["servedBy"], "window");
    assert_eq!(tokens(&by_config), tokens(&by_flag));
}

#[test]
fn an_engine_that_cannot_load_is_an_error_when_asked_for_by_flag() {
    let tmp = tempfile::tempdir().unwrap();
    let config = empty_config(tmp.path());
    let file = data().join(SMALL);
    let out = rampart_in(
        tmp.path(),
        &[
            "--config",
            config.to_str().unwrap(),
            "replay",
            file.to_str().unwrap(),
            "--engine",
            "no-such-engine",
        ],
    );
    assert_ne!(out.status.code(), Some(0));
    let t = text(&out);
    assert!(t.contains("--engine no-such-engine"), "{t}");
}

#[test]
fn a_small_window_shows_the_defences_at_work_and_still_completes() {
    let tmp = tempfile::tempdir().unwrap();
    let config = empty_config(tmp.path());
    let requests = tmp.path().join("requests.jsonl");
    let file = data().join(LONG);
    let out = rampart_in(
        tmp.path(),
        &[
            "--config",
            config.to_str().unwrap(),
            "replay",
            file.to_str().unwrap(),
            "--window",
            "20000",
            "--json",
            "--requests-out",
            requests.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let s = json_of(&out)["summary"].clone();
    let acted = s["compactions"].as_u64().unwrap() + s["truncations"].as_u64().unwrap();
    assert!(
        acted > 0,
        "a 20k window makes the engine compact or truncate: {s}"
    );
    assert!(s["overflows"].as_u64().unwrap() > 0, "{s}");
    assert!(
        s["guardWarnings"].as_u64().unwrap() > 0,
        "20k is below the warning threshold"
    );
    for line in std::fs::read_to_string(&requests).unwrap().lines() {
        check_request(line, 20_000, &file);
    }
}

#[test]
fn a_window_the_guard_blocks_is_refused_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let config = empty_config(tmp.path());
    let file = data().join(SMALL);
    let out = rampart_in(
        tmp.path(),
        &[
            "--config",
            config.to_str().unwrap(),
            "replay",
            file.to_str().unwrap(),
            "--window",
            "8000",
        ],
    );
    assert_ne!(out.status.code(), Some(0));
    let t = text(&out);
    assert!(t.contains("--window 8000"), "{t}");
    assert!(t.contains("16000"), "the message names the minimum: {t}");
}

/// A transcript whose first user message alone is far larger than the window: nothing can make
/// it fit (no tool result to truncate, nothing older to compact).
fn hopeless_transcript(dir: &Path) -> PathBuf {
    let huge = "word ".repeat(200_000);
    let messages = serde_json::json!([
        {"role": "user", "content": huge},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "a short question"},
        {"role": "assistant", "content": "second answer"},
    ]);
    let path = dir.join("hopeless.json");
    std::fs::write(&path, serde_json::to_vec(&messages).unwrap()).unwrap();
    path
}

#[test]
fn a_failed_call_is_reported_and_the_replay_goes_on_unless_told_to_stop() {
    let tmp = tempfile::tempdir().unwrap();
    let config = empty_config(tmp.path());
    let file = hopeless_transcript(tmp.path());
    let base = [
        "--config",
        config.to_str().unwrap(),
        "replay",
        file.to_str().unwrap(),
        "--window",
        "32000",
        "--json",
    ];
    let out = rampart_in(tmp.path(), &base);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let doc = json_of(&out);
    assert_eq!(doc["summary"]["calls"], 2, "both calls were made");
    assert!(doc["summary"]["errors"].as_u64().unwrap() >= 1);
    assert_eq!(doc["rows"][0]["error"]["kind"], "context_overflow");
    assert!(
        doc["summary"]["errorsByKind"]["context_overflow"]
            .as_u64()
            .unwrap()
            >= 1
    );

    let mut stop = base.to_vec();
    stop.push("--stop-on-error");
    let out = rampart_in(tmp.path(), &stop);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let doc = json_of(&out);
    assert_eq!(doc["summary"]["calls"], 1, "stopped at the first failure");
}

#[test]
fn a_replay_with_no_flags_needs_nothing_and_keeps_its_session_only_when_asked() {
    let tmp = tempfile::tempdir().unwrap();
    let file = data().join(SMALL);
    // No --config: the embedded defaults (the working directory has no plugins.toml).
    let out = rampart_in(tmp.path(), &["replay", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("window: 200,000"), "{}", text(&out));
    assert_eq!(
        std::fs::read_dir(tmp.path()).unwrap().count(),
        0,
        "nothing left behind"
    );

    let out = rampart_in(tmp.path(), &["replay", file.to_str().unwrap(), "--keep"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let kept = stdout
        .lines()
        .find_map(|l| l.strip_prefix("session kept in: "))
        .and_then(|rest| rest.split(" (").next())
        .unwrap_or_else(|| panic!("the kept directory is named:\n{stdout}"));
    let listed = rampart_in(tmp.path(), &["--sessions-dir", kept, "sessions", "list"]);
    assert!(
        text(&listed).contains("replay-main__8d0416c9"),
        "{}",
        text(&listed)
    );
}

#[test]
fn events_are_written_as_json_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let config = empty_config(tmp.path());
    let events = tmp.path().join("events.jsonl");
    let file = data().join(SMALL);
    let out = rampart_in(
        tmp.path(),
        &[
            "--config",
            config.to_str().unwrap(),
            "--events",
            events.to_str().unwrap(),
            "replay",
            file.to_str().unwrap(),
            "--window",
            "32000",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let kinds: Vec<String> = std::fs::read_to_string(&events)
        .unwrap()
        .lines()
        .map(|l| {
            let e: Value = serde_json::from_str(l).unwrap();
            e["kind"].as_str().unwrap().to_string()
        })
        .collect();
    for kind in ["precheck_route", "request", "response"] {
        assert!(
            kinds.iter().any(|k| k == kind),
            "no {kind} event in {kinds:?}"
        );
    }
}

#[test]
fn a_file_that_is_no_transcript_is_named_in_the_error() {
    let tmp = tempfile::tempdir().unwrap();
    let config = empty_config(tmp.path());
    let file = tmp.path().join("notes.txt");
    std::fs::write(&file, "just some notes\n").unwrap();
    let out = rampart_in(
        tmp.path(),
        &[
            "--config",
            config.to_str().unwrap(),
            "replay",
            file.to_str().unwrap(),
        ],
    );
    assert_ne!(out.status.code(), Some(0));
    assert!(text(&out).contains("notes.txt"), "{}", text(&out));
}

#[test]
fn the_model_flag_picks_the_tokenizer_and_the_overflow_wording() {
    let tmp = tempfile::tempdir().unwrap();
    let config = empty_config(tmp.path());
    let file = data().join(SMALL);
    let requests = tmp.path().join("requests.jsonl");
    let out = rampart_in(
        tmp.path(),
        &[
            "--config",
            config.to_str().unwrap(),
            "replay",
            file.to_str().unwrap(),
            "--model",
            "gpt-4o",
            "--window",
            "32000",
            "--json",
            "--requests-out",
            requests.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let s = json_of(&out)["summary"].clone();
    assert_eq!(s["model"], "sim/gpt-4o");
    assert_eq!(s["tokenizer"], "o200k_base");
    assert_eq!(s["overflowWording"], "openai");
    let first: Value = serde_json::from_str(
        std::fs::read_to_string(&requests)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(first["model"], "sim/gpt-4o");
}

/// Issue 12, performance: a replay into a sessions directory rewrote `sessions.json` (two
/// fsyncs and a rename each) after every model call and compaction, 629 times for the main
/// example, which made it twice as slow as a replay without a directory. Now the entry is
/// written when the session is created and once at the end, and holds the same figures.
#[test]
fn a_replay_into_a_sessions_directory_writes_the_registry_twice_with_every_figure() {
    use rampart_host::engine::services::EventSink;
    use rampart_host::replay::{Replayer, setup, source};

    let tmp = tempfile::tempdir().unwrap();
    let input = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/sessions/openclaw-main-3479d118.jsonl");
    let recorded = source::load(&input, None).unwrap();
    let profile = setup::ModelProfile::from_flags(None, None, None).unwrap();
    // Compacting up to the whole budget, so the replay compacts more often than the 25
    // checkpoints the registry keeps.
    let config = rampart_host::config::parse(
        "[agents.defaults.compaction]\ntargetShare = 1.0\n",
        Path::new("plugins.toml"),
    )
    .unwrap();
    let config = setup::replay_config(config, &profile, 32_000, None, None).unwrap();
    let place = setup::ReplayDir::prepare(Some(&tmp.path().join("sessions")), false).unwrap();
    let replayer = Replayer::new(
        &config,
        &profile,
        32_000,
        &place,
        EventSink::tracing_only(),
        rampart_host::replay::EngineChoice::Configured,
    )
    .unwrap();
    let outcome = replayer.run(&recorded, false, &mut |_, _| Ok(())).unwrap();
    assert!(outcome.summary.compactions > 25, "{:?}", outcome.summary);

    assert_eq!(
        place.store.writes(),
        2,
        "one write at creation and one at the end, whatever the number of calls"
    );
    let listed = place.store.list().unwrap();
    assert_eq!(listed.len(), 1);
    let entry = &listed[0].1;
    assert_eq!(entry.compaction_count, outcome.summary.compactions);
    assert_eq!(
        entry.compaction_checkpoints.len(),
        25,
        "the newest maxCompactionCheckpoints are kept"
    );
    let last_row = outcome.rows.last().unwrap();
    assert_eq!(entry.context_tokens, Some(32_000));
    assert!(
        entry.total_tokens_fresh == Some(true) && entry.total_tokens.unwrap_or(0) > 0,
        "the last answer's usage is recorded: {entry:?} (last row {last_row:?})"
    );
}

/// Issue 13, item 3: the Claude Code sample that ran six `Agent` calls replays its six
/// subagents, each at the parent's call that spawned it, between the engine's
/// `prepare_subagent_spawn` and `on_subagent_ended`; the summary counts them and every one of
/// their calls is a row tagged with the agent.
#[test]
fn a_claude_code_session_replays_its_subagents_at_the_parents_calls() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("calls.log");
    let config = common::config_for(
        tmp.path(),
        "fx-compacts",
        &fixture("fx-compacts"),
        &format!(
            "[plugins.engines.fx-compacts.config]\ncallLog = \"{}\"\n",
            log.display()
        ),
    );
    let file = data()
        .join("claude-code-log/-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl");
    let report = tmp.path().join("report.html");
    let out = rampart_in(
        tmp.path(),
        &[
            "--config",
            config.to_str().unwrap(),
            "replay",
            file.to_str().unwrap(),
            "--json",
            "--report",
            report.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let doc = json_of(&out);
    let subagents = doc["summary"]["subagents"].as_array().unwrap();
    assert_eq!(subagents.len(), 6, "{:#}", doc["summary"]["subagents"]);
    let rows = doc["rows"].as_array().unwrap();
    let mut own_calls = 0u64;
    for a in subagents {
        let id = a["agentId"].as_str().unwrap();
        let calls = a["calls"].as_u64().unwrap();
        assert!(calls > 0, "{a}");
        assert!(
            a["parentToolCallId"]
                .as_str()
                .unwrap()
                .starts_with("toolu_")
        );
        let tagged = rows.iter().filter(|r| r["subagent"] == id).count() as u64;
        assert_eq!(tagged, calls, "every call of {id} is a row");
        own_calls += calls;
    }
    assert_eq!(
        rows.len() as u64,
        doc["summary"]["calls"].as_u64().unwrap() + own_calls
    );
    // The engine heard of each spawn before the child's first call and of its end after.
    let calls = std::fs::read_to_string(&log).unwrap();
    let prepared: Vec<&str> = calls
        .lines()
        .filter(|l| l.starts_with("prepare_subagent_spawn "))
        .collect();
    let ended: Vec<&str> = calls
        .lines()
        .filter(|l| l.starts_with("on_subagent_ended "))
        .collect();
    assert_eq!((prepared.len(), ended.len()), (6, 6), "{calls}");
    for (p, e) in prepared.iter().zip(&ended) {
        let child = p.split(' ').nth(2).unwrap();
        assert_eq!(
            *e,
            format!("on_subagent_ended {child} completed token-{child}")
        );
        let (start, end) = (calls.find(p).unwrap(), calls.find(e).unwrap());
        assert!(
            calls[start..end].lines().any(|l| l == "assemble"),
            "the child's calls run between the two: {calls}"
        );
    }
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.contains("Subagents (6)") && html.contains("Research Claude Code plan mode"));
}

/// The README's main job replayed at 32k with `config`, in `dir`: its `--json` document.
fn main_job_at_32k(dir: &Path, config: &Path) -> Value {
    let example = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/sessions/openclaw-main-3479d118.jsonl");
    let out = rampart_in(
        dir,
        &[
            "--config",
            config.to_str().unwrap(),
            "replay",
            example.to_str().unwrap(),
            "--window",
            "32000",
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    json_of(&out)
}

/// Issue 14, items 1–3 on the README's main job at 32k: the reserve scales with the window
/// (peak at least 60% of it, against 31% with OpenClaw's flat 20,000), the compaction target
/// leaves room (at most one compaction per 25 calls, against one per 4.7), and compactions
/// the budget triggers are labelled `budget`, not `overflow`, when no request was refused.
#[test]
fn the_main_job_uses_the_window_compacts_rarely_and_labels_the_budget() {
    let tmp = tempfile::tempdir().unwrap();
    let replay = |config: &Path| main_job_at_32k(tmp.path(), config);
    let doc = replay(&empty_config(tmp.path()));
    let s = &doc["summary"];
    let calls = s["calls"].as_u64().unwrap();
    let peak = s["peakPromptTokens"].as_u64().unwrap();
    assert!(peak * 100 >= 60 * 32_000, "peak {peak} of 32,000");
    let compactions = s["compactions"].as_u64().unwrap();
    assert!(
        compactions > 0 && compactions * 25 <= calls,
        "{compactions} compactions in {calls} calls"
    );
    assert_eq!(s["overflows"], 0, "no request was refused");
    assert_eq!(s["budgetTriggers"].as_u64().unwrap(), compactions);
    assert_eq!(s["budgetTokens"], 20_000);
    for row in doc["rows"].as_array().unwrap() {
        let tags: Vec<&str> = row["tags"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        assert!(
            !tags.contains(&"overflow") && !tags.contains(&"retry"),
            "{row}"
        );
        if tags.contains(&"compact") {
            assert!(tags.contains(&"budget"), "{row}");
        }
    }
    // The target is what spaces them out: compacting to the whole budget compacts more.
    let whole = write_config(
        tmp.path(),
        "[agents.defaults.compaction]\ntargetShare = 1.0\n",
    );
    let more = replay(&whole)["summary"]["compactions"].as_u64().unwrap();
    assert!(
        more > compactions,
        "{more} with targetShare 1.0 against {compactions}"
    );
}

/// Issue 14, item 4: the accounting adds up against the replay's own records: the input
/// tokens are the requests' prompt tokens, the cache breaks are the requests whose history is
/// not an extension of the one before, and the compaction spend is what the compaction events
/// say; per 100 calls is the total scaled.
#[test]
fn the_accounting_matches_the_request_log_and_the_events() {
    let tmp = tempfile::tempdir().unwrap();
    let example = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/sessions/openclaw-main-3479d118.jsonl");
    let requests = tmp.path().join("requests.jsonl");
    let events = tmp.path().join("events.jsonl");
    let out = rampart_in(
        tmp.path(),
        &[
            "--config",
            empty_config(tmp.path()).to_str().unwrap(),
            "--events",
            events.to_str().unwrap(),
            "replay",
            example.to_str().unwrap(),
            "--window",
            "32000",
            "--json",
            "--requests-out",
            requests.to_str().unwrap(),
            "--report",
            tmp.path().join("report.html").to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let s = json_of(&out)["summary"].clone();
    let html = std::fs::read_to_string(tmp.path().join("report.html")).unwrap();
    assert!(
        html.contains("Prompt-cache breaks") && html.contains("net of the compaction spend"),
        "the report shows the accounting"
    );
    let log: Vec<Value> = std::fs::read_to_string(&requests)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let sent: u64 = log
        .iter()
        .map(|r| r["promptTokens"].as_u64().unwrap())
        .sum();
    assert_eq!(s["tokensSent"].as_u64().unwrap(), sent);
    let mut breaks = 0;
    for pair in log.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        let (am, bm) = (
            a["messages"].as_array().unwrap(),
            b["messages"].as_array().unwrap(),
        );
        if a["system"] != b["system"]
            || am.len() > bm.len()
            || am.iter().zip(bm).any(|(x, y)| x != y)
        {
            breaks += 1;
        }
    }
    assert_eq!(s["cacheBreaks"].as_u64().unwrap(), breaks);
    assert!(
        breaks >= s["compactions"].as_u64().unwrap(),
        "every compaction breaks the cache"
    );
    let (mut read, mut wrote) = (0u64, 0u64);
    for line in std::fs::read_to_string(&events).unwrap().lines() {
        let e: Value = serde_json::from_str(line).unwrap();
        // A summary prepared ahead of need is paid for when it is made, used or not.
        if e["kind"] == "compaction_prepared" && e["data"]["ready"] == true {
            read += e["data"]["inputTokens"].as_u64().unwrap();
            wrote += e["data"]["outputTokens"].as_u64().unwrap();
        }
        if e["kind"] == "compaction_end"
            && e["data"]["compacted"] == true
            && e["data"]["prepared"] != true
        {
            let summary = e["data"]["summaryChars"].as_u64().unwrap().div_ceil(4);
            let before = e["data"]["tokensBefore"].as_u64().unwrap();
            let after = e["data"]["tokensAfter"].as_u64().unwrap();
            read += before - (after - summary);
            wrote += summary;
        }
    }
    assert!(read > 0 && wrote > 0);
    assert_eq!(s["compactionInputTokens"].as_u64().unwrap(), read);
    assert_eq!(s["compactionOutputTokens"].as_u64().unwrap(), wrote);
    assert_eq!(
        s["netTokensSaved"].as_i64().unwrap(),
        s["tokensSaved"].as_i64().unwrap() - (read + wrote) as i64
    );
    let calls = s["calls"].as_f64().unwrap();
    let per = &s["per100Calls"];
    assert!((per["inputTokens"].as_f64().unwrap() - sent as f64 * 100.0 / calls).abs() < 1e-6);
    assert!((per["cacheBreaks"].as_f64().unwrap() - breaks as f64 * 100.0 / calls).abs() < 1e-9);
}

/// Issue 14, item 6: past `prepareAt` of the budget the engine prepares the next compaction
/// after a turn, and the compaction the budget triggers swaps it in, so the request does not
/// wait for a summariser. Off, nothing is prepared and every compaction is made on the spot.
#[test]
fn budget_compactions_swap_in_summaries_prepared_ahead_of_need() {
    let tmp = tempfile::tempdir().unwrap();
    let replay = |config: &Path| main_job_at_32k(tmp.path(), config);
    let doc = replay(&empty_config(tmp.path()));
    let s = &doc["summary"];
    let compactions = s["compactions"].as_u64().unwrap();
    let swapped = s["compactionsPrepared"].as_u64().unwrap();
    let prepared = s["preparations"].as_u64().unwrap();
    assert!(
        compactions > 0 && swapped * 10 >= compactions * 9,
        "{swapped} of {compactions} compactions swapped in"
    );
    assert!(prepared >= swapped, "{prepared} prepared, {swapped} used");
    let rows = doc["rows"].as_array().unwrap();
    let per_row: u64 = rows
        .iter()
        .map(|r| r["compactionsPrepared"].as_u64().unwrap())
        .sum();
    assert_eq!(per_row, swapped);
    // A summary is prepared after the answer of an earlier call than the one it is used at.
    let first_prep = rows
        .iter()
        .position(|r| r["tags"].as_array().unwrap().iter().any(|t| t == "prep"))
        .unwrap();
    let first_swap = rows
        .iter()
        .position(|r| r["compactionsPrepared"].as_u64().unwrap() > 0)
        .unwrap();
    assert!(
        first_prep < first_swap,
        "prepared at {first_prep}, used at {first_swap}"
    );

    let off = write_config(
        tmp.path(),
        "[agents.defaults.compaction]\nprepareAt = false\n",
    );
    let doc = replay(&off);
    let s = &doc["summary"];
    assert_eq!(s["preparations"], 0);
    assert_eq!(s["compactionsPrepared"], 0);
    assert!(s["compactions"].as_u64().unwrap() > 0);
}

/// Issue 14, item 4: `--prices` turns the accounting into money; a bad prices file is refused
/// before anything is replayed, naming the file and the key.
#[test]
fn a_prices_table_turns_the_tokens_into_money() {
    let tmp = tempfile::tempdir().unwrap();
    let file = data().join(SMALL);
    let prices = tmp.path().join("prices.toml");
    std::fs::write(&prices, "input = 3.0\noutput = 15\n").unwrap();
    let out = rampart_in(
        tmp.path(),
        &[
            "replay",
            file.to_str().unwrap(),
            "--window",
            "32000",
            "--json",
            "--prices",
            prices.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let s = json_of(&out)["summary"].clone();
    let tokens = |k: &str| s[k].as_f64().unwrap();
    let chat = tokens("tokensSent") * 3.0 / 1e6;
    let compaction =
        tokens("compactionInputTokens") * 3.0 / 1e6 + tokens("compactionOutputTokens") * 15.0 / 1e6;
    let cost = &s["cost"];
    assert!(
        (cost["chatInputUsd"].as_f64().unwrap() - chat).abs() < 1e-9,
        "{cost}"
    );
    assert!(
        (cost["totalUsd"].as_f64().unwrap() - chat - compaction).abs() < 1e-9,
        "{cost}"
    );

    std::fs::write(&prices, "input = 3.0\nouptut = 15\n").unwrap();
    let out = rampart_in(
        tmp.path(),
        &[
            "replay",
            file.to_str().unwrap(),
            "--prices",
            prices.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "nothing replayed");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("prices.toml") && err.contains("`ouptut`"),
        "{err}"
    );
}
