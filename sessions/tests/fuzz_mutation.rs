//! A deterministic mutation fuzzer over `rampart_sessions::fuzz`'s targets (the session loader,
//! the importers, `import::open`), for CI on the stable toolchain. The deep, coverage-guided
//! runs are the cargo-fuzz targets in `fuzz/` (nightly); this one runs a fixed number of
//! inputs on every `cargo test`.
//!
//! The corpus is every transcript in `sessions/tests/fixtures` and `shared/data/sessions`,
//! each shrunk to a few kB that keep its format (the first lines plus one line of each other
//! entry type; long strings and arrays cut), plus a few hand-written pi sessions. Each input
//! is a corpus file with 1 to 4 stacked mutations: bit flips, byte insertions and deletions,
//! truncation, line duplication, swap and deletion, splicing two files, invalid UTF-8, huge
//! numbers, deep nesting, JSON values replaced by values of another type, keys renamed, tree
//! links rewired (cycles, forward links, duplicate ids), CRLF, BOM, blank lines.
//!
//! Each target runs under `catch_unwind` on a worker thread, watched by a deadline. A panic
//! or a broken invariant (the targets panic on those) fails the test with the seed, the
//! iteration and a reproducer file; so does an input that runs past the deadline. A bug that
//! cannot be fixed at once can be listed in [`KNOWN`] (counted, printed and gone past, so it
//! does not hide the next); bugs found and fixed keep their reproducers in [`FIXED`], which
//! `former_known_bugs_stay_fixed` runs. The same seed gives the same inputs (`StdRng`, its
//! version pinned by `Cargo.lock`).
//!
//! Knobs (environment):
//! - `RAMPART_FUZZ_ITERS`: inputs to run (default [`DEFAULT_ITERS`], about 10 s in debug on
//!   two cores);
//! - `RAMPART_FUZZ_SEED`: the RNG seed, decimal or `0x…` (default fixed, so CI is
//!   reproducible; a failure prints the seed and iteration to replay);
//! - `RAMPART_FUZZ_TIMEOUT_MS`: how long one input may take in one target before it counts
//!   as a hang (default 10 s);
//! - `RAMPART_FUZZ_REPRO_DIR`: where reproducers go (default `<target>/tmp/fuzz-repro`);
//! - `RAMPART_FUZZ_REPLAY=FILE`: run every target on that one file instead (a reproducer),
//!   letting a panic show its backtrace.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Map, Value, json};

/// Inputs per run when `RAMPART_FUZZ_ITERS` is not set.
const DEFAULT_ITERS: u64 = 2000;
/// The seed when `RAMPART_FUZZ_SEED` is not set.
const DEFAULT_SEED: u64 = 0x5EED_0012;
/// No input grows past this (a mutation that would is cut back).
const MAX_INPUT: usize = 256 << 10;

type Target = (&'static str, fn(&[u8]));

/// What one run does.
struct Config {
    seed: u64,
    iterations: u64,
    timeout: Duration,
    repro_dir: PathBuf,
    /// Panics already reported that the run counts and goes past (see [`KNOWN`]).
    known: &'static [Known],
}

/// A panic or broken invariant the fuzzer found, with its reproducers: in [`KNOWN`] while it
/// is open (a run counts its hits and goes on, so one known bug does not hide the next), in
/// [`FIXED`] once it is fixed.
struct Known {
    /// The file the panic is raised in, as its location names it.
    file: &'static str,
    /// The start of its message.
    message: &'static str,
    /// Small inputs that raise it.
    reproducers: &'static [&'static [u8]],
    /// What is wrong, and what would fix it.
    note: &'static str,
}

/// The known bugs (see [`Known`]): none open now.
const KNOWN: &[Known] = &[];

/// Bugs the fuzzer found that are fixed: their reproducers must never panic again
/// (`former_known_bugs_stay_fixed`).
const FIXED: &[Known] = &[
    Known {
        file: "sessions/src/import/builder.rs",
        message: "attempt to add with overflow",
        reproducers: &[
            // Claude Code: `usage()` adds the four token counts unchecked.
            b"{\"type\":\"user\",\"uuid\":\"u1\",\"parentUuid\":null,\"sessionId\":\"s\",\"timestamp\":\"2025-01-01T00:00:00Z\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n\
          {\"type\":\"assistant\",\"uuid\":\"u2\",\"parentUuid\":\"u1\",\"sessionId\":\"s\",\"timestamp\":\"2025-01-01T00:00:01Z\",\"message\":{\"id\":\"m1\",\"role\":\"assistant\",\"model\":\"claude\",\"content\":[{\"type\":\"text\",\"text\":\"ok\"}],\"usage\":{\"input_tokens\":18446744073709551615,\"output_tokens\":1}}}\n",
            // A LiteLLM log: `chat_usage()` adds the cache counts unchecked.
            b"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"response\":{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":\"ok\"}}],\"usage\":{\"prompt_tokens\":1,\"cache_read_input_tokens\":18446744073709551615,\"cache_creation_input_tokens\":1}}}",
        ],
        note: "import/builder.rs `usage()` sums input + output + cache_read + cache_write and \
               `chat_usage()` sums cache_read + cache_write with `+`: a transcript with a token count \
               near u64::MAX panics in debug builds and wraps to a wrong total in release. Fix: \
               saturating_add.",
    },
    Known {
        file: "sessions/src/fuzz.rs",
        message: "assertion `left == right` failed: fuzz invariant: a saved import is not read \
                  back as pi v3",
        reproducers: &[
            // A pi v2 file whose only entry is unreadable, saved as a header-only v3 file.
            b"{\"type\":\"session\",\"version\":2,\"id\":\"0b7c1d7e-1111-4c8b-9d55-000000000003\",\"timestamp\":\"2025-01-01T00:00:00.000Z\",\"cwd\":\"/tmp\",\"trajectory\":[]}\nnot json\n",
            b"{\"type\":\"session\",\"version\":3,\"id\":\"0b7c1d7e-1111-4c8b-9d55-000000000003\",\"timestamp\":\"2025-01-01T00:00:00.000Z\",\"cwd\":\"/tmp\",\"messages\":[]}\nnot json\n",
        ],
        note: "import/detect.rs classifies a one-line file as a JSON document before it looks for \
               a pi header, so a header-only pi session whose header keeps an unknown \
               `trajectory`, `messages` or `history` array (headers are lossless) is read as \
               SWE-agent, OpenAI chat or OpenHands: `sessions import` and `replay` then \
               convert a pi file the loader reads fine. Fix: a first line with \
               `\"type\":\"session\"` is a pi header, whatever else it holds.",
    },
];

