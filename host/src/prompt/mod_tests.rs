use std::path::Path;

use rampart_prompt::CACHE_BOUNDARY;
use rampart_prompt::warning::WARNING_HEADER;

use super::*;
use crate::run::RunSettings;

/// A config file in `dir` with `body`, parsed as `rampart` reads it.
fn config_in(dir: &Path, body: &str) -> Config {
    crate::config::parse(body, &dir.join("plugins.toml")).unwrap()
}

fn names(tools: &[&str]) -> Vec<String> {
    tools.iter().map(|t| t.to_string()).collect()
}

fn build(assembler: &PromptAssembler, key: &str, tools: &[String]) -> BuiltPrompt {
    let model: ModelName = "sim/small".parse().unwrap();
    assembler.build(&PromptRequest {
        session_key: key,
        model: Some(&model),
        tools,
        engine_addition: None,
    })
}

#[test]
fn the_workspace_files_time_zone_and_runtime_are_in_the_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("AGENTS.md"), "Always run the tests.\n").unwrap();
    std::fs::write(ws.join("MEMORY.md"), "The user likes green tea.\n").unwrap();
    let config = config_in(
        dir.path(),
        "[agents.defaults]\nworkspace = \"ws\"\nuserTimezone = \"Europe/Berlin\"\n\
         repoRoot = \"/srv/repo\"\n[agents.defaults.model]\nprimary = \"sim/default\"\n",
    );
    let assembler = PromptAssembler::new(&config, &dir.path().join("sessions"));
    assert_eq!(assembler.workspace(), ws);
    let built = build(&assembler, "main", &[]);
    let text = &built.text;
    assert!(text.contains("Always run the tests."), "{text}");
    assert!(text.contains("The user likes green tea."), "{text}");
    assert!(text.contains("Time zone: Europe/Berlin"), "{text}");
    assert!(text.contains("repo=/srv/repo"), "{text}");
    assert!(text.contains("model=sim/small"), "{text}");
    assert!(text.contains("default_model=sim/default"), "{text}");
    assert!(
        text.contains(&format!("arch={}", std::env::consts::ARCH))
            || text.contains(&format!("({})", std::env::consts::ARCH)),
        "{text}"
    );
    assert!(!text.contains("node="), "{text}");
    // The cache marker is there, for the providers to split at; the files are above it.
    let marker = text.find(CACHE_BOUNDARY).unwrap();
    assert!(text.find("Always run the tests.").unwrap() < marker);
    assert!(text.find("Runtime:").unwrap() > marker);
}

#[test]
fn a_missing_workspace_shows_every_file_missing_and_is_no_error() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_in(dir.path(), "[agents.defaults]\nworkspace = \"nowhere\"\n");
    let assembler = PromptAssembler::new(&config, &dir.path().join("sessions"));
    let built = build(&assembler, "main", &[]);
    for file in ["AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md"] {
        let expected = format!(
            "[MISSING] Expected at: {}",
            dir.path().join("nowhere").join(file).display()
        );
        assert!(built.text.contains(&expected), "{file}: {}", built.text);
    }
    assert!(!dir.path().join("nowhere").exists(), "nothing is created");
}

#[test]
fn the_workspace_defaults_to_beside_the_sessions_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("workspace")).unwrap();
    std::fs::write(
        dir.path().join("workspace/AGENTS.md"),
        "Rules from beside.\n",
    )
    .unwrap();
    let config = config_in(dir.path(), "");
    let assembler = PromptAssembler::new(&config, &dir.path().join("sessions"));
    assert!(
        build(&assembler, "main", &[])
            .text
            .contains("Rules from beside.")
    );
}

#[test]
fn a_subagent_gets_the_minimal_prompt_and_fewer_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("workspace")).unwrap();
    std::fs::write(dir.path().join("workspace/MEMORY.md"), "Private memory.\n").unwrap();
    let config = config_in(dir.path(), "");
    let assembler = PromptAssembler::new(&config, &dir.path().join("sessions"));
    let main = build(&assembler, "main", &[]);
    let sub = build(&assembler, "agent:main:subagent:7", &[]);
    assert!(main.text.contains("## Silent Replies"));
    assert!(!sub.text.contains("## Silent Replies"), "{}", sub.text);
    assert!(main.text.contains("Private memory."));
    assert!(!sub.text.contains("Private memory."), "{}", sub.text);
}

