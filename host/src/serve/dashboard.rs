//! `GET /ui`: the live page of a running `rampart serve`, built from the event stream.
//!
//! Every event the host and its engines emit reaches [`Dashboard::observe`] (a tap on the
//! server's [`crate::engine::services::EventSink`]); the dashboard keeps, per session, what the
//! page shows: the prompt tokens of each call against the window, the compactions with their
//! tokens before and after, and the caps, prunes and flushes. The page is rendered on the
//! server as plain HTML and inline SVG, so it reads with JavaScript off; each change is also
//! sent to `GET /ui/events` subscribers ([`event_stream`]), and the page's one script,
//! [`APP_JS`] (served from the binary as `/ui/app.js`: no inline script, nothing loaded from
//! elsewhere, so the Content-Security-Policy stays `script-src 'self'`), adds points, markers
//! and counts as they arrive. Every string taken from a conversation or an engine is escaped
//! before it is embedded, and the script inserts them as text: a client's text is an attack
//! path into the operator's browser.

use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

use axum::body::Bytes;
use serde::Serialize;
use tokio::sync::{broadcast, watch};

use rampart_context::events::Event;
use rampart_engine_api::host::EngineEvent;

use crate::replay::report_html::escape;
use crate::replay::table::thousands;

/// Calls kept per conversation for the chart (the oldest are dropped past this).
pub const MAX_CALLS: usize = 2_000;

/// Conversations listed (the most recently active).
pub const MAX_CONVERSATIONS: usize = 200;

/// The headers every `/ui` answer carries: only this server's own script and event stream,
/// nothing loaded from elsewhere, no framing, no sniffing, no caching of a page that shows
/// conversations.
pub const SECURITY_HEADERS: [(&str, &str); 4] = [
    (
        "content-security-policy",
        "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; \
         base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    ("x-content-type-options", "nosniff"),
    ("cache-control", "no-store"),
    ("referrer-policy", "no-referrer"),
];

/// One compaction as the page shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionMark {
    /// The call index it happened before (0-based, in this conversation's calls).
    pub at_call: usize,
    /// What set it off (`budget`, `overflow`, ...).
    pub reason: String,
    /// Prompt tokens before and after, when the engine measured them.
    pub tokens_before: Option<u64>,
    /// Prompt tokens after.
    pub tokens_after: Option<u64>,
    /// Length of the summary it wrote, in characters.
    pub summary_chars: Option<u64>,
}

/// What the page knows of one session.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConversationView {
    /// The session id.
    pub session_id: String,
    /// The engine that last spoke for it (not `host`).
    pub engine: String,
    /// The window of the model of its last call.
    pub window: u64,
    /// The prompt tokens of each answered call, oldest first.
    pub calls: Vec<u64>,
    /// Calls answered (also those dropped from `calls`).
    pub answered: u64,
    /// Turns answered (client requests the run loop answered).
    pub turns: u64,
    /// Compactions that happened.
    pub compactions: Vec<CompactionMark>,
    /// Tool results capped at ingest, and the blobs keeping their originals.
    pub caps: u64,
    /// Blob ids of capped originals, newest last.
    pub capped_blobs: Vec<String>,
    /// Prunes.
    pub prunes: u64,
    /// Memory flushes.
    pub flushes: u64,
    /// Caps, prunes and flushes with the call they happened before, for the chart.
    pub marks: Vec<Mark>,
    /// Unix milliseconds of its last event.
    pub last_ms: u64,
}

/// The page's script (`GET /ui/app.js`): subscribes to `/ui/events` and redraws a chart, adds
/// a compaction's row and bumps the table's counts as each update arrives. Embedded, so the page
/// needs nothing from the network; it draws with the geometry of [`conversation_section`].
pub const APP_JS: &str = include_str!("dashboard_app.js");

/// Updates held for a slow `/ui/events` subscriber; one that falls further behind is told to
/// reload instead of having its backlog grow.
pub const UPDATE_BUFFER: usize = 256;

/// How often an idle `/ui/events` stream sends a comment, so proxies and browsers keep it open.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// What happened in a conversation, as `/ui/events` sends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum UpdateKind {
    /// A call was answered.
    Call,
    /// A compaction replaced part of the context.
    Compaction,
    /// A tool result was capped at ingest.
    Cap,
    /// The engine pruned.
    Prune,
    /// The memory flush ran.
    Flush,
    /// A turn (a client request) was answered.
    Turn,
}

