//! An engine that is a WebAssembly component (`isolation = "wasm"`, the `wasm` feature), run by
//! wasmtime in the host's process through the world `engine-api/wit/engine.wit`.
//!
//! Why: a component can touch nothing the host does not hand it, so a third party's engine runs
//! in the host without a child process and still cannot read the user's files, open a socket,
//! spin forever or eat the machine's memory. What it is handed:
//! - WASI preview 2 with no preopened directory unless `wasm.dir` grants one (seen by the engine
//!   at the same absolute path), no network, no environment, no arguments;
//! - the protocol's messages (docs/engine-protocol.md): `hello` with the pipe's `hello` object,
//!   then `call(method, payload)` with the same JSON as the pipe's `call` frame, and the host's
//!   services through the `host.service` import;
//! - a deadline per call (epoch interruption, the call's own deadline: `plugins.callTimeoutMs`,
//!   longer for a compaction) and a cap on its linear memory (`wasm.memoryMb`).
//!
//! A trap (an `unreachable`, a Rust panic), an overrun of the deadline or a `memory.grow` past
//! the cap ends the call with an error naming the cause, the engine's last words on stderr with
//! it; the instance is never entered again (its state may be half-written), so every later call
//! fails the same way and the slot quarantines the engine as it does a child that died.
//!
//! Everything the engine writes to stderr (or stdout) is read line by line as an executable's
//! stderr (section 8 of the protocol): a JSON line with a `level` is a log line.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use rampart_engine_api::{EngineError, EngineInfo, ErrorKind, HostApi, LogLevel};
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{ResourceLimiter, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::config::WasmSettings;
use crate::engine::pipe::{Hello, PIPE_VERSION};

mod bindings {
    //! The host's side of `engine-api/wit/engine.wit`, generated at build time.
    wasmtime::component::bindgen!({
        path: "../engine-api/wit",
        world: "context-engine",
    });
}

mod stderr;

use bindings::ContextEngine;
use bindings::rampart::engine::types::EngineError as WitError;

/// How often the epoch advances: the resolution of the per-call deadline.
const TICK: Duration = Duration::from_millis(10);

/// How many of the engine's stderr lines that are not log lines are quoted when it fails.
const LAST_WORDS: usize = 4;

/// Everything needed to start one WebAssembly engine.
#[derive(Clone)]
pub struct WasmSpec {
    /// The configured id.
    pub id: String,
    /// Check the handshake's id against `id`.
    pub verify_id: bool,
    /// The component file (`plugins.engines.<id>.path`).
    pub path: PathBuf,
    /// The engine's `config` table.
    pub config: serde_json::Value,
    /// The services that answer the engine's `host.service` calls.
    pub services: Arc<dyn HostApi>,
    /// Deadline for the handshake.
    pub load_timeout: Duration,
    /// The usual deadline of a call (`plugins.callTimeoutMs`), sent in `hello`.
    pub call_timeout: Duration,
    /// The most verbose log level the host records.
    pub max_log_level: Option<LogLevel>,
    /// What the engine is granted: a directory, its memory.
    pub settings: WasmSettings,
}

/// Why a component did not become an engine.
#[derive(Debug, thiserror::Error)]
pub enum WasmStartError {
    /// The file could not be read or compiled (not a component, a core module, damaged).
    #[error(
        "`{}` cannot be run as a WebAssembly engine: {reason}; build it for wasm32-wasip2 \
         against engine-api/wit/engine.wit (see examples/engines/wasm)",
        path.display()
    )]
    Compile {
        /// The file.
        path: PathBuf,
        /// What wasmtime said.
        reason: String,
    },
    /// The component does not fit the world: it imports something the host does not offer, or
    /// does not export `rampart:engine/engine`.
    #[error("`{}` is a component but not a Rampart engine: {reason}", path.display())]
    World {
        /// The file.
        path: PathBuf,
        /// What wasmtime said.
        reason: String,
    },
    /// `wasm.dir` cannot be opened.
    #[error(
        "cannot grant `{}` to the WebAssembly engine (plugins.engines.<id>.wasm.dir): {reason}",
        dir.display()
    )]
    Dir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        reason: String,
    },
    /// The handshake trapped, overran `plugins.loadTimeoutMs`, or answered what is not an
    /// `EngineInfo`.
    #[error("the WebAssembly engine `{}` failed its handshake: {reason}", path.display())]
    Handshake {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The engine answered `hello` with why it cannot start.
    #[error("the engine `{}` refused to start: {reason}", path.display())]
    Refused {
        /// The file.
        path: PathBuf,
        /// Its message, as it reads.
        reason: String,
    },
}

