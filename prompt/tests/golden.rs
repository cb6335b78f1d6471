//! The whole prompt of the sample workspace, as snapshots: a main session and a subagent,
//! each with its breakdown. Review a change with `cargo insta review` (or
//! `INSTA_UPDATE=always cargo test -p rampart-prompt --test golden`, then read the diff).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fmt::Write;
use std::sync::Arc;

use rampart_prompt::*;

/// The parts and their sizes, measured on the redacted text so that the snapshot does not
/// depend on where the repository is checked out.
fn breakdown(built: &BuiltPrompt) -> String {
    let mut out = String::new();
    for (kind, text) in built.iter_parts() {
        let size = common::redact(text).len();
        writeln!(out, "{:<32} {:>6} bytes", kind.label(), size).unwrap();
    }
    let total = common::redact(&built.text).len();
    writeln!(out, "{:<32} {:>6} bytes", "total", total).unwrap();
    out
}

fn build(key: &str) -> BuiltPrompt {
    let bootstrap = Arc::new(load_bootstrap(&common::bootstrap_request(key)).unwrap());
    build_system_prompt(&common::inputs(key, bootstrap, common::skills()))
}

#[test]
fn main_session_prompt() {
    let built = build("agent:main:main");
    assert_eq!(built.mode, PromptMode::Full);
    insta::assert_snapshot!("main_session_prompt", common::redact(&built.text));
    insta::assert_snapshot!("main_session_breakdown", breakdown(&built));
}

#[test]
fn subagent_prompt() {
    let built = build("agent:main:subagent:ci-report");
    assert_eq!(built.mode, PromptMode::Minimal);
    insta::assert_snapshot!("subagent_prompt", common::redact(&built.text));
    insta::assert_snapshot!("subagent_breakdown", breakdown(&built));
}

#[test]
fn the_sample_skills_follow_precedence_and_hide_what_they_should() {
    let skills = common::skills();
    let names: Vec<&str> = skills.visible().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["changelog", "deploy", "release-notes"]);
    let changelog = &skills.skills()[0];
    assert_eq!(changelog.source, SkillSource::Workspace);
    assert!(skills.issues().is_empty(), "{:?}", skills.issues());
}
