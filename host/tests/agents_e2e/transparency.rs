//! The transparency differential: each agent runs the same two turns once straight to the scripted
//! model and once through `rampart serve` with a window so large that nothing is managed. What
//! reaches the model must be the same both times, except for the differences README.md lists
//! under "Differences a client sees through serve" ([`KNOWN`] here, each with the way to look
//! past it). A new difference fails the test; so does a listed one that no longer occurs (the
//! list must shrink as serve gets more transparent).
//!
//! Compared per model request: the path, the headers (less the transport's own: `host`,
//! `content-length`, `connection`, `accept-encoding`, `transfer-encoding`) and the JSON body,
//! after the noise of each run is normalised (temporary paths, ports, UUIDs, long hex ids,
//! millisecond timestamps, Codex's chunk ids and wall times). Each agent's upstream speaks its
//! own wire (Claude Code's Anthropic, Codex's OpenAI Responses, pi's chat completions), so the
//! two sides are compared as they were sent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value, json};

use super::{HUGE_WINDOW, RUN_LIMIT, Serve, random_secret};
use crate::common;
use common::agent_model::{AgentModel, Wire};
use common::agents::{Agent, Sandbox};
use common::loopback::Recorded;

/// One difference a client sees through serve.
pub struct Known {
    /// The agents it shows with.
    pub agents: &'static [Agent],
    /// Its wording in README.md's list (the test checks the list holds it).
    pub readme: &'static str,
    /// Makes both sides of a request alike as to this difference.
    pub look_past: fn(&mut Value),
}

/// The differences serve introduces today, in README.md's order, each with the way to look
/// past it (applied to both sides, in this order).
pub const KNOWN: &[Known] = &[
    // Headers.
    // Chat-completions bodies (pi's): none.
    // Codex (Responses bodies, to a Responses upstream): none.
];

/// Headers that belong to the connection, not to the client's request.
const TRANSPORT_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "connection",
    "accept-encoding",
    "transfer-encoding",
];

/// The prompt of the second turn, in the first turn's session: the model then gets back what it
/// answered (its text items with their ids, as the agent keeps them).
const SECOND_TURN: &str = "What was the secret number again?";

/// Runs `agent` straight to a scripted model and through serve (a one-shot task with a tool,
/// then a second turn in the same session), and checks that the model saw
/// the same requests but for [`KNOWN`]'s differences.
pub fn differential(agent: Agent) {
    let Some(bin) = common::agents::installed() else {
        return;
    };
    let secret = random_secret();

    let direct_model = AgentModel::start();
    let direct = Sandbox::new(&bin, agent, &direct_model.origin(), secret);
    let run = direct.run(&direct.read_prompt(), false, RUN_LIMIT);
    run.assert_ok(&format!("{} straight to the model", agent.name()));
    assert!(run.stdout.contains(&secret.to_string()), "{run:?}");
    let again = direct.run(SECOND_TURN, true, RUN_LIMIT);
    again.assert_ok(&format!(
        "{} straight to the model, second turn",
        agent.name()
    ));

    let served_model = AgentModel::start();
    let serve = Serve::start(&served_model, HUGE_WINDOW);
    let served = Sandbox::new(&bin, agent, &serve.base, secret);
    let run = served.run(&served.read_prompt(), false, RUN_LIMIT);
    run.assert_ok(&format!("{} through serve", agent.name()));
    assert!(run.stdout.contains(&secret.to_string()), "{run:?}");
    let again = served.run(SECOND_TURN, true, RUN_LIMIT);
    again.assert_ok(&format!("{} through serve, second turn", agent.name()));

    let left: Vec<Value> = direct_model
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && Wire::of(&r.path).is_some())
        .map(|r| exchange(r, &direct))
        .collect();
    let right: Vec<Value> = served_model
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && Wire::of(&r.path).is_some())
        .map(|r| exchange(r, &served))
        .collect();
    let known: Vec<&Known> = KNOWN.iter().filter(|k| k.agents.contains(&agent)).collect();
    let dump = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "agents-transparency-{}.json",
        agent.name().replace(' ', "-").to_lowercase()
    ));
    std::fs::write(
        &dump,
        serde_json::to_string_pretty(&json!({"direct": left, "served": right})).unwrap(),
    )
    .unwrap();

    let residue = differences(&left, &right, &known, None);
    assert!(
        residue.is_empty(),
        "{} through serve: differences README.md does not list (both sides, normalised, in \
         {}):\n{}",
        agent.name(),
        dump.display(),
        residue.join("\n")
    );
    for (i, k) in known.iter().enumerate() {
        assert!(
            !differences(&left, &right, &known, Some(i)).is_empty(),
            "{}: the listed difference {:?} no longer occurs: remove it from README.md's \
             \"Differences a client sees through serve\" and from KNOWN",
            agent.name(),
            k.readme
        );
    }
}

