//! Issue 13, item 1: a pi message stays in the context whenever pi would put it there. Real
//! files are mutated the ways other tools write them (a `usage` without `cost`, no
//! `timestamp`, an unknown `stopReason`, numbers as strings, an unknown block type); the
//! context must hold the same messages as the unmutated file's, as pi (which checks none of
//! these fields) would build it, and the file must be written back as it was read. Only a
//! message without a role or with content of the wrong kind is left out, and the load report
//! says where and why.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

use std::path::{Path, PathBuf};

use rampart_sessions::{LeafSelector, LoadOptions, build_session_context, load_file, save_session};
use serde_json::{Value, json};

fn real_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/data/sessions/openclaw-linux2010/main__3479d118-68d6-4074-9204-6c448dd4765b.jsonl")
}

/// The file with `mutate` applied to every message object; how many it changed.
fn mutated(
    dir: &Path,
    name: &str,
    mutate: &dyn Fn(&mut serde_json::Map<String, Value>) -> bool,
) -> (PathBuf, usize) {
    let text = std::fs::read_to_string(real_file()).unwrap();
    let mut changed = 0;
    let lines: Vec<String> = text
        .lines()
        .map(|line| {
            let mut value: Value = serde_json::from_str(line).unwrap();
            if let Some(Value::Object(message)) = value.get_mut("message")
                && mutate(message)
            {
                changed += 1;
                return value.to_string();
            }
            line.to_string()
        })
        .collect();
    let path = dir.join(name);
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    (path, changed)
}

fn context_roles(path: &Path) -> Vec<String> {
    let loaded = load_file(path, &LoadOptions::default()).unwrap();
    build_session_context(&loaded.tree, LeafSelector::Current)
        .messages
        .iter()
        .map(|m| m.role().to_string())
        .collect()
}

#[test]
fn messages_pi_would_use_stay_in_context_and_are_written_back_as_read() {
    let dir = tempfile::tempdir().unwrap();
    let expected = context_roles(&real_file());
    assert!(expected.iter().filter(|r| *r == "assistant").count() > 50);
    let cases: Vec<(
        &str,
        Box<dyn Fn(&mut serde_json::Map<String, Value>) -> bool>,
    )> = vec![
        (
            "no-cost",
            Box::new(|m| {
                m.get_mut("usage")
                    .and_then(Value::as_object_mut)
                    .is_some_and(|u| u.remove("cost").is_some())
            }),
        ),
        (
            "no-timestamp",
            Box::new(|m| m.remove("timestamp").is_some()),
        ),
        (
            "no-usage",
            Box::new(|m| m["role"] == "assistant" && m.remove("usage").is_some()),
        ),
        (
            "odd-stop",
            Box::new(|m| {
                m["role"] == "assistant" && {
                    m.insert("stopReason".into(), json!(7));
                    true
                }
            }),
        ),
        (
            "string-numbers",
            Box::new(|m| {
                let Some(Value::Object(u)) = m.get_mut("usage") else {
                    return false;
                };
                let Some(n) = u.get("input").and_then(Value::as_u64) else {
                    return false;
                };
                u.insert("input".into(), json!(n.to_string()));
                true
            }),
        ),
        (
            "string-timestamp",
            Box::new(|m| {
                let Some(t) = m.get("timestamp").and_then(Value::as_u64) else {
                    return false;
                };
                m.insert("timestamp".into(), json!(t.to_string()));
                true
            }),
        ),
        (
            "unknown-block",
            Box::new(|m| {
                let Some(Value::Array(blocks)) = m.get_mut("content") else {
                    return false;
                };
                blocks.push(json!({"type": "hologram", "frames": 3}));
                true
            }),
        ),
    ];
    for (name, mutate) in &cases {
        let (path, changed) = mutated(dir.path(), &format!("{name}.jsonl"), mutate.as_ref());
        assert!(
            changed > 10,
            "{name}: the mutation touched {changed} messages"
        );
        let loaded = load_file(&path, &LoadOptions::default()).unwrap();
        assert!(
            loaded.report.kept_verbatim.is_empty(),
            "{name}: {:?}",
            &loaded.report.kept_verbatim[..1]
        );
        assert_eq!(
            context_roles(&path),
            expected,
            "{name}: the context lost messages"
        );
        // Written back, every line is what the file held.
        let saved = dir.path().join(format!("{name}-saved.jsonl"));
        save_session(&saved, &loaded.header, &loaded.tree).unwrap();
        let parse = |p: &Path| -> Vec<Value> {
            std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .skip(1)
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        };
        assert_eq!(
            parse(&saved),
            parse(&path),
            "{name}: the message was rewritten"
        );
    }
}

#[test]
fn a_message_without_meaning_is_left_out_and_reported_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let expected = context_roles(&real_file());
    let first_user = std::sync::atomic::AtomicBool::new(false);
    let (path, changed) = mutated(dir.path(), "no-role.jsonl", &|m| {
        if m["role"] == "user" && !first_user.swap(true, std::sync::atomic::Ordering::SeqCst) {
            m.remove("role");
            return true;
        }
        false
    });
    assert_eq!(changed, 1);
    let loaded = load_file(&path, &LoadOptions::default()).unwrap();
    assert_eq!(loaded.report.kept_verbatim.len(), 1);
    let left_out = &loaded.report.kept_verbatim[0];
    assert!(left_out.reason.contains("no `role`"), "{}", left_out.reason);
    assert!(left_out.line > 1);
    assert_eq!(context_roles(&path).len(), expected.len() - 1);

    let (wrong, _) = mutated(dir.path(), "number-content.jsonl", &|m| {
        m["role"] == "assistant" && {
            m.insert("content".into(), json!(42));
            true
        }
    });
    let loaded = load_file(&wrong, &LoadOptions::default()).unwrap();
    assert!(!loaded.report.kept_verbatim.is_empty());
    assert!(
        loaded.report.kept_verbatim[0].reason.contains("content"),
        "{}",
        loaded.report.kept_verbatim[0].reason
    );
}
