//! Helpers shared by the end-to-end tests: finding the engine libraries cargo built next to the
//! test binary, writing configs, and running the `rampart` binary.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]
pub mod loopback;

use std::path::{Path, PathBuf};
use std::process::Output;

use rampart_engine_api::{AgentMessage, MessageList};

/// The path of the cdylib of crate `name`, built by cargo because it is a dev-dependency.
/// It sits next to the test binary (`target/<profile>/deps`), whatever the target dir or profile.
pub fn fixture(name: &str) -> PathBuf {
    let file = format!(
        "{}{}{}",
        std::env::consts::DLL_PREFIX,
        name.replace('-', "_"),
        std::env::consts::DLL_SUFFIX
    );
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    [deps.to_path_buf(), deps.parent().unwrap().to_path_buf()]
        .into_iter()
        .map(|d| d.join(&file))
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!(
                "engine library {file} was not built next to {}",
                exe.display()
            )
        })
}

/// Writes `plugins.toml` with `body` into `dir` and returns its path.
pub fn write_config(dir: &Path, body: &str) -> PathBuf {
    let path = dir.join("plugins.toml");
    std::fs::write(&path, body).unwrap();
    path
}

/// A config selecting `id`, loaded from `path`, with extra lines inside its engine table.
/// The call deadline is short enough for the hang fixture and long enough for a panic to
/// unwind with a backtrace on a loaded debug build (500 ms was not).
pub fn config_for(dir: &Path, id: &str, path: &Path, extra: &str) -> PathBuf {
    write_config(
        dir,
        &format!(
            "[plugins]\ncallTimeoutMs = 3000\nloadTimeoutMs = 5000\n[plugins.slots]\n\
             contextEngine = \"{id}\"\n[plugins.engines.{id}]\npath = \"{}\"\n{extra}\n",
            path.display()
        ),
    )
}

/// Runs the `rampart` binary with `args`, without inheriting a config from the environment.
pub fn rampart(args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_rampart"))
        .args(args)
        .env_remove("RAMPART_CONFIG")
        .env("RUST_LOG", "warn")
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap()
}

/// stdout and stderr of `out`, together.
pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A history of `n` alternating user/assistant messages of about 100 tokens each.
pub fn history(n: usize) -> MessageList {
    (0..n)
        .map(|i| {
            if i % 2 == 0 {
                AgentMessage::user_text(format!("{i}: {}", "question ".repeat(44)), i as u64)
            } else {
                AgentMessage::assistant_text(
                    format!("{i}: {}", "answer ".repeat(57)),
                    "test",
                    "sim",
                    "sim-model",
                    i as u64,
                )
            }
        })
        .map(std::sync::Arc::new)
        .collect()
}
