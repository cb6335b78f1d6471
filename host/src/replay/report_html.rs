//! `rampart replay --report out.html`: one self-contained page.
//!
//! Inline CSS and an inline SVG chart, no script and no external resource of any kind, so the
//! page opens offline, from an e-mail attachment or a CI artefact store, and cannot leak that
//! it was opened. Every string taken from the replay (file names, engine ids, error texts) is
//! escaped before it is embedded.
//!
//! The chart ([`crate::chart`], shared with `rampart serve`'s live page) plots the prompt
//! tokens of each call against the window and the prompt budget, with markers for compactions
//! (triangles on top), truncations (rings), prunes (squares) and failed calls (crosses on the
//! axis). The summary table follows, and the per-call table in a collapsed
//! section (up to [`MAX_TABLE_ROWS`] rows, to keep the page light).

use std::fmt::Write as _;

use super::summary::{Row, Summary};
use super::table::{human_bytes, human_ms, thousands};
use crate::chart::{Call as ChartCall, Chart, Geometry, Marker, MarkerKind};
use crate::html::escape;

/// Per-call rows listed in the page; longer replays list the first ones and say so.
pub const MAX_TABLE_ROWS: usize = 5_000;

/// The page.
pub fn render(summary: &Summary, rows: &[Row]) -> String {
    let mut html = String::new();
    let title = format!("Rampart replay: {}", summary.input);
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<h1>Rampart replay</h1>\n\
         <p class=\"sub\">{} ({}) &middot; engine <b>{}</b>{} &middot; model <b>{}</b> \
         (tokenizer {}, {} overflow wording) &middot; window <b>{}</b></p>\n",
        escape(&title),
        escape(&summary.input),
        escape(&summary.format),
        escape(&summary.engine),
        if summary.served_by != summary.engine {
            format!(" (served by {})", escape(&summary.served_by))
        } else {
            String::new()
        },
        escape(&summary.model),
        escape(&summary.tokenizer),
        escape(&summary.overflow_wording),
        thousands(summary.window),
    );
    // The chart draws the session's own calls; its subagents' calls have windows of their
    // own and are listed in the summary and the table, tagged with the agent.
    let own: Vec<Row> = rows
        .iter()
        .filter(|r| r.subagent.is_none())
        .cloned()
        .collect();
    html.push_str(&chart(summary, &own));
    html.push_str(&summary_table(summary));
    html.push_str(&subagents_table(summary));
    html.push_str(&rows_table(rows));
    html.push_str("</body>\n</html>\n");
    html
}

