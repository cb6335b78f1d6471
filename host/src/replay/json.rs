//! `rampart replay --json`: the whole replay as one JSON document on stdout.
//!
//! Shape (camelCase, like every JSON the host writes):
//! `{"kind": "rampart.replay", "version": 1, "summary": {…}, "rows": [{…}, …]}` with
//! [`Summary`] and [`Row`] as documented on their fields. `version` changes only when a field
//! is removed or changes meaning; new fields may appear at any time.

use std::io::Write;

use serde::Serialize;

use super::summary::{Row, Summary};

/// The document's `kind`, so a consumer can tell it from other JSON it reads.
pub const KIND: &str = "rampart.replay";

/// The document's format version.
pub const VERSION: u32 = 1;

#[derive(Serialize)]
struct Document<'a> {
    kind: &'static str,
    version: u32,
    summary: &'a Summary,
    rows: &'a [Row],
}

/// Writes the document (pretty-printed, one trailing newline).
pub fn write(out: &mut dyn Write, summary: &Summary, rows: &[Row]) -> std::io::Result<()> {
    let doc = Document {
        kind: KIND,
        version: VERSION,
        summary,
        rows,
    };
    serde_json::to_writer_pretty(&mut *out, &doc)?;
    writeln!(out)
}
