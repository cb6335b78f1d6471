//! The reference's test cases (shared/reference/prompt-and-memory.md §3, cases 1–17 and 21),
//! one test each, numbered as there. Case 13 asserts the fair budget's result, which differs
//! from OpenClaw's on purpose (see its comment).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::PathBuf;
use std::sync::Arc;

use rampart_prompt::budget::apply_budget;
use rampart_prompt::text::units;
use rampart_prompt::*;

fn tools(names: &[&str]) -> Vec<ToolInfo> {
    names.iter().map(|n| ToolInfo::named(*n)).collect()
}

fn source(name: &str, content: Option<&str>) -> SourceFile {
    SourceFile {
        name: name.to_string(),
        path: PathBuf::from(format!("/tmp/{name}")),
        content: content.map(str::to_string),
    }
}

fn one_skill() -> Arc<SkillCatalog> {
    Arc::new(SkillCatalog::from_skills(
        vec![Skill {
            name: "demo".into(),
            description: "A demo skill".into(),
            location: "/ws/skills/demo/SKILL.md".into(),
            source: SkillSource::Workspace,
            model_invocable: true,
        }],
        SkillLimits::default(),
        None,
    ))
}

#[test]
fn case_01_minimal_mode_keeps_the_worker_sections_only() {
    let built = build_system_prompt(&PromptInputs {
        mode: mode_for_session("agent:main:subagent:abc", false),
        tools: tools(&["message", "memory_search"]),
        skills: Some(one_skill()),
        heartbeat_prompt: Some(DEFAULT_HEARTBEAT_PROMPT.into()),
        extra_system_prompt: Some("Subagent details".into()),
        ..PromptInputs::default()
    });
    assert_eq!(built.mode, PromptMode::Minimal);
    for present in [
        "## Skills (mandatory)",
        "## Safety",
        "## Subagent Context",
        "Subagent details",
    ] {
        assert!(built.text.contains(present), "missing {present}");
    }
    for absent in [
        "## Authorized Senders",
        "## Memory Recall",
        "## Documentation",
        "## Messaging",
        "## Silent Replies",
        "## Heartbeats",
        "## Group Chat Context",
        "## Execution Bias",
    ] {
        assert!(!built.text.contains(absent), "unexpected {absent}");
    }
}

#[test]
fn case_02_tool_names_keep_the_callers_casing() {
    let built = build_system_prompt(&PromptInputs {
        tools: tools(&["Read", "Exec", "process"]),
        skills: Some(one_skill()),
        ..PromptInputs::default()
    });
    assert!(built.text.contains("\n- Read: Read file contents\n"));
    assert!(built.text.contains("\n- Exec: "));
    assert!(built.text.contains("\n- process: "));
    assert!(
        built
            .text
            .contains("read its SKILL.md at <location> with `Read`")
    );
    assert!(!built.text.contains("with `read`"));
}

#[test]
fn case_03_the_time_zone_is_written_but_never_a_time() {
    let built = build_system_prompt(&PromptInputs {
        time_zone: Some("America/Chicago".into()),
        ..PromptInputs::default()
    });
    assert!(
        built
            .text
            .contains("## Current Date & Time\nTime zone: America/Chicago\n")
    );
    // There is no input for the user's time at all; nothing that looks like one appears.
    assert!(!built.text.contains("3:26 PM"));
    let has_clock = built
        .text
        .as_bytes()
        .windows(3)
        .any(|w| w[0].is_ascii_digit() && w[1] == b':' && w[2].is_ascii_digit());
    assert!(!has_clock);
}

