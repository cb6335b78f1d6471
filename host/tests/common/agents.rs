//! Real coding agents (Claude Code, the Codex CLI, pi) as test clients: found where
//! `.ci/agents` installs them, each run isolated (its own HOME with its config written there,
//! a cleared environment, a workspace directory), in a private network namespace when one can
//! be made, bounded in time.
//!
//! **The network namespace.** When `unshare -n` works (root, or a system that allows it), the
//! agent runs in a new network namespace holding only a loopback interface: it cannot reach
//! anything but the one base URL the test gives it, whatever it tries (telemetry, update
//! checks, model lists). The servers (the scripted model, `rampart serve`) stay in the test's
//! namespace; a bridge joins the two through a Unix socket, which namespaces do not separate:
//! inside, a small node script listens on 127.0.0.1 at the target's own port (so the `Host`
//! header is what the server expects), and the agent starts once it listens; outside, a thread
//! connects each bridged connection to the target. Without a namespace the agent runs in the
//! test's namespace with its nonessential traffic turned off by its own settings, and
//! [`network_note`] says so once.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::net::TcpStream;
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The agents the tests run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    /// `@anthropic-ai/claude-code`: Anthropic messages.
    ClaudeCode,
    /// `@openai/codex`: OpenAI Responses.
    Codex,
    /// `@mariozechner/pi-coding-agent`: here over OpenAI chat completions.
    Pi,
}

impl Agent {
    /// Its name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Self::ClaudeCode => "Claude Code",
            Self::Codex => "Codex",
            Self::Pi => "pi",
        }
    }

    /// The executable `npm install` links into `node_modules/.bin`.
    fn bin(self) -> &'static str {
        match self {
            Self::ClaudeCode => "claude",
            Self::Codex => "codex",
            Self::Pi => "pi",
        }
    }

    /// The model id the agent asks for (configured in `rampart serve` under the same id).
    pub fn model(self) -> &'static str {
        match self {
            Self::ClaudeCode => "claude-loop",
            Self::Codex => "gpt-loop",
            Self::Pi => "pi-loop",
        }
    }

    /// The API key the agent is given; it must reach the model through serve.
    pub fn key(self) -> &'static str {
        match self {
            Self::ClaudeCode => "sk-ant-agent-test-claude",
            Self::Codex => "sk-agent-test-codex",
            Self::Pi => "sk-agent-test-pi",
        }
    }
}

/// Where `.ci/agents` installed the agents: `$RAMPART_AGENTS_DIR`, else
/// `${CARGO_TARGET_DIR:-target}/agents`; its `node_modules/.bin`.
fn bin_dir() -> PathBuf {
    std::env::var_os("RAMPART_AGENTS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_TARGET_TMPDIR"))
                .parent()
                .unwrap()
                .join("agents")
        })
        .join("node_modules/.bin")
}

/// The installed agents, or `None` with a `SKIPPED:` line saying why (a failure instead when
/// `RAMPART_REQUIRE_AGENTS=1`).
pub fn installed() -> Option<PathBuf> {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let found = FOUND.get_or_init(|| {
        let dir = bin_dir();
        let missing: Vec<&str> = [Agent::ClaudeCode, Agent::Codex, Agent::Pi]
            .into_iter()
            .map(Agent::bin)
            .filter(|b| !dir.join(b).exists())
            .collect();
        let node = Command::new("node")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !node {
            Err("node is not on PATH".to_owned())
        } else if !missing.is_empty() {
            Err(format!(
                "{} not installed in {} (run .ci/agents, or set RAMPART_AGENTS_DIR)",
                missing.join(", "),
                dir.display()
            ))
        } else {
            Ok(dir)
        }
    });
    match found {
        Ok(dir) => Some(dir.clone()),
        Err(why) => {
            let why = format!("SKIPPED: the real agents (Claude Code, Codex, pi): {why}");
            if std::env::var("RAMPART_REQUIRE_AGENTS").is_ok_and(|v| v == "1") {
                panic!("{why}");
            }
            eprintln!("{why}");
            None
        }
    }
}