/// A target that panicked or ran past the deadline on one input.
#[derive(Debug)]
struct Finding {
    target: &'static str,
    seed: u64,
    iteration: u64,
    /// `None` for a hang.
    panic: Option<Panic>,
    reproducer: PathBuf,
}

/// A caught panic: its message and where it was raised.
#[derive(Debug, Clone)]
struct Panic {
    message: String,
    location: Option<String>,
}

impl Panic {
    fn known(&self, known: &'static [Known]) -> Option<usize> {
        let file = self.location.as_deref().unwrap_or_default();
        known
            .iter()
            .position(|k| file.starts_with(k.file) && self.message.starts_with(k.message))
    }
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match &self.panic {
            Some(p) => format!(
                "panicked at {}: {}",
                p.location.as_deref().unwrap_or("(unknown location)"),
                p.message
            ),
            None => "did not finish within the per-input deadline (hang?)".to_string(),
        };
        write!(
            f,
            "fuzz target `{}` {what}\n  seed {:#x}, iteration {}\n  reproducer: {}\n  replay: \
             RAMPART_FUZZ_REPLAY={} cargo test -p rampart-sessions --test all fuzz_mutation\n  \
             or the same run: RAMPART_FUZZ_SEED={:#x} RAMPART_FUZZ_ITERS={}",
            self.target,
            self.seed,
            self.iteration,
            self.reproducer.display(),
            self.reproducer.display(),
            self.seed,
            self.iteration + 1
        )
    }
}

/// Counts of a finished run.
#[derive(Debug, Default)]
struct Stats {
    inputs: u64,
    /// What detection made of the inputs, by format name (or `error`).
    formats: BTreeMap<String, u64>,
    /// Hits of each known bug, with the first input that hit it.
    known: BTreeMap<usize, (u64, PathBuf)>,
}

fn env_u64(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    let text = text.trim();
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    Some(parsed.unwrap_or_else(|e| panic!("{name}={text} is not a number: {e}")))
}

fn config() -> Config {
    Config {
        seed: env_u64("RAMPART_FUZZ_SEED").unwrap_or(DEFAULT_SEED),
        iterations: env_u64("RAMPART_FUZZ_ITERS").unwrap_or(DEFAULT_ITERS),
        timeout: Duration::from_millis(env_u64("RAMPART_FUZZ_TIMEOUT_MS").unwrap_or(10_000)),
        repro_dir: std::env::var_os("RAMPART_FUZZ_REPRO_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-repro")),
        known: KNOWN,
    }
}

// ---------------------------------------------------------------------------------------------
// The harness
// ---------------------------------------------------------------------------------------------

thread_local! {
    /// Where the last panic on this thread was raised, recorded by the hook of
    /// [`install_panic_hook`] for the worker to read after `catch_unwind`.
    static LOCATION: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Once per process: a panic hook that records the location of panics on fuzz worker threads
/// and keeps planted and known ones out of the output; every other panic goes on to the hook
/// that was there (with its message and backtrace).
fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let worker = std::thread::current()
                .name()
                .is_some_and(|n| n.starts_with("fuzz-worker"));
            if worker {
                let panic = Panic {
                    message: panic_message(info.payload()),
                    location: info
                        .location()
                        .map(|l| format!("{}:{}", l.file(), l.line())),
                };
                LOCATION.with(|cell| *cell.borrow_mut() = panic.location.clone());
                if panic.message.starts_with("planted") || panic.known(KNOWN).is_some() {
                    return;
                }
            }
            previous(info);
        }));
    });
}

/// Runs `iterations` inputs through every target: first each corpus file as it is, then
/// mutated ones. Each target runs under `catch_unwind` on a worker thread, watched by this
/// one; the first panic (other than a known one) or hang is returned, with its input saved
/// as a reproducer.
fn run(
    config: &Config,
    corpus: &[Vec<u8>],
    targets: &[Target],
    mut observe: impl FnMut(&[u8], &mut Stats),
) -> Result<Stats, Finding> {
    assert!(!corpus.is_empty(), "the fuzz corpus is empty");
    install_panic_hook();
    let (to_worker, inbox) = mpsc::channel::<(usize, std::sync::Arc<Vec<u8>>)>();
    let (to_main, results) = mpsc::channel::<Result<(), Panic>>();
    let owned: Vec<Target> = targets.to_vec();
    std::thread::Builder::new()
        .name("fuzz-worker".into())
        .spawn(move || {
            for (index, data) in inbox {
                let outcome = run_one(owned[index].1, &data);
                if to_main.send(outcome).is_err() {
                    break;
                }
            }
        })
        .unwrap();

    let mut rng = StdRng::seed_from_u64(config.seed);
    let mut stats = Stats::default();
    for iteration in 0..config.iterations {
        let data = match corpus.get(iteration as usize) {
            Some(seed) => seed.clone(),
            None => mutate(&mut rng, corpus),
        };
        observe(&data, &mut stats);
        let data = std::sync::Arc::new(data);
        for (index, (name, _)) in targets.iter().enumerate() {
            to_worker.send((index, data.clone())).unwrap();
            let panic = match results.recv_timeout(config.timeout) {
                Ok(Ok(())) => continue,
                Ok(Err(panic)) => match panic.known(config.known) {
                    Some(known) => {
                        let hits = stats.known.entry(known).or_insert_with(|| {
                            (0, save_reproducer(config, name, iteration, &data))
                        });
                        hits.0 += 1;
                        continue;
                    }
                    None => Some(panic),
                },
                // The worker is stuck in the target; it is left behind (a thread cannot be
                // stopped) and the run ends here.
                Err(_) => None,
            };
            let reproducer = save_reproducer(config, name, iteration, &data);
            return Err(Finding {
                target: name,
                seed: config.seed,
                iteration,
                panic,
                reproducer,
            });
        }
        stats.inputs += 1;
    }
    Ok(stats)
}

