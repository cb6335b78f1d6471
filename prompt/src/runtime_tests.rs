use super::*;

#[test]
fn an_empty_runtime_still_says_thinking_off() {
    assert_eq!(
        runtime_line(&RuntimeInfo::default()),
        "Runtime: thinking=off"
    );
}

#[test]
fn capabilities_appear_only_with_a_channel_normalised() {
    let mut info = RuntimeInfo {
        capabilities: vec![
            "Reactions".into(),
            "inlineButtons".into(),
            "reactions".into(),
        ],
        ..RuntimeInfo::default()
    };
    assert_eq!(runtime_line(&info), "Runtime: thinking=off");
    info.channel = Some("discord".into());
    assert_eq!(
        runtime_line(&info),
        "Runtime: channel=discord | capabilities=inlinebuttons,reactions | thinking=off"
    );
    info.capabilities.clear();
    assert!(runtime_line(&info).contains("capabilities=none"));
}

#[test]
fn arch_alone_is_shown_as_arch_and_paths_lose_control_characters() {
    let info = RuntimeInfo {
        arch: Some("x86_64".into()),
        repo_root: Some("/repo\n/x\u{202E}".into()),
        ..RuntimeInfo::default()
    };
    assert_eq!(
        runtime_line(&info),
        "Runtime: repo=/repo/x | arch=x86_64 | thinking=off"
    );
}

#[test]
fn the_git_root_is_found_above_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("repo/.git")).unwrap();
    std::fs::create_dir_all(dir.path().join("repo/agents/main")).unwrap();
    assert_eq!(
        find_git_root(&dir.path().join("repo/agents/main")),
        Some(dir.path().join("repo"))
    );
}
