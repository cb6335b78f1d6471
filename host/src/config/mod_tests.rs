use super::*;
use std::fs;

fn file() -> PathBuf {
    PathBuf::from("/etc/rampart/plugins.toml")
}

fn err(text: &str) -> ConfigError {
    parse(text, &file()).expect_err("expected an error")
}

const FULL: &str = r#"[plugins]
searchPaths = ["./target/debug", "/opt/engines"]
callTimeoutMs = 1500
loadTimeoutMs = 0x10
[plugins.slots]
contextEngine = "  window "
[plugins.engines.window]
path = "target/debug/librampart_window.so"
required = true
[plugins.engines.window.config]
keepRecentTokens = 20000
ratio = 0.5
names = ["a", "b"]
when = 1979-05-27T07:32:00Z
nested = { deep = true }

[plugins.engines.other-one]

[models.providers.sim]
models = [{ id = "x", contextWindow = 200000 }]

[agents.defaults]
contextTokens = 100000
"#;

#[test]
fn defaults_when_no_file() {
    let c = load(&ConfigSource::Defaults { searched: vec![] }).unwrap();
    assert_eq!(c, Config::default());
    assert_eq!(c.context_engine, "legacy");
    assert_eq!(c.call_timeout, Duration::from_secs(30));
    assert_eq!(c.load_timeout, Duration::from_secs(5));
    assert!(c.engines.is_empty() && c.search_paths.is_empty());
    assert!(c.source_file.is_none());
    // An empty file is the defaults plus a source file.
    let e = parse("", &file()).unwrap();
    assert_eq!(e.context_engine, "legacy");
    assert_eq!(e.source_file, Some(file()));
}

#[test]
fn full_example_parses() {
    let c = parse(FULL, &file()).unwrap();
    assert_eq!(c.context_engine, "window");
    assert_eq!(c.context_engine_line, Some(6));
    assert_eq!(
        c.search_paths,
        vec![
            PathBuf::from("/etc/rampart/./target/debug"),
            PathBuf::from("/opt/engines")
        ]
    );
    assert_eq!(c.call_timeout, Duration::from_millis(1500));
    assert_eq!(c.load_timeout, Duration::from_millis(16));
    let w = &c.engines["window"];
    assert_eq!(w.id, "window");
    assert!(w.required);
    assert_eq!(w.line, 7);
    assert_eq!(
        w.path.as_deref(),
        Some(Path::new("/etc/rampart/target/debug/librampart_window.so"))
    );
    assert_eq!(
        w.config,
        serde_json::json!({
            "keepRecentTokens": 20000,
            "ratio": 0.5,
            "names": ["a", "b"],
            "when": "1979-05-27T07:32:00Z",
            "nested": {"deep": true},
        })
    );
    let o = &c.engines["other-one"];
    assert!(!o.required && o.path.is_none());
    assert_eq!(o.config, serde_json::json!({}));
    assert_eq!(o.line, 17);
    let sim = c.models.model(&"sim/x".parse().unwrap()).unwrap();
    assert_eq!(sim.context_window, Some(200_000));
    assert_eq!(c.agent_defaults.context_tokens, Some(100_000));
}

fn unknown_key(e: ConfigError) -> (String, usize, usize, Vec<String>) {
    match e {
        ConfigError::UnknownKey {
            key,
            line,
            column,
            allowed,
            ..
        } => (key, line, column, allowed),
        other => panic!("not UnknownKey: {other}"),
    }
}

#[test]
fn unknown_key_top_level() {
    let e = err("[plugins]\n\n[plugin]\nx = 1\n");
    assert_eq!(
        e.to_string(),
        "/etc/rampart/plugins.toml:3:2: unknown key `plugin`; allowed keys here: \
         plugins, models, agents, session, serve. Fix the key or remove it."
    );
    let (key, line, col, _) = unknown_key(e);
    assert_eq!((key.as_str(), line, col), ("plugin", 3, 2));
}

#[test]
fn unknown_key_in_plugins() {
    let (key, line, col, allowed) =
        unknown_key(err("[plugins]\ncallTimeoutMs = 5\nsearchPath = []\n"));
    assert_eq!((key.as_str(), line, col), ("plugins.searchPath", 3, 1));
    assert!(allowed.contains(&"searchPaths".to_owned()));
}

