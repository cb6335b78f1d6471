//! The host's side of an engine in a child process (`isolation = "process"`): starting
//! `rampart engine-host` (or, for an executable engine, its own `command`), the handshake,
//! calls with deadlines, answering the engine's service calls, its log, and what happens when
//! the child dies. An executable speaks the same frames as `rampart engine-host`
//! (docs/engine-protocol.md), so everything below applies to both unchanged.
//!
//! Why a child: `export_engine!` turns a panic into an error, and deadlines bound a hang, but a
//! segfault, `abort`, stack overflow, `exit` or runaway allocation in a library ends the
//! process it runs in. In a child, any of them is the end of a pipe and an exit status, which
//! becomes an error naming the signal or status; the slot quarantines the engine as it does a
//! panic (or restarts the child first, under `restart = { max, within }`).
//!
//! A child never outlives the host: it is started with `PR_SET_PDEATHSIG` (Linux), and it exits
//! when its stdin ends, which the kernel closes when the host dies. What differs on Windows
//! (no rlimits, no signals) lives in [`crate::platform`].

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, BufWriter};
use std::path::PathBuf;
use std::process::{ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::time::{Duration, Instant};

use rampart_engine_api::{EngineError, EngineInfo, ErrorKind, HostApi, LogLevel};

use crate::config::{EngineCommand, ProcessSettings};
use crate::engine::pipe::{
    FEATURES, Frame, Hello, LogLine, Outcome, PIPE_VERSION, PipeError, feature, read_frame,
    shared_features, write_frame,
};

/// What the host lets a call's answer be late by, past the call's deadline, before it gives the
/// child up: the child raises the cancel flag at the deadline, and a cooperative engine answers
/// `Timeout` by itself.
const ANSWER_GRACE: Duration = Duration::from_secs(2);

/// How long a child that closed its stdout may take to exit before it is killed.
const EXIT_WAIT: Duration = Duration::from_secs(2);

/// How many lines of a child's stderr that are not log lines are kept for the line that
/// reports its death (Rust's "has overflowed its stack", an allocator's message).
const LAST_WORDS: usize = 4;

/// The binary the children run: this executable, unless a program that embeds the host (a
/// test, a benchmark) named the `rampart` binary.
static ENGINE_HOST_EXE: OnceLock<PathBuf> = OnceLock::new();

/// Names the `rampart` binary that serves `engine-host`, for programs whose own executable is
/// not `rampart` (tests and benchmarks that host engines in their process). Set once.
pub fn set_engine_host_exe(path: PathBuf) {
    let _ = ENGINE_HOST_EXE.set(path);
}

/// The `rampart` binary: the one named with [`set_engine_host_exe`]; else this executable when
/// it is `rampart`; else a `rampart` beside it or one directory up, which is where cargo puts
/// it for the tests and benchmarks that embed the host (`target/<profile>/deps/<test>`).
fn engine_host_exe() -> std::io::Result<PathBuf> {
    if let Some(p) = ENGINE_HOST_EXE.get() {
        return Ok(p.clone());
    }
    let me = std::env::current_exe()?;
    let name = format!("rampart{}", std::env::consts::EXE_SUFFIX);
    if me.file_name().is_some_and(|n| n == name.as_str()) {
        return Ok(me);
    }
    let beside = me.parent().map(|d| d.join(&name));
    let above = me.parent().and_then(|d| d.parent()).map(|d| d.join(&name));
    Ok([beside, above]
        .into_iter()
        .flatten()
        .find(|p| p.is_file())
        .unwrap_or(me))
}

/// Everything needed to start (and restart) one engine's child.
#[derive(Clone)]
pub struct ProcessSpec {
    /// The configured id.
    pub id: String,
    /// Check the handshake's id against `id`.
    pub verify_id: bool,
    /// The library; for an executable engine, its program (the `Hello` frame carries it).
    pub path: PathBuf,
    /// An executable engine's command (`plugins.engines.<id>.command`), started instead of
    /// `rampart engine-host`; `None` for a library.
    pub command: Option<EngineCommand>,
    /// The engine's `config` table.
    pub config: serde_json::Value,
    /// The services that answer the engine's calls back.
    pub services: Arc<dyn HostApi>,
    /// Deadline for starting the child, loading and the handshake.
    pub load_timeout: Duration,
    /// Deadline for each call.
    pub call_timeout: Duration,
    /// The most verbose log level the host records.
    pub max_log_level: Option<LogLevel>,
    /// Restarts and rlimits.
    pub settings: ProcessSettings,
}

/// Why a child did not become an engine.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The child could not be started.
    #[error("cannot start `{}` engine-host: {source}", exe.display())]
    Spawn {
        /// The binary.
        exe: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// An executable engine's command could not be started (no such program, not executable).
    #[error(
        "cannot start the engine's command `{command}`: {source}; install the program or fix \
         `command` in plugins.toml"
    )]
    SpawnCommand {
        /// The command as configured.
        command: String,
        /// Why.
        source: std::io::Error,
    },
    /// The child's loader refused the library; its message, as it reads.
    #[error("{0}")]
    Refused(String),
    /// The child died before its handshake.
    #[error("the engine's process died while loading: {0}")]
    Died(String),
    /// No handshake within the load deadline (the child was killed).
    #[error("the engine's process did not answer within {} ms (plugins.loadTimeoutMs); it was killed", .0.as_millis())]
    Timeout(Duration),
    /// The child speaks another protocol.
    #[error("the engine's process speaks engine-host protocol {0}, this host {PIPE_VERSION}")]
    Version(u32),
}

