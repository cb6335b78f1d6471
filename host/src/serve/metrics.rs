//! What `GET /metrics` reports, in Prometheus text format: requests by endpoint and status,
//! conversations created, turns, compactions, side requests, and the time turns spent waiting
//! for the model (upstream latency, recovery included).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rampart_sessions::store::shared::StoreHealth;

use crate::engine::slot::{CallStats, SlotHealth};

/// Upper bounds of the latency histogram, in seconds.
const BUCKETS: [f64; 10] = [0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 30.0, 120.0];

/// The counters of one server.
#[derive(Debug, Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(&'static str, u16), u64>>,
    conversations: AtomicU64,
    turns: AtomicU64,
    compactions: AtomicU64,
    side_requests: AtomicU64,
    upstream: Mutex<Histogram>,
}

#[derive(Debug, Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Metrics {
    /// A request to `endpoint` answered with `status`.
    pub fn request(&self, endpoint: &'static str, status: u16) {
        let mut map = self.requests.lock().unwrap_or_else(|p| p.into_inner());
        *map.entry((endpoint, status)).or_default() += 1;
    }

    /// A conversation was created.
    pub fn conversation_created(&self) {
        self.conversations.fetch_add(1, Ordering::Relaxed);
    }

    /// A turn ended with an answer after `upstream` and `compactions` compactions.
    pub fn turn(&self, upstream: Duration, compactions: u32) {
        self.turns.fetch_add(1, Ordering::Relaxed);
        self.compactions
            .fetch_add(u64::from(compactions), Ordering::Relaxed);
        self.observe_upstream(upstream);
    }

    /// A side request was answered after `upstream`.
    pub fn side_request(&self, upstream: Duration) {
        self.side_requests.fetch_add(1, Ordering::Relaxed);
        self.observe_upstream(upstream);
    }

    fn observe_upstream(&self, took: Duration) {
        let seconds = took.as_secs_f64();
        let mut h = self.upstream.lock().unwrap_or_else(|p| p.into_inner());
        for (i, bound) in BUCKETS.iter().enumerate() {
            if seconds <= *bound {
                h.counts[i] += 1;
            }
        }
        h.count += 1;
        h.sum += seconds;
    }

    /// The Prometheus text, with the current `in_flight` and `queued` requests.
    pub fn render(&self, in_flight: usize, conversations_known: Option<usize>) -> String {
        let mut out = String::new();
        out.push_str("# HELP rampart_serve_requests_total Requests by endpoint and status.\n");
        out.push_str("# TYPE rampart_serve_requests_total counter\n");
        for ((endpoint, status), n) in self
            .requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            out.push_str(&format!(
                "rampart_serve_requests_total{{endpoint=\"{endpoint}\",status=\"{status}\"}} {n}\n"
            ));
        }
        let counters = [
            (
                "rampart_serve_conversations_created_total",
                "Conversations created by this server.",
                &self.conversations,
            ),
            (
                "rampart_serve_turns_total",
                "Turns answered through the run loop.",
                &self.turns,
            ),
            (
                "rampart_serve_compactions_total",
                "Compactions run during turns.",
                &self.compactions,
            ),
            (
                "rampart_serve_side_requests_total",
                "Side requests answered without a conversation.",
                &self.side_requests,
            ),
        ];
        for (name, help, value) in counters {
            out.push_str(&format!(
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}\n",
                value.load(Ordering::Relaxed)
            ));
        }
        out.push_str("# HELP rampart_serve_in_flight Requests admitted and not yet answered.\n");
        out.push_str(&format!(
            "# TYPE rampart_serve_in_flight gauge\nrampart_serve_in_flight {in_flight}\n"
        ));
        if let Some(known) = conversations_known {
            out.push_str("# HELP rampart_serve_conversations Conversations in the registry.\n");
            out.push_str(&format!(
                "# TYPE rampart_serve_conversations gauge\nrampart_serve_conversations {known}\n"
            ));
        }
        let h = self.upstream.lock().unwrap_or_else(|p| p.into_inner());
        let name = "rampart_serve_upstream_seconds";
        out.push_str(&format!(
            "# HELP {name} Time a turn waited for the model, recovery included.\n# TYPE {name} histogram\n"
        ));
        for (i, bound) in BUCKETS.iter().enumerate() {
            out.push_str(&format!(
                "{name}_bucket{{le=\"{bound}\"}} {}\n",
                h.counts[i]
            ));
        }
        out.push_str(&format!("{name}_bucket{{le=\"+Inf\"}} {}\n", h.count));
        out.push_str(&format!("{name}_sum {}\n{name}_count {}\n", h.sum, h.count));
        out
    }
}

