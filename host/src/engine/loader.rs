//! Loading an engine library: every check that can run before the engine's code does, then the
//! handshake, all under a deadline.
//!
//! Order, cheapest and safest first:
//! 1. the file exists, is a regular file, and its headers claim nothing past its end
//!    (`library_file`: mapping a truncated file kills the process with SIGBUS);
//! 2. `lib_header_from_path` opens it and finds abi_stable's header (never `load_from_file`,
//!    which caches the first library of a root-module type and silently returns it again);
//! 3. the header's engine-api version has our major, checked before any layout check or
//!    constructor runs;
//! 4. `init_root_module` checks the layout of the whole typed surface;
//! 5. `abi_info`, then `new_engine` with the host's services and the engine's config;
//! 6. the handshake: `info.id` must be the configured id and the protocol must be compatible.
//!
//! Which ABI a library speaks is told by its exports, after step 1: a library exporting
//! `rampart_engine_v1` is a C ABI engine (`engine-api/include/rampart_engine.h`), whose table's
//! `abi_version` is checked before any other function in it runs (steps 2–4 for that ABI);
//! it then constructs and shakes hands as in steps 5–6. Every other library goes through
//! abi_stable's steps 2–4.
//!
//! Steps 2–6 run on a separate thread under `plugins.loadTimeoutMs`, because they execute the
//! library's code (its constructors run at `dlopen`). Libraries are never unloaded.

use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use abi_stable::library::{LibraryError, RootModule, RootModuleError, lib_header_from_path};
use rampart_engine_api::c_abi;
use rampart_engine_api::export::host_to_ffi;
use rampart_engine_api::ffi::{EngineModule_Ref, FfiEngineBox};
use rampart_engine_api::protocol::{ProtocolInfo, major_of};
use rampart_engine_api::{EngineError, EngineInfo, EngineInit, ErrorKind, HostApi};

use crate::engine::handle::EngineHandle;

/// Why a library could not become an engine. Each message names the file and says what to do.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The path does not exist.
    #[error("engine library `{}` does not exist; build the engine or fix `path`", path.display())]
    Missing {
        /// The configured path.
        path: PathBuf,
    },
    /// The path is not a regular file.
    #[error("engine library `{}` is not a file", path.display())]
    NotAFile {
        /// The configured path.
        path: PathBuf,
    },
    /// The OS loader refused the file: not a shared library, wrong architecture, missing deps.
    #[error("`{}` is not a loadable shared library for this platform: {reason}", path.display())]
    NotALibrary {
        /// The file.
        path: PathBuf,
        /// What the OS loader said.
        reason: String,
    },
    /// The file's headers claim more than the file holds, or are not an object file's: mapping
    /// it would crash the process (SIGBUS), so it is never handed to the OS loader.
    #[error("engine library `{}` cannot be loaded: {damage}", path.display())]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        damage: crate::engine::library_file::Damage,
    },
    /// A shared library without the engine ABI's header.
    #[error(
        "`{}` is a shared library but not a Rampart engine: it exports no engine header. \
         Build it with `rampart_engine_api::export_engine!(YourEngine)`, or export \
         `rampart_engine_v1` as rampart_engine.h describes",
        path.display()
    )]
    NotAnEngine {
        /// The file.
        path: PathBuf,
    },
    /// Built for an engine API major this host does not speak.
    #[error(
        "`{}` was built for engine API {found}; this host supports API {supported}.x. \
         Rebuild the engine against rampart-engine-api {supported}.x",
        path.display()
    )]
    ApiVersion {
        /// The file.
        path: PathBuf,
        /// The version in the library's header.
        found: String,
        /// The major this host speaks.
        supported: u32,
    },
    /// A library exporting the C ABI's entry point whose table cannot be used (NULL, another
    /// version, a NULL function, unreadable info).
    #[error("`{}` cannot be loaded as a C ABI engine: {problem}", path.display())]
    CAbi {
        /// The file.
        path: PathBuf,
        /// What is wrong with its table.
        problem: rampart_engine_api::c_abi::CAbiError,
    },
    /// The typed surface does not match (built with an incompatible abi_stable or interface).
    #[error("`{}` has an incompatible engine ABI: {reason}", path.display())]
    Incompatible {
        /// The file.
        path: PathBuf,
        /// abi_stable's explanation, condensed.
        reason: String,
    },
    /// The library's module or engine constructor failed or panicked.
    #[error("the engine in `{}` failed to construct: {source}", path.display())]
    Construct {
        /// The file.
        path: PathBuf,
        /// What the constructor reported (kind `panicked` for a panic). Boxed: an error's
        /// details are a JSON map, which made every `Result` of the loader large.
        source: Box<EngineError>,
    },
    /// The engine answered the handshake with another id.
    #[error(
        "`{}` reports engine id `{found}` but the configuration loads it as `{expected}`; \
         use `{found}` in plugins.toml or point `{expected}` at the right library",
        path.display()
    )]
    IdMismatch {
        /// The file.
        path: PathBuf,
        /// The configured id.
        expected: String,
        /// The id in `info()`.
        found: String,
    },
    /// The engine's child process (`isolation = "process"`) did not start, died while loading,
    /// or did not finish its handshake.
    #[error("the engine process for `{}` failed: {source}", path.display())]
    Process {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: crate::engine::process::StartError,
    },
    /// The loader in the engine's child process refused the library; its message, as it reads.
    #[error("{0}")]
    InChild(String),
    /// A WebAssembly engine (`isolation = "wasm"`) could not be compiled, instantiated, or
    /// failed its handshake; the message names the file and the cause.
    #[error("{0}")]
    Wasm(String),
    /// `isolation = "wasm"` (or a `.wasm` file) on a host built without the `wasm` feature.
    #[error(
        "`{}` is a WebAssembly engine, but this rampart was built without the `wasm` feature; \
         rebuild it with `cargo build --release --features wasm`",
        path.display()
    )]
    WasmNotBuilt {
        /// The component.
        path: PathBuf,
    },
    /// Loading, checking and constructing took longer than `plugins.loadTimeoutMs`.
    #[error(
        "loading `{}` did not finish within {} ms (plugins.loadTimeoutMs); the library stays \
         loaded but unused",
        path.display(),
        timeout.as_millis()
    )]
    Timeout {
        /// The file.
        path: PathBuf,
        /// The deadline.
        timeout: Duration,
    },
}

