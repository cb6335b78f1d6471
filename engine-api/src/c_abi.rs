//! The C ABI of engines (`include/rampart_engine.h`), seen from a host: find the table a
//! library exports, check its version, and wrap an instance as the same [`FfiEngineBox`] a
//! Rust engine library returns, so everything above the loader (deadlines, message tables,
//! quarantine, the child process) treats both alike.
//!
//! Why here and not in the host: the conformance kit (`rampart-engine-test`) loads libraries
//! as a host does and must accept C engines too; both use this module. It adds to the 1.x API
//! and leaves the frozen abi_stable surface ([`crate::ffi`]) untouched.
//!
//! The header is the contract; the `#[repr(C)]` types below mirror it field for field.

use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::{Arc, Mutex};

use abi_stable::library::RawLibrary;
use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RErr, ROk, RResult, RStr, RString};

use crate::error::{EngineError, ErrorKind};
use crate::ffi::{FfiCallCtxRef, FfiEngine, FfiEngine_TO, FfiEngineBox, FfiError};
use crate::host::{HostApi, LogLevel};

/// The table version this host speaks (`RAMPART_ENGINE_ABI_VERSION`).
pub const C_ABI_VERSION: u32 = 1;

/// The entry point a C engine library exports, NUL-terminated for `dlsym`.
pub const C_ENTRY_SYMBOL: &[u8] = b"rampart_engine_v1\0";

/// The largest answer accepted across the C ABI. A length beyond it is far more likely a bug
/// (an uninitialised length) than a real answer, and copying it would read past the buffer.
pub const MAX_ANSWER_BYTES: usize = 256 << 20;

/// The highest status code with a meaning (`RAMPART_INCOMPATIBLE`).
const LAST_STATUS: i32 = 8;

/// `rampart_host` of the header.
#[repr(C)]
pub struct CHostTable {
    /// [`C_ABI_VERSION`].
    pub abi_version: u32,
    /// The host's state, passed back to each function.
    pub host_data: *mut c_void,
    /// Records a log line.
    pub log: unsafe extern "C" fn(
        host_data: *mut c_void,
        level: u32,
        target: *const c_char,
        target_len: usize,
        message: *const c_char,
        message_len: usize,
        fields_json: *const c_char,
        fields_len: usize,
    ),
    /// Calls a host service.
    pub call: unsafe extern "C" fn(
        host_data: *mut c_void,
        method: *const c_char,
        json_in: *const c_char,
        len: usize,
        out: *mut *mut c_char,
        out_len: *mut usize,
    ) -> i32,
    /// Gives back a buffer `call` answered with.
    pub free_buffer: unsafe extern "C" fn(host_data: *mut c_void, buf: *mut c_char, len: usize),
}

/// `rampart_call_ctx` of the header.
#[repr(C)]
pub struct CCallCtx {
    /// Points at the call's [`FfiCallCtxRef`].
    pub ctx_data: *const c_void,
    /// Unix milliseconds, 0 for none.
    pub deadline_unix_ms: u64,
    /// Non-zero once the host stopped waiting.
    pub is_cancelled: unsafe extern "C" fn(ctx: *const CCallCtx) -> i32,
}

/// `rampart_engine_table_v1` of the header. The functions are `Option`s because a C author
/// can leave one NULL; the loader refuses such a table before calling anything in it.
#[repr(C)]
pub struct CEngineTable {
    /// Must be [`C_ABI_VERSION`].
    pub abi_version: u32,
    /// The engine's `EngineInfo` as NUL-terminated JSON.
    pub engine_info_json: *const c_char,
    /// Builds an instance.
    pub create: Option<
        unsafe extern "C" fn(
            init_json: *const c_char,
            init_len: usize,
            host: *const CHostTable,
            instance: *mut *mut c_void,
            error: *mut *mut c_char,
            error_len: *mut usize,
        ) -> i32,
    >,
    /// Calls a method.
    pub call: Option<
        unsafe extern "C" fn(
            instance: *mut c_void,
            method: *const c_char,
            json_in: *const c_char,
            len: usize,
            ctx: *const CCallCtx,
            out: *mut *mut c_char,
            out_len: *mut usize,
        ) -> i32,
    >,
    /// Frees a buffer the engine returned.
    pub free_buffer: Option<unsafe extern "C" fn(buf: *mut c_char, len: usize)>,
    /// Releases an instance.
    pub destroy: Option<unsafe extern "C" fn(instance: *mut c_void)>,
}

