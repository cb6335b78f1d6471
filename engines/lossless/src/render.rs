//! Summary rows and how a summary is shown to the model.
//!
//! Why a user message: assistant or tool roles would break providers' turn-ordering rules, and
//! the `trust="untrusted"` attribute tells the model that a summary is reference material,
//! not instructions (§3 and §6.12 of the reference). The rendering depends only on the row, so
//! it is byte-identical on every turn and the cached prefix stays valid.

use rampart_engine_api::tokens::estimate_message_tokens;
use rampart_engine_api::{AgentMessage, EngineError};
use rusqlite::OptionalExtension;

use crate::store::{Store, db};
use crate::text::{utc_minute, xml_escape};

/// A summary node as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryRow {
    /// `sum_` + 16 hex.
    pub id: String,
    /// Its conversation.
    pub conversation_id: i64,
    /// `leaf` or `condensed`.
    pub kind: String,
    /// 0 for a leaf; sources' depth + 1 for a condensed node.
    pub depth: u32,
    /// The summary text.
    pub content: String,
    /// Estimated tokens of `content`.
    pub token_count: u64,
    /// Oldest source time (Unix ms).
    pub earliest_at: u64,
    /// Newest source time (Unix ms).
    pub latest_at: u64,
    /// Nodes below this one.
    pub descendant_count: u64,
    /// Tokens of the nodes below this one.
    pub descendant_token_count: u64,
    /// Tokens of the raw messages this node stands for.
    pub source_message_token_count: u64,
    /// `normal`, `aggressive`, `capped`, `fallback` or `extractive`.
    pub level: String,
    /// The model that wrote it (empty when none did).
    pub model: String,
    /// Source summaries of a condensed node, in order.
    pub sources: Vec<String>,
}

/// Reads one summary, or `None` when the id is unknown.
pub fn find_summary(store: &Store, id: &str) -> Result<Option<SummaryRow>, EngineError> {
    let conn = store.conn();
    let row = conn
        .query_row(
            "SELECT summary_id, conversation_id, kind, depth, content, token_count, earliest_at, \
             latest_at, descendant_count, descendant_token_count, source_message_token_count, \
             level, model FROM summaries WHERE summary_id = ?1",
            [id],
            |r| {
                Ok(SummaryRow {
                    id: r.get(0)?,
                    conversation_id: r.get(1)?,
                    kind: r.get(2)?,
                    depth: r.get::<_, i64>(3)? as u32,
                    content: r.get(4)?,
                    token_count: r.get::<_, i64>(5)? as u64,
                    earliest_at: r.get::<_, i64>(6)? as u64,
                    latest_at: r.get::<_, i64>(7)? as u64,
                    descendant_count: r.get::<_, i64>(8)? as u64,
                    descendant_token_count: r.get::<_, i64>(9)? as u64,
                    source_message_token_count: r.get::<_, i64>(10)? as u64,
                    level: r.get(11)?,
                    model: r.get(12)?,
                    sources: Vec::new(),
                })
            },
        )
        .optional()
        .map_err(|e| db("read a summary", e))?;
    let Some(mut row) = row else {
        return Ok(None);
    };
    let mut stmt = conn
        .prepare_cached(
            "SELECT source_id FROM summary_sources WHERE summary_id = ?1 ORDER BY ordinal",
        )
        .map_err(|e| db("prepare reading sources", e))?;
    row.sources = stmt
        .query_map([id], |r| r.get(0))
        .map_err(|e| db("read sources", e))?
        .collect::<Result<_, _>>()
        .map_err(|e| db("read a source", e))?;
    Ok(Some(row))
}

/// Reads a summary that must exist.
pub fn summary(store: &Store, id: &str) -> Result<SummaryRow, EngineError> {
    find_summary(store, id)?.ok_or_else(|| db("read a summary", format!("{id} is missing")))
}

/// The text the model sees for a summary; one `carried` over from the session this one
/// replaced (`/new`) says so (`session="previous"`, §6.15: stale summaries were taken for
/// current ones).
pub fn render_text(row: &SummaryRow, carried: bool) -> String {
    let mut out = format!(
        "<summary id=\"{}\" kind=\"{}\" depth=\"{}\" descendant_count=\"{}\" trust=\"untrusted\"{} \
         earliest_at=\"{}\" latest_at=\"{}\">\n",
        row.id,
        row.kind,
        row.depth,
        row.descendant_count,
        if carried { " session=\"previous\"" } else { "" },
        utc_minute(row.earliest_at),
        utc_minute(row.latest_at)
    );
    if !row.sources.is_empty() {
        out.push_str("<parents>");
        for s in &row.sources {
            out.push_str(&format!("<summary_ref id=\"{}\"/>", xml_escape(s)));
        }
        out.push_str("</parents>\n");
    }
    out.push_str("<content>");
    out.push_str(&xml_escape(&row.content));
    out.push_str("</content>\n</summary>");
    out
}

/// The message the model sees for a summary: a user message stamped with the summary's
/// newest source time (stable, unlike the time it was written).
pub fn render(row: &SummaryRow, carried: bool) -> AgentMessage {
    AgentMessage::user_text(render_text(row, carried), row.latest_at)
}

/// Estimated tokens of a summary as rendered.
pub fn rendered_tokens(store: &Store, id: &str, carried: bool) -> Result<u64, EngineError> {
    Ok(estimate_message_tokens(&render(
        &summary(store, id)?,
        carried,
    )))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "render_tests.rs"]
mod tests;