/// Runs `target` on `data`, catching a panic with its location.
fn run_one(target: fn(&[u8]), data: &[u8]) -> Result<(), Panic> {
    LOCATION.with(|cell| cell.borrow_mut().take());
    catch_unwind(AssertUnwindSafe(|| target(data))).map_err(|payload| Panic {
        message: panic_message(payload.as_ref()),
        location: LOCATION.with(|cell| cell.borrow_mut().take()),
    })
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(a panic without a message)".to_string()
    }
}

fn save_reproducer(config: &Config, target: &str, iteration: u64, data: &[u8]) -> PathBuf {
    std::fs::create_dir_all(&config.repro_dir).unwrap();
    let path = config.repro_dir.join(format!(
        "{target}-seed{:#x}-iter{iteration}.bin",
        config.seed
    ));
    std::fs::write(&path, data).unwrap();
    path
}

// ---------------------------------------------------------------------------------------------
// Mutations
// ---------------------------------------------------------------------------------------------

/// One input: a corpus file with 1 to 4 stacked mutations.
fn mutate(rng: &mut StdRng, corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut data = corpus[rng.random_range(0..corpus.len())].clone();
    for _ in 0..rng.random_range(1..=4) {
        mutate_once(rng, corpus, &mut data);
        data.truncate(MAX_INPUT);
    }
    data
}

const INTERESTING_BYTES: &[u8] = b"\n\r\0\"\\{}[],: \xff\x80\xc3";
const INVALID_UTF8: &[&[u8]] = &[
    b"\xff",
    b"\x80",
    b"\xc0\x80",
    b"\xe2\x82",
    b"\xed\xa0\x80",
    b"\xf4\x90\x80\x80",
    b"\xf0\x9f\x98",
];
const HUGE_NUMBERS: &[&str] = &[
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775809",
    "99999999999999999999999999999999999999",
    "1e308",
    "1e400",
    "-1e400",
    "1e-400",
    "0.0000000000000000000000000001",
    "-0",
    "4294967296",
    "9007199254740993",
];
const KEYS: &[&str] = &[
    "type",
    "id",
    "parentId",
    "timestamp",
    "version",
    "message",
    "role",
    "content",
    "text",
    "summary",
    "firstKeptEntryId",
    "tokensBefore",
    "toolCallId",
    "uuid",
    "parentUuid",
    "sessionId",
    "payload",
    "history",
    "trajectory",
    "messages",
    "tool_calls",
    "arguments",
    "action",
    "observation",
    "cause",
];

