//! Token counting benchmarks against `shared/PERFORMANCE.md` (exact BPE counting ≥ 30 MB/s on
//! one core; count each message once).
//!
//! Run with `cargo bench -p rampart-engine-api --bench tokens`. What is measured:
//!
//! - `text/*`: one ~1 MB string of mixed English prose, Rust code, JSON and CJK text (built
//!   here from a fixed seed, see [`mixed_text`]), with its size as throughput so criterion
//!   reports MB/s:
//!   - `exact_o200k_base`, `exact_cl100k_base`: [`TokenCounter::count_text`] in Exact mode;
//!   - `estimate`: the CJK-aware `chars / 4` estimate;
//! - `session_200k/*`: every message of `gen_session.py --preset 200k`, counted with
//!   [`TokenCounter::count_messages`]:
//!   - `cold_*`: a fresh counter per iteration, so every message is counted and remembered;
//!   - `memoised_*`: a counter that has seen the history, as on every turn after the first.
//!
//! The session input is generated once into `<target dir>/bench-inputs/` (python3 required).
//! The vocabularies are loaded before timing starts.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "support/mod.rs"]
mod support;

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use rampart_context::tokens::{CountMode, Encoding, TokenCounter};
use rampart_engine_api::{AgentMessage, SharedMessage};

/// A small deterministic generator (xorshift64*), so the text is the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const WORDS: &[&str] = &[
    "the",
    "build",
    "fails",
    "because",
    "parser",
    "rejects",
    "a",
    "trailing",
    "comma",
    "in",
    "config",
    "file",
    "and",
    "retry",
    "loop",
    "never",
    "resets",
    "its",
    "counter",
    "so",
    "every",
    "request",
    "after",
    "first",
    "timeout",
    "is",
    "dropped",
    "we",
    "need",
    "to",
    "keep",
    "lock",
    "while",
    "rewriting",
    "index",
    "release",
    "it",
    "before",
    "calling",
    "out",
    "network",
    "otherwise",
    "two",
    "writers",
    "interleave",
    "their",
    "lines",
    "context",
    "window",
    "compaction",
    "summary",
    "session",
    "token",
    "budget",
    "provider",
    "overflow",
    "engine",
    "message",
    "history",
    "prune",
    "tool",
    "result",
    "truncated",
    "characters",
    "estimate",
    "model",
    "assistant",
    "user",
    "Rampart",
    "OpenClaw",
    "didn't",
    "we'll",
    "it's",
    "HTTP",
    "JSON",
    "Linux",
    "however",
    "which",
    "could",
    "should",
    "would",
    "because",
    "threshold",
];

const IDENTS: &[&str] = &[
    "messages",
    "budget",
    "count",
    "tokens",
    "entry",
    "parent_id",
    "session",
    "result",
    "index",
    "cursor",
    "writer",
    "reader",
    "config",
    "limit",
    "offset",
    "buffer",
    "state",
    "guard",
];

const CJK: &str = "上下文窗口是有限资源工具结果截断压缩历史会话文件写锁重试失败成功摘要保留最近消息\
                   日本語のテキストをトークンに分割しますカタカナひらがな한국어문장도있습니다토큰예산";

fn english(rng: &mut Rng, out: &mut String) {
    for s in 0..3 + rng.below(4) {
        let n = 6 + rng.below(14);
        for w in 0..n {
            let word = rng.pick(WORDS);
            if w == 0 && s.is_multiple_of(2) {
                let mut chars = word.chars();
                if let Some(first) = chars.next() {
                    out.extend(first.to_uppercase());
                    out.push_str(chars.as_str());
                }
            } else {
                out.push_str(word);
            }
            out.push_str(if w + 1 == n {
                ". "
            } else if rng.below(12) == 0 {
                ", "
            } else {
                " "
            });
        }
    }
    out.push('\n');
}