/// Why a library's C table cannot be used. Each message says what to fix in the library.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CAbiError {
    /// The OS loader refused the file.
    #[error("not a loadable shared library for this platform: {0}")]
    NotALibrary(String),
    /// `rampart_engine_v1()` returned NULL.
    #[error(
        "it exports `rampart_engine_v1` but that returned NULL; return a pointer to a static \
         rampart_engine_table_v1"
    )]
    NullTable,
    /// The table is of another version.
    #[error(
        "its rampart_engine_v1 table has abi_version {found}; this host speaks C ABI \
         {C_ABI_VERSION}. Rebuild it against rampart_engine.h of rampart-engine-api 1.x"
    )]
    Version {
        /// The version the table announced.
        found: u32,
    },
    /// A function of the table is NULL.
    #[error("its rampart_engine_v1 table has a NULL `{0}`; every function must be set")]
    NullFunction(&'static str),
    /// `engine_info_json` is NULL or not UTF-8.
    #[error("its engine_info_json is {0}; it must be NUL-terminated UTF-8 JSON")]
    BadInfo(&'static str),
}

/// A loaded library's checked table. The library is never unloaded, so the table lives as
/// long as the process.
#[derive(Clone, Copy)]
pub struct CLibrary {
    table: &'static CEngineTable,
    create: unsafe extern "C" fn(
        *const c_char,
        usize,
        *const CHostTable,
        *mut *mut c_void,
        *mut *mut c_char,
        *mut usize,
    ) -> i32,
    call: unsafe extern "C" fn(
        *mut c_void,
        *const c_char,
        *const c_char,
        usize,
        *const CCallCtx,
        *mut *mut c_char,
        *mut usize,
    ) -> i32,
    free_buffer: unsafe extern "C" fn(*mut c_char, usize),
    destroy: unsafe extern "C" fn(*mut c_void),
}

impl std::fmt::Debug for CLibrary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CLibrary")
            .field("abi_version", &self.table.abi_version)
            .finish()
    }
}

/// Opens `path` and looks for the C entry point. `Ok(None)`: the library does not export it
/// (it may be an abi_stable engine). Runs the library's static constructors (as any `dlopen`
/// does) and `rampart_engine_v1()`, nothing else: the version is checked before any other
/// function of the table could be called.
///
/// The file must already have passed the host's header checks: mapping a damaged file can
/// kill the process.
pub fn open(path: &Path) -> Result<Option<CLibrary>, CAbiError> {
    let library = RawLibrary::load_at(path).map_err(|e| CAbiError::NotALibrary(e.to_string()))?;
    // Never unloaded: instances, threads and tables of the library may outlive any handle.
    let library: &'static RawLibrary = Box::leak(Box::new(library));
    // SAFETY: the header declares the entry point with exactly this signature.
    let entry = match unsafe {
        library.get::<unsafe extern "C" fn() -> *const CEngineTable>(C_ENTRY_SYMBOL)
    } {
        Ok(symbol) => *symbol,
        Err(_) => return Ok(None),
    };
    // SAFETY: the entry point takes nothing and returns a pointer to a static table or NULL.
    let table = unsafe { entry() };
    // SAFETY: non-NULL, the header promises a table valid while the library is loaded; only
    // `abi_version` (first field in every version) is read before it is checked.
    let Some(table) = (unsafe { table.as_ref() }) else {
        return Err(CAbiError::NullTable);
    };
    if table.abi_version != C_ABI_VERSION {
        return Err(CAbiError::Version {
            found: table.abi_version,
        });
    }
    let library = CLibrary {
        table,
        create: table.create.ok_or(CAbiError::NullFunction("create"))?,
        call: table.call.ok_or(CAbiError::NullFunction("call"))?,
        free_buffer: table
            .free_buffer
            .ok_or(CAbiError::NullFunction("free_buffer"))?,
        destroy: table.destroy.ok_or(CAbiError::NullFunction("destroy"))?,
    };
    library.info_json()?;
    Ok(Some(library))
}

