//! The frozen abi_stable surface of engine API 1.x.
//!
//! Nothing in this module may change within the 1.x line: abi_stable's prefix types only accept
//! a library with *at least* the fields the loader expects ("plugin ≥ host"), so growing any of
//! these types would stop every older engine from loading in a newer host. Growth goes through
//! the named JSON calls instead (see [`crate::protocol`] and [`crate::host::service`]).
//!
//! The surface is three objects:
//! - the root module [`EngineModule`]: `abi_info`, `new_engine(host, init_json)`;
//! - the engine object [`FfiEngine`]: `info`, `call(method, json, ctx)`, `shutdown`;
//! - the host-services object [`FfiHost`]: `log`, `call(method, json)`;
//!
//! plus the per-call context [`FfiCallCtx`] (`is_cancelled`, `deadline`).

use abi_stable::{
    StableAbi, declare_root_module_statics,
    library::RootModule,
    package_version_strings, sabi_trait,
    sabi_types::VersionStrings,
    std_types::{RArc, RBox, RResult, RStr, RString},
};

use crate::error::{EngineError, ErrorKind};

/// Facts about a library, readable without constructing an engine.
#[repr(C)]
#[derive(StableAbi, Debug, Clone)]
pub struct AbiInfo {
    /// The engine API major the library was built for.
    pub api_major: u32,
    /// The full engine-api version the library was built against.
    pub api_version: RString,
    /// The protocol name ([`crate::protocol::PROTOCOL_NAME`]).
    pub protocol: RString,
}

/// An error crossing the ABI. `kind` is [`ErrorKind::code`]; `details` is JSON or empty.
#[repr(C)]
#[derive(StableAbi, Debug, Clone)]
pub struct FfiError {
    /// The classification code.
    pub kind: u32,
    /// The message for people.
    pub message: RString,
    /// Structured details as JSON, or the empty string.
    pub details: RString,
}

impl From<EngineError> for FfiError {
    fn from(e: EngineError) -> Self {
        let details = if e.details.is_null() {
            String::new()
        } else {
            e.details.to_string()
        };
        FfiError {
            kind: e.kind.code(),
            message: e.message.into(),
            details: details.into(),
        }
    }
}

impl From<FfiError> for EngineError {
    fn from(e: FfiError) -> Self {
        let details = if e.details.is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::from_str(e.details.as_str())
                .unwrap_or_else(|_| serde_json::Value::String(e.details.to_string()))
        };
        EngineError {
            kind: ErrorKind::from_code(e.kind),
            message: e.message.into(),
            details,
        }
    }
}

/// The host's services, as an engine receives them. Long-lived and shareable, hence `RArc`.
#[sabi_trait]
pub trait FfiHost: Send + Sync + Clone {
    /// Records a log line. `level` is [`crate::LogLevel::code`]; `fields_json` is a JSON object
    /// or empty.
    fn log(&self, level: u8, target: RStr<'_>, message: RStr<'_>, fields_json: RStr<'_>);

    /// A named service call (see [`crate::host::service`]).
    #[sabi(last_prefix_field)]
    fn call(&self, method: RStr<'_>, payload_json: RStr<'_>) -> RResult<RString, FfiError>;
}

/// The owned, cloneable host-services object handed to `new_engine`.
pub type FfiHostBox = FfiHost_TO<'static, RArc<()>>;

/// Per-call context. Borrowed, so an engine cannot keep it past the call.
#[sabi_trait]
pub trait FfiCallCtx {
    /// True once the host wants the call to stop.
    fn is_cancelled(&self) -> bool;

    /// The call's deadline in Unix milliseconds, or 0 for none.
    #[sabi(last_prefix_field)]
    fn deadline_unix_ms(&self) -> u64;
}

/// A borrowed per-call context.
pub type FfiCallCtxRef<'a> = FfiCallCtx_TO<'a, abi_stable::sabi_types::RRef<'a, ()>>;

/// An engine instance living in a library.
#[sabi_trait]
pub trait FfiEngine: Send + Sync {
    /// The engine's [`crate::EngineInfo`] as JSON.
    fn info(&self) -> RResult<RString, FfiError>;

    /// A named engine method (see [`crate::protocol::method`]) with JSON parameters.
    fn call(
        &self,
        method: RStr<'_>,
        payload_json: RStr<'_>,
        ctx: FfiCallCtxRef<'_>,
    ) -> RResult<RString, FfiError>;

    /// Retire the engine: it will receive no more calls.
    #[sabi(last_prefix_field)]
    fn shutdown(&self) -> RResult<(), FfiError>;
}

/// The owned engine object returned by `new_engine`.
pub type FfiEngineBox = FfiEngine_TO<'static, RBox<()>>;

/// The root module every engine library exports.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = EngineModule_Ref)))]
#[sabi(missing_field(panic))]
pub struct EngineModule {
    /// Facts about the library; runs no engine code.
    pub abi_info: extern "C" fn() -> AbiInfo,

    /// Builds an engine. `init_json` is a [`crate::EngineInit`].
    #[sabi(last_prefix_field)]
    pub new_engine:
        extern "C" fn(host: FfiHostBox, init_json: RStr<'_>) -> RResult<FfiEngineBox, FfiError>,
}

impl RootModule for EngineModule_Ref {
    declare_root_module_statics! { EngineModule_Ref }
    const BASE_NAME: &'static str = "rampart_engine";
    const NAME: &'static str = "rampart context engine";
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}
