//! `rampart replay --json`: the whole replay as one JSON document on stdout.
//!
//! Shape (camelCase, like every JSON the host writes):
//! `{"kind": "rampart.replay", "version": 1, "summary": {…}, "rows": [{…}, …]}` with
//! [`Summary`] and [`Row`] as documented on their fields. `version` changes only when a field
//! is removed or changes meaning; new fields may appear at any time.
//!
//! The document is reproducible: the same transcript, config and engine give the same bytes.
//! What this machine measured (wall-clock times, peak memory) differs from run to run, so it
//! is `null` unless `--timings` asks for it: the fields [`MEASURED_SUMMARY_FIELDS`] of the
//! summary and [`MEASURED_ROW_FIELDS`] of each row.

use std::io::Write;

use serde::Serialize;
use serde_json::Value;

use super::summary::{Row, Summary};

/// The document's `kind`, so a consumer can tell it from other JSON it reads.
pub const KIND: &str = "rampart.replay";

/// The document's format version.
pub const VERSION: u32 = 1;

/// The summary's measurements: `null` without `--timings`.
pub const MEASURED_SUMMARY_FIELDS: [&str; 6] = [
    "compactionMsOnPath",
    "compactionMsMaxPerCall",
    "compactionMsPrepared",
    "preparationMs",
    "timings",
    "peakRssBytes",
];

/// A row's measurements: `null` without `--timings`.
pub const MEASURED_ROW_FIELDS: [&str; 1] = ["compactionMs"];

#[derive(Serialize)]
struct Document<'a> {
    kind: &'static str,
    version: u32,
    summary: &'a Summary,
    rows: &'a [Row],
}

/// Writes the document (pretty-printed, one trailing newline); with `measured` false, the
/// measurements are `null` (see the module docs).
pub fn write(
    out: &mut dyn Write,
    summary: &Summary,
    rows: &[Row],
    measured: bool,
) -> std::io::Result<()> {
    let doc = Document {
        kind: KIND,
        version: VERSION,
        summary,
        rows,
    };
    if measured {
        serde_json::to_writer_pretty(&mut *out, &doc)?;
    } else {
        let mut doc = serde_json::to_value(&doc)?;
        unmeasured(&mut doc);
        serde_json::to_writer_pretty(&mut *out, &doc)?;
    }
    writeln!(out)
}

/// Sets the measurements of a serialised document to `null`.
fn unmeasured(doc: &mut Value) {
    if let Some(summary) = doc.get_mut("summary").and_then(Value::as_object_mut) {
        for field in MEASURED_SUMMARY_FIELDS {
            if let Some(v) = summary.get_mut(field) {
                *v = Value::Null;
            }
        }
    }
    if let Some(rows) = doc.get_mut("rows").and_then(Value::as_array_mut) {
        for row in rows.iter_mut().filter_map(Value::as_object_mut) {
            for field in MEASURED_ROW_FIELDS {
                if let Some(v) = row.get_mut(field) {
                    *v = Value::Null;
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "json_tests.rs"]
mod tests;
