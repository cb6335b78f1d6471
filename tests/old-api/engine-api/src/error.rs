//! Errors that cross the engine boundary, with an exhaustive classification.
//!
//! Every failure an engine call can have is one [`ErrorKind`]. The host decides what to do from
//! the kind alone (fall back on `Unsupported`, quarantine on `Panicked`/`Timeout`, …), so the
//! classification must be total: codes that a newer engine invents arrive as
//! [`ErrorKind::Other`] instead of being lost.

use serde::{Deserialize, Serialize};

/// What kind of failure an [`EngineError`] is. The numeric codes are part of the frozen ABI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The callee does not implement this method. The caller uses its default instead; this is
    /// how hosts and engines of different 1.x versions stay compatible.
    Unsupported,
    /// The parameters could not be decoded or were rejected. Names what was wrong.
    InvalidParams,
    /// The callee panicked. The SDK caught it at the boundary; the engine's state may be
    /// inconsistent, so hosts quarantine it.
    Panicked,
    /// The call ran past its deadline.
    Timeout,
    /// The call was cancelled by the caller.
    Cancelled,
    /// The engine's own logic failed (a normal, reported error).
    Engine,
    /// A host service failed on behalf of the engine (provider error, session I/O …).
    Host,
    /// The two sides cannot work together (protocol major, handshake, id mismatch).
    Incompatible,
    /// A code this build does not know, kept so nothing is lost in transit.
    Other(u32),
}

impl ErrorKind {
    /// The wire code of this kind (stable across the 1.x line).
    pub fn code(self) -> u32 {
        match self {
            ErrorKind::Unsupported => 1,
            ErrorKind::InvalidParams => 2,
            ErrorKind::Panicked => 3,
            ErrorKind::Timeout => 4,
            ErrorKind::Cancelled => 5,
            ErrorKind::Engine => 6,
            ErrorKind::Host => 7,
            ErrorKind::Incompatible => 8,
            ErrorKind::Other(code) => code,
        }
    }

    /// Decodes a wire code; unknown codes become [`ErrorKind::Other`].
    pub fn from_code(code: u32) -> Self {
        match code {
            1 => ErrorKind::Unsupported,
            2 => ErrorKind::InvalidParams,
            3 => ErrorKind::Panicked,
            4 => ErrorKind::Timeout,
            5 => ErrorKind::Cancelled,
            6 => ErrorKind::Engine,
            7 => ErrorKind::Host,
            8 => ErrorKind::Incompatible,
            other => ErrorKind::Other(other),
        }
    }

    /// A short lower-case name for logs and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::InvalidParams => "invalid_params",
            ErrorKind::Panicked => "panicked",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::Engine => "engine",
            ErrorKind::Host => "host",
            ErrorKind::Incompatible => "incompatible",
            ErrorKind::Other(_) => "other",
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ErrorKind::Other(code) => write!(f, "other({code})"),
            kind => f.write_str(kind.as_str()),
        }
    }
}

impl Serialize for ErrorKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(self.code())
    }
}

impl<'de> Deserialize<'de> for ErrorKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        u32::deserialize(d).map(ErrorKind::from_code)
    }
}

/// An error from an engine call or a host service call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct EngineError {
    /// The classification the caller acts on.
    pub kind: ErrorKind,
    /// A sentence a person can act on: what happened and, where known, what to do.
    pub message: String,
    /// Structured detail for logs and tools (JSON); `null` when there is none.
    #[serde(default)]
    pub details: serde_json::Value,
}

impl EngineError {
    /// Builds an error of `kind` with `message` and no details.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            details: serde_json::Value::Null,
        }
    }

    /// The method is not implemented by the callee; the caller should use its default.
    pub fn unsupported(method: &str) -> Self {
        Self::new(
            ErrorKind::Unsupported,
            format!("method `{method}` is not supported"),
        )
    }

    /// The parameters of `method` could not be used.
    pub fn invalid_params(method: &str, why: impl std::fmt::Display) -> Self {
        Self::new(
            ErrorKind::InvalidParams,
            format!("invalid parameters for `{method}`: {why}"),
        )
    }

    /// A normal failure of the engine's own logic.
    pub fn engine(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Engine, message)
    }

    /// Attaches structured details.
    pub fn with_details(mut self, details: serde_json::Value) -> Self {
        self.details = details;
        self
    }

    /// True when the caller should fall back to its default behaviour.
    pub fn is_unsupported(&self) -> bool {
        self.kind == ErrorKind::Unsupported
    }
}
