//! Every transcript in `shared/data/sessions` is detected as the right format
//! and imports with the message and tool-call counts its README states; tool
//! results pair with calls; nothing a Claude Code file holds goes missing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use rampart_message::AgentMessage;
use rampart_sessions::import::{
    ImportError, Imported, ImportedKind, SourceFormat, detect, import_file, import_file_all,
};
use serde_json::Value;

/// What the README says about one file (`None` = not stated / not checked).
#[derive(Default, Clone, Copy)]
struct Expect {
    sessions: usize,
    system: Option<usize>,
    user: Option<usize>,
    assistant: Option<usize>,
    tool_results: Option<usize>,
    tool_calls: Option<usize>,
    /// OpenHands: events with `tool_call_metadata` = calls + results.
    calls_plus_results: Option<usize>,
    summaries: Option<usize>,
    /// Claude Code custom items by line type.
    customs: &'static [(&'static str, usize)],
    sidechain: bool,
}

fn data_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/sessions");
    assert!(
        dir.is_dir(),
        "test data directory {} is missing: the import tests need the shared session \
         transcripts (shared/data/sessions, see its README.md); restore it before running them",
        dir.display()
    );
    dir
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            walk(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// The `version` of a pi session's header line.
fn header_version(rel: &str) -> Option<u64> {
    let text = std::fs::read_to_string(data_dir().join(rel)).ok()?;
    let header: serde_json::Value = serde_json::from_str(text.lines().next()?).ok()?;
    header.get("version")?.as_u64()
}

fn format_for(rel: &str) -> SourceFormat {
    match rel.split('/').next().unwrap() {
        // pi's v1 fixtures; a corpus copy migrated to v3 in place is detected as such.
        "pi-mono" if header_version(rel) == Some(3) => SourceFormat::PiV3,
        "pi-mono" => SourceFormat::PiV1,
        "openclaw-linux2010" => SourceFormat::PiV3,
        "claude-code-log" => SourceFormat::ClaudeCode,
        "swe-agent" => SourceFormat::SweAgentTraj,
        "openhands" => SourceFormat::OpenHandsEvents,
        "openhands-sdk" => SourceFormat::OpenAiChat,
        other => panic!("no expected format for folder {other}; add it to format_for"),
    }
}

/// Counts from the README table (Claude Code: tool calls = `tool_use`
/// blocks, every one answered; customs = non-conversation line types).
fn expectations() -> BTreeMap<&'static str, Expect> {
    let cc =
        |tool_calls: usize, summaries: usize, customs: &'static [(&'static str, usize)]| Expect {
            sessions: 1,
            tool_calls: Some(tool_calls),
            tool_results: Some(tool_calls),
            summaries: Some(summaries),
            customs,
            ..Expect::default()
        };
    let side = |tool_calls: usize, meta: bool| Expect {
        sidechain: true,
        customs: if meta {
            &[("claude-code.subagent-meta", 1)]
        } else {
            &[]
        },
        ..cc(tool_calls, 0, &[])
    };
    let chat = |system, user, assistant, tool, calls| Expect {
        sessions: 1,
        system: Some(system),
        user: Some(user),
        assistant: Some(assistant),
        tool_results: Some(tool),
        tool_calls: Some(calls),
        ..Expect::default()
    };
    let pi = Expect::default();
    let wt = "claude-code-log/-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1";
    let mut m = BTreeMap::new();
    m.insert("pi-mono/before-compaction.jsonl", pi);
    m.insert("pi-mono/large-session.jsonl", pi);
    for f in [
        "main__8d0416c9-a2b4-43d0-a16d-755e39f36d39.jsonl",
        "main__3479d118-68d6-4074-9204-6c448dd4765b.jsonl",
        "main__8a7d4bc6-2a83-4509-894a-88a52483a1d4.jsonl",
        "main__ead04364-108b-4797-8f5e-12dfa62c5d84.jsonl",
        "main__62329ad3-2943-45f0-90ce-a7ca33ba3bec.jsonl",
        "coding__b1809e0c-9cc3-4416-9ba7-53adefeceab6.jsonl",
    ] {
        m.insert(leak(format!("openclaw-linux2010/{f}")), pi);
    }
    m.insert(
        "claude-code-log/-Users-dain-workspace-claude-code-log-sample/37f83ec9-f2ea-42a9-925e-0d5c105cb6e8.jsonl",
        cc(101, 6, &[("claude-code.system", 54)]),
    );
    m.insert(
        "claude-code-log/-Users-dain-workspace-claude-code-log-sample/fe869ecb-c176-478f-9734-7e4b8ef12cff.jsonl",
        cc(32, 15, &[]),
    );
    m.insert(
        "claude-code-log/-Users-dain-workspace-coderabbit-review-helper/agent-ea02459f.jsonl",
        side(14, false),
    );
    m.insert(
        "claude-code-log/-Users-dain-workspace-coderabbit-review-helper/cb2e607c-c758-415a-8b45-c49e4631906a.jsonl",
        cc(76, 0, &[("claude-code.queue-operation", 10)]),
    );
    m.insert(
        leak(format!("{wt}.jsonl")),
        cc(
            40,
            0,
            &[
                ("claude-code.permission-mode", 8),
                ("claude-code.attachment", 49),
                ("claude-code.file-history-snapshot", 3),
                ("claude-code.last-prompt", 7),
                ("claude-code.system", 6),
            ],
        ),
    );
    for (agent, calls) in [
        ("a36efb2a1231c41e2", 7),
        ("a4ca7529859c158c2", 24),
        ("a52886dc180afb356", 17),
        ("a6aa8ad077d9ea083", 6),
        ("ab1e6e141221a29ab", 17),
        ("aef063ba534d73153", 6),
    ] {
        m.insert(
            leak(format!("{wt}/subagents/agent-{agent}.jsonl")),
            side(calls, true),
        );
    }
    m.insert(
        "claude-code-log/-src-deep-manifest/a7da6a22-facc-4fcd-8bab-f83c87862004.jsonl",
        cc(108, 2, &[("claude-code.file-history-snapshot", 15)]),
    );
    m.insert(
        "claude-code-log/-src-deep-manifest/agent-c8d9b115.jsonl",
        side(15, false),
    );
    m.insert(
        "claude-code-log/-src-experiments-claude_p/29ccd257-68b1-427f-ae5f-6524b7cb6f20.jsonl",
        cc(
            1,
            0,
            &[
                ("claude-code.queue-operation", 1),
                ("claude-code.progress", 1),
            ],
        ),
    );
    m.insert(
        "claude-code-log/-src-experiments-claude_p/29ccd257-68b1-427f-ae5f-6524b7cb6f20/subagents/agent-a2271d1.jsonl",
        side(24, false),
    );
    m.insert(
        "swe-agent/marshmallow-1867__function_calling_replace_from_source.traj",
        chat(1, 1, 13, 13, 13),
    );
    m.insert(
        "swe-agent/marshmallow-1867__function_calling.traj",
        chat(1, 1, 11, 11, 11),
    );
    m.insert("swe-agent/gpt4__pydicom-1458.traj", chat(1, 13, 12, 0, 0));
    m.insert(
        "swe-agent/ctf_web_i_got_id_demo.traj",
        chat(1, 21, 21, 0, 0),
    );
    m.insert("swe-agent/ctf_crypto_katy.traj", chat(1, 18, 18, 0, 0));
    m.insert(
        "openhands/multi_swe_bench_output.jsonl",
        Expect {
            sessions: 3,
            calls_plus_results: Some(208),
            ..Expect::default()
        },
    );
    m.insert(
        "openhands/trajs_basic_gui_mode.json",
        Expect {
            sessions: 1,
            calls_plus_results: Some(8),
            ..Expect::default()
        },
    );
    m.insert("openhands-sdk/fncall-llm-message.json", chat(1, 1, 6, 6, 6));
    // 12 messages plus the logged response: one more assistant message
    // whose call (`finish`) has no result.
    m.insert(
        "openhands-sdk/llm-log_claude-sonnet-4-20250514-1757015046.707.json",
        chat(1, 1, 6, 5, 6),
    );
    m
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

