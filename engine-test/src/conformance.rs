//! A conformance run: load a built engine library as a host would, and check the contract of
//! every method, without running `rampart`.
//!
//! What it checks, each as a named [`Check`]:
//!
//! - `load`: the library is an engine library of API major 1 (or a C ABI engine of table
//!   version 1, `rampart_engine.h`) and its constructor succeeds;
//! - `info`: the handshake names a non-empty id and name and a compatible protocol;
//! - `assemble-empty` and `assemble-history`: `assemble` answers, keeps only messages it was
//!   given (in their order) and never separates a tool call from its results;
//! - `ingest` and `compact`: they answer, or say `unsupported`;
//! - `unknown-method`: a method from a later version answers `unsupported`;
//! - `invalid-params`: parameters of the wrong shape answer `invalid_params`;
//! - `tools`: an engine that announces engine tools (API 1.2) lists tools a host can offer
//!   (names of `[A-Za-z0-9_-]{1,64}`, object schemas, no name twice) and answers a call of a
//!   name it did not list without failing; an engine that does not announce them passes;
//! - `dispose`: the engine retires cleanly.
//!
//! A panic inside the engine becomes a failed check with the panic's text (`export_engine!`
//! catches it), never a crash of the run. This loader is the kit's own: no deadline, no
//! quarantine, no fallback. Those belong to the host.
//!
//! [`run_on`] runs the same checks through any [`Transport`]: the host's tests use it to check
//! engines in a child process and executable engines (docs/engine-protocol.md) through the
//! pipe their users will get.

use std::path::Path;
use std::sync::Arc;

use rampart_engine_api::abi_stable::library::lib_header_from_path;
use rampart_engine_api::c_abi;
use rampart_engine_api::export::{HostCallCtx, call_ctx_ref, host_to_ffi};
use rampart_engine_api::ffi::{EngineModule_Ref, FfiEngineBox};
use rampart_engine_api::method::Method;
use rampart_engine_api::pairing::tool_units;
use rampart_engine_api::protocol::{
    AssembleParams, AssembleResult, CompactParams, EngineInfo, Feature, IngestParams, ProtocolInfo,
};
use rampart_engine_api::tools::ToolsListResult;
use rampart_engine_api::tools::{ToolCallParams, ToolCallResult, ToolsListParams};
use rampart_engine_api::{AgentMessage, EngineError, EngineInit, ErrorKind, LogLevel, MessageList};

use crate::{FakeHost, build};

/// One check of a conformance run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// What was checked (`load`, `info`, `assemble-history`, …).
    pub name: &'static str,
    /// `None` when it passed; otherwise why it failed.
    pub failure: Option<String>,
}

/// The result of [`run`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConformanceReport {
    /// The engine's id, when the handshake got that far.
    pub engine_id: Option<String>,
    /// Every check made, in order. A failed `load` ends the run.
    pub checks: Vec<Check>,
}

impl ConformanceReport {
    /// Whether every check passed.
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.failure.is_none())
    }

    /// The failure of check `name`, if it ran and failed.
    pub fn failure(&self, name: &str) -> Option<&str> {
        self.checks
            .iter()
            .find(|c| c.name == name)
            .and_then(|c| c.failure.as_deref())
    }

    fn record(&mut self, name: &'static str, outcome: Result<(), String>) -> bool {
        let failure = outcome.err();
        let passed = failure.is_none();
        self.checks.push(Check { name, failure });
        passed
    }
}

/// An engine as the checks reach it, whatever carries the calls: a library loaded here, or an
/// engine a host started in a child process (a library under `rampart engine-host`, or an
/// executable that speaks the engine protocol).
///
/// Why a trait: the contract is the same for every transport, so one list of checks must
/// judge them all; a host implements this over its own handle to run the checks through the
/// transport its users will get.
pub trait Transport {
    /// The engine's self-description as JSON (an [`EngineInfo`]).
    fn info_json(&self) -> Result<String, EngineError>;
    /// Calls `method` with a JSON `payload`; answers the result's JSON.
    fn call(&self, method: &str, payload: &str) -> Result<String, EngineError>;
    /// Retires the engine.
    fn dispose(&self) -> Result<(), EngineError>;
}

impl Transport for FfiEngineBox {
    fn info_json(&self) -> Result<String, EngineError> {
        self.info()
            .into_result()
            .map(String::from)
            .map_err(EngineError::from)
    }

    fn call(&self, method: &str, payload: &str) -> Result<String, EngineError> {
        let ctx = HostCallCtx::default();
        FfiEngineBox::call(self, method.into(), payload.into(), call_ctx_ref(&ctx))
            .into_result()
            .map(String::from)
            .map_err(EngineError::from)
    }

