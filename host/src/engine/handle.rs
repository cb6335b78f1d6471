//! [`EngineHandle`]: one engine, linked in or living in a library, behind one typed interface
//! with a deadline on every call.
//!
//! Calls run on the engine's own worker thread so the host can stop waiting: a call that
//! overruns its deadline gets its cancel flag raised and the caller receives a `Timeout` error
//! at once. The worker thread cannot be killed; it is abandoned (the slot quarantines the
//! engine, so nothing more is queued behind it). The one exception is a linked engine's
//! bookkeeping calls, which are the host's own code answering in microseconds: they run on the
//! caller's thread (see [`runs_inline`]).

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rampart_engine_api::export::{HostCallCtx, call_ctx_ref, dispatch};
use rampart_engine_api::ffi::FfiEngineBox;
use rampart_engine_api::method::{Call, Method};
use rampart_engine_api::protocol::Feature;
use rampart_engine_api::{CallContext, ContextEngine, EngineError, EngineInfo, ErrorKind, Host};
use rampart_message::wire::{HostTable, STALE_REF, with_host_table};

use crate::engine::process::ChildEngine;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Where an engine's code lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineOrigin {
    /// Linked into the host binary.
    BuiltIn,
    /// Loaded from this library file.
    Library(PathBuf),
    /// An executable that speaks the engine protocol (`command` in plugins.toml).
    Command(crate::config::EngineCommand),
    /// A WebAssembly component run by wasmtime in the host (`isolation = "wasm"`).
    Wasm(PathBuf),
}

impl std::fmt::Display for EngineOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EngineOrigin::BuiltIn => f.write_str("built in"),
            EngineOrigin::Library(p) => write!(f, "{}", p.display()),
            EngineOrigin::Command(c) => write!(f, "command `{c}`"),
            EngineOrigin::Wasm(p) => write!(f, "{} (wasm)", p.display()),
        }
    }
}

enum Backend {
    Linked {
        engine: Arc<dyn ContextEngine>,
        host: Host,
    },
    Library {
        engine: Arc<FfiEngineBox>,
        /// Which messages the engine already holds, when it speaks interned lists
        /// (`Feature::MessageRefs`); `None` sends every message in full.
        table: Option<Arc<Mutex<HostTable>>>,
    },
    /// A library loaded by a child `rampart engine-host`. The same JSON crosses the pipe as
    /// would cross the ABI, deltas included: the child relays it to the library, whose table
    /// mirrors this one.
    Process {
        child: Arc<ChildEngine>,
        table: Option<Arc<Mutex<HostTable>>>,
    },
    /// A WebAssembly component in the host (`isolation = "wasm"`): the same JSON as over the
    /// pipe, through `engine-api/wit/engine.wit`; the call runs on the caller's thread and the
    /// epoch deadline stops it.
    #[cfg(feature = "wasm")]
    Wasm {
        engine: Arc<crate::engine::wasm::WasmEngine>,
        table: Option<Arc<Mutex<HostTable>>>,
    },
}

impl Backend {
    /// Whether calls run on a worker thread of the engine's own: only for code that cannot be
    /// interrupted (an engine linked in or loaded as a library).
    fn needs_worker(&self) -> bool {
        matches!(self, Backend::Linked { .. } | Backend::Library { .. })
    }
}

type Job = Box<dyn FnOnce() + Send>;

/// How long the caller and the worker stay awake waiting for each other (the answer to a call,
/// the next call) before they sleep. Why: a call to an engine in the host is a hand-off to the
/// engine's worker thread and back, and sleeping on each side made every hand-off two kernel
/// wake-ups and context switches (profiled in a replay of tiny messages: 35 % of its time, in
/// `try_to_wake_up` and `futex_wait`). Calls come in bursts (ingest, assemble, after the turn)
/// and most answer within microseconds; a worker that waits longer goes to sleep as before.
const HAND_OFF_SPIN: Duration = Duration::from_micros(50);

/// A message from `rx` if one arrives within `budget`, waiting awake; `None` when none came
/// (or the sender is gone: the caller's blocking receive then says so).
fn spin_for<T>(rx: &mpsc::Receiver<T>, budget: Duration) -> Option<T> {
    let started = Instant::now();
    let mut spins = 0u32;
    loop {
        match rx.try_recv() {
            Ok(value) => return Some(value),
            Err(mpsc::TryRecvError::Disconnected) => return None,
            Err(mpsc::TryRecvError::Empty) => {}
        }
        spins += 1;
        if spins < 64 {
            std::hint::spin_loop();
            continue;
        }
        if started.elapsed() >= budget {
            return None;
        }
        // Past the first few spins, a thread that has work gets the core first: on a busy
        // machine waiting awake must not take time from the work being waited for.
        std::thread::yield_now();
    }
}