#[derive(Default, Debug)]
struct Tally {
    system: usize,
    user: usize,
    assistant: usize,
    tool_results: usize,
    tool_calls: usize,
    summaries: usize,
    customs: BTreeMap<String, usize>,
}

fn tally(imported: &Imported) -> Tally {
    let mut t = Tally::default();
    for item in &imported.items {
        match &item.kind {
            ImportedKind::Message(m) => {
                t.tool_calls += m.tool_calls().count();
                match m {
                    AgentMessage::User(_) => t.user += 1,
                    AgentMessage::Assistant(_) => t.assistant += 1,
                    AgentMessage::ToolResult(_) => t.tool_results += 1,
                    _ => {}
                }
            }
            ImportedKind::SystemPrompt { .. } => t.system += 1,
            ImportedKind::Summary { .. } => t.summaries += 1,
            ImportedKind::Custom { custom_type, .. } => {
                *t.customs.entry(custom_type.clone()).or_default() += 1;
            }
            _ => {}
        }
    }
    t
}

/// Structural invariants every import must meet.
fn check_invariants(rel: &str, imported: &Imported) {
    let mut roots = 0;
    let mut calls: HashSet<&str> = HashSet::new();
    for (index, item) in imported.items.iter().enumerate() {
        match item.parent {
            Some(parent) => assert!(parent < index, "{rel}: item {index} has parent {parent}"),
            None => roots += 1,
        }
        let ImportedKind::Message(message) = &item.kind else {
            continue;
        };
        calls.extend(message.tool_calls().map(|c| c.id.as_str()));
        if let Some(id) = message.tool_call_id() {
            assert!(
                calls.contains(id) || imported.warnings.iter().any(|w| w.contains(id)),
                "{rel}: tool result for `{id}` (item {index}) has no earlier call and no warning"
            );
        }
    }
    assert_eq!(roots, 1, "{rel}: expected one root, got {roots}");
}