/// One `/ui/events` update: enough for the page's script to add a point or a marker and bump
/// a count without reloading.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Update {
    /// The session id.
    pub conversation: String,
    /// What happened.
    pub kind: UpdateKind,
    /// The call's 0-based index in the chart for a `call`; for a marker, the index of the call
    /// it happened before (as [`CompactionMark::at_call`]).
    pub call: usize,
    /// The call's prompt tokens (`call` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u64>,
    /// The window of the conversation's model (0 before its first request).
    pub window: u64,
    /// The engine that speaks for it.
    pub engine: String,
    /// A compaction's reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A compaction's prompt tokens before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_before: Option<u64>,
    /// A compaction's prompt tokens after.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_after: Option<u64>,
    /// The length of a compaction's summary, in characters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary_chars: Option<u64>,
}

/// A cap, prune or flush on the chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    /// What it was (never `Call` or `Compaction`: those have their own lists).
    pub kind: UpdateKind,
    /// The call index it happened before.
    pub at_call: usize,
}

/// The live state behind `/ui`, and the channel `/ui/events` subscribers hear its updates on.
#[derive(Debug)]
pub struct Dashboard {
    conversations: Mutex<HashMap<String, ConversationView>>,
    updates: broadcast::Sender<Update>,
}

impl Default for Dashboard {
    fn default() -> Self {
        Self::with_buffer(UPDATE_BUFFER)
    }
}

impl Dashboard {
    /// A dashboard whose subscribers may fall `buffer` updates behind before being told to
    /// reload.
    pub fn with_buffer(buffer: usize) -> Self {
        Self {
            conversations: Mutex::default(),
            updates: broadcast::channel(buffer.max(1)).0,
        }
    }

    /// A receiver of every update from now on (see [`next_frame`]).
    pub fn subscribe(&self) -> broadcast::Receiver<Update> {
        self.updates.subscribe()
    }

    /// Takes in one event from `source` (`host` or an engine id) at `now_ms`.
    pub fn observe(&self, source: &str, event: &EngineEvent, now_ms: u64) {
        let Some(session) = event.session_id.as_deref() else {
            return;
        };
        let Some(typed) = Event::from_envelope(&event.kind, &event.data) else {
            return;
        };
        let mut map = self.conversations.lock().unwrap_or_else(|p| p.into_inner());
        let view = entry(&mut map, session, now_ms);
        if source != crate::run::events::HOST_SOURCE {
            view.engine = source.to_string();
        }
        let at = view.calls.len();
        let mut update = Update {
            conversation: session.to_string(),
            kind: UpdateKind::Call,
            call: at,
            prompt_tokens: None,
            window: view.window,
            engine: view.engine.clone(),
            reason: None,
            tokens_before: None,
            tokens_after: None,
            summary_chars: None,
        };
        match typed {
            Event::Request(r) => {
                view.window = r.window;
                return;
            }
            Event::Response(r) => {
                view.answered += 1;
                view.calls.push(r.prompt_tokens);
                if view.calls.len() > MAX_CALLS {
                    view.calls.remove(0);
                }
                update.call = view.calls.len() - 1;
                update.prompt_tokens = Some(r.prompt_tokens);
            }
            Event::CompactionEnd(c) if c.compacted => {
                update.kind = UpdateKind::Compaction;
                update.reason = Some(c.reason.clone());
                update.tokens_before = c.tokens_before;
                update.tokens_after = c.tokens_after;
                update.summary_chars = c.summary_chars;
                view.compactions.push(CompactionMark {
                    at_call: at,
                    reason: c.reason,
                    tokens_before: c.tokens_before,
                    tokens_after: c.tokens_after,
                    summary_chars: c.summary_chars,
                });
            }
            Event::IngestCap(c) => {
                view.caps += 1;
                if let Some(blob) = c.blob {
                    view.capped_blobs.push(blob);
                }
                update.kind = UpdateKind::Cap;
                mark(view, UpdateKind::Cap, at);
            }
            Event::Prune(_) => {
                view.prunes += 1;
                update.kind = UpdateKind::Prune;
                mark(view, UpdateKind::Prune, at);
            }
            Event::MemoryFlush(_) => {
                view.flushes += 1;
                update.kind = UpdateKind::Flush;
                mark(view, UpdateKind::Flush, at);
            }
            _ => return,
        }
        // Sent under the lock, so subscribers hear updates in the order the page counts them.
        // No subscriber is no error.
        let _ = self.updates.send(update);
    }

