//! `rampart`: the binary. Argument parsing, logging set-up and the exit code; everything else
//! lives in the library.

use clap::Parser;
use rampart_host::commands::{Cli, default_log_filter, init_logging_with, run};

/// jemalloc on Linux: chosen by measurement on serve's requests (less CPU per request, more
/// requests per second than glibc's malloc; `serve::allocator` has the figures and purges it
/// when the server is idle).
#[cfg(target_os = "linux")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    let cli = Cli::parse();
    init_logging_with(cli.global.log_format, default_log_filter(&cli.command));
    let mut stdout = std::io::stdout().lock();
    let code = match run(cli, &mut stdout) {
        Ok(code) => code,
        // A closed pipe (`rampart … | head`) is the reader's choice, not an error.
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            0
        }
        Err(e) => {
            // Errors name the user's files and keys: their control characters are shown,
            // never obeyed by the terminal.
            let message = rampart_host::prose::error_chain(&e);
            eprintln!("error: {}", rampart_host::terminal::escape_text(&message));
            2
        }
    };
    std::process::exit(code);
}