/// Claude Code: every uuid of the file is an item's source id (or merged
/// into one), and every line without a uuid became an item of its own.
fn check_claude_code_lossless(rel: &str, path: &Path, imported: &Imported) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut uuids = HashSet::new();
    let mut without_uuid = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).unwrap();
        match v.get("uuid").and_then(Value::as_str) {
            Some(u) => {
                uuids.insert(u.to_owned());
            }
            None => without_uuid += 1,
        }
    }
    let mut seen = HashSet::new();
    let mut items_without_id = 0;
    for item in &imported.items {
        match &item.source_id {
            Some(id) => {
                seen.insert(id.clone());
            }
            None => match &item.kind {
                ImportedKind::ModelChange { .. } => {}
                ImportedKind::Custom { custom_type, .. }
                    if custom_type == "claude-code.subagent-meta" => {}
                _ => items_without_id += 1,
            },
        }
        if let Some(Value::Array(merged)) = item.extra.get("mergedIds") {
            seen.extend(merged.iter().filter_map(Value::as_str).map(str::to_owned));
        }
    }
    assert_eq!(uuids, seen, "{rel}: uuids lost or invented");
    assert_eq!(without_uuid, items_without_id, "{rel}: lines without uuid");
    for item in &imported.items {
        if let ImportedKind::Message(m) = &item.kind {
            assert!(
                m.timestamp().unwrap_or(0) > 0,
                "{rel}: message without time"
            );
        }
    }
}