#[test]
fn unknown_key_in_slots() {
    let (key, line, _, allowed) = unknown_key(err(
        "[plugins.slots]\ncontextEngine = \"a\"\nmemmory = \"b\"\n",
    ));
    assert_eq!((key.as_str(), line), ("plugins.slots.memmory", 3));
    assert_eq!(
        allowed,
        vec!["contextEngine".to_owned(), "memory".to_owned()]
    );
}

#[test]
fn unknown_key_in_engine() {
    let text = "[plugins]\nsearchPaths = []\n\n[plugins.engines.window]\npath = \"x.so\"\n\
                \nrequird = false\n[plugins.engines.window.config]\nanything = 1\n";
    let e = err(text);
    assert_eq!(
        e.to_string(),
        "/etc/rampart/plugins.toml:7:1: unknown key `plugins.engines.window.requird`; \
         allowed keys here: path, command, required, config, isolation, restart, limits, wasm. Fix the key or \
         remove it."
    );
}

#[test]
fn earliest_error_is_reported() {
    // `zzz` sorts last but comes first in the file.
    let (key, line, _, _) = unknown_key(err("[plugins]\nzzz = 1\naaa = 2\n"));
    assert_eq!((key.as_str(), line), ("plugins.zzz", 2));
}

#[test]
fn wrong_types() {
    let e = err("[plugins]\n\n[plugins.slots]\ncontextEngine = 5\n");
    assert_eq!(
        e.to_string(),
        "/etc/rampart/plugins.toml:4:17: `plugins.slots.contextEngine` must be a string, \
         found integer 5"
    );
    let e = err("[plugins.engines.w]\npath = \"a\"\nrequired = \"yes\"\n");
    assert_eq!(
        e.to_string(),
        "/etc/rampart/plugins.toml:3:12: `plugins.engines.w.required` must be a boolean \
         (true or false), found string \"yes\""
    );
    let e = err("plugins = 3\n");
    assert!(
        e.to_string()
            .contains("`plugins` must be a table, found integer 3")
    );
    let e = err("[plugins]\nsearchPaths = \"/x\"\n");
    assert!(e.to_string().contains("must be an array of strings"));
    let e = err("[plugins]\nsearchPaths = [\"/x\", 1]\n");
    assert!(
        e.to_string()
            .contains("`plugins.searchPaths[1]` must be a string")
    );
    let e = err("[plugins.engines.w]\nconfig = 1\n");
    assert!(
        e.to_string()
            .contains("`plugins.engines.w.config` must be a table")
    );
    let e = err("[plugins]\ncallTimeoutMs = 0\n");
    assert!(
        e.to_string()
            .contains("2:17: invalid value for `plugins.callTimeoutMs`: found integer 0")
    );
    let e = err("[plugins.engines.w.config]\nx = nan\n");
    assert!(e.to_string().contains("`plugins.engines.w.config.x`"));
}

#[test]
fn syntax_error_names_line() {
    let e = err("[plugins]\ncallTimeoutMs = 1\nsearchPaths = [\n");
    match &e {
        ConfigError::Syntax { line, .. } => assert!(*line >= 3, "{e}"),
        other => panic!("not Syntax: {other}"),
    }
    let e = err("[plugins]\nx = \n");
    assert!(
        e.to_string()
            .starts_with("/etc/rampart/plugins.toml:2:5: invalid TOML: "),
        "{e}"
    );
}

#[test]
fn relative_paths_resolve_against_config_dir() {
    let text = "[plugins]\nsearchPaths = [\"engines\", \"/abs\"]\n\
                [plugins.engines.w]\npath = \"lib/libw.so\"\n";
    let c = parse(text, Path::new("/srv/conf/plugins.toml")).unwrap();
    assert_eq!(
        c.search_paths,
        vec![PathBuf::from("/srv/conf/engines"), PathBuf::from("/abs")]
    );
    assert_eq!(
        c.engines["w"].path.as_deref(),
        Some(Path::new("/srv/conf/lib/libw.so"))
    );
    // A bare file name never becomes a bare library name (which dlopen would search
    // the system for).
    let c = parse(text, Path::new("plugins.toml")).unwrap();
    assert_eq!(
        c.engines["w"].path.as_deref(),
        Some(Path::new("./lib/libw.so"))
    );
    let e = err("[plugins.engines.w]\npath = \"\"\n");
    assert!(e.to_string().contains("a non-empty path"), "{e}");
}