fn code(rng: &mut Rng, out: &mut String) {
    let f = rng.pick(IDENTS);
    let a = rng.pick(IDENTS);
    let b = rng.pick(IDENTS);
    let n = rng.below(10_000);
    out.push_str(&format!(
        "pub fn {f}_{n}(&mut self, {a}: &[u8], {b}: usize) -> Result<u64, Error> {{\n    \
         let {f} = {a}.iter().take({b}).map(|x| u64::from(*x) * {n}).sum::<u64>();\n    \
         if {f} > self.{b} {{\n        return Err(Error::new(\"{a} over {b}: {{}}\", {f}));\n    \
         }}\n    Ok({f})\n}}\n\n"
    ));
    if rng.below(2) == 0 {
        let hash = rng.next();
        out.push_str(&format!(
            "{{\"path\":\"/srv/app/src/{a}/{b}.rs\",\"line\":{n},\"sha\":\"{hash:016x}\",\
             \"ok\":{}}}\n",
            n.is_multiple_of(2)
        ));
    }
}

fn cjk(rng: &mut Rng, out: &mut String) {
    let chars: Vec<char> = CJK.chars().collect();
    for _ in 0..2 + rng.below(3) {
        for _ in 0..8 + rng.below(30) {
            out.push(chars[rng.below(chars.len())]);
        }
        out.push_str(if rng.below(2) == 0 { "。" } else { "，" });
    }
    out.push('\n');
}

/// About 1 MB: by bytes roughly half English prose, a third code and JSON, the rest CJK.
fn mixed_text() -> String {
    let mut rng = Rng(0x005E_ED0F_7E57);
    let mut out = String::with_capacity(1 << 20);
    while out.len() < 1_000_000 {
        match rng.below(10) {
            0..=4 => english(&mut rng, &mut out),
            5..=7 => code(&mut rng, &mut out),
            _ => cjk(&mut rng, &mut out),
        }
    }
    out
}

fn text_benches(c: &mut Criterion) {
    let text = mixed_text();
    let o200k = TokenCounter::new(CountMode::Exact(Encoding::O200kBase));
    let cl100k = TokenCounter::new(CountMode::Exact(Encoding::Cl100kBase));
    let estimate = TokenCounter::estimate();
    o200k.preload();
    cl100k.preload();
    eprintln!(
        "mixed text: {} bytes; o200k_base {} tokens, cl100k_base {} tokens, estimate {} tokens",
        text.len(),
        o200k.count_text(&text),
        cl100k.count_text(&text),
        estimate.count_text(&text),
    );

    let mut group = c.benchmark_group("text");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(8));
    group.bench_function("exact_o200k_base", |b| {
        b.iter(|| o200k.count_text(black_box(&text)))
    });
    group.bench_function("exact_cl100k_base", |b| {
        b.iter(|| cl100k.count_text(black_box(&text)))
    });
    group.bench_function("estimate", |b| {
        b.iter(|| estimate.count_text(black_box(&text)))
    });
    group.finish();
}

fn session_benches(c: &mut Criterion) {
    let messages = load_session(&support::input_file("200k"));
    let modes = [
        ("estimate", CountMode::Estimate),
        ("exact_o200k_base", CountMode::Exact(Encoding::O200kBase)),
    ];
    for (_, mode) in modes {
        let report = TokenCounter::new(mode).count_messages(&messages);
        eprintln!(
            "session 200k: {} messages, {} tokens ({mode:?})",
            messages.len(),
            report.total
        );
    }

    let mut group = c.benchmark_group("session_200k");
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(8));
    for (name, mode) in modes {
        group.bench_function(format!("cold_{name}"), |b| {
            b.iter_batched(
                || TokenCounter::new(mode),
                |counter| {
                    black_box(counter.count_messages(&messages));
                    counter // dropped outside the timing
                },
                BatchSize::PerIteration,
            )
        });
        let warm = TokenCounter::new(mode);
        warm.count_messages(&messages);
        group.bench_function(format!("memoised_{name}"), |b| {
            b.iter(|| warm.count_messages(black_box(&messages)))
        });
    }
    group.finish();
}

/// The `message` of every `"type":"message"` entry, in file order.
fn load_session(path: &Path) -> Vec<SharedMessage> {
    let text = std::fs::read_to_string(path).expect("read the bench input");
    text.lines()
        .filter_map(|line| {
            let mut entry: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
            if entry.get("type")?.as_str()? != "message" {
                return None;
            }
            let message: AgentMessage =
                serde_json::from_value(entry.get_mut("message")?.take()).expect("a message");
            Some(Arc::new(message))
        })
        .collect()
}

criterion_group!(benches, text_benches, session_benches);
criterion_main!(benches);