#[test]
fn case_04_the_runtime_line() {
    let info = RuntimeInfo {
        agent_id: Some("work".into()),
        host: Some("host".into()),
        repo_root: Some("/repo".into()),
        os: Some("macOS".into()),
        arch: Some("arm64".into()),
        node: Some("v20".into()),
        model: Some("anthropic/claude".into()),
        default_model: Some("anthropic/claude-opus-4-5".into()),
        shell: None,
        channel: Some("telegram".into()),
        capabilities: vec!["inlineButtons".into()],
        thinking: Some("low".into()),
    };
    let expected = "Runtime: agent=work | host=host | repo=/repo | os=macOS (arm64) | node=v20 | \
                    model=anthropic/claude | default_model=anthropic/claude-opus-4-5 | \
                    channel=telegram | capabilities=inlinebuttons | thinking=low";
    assert_eq!(runtime_line(&info), expected);
    let built = build_system_prompt(&PromptInputs {
        runtime: info,
        ..PromptInputs::default()
    });
    assert!(built.text.contains(&format!("## Runtime\n{expected}\n")));
}

#[test]
fn case_05_the_extra_prompt_appears_once_under_group_chat_context() {
    let built = build_system_prompt(&PromptInputs {
        extra_system_prompt: Some("Custom runtime context".into()),
        ..PromptInputs::default()
    });
    assert_eq!(built.text.matches("Custom runtime context").count(), 1);
    assert_eq!(built.text.matches("## Group Chat Context").count(), 1);
    assert!(
        built
            .text
            .contains("## Group Chat Context\nCustom runtime context\n")
    );
}

#[test]
fn case_06_memory_section_off() {
    let memory_tools = tools(&["memory_search", "memory_get"]);
    let on = build_system_prompt(&PromptInputs {
        tools: memory_tools.clone(),
        ..PromptInputs::default()
    });
    assert!(on.text.contains("## Memory Recall"));
    let off = build_system_prompt(&PromptInputs {
        tools: memory_tools,
        memory: MemorySection {
            include: false,
            citations: CitationsMode::Auto,
        },
        ..PromptInputs::default()
    });
    assert!(!off.text.contains("## Memory Recall"));
}

#[test]
fn case_07_the_addition_goes_right_after_the_marker() {
    let prompt = format!("Stable prefix{CACHE_BOUNDARY}Dynamic suffix");
    assert_eq!(
        insert_addition(&prompt, "Per-turn lab context"),
        format!("Stable prefix{CACHE_BOUNDARY}Per-turn lab context\n\nDynamic suffix")
    );
    // The same through the builder: the marker, then the addition, then the dynamic suffix.
    let built = build_system_prompt(&PromptInputs {
        engine_addition: Some("Per-turn lab context".into()),
        ..PromptInputs::default()
    });
    assert!(built.text.contains(&format!(
        "{CACHE_BOUNDARY}Per-turn lab context\n\n## Runtime\n"
    )));
    let (stable, _) = split_at_cache_boundary(&built.text).unwrap();
    assert!(!stable.contains("Per-turn lab context"));
}

#[test]
fn case_08_the_addition_and_the_suffix_are_normalised() {
    let prompt = format!("Stable prefix{CACHE_BOUNDARY}Dynamic suffix  \r\n\r\nMore detail \t\r\n");
    assert_eq!(
        insert_addition(&prompt, "  Per-turn lab context \r\nSecond line\t\r\n"),
        format!(
            "Stable prefix{CACHE_BOUNDARY}Per-turn lab context\nSecond line\n\nDynamic suffix\n\nMore detail"
        )
    );
}

#[test]
fn case_09_files_in_prompt_order_with_heartbeat_below_the_marker() {
    let sources: Vec<SourceFile> = [
        "TOOLS.md",
        "AGENTS.md",
        "HEARTBEAT.md",
        "MEMORY.md",
        "SOUL.md",
    ]
    .iter()
    .map(|n| source(n, Some(&format!("{n} body"))))
    .collect();
    let set = BootstrapSet::from_sources("/tmp", &sources, BootstrapLimits::default());
    let built = build_system_prompt(&PromptInputs {
        bootstrap: Arc::new(set),
        ..PromptInputs::default()
    });
    let position = |needle: &str| {
        built
            .text
            .find(needle)
            .unwrap_or_else(|| panic!("{needle}"))
    };
    let order = [
        position("## /tmp/AGENTS.md"),
        position("## /tmp/SOUL.md"),
        position("## /tmp/TOOLS.md"),
        position("## /tmp/MEMORY.md"),
        position(CACHE_BOUNDARY),
        position("# Dynamic Project Context"),
        position("## /tmp/HEARTBEAT.md"),
    ];
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
}