fn mutate_once(rng: &mut StdRng, corpus: &[Vec<u8>], data: &mut Vec<u8>) {
    let len = data.len();
    match rng.random_range(0..18) {
        // Bit flips.
        0 if len > 0 => {
            for _ in 0..rng.random_range(1..=8) {
                let at = rng.random_range(0..len);
                data[at] ^= 1 << rng.random_range(0..8);
            }
        }
        // Byte insertion.
        1 => {
            let at = rng.random_range(0..=len);
            let byte = if rng.random_bool(0.5) {
                INTERESTING_BYTES[rng.random_range(0..INTERESTING_BYTES.len())]
            } else {
                rng.random()
            };
            data.insert(at, byte);
        }
        // Byte or range deletion.
        2 if len > 0 => {
            let at = rng.random_range(0..len);
            let count = rng.random_range(1..=(len - at).min(64));
            data.drain(at..at + count);
        }
        // Truncation at a random point (a torn write).
        3 => data.truncate(rng.random_range(0..=len)),
        // Line duplication, swap, deletion.
        4..=6 => {
            let mut lines = split_lines(data);
            if lines.is_empty() {
                return;
            }
            let a = rng.random_range(0..lines.len());
            let b = rng.random_range(0..lines.len());
            match rng.random_range(0..3) {
                0 => {
                    let line = lines[a].clone();
                    lines.insert(b, line);
                }
                1 => lines.swap(a, b),
                _ => {
                    lines.remove(a);
                }
            }
            *data = lines.join(&b'\n');
        }
        // Splicing two files: a prefix of one and a suffix of another, or lines of another.
        7 => {
            let other = &corpus[rng.random_range(0..corpus.len())];
            if rng.random_bool(0.5) {
                let cut = rng.random_range(0..=len);
                let from = rng.random_range(0..=other.len());
                data.truncate(cut);
                data.extend_from_slice(&other[from..]);
            } else {
                let mut lines = split_lines(data);
                let theirs = split_lines(other);
                if theirs.is_empty() {
                    return;
                }
                for _ in 0..rng.random_range(1..=3) {
                    let line = theirs[rng.random_range(0..theirs.len())].clone();
                    let at = rng.random_range(0..=lines.len());
                    lines.insert(at, line);
                }
                *data = lines.join(&b'\n');
            }
        }
        // Invalid UTF-8.
        8 => {
            let bad = INVALID_UTF8[rng.random_range(0..INVALID_UTF8.len())];
            let at = rng.random_range(0..=len);
            data.splice(at..at, bad.iter().copied());
        }
        // A huge (or otherwise awkward) number in place of a number.
        9 => {
            let runs = digit_runs(data);
            let huge = HUGE_NUMBERS[rng.random_range(0..HUGE_NUMBERS.len())].as_bytes();
            if runs.is_empty() {
                let at = rng.random_range(0..=len);
                data.splice(at..at, huge.iter().copied());
            } else {
                let (start, end) = runs[rng.random_range(0..runs.len())];
                data.splice(start..end, huge.iter().copied());
            }
        }
        // Deep nesting, at a random place or at a value position.
        10 => {
            let depth = [64, 127, 128, 129, 1000, 20_000][rng.random_range(0..6)];
            let (open, close) = if rng.random_bool(0.5) {
                (b"[".as_slice(), b"]".as_slice())
            } else {
                (b"{\"a\":".as_slice(), b"}".as_slice())
            };
            let mut nested = open.repeat(depth);
            nested.extend_from_slice(b"1");
            nested.extend(close.repeat(depth));
            let at = value_position(rng, data).unwrap_or_else(|| rng.random_range(0..=len));
            data.splice(at..at, nested);
        }
        // JSON-aware: a value replaced by one of another type, a key renamed or dropped.
        11..=13 => json_mutation(rng, corpus, data),
        // A chunk repeated (growth), or an empty or whitespace-only line.
        14 => {
            if len > 0 && rng.random_bool(0.5) {
                let at = rng.random_range(0..len);
                let end = (at + rng.random_range(1..=256)).min(len);
                let chunk = data[at..end].to_vec();
                for _ in 0..rng.random_range(1..=16) {
                    data.splice(at..at, chunk.iter().copied());
                }
            } else {
                let at = line_start(rng, data);
                let blank: &[u8] =
                    [b"\n".as_slice(), b"   \n", b"\r\n", b"\t\n"][rng.random_range(0..4)];
                data.splice(at..at, blank.iter().copied());
            }
        }
        // Line endings: CRLF everywhere, no final newline, or a BOM.
        15 => match rng.random_range(0..3) {
            0 => {
                let lines = split_lines(data);
                *data = lines.join(b"\r\n".as_slice());
            }
            1 => {
                while data.last() == Some(&b'\n') {
                    data.pop();
                }
            }
            _ => {
                data.splice(0..0, b"\xef\xbb\xbf".iter().copied());
            }
        },
        // Tree links: an entry's parent set to another entry (a cycle, a forward link, itself)
        // or its id to another's (a duplicate).
        16 => relink(rng, data),
        // A whole other corpus file appended (two sessions in one file).
        _ => {
            let other = &corpus[rng.random_range(0..corpus.len())];
            data.extend_from_slice(other);
        }
    }
}

/// Points one line's `parentId` (or `parentUuid`, or `id`) at another line's `id`.
fn relink(rng: &mut StdRng, data: &mut Vec<u8>) {
    let mut lines = split_lines(data);
    let mut parsed: Vec<(usize, Map<String, Value>)> = lines
        .iter()
        .enumerate()
        .filter_map(|(i, line)| match serde_json::from_slice::<Value>(line) {
            Ok(Value::Object(map)) => Some((i, map)),
            _ => None,
        })
        .collect();
    let id_of = |map: &Map<String, Value>| map.get("id").or_else(|| map.get("uuid")).cloned();
    let ids: Vec<Value> = parsed.iter().filter_map(|(_, m)| id_of(m)).collect();
    if parsed.is_empty() || ids.is_empty() {
        return;
    }
    let target = ids[rng.random_range(0..ids.len())].clone();
    let pick = rng.random_range(0..parsed.len());
    let (line, map) = &mut parsed[pick];
    let key = match rng.random_range(0..3) {
        0 if map.contains_key("uuid") => "parentUuid",
        0 | 1 => "parentId",
        _ if map.contains_key("uuid") => "uuid",
        _ => "id",
    };
    map.insert(key.to_string(), target);
    lines[*line] = serde_json::to_vec(&Value::Object(map.clone())).unwrap();
    *data = lines.join(&b'\n');
}

fn split_lines(data: &[u8]) -> Vec<Vec<u8>> {
    if data.is_empty() {
        return Vec::new();
    }
    data.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect()
}

/// The start of a random line.
fn line_start(rng: &mut StdRng, data: &[u8]) -> usize {
    let starts: Vec<usize> = std::iter::once(0)
        .chain(
            data.iter()
                .enumerate()
                .filter(|(_, b)| **b == b'\n')
                .map(|(i, _)| i + 1),
        )
        .collect();
    starts[rng.random_range(0..starts.len())]
}

/// Ranges of ASCII digits (with a leading minus).
fn digit_runs(data: &[u8]) -> Vec<(usize, usize)> {
    let mut runs = Vec::new();
    let mut i = 0;
    while i < data.len() {
        if data[i].is_ascii_digit() {
            let start = if i > 0 && data[i - 1] == b'-' {
                i - 1
            } else {
                i
            };
            while i < data.len() && data[i].is_ascii_digit() {
                i += 1;
            }
            runs.push((start, i));
        } else {
            i += 1;
        }
    }
    runs
}

/// Just after a random `:` (where a JSON value starts), if there is one.
fn value_position(rng: &mut StdRng, data: &[u8]) -> Option<usize> {
    let colons: Vec<usize> = data
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b':')
        .map(|(i, _)| i + 1)
        .collect();
    (!colons.is_empty()).then(|| colons[rng.random_range(0..colons.len())])
}