/// Whether a call to a *linked* engine runs on the caller's thread rather than the worker's.
///
/// Why: a linked engine is one of the host's own (legacy, memory-core), and its bookkeeping
/// calls — taking in messages, assembling, the turn's end, maintenance — answer in
/// microseconds without waiting on a model or a lock held elsewhere. Handing each to the worker
/// and back cost more than the call: in a replay of tiny messages the hand-offs were a quarter
/// of the wall time and half of the CPU (BENCHMARKS.md, issue 24 item 10). Such a call cannot
/// be abandoned at its deadline, so the calls that may wait on a model or run long (`compact`,
/// `bootstrap`, tools, memory, `dispose`) keep the worker.
fn runs_inline(method_name: &str) -> bool {
    matches!(
        Method::from_name(method_name),
        Some(
            Method::Ingest
                | Method::IngestBatch
                | Method::Assemble
                | Method::AfterTurn
                | Method::Maintain
        )
    )
}

/// `timeout` from now, in Unix milliseconds (0 when it cannot be said), as engines see it.
fn deadline_unix_ms(timeout: Duration) -> u64 {
    SystemTime::now()
        .checked_add(timeout)
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// One engine and the thread its calls run on.
pub struct EngineHandle {
    info: EngineInfo,
    origin: EngineOrigin,
    backend: Backend,
    jobs: Mutex<mpsc::Sender<Job>>,
    call_timeout: Duration,
}

impl std::fmt::Debug for EngineHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineHandle")
            .field("id", &self.info.id)
            .field("origin", &self.origin)
            .finish()
    }
}

impl EngineHandle {
    /// Wraps an engine linked into the host.
    pub fn linked(engine: Arc<dyn ContextEngine>, host: Host, call_timeout: Duration) -> Self {
        let info = engine.info();
        Self::new(
            info,
            EngineOrigin::BuiltIn,
            Backend::Linked { engine, host },
            call_timeout,
        )
    }

    /// Wraps an engine constructed from a library; `info` is its verified handshake.
    pub(crate) fn library(
        engine: FfiEngineBox,
        info: EngineInfo,
        path: PathBuf,
        call_timeout: Duration,
    ) -> Self {
        let table = message_table(&info);
        let backend = Backend::Library {
            engine: Arc::new(engine),
            table,
        };
        Self::new(info, EngineOrigin::Library(path), backend, call_timeout)
    }

    /// Wraps an engine in a child process (a library under `rampart engine-host`, or an
    /// executable); `info` is its verified handshake. Message lists cross as deltas only when
    /// `info` announces `Feature::MessageRefs`; otherwise as plain JSON arrays.
    pub(crate) fn process(
        child: ChildEngine,
        info: EngineInfo,
        origin: EngineOrigin,
        call_timeout: Duration,
    ) -> Self {
        let table = message_table(&info);
        let backend = Backend::Process {
            child: Arc::new(child),
            table,
        };
        Self::new(info, origin, backend, call_timeout)
    }

    /// Wraps a WebAssembly engine past its handshake; `info` is its verified self-description.
    #[cfg(feature = "wasm")]
    pub(crate) fn wasm(
        engine: crate::engine::wasm::WasmEngine,
        info: EngineInfo,
        path: PathBuf,
        call_timeout: Duration,
    ) -> Self {
        let table = message_table(&info);
        let backend = Backend::Wasm {
            engine: Arc::new(engine),
            table,
        };
        Self::new(info, EngineOrigin::Wasm(path), backend, call_timeout)
    }

    /// Whether message lists cross to this engine as deltas against a table it keeps
    /// (`Feature::MessageRefs`), rather than as plain JSON arrays of messages.
    pub fn speaks_message_refs(&self) -> bool {
        match &self.backend {
            Backend::Library { table, .. } | Backend::Process { table, .. } => table.is_some(),
            #[cfg(feature = "wasm")]
            Backend::Wasm { table, .. } => table.is_some(),
            Backend::Linked { .. } => false,
        }
    }

    /// Bytes of call payloads sent to the engine's child process so far, `None` for an engine
    /// in the host. With message lists as deltas, a turn adds about its new messages.
    pub fn bytes_to_child(&self) -> Option<u64> {
        match &self.backend {
            Backend::Process { child, .. } => Some(child.payload_bytes()),
            _ => None,
        }
    }

