use super::*;

fn workspace(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        fs::write(dir.path().join(name), text).unwrap();
    }
    dir
}

fn names(set: &BootstrapSet) -> Vec<&str> {
    set.files().iter().map(|f| f.name.as_str()).collect()
}

fn content<'a>(set: &'a BootstrapSet, name: &str) -> &'a str {
    &set.files().iter().find(|f| f.name == name).unwrap().content
}

#[test]
fn missing_files_get_a_marker_with_their_absolute_path() {
    let dir = workspace(&[("AGENTS.md", "Rules.")]);
    let set = load_bootstrap(&BootstrapRequest::new(dir.path(), "agent:main:main")).unwrap();
    assert_eq!(names(&set), LOAD_ORDER);
    assert_eq!(content(&set, "AGENTS.md"), "Rules.");
    let expected = std::path::absolute(dir.path()).unwrap().join("SOUL.md");
    assert_eq!(
        content(&set, "SOUL.md"),
        format!("[MISSING] Expected at: {}", expected.display())
    );
    assert!(set.has_file("AGENTS.md"));
    assert!(!set.has_file("SOUL.md"));
}

#[cfg(unix)]
#[test]
fn a_link_leading_outside_the_workspace_counts_as_missing() {
    let outside = workspace(&[("secret.md", "do not leak")]);
    let dir = workspace(&[]);
    std::os::unix::fs::symlink(outside.path().join("secret.md"), dir.path().join("SOUL.md"))
        .unwrap();
    let set = load_bootstrap(&BootstrapRequest::new(dir.path(), "main")).unwrap();
    assert!(content(&set, "SOUL.md").starts_with("[MISSING] Expected at: "));
    assert!(
        set.files()
            .iter()
            .all(|f| !f.content.contains("do not leak"))
    );
    assert!(matches!(
        set.warnings()[0],
        BootstrapWarning::Unreadable(ReadProblem::EscapingLink { .. })
    ));
    assert!(set.warnings()[0].to_string().contains("SOUL.md"));
}

#[cfg(unix)]
#[test]
fn a_link_inside_the_workspace_is_followed() {
    let dir = workspace(&[("rules.txt", "Shared rules.")]);
    std::os::unix::fs::symlink(dir.path().join("rules.txt"), dir.path().join("AGENTS.md")).unwrap();
    let set = load_bootstrap(&BootstrapRequest::new(dir.path(), "main")).unwrap();
    assert_eq!(content(&set, "AGENTS.md"), "Shared rules.");
}

#[test]
fn a_file_over_two_mebibytes_counts_as_missing() {
    let big = "x".repeat(MAX_FILE_BYTES as usize + 1);
    let dir = workspace(&[("TOOLS.md", &big)]);
    let set = load_bootstrap(&BootstrapRequest::new(dir.path(), "main")).unwrap();
    assert!(content(&set, "TOOLS.md").starts_with("[MISSING]"));
    assert!(matches!(
        set.warnings()[0],
        BootstrapWarning::Unreadable(ReadProblem::TooLarge { .. })
    ));
}

#[test]
fn a_directory_named_like_a_file_counts_as_missing() {
    let dir = workspace(&[]);
    fs::create_dir(dir.path().join("USER.md")).unwrap();
    let set = load_bootstrap(&BootstrapRequest::new(dir.path(), "main")).unwrap();
    assert!(content(&set, "USER.md").starts_with("[MISSING]"));
}

#[test]
fn heartbeat_md_follows_the_hosts_choice_except_in_heartbeat_runs() {
    let dir = workspace(&[("HEARTBEAT.md", "Check the inbox.")]);
    let mut request = BootstrapRequest::new(dir.path(), "main");
    request.heartbeat_file = false;
    let set = load_bootstrap(&request).unwrap();
    assert!(!names(&set).contains(&"HEARTBEAT.md"));
    request.heartbeat_run = true;
    let set = load_bootstrap(&request).unwrap();
    assert!(names(&set).contains(&"HEARTBEAT.md"));
}

#[test]
fn light_context_keeps_only_heartbeat_md_in_heartbeat_runs_and_nothing_otherwise() {
    let dir = workspace(&[("AGENTS.md", "Rules."), ("HEARTBEAT.md", "Check.")]);
    let mut request = BootstrapRequest::new(dir.path(), "main");
    request.light_context = true;
    assert!(load_bootstrap(&request).unwrap().is_empty());
    request.heartbeat_run = true;
    assert_eq!(names(&load_bootstrap(&request).unwrap()), ["HEARTBEAT.md"]);
}

#[test]
fn prompt_order_differs_from_load_order_and_heartbeat_is_dynamic() {
    let dir = workspace(&[
        ("AGENTS.md", "a"),
        ("SOUL.md", "s"),
        ("TOOLS.md", "t"),
        ("IDENTITY.md", "i"),
        ("USER.md", "u"),
        ("HEARTBEAT.md", "h"),
        ("BOOTSTRAP.md", "b"),
        ("MEMORY.md", "m"),
    ]);
    let set = load_bootstrap(&BootstrapRequest::new(dir.path(), "main")).unwrap();
    let stable: Vec<&str> = set.stable_files().iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        stable,
        [
            "AGENTS.md",
            "SOUL.md",
            "IDENTITY.md",
            "USER.md",
            "TOOLS.md",
            "BOOTSTRAP.md",
            "MEMORY.md"
        ]
    );
    let dynamic: Vec<&str> = set
        .dynamic_files()
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(dynamic, ["HEARTBEAT.md"]);
}

#[test]
fn a_missing_workspace_is_an_error_naming_it() {
    let dir = workspace(&[]);
    let gone = dir.path().join("nope");
    let err = load_bootstrap(&BootstrapRequest::new(&gone, "main")).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("nope"), "{text}");
    assert!(text.contains("agents.defaults.workspace"), "{text}");
    let file = dir.path().join("file");
    fs::write(&file, "x").unwrap();
    let err = load_bootstrap(&BootstrapRequest::new(&file, "main")).unwrap_err();
    assert!(matches!(err, BootstrapError::NotADirectory { .. }));
}