/// Parses the whole input (a JSON document) or one random line (JSONL) and changes one node.
fn json_mutation(rng: &mut StdRng, corpus: &[Vec<u8>], data: &mut Vec<u8>) {
    if let Ok(mut doc) = serde_json::from_slice::<Value>(data) {
        mutate_value(rng, corpus, &mut doc);
        *data = serde_json::to_vec(&doc).unwrap();
        return;
    }
    let mut lines = split_lines(data);
    let parsed: Vec<usize> = (0..lines.len())
        .filter(|&i| serde_json::from_slice::<Value>(&lines[i]).is_ok())
        .collect();
    if parsed.is_empty() {
        return;
    }
    let at = parsed[rng.random_range(0..parsed.len())];
    let mut value: Value = serde_json::from_slice(&lines[at]).unwrap();
    mutate_value(rng, corpus, &mut value);
    lines[at] = serde_json::to_vec(&value).unwrap();
    *data = lines.join(&b'\n');
}

fn mutate_value(rng: &mut StdRng, corpus: &[Vec<u8>], value: &mut Value) {
    let count = count_nodes(value);
    let target = rng.random_range(0..count);
    let mut seen = 0;
    let replacement = random_value(rng, corpus);
    let key_op = rng.random_range(0..4);
    let key = KEYS[rng.random_range(0..KEYS.len())];
    visit_nth(value, target, &mut seen, &mut |node| {
        match (node, key_op) {
            // On objects, sometimes a key is renamed, dropped or added instead.
            (Value::Object(map), 0) if !map.is_empty() => {
                let old = map.keys().nth(rng.random_range(0..map.len())).cloned();
                if let Some(old) = old
                    && let Some(v) = map.remove(&old)
                {
                    map.insert(key.to_string(), v);
                }
            }
            (Value::Object(map), 1) if !map.is_empty() => {
                let old = map.keys().nth(rng.random_range(0..map.len())).cloned();
                if let Some(old) = old {
                    map.remove(&old);
                }
            }
            (Value::Object(map), 2) => {
                map.insert(key.to_string(), replacement.clone());
            }
            (node, _) => *node = replacement.clone(),
        }
    });
}

fn count_nodes(value: &Value) -> usize {
    1 + match value {
        Value::Array(items) => items.iter().map(count_nodes).sum(),
        Value::Object(map) => map.values().map(count_nodes).sum(),
        _ => 0,
    }
}

/// Calls `f` on the `target`-th node in pre-order.
fn visit_nth(
    value: &mut Value,
    target: usize,
    seen: &mut usize,
    f: &mut dyn FnMut(&mut Value),
) -> bool {
    if *seen == target {
        f(value);
        return true;
    }
    *seen += 1;
    match value {
        Value::Array(items) => items.iter_mut().any(|v| visit_nth(v, target, seen, f)),
        Value::Object(map) => map.values_mut().any(|v| visit_nth(v, target, seen, f)),
        _ => false,
    }
}

fn random_value(rng: &mut StdRng, corpus: &[Vec<u8>]) -> Value {
    match rng.random_range(0..20) {
        0 => Value::Null,
        1 => json!(true),
        2 => json!(false),
        3 => json!(0),
        4 => json!(-1),
        5 => json!(1.5),
        6 => json!(u64::MAX),
        7 => json!(i64::MIN),
        8 => json!(1e308),
        9 => json!(""),
        10 => json!("x"),
        11 => json!("\u{0}\u{feff}\u{10ffff}"),
        12 => Value::String("long ".repeat(rng.random_range(1..4000))),
        13 => json!([]),
        14 => json!({}),
        15 => json!([null, {"type": "text"}]),
        16 => json!({"type": "message", "id": "deadbeef", "parentId": null, "role": "user",
                     "content": [{"type": "toolCall", "id": "c1", "name": "t", "arguments": {}}]}),
        17 => {
            // Nested deeper than serde_json reads back (128).
            let mut v = json!(1);
            for _ in 0..rng.random_range(100..200) {
                v = Value::Array(vec![v]);
            }
            v
        }
        // A value from a real file (type confusion with real structures).
        _ => {
            let other = &corpus[rng.random_range(0..corpus.len())];
            let line = other.split(|&b| b == b'\n').next().unwrap_or_default();
            serde_json::from_slice::<Value>(line)
                .ok()
                .and_then(|v| match v {
                    Value::Object(map) => {
                        let values: Vec<Value> = map.into_iter().map(|(_, v)| v).collect();
                        (!values.is_empty())
                            .then(|| values[rng.random_range(0..values.len())].clone())
                    }
                    other => Some(other),
                })
                .unwrap_or(Value::Null)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The corpus
// ---------------------------------------------------------------------------------------------

/// `shared/data/sessions`, when present.
fn shared_dir() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/sessions");
    dir.is_dir().then_some(dir)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            walk(&path, out);
        } else if path.extension().is_some_and(|e| e != "md") {
            out.push(path);
        }
    }
}

/// The corpus: every real file, shrunk, then the hand-written sessions.
fn corpus() -> Vec<Vec<u8>> {
    let mut files = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures"),
        &mut files,
    );
    match shared_dir() {
        Some(dir) => walk(&dir, &mut files),
        None => eprintln!(
            "fuzz corpus: {} is missing, so the real transcripts of shared/data/sessions are \
             NOT in the corpus; fuzzing with sessions/tests/fixtures and the built-in sessions \
             only",
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../shared/data/sessions")
                .display()
        ),
    }
    files.sort();
    let mut corpus: Vec<Vec<u8>> = files
        .iter()
        .map(|path| shrink_file(&std::fs::read(path).unwrap()))
        .collect();
    corpus.extend(builtin_sessions());
    corpus
}