    /// How many times the engine's child process died and was restarted, `None` for an engine
    /// in the host.
    pub fn restarts(&self) -> Option<u64> {
        match &self.backend {
            Backend::Process { child, .. } => Some(child.restarts()),
            _ => None,
        }
    }

    /// The pid of the child process the engine runs in, `None` for an engine in the host.
    pub fn child_pid(&self) -> Option<u32> {
        match &self.backend {
            Backend::Process { child, .. } => Some(child.pid()),
            _ => None,
        }
    }

    fn new(
        info: EngineInfo,
        origin: EngineOrigin,
        backend: Backend,
        call_timeout: Duration,
    ) -> Self {
        let (tx, rx) = mpsc::channel::<Job>();
        let name = format!("rampart-engine-{}", info.id);
        // An engine in a child needs no worker: its calls wait on the pipe with the deadline,
        // and a child that overruns it is killed, so nothing is left running. Nor does a
        // WebAssembly engine: the epoch deadline interrupts it on the caller's thread.
        if backend.needs_worker() {
            // If the thread cannot be spawned, every call reports it (the channel is closed).
            let _ = std::thread::Builder::new().name(name).spawn(move || {
                loop {
                    let job = match spin_for(&rx, HAND_OFF_SPIN) {
                        Some(job) => job,
                        None => match rx.recv() {
                            Ok(job) => job,
                            Err(_) => break,
                        },
                    };
                    job();
                }
            });
        }
        Self {
            info,
            origin,
            backend,
            jobs: Mutex::new(tx),
            call_timeout,
        }
    }

    /// The engine's verified self-description.
    pub fn info(&self) -> &EngineInfo {
        &self.info
    }

    /// The engine's id.
    pub fn id(&self) -> &str {
        &self.info.id
    }

    /// Where the engine's code lives.
    pub fn origin(&self) -> &EngineOrigin {
        &self.origin
    }

    /// The deadline applied to each call.
    pub fn call_timeout(&self) -> Duration {
        self.call_timeout
    }

