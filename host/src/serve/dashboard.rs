//! `GET /ui`: the live page of a running `rampart serve`, built from the event stream.
//!
//! Every event the host and its engines emit reaches [`Dashboard::observe`] (a tap on the
//! server's [`crate::engine::services::EventSink`]); the dashboard keeps, per session, what the
//! page shows: the prompt tokens of each call against the window and the prompt budget, the
//! compactions with their tokens before and after (each with its detail page,
//! [`super::compaction_page`]), the caps with links to their originals (`/ui/blobs/…`), the
//! prunes and flushes, and the tokens spent. Beside them the page shows the engine's health and
//! the memory's status ([`Panels`], read when the page is). The page is rendered on the server
//! as plain HTML with the chart of [`crate::chart`] inline, so it reads with JavaScript off;
//! each change is also sent to `GET /ui/events` subscribers ([`event_stream`]), and the page's
//! one script, [`APP_JS`] (served from the binary as `/ui/app.js`: no inline script, nothing
//! loaded from elsewhere, so the Content-Security-Policy stays `script-src 'self'`), bumps the
//! counts and swaps in the conversation's chart as the server draws it
//! (`/ui/conversations/<id>/chart`, [`Dashboard::chart_svg`]). Every string taken from a
//! conversation or an engine is escaped before it is embedded, and the script inserts them as
//! text: a client's text is an attack path into the operator's browser.

use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

use axum::body::Bytes;
use rampart_engine_api::memory::MemoryStatus;
use serde::Serialize;
use tokio::sync::{broadcast, watch};

use rampart_context::events::Event;
use rampart_engine_api::host::EngineEvent;

use crate::chart::{Call, Chart, Geometry, Marker, MarkerKind};
use crate::engine::slot::SlotHealth;
use crate::html::{escape, path_segment};
use crate::replay::prices::Prices;
use crate::replay::summary::compaction_spend;
use crate::replay::table::thousands;

/// Calls kept per conversation for the chart (the oldest are dropped past this).
pub const MAX_CALLS: usize = 2_000;

/// Conversations listed (the most recently active).
pub const MAX_CONVERSATIONS: usize = 200;

/// Capped originals linked per conversation (the newest).
pub const MAX_BLOBS: usize = 100;

/// Calls a chart draws as points with their tooltip; past this it is the line alone (the dots
/// would overlap, and the page of many long conversations would weigh tens of megabytes).
pub const MAX_POINTS: usize = 500;

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
    /// The call index it happened before (counted from the conversation's first call seen,
    /// dropped ones included).
    pub at_call: u64,
    /// What set it off (`budget`, `overflow`, ...).
    pub reason: String,
    /// Prompt tokens before and after, when the engine measured them.
    pub tokens_before: Option<u64>,
    /// Prompt tokens after.
    pub tokens_after: Option<u64>,
    /// Length of the summary it wrote, in characters.
    pub summary_chars: Option<u64>,
    /// The `compaction` entry in the session, where its detail page reads the summary and
    /// what it removed.
    pub entry_id: Option<String>,
}

/// What a conversation spent, in tokens: the chat model's input and output, and what its
/// compactions read and wrote (measured when prepared ahead, else estimated as the replay
/// does, [`compaction_spend`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spend {
    /// Prompt tokens of answered calls.
    pub input: u64,
    /// Answer tokens.
    pub output: u64,
    /// Tokens compactions read.
    pub compaction_input: u64,
    /// Tokens compactions wrote.
    pub compaction_output: u64,
}

impl Spend {
    /// All the tokens.
    pub fn tokens(&self) -> u64 {
        self.input + self.output + self.compaction_input + self.compaction_output
    }

    /// In US dollars at `prices`.
    pub fn usd(&self, prices: &Prices) -> f64 {
        prices.usd(
            self.input + self.compaction_input,
            self.output + self.compaction_output,
        )
    }

    fn add(&mut self, other: &Spend) {
        self.input += other.input;
        self.output += other.output;
        self.compaction_input += other.compaction_input;
        self.compaction_output += other.compaction_output;
    }
}

