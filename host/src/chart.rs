//! The one chart of a conversation's context: the prompt tokens of each call against the
//! window and the prompt budget, with markers for what the defence did (compactions, caps and
//! truncations, prunes, memory flushes, failed calls).
//!
//! Drawn on the server as SVG, with no script, so it reads anywhere: the replay's HTML report
//! (`rampart replay --report`, [`crate::replay::report_html`]) embeds it, and `rampart serve`'s
//! live page (`/ui`, [`crate::serve::dashboard`]) embeds it and serves it alone
//! ([`Chart::render_standalone`]) for its script to swap in as calls arrive, so the live chart
//! is drawn by this code too and the two never disagree. Every string (titles, links) is
//! escaped here.

use std::fmt::Write as _;

use crate::html::escape;
use crate::replay::table::thousands;

/// The chart's size and the margins around its plot, in SVG user units.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Geometry {
    /// Width of the whole chart.
    pub width: f64,
    /// Height of the whole chart.
    pub height: f64,
    /// Left margin (the token labels).
    pub left: f64,
    /// Right margin.
    pub right: f64,
    /// Top margin (the compaction markers).
    pub top: f64,
    /// Bottom margin (the call labels).
    pub bottom: f64,
}

impl Geometry {
    /// The replay report's: one wide chart per page.
    pub const REPORT: Geometry = Geometry {
        width: 960.0,
        height: 380.0,
        left: 70.0,
        right: 20.0,
        top: 28.0,
        bottom: 40.0,
    };

    /// The live page's: one per conversation, several on a screen.
    pub const LIVE: Geometry = Geometry {
        width: 760.0,
        height: 240.0,
        left: 62.0,
        right: 16.0,
        top: 26.0,
        bottom: 34.0,
    };

    fn plot_width(&self) -> f64 {
        self.width - self.left - self.right
    }

    fn plot_height(&self) -> f64 {
        self.height - self.top - self.bottom
    }
}

/// One call on the chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    /// Its number under the axis (the replay's call, the live page's count).
    pub label: u64,
    /// Its prompt tokens as the provider counted them; `None` for a call that got no answer
    /// (the line breaks there).
    pub tokens: Option<u64>,
}

/// What a marker stands for; each has its shape, colour and CSS class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerKind {
    /// A compaction replaced part of the history: a triangle above the plot.
    Compaction,
    /// A tool result was capped or truncated: a ring at the call.
    Cap,
    /// Pruning shortened the request: a square at the call.
    Prune,
    /// The memory flush wrote notes: a diamond at the call.
    Flush,
    /// The call failed: a cross on the axis.
    Failed,
}

impl MarkerKind {
    /// The CSS class of its element (also what tests and the live page's script look for).
    pub fn class(self) -> &'static str {
        match self {
            Self::Compaction => "compaction",
            Self::Cap => "cap",
            Self::Prune => "prune",
            Self::Flush => "flush",
            Self::Failed => "failed",
        }
    }

    /// Its colour, for legends beside the chart.
    pub fn colour(self) -> &'static str {
        match self {
            Self::Compaction => "#8e44ad",
            Self::Cap => "#e67e22",
            Self::Prune => "#27ae60",
            Self::Flush => "#16a085",
            Self::Failed => "#c0392b",
        }
    }

    /// Its symbol as text, for legends (an HTML character reference).
    pub fn symbol(self) -> &'static str {
        match self {
            Self::Compaction => "&#9660;",
            Self::Cap => "&#9675;",
            Self::Prune => "&#9632;",
            Self::Flush => "&#9670;",
            Self::Failed => "&#10005;",
        }
    }

    /// The path of its shape at `(x, y)` (`y` is the call's point, or the axis), or above the
    /// plot starting at `top` for a compaction.
    fn path(self, x: f64, y: f64, top: f64) -> String {
        match self {
            Self::Compaction => format!("M{x:.1} {:.1} l-5 -8 h10 z", top + 2.0),
            Self::Cap => format!("M{:.1} {y:.1} a4 4 0 1 0 8 0 a4 4 0 1 0 -8 0", x - 4.0),
            Self::Prune => format!("M{:.1} {:.1} h7 v7 h-7 z", x - 3.5, y - 3.5),
            Self::Flush => format!("M{x:.1} {:.1} l5 5 l-5 5 l-5 -5 z", y - 5.0),
            Self::Failed => format!("M{:.1} {:.1} l8 8 m0 -8 l-8 8", x - 4.0, y - 10.0),
        }
    }

    /// Its paint: filled, or drawn as a line (the ring and the cross).
    fn paint(self) -> String {
        let colour = self.colour();
        match self {
            Self::Cap => format!("fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\""),
            Self::Failed => format!("fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\""),
            _ => format!("fill=\"{colour}\""),
        }
    }
}