const CSS: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222}\
h1{font-size:20px;margin:0 0 4px}.sub{color:#555;margin:0 0 16px}\
table{border-collapse:collapse;margin:12px 0}td,th{padding:3px 10px;border-bottom:1px solid #ddd;\
text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}\
.err{color:#b00}svg{background:#fafafa;border:1px solid #ddd}\
.legend span{margin-right:16px}details{margin-top:16px}";

/// The chart of the session's own calls ([`crate::chart`], the one the live page draws too),
/// its heading and its legend.
fn chart(summary: &Summary, rows: &[Row]) -> String {
    let mut markers = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        let tip = format!(
            "call {}: {}{}",
            r.turn,
            r.prompt_tokens.map_or("no answer".to_string(), |t| format!(
                "{} tokens",
                thousands(t)
            )),
            if r.tags.is_empty() {
                String::new()
            } else {
                format!(" [{}]", r.tags.join(" "))
            }
        );
        let mut mark = |kind: MarkerKind| {
            markers.push(Marker {
                kind,
                at: i,
                title: tip.clone(),
                href: None,
            })
        };
        if r.compactions > 0 {
            mark(MarkerKind::Compaction);
        }
        if r.truncations > 0 {
            mark(MarkerKind::Cap);
        }
        if r.prunes > 0 {
            mark(MarkerKind::Prune);
        }
        if r.error.is_some() {
            mark(MarkerKind::Failed);
        }
    }
    let svg = Chart {
        geometry: Geometry::REPORT,
        window: summary.window,
        // The line a budget compaction crosses (issue 14: the window alone made every
        // compaction look premature).
        budget: Some(summary.budget_tokens),
        calls: rows
            .iter()
            .map(|r| ChartCall {
                label: r.turn,
                tokens: r.prompt_tokens,
            })
            .collect(),
        // What sending everything would have cost, for comparison.
        everything: rows.iter().map(|r| r.full_history_tokens).collect(),
        markers,
        points: false,
    }
    .render();
    let legend = |kind: MarkerKind, label: &str| {
        format!(
            "<span style=\"color:{}\">{} {label}</span>",
            kind.colour(),
            kind.symbol()
        )
    };
    format!(
        "<h2>Prompt tokens per call</h2>\n{svg}<p class=\"legend\">\
         <span style=\"color:#2c6fbb\">&#9473; prompt tokens</span>\
         <span style=\"color:#c0392b\">&#9476; window</span>\
         <span style=\"color:#d68910\">&#9476; prompt budget</span>\
         <span style=\"color:#aaa\">&#9473; sending everything</span>{}{}{}{}</p>\n",
        legend(MarkerKind::Compaction, "compaction"),
        legend(MarkerKind::Cap, "truncation"),
        legend(MarkerKind::Prune, "prune"),
        legend(MarkerKind::Failed, "failed call"),
    )
}

fn summary_table(s: &Summary) -> String {
    let pct = |part: u64, whole: u64| {
        if whole == 0 {
            0.0
        } else {
            part as f64 * 100.0 / whole as f64
        }
    };
    let errors_by_kind: Vec<String> = s
        .errors_by_kind
        .iter()
        .map(|(k, n)| format!("{} {n}", escape(k)))
        .collect();
    let rows: Vec<(&str, String)> = vec![
        ("Model calls", thousands(s.calls)),
        ("Answered", thousands(s.answered)),
        ("Requests received by the model", thousands(s.requests)),
        (
            "Peak prompt tokens",
            format!(
                "{} ({:.1}% of the window)",
                thousands(s.peak_prompt_tokens),
                pct(s.peak_prompt_tokens, s.window)
            ),
        ),
        (
            "Mean prompt tokens",
            thousands(s.mean_prompt_tokens.round() as u64),
        ),
        ("Compactions", thousands(s.compactions)),
        (
            "Compactions tried without compacting",
            thousands(s.compactions_not_done),
        ),
        (
            "Truncations",
            format!(
                "{} (ingest caps {}, tool-loop guard {}, session passes {})",
                thousands(s.truncations),
                thousands(s.ingest_caps),
                thousands(s.tool_loop_truncations),
                thousands(s.truncation_passes)
            ),
        ),
        ("Prunes", thousands(s.prunes)),
        ("Pruned characters", thousands(s.pruned_chars)),
        ("Overflows", thousands(s.overflows)),
        ("Recoveries", thousands(s.recoveries)),
        (
            "Errors",
            if errors_by_kind.is_empty() {
                thousands(s.errors)
            } else {
                format!("{} ({})", thousands(s.errors), errors_by_kind.join(", "))
            },
        ),
        ("Tokens sent", thousands(s.tokens_sent)),
        (
            "Tokens if everything were sent",
            thousands(s.tokens_if_everything),
        ),
        (
            "Tokens saved",
            format!(
                "{} ({:.1}%)",
                thousands(s.tokens_saved),
                pct(s.tokens_saved, s.tokens_if_everything)
            ),
        ),
        (
            "Compaction spend (read + written)",
            format!(
                "{} + {}",
                thousands(s.compaction_input_tokens),
                thousands(s.compaction_output_tokens)
            ),
        ),
        (
            "Tokens saved, net of the compaction spend",
            if s.net_tokens_saved < 0 {
                format!("-{}", thousands(s.net_tokens_saved.unsigned_abs()))
            } else {
                thousands(s.net_tokens_saved.unsigned_abs())
            },
        ),
        ("Prompt-cache breaks", thousands(s.cache_breaks)),
        (
            "Per 100 calls",
            format!(
                "{} input tokens, {} compaction tokens, {:.1} cache breaks, {:.1} compactions, \
                 {:.1} truncations, {:.1} prunes",
                thousands(s.per_100_calls.input_tokens.round() as u64),
                thousands(
                    (s.per_100_calls.compaction_input_tokens
                        + s.per_100_calls.compaction_output_tokens)
                        .round() as u64
                ),
                s.per_100_calls.cache_breaks,
                s.per_100_calls.compactions,
                s.per_100_calls.truncations,
                s.per_100_calls.prunes
            ),
        ),
        (
            "Time",
            format!(
                "{} (load {}, run {}, output {})",
                human_ms(s.timings.total_ms),
                human_ms(s.timings.load_ms),
                human_ms(s.timings.run_ms),
                human_ms(s.timings.output_ms)
            ),
        ),
        (
            "Peak memory",
            s.peak_rss_bytes.map_or("unknown".to_string(), human_bytes),
        ),
    ];
    let mut html = String::from("<h2>Summary</h2>\n<table class=\"summary\">\n");
    for (label, value) in rows {
        // Values are numbers formatted here, or strings escaped above.
        let _ = writeln!(
            html,
            "<tr><th>{label}</th><td class=\"n\">{value}</td></tr>"
        );
    }
    html.push_str("</table>\n");
    if !s.notes.is_empty() {
        html.push_str("<h3>Notes</h3>\n<ul>\n");
        for note in &s.notes {
            let _ = writeln!(html, "<li>{}</li>", escape(note));
        }
        html.push_str("</ul>\n");
    }
    html
}

/// The subagents replayed at their parent's calls, when there were any.
fn subagents_table(s: &Summary) -> String {
    if s.subagents.is_empty() {
        return String::new();
    }
    let mut html = format!(
        "<h2>Subagents ({})</h2>\n<table>\n<tr><th>agent</th><th>task</th><th>at call</th>\
         <th>calls</th><th>peak prompt tokens</th><th>compactions</th><th>error</th></tr>\n",
        s.subagents.len()
    );
    for a in &s.subagents {
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"err\">{}</td></tr>",
            escape(&a.agent_id),
            escape(a.label.as_deref().unwrap_or("")),
            a.at_parent_call,
            a.calls,
            thousands(a.peak_prompt_tokens),
            a.compactions,
            escape(a.error.as_deref().unwrap_or("")),
        );
    }
    html.push_str("</table>\n");
    html
}

