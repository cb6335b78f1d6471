//! `rampart`: the binary. Argument parsing, logging set-up and the exit code; everything else
//! lives in the library.

use clap::Parser;
use rampart_host::cli::{Cli, init_logging, run};

fn main() {
    let cli = Cli::parse();
    init_logging(cli.global.log_format);
    let mut stdout = std::io::stdout().lock();
    let code = match run(cli, &mut stdout) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            2
        }
    };
    std::process::exit(code);
}