    /// Runs `job` on the worker thread and waits at most the call deadline for its answer.
    fn run<R: Send + 'static>(
        &self,
        what: &str,
        job: impl FnOnce(&HostCallCtx) -> Result<R, EngineError> + Send + 'static,
    ) -> Result<R, EngineError> {
        self.run_within(what, self.call_timeout, job)
    }

    /// [`Self::run`] with a deadline of its own (compaction, which may take minutes).
    fn run_within<R: Send + 'static>(
        &self,
        what: &str,
        timeout: Duration,
        job: impl FnOnce(&HostCallCtx) -> Result<R, EngineError> + Send + 'static,
    ) -> Result<R, EngineError> {
        let cancel = Arc::new(AtomicBool::new(false));
        let ctx = HostCallCtx {
            cancel: cancel.clone(),
            deadline_unix_ms: deadline_unix_ms(timeout),
        };
        let (tx, rx) = mpsc::sync_channel::<Result<R, EngineError>>(1);
        let boxed: Job = Box::new(move || {
            let _ = tx.send(job(&ctx));
        });
        let sent = match self.jobs.lock() {
            Ok(jobs) => jobs.send(boxed).is_ok(),
            Err(_) => false,
        };
        if !sent {
            return Err(EngineError::new(
                ErrorKind::Engine,
                format!(
                    "engine `{}` has no worker thread left to run `{what}`",
                    self.info.id
                ),
            ));
        }
        let started = Instant::now();
        // Most calls answer within microseconds: waiting for them awake saves the two
        // sleeps and wake-ups a blocking hand-off costs (a third of a replay's time went to
        // them), and only then does the caller sleep until the deadline.
        let answer = match spin_for(&rx, HAND_OFF_SPIN) {
            Some(answer) => Ok(answer),
            None => rx.recv_timeout(timeout.saturating_sub(started.elapsed())),
        };
        match answer {
            Ok(result) => result,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                cancel.store(true, std::sync::atomic::Ordering::Relaxed);
                Err(EngineError::new(
                    ErrorKind::Timeout,
                    format!(
                        "no answer to `{what}` within {} ms (plugins.callTimeoutMs)",
                        started.elapsed().as_millis()
                    ),
                ))
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(EngineError::new(
                ErrorKind::Engine,
                format!(
                    "the worker thread of engine `{}` died during `{what}`",
                    self.info.id
                ),
            )),
        }
    }

    /// Calls `method` with typed parameters within `timeout`: directly for a linked engine, as
    /// JSON across the ABI for a library.
    fn invoke_within<P, R>(
        &self,
        method_name: &'static str,
        timeout: Duration,
        params: P,
        direct: fn(&dyn ContextEngine, &CallContext<'_>, P) -> Result<R, EngineError>,
    ) -> Result<R, EngineError>
    where
        P: Serialize + Send + 'static,
        R: DeserializeOwned + Send + 'static,
    {
        match &self.backend {
            Backend::Linked { engine, host } if runs_inline(method_name) => {
                let started = Instant::now();
                let cancel = AtomicBool::new(false);
                let cx = CallContext::new(host, &cancel, Some(deadline_unix_ms(timeout)));
                let result = rampart_engine_api::export::guard(method_name, || {
                    direct(&**engine, &cx, params)
                });
                let took = started.elapsed();
                if took > timeout {
                    tracing::warn!(
                        engine = %self.info.id,
                        method = method_name,
                        took_ms = took.as_millis() as u64,
                        timeout_ms = timeout.as_millis() as u64,
                        "a built-in engine's call overran its deadline (it runs on the caller's \
                         thread and cannot be abandoned)"
                    );
                }
                result
            }
            Backend::Linked { engine, host } => {
                let (engine, host) = (engine.clone(), host.clone());
                self.run_within(method_name, timeout, move |ctx| {
                    let cx = CallContext::new(&host, &*ctx.cancel, Some(ctx.deadline_unix_ms));
                    rampart_engine_api::export::guard(method_name, || direct(&*engine, &cx, params))
                })
            }
            Backend::Library { engine, table } => {
                let (engine, table) = (engine.clone(), table.clone());
                self.run_within(method_name, timeout, move |ctx| {
                    let transport = |payload: String| {
                        engine
                            .call(
                                method_name.into(),
                                payload.as_str().into(),
                                call_ctx_ref(ctx),
                            )
                            .into_result()
                            .map(String::from)
                            .map_err(EngineError::from)
                    };
                    call_encoded(method_name, &params, table.as_deref(), transport)
                })
            }
            Backend::Process { child, table } => {
                let transport = |payload: String| child.call(method_name, &payload, timeout);
                call_encoded(method_name, &params, table.as_deref(), transport)
            }
            #[cfg(feature = "wasm")]
            Backend::Wasm { engine, table } => {
                let transport = |payload: String| engine.call(method_name, &payload, timeout);
                call_encoded(method_name, &params, table.as_deref(), transport)
            }
        }
    }

    /// Calls any method by name with a JSON payload, answering JSON. This is how a host reaches
    /// methods newer than the typed ones; an engine that does not know the method answers
    /// `Unsupported`.
    pub fn call_json(&self, method_name: &str, payload: &str) -> Result<String, EngineError> {
        self.call_json_within(method_name, payload, self.call_timeout)
    }

    /// [`Self::call_json`] with a deadline of its own. `rampart engine-host` relays each call
    /// of its host through this, with the host's deadline, so a call is cancelled in the child
    /// when the host stops waiting.
    pub fn call_json_within(
        &self,
        method_name: &str,
        payload: &str,
        timeout: Duration,
    ) -> Result<String, EngineError> {
        let (m, p) = (method_name.to_string(), payload.to_string());
        match &self.backend {
            Backend::Process { child, .. } => child.call(method_name, payload, timeout),
            #[cfg(feature = "wasm")]
            Backend::Wasm { engine, .. } => engine.call(method_name, payload, timeout),
            Backend::Linked { engine, host } => {
                let (engine, host) = (engine.clone(), host.clone());
                self.run_within(method_name, timeout, move |ctx| {
                    let cx = CallContext::new(&host, &*ctx.cancel, Some(ctx.deadline_unix_ms));
                    rampart_engine_api::export::guard(&m, || dispatch(&*engine, &cx, &m, &p))
                })
            }
            Backend::Library { engine, .. } => {
                let engine = engine.clone();
                self.run_within(method_name, timeout, move |ctx| {
                    engine
                        .call(m.as_str().into(), p.as_str().into(), call_ctx_ref(ctx))
                        .into_result()
                        .map(String::from)
                        .map_err(EngineError::from)
                })
            }
        }
    }

    /// Calls the method `params` are for ([`Call::METHOD`]) within the call deadline: on the
    /// linked engine directly, or across the ABI as JSON with message lists as deltas. One
    /// generic entry for every method, so a method is listed only in the engine API.
    pub fn call<C: Call>(&self, params: C) -> Result<C::Output, EngineError> {
        self.call_within(params, self.call_timeout)
    }

    /// [`Self::call`] with a deadline of its own: a compaction waits on summaries and may take
    /// minutes, far beyond the usual call deadline. The engine enforces the compaction's
    /// timeout itself; this deadline is the host's backstop.
    pub fn call_within<C: Call>(
        &self,
        params: C,
        timeout: Duration,
    ) -> Result<C::Output, EngineError> {
        self.invoke_within(C::METHOD.name(), timeout, params, |e, cx, p: C| {
            p.invoke(e, cx)
        })
    }

    /// Retires the engine (`dispose`). The library stays loaded: unloading is never safe.
    pub fn shutdown(&self) -> Result<(), EngineError> {
        match &self.backend {
            Backend::Linked { engine, .. } => {
                let engine = engine.clone();
                self.run(Method::Dispose.name(), move |_| {
                    rampart_engine_api::export::guard(Method::Dispose.name(), || engine.dispose())
                })
            }
            Backend::Library { engine, .. } => {
                let engine = engine.clone();
                self.run(Method::Dispose.name(), move |_| {
                    engine.shutdown().into_result().map_err(EngineError::from)
                })
            }
            Backend::Process { child, .. } => child.shutdown(self.call_timeout),
            #[cfg(feature = "wasm")]
            Backend::Wasm { engine, .. } => engine.shutdown(self.call_timeout),
        }
    }
}