#[test]
fn file_names_and_search_paths() {
    use std::env::consts::{DLL_PREFIX, DLL_SUFFIX};
    assert_eq!(
        engine_library_file_names("rampart-window"),
        vec![
            format!("{DLL_PREFIX}rampart-window{DLL_SUFFIX}"),
            format!("{DLL_PREFIX}rampart_window{DLL_SUFFIX}"),
        ]
    );
    assert_eq!(engine_library_file_names("w").len(), 1);

    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let name = format!("{DLL_PREFIX}rampart_window{DLL_SUFFIX}");
    fs::write(a.path().join(&name), b"").unwrap();
    fs::write(b.path().join(&name), b"").unwrap();
    let config = Config {
        search_paths: vec![
            a.path().to_path_buf(),
            a.path().to_path_buf(),
            b.path().to_path_buf(),
        ],
        ..Config::default()
    };
    let found = config.find_in_search_paths("rampart-window");
    assert_eq!(found, vec![a.path().join(&name), b.path().join(&name)]);
    assert!(config.find_in_search_paths("nothing").is_empty());
    let e = config.resolve_engine_path("rampart-window").unwrap_err();
    assert!(matches!(e, ConfigError::AmbiguousEngine { .. }), "{e}");
    assert!(
        e.to_string()
            .contains(&a.path().join(&name).display().to_string())
    );
    assert!(
        e.to_string()
            .contains(&b.path().join(&name).display().to_string())
    );

    let single = Config {
        search_paths: vec![a.path().to_path_buf()],
        ..Config::default()
    };
    assert_eq!(
        single.resolve_engine_path("rampart-window").unwrap(),
        Some(a.path().join(&name))
    );
    assert_eq!(single.resolve_engine_path("legacy").unwrap(), None);
    assert_eq!(
        single.available_engine_ids(),
        vec!["legacy".to_owned(), "rampart_window".to_owned()]
    );
    let e = single.resolve_engine_path("nope").unwrap_err();
    assert_eq!(
        e.to_string(),
        "unknown engine id `nope`; available ids: legacy, rampart_window. Pick one of them, \
         add `[plugins.engines.nope]` with a `path`, or put the library in a \
         `plugins.searchPaths` directory."
    );
}

#[test]
fn unknown_context_engine_names_line() {
    let text = "[plugins.slots]\ncontextEngine = \"ghost\"\n[plugins.engines.declared]\n";
    let c = parse(text, &file()).unwrap();
    let e = c.resolve_engine_path("ghost").unwrap_err();
    assert!(
        e.to_string().starts_with(
            "/etc/rampart/plugins.toml:2: unknown engine id `ghost`; available ids: \
             declared, legacy."
        ),
        "{e}"
    );
    let e = c.resolve_engine_path("declared").unwrap_err();
    assert!(
        matches!(e, ConfigError::EngineNotFound { line: 3, .. }),
        "{e}"
    );
}

#[test]
fn engine_id_validation() {
    assert!(is_valid_engine_id("rampart-window_2"));
    assert!(!is_valid_engine_id(""));
    assert!(!is_valid_engine_id("a b"));
    assert!(!is_valid_engine_id("é"));
    let e = err("[plugins.engines.\"bad id\"]\npath = \"x\"\n");
    assert_eq!(
        e.to_string(),
        "/etc/rampart/plugins.toml:1:18: invalid value for `plugins.engines`: found engine \
         id \"bad id\"; allowed: a non-empty id of ASCII letters, digits, `-` and `_`."
    );
    let e = err("[plugins.engines.\"\"]\n");
    assert!(
        matches!(e, ConfigError::InvalidValue { line: 1, .. }),
        "{e}"
    );
    let e = err("[plugins.slots]\ncontextEngine = \"a/b\"\n");
    assert!(
        e.to_string()
            .contains("invalid value for `plugins.slots.contextEngine`"),
        "{e}"
    );
    // Empty means the default.
    let c = parse("[plugins.slots]\ncontextEngine = \"  \"\n", &file()).unwrap();
    assert_eq!(c.context_engine, "legacy");
    // Unknown keys under a quoted id are shown quoted.
    let (key, _, _, _) = unknown_key(err("[plugins.engines.ok]\n\"we ird\" = 1\n"));
    assert_eq!(key, "plugins.engines.ok.\"we ird\"");
}