impl CLibrary {
    /// The engine's `EngineInfo` JSON, as the table states it.
    pub fn info_json(&self) -> Result<&'static str, CAbiError> {
        if self.table.engine_info_json.is_null() {
            return Err(CAbiError::BadInfo("NULL"));
        }
        // SAFETY: non-NULL and NUL-terminated per the header, valid while the library is.
        let text = unsafe { CStr::from_ptr(self.table.engine_info_json) };
        text.to_str().map_err(|_| CAbiError::BadInfo("not UTF-8"))
    }

    /// Builds an instance with `init_json` (an [`crate::EngineInit`]) and the host's services,
    /// as the object every host path already knows.
    pub fn create(
        &self,
        init_json: &str,
        services: Arc<dyn HostApi>,
    ) -> Result<FfiEngineBox, EngineError> {
        let host = Box::new(HostState {
            services,
            outstanding: Mutex::new(HashMap::new()),
        });
        let host_data = &*host as *const HostState as *mut c_void;
        let table = Box::new(CHostTable {
            abi_version: C_ABI_VERSION,
            host_data,
            log: host_log,
            call: host_call,
            free_buffer: host_free,
        });
        let init = nul_terminated(init_json);
        let mut instance: *mut c_void = std::ptr::null_mut();
        let mut error: *mut c_char = std::ptr::null_mut();
        let mut error_len = 0usize;
        // SAFETY: every pointer is valid for the call; `table` and `host` live in the returned
        // engine until `destroy` returns.
        let status = unsafe {
            (self.create)(
                init.as_ptr().cast(),
                init_json.len(),
                &*table,
                &mut instance,
                &mut error,
                &mut error_len,
            )
        };
        let answer = self.take(error, error_len);
        if status != 0 {
            return Err(status_error("create", status, answer));
        }
        let engine = CEngine {
            library: *self,
            instance,
            _host: host,
            _table: table,
            lock: Mutex::new(false),
        };
        Ok(FfiEngine_TO::from_value(engine, TD_Opaque))
    }

    /// Copies and frees an output buffer of the engine. `Err` when its length is absurd or it
    /// is not UTF-8 (the buffer is freed either way).
    fn take(&self, buf: *mut c_char, len: usize) -> Result<Option<String>, EngineError> {
        if buf.is_null() {
            return Ok(None);
        }
        let copied = if len > MAX_ANSWER_BYTES {
            Err(EngineError::new(
                ErrorKind::Incompatible,
                format!("answered {len} bytes, more than the C ABI's limit of {MAX_ANSWER_BYTES}"),
            ))
        } else {
            // SAFETY: the engine wrote `buf`/`len` as an allocation of `len` readable bytes.
            let bytes = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) };
            String::from_utf8(bytes.to_vec()).map_err(|e| {
                EngineError::new(
                    ErrorKind::Incompatible,
                    format!("answered bytes that are not UTF-8 ({e})"),
                )
            })
        };
        // SAFETY: handed back once, as the header requires, with what the engine wrote.
        unsafe { (self.free_buffer)(buf, len) };
        copied.map(Some)
    }
}

/// The error of a status other than `RAMPART_OK`, with the engine's message when it gave one.
fn status_error(
    what: &str,
    status: i32,
    message: Result<Option<String>, EngineError>,
) -> EngineError {
    let text = match message {
        Ok(Some(text)) if !text.trim().is_empty() => text,
        Ok(_) => format!("`{what}` failed without a message"),
        Err(e) => format!(
            "`{what}` failed and its message is unreadable: {}",
            e.message
        ),
    };
    if (1..=LAST_STATUS).contains(&status) {
        EngineError::new(ErrorKind::from_code(status as u32), text)
    } else {
        EngineError::new(
            ErrorKind::Incompatible,
            format!(
                "`{what}` returned status {status}, which C ABI {C_ABI_VERSION} does not define \
                 (0 is success, 1 to {LAST_STATUS} are rampart_engine.h's error codes): {text}"
            ),
        )
    }
}

/// `text` with a NUL after it, as the header promises for every input buffer.
fn nul_terminated(text: &str) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(text.len() + 1);
    bytes.extend_from_slice(text.as_bytes());
    bytes.push(0);
    bytes
}