/// One engine in a child process, restarted under its policy.
pub struct ChildEngine {
    spec: ProcessSpec,
    current: Mutex<Arc<Running>>,
    /// When each restart happened, within the policy's window.
    restarts: Mutex<VecDeque<Instant>>,
    /// Bytes of call payloads sent to the child so far: what a turn costs on the pipe.
    payload_bytes: AtomicU64,
    /// Children started to replace one that died, since the engine started.
    restarted: AtomicU64,
}

impl std::fmt::Debug for ChildEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChildEngine")
            .field("id", &self.spec.id)
            .finish()
    }
}

impl ChildEngine {
    /// Starts the child and waits for its handshake.
    pub fn start(spec: ProcessSpec) -> Result<(Self, EngineInfo), StartError> {
        let (running, info) = Running::start(&spec)?;
        let engine = ChildEngine {
            spec,
            current: Mutex::new(running),
            restarts: Mutex::default(),
            payload_bytes: AtomicU64::new(0),
            restarted: AtomicU64::new(0),
        };
        Ok((engine, info))
    }

    /// The pid of the child serving now.
    pub fn pid(&self) -> u32 {
        self.running().pid
    }

    /// How many times a child that died was replaced by a new one (for `/ui` and `/metrics`).
    pub fn restarts(&self) -> u64 {
        self.restarted.load(Ordering::Relaxed)
    }

    /// Bytes of call payloads sent to the child so far (message lists as deltas).
    pub fn payload_bytes(&self) -> u64 {
        self.payload_bytes.load(Ordering::Relaxed)
    }