#[test]
fn case_10_a_missing_file_is_marked_and_kept_under_a_tiny_total() {
    let out = apply_budget(&[source("AGENTS.md", None)], BootstrapLimits::default());
    assert_eq!(
        out.files[0].content,
        "[MISSING] Expected at: /tmp/AGENTS.md"
    );
    let out = apply_budget(&[source("AGENTS.md", None)], BootstrapLimits::new(0, 20));
    assert_eq!(out.files.len(), 1);
    assert!(units(&out.files[0].content) <= 20);
    assert!(out.files[0].content.starts_with("[MISSING]"));
}

#[test]
fn case_11_a_whitespace_only_file_has_no_entry() {
    let out = apply_budget(
        &[source("USER.md", Some(" \n\t\n  "))],
        BootstrapLimits::default(),
    );
    assert!(out.files.is_empty());
}

#[test]
fn case_12_the_per_file_cut_keeps_head_and_tail() {
    let text: String = (0..1000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let out = apply_budget(
        &[source("TOOLS.md", Some(&text))],
        BootstrapLimits::new(200, 0),
    );
    let expected = format!(
        "{}\n\n[...truncated, read TOOLS.md for full content...]\n…(truncated TOOLS.md: kept 140+40 chars of 1000)…\n\n{}",
        &text[..140],
        &text[960..]
    );
    assert_eq!(out.files[0].content, expected);
    assert_eq!(units(&out.files[0].content), 283);
    let warning = out.warnings[0].to_string();
    assert!(warning.contains("limit 200"), "{warning}");
    assert!(warning.contains("TOOLS.md is 1000 chars"), "{warning}");
}

/// OpenClaw spends the total in load order: AGENTS.md takes all 150 chars (149 and "…") and
/// SOUL.md gets nothing. The fair budget splits it: both files need more than an equal share
/// (75), so each gets 75; the head-and-tail marker alone is longer than that, so each keeps its
/// first 74 chars and "…". The total is still 150, and the second file is no longer dropped.
#[test]
fn case_13_the_total_cap_is_shared_fairly() {
    let out = apply_budget(
        &[
            source("AGENTS.md", Some(&"a".repeat(1000))),
            source("SOUL.md", Some(&"b".repeat(1000))),
        ],
        BootstrapLimits::new(100, 150),
    );
    let contents: Vec<&str> = out.files.iter().map(|f| f.content.as_str()).collect();
    assert_eq!(
        contents,
        [
            format!("{}…", "a".repeat(74)),
            format!("{}…", "b".repeat(74))
        ]
    );
    let total: usize = contents.iter().map(|c| units(c)).sum();
    assert_eq!(total, 150);
}

#[test]
fn case_14_a_tiny_total_injects_nothing_and_says_why() {
    let out = apply_budget(
        &[source("AGENTS.md", Some(&"a".repeat(1000)))],
        BootstrapLimits::new(200, 40),
    );
    assert!(out.files.is_empty());
    assert!(out.warnings.iter().any(|w| w.to_string().contains("(<64)")));
}

#[test]
fn case_15_files_under_the_default_caps_are_kept_verbatim() {
    let sources: Vec<SourceFile> = ["AGENTS.md", "SOUL.md", "TOOLS.md"]
        .iter()
        .enumerate()
        .map(|(i, n)| {
            source(
                n,
                Some(&char::from(b'x' + i as u8).to_string().repeat(10_000)),
            )
        })
        .collect();
    let out = apply_budget(&sources, BootstrapLimits::default());
    assert_eq!(out.files.len(), 3);
    for (file, src) in out.files.iter().zip(&sources) {
        assert_eq!(Some(&file.content), src.content.as_ref());
    }
    assert!(out.warnings.is_empty());
}

#[test]
fn case_16_the_warning_block_ends_the_user_message() {
    let lines = vec!["AGENTS.md: 200 raw -> 0 injected".to_string()];
    let out = append_truncation_warning("hello", &lines, Some(DEFAULT_HEARTBEAT_PROMPT));
    assert!(out.starts_with("hello\n\n[Bootstrap truncation warning]\n"));
    assert!(out.ends_with("- AGENTS.md: 200 raw -> 0 injected"));
    // The heartbeat prompt is left exactly as it is.
    assert_eq!(
        append_truncation_warning(
            DEFAULT_HEARTBEAT_PROMPT,
            &lines,
            Some(DEFAULT_HEARTBEAT_PROMPT)
        ),
        DEFAULT_HEARTBEAT_PROMPT
    );
}

fn workspace_with(files: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in files {
        fs::write(dir.path().join(name), format!("{name} body")).unwrap();
    }
    dir
}

fn loaded_names(dir: &tempfile::TempDir, key: &str) -> Vec<String> {
    let set = load_bootstrap(&BootstrapRequest::new(dir.path(), key)).unwrap();
    set.files().iter().map(|f| f.name.clone()).collect()
}

#[test]
fn case_17_filters_memory_fallback_and_hardlinks() {
    let all = [
        "AGENTS.md",
        "SOUL.md",
        "TOOLS.md",
        "IDENTITY.md",
        "USER.md",
        "HEARTBEAT.md",
        "BOOTSTRAP.md",
        "MEMORY.md",
    ];
    let dir = workspace_with(&all);
    assert_eq!(loaded_names(&dir, "agent:main:main").len(), 8);
    let worker = ["AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md"];
    assert_eq!(loaded_names(&dir, "agent:main:subagent:x"), worker);
    assert_eq!(loaded_names(&dir, "agent:main:cron:nightly"), worker);

    // No memory file: no entry at all (the other files are present or marked missing).
    let dir = workspace_with(&["AGENTS.md"]);
    let names = loaded_names(&dir, "main");
    assert_eq!(names.len(), 7);
    assert!(!names.iter().any(|n| n.eq_ignore_ascii_case("memory.md")));

    // memory.md when MEMORY.md is absent.
    let dir = workspace_with(&["memory.md"]);
    let set = load_bootstrap(&BootstrapRequest::new(dir.path(), "main")).unwrap();
    let memory = set.files().iter().find(|f| f.name == "memory.md").unwrap();
    assert_eq!(memory.content, "memory.md body");

    // A hard link counts as missing.
    #[cfg(unix)]
    {
        let dir = workspace_with(&[]);
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("rules.md");
        fs::write(&target, "linked rules").unwrap();
        fs::hard_link(&target, dir.path().join("AGENTS.md")).unwrap();
        let set = load_bootstrap(&BootstrapRequest::new(dir.path(), "main")).unwrap();
        let agents = &set.files()[0];
        assert!(
            agents.content.starts_with("[MISSING] Expected at: "),
            "{}",
            agents.content
        );
        assert!(agents.content.ends_with("AGENTS.md"));
        assert!(matches!(
            set.warnings()[0],
            BootstrapWarning::Unreadable(ReadProblem::Hardlink { .. })
        ));
    }
}

#[test]
fn case_21_silent_tokens() {
    assert!(is_silent_reply("  No_RePlY  "));
    assert!(!is_silent_reply("Here is…\n\nNO_REPLY"));
    assert_eq!(strip_silent_token("Done.\n\nNO_REPLY"), "Done.");
    assert_eq!(
        strip_silent_token("interject.NO_REPLY"),
        "interject.NO_REPLY"
    );
    assert_eq!(strip_silent_token("**NO_REPLY"), "");
}