/// Whether agents run in a network namespace of their own; tried once.
fn namespace_works() -> bool {
    static WORKS: OnceLock<bool> = OnceLock::new();
    *WORKS.get_or_init(|| {
        if std::env::var("RAMPART_AGENTS_NO_NETNS").is_ok_and(|v| v == "1") {
            eprintln!("note: RAMPART_AGENTS_NO_NETNS=1: the agents run in the test's namespace");
            return false;
        }
        let works = Command::new("unshare")
            .args(["-n", "sh", "-c", "ip link set lo up"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !works {
            eprintln!(
                "note: `unshare -n` is not available here; the agents run in the test's network \
                 namespace with their nonessential traffic turned off"
            );
        }
        works
    })
}

/// How the agents were isolated from the network, for messages.
pub fn network_note() -> &'static str {
    if namespace_works() {
        "a private network namespace (loopback only, bridged to the target)"
    } else {
        "the test's network namespace, nonessential traffic off"
    }
}

/// The bridge's inside half: listens on 127.0.0.1:PORT, pipes each connection to the Unix
/// socket, and creates the ready file once it listens.
const BRIDGE_JS: &str = r#"
const net = require('net');
const fs = require('fs');
const [port, socket, ready] = process.argv.slice(2);
const server = net.createServer((client) => {
  const upstream = net.connect(socket);
  client.pipe(upstream);
  upstream.pipe(client);
  client.on('error', () => upstream.destroy());
  upstream.on('error', () => client.destroy());
});
server.listen(Number(port), '127.0.0.1', () => fs.writeFileSync(ready, ''));
"#;

/// Run by `sh` in the new namespace: brings loopback up, starts the bridge in the background,
/// waits (5 s at most) for it to listen, then becomes the agent. The agent is not the
/// bridge's child: node ignores SIGPIPE and its children inherit that (Codex then exits 101
/// in the middle of a big tool output).
const NAMESPACE_SH: &str = "ip link set lo up || exit 125
node \"$1\" \"$2\" \"$3\" \"$4\" </dev/null >/dev/null 2>&1 &
i=0
until [ -e \"$4\" ]; do
  i=$((i + 1))
  if [ $i -gt 250 ]; then echo 'agents: the namespace bridge did not start' >&2; exit 125; fi
  sleep 0.02
done
shift 4
exec \"$@\"";

/// The outside half of the bridge: a Unix socket whose connections go to `target`.
struct Bridge {
    socket: PathBuf,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl Bridge {
    fn start(socket: PathBuf, target: u16) -> Self {
        let listener = UnixListener::bind(&socket).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let accept = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if flag.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(inside) = conn else { continue };
                let Ok(outside) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                pipe(inside, outside);
            }
        });
        Self {
            socket,
            stop,
            accept: Some(accept),
        }
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = UnixStream::connect(&self.socket);
        if let Some(handle) = self.accept.take() {
            let _ = handle.join();
        }
    }
}

/// Copies both ways between `unix` and `tcp` until each side ends.
fn pipe(unix: UnixStream, tcp: TcpStream) {
    let (mut u_read, mut t_write) = (unix.try_clone().unwrap(), tcp.try_clone().unwrap());
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut u_read, &mut t_write);
        let _ = t_write.shutdown(std::net::Shutdown::Write);
    });
    let (mut t_read, mut u_write) = (tcp, unix);
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut t_read, &mut u_write);
        let _ = u_write.shutdown(std::net::Shutdown::Write);
    });
}

/// One agent's isolated home and workspace, kept across its runs (so a second run continues
/// the first one's session).
pub struct Sandbox {
    pub agent: Agent,
    bin: PathBuf,
    dir: tempfile::TempDir,
    /// The agent's HOME.
    pub home: PathBuf,
    /// The agent's working directory, holding `secret.txt`.
    pub work: PathBuf,
    /// The number in `secret.txt`.
    pub secret: u64,
    /// The port of what the agent talks to, and its base URL as the agent's config says it.
    port: u16,
}

