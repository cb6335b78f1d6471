//! The pipe between the host and an engine in a child process (`rampart engine-host`): frames,
//! the messages they carry, and the handshake.
//!
//! Why a protocol of our own and not the ABI: the ABI is a function table in one address space;
//! across processes only bytes travel. The engine protocol was made transport-independent for
//! this: every engine method is a name and a JSON payload, and so is every host service. The
//! pipe carries exactly those, so the child is a relay and never decodes a message list: a
//! list crosses as the delta the host's table wrote (`rampart_message::wire`), and the library
//! in the child decodes it against the table it keeps, as it would in the host.
//!
//! A frame is a 4-byte big-endian length and that many bytes of JSON (one [`Frame`]). Requests
//! go both ways (engine calls from the host; service calls from the engine), each with an id its
//! answer repeats. The first frames are the handshake: the host's [`Hello`] (protocol version,
//! features, what to load), the child's [`Ready`]. Like nushell's plugin protocol, an unknown
//! frame type, field or feature is ignored, so either side can grow in a minor version.

use std::io::{Read, Write};

use rampart_engine_api::{EngineError, EngineInfo, ErrorKind, LogLevel};
use serde::{Deserialize, Serialize};

/// The protocol's major version: a child of another major is refused at the handshake.
pub const PIPE_VERSION: u32 = 1;

/// Features this build offers. Each side uses what both announced; unknown ones are ignored.
pub const FEATURES: &[&str] = &[feature::SHUTDOWN];

/// Feature names.
pub mod feature {
    /// A `Shutdown` frame retires the engine before the child exits; without it the host only
    /// closes the pipe.
    pub const SHUTDOWN: &str = "shutdown";
}

/// The largest frame either side accepts (256 MiB). A length past it means the stream is not
/// frames (something wrote to the pipe that should not have), and the child is given up.
pub const MAX_FRAME: u32 = 256 << 20;

/// One message on the pipe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Frame {
    /// Host → child, first: what to load.
    Hello(Hello),
    /// Child → host, the answer to `Hello`: the engine's verified handshake, or why not.
    Ready(Ready),
    /// Host → child: call engine method `method` with `payload` (JSON, lists as deltas).
    Call {
        /// Repeated by the answer.
        id: u64,
        /// The engine method's name.
        method: String,
        /// Its parameters as JSON.
        payload: String,
        /// How long the host waits, in ms. The child raises the call's cancel flag at that
        /// deadline (a cooperative engine answers `Timeout`); past it, the host kills the child.
        timeout_ms: u64,
    },
    /// Host → child: retire the engine (`shutdown`), answer with `Reply`, then exit.
    Shutdown {
        /// Repeated by the answer.
        id: u64,
    },
    /// Child → host: call host service `method` (`llm.complete`, `blobs.put`, …).
    Service {
        /// Repeated by the answer.
        id: u64,
        /// The service's name.
        method: String,
        /// Its request as JSON.
        payload: String,
    },
    /// Either way: the answer to the request `id` (a `Call`, `Shutdown` or `Service`).
    Reply {
        /// The request.
        id: u64,
        /// The answer's JSON, or the error.
        result: Outcome,
    },
    /// A frame type of a newer peer: ignored.
    #[serde(other)]
    Unknown,
}

/// A result as it crosses the pipe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    /// The JSON answer.
    Ok(String),
    /// The error, with its kind's wire code.
    Err(WireError),
}

impl Outcome {
    /// The outcome of `result`.
    pub fn of(result: Result<String, EngineError>) -> Self {
        match result {
            Ok(json) => Outcome::Ok(json),
            Err(e) => Outcome::Err(WireError::from(e)),
        }
    }

    /// Back to a result.
    pub fn into_result(self) -> Result<String, EngineError> {
        match self {
            Outcome::Ok(json) => Ok(json),
            Outcome::Err(e) => Err(e.into()),
        }
    }
}

/// An [`EngineError`] on the pipe: the same fields the ABI's `FfiError` carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WireError {
    /// [`ErrorKind::code`].
    pub kind: u32,
    /// The message.
    pub message: String,
    /// The details, `null` when none.
    #[serde(default)]
    pub details: serde_json::Value,
}

impl From<EngineError> for WireError {
    fn from(e: EngineError) -> Self {
        WireError {
            kind: e.kind.code(),
            message: e.message,
            details: e.details,
        }
    }
}

impl From<WireError> for EngineError {
    fn from(e: WireError) -> Self {
        EngineError {
            kind: ErrorKind::from_code(e.kind),
            message: e.message,
            details: e.details,
        }
    }
}

