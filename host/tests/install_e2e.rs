//! End to end: rampart installs like a tool. `--version` names the commit, `completions`
//! gives scripts a shell accepts and that complete commands and flags, `man` gives a page `man`
//! renders with every command, and the publishable crates carry their licences and metadata.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::{rampart, text};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn stdout(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(0), "{}", text(out));
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// Whether `program` runs here.
fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn version_names_the_commit_it_was_built_from() {
    let version = stdout(&rampart(&["--version"]));
    let head = Command::new("git")
        .args(["rev-parse", "--short=8", "HEAD"])
        .current_dir(root())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8(o.stdout).unwrap().trim().to_owned());
    let prefix = format!("rampart {} (", env!("CARGO_PKG_VERSION"));
    let commit = version
        .trim_end()
        .strip_prefix(&prefix)
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("not `{prefix}COMMIT)`: {version:?}"));
    match head {
        Some(head) => assert!(
            commit == head || commit == format!("{head}-dirty"),
            "built from {head}, --version says {commit}"
        ),
        None => assert_eq!(commit, "unknown"),
    }
}

/// What bash's completion offers after `line` (the last word being completed).
fn bash_completes(script: &Path, line: &str) -> Vec<String> {
    let words: Vec<&str> = line.split(' ').collect();
    let program = format!(
        "source '{}'\nCOMP_WORDS=({})\nCOMP_CWORD={}\nCOMP_LINE='{line}'\nCOMP_POINT=${{#COMP_LINE}}\n\
         _rampart rampart '{}' '{}'\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display(),
        words
            .iter()
            .map(|w| format!("'{w}'"))
            .collect::<Vec<_>>()
            .join(" "),
        words.len() - 1,
        words[words.len() - 1],
        words[words.len().saturating_sub(2)],
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(program)
        .output()
        .unwrap();
    stdout(&out).lines().map(str::to_owned).collect()
}

#[test]
fn bash_completion_completes_commands_and_flags() {
    let tmp = tempfile::tempdir().unwrap();
    let script = tmp.path().join("rampart.bash");
    std::fs::write(&script, stdout(&rampart(&["completions", "bash"]))).unwrap();
    let check = Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .unwrap();
    assert!(check.status.success(), "bash -n: {}", text(&check));
    assert_eq!(bash_completes(&script, "rampart rep"), ["replay"]);
    assert_eq!(
        bash_completes(&script, "rampart replay --tim"),
        ["--timings"]
    );
    let sessions = bash_completes(&script, "rampart sessions ");
    for sub in ["list", "show", "import", "export"] {
        assert!(sessions.iter().any(|s| s == sub), "{sub}: {sessions:?}");
    }
}

#[test]
fn zsh_and_fish_scripts_name_every_command() {
    let zsh = stdout(&rampart(&["completions", "zsh"]));
    assert!(zsh.starts_with("#compdef rampart"), "{}", &zsh[..80]);
    let fish = stdout(&rampart(&["completions", "fish"]));
    assert!(fish.contains("complete -c rampart"));
    for command in ["replay", "eval", "serve", "memory", "completions", "man"] {
        assert!(zsh.contains(command), "zsh lacks {command}");
        assert!(fish.contains(command), "fish lacks {command}");
    }
    for (shell, script) in [("zsh", &zsh), ("fish", &fish)] {
        if have(shell) {
            let out = Command::new(shell)
                .arg("-n")
                .arg("-c")
                .arg(script)
                .output()
                .unwrap();
            assert!(out.status.success(), "{shell} -n: {}", text(&out));
        }
    }
}

#[test]
fn an_unknown_shell_is_refused_with_the_ones_there_are() {
    let out = rampart(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("tcsh") && err.contains("bash") && err.contains("zsh") && err.contains("fish"),
        "{err}"
    );
}

#[test]
fn the_man_page_documents_every_command_and_renders() {
    let page = stdout(&rampart(&["man"]));
    assert!(page.contains(".TH rampart 1"), "{}", &page[..200]);
    for section in [
        "RAMPART REPLAY",
        "RAMPART SESSIONS IMPORT",
        "RAMPART MEMORY SEARCH",
        "RAMPART COMPLETIONS",
    ] {
        assert!(page.contains(&format!(".SH \"{section}\"")), "no {section}");
    }
    assert!(page.contains("timings"), "replay's flags are documented");
    assert!(
        !page.to_uppercase().contains("ENGINE-HOST"),
        "hidden commands stay hidden"
    );
    if have("groff") {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("rampart.1");
        std::fs::write(&file, &page).unwrap();
        // As `man` renders it: UTF-8 input (`-k`), every warning on (`-ww`).
        let out = Command::new("groff")
            .args(["-k", "-man", "-Tutf8", "-ww", "-z"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        assert!(out.stderr.is_empty(), "groff warns: {}", text(&out));
    }
}

/// The crates `cargo package` must pack cleanly.
const PUBLISHABLE: [&str; 4] = ["message", "engine-api", "engine-test", "context"];

#[test]
fn publishable_crates_carry_their_licences_and_metadata() {
    let root = root();
    let mit = std::fs::read_to_string(root.join("LICENSE-MIT")).unwrap();
    let apache = std::fs::read_to_string(root.join("LICENSE-APACHE")).unwrap();
    assert!(mit.starts_with("MIT License") && mit.contains("The Rampart developers"));
    assert!(apache.contains("Apache License") && apache.contains("Version 2.0, January 2004"));
    let workspace: toml::Table =
        toml::from_str(&std::fs::read_to_string(root.join("Cargo.toml")).unwrap()).unwrap();
    assert_eq!(
        workspace["workspace"]["package"]["license"].as_str(),
        Some("MIT OR Apache-2.0")
    );
    for dir in PUBLISHABLE {
        let dir = root.join(dir);
        for (file, text) in [("LICENSE-MIT", &mit), ("LICENSE-APACHE", &apache)] {
            let copy = std::fs::read_to_string(dir.join(file))
                .unwrap_or_else(|e| panic!("{}/{file}: {e}", dir.display()));
            assert_eq!(
                &copy,
                text,
                "{}/{file} differs from the root's",
                dir.display()
            );
        }
        let manifest: toml::Table =
            toml::from_str(&std::fs::read_to_string(dir.join("Cargo.toml")).unwrap()).unwrap();
        let package = manifest["package"].as_table().unwrap();
        for key in [
            "description",
            "repository",
            "documentation",
            "readme",
            "keywords",
            "categories",
            "license",
        ] {
            assert!(package.contains_key(key), "{}: no {key}", dir.display());
        }
        let readme = package["readme"].as_str().unwrap();
        assert!(dir.join(readme).is_file(), "{}: no {readme}", dir.display());
        let keywords = package["keywords"].as_array().unwrap();
        assert!(
            (1..=5).contains(&keywords.len())
                && keywords
                    .iter()
                    .all(|k| k.as_str().is_some_and(|k| k.len() <= 20
                        && k.chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'))),
            "{}: crates.io takes at most 5 keywords of 20 ASCII characters: {keywords:?}",
            dir.display()
        );
    }
}