#[test]
fn explicit_path_must_exist() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.toml");
    let e = locate_with(Some(&missing), None, dir.path(), None).unwrap_err();
    assert!(matches!(&e, ConfigError::ExplicitNotFound { path } if *path == missing));
    assert!(e.to_string().contains("--config"), "{e}");
    let present = dir.path().join("mine.toml");
    fs::write(&present, "").unwrap();
    // Explicit wins over the env var and ./plugins.toml.
    fs::write(dir.path().join(CONFIG_FILE_NAME), "").unwrap();
    let s = locate_with(
        Some(Path::new("mine.toml")),
        Some("other.toml".into()),
        dir.path(),
        None,
    )
    .unwrap();
    assert_eq!(s, ConfigSource::Explicit(present));
}

#[test]
fn env_var_rule() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join(CONFIG_FILE_NAME), "").unwrap();
    let e = locate_with(None, Some("gone.toml".into()), dir.path(), None).unwrap_err();
    assert!(matches!(e, ConfigError::EnvNotFound { .. }));
    assert!(e.to_string().contains("$RAMPART_CONFIG"), "{e}");
    let env_file = dir.path().join("env.toml");
    fs::write(&env_file, "[plugins.slots]\ncontextEngine = \"w\"\n").unwrap();
    let s = locate_with(None, Some(env_file.clone().into()), dir.path(), None).unwrap();
    assert_eq!(s, ConfigSource::Env(env_file.clone()));
    assert_eq!(s.path(), Some(env_file.as_path()));
    assert_eq!(load(&s).unwrap().context_engine, "w");
    // An empty variable counts as unset.
    let s = locate_with(None, Some("".into()), dir.path(), None).unwrap();
    assert!(matches!(s, ConfigSource::CurrentDir(_)));
}

#[test]
fn current_dir_then_user_dir_then_defaults() {
    let cwd = tempfile::tempdir().unwrap();
    let user = tempfile::tempdir().unwrap();
    let s = locate_with(None, None, cwd.path(), Some(user.path())).unwrap();
    assert_eq!(
        s,
        ConfigSource::Defaults {
            searched: vec![
                cwd.path().join(CONFIG_FILE_NAME),
                user.path().join(CONFIG_FILE_NAME)
            ]
        }
    );
    assert!(s.to_string().starts_with("built-in defaults"));
    fs::write(user.path().join(CONFIG_FILE_NAME), "").unwrap();
    let s = locate_with(None, None, cwd.path(), Some(user.path())).unwrap();
    assert_eq!(
        s,
        ConfigSource::UserConfigDir(user.path().join(CONFIG_FILE_NAME))
    );
    fs::write(cwd.path().join(CONFIG_FILE_NAME), "").unwrap();
    let s = locate_with(None, None, cwd.path(), Some(user.path())).unwrap();
    assert_eq!(
        s,
        ConfigSource::CurrentDir(cwd.path().join(CONFIG_FILE_NAME))
    );
    assert!(s.to_string().ends_with("(found in the current directory)"));
}

#[test]
fn read_error_names_file() {
    let dir = tempfile::tempdir().unwrap();
    // A directory exists but cannot be read as a file.
    let e = load(&ConfigSource::Explicit(dir.path().to_path_buf())).unwrap_err();
    assert!(matches!(e, ConfigError::Read { .. }));
    assert!(
        e.to_string().contains(&dir.path().display().to_string()),
        "{e}"
    );
}

#[test]
fn session_table_sets_the_lock_wait_and_the_checkpoint_cap() {
    let config = parse("", &file()).unwrap();
    assert_eq!(config.session, SessionSettings::default());
    assert_eq!(
        config.session.write_lock_timeout,
        Duration::from_secs(10),
        "a second writer waits 10 s by default"
    );
    let config = parse(
        "[session]\nwriteLockTimeoutMs = 250\nmaxCompactionCheckpoints = 3\n",
        &file(),
    )
    .unwrap();
    assert_eq!(
        config.session.write_lock_timeout,
        Duration::from_millis(250)
    );
    assert_eq!(config.session.max_compaction_checkpoints, 3);
    let e = err("[session]\nwriteLockTimeoutMs = -1\n");
    assert!(
        e.to_string()
            .contains("2:22: invalid value for `session.writeLockTimeoutMs`"),
        "{e}"
    );
    let e = err("[session]\nmaxCompactionCheckpoints = 0\n");
    assert!(
        e.to_string()
            .contains("invalid value for `session.maxCompactionCheckpoints`"),
        "{e}"
    );
    let e = err("[session]\nmaxCompactionCheckpoints = \"25\"\n");
    assert!(
        e.to_string().contains("session.maxCompactionCheckpoints"),
        "{e}"
    );
    let (key, line, _, allowed) = unknown_key(err("[session]\nlockTimeout = 5\n"));
    assert_eq!((key.as_str(), line), ("session.lockTimeout", 2));
    assert!(allowed.contains(&"writeLockTimeoutMs".to_owned()));
}