/// What a store holds: the engine's WASI context, its resources, its memory cap, and the
/// services it may call.
struct State {
    wasi: WasiCtx,
    table: ResourceTable,
    services: Arc<dyn HostApi>,
    limiter: MemoryCap,
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl bindings::rampart::engine::types::Host for State {}

impl bindings::rampart::engine::host::Host for State {
    fn service(&mut self, method: String, payload: String) -> Result<String, WitError> {
        self.services.call(&method, &payload).map_err(|e| WitError {
            kind: e.kind.code(),
            details: (!e.details.is_null()).then(|| e.details.to_string()),
            message: e.message,
        })
    }
}

/// `wasm.memoryMb`: refuses any `memory.grow` past the cap with a trap that says so, and
/// remembers it, so the call's error names the cap rather than a bare trap.
struct MemoryCap {
    bytes: usize,
    hit: Option<usize>,
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.bytes {
            self.hit = Some(desired);
            return Err(wasmtime::format_err!(
                "memory cap: the engine asked for {} MiB, past wasm.memoryMb = {}",
                desired.div_ceil(1 << 20),
                self.bytes >> 20
            ));
        }
        Ok(maximum.is_none_or(|max| desired <= max))
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(maximum.is_none_or(|max| desired <= max))
    }
}

/// A live instance and its store. `None` once it trapped: it is never entered again.
struct Live {
    store: Store<State>,
    engine: ContextEngine,
}

/// One WebAssembly engine, instantiated and past its handshake.
pub struct WasmEngine {
    id: String,
    path: PathBuf,
    live: Mutex<Option<Live>>,
    /// Why the instance was stopped, repeated to every later call.
    stopped: Mutex<Option<String>>,
    last_words: Arc<Mutex<VecDeque<String>>>,
}

impl std::fmt::Debug for WasmEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmEngine")
            .field("id", &self.id)
            .field("path", &self.path)
            .finish()
    }
}

/// The one wasmtime engine of the process, with epoch interruption on, and the thread that
/// advances its epoch every [`TICK`]. Started at the first WebAssembly engine.
fn runtime() -> Result<&'static wasmtime::Engine, String> {
    static RUNTIME: OnceLock<Result<wasmtime::Engine, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            let mut config = wasmtime::Config::new();
            config.epoch_interruption(true);
            config.wasm_component_model(true);
            let engine = wasmtime::Engine::new(&config).map_err(|e| e.to_string())?;
            let weak = engine.weak();
            std::thread::Builder::new()
                .name("rampart-wasm-epoch".into())
                .spawn(move || {
                    while let Some(engine) = weak.upgrade() {
                        engine.increment_epoch();
                        drop(engine);
                        std::thread::sleep(TICK);
                    }
                })
                .map_err(|e| format!("cannot start the epoch thread: {e}"))?;
            Ok(engine)
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Epoch ticks for `timeout`, rounded up, plus one for the tick in progress.
fn ticks(timeout: Duration) -> u64 {
    (timeout.as_nanos().div_ceil(TICK.as_nanos()) as u64).saturating_add(1)
}

/// Compiles the component at `path` (the start-up cost: tens of milliseconds for a small
/// engine in a release build).
fn compile(path: &Path) -> Result<Component, WasmStartError> {
    let engine = runtime().map_err(|reason| WasmStartError::Compile {
        path: path.to_path_buf(),
        reason,
    })?;
    Component::from_file(engine, path).map_err(|e| WasmStartError::Compile {
        path: path.to_path_buf(),
        reason: format!("{e:#}"),
    })
}

