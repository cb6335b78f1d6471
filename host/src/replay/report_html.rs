//! `rampart replay --report out.html`: one self-contained page.
//!
//! Inline CSS and an inline SVG chart, no script and no external resource of any kind, so the
//! page opens offline, from an e-mail attachment or a CI artefact store, and cannot leak that
//! it was opened. Every string taken from the replay (file names, engine ids, error texts) is
//! escaped before it is embedded.
//!
//! The chart plots the prompt tokens of each call against the window line, with markers for
//! compactions (triangles on top), truncations (circles), prunes (squares) and failed calls
//! (crosses on the axis). The summary table follows, and the per-call table in a collapsed
//! section (up to [`MAX_TABLE_ROWS`] rows, to keep the page light).

use std::fmt::Write as _;

use super::summary::{Row, Summary};
use super::table::{human_bytes, human_ms, thousands};

/// Per-call rows listed in the page; longer replays list the first ones and say so.
pub const MAX_TABLE_ROWS: usize = 5_000;

const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 380.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 40.0;

/// Escapes `text` for HTML text and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

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

fn chart(summary: &Summary, rows: &[Row]) -> String {
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let peak = rows
        .iter()
        .filter_map(|r| r.prompt_tokens)
        .max()
        .unwrap_or(0);
    let top_value = (summary.window.max(peak) as f64 * 1.08).max(1.0);
    let n = rows.len().max(1) as f64;
    let x = |i: usize| {
        LEFT + if n <= 1.0 {
            plot_w / 2.0
        } else {
            i as f64 * plot_w / (n - 1.0)
        }
    };
    let y = |v: u64| TOP + plot_h - (v as f64 / top_value) * plot_h;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        "<svg viewBox=\"0 0 {WIDTH} {HEIGHT}\" width=\"{WIDTH}\" height=\"{HEIGHT}\" \
         role=\"img\" aria-label=\"prompt tokens per call against the window\">"
    );
    // Axes and grid.
    for k in 0..=5 {
        let v = (top_value * k as f64 / 5.0) as u64;
        let yy = y(v);
        let _ = writeln!(
            svg,
            "<line x1=\"{LEFT}\" y1=\"{yy:.1}\" x2=\"{:.1}\" y2=\"{yy:.1}\" stroke=\"#e4e4e4\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\" \
             fill=\"#666\">{}</text>",
            WIDTH - RIGHT,
            LEFT - 6.0,
            yy + 4.0,
            thousands(v)
        );
    }
    let ticks = rows.len().clamp(1, 10);
    for k in 0..ticks {
        let i = if ticks <= 1 {
            0
        } else {
            k * (rows.len().saturating_sub(1)) / (ticks - 1)
        };
        if let Some(r) = rows.get(i) {
            let _ = writeln!(
                svg,
                "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\" \
                 fill=\"#666\">{}</text>",
                x(i),
                HEIGHT - BOTTOM + 16.0,
                r.turn
            );
        }
    }
    let _ = writeln!(
        svg,
        "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\" \
         fill=\"#444\">call</text>\
         <text x=\"14\" y=\"{:.1}\" font-size=\"12\" fill=\"#444\" \
         transform=\"rotate(-90 14 {:.1})\" text-anchor=\"middle\">prompt tokens</text>",
        LEFT + plot_w / 2.0,
        HEIGHT - 6.0,
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0
    );
    // The window, and the prompt budget: the line a budget compaction crosses (issue 14: the
    // window alone made every compaction look premature).
    level_line(
        &mut svg,
        y(summary.window),
        "#c0392b",
        "6 4",
        &format!("window {}", thousands(summary.window)),
    );
    if summary.budget_tokens > 0 {
        level_line(
            &mut svg,
            y(summary.budget_tokens),
            "#d68910",
            "2 3",
            &format!("prompt budget {}", thousands(summary.budget_tokens)),
        );
    }
    // What sending everything would have cost, for comparison: it leaves the chart soon, so
    // it is drawn up to the top edge and stops there.
    let everything: Vec<String> = rows
        .iter()
        .enumerate()
        .take_while(|(_, r)| (r.full_history_tokens as f64) <= top_value)
        .map(|(i, r)| format!("{:.1},{:.1}", x(i), y(r.full_history_tokens)))
        .collect();
    if everything.len() > 1 {
        let _ = writeln!(
            svg,
            "<polyline fill=\"none\" stroke=\"#aaa\" stroke-width=\"1\" points=\"{}\"/>",
            everything.join(" ")
        );
    }
    // Prompt tokens: one polyline per run of answered calls (a failed call breaks the line).
    let mut segment: Vec<(f64, f64)> = Vec::new();
    let flush = |segment: &mut Vec<(f64, f64)>, svg: &mut String| {
        match segment.as_slice() {
            [] => {}
            [(px, py)] => {
                let _ = writeln!(
                    svg,
                    "<circle cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"2\" fill=\"#2c6fbb\"/>"
                );
            }
            points => {
                let points: Vec<String> = points
                    .iter()
                    .map(|(px, py)| format!("{px:.1},{py:.1}"))
                    .collect();
                let _ = writeln!(
                    svg,
                    "<polyline fill=\"none\" stroke=\"#2c6fbb\" stroke-width=\"1.5\" \
                     points=\"{}\"/>",
                    points.join(" ")
                );
            }
        }
        segment.clear();
    };
    for (i, r) in rows.iter().enumerate() {
        match r.prompt_tokens {
            Some(t) => segment.push((x(i), y(t))),
            None => flush(&mut segment, &mut svg),
        }
    }
    flush(&mut segment, &mut svg);
    // Markers.
    for (i, r) in rows.iter().enumerate() {
        let xx = x(i);
        let at = r.prompt_tokens.map_or(TOP + plot_h, y);
        let tip = escape(&format!(
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
        ));
        if r.compactions > 0 {
            let _ = writeln!(
                svg,
                "<path d=\"M{:.1} {:.1} l-5 -8 h10 z\" fill=\"#8e44ad\"><title>{tip}</title></path>",
                xx,
                TOP + 2.0
            );
        }
        if r.truncations > 0 {
            let _ = writeln!(
                svg,
                "<circle cx=\"{xx:.1}\" cy=\"{at:.1}\" r=\"4\" fill=\"none\" stroke=\"#e67e22\" \
                 stroke-width=\"2\"><title>{tip}</title></circle>"
            );
        }
        if r.prunes > 0 {
            let _ = writeln!(
                svg,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"7\" height=\"7\" fill=\"#27ae60\">\
                 <title>{tip}</title></rect>",
                xx - 3.5,
                at - 3.5
            );
        }
        if r.error.is_some() {
            let b = TOP + plot_h;
            let _ = writeln!(
                svg,
                "<path d=\"M{:.1} {:.1} l8 8 m0 -8 l-8 8\" stroke=\"#c0392b\" \
                 stroke-width=\"2\"><title>{tip}</title></path>",
                xx - 4.0,
                b - 10.0
            );
        }
    }
    svg.push_str("</svg>\n");
    format!(
        "<h2>Prompt tokens per call</h2>\n{svg}<p class=\"legend\">\
         <span style=\"color:#2c6fbb\">&#9473; prompt tokens</span>\
         <span style=\"color:#c0392b\">&#9476; window</span>\
         <span style=\"color:#d68910\">&#9476; prompt budget</span>\
         <span style=\"color:#aaa\">&#9473; sending everything</span>\
         <span style=\"color:#8e44ad\">&#9660; compaction</span>\
         <span style=\"color:#e67e22\">&#9675; truncation</span>\
         <span style=\"color:#27ae60\">&#9632; prune</span>\
         <span style=\"color:#c0392b\">&#10005; failed call</span></p>\n"
    )
}

/// A dashed horizontal line across the plot at `at`, labelled at its right end.
fn level_line(svg: &mut String, at: f64, colour: &str, dashes: &str, label: &str) {
    let _ = writeln!(
        svg,
        "<line x1=\"{LEFT}\" y1=\"{at:.1}\" x2=\"{:.1}\" y2=\"{at:.1}\" stroke=\"{colour}\" \
         stroke-width=\"1.5\" stroke-dasharray=\"{dashes}\"/><text x=\"{:.1}\" y=\"{:.1}\" \
         font-size=\"12\" text-anchor=\"end\" fill=\"{colour}\">{}</text>",
        WIDTH - RIGHT,
        WIDTH - RIGHT - 4.0,
        at - 5.0,
        escape(label)
    );
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
    }
}