#[test]
fn serve_table_is_read_into_types() {
    let c = parse(
        "[serve]\nlisten = \"0.0.0.0:9000\"\nauthToken = \"t0k\"\nmaxConcurrent = 4\nmaxQueue = 0\n\
         sessionCacheMiB = 0\n[serve.sideRequests]\nenabled = false\nprobeMaxTokens = 2\nsmallModels = [\"mini\"]\n",
        Path::new("/etc/rampart/plugins.toml"),
    )
    .unwrap();
    let s = &c.serve;
    assert_eq!(s.listen, Some("0.0.0.0:9000".parse().unwrap()));
    assert_eq!(s.auth_token.as_deref(), Some("t0k"));
    assert_eq!((s.max_concurrent, s.max_queue), (4, 0));
    assert_eq!(s.session_cache_mib, 0, "0 keeps no conversation open");
    assert_eq!(
        crate::config::serve::ServeSettings::default().session_cache_mib,
        crate::config::serve::DEFAULT_SESSION_CACHE_MIB
    );
    assert!(!s.side_requests.enabled);
    assert_eq!(s.side_requests.probe_max_tokens, 2);
    assert_eq!(s.side_requests.small_models, ["mini"]);
    // With the token, a public address may be bound; without, it is refused and says why.
    assert!(s.bind_addr(None).is_ok());
    let open = crate::config::serve::ServeSettings {
        auth_token: None,
        ..s.clone()
    };
    let e = open.bind_addr(None).unwrap_err().to_string();
    assert!(
        e.contains("0.0.0.0:9000") && e.contains("serve.authToken"),
        "{e}"
    );
    assert!(open.bind_addr(Some("127.0.0.1:0".parse().unwrap())).is_ok());
    assert_eq!(
        crate::config::serve::ServeSettings::default()
            .bind_addr(None)
            .unwrap()
            .to_string(),
        "127.0.0.1:8787"
    );
}

#[test]
fn serve_errors_are_located() {
    let e = err("[serve]\nlisten = \"localhost\"\n");
    assert!(
        e.to_string().starts_with("/etc/rampart/plugins.toml:2:10:"),
        "{e}"
    );
    assert!(e.to_string().contains("serve.listen"), "{e}");
    let e = err("[serve]\nmaxConcurrent = 0\n");
    assert!(e.to_string().contains("serve.maxConcurrent"), "{e}");
    for bad in ["-1", "\"32MiB\"", "2000000"] {
        let e = err(&format!("[serve]\nsessionCacheMiB = {bad}\n")).to_string();
        assert!(
            e.starts_with("/etc/rampart/plugins.toml:2:") && e.contains("serve.sessionCacheMiB"),
            "{bad}: {e}"
        );
    }
    let e = err("[serve]\nauthToken = \" \"\n");
    assert!(e.to_string().contains("serve.authToken"), "{e}");
    let e = err("[serve.sideRequests]\nsmallModel = []\n");
    assert!(
        e.to_string().contains("serve.sideRequests.smallModel"),
        "{e}"
    );
}