impl WasmEngine {
    /// Compiles and instantiates the component, then runs its handshake under
    /// `spec.load_timeout`, checking what it says about itself as a library's is checked.
    pub fn start(spec: &WasmSpec) -> Result<(Self, EngineInfo), WasmStartError> {
        let started = Instant::now();
        let component = compile(&spec.path)?;
        let engine = runtime().map_err(|reason| WasmStartError::Compile {
            path: spec.path.clone(),
            reason,
        })?;
        let last_words = Arc::new(Mutex::new(VecDeque::with_capacity(LAST_WORDS)));
        let mut wasi = WasiCtxBuilder::new();
        let sink = stderr::LineSink::new(&spec.id, spec.services.clone(), last_words.clone());
        wasi.stderr(sink.clone()).stdout(sink);
        if let Some(dir) = &spec.settings.dir {
            let shown = dir.to_string_lossy().into_owned();
            wasi.preopened_dir(dir, &shown, wasmtime_wasi::FsPerms::ReadWrite)
                .map_err(|e| WasmStartError::Dir {
                    dir: dir.clone(),
                    reason: format!("{e:#}"),
                })?;
        }
        let state = State {
            wasi: wasi.build(),
            table: ResourceTable::new(),
            services: spec.services.clone(),
            limiter: MemoryCap {
                bytes: usize::try_from(spec.settings.memory_mb << 20).unwrap_or(usize::MAX),
                hit: None,
            },
        };
        let mut store = Store::new(engine, state);
        store.limiter(|s| &mut s.limiter);
        store.set_epoch_deadline(ticks(spec.load_timeout));
        let mut linker = Linker::<State>::new(engine);
        let world = |e: wasmtime::Error| WasmStartError::World {
            path: spec.path.clone(),
            reason: format!("{e:#}"),
        };
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(world)?;
        ContextEngine::add_to_linker::<State, HasSelf<State>>(&mut linker, |s| s).map_err(world)?;
        let bindings =
            ContextEngine::instantiate(&mut store, &component, &linker).map_err(world)?;
        let hello = Hello {
            version: PIPE_VERSION,
            features: Vec::new(),
            engine_id: spec.id.clone(),
            verify_id: spec.verify_id,
            path: spec.path.clone(),
            config: spec.config.clone(),
            load_timeout_ms: spec.load_timeout.as_millis() as u64,
            call_timeout_ms: spec.call_timeout.as_millis() as u64,
            max_log_level: spec.max_log_level,
        };
        let hello = serde_json::to_string(&hello).map_err(|e| WasmStartError::Handshake {
            path: spec.path.clone(),
            reason: e.to_string(),
        })?;
        let answer = bindings
            .rampart_engine_engine()
            .call_hello(&mut store, &hello);
        let handshake = |reason: String| WasmStartError::Handshake {
            path: spec.path.clone(),
            reason,
        };
        let info = match answer {
            Ok(Ok(info)) => info,
            Ok(Err(reason)) => {
                return Err(WasmStartError::Refused {
                    path: spec.path.clone(),
                    reason,
                });
            }
            Err(e) => {
                let why = describe_trap(
                    &e,
                    &store,
                    "hello",
                    spec.load_timeout,
                    "plugins.loadTimeoutMs",
                );
                return Err(handshake(with_last_words(why, &last_words)));
            }
        };
        let info: EngineInfo = serde_json::from_str(&info)
            .map_err(|e| handshake(format!("its answer to `hello` is not an EngineInfo: {e}")))?;
        tracing::debug!(
            target: "rampart::engine",
            engine = %spec.id,
            path = %spec.path.display(),
            start_ms = started.elapsed().as_millis() as u64,
            memory_mb = spec.settings.memory_mb,
            dir = ?spec.settings.dir,
            "WebAssembly engine started"
        );
        let engine = WasmEngine {
            id: spec.id.clone(),
            path: spec.path.clone(),
            live: Mutex::new(Some(Live {
                store,
                engine: bindings,
            })),
            stopped: Mutex::new(None),
            last_words,
        };
        Ok((engine, info))
    }