    /// A turn of `session` was answered at `now_ms`; `engine` is the configured one, named
    /// even when it emits nothing.
    pub fn turn(&self, session: &str, engine: &str, now_ms: u64) {
        let mut map = self.conversations.lock().unwrap_or_else(|p| p.into_inner());
        let view = entry(&mut map, session, now_ms);
        view.turns += 1;
        if view.engine.is_empty() {
            view.engine = engine.to_string();
        }
        let _ = self.updates.send(Update {
            conversation: session.to_string(),
            kind: UpdateKind::Turn,
            call: view.calls.len(),
            prompt_tokens: None,
            window: view.window,
            engine: view.engine.clone(),
            reason: None,
            tokens_before: None,
            tokens_after: None,
            summary_chars: None,
        });
    }

    /// The conversations, most recently active first.
    pub fn conversations(&self) -> Vec<ConversationView> {
        let map = self.conversations.lock().unwrap_or_else(|p| p.into_inner());
        let mut list: Vec<ConversationView> = map.values().cloned().collect();
        list.sort_by(|a, b| {
            b.last_ms
                .cmp(&a.last_ms)
                .then_with(|| a.session_id.cmp(&b.session_id))
        });
        list
    }

    /// The page at `now_ms`.
    pub fn render(&self, now_ms: u64) -> String {
        let list = self.conversations();
        let mut html = String::from(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <title>Rampart serve</title>\n<script src=\"ui/app.js\" defer></script>\n",
        );
        let _ = write!(
            html,
            "<style>{CSS}</style>\n</head>\n<body>\n<h1>Rampart serve</h1>\n"
        );
        let _ = writeln!(
            html,
            "<p class=\"sub\">{} conversation(s), most recently active first. Reload for news.</p>",
            list.len()
        );
        html.push_str(
            "<p class=\"legend\">Markers: <span class=\"k-compaction\">&#9660; compaction</span> \
             <span class=\"k-cap\">&#9632; tool result capped</span> \
             <span class=\"k-prune\">&#9670; prune</span> \
             <span class=\"k-flush\">&#9679; memory flush</span></p>\n",
        );
        html.push_str(
            "<table id=\"conversations\">\n<tr><th>session</th><th>engine</th>\
             <th>window use</th><th>turns</th><th>calls</th><th>compactions</th><th>caps</th>\
             <th>prunes</th><th>flushes</th><th>last activity</th></tr>\n",
        );
        for v in &list {
            let last = v.calls.last().copied().unwrap_or(0);
            let usage = if v.window > 0 {
                format!(
                    "{} / {} ({:.0}%)",
                    thousands(last),
                    thousands(v.window),
                    last as f64 * 100.0 / v.window as f64
                )
            } else {
                "-".to_string()
            };
            let _ = writeln!(
                html,
                "<tr class=\"conversation\" id=\"r-{id}\"><td><a href=\"#s-{id}\">{id}</a></td><td>{}</td>\
                 <td class=\"n\">{usage}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td><td>{}s ago</td></tr>",
                escape(&v.engine),
                v.turns,
                v.answered,
                v.compactions.len(),
                v.caps,
                v.prunes,
                v.flushes,
                now_ms.saturating_sub(v.last_ms) / 1000,
                id = escape(&v.session_id),
            );
        }
        html.push_str("</table>\n");
        for v in &list {
            html.push_str(&conversation_section(v));
        }
        html.push_str("</body>\n</html>\n");
        html
    }
}

/// Records a cap, prune or flush for the chart, the oldest dropped past [`MAX_CALLS`].
fn mark(view: &mut ConversationView, kind: UpdateKind, at_call: usize) {
    view.marks.push(Mark { kind, at_call });
    if view.marks.len() > MAX_CALLS {
        view.marks.remove(0);
    }
}