/// What one agent run did.
#[derive(Debug)]
pub struct Run {
    pub status: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Run {
    /// Panics, with the run's output, unless it exited 0.
    pub fn assert_ok(&self, what: &str) -> &Self {
        assert_eq!(
            self.status,
            Some(0),
            "{what} failed ({:?}); stdout:\n{}\nstderr:\n{}",
            self.status,
            self.stdout,
            self.stderr
        );
        self
    }
}

impl Sandbox {
    /// A home and a workspace for `agent` (from `bin`, see [`installed`]) talking to the server
    /// at `origin` (`http://127.0.0.1:PORT`), with a secret file holding `secret`. Writes the
    /// agent's config files.
    pub fn new(bin: &Path, agent: Agent, origin: &str, secret: u64) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let work = dir.path().join("work");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&work).unwrap();
        std::fs::write(
            work.join("secret.txt"),
            super::agent_model::secret_text(secret),
        )
        .unwrap();
        let port: u16 = origin.rsplit(':').next().unwrap().parse().unwrap();
        let sandbox = Self {
            agent,
            bin: bin.to_path_buf(),
            dir,
            home,
            work,
            secret,
            port,
        };
        sandbox.write_config(origin);
        sandbox
    }

    /// Makes `secret.txt` about `bytes` long: the secret on its first line, then lines of
    /// words (a big tool output whose head alone says the number).
    pub fn grow_secret(&self, bytes: usize) {
        const WORDS: [&str; 8] = [
            "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
        ];
        let mut text = super::agent_model::secret_text(self.secret);
        let mut i = 0usize;
        while text.len() < bytes {
            let line: Vec<&str> = (0..11)
                .map(|k| WORDS[(i * 7 + k * 3) % WORDS.len()])
                .collect();
            text.push_str(&format!("{i} {}\n", line.join(" ")));
            i += 1;
        }
        std::fs::write(self.work.join("secret.txt"), text).unwrap();
    }

    /// The temporary directory holding the home and the workspace (its path differs per run).
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// The absolute path of the secret file, as the prompts name it.
    pub fn secret_path(&self) -> String {
        self.work.join("secret.txt").display().to_string()
    }

    /// A prompt that needs the file: the model answers it with a tool call.
    pub fn read_prompt(&self) -> String {
        format!(
            "Read the file {} and tell me the secret number in it.",
            self.secret_path()
        )
    }

    fn write_config(&self, origin: &str) {
        let agent = self.agent;
        match agent {
            Agent::ClaudeCode => {
                // Everything Claude Code needs comes from its environment (see `command`); its
                // settings only keep it from offering things a test cannot answer.
                let dir = self.home.join(".claude");
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(
                    dir.join("settings.json"),
                    r#"{"autoUpdates": false, "includeCoAuthoredBy": false}"#,
                )
                .unwrap();
            }
            Agent::Codex => {
                let dir = self.home.join(".codex");
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(
                    dir.join("config.toml"),
                    format!(
                        "model = \"{}\"\nmodel_provider = \"loop\"\n\
                         check_for_update_on_startup = false\n\n\
                         [analytics]\nenabled = false\n\n\
                         [model_providers.loop]\nname = \"Loop\"\nbase_url = \"{origin}/v1\"\n\
                         env_key = \"OPENAI_API_KEY\"\nwire_api = \"responses\"\n",
                        agent.model()
                    ),
                )
                .unwrap();
            }
            Agent::Pi => {
                let dir = self.home.join(".pi/agent");
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(
                    dir.join("models.json"),
                    serde_json::json!({"providers": {"loop": {
                        "baseUrl": format!("{origin}/v1"), "api": "openai-completions",
                        "apiKey": "LOOP_API_KEY",
                        "models": [{"id": agent.model(), "contextWindow": 200000, "maxTokens": 4096}]
                    }}})
                    .to_string(),
                )
                .unwrap();
            }
        }
    }

    /// The agent's arguments for one prompt; `again` continues its last session.
    fn args(&self, prompt: &str, again: bool) -> Vec<String> {
        let model = self.agent.model().to_owned();
        let mut args: Vec<String> = match self.agent {
            Agent::ClaudeCode => {
                let mut a = vec!["--model".into(), model, "--allowedTools".into()];
                a.push("Read Agent Task".into());
                if again {
                    a.push("--continue".into());
                }
                a.extend(["-p".into(), prompt.into()]);
                a
            }
            Agent::Codex => {
                let mut a = vec!["exec".to_owned()];
                if again {
                    a.extend(["resume".into(), "--last".into()]);
                }
                a.extend([
                    "--skip-git-repo-check".into(),
                    "--dangerously-bypass-approvals-and-sandbox".into(),
                    prompt.into(),
                ]);
                a
            }
            Agent::Pi => {
                let mut a = vec!["--provider".into(), "loop".into(), "--model".into(), model];
                if again {
                    a.push("--continue".into());
                }
                a.extend(["-p".into(), prompt.into()]);
                a
            }
        };
        args.shrink_to_fit();
        args
    }

    /// The environment: cleared, then PATH, the isolated HOME and the agent's own settings
    /// (its key, and its nonessential traffic off).
    fn env(&self, origin: &str) -> Vec<(String, String)> {
        let mut env = vec![
            ("PATH".to_owned(), std::env::var("PATH").unwrap_or_default()),
            ("HOME".to_owned(), self.home.display().to_string()),
            ("TERM".to_owned(), "dumb".to_owned()),
            ("LANG".to_owned(), "C.UTF-8".to_owned()),
            ("NO_COLOR".to_owned(), "1".to_owned()),
            ("TMPDIR".to_owned(), self.dir.path().display().to_string()),
        ];
        let key = self.agent.key().to_owned();
        let own: Vec<(&str, String)> = match self.agent {
            Agent::ClaudeCode => vec![
                ("ANTHROPIC_BASE_URL", origin.to_owned()),
                ("ANTHROPIC_API_KEY", key),
                ("DISABLE_TELEMETRY", "1".into()),
                ("DISABLE_ERROR_REPORTING", "1".into()),
                ("DISABLE_AUTOUPDATER", "1".into()),
                ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
            ],
            Agent::Codex => vec![
                ("OPENAI_API_KEY", key),
                ("CODEX_HOME", self.home.join(".codex").display().to_string()),
            ],
            Agent::Pi => vec![
                ("LOOP_API_KEY", key),
                ("PI_OFFLINE", "1".into()),
                ("PI_TELEMETRY", "0".into()),
                ("PI_SKIP_VERSION_CHECK", "1".into()),
            ],
        };
        env.extend(own.into_iter().map(|(k, v)| (k.to_owned(), v)));
        env
    }

    /// Runs the agent once with `prompt` (`again`: in its last session), within `limit`;
    /// on timeout its whole process group is killed and the test fails with its output.
    pub fn run(&self, prompt: &str, again: bool, limit: Duration) -> Run {
        let origin = format!("http://127.0.0.1:{}", self.port);
        let exe = self.bin.join(self.agent.bin());
        let args = self.args(prompt, again);
        let (mut command, _bridge) = if namespace_works() {
            let script = self.dir.path().join("bridge.js");
            std::fs::write(&script, BRIDGE_JS).unwrap();
            let socket = self.dir.path().join(format!("bridge-{}.sock", self.port));
            let ready = self.dir.path().join(format!("bridge-{}.ready", self.port));
            let _ = std::fs::remove_file(&socket);
            let _ = std::fs::remove_file(&ready);
            let bridge = Bridge::start(socket.clone(), self.port);
            let mut c = Command::new("unshare");
            c.args(["-n", "sh", "-c", NAMESPACE_SH, "sh"])
                .arg(&script)
                .arg(self.port.to_string())
                .arg(&socket)
                .arg(&ready)
                .arg(&exe)
                .args(&args);
            (c, Some(bridge))
        } else {
            let mut c = Command::new(&exe);
            c.args(&args);
            (c, None)
        };
        command
            .env_clear()
            .envs(self.env(&origin))
            .current_dir(&self.work)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let started = Instant::now();
        let mut child = command.spawn().unwrap();
        let pid = child.id() as i32;
        let mut out = child.stdout.take().unwrap();
        let mut err = child.stderr.take().unwrap();
        let out = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            s
        });
        let err = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if started.elapsed() > limit {
                // SAFETY: kill(2) on the process group the child leads (`process_group(0)`).
                unsafe { libc::kill(-pid, libc::SIGKILL) };
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        // The group may hold stragglers (a sandboxed helper) that keep the pipes open.
        // SAFETY: as above; the group is ours.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
        let run = Run {
            status: status.and_then(|s| s.code()),
            stdout: out.join().unwrap(),
            stderr: err.join().unwrap(),
            elapsed: started.elapsed(),
        };
        if status.is_none() {
            panic!(
                "{} did not finish within {limit:?} and was killed; stdout:\n{}\nstderr:\n{}",
                self.agent.name(),
                run.stdout,
                run.stderr
            );
        }
        run
    }
}