/// What the page knows of one session.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConversationView {
    /// The session id.
    pub session_id: String,
    /// Its registry key, once a turn named it: how its detail pages open the session.
    pub key: Option<String>,
    /// The engine that last spoke for it (not `host`).
    pub engine: String,
    /// The window of the model of its last call.
    pub window: u64,
    /// The prompt budget of its last precheck (0: not yet known).
    pub budget: u64,
    /// The prompt tokens of each answered call, oldest first.
    pub calls: Vec<u64>,
    /// Calls dropped from the front of `calls` past [`MAX_CALLS`].
    pub dropped: u64,
    /// Calls answered (also those dropped from `calls`).
    pub answered: u64,
    /// Turns answered (client requests the run loop answered).
    pub turns: u64,
    /// Compactions that happened.
    pub compactions: Vec<CompactionMark>,
    /// Tool results capped at ingest.
    pub caps: u64,
    /// Blob ids of capped originals, newest last (at most [`MAX_BLOBS`]).
    pub capped_blobs: Vec<String>,
    /// Prunes.
    pub prunes: u64,
    /// Memory flushes.
    pub flushes: u64,
    /// Caps, prunes and flushes with the call they happened before, for the chart.
    pub marks: Vec<Mark>,
    /// What it spent.
    pub spend: Spend,
    /// Unix milliseconds of its last event.
    pub last_ms: u64,
}

/// The page's script (`GET /ui/app.js`): subscribes to `/ui/events`, bumps the table's counts,
/// adds a compaction's row and a capped result's link, and swaps in the conversation's chart
/// as the server draws it, as each update arrives. Embedded, so the page needs nothing from
/// the network.
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

/// One `/ui/events` update: enough for the page's script to bump a count, add a row or a link,
/// and know the chart changed, without reloading.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Update {
    /// The session id.
    pub conversation: String,
    /// What happened.
    pub kind: UpdateKind,
    /// The call's 0-based index in the conversation for a `call`; for a marker, the index of
    /// the call it happened before (as [`CompactionMark::at_call`]).
    pub call: u64,
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
    /// A compaction's number in the conversation (1-based): its detail page's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compaction: Option<usize>,
    /// A capped result's original (`sha256:…`), when one was kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
    /// The conversation's spend as its table cell reads, after a call or a compaction.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spend: Option<String>,
}

impl Update {
    fn new(kind: UpdateKind, view: &ConversationView) -> Self {
        Self {
            conversation: view.session_id.clone(),
            kind,
            call: view.dropped + view.calls.len() as u64,
            prompt_tokens: None,
            window: view.window,
            engine: view.engine.clone(),
            reason: None,
            tokens_before: None,
            tokens_after: None,
            summary_chars: None,
            compaction: None,
            blob: None,
            spend: None,
        }
    }
}

/// A cap, prune or flush on the chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    /// What it was (never `Call` or `Compaction`: those have their own lists).
    pub kind: UpdateKind,
    /// The call index it happened before (as [`CompactionMark::at_call`]).
    pub at_call: u64,
}

/// The last memory flush, for the memory panel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastFlush {
    /// When (Unix milliseconds).
    pub at_ms: u64,
    /// The conversation it ran in.
    pub session_id: String,
    /// The note written, relative to the workspace.
    pub note: String,
    /// Bytes appended.
    pub bytes: u64,
    /// What went wrong, when something did.
    pub error: Option<String>,
}

/// The memory slot as the page shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryPanel {
    /// The configured memory engine (`none` when memory is off).
    pub configured: String,
    /// Whether memory serves now.
    pub on: bool,
    /// The quarantine line, when the engine failed.
    pub quarantined: Option<String>,
    /// The engine's status (backend, index size), or why it could not be read.
    pub status: Option<Result<MemoryStatus, String>>,
}

/// What the page shows besides the conversations, read from the server when the page is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Panels {
    /// The context engine's health.
    pub engine: Option<SlotHealth>,
    /// The memory slot.
    pub memory: Option<MemoryPanel>,
}