    /// Calls engine method `method` with `payload` within `timeout`. A trap, an overrun or the
    /// memory cap stops the instance for good and is this call's error (kind `timeout` for an
    /// overrun, `engine` otherwise), as is every later call's.
    pub fn call(
        &self,
        method: &str,
        payload: &str,
        timeout: Duration,
    ) -> Result<String, EngineError> {
        let mut live = match self.live.lock() {
            Ok(l) => l,
            Err(poisoned) => poisoned.into_inner(),
        };
        let Some(instance) = live.as_mut() else {
            let why = match self.stopped.lock() {
                Ok(s) => s.clone(),
                Err(p) => p.into_inner().clone(),
            };
            return Err(EngineError::new(
                ErrorKind::Engine,
                format!(
                    "the WebAssembly engine was stopped earlier ({})",
                    why.unwrap_or_else(|| "it trapped".into())
                ),
            ));
        };
        instance.store.set_epoch_deadline(ticks(timeout));
        let answer =
            instance
                .engine
                .rampart_engine_engine()
                .call_call(&mut instance.store, method, payload);
        match answer {
            Ok(Ok(json)) => Ok(json),
            Ok(Err(e)) => Err(from_wit(e)),
            Err(trap) => {
                let interrupted = is_interrupt(&trap);
                let why = describe_trap(
                    &trap,
                    &instance.store,
                    method,
                    timeout,
                    "plugins.callTimeoutMs",
                );
                let why = with_last_words(why, &self.last_words);
                *live = None;
                if let Ok(mut stopped) = self.stopped.lock() {
                    *stopped = Some(why.clone());
                }
                tracing::warn!(
                    target: "rampart::engine",
                    engine = %self.id,
                    path = %self.path.display(),
                    method,
                    "WebAssembly engine stopped: {why}"
                );
                let kind = if interrupted {
                    ErrorKind::Timeout
                } else {
                    ErrorKind::Engine
                };
                Err(EngineError::new(kind, why))
            }
        }
    }

    /// Retires the engine: `dispose` (an engine without it is fine), then drops the instance.
    pub fn shutdown(&self, timeout: Duration) -> Result<(), EngineError> {
        let result = match self.call("dispose", "{}", timeout) {
            Err(e) if e.kind == ErrorKind::Unsupported => Ok(()),
            Err(e) if self.is_stopped() => {
                tracing::debug!(target: "rampart::engine", engine = %self.id, error = %e.message, "stopped engine retired");
                Ok(())
            }
            other => other.map(|_| ()),
        };
        if let Ok(mut live) = self.live.lock() {
            *live = None;
        }
        result
    }

    fn is_stopped(&self) -> bool {
        self.stopped.lock().map(|s| s.is_some()).unwrap_or(true)
    }
}

fn from_wit(e: WitError) -> EngineError {
    let mut error = EngineError::new(ErrorKind::from_code(e.kind), e.message);
    if let Some(details) = e.details.as_deref()
        && let Ok(value) = serde_json::from_str::<serde_json::Value>(details)
    {
        error = error.with_details(value);
    }
    error
}

fn is_interrupt(e: &wasmtime::Error) -> bool {
    matches!(
        e.downcast_ref::<wasmtime::Trap>(),
        Some(wasmtime::Trap::Interrupt)
    )
}

/// The phrase for a call that did not return: an overrun, the memory cap, or the trap's own
/// words.
fn describe_trap(
    e: &wasmtime::Error,
    store: &Store<State>,
    method: &str,
    timeout: Duration,
    key: &str,
) -> String {
    if is_interrupt(e) {
        return format!(
            "no answer to `{method}` within {} ms ({key}); the WebAssembly engine was interrupted",
            timeout.as_millis()
        );
    }
    if let Some(bytes) = store.data().limiter.hit {
        return format!(
            "the WebAssembly engine ran out of memory during `{method}`: it asked for {} MiB, \
             past its cap of {} MiB (wasm.memoryMb)",
            bytes.div_ceil(1 << 20),
            store.data().limiter.bytes >> 20
        );
    }
    let trap = match e.downcast_ref::<wasmtime::Trap>() {
        Some(trap) => trap.to_string(),
        None => e.to_string(),
    };
    format!("the WebAssembly engine trapped during `{method}`: {trap}")
}

fn with_last_words(why: String, last_words: &Mutex<VecDeque<String>>) -> String {
    let words = match last_words.lock() {
        Ok(w) => w.iter().cloned().collect::<Vec<_>>(),
        Err(_) => Vec::new(),
    };
    if words.is_empty() {
        why
    } else {
        format!("{why}; its last words on stderr: {}", words.join(" | "))
    }
}

#[cfg(test)]
#[path = "wasm_tests.rs"]
mod tests;