/// A few kB of `bytes` that keep its format: a JSON document with its strings and arrays
/// cut, or the first lines of a JSONL file plus the first line of every other entry type.
fn shrink_file(bytes: &[u8]) -> Vec<u8> {
    if let Ok(doc) = serde_json::from_slice::<Value>(bytes) {
        return serde_json::to_vec(&shrink_value(doc)).unwrap();
    }
    let mut kept: Vec<Vec<u8>> = Vec::new();
    let mut types = std::collections::BTreeSet::new();
    for (index, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let parsed = serde_json::from_slice::<Value>(line).ok();
        let kind = parsed
            .as_ref()
            .and_then(|v| v.get("type"))
            .map(Value::to_string)
            .unwrap_or_default();
        let fresh = types.insert(kind);
        if index < 10 || (fresh && kept.len() < 24) {
            kept.push(match parsed {
                Some(v) => serde_json::to_vec(&shrink_value(v)).unwrap(),
                None => line[..line.len().min(1024)].to_vec(),
            });
        }
    }
    let mut out = kept.join(&b'\n');
    out.push(b'\n');
    out
}

fn shrink_value(value: Value) -> Value {
    match value {
        Value::String(s) if s.chars().count() > 160 => Value::String(s.chars().take(160).collect()),
        Value::Array(items) => {
            let n = items.len();
            Value::Array(
                items
                    .into_iter()
                    .enumerate()
                    .filter(|(i, _)| *i < 6 || *i + 2 >= n)
                    .map(|(_, v)| shrink_value(v))
                    .collect(),
            )
        }
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, shrink_value(v)))
                .collect::<Map<String, Value>>(),
        ),
        other => other,
    }
}