/// What a library says about itself, read without constructing an engine (`engines check`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibraryFacts {
    /// The canonical path of the library.
    pub path: PathBuf,
    /// The engine-api version in the header.
    pub api_version: String,
}

/// Requests for loading one engine.
#[derive(Clone)]
pub struct LoadRequest {
    /// The configured id; the handshake must report it (unless `verify_id` is false).
    pub id: String,
    /// Check the handshake's id against `id`. Off only for `engines check PATH`, which has
    /// no configured id to compare with.
    pub verify_id: bool,
    /// The library file.
    pub path: PathBuf,
    /// The engine's `config` table.
    pub config: serde_json::Value,
    /// The services the engine will call back.
    pub services: Arc<dyn HostApi>,
    /// Deadline for the whole load.
    pub load_timeout: Duration,
    /// Deadline for each later call.
    pub call_timeout: Duration,
    /// The most verbose log level the host records.
    pub max_log_level: Option<rampart_engine_api::LogLevel>,
}

/// Loads, checks and constructs the engine of `req`, under `req.load_timeout`.
pub fn load_engine(req: LoadRequest) -> Result<EngineHandle, LoadError> {
    let path = check_file(&req.path)?;
    let timeout = req.load_timeout;
    let (tx, rx) = mpsc::sync_channel(1);
    let worker_path = path.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("rampart-load-{}", req.id))
        .spawn(move || {
            let _ = tx.send(load_on_this_thread(&worker_path, &req));
        });
    if let Err(e) = spawned {
        return Err(LoadError::Construct {
            path,
            source: Box::new(EngineError::new(
                ErrorKind::Host,
                format!("cannot start a loader thread: {e}"),
            )),
        });
    }
    match rx.recv_timeout(timeout) {
        Ok(result) => result,
        Err(_) => Err(LoadError::Timeout { path, timeout }),
    }
}

