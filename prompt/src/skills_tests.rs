use super::*;

fn skill_dir(root: &Path, dir: &str, front: &str) {
    let d = root.join(dir);
    fs::create_dir_all(&d).unwrap();
    fs::write(
        d.join("SKILL.md"),
        format!("---\n{front}\n---\n# Instructions\n"),
    )
    .unwrap();
}

#[test]
fn workspace_skills_win_over_agents_skills_and_extra_dirs() {
    let ws = tempfile::tempdir().unwrap();
    let extra = tempfile::tempdir().unwrap();
    skill_dir(
        extra.path(),
        "charts",
        "name: charts\ndescription: from extra",
    );
    skill_dir(extra.path(), "only-extra", "description: kept");
    skill_dir(
        &ws.path().join(".agents/skills"),
        "charts",
        "name: charts\ndescription: from agents",
    );
    skill_dir(
        &ws.path().join(".agents/skills"),
        "deploy",
        "description: from agents",
    );
    skill_dir(
        &ws.path().join("skills"),
        "deploy-dir",
        "name: deploy\ndescription: from workspace",
    );
    let mut request = SkillsRequest::new(ws.path());
    request.extra_dirs = vec![extra.path().to_path_buf()];
    let catalog = discover_skills(&request);
    let found: Vec<(&str, &str)> = catalog
        .skills()
        .iter()
        .map(|s| (s.name.as_str(), s.description.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            ("charts", "from agents"),
            ("deploy", "from workspace"),
            ("only-extra", "kept"),
        ]
    );
    let deploy = &catalog.skills()[1];
    assert_eq!(deploy.source, SkillSource::Workspace);
    assert!(deploy.location.ends_with("skills/deploy-dir/SKILL.md"));
    assert!(deploy.location.is_absolute());
}

#[test]
fn hidden_skills_are_found_but_not_visible() {
    let ws = tempfile::tempdir().unwrap();
    skill_dir(&ws.path().join("skills"), "a", "description: shown");
    skill_dir(
        &ws.path().join("skills"),
        "b",
        "description: user only\ndisable-model-invocation: true",
    );
    let catalog = discover_skills(&SkillsRequest::new(ws.path()));
    assert_eq!(catalog.skills().len(), 2);
    let visible: Vec<&str> = catalog.visible().map(|s| s.name.as_str()).collect();
    assert_eq!(visible, ["a"]);
}

#[test]
fn unusable_skills_are_skipped_with_an_issue_naming_the_file() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path().join("skills");
    skill_dir(&root, "no-desc", "name: no-desc");
    fs::create_dir_all(root.join("huge")).unwrap();
    fs::write(root.join("huge/SKILL.md"), "x".repeat(300_000)).unwrap();
    fs::create_dir_all(root.join("not-a-skill")).unwrap();
    let catalog = discover_skills(&SkillsRequest::new(ws.path()));
    assert!(catalog.skills().is_empty());
    assert_eq!(catalog.issues().len(), 2);
    let texts: Vec<String> = catalog.issues().iter().map(ToString::to_string).collect();
    assert!(
        texts
            .iter()
            .any(|t| t.contains("huge/SKILL.md") && t.contains("256000"))
    );
    assert!(
        texts
            .iter()
            .any(|t| t.contains("no-desc/SKILL.md") && t.contains("description"))
    );
}

#[test]
fn the_candidate_and_per_source_limits_hold() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path().join("skills");
    for i in 0..6 {
        skill_dir(&root, &format!("s{i}"), "description: d");
    }
    let mut request = SkillsRequest::new(ws.path());
    request.limits.candidates_per_root = 5;
    request.limits.skills_per_source = 3;
    let catalog = discover_skills(&request);
    let names: Vec<&str> = catalog.skills().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["s0", "s1", "s2"]);
    assert!(matches!(
        catalog.issues()[0],
        SkillIssue::TooManyCandidates { limit: 5, .. }
    ));
    assert!(matches!(
        catalog.issues()[1],
        SkillIssue::TooManySkills { limit: 3, .. }
    ));
}

#[cfg(unix)]
#[test]
fn a_skill_linked_from_outside_its_directory_is_skipped() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    skill_dir(outside.path(), "evil", "description: from elsewhere");
    fs::create_dir_all(ws.path().join("skills")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("evil"), ws.path().join("skills/evil")).unwrap();
    let catalog = discover_skills(&SkillsRequest::new(ws.path()));
    assert!(catalog.skills().is_empty());
    assert!(matches!(
        catalog.issues()[0],
        SkillIssue::EscapingLink { .. }
    ));
}

#[test]
fn no_skills_directories_means_no_skills() {
    let ws = tempfile::tempdir().unwrap();
    let catalog = discover_skills(&SkillsRequest::new(ws.path()));
    assert!(catalog.skills().is_empty());
    assert!(catalog.issues().is_empty());
}

#[cfg(unix)]
#[test]
fn a_skill_file_linked_from_outside_is_skipped() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    fs::write(
        outside.path().join("SKILL.md"),
        "---\ndescription: elsewhere\n---\n",
    )
    .unwrap();
    let dir = ws.path().join("skills/linked");
    fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(outside.path().join("SKILL.md"), dir.join("SKILL.md")).unwrap();
    let catalog = discover_skills(&SkillsRequest::new(ws.path()));
    assert!(catalog.skills().is_empty());
    assert!(matches!(
        catalog.issues()[0],
        SkillIssue::EscapingLink { .. }
    ));
}