fn rows_table(rows: &[Row]) -> String {
    let mut html = format!(
        "<details><summary>Every call ({} rows{})</summary>\n<table>\n<tr><th>call</th>\
         <th>user turn</th><th>prompt tokens</th><th>% window</th><th>requests</th>\
         <th>layers</th><th>error</th></tr>\n",
        rows.len(),
        if rows.len() > MAX_TABLE_ROWS {
            format!(", the first {MAX_TABLE_ROWS} listed")
        } else {
            String::new()
        }
    );
    for r in rows.iter().take(MAX_TABLE_ROWS) {
        let _ = writeln!(
            html,
            "<tr><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td class=\"err\">{}</td></tr>",
            r.turn,
            r.user_turn,
            r.prompt_tokens.map_or("–".to_string(), thousands),
            r.pct_window.map_or("–".to_string(), |p| format!("{p:.1}%")),
            r.requests,
            escape(&match &r.subagent {
                Some(agent) => format!("[subagent {agent}] {}", r.tags.join(" ")),
                None => r.tags.join(" "),
            }),
            r.error
                .as_ref()
                .map_or(String::new(), |e| escape(&e.message)),
        );
    }
    html.push_str("</table>\n</details>\n");
    html
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::replay::summary::RowError;

    #[test]
    fn the_page_is_self_contained_and_escapes_what_it_embeds() {
        let summary = Summary {
            input: "<script>alert(1)</script>.jsonl".into(),
            engine: "legacy".into(),
            served_by: "legacy".into(),
            window: 32_000,
            peak_prompt_tokens: 31_000,
            ..Summary::default()
        };
        let rows = vec![
            Row {
                turn: 1,
                prompt_tokens: Some(31_000),
                compactions: 1,
                truncations: 1,
                prunes: 1,
                tags: vec!["compact".into()],
                ..Row::default()
            },
            Row {
                turn: 2,
                error: Some(RowError {
                    kind: "context_overflow".into(),
                    message: "a \"quoted\" <b>failure</b>".into(),
                }),
                ..Row::default()
            },
        ];
        let html = render(&summary, &rows);
        assert!(html.contains("<svg"));
        assert!(!html.contains("<script"), "escaped");
        assert!(html.contains("&lt;script&gt;"));
        assert!(html.contains("&lt;b&gt;failure&lt;/b&gt;"));
        assert!(html.contains("31,000"));
        assert!(!html.contains("http://") && !html.contains("https://"));
        // The shared chart: the answered call, its markers, the failed call on the axis.
        for class in ["compaction", "cap", "prune", "failed"] {
            assert_eq!(
                html.matches(&format!("<path class=\"{class}\"")).count(),
                1,
                "{class}: {html}"
            );
        }
        assert!(html.contains("window 32,000"), "{html}");
        assert!(html.contains("<title>call 1: 31,000 tokens [compact]</title>"));
        assert!(html.contains("<title>call 2: no answer</title>"));
    }
}