/// The store's figures as metrics: whether it answered the check just made, its round trip,
/// its pools' connections (a database store's) and what it has done since it opened. Taken from
/// the typed [`StoreHealth`], the same check `/healthz` makes.
pub fn render_store(health: &StoreHealth) -> String {
    let backend = health.backend;
    let mut out = String::new();
    let gauge = |out: &mut String, name: &str, help: &str| {
        out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} gauge\n"));
    };
    gauge(
        &mut out,
        "rampart_serve_store_up",
        "Whether the session store answered the check just made (1) or not (0).",
    );
    out.push_str(&format!(
        "rampart_serve_store_up{{backend=\"{backend}\"}} {}\n",
        u8::from(health.reachable)
    ));
    if let Some(latency) = health.latency {
        gauge(
            &mut out,
            "rampart_serve_store_latency_seconds",
            "Round trip of the store check just made.",
        );
        out.push_str(&format!(
            "rampart_serve_store_latency_seconds{{backend=\"{backend}\"}} {}\n",
            latency.as_secs_f64()
        ));
    }
    if !health.pools.is_empty() {
        gauge(
            &mut out,
            "rampart_serve_store_pool_connections",
            "The store's connection pools: size (max), open, idle, and callers waiting.",
        );
        for (pool, f) in &health.pools {
            for (state, n) in [
                ("max", f.max),
                ("open", f.open),
                ("idle", f.idle),
                ("waiting", f.waiting),
            ] {
                out.push_str(&format!(
                    "rampart_serve_store_pool_connections{{pool=\"{pool}\",state=\"{state}\"}} {n}\n"
                ));
            }
        }
    }
    if let Some(c) = health.counters {
        let counters = [
            (
                "rampart_serve_store_operations_total",
                "Store operations (queries, transactions, lock waits) since the server started.",
                c.operations as f64,
            ),
            (
                "rampart_serve_store_failures_total",
                "Store operations that failed.",
                c.failures as f64,
            ),
            (
                "rampart_serve_store_unavailable_total",
                "Store operations that failed because the database could not be reached.",
                c.unavailable as f64,
            ),
            (
                "rampart_serve_store_operation_seconds_total",
                "Time spent in store operations.",
                c.total_micros as f64 / 1e6,
            ),
        ];
        for (name, help, value) in counters {
            out.push_str(&format!(
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}\n"
            ));
        }
    }
    out
}

/// A Prometheus label value: backslash, quote and newline escaped, so an engine id from the
/// config cannot end the label or the line.
fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// One metric family of engine calls: name, type, help, and its value of a call's figures.
type CallFamily = (
    &'static str,
    &'static str,
    &'static str,
    fn(&CallStats) -> String,
);