/// A marker at a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    /// What it stands for.
    pub kind: MarkerKind,
    /// The index (0-based, into [`Chart::calls`]) of the call it is drawn at; past the last
    /// call it is drawn at the last one (a compaction before a call not yet answered).
    pub at: usize,
    /// Its tooltip (plain text, escaped here).
    pub title: String,
    /// Where clicking it leads (a URL, escaped here), if anywhere.
    pub href: Option<String>,
}

/// The chart: what it plots and how it is laid out.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// Its size.
    pub geometry: Geometry,
    /// The model's window, in tokens (0: unknown, no line).
    pub window: u64,
    /// The prompt budget (the line a budget compaction crosses), when known.
    pub budget: Option<u64>,
    /// The calls, oldest first.
    pub calls: Vec<Call>,
    /// What sending the whole history would have taken at each call (the replay's grey
    /// line), drawn until it leaves the chart; empty for none.
    pub everything: Vec<u64>,
    /// The markers.
    pub markers: Vec<Marker>,
    /// Draw each answered call as a point with its tooltip (the live page; a replay of
    /// thousands of calls draws the line alone).
    pub points: bool,
}

impl Chart {
    /// The chart as inline SVG, to embed in an HTML page (no namespace declaration, so the
    /// page names no URL at all).
    pub fn render(&self) -> String {
        self.draw(false)
    }

    /// The chart as an SVG document of its own (with its namespace), for a script to parse
    /// and swap in for the one on the page.
    pub fn render_standalone(&self) -> String {
        self.draw(true)
    }