/// One instance of a C engine.
struct CEngine {
    library: CLibrary,
    instance: *mut c_void,
    /// What the host table points at; kept until `destroy` has returned.
    _host: Box<HostState>,
    _table: Box<CHostTable>,
    /// Held for every call so calls on the instance never overlap (the header's promise);
    /// `true` once the instance is destroyed.
    lock: Mutex<bool>,
}

// SAFETY: the header requires engines to accept calls from any thread, one at a time per
// instance; `lock` serialises them. The host table's state is `Sync` (an `Arc<dyn HostApi>`
// and a mutex).
unsafe impl Send for CEngine {}
// SAFETY: as above: every use of `instance` holds `lock`.
unsafe impl Sync for CEngine {}

impl CEngine {
    fn call_raw(
        &self,
        method: &str,
        payload: &str,
        ctx: &FfiCallCtxRef<'_>,
    ) -> Result<String, EngineError> {
        let destroyed = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        if *destroyed {
            return Err(EngineError::new(
                ErrorKind::Engine,
                format!("`{method}` called after the engine was disposed"),
            ));
        }
        let name = CString::new(method).map_err(|_| EngineError::unsupported(method))?;
        let input = nul_terminated(payload);
        let c_ctx = CCallCtx {
            ctx_data: ctx as *const FfiCallCtxRef<'_> as *const c_void,
            deadline_unix_ms: ctx.deadline_unix_ms(),
            is_cancelled: ctx_is_cancelled,
        };
        let mut out: *mut c_char = std::ptr::null_mut();
        let mut out_len = 0usize;
        // SAFETY: the pointers are valid for the call, the instance is alive (`destroyed` is
        // false) and no other call runs on it (the lock is held).
        let status = unsafe {
            (self.library.call)(
                self.instance,
                name.as_ptr(),
                input.as_ptr().cast(),
                payload.len(),
                &c_ctx,
                &mut out,
                &mut out_len,
            )
        };
        let answer = self.library.take(out, out_len);
        if status != 0 {
            return Err(status_error(method, status, answer));
        }
        Ok(answer?.unwrap_or_else(|| "{}".to_string()))
    }
}

impl FfiEngine for CEngine {
    fn info(&self) -> RResult<RString, FfiError> {
        match self.library.info_json() {
            Ok(json) => ROk(json.into()),
            Err(e) => RErr(EngineError::new(ErrorKind::Incompatible, e.to_string()).into()),
        }
    }

    fn call(
        &self,
        method: RStr<'_>,
        payload_json: RStr<'_>,
        ctx: FfiCallCtxRef<'_>,
    ) -> RResult<RString, FfiError> {
        match self.call_raw(method.as_str(), payload_json.as_str(), &ctx) {
            Ok(answer) => ROk(answer.into()),
            Err(e) => RErr(e.into()),
        }
    }

    fn shutdown(&self) -> RResult<(), FfiError> {
        let ctx = crate::export::HostCallCtx::default();
        let disposed = self.call_raw(
            crate::protocol::method::DISPOSE,
            "{}",
            &crate::export::call_ctx_ref(&ctx),
        );
        self.destroy();
        match disposed {
            Ok(_) => ROk(()),
            Err(e) if e.kind == ErrorKind::Unsupported => ROk(()),
            Err(e) => RErr(e.into()),
        }
    }
}

impl CEngine {
    /// Calls `destroy` once; later calls are refused.
    fn destroy(&self) {
        let mut destroyed = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        if !*destroyed {
            *destroyed = true;
            // SAFETY: the instance came from `create`, no call runs (the lock is held), and it
            // is destroyed once.
            unsafe { (self.library.destroy)(self.instance) };
        }
    }
}

impl Drop for CEngine {
    fn drop(&mut self) {
        self.destroy();
    }
}

