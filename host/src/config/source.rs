//! The raw `models` and `agents` tables while they are read, and the located error their
//! readers give.

use std::collections::BTreeMap;
use std::path::Path;

/// A `models` or `agents` setting that has the wrong shape. Names the file, the line and
/// column, the key, and what is allowed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}: `{key}` {problem}")]
pub struct ModelsConfigError {
    /// Where: the config file with the key's `:line:column` when it was written there (the
    /// nearest enclosing table's when the key is missing), or "built-in defaults".
    pub file: String,
    /// The dotted key.
    pub key: String,
    /// What is wrong and what is allowed.
    pub problem: String,
}

/// The tables being read, and where each key was written.
pub(crate) struct Source<'a> {
    /// The file, for messages; `None` for the built-in defaults.
    pub(crate) file: Option<&'a Path>,
    /// Where each key was written, by dotted key with `[i]` for array items.
    pub(crate) positions: &'a BTreeMap<String, (usize, usize)>,
    /// The top-level `models` table.
    pub(crate) models: &'a toml::Table,
    /// The top-level `agents` table.
    pub(crate) agents: &'a toml::Table,
}

impl Source<'_> {
    /// Where `key` was written; falls back to the nearest enclosing key that was recorded, so
    /// a missing key points at its table.
    fn position_of(&self, key: &str) -> Option<(usize, usize)> {
        let mut k = key;
        loop {
            if let Some(p) = self.positions.get(k) {
                return Some(*p);
            }
            let cut = k.rfind(['.', '['])?;
            k = &k[..cut];
        }
    }

    /// An error located at `key`, so an editor can jump to it.
    pub(crate) fn err(&self, key: &str, problem: impl Into<String>) -> ModelsConfigError {
        let name = self
            .file
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "built-in defaults".to_string());
        let file = match (self.file, self.position_of(key)) {
            (Some(_), Some((line, column))) => format!("{name}:{line}:{column}"),
            _ => name,
        };
        ModelsConfigError {
            file,
            key: key.to_string(),
            problem: problem.into(),
        }
    }
}

/// A value as a person reads it in an error: its type and, for scalars, the value.
pub(crate) fn describe(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => format!("string {s:?}"),
        toml::Value::Integer(i) => format!("integer {i}"),
        toml::Value::Float(f) => format!("float {f}"),
        toml::Value::Boolean(b) => format!("boolean {b}"),
        toml::Value::Datetime(_) => "a date".to_string(),
        toml::Value::Array(_) => "an array".to_string(),
        toml::Value::Table(_) => "a table".to_string(),
    }
}