/// Loads the engine of `req` in a child `rampart engine-host` (`isolation = "process"`): the
/// file checks run here, everything that runs the library's code runs in the child, which
/// answers the handshake the in-process loader would.
pub fn load_engine_in_child(
    req: LoadRequest,
    settings: crate::config::ProcessSettings,
) -> Result<EngineHandle, LoadError> {
    use crate::engine::process::{ChildEngine, ProcessSpec, StartError};
    let path = check_file(&req.path)?;
    let spec = ProcessSpec {
        id: req.id,
        verify_id: req.verify_id,
        path: path.clone(),
        command: None,
        config: req.config,
        services: req.services,
        load_timeout: req.load_timeout,
        call_timeout: req.call_timeout,
        max_log_level: req.max_log_level,
        settings,
    };
    match ChildEngine::start(spec) {
        Ok((child, info)) => Ok(EngineHandle::process(
            child,
            info,
            crate::engine::handle::EngineOrigin::Library(path),
            req.call_timeout,
        )),
        Err(StartError::Refused(message)) => Err(LoadError::InChild(message)),
        Err(source) => Err(LoadError::Process { path, source }),
    }
}

/// Starts the executable engine of `command` (`plugins.engines.<id>.command`) as the child,
/// instead of `rampart engine-host`, and checks its handshake as the loader checks a library's.
/// Everything after the handshake (deadlines, restarts, limits, quarantine) is the child path's.
pub fn load_executable(
    req: LoadRequest,
    command: crate::config::EngineCommand,
    settings: crate::config::ProcessSettings,
) -> Result<EngineHandle, LoadError> {
    use crate::engine::handle::EngineOrigin;
    use crate::engine::process::{ChildEngine, ProcessSpec, StartError};
    // What messages name the engine by: its command, as configured.
    let shown = PathBuf::from(command.to_string());
    let spec = ProcessSpec {
        id: req.id.clone(),
        verify_id: req.verify_id,
        path: command.program.clone(),
        command: Some(command.clone()),
        config: req.config,
        services: req.services,
        load_timeout: req.load_timeout,
        call_timeout: req.call_timeout,
        max_log_level: req.max_log_level,
        settings,
    };
    let (child, info) = match ChildEngine::start(spec) {
        Ok(started) => started,
        Err(StartError::Refused(message)) => {
            return Err(LoadError::InChild(format!(
                "the engine `{shown}` refused to start: {message}",
                shown = shown.display()
            )));
        }
        Err(source) => {
            return Err(LoadError::Process {
                path: shown,
                source,
            });
        }
    };
    let info = match check_info(&shown, info, req.verify_id.then_some(req.id.as_str())) {
        Ok(info) => info,
        Err(e) => {
            let _ = child.shutdown(Duration::from_millis(100));
            return Err(e);
        }
    };
    Ok(EngineHandle::process(
        child,
        info,
        EngineOrigin::Command(command),
        req.call_timeout,
    ))
}

/// Whether `path` names a WebAssembly component (`.wasm`), which `engines check` runs as
/// `isolation = "wasm"` rather than as a library.
pub fn is_wasm_path(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("wasm"))
}

/// Compiles and instantiates the WebAssembly component of `req.path` (`isolation = "wasm"`)
/// with what `settings` grants, and checks its handshake as a library's is checked.
pub fn load_wasm(
    req: LoadRequest,
    settings: crate::config::WasmSettings,
) -> Result<EngineHandle, LoadError> {
    if !req.path.exists() {
        return Err(LoadError::Missing { path: req.path });
    }
    if !req.path.is_file() {
        return Err(LoadError::NotAFile { path: req.path });
    }
    #[cfg(feature = "wasm")]
    {
        use crate::engine::wasm::{WasmEngine, WasmSpec};
        let spec = WasmSpec {
            id: req.id.clone(),
            verify_id: req.verify_id,
            path: req.path.clone(),
            config: req.config,
            services: req.services,
            load_timeout: req.load_timeout,
            call_timeout: req.call_timeout,
            max_log_level: req.max_log_level,
            settings,
        };
        let (engine, info) =
            WasmEngine::start(&spec).map_err(|e| LoadError::Wasm(e.to_string()))?;
        let info = match check_info(&req.path, info, req.verify_id.then_some(req.id.as_str())) {
            Ok(info) => info,
            Err(e) => {
                let _ = engine.shutdown(Duration::from_millis(100));
                return Err(e);
            }
        };
        Ok(EngineHandle::wasm(engine, info, req.path, req.call_timeout))
    }
    #[cfg(not(feature = "wasm"))]
    {
        let _ = settings;
        Err(LoadError::WasmNotBuilt { path: req.path })
    }
}