extern "C" fn ctx_is_cancelled(ctx: *const CCallCtx) -> i32 {
    // SAFETY: the engine passes back the context it received, valid during its call.
    let Some(ctx) = (unsafe { ctx.as_ref() }) else {
        return 0;
    };
    // SAFETY: `ctx_data` points at the call's `FfiCallCtxRef`, alive during the call.
    let Some(inner) = (unsafe { ctx.ctx_data.cast::<FfiCallCtxRef<'_>>().as_ref() }) else {
        return 0;
    };
    catch_unwind(AssertUnwindSafe(|| i32::from(inner.is_cancelled()))).unwrap_or(0)
}

/// What the host table's `host_data` points at.
struct HostState {
    services: Arc<dyn HostApi>,
    /// Answers handed to the engine and not yet given back, by address. A pointer the host did
    /// not hand out (or gave back already) is ignored instead of freed twice.
    outstanding: Mutex<HashMap<usize, Box<[u8]>>>,
}

/// Reads `len` bytes at `ptr` as text, lossily; empty for NULL.
///
/// # Safety
/// `ptr` is NULL or valid for `len` bytes.
unsafe fn text<'a>(ptr: *const c_char, len: usize) -> std::borrow::Cow<'a, str> {
    if ptr.is_null() || len == 0 || len > MAX_ANSWER_BYTES {
        return std::borrow::Cow::Borrowed("");
    }
    // SAFETY: the caller promises `len` readable bytes.
    String::from_utf8_lossy(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) })
}

unsafe extern "C" fn host_log(
    host_data: *mut c_void,
    level: u32,
    target: *const c_char,
    target_len: usize,
    message: *const c_char,
    message_len: usize,
    fields_json: *const c_char,
    fields_len: usize,
) {
    // SAFETY: `host_data` is the `HostState` of the table the engine was given.
    let Some(host) = (unsafe { host_data.cast::<HostState>().as_ref() }) else {
        return;
    };
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the header requires each pointer to be valid for its length.
        let (target, message, fields) = unsafe {
            (
                text(target, target_len),
                text(message, message_len),
                text(fields_json, fields_len),
            )
        };
        let level = LogLevel::from_code(u8::try_from(level).unwrap_or(u8::MAX));
        host.services.log(level, &target, &message, &fields);
    }));
}

unsafe extern "C" fn host_call(
    host_data: *mut c_void,
    method: *const c_char,
    json_in: *const c_char,
    len: usize,
    out: *mut *mut c_char,
    out_len: *mut usize,
) -> i32 {
    // SAFETY: `host_data` is the `HostState` of the table the engine was given.
    let Some(host) = (unsafe { host_data.cast::<HostState>().as_ref() }) else {
        return ErrorKind::Host.code() as i32;
    };
    if out.is_null() || out_len.is_null() {
        return ErrorKind::InvalidParams.code() as i32;
    }
    let result = catch_unwind(AssertUnwindSafe(|| {
        if method.is_null() {
            return Err(EngineError::new(
                ErrorKind::InvalidParams,
                "the service name is NULL",
            ));
        }
        // SAFETY: non-NULL and NUL-terminated per the header.
        let name = unsafe { CStr::from_ptr(method) }.to_string_lossy();
        // SAFETY: the header requires `json_in` to be valid for `len` bytes.
        let payload = unsafe { text(json_in, len) };
        host.services.call(&name, &payload)
    }))
    .unwrap_or_else(|_| {
        Err(EngineError::new(
            ErrorKind::Panicked,
            "the host service panicked",
        ))
    });
    let (status, body) = match result {
        Ok(answer) => (0, answer),
        Err(e) => (e.kind.code() as i32, e.message),
    };
    let mut bytes = nul_terminated(&body).into_boxed_slice();
    let ptr = bytes.as_mut_ptr().cast::<c_char>();
    if let Ok(mut outstanding) = host.outstanding.lock() {
        outstanding.insert(ptr as usize, bytes);
    } else {
        return ErrorKind::Host.code() as i32;
    }
    // SAFETY: both checked non-NULL above; the engine passed them for us to write.
    unsafe {
        *out = ptr;
        *out_len = body.len();
    }
    status
}

unsafe extern "C" fn host_free(host_data: *mut c_void, buf: *mut c_char, _len: usize) {
    // SAFETY: `host_data` is the `HostState` of the table the engine was given.
    let Some(host) = (unsafe { host_data.cast::<HostState>().as_ref() }) else {
        return;
    };
    if buf.is_null() {
        return;
    }
    let known = host
        .outstanding
        .lock()
        .map(|mut o| o.remove(&(buf as usize)).is_some())
        .unwrap_or(false);
    if !known {
        host.services.log(
            LogLevel::Error,
            "rampart::c_abi",
            "free_buffer got a pointer the host did not hand out (or already got back); ignored",
            "",
        );
    }
}

#[cfg(test)]
#[path = "c_abi_tests.rs"]
mod tests;