    fn running(&self) -> Arc<Running> {
        match self.current.lock() {
            Ok(r) => r.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Calls engine method `method` with `payload` within `timeout`. A child that dies during
    /// the call is restarted (with back-off) and the call sent again while the restart policy
    /// allows; otherwise the death is the call's error, naming the signal or exit status.
    pub fn call(
        &self,
        method: &str,
        payload: &str,
        timeout: Duration,
    ) -> Result<String, EngineError> {
        loop {
            let running = self.running();
            self.payload_bytes
                .fetch_add(payload.len() as u64, Ordering::Relaxed);
            match running.request(method, payload, timeout) {
                Err(CallFailure::Died(reason)) => self.restart_after(&running, &reason)?,
                Err(CallFailure::Engine(e)) => return Err(e),
                Ok(answer) => return Ok(answer),
            }
        }
    }

    /// Decides on a restart after `dead` died of `reason`: starts a new child after a back-off,
    /// or returns the error that ends the engine.
    fn restart_after(&self, dead: &Arc<Running>, reason: &str) -> Result<(), EngineError> {
        let died = |extra: String| {
            EngineError::new(
                ErrorKind::Engine,
                format!(
                    "the engine's process (pid {}) died: {reason}{extra}",
                    dead.pid
                ),
            )
        };
        let Some(policy) = self.spec.settings.restart else {
            return Err(died(String::new()));
        };
        // Held from the decision to the swap, so two calls that saw the same death start one
        // child between them; the second finds it already replaced and sends its call again.
        let mut current = match self.current.lock() {
            Ok(c) => c,
            Err(poisoned) => poisoned.into_inner(),
        };
        if !Arc::ptr_eq(&current, dead) {
            return Ok(());
        }
        let attempt = {
            let mut restarts = match self.restarts.lock() {
                Ok(r) => r,
                Err(poisoned) => poisoned.into_inner(),
            };
            let now = Instant::now();
            while restarts
                .front()
                .is_some_and(|t| now.duration_since(*t) > policy.within)
            {
                restarts.pop_front();
            }
            if restarts.len() >= policy.max as usize {
                return Err(died(format!(
                    "; restarted {} times within {} s, giving up (restart.max)",
                    restarts.len(),
                    policy.within.as_secs()
                )));
            }
            restarts.push_back(now);
            restarts.len()
        };
        // 100 ms, 200 ms, 400 ms … capped at 5 s: a crash loop must not spin the host.
        let backoff =
            Duration::from_millis(100u64 << (attempt - 1).min(6)).min(Duration::from_secs(5));
        tracing::warn!(
            target: "rampart::engine",
            engine = %self.spec.id,
            pid = dead.pid,
            attempt,
            max = policy.max,
            backoff_ms = backoff.as_millis() as u64,
            "the engine's process died ({reason}); restarting it"
        );
        std::thread::sleep(backoff);
        match Running::start(&self.spec) {
            Ok((running, _)) => {
                *current = running;
                self.restarted.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => Err(died(format!("; the restart failed: {e}"))),
        }
    }

    /// Retires the engine and lets the child exit; kills it if it does not within `timeout`.
    pub fn shutdown(&self, timeout: Duration) -> Result<(), EngineError> {
        let running = self.running();
        let result = if running.features().iter().any(|f| f == feature::SHUTDOWN) {
            match running.request_frame(|id| Frame::Shutdown { id }, "shutdown", timeout) {
                Ok(_) => Ok(()),
                Err(CallFailure::Engine(e)) => Err(e),
                // A child that dies on its way out has still stopped.
                Err(CallFailure::Died(_)) => Ok(()),
            }
        } else {
            Ok(())
        };
        running.stop();
        result
    }
}

impl Drop for ChildEngine {
    fn drop(&mut self) {
        self.running().stop();
    }
}

/// How a request failed.
enum CallFailure {
    /// The child is gone (the reason names the signal or exit status).
    Died(String),
    /// The engine (or the deadline) answered with an error.
    Engine(EngineError),
}

/// One live child: its pipe, its pending requests, and why it stopped once it has.
struct Running {
    pid: u32,
    id: String,
    process: Mutex<std::process::Child>,
    stdin: Mutex<Option<BufWriter<ChildStdin>>>,
    pending: Mutex<HashMap<u64, mpsc::SyncSender<Outcome>>>,
    next_id: AtomicU64,
    /// Set once the pipe ended: why the child stopped.
    death: Mutex<Option<String>>,
    /// The features both sides announced, set at the handshake.
    features: OnceLock<Vec<String>>,
}

impl Running {
    fn start(spec: &ProcessSpec) -> Result<(Arc<Self>, EngineInfo), StartError> {
        let (mut command, exe) = match &spec.command {
            // An executable engine: the same frames, spoken by the program itself.
            Some(engine) => {
                let mut command = Command::new(&engine.program);
                command.args(&engine.args).current_dir(&engine.dir);
                (command, engine.program.clone())
            }
            None => {
                let exe = engine_host_exe().map_err(|source| StartError::Spawn {
                    exe: PathBuf::from("rampart"),
                    source,
                })?;
                let mut command = Command::new(&exe);
                command.args(["--log-format", "json", "engine-host"]);
                (command, exe)
            }
        };
        let spawn_error = |exe: PathBuf, source: std::io::Error| match &spec.command {
            Some(engine) => StartError::SpawnCommand {
                command: engine.to_string(),
                source,
            },
            None => StartError::Spawn { exe, source },
        };
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if spec.settings.limits.memory_mb.is_some() {
            // glibc reserves 64 MiB of address space per thread arena; under an address-space
            // limit that reservation, not the engine, would be what runs out.
            command.env("MALLOC_ARENA_MAX", "2");
        }
        crate::platform::confine_child(&mut command, spec.settings.limits)
            .map_err(|source| spawn_error(exe.clone(), source))?;
        let mut child = spawn_from_a_lasting_thread(command)
            .map_err(|source| spawn_error(exe.clone(), source))?;
        let pid = child.id();
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(spawn_error(
                exe,
                std::io::Error::other("the child's pipes were not set up"),
            ));
        };
        let last_words = Arc::new(Mutex::new(VecDeque::new()));
        let (stderr_done_tx, stderr_done_rx) = mpsc::channel::<()>();
        {
            let (id, services, last_words) =
                (spec.id.clone(), spec.services.clone(), last_words.clone());
            let _ = std::thread::Builder::new()
                .name(format!("rampart-engine-stderr-{}", spec.id))
                .spawn(move || {
                    forward_stderr(stderr, &id, &*services, &last_words);
                    let _ = stderr_done_tx.send(());
                });
        }
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let running = Arc::new(Running {
            pid,
            id: spec.id.clone(),
            process: Mutex::new(child),
            stdin: Mutex::new(Some(BufWriter::new(stdin))),
            pending: Mutex::default(),
            next_id: AtomicU64::new(1),
            death: Mutex::new(None),
            features: OnceLock::new(),
        });
        {
            let reader = running.clone();
            let services = spec.services.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("rampart-engine-pipe-{}", spec.id))
                .spawn(move || {
                    read_loop(
                        stdout,
                        &reader,
                        &services,
                        ready_tx,
                        &last_words,
                        &stderr_done_rx,
                    )
                });
            if let Err(source) = spawned {
                running.stop();
                return Err(spawn_error(exe, source));
            }
        }
        let hello = Frame::Hello(Hello {
            version: PIPE_VERSION,
            features: FEATURES.iter().map(|f| (*f).to_string()).collect(),
            engine_id: spec.id.clone(),
            verify_id: spec.verify_id,
            path: spec.path.clone(),
            config: spec.config.clone(),
            load_timeout_ms: spec.load_timeout.as_millis() as u64,
            call_timeout_ms: spec.call_timeout.as_millis() as u64,
            max_log_level: spec.max_log_level,
        });
        // A child that died at once shows in the handshake's wait below.
        let _ = running.send(&hello);
        let ready = match ready_rx.recv_timeout(spec.load_timeout + ANSWER_GRACE) {
            Ok(ready) => ready,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                running.stop();
                return Err(StartError::Timeout(spec.load_timeout));
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(StartError::Died(running.wait_for_death()));
            }
        };
        if ready.version != PIPE_VERSION {
            running.stop();
            return Err(StartError::Version(ready.version));
        }
        let info = match ready.engine {
            Ok(info) => info,
            Err(message) => {
                running.stop();
                return Err(StartError::Refused(message));
            }
        };
        let _ = running
            .features
            .set(shared_features(FEATURES, &ready.features));
        Ok((running, info))
    }