    fn dispose(&self) -> Result<(), EngineError> {
        self.shutdown().into_result().map_err(EngineError::from)
    }
}

/// Loads the engine library at `path` with `config` and checks every method's contract.
pub fn run(path: &Path, config: serde_json::Value) -> ConformanceReport {
    let host = FakeHost::new();
    match load(path, config, &host) {
        Ok(engine) => run_on(Ok(&engine)),
        Err(why) => run_on(Err(why)),
    }
}

/// Checks every method's contract on an engine that is already started (`Ok`), or records why
/// it could not start (`Err`, the failed `load` check that ends the run).
pub fn run_on(engine: Result<&dyn Transport, String>) -> ConformanceReport {
    let mut report = ConformanceReport {
        engine_id: None,
        checks: Vec::new(),
    };
    let engine = match engine {
        Ok(engine) => engine,
        Err(why) => {
            report.record("load", Err(why));
            return report;
        }
    };
    report.record("load", Ok(()));
    let info = info(engine);
    if let Ok(info) = &info {
        report.engine_id = Some(info.id.clone());
    }
    report.record("info", info.map(|_| ()));

    let empty = call::<AssembleResult>(engine, Method::Assemble, &AssembleParams::default());
    report.record(
        "assemble-empty",
        empty.map_err(|e| e.to_string()).and_then(|out| {
            out.messages
                .is_empty()
                .then_some(())
                .ok_or_else(|| format!("returned {} messages for none", out.messages.len()))
        }),
    );
    let history = sample_history(200);
    let assembled = call::<AssembleResult>(
        engine,
        Method::Assemble,
        &AssembleParams {
            messages: history.clone(),
            token_budget: Some(2_000),
            ..Default::default()
        },
    );
    report.record(
        "assemble-history",
        assembled
            .map_err(|e| e.to_string())
            .and_then(|out| keeps_units(&history, &out.messages)),
    );
    let ingest = call::<serde_json::Value>(
        engine,
        Method::Ingest,
        &IngestParams {
            message: Some(Arc::new(build::user("hello"))),
            ..Default::default()
        },
    );
    report.record("ingest", answers_or_unsupported(ingest));
    let compact = call::<serde_json::Value>(
        engine,
        Method::Compact,
        &CompactParams {
            messages: history,
            force: true,
            ..Default::default()
        },
    );
    report.record("compact", answers_or_unsupported(compact));
    let unknown = engine.call("conformance_method_from_the_future", "{}");
    report.record(
        "unknown-method",
        expect_kind(unknown, ErrorKind::Unsupported),
    );
    let invalid = engine.call(Method::Assemble.name(), "{\"messages\": 42}");
    report.record(
        "invalid-params",
        expect_kind(invalid, ErrorKind::InvalidParams),
    );
    report.record("tools", tools_contract(engine, info_features(engine)));
    let disposed = engine.dispose();
    report.record("dispose", disposed.map_err(|e| e.to_string()));
    report
}

/// Whether the engine announced engine tools (false when its info does not read: `info`
/// already failed for that).
fn info_features(engine: &dyn Transport) -> bool {
    info(engine).is_ok_and(|i| i.protocol.supports(&Feature::EngineTools))
}

/// The `tools` check (see the module's list).
fn tools_contract(engine: &dyn Transport, announced: bool) -> Result<(), String> {
    if !announced {
        return Ok(());
    }
    let listed = call::<ToolsListResult>(engine, Method::ToolsList, &ToolsListParams::default())
        .map_err(|e| format!("tools.list: {e}"))?;
    let mut seen = std::collections::HashSet::new();
    for tool in &listed.tools {
        if let Some(problem) = tool.problem() {
            return Err(format!("tools.list: {problem}"));
        }
        if !seen.insert(tool.name.as_str()) {
            return Err(format!("tools.list: `{}` is listed twice", tool.name));
        }
    }
    let stray = ToolCallParams {
        name: "conformance_tool_never_listed".into(),
        call_id: "conformance_call".into(),
        ..Default::default()
    };
    match call::<ToolCallResult>(engine, Method::ToolsCall, &stray) {
        Ok(_) => Ok(()),
        Err(e) if matches!(e.kind, ErrorKind::Unsupported | ErrorKind::InvalidParams) => Ok(()),
        Err(e) => Err(format!(
            "tools.call of a tool it never listed failed with `{}` ({}); answer it as a tool \
             error (`isError`) or `invalid_params`",
            e.kind.as_str(),
            e.message
        )),
    }
}