    fn draw(&self, standalone: bool) -> String {
        let g = self.geometry;
        let (plot_w, plot_h) = (g.plot_width(), g.plot_height());
        let peak = self
            .calls
            .iter()
            .filter_map(|c| c.tokens)
            .max()
            .unwrap_or(0);
        let top_value = (self.window.max(peak) as f64 * 1.08).max(1.0);
        let n = self.calls.len();
        let x = |i: usize| {
            g.left
                + if n <= 1 {
                    plot_w / 2.0
                } else {
                    i as f64 * plot_w / (n - 1) as f64
                }
        };
        let y = |v: u64| g.top + plot_h - (v as f64 / top_value) * plot_h;
        let axis = g.top + plot_h;
        let mut svg = String::new();
        let _ = writeln!(
            svg,
            "<svg{} class=\"chart\" viewBox=\"0 0 {} {}\" width=\"{}\" height=\"{}\" role=\"img\" \
             aria-label=\"prompt tokens per call against the window\" data-window=\"{}\" \
             data-calls=\"{n}\">",
            if standalone {
                " xmlns=\"http://www.w3.org/2000/svg\""
            } else {
                ""
            },
            g.width,
            g.height,
            g.width,
            g.height,
            self.window,
        );
        // Grid and labels.
        for k in 0..=4 {
            let v = (top_value * k as f64 / 4.0) as u64;
            let yy = y(v);
            let _ = writeln!(
                svg,
                "<line x1=\"{:.1}\" y1=\"{yy:.1}\" x2=\"{:.1}\" y2=\"{yy:.1}\" stroke=\"#e4e4e4\"/>\
                 <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\" \
                 fill=\"#666\">{}</text>",
                g.left,
                g.width - g.right,
                g.left - 6.0,
                yy + 4.0,
                thousands(v)
            );
        }
        let ticks = n.clamp(1, 10);
        for k in 0..ticks {
            let i = if ticks <= 1 {
                0
            } else {
                k * (n.saturating_sub(1)) / (ticks - 1)
            };
            if let Some(c) = self.calls.get(i) {
                let _ = writeln!(
                    svg,
                    "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\" \
                     fill=\"#666\">{}</text>",
                    x(i),
                    axis + 15.0,
                    c.label
                );
            }
        }
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\" \
             fill=\"#444\">call</text>",
            g.left + plot_w / 2.0,
            g.height - 4.0,
        );
        // The window, and the prompt budget a budget compaction crosses.
        if self.window > 0 {
            level_line(
                &mut svg,
                &g,
                y(self.window),
                "#c0392b",
                "6 4",
                &format!("window {}", thousands(self.window)),
            );
        }
        if let Some(budget) = self.budget.filter(|b| *b > 0) {
            level_line(
                &mut svg,
                &g,
                y(budget),
                "#d68910",
                "2 3",
                &format!("prompt budget {}", thousands(budget)),
            );
        }
        // Sending everything: it soon leaves the chart, so it stops at the top edge.
        let everything: Vec<String> = self
            .everything
            .iter()
            .enumerate()
            .take_while(|(_, t)| (**t as f64) <= top_value)
            .map(|(i, t)| format!("{:.1},{:.1}", x(i), y(*t)))
            .collect();
        if everything.len() > 1 {
            let _ = writeln!(
                svg,
                "<polyline class=\"everything\" fill=\"none\" stroke=\"#aaa\" stroke-width=\"1\" \
                 points=\"{}\"/>",
                everything.join(" ")
            );
        }
        // Prompt tokens: one line per run of answered calls (a failed call breaks it).
        let mut segment: Vec<String> = Vec::new();
        let mut lone: Option<(f64, f64)> = None;
        let end = |segment: &mut Vec<String>, lone: &mut Option<(f64, f64)>, svg: &mut String| {
            match segment.len() {
                0 => {}
                1 if !self.points => {
                    if let Some((px, py)) = lone.take() {
                        let _ = writeln!(
                            svg,
                            "<circle cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"2\" fill=\"#2c6fbb\"/>"
                        );
                    }
                }
                1 => {}
                _ => {
                    let _ = writeln!(
                        svg,
                        "<polyline class=\"tokens\" fill=\"none\" stroke=\"#2c6fbb\" \
                         stroke-width=\"1.5\" points=\"{}\"/>",
                        segment.join(" ")
                    );
                }
            }
            segment.clear();
            *lone = None;
        };
        for (i, c) in self.calls.iter().enumerate() {
            match c.tokens {
                Some(t) => {
                    segment.push(format!("{:.1},{:.1}", x(i), y(t)));
                    lone = Some((x(i), y(t)));
                }
                None => end(&mut segment, &mut lone, &mut svg),
            }
        }
        end(&mut segment, &mut lone, &mut svg);
        if self.points {
            for (i, c) in self.calls.iter().enumerate() {
                if let Some(t) = c.tokens {
                    let _ = writeln!(
                        svg,
                        "<circle class=\"point\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" \
                         fill=\"#2c6fbb\" data-t=\"{t}\"><title>call {}: {} tokens</title></circle>",
                        x(i),
                        y(t),
                        c.label,
                        thousands(t)
                    );
                }
            }
        }
        for m in &self.markers {
            let at = m.at.min(n.saturating_sub(1));
            let (mx, my) = match self.calls.get(at).and_then(|c| c.tokens) {
                Some(t) if m.kind != MarkerKind::Failed => (x(at), y(t)),
                _ => (x(at), axis),
            };
            let shape = format!(
                "<path class=\"{}\" d=\"{}\" {} data-at=\"{}\"><title>{}</title></path>",
                m.kind.class(),
                m.kind.path(mx, my, g.top),
                m.kind.paint(),
                m.at,
                escape(&m.title)
            );
            match &m.href {
                Some(href) => {
                    let _ = writeln!(svg, "<a href=\"{}\">{shape}</a>", escape(href));
                }
                None => {
                    let _ = writeln!(svg, "{shape}");
                }
            }
        }
        svg.push_str("</svg>\n");
        svg
    }
}

/// A dashed horizontal line across the plot at `at`, labelled at its right end.
fn level_line(svg: &mut String, g: &Geometry, at: f64, colour: &str, dashes: &str, label: &str) {
    let _ = writeln!(
        svg,
        "<line x1=\"{:.1}\" y1=\"{at:.1}\" x2=\"{:.1}\" y2=\"{at:.1}\" stroke=\"{colour}\" \
         stroke-width=\"1.5\" stroke-dasharray=\"{dashes}\"/><text x=\"{:.1}\" y=\"{:.1}\" \
         font-size=\"11\" text-anchor=\"end\" fill=\"{colour}\">{}</text>",
        g.left,
        g.width - g.right,
        g.width - g.right - 4.0,
        at - 5.0,
        escape(label)
    );
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "chart_tests.rs"]
mod tests;
