//! `rampart context show --html FILE`: the breakdown as one self-contained page.
//!
//! Like the replay's report: inline CSS, no script, no external resource, every string from
//! the session or the workspace escaped. The page shows the window as one horizontal bar,
//! split by part in the order the request lays them out, with the prompt budget marked and
//! the room left after the request; the table of parts and the largest tool results follow.

use std::fmt::Write as _;

use super::breakdown::{Breakdown, Group};
use crate::html::escape;
use crate::replay::table::thousands;

const CSS: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222}\
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:20px 0 6px}.sub{color:#555;margin:0 0 16px}\
table{border-collapse:collapse;margin:12px 0}td,th{padding:3px 10px;border-bottom:1px solid #ddd;\
text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}\
.bar{position:relative;display:flex;width:100%;max-width:1100px;height:34px;border:1px solid #bbb;\
background:#fafafa}.bar div{height:100%}.budget{position:absolute;top:-6px;bottom:-6px;\
border-left:2px dashed #b00}.sw{display:inline-block;width:12px;height:12px;margin-right:6px;\
vertical-align:middle}.legend span{margin-right:16px;white-space:nowrap}.warn{color:#b00}";

/// The colour of a group's segments.
fn colour(group: Group) -> &'static str {
    match group {
        Group::System => "#4e79a7",
        Group::Tools => "#9c755f",
        Group::Summary => "#b07aa1",
        Group::History => "#59a14f",
        Group::Memory => "#f28e2b",
        Group::Framing => "#bab0ac",
    }
}

/// The page for `breakdown` of session `session`.
pub fn render(session: &str, breakdown: &Breakdown) -> String {
    let mut html = String::new();
    let window = breakdown.window.max(1) as f64;
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>Rampart: what is in the window of {}</title>\n<style>{CSS}</style>\n</head>\n\
         <body>\n<h1>What is in my window?</h1>\n<p class=\"sub\">session <b>{}</b> &middot; \
         model <b>{}</b> (tokenizer {}{}) &middot; window <b>{}</b> &middot; budget <b>{}</b> \
         (reserve {}) &middot; request <b>{}</b> tokens &middot; precheck: {}</p>\n",
        escape(session),
        escape(session),
        escape(&breakdown.model),
        escape(&breakdown.tokenizer),
        if breakdown.exact {
            ", exact"
        } else {
            ", estimated"
        },
        thousands(breakdown.window),
        thousands(breakdown.budget),
        thousands(breakdown.reserve),
        thousands(breakdown.request_tokens),
        escape(&breakdown.route),
    );

    // The bar: one segment per part with tokens, then the room left.
    html.push_str("<div class=\"bar\" role=\"img\" aria-label=\"the window split by part\">");
    for part in breakdown.parts.iter().filter(|p| p.tokens > 0) {
        let width = part.tokens as f64 * 100.0 / window;
        let _ = write!(
            html,
            "<div style=\"width:{width:.3}%;background:{}\" title=\"{}: {} tokens ({:.2}% of \
             the window)\"></div>",
            colour(part.group),
            escape(&part.label),
            thousands(part.tokens as u64),
            part.window_percent,
        );
    }
    let budget_at = (breakdown.budget as f64 * 100.0 / window).min(100.0);
    let _ = writeln!(
        html,
        "<span class=\"budget\" style=\"left:{budget_at:.3}%\" title=\"prompt budget: {} \
         tokens\"></span></div>",
        thousands(breakdown.budget)
    );
    html.push_str("<p class=\"legend\">");
    for group in [
        Group::System,
        Group::Tools,
        Group::Summary,
        Group::History,
        Group::Memory,
        Group::Framing,
    ] {
        let _ = write!(
            html,
            "<span><i class=\"sw\" style=\"background:{}\"></i>{}</span>",
            colour(group),
            group.name()
        );
    }
    html.push_str(
        "<span><i class=\"sw\" style=\"border-left:2px dashed #b00\"></i>budget</span></p>\n",
    );
    let left = breakdown.window as i64 - breakdown.request_tokens as i64;
    if breakdown.request_tokens > breakdown.budget {
        let _ = writeln!(
            html,
            "<p class=\"warn\">The request is {} tokens over the prompt budget: the next turn \
             compacts or truncates first.</p>",
            thousands(breakdown.request_tokens - breakdown.budget)
        );
    } else {
        let _ = writeln!(
            html,
            "<p>{} tokens of the window are free, {} of them within the budget.</p>",
            thousands(left.max(0) as u64),
            thousands(breakdown.budget - breakdown.request_tokens)
        );
    }

    html.push_str(
        "<h2>Parts</h2>\n<table>\n<tr><th>part</th><th>group</th><th>tokens</th>\
         <th>% of window</th><th>% of budget</th></tr>\n",
    );
    for part in &breakdown.parts {
        let _ = writeln!(
            html,
            "<tr><td><i class=\"sw\" style=\"background:{}\"></i>{}</td><td>{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{:.2}</td><td class=\"n\">{:.2}</td></tr>",
            colour(part.group),
            escape(&part.label),
            part.group.name(),
            signed_thousands(part.tokens),
            part.window_percent,
            part.budget_percent,
        );
    }
    let _ = writeln!(
        html,
        "<tr><th>total</th><th></th><th class=\"n\">{}</th><th></th><th></th></tr>\n</table>",
        thousands(breakdown.request_tokens)
    );

    if !breakdown.largest_tool_results.is_empty() {
        html.push_str(
            "<h2>Largest tool results</h2>\n<p class=\"sub\">Already counted in the parts \
             above.</p>\n<table>\n<tr><th>tool</th><th>call</th><th>tokens</th>\
             <th>% of window</th><th>% of budget</th></tr>\n",
        );
        for r in &breakdown.largest_tool_results {
            let _ = writeln!(
                html,
                "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{:.2}</td>\
                 <td class=\"n\">{:.2}</td></tr>",
                escape(&r.tool),
                escape(&r.tool_call_id),
                thousands(r.tokens),
                r.window_percent,
                r.budget_percent,
            );
        }
        html.push_str("</table>\n");
    }
    html.push_str("</body>\n</html>\n");
    html
}

/// `thousands` for a count that may be negative (framing).
pub fn signed_thousands(n: i64) -> String {
    if n < 0 {
        format!("-{}", thousands(n.unsigned_abs()))
    } else {
        thousands(n as u64)
    }
}