#[test]
fn isolation_restart_and_limits_are_read_once_into_types() {
    let c = parse("[plugins.engines.w]\npath = \"w.so\"\n", &file()).unwrap();
    assert_eq!(
        c.engines["w"].isolation,
        Isolation::Process(ProcessSettings::default()),
        "the default for a library"
    );
    let c = parse(
        "[plugins.engines.w]\nisolation = \"inprocess\"\n[plugins.engines.legacy]\n",
        &file(),
    )
    .unwrap();
    assert_eq!(c.engines["w"].isolation, Isolation::InProcess);
    assert_eq!(
        c.engines["legacy"].isolation,
        Isolation::InProcess,
        "the built-in engine runs in the host"
    );
    let c = parse(
        "[plugins.engines.w]\npath = \"w.so\"\nisolation = \"process\"\n\
         restart = { max = 2, within = \"1h30m\" }\nlimits = { memoryMb = 256, cpuSeconds = 9 }\n",
        &file(),
    )
    .unwrap();
    assert_eq!(
        c.engines["w"].isolation,
        Isolation::Process(ProcessSettings {
            restart: Some(RestartPolicy {
                max: 2,
                within: Duration::from_secs(5400)
            }),
            limits: ProcessLimits {
                memory_mb: Some(256),
                cpu_seconds: Some(9)
            },
        })
    );
    let c = parse(
        "[plugins.engines.w]\nisolation = \"process\"\nrestart = {}\n",
        &file(),
    )
    .unwrap();
    let Isolation::Process(p) = &c.engines["w"].isolation else {
        panic!("process")
    };
    assert_eq!(
        p.restart,
        Some(RestartPolicy {
            max: 3,
            within: Duration::from_secs(600)
        }),
        "restart = {{}} is the documented 3 within 10m"
    );
    assert_eq!(p.limits, ProcessLimits::default());
}

#[test]
fn isolation_errors_are_located() {
    let cases = [
        (
            "[plugins.engines.w]\nisolation = \"sandbox\"\n",
            "2:13: invalid value for `plugins.engines.w.isolation`",
        ),
        (
            "[plugins.engines.legacy]\nisolation = \"process\"\n",
            "the built-in engine is part of the host",
        ),
        (
            "[plugins.engines.w]\nisolation = \"inprocess\"\nrestart = { max = 1 }\n",
            "3:11: invalid value for `plugins.engines.w.restart`",
        ),
        (
            "[plugins.engines.w]\nisolation = \"process\"\nrestart = { max = 1, within = \"10\" }\n",
            "3:31: invalid value for `plugins.engines.w.restart.within`",
        ),
        (
            "[plugins.engines.w]\nisolation = \"process\"\nrestart = { max = -1 }\n",
            "invalid value for `plugins.engines.w.restart.max`",
        ),
        (
            "[plugins.engines.w]\nisolation = \"process\"\nrestart = { tries = 1 }\n",
            "unknown key `plugins.engines.w.restart.tries`",
        ),
        (
            "[plugins.engines.w]\nisolation = \"process\"\nlimits = { memoryMb = 8 }\n",
            "3:23: invalid value for `plugins.engines.w.limits.memoryMb`",
        ),
        (
            "[plugins.engines.w]\nisolation = \"process\"\nlimits = { cpuSeconds = \"1\" }\n",
            "`plugins.engines.w.limits.cpuSeconds`",
        ),
    ];
    for (text, expected) in cases {
        let e = err(text).to_string();
        assert!(e.contains(expected), "{text}: {e}");
    }
}

#[test]
fn restart_windows_need_a_unit() {
    use super::validate::parse_window;
    assert_eq!(parse_window("10m"), Some(600_000));
    assert_eq!(parse_window(" 1h30m "), Some(5_400_000));
    assert_eq!(parse_window("250ms"), Some(250));
    assert_eq!(parse_window("10"), None);
    assert_eq!(parse_window("m"), None);
    assert_eq!(parse_window("1.5h"), None);
    assert_eq!(parse_window(""), None);
}

#[test]
fn the_memory_slot_defaults_to_the_built_in_engine_and_none_turns_it_off() {
    let c = parse("", &file()).unwrap();
    assert_eq!(c.memory_engine, "memory-core");
    let c = parse("[plugins.slots]\nmemory = \" none \"\n", &file()).unwrap();
    assert_eq!(c.memory_engine, "none");
    let c = parse("[plugins.slots]\nmemory = \"fx-memory\"\n", &file()).unwrap();
    assert_eq!(c.memory_engine, "fx-memory");
    let e = err("[plugins.slots]\nmemory = \"a/b\"\n");
    assert!(e.to_string().contains("plugins.slots.memory"), "{e}");
}