/// A history of user turns and tool-calling turns, the shape a real agent's has.
fn sample_history(turns: usize) -> MessageList {
    let mut out = Vec::new();
    for i in 0..turns {
        if i % 3 == 0 {
            let id = format!("call_{i}");
            out.push(build::assistant_calls(&[(
                id.as_str(),
                "read",
                serde_json::json!({"path": format!("src/f{i}.rs")}),
            )]));
            out.push(build::tool_result(&id, "read", "x".repeat(200)));
        } else if i % 3 == 1 {
            out.push(build::user(format!(
                "question {i}: {}",
                "words ".repeat(20)
            )));
        } else {
            out.push(build::assistant_text(&format!("answer {i}")));
        }
    }
    out.into()
}

fn load(path: &Path, config: serde_json::Value, host: &FakeHost) -> Result<FfiEngineBox, String> {
    let init = EngineInit {
        engine_id: String::new(),
        config,
        host_protocol: ProtocolInfo::default(),
        max_log_level: Some(LogLevel::Warn),
    };
    let init_json = serde_json::to_string(&init).map_err(|e| e.to_string())?;
    // A C ABI engine (rampart_engine.h) is told by its entry point, as the host tells it.
    if let Some(library) = c_abi::open(path).map_err(|e| e.to_string())? {
        return library
            .create(&init_json, Arc::new(host.clone()))
            .map_err(|e| e.to_string());
    }
    let header = lib_header_from_path(path).map_err(|e| e.to_string())?;
    let version = header.version_strings().version.as_str().to_string();
    if !version.starts_with(&format!("{}.", rampart_engine_api::API_MAJOR)) {
        return Err(format!(
            "built for engine API {version}; this kit speaks {}.x",
            rampart_engine_api::API_MAJOR
        ));
    }
    let module = header
        .init_root_module::<EngineModule_Ref>()
        .map_err(|e| e.to_string())?;
    module.new_engine()(
        host_to_ffi(Arc::new(host.clone())),
        init_json.as_str().into(),
    )
    .into_result()
    .map_err(|e| EngineError::from(e).to_string())
}

fn info(engine: &dyn Transport) -> Result<EngineInfo, String> {
    let json = engine.info_json().map_err(|e| e.to_string())?;
    let info: EngineInfo =
        serde_json::from_str(&json).map_err(|e| format!("info() is not valid: {e}"))?;
    ProtocolInfo::default().is_compatible_with(&info.protocol)?;
    if info.id.trim().is_empty() || info.name.trim().is_empty() {
        return Err("info() must report a non-empty id and name".into());
    }
    Ok(info)
}

fn call<R: serde::de::DeserializeOwned>(
    engine: &dyn Transport,
    method: Method,
    params: &impl serde::Serialize,
) -> Result<R, EngineError> {
    let payload =
        serde_json::to_string(params).map_err(|e| EngineError::invalid_params(method.name(), e))?;
    let answer = engine.call(method.name(), &payload)?;
    serde_json::from_str(&answer).map_err(|e| {
        EngineError::new(
            ErrorKind::Engine,
            format!("the answer to `{method}` did not decode: {e}"),
        )
    })
}

fn answers_or_unsupported(outcome: Result<serde_json::Value, EngineError>) -> Result<(), String> {
    match outcome {
        Ok(_) => Ok(()),
        Err(e) if e.kind == ErrorKind::Unsupported => Ok(()),
        Err(e) => Err(e.to_string()),
    }
}

fn expect_kind(outcome: Result<String, EngineError>, kind: ErrorKind) -> Result<(), String> {
    match outcome {
        Err(e) if e.kind == kind => Ok(()),
        Err(e) => Err(format!("expected {kind:?}, got {e}")),
        Ok(answer) => Err(format!("expected {kind:?}, got an answer: {answer}")),
    }
}

/// The output keeps only messages of the input, in their order, and whole tool units: a call
/// kept means its results kept, and a result kept means its call kept.
fn keeps_units(input: &MessageList, output: &MessageList) -> Result<(), String> {
    let mut at = 0;
    let mut positions = Vec::with_capacity(output.len());
    for (i, message) in output.iter().enumerate() {
        let found = input[at..]
            .iter()
            .position(|m| m == message)
            .ok_or_else(|| format!("output message {i} is not an input message after {at}"))?;
        positions.push(at + found);
        at += found + 1;
    }
    for unit in tool_units(input) {
        let kept = positions.iter().filter(|p| unit.contains(p)).count();
        if kept != 0 && kept != unit.len() {
            let first: &AgentMessage = &input[unit.start];
            return Err(format!(
                "a tool call and its results were separated (unit at input {}..{}, {} of {} kept, \
                 starting with a {} message)",
                unit.start,
                unit.end,
                kept,
                unit.len(),
                first.role()
            ));
        }
    }
    Ok(())
}
