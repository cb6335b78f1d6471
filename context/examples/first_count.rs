//! The cost of exact counting in a fresh process: how long the first count of each vocabulary
//! takes (loading it included), then the count and speed over whole files.
//!
//! ```sh
//! cargo run --release -p rampart-context --example first_count -- o200k_base [FILE…]
//! ```
//!
//! Why an example and not a bench: the first count happens once per process, and a bench
//! measures a loop in one process. BENCHMARKS.md ("Binary size and start-up") has the figures.

use std::time::Instant;

use rampart_context::tokens::{CountMode, TokenCounter};

fn main() {
    let started = Instant::now();
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "o200k_base".to_owned());
    let mode: CountMode = match name.parse() {
        Ok(mode) => mode,
        Err(e) => {
            eprintln!("{name}: {e}");
            std::process::exit(2);
        }
    };
    let counter = TokenCounter::new(mode);
    let tokens = counter.count_text("Hello, world! It's 42.");
    println!(
        "{name}: first count ({tokens} tokens) {:.1} ms after start",
        started.elapsed().as_secs_f64() * 1e3
    );
    for file in args {
        let text = match std::fs::read_to_string(&file) {
            Ok(text) => text,
            Err(e) => {
                eprintln!("{file}: {e}");
                std::process::exit(2);
            }
        };
        let at = Instant::now();
        let tokens = counter.count_text(&text);
        let took = at.elapsed().as_secs_f64();
        println!(
            "{file}: {tokens} tokens in {:.1} ms ({:.1} MB/s)",
            took * 1e3,
            text.len() as f64 / took / 1e6
        );
    }
}