    fn features(&self) -> &[String] {
        self.features.get().map(Vec::as_slice).unwrap_or(&[])
    }

    fn send(&self, frame: &Frame) -> Result<(), PipeError> {
        let mut stdin = match self.stdin.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        match stdin.as_mut() {
            Some(w) => write_frame(w, frame),
            None => Err(PipeError::Closed),
        }
    }

    fn death(&self) -> Option<String> {
        self.death.lock().ok().and_then(|d| d.clone())
    }

    /// Why the child stopped, waiting for the reader to find out (it reaps the child first).
    fn wait_for_death(&self) -> String {
        let until = Instant::now() + EXIT_WAIT + ANSWER_GRACE;
        loop {
            if let Some(reason) = self.death() {
                return reason;
            }
            if Instant::now() > until {
                return "it stopped answering and closed its pipe".to_string();
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn request(
        &self,
        method: &str,
        payload: &str,
        timeout: Duration,
    ) -> Result<String, CallFailure> {
        let timeout_ms = timeout.as_millis() as u64;
        self.request_frame(
            |id| Frame::Call {
                id,
                method: method.to_string(),
                payload: payload.to_string(),
                timeout_ms,
            },
            method,
            timeout,
        )
    }

    /// Sends the request `frame` builds for a fresh id and waits for its answer: up to the
    /// deadline plus [`ANSWER_GRACE`]; then the child is killed.
    fn request_frame(
        &self,
        frame: impl FnOnce(u64) -> Frame,
        what: &str,
        timeout: Duration,
    ) -> Result<String, CallFailure> {
        if let Some(reason) = self.death() {
            return Err(CallFailure::Died(reason));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::sync_channel(1);
        if let Ok(mut pending) = self.pending.lock() {
            pending.insert(id, tx);
        }
        if self.send(&frame(id)).is_err() {
            self.forget(id);
            return Err(CallFailure::Died(self.wait_for_death()));
        }
        match rx.recv_timeout(timeout + ANSWER_GRACE) {
            Ok(outcome) => outcome.into_result().map_err(CallFailure::Engine),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                Err(CallFailure::Died(self.wait_for_death()))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                self.forget(id);
                self.stop();
                Err(CallFailure::Engine(EngineError::new(
                    ErrorKind::Timeout,
                    format!(
                        "no answer to `{what}` within {} ms (plugins.callTimeoutMs); the \
                         engine's process (pid {}) was killed",
                        timeout.as_millis(),
                        self.pid
                    ),
                )))
            }
        }
    }

    fn forget(&self, id: u64) {
        if let Ok(mut pending) = self.pending.lock() {
            pending.remove(&id);
        }
    }

    /// Closes the child's stdin and kills it; the reader reaps it.
    fn stop(&self) {
        if let Ok(mut stdin) = self.stdin.lock() {
            stdin.take();
        }
        if let Ok(mut process) = self.process.lock()
            && matches!(process.try_wait(), Ok(None))
        {
            let _ = process.kill();
        }
    }

    /// The child's exit status, waiting up to [`EXIT_WAIT`] after its pipe closed, then
    /// killing it.
    fn reap(&self) -> Option<ExitStatus> {
        let until = Instant::now() + EXIT_WAIT;
        loop {
            let mut process = self.process.lock().ok()?;
            match process.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) if Instant::now() > until => {
                    let _ = process.kill();
                    return process.wait().ok();
                }
                Ok(None) => {}
                Err(_) => return None,
            }
            drop(process);
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Reads the child's frames until its stdout ends: the handshake, answers to calls, service
/// calls (each answered on a thread of its own, so a long `llm.complete` does not hold up the
/// pipe). When the pipe ends, the child is reaped and why it stopped is recorded before the
/// waiting calls are released.
fn read_loop(
    stdout: std::process::ChildStdout,
    running: &Arc<Running>,
    services: &Arc<dyn HostApi>,
    ready: mpsc::SyncSender<crate::engine::pipe::Ready>,
    last_words: &Mutex<VecDeque<String>>,
    stderr_done: &mpsc::Receiver<()>,
) {
    let mut input = BufReader::new(stdout);
    let broken = loop {
        match read_frame(&mut input) {
            Ok(Frame::Ready(r)) => {
                let _ = ready.try_send(r);
            }
            Ok(Frame::Reply { id, result }) => {
                let waiting = running.pending.lock().ok().and_then(|mut p| p.remove(&id));
                if let Some(tx) = waiting {
                    let _ = tx.send(result);
                }
            }
            Ok(Frame::Service {
                id,
                method,
                payload,
            }) => {
                let (running, services) = (running.clone(), services.clone());
                let _ = std::thread::Builder::new()
                    .name(format!("rampart-engine-service-{}", running.id))
                    .spawn(move || {
                        let result = Outcome::of(services.call(&method, &payload));
                        let _ = running.send(&Frame::Reply { id, result });
                    });
            }
            Ok(_) => {}
            Err(PipeError::Closed) => break None,
            Err(e) => break Some(e),
        }
    };
    if broken.is_some() {
        running.stop();
    }
    let status = running.reap();
    // The child's stderr ends with it; its last lines often say why it died.
    let _ = stderr_done.recv_timeout(Duration::from_secs(1));
    let mut reason = match (&broken, status) {
        (Some(e), _) => format!("it broke the protocol ({e}) and was killed"),
        (None, Some(status)) => describe_status(status),
        (None, None) => "it closed its pipe".to_string(),
    };
    if let Ok(words) = last_words.lock()
        && !words.is_empty()
    {
        let joined: Vec<&str> = words.iter().map(String::as_str).collect();
        reason.push_str(&format!(
            "; its last words on stderr: {:?}",
            joined.join(" | ")
        ));
    }
    if let Ok(mut death) = running.death.lock() {
        *death = Some(reason);
    }
    // Dropping the senders releases every waiting call, which then reads the death.
    if let Ok(mut pending) = running.pending.lock() {
        pending.clear();
    }
}

/// Records each line of the child's stderr: log lines under the engine's id at their level
/// (through the services, as an engine in the host logs), anything else as a warning, kept
/// as the child's possible last words.
fn forward_stderr(
    stderr: std::process::ChildStderr,
    id: &str,
    services: &dyn HostApi,
    last_words: &Mutex<VecDeque<String>>,
) {
    let mut input = BufReader::new(stderr);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match input.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        record_stderr_line(&String::from_utf8_lossy(&buf), id, services, last_words);
    }
}

/// Records one line an engine wrote to stderr (a child's, or a WebAssembly engine's): a log
/// line under the engine's id at its level, anything else a warning, kept among the engine's
/// last words (the last [`LAST_WORDS`]) for the line that reports its end.
pub(crate) fn record_stderr_line(
    text: &str,
    id: &str,
    services: &dyn HostApi,
    last_words: &Mutex<VecDeque<String>>,
) {
    let line = text.trim();
    if line.is_empty() {
        return;
    }
    if let Ok(log) = serde_json::from_str::<LogLine>(line)
        && let Some(level) = log.level()
    {
        let fields = if log.fields.is_null() {
            String::new()
        } else {
            log.fields.to_string()
        };
        services.log(level, &log.target, &log.text(), &fields);
        return;
    }
    let shown: String = line.chars().take(300).collect();
    tracing::warn!(target: "rampart::engine", engine = id, "engine process stderr: {shown}");
    if let Ok(mut words) = last_words.lock() {
        if words.len() == LAST_WORDS {
            words.pop_front();
        }
        words.push_back(shown);
    }
}

/// The one phrase that says how a child ended.
pub fn describe_status(status: ExitStatus) -> String {
    if let Some(phrase) = crate::platform::abnormal_end(&status) {
        return phrase;
    }
    match status.code() {
        Some(code) => format!("exited with status {code}"),
        None => "ended without a status".to_string(),
    }
}

/// Spawns `command` from one thread that lives as long as the host.
///
/// Why: `PR_SET_PDEATHSIG` fires when the *thread* that forked the child ends, not the process.
/// Children are started from loader and worker threads that end or are abandoned, so each would
/// be killed with its thread; one lasting spawner thread ties the children to the host's life.
fn spawn_from_a_lasting_thread(command: Command) -> std::io::Result<std::process::Child> {
    type Job = (
        Command,
        mpsc::SyncSender<std::io::Result<std::process::Child>>,
    );
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<Job>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        let _ = std::thread::Builder::new()
            .name("rampart-engine-spawner".into())
            .spawn(move || {
                while let Ok((mut command, reply)) = rx.recv() {
                    let _ = reply.send(command.spawn());
                }
            });
        Mutex::new(tx)
    });
    let (tx, rx) = mpsc::sync_channel(1);
    let sent = spawner
        .lock()
        .map_err(|_| std::io::Error::other("the spawner thread's lock is poisoned"))?
        .send((command, tx));
    if sent.is_err() {
        return Err(std::io::Error::other("the spawner thread is gone"));
    }
    rx.recv()
        .map_err(|_| std::io::Error::other("the spawner thread did not answer"))?
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#[path = "process_tests.rs"]
mod tests;
