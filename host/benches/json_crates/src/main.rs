//! Parses and writes one request body with each candidate crate, the variants interleaved
//! round by round, and prints each one's median. What serve does with a whole body: parse it
//! into `serde_json::Value` (a new conversation's request) and write values out (session
//! lines, the upstream's wire form), so the candidates are also measured through serde into
//! and out of `serde_json::Value`, the form a switch would keep.

use std::hint::black_box;
use std::time::Instant;

type Variant<'a> = (&'static str, Box<dyn Fn(&[u8]) -> f64 + 'a>);

fn timed(f: impl FnOnce()) -> f64 {
    let started = Instant::now();
    f();
    started.elapsed().as_secs_f64() * 1e3
}

/// How each parser meets a body nested 100,000 deep (an unauthenticated client can send one):
/// run in a child process each, since a stack overflow aborts the process.
const DEEP: usize = 100_000;

fn nesting_check(variant: &str) {
    let deep = format!("{}{}", "[".repeat(DEEP), "]".repeat(DEEP)).into_bytes();
    let outcome = match variant {
        "serde_json" => serde_json::from_slice::<serde_json::Value>(&deep)
            .err()
            .map(|e| e.to_string()),
        "sonic-rs-serde" => sonic_rs::from_slice::<serde_json::Value>(&deep)
            .err()
            .map(|e| e.to_string()),
        "sonic-rs-own" => sonic_rs::from_slice::<sonic_rs::Value>(&deep)
            .err()
            .map(|e| e.to_string()),
        "simd-json" => simd_json::to_owned_value(&mut deep.clone())
            .err()
            .map(|e| e.to_string()),
        other => panic!("no variant {other}"),
    };
    println!(
        "{}",
        outcome.map_or("parsed".to_owned(), |e| format!("refused: {e}"))
    );
}

fn nesting_checks() {
    let me = std::env::current_exe().expect("own path");
    println!("| parser, a body nested {DEEP} deep | outcome |");
    println!("|---|---|");
    for variant in ["serde_json", "sonic-rs-serde", "sonic-rs-own", "simd-json"] {
        let out = std::process::Command::new(&me)
            .args(["--nesting", variant])
            .output()
            .expect("runs itself");
        let said = String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap_or("")
            .to_owned();
        let outcome = if out.status.success() {
            said
        } else {
            format!("the process died ({})", out.status)
        };
        println!(
            "| {variant} | {} |",
            outcome.chars().take(120).collect::<String>()
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() == 3 && args[1] == "--nesting" {
        return nesting_check(&args[2]);
    }
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: rampart-json-crates-bench BODY.json");
        std::process::exit(2);
    };
    let body = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let value: serde_json::Value = serde_json::from_slice(&body).expect("the body is JSON");
    let written = serde_json::to_vec(&value).expect("a Value writes");
    let ours = sonic_rs::to_vec(&value).expect("a Value writes");
    println!(
        "{path}: {} bytes; sonic-rs writes the same bytes as serde_json: {}",
        body.len(),
        ours == written
    );
    let parsed_by_sonic: serde_json::Value = sonic_rs::from_slice(&body).expect("sonic-rs parses");
    println!(
        "sonic-rs parses into the same serde_json::Value: {}",
        parsed_by_sonic == value
    );

    nesting_checks();
    let value = &value;
    let variants: Vec<Variant> = vec![
        (
            "parse: serde_json into serde_json::Value",
            Box::new(|b: &[u8]| {
                timed(|| {
                    black_box(serde_json::from_slice::<serde_json::Value>(b).expect("parses"));
                })
            }),
        ),
        (
            "parse: sonic-rs into serde_json::Value (through serde)",
            Box::new(|b: &[u8]| {
                timed(|| {
                    black_box(sonic_rs::from_slice::<serde_json::Value>(b).expect("parses"));
                })
            }),
        ),
        (
            "parse: sonic-rs into its own Value",
            Box::new(|b: &[u8]| {
                timed(|| {
                    black_box(sonic_rs::from_slice::<sonic_rs::Value>(b).expect("parses"));
                })
            }),
        ),
        (
            "parse: simd-json into its OwnedValue (on a copy it may change)",
            Box::new(|b: &[u8]| {
                let mut copy = b.to_vec();
                timed(|| {
                    black_box(simd_json::to_owned_value(&mut copy).expect("parses"));
                })
            }),
        ),
        (
            "write: serde_json from serde_json::Value",
            Box::new(move |_: &[u8]| {
                timed(|| {
                    black_box(serde_json::to_vec(value).expect("writes"));
                })
            }),
        ),
        (
            "write: sonic-rs from serde_json::Value (through serde)",
            Box::new(move |_: &[u8]| {
                timed(|| {
                    black_box(sonic_rs::to_vec(value).expect("writes"));
                })
            }),
        ),
    ];
    let rounds = 60;
    let mut times = vec![Vec::with_capacity(rounds); variants.len()];
    for _ in 0..rounds {
        for (i, (_, run)) in variants.iter().enumerate() {
            times[i].push(run(&body));
        }
    }
    println!("| variant | median of {rounds} |");
    println!("|---|---:|");
    for ((name, _), mut t) in variants.iter().zip(times) {
        t.sort_by(f64::total_cmp);
        println!("| {name} | {:.2} ms |", t[t.len() / 2]);
    }
}