/// The differences between the two runs' requests once every difference in `known` (but the
/// one at `skip`) is looked past, as readable lines; empty when none is left.
fn differences(
    left: &[Value],
    right: &[Value],
    known: &[&Known],
    skip: Option<usize>,
) -> Vec<String> {
    let project = |v: &Value| {
        let mut v = v.clone();
        for (i, k) in known.iter().enumerate() {
            if Some(i) != skip {
                (k.look_past)(&mut v);
            }
        }
        v
    };
    let mut out = Vec::new();
    if left.len() != right.len() {
        out.push(format!(
            "the model got {} requests straight and {} through serve: {:?} vs {:?}",
            left.len(),
            right.len(),
            left.iter().map(|r| r["path"].clone()).collect::<Vec<_>>(),
            right.iter().map(|r| r["path"].clone()).collect::<Vec<_>>()
        ));
    }
    for (i, (l, r)) in left.iter().zip(right).enumerate() {
        diff(
            &project(l),
            &project(r),
            &format!("request {i}: "),
            &mut out,
        );
    }
    out
}

/// The paths where `a` and `b` differ, with both values (cut short).
fn diff(a: &Value, b: &Value, path: &str, out: &mut Vec<String>) {
    let short = |v: &Value| {
        let s = v.to_string();
        if s.chars().count() > 160 {
            format!("{}…", s.chars().take(160).collect::<String>())
        } else {
            s
        }
    };
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                match y.get(k) {
                    Some(w) => diff(v, w, &format!("{path}/{k}"), out),
                    None => out.push(format!("{path}/{k}: dropped ({})", short(v))),
                }
            }
            for (k, w) in y {
                if !x.contains_key(k) {
                    out.push(format!("{path}/{k}: added ({})", short(w)));
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                diff(v, w, &format!("{path}/{i}"), out);
            }
        }
        _ if a != b => out.push(format!("{path}: {} became {}", short(a), short(b))),
        _ => {}
    }
}

/// A recorded request as compared: path, headers (transport ones left out) and body, with the
/// run's noise normalised.
fn exchange(request: &Recorded, sandbox: &Sandbox) -> Value {
    let headers: Map<String, Value> = request
        .headers
        .iter()
        .filter(|(n, _)| !TRANSPORT_HEADERS.contains(&n.as_str()))
        .map(|(n, v)| (n.clone(), Value::String(v.clone())))
        .collect();
    let (path, body) = (&request.path, &request.body);
    let value = json!({"path": path, "headers": headers, "body": body});
    // The sandbox's path, and the same path as Claude Code names its project directory.
    let root = sandbox.root().display().to_string();
    let text = value
        .to_string()
        .replace(&root, "<sandbox>")
        .replace(&root.replace(['/', '.'], "-"), "<sandbox>");
    serde_json::from_str(&normalise(&text)).unwrap()
}

static NOISE: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    [
        (r"127\.0\.0\.1:\d+", "127.0.0.1:<port>"),
        (
            r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
            "<uuid>",
        ),
        (r"\b[0-9a-f]{32,}\b", "<hex>"),
        (r"\b1[0-9]{12}\b", "<ms>"),
        (r"Chunk ID: [0-9a-f]+", "Chunk ID: <id>"),
        (r"Wall time: [0-9.]+ seconds", "Wall time: <t> seconds"),
        // Claude Code's billing header ends in a hash of characters of the first prompt,
        // whose sandbox path differs per run.
        (r"cc_version=([0-9.]+)\.[0-9a-f]+", "cc_version=$1.<hash>"),
    ]
    .into_iter()
    .map(|(re, to)| (Regex::new(re).unwrap(), to))
    .collect()
});

/// `text` with each run's noise replaced by placeholders.
fn normalise(text: &str) -> String {
    NOISE.iter().fold(text.to_owned(), |t, (re, to)| {
        re.replace_all(&t, *to).into_owned()
    })
}

/// The bullets of README.md's "Differences a client sees through serve", whitespace collapsed.
pub fn readme_list() -> Vec<String> {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let section = readme
        .split("### Differences a client sees through serve")
        .nth(1)
        .expect("README.md has a \"Differences a client sees through serve\" section");
    let section = section.split("\n#").next().unwrap_or_default();
    let mut bullets: Vec<String> = Vec::new();
    for line in section.lines() {
        if let Some(item) = line.strip_prefix("- ") {
            bullets.push(item.to_owned());
        } else if let (Some(last), Some(more)) = (bullets.last_mut(), line.strip_prefix("  ")) {
            last.push(' ');
            last.push_str(more);
        }
    }
    bullets.iter().map(|b| collapse(b)).collect()
}

/// `text` with each run of whitespace as one space.
pub fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