#[test]
fn serve_system_prompt_and_memory_tools() {
    use crate::config::serve::SystemPromptSource;
    let c = parse(
        "[serve]\nsystemPrompt = \"merge\"\nmemoryTools = true\n",
        &file(),
    )
    .unwrap();
    assert_eq!(c.serve.system_prompt, SystemPromptSource::Merge);
    assert!(c.serve.memory_tools);
    assert_eq!(
        parse("", &file()).unwrap().serve.system_prompt,
        SystemPromptSource::Client
    );
    let e = err("[serve]\nsystemPrompt = \"mine\"\n");
    assert!(e.to_string().contains("\"merge\""), "{e}");
}

/// `serve.engineCredentials`: the client's key by default; a value outside the three is
/// refused with its key and the choices.
#[test]
fn serve_engine_credentials() {
    use crate::config::serve::EngineCredentials;
    assert_eq!(
        parse("", &file()).unwrap().serve.engine_credentials,
        EngineCredentials::Client
    );
    for (value, mode) in [
        ("client", EngineCredentials::Client),
        ("provider", EngineCredentials::Provider),
        ("none", EngineCredentials::None),
    ] {
        let c = parse(
            &format!("[serve]\nengineCredentials = \"{value}\"\n"),
            &file(),
        )
        .unwrap();
        assert_eq!(c.serve.engine_credentials, mode);
    }
    let e = err("[serve]\nengineCredentials = \"sometimes\"\n");
    let text = e.to_string();
    assert!(
        text.contains("serve.engineCredentials") && text.contains("\"provider\""),
        "{text}"
    );
}

/// A config of many engine tables is read in time linear in its size: the position lookups
/// (one per key) read each byte of the file a bounded number of times, not once per key
/// before it (which made 20,000 tables take seconds).
#[test]
fn position_lookups_read_the_config_a_bounded_number_of_times() {
    for tables in [500, 4000] {
        let mut text = String::from("[plugins.slots]\ncontextEngine = \"legacy\"\n\n");
        for i in 0..tables {
            text.push_str(&format!(
                "[plugins.engines.e{i}]\npath = \"libs/libe{i}.so\"\nrequired = false\n\n"
            ));
        }
        let before = validate::scanned::get();
        let config = parse(&text, &file()).expect("the config parses");
        let read = validate::scanned::get() - before;
        assert_eq!(config.engines.len(), tables);
        assert!(
            read <= 4 * text.len(),
            "{tables} tables: the position lookups read {read} bytes of a {}-byte config",
            text.len()
        );
    }
}

#[test]
fn serve_min_answer_tokens_is_read_and_a_bad_value_named_with_its_line() {
    assert_eq!(
        parse("", &file()).unwrap().serve.min_answer_tokens,
        crate::config::serve::DEFAULT_MIN_ANSWER_TOKENS
    );
    let c = parse("[serve]\nminAnswerTokens = 2048\n", &file()).unwrap();
    assert_eq!(c.serve.min_answer_tokens, 2048);
    for bad in ["0", "\"4096\"", "-5"] {
        let e = err(&format!("[serve]\nminAnswerTokens = {bad}\n")).to_string();
        assert!(
            e.contains("serve.minAnswerTokens") && e.contains(":2:"),
            "{bad}: {e}"
        );
    }
}

#[test]
fn an_engine_command_is_read_with_its_program_resolved_like_path() {
    let text = "[plugins.engines.py]\ncommand = [\"python3\", \"engine.py\", \"--fast\"]\n\
                [plugins.engines.own]\ncommand = [\"./bin/engine\"]\nrestart = { max = 1 }\n";
    let c = parse(text, Path::new("/srv/conf/plugins.toml")).unwrap();
    let py = c.engines["py"].command.as_ref().unwrap();
    // A bare name is left for PATH; the arguments stay as written, and the command runs in the
    // config's directory, where `engine.py` is.
    assert_eq!(py.program, PathBuf::from("python3"));
    assert_eq!(py.args, ["engine.py", "--fast"]);
    assert_eq!(py.dir, PathBuf::from("/srv/conf"));
    assert_eq!(py.to_string(), "python3 engine.py --fast");
    assert_eq!(c.engines["py"].path, None);
    let own = &c.engines["own"];
    assert_eq!(
        own.command.as_ref().unwrap().program,
        PathBuf::from("/srv/conf/bin/engine")
    );
    let Isolation::Process(settings) = &own.isolation else {
        panic!("an executable runs in a child")
    };
    assert_eq!(settings.restart.map(|r| r.max), Some(1));
}