/// Reads a library's header without constructing an engine. Runs no engine code beyond the
/// library's static constructors (which `dlopen` always runs).
pub fn inspect_library(path: &Path) -> Result<LibraryFacts, LoadError> {
    let path = check_file(path)?;
    if open_c_library(&path)?.is_some() {
        return Ok(LibraryFacts {
            path,
            api_version: format!("C ABI {}", c_abi::C_ABI_VERSION),
        });
    }
    let header = lib_header_from_path(&path).map_err(|e| map_library_error(&path, e))?;
    let api_version = header.version_strings().version.as_str().to_string();
    check_api_version(&path, &api_version)?;
    header
        .init_root_module::<EngineModule_Ref>()
        .map_err(|e| map_library_error(&path, e))?;
    Ok(LibraryFacts { path, api_version })
}

fn check_file(path: &Path) -> Result<PathBuf, LoadError> {
    match std::fs::metadata(path) {
        Err(_) => Err(LoadError::Missing {
            path: path.to_path_buf(),
        }),
        Ok(meta) if !meta.is_file() => Err(LoadError::NotAFile {
            path: path.to_path_buf(),
        }),
        Ok(_) => {
            // Canonical, so the same library reached by two spellings is recognised as one.
            let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
            crate::engine::library_file::check(&path).map_err(|damage| LoadError::Damaged {
                path: path.clone(),
                damage,
            })?;
            Ok(path)
        }
    }
}

fn check_api_version(path: &Path, found: &str) -> Result<(), LoadError> {
    if major_of(found) == Some(rampart_engine_api::API_MAJOR) {
        Ok(())
    } else {
        Err(LoadError::ApiVersion {
            path: path.to_path_buf(),
            found: found.to_string(),
            supported: rampart_engine_api::API_MAJOR,
        })
    }
}

/// The C ABI table of the library at `path`, checked; `None` when it does not export one.
fn open_c_library(path: &Path) -> Result<Option<c_abi::CLibrary>, LoadError> {
    c_abi::open(path).map_err(|problem| match problem {
        c_abi::CAbiError::NotALibrary(reason) => LoadError::NotALibrary {
            path: path.to_path_buf(),
            reason,
        },
        problem => LoadError::CAbi {
            path: path.to_path_buf(),
            problem,
        },
    })
}

fn load_on_this_thread(path: &Path, req: &LoadRequest) -> Result<EngineHandle, LoadError> {
    let init = EngineInit {
        engine_id: req.id.clone(),
        config: req.config.clone(),
        host_protocol: ProtocolInfo::default(),
        max_log_level: req.max_log_level,
    };
    let init_json = serde_json::to_string(&init).map_err(|e| LoadError::Construct {
        path: path.to_path_buf(),
        source: Box::new(EngineError::invalid_params("new_engine", e)),
    })?;
    let engine = match open_c_library(path)? {
        Some(library) => {
            tracing::debug!(path = %path.display(), "loading a C ABI engine");
            library
                .create(&init_json, req.services.clone())
                .map_err(|e| LoadError::Construct {
                    path: path.to_path_buf(),
                    source: Box::new(e),
                })?
        }
        None => construct_abi_stable(path, req, &init_json)?,
    };
    let info = handshake(path, &engine, req.verify_id.then_some(req.id.as_str()))?;
    Ok(EngineHandle::library(
        engine,
        info,
        path.to_path_buf(),
        req.call_timeout,
    ))
}

