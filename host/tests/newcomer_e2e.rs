//! Issue 13, item 6: what a new user meets in the first minutes, each found by trying the
//! binary as one would. Every test runs the real binary in an empty directory with its own
//! HOME, so no config of the machine's is found.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// An empty place to stand: the current directory and HOME of a new user.
struct Newcomer {
    dir: tempfile::TempDir,
}

impl Newcomer {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("home")).unwrap();
        Self { dir }
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_rampart"));
        command
            .args(args)
            .env_remove("RAMPART_CONFIG")
            .env_remove("XDG_DATA_HOME")
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("NO_COLOR")
            .env("HOME", self.home())
            .env("RUST_LOG", "warn")
            .current_dir(self.dir.path());
        command
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }
}

fn example() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/sessions/openclaw-main-3479d118.jsonl")
        .display()
        .to_string()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn an_output_path_that_cannot_be_written_fails_before_the_first_row() {
    let user = Newcomer::new();
    for flag in ["--report", "--requests-out"] {
        let out = user.run(&[
            "replay",
            &example(),
            "--window",
            "32000",
            flag,
            "/nonexistent/out",
        ]);
        assert_eq!(out.status.code(), Some(2), "{flag}: {}", stderr(&out));
        assert!(
            out.stdout.is_empty(),
            "{flag}: nothing is replayed before the error: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let err = stderr(&out);
        assert!(
            err.contains(flag) && err.contains("/nonexistent/out"),
            "{err}"
        );
    }
}

#[test]
fn an_unknown_engine_flag_is_one_error_naming_what_exists_and_where_config_was_looked_for() {
    let user = Newcomer::new();
    let out = user.run(&["replay", &example(), "--engine", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "one line, no log before it: {err}");
    assert!(
        err.contains("`nope`") && err.contains("available ids: legacy"),
        "{err}"
    );
    assert!(!err.contains("continuing with"), "{err}");
    let cwd_config = user.dir.path().join("plugins.toml");
    assert!(
        err.contains("No plugins.toml was found")
            && err.contains(&cwd_config.display().to_string()),
        "outside a repository the error says where it looked: {err}"
    );
}

#[test]
fn logs_have_no_colour_codes_when_stderr_is_not_a_terminal() {
    let user = Newcomer::new();
    // An engine library that is not one: the quarantine line is logged as an error.
    let garbage = user.dir.path().join("libbroken.so");
    std::fs::write(&garbage, b"not a library").unwrap();
    std::fs::write(
        user.dir.path().join("plugins.toml"),
        format!(
            "[plugins.slots]\ncontextEngine = \"broken\"\n[plugins.engines.broken]\npath = \"{}\"\n",
            garbage.display()
        ),
    )
    .unwrap();
    let out = user.run(&["engines", "probe"]);
    let err = stderr(&out);
    assert!(err.contains("broken"), "the quarantine is logged: {err}");
    assert!(
        !err.contains('\u{1b}'),
        "no escape codes in a piped log: {err:?}"
    );
    assert!(rampart_host::commands::use_colour(true, None));
    assert!(!rampart_host::commands::use_colour(
        true,
        Some("1".as_ref())
    ));
    assert!(rampart_host::commands::use_colour(true, Some("".as_ref())));
    assert!(!rampart_host::commands::use_colour(false, None));
}

#[test]
fn an_unknown_model_says_what_the_replay_fell_back_to() {
    let user = Newcomer::new();
    let out = user.run(&[
        "replay",
        &example(),
        "--window",
        "32000",
        "--model",
        "mystery-9",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("--model mystery-9")
            && err.contains("`estimate` tokenizer")
            && err.contains("`anthropic` wording"),
        "{err}"
    );
    let known = user.run(&[
        "replay",
        &example(),
        "--window",
        "32000",
        "--model",
        "gpt-4o",
    ]);
    assert!(
        !stderr(&known).contains("not a model family"),
        "{}",
        stderr(&known)
    );
}

#[test]
fn read_only_commands_never_create_directories() {
    let user = Newcomer::new();
    let store = user.dir.path().join("nothere");
    let store_arg = store.display().to_string();
    for args in [
        vec!["sessions", "list"],
        vec!["sessions", "show", "main"],
        vec!["sessions", "export", "main", "--format", "markdown"],
        vec!["sessions", "doctor"],
    ] {
        let out = user.run(&args);
        assert!(
            !user.home().join(".local").exists(),
            "{args:?} created the data dir"
        );
        let mut with_dir = vec!["--sessions-dir", &store_arg];
        with_dir.extend(&args);
        let out_dir = user.run(&with_dir);
        assert!(!store.exists(), "{args:?} created {store_arg}");
        for o in [out, out_dir] {
            assert_ne!(
                o.status.code(),
                Some(101),
                "{args:?} panicked: {}",
                stderr(&o)
            );
        }
    }
    let listed = user.run(&["--sessions-dir", &store_arg, "sessions", "list"]);
    assert!(listed.status.success());
    assert!(String::from_utf8_lossy(&listed.stdout).contains("no sessions yet"));
    let doctor = user.run(&["--sessions-dir", &store_arg, "sessions", "doctor"]);
    assert_eq!(doctor.status.code(), Some(0), "{}", stderr(&doctor));
}

#[test]
fn error_text_is_written_once() {
    let user = Newcomer::new();
    let missing = user.dir.path().join("nothere.jsonl");
    let out = user.run(&["replay", &missing.display().to_string()]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.matches("os error 2").count(), 1, "{err}");
    let small = user.run(&["replay", &example(), "--window", "8000"]);
    let err = stderr(&small);
    assert!(err.contains("Minimum is 16000"), "{err}");
    assert!(!err.contains(".."), "{err}");
}

#[test]
fn a_store_with_many_sessions_is_named_in_a_few_keys_not_one_long_line() {
    let user = Newcomer::new();
    let store_dir = user.dir.path().join("sessions");
    let store = rampart_sessions::store::SessionStore::open(&store_dir).unwrap();
    for i in 0..30 {
        store
            .upsert(
                &format!("agent:main:chat-{i:02}"),
                rampart_sessions::store::SessionEntry::new(format!("s{i}"), 1_000 + i),
            )
            .unwrap();
    }
    let dir_arg = store_dir.display().to_string();
    let out = user.run(&["--sessions-dir", &dir_arg, "sessions", "show", "nope"]);
    let err = stderr(&out);
    assert!(
        err.contains("and 25 more") && err.contains("rampart sessions list"),
        "{err}"
    );
    assert!(err.len() < 600, "{} characters: {err}", err.len());
    let listed = user.run(&["--sessions-dir", &dir_arg, "sessions", "list"]);
    let stdout = String::from_utf8_lossy(&listed.stdout);
    assert_eq!(
        stdout.lines().count(),
        32,
        "a header, a title row, one row per session: {stdout}"
    );
}