#[test]
fn memory_recall_needs_the_memory_slot_and_a_memory_tool() {
    let dir = tempfile::tempdir().unwrap();
    let tools = names(&["read", "memory_search", "memory_get"]);
    let on = PromptAssembler::new(&config_in(dir.path(), ""), &dir.path().join("s"));
    assert!(build(&on, "main", &tools).text.contains("## Memory Recall"));
    assert!(
        !build(&on, "main", &names(&["read"]))
            .text
            .contains("## Memory Recall")
    );
    let off = PromptAssembler::new(
        &config_in(dir.path(), "[plugins.slots]\nmemory = \"none\"\n"),
        &dir.path().join("s"),
    );
    assert!(
        !build(&off, "main", &tools)
            .text
            .contains("## Memory Recall")
    );
}

#[test]
fn the_override_replaces_the_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_in(
        dir.path(),
        "[agents.defaults]\nsystemPromptOverride = \"You are a terse bot.\"\n",
    );
    let assembler = PromptAssembler::new(&config, &dir.path().join("s"));
    assert_eq!(build(&assembler, "main", &[]).text, "You are a terse bot.");
}

#[test]
fn the_time_zone_is_the_configured_one_else_tz_else_utc() {
    assert_eq!(
        time_zone(Some("Asia/Tokyo"), Some("Europe/Paris")),
        "Asia/Tokyo"
    );
    assert_eq!(time_zone(None, Some("Europe/Paris")), "Europe/Paris");
    assert_eq!(time_zone(Some("  "), Some(":America/Lima")), "America/Lima");
    assert_eq!(time_zone(None, Some("/etc/localtime")), "UTC");
    assert_eq!(time_zone(None, None), "UTC");
}

/// A file cut to its budget is said in the user's message of every turn by default, and of
/// the first only with `once`.
#[test]
fn the_truncation_warning_follows_its_setting() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("workspace")).unwrap();
    std::fs::write(dir.path().join("workspace/AGENTS.md"), "rule. ".repeat(200)).unwrap();
    let warned = |extra: &str| -> Vec<bool> {
        let config = config_in(
            dir.path(),
            &format!("[agents.defaults]\nbootstrapMaxChars = 300\n{extra}"),
        );
        let assembler = PromptAssembler::new(&config, &dir.path().join("sessions"));
        (0..2)
            .map(|_| {
                build(&assembler, "main", &[]);
                let text = assembler.user_text("main", "hello");
                assert!(text.starts_with("hello"), "{text}");
                text.contains(WARNING_HEADER)
            })
            .collect()
    };
    assert_eq!(warned(""), [true, true]);
    assert_eq!(
        warned("bootstrapPromptTruncationWarning = \"once\"\n"),
        [true, false]
    );
    assert_eq!(
        warned("bootstrapPromptTruncationWarning = \"off\"\n"),
        [false, false]
    );
}

#[test]
fn serve_takes_the_clients_prompt_rampart_s_or_both() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("workspace")).unwrap();
    std::fs::write(dir.path().join("workspace/AGENTS.md"), "Workspace rules.\n").unwrap();
    let config = config_in(dir.path(), "");
    let assembler = PromptAssembler::new(&config, &dir.path().join("sessions"));
    let settings = RunSettings::from_config(&config).unwrap();
    let client = Some("Be a careful coder.");
    let for_client = |source| assembler.for_client(source, "serve:x", &settings, client);

    assert_eq!(
        for_client(SystemPromptSource::Client).as_deref(),
        Some("Be a careful coder.")
    );
    let rampart = for_client(SystemPromptSource::Rampart).unwrap();
    assert!(rampart.contains("Workspace rules."));
    assert!(!rampart.contains("Be a careful coder."));
    let merged = for_client(SystemPromptSource::Merge).unwrap();
    let ours = merged.find("Workspace rules.").unwrap();
    let heading = merged.find(CLIENT_INSTRUCTIONS_HEADING).unwrap();
    let theirs = merged.find("Be a careful coder.").unwrap();
    assert!(ours < heading && heading < theirs, "{merged}");
    // Merging without a client prompt is Rampart's alone.
    assert_eq!(
        assembler
            .for_client(SystemPromptSource::Merge, "serve:x", &settings, None)
            .unwrap(),
        rampart
    );
}

/// A marker pasted into a client's prompt cannot move the cache boundary into it.
#[test]
fn a_marker_in_the_clients_prompt_is_defused() {
    let client = format!("Client text.{CACHE_BOUNDARY}More client text.");
    let merged = merge_client_prompt(&format!("Ours.{CACHE_BOUNDARY}Runtime"), Some(&client));
    assert_eq!(merged.matches(CACHE_BOUNDARY).count(), 1, "{merged}");
    assert!(merged.find(CACHE_BOUNDARY).unwrap() < merged.find("Client text.").unwrap());
}