/// The next piece of a `/ui/events` stream from `received`, and whether it is the last: an
/// update is an `update` event carrying its JSON; a subscriber that fell behind gets one
/// `reload` event (the page reloads and starts afresh) and its stream ends, so a slow client
/// never holds more than [`UPDATE_BUFFER`] updates; a closed channel ends the stream.
pub fn frame(received: Result<Update, broadcast::error::RecvError>) -> Option<(Bytes, bool)> {
    match received {
        Ok(update) => {
            let json = serde_json::to_string(&update).unwrap_or_else(|_| "{}".to_string());
            Some((
                Bytes::from(format!("event: update\ndata: {json}\n\n")),
                false,
            ))
        }
        Err(broadcast::error::RecvError::Lagged(missed)) => {
            tracing::debug!(
                missed,
                "a /ui/events subscriber fell behind; told to reload"
            );
            Some((
                Bytes::from(format!("event: reload\ndata: {{\"missed\":{missed}}}\n\n")),
                true,
            ))
        }
        Err(broadcast::error::RecvError::Closed) => None,
    }
}

/// The body of `GET /ui/events`: [`frame`]s of `updates`, a keep-alive comment every
/// [`KEEP_ALIVE`] when idle, ended when `stopping` turns true (the server is shutting down:
/// an endless response would otherwise hold its connection to the drain deadline).
pub fn event_stream(
    updates: broadcast::Receiver<Update>,
    stopping: watch::Receiver<bool>,
) -> impl futures_util::Stream<Item = Result<Bytes, Infallible>> + Send + 'static {
    let tick = tokio::time::interval_at(tokio::time::Instant::now() + KEEP_ALIVE, KEEP_ALIVE);
    let start = (updates, stopping, tick, false);
    futures_util::stream::unfold(
        start,
        |(mut updates, mut stopping, mut tick, ended)| async move {
            if ended {
                return None;
            }
            let (bytes, last) = tokio::select! {
                biased;
                _ = stopping.wait_for(|s| *s) => return None,
                received = updates.recv() => frame(received)?,
                _ = tick.tick() => (Bytes::from_static(b": keep-alive\n\n"), false),
            };
            Some((Ok(bytes), (updates, stopping, tick, last)))
        },
    )
}

/// The view of `session`, made when new (the least recently active one dropped past
/// [`MAX_CONVERSATIONS`]), touched at `now_ms`.
fn entry<'a>(
    map: &'a mut HashMap<String, ConversationView>,
    session: &str,
    now_ms: u64,
) -> &'a mut ConversationView {
    if !map.contains_key(session)
        && map.len() >= MAX_CONVERSATIONS
        && let Some(oldest) = map
            .values()
            .min_by_key(|v| v.last_ms)
            .map(|v| v.session_id.clone())
    {
        map.remove(&oldest);
    }
    let view = map
        .entry(session.to_string())
        .or_insert_with(|| ConversationView {
            session_id: session.to_string(),
            ..ConversationView::default()
        });
    view.last_ms = now_ms;
    view
}