/// Hand-written pi sessions with every entry type, a branch and a compaction; v1 and v2 too.
fn builtin_sessions() -> Vec<Vec<u8>> {
    let v3 = [
        json!({"type": "session", "version": 3, "id": "0b7c1d7e-1111-4c8b-9d55-000000000001",
               "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/tmp"}),
        json!({"type": "model_change", "id": "a0000001", "parentId": null,
               "timestamp": "2025-01-01T00:00:01.000Z", "provider": "anthropic", "modelId": "claude"}),
        json!({"type": "thinking_level_change", "id": "a0000002", "parentId": "a0000001",
               "timestamp": "2025-01-01T00:00:02.000Z", "thinkingLevel": "high"}),
        json!({"type": "message", "id": "a0000003", "parentId": "a0000002",
               "timestamp": "2025-01-01T00:00:03.000Z",
               "message": {"role": "user", "content": [{"type": "text", "text": "hello"}], "timestamp": 1}}),
        json!({"type": "message", "id": "a0000004", "parentId": "a0000003",
               "timestamp": "2025-01-01T00:00:04.000Z",
               "message": {"role": "assistant", "content": [
                   {"type": "thinking", "thinking": "hm"},
                   {"type": "toolCall", "id": "call_1", "name": "read", "arguments": {"path": "a"}}],
                   "api": "anthropic-messages", "provider": "anthropic", "model": "claude",
                   "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
                             "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
                   "stopReason": "toolUse", "timestamp": 2}}),
        json!({"type": "message", "id": "a0000005", "parentId": "a0000004",
               "timestamp": "2025-01-01T00:00:05.000Z",
               "message": {"role": "toolResult", "toolCallId": "call_1", "toolName": "read",
                           "content": [{"type": "text", "text": "file"}], "isError": false, "timestamp": 3}}),
        json!({"type": "compaction", "id": "a0000006", "parentId": "a0000005",
               "timestamp": "2025-01-01T00:00:06.000Z", "summary": "## Goal\nx",
               "firstKeptEntryId": "a0000004", "tokensBefore": 1000}),
        json!({"type": "branch_summary", "id": "a0000007", "parentId": "a0000003",
               "timestamp": "2025-01-01T00:00:07.000Z", "fromId": "a0000006", "summary": "tried"}),
        json!({"type": "custom", "id": "a0000008", "parentId": "a0000007",
               "timestamp": "2025-01-01T00:00:08.000Z", "customType": "x", "data": {"k": 1}}),
        json!({"type": "custom_message", "id": "a0000009", "parentId": "a0000008",
               "timestamp": "2025-01-01T00:00:09.000Z", "customType": "note", "content": "see",
               "display": true}),
        json!({"type": "label", "id": "a000000a", "parentId": "a0000009",
               "timestamp": "2025-01-01T00:00:10.000Z", "targetId": "a0000003", "label": "start"}),
        json!({"type": "session_info", "id": "a000000b", "parentId": "a000000a",
               "timestamp": "2025-01-01T00:00:11.000Z", "name": "demo"}),
        json!({"type": "future_entry_type", "id": "a000000c", "parentId": "a000000b",
               "timestamp": "2025-01-01T00:00:12.000Z", "anything": [1, 2]}),
    ];
    let v1 = [
        json!({"type": "session", "id": "0b7c1d7e-1111-4c8b-9d55-000000000002",
               "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/tmp", "provider": "anthropic",
               "modelId": "claude", "thinkingLevel": "off"}),
        json!({"type": "message", "timestamp": "2025-01-01T00:00:01.000Z",
               "message": {"role": "user", "content": "hi", "timestamp": 1}}),
        json!({"type": "message", "timestamp": "2025-01-01T00:00:02.000Z",
               "message": {"role": "hookMessage", "content": "hook", "timestamp": 2}}),
        json!({"type": "compaction", "timestamp": "2025-01-01T00:00:03.000Z",
               "summary": "s", "firstKeptEntryIndex": 1, "tokensBefore": 10}),
    ];
    let v2 = [
        json!({"type": "session", "version": 2, "id": "0b7c1d7e-1111-4c8b-9d55-000000000003",
               "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/tmp"}),
        json!({"type": "message", "id": "b0000001", "parentId": null,
               "timestamp": "2025-01-01T00:00:01.000Z",
               "message": {"role": "user", "content": "hi", "timestamp": 1}}),
        json!({"type": "compaction", "id": "b0000002", "parentId": "b0000001",
               "timestamp": "2025-01-01T00:00:02.000Z", "summary": "s",
               "firstKeptEntryIndex": 1, "tokensBefore": 10}),
    ];
    [&v3[..], &v1[..], &v2[..]]
        .iter()
        .map(|lines| {
            let mut out: Vec<u8> = lines
                .iter()
                .map(|v| serde_json::to_vec(v).unwrap())
                .collect::<Vec<_>>()
                .join(&b'\n');
            out.push(b'\n');
            out
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

/// The CI run: the corpus, then mutations, through every target.
#[test]
fn mutation_fuzz_loader_and_importers() {
    let targets: &[Target] = rampart_sessions::fuzz::TARGETS;
    if let Some(file) = std::env::var_os("RAMPART_FUZZ_REPLAY") {
        // Relative paths are taken from the workspace root (tests run in `sessions/`).
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(file);
        let data =
            std::fs::read(&file).unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
        eprintln!(
            "replaying {} ({} bytes)",
            Path::new(&file).display(),
            data.len()
        );
        for (name, target) in targets {
            eprintln!("  target {name}");
            target(&data);
        }
        return;
    }
    let config = config();
    let corpus = corpus();
    eprintln!(
        "fuzz: seed {:#x}, {} inputs ({} corpus files first), per-input deadline {:?}; \
         RAMPART_FUZZ_SEED / RAMPART_FUZZ_ITERS change them",
        config.seed,
        config.iterations,
        corpus.len(),
        config.timeout
    );
    let started = Instant::now();
    let result = run(&config, &corpus, targets, |data, stats| {
        let format = match rampart_sessions::import::detect(data) {
            Ok(format) => format
                .name()
                .split(' ')
                .take(2)
                .collect::<Vec<_>>()
                .join(" "),
            Err(_) => "not detected".to_string(),
        };
        *stats.formats.entry(format).or_default() += 1;
    });
    match result {
        Ok(stats) => {
            eprintln!(
                "fuzz: {} inputs x {} targets in {:.1?}, no new panic, no hang; inputs by \
                 detected format: {:?}",
                stats.inputs,
                targets.len(),
                started.elapsed(),
                stats.formats
            );
            for (index, (hits, first)) in &stats.known {
                let known = &config.known[*index];
                eprintln!(
                    "fuzz: KNOWN BUG hit {hits} time(s), first input {}: {} ({}: {})",
                    first.display(),
                    known.note,
                    known.file,
                    known.message
                );
            }
        }
        Err(finding) => panic!("{finding}"),
    }
}

/// Each bug the fuzzer found and that was fixed stays fixed: no target panics on its
/// reproducers.
#[test]
fn former_known_bugs_stay_fixed() {
    install_panic_hook();
    for fixed in FIXED {
        for reproducer in fixed.reproducers {
            let hit = std::thread::Builder::new()
                .name("fuzz-worker-fixed".into())
                .spawn(|| {
                    rampart_sessions::fuzz::TARGETS
                        .iter()
                        .find_map(|(name, target)| {
                            run_one(*target, reproducer).err().map(|p| (*name, p))
                        })
                })
                .unwrap()
                .join()
                .unwrap();
            assert!(
                hit.is_none(),
                "a fixed bug is back: {}\ninput: {}\n{hit:?}",
                fixed.note,
                String::from_utf8_lossy(reproducer)
            );
        }
    }
}

// Regressions: inputs the fuzzer found, fixed in this crate.

/// Found by `open_bytes`: a Claude Code sidecar-like line nesting 127 levels (the most the
/// loader reads) was imported as a custom entry one level deeper, and `save_session` wrote a
/// line the next load dropped as corrupt. Now the writer refuses it and writes nothing.
#[test]
fn regression_an_import_nested_past_the_loader_limit_is_refused_not_lost() {
    let deep = format!("{}1{}", "[".repeat(126), "]".repeat(126));
    let input = format!(
        "{{\"type\":\"user\",\"uuid\":\"u1\",\"parentUuid\":null,\"sessionId\":\"s\",\
         \"timestamp\":\"2025-01-01T00:00:00Z\",\"message\":{{\"role\":\"user\",\"content\":\"hi\"}}}}\n\
         {{\"agentType\":{deep},\"description\":\"x\"}}\n"
    );
    // The whole input is read, so the line itself is within the limit.
    serde_json::from_str::<Value>(input.lines().nth(1).unwrap()).unwrap();
    rampart_sessions::fuzz::open_bytes(input.as_bytes());
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("t.jsonl");
    std::fs::write(&source, &input).unwrap();
    let opened = rampart_sessions::import::open(&source).unwrap();
    let target = dir.path().join("out.jsonl");
    let error = rampart_sessions::save_session(&target, &opened[0].header, &opened[0].tree)
        .unwrap_err()
        .to_string();
    assert!(error.contains("levels deep"), "{error}");
    assert!(!target.exists(), "nothing is written");
}

/// The writer's depth limit is the loader's: an entry nesting 127 levels saves and reloads
/// whole, one nesting 128 is refused by `save_session` and by `Session::append`.
#[test]
fn regression_the_writer_refuses_exactly_what_the_loader_cannot_read() {
    use rampart_sessions::entry::{CustomEntry, EntryBody};
    let custom = |levels: usize| {
        // The entry object is one level, `data` the rest.
        let mut data = json!(1);
        for _ in 0..levels - 1 {
            data = Value::Array(vec![data]);
        }
        EntryBody::Custom(CustomEntry {
            custom_type: "deep".into(),
            data: Some(data),
            extra: Map::new(),
        })
    };
    let dir = tempfile::tempdir().unwrap();
    let header = rampart_sessions::SessionHeader::new("/tmp");
    for (levels, fits) in [(127, true), (128, false)] {
        let mut tree = rampart_sessions::SessionTree::new();
        tree.append(custom(levels));
        let target = dir.path().join(format!("saved-{levels}.jsonl"));
        let saved = rampart_sessions::save_session(&target, &header, &tree);
        assert_eq!(saved.is_ok(), fits, "{levels} levels: {saved:?}");
        if fits {
            let options = rampart_sessions::LoadOptions {
                record_corrupt_lines: false,
                ..Default::default()
            };
            let loaded = rampart_sessions::load_file(&target, &options).unwrap();
            assert!(loaded.report.is_clean(), "{:?}", loaded.report);
            assert_eq!(loaded.tree.len(), 1);
        }
        let mut session = rampart_sessions::Session::create(
            &dir.path().join(format!("appended-{levels}.jsonl")),
            header.clone(),
            rampart_sessions::SessionOptions::default(),
        )
        .unwrap();
        let appended = session.append(custom(levels));
        assert_eq!(appended.is_ok(), fits, "{levels} levels: {appended:?}");
    }
}

fn planted_config(dir: &Path, timeout: Duration, iterations: u64) -> Config {
    Config {
        seed: 7,
        iterations,
        timeout,
        repro_dir: dir.to_path_buf(),
        known: &[],
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The harness is not a test that cannot fail: a target that panics on a magic input is
/// caught, named with its seed and iteration, and its input saved.
#[test]
fn harness_catches_a_planted_panic() {
    let dir = tempfile::tempdir().unwrap();
    let planted: &[Target] = &[
        ("never", |_| {}),
        ("planted_panic", |data| {
            if contains(data, b"MAGIC") {
                panic!("planted panic on the magic input");
            }
        }),
    ];
    let corpus = vec![b"{\"plain\": 1}".to_vec(), b"x MAGIC y".to_vec()];
    let finding = run(
        &planted_config(dir.path(), Duration::from_secs(10), 50),
        &corpus,
        planted,
        |_, _| {},
    )
    .unwrap_err();
    assert_eq!(finding.target, "planted_panic");
    assert_eq!(finding.iteration, 1, "the unmutated corpus runs first");
    let panic = finding.panic.as_ref().unwrap();
    assert!(panic.message.contains("planted panic"), "{panic:?}");
    assert!(
        panic
            .location
            .as_deref()
            .unwrap()
            .contains("fuzz_mutation.rs"),
        "{panic:?}"
    );
    assert_eq!(std::fs::read(&finding.reproducer).unwrap(), b"x MAGIC y");
    let text = finding.to_string();
    assert!(text.contains("seed 0x7, iteration 1"), "{text}");
    assert!(
        text.contains(&finding.reproducer.display().to_string()),
        "{text}"
    );
}

/// Mutations reach what the corpus does not hold: a target that panics on an invalid UTF-8
/// byte, fed only ASCII files, is caught on a mutated input, reproducibly.
#[test]
fn harness_finds_a_panic_only_a_mutation_reaches() {
    let dir = tempfile::tempdir().unwrap();
    let planted: &[Target] = &[("planted_utf8", |data| {
        if std::str::from_utf8(data).is_err() {
            panic!("planted panic on invalid UTF-8");
        }
    })];
    let corpus = builtin_sessions();
    let config = planted_config(dir.path(), Duration::from_secs(10), 5000);
    let first = run(&config, &corpus, planted, |_, _| {}).unwrap_err();
    assert!(first.iteration >= corpus.len() as u64, "{first}");
    let data = std::fs::read(&first.reproducer).unwrap();
    assert!(std::str::from_utf8(&data).is_err());
    // The same seed finds the same input at the same iteration.
    let again = run(&config, &corpus, planted, |_, _| {}).unwrap_err();
    assert_eq!(again.iteration, first.iteration);
    assert_eq!(std::fs::read(&again.reproducer).unwrap(), data);
}

/// A target that does not return within the deadline is reported as a hang.
#[test]
fn harness_catches_a_planted_hang() {
    let dir = tempfile::tempdir().unwrap();
    let planted: &[Target] = &[("planted_hang", |data| {
        if contains(data, b"HANG") {
            std::thread::sleep(Duration::from_secs(3));
        }
    })];
    let corpus = vec![b"fine".to_vec(), b"HANG".to_vec()];
    let started = Instant::now();
    let finding = run(
        &planted_config(dir.path(), Duration::from_millis(300), 10),
        &corpus,
        planted,
        |_, _| {},
    )
    .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the watchdog waited"
    );
    assert_eq!(finding.target, "planted_hang");
    assert_eq!(finding.iteration, 1);
    assert!(finding.panic.is_none());
    assert!(finding.to_string().contains("hang"));
    assert_eq!(std::fs::read(&finding.reproducer).unwrap(), b"HANG");
}

/// The corpus is made of real files, and the shrunk files keep their format.
#[test]
fn corpus_keeps_the_formats_of_the_real_files() {
    let corpus = corpus();
    let mut formats = std::collections::HashSet::new();
    for file in &corpus {
        if let Ok(format) = rampart_sessions::import::detect(file) {
            formats.insert(format);
        }
    }
    let expected = if shared_dir().is_some() { 8 } else { 4 };
    assert!(
        formats.len() >= expected,
        "the shrunk corpus covers only {formats:?}"
    );
}