/// The host's first frame: the protocol it speaks and the engine to load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hello {
    /// [`PIPE_VERSION`] of the host.
    pub version: u32,
    /// The host's features.
    #[serde(default)]
    pub features: Vec<String>,
    /// The configured engine id (the child's log lines carry it).
    pub engine_id: String,
    /// Check the engine's handshake id against `engine_id`.
    #[serde(default = "yes")]
    pub verify_id: bool,
    /// The library to load.
    pub path: std::path::PathBuf,
    /// The engine's `config` table.
    #[serde(default)]
    pub config: serde_json::Value,
    /// `plugins.loadTimeoutMs`.
    pub load_timeout_ms: u64,
    /// `plugins.callTimeoutMs`.
    pub call_timeout_ms: u64,
    /// The most verbose level the host records.
    #[serde(default)]
    pub max_log_level: Option<LogLevel>,
}

fn yes() -> bool {
    true
}

/// The child's answer to [`Hello`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ready {
    /// [`PIPE_VERSION`] of the child.
    pub version: u32,
    /// The child's features.
    #[serde(default)]
    pub features: Vec<String>,
    /// The engine's verified self-description, or the loader's error, as it reads.
    pub engine: Result<EngineInfo, String>,
}

/// Features both sides announced.
pub fn shared_features(ours: &[&str], theirs: &[String]) -> Vec<String> {
    theirs
        .iter()
        .filter(|f| ours.contains(&f.as_str()))
        .cloned()
        .collect()
}

/// One log line on the child's stderr. The engine's own `tracing` arrives through the host
/// services' `log`, and the child writes it here; the host reads the line back and records it
/// under the engine's id. `tracing-subscriber`'s JSON lines (the child's own log) read too:
/// their message is in `fields.message`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct LogLine {
    /// `trace` … `error`, any case.
    pub level: String,
    /// The engine's tracing target.
    pub target: String,
    /// The message, when not in `fields`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The structured fields as a JSON object.
    pub fields: serde_json::Value,
}

impl LogLine {
    /// The level, `None` for a line that is not a log line.
    pub fn level(&self) -> Option<LogLevel> {
        match self.level.to_ascii_lowercase().as_str() {
            "trace" => Some(LogLevel::Trace),
            "debug" => Some(LogLevel::Debug),
            "info" => Some(LogLevel::Info),
            "warn" => Some(LogLevel::Warn),
            "error" => Some(LogLevel::Error),
            _ => None,
        }
    }

    /// The message, wherever the writer put it.
    pub fn text(&self) -> String {
        self.message
            .clone()
            .or_else(|| {
                self.fields
                    .get("message")
                    .and_then(|m| m.as_str())
                    .map(str::to_string)
            })
            .unwrap_or_default()
    }
}

/// Why the pipe stopped carrying frames.
#[derive(Debug, thiserror::Error)]
pub enum PipeError {
    /// The other side closed it (the child exited, or the host went away).
    #[error("the pipe closed")]
    Closed,
    /// Reading or writing failed.
    #[error("the pipe failed: {0}")]
    Io(#[from] std::io::Error),
    /// The bytes are not frames: a length past [`MAX_FRAME`], or a body that is not a frame.
    #[error("the pipe carried a malformed frame ({0})")]
    Malformed(String),
}

/// Writes `frame` as one length-prefixed frame and flushes.
pub fn write_frame(out: &mut impl Write, frame: &Frame) -> Result<(), PipeError> {
    let body = serde_json::to_vec(frame).map_err(|e| PipeError::Malformed(e.to_string()))?;
    let len = u32::try_from(body.len())
        .ok()
        .filter(|n| *n <= MAX_FRAME)
        .ok_or_else(|| PipeError::Malformed(format!("{} bytes is over the limit", body.len())))?;
    out.write_all(&len.to_be_bytes())?;
    out.write_all(&body)?;
    out.flush()?;
    Ok(())
}

/// Reads one frame. End of stream before a frame starts is [`PipeError::Closed`].
pub fn read_frame(input: &mut impl Read) -> Result<Frame, PipeError> {
    let mut len = [0u8; 4];
    match input.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(PipeError::Closed),
        Err(e) => return Err(e.into()),
    }
    let len = u32::from_be_bytes(len);
    if len > MAX_FRAME {
        return Err(PipeError::Malformed(format!(
            "a frame of {len} bytes, over the {MAX_FRAME}-byte limit; starts with {:?}",
            String::from_utf8_lossy(&len.to_be_bytes())
        )));
    }
    let mut body = vec![0u8; len as usize];
    input.read_exact(&mut body).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => {
            PipeError::Malformed(format!("the stream ended inside a {len}-byte frame"))
        }
        _ => PipeError::Io(e),
    })?;
    serde_json::from_slice(&body).map_err(|e| {
        let start: String = String::from_utf8_lossy(&body).chars().take(40).collect();
        PipeError::Malformed(format!("not a frame: {e}; starts with {start:?}"))
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#[path = "pipe_tests.rs"]
mod tests;