/// Steps 2–5 for a library built with `export_engine!`.
fn construct_abi_stable(
    path: &Path,
    req: &LoadRequest,
    init_json: &str,
) -> Result<FfiEngineBox, LoadError> {
    let header = lib_header_from_path(path).map_err(|e| map_library_error(path, e))?;
    check_api_version(path, header.version_strings().version.as_str())?;
    let module: EngineModule_Ref = header
        .init_root_module::<EngineModule_Ref>()
        .map_err(|e| map_library_error(path, e))?;
    let abi = module.abi_info()();
    if abi.api_major != rampart_engine_api::API_MAJOR {
        return Err(LoadError::ApiVersion {
            path: path.to_path_buf(),
            found: abi.api_version.to_string(),
            supported: rampart_engine_api::API_MAJOR,
        });
    }
    let host = host_to_ffi(req.services.clone());
    module.new_engine()(host, init_json.into())
        .into_result()
        .map_err(|e| LoadError::Construct {
            path: path.to_path_buf(),
            source: Box::new(e.into()),
        })
}

fn handshake(
    path: &Path,
    engine: &FfiEngineBox,
    expected_id: Option<&str>,
) -> Result<EngineInfo, LoadError> {
    let construct = |source: EngineError| LoadError::Construct {
        path: path.to_path_buf(),
        source: Box::new(source),
    };
    let json = engine
        .info()
        .into_result()
        .map_err(|e| construct(e.into()))?;
    let info: EngineInfo = serde_json::from_str(json.as_str()).map_err(|e| {
        construct(EngineError::new(
            ErrorKind::Incompatible,
            format!("info() is not valid: {e}"),
        ))
    })?;
    check_info(path, info, expected_id)
}

/// The handshake's checks on what an engine says about itself: a compatible protocol, a
/// non-empty id and name, and the configured id. The same for a library and an executable.
pub(crate) fn check_info(
    path: &Path,
    info: EngineInfo,
    expected_id: Option<&str>,
) -> Result<EngineInfo, LoadError> {
    let construct = |source: EngineError| LoadError::Construct {
        path: path.to_path_buf(),
        source: Box::new(source),
    };
    ProtocolInfo::default()
        .is_compatible_with(&info.protocol)
        .map_err(|why| LoadError::Incompatible {
            path: path.to_path_buf(),
            reason: format!("handshake: {why}"),
        })?;
    if info.id.trim().is_empty() || info.name.trim().is_empty() {
        return Err(construct(EngineError::new(
            ErrorKind::Incompatible,
            "info() must report a non-empty id and name",
        )));
    }
    if let Some(expected) = expected_id
        && info.id != expected
    {
        return Err(LoadError::IdMismatch {
            path: path.to_path_buf(),
            expected: expected.to_string(),
            found: info.id,
        });
    }
    Ok(info)
}

fn map_library_error(path: &Path, err: LibraryError) -> LoadError {
    let path = path.to_path_buf();
    match err {
        LibraryError::OpenError { err, .. } => LoadError::NotALibrary {
            path,
            reason: err.to_string(),
        },
        LibraryError::GetSymbolError { .. } => LoadError::NotAnEngine { path },
        LibraryError::IncompatibleVersionNumber { actual_version, .. } => LoadError::ApiVersion {
            path,
            found: actual_version.to_string(),
            supported: rampart_engine_api::API_MAJOR,
        },
        LibraryError::RootModule { err, .. } => {
            let source = match err {
                RootModuleError::Unwound => {
                    EngineError::new(ErrorKind::Panicked, "the library's root module panicked")
                }
                RootModuleError::Returned(e) => EngineError::engine(e.to_string()),
            };
            LoadError::Construct {
                path,
                source: Box::new(source),
            }
        }
        LibraryError::InvalidAbiHeader(_) => LoadError::Incompatible {
            path,
            reason: "built with a different abi_stable ABI; rebuild with abi_stable =0.11.3"
                .to_string(),
        },
        other => LoadError::Incompatible {
            path,
            reason: condense(&other.to_string()),
        },
    }
}

/// abi_stable's layout errors span many lines; keep a one-line summary for the log line.
fn condense(text: &str) -> String {
    let joined: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let mut s = joined.join(" ");
    if s.len() > 400 {
        let mut cut = 400;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str(" …");
    }
    s
}

/// The module type hosts load; re-exported for tests that want to inspect it.
pub type Module = EngineModule_Ref;

#[allow(dead_code)]
fn _root_module_is_a_root_module() -> &'static str {
    <EngineModule_Ref as RootModule>::NAME
}