const CSS: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222}\
h1{font-size:20px;margin:0 0 4px}.sub{color:#555;margin:0 0 16px}\
table{border-collapse:collapse;margin:12px 0}td,th{padding:3px 10px;border-bottom:1px solid #ddd;\
text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}\
svg{background:#fafafa;border:1px solid #ddd}.legend{color:#555;margin:0 0 8px}\
.k-compaction{color:#8e44ad}.k-cap{color:#e67e22}.k-prune{color:#27ae60}.k-flush{color:#16a085}";

/// A marker's shape at `x`, each kind its own and in its own band: compactions a triangle above
/// the plot, caps a square, prunes a diamond and flushes a disc below it (the script draws the
/// same, in `dashboard_app.js`).
fn marker_path(kind: UpdateKind, x: f64) -> String {
    match kind {
        UpdateKind::Compaction => format!("M{x:.1} {:.1} l-5 -8 h10 z", PAD - 4.0),
        UpdateKind::Cap => format!("M{:.1} 166 h8 v8 h-8 z", x - 4.0),
        UpdateKind::Prune => format!("M{x:.1} 177 l5 5 l-5 5 l-5 -5 z"),
        _ => format!("M{:.1} 194 a4 4 0 1 0 8 0 a4 4 0 1 0 -8 0 z", x - 4.0),
    }
}

const W: f64 = 720.0;
const H: f64 = 200.0;
const PAD: f64 = 40.0;

/// One conversation: its chart of prompt tokens per call against the window, and its
/// compactions listed with their tokens before and after.
fn conversation_section(v: &ConversationView) -> String {
    let id = escape(&v.session_id);
    let mut out = format!("<section id=\"s-{id}\">\n<h2>{id}</h2>\n");
    let peak = v.calls.iter().copied().max().unwrap_or(0);
    let top = (v.window.max(peak) as f64 * 1.08).max(1.0);
    let n = v.calls.len();
    let x = |i: usize| {
        PAD + if n <= 1 {
            (W - 2.0 * PAD) / 2.0
        } else {
            i as f64 * (W - 2.0 * PAD) / (n - 1) as f64
        }
    };
    let y = |t: u64| H - PAD - (t as f64 / top) * (H - 2.0 * PAD);
    let _ = writeln!(
        out,
        "<svg class=\"chart\" viewBox=\"0 0 {W} {H}\" width=\"{W}\" height=\"{H}\" role=\"img\" \
         aria-label=\"prompt tokens per call against the window\" data-window=\"{}\">",
        v.window
    );
    if v.window > 0 {
        let wy = y(v.window);
        let _ = writeln!(
            out,
            "<line x1=\"{PAD}\" y1=\"{wy:.1}\" x2=\"{:.1}\" y2=\"{wy:.1}\" stroke=\"#c0392b\" \
             stroke-dasharray=\"6 4\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" \
             text-anchor=\"end\" fill=\"#c0392b\">window {}</text>",
            W - PAD,
            W - PAD,
            wy - 4.0,
            thousands(v.window)
        );
    }
    let points: Vec<String> = v
        .calls
        .iter()
        .enumerate()
        .map(|(i, t)| format!("{:.1},{:.1}", x(i), y(*t)))
        .collect();
    let _ = writeln!(
        out,
        "<polyline fill=\"none\" stroke=\"#2c6fbb\" stroke-width=\"1.5\" points=\"{}\"/>",
        points.join(" ")
    );
    for (i, t) in v.calls.iter().enumerate() {
        let _ = writeln!(
            out,
            "<circle class=\"point\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"#2c6fbb\" \
             data-t=\"{t}\"><title>call {}: {} tokens</title></circle>",
            x(i),
            y(*t),
            i + 1,
            thousands(*t)
        );
    }
    let at = |call: usize| x(call.min(n.saturating_sub(1)));
    for (k, c) in v.compactions.iter().enumerate() {
        let _ = writeln!(
            out,
            "<a href=\"#s-{id}-c{k}\"><path class=\"compaction\" d=\"{}\" fill=\"#8e44ad\" \
             data-at=\"{}\"><title>compaction {}</title></path></a>",
            marker_path(UpdateKind::Compaction, at(c.at_call)),
            c.at_call,
            k + 1
        );
    }
    for m in &v.marks {
        let (class, color, label) = match m.kind {
            UpdateKind::Cap => ("cap", "#e67e22", "tool result capped"),
            UpdateKind::Prune => ("prune", "#27ae60", "prune"),
            _ => ("flush", "#16a085", "memory flush"),
        };
        let _ = writeln!(
            out,
            "<path class=\"{class}\" d=\"{}\" fill=\"{color}\" data-at=\"{}\">\
             <title>{label} before call {}</title></path>",
            marker_path(m.kind, at(m.at_call)),
            m.at_call,
            m.at_call + 1
        );
    }
    out.push_str("</svg>\n");
    if !v.compactions.is_empty() {
        out.push_str(
            "<table class=\"compactions\"><tr><th>#</th><th>before call</th><th>reason</th>\
             <th>tokens before</th><th>tokens after</th><th>summary chars</th></tr>\n",
        );
        let opt = |t: Option<u64>| t.map_or("-".to_string(), thousands);
        for (k, c) in v.compactions.iter().enumerate() {
            let _ = writeln!(
                out,
                "<tr id=\"s-{id}-c{k}\"><td>{}</td><td class=\"n\">{}</td><td>{}</td>\
                 <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
                k + 1,
                c.at_call + 1,
                escape(&c.reason),
                opt(c.tokens_before),
                opt(c.tokens_after),
                opt(c.summary_chars),
            );
        }
        out.push_str("</table>\n");
    }
    if !v.capped_blobs.is_empty() {
        out.push_str("<p>Capped results, originals kept as blobs: ");
        let blobs: Vec<String> = v
            .capped_blobs
            .iter()
            .map(|b| format!("<code>{}</code>", escape(b)))
            .collect();
        out.push_str(&blobs.join(", "));
        out.push_str("</p>\n");
    }
    out.push_str("</section>\n");
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "dashboard_tests.rs"]
mod tests;