/// The context engine's health as metrics: whether the configured engine is quarantined, how
/// often its process was restarted, and each engine's calls by operation (count, failures,
/// time), from [`SlotHealth`], the figures `/ui` shows.
pub fn render_engine(health: &SlotHealth) -> String {
    let mut out = String::new();
    let engine = label(&health.configured);
    out.push_str(
        "# HELP rampart_serve_engine_quarantined Whether the configured context engine was \
         quarantined (1) and the built-in one serves instead.\n\
         # TYPE rampart_serve_engine_quarantined gauge\n",
    );
    out.push_str(&format!(
        "rampart_serve_engine_quarantined{{engine=\"{engine}\"}} {}\n",
        u8::from(health.quarantine.is_some())
    ));
    if let Some(restarts) = health.restarts {
        out.push_str(
            "# HELP rampart_serve_engine_restarts_total Restarts of the context engine's \
             process after it died.\n# TYPE rampart_serve_engine_restarts_total counter\n",
        );
        out.push_str(&format!(
            "rampart_serve_engine_restarts_total{{engine=\"{engine}\"}} {restarts}\n"
        ));
    }
    let families: [CallFamily; 3] = [
        (
            "rampart_serve_engine_calls_total",
            "counter",
            "Context engine calls by engine and operation.",
            |c| c.calls.to_string(),
        ),
        (
            "rampart_serve_engine_call_failures_total",
            "counter",
            "Context engine calls that failed.",
            |c| c.failures.to_string(),
        ),
        (
            "rampart_serve_engine_call_seconds_total",
            "counter",
            "Time spent in context engine calls.",
            |c| c.total.as_secs_f64().to_string(),
        ),
    ];
    for (name, kind, help, value) in families {
        if health.calls.is_empty() {
            break;
        }
        out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
        for (engine, op, stats) in &health.calls {
            out.push_str(&format!(
                "{name}{{engine=\"{}\",operation=\"{}\"}} {}\n",
                label(engine),
                label(op),
                value(stats)
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_engines_health_with_its_labels_escaped() {
        let health = SlotHealth {
            configured: "lcm\"x\ny".into(),
            active: "legacy".into(),
            quarantine: Some(crate::engine::slot::Quarantine {
                engine: "lcm".into(),
                operation: "assemble".into(),
                reason: "panicked".into(),
            }),
            restarts: Some(2),
            calls: vec![(
                "legacy".into(),
                "assemble".into(),
                CallStats {
                    calls: 4,
                    failures: 1,
                    total: Duration::from_millis(500),
                    max: Duration::from_millis(300),
                },
            )],
        };
        let text = render_engine(&health);
        assert!(
            text.contains("rampart_serve_engine_quarantined{engine=\"lcm\\\"x\\ny\"} 1"),
            "{text}"
        );
        assert!(text.contains("rampart_serve_engine_restarts_total{engine=\"lcm"));
        assert!(text.contains(
            "rampart_serve_engine_calls_total{engine=\"legacy\",operation=\"assemble\"} 4"
        ));
        assert!(text.contains(
            "rampart_serve_engine_call_failures_total{engine=\"legacy\",operation=\"assemble\"} 1"
        ));
        assert!(text.contains("operation=\"assemble\"} 0.5"), "{text}");
        assert_eq!(text.lines().filter(|l| !l.starts_with('#')).count(), 5);
    }

    #[test]
    fn renders_the_stores_figures() {
        use rampart_sessions::store::shared::{PoolFigures, StoreCounters};
        let files = StoreHealth {
            backend: "files",
            reachable: true,
            latency: None,
            pools: Vec::new(),
            counters: None,
            detail: serde_json::Map::new(),
        };
        let text = render_store(&files);
        assert!(
            text.contains("rampart_serve_store_up{backend=\"files\"} 1"),
            "{text}"
        );
        assert!(!text.contains("pool_connections"), "{text}");
        let pg = StoreHealth {
            backend: "postgres",
            reachable: false,
            latency: Some(Duration::from_micros(1500)),
            pools: vec![(
                "query",
                PoolFigures {
                    max: 8,
                    open: 3,
                    idle: 2,
                    waiting: 1,
                },
            )],
            counters: Some(StoreCounters {
                operations: 40,
                failures: 2,
                unavailable: 1,
                total_micros: 2_500_000,
            }),
            detail: serde_json::Map::new(),
        };
        let text = render_store(&pg);
        assert!(
            text.contains("rampart_serve_store_up{backend=\"postgres\"} 0"),
            "{text}"
        );
        assert!(text.contains("rampart_serve_store_latency_seconds{backend=\"postgres\"} 0.0015"));
        assert!(
            text.contains(
                "rampart_serve_store_pool_connections{pool=\"query\",state=\"waiting\"} 1"
            )
        );
        assert!(text.contains("rampart_serve_store_operations_total 40"));
        assert!(text.contains("rampart_serve_store_operation_seconds_total 2.5"));
    }

    #[test]
    fn renders_counters_and_the_histogram() {
        let m = Metrics::default();
        m.request("messages", 200);
        m.request("messages", 200);
        m.request("chat_completions", 429);
        m.turn(Duration::from_millis(30), 2);
        let text = m.render(1, Some(3));
        assert!(
            text.contains("rampart_serve_requests_total{endpoint=\"messages\",status=\"200\"} 2")
        );
        assert!(text.contains("status=\"429\"} 1"));
        assert!(text.contains("rampart_serve_compactions_total 2"));
        assert!(text.contains("rampart_serve_upstream_seconds_bucket{le=\"0.025\"} 0"));
        assert!(text.contains("rampart_serve_upstream_seconds_bucket{le=\"0.1\"} 1"));
        assert!(text.contains("rampart_serve_upstream_seconds_count 1"));
        assert!(text.contains("rampart_serve_conversations 3"));
    }
}