/// The table of an engine that keeps interned lists (`Feature::MessageRefs`), else `None`.
fn message_table(info: &EngineInfo) -> Option<Arc<Mutex<HostTable>>> {
    info.protocol
        .supports(&Feature::MessageRefs)
        .then(|| Arc::new(Mutex::new(HostTable::new())))
}

/// A call as JSON through `transport` (the ABI, or a child's pipe), message lists as deltas
/// when there is a table; an engine that lost what the table says it holds gets the call once
/// more, in full.
fn call_encoded<P: Serialize, R: DeserializeOwned>(
    method_name: &str,
    params: &P,
    table: Option<&Mutex<HostTable>>,
    transport: impl Fn(String) -> Result<String, EngineError>,
) -> Result<R, EngineError> {
    let Some(table) = table else {
        return call_library(method_name, params, None, &transport);
    };
    let mut table = match table.lock() {
        Ok(t) => t,
        Err(poisoned) => poisoned.into_inner(),
    };
    match call_library(method_name, params, Some(&mut table), &transport) {
        // The engine lost messages it should hold (it was rebuilt, its process restarted, or
        // an earlier call failed half-way): send everything once more in full.
        Err(e) if e.message.contains(STALE_REF) => {
            table.forget();
            call_library(method_name, params, Some(&mut table), &transport)
        }
        other => other,
    }
}

/// One call across the ABI: encode, call, decode. With a table, message lists are interned and
/// the table learns what the engine now holds (or forgets everything when the call fails).
fn call_library<P: Serialize, R: DeserializeOwned>(
    method_name: &str,
    params: &P,
    table: Option<&mut HostTable>,
    call: &dyn Fn(String) -> Result<String, EngineError>,
) -> Result<R, EngineError> {
    let encode =
        || serde_json::to_string(params).map_err(|e| EngineError::invalid_params(method_name, e));
    let decode = |answer: &str| {
        serde_json::from_str(answer).map_err(|e| {
            EngineError::new(
                ErrorKind::Incompatible,
                format!("the engine's answer to `{method_name}` does not decode: {e}"),
            )
        })
    };
    let Some(table) = table else {
        return decode(call(encode()?)?.as_str());
    };
    table.begin();
    let result = with_host_table(table, encode)
        .and_then(call)
        .and_then(|answer| with_host_table(table, || decode(answer.as_str())));
    match &result {
        Ok(_) => table.commit(),
        // An engine that declines a method has read the request (the Rust SDK decodes before
        // it dispatches; an executable that speaks deltas reads every list it is sent): it
        // holds the request's list. Forgetting here sent the whole history again after every
        // turn's `after_turn` and `maintain` that a simple engine declines. Should it not hold
        // the list after all, the next delta is refused as stale and goes again in full.
        Err(e) if e.kind == ErrorKind::Unsupported => table.commit(),
        Err(_) => table.forget(),
    }
    result
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "handle_tests.rs"]
mod tests;