#[test]
fn every_sample_transcript_is_detected_and_imports() {
    let dir = data_dir();
    let mut files = Vec::new();
    walk(&dir, &mut files);
    files.sort();
    let expectations = expectations();
    let mut checked = 0;
    for path in files {
        let rel = path
            .strip_prefix(&dir)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if rel == "README.md" || rel.ends_with(".meta.json") {
            continue;
        }
        let expect = expectations.get(rel.as_str()).copied().unwrap_or_else(|| {
            panic!("{rel}: not in the expectations table; add its README counts")
        });
        let format = format_for(&rel);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(detect(&bytes).ok(), Some(format), "{rel}: detected format");

        if let Some(version) = format.pi_version() {
            match import_file(&path) {
                Err(ImportError::NativePiSession { version: v, .. }) => {
                    assert_eq!(v, version, "{rel}");
                }
                other => panic!("{rel}: expected NativePiSession, got {other:?}"),
            }
            checked += 1;
            continue;
        }

        let sessions = import_file_all(&path).unwrap_or_else(|e| panic!("{rel}: {e}"));
        assert_eq!(sessions.len(), expect.sessions, "{rel}: sessions");
        let mut calls_plus_results = 0;
        for imported in &sessions {
            assert_eq!(imported.format, format, "{rel}");
            assert!(!imported.items.is_empty(), "{rel}: nothing imported");
            check_invariants(&rel, imported);
            let t = tally(imported);
            calls_plus_results += t.tool_calls + t.tool_results;
            let pairs = [
                ("system prompts", expect.system, t.system),
                ("user messages", expect.user, t.user),
                ("assistant messages", expect.assistant, t.assistant),
                ("tool results", expect.tool_results, t.tool_results),
                ("tool calls", expect.tool_calls, t.tool_calls),
                ("summaries", expect.summaries, t.summaries),
            ];
            for (what, want, got) in pairs {
                if let Some(want) = want {
                    assert_eq!(got, want, "{rel}: {what} ({t:?})");
                }
            }
            for (custom_type, want) in expect.customs {
                assert_eq!(
                    t.customs.get(*custom_type).copied().unwrap_or(0),
                    *want,
                    "{rel}: {custom_type} items"
                );
            }
            if format == SourceFormat::ClaudeCode {
                check_claude_code_lossless(&rel, &path, imported);
                assert!(imported.source_session_id.is_some(), "{rel}: session id");
                assert!(imported.started_at.is_some(), "{rel}: start time");
                let sidechain_items = imported.items.iter().filter(|i| i.sidechain).count();
                if expect.sidechain {
                    assert_eq!(
                        sidechain_items,
                        imported.items.len(),
                        "{rel}: sidechain flags"
                    );
                } else {
                    assert_eq!(sidechain_items, 0, "{rel}: sidechain flags");
                }
            }
        }
        if let Some(want) = expect.calls_plus_results {
            assert_eq!(calls_plus_results, want, "{rel}: tool calls + results");
        }
        if expect.sessions > 1 {
            assert!(
                matches!(import_file(&path), Err(ImportError::MultipleSessions { count, .. }) if count == expect.sessions),
                "{rel}: import_file must refuse a multi-session file"
            );
        }
        checked += 1;
    }
    assert_eq!(checked, expectations.len(), "every expected file was found");
}

#[test]
fn subagent_sidecar_is_read_with_its_agent_file() {
    let path = data_dir().join(
        "claude-code-log/-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1/subagents/agent-a4ca7529859c158c2.jsonl",
    );
    let imported = import_file(&path).unwrap();
    let first = &imported.items[0];
    let ImportedKind::Custom { custom_type, data } = &first.kind else {
        panic!("first item should be the sidecar, got {:?}", first.kind);
    };
    assert_eq!(custom_type, "claude-code.subagent-meta");
    assert_eq!(data["description"], "Research Claude Code plan mode");
    assert_eq!(data["agentType"], "general-purpose");
}

#[test]
fn split_claude_code_responses_become_one_assistant_message() {
    // In this file one response (`msg_…7eZeAH`) streams a thinking block, a
    // text block and six tool_use lines, with each tool's result and a hook
    // attachment written between them.
    let path = data_dir()
        .join("claude-code-log/-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl");
    let imported = import_file(&path).unwrap();
    let (index, assistant) = imported
        .items
        .iter()
        .enumerate()
        .find_map(|(i, item)| match &item.kind {
            ImportedKind::Message(AgentMessage::Assistant(a)) if a.content.len() == 8 => {
                Some((i, a))
            }
            _ => None,
        })
        .expect("the merged response");
    assert_eq!(
        assistant
            .content
            .iter()
            .filter(|b| b.block_type() == "toolCall")
            .count(),
        6
    );
    assert_eq!(assistant.model, "claude-opus-4-7");
    // All six results follow the message, in order, before the next response.
    let results: Vec<&str> = imported.items[index + 1..]
        .iter()
        .take_while(|i| !matches!(&i.kind, ImportedKind::Message(AgentMessage::Assistant(_))))
        .filter_map(|i| match &i.kind {
            ImportedKind::Message(m) => m.tool_call_id(),
            _ => None,
        })
        .collect();
    let calls: Vec<&str> = assistant
        .content
        .iter()
        .filter_map(|b| match b {
            rampart_message::ContentBlock::ToolCall(c) => Some(c.id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(results, calls);
    let merged = imported.items[index].extra["mergedIds"].as_array().unwrap();
    assert_eq!(merged.len(), 7);
}