#[test]
fn a_bad_engine_command_is_a_located_error() {
    for (body, expected) in [
        (
            "path = \"x.so\"\ncommand = [\"python3\"]",
            "3:11: invalid value for `plugins.engines.e.command`",
        ),
        (
            "command = []",
            "invalid value for `plugins.engines.e.command`: found an empty array",
        ),
        ("command = [1]", "`plugins.engines.e.command[0]`"),
        (
            "command = [\" \"]",
            "invalid value for `plugins.engines.e.command[0]`",
        ),
        (
            "command = [\"python3\"]\nisolation = \"inprocess\"",
            "always runs in its own process",
        ),
    ] {
        let e = err(&format!("[plugins.engines.e]\n{body}\n"));
        assert!(e.to_string().contains(expected), "{body}: {e}");
    }
    let e = err("[plugins.engines.legacy]\ncommand = [\"python3\"]\n");
    assert!(e.to_string().contains("built into the host"), "{e}");
}

#[cfg(feature = "wasm")]
#[test]
fn wasm_isolation_is_read_once_into_types() {
    let c = parse(
        "[plugins.engines.w]\npath = \"w.wasm\"\nisolation = \"wasm\"\n",
        &file(),
    )
    .unwrap();
    assert_eq!(
        c.engines["w"].isolation,
        Isolation::Wasm(WasmSettings::default()),
        "nothing granted, 256 MiB"
    );
    assert_eq!(WasmSettings::default().memory_mb, DEFAULT_WASM_MEMORY_MB);
    let c = parse(
        "[plugins.engines.w]\npath = \"w.wasm\"\nisolation = \"wasm\"\n\
         wasm = { dir = \"state\", memoryMb = 64 }\n",
        &file(),
    )
    .unwrap();
    assert_eq!(
        c.engines["w"].isolation,
        Isolation::Wasm(WasmSettings {
            dir: Some(PathBuf::from("/etc/rampart/state")),
            memory_mb: 64,
        }),
        "the directory is resolved against plugins.toml's"
    );
}

#[cfg(feature = "wasm")]
#[test]
fn wasm_isolation_errors_are_located() {
    let cases = [
        (
            "[plugins.engines.w]\nisolation = \"wasm\"\n",
            "isolation = \"wasm\" without a `path`",
        ),
        (
            "[plugins.engines.w]\npath = \"w.wasm\"\nisolation = \"wasm\"\nwasm = { memoryMb = 0 }\n",
            "4:21: invalid value for `plugins.engines.w.wasm.memoryMb`",
        ),
        (
            "[plugins.engines.w]\npath = \"w.wasm\"\nisolation = \"wasm\"\nwasm = { memoryMb = 5000 }\n",
            "an integer from 1 to 4096 (MiB)",
        ),
        (
            "[plugins.engines.w]\npath = \"w.wasm\"\nisolation = \"wasm\"\nwasm = { net = true }\n",
            "unknown key `plugins.engines.w.wasm.net`",
        ),
        (
            "[plugins.engines.w]\npath = \"w.so\"\nwasm = { memoryMb = 64 }\n",
            "a `wasm` table for an engine that is not WebAssembly",
        ),
        (
            "[plugins.engines.w]\npath = \"w.wasm\"\nisolation = \"wasm\"\nlimits = { memoryMb = 64 }\n",
            "`limits` of an engine that is not a child process",
        ),
        (
            "[plugins.engines.w]\ncommand = [\"x\"]\nisolation = \"wasm\"\n",
            "always runs in its own process",
        ),
        (
            "[plugins.engines.legacy]\nisolation = \"wasm\"\n",
            "the built-in engine is part of the host",
        ),
    ];
    for (text, expected) in cases {
        let e = err(text).to_string();
        assert!(e.contains(expected), "{text}: {e}");
    }
}

#[cfg(not(feature = "wasm"))]
#[test]
fn wasm_isolation_without_the_feature_says_how_to_build_it() {
    let e = err("[plugins.engines.w]\npath = \"w.wasm\"\nisolation = \"wasm\"\n").to_string();
    assert!(
        e.contains("3:13: invalid value for `plugins.engines.w.isolation`")
            && e.contains("built without WebAssembly engines")
            && e.contains("--features wasm"),
        "{e}"
    );
}