/// The live state behind `/ui`, and the channel `/ui/events` subscribers hear its updates on.
#[derive(Debug)]
pub struct Dashboard {
    conversations: Mutex<HashMap<String, ConversationView>>,
    flushes: Mutex<(u64, Option<LastFlush>)>,
    /// `serve --prices`: spend in dollars besides tokens, on the page and in updates.
    prices: std::sync::OnceLock<Prices>,
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
            flushes: Mutex::default(),
            prices: std::sync::OnceLock::new(),
            updates: broadcast::channel(buffer.max(1)).0,
        }
    }

    /// Shows spend in dollars at `prices` from now on (`serve --prices`; the first prices set
    /// stay).
    pub fn set_prices(&self, prices: Prices) {
        let _ = self.prices.set(prices);
    }

    /// A receiver of every update from now on (see [`frame`] and [`event_stream`]).
    pub fn subscribe(&self) -> broadcast::Receiver<Update> {
        self.updates.subscribe()
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, ConversationView>> {
        self.conversations.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes in one event from `source` (`host` or an engine id) at `now_ms`.
    pub fn observe(&self, source: &str, event: &EngineEvent, now_ms: u64) {
        let Some(session) = event.session_id.as_deref() else {
            return;
        };
        let Some(typed) = Event::from_envelope(&event.kind, &event.data) else {
            return;
        };
        let host = source == crate::run::events::HOST_SOURCE;
        let mut map = self.map();
        let view = entry(&mut map, session, now_ms);
        if !host {
            view.engine = source.to_string();
        }
        let at = view.dropped + view.calls.len() as u64;
        let mut update = Update::new(UpdateKind::Call, view);
        match typed {
            Event::Request(r) => {
                view.window = r.window;
                return;
            }
            Event::PrecheckRoute(p) => {
                if p.budget_tokens > 0 {
                    view.budget = p.budget_tokens;
                }
                return;
            }
            Event::CompactionPrepared(p) => {
                if p.ready {
                    view.spend.compaction_input += p.input_tokens;
                    view.spend.compaction_output += p.output_tokens;
                }
                return;
            }
            Event::Response(r) => {
                view.answered += 1;
                view.spend.input += r.prompt_tokens;
                view.spend.output += r.output_tokens;
                view.calls.push(r.prompt_tokens);
                if view.calls.len() > MAX_CALLS {
                    view.calls.remove(0);
                    view.dropped += 1;
                }
                update.call = at;
                update.prompt_tokens = Some(r.prompt_tokens);
            }
            // The host's event names the session's entry; an engine's own copy would count
            // the compaction twice.
            Event::CompactionEnd(c) if c.compacted && host => {
                if !c.prepared {
                    let (read, written) = compaction_spend(&c);
                    view.spend.compaction_input += read;
                    view.spend.compaction_output += written;
                }
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
                    entry_id: c.entry_id,
                });
                update.compaction = Some(view.compactions.len());
            }
            Event::IngestCap(c) => {
                view.caps += 1;
                if let Some(blob) = c.blob.filter(|b| blob_reference(b).is_some()) {
                    view.capped_blobs.push(blob.clone());
                    if view.capped_blobs.len() > MAX_BLOBS {
                        view.capped_blobs.remove(0);
                    }
                    update.blob = Some(blob);
                }
                update.kind = UpdateKind::Cap;
                mark(view, UpdateKind::Cap, at);
            }
            Event::Prune(_) => {
                view.prunes += 1;
                update.kind = UpdateKind::Prune;
                mark(view, UpdateKind::Prune, at);
            }
            Event::MemoryFlush(f) => {
                view.flushes += 1;
                update.kind = UpdateKind::Flush;
                mark(view, UpdateKind::Flush, at);
                let mut flushes = self.flushes.lock().unwrap_or_else(|p| p.into_inner());
                flushes.0 += 1;
                flushes.1 = Some(LastFlush {
                    at_ms: now_ms,
                    session_id: session.to_string(),
                    note: f.note,
                    bytes: f.bytes,
                    error: f.error,
                });
            }
            _ => return,
        }
        if matches!(update.kind, UpdateKind::Call | UpdateKind::Compaction) {
            update.spend = Some(spend_text(&view.spend, self.prices.get()));
        }
        // Sent under the lock, so subscribers hear updates in the order the page counts them.
        // No subscriber is no error.
        let _ = self.updates.send(update);
    }

    /// `session` is registered as `key` (said when a turn opens it, so a compaction's page can
    /// read the session even when that turn fails).
    pub fn name(&self, session: &str, key: &str, now_ms: u64) {
        let mut map = self.map();
        let view = entry(&mut map, session, now_ms);
        if view.key.as_deref() != Some(key) {
            view.key = Some(key.to_string());
        }
    }

    /// A turn of `session` (registered as `key`) was answered at `now_ms`; `engine` is the
    /// configured one, named even when it emits nothing.
    pub fn turn(&self, session: &str, key: &str, engine: &str, now_ms: u64) {
        let mut map = self.map();
        let view = entry(&mut map, session, now_ms);
        view.turns += 1;
        view.key = Some(key.to_string());
        if view.engine.is_empty() {
            view.engine = engine.to_string();
        }
        let _ = self.updates.send(Update::new(UpdateKind::Turn, view));
    }

    /// The conversations, most recently active first.
    pub fn conversations(&self) -> Vec<ConversationView> {
        let map = self.map();
        let mut list: Vec<ConversationView> = map.values().cloned().collect();
        list.sort_by(|a, b| {
            b.last_ms
                .cmp(&a.last_ms)
                .then_with(|| a.session_id.cmp(&b.session_id))
        });
        list
    }

    /// The view of `session`, if the page knows it.
    pub fn conversation(&self, session: &str) -> Option<ConversationView> {
        self.map().get(session).cloned()
    }

    /// The chart of `session` as an SVG document (`GET /ui/conversations/<id>/chart`), for the
    /// page's script to swap in; `None` for a conversation the page does not know.
    pub fn chart_svg(&self, session: &str) -> Option<String> {
        self.map()
            .get(session)
            .map(|v| chart_of(v).render_standalone())
    }

    /// Memory flushes seen, and the last one.
    pub fn flushes(&self) -> (u64, Option<LastFlush>) {
        self.flushes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The page at `now_ms`, with `panels` read from the server.
    pub fn render(&self, now_ms: u64, panels: &Panels) -> String {
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
        html.push_str("<div class=\"panels\">\n");
        html.push_str(&engine_panel(panels.engine.as_ref()));
        html.push_str(&memory_panel(
            panels.memory.as_ref(),
            &self.flushes(),
            now_ms,
        ));
        html.push_str(&spend_panel(&list, self.prices.get()));
        html.push_str("</div>\n");
        html.push_str("<p class=\"legend\">Markers:");
        for (kind, label) in [
            (
                MarkerKind::Compaction,
                "compaction (click for what it removed)",
            ),
            (MarkerKind::Cap, "tool result capped"),
            (MarkerKind::Prune, "prune"),
            (MarkerKind::Flush, "memory flush"),
        ] {
            let _ = write!(
                html,
                " <span class=\"k-{}\" style=\"color:{}\">{} {label}</span>",
                kind.class(),
                kind.colour(),
                kind.symbol()
            );
        }
        html.push_str("</p>\n");
        let spend_header = if self.prices.get().is_some() {
            "<th>spend</th>"
        } else {
            "<th>tokens spent</th>"
        };
        let _ = writeln!(
            html,
            "<table id=\"conversations\">\n<tr><th>session</th><th>engine</th>\
             <th>window use</th><th>turns</th><th>calls</th><th>compactions</th><th>caps</th>\
             <th>prunes</th><th>flushes</th><th>last activity</th>{spend_header}</tr>"
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
                "<tr class=\"conversation\" id=\"r-{id}\"><td><a href=\"#s-{anchor}\">{id}</a></td><td>{}</td>\
                 <td class=\"n\">{usage}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td><td>{}s ago</td><td class=\"n spend\">{}</td></tr>",
                escape(&v.engine),
                v.turns,
                v.answered,
                v.compactions.len(),
                v.caps,
                v.prunes,
                v.flushes,
                now_ms.saturating_sub(v.last_ms) / 1000,
                spend_text(&v.spend, self.prices.get()),
                id = escape(&v.session_id),
                anchor = escape(&path_segment(&v.session_id)),
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

/// A valid blob reference's canonical form (`sha256:` and 64 lowercase hex digits): the only
/// names `/ui/blobs/…` accepts and the page links to.
pub fn blob_reference(text: &str) -> Option<String> {
    let hex = text.strip_prefix("sha256:")?;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| format!("sha256:{}", hex.to_ascii_lowercase()))
}

/// Records a cap, prune or flush for the chart, the oldest dropped past [`MAX_CALLS`].
fn mark(view: &mut ConversationView, kind: UpdateKind, at_call: u64) {
    view.marks.push(Mark { kind, at_call });
    if view.marks.len() > MAX_CALLS {
        view.marks.remove(0);
    }
}

/// A spend cell: tokens, and dollars with prices.
fn spend_text(spend: &Spend, prices: Option<&Prices>) -> String {
    match prices {
        Some(p) => format!(
            "${:.4} ({} tokens)",
            spend.usd(p),
            thousands(spend.tokens())
        ),
        None => thousands(spend.tokens()),
    }
}

/// The context engine's panel: which engine serves, its quarantine, restarts, and its calls.
fn engine_panel(health: Option<&SlotHealth>) -> String {
    let Some(h) = health else {
        return String::new();
    };
    let mut html =
        String::from("<section class=\"panel\" id=\"engine\">\n<h2>Context engine</h2>\n");
    let state = match &h.quarantine {
        Some(q) => format!(
            "<span class=\"bad\">quarantined</span> during {}: {}; <b>{}</b> serves instead",
            escape(&q.operation),
            escape(&q.reason),
            escape(&h.active)
        ),
        None => "<span class=\"ok\">serving</span>".to_string(),
    };
    let _ = writeln!(
        html,
        "<p><b>{}</b>: {state}{}</p>",
        escape(&h.configured),
        h.restarts
            .map(|n| format!("; its process restarted {n} time(s)"))
            .unwrap_or_default()
    );
    if !h.calls.is_empty() {
        html.push_str(
            "<table class=\"calls\"><tr><th>engine</th><th>operation</th><th>calls</th>\
             <th>failed</th><th>mean</th><th>max</th></tr>\n",
        );
        let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1000.0);
        for (engine, op, c) in &h.calls {
            let _ = writeln!(
                html,
                "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
                escape(engine),
                escape(op),
                thousands(c.calls),
                thousands(c.failures),
                ms(c.mean()),
                ms(c.max)
            );
        }
        html.push_str("</table>\n");
    }
    html.push_str("</section>\n");
    html
}

/// The memory panel: on or off, the backend and index, the flushes.
fn memory_panel(
    memory: Option<&MemoryPanel>,
    flushes: &(u64, Option<LastFlush>),
    now_ms: u64,
) -> String {
    let Some(m) = memory else {
        return String::new();
    };
    let mut html = String::from("<section class=\"panel\" id=\"memory\">\n<h2>Memory</h2>\n");
    if let Some(q) = &m.quarantined {
        let _ = writeln!(html, "<p><span class=\"bad\">off</span>: {}</p>", escape(q));
    } else if !m.on {
        html.push_str("<p>off (no memory engine configured)</p>\n");
    } else {
        let _ = writeln!(
            html,
            "<p><b>{}</b>: <span class=\"ok\">on</span></p>",
            escape(&m.configured)
        );
    }
    match &m.status {
        Some(Ok(s)) => {
            let _ = writeln!(
                html,
                "<p>backend {}, {} search{}; index: {} file(s), {} passage(s){}</p>",
                escape(&s.backend),
                escape(&s.mode),
                s.provider
                    .as_ref()
                    .map(|p| format!(" with {}", escape(p)))
                    .unwrap_or_default(),
                thousands(s.files),
                thousands(s.chunks),
                if s.dirty {
                    ", files changed since the last sync"
                } else {
                    ""
                },
            );
        }
        Some(Err(why)) => {
            let _ = writeln!(html, "<p class=\"bad\">status: {}</p>", escape(why));
        }
        None => {}
    }
    let (count, last) = flushes;
    let _ = write!(html, "<p>flushes: {count}");
    if let Some(l) = last {
        let _ = write!(
            html,
            "; last {}s ago in <code>{}</code>: {} byte(s) to <code>{}</code>{}",
            now_ms.saturating_sub(l.at_ms) / 1000,
            escape(&l.session_id),
            thousands(l.bytes),
            escape(&l.note),
            l.error
                .as_ref()
                .map(|e| format!(" <span class=\"bad\">({})</span>", escape(e)))
                .unwrap_or_default()
        );
    }
    html.push_str("</p>\n</section>\n");
    html
}

/// Spend over every conversation listed, in tokens and, with prices, dollars.
fn spend_panel(list: &[ConversationView], prices: Option<&Prices>) -> String {
    let mut total = Spend::default();
    for v in list {
        total.add(&v.spend);
    }
    let mut html = String::from("<section class=\"panel\" id=\"spend\">\n<h2>Spend</h2>\n");
    let _ = writeln!(
        html,
        "<p>{} input + {} output tokens to the chat model; compactions read {} and wrote {}.</p>",
        thousands(total.input),
        thousands(total.output),
        thousands(total.compaction_input),
        thousands(total.compaction_output),
    );
    match prices {
        Some(p) => {
            let _ = writeln!(
                html,
                "<p>Total <b id=\"spend-total\">${:.4}</b> at ${} / ${} per million input / \
                 output tokens.</p>",
                total.usd(p),
                p.input,
                p.output
            );
        }
        None => html.push_str("<p>Start with <code>--prices FILE</code> to see dollars.</p>\n"),
    }
    html.push_str("</section>\n");
    html
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
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:12px 0 4px}.sub{color:#555;margin:0 0 16px}\
table{border-collapse:collapse;margin:12px 0}td,th{padding:3px 10px;border-bottom:1px solid #ddd;\
text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}\
svg{background:#fafafa;border:1px solid #ddd}.legend{color:#555;margin:0 0 8px}\
.panels{display:flex;flex-wrap:wrap;gap:12px}.panel{border:1px solid #ddd;padding:4px 12px;\
min-width:280px}.panel p{margin:4px 0}.ok{color:#1e8449}.bad{color:#b00}";

/// The path of `session`'s pages under `/ui/conversations/`, relative to `/ui`.
fn conversation_path(session: &str) -> String {
    format!("ui/conversations/{}", path_segment(session))
}

/// The chart of `v` ([`crate::chart`]): its calls against the window and the prompt budget,
/// compactions linking to their detail pages, caps, prunes and flushes where they happened.
/// Links are relative to `/ui`, where the page and the swapped-in chart both live.
pub fn chart_of(v: &ConversationView) -> Chart {
    let index = |at: u64| usize::try_from(at.saturating_sub(v.dropped)).unwrap_or(usize::MAX);
    let base = conversation_path(&v.session_id);
    let mut markers: Vec<Marker> = v
        .compactions
        .iter()
        .enumerate()
        .filter(|(_, c)| c.at_call >= v.dropped)
        .map(|(k, c)| Marker {
            kind: MarkerKind::Compaction,
            at: index(c.at_call),
            title: format!(
                "compaction {} before call {}: {} to {} tokens",
                k + 1,
                c.at_call + 1,
                c.tokens_before.map_or("-".to_string(), thousands),
                c.tokens_after.map_or("-".to_string(), thousands)
            ),
            href: Some(format!("{base}/compactions/{}", k + 1)),
        })
        .collect();
    for m in v.marks.iter().filter(|m| m.at_call >= v.dropped) {
        let (kind, label) = match m.kind {
            UpdateKind::Cap => (MarkerKind::Cap, "tool result capped"),
            UpdateKind::Prune => (MarkerKind::Prune, "prune"),
            _ => (MarkerKind::Flush, "memory flush"),
        };
        markers.push(Marker {
            kind,
            at: index(m.at_call),
            title: format!("{label} before call {}", m.at_call + 1),
            href: None,
        });
    }
    Chart {
        geometry: Geometry::LIVE,
        window: v.window,
        budget: (v.budget > 0).then_some(v.budget),
        calls: v
            .calls
            .iter()
            .enumerate()
            .map(|(i, t)| Call {
                label: v.dropped + i as u64 + 1,
                tokens: Some(*t),
            })
            .collect(),
        everything: Vec::new(),
        markers,
        points: v.calls.len() <= MAX_POINTS,
    }
}

/// One conversation: its chart, its compactions with their tokens before and after (each
/// linking to its detail page), and links to the originals of its capped results.
fn conversation_section(v: &ConversationView) -> String {
    let id = escape(&v.session_id);
    let base = escape(&conversation_path(&v.session_id));
    let mut out = format!(
        "<section class=\"conversation-detail\" id=\"s-{}\" data-chart=\"{base}/chart\">\n<h2>{id}</h2>\n",
        escape(&path_segment(&v.session_id))
    );
    out.push_str(&chart_of(v).render());
    out.push_str(
        "<table class=\"compactions\"><tr><th>#</th><th>before call</th><th>reason</th>\
         <th>tokens before</th><th>tokens after</th><th>summary chars</th><th></th></tr>\n",
    );
    let opt = |t: Option<u64>| t.map_or("-".to_string(), thousands);
    for (k, c) in v.compactions.iter().enumerate() {
        let _ = writeln!(
            out,
            "<tr id=\"s-{}-c{k}\"><td>{}</td><td class=\"n\">{}</td><td>{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td><a class=\"detail\" href=\"{base}/compactions/{}\">what it removed</a></td></tr>",
            escape(&path_segment(&v.session_id)),
            k + 1,
            c.at_call + 1,
            escape(&c.reason),
            opt(c.tokens_before),
            opt(c.tokens_after),
            opt(c.summary_chars),
            k + 1,
        );
    }
    out.push_str("</table>\n<p class=\"blobs\">Capped results, originals kept as blobs:");
    for b in &v.capped_blobs {
        // Only valid references are kept, so the link names nothing but a blob.
        let _ = write!(
            out,
            " <a class=\"blob\" href=\"ui/blobs/{0}\"><code>{0}</code></a>",
            escape(b)
        );
    }
    out.push_str("</p>\n</section>\n");
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "dashboard_tests.rs"]
mod tests;
